//! Binomial-tree reduce, combining in rank order.
//!
//! Relative to the tree root, rank `r` receives the partial result of
//! `r + 2^j` for `2^j` = 1, 2, 4, ... below its lowest set bit, combines
//! each as `mine ∘ child` (the child covers higher ranks), then sends its
//! partial result to its parent. The accumulator alternates between two
//! work buffers so that no combination needs an extra copy, and a leaf sends
//! its input straight from the send buffer.
//!
//! Trace, p = 5, root 0: step 1: 1→0, 3→2; step 2: 2→0; step 3: 4→0
//! (each rank moves on as soon as its own children are in).
//!
//! Limitations: for a non-commutative operator the tree is rooted at rank 0,
//! where relative and absolute rank order agree, and rank 0 forwards the
//! result to the root (one extra message). Memory: one vector of scratch at
//! the root, two at inner nodes. Cost: ⌈log2 p⌉ (α + nβ + nγ).
//! Seed: the binomial (K = 2) case of seed 000's k-nomial trees.

use crate::algos::Params;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::pattern::{binomial_children, binomial_parent};
use crate::core::schedule::{BufId, Builder, Region, Schedule};

pub(super) fn build(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    let n = desc.bytes;
    let mut b = Builder::new();
    let recv = Region::new(BufId::Recv, 0, n);
    let scratch = |i: usize| Region::new(BufId::Scratch, i * n, n);
    let input = if desc.in_place && desc.is_root() { recv } else { Region::new(BufId::Send, 0, n) };
    // work[0] never aliases the input, so the first combination cannot
    // overwrite an operand it still reads.
    let work = if !desc.is_root() {
        b.reserve_scratch(2 * n);
        [scratch(0), scratch(1)]
    } else if desc.in_place {
        b.reserve_scratch(n);
        [scratch(0), recv]
    } else {
        b.reserve_scratch(n);
        [recv, scratch(0)]
    };
    let tree_root = if desc.commutative { desc.root } else { 0 };
    let result = append(&mut b, desc.rank, desc.size, tree_root, input, work);
    if tree_root != desc.root {
        if desc.rank == tree_root {
            b.send(desc.root, result).end_step();
        } else if desc.is_root() {
            b.recv(tree_root, recv).end_step();
        }
    } else if desc.is_root() {
        b.copy(result, recv).end_step();
    }
    b.finish()
}

/// Appends a binomial reduction of every rank's `input` towards `root`;
/// returns where this rank's partial result ends up (the full result at
/// `root`). `work` are two distinct writable regions, `work[0]` distinct
/// from `input`.
pub(super) fn append(
    b: &mut Builder,
    rank: usize,
    size: usize,
    root: usize,
    input: Region,
    work: [Region; 2],
) -> Region {
    let rel = (rank + size - root) % size;
    let abs = |r: usize| (r + root) % size;
    let mut acc = input;
    let mut spare = 0;
    // Children in ascending order: each one covers the next-higher block of
    // relative ranks, so `acc ∘ child` keeps rank order.
    let mut children: Vec<usize> = binomial_children(rel, size).collect();
    children.reverse();
    for child in children {
        let incoming = work[spare];
        b.recv(abs(child), incoming).reduce(acc, incoming).end_step();
        acc = incoming;
        spare ^= 1;
    }
    if let Some(parent) = binomial_parent(rel) {
        b.send(abs(parent), acc).end_step();
    }
    acc
}
