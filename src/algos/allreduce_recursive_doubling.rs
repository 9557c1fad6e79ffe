//! Recursive-doubling allreduce.
//!
//! With p' the largest power of two ≤ p and r = p - p', the first 2r ranks
//! pair up: each even rank sends its vector to the odd rank above it and
//! sits out. The remaining p' ranks exchange full vectors with the partner
//! at distance 1, 2, 4, ... in this reduced numbering and combine; finally
//! each odd rank of the first 2r hands the result back to its even partner.
//!
//! Trace, p = 3 (r = 1): 0→1 (1 holds 0∘1); 1↔2 (both hold 0∘1∘2); 1→0.
//!
//! Every combination is `lower ∘ higher` in rank order, on both sides of an
//! exchange, so the result is bitwise identical on every rank even for
//! floating point and is correct for non-commutative operators. The
//! accumulator alternates between the receive and scratch buffers instead
//! of copying after each combination.
//!
//! Limitations: every step moves the whole vector, so for large vectors a
//! reduce-scatter + allgather moves less. Memory: one vector of scratch.
//! Cost: ⌈log2 p'⌉ (α + nβ + nγ), plus 2 (α + nβ) + nγ if p is not a power
//! of two. Seed: the baseline that seed 004 improves on for large vectors.

use crate::algos::Params;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::pattern::pof2_floor;
use crate::core::schedule::{BufId, Builder, Region, Schedule};

pub(super) fn build(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    let (rank, n) = (desc.rank, desc.bytes);
    let mut b = Builder::new();
    b.reserve_scratch(n);
    let recv = Region::new(BufId::Recv, 0, n);
    if !desc.in_place {
        b.copy(Region::new(BufId::Send, 0, n), recv).end_step();
    }
    let mut acc = recv;
    let mut other = Region::new(BufId::Scratch, 0, n);
    let pof2 = pof2_floor(desc.size);
    let extra = desc.size - pof2;

    let new_rank = if rank < 2 * extra {
        if rank % 2 == 0 {
            b.send(rank + 1, acc).end_step();
            b.recv(rank + 1, recv).end_step();
            return b.finish();
        }
        b.recv(rank - 1, other).reduce(other, acc).end_step();
        rank / 2
    } else {
        rank - extra
    };

    let mut mask = 1;
    while mask < pof2 {
        let partner = new_rank ^ mask;
        let peer = if partner < extra { 2 * partner + 1 } else { partner + extra };
        b.send(peer, acc).recv(peer, other);
        if peer < rank {
            b.reduce(other, acc);
        } else {
            b.reduce(acc, other);
            std::mem::swap(&mut acc, &mut other);
        }
        b.end_step();
        mask <<= 1;
    }
    b.copy(acc, recv).end_step();
    if rank < 2 * extra {
        b.send(rank - 1, recv).end_step();
    }
    b.finish()
}
