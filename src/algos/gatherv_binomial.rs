//! Binomial-tree Gatherv with exact temporary buffers and message chains
//! (seed 001).
//!
//! Every rank knows the root's layout (registered `layout_everywhere`: the
//! library broadcasts it in the conservative mode, or every rank passes
//! the same recvcounts/displs in the aggressive mode). Over ranks relative
//! to the root, the binomial subtree of r is r .. r + lowbit(r): a rank's
//! `src_list` (see [`crate::core::gather`]), computed once per schedule.
//! - A leaf sends its block straight from its send buffer.
//! - An inner rank packs its subtree's blocks back to back in scratch:
//!   its own block (copied from the send buffer), then each child's whole
//!   subtree buffer, received as one message at its offset (all children
//!   at once); then it forwards the packed buffer.
//! - To a parent other than the root that is one message. To the root it
//!   is cut into message chains: runs whose destinations in the root's
//!   receive buffer are contiguous go straight there; the rest are
//!   received once into the root's scratch and copied block by block. Both
//!   sides compute the same cut from the layout.
//! - The root copies its own block into place (not under MPI_IN_PLACE)
//!   and takes its children one per step in the order their subtrees
//!   complete (smallest first), copying each child's scattered chains out
//!   right after receiving them, so receiving and copying alternate.
//!
//! Trace, p = 8, root 0, blocks in rank order back to back: step 1: 1→0
//! (into place), 3→2, 5→4, 7→6; step 2: 2→0 [2 3] (one direct chain),
//! 6→4 [6 7]; step 3: 4→0 [4 5 6 7]. With blocks in reverse rank order
//! instead, 2's and 4's messages are scattered chains: the root receives
//! them into scratch (4 blocks at most at a time) and copies 2 + 4 blocks.
//!
//! Limitations: a rank's block length is taken from the layout (MPI
//! requires it to match the rank's send signature; the root copies at
//! most its own send bytes). In the aggressive mode, ranks passing
//! layouts that differ from the root's build mismatched schedules: that
//! mode is the user's promise that they do not. Memory, exactly as the
//! seed sizes it: an inner rank the sum of its subtree's blocks; the root
//! only what cannot go straight into its receive buffer, and since it
//! copies each child's scattered chains out before taking the next child,
//! only the largest such amount from one child (the seed: their sum);
//! leaves nothing. The root talks to ⌈log2 p⌉ peers instead of p - 1.
//! Cost, N = Σ n_i: ⌈log2 p⌉ α + N β for balanced blocks — the root
//! receives every byte once, from ⌈log2 p⌉ children, while the inner ranks
//! forward their subtrees concurrently — plus α per extra message chain
//! and the root's copies of scattered bytes; the linear algorithm costs
//! (p - 1) α + N β, so the tree wins where α dominates (small blocks,
//! many ranks). Inner ranks copy their own block once.
//! Seed: 001 (Sunway binomial Gatherv, src_list, on-demand temporary
//! buffers, message chains).

use crate::algos::Params;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::gather::{message_chains, ChainKind, Packed};
use crate::core::pattern::{binomial_children, binomial_parent, binomial_subtree};
use crate::core::schedule::{BufId, Builder, Region, Schedule};

pub(super) fn build(desc: &CallDesc, _: &Params, layout: &GatherLayout) -> Schedule {
    assert_eq!(layout.blocks.len(), desc.size, "binomial Gatherv needs the root's layout on every rank");
    let mut b = Builder::new();
    if desc.is_root() {
        root(&mut b, desc, layout);
    } else {
        non_root(&mut b, desc, layout);
    }
    b.finish()
}

/// The root: own block into place, then each child's chains, smallest
/// subtree first, one child per step.
fn root(b: &mut Builder, desc: &CallDesc, layout: &GatherLayout) {
    let size = desc.size;
    let (dest, len) = layout.blocks[desc.rank];
    let mut own_copy = (!desc.in_place).then(|| {
        let len = desc.bytes.min(len);
        (Region::new(BufId::Send, 0, len), Region::new(BufId::Recv, dest, len))
    });
    let mut scratch = 0;
    let mut children: Vec<usize> = binomial_children(0, size).collect();
    children.reverse();
    for child in children {
        let peer = desc.abs_rank(child);
        let packed = Packed::subtree(child, size, desc.root, layout);
        let mut at = 0;
        for chain in message_chains(&packed) {
            match chain.kind {
                ChainKind::Direct => {
                    b.recv(peer, Region::new(BufId::Recv, chain.dest, chain.len));
                }
                ChainKind::Scatter => {
                    b.recv(peer, Region::new(BufId::Scratch, at, chain.len));
                    for block in &packed.blocks[chain.blocks] {
                        let from = Region::new(BufId::Scratch, at + block.at - chain.at, block.len);
                        b.copy(from, Region::new(BufId::Recv, block.dest, block.len));
                    }
                    at += chain.len;
                }
            }
        }
        scratch = scratch.max(at);
        if let Some((from, to)) = own_copy.take() {
            b.copy(from, to);
        }
        b.end_step();
    }
    if let Some((from, to)) = own_copy {
        b.copy(from, to).end_step();
    }
    b.reserve_scratch(scratch);
}

/// A leaf or inner rank: collect the subtree (inner), then forward it.
fn non_root(b: &mut Builder, desc: &CallDesc, layout: &GatherLayout) {
    let (size, rel) = (desc.size, desc.rel_rank());
    let packed = Packed::subtree(rel, size, desc.root, layout);
    let own = packed.blocks[0].len;
    let buf = if binomial_children(rel, size).next().is_none() {
        BufId::Send
    } else {
        b.reserve_scratch(packed.total);
        for child in binomial_children(rel, size) {
            let (at, len) = packed.stretch(rel, binomial_subtree(child, size));
            b.recv(desc.abs_rank(child), Region::new(BufId::Scratch, at, len));
        }
        b.copy(Region::new(BufId::Send, 0, own), Region::new(BufId::Scratch, 0, own)).end_step();
        BufId::Scratch
    };
    let parent = binomial_parent(rel).expect("a non-root rank has a parent");
    if parent == 0 {
        for chain in message_chains(&packed) {
            b.send(desc.root, Region::new(buf, chain.at, chain.len));
        }
    } else {
        b.send(desc.abs_rank(parent), Region::new(buf, 0, packed.total));
    }
    b.end_step();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::call::Topo;
    use crate::core::gen::random_layout;
    use crate::core::schedule::Local;
    use crate::core::types::Coll;

    fn scheds(size: usize, root: usize, in_place: bool, layout: &GatherLayout) -> Vec<Schedule> {
        (0..size)
            .map(|rank| {
                let desc = CallDesc {
                    coll: Coll::Gatherv,
                    rank,
                    size,
                    root,
                    bytes: layout.blocks[rank].1,
                    unit: 1,
                    commutative: true,
                    in_place: in_place && rank == root,
                    topo: Topo::default(),
                };
                build(&desc, &Params::default(), layout)
            })
            .collect()
    }

    fn rank_order(size: usize, len: usize) -> GatherLayout {
        GatherLayout { blocks: (0..size).map(|r| (r * len, len)).collect() }
    }

    fn peers(s: &Schedule) -> Vec<usize> {
        let mut v: Vec<usize> =
            s.steps.iter().flat_map(|st| st.recvs.iter().chain(&st.sends)).map(|x| x.peer).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn root_talks_to_log_p_peers() {
        for size in 1..300 {
            let root = size / 3;
            let s = &scheds(size, root, false, &rank_order(size, 3))[root];
            let log = (size as f64).log2().ceil() as usize;
            assert_eq!(peers(s).len(), log, "p {size}");
        }
    }

    #[test]
    fn contiguous_rank_order_goes_straight_into_place() {
        // Root 0, blocks back to back in rank order: every child's subtree
        // is one direct chain: no scratch, no copies besides the root's
        // own block, one message per child.
        for size in [2, 3, 7, 8, 13, 64, 100] {
            let layout = rank_order(size, 5);
            let all = scheds(size, 0, false, &layout);
            let root = &all[0];
            assert_eq!(root.scratch_bytes, 0, "p {size}");
            let recvs: Vec<_> = root.steps.iter().flat_map(|st| &st.recvs).collect();
            assert!(recvs.iter().all(|x| x.region.buf == BufId::Recv), "p {size}");
            assert_eq!(recvs.len(), (size as f64).log2().ceil() as usize);
            let locals: Vec<&Local> = root.steps.iter().flat_map(|st| &st.locals).collect();
            assert_eq!(locals.len(), 1, "only the root's own block is copied");
            // The same in place: nothing at all is copied.
            let root = &scheds(size, 0, true, &layout)[0];
            assert!(root.steps.iter().all(|st| st.locals.is_empty()));
            // Leaves use no scratch; inner ranks exactly their subtree.
            for (rank, s) in all.iter().enumerate().skip(1) {
                let sub = binomial_subtree(rank, size);
                let want = if sub.len() == 1 { 0 } else { 5 * sub.len() };
                assert_eq!(s.scratch_bytes, want, "p {size} rank {rank}");
            }
        }
    }

    #[test]
    fn scratch_is_exact() {
        // Inner ranks: the sum of their subtree's blocks. Root: the most
        // any one child sends it in scattered chains.
        for seed in 0..40 {
            let size = 5 + seed as usize * 7;
            let layout = random_layout(size, 9, seed);
            let root = seed as usize % size;
            let all = scheds(size, root, false, &layout);
            for (rank, s) in all.iter().enumerate() {
                let rel = (rank + size - root) % size;
                let sub = binomial_subtree(rel, size);
                let want = if rank == root {
                    binomial_children(0, size)
                        .map(|c| {
                            let packed = Packed::subtree(c, size, root, &layout);
                            message_chains(&packed)
                                .iter()
                                .filter(|ch| ch.kind == ChainKind::Scatter)
                                .map(|ch| ch.len)
                                .sum()
                        })
                        .max()
                        .unwrap_or(0)
                } else if sub.len() == 1 {
                    0
                } else {
                    sub.map(|r| layout.blocks[(r + root) % size].1).sum()
                };
                assert_eq!(s.scratch_bytes, want, "p {size} rank {rank}");
            }
        }
    }
}
