//! Bcast within a node through one window that every root writes into
//! and every reader reads from (`shm`'s hot messages from a root that was
//! not the last window call's root). With roots that alternate, back to
//! back, a root writes the lines it has just read as the last call's
//! reader, which its cache holds, and its readers read lines they wrote
//! or read lately; through the root's own queue each store would wait for
//! a line that a reader's cache still holds, or come from memory. Bare
//! handover, 2 ranks, roots alternating, µs a message at 32 / 128 / 512
//! KiB: one window 1.14 / 3.41 / 13.3 against 2.49 / 4.84 / 41.0 through a
//! ring of 4 MiB per root (Intel MPI's point-to-point hands over the
//! same way; docs/measurements.md).
//!
//! Each window call has a number, the same on every rank (all take part
//! in each). The root writes the message in pieces
//! ([`crate::shm::segment::WINDOW_PIECE`]) and stores the call's number
//! in each piece's flag; a reader copies each piece out once its flag
//! holds the number, then stores the number in its done word. Before it
//! writes, a root waits until the last window call's readers, but itself,
//! are done: none with two ranks and roots alternating. Nothing is reset:
//! numbers only grow.
//!
//! Trace, p = 3, calls 1 (root 0) and 2 (root 1), 2 pieces: rank 0 writes
//! piece 0, flags it 1, writes piece 1, flags it 1, returns; ranks 1 and
//! 2 copy each piece once flagged 1, store done = 1. Call 2: rank 1 waits
//! for rank 2's done = 1 (rank 0 was call 1's root, rank 1 itself has
//! read it), then writes as above with 2.
//!
//! Limitations: one node; messages up to the window
//! ([`crate::shm::segment::WINDOW_BYTES`], within the budget); a root of
//! two window calls in a row waits for every reader of the first (the
//! `shm` Bcast takes the queue there, which lets the root run ahead);
//! ordinary stores only (the lines are hot). Memory: the window, a line
//! per piece and per rank, in the segment's header; two words per rank
//! ([`WindowCalls`]). Cost: `m t` for the root's copy and the readers'
//! overlapped by pieces, plus a flag's handover per piece; with a root
//! that writes twice in a row, plus a round trip.
//! Seed: none (pcoll's own, after the handover of Intel MPI's
//! point-to-point).

use std::sync::atomic::Ordering::{Acquire, Release};

use super::Team;
use crate::shm::wait::Backoff;

/// The window calls of one communicator so far, and the last one's root:
/// the same on every rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCalls {
    pub count: u64,
    pub last_root: usize,
}

/// Whether a root should broadcast `n` bytes through the window: they fit
/// it, and it was not the last window call's root (which would wait for
/// that call's readers).
pub fn suits(team: &Team<'_>, root: usize, n: usize) -> bool {
    let calls = team.state.memory.window_calls;
    let geo = team.seg.geo;
    geo.window_pieces > 0 && n <= geo.window && (calls.count == 0 || calls.last_root != root)
}

/// Broadcasts `data` from `root` through the window, after a first step
/// in which every reader checked the root's head and took its word for
/// the window; `data` fits the window.
pub fn through_window(team: &mut Team<'_>, data: &mut [u8], root: usize) {
    let (me, geo) = (team.rank, team.seg.geo);
    let last = team.state.memory.window_calls;
    let call = last.count + 1;
    team.state.memory.window_calls = WindowCalls { count: call, last_root: root };
    let piece = geo.window_piece();
    if me == root {
        wait_readers(team, last, me);
        for (i, part) in data.chunks(piece).enumerate() {
            // SAFETY: the window's bytes of piece i, within the window
            // (`data` fits it); no rank reads them until the flag below,
            // and every reader of earlier calls is done with them (waited
            // for above).
            let window =
                unsafe { std::slice::from_raw_parts_mut(team.seg.window_bytes(i * piece, part.len()), part.len()) };
            crate::exec::copy::copy(window, part);
            // Release: the copy into the piece happens before a reader,
            // acquiring the flag, copies it out.
            team.seg.window_flag(i).value.store(call, Release);
        }
    } else {
        for (i, part) in data.chunks_mut(piece).enumerate() {
            let flag = &team.seg.window_flag(i).value;
            // Acquire: pairs with the root's release of the flag. A later
            // call's root cannot have flagged the piece again: it waits
            // for this rank's done word.
            Backoff::until(|| flag.load(Acquire) >= call);
            // SAFETY: the root wrote the piece before its flag (acquired
            // above) and no root writes it again before this rank's done
            // word below.
            let window =
                unsafe { std::slice::from_raw_parts(team.seg.window_bytes(i * piece, part.len()), part.len()) };
            crate::exec::copy::copy(part, window);
        }
        // Release: this rank's copies out happen before a later root,
        // acquiring the word, writes the window again.
        team.seg.window_done(me).value.store(call, Release);
    }
}

/// Waits until the readers of window call `last` other than `me` are done
/// with it, and with every window call before it (they read in order,
/// and every reader of an earlier call but `last`'s root and `me` reads
/// `last` too).
fn wait_readers(team: &Team<'_>, last: WindowCalls, me: usize) {
    if last.count == 0 {
        return;
    }
    for r in (0..team.size).filter(|&r| r != me && r != last.last_root) {
        let done = &team.seg.window_done(r).value;
        // Acquire: the reader's copies out of the window (before its
        // release of the word) happen before the caller writes it again.
        Backoff::until(|| done.load(Acquire) >= last.count);
    }
}

/// Waits until every window call so far has been read (a root that times
/// a call: before it, so that earlier calls' copies are not counted, and
/// after it).
pub fn wait_read(team: &Team<'_>) {
    let last = team.state.memory.window_calls;
    wait_readers(team, last, team.rank);
}
