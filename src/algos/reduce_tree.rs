//! Reduction up a k-nomial or k-ary tree (seed 000), and Allreduce as that
//! reduction followed by a broadcast down the same tree.
//!
//! Event-driven, as the seed's triggered offload is: a leaf sends at once;
//! an inner rank posts the receives of all its children together and fires
//! (combines, then sends to its parent) as soon as all of them are in;
//! there is no global step barrier. Children are combined in ascending
//! rank order after this rank's own data: the k-nomial tree's subtrees are
//! contiguous rank ranges, and the k-ary tree used here is the balanced
//! one whose subtrees are ranges too ([`kary_ranges`]), so the result is in
//! rank order and exact for non-commutative operators. With a commutative
//! operator the tree is rooted at the Reduce root; otherwise at rank 0,
//! which forwards the result.
//!
//! Trace, k-nomial K = 4, p = 8, root 0: step 1: leaves 1, 2, 3, 5, 6, 7
//! send; 4 receives 5, 6, 7 and fires: 4 → 0; 0 receives 1, 2, 3, 4 and
//! combines 0∘1∘2∘3∘(4∘5∘6∘7). Allreduce then sends 0 → 1, 2, 3, 4 and
//! 4 → 5, 6, 7.
//!
//! Limitations: every hop moves the whole vector and an inner rank
//! combines all its children: a small-message algorithm (the seed's target
//! is 48 bytes). Memory: one vector of scratch per child in flight; to
//! bound it, children are received in batches of at most
//! [`SCRATCH_BUDGET`] bytes. Cost (Reduce): `h (α + c n β + c n γ)` for
//! height `h ≈ log_K p` and `c` children per rank on the critical path
//! (K-1 per level for k-nomial, K for k-ary); Allreduce adds
//! `h (α + c n β)` for the broadcast. Seed: 000 (k-nomial and k-ary trees,
//! K = 2, 4, 8).

use crate::algos::{bcast_tree, Params};
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::pattern::{kary_ranges, knomial_children, knomial_parent};
use crate::core::schedule::{BufId, Builder, Region, Schedule};

/// Scratch for children's vectors in flight at one rank: 32 MiB.
pub(super) const SCRATCH_BUDGET: usize = 32 << 20;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Shape {
    Knomial(usize),
    Kary(usize),
}

impl Shape {
    /// `rel`'s parent and children (ascending) among `size` relative ranks.
    fn links(self, rel: usize, size: usize) -> (Option<usize>, Vec<usize>) {
        match self {
            Shape::Knomial(k) => {
                let mut children: Vec<usize> = knomial_children(rel, size, k).collect();
                children.sort_unstable();
                (knomial_parent(rel, k), children)
            }
            Shape::Kary(k) => kary_ranges(rel, size, k),
        }
    }
}

pub(super) fn knomial_reduce(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
    reduce(desc, Shape::Knomial(params[0] as usize), SCRATCH_BUDGET)
}

pub(super) fn kary_reduce(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
    reduce(desc, Shape::Kary(params[0] as usize), SCRATCH_BUDGET)
}

pub(super) fn knomial_allreduce(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
    allreduce(desc, Shape::Knomial(params[0] as usize), SCRATCH_BUDGET)
}

pub(super) fn kary_allreduce(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
    allreduce(desc, Shape::Kary(params[0] as usize), SCRATCH_BUDGET)
}

/// `acc ∘ child`, into `target` if given (else into `child`'s place);
/// returns where the result is.
fn combine(b: &mut Builder, acc: Region, child: Region, target: Option<Region>) -> Region {
    match target {
        Some(t) if !t.overlaps(&acc) && !t.overlaps(&child) => {
            b.reduce_into(acc, child, t);
            t
        }
        Some(t) => {
            b.reduce(acc, child).copy(child, t);
            t
        }
        None => {
            b.reduce(acc, child);
            child
        }
    }
}

/// Appends the reduction of every rank's `input` up the tree whose root is
/// absolute rank `base` (relative ranks are counted from it). The final
/// combination of a rank goes to `out` if given (the tree root's full
/// result, or any rank's partial one); otherwise a partial result stays in
/// scratch. Children are received in batches of at most `budget` bytes.
/// Returns where this rank's result is.
fn append_reduce(
    b: &mut Builder,
    desc: &CallDesc,
    (shape, budget): (Shape, usize),
    base: usize,
    input: Region,
    out: Option<Region>,
) -> Region {
    let (size, n) = (desc.size, input.len);
    let rel = (desc.rank + size - base) % size;
    let abs = |r: usize| (r + base) % size;
    let (parent, children) = shape.links(rel, size);
    let batch = (budget / n.max(1)).clamp(1, children.len().max(1));
    let slot = |i: usize| Region::new(BufId::Scratch, i * n, n);
    // Between batches the partial result waits in a slot of its own.
    let batches = children.len().div_ceil(batch);
    let held = slot(batch);
    b.reserve_scratch(if batches > 1 { batch + 1 } else { batch } * n);
    let mut acc = input;
    for (index, group) in children.chunks(batch).enumerate() {
        for (i, &child) in group.iter().enumerate() {
            b.recv(abs(child), slot(i));
        }
        for i in 0..group.len() {
            let target = match (i + 1 == group.len(), index + 1 == batches) {
                (true, true) => out,
                (true, false) => Some(held),
                _ => None,
            };
            acc = combine(b, acc, slot(i), target);
        }
        b.end_step();
    }
    if parent.is_none() {
        if let Some(dst) = out.filter(|&d| d != acc) {
            b.copy(acc, dst).end_step();
            acc = dst;
        }
    }
    if let Some(parent) = parent {
        b.send(abs(parent), acc).end_step();
    }
    acc
}

pub(crate) fn reduce(desc: &CallDesc, shape: Shape, budget: usize) -> Schedule {
    let n = desc.bytes;
    let mut b = Builder::new();
    let recv = Region::new(BufId::Recv, 0, n);
    let input = if desc.in_place && desc.is_root() { recv } else { Region::new(BufId::Send, 0, n) };
    // Rooted at the root if the order of combination is free, else at 0.
    let base = if desc.commutative { desc.root } else { 0 };
    let at_tree_root = desc.rank == base;
    let out = (at_tree_root && desc.is_root()).then_some(recv);
    let result = append_reduce(&mut b, desc, (shape, budget), base, input, out);
    if base != desc.root {
        if at_tree_root {
            b.send(desc.root, result).end_step();
        } else if desc.is_root() {
            b.recv(base, recv).end_step();
        }
    }
    b.finish()
}

pub(crate) fn allreduce(desc: &CallDesc, shape: Shape, budget: usize) -> Schedule {
    let n = desc.bytes;
    let mut b = Builder::new();
    let recv = Region::new(BufId::Recv, 0, n);
    let input = if desc.in_place { recv } else { Region::new(BufId::Send, 0, n) };
    // Combine into the receive buffer, free until the broadcast fills it.
    append_reduce(&mut b, desc, (shape, budget), 0, input, Some(recv));
    let (parent, children) = shape.links(desc.rank, desc.size);
    bcast_tree::append(&mut b, parent, &children, recv, 0);
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::call::Topo;
    use crate::core::types::Coll;

    fn desc(rank: usize, size: usize, bytes: usize) -> CallDesc {
        CallDesc {
            coll: Coll::Reduce,
            rank,
            size,
            root: 0,
            bytes,
            unit: 8,
            commutative: true,
            in_place: false,
            topo: Topo::default(),
        }
    }

    #[test]
    fn inner_ranks_receive_all_children_in_one_step() {
        // K = 4, p = 16: the root has children 1, 2, 3, 4, 8, 12.
        let s = reduce(&desc(0, 16, 8), Shape::Knomial(4), SCRATCH_BUDGET);
        assert_eq!(s.steps[0].recvs.len(), 6);
        assert_eq!(s.scratch_bytes, 6 * 8);
        let s = reduce(&desc(4, 16, 8), Shape::Knomial(4), SCRATCH_BUDGET);
        assert_eq!((s.steps[0].recvs.len(), s.steps[1].sends.len()), (3, 1));
    }

    #[test]
    fn large_vectors_are_received_in_batches() {
        let n = SCRATCH_BUDGET / 2;
        let s = reduce(&desc(0, 9, n), Shape::Kary(8), SCRATCH_BUDGET);
        assert_eq!(s.scratch_bytes, 3 * n);
        assert_eq!(s.steps.iter().filter(|st| !st.recvs.is_empty()).count(), 4);
    }
}
