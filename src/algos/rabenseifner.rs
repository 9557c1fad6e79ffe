//! Rabenseifner's reduction: a reduce-scatter by recursive halving, then an
//! allgather by recursive doubling (Allreduce) or a binomial gather to the
//! root (Reduce). Two ways to bring in the `r = p - N` extra ranks of a
//! size that is not a power of two (`N` the largest power of two ≤ p):
//!
//! - **fold** (`*_fold`, the prior art): in the first `2r` ranks every odd
//!   rank sends its whole vector to the even one below it and sits out; the
//!   `N` survivors run the power-of-two algorithm; for Allreduce each even
//!   rank hands the whole result back at the end.
//! - **split** (seed 004, IBM's non-power-of-two scheme; the default): the
//!   ranks form `N/2` *blocks*, each with a first-half and a second-half
//!   *holder*, using only half-vector transfers. The first `2r` ranks (S0)
//!   exchange halves in pairs; in each quad of S0 the second pair sends its
//!   halves to the first pair (the holders). The other `N - r` ranks (S1)
//!   exchange halves in pairs and are holders at once. If `r` is odd, the
//!   last S0 pair `(a, b)` and the first S1 rank `x` form a triple: `a`
//!   sends its first-half partial to `x`, `x` its second input half to `b`;
//!   `x` and `b` hold. The holders run recursive halving on their half
//!   (masks 2, 4, ...), and at the end of an Allreduce give the halves back
//!   (quads: holder to partner, then pairs exchange; triple: `b` to `x`, `x`
//!   to `a`, then `a` and `b` exchange).
//!
//! Trace, Allreduce split, p = 6 (N = 4, r = 2), vector ABCD: step 1 pairs
//! (0,1) (2,3) (4,5) exchange halves: 0, 2, 4 hold AB partials, 1, 3, 5 CD;
//! step 2: 2→0 (AB), 3→1 (CD): blocks {0,1} and {4,5}; step 3 (mask 2)
//! 0↔4 on AB, 1↔5 on CD: 0 has A, 4 B, 1 C, 5 D complete; then the
//! allgather backwards, 0→2 (AB), 1→3 (CD), and the pairs exchange halves.
//!
//! Order: all combining is `lower ∘ higher`, blocks and recursive-halving
//! partners cover contiguous rank ranges, so the result is in rank order
//! and the algorithm is exact for non-commutative operators; Allreduce
//! ends with copies of one result, bitwise identical on every rank. Reduce
//! with a commutative operator rotates the ranks so that the root is a
//! holder; otherwise the rank holding the gathered result forwards it.
//!
//! Limitations: `2 log p` steps: for small vectors a tree or recursive
//! doubling is faster. Memory: one vector of scratch (Allreduce, the Reduce
//! root), two at the other Reduce ranks. Cost, p = N a power of two:
//! Allreduce `2 log p α + 2 (p-1)/p n β + (p-1)/p n γ`, Reduce the same
//! (the gather mirrors the allgather). Not a power of two, bytes on the
//! critical path: Allreduce fold `(4 - 2/N) n`, split `(3 - 2/N) n` (`+ n/2`
//! when r is odd); Reduce fold `(3 - 2/N) n`, split `(2.5 - 2/N) n`. Both
//! schemes send the same total; the split takes a quarter of the fold's
//! extra time off the critical path (see `pcoll model --nonpof2`).
//! Seed: 004 (the split scheme, for Reduce and Allreduce).

use crate::algos::Params;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::pattern::pof2_floor;
use crate::core::schedule::{BufId, Builder, Region, Schedule};

/// How the ranks beyond the largest power of two are brought in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    Fold,
    Split,
}

pub(super) fn allreduce(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    build_allreduce(desc, Scheme::Split)
}

pub(super) fn allreduce_fold(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    build_allreduce(desc, Scheme::Fold)
}

pub(super) fn reduce(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    build_reduce(desc, Scheme::Split)
}

pub(super) fn reduce_fold(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
    build_reduce(desc, Scheme::Fold)
}

/// Where this rank's partial result lives: the input vector, or one of two
/// full-length planes (the vector's elements at the same offsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    Input,
    Plane(usize),
}

/// This rank's vectors and where its partial result is.
struct Vector {
    unit: usize,
    input: Region,
    planes: [Region; 2],
    at: Loc,
}

impl Vector {
    /// `input` is read-only unless it is `planes[0]` (MPI_IN_PLACE).
    fn new(unit: usize, input: Region, planes: [Region; 2]) -> Vector {
        let at = if input == planes[0] { Loc::Plane(0) } else { Loc::Input };
        Vector { unit, input, planes, at }
    }

    /// Elements `lo..hi` at `loc`.
    fn at_loc(&self, loc: Loc, (lo, hi): (usize, usize)) -> Region {
        let base = match loc {
            Loc::Input => self.input,
            Loc::Plane(i) => self.planes[i],
        };
        Region::new(base.buf, base.off + lo * self.unit, (hi - lo) * self.unit)
    }

    /// Elements `lo..hi` of the partial result.
    fn acc(&self, range: (usize, usize)) -> Region {
        self.at_loc(self.at, range)
    }

    /// Elements `lo..hi` of the result plane (`planes[0]`).
    fn result(&self, range: (usize, usize)) -> Region {
        self.at_loc(Loc::Plane(0), range)
    }

    /// A plane other than `not`, which is not the input.
    fn other(not: Loc) -> Loc {
        if not == Loc::Plane(0) {
            Loc::Plane(1)
        } else {
            Loc::Plane(0)
        }
    }

    /// Receives `peer`'s partial over `range` and combines it with this
    /// rank's; `mine_first`: this rank's partial covers the lower ranks.
    fn recv_combine(&mut self, b: &mut Builder, peer: usize, range: (usize, usize), mine_first: bool) {
        let spare = Vector::other(self.at);
        let theirs = self.at_loc(spare, range);
        b.recv(peer, theirs);
        if mine_first {
            b.reduce(self.acc(range), theirs);
            self.at = spare;
        } else if self.at != Loc::Input {
            b.reduce(theirs, self.acc(range));
        } else {
            let out = Vector::other(spare);
            b.reduce_into(theirs, self.acc(range), self.at_loc(out, range));
            self.at = out;
        }
    }

    /// One recursive-halving exchange: send `give` of the partial to
    /// `peer`, receive and combine its partial over `keep`.
    fn exchange(&mut self, b: &mut Builder, peer: usize, give: (usize, usize), keep: (usize, usize), mine_first: bool) {
        b.send(peer, self.acc(give));
        self.recv_combine(b, peer, keep, mine_first);
        b.end_step();
    }

    /// Makes the result plane hold this rank's partial over `range`.
    fn settle(&mut self, b: &mut Builder, range: (usize, usize)) {
        if self.at != Loc::Plane(0) {
            b.copy(self.acc(range), self.result(range)).end_step();
            self.at = Loc::Plane(0);
        }
    }
}

/// Who does what, in ranks relative to `base` (rel = (rank - base) mod p).
struct Plan {
    scheme: Scheme,
    p: usize,
    /// The power of two N, and r = p - N.
    n_holders: usize,
    extra: usize,
    /// Elements of the vector and the first half's length.
    count: usize,
    half: usize,
    base: usize,
}

/// The rank's part in the entry phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Takes part in the recursive halving under this virtual rank.
    Holder(usize),
    /// Hands its data over and waits for the result.
    Sender,
}

impl Plan {
    fn new(scheme: Scheme, p: usize, count: usize, base: usize) -> Plan {
        let n_holders = pof2_floor(p);
        Plan { scheme, p, n_holders, extra: p - n_holders, count, half: count / 2, base }
    }

    fn rank(&self, rel: usize) -> usize {
        (rel + self.base) % self.p
    }

    fn rel(&self, rank: usize) -> usize {
        (rank + self.p - self.base) % self.p
    }

    fn first(&self) -> (usize, usize) {
        (0, self.half)
    }

    fn second(&self) -> (usize, usize) {
        (self.half, self.count)
    }

    fn whole(&self) -> (usize, usize) {
        (0, self.count)
    }

    /// The split scheme: quads in S0, and whether S0 ends with a triple.
    fn quads(&self) -> usize {
        self.extra / 2
    }

    fn triple(&self) -> bool {
        self.scheme == Scheme::Split && self.extra % 2 == 1
    }

    /// First rank of the S1 pairs (after S0 and, with a triple, its `x`).
    fn s1_pairs(&self) -> usize {
        2 * self.extra + self.triple() as usize
    }

    /// The recursive halving starts at this mask: the split scheme's blocks
    /// already did the first halving.
    fn first_mask(&self) -> usize {
        if self.scheme == Scheme::Split && self.extra > 0 {
            2
        } else {
            1
        }
    }

    /// The relative rank of virtual rank `v`.
    fn holder_rel(&self, v: usize) -> usize {
        if self.extra == 0 {
            return v;
        }
        match self.scheme {
            Scheme::Fold if v < self.extra => 2 * v,
            Scheme::Fold => v + self.extra,
            Scheme::Split => {
                let (block, half) = (v / 2, v % 2);
                let quads = self.quads();
                if block < quads {
                    4 * block + half
                } else if self.triple() && block == quads {
                    // x holds the first half, b the second.
                    if half == 0 {
                        2 * self.extra
                    } else {
                        2 * self.extra - 1
                    }
                } else {
                    self.s1_pairs() + 2 * (block - quads - self.triple() as usize) + half
                }
            }
        }
    }

    fn role(&self, rel: usize) -> Role {
        let (r, quads) = (self.extra, self.quads());
        if r == 0 {
            return Role::Holder(rel);
        }
        match self.scheme {
            Scheme::Fold if rel < 2 * r && rel % 2 == 1 => Role::Sender,
            Scheme::Fold if rel < 2 * r => Role::Holder(rel / 2),
            Scheme::Fold => Role::Holder(rel - r),
            Scheme::Split if rel < 4 * quads => match rel % 4 {
                0 | 1 => Role::Holder(2 * (rel / 4) + rel % 4),
                _ => Role::Sender,
            },
            Scheme::Split if self.triple() && rel == 2 * r - 2 => Role::Sender,
            Scheme::Split if self.triple() && rel == 2 * r - 1 => Role::Holder(2 * quads + 1),
            Scheme::Split if self.triple() && rel == 2 * r => Role::Holder(2 * quads),
            Scheme::Split => {
                let k = rel - self.s1_pairs();
                Role::Holder(2 * (quads + self.triple() as usize + k / 2) + k % 2)
            }
        }
    }

    /// The entry phase: brings the extra ranks in. Returns this rank's role
    /// and the ranges of its recursive-halving history so far.
    fn enter(&self, b: &mut Builder, v: &mut Vector, rel: usize) -> (Role, Vec<(usize, usize)>) {
        let role = self.role(rel);
        let mut ranges = vec![self.whole()];
        if self.extra == 0 {
            return (role, ranges);
        }
        let r = self.extra;
        let to = |rel: usize| self.rank(rel);
        if self.scheme == Scheme::Fold {
            if rel < 2 * r && rel % 2 == 1 {
                b.send(to(rel - 1), v.acc(self.whole())).end_step();
            } else if rel < 2 * r {
                v.recv_combine(b, to(rel + 1), self.whole(), true);
                b.end_step();
            }
            return (role, ranges);
        }
        // Step 1: pairs exchange halves, the lower rank keeping the first
        // (every S0 pair, and the S1 pairs; x waits).
        let (x, s1) = (2 * r, self.s1_pairs());
        let pair = if rel < 2 * r {
            Some(rel ^ 1)
        } else if rel >= s1 {
            Some(s1 + ((rel - s1) ^ 1))
        } else {
            None
        };
        if let Some(peer) = pair {
            let lower = rel < peer;
            let (keep, give) = if lower { (self.first(), self.second()) } else { (self.second(), self.first()) };
            v.exchange(b, to(peer), give, keep, lower);
            ranges.push(keep);
        }
        // Step 2: in each quad the second pair hands its halves to the
        // first; in the triple a→x (first half) and x→b (second half).
        if rel < 4 * self.quads() {
            let half = if rel.is_multiple_of(2) { self.first() } else { self.second() };
            if rel % 4 >= 2 {
                b.send(to(rel - 2), v.acc(half));
            } else {
                v.recv_combine(b, to(rel + 2), half, true);
            }
            b.end_step();
        } else if self.triple() {
            if rel == x - 2 {
                b.send(to(x), v.acc(self.first())).end_step();
            } else if rel == x - 1 {
                v.recv_combine(b, to(x), self.second(), true);
                b.end_step();
            } else if rel == x {
                b.send(to(x - 1), v.acc(self.second()));
                v.recv_combine(b, to(x - 2), self.first(), false);
                b.end_step();
                ranges.push(self.first());
            }
        }
        (role, ranges)
    }

    /// The exit phase of Allreduce: the extra ranks get the result. The
    /// holders have their part of it in the result plane.
    fn leave(&self, b: &mut Builder, v: &Vector, rel: usize) {
        let r = self.extra;
        if r == 0 {
            return;
        }
        let to = |rel: usize| self.rank(rel);
        if self.scheme == Scheme::Fold {
            if rel < 2 * r && rel.is_multiple_of(2) {
                b.send(to(rel + 1), v.result(self.whole())).end_step();
            } else if rel < 2 * r {
                b.recv(to(rel - 1), v.result(self.whole())).end_step();
            }
            return;
        }
        let half_of = |rel: usize| if rel.is_multiple_of(2) { self.first() } else { self.second() };
        let x = 2 * r;
        // Step A: quad holders give their half to their partners; b → x.
        if rel < 4 * self.quads() {
            if rel % 4 < 2 {
                b.send(to(rel + 2), v.result(half_of(rel)));
            } else {
                b.recv(to(rel - 2), v.result(half_of(rel)));
            }
            b.end_step();
        } else if self.triple() && rel == x - 1 {
            b.send(to(x), v.result(self.second())).end_step();
        } else if self.triple() && rel == x {
            b.recv(to(x - 1), v.result(self.second())).end_step();
        }
        // Step B: x → a (first half); every other pair exchanges halves.
        let pair = |rel: usize, b: &mut Builder| {
            let peer = rel ^ 1;
            b.send(to(peer), v.result(half_of(rel))).recv(to(peer), v.result(half_of(peer))).end_step();
        };
        if self.triple() && rel == x {
            b.send(to(x - 2), v.result(self.first())).end_step();
        } else if self.triple() && rel == x - 2 {
            b.recv(to(x), v.result(self.first())).end_step();
            pair(rel, b);
        } else if self.triple() && rel == x - 1 {
            // Step C, after a has its half from x.
            pair(rel, b);
        } else if rel < 2 * r {
            pair(rel, b);
        } else {
            let s1 = self.s1_pairs();
            let peer = s1 + ((rel - s1) ^ 1);
            let (mine, theirs) = if rel < peer { (self.first(), self.second()) } else { (self.second(), self.first()) };
            b.send(to(peer), v.result(mine)).recv(to(peer), v.result(theirs)).end_step();
        }
    }
}

/// The recursive halving among the holders: virtual rank `vrank` of
/// `n_holders`, from `first_mask` up; pushes each kept range.
fn reduce_scatter(b: &mut Builder, v: &mut Vector, plan: &Plan, vrank: usize, ranges: &mut Vec<(usize, usize)>) {
    let mut mask = plan.first_mask();
    while mask < plan.n_holders {
        let (lo, hi) = *ranges.last().expect("a range");
        let mid = lo + (hi - lo) / 2;
        let lower = vrank & mask == 0;
        let (keep, give) = if lower { ((lo, mid), (mid, hi)) } else { ((mid, hi), (lo, mid)) };
        let peer = plan.rank(plan.holder_rel(vrank ^ mask));
        v.exchange(b, peer, give, keep, lower);
        ranges.push(keep);
        mask <<= 1;
    }
}

/// The range `ranges` popped its last entry from, and that entry's sibling.
fn sibling(mine: (usize, usize), parent: (usize, usize)) -> (usize, usize) {
    if mine.0 == parent.0 {
        (mine.1, parent.1)
    } else {
        (parent.0, mine.0)
    }
}

fn build_allreduce(desc: &CallDesc, scheme: Scheme) -> Schedule {
    let (n, unit) = (desc.bytes, desc.unit);
    let mut b = Builder::new();
    b.reserve_scratch(n);
    let recv = Region::new(BufId::Recv, 0, n);
    let input = if desc.in_place { recv } else { Region::new(BufId::Send, 0, n) };
    let mut v = Vector::new(unit, input, [recv, Region::new(BufId::Scratch, 0, n)]);
    let plan = Plan::new(scheme, desc.size, n / unit, 0);
    let rel = desc.rank;
    let (role, mut ranges) = plan.enter(&mut b, &mut v, rel);
    if let Role::Holder(vrank) = role {
        reduce_scatter(&mut b, &mut v, &plan, vrank, &mut ranges);
        v.settle(&mut b, *ranges.last().expect("a range"));
        // The allgather retraces the halving backwards.
        let mut mask = plan.n_holders / 2;
        while mask >= plan.first_mask() {
            let mine = ranges.pop().expect("a range");
            let theirs = sibling(mine, *ranges.last().expect("a parent range"));
            let peer = plan.rank(plan.holder_rel(vrank ^ mask));
            b.send(peer, v.result(mine)).recv(peer, v.result(theirs)).end_step();
            mask >>= 1;
        }
    }
    plan.leave(&mut b, &v, rel);
    b.finish()
}

fn build_reduce(desc: &CallDesc, scheme: Scheme) -> Schedule {
    let (n, unit, p) = (desc.bytes, desc.unit, desc.size);
    let mut b = Builder::new();
    let is_root = desc.is_root();
    let recv = Region::new(BufId::Recv, 0, n);
    let scratch = |i: usize| Region::new(BufId::Scratch, i * n, n);
    let (input, planes) = if is_root {
        b.reserve_scratch(n);
        (if desc.in_place { recv } else { Region::new(BufId::Send, 0, n) }, [recv, scratch(0)])
    } else {
        b.reserve_scratch(2 * n);
        (Region::new(BufId::Send, 0, n), [scratch(0), scratch(1)])
    };
    let mut v = Vector::new(unit, input, planes);
    // With a commutative operator, rotate so that the root is a holder:
    // relative rank 0, or x of the triple when S0 has nothing else.
    let probe = Plan::new(scheme, p, n / unit, 0);
    let base = if !desc.commutative {
        0
    } else if probe.triple() && probe.quads() == 0 {
        (desc.root + p - 2 * probe.extra) % p
    } else {
        desc.root
    };
    let plan = Plan::new(scheme, p, n / unit, base);
    let rel = plan.rel(desc.rank);
    let (role, mut ranges) = plan.enter(&mut b, &mut v, rel);
    // The gather goes to the root if it holds, else to virtual rank 0,
    // which forwards the result.
    let target = match plan.role(plan.rel(desc.root)) {
        Role::Holder(t) => t,
        Role::Sender => 0,
    };
    let target_rank = plan.rank(plan.holder_rel(target));
    if let Role::Holder(vrank) = role {
        reduce_scatter(&mut b, &mut v, &plan, vrank, &mut ranges);
        if is_root {
            v.settle(&mut b, *ranges.last().expect("a range"));
        }
        // Binomial gather retracing the halving: at mask m the ranks whose
        // distance to the target has bit m send their range and stop.
        let dist = vrank ^ target;
        let mut mask = plan.n_holders / 2;
        while mask >= 1 {
            let mine = ranges.pop().expect("a range");
            let theirs = sibling(mine, *ranges.last().expect("a parent range"));
            let peer = plan.rank(plan.holder_rel(vrank ^ mask));
            if dist & mask != 0 {
                b.send(peer, v.acc(mine)).end_step();
                break;
            }
            b.recv(peer, v.at_loc(v.at, theirs)).end_step();
            mask >>= 1;
        }
        if mask == 0 && !is_root {
            // The target, which is not the root, forwards the result.
            b.send(desc.root, v.acc(plan.whole())).end_step();
        }
    }
    if is_root && target_rank != desc.root {
        b.recv(target_rank, recv).end_step();
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_holders_agree() {
        for scheme in [Scheme::Fold, Scheme::Split] {
            for p in 1..200 {
                let plan = Plan::new(scheme, p, 10, 0);
                let mut holders = vec![usize::MAX; plan.n_holders];
                for rel in 0..p {
                    if let Role::Holder(v) = plan.role(rel) {
                        assert_eq!(holders[v], usize::MAX, "{scheme:?} p={p}: two holders of {v}");
                        holders[v] = rel;
                    }
                }
                for (v, &rel) in holders.iter().enumerate() {
                    assert_eq!(plan.holder_rel(v), rel, "{scheme:?} p={p} v={v}");
                }
                // Holders in virtual-rank order cover ascending ranks.
                assert!(holders.windows(2).all(|w| w[0] < w[1]) || scheme == Scheme::Split, "{scheme:?} p={p}");
            }
        }
    }
}
