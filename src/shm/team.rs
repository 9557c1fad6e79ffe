//! The ranks of one node working through a shared segment, and the step
//! protocol that keeps them from reading data too early or overwriting it
//! too soon.
//!
//! Every rank numbers its steps the same way (calls run in the same order
//! everywhere and each algorithm takes a number of steps that depends only
//! on what all ranks know). A step's data goes to the writer's chunk area
//! of the step's parity, or, up to [`INLINE`] bytes, to its slot `s %
//! SLOTS` (with [`Team::put_lines`], up to [`LINES`] lines of it, each
//! line carrying the step):
//! - before writing it for step `s`, a rank waits until every rank is
//!   `done` with step `s - 2` (chunk area and words) or `s - SLOTS` (slot),
//!   the last one that used that place;
//! - it publishes with `ready = s` (a release store: the data before the
//!   flag), readers wait for `ready >= s` (an acquire load: the flag
//!   before the data); a slot's line also carries its step, so a reader of
//!   small data waits on the lines that hold it ([`Team::wait_data`],
//!   [`Team::wait_lines`]);
//! - when a rank has read all it needs of step `s`, it stores `done = s`
//!   (release: its reads before the writer's next overwrite, which
//!   acquires).
//!
//! A writer whose readers never answer it (a Bcast root, a Reduce or
//! Gatherv non-root) learns their progress only by reading their `done`, a
//! cache-line transfer on its way to publishing: with slots it does so
//! once in `SLOTS` steps for small messages, not every other step (an
//! 8-byte Gatherv root: 0.89 -> 0.64 us; docs/measurements.md).
//!
//! Every algorithm finishes a step before it publishes a later one, so a
//! rank seen at `ready >= s` is `done` with `s - 1`: waiting for everyone's
//! step `s` also tells that no one still reads an area of step `s - 1`,
//! and the next write to that parity needs no further look.
//!
//! Waiting spins, then yields, then naps ([`Backoff`]).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use super::prefetch::Ahead;
use super::segment::{Segment, INLINE, LINES, PUBLISHED, SLOTS};
use super::wait::Backoff;
use super::PeerMemory;

/// What one rank remembers between calls: the protocol's counters, and
/// `M`, whatever the algorithms above keep (the protocol never looks at
/// it).
#[derive(Debug, Default)]
pub struct TeamState<M = ()> {
    /// The last step taken.
    pub step: u64,
    /// Every rank is known to be done with this step.
    pub known_done: u64,
    /// The algorithms' memory.
    pub memory: M,
}

/// Settings of the node primitives: the size from which copies into the
/// segment stream past the cache ([`super::stream`]; 0: never), the
/// message size from which copies into the application's buffers do
/// ([`STREAM_OUT_FROM`]; 0: never), how writes into those buffers ask for
/// their lines ahead ([`super::prefetch::ahead_of_stores`]), and whether
/// the host runs more ranks than it has cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeSettings {
    pub stream_from: usize,
    pub stream_out_from: usize,
    pub ahead: Ahead,
    pub oversubscribed: bool,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            stream_from: STREAM_FROM,
            stream_out_from: STREAM_OUT_FROM,
            ahead: Ahead::default(),
            oversubscribed: false,
        }
    }
}

/// Default of PCOLL_SHM_STREAM.
pub const STREAM_FROM: usize = 4 << 10;

/// Default of PCOLL_SHM_STREAM_OUT: messages from which the copies that
/// fill the application's buffers (a pipeline Bcast's copies out, a
/// Gatherv root's own block) use streaming stores. Those buffers are cold
/// and written whole; ordinary stores first read every line (twice the
/// memory traffic of the copy's writes). From 512 KiB, about a core's L2
/// on EPYC, a message written with ordinary stores would not stay there
/// for the application to read anyway (docs/measurements.md).
pub const STREAM_OUT_FROM: usize = 512 << 10;

/// Whether a message of `len` bytes travels in a slot's lines with
/// [`Team::put_lines`]: more than one line's worth, at most a slot.
pub fn in_lines(len: usize) -> bool {
    len > INLINE && len <= LINES * INLINE
}

/// One rank's view of its node for one call.
pub struct Team<'a, M = ()> {
    /// This rank on the node, and the node's ranks.
    pub rank: usize,
    pub size: usize,
    pub seg: &'a Segment,
    /// Zero-copy access to peers' buffers, where the system allows it.
    pub peers: Option<&'a dyn PeerMemory>,
    pub state: &'a mut TeamState<M>,
    pub settings: NodeSettings,
}

impl<M> Team<'_, M> {
    /// Starts the next step; returns its number.
    pub fn next_step(&mut self) -> u64 {
        self.state.step += 1;
        self.state.step
    }

    /// Where `len` bytes of rank `r`'s step `s` live: the step's slot if
    /// they fit, else its chunk area. A function of the length, which
    /// writer and readers share.
    fn data(&self, r: usize, s: u64, len: usize) -> *mut u8 {
        assert!(len <= self.seg.geo.area(), "{len} bytes do not fit a chunk area");
        if len <= INLINE {
            self.seg.slot(r, s, 0).data.as_ptr() as *mut u8
        } else {
            self.seg.chunk_area(r, s)
        }
    }

    /// `len` bytes of rank `r`'s data of step `s`, to read.
    pub fn area_bytes(&self, r: usize, s: u64, len: usize) -> &[u8] {
        // SAFETY: within the segment; the step protocol guarantees that
        // nobody writes this area between `r`'s publish of `s` (which the
        // caller waited for) and this rank's `finish(s)`.
        unsafe { std::slice::from_raw_parts(self.data(r, s, len), len) }
    }

    /// `len` bytes of this rank's data of step `s`, to write.
    #[allow(clippy::mut_from_ref)]
    pub fn my_area_bytes(&self, s: u64, len: usize) -> &mut [u8] {
        // SAFETY: within the segment; after `writable(s)` no one reads this
        // area until this rank publishes `s`, and only this rank writes it.
        unsafe { std::slice::from_raw_parts_mut(self.data(self.rank, s, len), len) }
    }

    /// Copies `src` into this rank's area of step `s`, once no one reads
    /// the place any more, to be published (a slot's data is visible to
    /// [`Team::wait_data`] at once).
    pub fn put(&mut self, s: u64, src: &[u8]) {
        self.put_stored(s, src, self.streams(src.len()));
    }

    /// [`Team::put`] with the stores of a copy into the chunk area given.
    pub fn put_stored(&mut self, s: u64, src: &[u8], stream: bool) {
        if src.len() <= INLINE {
            self.wait_done(s.saturating_sub(SLOTS as u64));
            self.my_area_bytes(s, src.len()).copy_from_slice(src);
            // Release: the slot's data before its step, for wait_data's acquire.
            self.seg.slot(self.rank, s, 0).step.store(s, Release);
        } else {
            self.writable(s);
            super::stream::copy_with(self.my_area_bytes(s, src.len()), src, stream);
        }
    }

    /// Rank `r`'s `len` bytes of step `s`, once there. For data written
    /// with [`Team::put`] (a slot's step is set by nothing else).
    pub fn wait_data(&self, r: usize, s: u64, len: usize) -> &[u8] {
        if len <= INLINE {
            let step = &self.seg.slot(r, s, 0).step;
            // Acquire: pairs with put's release; the slot's data is visible.
            Backoff::until(|| step.load(Acquire) >= s);
        } else {
            self.wait_ready(r, s);
        }
        self.area_bytes(r, s, len)
    }

    /// Writes a message [`in_lines`] to the lines of the step's slot,
    /// each stored with the step, for [`Team::wait_lines`] (and nothing
    /// else) to read. A reader waits for all its lines at once and has the
    /// data with those misses, where a chunk area costs the miss on the
    /// writer's `ready` first. For exchanges where every rank writes
    /// before it reads (an Allreduce): a reader that polls lines the
    /// writer has yet to write takes each line from it in between (a
    /// Bcast or Gatherv of 128-168 B got up to 0.12 us slower that way).
    pub fn put_lines(&mut self, s: u64, src: &[u8]) {
        debug_assert!(in_lines(src.len()));
        self.wait_done(s.saturating_sub(SLOTS as u64));
        for (i, piece) in src.chunks(INLINE).enumerate() {
            let line = self.seg.slot(self.rank, s, i);
            // SAFETY: a line's data holds INLINE >= piece.len() bytes, which
            // only this rank writes, and no one reads them now: the readers
            // of the slot's last step (s - SLOTS) are done with it.
            unsafe { std::ptr::copy_nonoverlapping(piece.as_ptr(), line.data.as_ptr() as *mut u8, piece.len()) };
            // Release: the line's data before its step, for wait_lines' acquire.
            line.step.store(s, Release);
        }
    }

    /// Copies rank `r`'s message of step `s` (written with
    /// [`Team::put_lines`], as long as `into`) into `into` once there.
    pub fn wait_lines(&self, r: usize, s: u64, into: &mut [u8]) {
        let len = into.len();
        debug_assert!(in_lines(len));
        let lines = || (0..len.div_ceil(INLINE)).map(|i| self.seg.slot(r, s, i));
        // Acquire: pairs with each line's release in put_lines, so its data
        // is visible. Each pass loads every line (no short cut), so that
        // their misses overlap.
        Backoff::until(|| lines().fold(true, |all, line| (line.step.load(Acquire) >= s) & all));
        for (piece, line) in into.chunks_mut(INLINE).zip(lines()) {
            // SAFETY: the line holds piece.len() bytes of step s (acquired
            // above), which the writer leaves alone until this rank is done
            // with s.
            unsafe { std::ptr::copy_nonoverlapping(line.data.as_ptr() as *const u8, piece.as_mut_ptr(), piece.len()) };
        }
    }

    /// Waits for every other rank's `len` bytes of step `s` (written with
    /// [`Team::put`]), after this rank has published `s`.
    pub fn wait_others_data(&mut self, s: u64, len: usize) {
        if len <= INLINE {
            for r in (0..self.size).filter(|&r| r != self.rank) {
                self.wait_data(r, s, len);
            }
        } else {
            // Every rank's `ready`, which also tells what all have finished.
            self.wait_all_ready(s);
        }
    }

    /// Whether copies into the segment for a transfer of `len` bytes
    /// bypass this core's cache: from [`NodeSettings::stream_from`] bytes.
    pub fn streams(&self, len: usize) -> bool {
        let from = self.settings.stream_from;
        from > 0 && len >= from
    }

    /// Whether the copies that fill the application's buffers for a
    /// message of `len` bytes bypass this core's cache: from
    /// [`NodeSettings::stream_out_from`] bytes.
    pub fn streams_out(&self, len: usize) -> bool {
        let from = self.settings.stream_out_from;
        from > 0 && len >= from
    }

    /// Waits until this rank may overwrite its chunk area, words and slot
    /// for step `s`.
    pub fn writable(&mut self, s: u64) {
        self.wait_done(s.saturating_sub(2));
    }

    /// Waits until every rank is done with step `need`.
    pub fn wait_done(&mut self, need: u64) {
        if self.state.known_done >= need {
            return;
        }
        let mut least = u64::MAX;
        for r in 0..self.size {
            let done = &self.seg.control(r).done;
            // Acquire: pairs with the reader's release of `done`, so its
            // reads of this area happen before the overwrite that follows.
            Backoff::until(|| done.load(Acquire) >= need);
            least = least.min(done.load(Relaxed));
        }
        self.state.known_done = least;
    }

    /// Publishes this rank's data of step `s` and its published words.
    pub fn publish(&self, s: u64) {
        // Release: the area's bytes and the words written before are
        // visible to whoever acquires `ready >= s`.
        self.seg.control(self.rank).ready.store(s, Release);
    }

    /// Sets word `i` of step `s` (after [`Team::writable`] for `s`: the
    /// words of a parity are reused like its area), visible to peers after
    /// the publish of `s`.
    pub fn set_word(&self, s: u64, i: usize, value: u64) {
        debug_assert!(i < PUBLISHED);
        // Relaxed: ordered by the release store of the following publish.
        self.shared_word(self.rank, s, i).store(value, Relaxed);
    }

    /// Rank `r`'s word `i` of step `s` as an atomic shared by several
    /// ranks: set by `r` before its publish of `s`, then updated only by
    /// read-modify-write operations of ranks that saw that publish.
    pub fn shared_word(&self, r: usize, s: u64, i: usize) -> &AtomicU64 {
        &self.seg.control(r).words[s as usize % 2][i]
    }

    /// Rank `r`'s word `i` of step `s` (after [`Team::wait_ready`] on `r`).
    pub fn word(&self, r: usize, s: u64, i: usize) -> u64 {
        // Relaxed: ordered by the acquire in wait_ready.
        self.shared_word(r, s, i).load(Relaxed)
    }

    /// Waits until rank `r` has published step `s`.
    pub fn wait_ready(&self, r: usize, s: u64) {
        let ready = &self.seg.control(r).ready;
        // Acquire: pairs with `publish`'s release; `r`'s data of step `s`
        // (and its words) are visible after it.
        Backoff::until(|| ready.load(Acquire) >= s);
    }

    /// Waits until every rank has published step `s`. Each has then
    /// finished its steps before `s` (see the module documentation), which
    /// [`Team::writable`] relies on without looking again.
    pub fn wait_all_ready(&mut self, s: u64) {
        for r in 0..self.size {
            self.wait_ready(r, s);
        }
        self.state.known_done = self.state.known_done.max(s - 1);
    }

    /// This rank has read all it needs of step `s` (and earlier).
    pub fn finish(&self, s: u64) {
        // Release: the reads of others' areas happen before any writer
        // that acquires `done >= s` overwrites them.
        self.seg.control(self.rank).done.store(s, Release);
    }

    /// One step that only synchronises: every rank publishes nothing and
    /// waits for all (a barrier through the segment).
    pub fn barrier(&mut self) {
        let s = self.next_step();
        self.publish(s);
        self.wait_all_ready(s);
        self.finish(s);
    }
}
