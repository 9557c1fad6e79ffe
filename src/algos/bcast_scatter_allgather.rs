//! Scatter + allgather broadcast for large messages (van de Geijn): the
//! root scatters the message over a binomial tree, then all ranks gather
//! the pieces, by recursive doubling (`scatter_allgather`) or around a ring
//! (`scatter_allgather_ring`).
//!
//! The message is cut into p pieces, piece i (of relative rank i) covering
//! bytes ⌊i·n/p⌋ .. ⌊(i+1)·n/p⌋: lengths differ by at most one byte, and
//! for n < p some are empty (both sides skip those transfers, so there is
//! no cliff at small n). A binomial subtree is a contiguous range of
//! relative ranks, so what a scatter parent sends a child — the pieces of
//! the child's subtree — is one contiguous region. Everything lands at its
//! final place in the receive buffer: no scratch, no local copies. After
//! the scatter a rank holds the pieces of its whole subtree (the root all
//! of them), and neither allgather sends a rank pieces it already holds.
//!
//! Recursive doubling: at distance m = 1, 2, 4, ... relative rank r
//! exchanges with r ^ m the pieces of its aligned group of m ranks. When p
//! is not a power of two the upper half of the last group at a distance can
//! be short (u < m ranks): the lower ranks without a partner then get the
//! upper half's pieces from the first u lower ranks, which have them, by a
//! halving broadcast within the lower half (log2 m extra steps at most;
//! MPICH's scheme).
//!
//! Ring: in step t rank r sends piece r - t to r + 1 and receives piece
//! r - t - 1 from r - 1 (relative, mod p), p - 1 steps.
//!
//! Trace, p = 4, root 0, pieces a b c d: scatter: 0→2 [c d], 0→1 [b], then
//! 2→3 [d]. Doubling, m = 1: 0→1 a, 2→3 c (0 holds b and 2 holds d from
//! the scatter); m = 2: 0→2 [a b], and 1, 3 swap [a b] and [c d]. Ring:
//! t = 0: 0→1 a, 1→2 b, 2→3 c (3 never sends to the root); t = 1: 0→1 d,
//! 1→2 a, 2→3 b; t = 2: 0→1 c, 2→3 a (2 holds d).
//!
//! Limitations: meant for large messages: twice the steps of a binomial
//! tree. For p not a power of two recursive doubling is uneven: a short
//! group's u upper ranks each receive the whole lower half (up to about n
//! bytes, e.g. for p = 2^k + 1 the last rank gets n·2^k/p in one message:
//! ≈ 3nβ instead of 2nβ on the critical path), and its fix-up adds steps
//! (at most ⌈log2 p⌉ (⌈log2 p⌉ - 1) / 2 in all). The ring has neither
//! problem; prefer it for such p. Memory: none beyond the buffer.
//! Cost: scatter ⌈log2 p⌉ α + (p-1)/p nβ, then doubling log2 p α +
//! (p-1)/p nβ (p a power of two), ring (p-1) α + (p-1)/p nβ; in all
//! 2 log2 p α + 2 (p-1)/p nβ and (log2 p + p - 1) α + 2 (p-1)/p nβ,
//! against ⌈log2 p⌉ (α + nβ) for the binomial tree.
//! Seed: the large-message broadcast that seed 004's Rabenseifner
//! reduce-scatter + allgather mirrors; seed 002 motivates bandwidth-bound
//! broadcasts.

use std::ops::Range;

use crate::algos::Params;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::pattern::{binomial_children, binomial_parent, binomial_subtree};
use crate::core::schedule::{BufId, Builder, Region, Schedule};

/// `scatter_allgather`: allgather by recursive doubling.
pub(super) fn build_doubling(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    build(desc, append_doubling)
}

/// `scatter_allgather_ring`: allgather around a ring.
pub(super) fn build_ring(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    build(desc, append_ring)
}

fn build(desc: &CallDesc, allgather: fn(&mut Builder, &Ranks, &Pieces)) -> Schedule {
    let ranks = Ranks { rel: desc.rel_rank(), size: desc.size, root: desc.root };
    let pieces = Pieces { bytes: desc.bytes, size: desc.size };
    let mut b = Builder::new();
    append_scatter(&mut b, &ranks, &pieces);
    allgather(&mut b, &ranks, &pieces);
    b.finish()
}

/// This rank and the communicator, in ranks relative to the root.
struct Ranks {
    rel: usize,
    size: usize,
    root: usize,
}

impl Ranks {
    fn abs(&self, rel: usize) -> usize {
        (rel + self.root) % self.size
    }

    /// Whether relative rank `rel` holds all of `pieces` after the
    /// scatter: those of its binomial subtree (everything at the root).
    fn holds(&self, rel: usize, pieces: &Range<usize>) -> bool {
        let own = binomial_subtree(rel, self.size);
        own.start <= pieces.start && pieces.end <= own.end
    }
}

/// The message cut into one piece per relative rank.
struct Pieces {
    bytes: usize,
    size: usize,
}

impl Pieces {
    fn start(&self, piece: usize) -> usize {
        (piece as u128 * self.bytes as u128 / self.size as u128) as usize
    }

    /// Pieces `range` (consecutive) as one region of the receive buffer.
    fn region(&self, range: Range<usize>) -> Region {
        let start = self.start(range.start);
        Region::new(BufId::Recv, start, self.start(range.end) - start)
    }
}

/// Binomial scatter: receive the pieces of this rank's subtree from the
/// parent, then send each child the pieces of the child's subtree.
fn append_scatter(b: &mut Builder, r: &Ranks, pieces: &Pieces) {
    if let Some(parent) = binomial_parent(r.rel) {
        b.recv(r.abs(parent), pieces.region(binomial_subtree(r.rel, r.size))).end_step();
    }
    for child in binomial_children(r.rel, r.size) {
        b.send(r.abs(child), pieces.region(binomial_subtree(child, r.size)));
    }
    b.end_step();
}

/// Ring allgather: step t sends piece rel - t right and receives piece
/// rel - t - 1 from the left, skipping pieces the receiver holds.
fn append_ring(b: &mut Builder, r: &Ranks, pieces: &Pieces) {
    let p = r.size;
    let (left, right) = ((r.rel + p - 1) % p, (r.rel + 1) % p);
    for t in 0..p.saturating_sub(1) {
        let out = (r.rel + p - t) % p;
        let inc = (out + p - 1) % p;
        if !r.holds(right, &(out..out + 1)) {
            b.send(r.abs(right), pieces.region(out..out + 1));
        }
        if !r.holds(r.rel, &(inc..inc + 1)) {
            b.recv(r.abs(left), pieces.region(inc..inc + 1));
        }
        b.end_step();
    }
}

/// Recursive-doubling allgather. Invariant: after distance m every rank
/// holds the pieces of its aligned group of 2m ranks (cut at p).
fn append_doubling(b: &mut Builder, r: &Ranks, pieces: &Pieces) {
    let p = r.size;
    let mut m = 1;
    while m < p {
        let lo = r.rel & !(2 * m - 1);
        let hi = lo + m;
        if hi < p {
            let (lower, upper) = (lo..hi, hi..(hi + m).min(p));
            let peer = r.rel ^ m;
            let (give, take) = if r.rel < hi { (&lower, &upper) } else { (&upper, &lower) };
            if peer < p {
                if !r.holds(peer, give) {
                    b.send(r.abs(peer), pieces.region(give.clone()));
                }
                if !r.holds(r.rel, take) {
                    b.recv(r.abs(peer), pieces.region(take.clone()));
                }
            }
            b.end_step();
            if upper.len() < m && r.rel < hi {
                append_short_half(b, r, pieces, lo, m, upper);
            }
        }
        m *= 2;
    }
}

/// Within the lower half `lo .. lo + m` of a group whose upper half
/// `upper` has only u = |upper| < m ranks, after the exchange the first u
/// lower ranks hold the upper pieces and the others do not: broadcast them
/// by halving. At half-distance t, in every aligned group of 2t lower
/// ranks the first u (all, if u ≥ 2t) hold them, and each holder i whose
/// partner i + t does not sends to it; both halves then again have their
/// first u holding.
fn append_short_half(b: &mut Builder, r: &Ranks, pieces: &Pieces, lo: usize, m: usize, upper: Range<usize>) {
    let u = upper.len();
    let i = r.rel - lo;
    let mut t = m / 2;
    while t > 0 {
        let group = i & !(2 * t - 1);
        let has = |j: usize| j < group + u;
        let j = i ^ t;
        if i < j && has(i) && !has(j) {
            b.send(r.abs(lo + j), pieces.region(upper.clone()));
        } else if j < i && has(j) && !has(i) {
            b.recv(r.abs(lo + j), pieces.region(upper.clone()));
        }
        b.end_step();
        t /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::call::Topo;
    use crate::core::types::Coll;

    fn scheds(
        build: fn(&CallDesc, &Params, &GatherLayout) -> Schedule,
        p: usize,
        root: usize,
        n: usize,
    ) -> Vec<Schedule> {
        (0..p)
            .map(|rank| {
                let desc = CallDesc {
                    coll: Coll::Bcast,
                    rank,
                    size: p,
                    root,
                    bytes: n,
                    unit: 1,
                    commutative: true,
                    in_place: false,
                    topo: Topo::default(),
                };
                build(&desc, &Params::default(), &GatherLayout::default())
            })
            .collect()
    }

    /// How often each byte of the buffer is received.
    fn received(s: &Schedule, n: usize) -> Vec<usize> {
        let mut times = vec![0; n];
        for x in s.steps.iter().flat_map(|s| &s.recvs) {
            times[x.region.off..x.region.end()].iter_mut().for_each(|t| *t += 1);
        }
        times
    }

    #[test]
    fn every_byte_arrives_exactly_once() {
        // Scatter plus allgather deliver each non-root rank exactly the n
        // bytes it lacks, never a byte twice, and the root nothing, for
        // every p (powers of two or not) and n (below p too).
        for build in [build_doubling as fn(&CallDesc, &Params, &GatherLayout) -> Schedule, build_ring] {
            for p in 1..70 {
                for n in [0, 1, 5, p - 1, 3 * p + 1, 1000] {
                    let root = p / 3;
                    for (rank, s) in scheds(build, p, root, n).iter().enumerate() {
                        let want = vec![usize::from(rank != root); n];
                        assert_eq!(received(s, n), want, "p {p} n {n} rank {rank}");
                    }
                }
            }
        }
    }
}
