//! The node layer with ranks as threads over a heap segment: every
//! algorithm, many calls in a row (so areas are reused across calls and
//! algorithms), random delays to shake the interleavings out.

use std::sync::atomic::{AtomicU64, Ordering};

use super::reduce;
use super::segment::{Geometry, Segment, PAGE};
use super::team::{PeerMemory, Team, TeamState};
use crate::exec::{Buffers, Combiner};
use crate::sim::check::Rng;

/// A zeroed, page-aligned heap buffer standing in for the shared mapping.
pub(super) struct HeapSegment {
    /// The memory `seg` points into.
    _mem: Vec<u8>,
    pub seg: Segment,
}

impl HeapSegment {
    pub(super) fn new(geo: Geometry) -> HeapSegment {
        let mut mem = vec![0u8; geo.total_bytes() + PAGE];
        let skew = mem.as_ptr().align_offset(PAGE);
        // SAFETY: `mem` holds total_bytes after the alignment skew, zeroed,
        // and lives as long as the segment (same struct, never resized).
        let seg = unsafe { Segment::new(mem.as_mut_ptr().add(skew), geo) };
        HeapSegment { _mem: mem, seg }
    }
}

/// Peer memory between threads of one process: plain copies.
pub(super) struct Threads;

impl PeerMemory for Threads {
    fn read(&self, _peer: usize, from: usize, into: &mut [u8]) {
        // SAFETY: `from` is a buffer a peer thread published for this step
        // and keeps alive and unwritten until every rank has finished it.
        unsafe { std::ptr::copy_nonoverlapping(from as *const u8, into.as_mut_ptr(), into.len()) }
    }

    fn write(&self, _peer: usize, to: usize, from: &[u8]) {
        // SAFETY: `to` is a receive buffer a peer thread published, the
        // range this rank's slice owns, alive until every rank has finished.
        unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), to as *mut u8, from.len()) }
    }
}

/// Runs `body(rank, team)` on `p` threads sharing one segment; each
/// thread's team state persists across everything `body` does. A rank that
/// panics leaves the others waiting for it for ever, so a panic ends the
/// test process at once (the test fails with the panic's message).
pub(super) fn on_threads(p: usize, geo: Geometry, body: impl Fn(usize, &mut Team<'_>) + Sync) {
    let heap = HeapSegment::new(Geometry { ranks: p, ..geo });
    let seg = &heap.seg;
    let body = &body;
    std::thread::scope(|scope| {
        for rank in 0..p {
            scope.spawn(move || {
                let run = std::panic::AssertUnwindSafe(|| {
                    let mut state = TeamState::default();
                    let mut team = Team { rank, size: p, seg, peers: Some(&Threads), state: &mut state };
                    body(rank, &mut team);
                });
                if std::panic::catch_unwind(run).is_err() {
                    eprintln!("rank {rank} of {p} panicked (above); the other ranks would wait for ever");
                    std::process::exit(101);
                }
            });
        }
    });
    drop(heap);
}

/// Small areas, so that chunk loops run in the tests.
pub(super) const TEST_GEO: Geometry = Geometry { ranks: 0, chunk: 96, slots: 8, slot_bytes: 40, sets: 2 };

/// Elements are `(lo, hi)` pairs of u32; `a ∘ b` is `(a.lo, b.hi)` when
/// `a.hi + 1 == b.lo`, and poison otherwise: only every contribution once,
/// in rank order, gives the right answer.
pub(super) struct Interval {
    pub combined: AtomicU64,
}

const POISON: u64 = u64::MAX;

impl Combiner for Interval {
    fn combine(&self, src: &[u8], dst: &mut [u8]) {
        assert_eq!(src.len(), dst.len());
        for (s, d) in src.chunks_exact(8).zip(dst.chunks_exact_mut(8)) {
            let (a, b) = (u64::from_le_bytes(s.try_into().unwrap()), u64::from_le_bytes((&*d).try_into().unwrap()));
            let ok = a != POISON && b != POISON && (a >> 32) as u32 + 1 == b as u32;
            let v = if ok { (b & !0xFFFF_FFFF) | (a & 0xFFFF_FFFF) } else { POISON };
            d.copy_from_slice(&v.to_le_bytes());
        }
        self.combined.fetch_add(src.len() as u64 / 8, Ordering::Relaxed);
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

#[derive(Clone, Copy, Debug)]
enum Algo {
    Flat,
    Partition,
    ZeroCopy,
}

#[test]
fn reductions_are_exact_in_rank_order_across_many_calls() {
    for p in [1, 2, 3, 4, 5, 8] {
        on_threads(p, TEST_GEO, |rank, team| {
            let op = Interval { combined: AtomicU64::new(0) };
            let mut rng = Rng(p as u64 * 7919 + rank as u64);
            // The same call sequence on every rank (seeded by p only).
            let mut plan = Rng(p as u64);
            for call in 0..120 {
                let algo = [Algo::Flat, Algo::Partition, Algo::ZeroCopy][plan.below(3)];
                let count = [1, 3, 11, 12, 13, 40, 100][plan.below(7)];
                let root = if plan.below(3) == 0 { None } else { Some(plan.below(p)) };
                let in_place = plan.below(2) == 0;
                let is_out = root.is_none_or(|r| r == rank);
                let input = vector(p, rank, count);
                let mut recv =
                    if in_place && is_out { input.clone() } else { vec![0xEE; if is_out { count * 8 } else { 0 }] };
                let mut scratch = vec![0u8; reduce::zero_copy_scratch(p)];
                let send = (!(in_place && is_out)).then_some(&input[..]);
                let mut bufs = Buffers { send, recv: &mut recv, scratch: &mut scratch };
                jitter(&mut rng);
                match algo {
                    Algo::Flat => reduce::flat(team, &mut bufs, 8, root, &op),
                    Algo::Partition => reduce::partition(team, &mut bufs, 8, root, &op),
                    Algo::ZeroCopy => reduce::zero_copy(team, &mut bufs, 8, root, &op),
                }
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
            let mut scratch = vec![0u8; reduce::zero_copy_scratch(p)];
            let mut bufs = Buffers { send: Some(&input), recv: &mut recv, scratch: &mut scratch };
            match algo {
                Algo::Flat => reduce::flat(team, &mut bufs, 8, None, &SumF64),
                Algo::Partition => reduce::partition(team, &mut bufs, 8, None, &SumF64),
                Algo::ZeroCopy => reduce::zero_copy(team, &mut bufs, 8, None, &SumF64),
            }
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
