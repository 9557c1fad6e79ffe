//! The node layer with ranks as threads over a heap segment: every
//! algorithm, many calls in a row (so areas are reused across calls and
//! algorithms), random delays to shake the interleavings out.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::{reduce_flat, reduce_partition, reduce_zcopy, reduction};
use super::{NodeMemory, QueueSettings, Sizes, Team};
use crate::adapt::Adaptation;
use crate::core::gen::Rng;
use crate::exec::{Buffers, Combiner};
use crate::shm::prefetch::Ahead;
use crate::shm::segment::{Geometry, INLINE, LINES};
use crate::shm::team::in_lines;
use crate::shm::team::{Mismatch, NodeSettings, Spread, TeamState};
use crate::shm::threads::{HeapSegment, Threads};

/// Runs `body(rank, team)` on `p` threads sharing one segment, with the
/// tests' small thresholds ([`TEST_SETTINGS`], [`test_memory`]); each
/// thread's team state persists across everything `body` does.
pub(super) fn on_threads(p: usize, geo: Geometry, body: impl Fn(usize, &mut Team<'_>) + Sync) {
    on_threads_with(p, geo, TEST_SETTINGS, test_memory, body)
}

/// [`on_threads`] with these settings and each rank's first memory from
/// `memory`. A rank that panics leaves the others waiting for it for
/// ever, so a panic ends the test process at once (the test fails with the
/// panic's message).
pub(super) fn on_threads_with(
    p: usize,
    geo: Geometry,
    settings: NodeSettings,
    memory: impl Fn() -> NodeMemory + Sync,
    body: impl Fn(usize, &mut Team<'_>) + Sync,
) {
    let heap = HeapSegment::new(Geometry { ranks: p, ..geo });
    let seg = &heap.seg;
    let (body, memory) = (&body, &memory);
    std::thread::scope(|scope| {
        for rank in 0..p {
            scope.spawn(move || {
                let run = std::panic::AssertUnwindSafe(|| {
                    let mut state = TeamState { memory: memory(), ..TeamState::default() };
                    let mut team = Team {
                        rank,
                        size: p,
                        seg,
                        peers: Some(&Threads),
                        state: &mut state,
                        settings,
                        spread: Spread::Off,
                    };
                    body(rank, &mut team);
                });
                if let Err(panic) = std::panic::catch_unwind(run) {
                    let msg = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    // Straight to stderr: the test harness's capture of
                    // printed output would be lost with the exit.
                    let _ = std::io::Write::write_all(
                        &mut std::io::stderr(),
                        format!("rank {rank} of {p} panicked: {msg}\n(the other ranks would wait for ever)\n")
                            .as_bytes(),
                    );
                    std::process::exit(101);
                }
            });
        }
    });
    drop(heap);
}

/// One node call as the driver makes it: begun with this rank's bytes,
/// ended whatever happens. The ranks of these tests agree, so it succeeds.
pub(super) fn node_call<R>(
    team: &mut Team<'_>,
    bytes: usize,
    run: impl FnOnce(&mut Team<'_>) -> Result<R, Mismatch>,
) -> R {
    team.begin(0, bytes);
    let result = run(team);
    team.end();
    result.expect("a call whose ranks agree")
}

/// Copies into the segment stream from 100 bytes and copies of messages
/// from 1000 bytes into buffers do (PCOLL_SHM_STREAM=100,
/// PCOLL_SHM_STREAM_OUT=1000), so that the threaded tests run both kinds
/// of copies; writes into buffers from 100 bytes go in pieces of 24,
/// asking for their lines ahead; every call after a streak counts as back
/// to back, so that runs of reductions after the first spread their steps
/// (PCOLL_SHM_BACK_TO_BACK as large as it goes).
pub(super) const TEST_SETTINGS: NodeSettings = NodeSettings {
    stream_from: 100,
    stream_out_from: 1000,
    ahead: Ahead { from: 100, piece: 24 },
    oversubscribed: false,
    back_to_back_ns: u64::MAX,
};

/// Copy bytes from which the threaded tests time the stores (4 KiB by
/// default, [`crate::adapt::stores::ADAPT_FROM`]), so that their small
/// messages run both kinds.
pub(super) const TEST_ADAPT_FROM: usize = 256;

/// Message bytes from which a `shm` Bcast times its methods in the
/// threaded tests (256 KiB by default, [`super::bcast_timed::TIMED_FROM`]), so
/// that their small messages run both.
pub(super) const TEST_TIMED_BCAST_FROM: usize = 256;

/// Gatherv blocks from which the threaded tests' hot blocks at 2 ranks go
/// through the window (4 KiB by default), below the test segment's window.
pub(super) const TEST_GATHERV_WINDOW_FROM: usize = 40;

/// Bcast messages from which the threaded tests' hot `shm_pipeline`
/// messages at 2 ranks go through the window (2 KiB by default), below
/// the test segment's window.
pub(super) const TEST_PIPELINE_WINDOW_FROM: usize = 48;

/// Zero-copy sub-chunks of 40 bytes, flat Reduce chunks from 16 and
/// direct Gatherv pieces of 24 (256 KiB, 16 KiB and 64 KiB by default),
/// so that the threaded tests' small vectors and blocks run the sub-chunk
/// loop, cut vectors shorter than the test segment's chunk, and share
/// blocks between owner and root; a timed Bcast from
/// [`TEST_TIMED_BCAST_FROM`]; Gatherv's copy-in limit as users have it
/// (the test segment's chunk area is the smaller).
pub(super) const TEST_SIZES: Sizes = Sizes {
    sub_chunk: 40,
    reduce_chunk_floor: 16,
    gatherv_piece: 24,
    gatherv_copy_in_up_to: super::gatherv_shm::COPY_IN_UP_TO,
    gatherv_hot_copy_in_up_to: super::gatherv_shm::HOT_COPY_IN_UP_TO,
    gatherv_window_from: TEST_GATHERV_WINDOW_FROM,
    pipeline_window_from: TEST_PIPELINE_WINDOW_FROM,
    bcast_timed_from: TEST_TIMED_BCAST_FROM,
};

/// A rank's first memory in the threaded tests: adapting, with the tests'
/// small sizes and thresholds.
pub(super) fn test_memory() -> NodeMemory {
    NodeMemory {
        adaptation: Adaptation::new(true, TEST_ADAPT_FROM, TEST_ADAPT_FROM / 2),
        gatherv_route: crate::adapt::stores::ReaderChoice::new(TEST_ADAPT_FROM),
        gatherv_hot_route: super::gatherv_shm::hot_route_choice(TEST_ADAPT_FROM),
        ..NodeMemory::new(QueueSettings::default(), TEST_SIZES, true)
    }
}

/// Small areas, so that chunk loops run in the tests (but room for the
/// zero-copy Gatherv layout of 8 ranks); a short ring, whose slots carry
/// one line of data beyond the first, so that calls wrap around it (two
/// slots, the fewest that let an algorithm write a step while its peers
/// read the one before) and the sizes around a line and a chunk take all
/// three ways; chunk areas that move through four places; a queue whose
/// cold messages cycle through half its sets; a window of three pieces.
pub(super) const TEST_GEO: Geometry = Geometry {
    ranks: 0,
    chunk: 136,
    allreduce_chunk: 264,
    slots: 8,
    slot_bytes: 40,
    sets: 4,
    cold_slots: 4,
    ring: 2,
    ring_bytes: 64,
    rotations: 4,
    spread: 8,
    window: 120,
    window_pieces: 3,
};

/// Elements are `(lo, hi)` pairs of u32; `a ∘ b` is `(a.lo, b.hi)` when
/// `a.hi + 1 == b.lo`, and poison otherwise: only every contribution once,
/// in rank order, gives the right answer.
pub(super) struct Interval {
    pub combined: AtomicU64,
}

const POISON: u64 = u64::MAX;

impl Interval {
    /// `a ∘ b`.
    fn of(a: u64, b: u64) -> u64 {
        let ok = a != POISON && b != POISON && (a >> 32) as u32 + 1 == b as u32;
        if ok {
            (b & !0xFFFF_FFFF) | (a & 0xFFFF_FFFF)
        } else {
            POISON
        }
    }

    /// Each element of `into` replaced by `f(it, the element of other)`.
    fn elementwise(&self, into: &mut [u8], other: &[u8], f: impl Fn(u64, u64) -> u64) {
        assert_eq!(into.len(), other.len());
        for (d, o) in into.chunks_exact_mut(8).zip(other.chunks_exact(8)) {
            let (x, y) = (u64::from_le_bytes((&*d).try_into().unwrap()), u64::from_le_bytes(o.try_into().unwrap()));
            d.copy_from_slice(&f(x, y).to_le_bytes());
        }
        self.combined.fetch_add(into.len() as u64 / 8, Ordering::Relaxed);
    }
}

impl Combiner for Interval {
    fn combine(&self, src: &[u8], dst: &mut [u8]) {
        self.elementwise(dst, src, |d, s| Interval::of(s, d));
    }

    fn combine_after(&self, first: &mut [u8], second: &[u8]) -> bool {
        self.elementwise(first, second, Interval::of);
        true
    }
}

/// Rank `r`'s contribution to element `j` of a p-rank reduction.
pub(super) fn element(p: usize, r: usize, j: usize) -> u64 {
    let v = (j * (p + 1) + r) as u64;
    v << 32 | v
}

pub(super) fn expected(p: usize, j: usize) -> u64 {
    let lo = (j * (p + 1)) as u64;
    (lo + p as u64 - 1) << 32 | lo
}

fn vector(p: usize, r: usize, count: usize) -> Vec<u8> {
    (0..count).flat_map(|j| element(p, r, j).to_le_bytes()).collect()
}

/// Spins a little now and then, so that ranks drift apart.
pub(super) fn jitter(rng: &mut Rng) {
    if rng.below(4) == 0 {
        for _ in 0..rng.below(2000) {
            std::hint::spin_loop();
        }
    }
}

/// Counts of 8-byte elements around what a slot's lines hold (`LINES *
/// INLINE` bytes, [`in_lines`]): every line, the last one partly or
/// wholly filled; one element more (the chunk area); and a flat
/// Allreduce's chunk followed by a tail that fills the lines.
fn around_lines() -> [usize; 4] {
    let full = LINES * INLINE / 8;
    assert!(in_lines(full * 8) && !in_lines((full + 1) * 8) && (full - 1) * 8 > (LINES - 1) * INLINE);
    [full - 1, full, full + 1, TEST_GEO.allreduce_chunk / 8 + full]
}

/// Each rank's message of every length a slot's lines carry, to every
/// other rank, across more steps than a rank has slots.
#[test]
fn slot_lines_carry_every_length_they_hold() {
    assert!(!in_lines(INLINE) && in_lines(INLINE + 1) && in_lines(LINES * INLINE) && !in_lines(LINES * INLINE + 1));
    for p in [2, 3] {
        on_threads(p, TEST_GEO, |rank, team| {
            let msg = |r: usize, len: usize| -> Vec<u8> { (0..len).map(|i| (r * 31 + i * 7 + len) as u8).collect() };
            for len in INLINE + 1..=LINES * INLINE {
                let s = team.next_step();
                team.put_lines(s, &msg(rank, len));
                team.publish(s);
                let mut got = vec![0; len];
                for r in (0..p).filter(|&r| r != rank) {
                    team.wait_lines(r, s, &mut got).expect("every rank writes its lines");
                    assert_eq!(got, msg(r, len), "p={p} rank={rank} from {r}, {len} B");
                }
                team.finish(s);
            }
        });
    }
}

/// A flat Allreduce of each of [`around_lines`]' counts, through the
/// lines or the chunk area.
#[test]
fn flat_allreduce_is_exact_around_what_slot_lines_hold() {
    for p in [1, 2, 3, 5] {
        on_threads(p, TEST_GEO, |rank, team| {
            let op = Interval { combined: AtomicU64::new(0) };
            for (call, count) in around_lines().into_iter().enumerate() {
                for in_place in [false, true] {
                    let input = vector(p, rank, count);
                    let mut recv = if in_place { input.clone() } else { vec![0xEE; count * 8] };
                    let mut bufs =
                        Buffers { send: (!in_place).then_some(&input[..]), recv: &mut recv, scratch: &mut [] };
                    node_call(team, count * 8, |team| reduce_flat::flat(team, &mut bufs, 8, None, &op));
                    assert_elements_from(&recv, p, 0, || format!("p={p} rank={rank} call={call} count={count}"));
                }
            }
        });
    }
}

#[derive(Clone, Copy, Debug)]
enum Algo {
    Flat,
    Partition,
    ZeroCopy,
}

#[test]
fn reductions_are_exact_in_rank_order_across_many_calls() {
    let counts: Vec<usize> = [1, 3, 7, 8, 11, 12, 13, 40, 100].into_iter().chain(around_lines()).collect();
    for p in [1, 2, 3, 4, 5, 8] {
        on_threads(p, TEST_GEO, |rank, team| {
            let op = Interval { combined: AtomicU64::new(0) };
            let mut rng = Rng(p as u64 * 7919 + rank as u64);
            // The same call sequence on every rank (seeded by p only).
            let mut plan = Rng(p as u64);
            for call in 0..120 {
                let algo = [Algo::Flat, Algo::Partition, Algo::ZeroCopy][plan.below(3)];
                let count = counts[plan.below(counts.len())];
                let root = if plan.below(3) == 0 { None } else { Some(plan.below(p)) };
                let in_place = plan.below(2) == 0;
                let is_out = root.is_none_or(|r| r == rank);
                let input = vector(p, rank, count);
                let mut recv =
                    if in_place && is_out { input.clone() } else { vec![0xEE; if is_out { count * 8 } else { 0 }] };
                let mut scratch = vec![0u8; reduction::zero_copy_scratch(p, TEST_SIZES.sub_chunk)];
                let send = (!(in_place && is_out)).then_some(&input[..]);
                let mut bufs = Buffers { send, recv: &mut recv, scratch: &mut scratch };
                jitter(&mut rng);
                node_call(team, count * 8, |team| match algo {
                    Algo::Flat => reduce_flat::flat(team, &mut bufs, 8, root, &op).map(drop),
                    Algo::Partition => reduce_partition::partition(team, &mut bufs, 8, root, &op),
                    Algo::ZeroCopy => reduce_zcopy::zero_copy(team, &mut bufs, 8, root, &op),
                });
                if is_out {
                    for (j, e) in recv.chunks_exact(8).enumerate() {
                        let got = u64::from_le_bytes(e.try_into().unwrap());
                        assert_eq!(
                            got,
                            expected(p, j),
                            "p={p} rank={rank} call={call} {algo:?} root={root:?} in_place={in_place} count={count} element {j}"
                        );
                    }
                }
            }
        });
    }
}

/// `recv` holds the results for elements `first..` of a reduction of `p`.
fn assert_elements_from(recv: &[u8], p: usize, first: usize, context: impl Fn() -> String) {
    for (j, e) in recv.chunks_exact(8).enumerate() {
        let got = u64::from_le_bytes(e.try_into().unwrap());
        assert_eq!(got, expected(p, first + j), "{} element {j}", context());
    }
}

/// A Gatherv of `send` to `root` in the auto mode, not in place, after a
/// jitter: the root's receive buffer of the layout's extent (filled with
/// 0xEE first), empty elsewhere.
fn auto_gather(
    team: &mut Team<'_>,
    send: &[u8],
    (layout, extent): &(crate::core::call::GatherLayout, usize),
    root: usize,
    rng: &mut Rng,
) -> Vec<u8> {
    use super::gatherv_shm::{self as gatherv, Gather};
    let rank = team.rank;
    let mut recv = vec![0xEE; if rank == root { *extent } else { 0 }];
    let none = Default::default();
    let mut g =
        Gather { send, recv: &mut recv, layout: if rank == root { layout } else { &none }, root, in_place: false };
    jitter(rng);
    node_call(team, send.len(), |team| gatherv::run(team, &mut g, gatherv::Mode::Auto));
    recv
}

/// A Gatherv layout of blocks of these lengths, one after the other in
/// rank order, and its total bytes.
fn packed(lens: impl Iterator<Item = usize>) -> (crate::core::call::GatherLayout, usize) {
    let mut at = 0;
    let blocks = lens
        .map(|len| {
            at += len;
            (at - len, len)
        })
        .collect();
    (crate::core::call::GatherLayout { blocks }, at)
}

/// Who times a choice under test ([`from_two_roots`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Timer {
    Root,
    Reader,
}

/// A timed choice under test: on 2, 3 and 5 ranks, and on 3 that
/// outnumber cores, `body(team, call, root, plan)` runs `per_root` calls
/// from each of roots 0 and 1 in turn, with ranks that drift apart
/// (`plan` is the same on every rank); then a rank has timed both methods
/// (the `summary` of its choice lists a class) exactly if ranks did not
/// outnumber cores and it was a root (`Timer::Root`) or, as every rank
/// is, some root's reader (`Timer::Reader`).
fn from_two_roots(
    geo: Geometry,
    per_root: usize,
    timer: Timer,
    body: impl Fn(&mut Team<'_>, usize, usize, &mut Rng) + Sync,
    summary: impl Fn(&TeamState<NodeMemory>) -> Vec<String> + Sync,
) {
    for (p, oversubscribed) in [(2, false), (3, false), (5, false), (3, true)] {
        on_threads(p, geo, |rank, team| {
            assert!(team.state.memory.adaptation.enabled);
            team.settings.oversubscribed = oversubscribed;
            let mut rng = Rng(p as u64 * 71 + rank as u64);
            let mut plan = Rng(p as u64 + 2000);
            let roots = p.min(2);
            for call in 0..roots * per_root {
                jitter(&mut rng);
                body(team, call, call % roots, &mut plan);
            }
            let timed_both = !summary(team.state).is_empty();
            assert_eq!(
                timed_both,
                (rank < roots || timer == Timer::Reader) && !oversubscribed,
                "p={p} rank {rank} oversubscribed={oversubscribed}"
            );
        });
    }
}

/// Flat Allreduce from [`TEST_ADAPT_FROM`] bytes, long enough
/// for the warm-up, both trial calls and an exploring one, with ranks that
/// drift apart: exact whichever stores rank 0 picks. Each call's elements
/// are new, so data left over from an earlier call would show.
#[test]
fn adaptive_flat_allreduce_is_exact_with_either_stores() {
    use crate::adapt::choice::EXPLORE;
    let count = TEST_ADAPT_FROM / 8 * 3 + 5;
    assert!(count * 8 > 2 * TEST_GEO.allreduce_chunk, "several chunks");
    for p in [2, 3, 5] {
        on_threads(p, TEST_GEO, |rank, team| {
            assert!(team.state.memory.adaptation.enabled);
            let op = Interval { combined: AtomicU64::new(0) };
            let mut rng = Rng(p as u64 * 131 + rank as u64);
            let mut tried = Vec::new();
            for call in 0..EXPLORE as usize + 8 {
                let first = call * count;
                let input: Vec<u8> = (first..first + count).flat_map(|j| element(p, rank, j).to_le_bytes()).collect();
                let in_place = call % 5 == 4;
                let mut recv = if in_place { input.clone() } else { vec![0xEE; count * 8] };
                let mut bufs = Buffers { send: (!in_place).then_some(&input[..]), recv: &mut recv, scratch: &mut [] };
                jitter(&mut rng);
                tried.push(node_call(team, count * 8, |team| reduce_flat::flat(team, &mut bufs, 8, None, &op)));
                assert_elements_from(&recv, p, first, || format!("p={p} rank={rank} call={call} in_place={in_place}"));
            }
            // Rank 0 picks one call ahead: the class's first call goes
            // unpicked, then its warm-up, both trials and (pick 63) the
            // exploration say they tried stores not in use, most calls
            // use those in use. The others know nothing of it.
            let explored = EXPLORE as usize;
            if rank == 0 {
                assert!([1, 2, 3, explored].iter().all(|&call| tried[call]), "p={p}: {tried:?}");
                assert!(tried.iter().filter(|&&t| !t).count() > explored / 2, "p={p}: {tried:?}");
            } else {
                assert!(tried.iter().all(|&t| !t), "p={p} rank={rank}: {tried:?}");
            }
        });
    }
}

/// A flat Allreduce's stores ([`crate::adapt::stores::LeaderChoice`]):
/// every rank copies each call in with the stores rank 0 picked for it a
/// call ahead, through two size classes interleaved and rank 0 changing
/// its mind (streaming stores timed cheaper than ordinary ones for the
/// first half of the calls, dearer after); only rank 0 times, from each
/// class's second call, and of the stores in use one call in
/// [`crate::adapt::stores::ALLREDUCE_TIMED_EVERY`]. The barrier orders
/// rank 0's wish before the others' next call, as its publish of the
/// call's first chunk does.
#[test]
fn flat_allreduce_stores_are_rank_0s_on_every_rank() {
    use crate::adapt::stores::{LeaderChoice, Stores, ALLREDUCE_TIMED_EVERY};
    const CALLS: usize = 400;
    let lens = [TEST_ADAPT_FROM, 4 * TEST_ADAPT_FROM];
    let len_of = |call: usize| lens[usize::from(call % 3 == 2)];
    for p in [2, 3] {
        let used = std::sync::Mutex::new(vec![vec![None; p]; CALLS]);
        let barrier = std::sync::Barrier::new(p);
        on_threads(p, TEST_GEO, |rank, team| {
            let mut timed_calls = 0;
            for call in 0..CALLS {
                let n = len_of(call);
                let this = LeaderChoice::start(team, n);
                let class_first = (0..call).all(|c| len_of(c) != n);
                if rank != 0 || class_first {
                    assert!(this.timed.is_none(), "p={p} rank={rank} call={call}");
                }
                timed_calls += usize::from(this.timed.is_some());
                if let Some(pick) = this.timed {
                    let ns_per_byte = match (pick.method, call < CALLS / 2) {
                        (Stores::Streaming, true) => 1,
                        (Stores::Streaming, false) => 4,
                        (Stores::Ordinary, _) => 2,
                    };
                    let took = std::time::Duration::from_nanos((ns_per_byte * n) as u64);
                    team.state.memory.adaptation.allreduce_stores.record(pick, n, took);
                }
                used.lock().unwrap()[call][rank] = Some(this.stores);
                barrier.wait();
            }
            // Rank 0 times some calls of the stores in use, not all.
            if rank == 0 {
                assert!((CALLS / ALLREDUCE_TIMED_EVERY as usize..CALLS / 2).contains(&timed_calls), "{timed_calls}");
            }
        });
        let used = used.into_inner().unwrap();
        for (call, stores) in used.iter().enumerate() {
            assert!(stores.iter().all(|s| *s == stores[0]), "p={p} call={call}: {stores:?}");
        }
        let count = |calls: std::ops::Range<usize>, kind| used[calls].iter().filter(|s| s[0] == Some(kind)).count();
        assert!(count(10..CALLS / 2, Stores::Streaming) > CALLS / 3, "p={p}: streaming while cheaper");
        assert!(count(CALLS / 2 + 80..CALLS, Stores::Ordinary) > CALLS / 4, "p={p}: ordinary once cheaper");
    }
}

/// A Reduce root's stores reach every other rank in the same call,
/// without a step of their own and with no barrier between calls: the
/// others read the wish the root published before it ended its previous
/// call ([`crate::adapt::stores::root_pick`]), and the root publishes its
/// next once their data is in. Two roots in turn, each
/// changing its mind (its calls take longer with ordinary stores for the
/// first half of the calls, with streaming ones after).
#[test]
fn reduce_stores_are_the_roots_on_every_rank() {
    use crate::adapt::stores;
    const CALLS: usize = 600;
    let n = TEST_ADAPT_FROM;
    for p in [2, 3] {
        let used = std::sync::Mutex::new(vec![vec![None; p]; CALLS]);
        on_threads(p, TEST_GEO, |rank, team| {
            let mut rng = Rng(p as u64 * 17 + rank as u64);
            for call in 0..CALLS {
                let root = call % 2;
                jitter(&mut rng);
                node_call(team, n, |team| {
                    let pick = stores::root_pick(team, n, root, n);
                    let streams = stores::streams(pick.as_ref(), team, n);
                    if rank == root {
                        let slower = if call < CALLS / 2 { !streams } else { streams };
                        std::thread::sleep(std::time::Duration::from_micros(if slower { 200 } else { 50 }));
                    }
                    used.lock().unwrap()[call][rank] = Some(streams);
                    // The others' data, which the root waits for before it
                    // counts its time.
                    let s = team.next_step();
                    team.publish(s);
                    if rank == root {
                        team.wait_all_ready(s);
                    }
                    if let Some(pick) = pick {
                        pick.record(team);
                    }
                    team.finish(s);
                    Ok(())
                });
            }
        });
        let used = used.into_inner().unwrap();
        for (call, streams) in used.iter().enumerate() {
            assert!(streams.iter().all(|s| *s == streams[0]), "p={p} call={call}: {streams:?}");
        }
        let count =
            |calls: std::ops::Range<usize>, streaming| used[calls].iter().filter(|s| s[0] == Some(streaming)).count();
        assert!(count(20..CALLS / 2, true) > CALLS / 3, "p={p}: streaming while cheaper");
        assert!(count(CALLS / 2 + 80..CALLS, false) > CALLS / 4, "p={p}: ordinary once cheaper");
    }
}

/// Flat and partitioned Reduce from [`TEST_ADAPT_FROM`] bytes
/// to several roots, long enough for each root's warm-up, both trial
/// calls and an exploring one, with ranks that drift apart: exact
/// whichever stores the root picks for everyone, and every root has timed
/// both; where ranks outnumber cores, untimed. Each call's elements are
/// new, so data left over from an earlier call would show.
#[test]
fn adaptive_reduce_is_exact_with_either_stores() {
    use crate::adapt::choice::EXPLORE;
    let count = TEST_ADAPT_FROM / 8 * 3 + 5;
    let body = |team: &mut Team<'_>, call: usize, root: usize, _: &mut Rng| {
        let (p, rank) = (team.size, team.rank);
        let op = Interval { combined: AtomicU64::new(0) };
        let first = call * count;
        let input: Vec<u8> = (first..first + count).flat_map(|j| element(p, rank, j).to_le_bytes()).collect();
        let in_place = rank == root && call % 5 == 4;
        let mut recv = match (rank == root, in_place) {
            (true, true) => input.clone(),
            (true, false) => vec![0xEE; count * 8],
            (false, _) => Vec::new(),
        };
        let mut bufs = Buffers { send: (!in_place).then_some(&input[..]), recv: &mut recv, scratch: &mut [] };
        let partitioned = call % 3 == 1;
        if partitioned {
            node_call(team, count * 8, |team| reduce_partition::partition(team, &mut bufs, 8, Some(root), &op));
        } else {
            node_call(team, count * 8, |team| reduce_flat::flat(team, &mut bufs, 8, Some(root), &op));
        }
        assert_elements_from(&recv, p, first, || {
            format!("p={p} rank={rank} call={call} root={root} partitioned={partitioned} in_place={in_place}")
        });
    };
    from_two_roots(TEST_GEO, EXPLORE as usize + 8, Timer::Root, body, |state| {
        state.memory.adaptation.reduce_stores.summary("calls")
    });
}

/// A root's own part put into its receive buffer first is folded with
/// the others in the fold's order exactly where the root is the last rank
/// or the last but one (with a combiner that combines after); elsewhere
/// the buffer is left as it was, for the usual fold.
#[test]
fn fold_onto_own_keeps_the_folds_order() {
    /// An operator that, as one through MPI_Reduce_local, cannot combine
    /// into its first operand.
    struct InFrontOnly(Interval);
    impl Combiner for InFrontOnly {
        fn combine(&self, src: &[u8], dst: &mut [u8]) {
            self.0.combine(src, dst);
        }
    }
    let count = 5;
    for p in 1..=6 {
        let parts: Vec<Vec<u8>> = (0..p).map(|r| vector(p, r, count)).collect();
        for root in 0..p {
            assert_eq!(reduction::own_part_first(p, root), root + 2 >= p);
            let after = Interval { combined: AtomicU64::new(0) };
            let in_front = InFrontOnly(Interval { combined: AtomicU64::new(0) });
            for (behind, combiner) in [(true, &after as &dyn Combiner), (false, &in_front)] {
                let mut out = parts[root].clone();
                let folded = reduction::fold_onto_own(p, root, |r| &parts[r][..], &mut out, combiner);
                assert_eq!(folded, root + 1 == p || (behind && root + 2 == p), "p={p} root={root} behind={behind}");
                if folded {
                    assert_elements_from(&out, p, 0, || format!("p={p} root={root} behind={behind}"));
                } else {
                    assert_eq!(out, parts[root], "p={p} root={root} behind={behind}: touched");
                }
            }
        }
    }
}

/// The canonical order (PCOLL_REPRODUCIBLE): `a ∘ b` hashes the ordered
/// pair, so only `x0 ∘ (x1 ∘ (... ∘ x(p-1)))` gives the reference, the
/// same the simulator holds the `ordered` algorithm to ([`combine_order`]).
#[test]
fn node_reductions_combine_in_the_canonical_order() {
    use crate::core::gen::combine_order;
    struct Order;
    impl Combiner for Order {
        fn combine(&self, src: &[u8], dst: &mut [u8]) {
            for (s, d) in src.chunks_exact(8).zip(dst.chunks_exact_mut(8)) {
                let v = combine_order(
                    u64::from_le_bytes(s.try_into().unwrap()),
                    u64::from_le_bytes((&*d).try_into().unwrap()),
                );
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    let x = |r: usize, j: usize| Rng((r * 1000 + j) as u64).next_u64();
    let counts: Vec<usize> = [1, 5, 17, 40, 100].into_iter().chain(around_lines()).collect();
    for p in [1, 2, 3, 4, 7] {
        on_threads(p, TEST_GEO, |rank, team| {
            let mut plan = Rng(p as u64);
            for call in 0..60 {
                let algo = [Algo::Flat, Algo::Partition, Algo::ZeroCopy][call % 3];
                let count = counts[plan.below(counts.len())];
                let root = if plan.below(2) == 0 { None } else { Some(plan.below(p)) };
                let is_out = root.is_none_or(|r| r == rank);
                let input: Vec<u8> = (0..count).flat_map(|j| x(rank, j).to_le_bytes()).collect();
                let mut recv = vec![0u8; if is_out { count * 8 } else { 0 }];
                let mut scratch = vec![0u8; reduction::zero_copy_scratch(p, TEST_SIZES.sub_chunk)];
                let mut bufs = Buffers { send: Some(&input), recv: &mut recv, scratch: &mut scratch };
                node_call(team, count * 8, |team| match algo {
                    Algo::Flat => reduce_flat::flat(team, &mut bufs, 8, root, &Order).map(drop),
                    Algo::Partition => reduce_partition::partition(team, &mut bufs, 8, root, &Order),
                    Algo::ZeroCopy => reduce_zcopy::zero_copy(team, &mut bufs, 8, root, &Order),
                });
                for (j, e) in recv.chunks_exact(8).enumerate() {
                    let want = (0..p - 1).rev().fold(x(p - 1, j), |acc, r| combine_order(x(r, j), acc));
                    assert_eq!(
                        u64::from_le_bytes(e.try_into().unwrap()),
                        want,
                        "p={p} rank={rank} {algo:?} element {j}"
                    );
                }
            }
        });
    }
}

#[test]
fn float_allreduce_is_bitwise_identical_across_algorithms_and_ranks() {
    struct SumF64;
    impl Combiner for SumF64 {
        fn combine(&self, src: &[u8], dst: &mut [u8]) {
            for (s, d) in src.chunks_exact(8).zip(dst.chunks_exact_mut(8)) {
                let v = f64::from_le_bytes(s.try_into().unwrap()) + f64::from_le_bytes((&*d).try_into().unwrap());
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    let p = 5;
    let count = 37;
    let results: Vec<std::sync::Mutex<Vec<Vec<u8>>>> = (0..p).map(|_| Default::default()).collect();
    on_threads(p, TEST_GEO, |rank, team| {
        const VALUES: [f64; 5] = [1e300, 1.0, -1e300, 1e-3, 3.0e16];
        let input: Vec<u8> =
            (0..count).flat_map(|j| (VALUES[(rank + j) % 5] * (1 + j % 3) as f64).to_le_bytes()).collect();
        for algo in [Algo::Flat, Algo::Partition, Algo::ZeroCopy] {
            let mut recv = vec![0u8; count * 8];
            let mut scratch = vec![0u8; reduction::zero_copy_scratch(p, TEST_SIZES.sub_chunk)];
            let mut bufs = Buffers { send: Some(&input), recv: &mut recv, scratch: &mut scratch };
            node_call(team, count * 8, |team| match algo {
                Algo::Flat => reduce_flat::flat(team, &mut bufs, 8, None, &SumF64).map(drop),
                Algo::Partition => reduce_partition::partition(team, &mut bufs, 8, None, &SumF64),
                Algo::ZeroCopy => reduce_zcopy::zero_copy(team, &mut bufs, 8, None, &SumF64),
            });
            results[rank].lock().unwrap().push(recv);
        }
    });
    let first = results[0].lock().unwrap()[0].clone();
    for (r, per_rank) in results.iter().enumerate() {
        for v in per_rank.lock().unwrap().iter() {
            assert_eq!(*v, first, "rank {r}");
        }
    }
}

#[test]
fn broadcasts_deliver_every_byte_across_many_calls() {
    use super::bcast_queue::{queue, Tree};
    use super::{bcast_pipeline::pipeline, bcast_zcopy::zero_copy};
    for p in [1, 2, 3, 4, 6, 8] {
        on_threads(p, TEST_GEO, |rank, team| {
            let mut rng = Rng(p as u64 * 31 + rank as u64);
            let mut plan = Rng(p as u64 + 1000);
            for call in 0..150 {
                let algo = plan.below(6);
                let n = [1, 7, 39, 40, 41, 56, 57, 96, 97, 200, 333, 1000][plan.below(12)];
                let root = plan.below(p);
                let fragment = [0, 1, 13, 40, 41, 60, 80, 120][plan.below(8)];
                let want: Vec<u8> = (0..n).map(|i| (i * 7 + call + root) as u8).collect();
                let mut data = if rank == root { want.clone() } else { vec![0xEE; n] };
                jitter(&mut rng);
                node_call(team, n, |team| match algo {
                    0 => pipeline(team, &mut data, root),
                    1 => queue(team, &mut data, root, fragment, Tree::Flat),
                    2 => queue(team, &mut data, root, fragment, Tree::Chain),
                    3 => queue(team, &mut data, root, fragment, Tree::Kary(2)),
                    4 => queue(team, &mut data, root, fragment, Tree::Knomial(3)),
                    _ => zero_copy(team, &mut data, root),
                });
                assert_eq!(data, want, "p={p} rank={rank} call={call} algo={algo} n={n} root={root}");
            }
        });
    }
}

/// Queue Bcasts of hot messages (through all the queue's sets) and cold
/// ones (through the sets of its first slots), mixed on one communicator
/// from random roots, with ranks that drift apart and roots that now and
/// then wait for their readers to count out: every byte arrives, each
/// call's sets lie in its window, and hot calls reach beyond the cold one.
#[test]
fn hot_and_cold_queue_broadcasts_share_the_queue() {
    use super::bcast_queue::wait_counted_out;
    use super::bcast_queue_zcopy::{as_root_says, Route};
    let (narrow, wide) = (TEST_GEO.queue_sets(false), TEST_GEO.queue_sets(true));
    assert!(narrow < wide, "{narrow} {wide}");
    for p in [2, 3, 4, 5] {
        on_threads(p, TEST_GEO, |rank, team| {
            let mut rng = Rng(p as u64 * 17 + rank as u64);
            let mut plan = Rng(p as u64 + 77);
            let mut beyond_cold = false;
            for call in 0..300 {
                let (hot, root) = (plan.below(2) == 0, plan.below(p));
                let n = 1 + plan.below(12 * TEST_GEO.slot_bytes);
                let want: Vec<u8> = (0..n).map(|i| (i * 11 + call + root) as u8).collect();
                let mut data = if rank == root { want.clone() } else { vec![0xEE; n] };
                jitter(&mut rng);
                node_call(team, n, |team| as_root_says(team, &mut data, root, Route::queue(hot)));
                assert_eq!(data, want, "p={p} rank={rank} call={call} hot={hot} n={n} root={root}");
                let last_set = team.state.memory.queue_ops.last_set;
                assert!(last_set < if hot { wide } else { narrow }, "call {call} hot={hot}: set {last_set}");
                beyond_cold |= last_set >= narrow;
                let wait = plan.below(4) == 0;
                if rank == root && wait {
                    wait_counted_out(team);
                }
            }
            assert!(beyond_cold, "p={p}: hot calls through the whole queue");
        });
    }
}

/// Window Bcasts from roots that repeat, alternate and jump, mixed with
/// queue Bcasts on one communicator, messages of every piece count up to
/// the window's bytes, ranks drifting apart: every byte arrives (a root of
/// two window calls in a row waits for the first one's readers), every
/// rank counts the window's calls alike, and a root takes the window where
/// it fits and the root did not write the last window call.
#[test]
fn window_broadcasts_deliver_every_byte_from_any_root_sequence() {
    use super::bcast_queue_zcopy::{as_root_says, Route};
    use super::window::suits;
    for p in [1, 2, 3, 4, 7] {
        on_threads(p, TEST_GEO, |rank, team| {
            let mut rng = Rng(p as u64 * 23 + rank as u64);
            let mut plan = Rng(p as u64 + 555);
            let (mut root, mut windowed) = (0, 0);
            for call in 0..600 {
                root = match plan.below(3) {
                    0 => root,
                    1 => (root + 1) % p,
                    _ => plan.below(p),
                };
                let n = plan.below(TEST_GEO.window + 2);
                let calls = team.state.memory.window_calls;
                let fits = n <= TEST_GEO.window;
                assert_eq!(suits(team, root, n), fits && (calls.last == 0 || calls.last_writer != root));
                let route = if fits && plan.below(5) != 0 { Route::Window } else { Route::queue(plan.below(2) == 0) };
                windowed += u64::from(route == Route::Window);
                let want: Vec<u8> = (0..n).map(|i| (i * 13 + call * 7 + root) as u8).collect();
                let mut data = if rank == root { want.clone() } else { vec![0xEE; n] };
                jitter(&mut rng);
                node_call(team, n, |team| as_root_says(team, &mut data, root, route));
                assert_eq!(data, want, "p={p} rank={rank} call={call} n={n} root={root} {route:?}");
            }
            assert_eq!(team.state.memory.window_calls.bcasts, windowed, "p={p} rank={rank}");
        });
    }
}

/// Allreduces and Reduces through the window at 2 ranks (`shm_window`)
/// as the registry runs them: vectors of every length around a piece and
/// a segment (several segments an Allreduce), MPI_IN_PLACE or not, Reduce
/// roots that alternate, repeat or jump, window and queue Bcasts from
/// either root between them, ranks drifting apart. Every element combined
/// once, in rank order, on every rank that gets the result; both ranks
/// count the calls alike, and a Reduce takes the window where it fits and
/// its non-root did not write the last window call. At 3 ranks the calls
/// go `shm_flat_zcopy`'s ways.
#[test]
fn window_reductions_combine_in_order_between_window_bcasts() {
    use super::bcast_queue_zcopy::{as_root_says, Route};
    use super::reduce_window::run;
    use super::window::{pieces_fit, suits};
    use super::NodeCall;
    for p in [2, 3] {
        on_threads(p, TEST_GEO, |rank, team| {
            let mut rng = Rng(77 + rank as u64);
            let mut plan = Rng(4242 + p as u64);
            let op = Interval { combined: AtomicU64::new(0) };
            let (mut allreduces, mut reduces, mut root) = (0, 0, 0);
            let mut scratch = vec![0u8; reduction::zero_copy_scratch(p, TEST_SIZES.sub_chunk)];
            for call in 0..600 {
                root = match plan.below(3) {
                    0 => root,
                    1 => (root + 1) % p,
                    _ => plan.below(p),
                };
                let what = plan.below(8);
                if what < 2 {
                    let n = plan.below(TEST_GEO.window + 2);
                    let route = if suits(team, root, n) { Route::Window } else { Route::queue(plan.below(2) == 0) };
                    let want: Vec<u8> = (0..n).map(|i| (i * 3 + call + root) as u8).collect();
                    let mut data = if rank == root { want.clone() } else { vec![0xEE; n] };
                    jitter(&mut rng);
                    node_call(team, n, |team| as_root_says(team, &mut data, root, route));
                    assert_eq!(data, want, "p={p} rank={rank} call={call}: the Bcast");
                    continue;
                }
                let reduce_to = (what < 5).then_some(root);
                let count = match reduce_to {
                    Some(_) => plan.below(TEST_GEO.window / 8 + 4),
                    None => plan.below(3 * TEST_GEO.window / 8),
                };
                let gets = reduce_to.is_none_or(|root| root == rank);
                let in_place = plan.below(3) == 0 && gets;
                let first = call * 3;
                let input: Vec<u8> = (first..first + count).flat_map(|j| element(p, rank, j).to_le_bytes()).collect();
                let mut recv = match (gets, in_place) {
                    (false, _) => vec![],
                    (true, true) => input.clone(),
                    (true, false) => vec![0xEE; count * 8],
                };
                let send = (!in_place).then_some(&input[..]);
                let calls = team.state.memory.window_calls;
                let fits = pieces_fit(TEST_GEO, count * 8, TEST_GEO.window_piece());
                let writer_free = |writer: usize| calls.last == 0 || calls.last_writer != writer;
                match reduce_to {
                    Some(root) => reduces += u64::from(p == 2 && count > 0 && fits && writer_free(1 - root)),
                    None => allreduces += u64::from(p == 2 && count > 0),
                }
                let bufs = Buffers { send, recv: &mut recv, scratch: &mut scratch };
                jitter(&mut rng);
                node_call(team, count * 8, |team| {
                    run(team, NodeCall::Reduce { bufs, unit: 8, root: reduce_to, host: None }, &op)
                });
                if gets {
                    let context = || format!("p={p} rank={rank} call={call} {count} elements to {reduce_to:?}");
                    assert_elements_from(&recv, p, first, context);
                }
            }
            let counted = team.state.memory.window_calls;
            assert_eq!((counted.allreduces, counted.reduces), (allreduces, reduces), "p={p} rank={rank}");
            assert!(p > 2 || reduces > 50, "p={p}: {reduces} Reduces through the window");
        });
    }
}

/// Gatherv blocks at 2 ranks through the window the Bcasts share: roots
/// that alternate, repeat or jump, owners sending from one buffer (hot)
/// or fresh ones, blocks of every length around the window's sizes (a
/// slot's lines to a chunk area), window and queue Bcasts between them,
/// ranks drifting apart. Every block in place; an owner takes the window
/// where its block is hot, of the window's sizes and it did not write the
/// last window call, and both ranks count those calls. At 3 ranks no
/// block takes it. (Erroneous calls: driver::tests::mismatch.)
#[test]
fn gathers_at_two_ranks_share_the_window_with_the_bcasts() {
    use super::bcast_queue_zcopy::{as_root_says, Route};
    use super::window::suits;
    let (from, up_to) = (TEST_GATHERV_WINDOW_FROM, TEST_GEO.window);
    let calls = |team: &mut Team<'_>, call: usize, root: usize, kept: &mut [u8], rng: &mut Rng, plan: &mut Rng| {
        let (rank, p) = (team.rank, team.size);
        if plan.below(4) == 0 {
            let n = plan.below(up_to + 2);
            let fits = n <= up_to;
            let route = if fits && suits(team, root, n) { Route::Window } else { Route::queue(plan.below(2) == 0) };
            let want: Vec<u8> = (0..n).map(|i| (i * 5 + call + root) as u8).collect();
            let mut data = if rank == root { want.clone() } else { vec![0xEE; n] };
            jitter(rng);
            node_call(team, n, |team| as_root_says(team, &mut data, root, route));
            assert_eq!(data, want, "p={p} rank={rank} call={call}: the Bcast");
            return false;
        }
        let len =
            [plan.below(from), from + plan.below(up_to - from + 1), plan.below(TEST_GEO.chunk + 8)][plan.below(3)];
        let hot = plan.below(3) != 0;
        let byte = |r: usize, i: usize| (r * 29 + i * 3 + call) as u8;
        let mut fresh = vec![0u8; len];
        let send = if hot { &mut kept[..len] } else { &mut fresh[..] };
        send.iter_mut().enumerate().for_each(|(i, b)| *b = byte(rank, i));
        let last = team.state.memory.window_calls;
        let again = team.state.memory.gatherv_sent == send.as_ptr() as usize;
        let windowed = rank != root && p == 2 && again && (from..=up_to).contains(&len);
        let windowed = windowed && (last.last == 0 || last.last_writer != rank);
        let recv = auto_gather(team, send, &packed((0..p).map(|_| len)), root, rng);
        if rank == root {
            let want: Vec<u8> = (0..p).flat_map(|r| (0..len).map(move |i| byte(r, i))).collect();
            assert_eq!(recv, want, "p={p} call={call} root={root} len={len} hot={hot}");
        }
        windowed
    };
    window_calls_as_predicted(TEST_GEO, TEST_GEO.chunk + 8, "window Gathervs", calls, |team| {
        team.state.memory.window_calls.gathers
    });
}

/// `shm_pipeline` Bcasts as the registry runs them, with window Gathervs
/// between: 600 calls at 2 and 3 ranks, roots repeating, alternating or
/// jumping, each rank's buffer its last or a new one, lengths around the
/// window's bounds and a slot's lines, ranks drifting apart. Every byte
/// arrives; a root takes the window where its message is hot, of the
/// window's sizes, and it did not write the last window call, and both
/// ranks count those calls. At 3 ranks none. (Erroneous calls:
/// driver::tests::mismatch.)
#[test]
fn pipeline_bcasts_at_two_ranks_take_the_window_when_hot() {
    use super::bcast_pipeline::run_pipeline;
    use super::window::suits;
    use super::NodeCall;
    // A window larger than a chunk and a slot's lines, so that pipelines
    // of several chunks and the window share its sizes.
    let geo = Geometry { window: 480, window_pieces: 3, ..TEST_GEO };
    let (from, up_to) = (TEST_PIPELINE_WINDOW_FROM.max(LINES * INLINE + 1), geo.window);
    let unused = Interval { combined: AtomicU64::new(0) };
    let calls = |team: &mut Team<'_>, call: usize, root: usize, kept: &mut [u8], rng: &mut Rng, plan: &mut Rng| {
        let (rank, p) = (team.rank, team.size);
        let (kept, kept_block) = kept.split_at_mut(up_to + 8);
        let hot = plan.below(3) != 0;
        if plan.below(5) == 0 {
            let len = TEST_GATHERV_WINDOW_FROM + plan.below(up_to - TEST_GATHERV_WINDOW_FROM + 1);
            let mut fresh = vec![0u8; len];
            let send = if hot { &mut kept_block[..len] } else { &mut fresh[..] };
            send.fill(rank as u8);
            let recv = auto_gather(team, send, &packed((0..p).map(|_| len)), root, rng);
            if rank == root {
                assert!(recv.chunks(len).enumerate().all(|(r, b)| b.iter().all(|&x| x == r as u8)));
            }
            return false;
        }
        let n = [plan.below(from), from + plan.below(up_to - from + 1), plan.below(up_to + 8)][plan.below(3)];
        let want: Vec<u8> = (0..n).map(|i| (i * 7 + call + root) as u8).collect();
        let mut fresh = vec![0xEE; n];
        let data = if hot { &mut kept[..n] } else { &mut fresh[..] };
        let mut windowed = false;
        if rank == root {
            data.copy_from_slice(&want);
            let again = team.state.memory.bcast_buffer == data.as_ptr() as usize;
            windowed = p == 2 && again && (from..=up_to).contains(&n) && suits(team, root, n);
        } else {
            data.fill(0xEE);
        }
        jitter(rng);
        node_call(team, n, |team| run_pipeline(team, NodeCall::bcast(data, root), &unused));
        assert_eq!(data, &want[..], "p={p} rank={rank} call={call} root={root} n={n} hot={hot}");
        windowed
    };
    window_calls_as_predicted(geo, 2 * up_to + 8, "window Bcasts", calls, |team| team.state.memory.window_calls.bcasts);
}

/// The frame of the window tests: 600 calls at 2 and 3 ranks, each run by
/// `calls(team, call, root, kept, rng, plan)` with roots repeating,
/// alternating or jumping (from `plan`, the same on every rank), `kept`
/// the rank's buffer of `kept_bytes` for all its calls, and `rng` its own
/// for jitter; `calls` says whether its rule predicts a window call on
/// this rank, which one rank of each such call does. Every rank's count
/// (`counted`) of `what` matches the predictions: some at 2 ranks, none at
/// 3.
fn window_calls_as_predicted(
    geo: Geometry,
    kept_bytes: usize,
    what: &str,
    calls: impl Fn(&mut Team<'_>, usize, usize, &mut [u8], &mut Rng, &mut Rng) -> bool + Sync,
    counted: impl Fn(&Team<'_>) -> u64 + Sync,
) {
    use std::sync::atomic::Ordering::Relaxed;
    for p in [2, 3] {
        let predicted = AtomicU64::new(0);
        let counts: Vec<AtomicU64> = (0..p).map(|_| AtomicU64::new(0)).collect();
        on_threads(p, geo, |rank, team| {
            let (mut rng, mut plan) = (Rng(p as u64 * 61 + rank as u64), Rng(p as u64 + 4242));
            let mut kept = vec![0u8; kept_bytes];
            let mut root = 0;
            for call in 0..600 {
                root = match plan.below(4) {
                    0 => root,
                    1 | 2 => (root + 1) % p,
                    _ => plan.below(p),
                };
                let windowed = calls(team, call, root, &mut kept, &mut rng, &mut plan);
                predicted.fetch_add(u64::from(windowed), Relaxed);
            }
            counts[rank].store(counted(team), Relaxed);
        });
        let predicted = predicted.load(Relaxed);
        for (rank, count) in counts.iter().enumerate() {
            assert_eq!(count.load(Relaxed), predicted, "p={p} rank={rank}: {what}");
        }
        assert_eq!(predicted > 0, p == 2, "p={p}: {predicted} {what}");
    }
}

/// The timed broadcast, in turns of two calls in the first size class of
/// each choice: zero copy against the pipeline (several chunks), and below
/// it zero copy against the queue (one round of the queue or several).
/// Long enough for the warm-up, both trial calls and exploring ones, from
/// several roots, with ranks that drift apart: every byte arrives
/// whichever method each root picks, and every root has timed both of
/// each choice; where ranks outnumber cores, every byte arrives through
/// the pipeline, untimed.
#[test]
fn timed_broadcasts_deliver_every_byte_with_either_method() {
    timed_broadcasts(false, super::bcast_timed::timed, |state| {
        let (large, small) = (state.memory.bcast_method.summary("calls"), state.memory.bcast_way.summary("calls"));
        if large.is_empty() || small.is_empty() {
            return Vec::new();
        }
        [large, small].concat()
    });
}

/// The same with every rank broadcasting from and into one buffer (hot
/// messages), by `shm` and by `shm_queue_zcopy`: every root has timed
/// both ways for hot messages.
#[test]
fn timed_broadcasts_of_hot_messages_time_both_ways() {
    use super::bcast_queue_zcopy::queue_or_zero_copy;
    for run in [super::bcast_timed::timed, queue_or_zero_copy] {
        timed_broadcasts(true, run, |state| state.memory.bcast_hot_way.summary("calls"));
    }
}

/// The calls of the timed Bcast tests, by `run`, each rank's buffer a new
/// one or (`hot`) the one of its last call.
fn timed_broadcasts(
    hot: bool,
    run: fn(&mut Team<'_>, &mut [u8], usize) -> Result<(), Mismatch>,
    summary: impl Fn(&TeamState<NodeMemory>) -> Vec<String> + Sync,
) {
    use super::bcast_timed::way_classes_from;
    use crate::adapt::choice::EXPLORE;
    thread_local! {
        /// A rank's last buffer: its one buffer (`hot`), or kept until the
        /// next call's is made, so that that one lies elsewhere.
        static KEPT: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(2 * TEST_TIMED_BCAST_FROM));
    }
    let small_from = way_classes_from(TEST_TIMED_BCAST_FROM);
    let body = |team: &mut Team<'_>, call: usize, root: usize, plan: &mut Rng| {
        let n = match (call / 2) % 2 {
            0 => TEST_TIMED_BCAST_FROM + plan.below(TEST_TIMED_BCAST_FROM),
            _ => small_from + plan.below(TEST_TIMED_BCAST_FROM - small_from),
        };
        let want: Vec<u8> = (0..n).map(|i| (i * 13 + call) as u8).collect();
        let mut data = if hot { KEPT.take() } else { Vec::with_capacity(n) };
        data.clear();
        if team.rank == root {
            data.extend_from_slice(&want);
        } else {
            data.resize(n, 0xEE);
        }
        node_call(team, n, |team| run(team, &mut data, root));
        let (p, rank, oversubscribed) = (team.size, team.rank, team.settings.oversubscribed);
        assert_eq!(
            data, want,
            "p={p} oversubscribed={oversubscribed} rank={rank} call={call} n={n} root={root} hot={hot}"
        );
        KEPT.set(data);
    };
    from_two_roots(TEST_GEO, 2 * EXPLORE as usize + 16, Timer::Root, body, summary);
}

/// A Bcast reader counts each call's time for the stores the root tagged
/// the message with, not for those it wished: while the root streams
/// whatever it wishes, it knows one kind's cost only.
#[test]
fn a_bcast_reader_counts_its_time_for_the_stores_the_root_used() {
    use crate::adapt::stores::BcastStores;
    on_threads(2, TEST_GEO, |rank, team| {
        if rank == 1 {
            for streamed in [true, false] {
                for _ in 0..8 {
                    let stores = BcastStores::start(team, 0, TEST_ADAPT_FROM);
                    assert!(stores.timed());
                    stores.end(team, streamed);
                }
                let timed_both = !team.state.memory.adaptation.bcast_stores.summary("calls").is_empty();
                assert_eq!(timed_both, !streamed, "after calls that all streamed, and then some that did not");
            }
        }
    });
}

/// Pipeline and queue broadcasts in the first size class of the readers'
/// store choice, long enough for every reader's warm-up, both trial calls
/// and exploring ones, from several roots, with ranks that drift apart:
/// every byte arrives whichever stores the root copies in with, and every
/// reader has timed both (it counts its time for the stores the root
/// tagged, so both were used); where ranks outnumber cores, untimed.
#[test]
fn adaptive_broadcasts_deliver_every_byte_with_either_stores() {
    use super::bcast_pipeline::pipeline;
    use super::bcast_queue::{queue, Tree};
    use crate::adapt::choice::EXPLORE;
    let body = |team: &mut Team<'_>, call: usize, root: usize, plan: &mut Rng| {
        let n = TEST_ADAPT_FROM + plan.below(TEST_ADAPT_FROM);
        let want: Vec<u8> = (0..n).map(|i| (i * 7 + call) as u8).collect();
        let mut data = if team.rank == root { want.clone() } else { vec![0xEE; n] };
        super::tests::node_call(team, n, |team| match call % 3 {
            0 => pipeline(team, &mut data, root),
            1 => queue(team, &mut data, root, 0, Tree::Flat),
            _ => queue(team, &mut data, root, 0, Tree::Knomial(2)),
        });
        let (p, rank, oversubscribed) = (team.size, team.rank, team.settings.oversubscribed);
        assert_eq!(data, want, "p={p} oversubscribed={oversubscribed} rank={rank} call={call} n={n} root={root}");
    };
    from_two_roots(TEST_GEO, EXPLORE as usize + 8, Timer::Reader, body, |state| {
        state.memory.adaptation.bcast_stores.summary("calls")
    });
}

#[test]
fn gathers_put_every_block_in_place_across_many_calls() {
    use super::gatherv_shm::{self as gatherv, Gather};
    use crate::core::gen::random_layout;
    for p in [1, 2, 3, 5, 8] {
        on_threads(p, TEST_GEO, |rank, team| {
            let mut rng = Rng(p as u64 * 77 + rank as u64);
            let mut plan = Rng(p as u64 + 500);
            for call in 0..100 {
                let mode = [gatherv::Mode::CopyIn, gatherv::Mode::ZeroCopy, gatherv::Mode::Auto][plan.below(3)];
                let root = plan.below(p);
                let in_place = plan.below(3) == 0;
                let layout = random_layout(p, [3, 40, 250, 20000][plan.below(4)], plan.next_u64());
                let byte = |r: usize, i: usize| (r * 37 + i * 11 + call) as u8;
                let (off, len) = layout.blocks[rank];
                let block: Vec<u8> = (0..len).map(|i| byte(rank, i)).collect();
                let extent = layout.blocks.iter().map(|&(o, l)| o + l).max().unwrap_or(0) + 2;
                let mut recv = vec![0xEE; if rank == root { extent } else { 0 }];
                if rank == root && in_place {
                    recv[off..off + len].copy_from_slice(&block);
                }
                let none = Default::default();
                let mut g = Gather {
                    send: if rank == root && in_place { &[] } else { &block },
                    recv: &mut recv,
                    layout: if rank == root { &layout } else { &none },
                    root,
                    in_place: rank == root && in_place,
                };
                jitter(&mut rng);
                node_call(team, len, |team| gatherv::run(team, &mut g, mode));
                // Once it returns, a rank may reuse its block; the root
                // must have everything it reads of it by then.
                let mut block = block;
                block.fill(0x5A);
                if rank == root {
                    let mut want = vec![0xEE; extent];
                    for (r, &(o, l)) in layout.blocks.iter().enumerate() {
                        for i in 0..l {
                            want[o + i] = byte(r, i);
                        }
                    }
                    assert_eq!(recv, want, "p={p} call={call} {mode:?} root={root} in_place={in_place}");
                }
                // Ranks that left the Gatherv early (its root may still be
                // copying from their areas) go on to another collective.
                if plan.below(2) == 0 {
                    let from = (root + 1) % p;
                    let want: Vec<u8> = (0..300).map(|i| (i * 3 + call) as u8).collect();
                    let mut data = if rank == from { want.clone() } else { vec![0; 300] };
                    node_call(team, 300, |team| super::bcast_pipeline::pipeline(team, &mut data, from));
                    assert_eq!(data, want, "p={p} call={call}: the Bcast after the Gatherv");
                }
            }
        });
    }
}

/// Gatherv owners whose calls come back to back, or send from their last
/// buffer, spread their steps through their chunk areas and their roots
/// find them there, whatever the other ranks do: each rank's window for
/// back to back is any gap or none (every rank, none, or every other one),
/// its blocks come from new buffers or one (every rank's, with no
/// window), chunks of three pages (a spread step's place differs from its
/// chunk area's), all modes, blocks from a slot's lines to several areas,
/// rotating roots, a Bcast through the chunk areas between some calls;
/// every block in place.
#[test]
fn gathers_follow_each_owners_spread() {
    use super::gatherv_shm::{self as gatherv, Gather};
    use crate::core::gen::random_layout;
    let chunk = 3 * crate::shm::segment::PAGE;
    let geo = Geometry { chunk, allreduce_chunk: chunk, ..TEST_GEO };
    type Windows = fn(usize) -> u64;
    let windows: [(&str, Windows, bool); 4] = [
        ("every rank", |_| u64::MAX, false),
        ("none", |_| 0, false),
        ("every other rank", |r| if r % 2 == 1 { u64::MAX } else { 0 }, false),
        ("none, one buffer", |_| 0, true),
    ];
    for (what, window, one_buffer) in windows {
        for p in [2, 3, 4] {
            on_threads_with(p, geo, TEST_SETTINGS, test_memory, |rank, team| {
                team.settings.back_to_back_ns = window(rank);
                let mut rng = Rng(p as u64 * 31 + rank as u64);
                let mut plan = Rng(p as u64 + 900);
                // Every block sent so far, so that each new one has an
                // address of its own; or the one buffer.
                let mut sent: Vec<Vec<u8>> = Vec::new();
                let mut one = vec![0u8; 40000];
                for call in 0..80 {
                    let mode = [gatherv::Mode::CopyIn, gatherv::Mode::ZeroCopy, gatherv::Mode::Auto][plan.below(3)];
                    let root = call % p;
                    let layout = random_layout(p, [40, 3000, 9000, 40000][plan.below(4)], plan.next_u64());
                    let byte = |r: usize, i: usize| (r * 37 + i * 13 + call) as u8;
                    let (_, len) = layout.blocks[rank];
                    let mut block: Vec<u8> = (0..len).map(|i| byte(rank, i)).collect();
                    if one_buffer {
                        one[..len].copy_from_slice(&block);
                        block.clear();
                    }
                    let send = if one_buffer { &one[..len] } else { &block[..] };
                    let extent = layout.blocks.iter().map(|&(o, l)| o + l).max().unwrap_or(0);
                    let mut recv = vec![0xEE; if rank == root { extent } else { 0 }];
                    let none = Default::default();
                    let mut g = Gather {
                        send,
                        recv: &mut recv,
                        layout: if rank == root { &layout } else { &none },
                        root,
                        in_place: false,
                    };
                    jitter(&mut rng);
                    node_call(team, len, |team| gatherv::run(team, &mut g, mode));
                    if rank == root {
                        let mut want = vec![0xEE; extent];
                        for (r, &(o, l)) in layout.blocks.iter().enumerate() {
                            want[o..o + l].iter_mut().enumerate().for_each(|(i, b)| *b = byte(r, i));
                        }
                        assert_eq!(recv, want, "{what}: p={p} call={call} {mode:?} root={root}");
                    }
                    if plan.below(4) == 0 {
                        let want: Vec<u8> = (0..9000).map(|i| (i * 7 + call) as u8).collect();
                        let mut data = if rank == root { want.clone() } else { vec![0; 9000] };
                        node_call(team, 9000, |team| super::bcast_pipeline::pipeline(team, &mut data, root));
                        assert_eq!(data, want, "{what}: p={p} call={call}: the Bcast after the Gatherv");
                    }
                    sent.push(block);
                }
                let spread = team.state.memory.gatherv_runs.spread_calls;
                let spreads = window(rank) > 0 || one_buffer;
                assert_eq!(spread > 0, spreads, "{what}: p={p} rank={rank}: {spread} calls spread");
            });
        }
    }
}

/// Gatherv blocks that go either way in the auto mode (more than a copy
/// piece, at most a chunk): from the buffer an owner sent its last block
/// from, direct, else copied in piece by piece while the root copies out;
/// the root learns which from the owner. Owners switch at random between
/// one buffer and fresh ones, roots rotate, ranks drift apart, and every
/// block is in place.
#[test]
fn gathers_of_blocks_sent_either_way_are_exact() {
    use super::gatherv_shm as gatherv;
    let (ring, chunk) = (TEST_GEO.ring_bytes, TEST_GEO.chunk);
    assert!(gatherv::WHOLE_UP_TO_PIECES * chunk / 8 < ring, "blocks past the ring are several pieces");
    for p in [2, 3, 5] {
        on_threads(p, TEST_GEO, |rank, team| {
            let mut rng = Rng(p as u64 * 31 + rank as u64);
            let mut plan = Rng(p as u64 + 900);
            let mut kept = vec![0u8; chunk];
            for call in 0..200 {
                let root = call % p;
                let lens: Vec<usize> = (0..p).map(|_| ring + 1 + plan.below(chunk - ring)).collect();
                let byte = |r: usize, i: usize| (r * 41 + i * 13 + call) as u8;
                let len = lens[rank];
                let mut fresh = vec![0u8; len];
                let send = if rng.below(2) == 0 { &mut kept[..len] } else { &mut fresh[..] };
                send.iter_mut().enumerate().for_each(|(i, b)| *b = byte(rank, i));
                let recv = auto_gather(team, send, &packed(lens.iter().copied()), root, &mut rng);
                if rank == root {
                    let want: Vec<u8> = (0..p).flat_map(|r| (0..lens[r]).map(move |i| byte(r, i))).collect();
                    assert_eq!(recv, want, "p={p} call={call} root={root}");
                }
            }
        });
    }
}

/// A cold Gatherv block that may go either way (more than a copy piece,
/// at most a chunk): from an owner whose calls come back to back, through
/// its area in pieces whatever route its root wants, so that the owner
/// returns once its block is in; from one whose calls do not, direct
/// where its root wants (at least on the root's trial of that route and
/// its explorations, one in [`EXPLORE`] calls). Every block in place.
#[test]
fn back_to_back_owners_send_cold_blocks_through_their_areas() {
    use super::host_runs::RUN;
    use crate::adapt::choice::EXPLORE;
    // Chunks of 1 KiB: blocks past a slot's lines fit one.
    let geo = Geometry { chunk: 4 * TEST_ADAPT_FROM, allreduce_chunk: 16 * TEST_ADAPT_FROM, ..TEST_GEO };
    let len = geo.chunk - 24;
    for (within, back_to_back) in [(u64::MAX, true), (0, false)] {
        // The owner's calls that wrote no pieces (back to back: from the
        // second run on, the first one's pace unknown).
        let direct = AtomicUsize::new(0);
        on_threads(2, geo, |rank, team| {
            team.settings.back_to_back_ns = within;
            let mut rng = Rng(rank as u64 + 77);
            // Two buffers in turn: no block goes from its owner's last one.
            let mut buffers = [vec![0u8; len], vec![0u8; len]];
            for call in 0..EXPLORE as usize + 2 * RUN as usize {
                let byte = |r: usize, i: usize| (r * 37 + i * 11 + call) as u8;
                let send = &mut buffers[call % 2];
                send.iter_mut().enumerate().for_each(|(i, b)| *b = byte(rank, i));
                let pieces = || team.seg.control(1).pieces.each_ref().map(|count| count.load(Ordering::Relaxed));
                let before = pieces();
                let recv = auto_gather(team, send, &packed([len, len].into_iter()), 0, &mut rng);
                if rank == 1 && (!back_to_back || call >= RUN as usize) && pieces() == before {
                    direct.fetch_add(1, Ordering::Relaxed);
                }
                if rank == 0 {
                    let want: Vec<u8> = (0..2).flat_map(|r| (0..len).map(move |i| byte(r, i))).collect();
                    assert_eq!(recv, want, "call={call} back to back={back_to_back}");
                }
            }
        });
        let direct = direct.into_inner();
        assert_eq!(direct == 0, back_to_back, "{direct} calls direct, back to back={back_to_back}");
    }
}

/// Gatherv blocks larger than a chunk area, whose roots want them through
/// the areas (the first route, with PCOLL_SHM_ADAPT): each goes through its
/// owner's area as a ring of pieces, and while the ring is full its owner
/// writes pieces from the back straight into the root's buffer. Small and
/// empty blocks beside them, roots that rotate, in place or not, owners
/// that send from one buffer or fresh ones, ranks that drift apart: every
/// block in place, both ways of a ring block's pieces taken, and rings of
/// hot blocks (through the area's whole span) and of cold ones.
#[test]
fn gathers_through_the_owners_rings_are_exact() {
    use super::gatherv_shm::{self as gatherv, Gather};
    use crate::shm::threads::written;
    let area = TEST_GEO.area();
    // Calls whose ring blocks went through the ring only, and through the
    // ring and straight into the root's buffer.
    let (ring_only, ring_and_direct) = (AtomicUsize::new(0), AtomicUsize::new(0));
    // Calls whose ring blocks were sent from their owner's last buffer
    // (hot), and the others.
    let (hot_rings, cold_rings) = (AtomicUsize::new(0), AtomicUsize::new(0));
    for p in [2, 3, 5] {
        on_threads(p, TEST_GEO, |rank, team| {
            let mut rng = Rng(p as u64 * 53 + rank as u64);
            let mut plan = Rng(p as u64 + 1700);
            let mut kept = vec![0u8; 40 * area];
            let mut last_sent = 0;
            for call in 0..120 {
                let root = call % p;
                let in_place = plan.below(4) == 0;
                let lens: Vec<usize> = (0..p)
                    .map(|_| if plan.below(4) == 0 { plan.below(area) } else { area + 1 + plan.below(39 * area) })
                    .collect();
                let (layout, extent) = packed(lens.iter().copied());
                let byte = |r: usize, i: usize| (r * 29 + i * 5 + call) as u8;
                let len = lens[rank];
                let mut fresh = vec![0u8; len];
                let send = if rng.below(2) == 0 { &mut kept[..len] } else { &mut fresh[..] };
                send.iter_mut().enumerate().for_each(|(i, b)| *b = byte(rank, i));
                let hot =
                    rank != root && std::mem::replace(&mut last_sent, send.as_ptr() as usize) == send.as_ptr() as usize;
                let mut recv = vec![0xEE; if rank == root { extent } else { 0 }];
                if rank == root && in_place {
                    recv[layout.blocks[root].0..][..len].copy_from_slice(send);
                }
                let none = Default::default();
                let mut g = Gather {
                    send: if rank == root && in_place { &[] } else { send },
                    recv: &mut recv,
                    layout: if rank == root { &layout } else { &none },
                    root,
                    in_place: rank == root && in_place,
                };
                let count =
                    |team: &Team<'_>| team.seg.control(rank).pieces.each_ref().map(|c| c.load(Ordering::Relaxed));
                let (pieces_before, written_before) = (count(team), written());
                jitter(&mut rng);
                node_call(team, len, |team| gatherv::run(team, &mut g, gatherv::Mode::Auto));
                if rank != root && len > area && count(team) != pieces_before {
                    let tally = if written() == written_before { &ring_only } else { &ring_and_direct };
                    tally.fetch_add(1, Ordering::Relaxed);
                    (if hot { &hot_rings } else { &cold_rings }).fetch_add(1, Ordering::Relaxed);
                }
                if rank == root {
                    let want: Vec<u8> = (0..p).flat_map(|r| (0..lens[r]).map(move |i| byte(r, i))).collect();
                    assert_eq!(recv, want, "p={p} call={call} root={root} in_place={in_place}");
                }
            }
        });
    }
    let tallies = [ring_only, ring_and_direct, hot_rings, cold_rings].map(AtomicUsize::into_inner);
    assert!(
        tallies.iter().all(|&calls| calls > 0),
        "calls through the ring only, partly direct, hot, cold: {tallies:?}"
    );
}

/// `shm_queue_zcopy`: a root that broadcasts from its last call's buffer
/// takes the way its timings of such calls favour (zero copy or the
/// queue), else the queue, and the readers follow its word. Ranks switch
/// at random between one buffer and fresh ones, roots rotate, ranks drift
/// apart, every message is exact, and roots broadcast from both kinds of
/// buffer.
#[test]
fn broadcasts_through_the_queue_or_by_zero_copy_are_exact() {
    use super::bcast_queue_zcopy::queue_or_zero_copy;
    let kinds = std::sync::Mutex::new([0usize; 2]);
    for p in [2, 3, 5] {
        on_threads(p, TEST_GEO, |rank, team| {
            let mut rng = Rng(p as u64 * 7 + rank as u64);
            let mut plan = Rng(p as u64 + 300);
            let most = 3 * TEST_GEO.chunk;
            let mut kept = vec![0u8; most];
            let mut last = 0;
            for call in 0..200 {
                let (root, n) = (call % p, plan.below(most + 1));
                let want: Vec<u8> = (0..n).map(|i| (i * 5 + call * 3 + root) as u8).collect();
                let mut fresh = vec![0xEE; n];
                let data = if rng.below(2) == 0 { &mut kept[..n] } else { &mut fresh[..] };
                let again = super::same_buffer_again(&mut last, data.as_ptr());
                if rank == root {
                    data.copy_from_slice(&want);
                    kinds.lock().unwrap()[again as usize] += 1;
                }
                jitter(&mut rng);
                node_call(team, n, |team| queue_or_zero_copy(team, data, root));
                assert_eq!(data, &want[..], "p={p} call={call} root={root} rank={rank}");
            }
        });
    }
    let [cold, hot] = *kinds.lock().unwrap();
    assert!(cold > 50 && hot > 50, "both kinds: {cold} from a new buffer, {hot} from the last one");
}

/// `shm_flat_zcopy`: zero copy where every rank reduces from its last
/// call's input buffer again, else flat. Each rank picks one of two input
/// buffers (or, with MPI_IN_PLACE, receive buffers) per call at random, so
/// calls go either way, with one rank's cold buffer enough for flat;
/// Reduce and Allreduce alternate, roots rotate, ranks drift apart, every
/// result is exact, every rank went the same way, and both ways ran. Not
/// adapting, each call went the way its buffers say; adapting, zero copy
/// ran only where they allowed it (the deciding rank's timings decide the
/// rest).
#[test]
fn reductions_flat_or_by_zero_copy_are_exact() {
    use super::reduce_flat_zcopy::{flat_or_zero_copy, Way};
    const CALLS: usize = 160;
    for (p, adapt) in [2, 3, 5].into_iter().flat_map(|p| [(p, false), (p, true)]) {
        let memory =
            || NodeMemory { adaptation: Adaptation::new(adapt, TEST_ADAPT_FROM, TEST_ADAPT_FROM / 2), ..test_memory() };
        // Per call and rank: whether its input was its last call's again,
        // and the way the call went.
        let hot = std::sync::Mutex::new(vec![vec![false; p]; CALLS]);
        let ways = std::sync::Mutex::new(vec![vec![Way::Flat; p]; CALLS]);
        on_threads_with(p, TEST_GEO, TEST_SETTINGS, memory, |rank, team| {
            let mut rng = Rng(p as u64 * 11 + rank as u64);
            let mut plan = Rng(p as u64 + 500);
            let mut last = 0;
            let most = 3 * TEST_GEO.chunk / 8;
            let mut sends = [vec![0u8; most * 8], vec![0u8; most * 8]];
            let mut recvs = [vec![0u8; most * 8], vec![0u8; most * 8]];
            let mut scratch = vec![0u8; reduction::zero_copy_scratch(p, TEST_SIZES.sub_chunk)];
            for call in 0..CALLS {
                let root = (call % 2 == 0).then_some(call % p);
                let (count, in_place) = (plan.below(most + 1), plan.below(4) == 0);
                let is_out = root.is_none_or(|r| r == rank);
                let pick = rng.below(8).min(1);
                let (send, recv) = (&mut sends[pick][..count * 8], &mut recvs[pick][..count * 8]);
                send.copy_from_slice(&vector(p, rank, count));
                recv.fill(0xEE);
                let send = if in_place && is_out {
                    recv.copy_from_slice(send);
                    None
                } else {
                    Some(&*send)
                };
                let input = send.map_or(recv.as_ptr(), <[u8]>::as_ptr);
                hot.lock().unwrap()[call][rank] = super::same_buffer_again(&mut last, input);
                let op = Interval { combined: AtomicU64::new(0) };
                let mut bufs = Buffers { send, recv, scratch: &mut scratch };
                jitter(&mut rng);
                let way = node_call(team, count * 8, |team| flat_or_zero_copy(team, &mut bufs, 8, root, None, &op));
                ways.lock().unwrap()[call][rank] = way;
                if is_out {
                    for (j, e) in bufs.recv.chunks_exact(8).enumerate() {
                        let got = u64::from_le_bytes(e.try_into().unwrap());
                        assert_eq!(got, expected(p, j), "p={p} call={call} rank={rank} root={root:?} element {j}");
                    }
                }
            }
        });
        let (hot, ways) = (hot.into_inner().unwrap(), ways.into_inner().unwrap());
        for (call, (hot, ways)) in hot.iter().zip(&ways).enumerate() {
            let allowed = if hot.iter().all(|&h| h) { Way::ZeroCopy } else { Way::Flat };
            let agreed = ways.iter().all(|&w| w == ways[0]);
            let by_buffers = ways[0] == allowed || (adapt && ways[0] == Way::Flat);
            assert!(agreed && by_buffers, "p={p} adapt={adapt} call={call}: hot {hot:?}, ways {ways:?}");
        }
        let zero_copy = ways.iter().filter(|ways| ways[0] == Way::ZeroCopy).count();
        // Not adapting, as before: more than 10 calls each way.
        let most_zero_copy = if adapt { 0 } else { 10 };
        assert!(
            zero_copy > most_zero_copy && zero_copy < CALLS - 10,
            "p={p} adapt={adapt}: {zero_copy} of {CALLS} calls by zero copy"
        );
    }
}

/// `shm_flat_zcopy` in runs: where rank 0's timings favour flat, a run's
/// calls after its first go flat with no vote, every rank alike. Rank 0's
/// timings of two size classes are made to favour flat, one of them (`a`)
/// three calls before it explores zero copy: its first run goes flat, the
/// second votes on every call (the exploration: three calls by zero
/// copy), the third goes flat again; the other class's runs all go flat.
/// Hot buffers, Reduce and Allreduce alternate, roots rotate, results
/// exact.
#[test]
fn reductions_in_flat_runs_skip_the_vote() {
    use super::host_runs::RUN;
    use super::reduce_flat_zcopy::{flat_or_zero_copy, Way};
    use crate::adapt::choice::{EXPLORE, EXPLORING_AFTER_CHANGE};
    use std::time::Duration;
    let runs = 3 * RUN as usize;
    // Elements of a vector of each class: below 16 KiB, and 16-32 KiB.
    let (a, b) = (100, 2100);
    let memory = || {
        let mut memory = test_memory();
        let calls_before_exploring = (EXPLORE - EXPLORING_AFTER_CHANGE) as usize;
        for (count, calls) in [(a, calls_before_exploring - 1), (b, 8)] {
            let choice = &mut memory.reduction_way;
            for _ in 0..calls {
                let pick = choice.pick(count * 8);
                let ns_per_byte = if pick.method == Way::Flat { 1 } else { 1 << 20 };
                choice.record(pick, count * 8, Duration::from_nanos(ns_per_byte * count as u64 * 8));
            }
        }
        memory
    };
    for p in [2, 3] {
        let seen = std::sync::Mutex::new(Vec::new());
        on_threads_with(p, TEST_GEO, TEST_SETTINGS, memory, |rank, team| {
            let mut rng = Rng(p as u64 * 7 + rank as u64);
            let mut send = vec![0u8; b * 8];
            let mut recv = vec![0u8; b * 8];
            let mut scratch = vec![0u8; reduction::zero_copy_scratch(p, TEST_SIZES.sub_chunk)];
            let mut zero_copy = [0; 2];
            for call in 0..2 * runs {
                let (class, count) = if call % 2 == 0 { (0, a) } else { (1, b) };
                let root = (call % 4 < 2).then_some(call % p);
                send[..count * 8].copy_from_slice(&vector(p, rank, count));
                let op = Interval { combined: AtomicU64::new(0) };
                let mut bufs =
                    Buffers { send: Some(&send[..count * 8]), recv: &mut recv[..count * 8], scratch: &mut scratch };
                jitter(&mut rng);
                let way = node_call(team, count * 8, |team| flat_or_zero_copy(team, &mut bufs, 8, root, None, &op));
                zero_copy[class] += usize::from(way == Way::ZeroCopy);
                if root.is_none_or(|r| r == rank) {
                    for (j, e) in bufs.recv.chunks_exact(8).enumerate() {
                        let got = u64::from_le_bytes(e.try_into().unwrap());
                        assert_eq!(got, expected(p, j), "p={p} call={call} rank={rank} root={root:?} element {j}");
                    }
                }
            }
            seen.lock().unwrap().push((zero_copy, team.state.memory.reduction_runs.flat_without_vote));
        });
        let flat_calls = RUN as u64 - 1;
        let want = ([EXPLORING_AFTER_CHANGE as usize, 0], 2 * flat_calls + 3 * flat_calls);
        for got in seen.into_inner().unwrap() {
            assert_eq!(got, want, "p={p}: calls by zero copy per class, and flat without a vote");
        }
    }
}

/// A writer's spread steps take the turns of their parity one after the
/// other, across calls of one, two or three steps: no step lands where
/// the step of its parity before it did (the lines its reader read last),
/// and the reader finds every step where its writer put it.
#[test]
fn spread_steps_take_their_paritys_turns_in_order() {
    // Past the ring's bytes and within a chunk area: a place a page apart.
    let len = TEST_GEO.area() - 8;
    assert!(len > TEST_GEO.ring_bytes);
    on_threads(2, TEST_GEO, |rank, team| {
        let page = 4096;
        let mut last: [Option<usize>; 2] = [None, None];
        for call in 0..60usize {
            team.begin(0, len);
            team.spread = Spread::Wide;
            for i in 0..1 + call % 3 {
                let s = team.next_step();
                let byte = (call * 7 + i) as u8;
                if rank == 0 {
                    team.writable(s);
                    team.my_area_bytes(s, len).fill(byte);
                    team.publish(s);
                    team.finish(s);
                    continue;
                }
                team.wait_ready(0, s);
                let data = team.area_bytes(0, s, len);
                assert!(data.iter().all(|&b| b == byte), "call {call} step {i}");
                let span = team.seg.chunk_span(0, s) as usize;
                let places = team.seg.chunk_span_bytes().div_euclid(page) - (len.div_ceil(page) - 1);
                let turn = (data.as_ptr() as usize - span) / page;
                let parity = crate::shm::segment::place(s) % 2;
                if let Some(before) = last[parity] {
                    assert_eq!(turn, (before + 1) % places, "call {call} step {i}: the turn after the last");
                }
                last[parity] = Some(turn);
                team.finish(s);
            }
            team.end();
        }
        assert!(rank == 0 || last.iter().all(Option::is_some));
    });
}

/// `shm_flat_zcopy`'s runs back to back or on hot buffers spread their
/// flat steps through the chunk areas' spans: a run spreads where every
/// rank's calls came back to back (each rank's window for that: any gap,
/// or none) or reduced from its last buffers again when it opened, so
/// never where one rank's do neither; the first run never (no streak, no
/// last buffer yet). New buffers every call, or one pair without zero
/// copy (all flat), vectors of several chunks, Reduce and Allreduce
/// alternating, roots rotating, results exact.
#[test]
fn reductions_back_to_back_or_hot_spread_their_steps() {
    use super::host_runs::RUN;
    use super::reduce_flat_zcopy::{flat_or_zero_copy, Way};
    const RUNS: usize = 4;
    type Windows = fn(usize) -> u64;
    let windows: [(&str, Windows, bool, bool); 4] = [
        ("every rank back to back", |_| u64::MAX, false, true),
        ("no rank", |_| 0, false, false),
        ("rank 0 alone", |rank| if rank == 0 { u64::MAX } else { 0 }, false, false),
        ("no rank, one buffer pair", |_| 0, true, true),
    ];
    // Chunks of three pages, so that a spread step's place (moved by a
    // page) differs from its chunk area's (moved by a chunk); vectors of
    // 2.5 chunks.
    let chunk = 3 * crate::shm::segment::PAGE;
    let geo = Geometry { chunk, allreduce_chunk: chunk, ..TEST_GEO };
    let count = chunk * 5 / 2 / 8;
    let calls = RUNS * RUN as usize;
    for (what, window, hot, spreads) in windows {
        for p in [2, 3] {
            on_threads_with(p, geo, TEST_SETTINGS, test_memory, |rank, team| {
                team.settings.back_to_back_ns = window(rank);
                if hot {
                    // Flat on hot buffers too.
                    team.peers = None;
                }
                let mut rng = Rng(p as u64 * 5 + rank as u64);
                let mut buffers =
                    [(vec![0u8; count * 8], vec![0u8; count * 8]), (vec![0u8; count * 8], vec![0u8; count * 8])];
                let mut scratch = vec![0u8; reduction::zero_copy_scratch(p, TEST_SIZES.sub_chunk)];
                for call in 0..calls {
                    let root = (call % 4 >= 2).then_some(call / 4 % p);
                    let (send, recv) = &mut buffers[if hot { 0 } else { call % 2 }];
                    send.copy_from_slice(&vector(p, rank, count));
                    let op = Interval { combined: AtomicU64::new(0) };
                    let mut bufs = Buffers { send: Some(send), recv, scratch: &mut scratch };
                    jitter(&mut rng);
                    let way = node_call(team, count * 8, |team| flat_or_zero_copy(team, &mut bufs, 8, root, None, &op));
                    assert_eq!(way, Way::Flat, "{what}: p={p} call={call}: new buffers go flat");
                    if root.is_none_or(|r| r == rank) {
                        for (j, e) in bufs.recv.chunks_exact(8).enumerate() {
                            let got = u64::from_le_bytes(e.try_into().unwrap());
                            assert_eq!(
                                got,
                                expected(p, j),
                                "{what}: p={p} call={call} rank={rank} root={root:?} element {j}"
                            );
                        }
                    }
                }
                // Every run but the first.
                let spread = if spreads { (calls - RUN as usize) as u64 } else { 0 };
                let spread_calls = team.state.memory.reduction_runs.spread_calls;
                assert_eq!(spread_calls, spread, "{what}: p={p} rank={rank}: calls whose steps spread");
            });
        }
    }
}

/// `shm_flat_ring`'s hot way: an Allreduce that all ranks vote hot for
/// goes to the host's schedule (here a stand-in that writes the exact
/// result), and so do the later calls of its run with no vote; a run
/// whose first call finds a rank's buffer new votes until all are hot.
/// Each rank's buffers stay, change every call, or (the last rank) change
/// every tenth call: every rank takes the way this model of the runs
/// says on every call, and results are exact. A way for calls back to
/// back (`shm_flat_binomial`'s) takes the same runs where every rank's
/// calls count as back to back (any gap does) from the streak's end on,
/// and none where one rank's never do (no gap does) or none do.
#[test]
fn reductions_in_hot_runs_go_to_the_host() {
    use super::host_runs::{BACK_TO_BACK_STREAK, RUN};
    use super::reduce_flat_zcopy::flat_or_zero_copy;
    use super::HostWay;
    use std::time::Duration;
    struct StandIn {
        p: usize,
        calls: usize,
        within: Option<Duration>,
    }
    impl HostWay for StandIn {
        fn run(&mut self, bufs: &mut Buffers<'_>) {
            self.calls += 1;
            for (j, e) in bufs.recv.chunks_exact_mut(8).enumerate() {
                e.copy_from_slice(&expected(self.p, j).to_le_bytes());
            }
        }
        fn back_to_back_within(&self) -> Option<Duration> {
            self.within
        }
    }
    const CALLS: usize = 6 * RUN as usize;
    // Per rank: the host way's window for calls back to back.
    type Windows = fn(usize, usize) -> Option<Duration>;
    let windows: [(&str, Windows); 4] = [
        ("every hot call", |_, _| None),
        ("back to back, any gap", |_, _| Some(Duration::MAX)),
        ("back to back, no gap", |_, _| Some(Duration::ZERO)),
        ("back to back, no gap on the last rank", |p, rank| {
            Some(if rank == p - 1 { Duration::ZERO } else { Duration::MAX })
        }),
    ];
    for (p, changes) in [2, 3].into_iter().flat_map(|p| [(p, 0), (p, 1), (p, 10)]) {
        for (what, window) in windows {
            let memory = || NodeMemory {
                adaptation: Adaptation::new(false, TEST_ADAPT_FROM, TEST_ADAPT_FROM / 2),
                ..test_memory()
            };
            // Per call and rank: whether its input was its last call's again,
            // and whether the call went to the host.
            let hot = std::sync::Mutex::new(vec![vec![false; p]; CALLS]);
            let by_host = std::sync::Mutex::new(vec![vec![false; p]; CALLS]);
            on_threads_with(p, TEST_GEO, TEST_SETTINGS, memory, |rank, team| {
                let mut rng = Rng(p as u64 * 13 + rank as u64);
                let count = 2000;
                let mut sends = [vec![0u8; count * 8], vec![0u8; count * 8]];
                let mut recv = vec![0u8; count * 8];
                let mut scratch = vec![0u8; reduction::zero_copy_scratch(p, TEST_SIZES.sub_chunk)];
                let mut host = StandIn { p, calls: 0, within: window(p, rank) };
                let mut last = 0;
                for call in 0..CALLS {
                    let pick = match changes {
                        0 => 0,
                        1 => call % 2,
                        n => usize::from(rank == p - 1 && call % n == 5),
                    };
                    sends[pick].copy_from_slice(&vector(p, rank, count));
                    hot.lock().unwrap()[call][rank] = super::same_buffer_again(&mut last, sends[pick].as_ptr());
                    recv.fill(0xEE);
                    let op = Interval { combined: AtomicU64::new(0) };
                    let mut bufs = Buffers { send: Some(&sends[pick]), recv: &mut recv, scratch: &mut scratch };
                    jitter(&mut rng);
                    let before = host.calls;
                    node_call(team, count * 8, |team| {
                        flat_or_zero_copy(team, &mut bufs, 8, None, Some(&mut host as &mut dyn HostWay), &op)
                    });
                    by_host.lock().unwrap()[call][rank] = host.calls > before;
                    for (j, e) in bufs.recv.chunks_exact(8).enumerate() {
                        let got = u64::from_le_bytes(e.try_into().unwrap());
                        assert_eq!(got, expected(p, j), "p={p} {what} call={call} rank={rank} element {j}");
                    }
                }
                assert_eq!(team.state.memory.reduction_runs.host.by_host_calls, host.calls as u64);
            });
            let (hot, by_host) = (hot.into_inner().unwrap(), by_host.into_inner().unwrap());
            let takes = (0..p).all(|rank| window(p, rank) != Some(Duration::ZERO));
            let paced = window(p, 0).is_some();
            let mut run_by_host = false;
            for (call, (hot, by_host)) in hot.iter().zip(&by_host).enumerate() {
                let in_streak = paced && call < BACK_TO_BACK_STREAK as usize;
                let all_hot = takes && !in_streak && hot.iter().all(|&h| h);
                run_by_host = if call % RUN as usize == 0 { all_hot } else { run_by_host || all_hot };
                assert!(
                    by_host.iter().all(|&h| h == run_by_host),
                    "p={p} changes={changes} {what} call={call}: {by_host:?}"
                );
            }
            let host_calls = by_host.iter().filter(|ranks| ranks[0]).count();
            // A paced way's first calls go by the node while the streak grows.
            let late = if paced { BACK_TO_BACK_STREAK as usize - 1 } else { 0 };
            let least = if takes { [CALLS - 1 - late, 0, CALLS - 12 - late][changes.min(2)] } else { 0 };
            let most = if takes && changes != 1 { CALLS } else { 0 };
            assert!((least..=most).contains(&host_calls), "p={p} changes={changes} {what}: {host_calls}");
        }
    }
}

/// `shm_binomial`'s and `shm_queue_binomial`'s runs: a Bcast whose run's
/// root is paced back to back (its window: any gap counts, none does, or
/// every hot call goes) and sends from its last buffer hands the run to
/// the host (a stand-in that writes the root's message), on every rank
/// alike, roots rotating; a root's first call, or a buffer new every
/// call, keeps the run on the node. Every message arrives exact.
#[test]
fn bcasts_in_runs_back_to_back_go_to_the_host() {
    use super::bcast_host_runs::{node_or_host, NodeWay, CLASSES_FROM};
    use super::host_runs::RUN;
    use super::HostWay;
    use std::time::Duration;
    fn message(call: usize, n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 5 + call * 3) as u8).collect()
    }
    struct StandIn {
        call: usize,
        calls: usize,
        within: Option<Duration>,
    }
    impl HostWay for StandIn {
        fn run(&mut self, bufs: &mut Buffers<'_>) {
            self.calls += 1;
            let n = bufs.recv.len();
            bufs.recv.copy_from_slice(&message(self.call, n));
        }
        fn back_to_back_within(&self) -> Option<Duration> {
            self.within
        }
    }
    const CALLS: usize = 4 * RUN as usize;
    let windows = [("any gap", Some(Duration::MAX)), ("no gap", Some(Duration::ZERO)), ("every hot call", None)];
    let node_ways: [(&str, NodeWay); 2] =
        [("shm", super::bcast_timed::timed), ("queue", super::bcast_queue::configured_queue)];
    for (way, node_way) in node_ways {
        for p in [2, 3] {
            for (what, within) in windows {
                for new_buffers in [false, true] {
                    // Per call and rank: whether the call went to the host.
                    let by_host = std::sync::Mutex::new(vec![vec![false; p]; CALLS]);
                    on_threads_with(p, TEST_GEO, TEST_SETTINGS, test_memory, |rank, team| {
                        let mut rng = Rng(p as u64 * 11 + rank as u64);
                        let n = CLASSES_FROM + 8;
                        let mut buffers = [vec![0u8; n], vec![0u8; n]];
                        let mut host = StandIn { call: 0, calls: 0, within };
                        for call in 0..CALLS {
                            let root = call % p;
                            let data = &mut buffers[if new_buffers { call % 2 } else { 0 }];
                            if rank == root {
                                data.copy_from_slice(&message(call, n));
                            } else {
                                data.fill(0xEE);
                            }
                            host.call = call;
                            jitter(&mut rng);
                            let before = host.calls;
                            node_call(team, n, |team| {
                                node_or_host(team, data, root, Some(&mut host as &mut dyn HostWay), node_way)
                            });
                            by_host.lock().unwrap()[call][rank] = host.calls > before;
                            assert!(*data == message(call, n), "{way} p={p} {what} call={call} rank={rank}");
                        }
                        assert_eq!(team.state.memory.bcast_runs.by_host_calls, host.calls as u64);
                    });
                    let takes = within != Some(Duration::ZERO) && !new_buffers;
                    for (call, ranks) in by_host.into_inner().unwrap().iter().enumerate() {
                        // The first run's roots have no last buffer, nor a streak.
                        let want = takes && call >= RUN as usize;
                        assert!(
                            ranks.iter().all(|&h| h == want),
                            "{way} p={p} {what} new={new_buffers} call={call}: {ranks:?}"
                        );
                    }
                }
            }
        }
    }
}

/// Calls far apart on one communicator: a head tells its call by the low
/// bits of the call's number, which repeat every 2^20 calls, and a place a
/// rank has not written since (a chunk area after small messages, or one
/// never written) must not pass for this call's. Each round makes the
/// next call's number repeat an earlier one's low bits (after a call that
/// wrote the areas) or end in zeros (those of a place never written), and
/// the small and large gathers and broadcasts that follow are exact.
#[test]
fn calls_whose_numbers_repeat_low_bits_are_exact() {
    use super::gatherv_shm::{self as gatherv, Gather};
    use crate::core::gen::random_layout;
    const HEAD_CALLS: u64 = 1 << 20;
    for p in [2, 3] {
        on_threads(p, TEST_GEO, |rank, team| {
            for round in 0..6u64 {
                // Rounds 0, 2, 4: the next call's number is a multiple of
                // 2^20; 1, 3, 5: it repeats the last call's low bits.
                team.state.call = if round % 2 == 0 {
                    (team.state.call / HEAD_CALLS + 1) * HEAD_CALLS - 1
                } else {
                    team.state.call + HEAD_CALLS - 1
                };
                for (call, block) in [8usize, 20000, 3, 40, 250, 8].into_iter().enumerate() {
                    let root = (call + round as usize) % p;
                    let layout = random_layout(p, block, round * 10 + call as u64);
                    let byte = |r: usize, i: usize| (r * 31 + i * 7 + call) as u8;
                    let (_, len) = layout.blocks[rank];
                    let mine: Vec<u8> = (0..len).map(|i| byte(rank, i)).collect();
                    let extent = layout.blocks.iter().map(|&(o, l)| o + l).max().unwrap_or(0);
                    let mut recv = vec![0xEE; if rank == root { extent } else { 0 }];
                    let none = Default::default();
                    let mut g = Gather {
                        send: &mine,
                        recv: &mut recv,
                        layout: if rank == root { &layout } else { &none },
                        root,
                        in_place: false,
                    };
                    node_call(team, len, |team| gatherv::run(team, &mut g, gatherv::Mode::Auto));
                    if rank == root {
                        for (r, &(o, l)) in layout.blocks.iter().enumerate() {
                            let want: Vec<u8> = (0..l).map(|i| byte(r, i)).collect();
                            assert_eq!(recv[o..o + l], want[..], "p={p} round={round} call={call} block of {r}");
                        }
                    }
                    let want: Vec<u8> = (0..block).map(|i| (i * 3 + call) as u8).collect();
                    let mut data = if rank == root { want.clone() } else { vec![0; block] };
                    node_call(team, block, |team| super::bcast_pipeline::pipeline(team, &mut data, root));
                    assert_eq!(data, want, "p={p} round={round} call={call}: Bcast");
                }
            }
        });
    }
}

/// Rooted calls back to back with the root rotating, collectives mixed,
/// no pause anywhere: non-roots and Bcast roots run ahead through the
/// slots of rings of 2, 4 and 8 (up to as many calls) or areas (one
/// call), around each bound of where a step's data goes (a slot's first
/// line, its data, a chunk area), in place or not, and every result is
/// exact.
#[test]
fn back_to_back_rooted_calls_running_ahead_are_exact() {
    use super::gatherv_shm::{self as gatherv, Gather};
    let sizes = [8, INLINE, INLINE + 8, TEST_GEO.ring_bytes, TEST_GEO.ring_bytes + 8, 100, TEST_GEO.chunk];
    assert!(sizes.windows(2).all(|w| w[0] < w[1]) && TEST_GEO.in_ring(INLINE + 8) && !TEST_GEO.in_ring(100));
    for (p, ring) in [(2, 2), (2, 4), (2, 8), (3, 2), (3, 8), (4, 4)] {
        on_threads(p, Geometry { ring, ..TEST_GEO }, |rank, team| {
            let op = Interval { combined: AtomicU64::new(0) };
            for call in 0..300 {
                let root = call % p;
                let bytes = sizes[(call / 3) % sizes.len()];
                let in_place = rank == root && (call / 7) % 2 == 0;
                let what = || format!("p={p} call={call} root={root} {bytes} B in_place={in_place}");
                match call % 3 {
                    0 => {
                        let count = bytes / 8;
                        let input = vector(p, rank, count);
                        let mut recv = match (rank == root, in_place) {
                            (true, true) => input.clone(),
                            (true, false) => vec![0xEE; count * 8],
                            _ => Vec::new(),
                        };
                        let send = (!in_place).then_some(&input[..]);
                        let mut bufs = Buffers { send, recv: &mut recv, scratch: &mut [] };
                        node_call(team, count * 8, |team| reduce_flat::flat(team, &mut bufs, 8, Some(root), &op));
                        if rank == root {
                            assert_elements_from(&recv, p, 0, what);
                        }
                    }
                    1 => {
                        let byte = |r: usize, i: usize| (r * 29 + i * 5 + call) as u8;
                        let layout = packed((0..p).map(|_| bytes)).0;
                        let block: Vec<u8> = (0..bytes).map(|i| byte(rank, i)).collect();
                        let mut recv = vec![0xEE; if rank == root { p * bytes } else { 0 }];
                        if in_place {
                            recv[rank * bytes..(rank + 1) * bytes].copy_from_slice(&block);
                        }
                        let none = Default::default();
                        let mut g = Gather {
                            send: if in_place { &[] } else { &block },
                            recv: &mut recv,
                            layout: if rank == root { &layout } else { &none },
                            root,
                            in_place,
                        };
                        node_call(team, bytes, |team| gatherv::run(team, &mut g, gatherv::Mode::Auto));
                        if rank == root {
                            let want: Vec<u8> = (0..p).flat_map(|r| (0..bytes).map(move |i| byte(r, i))).collect();
                            assert_eq!(recv, want, "{}", what());
                        }
                    }
                    _ => {
                        let want: Vec<u8> = (0..bytes).map(|i| (i * 3 + call) as u8).collect();
                        let mut data = if rank == root { want.clone() } else { vec![0; bytes] };
                        node_call(team, bytes, |team| super::bcast_pipeline::pipeline(team, &mut data, root));
                        assert_eq!(data, want, "{}", what());
                    }
                }
            }
        });
    }
}

/// Gatherv to several roots, each call's blocks in one size class (small
/// ones through the owners' areas, or direct ones), long enough for each
/// root's warm-up, both trial calls and exploring ones in both classes,
/// with ranks that drift apart: every block in place whichever stores and
/// route the root wants, and every root has timed both stores and both
/// routes; where ranks outnumber cores, untimed.
#[test]
fn adaptive_gathers_put_every_block_in_place_by_either_stores_and_route() {
    adaptive_gathers(false, |state| {
        let (stores, routes) =
            (state.memory.adaptation.gatherv_stores.summary("calls"), state.memory.gatherv_route.summary("calls"));
        if stores.is_empty() || routes.is_empty() {
            return Vec::new();
        }
        [stores, routes].concat()
    });
}

/// The same with every owner sending from one buffer (hot blocks): every
/// root has timed both routes of hot blocks, and hot blocks longer than a
/// chunk went through the areas too.
#[test]
fn adaptive_gathers_of_hot_blocks_time_both_routes() {
    adaptive_gathers(true, |state| state.memory.gatherv_hot_route.summary("calls"));
}

/// The calls of the adaptive Gatherv tests, each owner's block in a new
/// buffer or (`hot`) in the one it sent the last from.
fn adaptive_gathers(hot: bool, summary: impl Fn(&TeamState<NodeMemory>) -> Vec<String> + Sync) {
    use super::gatherv_shm::{self as gatherv, Gather};
    use crate::adapt::choice::EXPLORE;
    // Chunks of 1 KiB in areas of 4 KiB, which hold the direct blocks.
    let geo = Geometry { chunk: 4 * TEST_ADAPT_FROM, allreduce_chunk: 16 * TEST_ADAPT_FROM, ..TEST_GEO };
    // Blocks longer than a chunk that their owners wrote into their areas
    // in pieces (the owner's count of pieces moved).
    let pieces_beyond_chunk = AtomicUsize::new(0);
    thread_local! {
        /// An owner's one send buffer, with room for its largest block
        /// (`hot`), or its last one.
        static SENT: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(16 * TEST_ADAPT_FROM));
    }
    let body = |team: &mut Team<'_>, call: usize, root: usize, plan: &mut Rng| {
        let (p, rank) = (team.size, team.rank);
        // 512-1023 B blocks (4-8 pieces) go through the areas, 2-4 KiB
        // direct, or hot ones through the areas where the root wants.
        let base = if (call / p.min(2)).is_multiple_of(2) { 2 * TEST_ADAPT_FROM } else { 8 * TEST_ADAPT_FROM };
        let (layout, at) = packed((0..p).map(|_| base + plan.below(base)));
        let byte = |r: usize, i: usize| (r * 41 + i * 7 + call) as u8;
        let fill = |block: &mut Vec<u8>| {
            block.clear();
            block.extend((0..layout.blocks[rank].1).map(|i| byte(rank, i)));
        };
        let mut block = if hot { SENT.take() } else { Vec::new() };
        fill(&mut block);
        let mut recv = vec![0xEE; if rank == root { at } else { 0 }];
        let none = Default::default();
        let layout_here = if rank == root { &layout } else { &none };
        let mut g = Gather { send: &block, recv: &mut recv, layout: layout_here, root, in_place: false };
        let pieces =
            |team: &Team<'_>| team.seg.control(rank).pieces.each_ref().map(|count| count.load(Ordering::Relaxed));
        let pieces_before = pieces(team);
        node_call(team, layout.blocks[rank].1, |team| gatherv::run(team, &mut g, gatherv::Mode::Auto));
        if rank != root && block.len() > geo.chunk && pieces(team) != pieces_before {
            pieces_beyond_chunk.fetch_add(1, Ordering::Relaxed);
        }
        if rank == root {
            let want: Vec<u8> =
                layout.blocks.iter().enumerate().flat_map(|(r, &(_, l))| (0..l).map(move |i| byte(r, i))).collect();
            assert_eq!(recv, want, "p={p} call={call} root={root} hot={hot}");
        }
        // Kept also when cold, so that the next call's new block cannot
        // take this one's address (which its owner would take for hot).
        SENT.set(block);
    };
    from_two_roots(geo, 2 * EXPLORE as usize + 8, Timer::Root, body, summary);
    // Only hot ones, where the root wanted them there.
    let beyond = pieces_beyond_chunk.into_inner();
    assert_eq!(beyond > 0, hot, "{beyond} blocks longer than a chunk went through the areas");
}

/// Every node algorithm of the registry as the library runs it with
/// nothing set ([`NodeSettings::default`], [`NodeMemory::default`],
/// [`ShmConfig::default`]'s segment), on 2 and 3 ranks: sizes up to 800
/// KB cross every default threshold (lines, chunk floors and sub-chunks,
/// streaming in and out, pieces, timing), and the largest size repeats to
/// one root, so that its timed choices try both ways.
#[test]
fn every_node_algorithm_is_exact_with_the_default_settings() {
    use super::gatherv_shm::Gather;
    use super::NodeCall;
    use crate::algos::{Impl, ALGORITHMS};
    use crate::core::call::GatherLayout;
    use crate::core::types::Coll;
    // (size, root) of each call: elements of 8 bytes for reductions (a
    // zero-copy slice of 100_003 / 3 of them is 260 KiB), message bytes
    // for Bcast, bytes of rank 0's block for Gatherv.
    let reduce_plan =
        [(1, 0), (20, 1), (3000, 0), (100_003, 1), (100_003, 0), (100_003, 0), (100_003, 0), (100_003, 0)];
    let bcast_plan = [
        (1, 0),
        (100, 1),
        (20_000, 0),
        (300_000, 1),
        (800_000, 0),
        (800_000, 0),
        (800_000, 0),
        (800_000, 0),
        (800_000, 1),
    ];
    let gatherv_plan =
        [(5, 0), (5000, 1), (70_000, 0), (300_000, 1), (300_000, 0), (300_000, 0), (300_000, 0), (300_000, 0)];
    let geo = Geometry::DEFAULT;
    let sub_chunk = NodeMemory::default().sizes.sub_chunk;
    let mut tested = 0;
    for algo in ALGORITHMS {
        let Impl::Node(run) = algo.imp else { continue };
        tested += 1;
        for p in [2, 3] {
            on_threads_with(p, geo, NodeSettings::default(), NodeMemory::default, |rank, team| {
                let op = Interval { combined: AtomicU64::new(0) };
                let what =
                    |call: usize, n: usize| format!("{} {algo:?} p={p} rank={rank} call={call} {n} B", algo.coll);
                match algo.coll {
                    Coll::Allreduce | Coll::Reduce => {
                        let mut scratch = vec![0u8; reduction::zero_copy_scratch(p, sub_chunk)];
                        for (call, (count, root)) in reduce_plan.into_iter().enumerate() {
                            let root = (algo.coll == Coll::Reduce).then_some(root);
                            let is_out = root.is_none_or(|r| r == rank);
                            let in_place = is_out && call % 2 == 1;
                            let first = call * 3;
                            let input: Vec<u8> =
                                (first..first + count).flat_map(|j| element(p, rank, j).to_le_bytes()).collect();
                            let mut recv = match (is_out, in_place) {
                                (true, true) => input.clone(),
                                (true, false) => vec![0xEE; count * 8],
                                (false, _) => Vec::new(),
                            };
                            let send = (!in_place).then_some(&input[..]);
                            let bufs = Buffers { send, recv: &mut recv, scratch: &mut scratch };
                            node_call(team, count * 8, |team| {
                                run(team, NodeCall::Reduce { bufs, unit: 8, root, host: None }, &op)
                            });
                            if is_out {
                                assert_elements_from(&recv, p, first, || what(call, count * 8));
                            }
                        }
                    }
                    Coll::Bcast => {
                        for (call, (n, root)) in bcast_plan.into_iter().enumerate() {
                            let want: Vec<u8> = (0..n).map(|i| (i * 7 + call + root) as u8).collect();
                            let mut data = if rank == root { want.clone() } else { vec![0xEE; n] };
                            node_call(team, n, |team| run(team, NodeCall::bcast(&mut data, root), &op));
                            assert!(data == want, "{}", what(call, n));
                        }
                    }
                    Coll::Gatherv => {
                        for (call, (base, root)) in gatherv_plan.into_iter().enumerate() {
                            let in_place = call % 2 == 1;
                            let (layout, at) = packed((0..p).map(|r| base + r * 8));
                            let byte = |r: usize, i: usize| (r * 41 + i * 7 + call) as u8;
                            let block: Vec<u8> = (0..layout.blocks[rank].1).map(|i| byte(rank, i)).collect();
                            let mut recv = vec![0xEE; if rank == root { at } else { 0 }];
                            if rank == root && in_place {
                                let (off, len) = layout.blocks[rank];
                                recv[off..off + len].copy_from_slice(&block);
                            }
                            let none = GatherLayout::default();
                            let g = Gather {
                                send: if rank == root && in_place { &[] } else { &block },
                                recv: &mut recv,
                                layout: if rank == root { &layout } else { &none },
                                root,
                                in_place: rank == root && in_place,
                            };
                            node_call(team, layout.blocks[rank].1, |team| run(team, NodeCall::Gatherv(g), &op));
                            if rank == root {
                                let want: Vec<u8> = (layout.blocks.iter().enumerate())
                                    .flat_map(|(r, &(_, l))| (0..l).map(move |i| byte(r, i)))
                                    .collect();
                                assert!(recv == want, "{}", what(call, base));
                            }
                        }
                    }
                }
            });
        }
    }
    assert!(tested >= 13, "{tested} node algorithms in the registry");
}

// ---------------------------------------------------------------------------
// Compositions over several simulated nodes.

mod multi {
    use super::*;
    use crate::adapt::chunk::Tuners;
    use crate::algos;
    use crate::algos::multinode::{allreduce_hier, bcast_hier, gatherv_hier, reduce_hier};
    use crate::algos::multinode::{BetweenNodes, Memo, NodeMap, Part};
    use crate::algos::multinode::{BetweenPlan, HierFn, StagePlan};
    use crate::algos::multinode::{NoWindow, OneSided};
    use crate::algos::node::gatherv_shm::Gather;
    use crate::algos::node::NodeCall;
    use crate::core::call::{CallDesc, GatherLayout, Topo};
    use crate::core::schedule::Xfer;
    use crate::core::types::Coll;
    use crate::exec::Transport;
    use std::collections::{HashMap, VecDeque};
    use std::sync::{Barrier, Condvar, Mutex};

    /// Messages from one thread to another, in order.
    type Mailboxes = HashMap<(usize, usize), VecDeque<Vec<u8>>>;

    /// Buffered messages between threads, first in first out per pair.
    #[derive(Default)]
    struct Mail {
        boxes: Mutex<Mailboxes>,
        arrived: Condvar,
    }

    /// A transport between threads; schedule peer i is thread `ranks[i]`.
    struct ThreadTransport<'a> {
        mail: &'a Mail,
        me: usize,
        ranks: &'a [usize],
    }

    impl Transport for ThreadTransport<'_> {
        type Error = ();
        fn exchange(&mut self, bufs: &mut Buffers<'_>, sends: &[Xfer], recvs: &[Xfer]) -> Result<(), ()> {
            for x in sends {
                let bytes = bufs.read(x.region).to_vec();
                self.mail.boxes.lock().unwrap().entry((self.me, self.ranks[x.peer])).or_default().push_back(bytes);
                self.mail.arrived.notify_all();
            }
            for x in recvs {
                let key = (self.ranks[x.peer], self.me);
                let mut boxes = self.mail.boxes.lock().unwrap();
                let msg = loop {
                    if let Some(m) = boxes.get_mut(&key).and_then(VecDeque::pop_front) {
                        break m;
                    }
                    boxes = self.mail.arrived.wait(boxes).unwrap();
                };
                bufs.write(x.region).copy_from_slice(&msg);
            }
            Ok(())
        }
    }

    /// Runs the inter-node stage with a fixed point-to-point algorithm.
    struct Between<'a> {
        mail: &'a Mail,
        me: usize,
        node: usize,
        windows: &'a SharedWindows,
        window: Option<ThreadWindow<'a>>,
    }

    impl BetweenNodes for Between<'_> {
        fn run(
            &mut self,
            desc: &CallDesc,
            reps: &[usize],
            layout: &GatherLayout,
            send: Option<&[u8]>,
            recv: &mut [u8],
            c: &dyn Combiner,
        ) {
            let name = match desc.coll {
                Coll::Allreduce => "rabenseifner",
                Coll::Reduce => "binomial",
                Coll::Bcast => "knomial",
                Coll::Gatherv => "linear",
            };
            let algo = algos::find(desc.coll, name).unwrap();
            let sched = (algo.schedule().unwrap())(desc, &algo.default_params(), layout);
            let mut scratch = vec![0u8; sched.scratch_bytes];
            let mut bufs = Buffers { send, recv, scratch: &mut scratch };
            let mut t = ThreadTransport { mail: self.mail, me: self.me, ranks: reps };
            crate::exec::run(&sched, &mut bufs, &mut t, c).unwrap();
        }

        fn one_sided(&mut self, leader: bool, bytes: usize) -> Result<Option<&mut dyn OneSided>, NoWindow> {
            if !leader {
                return Ok(None);
            }
            let (shared, me) = (self.windows, self.node);
            let w =
                self.window.get_or_insert_with(|| ThreadWindow { shared, me, local: Vec::new(), queued: Vec::new() });
            if w.local.len() < bytes {
                w.local.resize(bytes, 0);
            }
            Ok(Some(w))
        }
    }

    /// The leaders' windows between threads. Transfers are queued and
    /// carried out at the fence, the latest moment MPI allows, so that an
    /// algorithm reading data before its fence fails.
    struct SharedWindows {
        mem: Vec<Mutex<Vec<u8>>>,
        fence: Barrier,
    }

    impl SharedWindows {
        fn new(leaders: usize) -> SharedWindows {
            SharedWindows { mem: (0..leaders).map(|_| Mutex::default()).collect(), fence: Barrier::new(leaders) }
        }
    }

    enum Transfer {
        Get { peer: usize, from: usize, to: usize, len: usize },
        Put { peer: usize, from: usize, to: usize, len: usize },
    }

    /// One leader's window.
    struct ThreadWindow<'a> {
        shared: &'a SharedWindows,
        me: usize,
        local: Vec<u8>,
        queued: Vec<Transfer>,
    }

    impl OneSided for ThreadWindow<'_> {
        fn local(&mut self) -> &mut [u8] {
            &mut self.local
        }
        fn get(&mut self, peer: usize, from: usize, to: usize, len: usize) {
            self.queued.push(Transfer::Get { peer, from, to, len });
        }
        fn put(&mut self, peer: usize, from: usize, to: usize, len: usize) {
            self.queued.push(Transfer::Put { peer, from, to, len });
        }
        fn fence(&mut self) {
            let shared = self.shared;
            shared.fence.wait();
            shared.mem[self.me].lock().unwrap().clone_from(&self.local);
            shared.fence.wait();
            for t in self.queued.drain(..) {
                let (src, from, dst, to, len) = match t {
                    Transfer::Get { peer, from, to, len } => (peer, from, self.me, to, len),
                    Transfer::Put { peer, from, to, len } => (self.me, from, peer, to, len),
                };
                let data = shared.mem[src].lock().unwrap()[from..from + len].to_vec();
                shared.mem[dst].lock().unwrap()[to..to + len].copy_from_slice(&data);
            }
            shared.fence.wait();
            self.local.clone_from(&shared.mem[self.me].lock().unwrap());
        }
    }

    /// One rank's node: what a composition's [`Part`] borrows, kept
    /// across the calls of a test.
    struct Node<'a> {
        team: Team<'a>,
        map: &'a NodeMap<'a>,
        rank: usize,
        inter: Between<'a>,
        memo: Memo,
    }

    impl<'a> Node<'a> {
        /// One call as the driver makes it: begun with this rank's bytes,
        /// ended whatever happens (see [`node_call`]).
        fn call(&mut self, bytes: usize, run: impl FnOnce(&mut Self) -> Result<(), Mismatch>) {
            self.team.begin(0, bytes);
            let result = run(self);
            self.team.end();
            result.expect("a call whose ranks agree");
        }

        fn part<'p>(&'p mut self, params: &'p [u64], plan: &'p StagePlan) -> Part<'p, 'a> {
            Part {
                team: &mut self.team,
                map: self.map,
                rank: self.rank,
                inter: &mut self.inter,
                params,
                leaders: None,
                plan,
                memo: &mut self.memo,
            }
        }
    }

    /// The `i`-th plan of a rotation through every registered node
    /// algorithm of a Reduce and of a Bcast as node stages (the inter-node
    /// stage is [`Between`]'s own).
    fn stages(i: usize) -> StagePlan {
        let node = |coll| -> Vec<&'static algos::Algorithm> {
            algos::for_coll(coll).filter(|a| matches!(a.imp, algos::Impl::Node(_))).collect()
        };
        let (reduces, bcasts) = (node(Coll::Reduce), node(Coll::Bcast));
        let general = algos::for_coll(Coll::Allreduce).next().unwrap();
        StagePlan {
            node_reduce: reduces[i % reduces.len()],
            node_bcast: bcasts[i % bcasts.len()],
            between: BetweenPlan::new([(0, general, general.default_params())]),
        }
    }

    /// SALaR's first chunk in the tests (8 KiB by default,
    /// [`crate::adapt::chunk::START_CHUNK`]), so that their short vectors
    /// walk the chunk search.
    const TEST_START_CHUNK: usize = 16;

    /// Runs `body` on one thread per rank, `node_of[r]` giving rank r's node.
    fn on_nodes(node_of: &[usize], body: impl Fn(usize, &mut Node<'_>, Topo) + Sync) {
        let nodes = node_of.iter().max().unwrap() + 1;
        let local_of: Vec<usize> =
            (0..node_of.len()).map(|r| node_of[..r].iter().filter(|&&n| n == node_of[r]).count()).collect();
        let sizes: Vec<usize> = (0..nodes).map(|n| node_of.iter().filter(|&&m| m == n).count()).collect();
        let heaps: Vec<HeapSegment> =
            sizes.iter().map(|&s| HeapSegment::new(Geometry { ranks: s, ..TEST_GEO })).collect();
        let contiguous = node_of.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1);
        let topo = Topo { nodes, contiguous, shm: true, zcopy: true, chunk: TEST_GEO.chunk, one_sided: true };
        let mail = Mail::default();
        let windows = SharedWindows::new(nodes);
        let map = NodeMap { node_of, local_of: &local_of };
        let (heaps, mail, windows, map, body, local_of, sizes) =
            (&heaps, &mail, &windows, &map, &body, &local_of, &sizes);
        std::thread::scope(|scope| {
            for rank in 0..node_of.len() {
                scope.spawn(move || {
                    let run = std::panic::AssertUnwindSafe(|| {
                        let node = node_of[rank];
                        let mut state = TeamState { memory: test_memory(), ..TeamState::default() };
                        let team = Team {
                            rank: local_of[rank],
                            size: sizes[node],
                            seg: &heaps[node].seg,
                            peers: Some(&Threads),
                            state: &mut state,
                            settings: TEST_SETTINGS,
                            spread: Spread::Off,
                        };
                        let inter = Between { mail, me: rank, node, windows, window: None };
                        let memo = Memo { salar: Tuners::new(TEST_START_CHUNK) };
                        let mut node = Node { team, map, rank, inter, memo };
                        body(rank, &mut node, topo);
                    });
                    if std::panic::catch_unwind(run).is_err() {
                        let _ = std::io::Write::write_all(
                            &mut std::io::stderr(),
                            format!("rank {rank} panicked\n").as_bytes(),
                        );
                        std::process::exit(101);
                    }
                });
            }
        });
    }

    fn desc(coll: Coll, rank: usize, size: usize, root: usize, bytes: usize, topo: Topo) -> CallDesc {
        CallDesc { coll, rank, size, root, bytes, unit: 8, commutative: false, in_place: false, topo }
    }

    const LAYOUTS: [&[usize]; 4] = [&[0, 0, 1, 1, 1, 2], &[0, 1], &[0, 0, 0, 1, 1, 1, 1, 2, 2], &[0, 1, 1, 2, 2, 2]];

    #[test]
    fn compositions_are_exact_over_uneven_nodes() {
        let mut rotation = 0;
        for node_of in LAYOUTS {
            let p = node_of.len();
            for count in [1, 5, 40] {
                for root in [0, p / 2, p - 1] {
                    rotation += 1;
                    let plan = &stages(rotation);
                    on_nodes(node_of, |rank, node, topo| {
                        let op = Interval { combined: AtomicU64::new(0) };
                        let input = vector(p, rank, count);
                        let mut scratch = vec![0u8; reduction::zero_copy_scratch(8, TEST_SIZES.sub_chunk)];
                        let mut recv = vec![0u8; count * 8];
                        let d = desc(Coll::Allreduce, rank, p, 0, count * 8, topo);
                        node.call(count * 8, |node| {
                            allreduce_hier::allreduce(
                                node.part(&[], plan),
                                &d,
                                Buffers { send: Some(&input), recv: &mut recv, scratch: &mut scratch },
                                &op,
                            )
                        });
                        for (j, e) in recv.chunks_exact(8).enumerate() {
                            assert_eq!(
                                u64::from_le_bytes(e.try_into().unwrap()),
                                expected(p, j),
                                "allreduce {node_of:?} rank {rank} count {count}"
                            );
                        }
                    });
                    on_nodes(node_of, |rank, node, topo| {
                        let op = Interval { combined: AtomicU64::new(0) };
                        let input = vector(p, rank, count);
                        let mut scratch = vec![0u8; reduction::zero_copy_scratch(8, TEST_SIZES.sub_chunk)];
                        let mut recv = vec![0u8; if rank == root { count * 8 } else { 0 }];
                        let d = desc(Coll::Reduce, rank, p, root, count * 8, topo);
                        node.call(count * 8, |node| {
                            reduce_hier::reduce(
                                node.part(&[], plan),
                                &d,
                                Buffers { send: Some(&input), recv: &mut recv, scratch: &mut scratch },
                                &op,
                            )
                        });
                        for (j, e) in recv.chunks_exact(8).enumerate() {
                            assert_eq!(
                                u64::from_le_bytes(e.try_into().unwrap()),
                                expected(p, j),
                                "reduce {node_of:?} root {root} count {count}"
                            );
                        }
                    });
                    on_nodes(node_of, |rank, node, topo| {
                        let n = count * 37;
                        let want: Vec<u8> = (0..n).map(|i| (i * 7 + root) as u8).collect();
                        let mut data = if rank == root { want.clone() } else { vec![0; n] };
                        let d = desc(Coll::Bcast, rank, p, root, n, topo);
                        node.call(n, |node| bcast_hier::bcast(node.part(&[], plan), &d, &mut data, &NoOp));
                        assert_eq!(data, want, "bcast {node_of:?} rank {rank} root {root}");
                    });
                    on_nodes(node_of, |rank, node, topo| {
                        let layout = crate::core::gen::random_layout(p, count * 9, (count * 31 + root) as u64);
                        let byte = |r: usize, i: usize| (r * 37 + i * 11) as u8;
                        let block: Vec<u8> = (0..layout.blocks[rank].1).map(|i| byte(rank, i)).collect();
                        let extent = layout.blocks.iter().map(|&(o, l)| o + l).max().unwrap_or(0) + 1;
                        let mut recv = vec![0xEE; if rank == root { extent } else { 0 }];
                        let none = GatherLayout::default();
                        let g = Gather {
                            send: &block,
                            recv: &mut recv,
                            layout: if rank == root { &layout } else { &none },
                            root,
                            in_place: false,
                        };
                        let d = CallDesc { unit: 1, ..desc(Coll::Gatherv, rank, p, root, block.len(), topo) };
                        node.call(block.len(), |node| gatherv_hier::gatherv(node.part(&[], plan), &d, g, &NoOp));
                        if rank == root {
                            let mut want = vec![0xEE; extent];
                            for (r, &(o, l)) in layout.blocks.iter().enumerate() {
                                for i in 0..l {
                                    want[o + i] = byte(r, i);
                                }
                            }
                            assert_eq!(recv, want, "gatherv {node_of:?} root {root} count {count}");
                        }
                    });
                }
            }
        }
    }

    /// The registered Allreduce composition `name`.
    fn composition(name: &str) -> HierFn {
        match algos::find(Coll::Allreduce, name).expect("registered").imp {
            algos::Impl::Hier(run) => run,
            _ => panic!("{name} is not a composition"),
        }
    }

    /// Checks an Allreduce result of [`Interval`] elements.
    fn assert_allreduced(recv: &[u8], p: usize, what: &str) {
        for (j, e) in recv.chunks_exact(8).enumerate() {
            assert_eq!(u64::from_le_bytes(e.try_into().unwrap()), expected(p, j), "{what}: element {j}");
        }
    }

    #[test]
    fn dpml_is_exact_for_every_leader_count_with_and_without_zero_copy() {
        for node_of in LAYOUTS {
            let p = node_of.len();
            for leaders in [1u64, 2, 3] {
                for zero_copy in [true, false] {
                    on_nodes(node_of, |rank, node, topo| {
                        let op = Interval { combined: AtomicU64::new(0) };
                        // Several calls in a row, in place or not, reuse the areas.
                        for (call, count) in [1, 5, 40, 3].into_iter().enumerate() {
                            let in_place = call % 2 == 1;
                            let input = vector(p, rank, count);
                            let mut scratch =
                                vec![
                                    0u8;
                                    if zero_copy { reduction::zero_copy_scratch(8, TEST_SIZES.sub_chunk) } else { 0 }
                                ];
                            let mut recv = if in_place { input.clone() } else { vec![0u8; count * 8] };
                            let d = CallDesc { in_place, ..desc(Coll::Allreduce, rank, p, 0, count * 8, topo) };
                            let send = (!in_place).then_some(&input[..]);
                            let bufs = Buffers { send, recv: &mut recv, scratch: &mut scratch };
                            node.call(count * 8, |node| {
                                composition("dpml")(
                                    node.part(&[leaders], &stages(0)),
                                    &d,
                                    NodeCall::Reduce { bufs, unit: 8, root: None, host: None },
                                    &op,
                                )
                            });
                            let what = format!("dpml {node_of:?} l={leaders} zcopy={zero_copy} count={count}");
                            assert_allreduced(&recv, p, &what);
                        }
                    });
                }
            }
        }
    }

    #[test]
    fn salar_is_exact_with_fixed_and_adaptive_chunks() {
        for node_of in LAYOUTS {
            let p = node_of.len();
            for fixed in [8u64, 24, 0] {
                on_nodes(node_of, |rank, node, topo| {
                    let op = Interval { combined: AtomicU64::new(0) };
                    // Adaptive: the repeated sizes walk the chunk search
                    // (every rank must follow rank 0's choices).
                    for (call, count) in [1, 17, 40, 40, 40, 40, 40, 40, 2, 33].into_iter().enumerate() {
                        let in_place = call % 3 == 1;
                        let input = vector(p, rank, count);
                        let mut recv = if in_place { input.clone() } else { vec![0u8; count * 8] };
                        let d = CallDesc { in_place, ..desc(Coll::Allreduce, rank, p, 0, count * 8, topo) };
                        let send = (!in_place).then_some(&input[..]);
                        let bufs = Buffers { send, recv: &mut recv, scratch: &mut [] };
                        node.call(count * 8, |node| {
                            composition("salar")(
                                node.part(&[fixed], &stages(0)),
                                &d,
                                NodeCall::Reduce { bufs, unit: 8, root: None, host: None },
                                &op,
                            )
                        });
                        assert_allreduced(&recv, p, &format!("salar {node_of:?} chunk={fixed} count={count}"));
                    }
                });
            }
        }
    }

    struct NoOp;
    impl Combiner for NoOp {
        fn combine(&self, _: &[u8], _: &mut [u8]) {
            unreachable!()
        }
    }
}
