//! Messages within a node through one window that every writer writes
//! into and every reader reads from: `shm`'s hot Bcasts from a root that
//! was not the last window call's writer, and at 2 ranks a Gatherv's hot
//! block from an owner that was not ([`super::gatherv_shm`]). With
//! writers that alternate, back to back, a writer writes the lines it has
//! just read as the last call's reader, which its cache holds, and its
//! readers read lines they wrote or read lately; through the writer's
//! own queue or chunk areas each store would wait for a line that a
//! reader's cache still holds, or come from memory. Bare handover, 2
//! ranks, roots alternating, µs a message at 32 / 128 / 512 KiB: one
//! window 1.14 / 3.41 / 13.3 against 2.49 / 4.84 / 41.0 through a ring of
//! 4 MiB per root (Intel MPI's point-to-point hands over the same way;
//! docs/measurements.md).
//!
//! A window call is numbered by its step ([`Team::next_step`]: the
//! call's number in the high bits, the same on every rank that runs the
//! call, growing), not by a count of window calls, so that a rank that
//! left a call early (an erroneous program) numbers the next ones as its
//! peers do. The writer writes the message in pieces
//! ([`crate::shm::segment::WINDOW_PIECE`]) and stores the number in each
//! piece's flag; a reader copies each piece out once its flag holds the
//! number or a later one, then stores the number in its done word. Before
//! it writes, a writer waits until the last window call's readers, but
//! itself, are done: none with two ranks and writers alternating.
//! Nothing is reset: numbers only grow.
//!
//! Trace, p = 3, a Bcast of step 0x100 (root 0) and one of 0x200 (root
//! 1), 2 pieces: rank 0 writes piece 0, flags it 0x100, writes piece 1,
//! flags it 0x100, returns; ranks 1 and 2 copy each piece once flagged,
//! store done = 0x100. Then rank 1 waits for rank 2's done >= 0x100 (rank
//! 0 wrote that call, rank 1 itself has read it) and writes as above with
//! 0x200.
//!
//! Limitations: one node; messages up to the window
//! ([`crate::shm::segment::WINDOW_BYTES`], within the budget); a writer of
//! two window calls in a row waits for every reader of the first (the
//! callers take their other ways there, which let a writer run ahead);
//! ordinary stores only (the lines are hot). Memory: the window, a line
//! per piece and per rank, in the segment's header; a few words per rank
//! ([`WindowCalls`]). Cost: `m t` for the writer's copy and the readers'
//! overlapped by pieces, plus a flag's handover per piece; with a writer
//! that writes twice in a row, plus a round trip.
//! Seed: none (pcoll's own, after the handover of Intel MPI's
//! point-to-point).

use std::ops::Range;
use std::sync::atomic::Ordering::{Acquire, Release};

use super::Team;
use crate::shm::segment::Geometry;
use crate::shm::wait::Backoff;

/// The last window call of one communicator (the same on every rank that
/// took part in all), and this rank's window calls by collective.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCalls {
    /// The last window call's number (0: none yet) and writer
    /// ([`super::reduce_window::ALL_WROTE`]: an Allreduce, every rank).
    pub last: u64,
    pub last_writer: usize,
    /// Bcasts and Gatherv blocks this rank wrote or read through the window.
    pub bcasts: u64,
    pub gathers: u64,
    /// Allreduces and Reduces through the window ([`super::reduce_window`]).
    pub allreduces: u64,
    pub reduces: u64,
}

/// Whether `writer` should send `n` bytes through the window: they fit
/// it, and it did not write the last window call (it would wait for that
/// call's readers).
pub fn suits(team: &Team<'_>, writer: usize, n: usize) -> bool {
    let calls = team.state.memory.window_calls;
    let geo = team.seg.geo;
    geo.window_pieces > 0 && n <= geo.window && (calls.last == 0 || calls.last_writer != writer)
}

/// Broadcasts `data` from `root` through the window as call `s` (the
/// call's first step, in which every reader checked the root's head and
/// took its word for the window); `data` fits the window.
pub fn through_window(team: &mut Team<'_>, data: &mut [u8], root: usize, s: u64) {
    team.state.memory.window_calls.bcasts += 1;
    if team.rank == root {
        write(team, data, s);
    } else {
        read(team, data, root, s);
    }
}

/// Window call `s`, this rank its writer: writes `data` (which fits the
/// window) once the last call's readers are done.
pub fn write(team: &mut Team<'_>, data: &[u8], s: u64) {
    write_in(team, data, team.seg.geo.window_piece(), s);
}

/// [`write`] in pieces of `piece` bytes (at most a window piece's), each
/// at the start of its window piece: a reader that combines whole
/// elements as pieces land reads pieces of whole elements. `data` fits
/// the window so cut (where `piece` is less than a window piece:
/// [`pieces_fit`]).
pub fn write_in(team: &mut Team<'_>, data: &[u8], piece: usize, s: u64) {
    wait_read(team);
    let calls = &mut team.state.memory.window_calls;
    (calls.last, calls.last_writer) = (s, team.rank);
    let window_piece = team.seg.geo.window_piece();
    debug_assert!(piece <= window_piece);
    for (i, part) in data.chunks(piece).enumerate() {
        // SAFETY: the bytes of window piece i, within the window (`data`
        // fits its pieces); no rank reads them until the flag below, and
        // every reader of earlier calls is done with them (waited for
        // above).
        let window =
            unsafe { std::slice::from_raw_parts_mut(team.seg.window_bytes(i * window_piece, part.len()), part.len()) };
        crate::exec::copy::copy(window, part);
        // Release: the copy into the piece happens before a reader,
        // acquiring the flag, copies it out.
        team.seg.window_flag(i).value.store(s, Release);
    }
    // A writer has read its own call: a rank that takes this one for a
    // call it wrote (an erroneous program's other collective) waits for
    // no read of it here. Release: as in `read`.
    team.seg.window_done(team.rank).value.store(s, Release);
}

/// Whether `len` bytes cut in pieces of `piece` bytes fit the window,
/// a piece in each whole window piece.
pub fn pieces_fit(geo: Geometry, len: usize, piece: usize) -> bool {
    piece > 0 && len.div_ceil(piece) <= whole_pieces(geo)
}

/// The window's pieces of [`Geometry::window_piece`] bytes each (the last
/// may be cut short by the budget: not counted).
pub fn whole_pieces(geo: Geometry) -> usize {
    (geo.window / geo.window_piece().max(1)).min(geo.window_pieces)
}

/// Window call `s`, `writer` its writer: copies its message into `into`
/// (as long as the message), piece by piece as they land.
pub fn read(team: &mut Team<'_>, into: &mut [u8], writer: usize, s: u64) {
    let piece = team.seg.geo.window_piece();
    read_each(team, into.len(), piece, writer, s, |at, part| crate::exec::copy::copy(&mut into[at], part));
}

/// Window call `s` of `len` bytes, `writer` its writer, written in pieces
/// of `piece` bytes ([`write_in`]): hands each piece to `take`, with its
/// place in the message, as it lands.
pub fn read_each(
    team: &mut Team<'_>,
    len: usize,
    piece: usize,
    writer: usize,
    s: u64,
    mut take: impl FnMut(Range<usize>, &[u8]),
) {
    let calls = &mut team.state.memory.window_calls;
    (calls.last, calls.last_writer) = (s, writer);
    let window_piece = team.seg.geo.window_piece();
    for (i, at) in (0..len).step_by(piece.max(1)).enumerate() {
        let at = at..(at + piece).min(len);
        let flag = &team.seg.window_flag(i).value;
        // Acquire: pairs with the writer's release of the flag. A later
        // call's writer cannot have flagged the piece again: it waits for
        // this rank's done word.
        Backoff::until(|| flag.load(Acquire) >= s);
        // SAFETY: the writer wrote the piece before its flag (acquired
        // above) and no writer writes it again before this rank's done
        // word below.
        let window = unsafe { std::slice::from_raw_parts(team.seg.window_bytes(i * window_piece, at.len()), at.len()) };
        take(at, window);
    }
    // Release: this rank's reads of the window happen before a later
    // writer, acquiring the word, writes it again.
    team.seg.window_done(team.rank).value.store(s, Release);
}

/// Window call `s`, `writer` its writer, which this rank does not read
/// (its peer runs another call: an erroneous program): counted as read,
/// so that no later writer waits for it. Harmless where `writer` did not
/// write it: later calls' numbers are larger.
pub fn skip(team: &mut Team<'_>, writer: usize, s: u64) {
    let calls = &mut team.state.memory.window_calls;
    (calls.last, calls.last_writer) = (s, writer);
    // Release: as in `read` (this rank copied nothing out).
    team.seg.window_done(team.rank).value.store(s, Release);
}

/// Waits until the readers of the last window call other than this rank
/// are done with it, and with every window call before it (they read in
/// order, and every reader of an earlier call but the last call's writer
/// and this rank reads the last too): before a write, and for a root that
/// times a call, before and after it, so that earlier calls' copies are
/// not counted.
pub fn wait_read(team: &Team<'_>) {
    let calls = team.state.memory.window_calls;
    if calls.last == 0 {
        return;
    }
    for r in (0..team.size).filter(|&r| r != team.rank && r != calls.last_writer) {
        let done = &team.seg.window_done(r).value;
        // Acquire: the reader's copies out of the window (before its
        // release of the word) happen before the caller writes it again.
        Backoff::until(|| done.load(Acquire) >= calls.last);
    }
}
