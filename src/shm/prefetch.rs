//! Bringing a rank's own small buffers into its cache before it waits.
//!
//! A rank that must wait for its peers before it touches its buffers (a
//! Reduce root folding into its receive buffer, a Bcast reader copying
//! out) would otherwise take their cache misses only after the wait, in
//! series with it. Applications often pass buffers that are no longer in
//! cache (as the benchmark does); a cold line costs 100-200 ns (a TLB
//! walk, then memory). Prefetching before the wait overlaps those misses
//! with it, as far as the wait is long enough to hide them: the
//! prefetches still in flight when the wait ends queue ahead of the
//! loads that follow.
//!
//! With the benchmark's cold rotating buffers a Reduce of 8 B on 2 ranks
//! took a fifth less time. Where the rank has work of its own before or
//! after the wait, it lost: an Allreduce prefetching the send buffer its
//! copy-in reads at once (4 KiB: 10% slower), or 16 KiB of receive buffer
//! while its peers' copies end with its own; a Gatherv root prefetching
//! the others' places before copying its own block.
//!
//! Every call also asks for its small buffers as it starts ([`at_start`]),
//! where they are not its last call's: pcoll's way from the entry to the
//! algorithm, about 0.1 us, then overlaps their misses, which a rank that
//! copies its data out at once (a Gatherv block's owner, a Reduce's
//! non-root, a Bcast's root) would otherwise take after it.
//! Measurements: docs/measurements.md.
//!
//! Larger buffers are left to the hardware prefetchers, which follow a
//! stream of misses on their own once the copy runs; but not the misses
//! of stores, which [`ahead_of_stores`] asks for.

use crate::core::types::Coll;
use std::ops::Range;

/// For a wait on a peer's copy of the same data (a Reduce root, a Bcast
/// reader): buffers up to this many bytes are prefetched.
pub const LONG_WAIT: usize = 16 << 10;
/// For a wait that ends with this rank's own copy (the peers copy at the
/// same time, an Allreduce).
pub const SHORT_WAIT: usize = 4 << 10;

/// The bytes up to which a `coll` call asks for the lines of its send and
/// of its receive buffer as it starts (a Gatherv root's receive span; a
/// Bcast's buffer counts as its receive buffer). Cold rotating buffers, 2
/// ranks, Open MPI host, none -> these: started together, Gatherv of 8 B
/// 0.82-0.87 of the stock's speed -> 0.96-1.19 (both requests needed: the
/// root's wait ends with the later miss), Reduce of 8 B 0.44-0.50 ->
/// 0.37-0.40 µs, Bcast of 8 B 0.40-0.46 -> 0.31-0.32, Allreduce of 32 B
/// 0.52-0.54 -> 0.43-0.46; back to back, Bcast of 512 B 0.32-0.36 ->
/// 0.24-0.26 (docs/measurements.md).
pub fn at_start(coll: Coll) -> (usize, usize) {
    match coll {
        // Each rank copies its vector in at once, and its result out
        // after a wait that prefetches it: beyond a few lines the requests
        // compete with the copy's loads (back to back, 512 B-2 KiB: up to
        // 0.05 us slower with them).
        Coll::Allreduce => (256, 256),
        Coll::Reduce => (4 << 10, 4 << 10),
        Coll::Bcast => (0, 4 << 10),
        // Beyond 4 KiB a root's requests delay its own block's copy (16
        // KiB span: 1.98-2.02 -> 1.79-1.85 times the stock's speed).
        Coll::Gatherv => (1 << 10, 4 << 10),
    }
}

/// Asks for the cache lines of `bytes`, if at most `up_to` bytes, to be
/// brought into this core's cache. A hint: no effect on what the program
/// computes, and nothing where the processor has no such instruction.
#[inline]
pub fn small(bytes: &[u8], up_to: usize) {
    if !bytes.is_empty() && bytes.len() <= up_to {
        let at = bytes.as_ptr() as usize;
        lines(at, at + bytes.len());
    }
}

/// How far ahead of its stores a copy or a combination into an
/// application's buffer asks for the lines it is about to write.
pub const STORES_AHEAD: usize = 2 << 10;

/// Where writes into an application's buffer ask for its lines ahead of
/// their stores ([`ahead_of_stores`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ahead {
    /// Destinations shorter than this are written in one piece, unasked
    /// (0: never asked).
    pub from: usize,
    /// Bytes written between two requests.
    pub piece: usize,
}

/// [`Ahead::from`] where the requests pay ([`probed_from`]; a fixed
/// PCOLL_SHM_PREFETCH_OUT replaces it): 32 KiB, where they start to pay
/// (see [`ahead_of_stores`]).
pub const AHEAD_FROM: usize = 32 << 10;
/// Default of [`Ahead::piece`]: 1 KiB.
pub const PIECE: usize = 1 << 10;

impl Default for Ahead {
    fn default() -> Self {
        Ahead { from: AHEAD_FROM, piece: PIECE }
    }
}

/// Runs `work(range, &mut dst[range])` over `dst`: from `ahead.from`
/// bytes in pieces of whole `unit`-byte elements of about `ahead.piece`
/// bytes, asking for each line of `dst` [`STORES_AHEAD`] bytes before
/// `work` writes it.
///
/// An application's buffer is often cold (the benchmark's always are),
/// and a store to a line not in cache first reads the line; the hardware
/// prefetchers follow loads, not stores, so those reads otherwise come one
/// or two at a time. With the requests a sum of two 128 KiB vectors of
/// doubles into cold lines took a sixth less time (2-vCPU Xeon VM); below
/// 32 KiB the pieces cost more than the requests save
/// (docs/measurements.md).
pub fn ahead_of_stores(dst: &mut [u8], unit: usize, ahead: Ahead, mut work: impl FnMut(Range<usize>, &mut [u8])) {
    let len = dst.len();
    if ahead.from == 0 || len < ahead.from {
        return work(0..len, dst);
    }
    let piece = (ahead.piece / unit).max(1) * unit;
    let at = dst.as_ptr() as usize;
    lines(at, at + STORES_AHEAD);
    let mut done = 0;
    while done < len {
        let end = (done + piece).min(len);
        lines(at + (done + STORES_AHEAD).min(len), at + (end + STORES_AHEAD).min(len));
        work(done..end, &mut dst[done..end]);
        done = end;
    }
}

/// [`Ahead::from`] for this machine when PCOLL_SHM_PREFETCH_OUT is not
/// set: [`AHEAD_FROM`] where asking for the lines ahead makes a copy
/// into lines not in cache clearly faster (`PAYS_BELOW`), else 0
/// (never). Whether it does
/// depends on the processor: on a 2-vCPU Xeon VM a copy of 128 KiB took
/// 12.5 us plainly and 10.7 with the requests, a sum of doubles a sixth
/// less; on a Zen 1 EPYC VM, whose plain copies write whole lines without
/// reading them, 12.4 against 15.3 us into flushed lines (sums 5-10%
/// slower), and at 2 ranks a Gatherv of 32 KiB blocks a quarter slower
/// (docs/measurements.md). So each process probes once, at its first node
/// communicator (`probe`); a rank's choice concerns its own stores
/// only, so ranks need not agree.
pub fn probed_from() -> usize {
    static FROM: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FROM.get_or_init(|| {
        let (plain, ahead) = probe();
        let pays = ahead < plain * PAYS_BELOW;
        log::info!(
            "prefetching ahead of stores into your buffers: {} (copies of {} KiB into lines not in cache: {:.1} us \
             plain, {:.1} us asking ahead)",
            if pays { format!("from {} KiB", AHEAD_FROM >> 10) } else { "off".into() },
            PROBE_BYTES >> 10,
            plain * 1e6,
            ahead * 1e6,
        );
        if pays {
            AHEAD_FROM
        } else {
            0
        }
    })
}

/// The most the probe's copy asking ahead may take, as a fraction of the
/// plain copy's time, for the requests to be made: they cost where the
/// lines are in cache (2 ranks, Zen 3 VM, back to back on hot buffers: a
/// 256 KiB Bcast 13-15 us without them, 17-18 with), and there the
/// probe's two times came within 5% of each other either way round, so
/// that jobs chose by chance (docs/measurements.md).
const PAYS_BELOW: f64 = 0.9;

/// Bytes of the probe's copies: at 32 KiB neither way gained on either VM.
const PROBE_BYTES: usize = 128 << 10;
/// Copies each way, alternating; the medians count.
const PROBE_COPIES: usize = 9;

/// Median seconds of a copy of [`PROBE_BYTES`] from a buffer in cache
/// into one whose lines were just flushed, plainly and with
/// [`ahead_of_stores`]'s requests: about a millisecond in all. Without
/// the means to flush (not x86-64), where the requests are no-ops too,
/// the plain copy is taken to win.
fn probe() -> (f64, f64) {
    let src = vec![0x5au8; PROBE_BYTES];
    // Not zeroed: written now, so that its pages are mapped before the timing.
    let mut dst = vec![0xa5u8; PROBE_BYTES];
    let mut times = [Vec::new(), Vec::new()];
    for copy in 0..=PROBE_COPIES {
        for (way, asking) in [false, true].into_iter().enumerate() {
            if !flush(&dst) {
                return (0.0, f64::INFINITY);
            }
            let start = std::time::Instant::now();
            if asking {
                ahead_of_stores(&mut dst, 1, Ahead::default(), |range, dst| dst.copy_from_slice(&src[range]));
            } else {
                dst.copy_from_slice(&src);
            }
            std::hint::black_box(&mut dst);
            // The first round warms up the code and the source.
            if copy > 0 {
                times[way].push(start.elapsed().as_secs_f64());
            }
        }
    }
    let [plain, ahead] = times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    });
    (plain, ahead)
}

/// Writes `bytes`' cache lines back to memory and drops them from every
/// cache; false where this processor cannot.
fn flush(bytes: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_clflush, _mm_mfence};
        for line in bytes.chunks(64) {
            // SAFETY: the address is within a live allocation; clflush
            // changes no value the program can observe; SSE2 is part of
            // x86-64.
            unsafe { _mm_clflush(line.as_ptr()) };
        }
        // Orders the flushes before the timed copy's loads and stores.
        // SAFETY: as above.
        unsafe { _mm_mfence() };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = bytes;
        false
    }
}

/// Asks for the lines of the addresses `start..end`.
#[inline]
fn lines(start: usize, end: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        for line in (start & !(LINE - 1)..end).step_by(LINE) {
            // A read hint: the lines are private to this process, so each
            // arrives exclusive and a later store to it needs no transfer.
            // SAFETY: a prefetch never faults and changes nothing the
            // program can observe, whatever the address; SSE is part of
            // x86-64.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, end);
}

#[cfg(test)]
mod tests {
    use super::{ahead_of_stores, Ahead, AHEAD_FROM};

    #[test]
    fn the_probe_times_both_ways_and_settles_on_one() {
        let (plain, ahead) = super::probe();
        if cfg!(target_arch = "x86_64") {
            assert!(plain > 0.0 && plain.is_finite() && ahead > 0.0 && ahead.is_finite(), "{plain} {ahead}");
        }
        let from = super::probed_from();
        assert!(from == 0 || from == AHEAD_FROM, "{from}");
        assert_eq!(super::probed_from(), from, "probed once per process");
    }

    #[test]
    fn pieces_cover_the_buffer_in_order_on_element_boundaries() {
        // The defaults, tiny pieces from 100 bytes, and never.
        for ahead in [Ahead::default(), Ahead { from: 100, piece: 24 }, Ahead { from: 0, piece: 24 }] {
            for (len, unit) in [
                (0, 1),
                (5, 1),
                (99, 1),
                (100, 8),
                (1024, 1),
                (40000, 1),
                (32768, 8),
                (32768 * 3 + 24, 12),
                (50000, 16),
                (40000, 1000),
            ] {
                let mut dst = vec![0u8; len];
                let (mut next, mut calls) = (0, 0);
                ahead_of_stores(&mut dst, unit, ahead, |range, piece| {
                    assert_eq!(range.start, next);
                    assert_eq!(piece.len(), range.len());
                    assert!(range.end == len || range.len() % unit == 0, "{len} {unit} {range:?}");
                    piece.fill(1);
                    next = range.end;
                    calls += 1;
                });
                assert_eq!(next, len);
                assert!(dst.iter().all(|&b| b == 1));
                let whole = ahead.from == 0 || len < ahead.from;
                let most = if whole { len } else { (ahead.piece / unit).max(1) * unit };
                assert_eq!(calls, if whole { 1 } else { len.div_ceil(most) }, "{ahead:?} {len} {unit}");
            }
        }
    }
}
