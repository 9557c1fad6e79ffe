//! Ring reduction: the vector is cut into p pieces; a reduce-scatter passes
//! partial pieces around the ring (p-1 steps, each rank sends to its right
//! neighbour and receives from its left), after which rank r holds piece
//! r+1 complete. Allreduce then passes the complete pieces around again
//! (allgather, p-1 steps); Reduce sends them straight to the root.
//!
//! Trace, Allreduce p = 3, pieces A B C: step 1: 0→1 A, 1→2 B, 2→0 C;
//! step 2: 0→1 C (C2∘C0), 1→2 A, 2→0 B: now 0 has B, 1 has C, 2 has A
//! complete; two more steps circulate them.
//!
//! Limitations: each piece is combined starting at a different rank, so the
//! operator must be commutative (the check refuses others); `2(p-1)` steps
//! make it a large-vector algorithm. Every rank sends and receives only
//! `(p-1)/p n` bytes per phase, on one link each: the best bandwidth use
//! for any p, power of two or not. Memory: one piece of scratch (plus a
//! vector at the non-root ranks of Reduce). Cost (Allreduce):
//! `2(p-1) α + 2 (p-1)/p n β + (p-1)/p n γ`; Reduce:
//! `p α + 2 (p-1)/p n β + (p-1)/p n γ` (the root takes in p-1 pieces).
//! Seed: the bandwidth-optimal baseline of seed 004's large-message case.

use crate::algos::Params;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::schedule::{BufId, Builder, Region, Schedule};

/// Only commutative operators: a piece's combination starts mid-ring.
pub(super) fn check(desc: &CallDesc) -> Result<(), &'static str> {
    if desc.commutative {
        Ok(())
    } else {
        Err("the operator is not commutative")
    }
}

/// Piece `k` of `count` elements cut into `p` (as even as can be).
fn piece(k: usize, p: usize, count: usize, unit: usize, base: Region) -> Region {
    let (lo, hi) = (k * count / p, (k + 1) * count / p);
    Region::new(base.buf, base.off + lo * unit, (hi - lo) * unit)
}

/// The reduce-scatter into `plane`; returns the piece this rank completes.
fn reduce_scatter(b: &mut Builder, desc: &CallDesc, input: Region, plane: Region, tmp_off: usize) -> usize {
    let (r, p, unit) = (desc.rank, desc.size, desc.unit);
    let count = desc.bytes / unit;
    let at = |k: usize, base: Region| piece(k, p, count, unit, base);
    let (left, right) = ((r + p - 1) % p, (r + 1) % p);
    for s in 0..p - 1 {
        let (out, into) = ((r + p - s) % p, (r + 2 * p - s - 1) % p);
        let send = if s == 0 { at(out, input) } else { at(out, plane) };
        let mine = at(into, input);
        let tmp = Region::new(BufId::Scratch, tmp_off, mine.len);
        b.send(right, send).recv(left, tmp);
        b.reduce_into(tmp, mine, at(into, plane)).end_step();
    }
    (r + 1) % p
}

pub(super) fn allreduce(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    let (r, p, n, unit) = (desc.rank, desc.size, desc.bytes, desc.unit);
    let count = n / unit;
    let mut b = Builder::new();
    b.reserve_scratch((count.div_ceil(p)) * unit);
    let recv = Region::new(BufId::Recv, 0, n);
    let input = if desc.in_place { recv } else { Region::new(BufId::Send, 0, n) };
    if p == 1 {
        b.copy(input, recv);
        return b.finish();
    }
    reduce_scatter(&mut b, desc, input, recv, 0);
    let at = |k: usize| piece(k, p, count, unit, recv);
    let (left, right) = ((r + p - 1) % p, (r + 1) % p);
    for s in 0..p - 1 {
        b.send(right, at((r + 1 + p - s) % p)).recv(left, at((r + p - s) % p)).end_step();
    }
    b.finish()
}

pub(super) fn reduce(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    let (p, n, unit, root) = (desc.size, desc.bytes, desc.unit, desc.root);
    let count = n / unit;
    let mut b = Builder::new();
    let tmp = count.div_ceil(p) * unit;
    let recv = Region::new(BufId::Recv, 0, n);
    let input = if desc.in_place && desc.is_root() { recv } else { Region::new(BufId::Send, 0, n) };
    // The root reduces into its receive buffer, the others into scratch.
    let (plane, tmp_off) = if desc.is_root() {
        b.reserve_scratch(tmp);
        (recv, 0)
    } else {
        b.reserve_scratch(n + tmp);
        (Region::new(BufId::Scratch, 0, n), n)
    };
    if p == 1 {
        b.copy(input, recv);
        return b.finish();
    }
    let done = reduce_scatter(&mut b, desc, input, plane, tmp_off);
    if desc.is_root() {
        for from in (0..p).filter(|&q| q != root) {
            b.recv(from, piece((from + 1) % p, p, count, unit, recv));
        }
    } else {
        b.send(root, piece(done, p, count, unit, plane));
    }
    b.finish()
}
