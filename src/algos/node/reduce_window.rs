//! Allreduce and Reduce at 2 ranks through the window (`shm_window`): an
//! Allreduce's halves of a reduce-scatter and an allgather, a Reduce's
//! non-root vector, handed over in the window the hot Bcasts and Gatherv
//! blocks use ([`super::window`]), each rank's stores going to lines its
//! own cache holds.
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
//! A Reduce goes through the window where its non-root did not write the
//! last window call (roots that alternate): both ranks check each other's
//! head, the non-root copies its vector into the window in pieces of
//! whole elements and returns, the root combines each piece as it lands
//! into its receive buffer. Trace, root 1: 0 copies a|b into the window,
//! 1 combines a0 ∘ a1, then b0 ∘ b1; the next call's root 0 finds 1's
//! head there, and 1 writes the lines it read last. With a fixed root the
//! non-root would store into lines the root read last: `shm_flat_zcopy`.
//!
//! Order: `x0 ∘ x1`, each element combined once, by one rank: bitwise the
//! result of the other node reductions ([`super::reduction`]).
//!
//! Limitations: exactly 2 ranks with a core each, a window of at least two
//! pieces (the segment's budget may leave none: then `shm_flat_zcopy`);
//! a Reduce up to the window's bytes. Memory: the window's pieces and
//! flags; a piece's scratch for rank 0 with MPI_IN_PLACE where the
//! operator cannot combine into its first operand. Cost per segment of
//! `m` bytes, in pieces: `m/2` copied in, combined and copied out by each
//! rank, `m` read from the other core, pipelined by pieces; a Reduce's
//! `m` copied in by the non-root, combined by the root; one
//! synchronisation per call (the first step's heads), none between calls
//! of this way.
//! Seed: 003 (the 2-rank reduce-scatter and allgather of the partitioned
//! reduction); the window's handover is pcoll's own.

use std::ops::Range;
use std::sync::atomic::Ordering::{Acquire, Release};

use super::reduction::{publish_vectors, whole_elements};
use super::window;
use super::{NodeCall, Team};
use crate::exec::{Buffers, Combiner};
use crate::shm::segment::Geometry;
use crate::shm::team::{Mismatch, Via};
use crate::shm::wait::Backoff;

/// [`super::window::WindowCalls::last_writer`] of an Allreduce through the
/// window: every rank wrote and read.
pub const ALL_WROTE: usize = usize::MAX;

/// The word in which each rank of a Reduce says it takes the window: the
/// step.
const WINDOW: usize = 0;

/// Whether this team's Allreduces of `unit`-byte elements can go through
/// the window: 2 ranks with a core each, and a window of two pieces or
/// more, each holding an element.
pub fn suits(team: &Team<'_>, unit: usize) -> bool {
    let geo = team.seg.geo;
    team.size == 2 && !team.settings.oversubscribed && region_pieces(geo) >= 1 && unit <= geo.window_piece()
}

/// Whether this team's Reduce of `n` bytes of `unit`-byte elements to
/// `root` goes through the window: 2 ranks with a core each, the vector
/// fits the window in pieces of whole elements, and the non-root did not
/// write the last window call ([`window::suits`]; with a fixed root it
/// would write lines the root read last, and wait for them). Every rank
/// of the call judges alike: each saw the same window calls.
fn rooted_suits(team: &Team<'_>, n: usize, unit: usize, root: usize) -> bool {
    let piece = whole_elements(team.seg.geo.window_piece(), unit);
    team.size == 2
        && !team.settings.oversubscribed
        && n > 0
        && window::pieces_fit(team.seg.geo, n, piece)
        && window::suits(team, 1 - root, n)
}

/// The window pieces of each rank's region: half the whole pieces.
fn region_pieces(geo: Geometry) -> usize {
    window::whole_pieces(geo) / 2
}

/// The Allreduce or Reduce of `bufs` (`unit`-byte elements) through the
/// window, as the registry runs it; where the team does not [`suits`] it
/// (a Reduce: [`rooted_suits`]), `shm_flat_zcopy`.
pub fn run(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) -> Result<(), Mismatch> {
    let NodeCall::Reduce { mut bufs, unit, root, host } = call else { super::mismatch() };
    let n = bufs.send.map_or(bufs.recv.len(), <[u8]>::len);
    match root {
        None if suits(team, unit) => {
            // Every rank checks every head before any touches the window.
            let s = publish_vectors(team, &mut bufs)?;
            team.finish(s);
            allreduce(team, &mut bufs, unit, combiner);
            Ok(())
        }
        Some(root) if rooted_suits(team, n, unit, root) => reduce(team, &mut bufs, n, unit, root, combiner),
        _ => super::reduce_flat_zcopy::flat_or_zero_copy(team, &mut bufs, unit, root, host, combiner).map(drop),
    }
}

/// The Reduce of `n` bytes to `root` through the window: both ranks show
/// their heads and check each other's, then the non-root writes its
/// vector, in pieces of whole elements, and returns, and the root
/// combines each piece as it lands. The non-root writes at once where
/// roots alternate: the root's reads of the last call's window, done
/// before it returned, came before (see [`window::write`]).
fn reduce<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    n: usize,
    unit: usize,
    root: usize,
    combiner: &C,
) -> Result<(), Mismatch> {
    let (me, writer) = (team.rank, 1 - root);
    let piece = whole_elements(team.seg.geo.window_piece(), unit);
    let s = team.next_step();
    // Both heads first, each rank checking its peer's before it touches
    // the window: the peer of an erroneous program (another count, so
    // maybe another algorithm) then finds an error here, neither writes
    // or reads the window, and their window calls stay alike. The writer
    // finds the root's head there already where roots alternate (the
    // root came early: it wrote the last call).
    team.writable(s);
    team.set_word(s, WINDOW, s);
    team.publish(s);
    let (peer, expect) = (1 - me, team.mine());
    team.writes_pieces(peer, s, expect).and_then(|_| team.check(peer, s, Via::Area, expect)).and_then(|()| {
        if team.word(peer, s, WINDOW) == s {
            Ok(())
        } else {
            Err(team.mismatch(peer, s))
        }
    })?;
    // The peer's publish of s: it is done with the steps before.
    team.others_published(s);
    team.state.memory.window_calls.reduces += 1;
    if me == writer {
        team.finish(s);
        window::write_in(team, bufs.send.unwrap_or(&*bufs.recv), piece, s);
        return Ok(());
    }
    let mut scratch = std::mem::take(&mut team.state.memory.line_copies);
    let (send, recv) = (bufs.send, &mut *bufs.recv);
    window::read_each(team, n, piece, writer, s, |at, theirs| {
        in_rank_order(me, send.map(|send| &send[at.clone()]), theirs, &mut recv[at], &mut scratch, combiner);
    });
    team.state.memory.line_copies = scratch;
    team.finish(s);
    Ok(())
}

/// `out = x0 ∘ x1` at 2 ranks, rank `me`'s operand `mine` (`None`: in
/// `out` already, MPI_IN_PLACE) and its peer's `theirs`.
fn in_rank_order<C: Combiner + ?Sized>(
    me: usize,
    mine: Option<&[u8]>,
    theirs: &[u8],
    out: &mut [u8],
    scratch: &mut Vec<u8>,
    combiner: &C,
) {
    match mine {
        Some(mine) if me == 0 => combiner.combine_into(mine, theirs, out),
        Some(mine) => combiner.combine_into(theirs, mine, out),
        None if me == 1 => combiner.combine(theirs, out),
        None => {
            if !combiner.combine_after(out, theirs) {
                scratch.clear();
                scratch.extend_from_slice(out);
                combiner.combine_into(scratch, theirs, out);
            }
        }
    }
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
        window::wait_read(team);
    }
    team.state.memory.window_calls.allreduces += 1;
    let geo = team.seg.geo;
    // Pieces of whole elements, each in a piece of the window.
    let piece = whole_elements(geo.window_piece(), unit);
    let region = region_pieces(geo);
    let segment = 2 * region * piece;
    let mut scratch = std::mem::take(&mut team.state.memory.line_copies);
    let mut last = 0;
    for at in (0..n).step_by(segment) {
        let len = segment.min(n - at);
        let cut = at + halves_cut(len, unit);
        let halves = [at..cut, cut..at + len];
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
        in_rank_order(me, bufs.send.map(|send| &send[bytes]), theirs, out, scratch, combiner);
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
