//! The shared segment of a node: where everything lives, and typed access
//! to it.
//!
//! One segment per node communicator, mapped by every rank of the node. It
//! starts with a header (owned by local rank 0): the seed-002 set
//! counters, the window's words (hot Bcasts, 2-rank Gatherv blocks) and,
//! page-aligned, its bytes;
//! then one page-aligned block per rank, placed on that rank's NUMA node
//! by first touch (the owner initialises it):
//!
//! ```text
//! header:           set controls[sets] (two lines each)
//!                   window: readers' done words[ranks], piece flags
//!                   [pieces] (one line each) | window bytes
//! block of rank r:  control page: ready, done (one cache line)
//!                                 published words (addresses for zero copy)
//!                                 wishes (two lines of bytes)
//!                                 ring of d small-message slots: first
//!                                 lines, data, further lines (per slot)
//!                                 fragment controls[s] (one line each)
//!                   chunk area 0 | chunk area 1   (double buffer by step parity)
//!                   queue: s slots of f bytes    (seed 002's broadcast queue)
//! ```
//!
//! Nothing here is specific to MPI: tests map a segment in a heap buffer
//! and run ranks as threads.

use std::sync::atomic::{AtomicU64, AtomicU8};

/// Cache line: every flag has one of its own (no false sharing).
pub const LINE: usize = 64;
/// Page: blocks are page-aligned so that each can live on its owner's NUMA
/// node (placement is per page).
pub const PAGE: usize = 4096;

const fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// Sizes that fix the segment's layout; the same on every rank of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Ranks on the node.
    pub ranks: usize,
    /// Bytes of the chunks most algorithms move through a chunk area.
    pub chunk: usize,
    /// Bytes of the chunks a flat Allreduce moves (fewer handoffs, and
    /// room for ordinary stores to pay, the adaptation module's stores); the two chunk
    /// areas per rank hold the larger of the two.
    pub allreduce_chunk: usize,
    /// Broadcast queue: slots per rank and bytes per slot.
    pub slots: usize,
    pub slot_bytes: usize,
    /// Sets the queue is split into (the seed's q).
    pub sets: usize,
    /// The queue's first slots, through which messages new to their
    /// root cycle; messages from the root's last buffer cycle through all
    /// ([`Geometry::queue_sets`]).
    pub cold_slots: usize,
    /// Small messages: slots per rank (the ring's length, `d`, a power of
    /// two, at least 2: like the two chunk areas, so that an algorithm may
    /// write a step while its peers still read the one before), and the
    /// bytes a slot holds beyond its first line's.
    pub ring: usize,
    pub ring_bytes: usize,
    /// Places each chunk area moves through, a chunk (in whole pages)
    /// apart, from one of its uses to the next (a power of two; 1: it
    /// stays put). A writer's stores into lines that a reader on another
    /// core still holds wait for each line (2 ranks, an EPYC VM with 1 MiB
    /// of L2 per core: 32 KiB written in 3.5 us into lines last read 128
    /// KiB of data ago, 1.0 us into lines last read 2 MiB ago); moved on,
    /// the areas' lines have left the reader's L2 by the time they come
    /// back (a 2 MiB Reduce, 2 ranks: 175-210 us staying put, 83-117
    /// moving through 4-16 places; docs/node-layer.md).
    pub rotations: usize,
    /// Places, a chunk apart, that a chunk area's span holds (at least
    /// `rotations`): the bytes through which the steps of a writer that
    /// spreads them move ([`Segment::spread_area`]). Calls back to back
    /// reuse lines sooner than cold ones, and a Gatherv owner of rotating
    /// roots writes one span only (2 ranks, blocks back to back, µs per
    /// call, spread through 8 places against 32: 32 KiB 3.3 / 2.0, 128
    /// KiB 8.5 / 5.6; docs/measurements.md).
    pub spread: usize,
    /// The window every writer of a hot Bcast or 2-rank Gatherv block
    /// writes into and every reader reads from
    /// ([`crate::algos::node::window`]): its bytes (0:
    /// none), and the pieces it is flagged in
    /// ([`Geometry::window_piece`] bytes each).
    pub window: usize,
    pub window_pieces: usize,
}

impl Geometry {
    /// The layout users get without PCOLL_SHM_* settings (`ranks` aside)
    /// where the budget allows: 64 KiB chunks (256 KiB for a flat
    /// Allreduce), a queue of [`QUEUE_SLOTS`] slots of 4 KiB in sets of
    /// [`SLOTS_PER_SET`], a ring of [`RING`] slots of [`RING_BYTES`].
    /// The model's fragments up to 335 KiB messages are a page anyway.
    pub const DEFAULT: Geometry = Geometry {
        ranks: 0,
        chunk: 64 << 10,
        allreduce_chunk: 256 << 10,
        slots: QUEUE_SLOTS,
        slot_bytes: 4 << 10,
        sets: QUEUE_SLOTS / SLOTS_PER_SET,
        cold_slots: COLD_QUEUE_SLOTS,
        ring: RING,
        ring_bytes: RING_BYTES,
        rotations: ROTATIONS,
        spread: SPREAD,
        window: WINDOW_BYTES,
        window_pieces: WINDOW_BYTES / WINDOW_PIECE,
    };

    /// The slot of the ring that step `s` uses: its [`place`] modulo the
    /// ring's length, a power of two (a mask: no division on every poll;
    /// docs/measurements.md).
    pub fn ring_slot(&self, s: u64) -> usize {
        debug_assert!(self.ring.is_power_of_two());
        place(s) & (self.ring - 1)
    }

    /// Whether a step's `len` bytes travel in its slot of the ring (else
    /// in a chunk area): up to a line's [`INLINE`] bytes, or the slot's
    /// data.
    pub fn in_ring(&self, len: usize) -> bool {
        len <= INLINE.max(self.ring_bytes)
    }
}

/// Words a rank publishes for its peers during a call (buffer addresses
/// and lengths for zero copy).
pub const PUBLISHED: usize = 6;

/// Bytes of data that travel in a slot's line, next to their step and
/// the writer's [`Head`](super::team::Head).
pub const INLINE: usize = 48;

/// Lines of a slot: a message (an Allreduce or Reduce chunk, a Bcast, a
/// Gatherv block) of up to `LINES * INLINE` bytes travels in lines that
/// each carry its step ([`super::team::Team::put_lines`]): an Allreduce
/// of 64 B in 0.62 us against 0.87 through a chunk area (2 ranks, cores
/// apart). Not beyond: with 16 lines, 512 and 896 B got slower, the
/// readers polling lines not yet written (docs/measurements.md). A
/// constant of the layout: the threaded tests choose their lengths
/// around `LINES * INLINE`.
pub const LINES: usize = 3;

/// Default slots of a rank's Bcast queue (PCOLL_SHM_SLOTS), where the
/// budget allows ([`crate::select::config::ShmConfig::geometry`]): 4 MiB,
/// so that a set comes back to a reader only when its lines have left the
/// reader's L2, for messages from the root's last buffer; the others
/// cycle through the first [`COLD_QUEUE_SLOTS`]. A root's copy-in to
/// lines a reader still holds waits for each: a ring written 32 KiB at a
/// time and read by another core took 3.5 us a write at up to 512 KiB,
/// 2.64 at 1 MiB, 1.01 at 2 MiB, 0.85 at 4 MiB (an EPYC VM, 1 MiB of L2
/// per core). The queue's Bcast at 2 ranks back to back on hot buffers
/// through 2 / 4 MiB: 128 KiB 7.6-7.7 / 5.4 us, 512 KiB 22-24 / 20-21
/// (docs/measurements.md).
pub const QUEUE_SLOTS: usize = 1024;

/// Slots of the queue that messages new to their root cycle through
/// (2 MiB): on rotating cold buffers, 4 MiB lost what 2 MiB gains, its
/// lines having likely left L3 as well by the time they come back (2
/// ranks, 32 KiB 4.2 against 4.9 us, 512 KiB 48 against 56).
pub const COLD_QUEUE_SLOTS: usize = 512;

/// The fewest slots the queue gets by default where the budget is small
/// (1 MiB).
pub const LEAST_QUEUE_SLOTS: usize = 256;

/// Slots per set of the queue by default (PCOLL_SHM_SETS): a set of 16
/// KiB, one handshake per 16 KiB rather than per page for the many-rank
/// queue (4 ranks, back to back, 8 and 16 KiB: 2.28-2.99 and 3.18-3.67
/// us against 2.99-3.05 and 3.96-5.07 with a set per slot).
pub const SLOTS_PER_SET: usize = 4;

/// Default slots per rank (PCOLL_SHM_RING): a step's slot is reused
/// `ring` places later ([`place`]), so a writer of small messages whom no
/// one answers (a Bcast root, a Reduce or Gatherv non-root) looks at its
/// readers' progress once in that many calls, and runs that many calls
/// ahead of them at most.
pub const RING: usize = 16;

/// Default bytes of a slot's data beyond its first line
/// (PCOLL_SHM_RING_BYTES): a message of up to that many bytes travels in
/// the slot, its step and head written last into the first line, which is
/// the only line a reader polls; larger ones go through the chunk areas,
/// reused every other step.
pub const RING_BYTES: usize = 256;

/// Default places of a chunk area (PCOLL_SHM_ROTATE), where the budget
/// allows ([`crate::select::config::ShmConfig::rotations`]): 8 places of
/// 64 KiB bring a span's lines back after 1 MiB of a 64 KiB-chunked
/// stream per span, at 896 KiB more per rank (a 2 MiB Reduce at 2 ranks:
/// 92-97 us; 16 places: 83, 4: 117, 1: 175-210).
pub const ROTATIONS: usize = 8;

/// Default places whose bytes spread steps move through
/// (PCOLL_SHM_SPREAD), where the budget allows
/// ([`crate::select::config::ShmConfig::spread`]): a span of 2.2 MiB,
/// about what the reader's caches hold of lines on this EPYC VM, at 3
/// MiB more per rank than 8 places.
pub const SPREAD: usize = 32;

/// Default bytes of the window of hot Bcasts (and 2-rank Gatherv blocks),
/// where the budget allows
/// ([`crate::select::config::ShmConfig::geometry`]): messages up to it from
/// a writer that read the last one go through it (2 ranks, roots
/// alternating, bare handover of 512 KiB in 13.3 us against 41 through a
/// ring of 4 MiB; docs/measurements.md).
pub const WINDOW_BYTES: usize = 512 << 10;

/// Bytes of a window piece: the reader copies one while the writer writes
/// the next (bare handover, 128 KiB in pieces of 4 / 8 / 12 / 16 / 32 KiB:
/// 4.81 / 4.09 / 3.55 / 3.41 / 3.71 us).
pub const WINDOW_PIECE: usize = 16 << 10;

/// Steps are numbered per call: step `i` of a node's call `c` is
/// `c << CALL_SHIFT | i`, so that a call whose ranks disagree (an
/// erroneous program whose counts differ) cannot shift the steps of the
/// calls after it. A call takes fewer than `1 << CALL_SHIFT` steps.
pub const CALL_SHIFT: u32 = 24;
/// The step within its call of a step number.
pub const STEP_MASK: u64 = (1 << CALL_SHIFT) - 1;

/// Where step `s` lives among the places that are reused in turn (slots,
/// chunk areas and their words): its call's number plus its number in the
/// call, so consecutive one-step calls use consecutive slots, and the
/// place depends on nothing an earlier call did.
pub const fn place(s: u64) -> usize {
    ((s >> CALL_SHIFT) + (s & STEP_MASK)) as usize
}

/// The first cache lines of a rank's control page.
#[repr(C, align(64))]
pub struct Control {
    /// The last step whose data this rank has published.
    pub ready: AtomicU64,
    /// The last step this rank has finished reading others' data for.
    pub done: AtomicU64,
    /// This rank's [`Head`](super::team::Head) with the chunk area (and
    /// words) of each parity, in `ready`'s line: a reader that waited for
    /// `ready` has it with the same miss.
    pub heads: [AtomicU64; 2],
    /// The call each of `heads` was written in, whole: a head carries only
    /// the low bits of its call's number, which repeat every 2^20 calls;
    /// with it how the writer spread its steps in that call and where its
    /// last spread step of the parity went ([`super::team::Spread`],
    /// [`Segment::spread_area`]).
    pub head_calls: [AtomicU64; 2],
    /// The pieces of the chunk area of each parity written so far, with
    /// their step ([`super::team::Team::put_pieces`]), in `ready`'s line:
    /// a reader copies each piece while the writer writes the next.
    pub pieces: [AtomicU64; 2],
    /// Published words, one set per step parity like the chunk areas.
    pub words: [[AtomicU64; PUBLISHED]; 2],
    _pad2: [u64; 4],
    /// Bytes this rank publishes for its peers' run-time choices, outside
    /// the step protocol (the adaptation above gives them their meaning);
    /// 0 until first written. Written rarely, in lines of their own.
    pub wishes: [AtomicU8; 2 * LINE],
}

/// Up to [`INLINE`] bytes of one step and the step's number, in one cache
/// line: a reader waiting for the step has the data with the same miss.
/// A slot of the ring has [`LINES`] of them and `ring_bytes` of data; a
/// message of one line uses the first, a longer one the data (or, with
/// [`super::team::Team::put_lines`], the lines).
#[repr(C, align(64))]
pub struct Slot {
    pub step: AtomicU64,
    /// The writer's [`Head`](super::team::Head) for the step.
    pub head: AtomicU64,
    pub data: [AtomicU64; INLINE / 8],
}

/// A seed-002 set counter pair: the operation that filled the set last,
/// and how many readers are still using it. Each in its own line.
#[repr(C, align(64))]
pub struct SetControl {
    pub op: AtomicU64,
    _pad: [u64; 7],
    pub readers: AtomicU64,
    _pad2: [u64; 7],
}

/// One line holding one flag (a fragment control of seed 002).
#[repr(C, align(64))]
pub struct Flag {
    pub value: AtomicU64,
    _pad: [u64; 7],
}

impl Geometry {
    /// The sets a queue Bcast cycles through: all of them (`wide`, a
    /// message from the root's last buffer), or those of the first
    /// `cold_slots` slots; at least one.
    pub fn queue_sets(&self, wide: bool) -> usize {
        let sets = self.sets.clamp(1, self.slots);
        if wide {
            return sets;
        }
        (self.cold_slots.min(self.slots) / (self.slots / sets)).max(1)
    }

    pub fn header_bytes(&self) -> usize {
        self.window_at() + round_up(self.window, PAGE)
    }

    /// Where the window's words lie in the header: the readers' done
    /// words, then the pieces' flags.
    fn window_words_at(&self) -> usize {
        self.sets * std::mem::size_of::<SetControl>()
    }

    /// Where the window's bytes lie in the header, page-aligned.
    fn window_at(&self) -> usize {
        round_up(self.window_words_at() + (self.ranks + self.window_pieces) * LINE, PAGE)
    }

    /// This geometry with a window of `bytes` in pieces of
    /// [`WINDOW_PIECE`] (none: 0).
    pub fn with_window(self, bytes: usize) -> Geometry {
        Geometry { window: bytes, window_pieces: bytes.div_ceil(WINDOW_PIECE), ..self }
    }

    /// Bytes of a window piece (the last of a message may be shorter): a
    /// message that fills the window takes every piece's flag, no more.
    pub fn window_piece(&self) -> usize {
        self.window.div_ceil(self.window_pieces.max(1)).max(1)
    }

    fn control_bytes(&self) -> usize {
        round_up(self.fragment_controls_at() + self.slots * LINE, PAGE)
    }

    /// Bytes of one slot's data, whole lines.
    fn ring_slot_bytes(&self) -> usize {
        round_up(self.ring_bytes, LINE)
    }

    /// Where the ring lies in a rank's block, right after the control
    /// lines: the slots' first lines side by side, in the page of `ready`
    /// and `done` (where they were before the ring had data lines, which
    /// kept the timings of one-line messages), then their data, then
    /// their further lines.
    fn ring_lines_at(&self) -> usize {
        std::mem::size_of::<Control>()
    }

    fn ring_data_at(&self) -> usize {
        self.ring_lines_at() + self.ring * LINE
    }

    fn ring_more_lines_at(&self) -> usize {
        self.ring_data_at() + self.ring * self.ring_slot_bytes()
    }

    /// Where seed 002's fragment controls lie in a rank's block.
    fn fragment_controls_at(&self) -> usize {
        self.ring_more_lines_at() + self.ring * (LINES - 1) * LINE
    }

    /// Bytes a chunk area holds.
    pub fn area(&self) -> usize {
        self.chunk.max(self.allreduce_chunk)
    }

    /// Bytes of the span a chunk area moves through: its places
    /// ([`Geometry::rotations`]), or those spread steps move through
    /// ([`Geometry::spread`]), the more.
    fn chunk_bytes(&self) -> usize {
        let places = self.rotations.max(self.spread).max(1);
        round_up(self.area() + (places - 1) * self.rotation_bytes(), PAGE)
    }

    /// Bytes between a chunk area's places: a chunk, whole pages (every
    /// place page-aligned, as the first).
    fn rotation_bytes(&self) -> usize {
        round_up(self.chunk, PAGE)
    }

    /// Bytes of one rank's block.
    pub fn block_bytes(&self) -> usize {
        self.control_bytes() + 2 * self.chunk_bytes() + round_up(self.slots * self.slot_bytes, PAGE)
    }

    /// Bytes of the whole segment.
    pub fn total_bytes(&self) -> usize {
        self.header_bytes() + self.ranks * self.block_bytes()
    }

    /// The bytes local rank `r` reserves of the segment, as (offset,
    /// length): its block, and for rank 0 the header before it.
    pub fn own_range(&self, r: usize) -> (usize, usize) {
        match r {
            0 => (0, self.header_bytes() + self.block_bytes()),
            _ => (self.block(r), self.block_bytes()),
        }
    }

    /// Offset of rank `r`'s block.
    pub fn block(&self, r: usize) -> usize {
        debug_assert!(r < self.ranks);
        self.header_bytes() + r * self.block_bytes()
    }
}

/// A mapped segment: its base address and geometry. The mapping outlives
/// every use (it is unmapped only when the communicator is freed).
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    base: *mut u8,
    pub geo: Geometry,
    at: Offsets,
}

/// The geometry's offsets that every step looks up, computed once: derived
/// on every access they took some ten page and line roundings each, 14% of
/// the instructions of an 8-byte Reduce at a non-root (callgrind, Open MPI,
/// 2 ranks).
#[derive(Clone, Copy, Debug)]
struct Offsets {
    header: usize,
    /// Within the header: the window's words and bytes.
    window_words: usize,
    window: usize,
    block: usize,
    /// Within a block: the ring's data, its further lines, the fragment
    /// controls, the first chunk area, the queue's slots.
    ring_data: usize,
    ring_more_lines: usize,
    fragment_controls: usize,
    chunk_areas: usize,
    queue_slots: usize,
    /// Bytes of one ring slot's data and of the span of one chunk area.
    ring_slot: usize,
    chunk: usize,
    /// Bytes of a span that its chunk area's places cover.
    rotating: usize,
    /// A chunk area's places: their distance, and their count less one (a
    /// mask).
    rotation: usize,
    rotation_mask: usize,
}

impl Offsets {
    fn of(geo: &Geometry) -> Offsets {
        Offsets {
            header: geo.header_bytes(),
            window_words: geo.window_words_at(),
            window: geo.window_at(),
            block: geo.block_bytes(),
            ring_data: geo.ring_data_at(),
            ring_more_lines: geo.ring_more_lines_at(),
            fragment_controls: geo.fragment_controls_at(),
            chunk_areas: geo.control_bytes(),
            queue_slots: geo.control_bytes() + 2 * geo.chunk_bytes(),
            ring_slot: geo.ring_slot_bytes(),
            chunk: geo.chunk_bytes(),
            rotating: Geometry { spread: 1, ..*geo }.chunk_bytes(),
            rotation: geo.rotation_bytes(),
            rotation_mask: geo.rotations.max(1) - 1,
        }
    }
}

// SAFETY: the segment is shared memory by design: every access to it goes
// through atomics or through regions that the step protocol hands to one
// writer at a time.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl Segment {
    /// # Safety
    /// `base` points to `geo.total_bytes()` bytes, page-aligned, mapped and
    /// zero-initialised, that stay mapped while the segment is used.
    pub unsafe fn new(base: *mut u8, geo: Geometry) -> Segment {
        debug_assert_eq!(base as usize % PAGE, 0);
        Segment { base, geo, at: Offsets::of(&geo) }
    }

    /// Offset of rank `r`'s block ([`Geometry::block`]).
    #[inline]
    fn block(&self, r: usize) -> usize {
        debug_assert!(r < self.geo.ranks);
        self.at.header + r * self.at.block
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }

    fn at<T>(&self, offset: usize) -> &T {
        debug_assert!(offset + std::mem::size_of::<T>() <= self.geo.total_bytes());
        debug_assert_eq!(offset % std::mem::align_of::<T>(), 0);
        // SAFETY: in bounds and aligned (layout above); the types placed
        // here are atomics, valid for any bit pattern including zero.
        unsafe { &*(self.base.add(offset) as *const T) }
    }

    pub fn control(&self, r: usize) -> &Control {
        self.at(self.block(r))
    }

    pub fn set_control(&self, set: usize) -> &SetControl {
        self.at(set * std::mem::size_of::<SetControl>())
    }

    /// Rank `r`'s word of the hot Bcast window: the last window call it
    /// has read.
    pub fn window_done(&self, r: usize) -> &Flag {
        debug_assert!(r < self.geo.ranks);
        self.at(self.at.window_words + r * LINE)
    }

    /// The flag of the window's piece `i`: the last window call whose
    /// bytes it holds.
    pub fn window_flag(&self, i: usize) -> &Flag {
        debug_assert!(i < self.geo.window_pieces);
        self.at(self.at.window_words + (self.geo.ranks + i) * LINE)
    }

    /// The window's `len` bytes from `offset`.
    pub fn window_bytes(&self, offset: usize, len: usize) -> *mut u8 {
        assert!(offset + len <= self.geo.window, "within the window");
        // SAFETY: within the mapping (layout above): the window's bytes
        // follow its words in the header.
        unsafe { self.base.add(self.at.window + offset) }
    }

    pub fn fragment_control(&self, r: usize, slot: usize) -> &Flag {
        self.at(self.block(r) + self.at.fragment_controls + slot * LINE)
    }

    /// Rank `r`'s chunk area for step `s`: one of two spans by the parity
    /// of its [`place`], and within it the place of its turn
    /// ([`Geometry::rotations`]). A writer may reuse a span once its
    /// readers are done with the step before, whatever the place.
    pub fn chunk_area(&self, r: usize, s: u64) -> *mut u8 {
        let (span, turn) = (place(s) % 2, (place(s) / 2) & self.at.rotation_mask);
        let at = self.at.chunk_areas + span * self.at.chunk + turn * self.at.rotation;
        // SAFETY: within the mapping (layout above): turn * rotation + area
        // <= the span's bytes.
        unsafe { self.base.add(self.block(r) + at) }
    }

    /// Rank `r`'s whole span of step `s`'s parity ([`Segment::chunk_span_bytes`],
    /// at least a chunk area's): where a message larger than the area
    /// travels as a ring ([`crate::shm::team::Team::put_ring_piece`]). A writer may
    /// reuse all of it once its readers are done with the step before, as
    /// [`Segment::spread_area`] does.
    pub fn chunk_span(&self, r: usize, s: u64) -> *mut u8 {
        // SAFETY: within the mapping (layout above): the span starts at
        // the chunk areas, one span per parity.
        unsafe { self.base.add(self.block(r) + self.at.chunk_areas + (place(s) % 2) * self.at.chunk) }
    }

    /// Bytes of a span ([`Segment::chunk_span`]).
    pub fn chunk_span_bytes(&self) -> usize {
        self.at.chunk
    }

    /// Rank `r`'s chunk area for `len` bytes of step `s` in a call whose
    /// writer spreads its steps ([`crate::shm::team::Team::spread`]):
    /// the span of the step's parity, as [`Segment::chunk_area`], but the
    /// place moved on by the step's own length (whole pages) at each use,
    /// through the bytes of the chunk areas' places or, `wide`, through
    /// the whole span ([`Geometry::spread`]): its writer's `turn`-th
    /// spread step of the parity ([`crate::shm::team::TeamState`]
    /// `spread_turns`), so that each lands where its reader read least
    /// lately. Back to back on hot buffers
    /// a short step's place otherwise comes back while its reader still
    /// holds the lines, and each store waits for one (2 ranks, Allreduce,
    /// µs per call, 8 places against 32: 16 KiB 2.7 / 1.5, 32 KiB 4.8 /
    /// 2.1-2.5; 128 KiB 13.7-15.0 moved by a chunk, 10.2 by 128 KiB;
    /// docs/measurements.md).
    pub fn spread_area(&self, r: usize, s: u64, len: usize, wide: bool, turn: u64) -> *mut u8 {
        let span = if wide { self.at.chunk } else { self.at.rotating };
        let step = len.max(1).next_multiple_of(PAGE);
        let places = ((span.saturating_sub(step)) / step + 1).max(1);
        let (parity, turn) = (place(s) % 2, (turn % places as u64) as usize);
        let at = self.at.chunk_areas + parity * self.at.chunk + turn * step;
        debug_assert!(len <= self.geo.area() && turn * step + len <= span && span <= self.at.chunk);
        // SAFETY: within the mapping (layout above): turn * step + len <=
        // `span`, at most the span's bytes, as `places` counts only whole
        // steps in it.
        unsafe { self.base.add(self.block(r) + at) }
    }

    /// Line `i` of rank `r`'s slot for small data of step `s`.
    pub fn slot(&self, r: usize, s: u64, i: usize) -> &Slot {
        debug_assert!(i < LINES);
        let slot = self.geo.ring_slot(s);
        match i {
            0 => self.at(self.block(r) + self.geo.ring_lines_at() + slot * LINE),
            _ => self.at(self.block(r) + self.at.ring_more_lines + (slot * (LINES - 1) + i - 1) * LINE),
        }
    }

    /// The data of rank `r`'s slot of step `s` (`ring_bytes`).
    pub fn ring_data(&self, r: usize, s: u64) -> *mut u8 {
        let offset = self.block(r) + self.at.ring_data + self.geo.ring_slot(s) * self.at.ring_slot;
        // SAFETY: within the mapping (layout above).
        unsafe { self.base.add(offset) }
    }

    pub fn queue_slot(&self, r: usize, slot: usize) -> *mut u8 {
        debug_assert!(slot < self.geo.slots);
        // SAFETY: within the mapping (layout above).
        unsafe { self.base.add(self.block(r) + self.at.queue_slots + slot * self.geo.slot_bytes) }
    }

    /// The byte range of rank `r`'s block (for first touch and placement).
    pub fn block_range(&self, r: usize) -> (*mut u8, usize) {
        // SAFETY: within the mapping.
        (unsafe { self.base.add(self.block(r)) }, self.at.block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment's places, at offsets from a base no one dereferences.
    fn offsets(geo: Geometry) -> (Segment, impl Fn(*const u8) -> usize) {
        // SAFETY: only addresses are computed, none is dereferenced.
        let seg = unsafe { Segment::new(std::ptr::null_mut::<u8>().wrapping_add(PAGE), geo) };
        (seg, |p: *const u8| p as usize - PAGE)
    }

    #[test]
    fn blocks_are_page_aligned_and_their_parts_disjoint_in_order() {
        assert_eq!(std::mem::size_of::<Control>(), 5 * LINE);
        assert_eq!(std::mem::size_of::<SetControl>(), 2 * LINE);
        let shapes = [
            (2, 0, 1, 0, 1, 1, (0, 0)),
            (16, 200, 64, 65536 + 5, 8, 32, (120, 3)),
            (1024, 4096, 8, 0, 4, 4, (WINDOW_BYTES, WINDOW_BYTES / WINDOW_PIECE)),
        ];
        for (ring, ring_bytes, slots, allreduce_chunk, rotations, spread, (window, window_pieces)) in shapes {
            let (chunk, slot_bytes, sets) = (4096, 8192, 2);
            let geo = Geometry {
                ranks: 3,
                chunk,
                allreduce_chunk,
                slots,
                slot_bytes,
                sets,
                cold_slots: slots,
                ring,
                ring_bytes,
                rotations,
                spread,
                window,
                window_pieces,
            };
            let (seg, offset) = offsets(geo);
            // the header: the set controls, the window's done words and
            // flags, a line each, then its bytes, page-aligned, before
            // the first block
            let line_at = |flag: &Flag| offset(flag as *const Flag as *const u8);
            let sets_end = offset(seg.set_control(geo.sets - 1) as *const SetControl as *const u8) + 2 * LINE;
            let words: Vec<usize> = (0..3)
                .map(|r| line_at(seg.window_done(r)))
                .chain((0..window_pieces).map(|i| line_at(seg.window_flag(i))))
                .collect();
            assert!(words.windows(2).all(|w| w[1] == w[0] + LINE) && words[0] == sets_end);
            let bytes_at = offset(seg.window_bytes(0, window));
            assert!(bytes_at % PAGE == 0 && bytes_at >= words.last().unwrap() + LINE);
            assert!(bytes_at + window <= geo.block(0) && geo.block(0) == geo.header_bytes());
            assert_eq!(geo.window_piece() * window_pieces, window);
            let (first, last) = (0, (7 << CALL_SHIFT) + 3);
            for r in 0..3 {
                let (block, bytes) = seg.block_range(r);
                let block = offset(block);
                assert_eq!((block, bytes), (geo.block(r), geo.block_bytes()));
                assert_eq!(block % PAGE, 0);
                // the parts of a block, in order: the control lines and the
                // slots' first lines, their data, their further lines, the
                // fragment controls, two chunk areas, the queue
                let line = |s, i| offset(seg.slot(r, s, i) as *const Slot as *const u8);
                let slot_of = |s| geo.ring_slot(s);
                assert_eq!(line(first, 0), block + std::mem::size_of::<Control>() + slot_of(first) * LINE);
                let data = |s| offset(seg.ring_data(r, s));
                let ring_end = block + std::mem::size_of::<Control>() + ring * LINE;
                assert!((0..ring as u64).all(|s| line(s, 0) < ring_end && data(s) >= ring_end));
                let data_end = data(ring as u64 - 1) + ring_bytes.next_multiple_of(LINE);
                assert!((0..ring as u64).all(|s| line(s, 1) >= data_end));
                let lines_end = line(ring as u64 - 1, LINES - 1) + LINE;
                let fragments = offset(seg.fragment_control(r, 0) as *const Flag as *const u8);
                assert!(lines_end <= fragments);
                assert!(
                    offset(seg.fragment_control(r, slots - 1) as *const Flag as *const u8) + LINE
                        <= offset(seg.chunk_area(r, 0))
                );
                assert!((0..2 * rotations as u64).all(|s| offset(seg.chunk_area(r, s)) % PAGE == 0));
                // the two spans, each a chunk area at every place, apart
                let area = |s: u64| offset(seg.chunk_area(r, s));
                let places = 2 * rotations as u64;
                let (even, odd): (Vec<u64>, Vec<u64>) = (0..places).partition(|s| s % 2 == 0);
                let span = |steps: &[u64]| {
                    let start = steps.iter().map(|&s| area(s)).min().unwrap();
                    (start, steps.iter().map(|&s| area(s) + geo.area()).max().unwrap())
                };
                let ((even_start, even_end), (odd_start, odd_end)) = (span(&even), span(&odd));
                assert!(even_end <= odd_start && odd_end <= offset(seg.queue_slot(r, 0)));
                assert_eq!(even_start, area(0));
                let mut starts: Vec<usize> = (0..places).map(area).collect();
                starts.sort();
                starts.dedup();
                assert_eq!(starts.len(), places as usize, "every turn a place of its own");
                assert!(offset(seg.queue_slot(r, slots - 1)) + 8192 <= block + bytes);
                // a step's places: its chunk area by parity, its ring slot
                for s in [first, 1, 5, last] {
                    assert_eq!(seg.chunk_area(r, s), seg.chunk_area(r, place(s) as u64 % places));
                    assert_eq!(line(s, 2), line(slot_of(s) as u64, 2));
                    assert_eq!(data(s), data(slot_of(s) as u64));
                }
            }
            // spread steps: in their step's span, which holds `spread`
            // places (wide) or the chunk areas' (not), page-aligned, each
            // place of a span a step apart and used in turn
            let rotating = Geometry { spread: 1, ..geo }.chunk_bytes();
            assert!(geo.chunk_bytes() >= geo.area() + (spread - 1) * chunk);
            assert!(rotating >= geo.area() + (rotations - 1) * chunk && rotating <= geo.chunk_bytes());
            for (wide, bytes) in [(false, rotating), (true, geo.chunk_bytes())] {
                for len in [1, 100, chunk, geo.area()] {
                    let step = len.next_multiple_of(PAGE);
                    let places = (bytes - step) / step + 1;
                    for s in [1, 2, 5 << CALL_SHIFT | 3] {
                        for turn in 0..4 * places as u64 {
                            let at = offset(seg.spread_area(0, s, len, wide, turn));
                            let span_start = offset(seg.chunk_area(0, place(s) as u64 % 2));
                            assert_eq!(at % PAGE, 0);
                            assert!(at >= span_start && at + len <= span_start + bytes);
                            assert_eq!(at - span_start, (turn as usize % places) * step);
                        }
                    }
                }
            }
            assert_eq!(geo.total_bytes(), geo.block(2) + geo.block_bytes());
            // the ranks' own ranges tile the segment
            let ranges: Vec<(usize, usize)> = (0..3).map(|r| geo.own_range(r)).collect();
            assert_eq!(ranges[0].0, 0);
            assert!(ranges.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
            assert_eq!(ranges[2].0 + ranges[2].1, geo.total_bytes());
        }
    }
}
