//! The driver against a host whose ranks are threads ([`host`]): argument
//! classification and its forwarding reasons, planning, the Gatherv
//! layout agreement in both modes, dispatch of schedules, node algorithms
//! and compositions with their results checked, PCOLL_VERIFY's
//! comparison, and the reentry guard.

mod host;
mod invalid;
mod mismatch;
mod node;
mod settings;
mod window;

use super::classify::reduce_local;
use super::collectives::{bcast, forward_reduce, reduction};
use super::gatherv::{gatherv, GathervArgs};
use super::host::Outcome::{self, Done, Forward};
use super::host::SUCCESS;
use super::plan::{decide, plan};
use super::runtime::panic_message;
use super::thread::PerThread;
use super::verify;
use super::Host;
use crate::core::call::{CallDesc, Topo};
use crate::core::types::Coll;
use host::{CommSpec, Op, TestHost, Ty, UserFn, World, COMM_NULL};
use std::ffi::c_void;
use std::sync::atomic::Ordering;

const WORLD: usize = 1;

fn bytes_of(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn i32s_of(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// What the library's guard does around a collective: a call made while
/// the thread is inside pcoll goes to the host.
fn guarded(run: impl FnOnce(&PerThread<TestHost>) -> Outcome) -> Outcome {
    TestHost::with_thread(|t| match t.enter() {
        None => Forward("called from inside pcoll"),
        Some(_inside) => run(t),
    })
}

/// An Allreduce (`root` None) or Reduce of i32 (or `ty`) through the
/// driver; `send` None: MPI_IN_PLACE.
#[allow(clippy::too_many_arguments)]
fn reduce_call(
    h: TestHost,
    send: Option<&[u8]>,
    recv: &mut [u8],
    count: i64,
    ty: Ty,
    op: Op,
    root: Option<i32>,
    comm: usize,
) -> Outcome {
    let sendbuf = send.map_or(h.in_place(), |s| s.as_ptr().cast());
    let recvbuf: *mut c_void = if recv.is_empty() { std::ptr::null_mut() } else { recv.as_mut_ptr().cast() };
    guarded(|t| reduction(&h, &h.world.rt, t, sendbuf, recvbuf, count, ty, op, root, comm))
}

fn bcast_call(h: TestHost, buf: *mut c_void, count: i64, ty: Ty, root: i32, comm: usize) -> Outcome {
    guarded(|t| bcast(&h, &h.world.rt, t, buf, count, ty, root, comm))
}

/// A Gatherv of i32 (or `ty`) blocks: `send` None is MPI_IN_PLACE;
/// `layout` None passes NULL recvcounts and displs.
#[allow(clippy::too_many_arguments)]
fn gatherv_call(
    h: TestHost,
    send: Option<&[u8]>,
    sendcount: i64,
    ty: Ty,
    recv: &mut [u8],
    layout: Option<(&[i32], &[i32])>,
    root: i32,
    comm: usize,
) -> Outcome {
    let (recvcounts, displs) = layout.map_or((std::ptr::null(), std::ptr::null()), |(c, d)| (c.as_ptr(), d.as_ptr()));
    let args = GathervArgs {
        sendbuf: send.map_or(h.in_place(), |s| s.as_ptr().cast()),
        sendcount,
        sendtype: ty,
        recvbuf: recv.as_mut_ptr().cast(),
        recvcounts,
        displs,
        recvtype: ty,
        root,
        comm,
    };
    guarded(|t| gatherv(&h, &h.world.rt, t, args))
}

/// Rank `r`'s vector of a reduction test.
fn input(r: usize, count: usize) -> Vec<i32> {
    (0..count).map(|j| (r * 1000 + j) as i32).collect()
}

fn summed(p: usize, count: usize) -> Vec<i32> {
    (0..count).map(|j| (0..p).map(|r| (r * 1000 + j) as i32).sum()).collect()
}

const SUM_USER: Op = Op::User { f: UserFn::Sum, commutative: true };
const FIRST: Op = Op::User { f: UserFn::First, commutative: false };

#[test]
fn entering_twice_on_one_thread_is_refused_until_the_first_leaves() {
    let t = PerThread::<TestHost>::new();
    let outer = t.enter().expect("not inside yet");
    assert!(t.enter().is_none(), "a nested call must go to the host");
    drop(outer);
    assert!(t.enter().is_some());
}

#[test]
fn unsupported_calls_go_to_the_host_with_their_reason() {
    let inter = CommSpec { members: (0..4).collect(), inter: true };
    let single = CommSpec { members: vec![0], inter: false };
    let world = World::new(&[0; 4], &[], vec![inter, single]).with_states(WORLD);
    let (inter, single) = (2, 3);
    let h = TestHost { world, rank: 0 };
    let send = bytes_of(&input(0, 8));
    let mut recv = vec![0u8; 32];
    let red = |send: Option<&[u8]>, recv: &mut [u8], count, ty, op, root, comm| {
        reduce_call(h, send, recv, count, ty, op, root, comm)
    };
    // communicators pcoll leaves to the host
    for comm in [COMM_NULL, inter, single] {
        assert_eq!(red(Some(&send), &mut recv, 8, Ty::I32, Op::Sum, None, comm), Forward("communicator"));
    }
    // invalid arguments, and what pcoll does not reduce
    let cases: [(i64, Ty, Op, Option<i32>, &str); 9] = [
        (-1, Ty::I32, Op::Sum, None, "negative count"),
        (8, Ty::I32, Op::Sum, Some(4), "invalid root"),
        (8, Ty::I32, Op::Sum, Some(-1), "invalid root"),
        (8, Ty::Null, Op::Sum, None, "null datatype"),
        (8, Ty::Vector, Op::Sum, None, "derived datatype"),
        (8, Ty::Packed, Op::Sum, None, "datatype without reduction operators"),
        (8, Ty::F64, Op::Band, None, "operator not defined for this datatype"),
        (8, Ty::I32, Op::Replace, None, "not a reduction operator"),
        (0, Ty::I32, Op::Sum, None, "empty"),
    ];
    for (count, ty, op, root, why) in cases {
        assert_eq!(red(Some(&send), &mut recv, count, ty, op, root, WORLD), Forward(why), "{count} {ty:?} {op:?}");
    }
    // MPI_IN_PLACE only where the result lands (a rank's own invalid
    // buffers are pcoll's to report: tests/invalid.rs)
    assert_eq!(red(None, &mut recv, 8, Ty::I32, Op::Sum, Some(1), WORLD), Forward("MPI_IN_PLACE at a non-root rank"));

    // Bcast
    let mut buf = vec![0u8; 64];
    let b = buf.as_mut_ptr().cast();
    assert_eq!(bcast_call(h, b, 0, Ty::Byte, 0, WORLD), Forward("empty"));
    assert_eq!(bcast_call(h, b, 8, Ty::Uncommitted, 0, WORLD), Forward("invalid argument"));
    assert_eq!(bcast_call(h, b, -2, Ty::Byte, 0, WORLD), Forward("invalid argument"));
    assert_eq!(bcast_call(h, b, 8, Ty::Byte, 9, WORLD), Forward("invalid argument"));
    assert_eq!(bcast_call(h, b, 8, Ty::Byte, 0, inter), Forward("communicator"));

    // Gatherv
    let (counts, displs) = ([2, 2, 2, 2], [0, 2, 4, 6]);
    let block = bytes_of(&[1, 2, 3]);
    let mut out = vec![0u8; 32];
    let gv = |send: Option<&[u8]>, n, ty, out: &mut [u8], layout, root| {
        gatherv_call(h, send, n, ty, out, layout, root, WORLD)
    };
    assert_eq!(gv(Some(&block), 2, Ty::I32, &mut out, Some((&counts, &displs)), 4), Forward("invalid root"));
    // arguments only one rank sees: tests/invalid.rs
}

#[test]
fn a_reduce_in_place_at_a_non_zero_root_reaches_the_host_with_a_copy() {
    let world = World::one_node(3, &[]);
    // what the host's Reduce gets: its send pointer, the data there, its receive pointer
    let forward = |rank, root, count, ty, send: Option<&[u8]>, recv: &mut [u8]| {
        let h = TestHost { world, rank };
        let sendbuf = send.map_or(h.in_place(), |s| s.as_ptr().cast());
        let mut seen = None;
        let rc = forward_reduce(&h, sendbuf, recv.as_mut_ptr().cast(), count, ty, root, WORLD, |s, r| {
            // SAFETY: the test's buffers, or the copy, of recv's length
            let data = (s != h.in_place()).then(|| unsafe { std::slice::from_raw_parts(s.cast::<u8>(), 24) }.to_vec());
            seen = Some((s == sendbuf, data, r == recv.as_mut_ptr().cast()));
            SUCCESS
        });
        assert_eq!(rc, SUCCESS);
        seen.expect("the host ran the call")
    };
    let mut recv: Vec<u8> = (0..24).collect();
    // the root in place: a copy of its data (two vectors reach 24 bytes)
    for (ty, count) in [(Ty::I32, 6), (Ty::Vector, 2)] {
        assert_eq!(forward(1, 1, count, ty, None, &mut recv), (false, Some(recv.clone()), true), "{ty:?}");
    }
    // anything else: the arguments unchanged
    let send = [7u8; 24];
    for (rank, root, count, ty, send) in [
        (0, 0, 6, Ty::I32, None),
        (2, 1, 6, Ty::I32, Some(&send[..])),
        (1, 1, 6, Ty::I32, Some(&send[..])),
        (1, 1, 0, Ty::I32, None),
        (1, 1, 6, Ty::Uncommitted, None),
    ] {
        let seen = forward(rank, root, count, ty, send, &mut recv);
        assert_eq!((seen.0, seen.2), (true, true), "rank {rank} root {root} count {count} {ty:?}");
    }
}

#[test]
fn reduce_local_runs_pcolls_kernel_where_it_has_one_and_leaves_the_rest() {
    let h = TestHost { world: World::one_node(1, &[]), rank: 0 };
    let (a, mut b) = (bytes_of(&[1, 2, 3]), bytes_of(&[10, 20, 30]));
    assert!(reduce_local(&h, a.as_ptr().cast(), b.as_mut_ptr().cast(), 3, Ty::I32, Op::Sum));
    assert_eq!(i32s_of(&b), [11, 22, 33]);
    // a user operator, a derived datatype, no elements, a null buffer
    for (count, ty, op, inbuf) in [
        (3, Ty::I32, SUM_USER, a.as_ptr()),
        (3, Ty::Vector, Op::Sum, a.as_ptr()),
        (0, Ty::I32, Op::Sum, a.as_ptr()),
        (3, Ty::I32, Op::Sum, std::ptr::null()),
    ] {
        assert!(!reduce_local(&h, inbuf.cast(), b.as_mut_ptr().cast(), count, ty, op), "{count} {ty:?} {op:?}");
    }
    assert_eq!(i32s_of(&b), [11, 22, 33], "left to the host, untouched");
}

#[test]
fn forced_choices_that_cannot_run_go_to_the_host() {
    let world = World::one_node(
        3,
        &[("PCOLL_ALLREDUCE", "mpi"), ("PCOLL_REDUCE", "ring"), ("PCOLL_SHM", "0"), ("PCOLL_BCAST", "shm")],
    )
    .with_states(WORLD);
    let h = TestHost { world, rank: 1 };
    let send = bytes_of(&input(1, 4));
    let mut recv = vec![0u8; 16];
    assert_eq!(reduce_call(h, Some(&send), &mut recv, 4, Ty::I32, Op::Sum, None, WORLD), Forward("forced mpi"));
    let ring = reduce_call(h, Some(&send), &mut [], 4, Ty::I32, FIRST, Some(0), WORLD);
    assert_eq!(ring, Forward("the operator is not commutative"));
    let shm = bcast_call(h, recv.as_mut_ptr().cast(), 16, Ty::Byte, 0, WORLD);
    assert!(matches!(shm, Forward(why) if why.starts_with("no shared segment on this node")), "{shm:?}");
}

#[test]
fn a_plan_carries_node_stages_only_for_a_composition() {
    let world = World::one_node(1, &[]);
    let rt = &world.rt;
    let topo = Topo { nodes: 2, contiguous: true, shm: true, zcopy: true, chunk: 65536, one_sided: true };
    let desc = CallDesc {
        coll: Coll::Allreduce,
        rank: 0,
        size: 8,
        root: 0,
        bytes: 64,
        unit: 4,
        commutative: true,
        in_place: false,
        topo,
    };
    let t = PerThread::<TestHost>::new();
    let hier = crate::algos::find(Coll::Allreduce, "hier").unwrap();
    let planned = plan(
        rt,
        desc.clone(),
        crate::select::Decision::Run(hier, hier.default_params(), crate::select::Reason::Forced),
    )
    .unwrap();
    assert!(planned.stages.is_some());
    let planned = plan(rt, desc.clone(), decide(rt, &t, &desc, Some(64))).unwrap();
    assert_eq!(planned.stages.is_some(), matches!(planned.algo.imp, crate::algos::Impl::Hier(_)));
    // the same shape again: the thread's last decision
    let again = plan(rt, desc.clone(), decide(rt, &t, &desc, Some(64))).unwrap();
    assert!(std::ptr::eq(again.algo, planned.algo) && again.reason == planned.reason);
    let one_node = CallDesc { topo: Topo { nodes: 1, ..topo }, ..desc };
    let planned = plan(rt, one_node.clone(), decide(rt, &t, &one_node, Some(64))).unwrap();
    assert!(planned.stages.is_none(), "{}", planned.algo.name);
}

/// The blocks of a Gatherv test: rank r sends r + 1 elements (rank 2
/// none), placed in reverse rank order with gaps at the root.
fn gather_layout(p: usize) -> (Vec<i32>, Vec<i32>) {
    let counts: Vec<i32> = (0..p).map(|r| if r == 2 { 0 } else { r as i32 + 1 }).collect();
    let mut displs = vec![0; p];
    let mut at = 1;
    for r in (0..p).rev() {
        displs[r] = at;
        at += counts[r] + 2;
    }
    (counts, displs)
}

fn gather_block(r: usize, n: usize) -> Vec<i32> {
    (0..n).map(|j| (100 * r + j) as i32).collect()
}

/// Runs Gatherv calls on every rank of `world` at `root` and checks the
/// root's buffer; `non_root_args`: what non-roots pass as recvcounts.
fn gather_and_check(world: &'static World, root: usize, calls: usize, non_root_args: Option<bool>) {
    let p = world.size;
    world.run(|h| {
        let (counts, displs) = gather_layout(p);
        let total = (displs.iter().zip(&counts).map(|(d, c)| d + c).max().unwrap() + 1) as usize;
        let garbage = (vec![-7; p], vec![-9; p]);
        for call in 0..calls {
            let mine = bytes_of(&gather_block(h.rank, counts[h.rank] as usize));
            let mut out = bytes_of(&vec![-1; total]);
            let layout = match (h.rank == root, non_root_args) {
                (true, _) | (false, Some(true)) => Some((&counts[..], &displs[..])),
                (false, Some(false)) => Some((&garbage.0[..], &garbage.1[..])),
                (false, None) => None,
            };
            let rc = gatherv_call(h, Some(&mine), counts[h.rank] as i64, Ty::I32, &mut out, layout, root as i32, WORLD);
            assert_eq!(rc, Done(SUCCESS), "rank {} call {call}", h.rank);
            if h.rank == root {
                let got = i32s_of(&out);
                for r in 0..p {
                    let at = displs[r] as usize;
                    assert_eq!(
                        &got[at..at + counts[r] as usize],
                        &gather_block(r, counts[r] as usize)[..],
                        "block of {r}"
                    );
                }
                assert_eq!(got[0], -1, "nothing lands outside the blocks");
            }
        }
    });
}

#[test]
fn conservative_gatherv_agrees_on_the_roots_layout_by_broadcast() {
    // binomial needs the layout everywhere: the root broadcasts it, so
    // non-roots may pass nothing, or anything
    for args in [None, Some(false)] {
        let world = World::one_node(5, &[("PCOLL_GATHERV", "binomial")]);
        gather_and_check(world, 3, 3, args);
        assert_eq!(world.control_bcasts(WORLD), 3, "one broadcast per call");
    }
    // linear needs it only at the root: every rank decides alone
    let world = World::one_node(5, &[("PCOLL_GATHERV", "linear")]);
    gather_and_check(world, 1, 3, None);
    assert_eq!(world.control_bcasts(WORLD), 0);
}

#[test]
fn aggressive_gatherv_computes_the_layout_everywhere_without_a_broadcast() {
    let vars = [("PCOLL_GATHERV", "binomial"), ("PCOLL_GATHERV_MODE", "aggressive")];
    let world = World::one_node(5, &vars);
    gather_and_check(world, 2, 3, Some(true));
    assert_eq!(world.control_bcasts(WORLD), 0);

    // a rank without the layout cannot take part: the job stops (before
    // any message, so this rank alone shows it)
    let world = World::one_node(5, &vars).with_states(WORLD);
    let h = TestHost { world, rank: 1 };
    let mine = bytes_of(&gather_block(1, 2));
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gatherv_call(h, Some(&mine), 2, Ty::I32, &mut [0u8; 4], None, 0, WORLD)
    }))
    .expect_err("the job stops");
    let text = panic_message(&*panic);
    assert!(text.contains("PCOLL_GATHERV_MODE=aggressive: rank 1 passes no valid recvcounts"), "{text}");

    // counts that are invalid leave the root without the layout too (on a
    // thread of its own: this one's caches hold rank 1's state)
    let h = TestHost { world, rank: 0 };
    let (mut counts, displs) = gather_layout(5);
    counts[4] = -3;
    let text = std::thread::scope(|s| {
        s.spawn(|| {
            let run = || gatherv_call(h, Some(&mine), 1, Ty::I32, &mut [0u8; 64], Some((&counts, &displs)), 0, WORLD);
            panic_message(&*std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).expect_err("the job stops"))
        })
        .join()
        .unwrap()
    });
    assert!(text.contains("PCOLL_GATHERV_MODE=aggressive: rank 0 passes no valid recvcounts"), "{text}");
}

/// The algorithms a rank ran, from PCOLL_STATS's table: "coll\talgorithm".
fn ran(world: &World) -> Vec<String> {
    let text = world.rt.stats.as_ref().expect("PCOLL_STATS=1").lock().unwrap().to_text();
    text.lines().map(|l| l.split('\t').take(2).collect::<Vec<_>>().join("\t")).collect()
}

/// Every collective, a few times each, on every rank, results checked:
/// reductions in and out of place, with pcoll's kernel and with a user
/// operator through the host; Bcast of bytes and of a non-dense datatype
/// (packed and unpacked); Gatherv.
fn every_collective(world: &'static World) {
    let p = world.size;
    world.run(|h| {
        for call in 0..3 {
            let count = [1, 37, 300][call];
            let root = (call + 1) % p;
            let mine = bytes_of(&input(h.rank, count));
            // Allreduce, pcoll's kernel then the host's user operator
            for op in [Op::Sum, SUM_USER] {
                let mut recv = vec![0u8; 4 * count];
                assert_eq!(
                    reduce_call(h, Some(&mine), &mut recv, count as i64, Ty::I32, op, None, WORLD),
                    Done(SUCCESS)
                );
                assert_eq!(i32s_of(&recv), summed(p, count), "allreduce {op:?} call {call} rank {}", h.rank);
            }
            // in place
            let mut inout = mine.clone();
            assert_eq!(reduce_call(h, None, &mut inout, count as i64, Ty::I32, Op::Sum, None, WORLD), Done(SUCCESS));
            assert_eq!(i32s_of(&inout), summed(p, count));
            // Reduce, in place at the root
            let is_root = h.rank == root;
            let mut recv = if is_root { mine.clone() } else { Vec::new() };
            let send = (!is_root).then_some(&mine[..]);
            let rc = reduce_call(h, send, &mut recv, count as i64, Ty::I32, Op::Sum, Some(root as i32), WORLD);
            assert_eq!(rc, Done(SUCCESS));
            if is_root {
                assert_eq!(i32s_of(&recv), summed(p, count), "reduce call {call}");
            }
            // Bcast of bytes
            let message: Vec<u8> = (0..count * 7).map(|j| (j * 31 + call) as u8).collect();
            let mut buf = if is_root { message.clone() } else { vec![0u8; message.len()] };
            let rc = bcast_call(h, buf.as_mut_ptr().cast(), buf.len() as i64, Ty::Byte, root as i32, WORLD);
            assert_eq!((rc, &buf), (Done(SUCCESS), &message), "bcast call {call}");
            // Bcast of a vector type: two of every three i32 travel
            let full = input(root, 3 * count);
            let mut vec = if is_root { full.clone() } else { vec![-5; 3 * count] };
            let mut data = bytes_of(&vec);
            let rc = bcast_call(h, data.as_mut_ptr().cast(), count as i64, Ty::Vector, root as i32, WORLD);
            assert_eq!(rc, Done(SUCCESS));
            let got = i32s_of(&data);
            for k in 0..count {
                vec[3 * k] = full[3 * k];
                vec[3 * k + 2] = full[3 * k + 2];
            }
            assert_eq!(got, vec, "vector bcast call {call} rank {}", h.rank);
        }
    });
    gather_and_check(world, p - 1, 2, None);
}

#[test]
fn schedules_run_over_the_host_transport() {
    let vars = [
        ("PCOLL_STATS", "1"),
        ("PCOLL_ALLREDUCE", "recursive_doubling"),
        ("PCOLL_REDUCE", "binomial"),
        ("PCOLL_BCAST", "knomial"),
        ("PCOLL_GATHERV", "binomial"),
    ];
    let world = World::one_node(5, &vars);
    every_collective(world);
    let ran = ran(world);
    for want in ["allreduce\trecursive_doubling", "reduce\tbinomial", "bcast\tknomial", "gatherv\tbinomial"] {
        assert!(ran.iter().any(|r| r == want), "{want} not in {ran:?}");
    }
}

#[test]
fn node_algorithms_run_over_the_segment() {
    let vars = [
        ("PCOLL_STATS", "1"),
        ("PCOLL_ALLREDUCE", "shm_flat"),
        ("PCOLL_REDUCE", "shm_partition"),
        ("PCOLL_BCAST", "shm"),
        ("PCOLL_GATHERV", "shm"),
        ("PCOLL_SHM_CHUNK", "4K"),
        ("PCOLL_SHM_SLOTS", "8"),
    ];
    let world = World::one_node(4, &vars);
    every_collective(world);
    let ran = ran(world);
    for want in ["allreduce\tshm_flat", "reduce\tshm_partition", "bcast\tshm", "gatherv\tshm"] {
        assert!(ran.iter().any(|r| r == want), "{want} not in {ran:?}");
    }
}

#[test]
fn compositions_run_between_nodes_over_the_host() {
    for (allreduce, node_of) in
        [("hier", &[0, 0, 1, 1, 1][..]), ("dpml", &[0, 0, 1, 1][..]), ("salar", &[0, 1, 1, 2][..])]
    {
        let vars = [
            ("PCOLL_STATS", "1"),
            ("PCOLL_ALLREDUCE", allreduce),
            ("PCOLL_REDUCE", "hier"),
            ("PCOLL_BCAST", "hier"),
            ("PCOLL_GATHERV", "hier"),
            ("PCOLL_SHM_CHUNK", "4K"),
            ("PCOLL_SHM_SLOTS", "8"),
        ];
        let world = World::new(node_of, &vars, vec![]);
        every_collective(world);
        let ran = ran(world);
        let want = format!("allreduce\t{allreduce}");
        for want in [&want[..], "reduce\thier", "bcast\thier", "gatherv\thier"] {
            assert!(ran.iter().any(|r| r == want), "{want} not in {ran:?}");
        }
    }
}

#[test]
fn ranks_waiting_on_their_leader_let_the_host_progress_within_compositions_only() {
    // nodes {0, 1}, {2, 3}; rank 2, a leader, comes late to the second
    // call (the first sets the segment up), so rank 3 waits for it in the
    // segment, and rank 0's leader work waits for node 1. Across nodes
    // rank 2 stays away until rank 3 has probed (or 10 s): with a fixed
    // delay, a starved rank 3 (a loaded CI machine) could arrive after it
    // and never wait.
    for (allreduce, node_of) in [("salar", &[0, 0, 1, 1][..]), ("hier", &[0, 0, 1, 1][..]), ("auto", &[0, 0, 0, 0][..])]
    {
        let world = World::new(node_of, &[("PCOLL_ALLREDUCE", allreduce), ("PCOLL_SHM_CHUNK", "4K")], vec![]);
        let set_up = std::sync::Barrier::new(4);
        world.run(|h| {
            let count = 1000;
            let mine = bytes_of(&input(h.rank, count));
            let mut recv = vec![0u8; 4 * count];
            let first = reduce_call(h, Some(&mine), &mut recv, count as i64, Ty::I32, Op::Sum, None, WORLD);
            assert_eq!(first, Done(SUCCESS), "{allreduce} rank {}", h.rank);
            // within one node no call may probe, the first one included
            if set_up.wait().is_leader() && allreduce != "auto" {
                world.drove_progress.store(0, Ordering::Relaxed);
            }
            set_up.wait();
            if h.rank == 2 {
                let late = std::time::Instant::now();
                std::thread::sleep(std::time::Duration::from_millis(20));
                while allreduce != "auto"
                    && world.drove_progress.load(Ordering::Relaxed) & (1 << 3) == 0
                    && late.elapsed() < std::time::Duration::from_secs(10)
                {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            let outcome = reduce_call(h, Some(&mine), &mut recv, count as i64, Ty::I32, Op::Sum, None, WORLD);
            assert_eq!(outcome, Done(SUCCESS), "{allreduce} rank {}", h.rank);
            assert_eq!(i32s_of(&recv), summed(4, count), "{allreduce} rank {}", h.rank);
        });
        let drove = world.drove_progress.load(Ordering::Relaxed);
        if allreduce == "auto" {
            assert_eq!(drove, 0, "a call within one node probed the host");
        } else {
            assert_ne!(drove & (1 << 3), 0, "{allreduce}: rank 3 waited 10 s without probing the host");
        }
    }
}

#[test]
fn where_a_leader_cannot_make_the_window_salar_hands_its_call_to_hier_and_is_not_chosen_again() {
    // nodes {0}, {1, 2}, {3}: leaders 0, 1 and 3; leader 3's host refuses
    // one-sided windows
    let world = World::new(&[0, 1, 1, 2], &[("PCOLL_ALLREDUCE", "salar"), ("PCOLL_SHM_CHUNK", "4K")], vec![]);
    world.no_window.store(1 << 3, Ordering::Relaxed);
    world.run(|h| {
        for (call, count) in [3000, 37, 3000].into_iter().enumerate() {
            let mine = bytes_of(&input(h.rank, count));
            let mut recv = vec![0u8; 4 * count];
            let outcome = reduce_call(h, Some(&mine), &mut recv, count as i64, Ty::I32, Op::Sum, None, WORLD);
            if call == 0 {
                // planned as SALaR, run by hier
                assert_eq!(outcome, Done(SUCCESS), "rank {}", h.rank);
                assert_eq!(i32s_of(&recv), summed(4, count), "rank {}", h.rank);
            } else {
                assert_eq!(
                    outcome,
                    Forward("the node leaders could not make a one-sided window on this communicator"),
                    "call {call} rank {}",
                    h.rank
                );
            }
            assert!(!world.state(WORLD, h.rank).unwrap().topo().one_sided, "rank {}", h.rank);
        }
    });
    // leaders 0 and 1 made theirs, abandoned with the attempt
    assert_eq!(world.windows_created.load(Ordering::Relaxed), 2);
    assert!((0..4).all(|r| world.freed_windows(r).is_empty()));
}

#[test]
fn a_non_commutative_user_operator_combines_in_rank_order() {
    for alg in ["ordered", "shm_flat", "rabenseifner"] {
        let world = World::one_node(5, &[("PCOLL_ALLREDUCE", alg)]);
        world.run(|h| {
            let mine = bytes_of(&input(h.rank, 20));
            let mut recv = vec![0u8; 80];
            assert_eq!(reduce_call(h, Some(&mine), &mut recv, 20, Ty::I32, FIRST, None, WORLD), Done(SUCCESS));
            assert_eq!(i32s_of(&recv), input(0, 20), "{alg}: the first operand is rank 0's");
        });
    }
}

#[test]
fn verify_counts_agreement_and_reports_a_wrong_result() {
    // PCOLL_VERIFY's counters are the process's: this is the only test
    // that runs verified calls.
    let world =
        World::one_node(3, &[("PCOLL_VERIFY", "1"), ("PCOLL_ALLREDUCE", "shm_flat"), ("PCOLL_BCAST", "binomial")]);
    let before = verify::totals();
    let run = |world: &'static World| {
        world.run(|h| {
            let mine = bytes_of(&input(h.rank, 10));
            let mut recv = vec![0u8; 40];
            assert_eq!(reduce_call(h, Some(&mine), &mut recv, 10, Ty::I32, Op::Sum, None, WORLD), Done(SUCCESS));
            // pcoll's result is what the program gets either way
            assert_eq!(i32s_of(&recv), summed(3, 10));
            let mut buf = vec![h.rank as u8; 100];
            assert_eq!(bcast_call(h, buf.as_mut_ptr().cast(), 100, Ty::Byte, 0, WORLD), Done(SUCCESS));
            assert_eq!(buf, vec![0u8; 100]);
        })
    };
    run(world);
    let agreed = verify::totals();
    // 3 Allreduce ranks and 2 Bcast non-roots compared, nothing differed
    assert_eq!((agreed[0] - before[0], agreed[1] - before[1]), (5, 0));
    world.wrong_reference.store(true, Ordering::Relaxed);
    run(world);
    let wrong = verify::totals();
    assert_eq!((wrong[0] - agreed[0], wrong[1] - agreed[1]), (5, 5));
    // PCOLL_VERIFY=abort stops every rank that compares
    let world = World::one_node(2, &[("PCOLL_VERIFY", "abort"), ("PCOLL_ALLREDUCE", "recursive_doubling")]);
    world.wrong_reference.store(true, Ordering::Relaxed);
    let stopped = world.run(|h| {
        let mine = bytes_of(&input(h.rank, 4));
        let mut recv = vec![0u8; 16];
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            reduce_call(h, Some(&mine), &mut recv, 4, Ty::I32, Op::Sum, None, WORLD)
        }))
        .map_err(|panic| panic_message(&*panic))
    });
    for s in stopped {
        assert!(s.as_ref().is_err_and(|m| m.contains("PCOLL_VERIFY=abort")), "{s:?}");
    }
}

/// What [`UserFn::Nested`] does each time it combines: an Allreduce on the
/// communicator being reduced, which the guard must hand to the host
/// (pcoll's state of that communicator is held by the outer call).
pub(super) fn nested(h: TestHost) {
    let one = bytes_of(&[1]);
    let mut out = vec![0u8; 4];
    match reduce_call(h, Some(&one), &mut out, 1, Ty::I32, Op::Sum, None, WORLD) {
        Forward("called from inside pcoll") => h.world.nested_forwards.fetch_add(1, Ordering::Relaxed),
        other => panic!("a nested call ran in pcoll: {other:?}"),
    };
}

#[test]
fn a_collective_called_from_a_user_operator_goes_to_the_host() {
    for (alg, node_of) in [("shm_flat", &[0, 0, 0][..]), ("recursive_doubling", &[0, 0, 0]), ("hier", &[0, 0, 1])] {
        let world = World::new(node_of, &[("PCOLL_ALLREDUCE", alg)], vec![]);
        world.run(|h| {
            let nested = Op::User { f: UserFn::Nested, commutative: true };
            for _ in 0..3 {
                let mine = bytes_of(&input(h.rank, 50));
                let mut recv = vec![0u8; 200];
                assert_eq!(reduce_call(h, Some(&mine), &mut recv, 50, Ty::I32, nested, None, WORLD), Done(SUCCESS));
                assert_eq!(i32s_of(&recv), summed(3, 50), "{alg}");
            }
        });
        assert!(world.nested_forwards.load(Ordering::Relaxed) > 0, "{alg}: the operator ran");
    }
}

#[test]
fn a_remembered_plan_lasts_while_no_communicator_is_freed() {
    let other = CommSpec { members: vec![1, 0], inter: false };
    let world = World::new(&[0, 0], &[], vec![other]).with_states(2);
    let freed = std::sync::Barrier::new(2);
    world.run(|h| {
        let key = |op| super::prepared::Key {
            comm: WORLD,
            count: 4,
            datatype: Ty::I32,
            op: Some(op),
            root: -1,
            in_place: false,
        };
        let recall =
            |op| TestHost::with_thread(|t| super::prepared::recall(&h, &world.rt, t, Coll::Allreduce, &key(op)));
        for op in [Op::Sum, SUM_USER] {
            let mine = bytes_of(&input(h.rank, 4));
            let mut recv = vec![0u8; 16];
            assert_eq!(reduce_call(h, Some(&mine), &mut recv, 4, Ty::I32, op, None, WORLD), Done(SUCCESS));
        }
        // a predefined operator's plan is kept; a user operator's is not
        // (its handle may come to mean another operator once freed)
        assert!(recall(Op::Sum).is_some());
        assert!(recall(SUM_USER).is_none());
        freed.wait();
        if h.rank == 0 {
            h.free_state(2);
        }
        freed.wait();
        assert!(recall(Op::Sum).is_none(), "a plan from before a communicator was freed");
    });
}

/// Rooted calls whose root rotates (as IMB loops them) keep a plan per
/// root, and each root's result is right.
#[test]
fn rotating_roots_keep_a_plan_each() {
    let world = World::one_node(3, &[]);
    world.run(|h| {
        let key = |root| super::prepared::Key {
            comm: WORLD,
            count: 4,
            datatype: Ty::I32,
            op: Some(Op::Sum),
            root,
            in_place: false,
        };
        let recall =
            |root| TestHost::with_thread(|t| super::prepared::recall(&h, &world.rt, t, Coll::Reduce, &key(root)));
        for _ in 0..2 {
            for root in 0..3 {
                let mine = bytes_of(&input(h.rank, 4));
                let mut recv = vec![0u8; if h.rank == root as usize { 16 } else { 0 }];
                let outcome = reduce_call(h, Some(&mine), &mut recv, 4, Ty::I32, Op::Sum, Some(root), WORLD);
                assert_eq!(outcome, Done(SUCCESS));
                if h.rank == root as usize {
                    assert_eq!(i32s_of(&recv), summed(3, 4), "root {root}");
                }
            }
        }
        for root in 0..3 {
            assert!(recall(root).is_some(), "the plan of root {root}");
        }
    });
}

/// A call the plan hands to the host is remembered as such: the next one
/// with the same arguments goes to the host without planning again.
#[test]
fn a_planned_forward_is_remembered() {
    let world = World::one_node(2, &[("PCOLL_BCAST", "mpi")]);
    world.run(|h| {
        let key =
            super::prepared::Key { comm: WORLD, count: 8, datatype: Ty::Byte, op: None, root: 1, in_place: false };
        let mut buf = vec![0u8; 8];
        for _ in 0..2 {
            assert_eq!(bcast_call(h, buf.as_mut_ptr().cast(), 8, Ty::Byte, 1, WORLD), Forward("forced mpi"));
        }
        let recalled = TestHost::with_thread(|t| super::prepared::recall(&h, &world.rt, t, Coll::Bcast, &key));
        assert!(matches!(recalled, Some(Err("forced mpi"))), "a remembered forward");
    });
}

#[test]
fn the_finalize_summary_covers_every_rank() {
    let file = std::env::temp_dir().join(format!("pcoll-driver-test-{}.txt", std::process::id()));
    let path = file.to_str().unwrap();
    let vars = [("PCOLL_STATS_FILE", path), ("PCOLL_ALLREDUCE", "recursive_doubling"), ("PCOLL_BCAST", "mpi")];
    let world = World::new(&[0, 0, 1], &vars, vec![]);
    world.run(|h| {
        let mine = bytes_of(&input(h.rank, 6));
        let mut recv = vec![0u8; 24];
        for _ in 0..2 {
            assert_eq!(reduce_call(h, Some(&mine), &mut recv, 6, Ty::I32, Op::Sum, None, WORLD), Done(SUCCESS));
        }
        assert_eq!(bcast_call(h, recv.as_mut_ptr().cast(), 24, Ty::Byte, 0, WORLD), Forward("forced mpi"));
    });
    // the guard hands the forwarded call to the host through the runtime
    (0..3).for_each(|_| world.rt.forward(Coll::Bcast, "forced mpi", || ()));
    world.run(|h| super::runtime::report_at_finalize(&h, &world.rt, true));
    let text = std::fs::read_to_string(&file).expect("rank 0 wrote the summary");
    let _ = std::fs::remove_file(&file);
    assert!(text.contains("3 ranks on 2 nodes, host MPI: the test host"), "{text}");
    let row = text.lines().find(|l| l.contains("recursive_doubling")).expect("the algorithm's row");
    // the three ranks share one process here, and so one table: each
    // reports it, so the job-wide sums count every call three times
    assert!(row.split_whitespace().any(|w| w == "18"), "{row}");
    assert!(text.lines().any(|l| l.contains("bcast") && l.contains("forced mpi")), "{text}");
}
