//! The ranks of one node working through a shared segment, and the step
//! protocol that keeps them from reading data too early or overwriting it
//! too soon.
//!
//! Every rank numbers its steps the same way: step `i` of the node's call
//! `c` is `c << CALL_SHIFT | i` ([`Team::begin`]), and each algorithm
//! takes a number of steps that depends only on what all ranks know. A
//! step's data goes to the writer's chunk area of the step's parity, or,
//! up to the ring's bytes ([`Geometry::in_ring`]), to its slot in the
//! ring (with [`Team::put_lines`], up to [`LINES`] lines of it, each line
//! carrying the step), both chosen by the step's [`place`]:
//! - before writing it for step `s`, a rank waits until every rank is
//!   `done` with the last step it wrote to that place (recorded in
//!   [`TeamState`]);
//! - it publishes with `ready = s` (a release store: the data before the
//!   flag), readers wait for `ready >= s` (an acquire load: the flag
//!   before the data); a slot's line also carries its step, so a reader of
//!   small data waits on the lines that hold it ([`Team::wait_data`],
//!   [`Team::wait_lines`]);
//! - when a rank has read all it needs of step `s`, it stores `done = s`
//!   (release: its reads before the writer's next overwrite, which
//!   acquires);
//! - a writer may also count the pieces of a step's chunk area as they
//!   land ([`Team::put_pieces`]), so that its reader copies one out while
//!   it writes the next ([`Team::read_pieces`]); a message larger than the
//!   area goes through the area's whole span as a ring, each piece written over once its
//!   reader has counted it copied out ([`Team::put_ring_piece`],
//!   [`Team::copy_ring`]).
//!
//! Erroneous programs: every piece of data travels with its writer's
//! [`Head`] (the call, the algorithm, the writer's bytes), in the line
//! the reader waits on anyway; a reader checks it ([`Team::check`]) before
//! it uses a peer's first data of a call, and stops the call with a
//! [`Mismatch`] if the peer runs another call. At its end every rank
//! stores `done` and `ready` as the call's last possible step
//! ([`Team::end`]), so a peer left waiting for a step that never comes
//! wakes up (and finds no valid head), and the next call starts at the
//! same step everywhere whatever this one did.
//!
//! A writer whose readers never answer it (a Bcast root, a Reduce or
//! Gatherv non-root) learns their progress only by reading their `done`, a
//! cache-line transfer on its way to publishing: with a ring of `d` slots
//! (PCOLL_SHM_RING) it does so once in `d` calls for small messages, not
//! every other step (an 8-byte Gatherv root: 0.89 -> 0.64 us;
//! docs/measurements.md), and runs up to `d` calls ahead of its readers.
//!
//! Every algorithm finishes a step before it publishes a later one or
//! stores data of it, so a rank seen at `ready >= s`, or with data of step
//! `s`, is `done` with `s - 1`: waiting for everyone's step `s` also tells
//! that no one still reads an area of step `s - 1`, and the next write to
//! that parity needs no further look ([`Team::others_published`]).
//!
//! Waiting spins, then yields, then naps ([`Backoff`]).

use std::cell::Cell;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use super::prefetch::Ahead;
#[cfg(doc)]
use super::segment::Geometry;
use super::segment::{place, Segment, CALL_SHIFT, INLINE, LINES, PUBLISHED, STEP_MASK};
use super::wait::Backoff;
use super::PeerMemory;

/// What one rank remembers between calls: the protocol's counters, and
/// `M`, whatever the algorithms above keep (the protocol never looks at
/// it).
#[derive(Debug, Default)]
pub struct TeamState<M = ()> {
    /// The node's calls so far.
    pub call: u64,
    /// The last step taken.
    pub step: u64,
    /// Every rank is known to be done with this step.
    pub known_done: u64,
    /// This rank's head in the current call.
    pub head: Head,
    /// The last step this rank wrote each of its slots and chunk areas
    /// for: the next write there waits until every rank is done with it
    /// (the slots as many as the segment's ring has, from the first).
    pub slot_written: Vec<u64>,
    pub area_written: [u64; 2],
    /// Per parity, this rank's last spread step and its turn
    /// ([`crate::shm::segment::Segment::spread_area`]): each spread step
    /// of a parity takes the next turn, whatever its call. By the step's
    /// number, a call of two steps wrote its first where its reader had
    /// just read the last one before, into the lines that reader held (2
    /// ranks, hot 512 KiB Allreduce between barriers, cores sharing a
    /// cache: 57-62 us in two 256 KiB steps, 33.6 in one;
    /// docs/measurements.md).
    pub spread_turns: [Cell<(u64, u64)>; 2],
    /// The algorithms' memory.
    pub memory: M,
}

/// What a rank's call is, as its peers check before they use its data:
/// the call's number (low 20 bits), the algorithm (its index in the
/// registry, low 8 bits) and the rank's bytes (36 bits, saturated). Those
/// low bits repeat every 2^20 calls: where a head lies tells its whole
/// call (a slot's step, an area's call word), which a reader checks
/// first, so a place not written for a million calls, or never, is not
/// taken for this call's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Head(pub u64);

impl Head {
    const BYTES: u64 = (1 << 36) - 1;

    pub fn new(call: u64, algorithm: usize, bytes: usize) -> Head {
        let bytes = (bytes as u64).min(Head::BYTES);
        Head((call & 0xf_ffff) << 44 | (algorithm as u64 & 0xff) << 36 | bytes)
    }

    /// The writer's algorithm (its registry index, modulo 256).
    pub fn algorithm(self) -> usize {
        (self.0 >> 36 & 0xff) as usize
    }

    /// The writer's bytes; `None` beyond what a head holds (64 GiB).
    pub fn bytes(self) -> Option<usize> {
        let bytes = self.0 & Head::BYTES;
        (bytes < Head::BYTES).then_some(bytes as usize)
    }

    /// Whether the writer has `bytes` (as far as a head tells).
    pub fn has_bytes(self, bytes: usize) -> bool {
        self.0 & Head::BYTES == (bytes as u64).min(Head::BYTES)
    }

    /// Whether this is `mine` but for the bytes.
    fn same_call(self, mine: Head) -> bool {
        self.0 >> 36 == mine.0 >> 36
    }
}

/// A peer runs another call than this rank (an erroneous program: counts,
/// roots or algorithms that differ): which peer, its head if it wrote one
/// for this call, and whether it has more bytes than this rank expected of
/// it (a truncation, as MPI calls it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub peer: usize,
    pub head: Option<Head>,
    pub truncates: bool,
}

impl Mismatch {
    /// Of peer `peer`, whose head is `head`, where this rank expected
    /// `expected` bytes of it.
    pub fn new(peer: usize, head: Option<Head>, expected: Option<usize>) -> Mismatch {
        let truncates = matches!((head.and_then(Head::bytes), expected), (Some(theirs), Some(mine)) if theirs > mine);
        Mismatch { peer, head, truncates }
    }
}

/// Where a step's data, and so its writer's head, went: a slot (what
/// fits the ring with [`Team::put`], or [`in_lines`] with
/// [`Team::put_lines`]), or the chunk area and words beside `ready`
/// ([`Team::via`] tells which).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Slot,
    Area,
}

/// What a rank checks a peer's head against: its own call, with the same
/// bytes or, where ranks have bytes of their own (a Gatherv's blocks),
/// with the bytes this rank expects of that peer (`None`: any).
#[derive(Clone, Copy, Debug)]
pub struct Expect(pub Option<usize>);

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
    /// Calls that start within this many ns of the end of the rank's last
    /// one come back to back (PCOLL_SHM_BACK_TO_BACK).
    pub back_to_back_ns: u64,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            stream_from: STREAM_FROM,
            stream_out_from: STREAM_OUT_FROM,
            ahead: Ahead::default(),
            oversubscribed: false,
            back_to_back_ns: crate::algos::node::host_runs::BACK_TO_BACK_NS,
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

/// A reader waiting for a slot's lines looks at the writer's `ready` once
/// in this many polls ([`Team::wait_slot_or`]).
const OTHER_POLLS: u32 = 16;

/// Ring pieces ([`Team::put_ring_piece`]) per chunk area's bytes: a
/// writer fills one while its reader empties others.
const RING_PIECES: usize = 4;

/// Bytes of a ring piece ([`Team::put_ring_piece`]) where chunk areas hold
/// `area` bytes: a quarter of the area (64 KiB by default).
fn ring_piece(area: usize) -> usize {
    (area / RING_PIECES).max(1)
}

/// Whether `len` bytes may travel through a chunk area of `area` bytes as
/// a ring ([`Team::put_ring_piece`]): more than the area holds, and few
/// enough pieces for the count word.
pub fn fits_ring(area: usize, len: usize) -> bool {
    len > area && len.div_ceil(ring_piece(area)) < 1 << 16
}

/// Whether a message of `len` bytes travels in a slot's lines with
/// [`Team::put_lines`]: more than one line's worth, at most a slot.
pub fn in_lines(len: usize) -> bool {
    len > INLINE && len <= LINES * INLINE
}

/// The count word of [`Team::put_pieces`]: `landed` pieces of step `s`
/// (the step's low 48 bits, which repeat only after 2^24 calls).
fn pieces_landed(s: u64, landed: u64) -> u64 {
    assert!(landed < 1 << 16, "a chunk area of 2^16 pieces");
    s << 16 | landed
}

/// The pieces of step `s` a count word says have landed (0: none, or the
/// word is of another step).
fn landed_of(word: u64, s: u64) -> u64 {
    if word >> 16 == s & ((1 << 48) - 1) {
        word & 0xffff
    } else {
        0
    }
}

/// A chunk span used as a ring ([`Team::put_ring_piece`]): its pieces
/// ([`Team::ring_slots`]), writer and reader agreeing, and the count of
/// those its reader has copied out.
pub struct Ring<'a> {
    pub slots: u64,
    pub consumed: &'a AtomicU64,
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
    /// Whether and how far this rank's chunk-area steps of the call move
    /// through their spans by their own length ([`Segment::spread_area`]),
    /// for calls back to back or on hot buffers: the head it shows with each area says so
    /// (in its call word's top two bits), and its readers find the data there.
    /// Set before the call's first area and kept to its end: a head shown
    /// again later in the call must not send a late reader elsewhere.
    pub spread: Spread,
}

/// Where a writer's chunk-area steps of a call go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Spread {
    /// To the chunk area's place of the step ([`Segment::chunk_area`]).
    #[default]
    Off,
    /// Moved by their own length through the bytes of the chunk areas'
    /// places ([`crate::shm::segment::Geometry::rotations`]): a flat
    /// Allreduce's, whose two writers each read the other's lines (2
    /// ranks, 8 KiB back to back: 1.1 us, 1.3 through the wide span).
    Places,
    /// Moved by their own length through the whole span
    /// ([`crate::shm::segment::Geometry::spread`]): rooted calls', one
    /// writer to a reader (8 KiB back to back, Reduce and Gatherv: 1.15
    /// us through the chunk areas' places, 0.75 through the whole span).
    Wide,
}

/// A head's call word ([`crate::shm::segment::Control`] `head_calls`):
/// the call's number, whole up to 2^40 calls (beyond, a head left from
/// 2^40 calls before would pass for this call's); the turn of the
/// writer's last spread step of the parity ([`TeamState::spread_turns`],
/// modulo 2^22); and in the top two bits how the writer spread its steps
/// in that call ([`Team::spread`]).
const CALL_BITS: u64 = (1 << 40) - 1;
const TURN_SHIFT: u32 = 40;
const TURN_BITS: u64 = (1 << 22) - 1;

impl Spread {
    fn bits(self) -> u64 {
        (self as u64) << 62
    }

    fn of_bits(word: u64) -> Spread {
        match word >> 62 {
            0 => Spread::Off,
            1 => Spread::Places,
            _ => Spread::Wide,
        }
    }
}

impl<M> Team<'_, M> {
    /// The turn of this rank's spread step `s` ([`TeamState::spread_turns`]):
    /// the next of its parity at the step's first place asked for, which
    /// comes before its head is shown ([`Team::show_head`] publishes it).
    fn spread_turn(&self, s: u64) -> u64 {
        let last = &self.state.spread_turns[place(s) % 2];
        let (step, turn) = last.get();
        if step == s {
            return turn & TURN_BITS;
        }
        last.set((s, turn + 1));
        (turn + 1) & TURN_BITS
    }

    /// Starts the node's next call, of `bytes` on this rank with the
    /// registry's algorithm `algorithm`: its steps count from the call's
    /// number, unspread until the algorithm says otherwise.
    pub fn begin(&mut self, algorithm: usize, bytes: usize) {
        self.spread = Spread::Off;
        self.state.call += 1;
        self.state.step = self.state.call << CALL_SHIFT;
        self.state.head = Head::new(self.state.call, algorithm, bytes);
    }

    /// Runs the current call again from its start as `head`'s call (a
    /// Bcast receiver that follows its root's call): only before this rank
    /// has written anything in it.
    pub fn restart_as(&mut self, head: Head) {
        self.state.step = self.state.call << CALL_SHIFT;
        self.state.head = head;
    }

    /// Ends the call: this rank reads and writes nothing more of it, and
    /// says so as its last possible step, which wakes a peer waiting for
    /// a step this rank never took (an erroneous program).
    pub fn end(&self) {
        let last = self.state.call << CALL_SHIFT | STEP_MASK;
        let control = self.seg.control(self.rank);
        // Release: this rank's reads of the call happen before any
        // overwrite by a writer that acquires `done`.
        control.done.store(last, Release);
        // Release: the done above is visible with it (a rank seen at a
        // step is done with the steps before).
        control.ready.store(last, Release);
    }

    /// Starts the next step; returns its number.
    pub fn next_step(&mut self) -> u64 {
        self.state.step += 1;
        assert!(self.state.step & STEP_MASK != STEP_MASK, "a node call of 2^24 steps");
        self.state.step
    }

    /// Where `len` bytes of rank `r`'s step `s` live: the first line of
    /// the step's slot, or the slot's data, if they fit, else its chunk
    /// area, at the place its writer spread it to or not: for a peer's
    /// step, as the head the writer showed with it says (a reader asks
    /// after it has acquired the step's data, which the head's store
    /// precedes, in the line it waited on).
    fn data(&self, r: usize, s: u64, len: usize) -> *mut u8 {
        if len <= INLINE {
            self.seg.slot(r, s, 0).data.as_ptr() as *mut u8
        } else if self.seg.geo.in_ring(len) {
            self.seg.ring_data(r, s)
        } else {
            assert!(len <= self.seg.geo.area(), "{len} bytes do not fit a chunk area");
            let (spread, turn) = if r == self.rank {
                (self.spread, if self.spread == Spread::Off { 0 } else { self.spread_turn(s) })
            } else {
                // Relaxed: ordered by the acquire of the data's `ready` or
                // pieces, which follow the head's store.
                let word = self.seg.control(r).head_calls[place(s) % 2].load(Relaxed);
                (Spread::of_bits(word), word >> TURN_SHIFT & TURN_BITS)
            };
            match spread {
                Spread::Off => self.seg.chunk_area(r, s),
                Spread::Places => self.seg.spread_area(r, s, len, false, turn),
                Spread::Wide => self.seg.spread_area(r, s, len, true, turn),
            }
        }
    }

    /// Where `len` bytes written with [`Team::put`] go (`lines`: or with
    /// [`Team::put_lines`] where they fit).
    pub fn via(&self, len: usize, lines: bool) -> Via {
        if self.seg.geo.in_ring(len) || (lines && in_lines(len)) {
            Via::Slot
        } else {
            Via::Area
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
    /// [`Team::wait_data`] at once: its first line, written last, carries
    /// the step), with this rank's head.
    pub fn put(&mut self, s: u64, src: &[u8]) {
        self.put_stored(s, src, self.streams(src.len()));
    }

    /// [`Team::put`] with the stores of a copy into the chunk area given.
    /// Inline up to the chunk area's copy: a small message's path is a few
    /// stores, where each call's frame cost a fifth of the instructions of
    /// a Gatherv non-root's put.
    #[inline]
    pub fn put_stored(&mut self, s: u64, src: &[u8], stream: bool) {
        if self.seg.geo.in_ring(src.len()) {
            self.slot_writable(s);
            self.my_area_bytes(s, src.len()).copy_from_slice(src);
            let slot = self.seg.slot(self.rank, s, 0);
            // Relaxed: ordered by the release below.
            slot.head.store(self.state.head.0, Relaxed);
            // Release: the slot's data (its first line's, or its data
            // lines') before its step, for wait_data's acquire.
            slot.step.store(s, Release);
        } else {
            self.put_area(s, src, stream);
        }
    }

    /// [`Team::put_stored`] into the chunk area.
    #[inline(never)]
    fn put_area(&mut self, s: u64, src: &[u8], stream: bool) {
        self.writable(s);
        super::stream::copy_with(self.my_area_bytes(s, src.len()), src, stream);
    }

    /// Copies `src` into this rank's chunk area of step `s` in pieces of
    /// `piece` bytes, each counted as it lands, so that a reader
    /// ([`Team::read_pieces`]) copies one out while this rank writes the
    /// next: a transfer costs the larger of the two copies, not their sum.
    /// The head goes out first (a reader checks it before the first
    /// piece); the caller publishes `s` as after [`Team::put`].
    pub fn put_pieces(&mut self, s: u64, src: &[u8], piece: usize, stream: bool) {
        self.writable(s);
        // The place first: a spread step takes its turn there, which the
        // head carries.
        let area = self.data(self.rank, s, src.len());
        self.show_head(s);
        let count = &self.seg.control(self.rank).pieces[place(s) % 2];
        for (i, src) in src.chunks(piece).enumerate() {
            // SAFETY: within the area (`src` fits it); after `writable(s)`
            // only this rank writes there, and readers read only the
            // pieces counted before this one.
            let dst = unsafe { std::slice::from_raw_parts_mut(area.add(i * piece), src.len()) };
            super::stream::copy_with(dst, src, stream);
            // Release: the piece's bytes (and the head) before its count,
            // for read_pieces' acquire.
            count.store(pieces_landed(s, i as u64 + 1), Release);
        }
    }

    /// Copies rank `r`'s bytes of step `s`, written with
    /// [`Team::put_pieces`] in pieces of `piece` bytes, into `into` (as
    /// long as the writer's data), a piece as soon as it lands. A
    /// [`Mismatch`] where `r`'s head says other bytes than `expect`, or
    /// `r` published `s` without its pieces (it runs another call).
    pub fn read_pieces(&self, r: usize, s: u64, into: &mut [u8], piece: usize, expect: Expect) -> Result<(), Mismatch> {
        let total = into.len().div_ceil(piece) as u64;
        let mut copied = 0;
        while copied < total {
            let landed = self.wait_pieces(r, s, copied, expect)?.min(total);
            if copied == 0 {
                self.check(r, s, Via::Area, expect)?;
            }
            if landed <= copied {
                return Err(self.mismatch(r, s));
            }
            let bytes = (copied as usize * piece)..(landed as usize * piece).min(into.len());
            // SAFETY: within the area; these pieces were counted (acquired
            // in wait_pieces), and the writer leaves them alone until this
            // rank is done with `s`.
            let from = unsafe { std::slice::from_raw_parts(self.data(r, s, into.len()).add(bytes.start), bytes.len()) };
            super::stream::copy_out(&mut into[bytes], from, false, self.settings.ahead);
            copied = landed;
        }
        Ok(())
    }

    /// Whether rank `r` writes its data of step `s` in pieces
    /// ([`Team::put_pieces`]): waits until the first lands, or `r`
    /// publishes `s` without any; a [`Mismatch`] as
    /// [`Team::read_pieces`] says.
    pub fn writes_pieces(&self, r: usize, s: u64, expect: Expect) -> Result<bool, Mismatch> {
        Ok(self.wait_pieces(r, s, 0, expect)? > 0)
    }

    /// Waits until more than `copied` of rank `r`'s pieces of step `s`
    /// have landed, or `r` has published `s`: the pieces landed then. A
    /// [`Mismatch`] where `r` shows a head of this call with other bytes
    /// than `expect` (a writer that may itself wait for this rank: a
    /// Gatherv owner that thinks its block direct) and has not published.
    fn wait_pieces(&self, r: usize, s: u64, copied: u64, expect: Expect) -> Result<u64, Mismatch> {
        let control = self.seg.control(r);
        let count = &control.pieces[place(s) % 2];
        let (mut landed, mut polls) = (0, 0u32);
        Backoff::until(|| {
            polls = polls.wrapping_add(1);
            // Acquire: pairs with put_pieces' release, so the pieces
            // counted are visible.
            landed = landed_of(count.load(Acquire), s);
            // Acquire on `ready`: as in wait_ready.
            landed > copied
                || control.ready.load(Acquire) >= s
                || (polls.is_multiple_of(OTHER_POLLS) && self.shows_other_bytes(r, s, expect))
        });
        if landed > copied {
            return Ok(landed);
        }
        if control.ready.load(Acquire) >= s {
            // Published: the count is final (put_pieces counts before).
            return Ok(landed_of(count.load(Acquire), s));
        }
        Err(self.mismatch(r, s))
    }

    /// Bytes of the pieces of a ring ([`Team::put_ring_piece`]).
    pub fn ring_piece(&self) -> usize {
        ring_piece(self.seg.geo.area())
    }

    /// Pieces a ring holds: those of the chunk area (4), or, `wide`, of
    /// its step's whole span ([`crate::shm::segment::Segment::chunk_span`]:
    /// 35 of 64 KiB by default). A writer whose ring is full writes
    /// straight into its reader's buffer, a cross-memory copy a fifth as
    /// fast. Where the reader's copies are fast (hot buffers), a ring of 4
    /// filled whenever it placed its own bytes (2 ranks, hot 8 MiB Gatherv
    /// blocks between barriers, cores sharing a cache: 0.85-0.95 ms
    /// against 0.54-0.62 wide, Intel MPI's own 0.63-0.70); where they are
    /// slow (cold), the writer's share straight in pays, and wide took
    /// 5-10% longer (512 KiB-8 MiB blocks started together;
    /// docs/measurements.md).
    pub fn ring_slots(&self, wide: bool) -> u64 {
        let bytes = if wide { self.seg.chunk_span_bytes() } else { self.seg.geo.area() };
        (bytes / self.ring_piece()) as u64
    }

    /// Whether piece `i` of `ring` may be written: its reader has counted
    /// ([`Team::copy_ring`]) the piece that was in its place copied out.
    pub fn ring_slot_free(&self, i: u64, ring: &Ring<'_>) -> bool {
        // Acquire: pairs with copy_ring's release, so the reader's reads
        // of the piece this one overwrites came first.
        i < ring.slots || ring.consumed.load(Acquire) > i - ring.slots
    }

    /// Waits until piece `i` of `ring` may be written
    /// ([`Team::ring_slot_free`]); a [`Mismatch`] where `reader` ends step
    /// `s` first (it ran another call).
    pub fn wait_ring_slot(&self, s: u64, i: u64, reader: usize, ring: &Ring<'_>) -> Result<(), Mismatch> {
        let done = &self.seg.control(reader).done;
        // Acquire on `done`: as in wait_done.
        Backoff::until(|| self.ring_slot_free(i, ring) || done.load(Acquire) >= s);
        if self.ring_slot_free(i, ring) {
            Ok(())
        } else {
            Err(self.mismatch(reader, s))
        }
    }

    /// Writes piece `i` (`src`, at most [`Team::ring_piece`] bytes) of a
    /// message larger than the chunk area ([`fits_ring`]) into this rank's
    /// `ring` of step `s`, once free ([`Team::ring_slot_free`]), and counts
    /// it landed: the pieces go in order, as [`Team::put_pieces`] counts
    /// them.
    pub fn put_ring_piece(&self, s: u64, i: u64, ring: &Ring<'_>, src: &[u8], stream: bool) {
        debug_assert!(ring.slots == self.ring_slots(false) || ring.slots == self.ring_slots(true));
        let at = (i % ring.slots) as usize * self.ring_piece();
        debug_assert!(src.len() <= self.ring_piece());
        // SAFETY: within the span (at most `ring_slots(true)` pieces fit it); after
        // `writable(s)` only this rank writes there, and the reader is
        // done with the piece that was there (the caller's
        // ring_slot_free).
        let dst = unsafe { std::slice::from_raw_parts_mut(self.seg.chunk_span(self.rank, s).add(at), src.len()) };
        super::stream::copy_with(dst, src, stream);
        // Release: the piece's bytes before its count, for the reader's
        // acquire.
        self.seg.control(self.rank).pieces[place(s) % 2].store(pieces_landed(s, i + 1), Release);
    }

    /// The ring pieces ([`Team::put_ring_piece`]) of a message of `len`
    /// bytes.
    pub fn ring_pieces(&self, len: usize) -> u64 {
        len.div_ceil(self.ring_piece()) as u64
    }

    /// How many of rank `r`'s ring pieces of step `s` have landed; does
    /// not wait.
    pub fn ring_landed(&self, r: usize, s: u64) -> u64 {
        // Acquire: pairs with put_ring_piece's release, so the pieces
        // counted are visible.
        landed_of(self.seg.control(r).pieces[place(s) % 2].load(Acquire), s)
    }

    /// Waits until more than `copied` of rank `r`'s ring pieces of step
    /// `s` have landed, or `r` has published step `after` (its next, once
    /// it has written its last piece) or ended the call: the pieces landed,
    /// and whether `r` has.
    pub fn wait_ring(&self, r: usize, s: u64, after: u64, copied: u64) -> (u64, bool) {
        let ready = &self.seg.control(r).ready;
        // Acquire on `ready`: as in wait_ready; the pieces counted before
        // it are then visible.
        let past = || ready.load(Acquire) >= after;
        Backoff::until(|| self.ring_landed(r, s) > copied || past());
        let past = past();
        (self.ring_landed(r, s), past)
    }

    /// Copies rank `r`'s `ring` pieces `pieces` of step `s`, landed
    /// ([`Team::ring_landed`]), to their places in `into` (the whole
    /// message), counting each consumed once copied, so that the writer
    /// may write over it.
    pub fn copy_ring(
        &self,
        r: usize,
        s: u64,
        into: &mut [u8],
        pieces: std::ops::Range<u64>,
        ring: &Ring<'_>,
        stream: bool,
    ) {
        let (piece, span) = (self.ring_piece(), self.seg.chunk_span(r, s));
        // The span holds `ring_slots(true)` pieces: a slot count beyond
        // would read past it.
        let slots = ring.slots.clamp(1, self.ring_slots(true));
        for i in pieces {
            let at = i as usize * piece;
            let end = (at + piece).min(into.len());
            let from = (i % slots) as usize * piece;
            // SAFETY: within the span; the piece landed (acquired in
            // ring_landed or wait_ring), and the writer leaves it alone
            // until counted in `consumed` below.
            let src = unsafe { std::slice::from_raw_parts(span.add(from), end - at) };
            super::stream::copy_out(&mut into[at..end], src, stream, self.settings.ahead);
            // Release: this rank's reads of the piece before the writer's
            // overwrite, which acquires.
            ring.consumed.store(i + 1, Release);
        }
    }

    /// Rank `r`'s `len` bytes of step `s`, once there. For data written
    /// with [`Team::put`] (a slot's step is set by nothing else); a
    /// [`Mismatch`] where `r` published step `s` without that slot (it
    /// runs another call).
    pub fn wait_data(&self, r: usize, s: u64, len: usize) -> Result<&[u8], Mismatch> {
        self.wait_data_or(r, s, len, || false)
    }

    /// [`Team::wait_data`] that also ends, with a [`Mismatch`], once `r`'s
    /// head of this call beside its `ready` says other bytes than `expect`:
    /// for a reader the writer may itself be waiting for, if the writer
    /// thinks the transfer large (a Gatherv owner whose count differs
    /// waits for the root's table, which the root publishes only for
    /// blocks it expects that large). Such a writer puts its head there
    /// (`writable`) before it waits.
    pub fn wait_data_expecting(&self, r: usize, s: u64, len: usize, expect: Expect) -> Result<&[u8], Mismatch> {
        self.wait_data_or(r, s, len, || self.shows_other_bytes(r, s, expect))
    }

    /// Whether rank `r` shows a head of this call with its area of step
    /// `s` whose bytes are not `expect`'s: a writer that may itself wait
    /// for this rank before it publishes.
    fn shows_other_bytes(&self, r: usize, s: u64, expect: Expect) -> bool {
        expect.0.is_some_and(|bytes| self.area_head(r, s).is_some_and(|h| !h.has_bytes(bytes)))
    }

    /// [`Team::wait_data`], ending early with a [`Mismatch`] once `other`.
    #[inline]
    fn wait_data_or(&self, r: usize, s: u64, len: usize, other: impl Fn() -> bool) -> Result<&[u8], Mismatch> {
        if self.seg.geo.in_ring(len) {
            self.wait_slot_or(r, s, 1, other)?;
        } else {
            let ready = &self.seg.control(r).ready;
            // Acquire: as in wait_ready.
            Backoff::until(|| ready.load(Acquire) >= s || other());
            if ready.load(Acquire) < s {
                return Err(self.mismatch(r, s));
            }
        }
        Ok(self.area_bytes(r, s, len))
    }

    /// Waits until the first `lines` lines of rank `r`'s slot hold step
    /// `s`, or `r` has published `s` (or ended the call) without them, or
    /// `other` (checked with `ready`, in the same line): a [`Mismatch`]. A
    /// writer publishes after its lines, so a reader that sees the publish
    /// sees the lines of a matching call.
    #[inline]
    fn wait_slot_or(&self, r: usize, s: u64, lines: usize, other: impl Fn() -> bool) -> Result<(), Mismatch> {
        let lines = || (0..lines).map(|i| self.seg.slot(r, s, i));
        let ready = &self.seg.control(r).ready;
        let mut polls = 0u32;
        // Acquire: pairs with each line's release in put/put_lines, so its
        // data is visible. Each pass loads every line (no short cut), so
        // that their misses overlap. `ready` (and `other`), which only an
        // erroneous program's writer publishes without the lines, once in
        // OTHER_POLLS passes: polled every time, its line went back and
        // forth while the writer stored `ready` and `done` (osu mode, Open
        // MPI host, 8-256 B Reduce and Gatherv: see docs/measurements.md).
        Backoff::until(|| {
            polls = polls.wrapping_add(1);
            lines().fold(true, |all, line| (line.step.load(Acquire) >= s) & all)
                || (polls.is_multiple_of(OTHER_POLLS) && (ready.load(Acquire) >= s || other()))
        });
        if lines().all(|line| line.step.load(Acquire) == s) {
            Ok(())
        } else {
            Err(self.mismatch(r, s))
        }
    }

    /// Checks rank `r`'s head for step `s` (after waiting for the step)
    /// against this rank's call, with bytes as `expect` says. The head is
    /// looked for where `via` says the data went, then (a head that is not
    /// of this call there) in the other place before it counts as none.
    pub fn check(&self, r: usize, s: u64, via: Via, expect: Expect) -> Result<(), Mismatch> {
        let head = match via {
            Via::Slot => self.slot_head(r, s),
            Via::Area => self.area_head(r, s),
        };
        let head = head.or_else(|| self.head_of(r, s));
        match head {
            Some(h) if h.same_call(self.state.head) && expect.0.is_none_or(|bytes| h.has_bytes(bytes)) => Ok(()),
            _ => Err(Mismatch::new(r, head.or_else(|| self.any_head(r, s)), expect.0)),
        }
    }

    /// Rank `r`'s head of this call for step `s`, wherever it wrote one.
    fn head_of(&self, r: usize, s: u64) -> Option<Head> {
        self.area_head(r, s).or_else(|| self.slot_head(r, s))
    }

    /// The head in rank `r`'s slot of step `s`, if written in this call
    /// (the slot's step, whole, says which).
    fn slot_head(&self, r: usize, s: u64) -> Option<Head> {
        let line = self.seg.slot(r, s, 0);
        // Acquire: pairs with the writer's release of the line's step, so
        // the head is the one written with it (or a later one).
        let of_call = line.step.load(Acquire) >> CALL_SHIFT == self.state.call;
        // Relaxed: ordered by the acquire above.
        of_call.then(|| Head(line.head.load(Relaxed)))
    }

    /// The head with rank `r`'s area of step `s`, if written in this call.
    fn area_head(&self, r: usize, s: u64) -> Option<Head> {
        self.parity_head(r, place(s) % 2)
    }

    /// The head with rank `r`'s area of parity `parity`, if written in
    /// this call (its call word, whole, says which).
    fn parity_head(&self, r: usize, parity: usize) -> Option<Head> {
        let control = self.seg.control(r);
        // Acquire: pairs with show_head's release, so the head is the one
        // written for that call.
        let of_call = control.head_calls[parity].load(Acquire) & CALL_BITS == self.state.call & CALL_BITS;
        // Relaxed: ordered by the acquire above.
        of_call.then(|| Head(control.heads[parity].load(Relaxed)))
    }

    /// The mismatch of a peer that did not write what this rank waits for.
    pub fn mismatch(&self, r: usize, s: u64) -> Mismatch {
        Mismatch::new(r, self.head_of(r, s).or_else(|| self.any_head(r, s)), self.mine().0)
    }

    /// Any head rank `r` wrote in this call (with either chunk area, or in
    /// step `s`'s slot): what a mismatch reports of a peer that stopped
    /// before step `s`. Never a proof that `r`'s data of `s` is there.
    fn any_head(&self, r: usize, s: u64) -> Option<Head> {
        self.parity_head(r, 0).or_else(|| self.parity_head(r, 1)).or_else(|| self.slot_head(r, s))
    }

    /// Writes a message [`in_lines`] to the lines of the step's slot,
    /// each stored with the step, for [`Team::wait_lines`] (and nothing
    /// else) to read. A reader waits for all its lines at once and has the
    /// data with those misses, where the slot's data lines cost a second
    /// miss after its first line's: 2 ranks on cores apart, Open MPI,
    /// calls back to back, 64-144 B Bcast 0.79-0.82 -> 0.64-0.69 us,
    /// Gatherv 0.79-0.85 -> 0.63-0.72, no slower on cores that share a
    /// cache or in the other modes, though a reader that comes early polls
    /// lines the writer has yet to write (docs/measurements.md).
    pub fn put_lines(&mut self, s: u64, src: &[u8]) {
        debug_assert!(in_lines(src.len()));
        self.slot_writable(s);
        for (i, piece) in src.chunks(INLINE).enumerate() {
            let line = self.seg.slot(self.rank, s, i);
            // SAFETY: a line's data holds INLINE >= piece.len() bytes, which
            // only this rank writes, and no one reads them now: the readers
            // of the slot's last step are done with it.
            unsafe { std::ptr::copy_nonoverlapping(piece.as_ptr(), line.data.as_ptr() as *mut u8, piece.len()) };
            // Relaxed: ordered by the release below.
            line.head.store(self.state.head.0, Relaxed);
            // Release: the line's data before its step, for wait_lines' acquire.
            line.step.store(s, Release);
        }
    }

    /// Waits until every rank is done with the last step this rank wrote
    /// its slot of step `s` for, and records `s` as that step.
    #[inline]
    fn slot_writable(&mut self, s: u64) {
        if self.state.slot_written.len() != self.seg.geo.ring {
            self.new_ring();
        }
        let slot = self.seg.geo.ring_slot(s);
        if self.state.slot_written[slot] != s {
            self.wait_done(self.state.slot_written[slot]);
            self.state.slot_written[slot] = s;
        }
    }

    /// The ring's record of this rank's writes, at its first write.
    #[cold]
    fn new_ring(&mut self) {
        self.state.slot_written = vec![0; self.seg.geo.ring];
    }

    /// Copies rank `r`'s message of step `s` (written with
    /// [`Team::put_lines`], as long as `into`) into `into` once there; a
    /// [`Mismatch`] as [`Team::wait_data`] says.
    pub fn wait_lines(&self, r: usize, s: u64, into: &mut [u8]) -> Result<(), Mismatch> {
        self.wait_lines_expecting(r, s, into.len(), Expect(None))?;
        self.copy_lines(r, s, into);
        Ok(())
    }

    /// Waits for rank `r`'s message of `len` bytes of step `s` (written
    /// with [`Team::put_lines`]); a [`Mismatch`] as
    /// [`Team::wait_data_expecting`] says, for a reader that checks the
    /// writer's head before it copies ([`Team::copy_lines`]).
    pub fn wait_lines_expecting(&self, r: usize, s: u64, len: usize, expect: Expect) -> Result<(), Mismatch> {
        debug_assert!(in_lines(len));
        self.wait_slot_or(r, s, len.div_ceil(INLINE), || self.shows_other_bytes(r, s, expect))
    }

    /// Copies rank `r`'s message of step `s` (written with
    /// [`Team::put_lines`], as long as `into`, waited for) into `into`.
    pub fn copy_lines(&self, r: usize, s: u64, into: &mut [u8]) {
        let lines = (0..into.len().div_ceil(INLINE)).map(|i| self.seg.slot(r, s, i));
        for (piece, line) in into.chunks_mut(INLINE).zip(lines) {
            // SAFETY: the line holds piece.len() bytes of step s (acquired
            // by the caller's wait_lines_expecting), which the writer leaves
            // alone until this rank is done with s.
            unsafe { std::ptr::copy_nonoverlapping(line.data.as_ptr() as *const u8, piece.as_mut_ptr(), piece.len()) };
        }
    }

    /// Waits for every other rank's `len` bytes of step `s` (written with
    /// [`Team::put`]), after this rank has published `s`.
    pub fn wait_others_data(&mut self, s: u64, len: usize) -> Result<(), Mismatch> {
        if self.seg.geo.in_ring(len) {
            for r in (0..self.size).filter(|&r| r != self.rank) {
                self.wait_data(r, s, len)?;
            }
        } else {
            // Every rank's `ready`, which also tells what all have finished.
            self.wait_all_ready(s);
        }
        Ok(())
    }

    /// Checks every other rank's head for step `s` (after waiting for
    /// it), expecting this rank's call and bytes.
    pub fn check_others(&self, s: u64, via: Via) -> Result<(), Mismatch> {
        let mine = self.mine();
        (0..self.size).filter(|&r| r != self.rank).try_for_each(|r| self.check(r, s, via, mine))
    }

    /// What a peer of the same call has: this rank's bytes.
    pub fn mine(&self) -> Expect {
        Expect(Some((self.state.head.0 & Head::BYTES) as usize))
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
    /// for step `s` (at once if it already may: a step's writes may come
    /// in several parts); [`Team::publish`] puts its head with them. The
    /// slot too: a step's data that fits the ring lives there
    /// ([`Team::my_area_bytes`]).
    pub fn writable(&mut self, s: u64) {
        let parity = place(s) % 2;
        if self.state.area_written[parity] != s {
            self.wait_done(self.state.area_written[parity]);
            self.state.area_written[parity] = s;
        }
        self.slot_writable(s);
    }

    /// Puts this rank's head with its area of step `s` (made writable)
    /// before the step is published: for a rank about to wait on a peer
    /// that may be waiting on it ([`Team::wait_data_expecting`]).
    pub fn show_head(&self, s: u64) {
        let control = self.seg.control(self.rank);
        let parity = place(s) % 2;
        // Relaxed: ordered by the release below (and that of the publish).
        control.heads[parity].store(self.state.head.0, Relaxed);
        // Release: the head before its call, for parity_head's acquire.
        let turn = self.state.spread_turns[parity].get().1 & TURN_BITS;
        let word = self.state.call & CALL_BITS | turn << TURN_SHIFT | self.spread.bits();
        control.head_calls[parity].store(word, Release);
    }

    /// Waits until every rank is done with step `need` (inline where this
    /// rank knows so already, as a writer ahead of its readers mostly does).
    #[inline]
    pub fn wait_done(&mut self, need: u64) {
        if self.state.known_done < need {
            self.wait_done_for(need);
        }
    }

    /// [`Team::wait_done`] where this rank has to look.
    #[inline(never)]
    fn wait_done_for(&mut self, need: u64) {
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
        // The head goes with the areas this call made writable up to `s`
        // (a publish may cover earlier steps), in the line of `ready` right
        // before it: stored at `writable`, it would hand the line to a
        // poller once more before the data is there (0.1 us a 512 B
        // Gatherv). Not with an area of an earlier call: it may still be
        // read under its older head.
        let first = self.state.call << CALL_SHIFT;
        for written in self.state.area_written {
            if (first..=s).contains(&written) {
                self.show_head(written);
            }
        }
        // Release: the area's bytes, the words and the head written before
        // are visible to whoever acquires `ready >= s`.
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
        &self.seg.control(r).words[place(s) % 2][i]
    }

    /// Rank `r`'s word `i` of step `s` (after [`Team::wait_ready`] on `r`).
    pub fn word(&self, r: usize, s: u64, i: usize) -> u64 {
        // Relaxed: ordered by the acquire in wait_ready.
        self.shared_word(r, s, i).load(Relaxed)
    }

    /// Waits until rank `r` has ended the node's previous call
    /// ([`Team::end`]; at once in the first): what it stored before, such
    /// as its wishes, is visible after.
    pub fn wait_previous_end(&self, r: usize) {
        if self.state.call <= 1 {
            return;
        }
        let end = (self.state.call - 1) << CALL_SHIFT | STEP_MASK;
        let done = &self.seg.control(r).done;
        // Acquire: pairs with `end`'s release of `done`.
        Backoff::until(|| done.load(Acquire) >= end);
    }

    /// Waits until rank `r` has published step `s`.
    pub fn wait_ready(&self, r: usize, s: u64) {
        let ready = &self.seg.control(r).ready;
        // Acquire: pairs with `publish`'s release; `r`'s data of step `s`
        // (and its words) are visible after it.
        Backoff::until(|| ready.load(Acquire) >= s);
    }

    /// Whether every other rank has published step `s` (a glance: the
    /// data is the caller's only after [`Team::wait_all_ready`]).
    pub fn others_ready(&self, s: u64) -> bool {
        // Relaxed: a hint; the wait that follows acquires.
        (0..self.size).filter(|&r| r != self.rank).all(|r| self.seg.control(r).ready.load(Relaxed) >= s)
    }

    /// Waits until every rank has published step `s`. Each has then
    /// finished its steps before `s` (see the module documentation), which
    /// [`Team::writable`] relies on without looking again.
    pub fn wait_all_ready(&mut self, s: u64) {
        for r in 0..self.size {
            self.wait_ready(r, s);
        }
        self.others_published(s);
    }

    /// Every other rank has been seen publishing step `s` or storing data
    /// of it, so (see the module doc) every rank is done with `s - 1`: a
    /// later write to a place last written before `s` needs no look at
    /// their `done` lines.
    pub fn others_published(&mut self, s: u64) {
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
