//! Binomial-tree broadcast.
//!
//! Relative to the root, rank `r` receives the whole message from `r` with
//! its lowest set bit cleared, then sends it to `r + 2^j` for every `2^j`
//! below that bit, largest subtree first.
//!
//! Trace, p = 6, root 0: step 1: 0→4, 0→2, 0→1; step 2 (as each arrives):
//! 4→5, 2→3.
//!
//! Limitations: every rank moves the whole message, so for large messages a
//! scatter + allgather moves less per link. Memory: none beyond the buffer.
//! Cost: ⌈log2 p⌉ (α + nβ) on the critical path.
//! Seed: the binomial baseline that seeds 000 and 002 generalise.

use crate::algos::Params;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::pattern::{binomial_children, binomial_parent};
use crate::core::schedule::{BufId, Builder, Region, Schedule};

pub(super) fn build(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    let mut b = Builder::new();
    let data = Region::new(BufId::Recv, 0, desc.bytes);
    append(&mut b, desc.rank, desc.size, desc.root, data);
    b.finish()
}

/// Appends a binomial broadcast of `data` from `root` to every rank.
pub(super) fn append(b: &mut Builder, rank: usize, size: usize, root: usize, data: Region) {
    let rel = (rank + size - root) % size;
    let abs = |r: usize| (r + root) % size;
    if let Some(parent) = binomial_parent(rel) {
        b.recv(abs(parent), data).end_step();
    }
    for child in binomial_children(rel, size) {
        b.send(abs(child), data);
    }
    b.end_step();
}
