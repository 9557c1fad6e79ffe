//! Checking a registered algorithm end to end: build every rank's call
//! descriptor and schedule for one collective call, set up inputs whose
//! combination proves correctness, run the simulator, and compare with the
//! sequential reference.
//!
//! The operands ([`Data`]) are chosen so that a wrong schedule cannot pass
//! by luck:
//! - [`Data::Interval`] (non-commutative): an element is a pair
//!   `(lo, hi): (u32, u32)`; rank `r` contributes `(o + r, o + r)` with an
//!   offset `o` that differs per element, and `a ∘ b` is `(a.lo, b.hi)`
//!   only if `a.hi + 1 == b.lo`, otherwise a poison value that absorbs
//!   everything. The result `(o, o + p - 1)` is reachable only by combining
//!   every rank's contribution exactly once, in rank order, at the right
//!   element position.
//! - [`Data::Bitset`] (commutative): an element is a position tag plus a
//!   bitset of contributing ranks; `a ∘ b` is the union if the tags agree
//!   and the sets are disjoint, poison otherwise. The full set proves
//!   exactly-once combination in any order. Its unit is `8 (1 + ⌈p/64⌉)`
//!   bytes, so it also exercises units other than 8.
//! - [`Data::SumU64`]: wrapping `u64` sum of pseudo-random values.
//! - [`Data::SumF64`]: `f64` sum of values of wildly different magnitude
//!   (±1e300, 1, 1e-300, ...), where every association gives other bits:
//!   Allreduce must still give bitwise identical results on every rank
//!   (design rule 3). No reference value is checked for it.
//! - [`Data::Order`] (neither commutative nor associative): an element is
//!   a hash, and `a ∘ b` hashes the pair, so the result records the whole
//!   combination tree: only the canonical order `x0 ∘ (x1 ∘ (... ∘
//!   x(p-1)))` of canonical algorithms (PCOLL_REPRODUCIBLE) gives the
//!   reference. Claiming it commutative lets any algorithm run it, and
//!   fail.
//!
//! Buffers the schedule should not fill start with [`SENTINEL`] bytes, and
//! scratch with the simulator's fill, so a read of anything never written
//! shows up in the result.

use std::cell::Cell;

use super::{run_with, RankIo, SimError, SimOptions, SimStats};
use crate::algos::{Algorithm, Params};
use crate::core::call::{CallDesc, GatherLayout, Topo};
use crate::core::schedule::Schedule;
use crate::core::types::Coll;
use crate::exec::Combiner;

// The generators live in core (pure); still reachable here for the node
// layer's tests, which import them from this module.
pub use crate::core::gen::{combine_order, random_layout, runs_layout, Rng};

/// Initial value of receive-buffer bytes the result must overwrite or keep.
pub const SENTINEL: u8 = 0xEE;

/// What the vectors of a reduction hold, and so which operator combines
/// them (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data {
    Interval,
    Bitset,
    SumU64,
    SumF64,
    Order,
}

impl Data {
    /// Bytes per element for a communicator of `size` ranks.
    pub fn unit(self, size: usize) -> usize {
        match self {
            Data::Bitset => 8 * (1 + size.div_ceil(64)),
            _ => 8,
        }
    }

    /// Whether the operator is commutative (Interval and Order are not).
    pub fn commutative(self) -> bool {
        !matches!(self, Data::Interval | Data::Order)
    }
}

/// One collective call on every rank.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub coll: Coll,
    pub size: usize,
    /// Ignored for Allreduce (always 0).
    pub root: usize,
    /// Elements for Allreduce and Reduce, bytes for Bcast, ignored for
    /// Gatherv (the layout has the lengths).
    pub count: usize,
    /// What the descriptors claim about the operator. `Data::Interval`
    /// requires `false`.
    pub commutative: bool,
    /// MPI_IN_PLACE: on every rank for Allreduce, at the root for Reduce
    /// and Gatherv; ignored for Bcast.
    pub in_place: bool,
    pub data: Data,
    /// Gatherv: every rank's `(offset, len)` in the root's receive buffer.
    pub layout: GatherLayout,
    pub opts: SimOptions,
}

impl Case {
    /// A call with root 0, no MPI_IN_PLACE, non-commutative interval data.
    pub fn new(coll: Coll, size: usize, count: usize) -> Case {
        let layout = if coll == Coll::Gatherv {
            GatherLayout { blocks: (0..size).map(|r| (r * count, count)).collect() }
        } else {
            GatherLayout::default()
        };
        Case {
            coll,
            size,
            root: 0,
            count,
            commutative: false,
            in_place: false,
            data: Data::Interval,
            layout,
            opts: SimOptions::default(),
        }
    }

    fn root(&self) -> usize {
        if self.coll == Coll::Allreduce {
            0
        } else {
            self.root
        }
    }

    fn unit(&self) -> usize {
        match self.coll {
            Coll::Allreduce | Coll::Reduce => self.data.unit(self.size),
            Coll::Bcast | Coll::Gatherv => 1,
        }
    }

    /// Whether `rank` passes MPI_IN_PLACE.
    pub fn in_place_at(&self, rank: usize) -> bool {
        match self.coll {
            Coll::Allreduce => self.in_place,
            Coll::Reduce | Coll::Gatherv => self.in_place && rank == self.root(),
            Coll::Bcast => false,
        }
    }

    /// Every rank's call descriptor.
    pub fn descs(&self) -> Vec<CallDesc> {
        assert!(self.size >= 1 && self.root() < self.size, "bad case {self:?}");
        if self.coll == Coll::Gatherv {
            assert_eq!(self.layout.blocks.len(), self.size, "a Gatherv layout needs one block per rank");
        }
        (0..self.size)
            .map(|rank| CallDesc {
                coll: self.coll,
                rank,
                size: self.size,
                root: self.root(),
                bytes: match self.coll {
                    Coll::Gatherv => self.layout.blocks[rank].1,
                    _ => self.count * self.unit(),
                },
                unit: self.unit(),
                commutative: self.commutative,
                in_place: self.in_place_at(rank),
                topo: Topo::default(),
            })
            .collect()
    }

    /// The layout `rank` builds its schedule from: the root's for the root
    /// and, for algorithms that need it everywhere (which the library
    /// provides by broadcasting it or, in the aggressive mode, from every
    /// rank's own recvcounts and displs), for every rank; empty elsewhere
    /// (recvcounts and displs are significant only at the root).
    pub fn layout_at(&self, rank: usize, everywhere: bool) -> &GatherLayout {
        static NONE: GatherLayout = GatherLayout { blocks: Vec::new() };
        if self.coll == Coll::Gatherv && (rank == self.root() || everywhere) {
            &self.layout
        } else {
            &NONE
        }
    }

    /// Bytes of the root's receive buffer for Gatherv: up to the end of the
    /// last block, plus a little slack that must stay untouched.
    fn gather_extent(&self) -> usize {
        self.layout.blocks.iter().map(|&(o, l)| o + l).max().unwrap_or(0) + 3
    }
}

/// Every rank's schedule, or `None` if the algorithm's check rejects the
/// call. The check must answer the same on every rank: a rank that decides
/// alone deadlocks the job (design rule 2).
pub fn schedules(alg: &Algorithm, params: &Params, case: &Case) -> Result<Option<Vec<Schedule>>, SimError> {
    let descs = case.descs();
    let verdicts: Vec<bool> = descs.iter().map(|d| (alg.check)(d).is_ok()).collect();
    if let Some(rank) = verdicts.iter().position(|&v| v != verdicts[0]) {
        return Err(SimError::Wrong {
            rank: Some(rank),
            what: format!("{alg:?}: the check accepts the call at rank 0 xor at rank {rank}"),
        });
    }
    if !verdicts[0] {
        return Ok(None);
    }
    let build = alg.schedule().expect("the simulator runs schedule algorithms");
    Ok(Some(descs.iter().map(|d| build(d, params, case.layout_at(d.rank, alg.layout_everywhere))).collect()))
}

/// Runs `alg` on `case` and checks the result. `Ok(None)` if the algorithm
/// does not accept the call.
pub fn check(alg: &Algorithm, params: &Params, case: &Case) -> Result<Option<SimStats>, SimError> {
    assert_eq!(alg.coll, case.coll, "{alg:?} does not implement {}", case.coll);
    assert!(!(case.commutative && case.data == Data::Interval), "interval data is not commutative");
    let Some(scheds) = schedules(alg, params, case)? else {
        return Ok(None);
    };
    let mut io = inputs(case);
    let op = TestOp::new(case);
    let stats = run_with(&scheds, &mut io, &op, case.opts)?;
    if let Some(what) = op.fault.take() {
        return Err(SimError::Wrong { rank: None, what });
    }
    verify(case, &io)?;
    Ok(Some(stats))
}

fn is_reduction(coll: Coll) -> bool {
    matches!(coll, Coll::Allreduce | Coll::Reduce)
}

fn mix(a: usize, b: usize) -> u64 {
    Rng((a as u64) << 32 ^ b as u64).next_u64()
}

/// A data byte that is never the sentinel.
fn data_byte(rank: usize, i: usize) -> u8 {
    match mix(rank, i) as u8 {
        SENTINEL => 0x11,
        b => b,
    }
}

/// Element `j` of rank `r`'s reduction input.
fn element(case: &Case, r: usize, j: usize, out: &mut [u8]) {
    let p = case.size;
    match case.data {
        Data::Interval => {
            let v = (j * (p + 1) + r) as u32;
            out[..4].copy_from_slice(&v.to_le_bytes());
            out[4..].copy_from_slice(&v.to_le_bytes());
        }
        Data::Bitset => {
            out.fill(0);
            out[..8].copy_from_slice(&(j as u64).to_le_bytes());
            let bit = (r + j) % p;
            out[8 + bit / 8] |= 1 << (bit % 8);
        }
        Data::SumU64 | Data::Order => out.copy_from_slice(&mix(r, j).to_le_bytes()),
        Data::SumF64 => {
            // Huge values that cancel exactly, next to small ones that
            // survive only in some associations.
            const PATTERN: [f64; 6] = [1e300, 1.0, -1e300, 1e-3, 0.1, -3.0e16];
            let v = PATTERN[(r + j) % 6] * (1 + (r / 6 + j) % 3) as f64;
            out.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// Rank `r`'s whole reduction input.
fn reduction_input(case: &Case, r: usize) -> Vec<u8> {
    let unit = case.unit();
    let mut v = vec![0; case.count * unit];
    for (j, e) in v.chunks_exact_mut(unit).enumerate() {
        element(case, r, j, e);
    }
    v
}

/// The sequential reference of a reduction, where the data has one.
fn reduction_reference(case: &Case) -> Option<Vec<u8>> {
    let (p, unit) = (case.size, case.unit());
    let mut v = vec![0; case.count * unit];
    for (j, e) in v.chunks_exact_mut(unit).enumerate() {
        match case.data {
            Data::Interval => {
                e[..4].copy_from_slice(&((j * (p + 1)) as u32).to_le_bytes());
                e[4..].copy_from_slice(&((j * (p + 1) + p - 1) as u32).to_le_bytes());
            }
            Data::Bitset => {
                e.fill(0);
                e[..8].copy_from_slice(&(j as u64).to_le_bytes());
                for bit in 0..p {
                    e[8 + bit / 8] |= 1 << (bit % 8);
                }
            }
            Data::SumU64 => {
                let s = (0..p).fold(0u64, |s, r| s.wrapping_add(mix(r, j)));
                e.copy_from_slice(&s.to_le_bytes());
            }
            Data::Order => {
                let s = (0..p - 1).rev().fold(mix(p - 1, j), |acc, r| combine_order(mix(r, j), acc));
                e.copy_from_slice(&s.to_le_bytes());
            }
            Data::SumF64 => return None,
        }
    }
    Some(v)
}

/// Every rank's buffers before the call.
pub fn inputs(case: &Case) -> Vec<RankIo> {
    let root = case.root();
    (0..case.size)
        .map(|r| {
            let in_place = case.in_place_at(r);
            match case.coll {
                Coll::Allreduce | Coll::Reduce => {
                    let input = reduction_input(case, r);
                    let n = input.len();
                    let has_recv = case.coll == Coll::Allreduce || r == root;
                    if in_place {
                        RankIo { send: Vec::new(), recv: input, in_place }
                    } else {
                        let recv = if has_recv { vec![SENTINEL; n] } else { Vec::new() };
                        RankIo { send: input, recv, in_place }
                    }
                }
                Coll::Bcast => {
                    let recv: Vec<u8> =
                        (0..case.count).map(|i| if r == root { data_byte(root, i) } else { SENTINEL }).collect();
                    RankIo { send: Vec::new(), recv, in_place: false }
                }
                Coll::Gatherv => {
                    let (off, len) = case.layout.blocks[r];
                    let block: Vec<u8> = (0..len).map(|i| data_byte(r, i)).collect();
                    if r != root {
                        return RankIo { send: block, recv: Vec::new(), in_place: false };
                    }
                    let mut recv = vec![SENTINEL; case.gather_extent()];
                    if in_place {
                        recv[off..off + len].copy_from_slice(&block);
                        RankIo { send: Vec::new(), recv, in_place }
                    } else {
                        RankIo { send: block, recv, in_place }
                    }
                }
            }
        })
        .collect()
}

/// First differing byte, for error messages.
fn first_diff(got: &[u8], want: &[u8]) -> String {
    if got.len() != want.len() {
        return format!("{} bytes instead of {}", got.len(), want.len());
    }
    let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
    let lo = i.saturating_sub(4);
    let hi = (i + 12).min(got.len());
    format!("first difference at byte {i}: got {:02x?}, want {:02x?} (bytes {lo}..{hi})", &got[lo..hi], &want[lo..hi])
}

/// Compares every rank's receive buffer with the reference.
pub fn verify(case: &Case, io: &[RankIo]) -> Result<(), SimError> {
    let root = case.root();
    let wrong = |rank: usize, what: String| Err(SimError::Wrong { rank: Some(rank), what });
    match case.coll {
        Coll::Allreduce | Coll::Reduce => {
            let reference = reduction_reference(case);
            for (r, rio) in io.iter().enumerate() {
                if case.coll == Coll::Reduce && r != root {
                    if !rio.recv.is_empty() {
                        return wrong(r, "a non-root receive buffer changed length".into());
                    }
                    continue;
                }
                if let Some(want) = &reference {
                    if rio.recv != *want {
                        return wrong(r, format!("result differs from the reference: {}", first_diff(&rio.recv, want)));
                    }
                } else if rio.recv != io[root].recv {
                    return wrong(
                        r,
                        format!("not bitwise identical to rank {root}: {}", first_diff(&rio.recv, &io[root].recv)),
                    );
                }
            }
        }
        Coll::Bcast => {
            let want: Vec<u8> = (0..case.count).map(|i| data_byte(root, i)).collect();
            for (r, rio) in io.iter().enumerate() {
                if rio.recv != want {
                    return wrong(r, format!("broadcast data differs: {}", first_diff(&rio.recv, &want)));
                }
            }
        }
        Coll::Gatherv => {
            let mut want = vec![SENTINEL; case.gather_extent()];
            for (r, &(off, len)) in case.layout.blocks.iter().enumerate() {
                for i in 0..len {
                    want[off + i] = data_byte(r, i);
                }
            }
            if io[root].recv != want {
                let i = io[root].recv.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
                let owner = case.layout.blocks.iter().position(|&(o, l)| o <= i && i < o + l);
                return wrong(
                    root,
                    format!(
                        "gathered data differs at byte {i} ({}): {}",
                        owner.map_or("outside every block".to_string(), |o| format!("block of rank {o}")),
                        first_diff(&io[root].recv, &want)
                    ),
                );
            }
            for (r, rio) in io.iter().enumerate() {
                if r != root && !rio.recv.is_empty() {
                    return wrong(r, "a non-root receive buffer changed length".into());
                }
            }
        }
    }
    Ok(())
}

/// The checking combiner: the operator of [`Data`] for reductions, and a
/// tripwire for collectives that have no reduction.
pub struct TestOp {
    data: Option<Data>,
    unit: usize,
    /// The first misuse seen.
    fault: Cell<Option<String>>,
    /// Elements combined.
    pub elements: Cell<usize>,
}

impl TestOp {
    pub fn new(case: &Case) -> TestOp {
        TestOp {
            data: is_reduction(case.coll).then_some(case.data),
            unit: case.unit(),
            fault: Cell::new(None),
            elements: Cell::new(0),
        }
    }

    fn fail(&self, what: String) {
        let prev = self.fault.take();
        self.fault.set(prev.or(Some(what)));
    }
}

const POISON32: u32 = u32::MAX;

/// A little-endian u64 from 8 bytes.
fn word(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap())
}

impl Combiner for TestOp {
    fn combine(&self, src: &[u8], dst: &mut [u8]) {
        let Some(data) = self.data else {
            return self.fail("the schedule reduces in a collective without a reduction".into());
        };
        if src.len() != dst.len() || !src.len().is_multiple_of(self.unit) {
            return self.fail(format!(
                "reduction of {} into {} bytes, not whole elements of {}",
                src.len(),
                dst.len(),
                self.unit
            ));
        }
        self.elements.set(self.elements.get() + src.len() / self.unit);
        for (s, d) in src.chunks_exact(self.unit).zip(dst.chunks_exact_mut(self.unit)) {
            match data {
                Data::Interval => {
                    let (a, b) = (word(s), word(d));
                    let (shi, dlo) = ((a >> 32) as u32, b as u32);
                    let ok = shi != POISON32 && dlo != POISON32 && shi.wrapping_add(1) == dlo;
                    let v = if ok { (b & !0xFFFF_FFFF) | (a & 0xFFFF_FFFF) } else { u64::MAX };
                    d.copy_from_slice(&v.to_le_bytes());
                }
                Data::Bitset => {
                    let mut clash = s[..8] != d[..8];
                    for k in (8..self.unit).step_by(8) {
                        clash |= word(&s[k..k + 8]) & word(&d[k..k + 8]) != 0;
                    }
                    if clash {
                        d.fill(0xFF);
                        continue;
                    }
                    for k in (8..self.unit).step_by(8) {
                        let v = word(&s[k..k + 8]) | word(&d[k..k + 8]);
                        d[k..k + 8].copy_from_slice(&v.to_le_bytes());
                    }
                }
                Data::SumU64 => {
                    d.copy_from_slice(&word(s).wrapping_add(word(d)).to_le_bytes());
                }
                Data::Order => d.copy_from_slice(&combine_order(word(s), word(d)).to_le_bytes()),
                Data::SumF64 => {
                    let a = f64::from_le_bytes(s.try_into().unwrap());
                    let b = f64::from_le_bytes((&*d).try_into().unwrap());
                    d.copy_from_slice(&(a + b).to_le_bytes());
                }
            }
        }
    }
}
