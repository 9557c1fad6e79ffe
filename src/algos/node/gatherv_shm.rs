//! Gatherv within a node. Only the root knows the layout; the others learn
//! what they need through the segment, so no broadcast is spent.
//!
//! - **direct** (zero copy available; modes auto and zero copy): each
//!   rank decides for its own block from its length and its own buffer,
//!   so nobody waits for the root's decision. A block that fits a chunk
//!   area (auto: at most [`COPY_IN_UP_TO`] bytes by default) is copied
//!   into the owner's area (up to `LINES * INLINE` bytes, the lines of its
//!   slot: [`Team::put_lines`]) and published, and the owner returns at
//!   once; the root copies it into place. Beyond three eighths of a chunk
//!   (`WHOLE_UP_TO_PIECES`) it goes in
//!   pieces that the root copies out as they land (`put_pieces`): the
//!   transfer costs the slower of the two copies, not their sum. Such a
//!   block may go direct instead, where its root's timings favour it
//!   ([`Route`], timed apart for blocks sent from the buffer their owner
//!   sent the last one from); the root, which publishes its table for
//!   such blocks, learns the owner's way from its first piece or its
//!   publish without one. A hot block up to a chunk area
//!   ([`HOT_COPY_IN_UP_TO`]) takes either way the same. A larger block
//!   (zero copy: every block) goes straight into the root's receive
//!   buffer, written by its owner once the root has published the
//!   buffer's address and the layout; all such blocks move
//!   at once, each by its owner (pulling everything would make the root
//!   the hot spot). In the auto mode, unless ranks outnumber cores or the
//!   block goes direct by its route (a published word tells the root), the
//!   block's last `1/p` (at most an area) goes
//!   through its owner's area, copied in before the owner publishes and
//!   out by the root once its own block is in place (`through_segment`). The root then helps with
//!   the rest: it is cut into pieces ([`super::Sizes::gatherv_piece`]),
//!   the owner writes them from the front and the root reads them from
//!   the back, each piece claimed by one compare-and-swap on a word of the
//!   owner's, until they meet (an owner whose block the root read waits
//!   until the root is done, as the root reads its send buffer). The root
//!   knows every block's length, hence every owner's choice (or that it
//!   learns it), and waits for each accordingly. Two steps per call. From
//!   PCOLL_SHM_STREAM_OUT bytes the root copies its own block with
//!   streaming stores ([`crate::shm::team::STREAM_OUT_FROM`]). Copies into
//!   the owners' areas use the stores the root wants
//!   ([`crate::adapt::stores::ReaderChoice`]).
//!   A block larger than a chunk area whose root wants it through the
//!   area ([`Route`]) goes through its owner's area used as a ring of
//!   pieces ([`Team::put_ring_piece`]; a hot block's ring takes the area's
//!   whole span: [`ring_of`]) from the front, the root copying
//!   each out as it lands and placing parts of its own block while none
//!   has; while the ring is full, its owner writes pieces from the back
//!   straight into the root's buffer ([`write_ring`]).
//!   At 2 ranks a hot block of the window's sizes (`window_sized`: 4-256
//!   KiB) whose owner did not write the window's last call goes through
//!   the window the hot Bcasts use ([`super::window`]) instead: the owner
//!   says so in a word of its first step, the root follows.
//!   A block that goes into its owner's slot and nowhere else
//!   ([`slot_only`]: small, not direct, not through the window) takes a
//!   short way past these decisions and past the runs' pacing, and so
//!   does a root whose other blocks all do ([`gather_slots`]).
//! - **rounds** (copy-in forced, or no zero copy): every other rank copies
//!   the first chunk of its block into its area and publishes; the root
//!   publishes the number of rounds (its largest block in chunks), copies
//!   every rank's chunk into place, and further rounds follow for blocks
//!   longer than a chunk. The others wait for the root's word, so that
//!   every rank takes the same number of steps.
//!
//! Trace, direct (auto), p = 3, rank 1 small, rank 2 large: the root
//! publishes its buffer and the layout and copies its own block; rank 1 copies its block into its area,
//! publishes and returns; rank 2 waits for the root's step, copies the
//! last third of its block into its area, publishes, and writes the rest
//! into the root's buffer from the front; the root copies rank 1's block
//! from its area, then rank 2's last third, reads rank 2's last pieces
//! until the two meet, and waits for rank 2, which waits for the root to
//! finish. The same, rank 2's block through its ring: rank 2 publishes
//! and fills its ring's pieces; the root copies the first out, then
//! (none landed) 32 KiB of its own block; rank 2, its ring full, writes
//! its last piece into the root's buffer, then the ring's next; and so
//! on until rank 2 publishes its second step.
//!
//! Limitations: one node; the direct way needs the layout to fit a chunk
//! area (16 bytes per rank). Memory: the segment. Cost: copy-in moves
//! `2 Σ n_i` bytes, the root's `Σ n_i` in sequence; zero copy moves
//! `max n_i` on every rank in parallel, less what the root takes over
//! after its own block: with 2 ranks, a 2 MiB block costs the larger of
//! the owner's share and the root's own copy plus its share, about a
//! tenth less than when the owner wrote it all. The ends through the
//! areas add `Σ n_i / p` to the root's copies and take it off the owners'
//! slower cross-memory ones (2 ranks, 128 KiB blocks: a fifth less
//! time). A ring takes the root's own copy off the critical path and
//! most of the block off the slow cross-memory copy: the owner copies in
//! `n_i`, the root `n_i` out plus its own block, the cross-memory copies
//! only what the ring cannot take in time (2 ranks, cold 8 MiB blocks
//! started together: 1.0-1.25 ms against 1.25-1.47). Measurements:
//! docs/measurements.md.
//! Seed: 001's Gatherv within a node, where a single copy does what its
//! message chains do over a network.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::window;
use super::{NodeCall, Team};
use crate::adapt::choice::{Alternative, TimedChoice};
use crate::adapt::stores::{self, ReaderChoice, GATHERV_HOT_ROUTES, GATHERV_ROUTES};
use crate::core::call::GatherLayout;
use crate::exec::Combiner;
use crate::shm::segment::Geometry;
use crate::shm::team::{fits_ring, in_lines, Expect, Mismatch, Ring, Spread, Via};
use crate::shm::PeerMemory;

/// The largest block that goes through its owner's area in the auto
/// mode by default (PCOLL_SHM_GATHERV_COPY_IN; never more than a chunk
/// area holds); larger ones are written
/// straight into the root's buffer (measured, 2 ranks: copy-in faster up
/// to 128 KiB in total, and a block larger than a chunk would need rounds).
pub const COPY_IN_UP_TO: usize = 64 << 10;

/// The largest hot block (sent again from its owner's last buffer) that
/// may go through its owner's area in pieces, where routes are timed and
/// the root's timings favour it (PCOLL_SHM_GATHERV_HOT_COPY_IN; never
/// more than a chunk area holds, 256 KiB by default): its alternative is
/// straight into the root's buffer, all of it. Two copies through a
/// shared cache beat a cross-memory copy there (2 ranks, Zen 3 VM, cores
/// that share a cache, back to back: 128 KiB 8.1-9.1 against 11.1 us,
/// 256 KiB 15.5-16.2 against 21.5; docs/measurements.md). Cold blocks
/// beyond [`COPY_IN_UP_TO`] stay off the area: there it took a tenth
/// longer.
pub const HOT_COPY_IN_UP_TO: usize = 256 << 10;

/// How a block of more than a piece copied in travels in the auto mode:
/// through its owner's chunk area (copied in, in pieces; for a direct
/// block, its end; for one larger than the area, as much as its ring
/// takes: [`write_ring`]), or all of it straight into the root's buffer.
/// Which is faster depends on the machine and on whether the buffers are
/// hot: 2 ranks, cold blocks of 32 KiB in synchronised calls, through
/// the area 28.5 against 20.2 us straight on a Zen 1 VM, where a Zen 3 VM
/// took a third less through the area; hot ones back to back, direct 4.9
/// against 7.6 us on an older VM, 6.0 against 3.0 on the Zen 3 VM, whose
/// cross-memory copies run at a fifth of memcpy's speed
/// (docs/measurements.md). So with PCOLL_SHM_ADAPT the root times its
/// calls by route per size class, separately for blocks their owners
/// send from the buffer they sent the last one from (hot) and for the
/// others ([`crate::adapt::stores::ReaderChoice`]), and publishes the
/// route it wants next in its line of wishes, which owners read; without,
/// hot blocks go direct and the others through the area (never a
/// ring: where ranks outnumber cores, an owner would wait for its root
/// to be scheduled). An owner whose calls come back to back
/// ([`super::host_runs::OwnRuns::back_to_back`]) sends a cold block that
/// fits its area through it whatever its root wants: direct, it stays
/// until the root has read the block, through the area it returns once
/// the block is in and starts its next call, a gain the root's time does
/// not see (2 ranks, cold 32-64 KiB blocks back to back, roots rotating:
/// 8-15% less time; docs/measurements.md). With hot blocks
/// a root's time counts from the last arrival of the call's ranks (each
/// owner publishes its arrival): from its own, back to back, it would
/// count its wait for an owner still on the call before, which depends on
/// that call's route (2 ranks, hot 32 KiB blocks, rotating roots: the two
/// roots timed opposite routes faster). With cold ones it counts from its
/// own, as the stores' timings always did: from the last arrival, calls
/// started together took 5-10% longer (Open MPI, 32-512 KiB blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Area,
    Direct,
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Route::Area => "through the area",
            Route::Direct => "direct",
        })
    }
}

impl Alternative for Route {
    const BOTH: [Route; 2] = [Route::Area, Route::Direct];
}

/// A root's timings of hot blocks' routes, classes from `from` bytes: a
/// change of route costs the call after it (the other route's lines in
/// the caches), and single calls through the area after another
/// library's took 5-15 times as long ([`crate::adapt::choice::OUTLIER`]).
pub fn hot_route_choice(from: usize) -> ReaderChoice<Route> {
    ReaderChoice::with(TimedChoice::paying_changes(from).bounded())
}

/// The routes a root has seen its owners' blocks take in one call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    Nothing,
    /// Every block so far, all hot or all cold.
    All {
        route: Route,
        hot: bool,
    },
    /// Blocks by both routes, or hot and cold ones: the call does not count.
    Uncounted,
}

impl Seen {
    fn and(self, route: Route, hot: bool) -> Seen {
        match self {
            Seen::Nothing => Seen::All { route, hot },
            Seen::All { route: r, hot: h } if r == route && h == hot => self,
            _ => Seen::Uncounted,
        }
    }

    /// Whether the call's time counts for the stores of copies into the
    /// areas: not all its blocks went direct. Hot and cold blocks share
    /// the estimates: a hot block through the area with the stores timed
    /// on cold ones only (streaming) took twice as long as direct (2 ranks,
    /// 32 KiB, osu mode, Zen 3 VM), with its own timings half as long.
    fn counts_for_stores(self) -> bool {
        !matches!(self, Seen::All { route: Route::Direct, .. })
    }
}

/// Whether this rank's Gatherv blocks take the routes the roots time:
/// with PCOLL_SHM_ADAPT and ranks no more than cores (where they
/// outnumber cores, timings are too noisy to choose by).
fn routes_timed(team: &Team<'_>, mode: Mode) -> bool {
    mode == Mode::Auto && team.state.memory.adaptation.enabled && !team.settings.oversubscribed
}

/// Where in a root's line of wishes it publishes the routes it wants for
/// hot or for other blocks.
fn route_wishes(hot: bool) -> usize {
    if hot {
        GATHERV_HOT_ROUTES
    } else {
        GATHERV_ROUTES
    }
}

/// The route rank `r` wants for blocks of `len` bytes, hot or not.
fn wanted_route(team: &Team<'_>, r: usize, len: usize, hot: bool) -> Route {
    let memory = &team.state.memory;
    let choice = if hot { &memory.gatherv_hot_route } else { &memory.gatherv_route };
    choice.published(team, r, route_wishes(hot), len)
}

/// An owner's route for its block of `len` bytes to `root` (`hot`: sent
/// from its last buffer again). After [`Team::writable`] for the call's
/// first step, which orders the root's wish of its last call.
fn owner_route(team: &Team<'_>, root: usize, len: usize, mode: Mode, hot: bool) -> Route {
    match (routes_timed(team, mode), hot) {
        (true, hot) => wanted_route(team, root, len, hot),
        (false, true) => Route::Direct,
        (false, false) => Route::Area,
    }
}

/// Nanoseconds of the system's clock, which the ranks of a node share:
/// when an owner arrived, for its root's timing.
fn clock_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// When a root's timed call starts: at its arrival, or, with hot blocks,
/// at the latest owner's where that came later.
struct Arrivals {
    start: Instant,
    /// [`clock_ns`] at `start`.
    start_ns: u64,
    /// The latest arrival of an owner seen so far ([`clock_ns`]).
    latest_ns: u64,
}

impl Arrivals {
    fn new() -> Arrivals {
        let start_ns = clock_ns();
        Arrivals { start: Instant::now(), start_ns, latest_ns: start_ns }
    }

    /// Rank `r`'s arrival, from its published word (after the acquire of
    /// its data of step `s`). A word left from an earlier call is older
    /// than this call's start.
    fn saw(&mut self, team: &Team<'_>, r: usize, s: u64) {
        self.latest_ns = self.latest_ns.max(team.word(r, s, ARRIVED));
    }

    /// When the call's time starts.
    fn start(&self) -> Instant {
        self.start + Duration::from_nanos(self.latest_ns - self.start_ns)
    }
}

/// A root's call timed by route: its blocks' largest and total bytes.
struct RouteTiming {
    largest: usize,
    bytes: usize,
}

/// At the root's arrival: the call's timing by route, where routes are
/// timed and every other block (`blocks`, those not empty) takes a route
/// (`routed`) and falls in one size class.
fn route_timing(
    team: &Team<'_>,
    mode: Mode,
    blocks: impl Iterator<Item = usize> + Clone,
    routed: impl Fn(usize) -> bool,
) -> Option<RouteTiming> {
    let blocks = blocks.filter(|&len| len > 0);
    let largest = blocks.clone().max()?;
    let choice = &team.state.memory.gatherv_route;
    let class = choice.class(largest);
    let timed = routes_timed(team, mode) && blocks.clone().all(|len| routed(len) && choice.class(len) == class);
    timed.then(|| RouteTiming { largest, bytes: blocks.sum() })
}

/// Whether a root whose call is timed by route (`timing`) may see a block
/// go through its owner's area: the route it published for the call's
/// class, hot or not, says so.
fn may_go_through_areas(team: &Team<'_>, timing: &RouteTiming) -> bool {
    [false, true].into_iter().any(|hot| wanted_route(team, team.rank, timing.largest, hot) == Route::Area)
}

/// At the end of a root's timed call, before its `finish`: counts the
/// time from the last arrival for the route its owners took, if they all
/// took one with blocks all hot or all cold, and publishes the route it
/// wants next for such blocks.
fn route_end(team: &mut Team<'_>, timing: RouteTiming, start: Instant, seen: Seen) {
    let Seen::All { route, hot } = seen else { return };
    let wishes = &team.seg.control(team.rank).wishes[route_wishes(hot)..];
    let memory = &mut team.state.memory;
    let choice = if hot { &mut memory.gatherv_hot_route } else { &mut memory.gatherv_route };
    let mut timed = choice.timing(timing.largest, timing.bytes);
    timed.started(start);
    timed.ran_by(route);
    if let Some(change) = choice.end(&timed, wishes) {
        let kind = if hot { "hot " } else { "" };
        log::debug!("shm Gatherv of {kind}{} B blocks and more to this root, now {change}", choice.class_bytes(&timed));
    }
    // The stores count calls through the areas only: where the route in
    // use is direct, those are the route's explorations, and the stores'
    // own, one in 64 of them, came too seldom to refresh the estimate of
    // the stores not in use; the area, tried with the slower stores, kept
    // losing (2 ranks, hot blocks back to back, Intel MPI, vCPUs apart:
    // 32 KiB 4.3-4.6 us, 3.9-4.1 with this; 64 KiB 7.7-8.6, 6.3-6.6). So
    // the last call of a route's exploration through the areas tries the
    // other stores.
    if choice.next_ends_exploration(timing.largest) && wanted_route(team, team.rank, timing.largest, hot) == Route::Area
    {
        let wishes = &team.seg.control(team.rank).wishes[stores::GATHERV_WISHES..];
        team.state.memory.adaptation.gatherv_stores.explore_next(timing.largest, wishes);
    }
}

/// How blocks travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    CopyIn,
    ZeroCopy,
    /// Each block by its length (see the module documentation).
    Auto,
}

/// Published words of the root: its receive buffer; in rounds, their number.
const BUFFER: usize = 0;
const ROUNDS: usize = 1;

/// This rank's part: its block (`send`, empty at an in-place root) and, at
/// the root, the receive region the layout's offsets refer to.
pub struct Gather<'a> {
    pub send: &'a [u8],
    pub recv: &'a mut [u8],
    /// The root's layout (empty elsewhere).
    pub layout: &'a GatherLayout,
    pub root: usize,
    /// The root's block is already in place (MPI_IN_PLACE).
    pub in_place: bool,
}

impl Gather<'_> {
    /// Whether the root's copies of `len` bytes into its receive buffer
    /// use streaming stores: from PCOLL_SHM_STREAM_OUT bytes
    /// ([`crate::shm::team::STREAM_OUT_FROM`]), but where it received
    /// into the same buffer last time, which is then taken to be in its
    /// caches, only from [`HOT_STREAM_OUT_FROM`].
    fn streams_out(&self, team: &Team<'_>, len: usize) -> bool {
        let hot = team.state.memory.gatherv_received == self.recv.as_ptr() as usize;
        team.streams_out(len) && (!hot || len >= HOT_STREAM_OUT_FROM)
    }

    /// At the root (node rank `me`): its own block into place, unless it
    /// is there already ([`Gather::streams_out`]).
    fn place_own_block(&mut self, team: &Team<'_>) {
        self.place_own_part(team, &mut 0, usize::MAX);
    }

    /// At the root: up to `most` bytes of its own block from `*placed`
    /// into place, `*placed` moved past them; whether it copied any.
    fn place_own_part(&mut self, team: &Team<'_>, placed: &mut usize, most: usize) -> bool {
        let (off, len) = self.layout.blocks[team.rank];
        let len = if self.in_place { 0 } else { len };
        let part = *placed..len.min(placed.saturating_add(most));
        if part.is_empty() {
            return false;
        }
        let stream = self.streams_out(team, len);
        let dst = &mut self.recv[off + part.start..off + part.end];
        crate::shm::stream::copy_out(dst, &self.send[part.clone()], stream, team.settings.ahead);
        *placed = part.end;
        true
    }
}

/// The Gatherv in `mode`; a rank whose calls come back to back, or send
/// from its last block's buffer, spreads its steps through its chunk areas
/// ([`Team::spread`]): hot, the root holds the lines of the places it read
/// last (2 ranks, cores sharing a cache, between barriers on one buffer:
/// 32 KiB 1.7-2.2 against 2.8-3.0 us; docs/measurements.md).
pub fn run(team: &mut Team<'_>, g: &mut Gather<'_>, mode: Mode) -> Result<(), Mismatch> {
    let direct_way = team.peers.filter(|_| mode != Mode::CopyIn && 16 * team.size <= team.seg.geo.chunk);
    if direct_way.is_some() && team.rank != g.root && slot_only(team, mode, g.send.len()) {
        // Not counted in the runs, which spread only areas (and read the
        // clock in a third of the calls they count).
        return send_in_slot(team, g.send);
    }
    if direct_way.is_some() && team.rank == g.root && slots_only(team, g, mode) {
        let gathered = gather_slots(team, g);
        team.state.memory.gatherv_received = g.recv.as_ptr() as usize;
        return gathered;
    }
    let within = Duration::from_nanos(team.settings.back_to_back_ns);
    let hot = !g.send.is_empty() && g.send.as_ptr() as usize == team.state.memory.gatherv_sent;
    // Where ranks outnumber cores, calls are never back to back.
    if !team.settings.oversubscribed && team.state.memory.gatherv_runs.starts(within, hot) {
        team.spread = Spread::Wide;
    }
    let gathered = match direct_way {
        Some(peers) => direct(team, peers, g, mode),
        None => rounds(team, g),
    };
    team.state.memory.gatherv_runs.ends();
    if team.rank == g.root {
        team.state.memory.gatherv_received = g.recv.as_ptr() as usize;
    }
    gathered
}

/// The `shm` Gatherv (auto mode), as the registry runs it.
pub fn run_auto(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    run(team, &mut call.into_gatherv(), Mode::Auto)
}

/// `shm_copy`, as the registry runs it.
pub fn run_copy_in(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    run(team, &mut call.into_gatherv(), Mode::CopyIn)
}

/// `shm_zcopy`, as the registry runs it.
pub fn run_zero_copy(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    run(team, &mut call.into_gatherv(), Mode::ZeroCopy)
}

/// Whether a block of `len` bytes goes straight into the root's buffer;
/// every rank computes it alike.
fn goes_direct(mode: Mode, len: usize, chunk: usize, copy_in_up_to: usize) -> bool {
    match mode {
        Mode::ZeroCopy => len > 0,
        _ => len > copy_in_up_to.min(chunk),
    }
}

/// Bytes at the end of a direct block of `len` bytes that go through its
/// owner's chunk area (auto mode): `1/p` of the block, at most an area.
/// Copying in is the owner's cheapest way to move bytes and copying out
/// the root's, both well under half the cost per byte of a cross-memory
/// copy, while the root is busy with its own block; with more ranks the
/// root copies `p - 1` such ends, hence the `1/p`. Not where ranks
/// outnumber cores: there the ranks share the cores' time, so the bytes
/// moved count and not their balance (4 ranks on 2 cores: about 5%
/// slower with the ends through the areas; docs/measurements.md).
fn through_segment(team: &Team<'_>, mode: Mode, len: usize) -> usize {
    match mode {
        Mode::Auto if !team.settings.oversubscribed => (len / team.size).min(team.seg.geo.area()),
        _ => 0,
    }
}

/// The direct way (see the module documentation). Where an erroneous
/// program's counts differ, an owner that thinks its block goes direct
/// while the root does not puts its head out before it waits for the
/// root's table, and the root, waiting for that owner's small block, sees
/// it. The root checks every owner's head before it uses the owner's data
/// or words; it skips an owner of another call and reports it once every
/// other block is in place, the owners' writes into its buffer among
/// them.
fn direct(team: &mut Team<'_>, peers: &dyn PeerMemory, g: &mut Gather<'_>, mode: Mode) -> Result<(), Mismatch> {
    let (me, p, chunk) = (team.rank, team.size, team.seg.geo.chunk);
    let size = team.state.memory.sizes.gatherv_piece.max(1);
    let sizes = team.state.memory.sizes;
    let direct = |len| goes_direct(mode, len, chunk, sizes.gatherv_copy_in_up_to);
    let geo = team.seg.geo;
    // Lengths of hot blocks that may go through the area beyond the rest.
    let hot_through_area = routes_timed(team, mode) && sizes.gatherv_hot_copy_in_up_to > 0;
    let hot_in_area = |len| hot_through_area && len <= sizes.gatherv_hot_copy_in_up_to.min(geo.area());
    // A block its owner sends either way, by the route its root wants (a
    // hot one up to `hot_in_area`: the others of such lengths go direct).
    let either = |len| mode == Mode::Auto && (!direct(len) || hot_in_area(len)) && in_pieces(&geo, len);
    let hot = me != g.root && sent_again(team, g.send);
    let s = team.next_step();
    let t = team.next_step();
    // Whether the root reads part of this rank's block from its send buffer.
    let mut root_reads = false;
    let (mut timing, mut route_timed) = (None, None);
    let mut mismatch = None;
    // Other ranks whose data of step s this root has seen, and their routes.
    let (mut seen, mut routes) = (0, Seen::Nothing);
    let len = g.send.len();
    // When this rank arrived, where its root may time the call with a hot
    // block (0 elsewhere).
    let timed_len = len >= team.state.memory.adaptation.from();
    let arrived = if hot && timed_len && routes_timed(team, mode) { clock_ns() } else { 0 };
    // At 2 ranks, a hot block through the window (see `window_sized`).
    let window = me != g.root && hot && window_sized(team, mode, len) && window::suits(team, me, len);
    // Whether the root's call went by the window (its timings do not count).
    let mut windowed = false;
    let route = (me != g.root && !window && (direct(len) || either(len))).then(|| {
        team.writable(s);
        let wanted = owner_route(team, g.root, len, mode, hot);
        // Back to back, a cold block that fits the area goes through it
        // whatever the root wants (see Route).
        if !hot && !direct(len) && team.state.memory.gatherv_runs.back_to_back() {
            Route::Area
        } else {
            wanted
        }
    });
    // Whether this owner's block goes through its area, in pieces: one
    // that may goes by its route (a direct block's route says whether its
    // end goes through the area).
    let in_area = match route {
        Some(route) => either(len) && (!direct(len) || hot) && route == Route::Area,
        None => !direct(len),
    };
    // When the root's timed calls start (see Arrivals).
    let mut arrivals = None;
    if me == g.root {
        let others = || g.layout.blocks.iter().enumerate().filter(|&(r, _)| r != me).map(|(r, b)| (r, *b));
        route_timed = route_timing(team, mode, others().map(|(_, (_, len))| len), |len| direct(len) || either(len));
        // The stores count calls whose blocks go through the areas only,
        // so that their explorations fall on such calls.
        if route_timed.as_ref().is_none_or(|timing| may_go_through_areas(team, timing)) {
            timing = stores::reader_start(team, others().map(|(_, (_, len))| len));
        }
        if timing.is_some() || route_timed.is_some() {
            arrivals = Some(Arrivals::new());
        }
        // Only ranks with direct blocks wait for step s: without any, the
        // root leaves its flags alone (a reader of them would cost each
        // small block a cache-line transfer: 0.05-0.1 us a call).
        if others().any(|(_, (_, len))| direct(len) || either(len)) {
            team.writable(s);
            team.set_word(s, BUFFER, g.recv.as_mut_ptr() as u64);
            let table = team.my_area_bytes(s, 16 * p);
            for (entry, &(off, len)) in table.chunks_exact_mut(16).zip(&g.layout.blocks) {
                entry[..8].copy_from_slice(&(off as u64).to_ne_bytes());
                entry[8..].copy_from_slice(&(len as u64).to_ne_bytes());
            }
            team.publish(s);
        }
        // A root that may read a block through its owner's ring copies its
        // own block while it waits for the ring's pieces.
        let may_ring = |len| {
            routes_timed(team, mode)
                && fits_ring(geo.area(), len)
                && [false, true].into_iter().any(|hot| wanted_route(team, me, len, hot) == Route::Area)
        };
        let mut placed = 0;
        if !others().any(|(_, (_, len))| may_ring(len)) {
            g.place_own_part(team, &mut placed, usize::MAX);
        }
        for (r, (off, len)) in others().filter(|&(_, (_, len))| len > 0) {
            seen += 1;
            let expect = Expect(Some(len));
            if window_sized(team, mode, len) {
                // The owner's publish without pieces, its word saying the
                // window, or the start of its block's usual way.
                let way = team.writes_pieces(r, s, expect);
                let by_window = matches!(way, Ok(false)) && team.word(r, s, WINDOW) == s;
                match way.and_then(|_| if by_window { team.check(r, s, Via::Area, expect) } else { Ok(()) }) {
                    Ok(()) if by_window => {
                        window::read(team, &mut g.recv[off..off + len], r, s);
                        team.state.memory.window_calls.gathers += 1;
                        windowed = true;
                        continue;
                    }
                    Ok(()) => {}
                    Err(m) => {
                        mismatch = mismatch.or(Some(m));
                        continue;
                    }
                }
            }
            let goes_direct = if either(len) {
                // The owner's first piece, or its publish without pieces.
                match team.writes_pieces(r, s, expect) {
                    Ok(true) => {
                        // The owner's words, set before its first piece.
                        routes = routes.and(Route::Area, team.word(r, s, HOT) != 0);
                        if let Some(arrivals) = arrivals.as_mut() {
                            arrivals.saw(team, r, s);
                        }
                        false
                    }
                    Ok(false) => true,
                    Err(m) => {
                        mismatch = mismatch.or(Some(m));
                        continue;
                    }
                }
            } else {
                direct(len)
            };
            if goes_direct {
                // Help the owner: read its unclaimed pieces, from the back.
                team.wait_ready(r, s);
                if let Err(m) = team.check(r, s, Via::Area, expect) {
                    mismatch = mismatch.or(Some(m));
                    continue;
                }
                let hot = team.word(r, s, HOT) != 0;
                if team.word(r, s, RING) != 0 {
                    routes = routes.and(Route::Area, hot);
                    if let Some(arrivals) = arrivals.as_mut() {
                        arrivals.saw(team, r, s);
                    }
                    read_ring(team, g, r, off..off + len, [s, t], &ring_of(team, r, s, hot), &mut placed);
                    continue;
                }
                // The root's own block first: it then helps with the rest.
                g.place_own_part(team, &mut placed, usize::MAX);
                let (claims, from) = (team.shared_word(r, s, CLAIMS), team.word(r, s, SOURCE) as usize);
                let tail = (team.word(r, s, TAIL) as usize).min(len);
                routes = routes.and(if tail == 0 { Route::Direct } else { Route::Area }, hot);
                if let Some(arrivals) = arrivals.as_mut() {
                    arrivals.saw(team, r, s);
                }
                let head = len - tail;
                crate::shm::stream::copy_out(
                    &mut g.recv[off + head..off + len],
                    team.area_bytes(r, s, len - head),
                    false,
                    team.settings.ahead,
                );
                while let Some(piece) = claim(claims, pieces(head, size), End::Back) {
                    let at = piece_bytes(piece, size, head);
                    peers.read(r, from + at.start, &mut g.recv[off + at.start..off + at.end]);
                }
                team.wait_ready(r, t);
            } else if in_pieces(&geo, len) {
                if !either(len) {
                    routes = routes.and(Route::Area, false);
                }
                match team.read_pieces(r, s, &mut g.recv[off..off + len], copy_piece(&geo), expect) {
                    Ok(()) => arrivals.iter_mut().for_each(|arrivals| arrivals.saw(team, r, s)),
                    Err(m) => mismatch = mismatch.or(Some(m)),
                }
            } else {
                match read_whole(team, r, s, &mut g.recv[off..off + len]) {
                    Ok(()) if !in_lines(len) => arrivals.iter_mut().for_each(|arrivals| arrivals.saw(team, r, s)),
                    Ok(()) => {}
                    Err(m) => mismatch = mismatch.or(Some(m)),
                }
            }
        }
        g.place_own_part(team, &mut placed, usize::MAX);
        root_end(team, s, seen, mismatch.is_some());
    } else if window {
        // The head and the way first: the root checks them before it reads.
        team.writable(s);
        team.set_word(s, WINDOW, s);
        team.publish(s);
        window::write(team, g.send, s);
        team.state.memory.window_calls.gathers += 1;
    } else if !in_area {
        // The head first: a root that expects a small block waits for
        // this rank's data, not its own table's readers.
        team.writable(s);
        team.show_head(s);
        team.wait_ready(g.root, s);
        team.check(g.root, s, Via::Area, Expect(None))?;
        let entry = &team.area_bytes(g.root, s, 16 * p)[16 * me..16 * me + 16];
        let off = u64::from_ne_bytes(entry[..8].try_into().expect("8 bytes")) as usize;
        let len = u64::from_ne_bytes(entry[8..].try_into().expect("8 bytes")) as usize;
        if len != g.send.len() {
            // The root counts another length for this block: nothing goes
            // into its buffer; the head this rank publishes tells the root
            // its length.
            team.writable(s);
            team.publish(s);
            return Err(Mismatch::new(g.root, None, None));
        }
        let to = team.word(g.root, s, BUFFER) as usize + off;
        team.writable(s);
        // The whole block through this rank's span as a ring, where its
        // root wants its route through the area and the block is larger.
        let ring = route == Some(Route::Area) && routes_timed(team, mode) && fits_ring(geo.area(), len);
        team.set_word(s, RING, u64::from(ring));
        team.set_word(s, HOT, u64::from(hot));
        team.set_word(s, ARRIVED, arrived);
        let claims = team.shared_word(me, s, CLAIMS);
        claims.store(0, Relaxed);
        if ring {
            team.set_word(s, TAIL, 0);
            team.publish(s);
            let stream = stores::wanted_streams(team, g.root, len, team.ring_piece());
            write_ring(team, peers, g, to, s, &ring_of(team, me, s, hot), stream)?;
            return finish_call(team, t, false, mismatch);
        }
        // The block's end into this rank's area; then offer the pieces of
        // the rest to the root, and write those it has not taken, from the
        // front.
        let tail = if route == Some(Route::Direct) { 0 } else { through_segment(team, mode, len) };
        let head = len - tail;
        let end = &g.send[head..];
        let stream = stores::wanted_streams(team, g.root, len, end.len());
        crate::shm::stream::copy_with(team.my_area_bytes(s, end.len()), end, stream);
        team.set_word(s, SOURCE, g.send.as_ptr() as u64);
        team.set_word(s, TAIL, tail as u64);
        team.publish(s);
        while let Some(piece) = claim(claims, pieces(head, size), End::Front) {
            let at = piece_bytes(piece, size, head);
            peers.write(g.root, to + at.start, &g.send[at]);
        }
        // Every piece is claimed now, so this count is final.
        root_reads = claims.load(Relaxed) & BACK != 0;
    } else if in_lines(g.send.len()) {
        team.put_lines(s, g.send);
    } else if in_pieces(&geo, g.send.len()) || team.streams(g.send.len()) {
        team.writable(s);
        let stream = stores::wanted_streams(team, g.root, g.send.len(), g.send.len());
        if route.is_some() {
            // For the root's timings (see Route).
            team.set_word(s, HOT, u64::from(hot));
            team.set_word(s, ARRIVED, arrived);
        }
        if in_pieces(&geo, g.send.len()) {
            team.put_pieces(s, g.send, copy_piece(&geo), stream);
        } else {
            team.put_stored(s, g.send, stream);
        }
    } else {
        team.put(s, g.send);
    }
    // Hot calls count from the last arrival, cold ones from the root's
    // own (see Route).
    let hot_call = matches!(routes, Seen::All { hot: true, .. });
    let start = arrivals.map(|arrivals| if hot_call { arrivals.start() } else { arrivals.start });
    // A call that tries the stores not in use does not count for a route,
    // whose estimate would carry the other stores' cost.
    if windowed {
        (timing, route_timed) = (None, None);
    }
    let usual_stores = timing.as_ref().is_none_or(|timing| timing.in_use());
    if let (Some(mut timing), Some(start)) = (timing.filter(|_| routes.counts_for_stores()), start) {
        timing.started(start);
        stores::reader_end(team, timing);
    }
    if let (Some(timing), Some(start)) = (route_timed.filter(|_| usual_stores), start) {
        route_end(team, timing, start, routes);
    }
    finish_call(team, t, root_reads, mismatch)
}

/// Whether a non-root's block of `len` bytes goes into its slot of the
/// ring (or the slot's lines) and nowhere else: not direct, not through
/// the window, copied in with ordinary stores. [`direct`]'s general way
/// reaches the same copy-in after some 200 instructions more.
fn slot_only(team: &Team<'_>, mode: Mode, len: usize) -> bool {
    let copy_in_up_to = team.state.memory.sizes.gatherv_copy_in_up_to;
    !goes_direct(mode, len, team.seg.geo.chunk, copy_in_up_to)
        && !window_sized(team, mode, len)
        && (in_lines(len) || (team.seg.geo.in_ring(len) && !team.streams(len)))
}

/// A non-root's block that [`slot_only`] says goes into its slot: its
/// two steps, the first carrying the block, as [`direct`] takes them.
fn send_in_slot(team: &mut Team<'_>, send: &[u8]) -> Result<(), Mismatch> {
    sent_again(team, send);
    let s = team.next_step();
    let t = team.next_step();
    if in_lines(send.len()) {
        team.put_lines(s, send);
    } else {
        team.put(s, send);
    }
    finish_call(team, t, false, None)
}

/// At the root: whether every other block goes into its owner's slot
/// and nowhere else ([`slot_only`], as each owner decides it for its own
/// block).
fn slots_only(team: &Team<'_>, g: &Gather<'_>, mode: Mode) -> bool {
    let me = team.rank;
    g.layout.blocks.iter().enumerate().all(|(r, &(_, len))| r == me || slot_only(team, mode, len))
}

/// The root of blocks that all go into their owners' slots
/// ([`slots_only`]): its own block into place, then each other one out of
/// its slot, in [`direct`]'s two steps. [`direct`]'s root takes the same
/// waits, checks and copies for such blocks after its table, route,
/// timing, ring and window decisions, none of which they take (2 ranks,
/// 8 B: 2140 instructions a call at the root there).
fn gather_slots(team: &mut Team<'_>, g: &mut Gather<'_>) -> Result<(), Mismatch> {
    let me = team.rank;
    let s = team.next_step();
    let t = team.next_step();
    let mut placed = 0;
    g.place_own_part(team, &mut placed, usize::MAX);
    let (mut seen, mut mismatch) = (0, None);
    for (r, &(off, len)) in g.layout.blocks.iter().enumerate().filter(|&(r, &(_, len))| r != me && len > 0) {
        seen += 1;
        if let Err(m) = read_whole(team, r, s, &mut g.recv[off..off + len]) {
            mismatch = mismatch.or(Some(m));
        }
    }
    root_end(team, s, seen, mismatch.is_some());
    finish_call(team, t, false, mismatch)
}

/// At the root: rank `r`'s block of step `s`, which went whole into its
/// slot's lines, its slot of the ring or its area, copied into `into` (as
/// long as the root counts the block) once there; a [`Mismatch`] where the
/// owner's head differs. An owner that thinks its block direct (its count
/// differs) waits for a table this root did not publish: its head tells.
fn read_whole(team: &Team<'_>, r: usize, s: u64, into: &mut [u8]) -> Result<(), Mismatch> {
    let (len, expect) = (into.len(), Expect(Some(into.len())));
    if in_lines(len) {
        team.wait_lines_expecting(r, s, len, expect)?;
        team.check(r, s, Via::Slot, expect)?;
        team.copy_lines(r, s, into);
    } else {
        let data = team.wait_data_expecting(r, s, len, expect)?;
        team.check(r, s, team.via(len, false), expect)?;
        crate::shm::stream::copy_out(into, data, false, team.settings.ahead);
    }
    Ok(())
}

/// The root's end of step `s`, where it saw `seen` other blocks' data and
/// whether any owner's differed.
fn root_end(team: &mut Team<'_>, s: u64, seen: usize, mismatched: bool) {
    if team.size == 2 && mismatched {
        // The owner may have sent its block through the window, by its
        // count: the window's numbers stay its own (see window::skip).
        window::skip(team, 1 - team.rank, s);
    }
    if seen == team.size - 1 && !mismatched {
        // A root that has every peer's data of s knows them past the
        // previous call: as the next call's writer it need not read
        // their `done` lines (2 ranks back to back, rotating roots, 512 B:
        // 0.58-0.60 -> 0.47-0.52 us under Open MPI).
        team.others_published(s);
    }
}

/// The end of a direct Gatherv: done with both steps (the root has copied
/// every area it waited for, the others read nothing more of the root's),
/// then published: this rank's block is in its area, its ring or in place.
/// `root_reads`: the root reads this rank's block until it is done with
/// `t`.
fn finish_call(team: &mut Team<'_>, t: u64, root_reads: bool, mismatch: Option<Mismatch>) -> Result<(), Mismatch> {
    team.finish(t);
    team.publish(t);
    if root_reads {
        team.wait_done(t);
    }
    mismatch.map_or(Ok(()), Err)
}

/// Rank `r`'s ring of step `s`, as its owner and its root both see it
/// from the owner's word: a hot block's takes the chunk area's whole span
/// ([`Team::ring_slots`]), a cold block's the area.
fn ring_of<'t>(team: &'t Team<'_>, r: usize, s: u64, hot: bool) -> Ring<'t> {
    Ring { slots: team.ring_slots(hot), consumed: team.shared_word(r, s, CLAIMS) }
}

/// An owner's block through its ring ([`Team::put_ring_piece`]) of step
/// `s`, from the front; while the ring is full, pieces from the back go
/// straight into the root's buffer at `to`. Each side then keeps busy: the
/// root copies the ring out and, while no piece has landed, places its own
/// block; the owner fills the ring and makes cross-memory copies. Through
/// the ring alone, the root copied twice the owner's bytes and set the
/// pace (2 ranks, 8 MiB blocks, cores apart: the owner waited for free
/// pieces, the root took 1.0-1.1 ms against 0.5 for the owner).
fn write_ring(
    team: &Team<'_>,
    peers: &dyn PeerMemory,
    g: &Gather<'_>,
    to: usize,
    s: u64,
    ring: &Ring<'_>,
    stream: bool,
) -> Result<(), Mismatch> {
    let (piece, len) = (team.ring_piece(), g.send.len());
    let (mut front, mut back) = (0, team.ring_pieces(len));
    while front < back {
        if !team.ring_slot_free(front, ring) && front + 1 < back {
            back -= 1;
            let at = piece_bytes(back, piece, len);
            peers.write(g.root, to + at.start, &g.send[at]);
            continue;
        }
        team.wait_ring_slot(s, front, g.root, ring)?;
        team.put_ring_piece(s, front, ring, &g.send[piece_bytes(front, piece, len)], stream);
        front += 1;
    }
    Ok(())
}

/// A root's copy of rank `r`'s block into `block` of its buffer, the part
/// that comes through the owner's ring ([`write_ring`]) of step
/// `steps[0]`, until the owner publishes `steps[1]` (its next, once all
/// its pieces are in the ring or in place); while no piece has landed, the
/// root places parts of its own block, from `*placed`.
fn read_ring(
    team: &Team<'_>,
    g: &mut Gather<'_>,
    r: usize,
    block: std::ops::Range<usize>,
    [s, t]: [u64; 2],
    ring: &Ring<'_>,
    placed: &mut usize,
) {
    let (total, mut copied) = (team.ring_pieces(block.len()), 0);
    let stream = g.streams_out(team, block.len());
    loop {
        let mut landed = team.ring_landed(r, s);
        if landed <= copied {
            if g.place_own_part(team, placed, OWN_PART) {
                continue;
            }
            let (now, past) = team.wait_ring(r, s, t, copied);
            if now <= copied && past {
                return;
            }
            landed = now;
        }
        let landed = landed.min(total);
        team.copy_ring(r, s, &mut g.recv[block.clone()], copied..landed, ring, stream);
        copied = landed;
    }
}

/// Bytes of the pieces a block copied in is cut into, so that the root
/// copies one out while its owner copies the next in: an eighth of a
/// chunk (8 KiB by default).
fn copy_piece(geo: &Geometry) -> usize {
    (geo.chunk / 8).max(1)
}

/// The most pieces' worth of bytes a block copied in goes in whole (one
/// copy in, one out), neither in pieces nor direct: 2 ranks on a Zen 1
/// VM, 12-24 KiB blocks, against pieces (cold) or direct (hot) took 5-10%
/// less time started together and 15-35% less in loops on one buffer,
/// Open MPI and Intel MPI hosts (docs/measurements.md). From 32 KiB the
/// pieces' overlap pays.
pub(super) const WHOLE_UP_TO_PIECES: usize = 3;

/// Whether a block of `len` bytes copied in goes in pieces: more than
/// [`WHOLE_UP_TO_PIECES`], in the chunk area (not in a slot's lines or
/// data, where a segment's chunk is that small). Owner and root decide
/// alike from the length.
fn in_pieces(geo: &Geometry, len: usize) -> bool {
    len > WHOLE_UP_TO_PIECES * copy_piece(geo) && !geo.in_ring(len) && !in_lines(len)
}

/// Whether a block of `len` bytes may go through the node's window
/// ([`window`]): at 2 ranks in the auto mode, from
/// [`super::Sizes::gatherv_window_from`] bytes to the limit of hot blocks
/// copied through the segment ([`super::Sizes::gatherv_hot_copy_in_up_to`],
/// beyond which direct wins), where it fits. Its owner sends it there
/// where it is hot and the owner did not write the last window call
/// ([`window::suits`]: it writes the lines it read last as root), and
/// says so in its word [`WINDOW`], which the root follows. Back to back
/// with roots alternating, against the areas: 2 ranks, Intel MPI host,
/// µs at 16 / 32 / 128 / 256 KiB, cores near 1.02 / 1.39 / 4.4 / 9.0
/// against 1.39 / 2.02 / 5.8 / 11.1; below 4 KiB no faster, at 512 KiB a
/// tenth slower than direct (docs/measurements.md).
fn window_sized(team: &Team<'_>, mode: Mode, len: usize) -> bool {
    let sizes = team.state.memory.sizes;
    let up_to = team.seg.geo.window.min(sizes.gatherv_hot_copy_in_up_to);
    team.size == 2 && mode == Mode::Auto && (sizes.gatherv_window_from..=up_to).contains(&len)
}

/// Default least bytes of a block that a 2-rank Gatherv may send through
/// the window ([`super::Sizes::gatherv_window_from`]).
pub const WINDOW_FROM: usize = 4096;

/// Whether this rank sends its block from the buffer it sent its last
/// one from, which is then taken to be in its caches; remembers this one.
fn sent_again(team: &mut Team<'_>, send: &[u8]) -> bool {
    super::same_buffer_again(&mut team.state.memory.gatherv_sent, send.as_ptr())
}

/// Blocks from which a root streams into a hot receive buffer
/// ([`Gather::streams_out`]): below, ordinary stores keep the lines it
/// holds (2 ranks, Intel MPI host, hot buffers, µs, streaming / not:
/// between barriers 2 MiB 154-163 / 126-128, 4 MiB 312-331 / 276-316;
/// back to back 512 KiB 40 / 34, 2 MiB 159-169 / 139-142, 4 MiB 330-366 /
/// 349-385; docs/measurements.md).
pub const HOT_STREAM_OUT_FROM: usize = 4 << 20;

/// Default bytes of the pieces a direct block is cut into
/// ([`super::Sizes::gatherv_piece`]), each written by its owner or read by
/// the root, whichever claims it: large enough to amortise a system call.
pub const PIECE: usize = 64 << 10;

/// Published words of a direct block's owner (step s): the claims on its
/// pieces, where its block is, the bytes of its end that went through
/// its area; and of every owner of a block with a route: whether it sent
/// from its last buffer again, and when it arrived.
const CLAIMS: usize = 0;
const SOURCE: usize = 1;
const TAIL: usize = 2;
const HOT: usize = 3;
/// An owner's block through the window: the window call's number (the
/// step), in the word where the others say whether theirs is hot (0 or 1,
/// never a step).
const WINDOW: usize = HOT;
/// An owner's arrival ([`clock_ns`]), with a hot block whose route is timed.
const ARRIVED: usize = 4;
/// Whether a direct block goes through its owner's ring instead
/// ([`write_ring`]); [`CLAIMS`] then counts the pieces its root has
/// copied out.
const RING: usize = 5;

/// Bytes of its own block a root places at a time while it waits for a
/// ring's pieces (an owner's piece is 64 KiB by default).
const OWN_PART: usize = 32 << 10;

/// The claims word counts pieces taken from the front (owner, high half)
/// and from the back (root, low half).
const BACK: u64 = 0xffff_ffff;

/// Which end of a block a claim takes a piece from.
#[derive(Clone, Copy)]
enum End {
    Front,
    Back,
}

/// Pieces of `size` bytes in a block of `len`.
fn pieces(len: usize, size: usize) -> u64 {
    len.div_ceil(size) as u64
}

/// The bytes of piece `piece` of `size` bytes in a block of `len`.
fn piece_bytes(piece: u64, size: usize, len: usize) -> std::ops::Range<usize> {
    let start = piece as usize * size;
    start..(start + size).min(len)
}

/// Takes the next unclaimed piece of a block of `pieces` pieces from
/// `end`; None once every piece is claimed. The counts only grow and a
/// claim is one compare-and-swap, so no piece is taken twice.
fn claim(claims: &AtomicU64, pieces: u64, end: End) -> Option<u64> {
    // Relaxed: the word only shares out the work; the pieces' bytes are
    // ordered by the publish/finish of step t.
    let mut seen = claims.load(Relaxed);
    loop {
        let (front, back) = (seen >> 32, seen & BACK);
        if front + back >= pieces {
            return None;
        }
        let (next, piece) = match end {
            End::Front => (seen + (1 << 32), front),
            End::Back => (seen + 1, pieces - 1 - back),
        };
        match claims.compare_exchange_weak(seen, next, Relaxed, Relaxed) {
            Ok(_) => return Some(piece),
            Err(now) => seen = now,
        }
    }
}

/// The rounds of copy-in (see the module documentation). The root checks
/// every rank's head in round 0 and the others the root's, before either
/// uses the other's data (no one writes into the root's buffer but the
/// root).
fn rounds(team: &mut Team<'_>, g: &mut Gather<'_>) -> Result<(), Mismatch> {
    let (me, p, chunk) = (team.rank, team.size, team.seg.geo.chunk);
    let piece = |round: usize, len: usize| (round * chunk).min(len)..((round + 1) * chunk).min(len);
    let s = team.next_step();
    let rounds = if me == g.root {
        let largest = g.layout.blocks.iter().map(|b| b.1).max().unwrap_or(0);
        let rounds = largest.div_ceil(chunk).max(1);
        team.writable(s);
        team.set_word(s, ROUNDS, rounds as u64);
        team.publish(s);
        g.place_own_block(team);
        rounds
    } else {
        let first = piece(0, g.send.len());
        team.put(s, &g.send[first]);
        team.publish(s);
        team.wait_ready(g.root, s);
        team.check(g.root, s, Via::Area, Expect(None))?;
        team.word(g.root, s, ROUNDS) as usize
    };
    // Round 0 is step s; each further round one more step.
    for round in 0..rounds {
        let s = if round == 0 {
            s
        } else {
            let s = team.next_step();
            if me != g.root {
                let range = piece(round, g.send.len());
                team.put(s, &g.send[range]);
            }
            team.publish(s);
            s
        };
        if me == g.root {
            team.wait_all_ready(s);
            for r in (0..p).filter(|&r| r != me) {
                let (off, len) = g.layout.blocks[r];
                let range = piece(round, len);
                if round == 0 {
                    team.check(r, s, team.via(range.len(), false), Expect(Some(len)))?;
                }
                let bytes = team.area_bytes(r, s, range.len());
                let dst = &mut g.recv[off + range.start..off + range.end];
                crate::shm::stream::copy_out(dst, bytes, false, team.settings.ahead);
            }
        }
        team.finish(s);
    }
    Ok(())
}
