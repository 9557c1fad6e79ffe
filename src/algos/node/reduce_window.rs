//! Allreduce at 2 ranks through the window (`shm_window`): the halves of
//! a reduce-scatter and an allgather handed over in the window the hot
//! Bcasts and Gatherv blocks use ([`super::window`]), each rank's stores
//! going to lines its own cache holds.
//!
//! Each rank has a region of the window, half of it. In turn for each
//! segment of the vector (as much as the two regions hold): rank `r`
//! copies the half its peer combines into its region, piece by piece,
//! flagging each; then, as the peer's pieces land in the peer's region,
//! combines its own half from its send buffer and the peer's piece into
//! its receive buffer and writes the result over that piece, flagged
//! again; then copies the peer's results out of its own region. A rank
//! only ever stores into lines it touched last: its region, whose last
//! reader and writer before it was itself (it copied the peer's results
//! out of it), and the peer's pieces it has just read. A store into a
//! line the other core touched last waits for the line to come over
//! (2 ranks, 128 KiB back to back: 7.3 us to copy a half into the region
//! the peer had read last, 1.25 into one this rank had; docs/measurements.md).
//!
//! Trace, a vector a|b (halves), ranks 0 and 1: 0 copies b0 into region 0,
//! 1 copies a1 into region 1; 0 combines a0 ∘ a1 (a1 from region 1) into
//! its receive buffer and over a1, 1 combines b0 ∘ b1 likewise over b0;
//! 0 copies b0 ∘ b1 out of region 0, 1 copies a0 ∘ a1 out of region 1.
//!
//! Order: `x0 ∘ x1`, each element combined once, by one rank: bitwise the
//! result of the other node reductions ([`super::reduction`]).
//!
//! Limitations: exactly 2 ranks with a core each, a window of at least two
//! pieces (the segment's budget may leave none: then `shm_flat_zcopy`).
//! Memory: the window's pieces and flags; a piece's scratch for rank 0
//! with MPI_IN_PLACE. Cost per segment of `m` bytes, in pieces: `m/2`
//! copied in, combined and copied out by each rank, `m` read from the
//! other core, pipelined by pieces; one synchronisation per call (the
//! first step's heads), none between calls of this way.
//! Seed: 003 (the 2-rank reduce-scatter and allgather of the partitioned
//! reduction); the window's handover is pcoll's own.

use std::ops::Range;
use std::sync::atomic::Ordering::{Acquire, Release};

use super::reduction::{publish_vectors, whole_elements};
use super::{NodeCall, Team};
use crate::exec::{Buffers, Combiner};
use crate::shm::segment::Geometry;
use crate::shm::team::Mismatch;
use crate::shm::wait::Backoff;

/// [`super::window::WindowCalls::last_writer`] of an Allreduce through the
/// window: every rank wrote and read.
pub const ALL_WROTE: usize = usize::MAX;

/// Whether this team's Allreduces of `unit`-byte elements can go through
/// the window: 2 ranks with a core each, and a window of two pieces or
/// more, each holding an element.
pub fn suits(team: &Team<'_>, unit: usize) -> bool {
    let geo = team.seg.geo;
    team.size == 2 && !team.settings.oversubscribed && region_pieces(geo) >= 1 && unit <= geo.window_piece()
}

/// The window pieces of each rank's region: half the whole pieces.
fn region_pieces(geo: Geometry) -> usize {
    (geo.window / geo.window_piece().max(1)).min(geo.window_pieces) / 2
}

/// The Allreduce of `bufs` (`unit`-byte elements) through the window, as
/// the registry runs it; where the team does not [`suits`] it,
/// `shm_flat_zcopy`.
pub fn run(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) -> Result<(), Mismatch> {
    let NodeCall::Reduce { mut bufs, unit, root, host } = call else { super::mismatch() };
    if root.is_some() || !suits(team, unit) {
        return super::reduce_flat_zcopy::flat_or_zero_copy(team, &mut bufs, unit, root, host, combiner).map(drop);
    }
    // Every rank checks every head before any touches the window.
    let s = publish_vectors(team, &mut bufs)?;
    team.finish(s);
    allreduce(team, &mut bufs, unit, combiner);
    Ok(())
}

/// The Allreduce through the window, after the call's first step; the
/// team [`suits`] it.
pub fn allreduce<C: Combiner + ?Sized>(team: &mut Team<'_>, bufs: &mut Buffers<'_>, unit: usize, combiner: &C) {
    let n = bufs.send.map_or(bufs.recv.len(), <[u8]>::len);
    if n == 0 {
        return;
    }
    let calls = team.state.memory.window_calls;
    // After an Allreduce through the window each rank's region is free
    // (see the module); after a Bcast or Gatherv, its readers may still
    // be copying out.
    if calls.last_writer != ALL_WROTE {
        super::window::wait_read(team);
    }
    team.state.memory.window_calls.reductions += 1;
    let geo = team.seg.geo;
    // Pieces of whole elements, each in a piece of the window.
    let piece = whole_elements(geo.window_piece(), unit);
    let region = region_pieces(geo);
    let segment = 2 * region * piece;
    let mut scratch = std::mem::take(&mut team.state.memory.line_copies);
    let mut last = 0;
    for at in (0..n).step_by(segment) {
        let len = segment.min(n - at);
        let halves = [at..at + halves_cut(len, unit), at + halves_cut(len, unit)..at + len];
        last = segment_through(team, bufs, &halves, Pieces { bytes: piece, region }, &mut scratch, combiner);
    }
    team.state.memory.line_copies = scratch;
    let calls = &mut team.state.memory.window_calls;
    (calls.last, calls.last_writer) = (last, ALL_WROTE);
    // Release: this rank's copies out of the window happen before a later
    // window writer, acquiring the word, writes it again.
    team.seg.window_done(team.rank).value.store(last, Release);
    team.finish(last);
}

/// Where a segment of `len` bytes of `unit`-byte elements is cut into its
/// halves: rank 0's first.
fn halves_cut(len: usize, unit: usize) -> usize {
    len / unit / 2 * unit
}

/// How a segment lies in the window: `bytes` of data in each window piece,
/// `region` pieces for each rank.
#[derive(Clone, Copy)]
struct Pieces {
    bytes: usize,
    region: usize,
}

impl Pieces {
    /// The window piece of piece `i` of rank `r`'s region.
    fn of(self, r: usize, i: usize) -> usize {
        r * self.region + i
    }
}

/// One segment through the window, `halves[r]` the bytes rank `r`
/// combines; returns the segment's last step.
fn segment_through<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    halves: &[Range<usize>; 2],
    pieces: Pieces,
    scratch: &mut Vec<u8>,
    combiner: &C,
) -> u64 {
    let (me, peer) = (team.rank, 1 - team.rank);
    let copied_in = team.next_step();
    let combined = team.next_step();
    let seg = team.seg;
    let window_piece = seg.geo.window_piece();
    let at_window = |w: usize, len: usize| seg.window_bytes(w * window_piece, len);
    let in_pieces = |half: &Range<usize>| {
        let end = half.end;
        half.clone().step_by(pieces.bytes).map(move |at| at..(at + pieces.bytes).min(end)).enumerate()
    };
    let input = bufs.send.unwrap_or(&*bufs.recv);
    for (i, bytes) in in_pieces(&halves[peer]) {
        let w = pieces.of(me, i);
        // SAFETY: piece w of this rank's region, within the window
        // (`Pieces`); no rank reads it before the flag below, and no one
        // reads an earlier call's bytes there any more (see the module).
        let mine = unsafe { std::slice::from_raw_parts_mut(at_window(w, bytes.len()), bytes.len()) };
        crate::exec::copy::copy(mine, &input[bytes]);
        // Release: the copy into the piece happens before the peer,
        // acquiring the flag, combines it.
        seg.window_flag(w).value.store(copied_in, Release);
    }
    for (i, bytes) in in_pieces(&halves[me]) {
        let w = pieces.of(peer, i);
        let flag = &seg.window_flag(w).value;
        // Acquire: pairs with the peer's release of its copy.
        Backoff::until(|| flag.load(Acquire) >= copied_in);
        // SAFETY: the peer's piece, copied in before its flag (acquired);
        // the peer touches it again only after this rank's flag below.
        let theirs = unsafe { std::slice::from_raw_parts_mut(at_window(w, bytes.len()), bytes.len()) };
        let out = &mut bufs.recv[bytes.clone()];
        match bufs.send {
            Some(send) if me == 0 => combiner.combine_into(&send[bytes], theirs, out),
            Some(send) => combiner.combine_into(theirs, &send[bytes], out),
            None if me == 1 => combiner.combine(theirs, out),
            None => {
                scratch.clear();
                scratch.extend_from_slice(out);
                combiner.combine_into(scratch, theirs, out);
            }
        }
        crate::exec::copy::copy(theirs, out);
        // Release: the result's copy happens before the peer acquires it.
        flag.store(combined, Release);
    }
    for (i, bytes) in in_pieces(&halves[peer]) {
        let w = pieces.of(me, i);
        let flag = &seg.window_flag(w).value;
        // Acquire: pairs with the peer's release of its result.
        Backoff::until(|| flag.load(Acquire) >= combined);
        // SAFETY: the peer's result, written before its flag (acquired);
        // no rank writes the piece again before this rank's next copy in.
        let result = unsafe { std::slice::from_raw_parts(at_window(w, bytes.len()), bytes.len()) };
        crate::exec::copy::copy(&mut bufs.recv[bytes], result);
    }
    combined
}
