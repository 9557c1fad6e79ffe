//! Allreduce as a binomial reduce to rank 0 followed by a binomial broadcast
//! of the result from rank 0.
//!
//! Trace, p = 4: reduce: 1→0, 3→2, then 2→0; bcast: 0→2, 0→1, then 2→3.
//!
//! Limitations: twice the latency of recursive doubling; rank 0 combines
//! everything. Memory: one vector of scratch. Cost: 2⌈log2 p⌉ (α + nβ) +
//! ⌈log2 p⌉ nγ. Every rank receives rank 0's bytes, so the result is
//! bitwise identical everywhere. Seed: seed 000's "reduce up the tree, then
//! broadcast down the same tree", with K = 2.

use crate::algos::{bcast_binomial, reduce_binomial, Params};
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::schedule::{BufId, Builder, Region, Schedule};

pub(super) fn build(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    let n = desc.bytes;
    let mut b = Builder::new();
    b.reserve_scratch(n);
    let recv = Region::new(BufId::Recv, 0, n);
    let scratch = Region::new(BufId::Scratch, 0, n);
    let (input, work) =
        if desc.in_place { (recv, [scratch, recv]) } else { (Region::new(BufId::Send, 0, n), [recv, scratch]) };
    let result = reduce_binomial::append(&mut b, desc.rank, desc.size, 0, input, work);
    if desc.rank == 0 {
        b.copy(result, recv).end_step();
    }
    bcast_binomial::append(&mut b, desc.rank, desc.size, 0, recv);
    b.finish()
}
