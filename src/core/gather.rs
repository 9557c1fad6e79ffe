//! Binomial gather trees with irregular blocks (seed 001, Gatherv): which
//! ranks a node of the tree collects (its `src_list`), where each block
//! sits in the node's packed temporary buffer, and how a message to the
//! root is cut into message chains. Pure functions of the root's layout,
//! so the sender and the receiver of every message compute the same cut.

use std::ops::Range;

use super::call::GatherLayout;

/// Seed 001's Algorithm 1: the absolute ranks whose blocks relative rank
/// `rel` collects, i.e. its binomial subtree without itself. For every
/// mask = 1, 2, 4, ... below `rel`'s lowest set bit (all masks below
/// `size` at the root) the direct source is `rel | mask`, which brings the
/// `min(mask, size - src)` blocks of its own subtree. So the list is the
/// relative ranks `rel + 1 .. end` in order: children by increasing
/// subtree, each subtree in increasing relative rank. Computed once per
/// schedule and used both to size the temporary buffer and to place
/// every message in it. (The same set as
/// [`binomial_subtree`](super::pattern::binomial_subtree), which the
/// tests check.)
pub fn src_list(rel: usize, size: usize, root: usize) -> Vec<usize> {
    let mut list = Vec::new();
    let mut mask = 1usize;
    while mask < size && rel & mask == 0 {
        let src = rel | mask;
        if src < size {
            let blocks = mask.min(size - src);
            list.extend((0..blocks).map(|x| (src + x + root) % size));
        }
        mask <<= 1;
    }
    list
}

/// One block in a node's packed buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedBlock {
    /// Whose block (absolute rank).
    pub rank: usize,
    /// Offset in the packed buffer.
    pub at: usize,
    pub len: usize,
    /// Offset in the root's receive buffer.
    pub dest: usize,
}

/// The blocks of a node's subtree, back to back: its own first, then its
/// `src_list`. This is what an inner node's temporary buffer holds and
/// what it forwards; a child's subtree is a contiguous stretch of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packed {
    pub blocks: Vec<PackedBlock>,
    /// Sum of the blocks' lengths: the exact temporary buffer size.
    pub total: usize,
}

impl Packed {
    /// Packs the blocks of relative rank `rel`'s binomial subtree.
    pub fn subtree(rel: usize, size: usize, root: usize, layout: &GatherLayout) -> Packed {
        let own = (rel + root) % size;
        Packed::of(std::iter::once(own).chain(src_list(rel, size, root)), layout)
    }

    /// Packs the blocks of `ranks`, in that order.
    pub fn of(ranks: impl IntoIterator<Item = usize>, layout: &GatherLayout) -> Packed {
        let mut total = 0;
        let blocks = ranks
            .into_iter()
            .map(|rank| {
                let (dest, len) = layout.blocks[rank];
                let block = PackedBlock { rank, at: total, len, dest };
                total += len;
                block
            })
            .collect();
        Packed { blocks, total }
    }

    /// Where the stretch of relative ranks `sub` (a subtree inside this
    /// node's, which starts at relative rank `rel`) sits: (offset, bytes).
    pub fn stretch(&self, rel: usize, sub: Range<usize>) -> (usize, usize) {
        let blocks = &self.blocks[sub.start - rel..sub.end - rel];
        let at = blocks.first().map_or(0, |b| b.at);
        (at, blocks.iter().map(|b| b.len).sum())
    }
}

/// How the root receives a message chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainKind {
    /// The blocks' destinations are contiguous (or it is a single block):
    /// received straight into the root's receive buffer, no copy.
    Direct,
    /// Not contiguous: received once into the root's temporary buffer,
    /// then each block copied to its place ("receive once, copy each").
    Scatter,
}

/// A run of consecutive blocks of a packed buffer sent as one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    pub kind: ChainKind,
    /// Indices into [`Packed::blocks`] (empty blocks inside are harmless:
    /// they have no bytes).
    pub blocks: Range<usize>,
    /// Bytes `at .. at + len` of the sender's packed buffer.
    pub at: usize,
    pub len: usize,
    /// Where a `Direct` chain starts in the root's receive buffer.
    pub dest: usize,
}

/// Cuts what a child sends to the root into message chains (seed 001,
/// section 4), over the non-empty blocks in packing order. A chain starts
/// at a block; the next block decides its kind: contiguous destinations
/// (`dest[cur] == dest[pre] + len[pre]`) make it `Direct`, others
/// `Scatter`. Then each block `cur` after `pre`:
/// - contiguous, chain `Direct`: extends it;
/// - contiguous, chain `Scatter`: the chain without `pre` is sent, and
///   `pre, cur` start a `Direct` chain (contiguous blocks are received
///   directly as much as possible);
/// - not contiguous, chain `Scatter`: extends it (fewer messages);
/// - not contiguous, chain `Direct`: the chain is sent and `cur` starts a
///   new one.
///
/// The last chain is sent at the end. A chain of one block is `Direct` (it
/// needs no copy), a refinement of the seed, where the remains of a
/// scattered chain stay scattered.
pub fn message_chains(packed: &Packed) -> Vec<Chain> {
    let blocks = &packed.blocks;
    let mut chains = Vec::new();
    let flush = |chains: &mut Vec<Chain>, run: &[usize], kind: Option<ChainKind>| {
        let (Some(&first), Some(&last)) = (run.first(), run.last()) else { return };
        let kind = if run.len() == 1 { ChainKind::Direct } else { kind.unwrap_or(ChainKind::Direct) };
        let at = blocks[first].at;
        chains.push(Chain {
            kind,
            blocks: first..last + 1,
            at,
            len: blocks[last].at + blocks[last].len - at,
            dest: blocks[first].dest,
        });
    };
    let mut run: Vec<usize> = Vec::new();
    let mut kind: Option<ChainKind> = None;
    for (i, block) in blocks.iter().enumerate().filter(|(_, b)| b.len > 0) {
        let Some(&pre) = run.last() else {
            run.push(i);
            continue;
        };
        let contiguous = blocks[pre].dest + blocks[pre].len == block.dest;
        match (contiguous, kind) {
            (true, None | Some(ChainKind::Direct)) => {
                run.push(i);
                kind = Some(ChainKind::Direct);
            }
            (true, Some(ChainKind::Scatter)) => {
                run.pop();
                flush(&mut chains, &run, Some(ChainKind::Scatter));
                run = vec![pre, i];
                kind = Some(ChainKind::Direct);
            }
            (false, None | Some(ChainKind::Scatter)) => {
                run.push(i);
                kind = Some(ChainKind::Scatter);
            }
            (false, Some(ChainKind::Direct)) => {
                flush(&mut chains, &run, kind);
                run = vec![i];
                kind = None;
            }
        }
    }
    flush(&mut chains, &run, kind);
    chains
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::pattern::{binomial_children, binomial_parent, binomial_subtree as subtree};

    #[test]
    fn src_list_is_the_subtree_in_relative_order() {
        for size in 1..200 {
            for root in [0, size / 2, size - 1] {
                for rel in 0..size {
                    let want: Vec<usize> = subtree(rel, size).skip(1).map(|r| (r + root) % size).collect();
                    assert_eq!(src_list(rel, size, root), want, "size {size} root {root} rel {rel}");
                }
            }
        }
        // Seed 001, figure 3: 8 ranks, root 0.
        assert_eq!(src_list(0, 8, 0), vec![1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(src_list(4, 8, 0), vec![5, 6, 7]);
        assert_eq!(src_list(2, 8, 0), vec![3]);
        assert_eq!(src_list(1, 8, 0), Vec::<usize>::new());
        // Root 5 of 6: relative 2 is absolute 1, its subtree relative 2, 3.
        assert_eq!(src_list(2, 6, 5), vec![2]);
    }

    #[test]
    fn children_occupy_consecutive_stretches_of_the_packed_buffer() {
        let size = 13;
        let layout = GatherLayout { blocks: (0..size).map(|r| (100 - 7 * r, r % 4)).collect() };
        for rel in 0..size {
            let packed = Packed::subtree(rel, size, 3, &layout);
            assert_eq!(packed.total, subtree(rel, size).map(|r| layout.blocks[(r + 3) % size].1).sum::<usize>());
            let own = layout.blocks[(rel + 3) % size].1;
            let mut at = own;
            let mut kids: Vec<usize> = binomial_children(rel, size).collect();
            kids.reverse();
            for child in kids {
                assert_eq!(binomial_parent(child), Some(rel));
                let (off, len) = packed.stretch(rel, subtree(child, size));
                assert_eq!(off, at, "rel {rel} child {child}");
                assert_eq!(len, Packed::subtree(child, size, 3, &layout).total);
                at += len;
            }
            assert_eq!(at, packed.total);
        }
    }

    fn chains_of(blocks: &[(usize, usize)]) -> Vec<(ChainKind, Range<usize>, usize, usize)> {
        let layout = GatherLayout { blocks: blocks.to_vec() };
        let packed = Packed::of(0..blocks.len(), &layout);
        message_chains(&packed).into_iter().map(|c| (c.kind, c.blocks, c.at, c.len)).collect()
    }

    use ChainKind::{Direct, Scatter};

    #[test]
    fn chains_follow_the_seed() {
        // Contiguous in packing order: one direct chain.
        assert_eq!(chains_of(&[(0, 2), (2, 3), (5, 1)]), vec![(Direct, 0..3, 0, 6)]);
        // Nothing contiguous: one scattered chain.
        assert_eq!(chains_of(&[(10, 2), (0, 2), (20, 2)]), vec![(Scatter, 0..3, 0, 6)]);
        // A B contiguous, then C alone, then D E contiguous: the scattered
        // chain [C, D] gives D to the direct chain [D, E]; C alone is direct.
        assert_eq!(
            chains_of(&[(0, 2), (2, 2), (10, 2), (20, 2), (22, 2)]),
            vec![(Direct, 0..2, 0, 4), (Direct, 2..3, 4, 2), (Direct, 3..5, 6, 4)]
        );
        // A X Y scattered, then Z contiguous with Y: [A, X] scattered, [Y, Z] direct.
        assert_eq!(chains_of(&[(0, 2), (10, 2), (30, 2), (32, 2)]), vec![(Scatter, 0..2, 0, 4), (Direct, 2..4, 4, 4)]);
        // A direct chain ends at the first block that does not follow:
        // [A B] direct, then [C D] scattered.
        assert_eq!(chains_of(&[(0, 1), (1, 1), (9, 1), (5, 1)]), vec![(Direct, 0..2, 0, 2), (Scatter, 2..4, 2, 2)]);
        // Empty blocks neither join nor break chains, wherever they point.
        assert_eq!(chains_of(&[(0, 2), (50, 0), (2, 2), (0, 0)]), vec![(Direct, 0..3, 0, 4)]);
        assert_eq!(chains_of(&[(0, 0), (4, 0)]), vec![]);
        assert_eq!(chains_of(&[]), vec![]);
        assert_eq!(chains_of(&[(0, 0), (7, 3)]), vec![(Direct, 1..2, 0, 3)]);
    }

    #[test]
    fn chains_partition_the_packed_bytes() {
        let mut seed = 1u64;
        let mut rand = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for _ in 0..2000 {
            let n = rand(12);
            // Blocks placed in a shuffled order, sometimes back to back.
            let lens: Vec<usize> = (0..n).map(|_| rand(4)).collect();
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                if rand(2) == 0 {
                    order.swap(i, rand(i + 1));
                }
            }
            let mut blocks = vec![(0, 0); n];
            let mut at = 0;
            for r in order {
                blocks[r] = (at, lens[r]);
                at += lens[r] + rand(2);
            }
            let layout = GatherLayout { blocks: blocks.clone() };
            let packed = Packed::of(0..n, &layout);
            let chains = message_chains(&packed);
            // Consecutive, covering every byte once, in order.
            let mut next = 0;
            for c in &chains {
                assert_eq!(c.at, next, "{blocks:?}");
                assert!(c.len > 0);
                next += c.len;
                let inside: Vec<&PackedBlock> = packed.blocks[c.blocks.clone()].iter().filter(|b| b.len > 0).collect();
                assert_eq!(inside.iter().map(|b| b.len).sum::<usize>(), c.len);
                let contiguous = inside.windows(2).all(|w| w[0].dest + w[0].len == w[1].dest);
                match c.kind {
                    Direct => assert!(contiguous && c.dest == inside[0].dest, "{blocks:?}"),
                    Scatter => assert!(inside.len() >= 2, "{blocks:?}"),
                }
            }
            assert_eq!(next, packed.total);
            // Consecutive direct chains could not have been one.
            for w in chains.windows(2) {
                if w[0].kind == Direct && w[1].kind == Direct {
                    let last = packed.blocks[w[0].blocks.clone()].iter().rfind(|b| b.len > 0).unwrap();
                    assert_ne!(last.dest + last.len, w[1].dest, "{blocks:?}");
                }
            }
        }
    }
}
