//! Ordered reduction, PCOLL_REPRODUCIBLE's point-to-point algorithm: every
//! element is combined as `x0 ∘ (x1 ∘ (... ∘ x(p-1)))`, the canonical order
//! of the node algorithms ([`crate::algos::node::reduction::fold`]), so the
//! result is bitwise the same whatever the layout of ranks on nodes and
//! however the vector is cut.
//!
//! Reduce-scatter by direct exchange: the vector is cut into p slices and
//! rank i owns slice i. In one step every rank sends slice j of its input
//! to rank j and receives slice i of every other rank, then folds the p
//! slices from the last rank down: `x(p-2) ∘ x(p-1)` first, then each lower
//! rank's slice on the left, the same kernel calls, operand for operand, as
//! the node layer's fold. Allreduce then sends the result slice to every
//! rank (allgather by direct exchange); Reduce sends it to the root.
//!
//! Trace, Allreduce p = 3, vector ABC, rank 0: step 1 sends B0 to 1 and C0
//! to 2, receives A1 and A2, computes A = A0 ∘ (A1 ∘ A2); step 2 sends A
//! to 1 and 2, receives B from 1 and C from 2.
//!
//! Order: rank order, exact for non-commutative operators; every rank of
//! an Allreduce ends with copies of the same slices, bitwise identical.
//!
//! Limitations: each rank sends p-1 messages per phase, so latency grows
//! linearly with p: the price of one order for every layout (a tree or
//! recursive doubling associates by rank pairs instead). Memory: p-1
//! slices of scratch (one more under MPI_IN_PLACE, where the own slice is
//! set aside before the result overwrites it, and at the non-root ranks of
//! Reduce, for the result slice). Cost, single port (the p-1 messages of a
//! step follow one another): Allreduce `2(p-1) α + 2 (p-1)/p n β +
//! (p-1)/p n γ`; Reduce the same at the root, which takes in p-1 result
//! slices; `(p-1) α + (p-1)/p n β + (p-1)/p n γ` plus one slice elsewhere.
//! Seed: none (issue 7's reproducible mode), with seed 003's partitioning
//! (rank i combines slice i) over point-to-point messages.

use crate::algos::Params;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::schedule::{BufId, Builder, Region, Schedule};

/// Slice `k` of `base`, cut into `p` slices of whole elements.
fn slice(k: usize, desc: &CallDesc, base: Region) -> Region {
    let (p, unit) = (desc.size, desc.unit);
    let count = desc.bytes / unit;
    let (lo, hi) = (k * count / p, (k + 1) * count / p);
    Region::new(base.buf, base.off + lo * unit, (hi - lo) * unit)
}

/// Step 1: this rank's slice of every rank's input, folded in the
/// canonical order into `result` (Allreduce, the Reduce root: the slice of
/// the receive buffer; elsewhere scratch after the slices). Scratch holds
/// one slot per rank, of this rank's slice length.
fn reduce_scatter(b: &mut Builder, desc: &CallDesc, input: Region, result: Region) {
    let (me, p) = (desc.rank, desc.size);
    let len = result.len;
    let slot = |r: usize| Region::new(BufId::Scratch, r * len, len);
    for j in (0..p).filter(|&j| j != me) {
        b.send(j, slice(j, desc, input));
        b.recv(j, slot(j));
    }
    // Under MPI_IN_PLACE the own slice is also where the result goes.
    let own = slice(me, desc, input);
    let own = if own.overlaps(&result) {
        b.copy(own, slot(me));
        slot(me)
    } else {
        own
    };
    let part = |r: usize| if r == me { own } else { slot(r) };
    if p == 1 {
        b.copy(part(0), result);
    } else {
        b.reduce_into(part(p - 2), part(p - 1), result);
        for r in (0..p - 2).rev() {
            b.reduce(part(r), result);
        }
    }
    b.end_step();
}

pub(super) fn allreduce(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    let (me, p, n) = (desc.rank, desc.size, desc.bytes);
    let recv = Region::new(BufId::Recv, 0, n);
    let input = if desc.in_place { recv } else { Region::new(BufId::Send, 0, n) };
    let mine = slice(me, desc, recv);
    let mut b = Builder::new();
    b.reserve_scratch(p * mine.len);
    reduce_scatter(&mut b, desc, input, mine);
    for j in (0..p).filter(|&j| j != me) {
        b.send(j, mine);
        b.recv(j, slice(j, desc, recv));
    }
    b.finish()
}

pub(super) fn reduce(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    let (me, p, n, root) = (desc.rank, desc.size, desc.bytes, desc.root);
    let recv = Region::new(BufId::Recv, 0, n);
    let input = if desc.in_place && desc.is_root() { recv } else { Region::new(BufId::Send, 0, n) };
    let len = slice(me, desc, input).len;
    let mut b = Builder::new();
    let result = if desc.is_root() {
        b.reserve_scratch(p * len);
        slice(me, desc, recv)
    } else {
        b.reserve_scratch((p + 1) * len);
        Region::new(BufId::Scratch, p * len, len)
    };
    reduce_scatter(&mut b, desc, input, result);
    if desc.is_root() {
        for j in (0..p).filter(|&j| j != root) {
            b.recv(j, slice(j, desc, recv));
        }
    } else {
        b.send(root, result);
    }
    b.finish()
}
