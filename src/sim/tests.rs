//! Tests of the simulator itself (it must catch every kind of broken
//! schedule), then the sweep: every registered algorithm of every
//! collective, p = 1..=300 and sampled sizes up to 4096, checked against
//! the sequential reference. Tests of single algorithms that need the
//! simulator are in `algos`.

use super::check::{self, Case, Data};
use super::*;
use crate::algos::{for_coll, Algorithm, ParamSpec, Params};
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::gen::{random_layout, runs_layout};
use crate::core::schedule::{Builder, Step};
use crate::core::types::Coll;

mod algos;

// ---------------------------------------------------------------------------
// The simulator catches broken schedules.

/// Wrapping byte sum: enough to see data move in the unit tests.
struct ByteSum;

impl Combiner for ByteSum {
    fn combine(&self, src: &[u8], dst: &mut [u8]) {
        dst.iter_mut().zip(src).for_each(|(d, s)| *d = d.wrapping_add(*s));
    }
}

fn reg(buf: BufId, off: usize, len: usize) -> Region {
    Region::new(buf, off, len)
}

fn io(send: Vec<u8>, recv_len: usize) -> RankIo {
    RankIo { send, recv: vec![0; recv_len], in_place: false }
}

fn sched(steps: Vec<Step>, scratch_bytes: usize) -> Schedule {
    Schedule { steps, scratch_bytes }
}

fn step(sends: &[(usize, Region)], recvs: &[(usize, Region)], locals: &[Local]) -> Step {
    let x = |v: &[(usize, Region)]| v.iter().map(|&(peer, region)| Xfer { peer, region }).collect();
    Step { sends: x(sends), recvs: x(recvs), locals: locals.to_vec() }
}

fn rendezvous() -> SimOptions {
    SimOptions { protocol: Protocol::Rendezvous, ..SimOptions::default() }
}

#[test]
fn moves_data_reduces_and_counts() {
    // 0 sends 4 bytes to 1; 1 adds them to its own and sends the sum back.
    let s = |o, l| reg(BufId::Send, o, l);
    let r = |o, l| reg(BufId::Recv, o, l);
    let scratch = |o, l| reg(BufId::Scratch, o, l);
    let scheds = vec![
        sched(vec![step(&[(1, s(0, 4))], &[], &[]), step(&[], &[(1, r(0, 4))], &[])], 0),
        sched(
            vec![
                step(
                    &[],
                    &[(0, scratch(0, 4))],
                    &[Local::Copy { src: s(0, 4), dst: r(0, 4) }, Local::Reduce { src: scratch(0, 4), dst: r(0, 4) }],
                ),
                step(&[(0, r(0, 4))], &[], &[]),
            ],
            4,
        ),
    ];
    for opts in [SimOptions::default(), rendezvous()] {
        let mut bufs = vec![io(vec![1, 2, 3, 4], 4), io(vec![10, 20, 30, 40], 4)];
        let stats = run_with(&scheds, &mut bufs, &ByteSum, opts).unwrap();
        assert_eq!(bufs[0].recv, vec![11, 22, 33, 44]);
        assert_eq!(bufs[1].recv, vec![11, 22, 33, 44]);
        assert_eq!(
            stats,
            SimStats {
                ranks: 2,
                steps_max: 2,
                depth: 2,
                messages: 2,
                bytes: 8,
                max_rank_messages: 2,
                max_rank_bytes: 8,
                scratch_max: 4
            }
        );
    }
}

#[test]
fn local_ops_within_one_buffer() {
    // Copies and reductions between disjoint parts of one buffer, both
    // directions, and Send regions that alias the receive buffer in place.
    let r = |o, l| reg(BufId::Recv, o, l);
    let t = |o, l| reg(BufId::Scratch, o, l);
    let locals = [
        Local::Copy { src: reg(BufId::Send, 0, 2), dst: t(4, 2) },
        Local::Copy { src: t(4, 2), dst: t(0, 2) },
        Local::Reduce { src: t(0, 2), dst: r(2, 2) },
        Local::Reduce { src: r(2, 2), dst: r(0, 2) },
        Local::Copy { src: r(0, 2), dst: r(0, 2) },
    ];
    let scheds = vec![sched(vec![step(&[], &[], &locals)], 6)];
    let mut bufs = vec![RankIo { send: vec![], recv: vec![1, 2, 10, 20], in_place: true }];
    run(&scheds, &mut bufs, &ByteSum).unwrap();
    // scratch[0..2] = [1, 2]; recv[2..4] = [11, 22]; recv[0..2] = [12, 24].
    assert_eq!(bufs[0].recv, vec![12, 24, 11, 22]);
    // Three operands: two reads on either side of the written bytes, and a
    // read from another buffer.
    let into = [
        Local::ReduceInto { first: r(0, 1), second: r(3, 1), dst: r(1, 1) },
        Local::ReduceInto { first: reg(BufId::Send, 0, 2), second: r(2, 2), dst: t(0, 2) },
    ];
    let scheds = vec![sched(vec![step(&[], &[], &into)], 2)];
    let mut bufs = vec![RankIo { send: vec![5, 6], recv: vec![1, 2, 10, 20], in_place: false }];
    run(&scheds, &mut bufs, &ByteSum).unwrap();
    assert_eq!(bufs[0].recv, vec![1, 21, 10, 20]);
    // A destination that overlaps an operand is refused.
    let bad = Local::ReduceInto { first: r(0, 2), second: r(2, 2), dst: r(1, 2) };
    let err = validate(0, 1, &sched(vec![step(&[], &[], &[bad])], 0), &bufs[0]).unwrap_err();
    assert!(matches!(err, SimError::BadLocal { .. }), "{err}");
}

#[test]
fn receives_match_in_fifo_order_per_pair() {
    // Two messages 0→1 in one step, received by two receives of 1 in one
    // step and then by one more in a later step: non-overtaking order.
    let s = |o, l| Region::new(BufId::Send, o, l);
    let r = |o, l| Region::new(BufId::Recv, o, l);
    let scheds = vec![
        sched(vec![step(&[(1, s(0, 2)), (1, s(2, 2))], &[], &[]), step(&[(1, s(4, 1))], &[], &[])], 0),
        sched(vec![step(&[], &[(0, r(3, 2)), (0, r(0, 2))], &[]), step(&[], &[(0, r(2, 1))], &[])], 0),
    ];
    let mut bufs = vec![io(vec![1, 2, 3, 4, 5], 0), io(vec![], 5)];
    run(&scheds, &mut bufs, &ByteSum).unwrap();
    assert_eq!(bufs[1].recv, vec![3, 4, 5, 1, 2]);
}

#[test]
fn detects_deadlock() {
    // Both ranks receive first, each in a step of its own.
    let r = Region::new(BufId::Recv, 0, 1);
    let s = Region::new(BufId::Send, 0, 1);
    let scheds: Vec<Schedule> =
        (0..2).map(|me| sched(vec![step(&[], &[(1 - me, r)], &[]), step(&[(1 - me, s)], &[], &[])], 0)).collect();
    let mut bufs = vec![io(vec![7], 1), io(vec![8], 1)];
    let err = run(&scheds, &mut bufs, &ByteSum).unwrap_err();
    let SimError::Deadlock { blocked } = &err else { panic!("{err}") };
    assert_eq!(
        blocked,
        &vec![
            Blocked { rank: 0, step: 0, recv_from: vec![1], send_to: vec![] },
            Blocked { rank: 1, step: 0, recv_from: vec![0], send_to: vec![] },
        ]
    );
    let text = err.to_string();
    assert!(text.contains("deadlock") && text.contains("rank 0 step 0 waits for messages from [1]"), "{text}");
}

#[test]
fn rendezvous_catches_send_first_deadlock() {
    // Both send first, then receive, in separate steps: fine while sends
    // are buffered, a deadlock once they wait for the receiver.
    let r = Region::new(BufId::Recv, 0, 1);
    let s = Region::new(BufId::Send, 0, 1);
    let scheds: Vec<Schedule> =
        (0..2).map(|me| sched(vec![step(&[(1 - me, s)], &[], &[]), step(&[], &[(1 - me, r)], &[])], 0)).collect();
    let mut bufs = vec![io(vec![7], 1), io(vec![8], 1)];
    run(&scheds, &mut bufs, &ByteSum).unwrap();
    assert_eq!((bufs[0].recv[0], bufs[1].recv[0]), (8, 7));
    let err = run_with(&scheds, &mut bufs, &ByteSum, rendezvous()).unwrap_err();
    let SimError::Deadlock { blocked } = &err else { panic!("{err}") };
    assert_eq!(blocked[0], Blocked { rank: 0, step: 0, recv_from: vec![], send_to: vec![1] });
    assert!(err.to_string().contains("receives to be posted by [1]"), "{err}");
    // The same exchange within one step is fine under both protocols.
    let scheds: Vec<Schedule> = (0..2).map(|me| sched(vec![step(&[(1 - me, s)], &[(1 - me, r)], &[])], 0)).collect();
    run_with(&scheds, &mut bufs, &ByteSum, rendezvous()).unwrap();
}

#[test]
fn detects_mismatched_length() {
    let scheds = vec![
        sched(vec![step(&[(1, Region::new(BufId::Send, 0, 8))], &[], &[])], 0),
        sched(vec![step(&[], &[(0, Region::new(BufId::Recv, 0, 4))], &[])], 0),
    ];
    let mut bufs = vec![io(vec![0; 8], 0), io(vec![], 4)];
    let err = run(&scheds, &mut bufs, &ByteSum).unwrap_err();
    assert_eq!(err, SimError::Mismatched { src: 0, dst: 1, dst_step: 0, sent: 8, expected: 4 });
    assert!(err.to_string().starts_with("mismatched message 0→1"), "{err}");
}

#[test]
fn detects_unmatched_send() {
    let scheds = vec![sched(vec![step(&[(1, Region::new(BufId::Send, 0, 3))], &[], &[])], 0), sched(vec![], 0)];
    let mut bufs = vec![io(vec![0; 3], 0), io(vec![], 0)];
    let err = run(&scheds, &mut bufs, &ByteSum).unwrap_err();
    assert_eq!(err, SimError::Unmatched { first: (0, 1, 3), total: 1 });
    // Under rendezvous the sender never completes: reported as a deadlock.
    let err = run_with(&scheds, &mut bufs, &ByteSum, rendezvous()).unwrap_err();
    assert!(matches!(err, SimError::Deadlock { .. }), "{err}");
}

/// A one-rank "schedule" with a single step, checked statically.
fn validate_one(step: Step, scratch: usize, io: &RankIo) -> Result<(), SimError> {
    validate(0, 2, &sched(vec![step], scratch), io)
}

#[test]
fn detects_overlapping_regions() {
    let r = |o, l| Region::new(BufId::Recv, o, l);
    let buf = io(vec![0; 16], 16);
    // Two receives sharing a byte.
    let err = validate_one(step(&[], &[(1, r(0, 4)), (1, r(3, 4))], &[]), 0, &buf).unwrap_err();
    assert!(matches!(err, SimError::Overlap { .. }), "{err}");
    assert!(err.to_string().contains("receive from 1 Recv[0..4] overlaps receive from 1 Recv[3..7]"), "{err}");
    // A receive inside a long send further left.
    let err = validate_one(step(&[(1, r(0, 16)), (1, r(0, 1))], &[(1, r(8, 2))], &[]), 0, &buf).unwrap_err();
    assert!(matches!(err, SimError::Overlap { .. }), "{err}");
    // Under MPI_IN_PLACE a Send region is the receive buffer.
    let in_place = RankIo { send: vec![], recv: vec![0; 16], in_place: true };
    let s = Region::new(BufId::Send, 0, 4);
    let err = validate_one(step(&[(1, s)], &[(1, r(2, 4))], &[]), 0, &in_place).unwrap_err();
    assert!(matches!(err, SimError::Overlap { .. }), "{err}");
    assert!(validate_one(step(&[(1, s)], &[(1, r(2, 4))], &[]), 0, &buf).is_ok());
    // Sends may share bytes; adjacent receives are fine.
    assert!(validate_one(step(&[(1, r(0, 8)), (0, r(4, 8))], &[(1, r(12, 2)), (0, r(14, 2))], &[]), 0, &buf).is_ok());
}

#[test]
fn detects_bad_regions_and_peers() {
    let buf = io(vec![0; 4], 8);
    let recv_into = |region| step(&[], &[(1, region)], &[]);
    let err = validate_one(recv_into(Region::new(BufId::Recv, 6, 4)), 0, &buf).unwrap_err();
    assert!(matches!(err, SimError::OutOfBounds { buf_len: 8, .. }), "{err}");
    let err = validate_one(recv_into(Region::new(BufId::Scratch, 0, 4)), 3, &buf).unwrap_err();
    assert!(matches!(err, SimError::OutOfBounds { buf_len: 3, .. }), "{err}");
    let err = validate_one(step(&[(1, Region::new(BufId::Send, 2, 4))], &[], &[]), 0, &buf).unwrap_err();
    assert!(matches!(err, SimError::OutOfBounds { buf_len: 4, .. }), "{err}");
    let err = validate_one(recv_into(Region::new(BufId::Send, 0, 4)), 0, &buf).unwrap_err();
    assert!(matches!(err, SimError::SendBufferWrite { .. }), "{err}");
    let err = validate_one(step(&[(2, Region::new(BufId::Send, 0, 4))], &[], &[]), 0, &buf).unwrap_err();
    assert_eq!(err, SimError::BadPeer { rank: 0, step: 0, peer: 2, size: 2 });
    let local = |l| step(&[], &[], &[l]);
    let (a, b) = (Region::new(BufId::Recv, 0, 4), Region::new(BufId::Recv, 2, 4));
    for bad in [
        Local::Copy { src: a, dst: b },
        Local::Reduce { src: a, dst: a },
        Local::Copy { src: Region::new(BufId::Recv, 0, 3), dst: Region::new(BufId::Recv, 4, 4) },
    ] {
        let err = validate_one(local(bad), 0, &buf).unwrap_err();
        assert!(matches!(err, SimError::BadLocal { .. }), "{err}");
    }
    let err = validate_one(local(Local::Copy { src: a, dst: Region::new(BufId::Send, 0, 4) }), 0, &buf).unwrap_err();
    assert!(matches!(err, SimError::SendBufferWrite { .. }), "{err}");
    // Zero-length regions at the end of a buffer, even an empty one, are fine.
    let empty = io(vec![], 0);
    assert!(validate_one(recv_into(Region::new(BufId::Recv, 0, 0)), 0, &empty).is_ok());
}

// ---------------------------------------------------------------------------
// The checker catches wrong algorithms.

fn fake(coll: Coll, build: crate::algos::BuildFn) -> Algorithm {
    Algorithm::new(coll, "fake", "", build)
}

/// Linear reduce to the root where the root combines children in the order
/// `child ∘ acc` (wrong for non-commutative operators), or twice.
fn linear_reduce(desc: &CallDesc, swapped: bool, twice: bool) -> Schedule {
    let n = desc.bytes;
    let mut b = Builder::new();
    if !desc.is_root() {
        b.send(desc.root, Region::new(BufId::Send, 0, n));
        return b.finish();
    }
    b.reserve_scratch(n);
    let recv = Region::new(BufId::Recv, 0, n);
    let tmp = Region::new(BufId::Scratch, 0, n);
    if !desc.in_place {
        b.copy(Region::new(BufId::Send, 0, n), recv).end_step();
    }
    // Root 0 only, so that the acc covers ranks 0..peer.
    for peer in 1..desc.size {
        b.recv(peer, tmp).end_step();
        if swapped {
            // dst = tmp ∘ recv puts the later rank first; copy back.
            b.reduce(tmp, recv);
        } else {
            b.reduce(recv, tmp).copy(tmp, recv);
        }
        if twice && peer == 1 {
            b.reduce(recv, tmp).copy(tmp, recv);
        }
        b.end_step();
    }
    b.finish()
}

#[test]
fn checker_catches_wrong_reductions() {
    let reduce = |case: &Case, build| check::check(&fake(Coll::Reduce, build), &Params::default(), case);
    let mut case = Case::new(Coll::Reduce, 5, 3);
    // The correct linear reduce passes with every kind of data.
    for data in [Data::Interval, Data::Bitset, Data::SumU64] {
        case.data = data;
        case.commutative = data.commutative();
        reduce(&case, |d, _, _| linear_reduce(d, false, false)).unwrap().unwrap();
    }
    // Swapped operands: invisible to commutative data, caught by intervals.
    case.data = Data::Bitset;
    case.commutative = true;
    reduce(&case, |d, _, _| linear_reduce(d, true, false)).unwrap().unwrap();
    case.data = Data::Interval;
    case.commutative = false;
    let err = reduce(&case, |d, _, _| linear_reduce(d, true, false)).unwrap_err();
    assert!(matches!(err, SimError::Wrong { rank: Some(0), .. }), "{err}");
    // A contribution combined twice: caught by bitsets.
    case.data = Data::Bitset;
    case.commutative = true;
    let err = reduce(&case, |d, _, _| linear_reduce(d, false, true)).unwrap_err();
    assert!(matches!(err, SimError::Wrong { rank: Some(0), .. }), "{err}");
}

#[test]
fn checker_catches_diverging_allreduce() {
    // Each rank gathers everything and reduces in its own rotated order: a
    // valid sum, but with floating point the bits differ between ranks.
    fn build(desc: &CallDesc, _: &Params, _: &GatherLayout) -> Schedule {
        let (n, p, me) = (desc.bytes, desc.size, desc.rank);
        let mut b = Builder::new();
        b.reserve_scratch(n * p);
        let slot = |r: usize| Region::new(BufId::Scratch, r * n, n);
        for peer in (0..p).filter(|&q| q != me) {
            b.send(peer, Region::new(BufId::Send, 0, n)).recv(peer, slot(peer));
        }
        b.copy(Region::new(BufId::Send, 0, n), slot(me)).end_step();
        let recv = Region::new(BufId::Recv, 0, n);
        b.copy(slot(me), recv);
        for k in 1..p {
            b.reduce(slot((me + k) % p), recv);
        }
        b.finish()
    }
    let alg = fake(Coll::Allreduce, build);
    let mut case = Case::new(Coll::Allreduce, 4, 6);
    case.commutative = true;
    case.data = Data::SumU64;
    check::check(&alg, &Params::default(), &case).unwrap().unwrap();
    case.data = Data::SumF64;
    let err = check::check(&alg, &Params::default(), &case).unwrap_err();
    assert!(err.to_string().contains("not bitwise identical"), "{err}");
}

#[test]
fn checker_catches_gatherv_writing_outside_blocks() {
    // A "gatherv" that receives whole blocks but copies the root's own
    // block one byte too far.
    fn build(desc: &CallDesc, _: &Params, layout: &GatherLayout) -> Schedule {
        let mut b = Builder::new();
        if !desc.is_root() {
            b.send(desc.root, Region::new(BufId::Send, 0, desc.bytes));
            return b.finish();
        }
        for (peer, &(off, len)) in layout.blocks.iter().enumerate() {
            if peer == desc.rank {
                b.copy(Region::new(BufId::Send, 0, len), Region::new(BufId::Recv, off + 1, len));
            } else {
                b.recv(peer, Region::new(BufId::Recv, off, len));
            }
        }
        b.finish()
    }
    let mut case = Case::new(Coll::Gatherv, 3, 2);
    case.layout = GatherLayout { blocks: vec![(0, 2), (10, 2), (4, 2)] };
    let err = check::check(&fake(Coll::Gatherv, build), &Params::default(), &case).unwrap_err();
    assert!(err.to_string().contains("gathered data differs at byte 0 (block of rank 0)"), "{err}");
}

// ---------------------------------------------------------------------------
// The sweep over every registered algorithm.

/// Extra values tried for a parameter named `seg` (a segment size in
/// bytes): its configured range starts at sizes (0 = unsegmented, or 1 KiB)
/// that the sweep's short messages never exceed, so tiny segments are what
/// makes segmentation, and segment boundaries inside short messages,
/// actually happen. The algorithms are generic in the size.
const SEGMENT_PROBES: &[u64] = &[1, 3, 64];

/// The segment size tried at larger communicators, rotating with `p`.
fn segment_probe_large(p: usize) -> u64 {
    [7, 64, 97][(p / 8) % 3]
}

/// Parameter sets to try: the defaults, and for small communicators every
/// parameter at its minimum and maximum (the others at their defaults),
/// plus small segment sizes (see [`SEGMENT_PROBES`]), for every eighth
/// larger communicator one of them.
fn param_sets(alg: &Algorithm, p: usize) -> Vec<Params> {
    let base = alg.default_params();
    let mut sets = vec![base];
    let mut add = |i: usize, v: u64| {
        let mut set = base;
        set[i] = v;
        if !sets.contains(&set) {
            sets.push(set);
        }
    };
    for (i, spec) in alg.params.iter().enumerate() {
        let ParamSpec { name, min, max, .. } = *spec;
        if p <= 24 {
            for v in [min, max] {
                add(i, v);
            }
        }
        if name == "seg" {
            if p <= 24 {
                SEGMENT_PROBES.iter().for_each(|&v| add(i, v));
            } else if p.is_multiple_of(8) {
                add(i, segment_probe_large(p));
            }
        }
    }
    sets
}

#[test]
fn param_sets_probe_small_segments() {
    let kary = crate::algos::find(Coll::Bcast, "kary").unwrap();
    let seg = kary.params.iter().position(|s| s.name == "seg").unwrap();
    let small = |sets: &[Params]| sets.iter().filter(|s| (1..1024).contains(&s[seg])).count();
    assert_eq!(small(&param_sets(kary, 10)), SEGMENT_PROBES.len());
    assert_eq!(small(&param_sets(kary, 64)), 1);
    assert_eq!(small(&param_sets(kary, 65)), 0);
}

fn roots(coll: Coll, p: usize) -> Vec<usize> {
    if coll == Coll::Allreduce {
        return vec![0];
    }
    if p <= 16 {
        return (0..p).collect();
    }
    let mut v = vec![0, 1, p / 2, p - 1];
    v.dedup();
    v
}

/// Vector lengths (elements for reductions, bytes for Bcast): zero, one,
/// small, and — for p ≤ 64 and every eighth p above, as they cost p times
/// more — fewer than p and awkward ones just above p.
fn counts(coll: Coll, p: usize) -> Vec<usize> {
    let mut v = vec![0, 1, 3, 7, 13];
    if p <= 64 || p.is_multiple_of(8) {
        v.extend([p.saturating_sub(1), p / 2 + 1, p + 1, 2 * p + 3]);
    }
    if coll == Coll::Bcast {
        // Around multiples of the segment probes: a last segment of one
        // byte, exactly whole segments, one segment.
        v.extend([64, 65, 192, 193, 1000 + p]);
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// (commutative, data) pairs for reductions.
fn flavours(coll: Coll) -> Vec<(bool, Data)> {
    let mut v = vec![(false, Data::Interval), (true, Data::Bitset), (true, Data::SumU64)];
    if coll == Coll::Allreduce {
        v.push((false, Data::SumF64));
        v.push((true, Data::SumF64));
    }
    v
}

/// Every case of one collective on `p` ranks: the full product when
/// `full`, otherwise every root × in-place choice once, with the count,
/// data and layout rotating with `p` so that neighbouring sizes cover the
/// rest.
fn cases(coll: Coll, p: usize, full: bool) -> Vec<Case> {
    let base = |root, in_place| {
        let mut c = Case::new(coll, p, 0);
        c.root = root;
        c.in_place = in_place;
        c.opts = rendezvous();
        c
    };
    let in_places: &[bool] = if coll == Coll::Bcast { &[false] } else { &[false, true] };
    let mut out = Vec::new();
    let mut turn = p;
    for root in roots(coll, p) {
        for &in_place in in_places {
            let mut variants: Vec<Case> = Vec::new();
            match coll {
                Coll::Allreduce | Coll::Reduce => {
                    for count in counts(coll, p) {
                        for (commutative, data) in flavours(coll) {
                            let mut c = base(root, in_place);
                            (c.count, c.commutative, c.data) = (count, commutative, data);
                            variants.push(c);
                        }
                    }
                }
                Coll::Bcast => {
                    for count in counts(coll, p) {
                        let mut c = base(root, in_place);
                        c.count = count;
                        variants.push(c);
                    }
                }
                Coll::Gatherv => {
                    let seed = (p * 1000 + root * 10 + in_place as usize) as u64;
                    for (k, max_len) in [0, 1, 6, 40].into_iter().enumerate() {
                        let mut c = base(root, in_place);
                        c.layout = random_layout(p, max_len, seed * 8 + k as u64);
                        variants.push(c);
                    }
                    let mut c = base(root, in_place);
                    c.layout = Case::new(coll, p, 5).layout; // contiguous, rank order
                    variants.push(c);
                    // Rank order with empty blocks; runs of consecutive
                    // ranks back to back, shuffled (message chains).
                    for (k, (max_len, max_run)) in [(6, p), (6, 6), (40, 3)].into_iter().enumerate() {
                        let mut c = base(root, in_place);
                        c.layout = runs_layout(p, max_len, max_run, seed * 8 + 4 + k as u64);
                        variants.push(c);
                    }
                }
            }
            if full {
                out.extend(variants);
            } else {
                // Two per (root, in place), rotating through the variants.
                let len = variants.len();
                for k in [turn % len, (turn * 7 + 3) % len] {
                    out.push(variants[k].clone());
                }
                out.dedup();
                turn += 1;
            }
        }
    }
    out
}

/// Short description of a case for failure messages.
fn describe(case: &Case) -> String {
    let mut s = format!("{} p={} root={}", case.coll, case.size, case.root);
    match case.coll {
        Coll::Allreduce | Coll::Reduce => {
            s += &format!(
                " count={} commutative={} in_place={} data={:?}",
                case.count, case.commutative, case.in_place, case.data
            )
        }
        Coll::Bcast => s += &format!(" bytes={}", case.count),
        Coll::Gatherv if case.size <= 40 => {
            s += &format!(" in_place={} layout={:?}", case.in_place, case.layout.blocks)
        }
        Coll::Gatherv => s += &format!(" in_place={} (layout too long to show)", case.in_place),
    }
    s
}

/// Runs every algorithm of `coll` over `sizes`; panics listing failures.
/// Returns how many simulations ran.
fn sweep(coll: Coll, sizes: impl IntoIterator<Item = usize>, full_up_to: usize) -> usize {
    let mut failures: Vec<String> = Vec::new();
    let algs: Vec<&Algorithm> = for_coll(coll).filter(|a| a.schedule().is_some()).collect();
    assert!(!algs.is_empty(), "no {coll} algorithm registered");
    let mut runs = vec![0; algs.len()];
    for p in sizes {
        let cases = cases(coll, p, p <= full_up_to);
        for (a, alg) in algs.iter().enumerate() {
            for params in param_sets(alg, p) {
                for case in &cases {
                    match check::check(alg, &params, case) {
                        Ok(Some(_)) => runs[a] += 1,
                        Ok(None) => {}
                        Err(e) => {
                            if failures.len() < 20 {
                                failures.push(format!("{alg:?} {params:?} {}: {e}", describe(case)));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
    for (alg, n) in algs.iter().zip(&runs) {
        assert!(*n > 0, "{alg:?} accepted none of the sweep's calls");
    }
    runs.iter().sum()
}

/// Sizes `lo..=hi`, split evenly between two tests so that both cores
/// work (the sizes with costly counts, multiples of 8, alternate too).
fn sizes(lo: usize, hi: usize, half: usize) -> impl Iterator<Item = usize> {
    (lo..=hi).filter(move |p| (p + p / 8) % 2 == half)
}

const FULL: usize = 16;

#[test]
fn sweep_allreduce_even() {
    sweep(Coll::Allreduce, sizes(1, 300, 0), FULL);
}

#[test]
fn sweep_allreduce_odd() {
    sweep(Coll::Allreduce, sizes(1, 300, 1), FULL);
}

#[test]
fn sweep_reduce_even() {
    sweep(Coll::Reduce, sizes(1, 300, 0), FULL);
}

#[test]
fn sweep_reduce_odd() {
    sweep(Coll::Reduce, sizes(1, 300, 1), FULL);
}

#[test]
fn sweep_bcast_even() {
    sweep(Coll::Bcast, sizes(1, 300, 0), FULL);
}

#[test]
fn sweep_bcast_odd() {
    sweep(Coll::Bcast, sizes(1, 300, 1), FULL);
}

#[test]
fn sweep_gatherv() {
    sweep(Coll::Gatherv, 1..=300, FULL);
}

/// Large communicators: every algorithm, a few roots, small vectors (for
/// Bcast also one longer than p), segment sizes of 1 byte where an
/// algorithm has them.
#[test]
fn sweep_large() {
    let mut failures = Vec::new();
    for &p in &[511, 512, 513, 1000, 1023, 2047, 4096] {
        for coll in Coll::ALL {
            for (k, root) in roots(coll, p).into_iter().enumerate() {
                let mut case = Case::new(coll, p, [1, 3, 2, 5][k % 4]);
                case.root = root;
                case.in_place = (p + k) % 2 == 1;
                case.opts = rendezvous();
                if matches!(coll, Coll::Allreduce | Coll::Reduce) {
                    (case.commutative, case.data) = flavours(coll)[(p + k) % flavours(coll).len()];
                }
                if coll == Coll::Gatherv {
                    case.layout = random_layout(p, 4, (p * 31 + k) as u64);
                }
                let mut cases = vec![case.clone()];
                if coll == Coll::Gatherv {
                    // Also runs of consecutive ranks back to back.
                    case.layout = runs_layout(p, 4, [3, 8, p][k % 3], (p * 37 + k) as u64);
                    cases.push(case);
                } else if coll == Coll::Bcast && k == 0 && p <= 513 {
                    // More bytes than ranks, so that algorithms cutting the
                    // message per rank have no empty pieces.
                    case.count = p + 3;
                    cases.push(case);
                }
                for (c, case) in cases.iter().enumerate() {
                    for alg in for_coll(coll).filter(|a| a.schedule().is_some()) {
                        let mut sets = vec![alg.default_params()];
                        // Segmented, however short the message (short
                        // ones only: one step per byte).
                        if let Some(i) = alg.params.iter().position(|s| s.name == "seg").filter(|_| c == 0) {
                            let mut set = alg.default_params();
                            set[i] = 1;
                            sets.push(set);
                        }
                        for params in &sets {
                            if let Err(e) = check::check(alg, params, case) {
                                failures.push(format!("{alg:?} {params:?} {}: {e}", describe(case)));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}

/// PCOLL_REPRODUCIBLE's promise: an algorithm marked canonical combines
/// every element as `x0 ∘ (x1 ∘ (... ∘ x(p-1)))` for every p, root,
/// length and MPI_IN_PLACE, so its result does not depend on them; and the
/// test tells canonical from not: every other reduction schedule misses
/// the order at some small p (even where it may assume commutativity).
#[test]
fn canonical_algorithms_combine_in_the_canonical_order() {
    let mut failures = Vec::new();
    for coll in [Coll::Allreduce, Coll::Reduce] {
        for alg in for_coll(coll).filter(|a| a.schedule().is_some()) {
            let sizes: Vec<usize> =
                if alg.canonical { (1..=24).chain([31, 32, 33, 64, 100, 257]).collect() } else { (3..=9).collect() };
            let mut missed = false;
            for p in sizes {
                let few_roots: Vec<usize> = roots(coll, p).into_iter().take(5).collect();
                for root in few_roots {
                    for count in counts(coll, p) {
                        for (in_place, commutative) in [(false, false), (true, false), (false, true), (true, true)] {
                            let mut case = Case::new(coll, p, count);
                            (case.root, case.in_place, case.commutative, case.data) =
                                (root, in_place, commutative, Data::Order);
                            case.opts = rendezvous();
                            match check::check(alg, &alg.default_params(), &case) {
                                Ok(_) => {}
                                Err(e) if alg.canonical => failures.push(format!("{alg:?} {}: {e}", describe(&case))),
                                Err(_) => missed = true,
                            }
                        }
                    }
                }
            }
            if !alg.canonical && !missed {
                failures.push(format!("{alg:?} is not marked canonical but combines in the canonical order"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}
