//! The C entry points. Each one classifies its arguments; anything pcoll
//! does not handle, including every invalid argument, goes to the host's
//! PMPI function unchanged, so users see the host MPI's own behaviour.

use super::comm::CommState;
use super::handles::{self, Combine, TypeLayout};
use super::prepared::{self, Key, Prepared};
use super::runtime::{self, Runtime};
use super::transport::PmpiTransport;
use super::window::Leaders;
use super::{comm, gatherv, shim, verify};
use crate::algos::multinode::{BetweenNodes, NodeMap, Part};
use crate::algos::multinode::{BetweenPlan, OneSided, StagePlan};
use crate::algos::node::gatherv_shm::Gather;
use crate::algos::node::{reduce, NodeCall, NodeMemory, Team};
use crate::algos::{Algorithm, Impl, Params};
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::types::Coll;
use crate::exec::{self, Buffers, Combiner, NoReduction};
use crate::select::{self, Decision};
use crate::shm::team::TeamState;
use crate::shm::PeerMemory;
use mpi_sys::*;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::MutexGuard;
use std::time::Instant;

/// What pcoll does with a call.
pub(super) enum Outcome {
    /// pcoll ran it; the MPI return code.
    Done(c_int),
    /// The host MPI must run it, for this reason.
    Forward(&'static str),
}
use Outcome::{Done, Forward};

/// Wraps every entry point: the panic boundary (no panic crosses into C),
/// PCOLL_ENABLE, and accounting for forwarded calls.
pub(super) fn entry(coll: Coll, run: impl FnOnce(&Runtime) -> Outcome, forward: impl FnOnce() -> c_int) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let rt = runtime::get();
        if !rt.cfg.enable {
            return forward();
        }
        match run(rt) {
            Done(rc) => rc,
            Forward(why) => forward_to_host(rt, coll, why, forward),
        }
    }));
    result.unwrap_or_else(|panic| internal_error(coll, panic))
}

/// Hands a call to the host MPI, for `why` (out of line, like every path
/// but pcoll's own calls, so that their code stays compact).
#[inline(never)]
fn forward_to_host(rt: &Runtime, coll: Coll, why: &'static str, forward: impl FnOnce() -> c_int) -> c_int {
    log::debug!("{coll}: host MPI ({why})");
    // the clock only when someone keeps statistics
    let start = rt.stats.is_some().then(Instant::now);
    let rc = forward();
    if let (Some(stats), Some(start)) = (&rt.stats, start) {
        stats.lock().unwrap().record_fallback(coll, why, start.elapsed().as_secs_f64());
    }
    rc
}

/// A panic in pcoll: the collective is in an unknown state on this rank,
/// so the job stops.
#[cold]
#[inline(never)]
fn internal_error(coll: Coll, panic: Box<dyn std::any::Any + Send>) -> c_int {
    let msg = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    runtime::abort_job(&format!("pcoll: internal error in MPI_{coll}: {msg}; aborting the job\n"))
}

/// (rank, size) of an intracommunicator of more than one rank; `None` for
/// MPI_COMM_NULL, intercommunicators and single-rank communicators, which
/// the host MPI handles. A communicator pcoll already knows costs one
/// attribute lookup.
pub(super) fn comm_shape(comm: MPI_Comm) -> Option<(usize, usize)> {
    // SAFETY: reads the handle constant.
    if comm == unsafe { RSMPI_COMM_NULL } {
        return None;
    }
    if let Some(state) = comm::lookup(comm) {
        return Some((state.rank, state.size));
    }
    let (mut inter, mut rank, mut size) = (0, 0, 0);
    // SAFETY: `comm` is a non-null communicator handle from the user; out-pointers are locals.
    unsafe {
        if PMPI_Comm_test_inter(comm, &mut inter) != MPI_SUCCESS as c_int || inter != 0 {
            return None;
        }
        PMPI_Comm_rank(comm, &mut rank);
        PMPI_Comm_size(comm, &mut size);
    }
    (size > 1).then_some((rank as usize, size as usize))
}

pub(super) fn in_place() -> *const c_void {
    // SAFETY: returns the MPI_IN_PLACE constant.
    unsafe { shim::pcoll_in_place() }
}

/// A call pcoll runs itself: what it is and which algorithm runs it.
pub(super) struct Planned {
    pub desc: CallDesc,
    pub algo: &'static Algorithm,
    pub params: Params,
    pub reason: select::Reason,
    /// A multi-node composition's node stages and inter-node algorithm.
    pub stages: Option<StagePlan>,
}

/// Warned once per collective that a forced algorithm cannot run a call.
static WARNED_UNSUPPORTED: [AtomicBool; 4] = [const { AtomicBool::new(false) }; 4];
/// Warned once per collective that PCOLL_REPRODUCIBLE replaced a forced algorithm.
static WARNED_REPLACED: [AtomicBool; 4] = [const { AtomicBool::new(false) }; 4];

/// What the host MPI is told why it runs a call, for the log.
fn host_reason(reason: select::Reason) -> &'static str {
    use select::{Reason, RuleSource};
    match reason {
        Reason::Unsupported(why) => why,
        Reason::Rule { source: RuleSource::Tune, .. } => "a PCOLL_TUNE rule chose mpi",
        Reason::Rule { source: RuleSource::TuneFile, .. } => "a PCOLL_TUNE_FILE rule chose mpi",
        Reason::Rule { source: RuleSource::BuiltIn, .. } => "a built-in rule chose mpi",
        Reason::Forced | Reason::ForcedMpi | Reason::Fallback => "forced mpi",
        Reason::Rule { source: RuleSource::Reproducible, .. } | Reason::Replaced { .. } => {
            unreachable!("reproducible rules choose canonical algorithms, never the host")
        }
    }
}

/// Turns a decision into a plan and logs why; `Err(why)`: the host MPI
/// runs the call.
pub(super) fn plan(rt: &Runtime, desc: CallDesc, decision: Decision) -> Result<Planned, &'static str> {
    let (algo, params, reason) = match decision {
        Decision::Run(algo, params, reason) => (algo, params, reason),
        Decision::Host(reason) => {
            if let select::Reason::Unsupported(why) = reason {
                if !WARNED_UNSUPPORTED[desc.coll.index()].swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "{}: the forced algorithm cannot run a call ({why}); the host MPI runs such calls",
                        desc.coll
                    );
                }
            }
            return Err(host_reason(reason));
        }
        Decision::NeedsLayout => unreachable!("only a Gatherv without its layout asks for it"),
    };
    if let select::Reason::Replaced { forced, why } = reason {
        if !WARNED_REPLACED[desc.coll.index()].swap(true, Ordering::Relaxed) {
            log::warn!(
                "{}: PCOLL_REPRODUCIBLE=1 and the forced {forced} cannot be used ({why}); canonical algorithms \
                 run such calls instead ({} this one)",
                desc.coll,
                algo.name
            );
        }
    }
    log::debug!(
        "{} comm_size={} root={} bytes={}: {}{:?} ({reason})",
        desc.coll,
        desc.size,
        desc.root,
        desc.bytes,
        algo.name,
        &params[..],
    );
    let stages = matches!(algo.imp, Impl::Hier(_)).then(|| select::multinode::plan_stages(&rt.cfg, &desc));
    Ok(Planned { desc, algo, params, reason, stages })
}

thread_local! {
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Larger scratch buffers are freed after the call instead of kept.
const MAX_KEPT_SCRATCH: usize = 64 << 20;

/// Runs `f` with `bytes` of this thread's scratch buffer: a fresh large
/// allocation per call costs a page fault per page. Taken out while in
/// use, so a collective called from inside a user operator still works.
/// A call that needs none does not touch it (a thread-local access less).
fn with_scratch<R>(bytes: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    if bytes == 0 {
        return f(&mut []);
    }
    let mut scratch = SCRATCH.take();
    if scratch.len() < bytes {
        scratch.resize(bytes, 0);
    }
    let result = f(&mut scratch[..bytes]);
    if scratch.len() <= MAX_KEPT_SCRATCH {
        SCRATCH.set(scratch);
    }
    result
}

/// Runs the decided algorithm: a schedule over the private duplicate of
/// the user's communicator, or a node algorithm over the node's segment.
pub(super) fn execute(
    rt: &Runtime,
    state: &CommState,
    call: &Planned,
    layout: &GatherLayout,
    send: Option<&[u8]>,
    recv: &mut [u8],
    combiner: &dyn Combiner,
) -> c_int {
    let start = rt.stats.is_some().then(Instant::now);
    let rc = match call.algo.imp {
        Impl::Schedule(_) => run_schedule(state, call, layout, send, recv, combiner),
        Impl::Node(_) | Impl::Hier(_) => {
            run_on_node(rt, state, call, layout, send, recv, combiner);
            MPI_SUCCESS as c_int
        }
    };
    if let (Some(stats), Some(start)) = (&rt.stats, start) {
        stats.lock().unwrap().record(call.desc.coll, call.algo, call.desc.bytes, start.elapsed().as_secs_f64());
    }
    rc
}

/// Runs a schedule over the private communicator (out of line: the node
/// algorithms' calls stay compact).
#[inline(never)]
fn run_schedule(
    state: &CommState,
    call: &Planned,
    layout: &GatherLayout,
    send: Option<&[u8]>,
    recv: &mut [u8],
    combiner: &dyn Combiner,
) -> c_int {
    let sched = state.schedules.lock().unwrap().get(call.algo, &call.params, &call.desc, layout);
    with_scratch(sched.scratch_bytes, |scratch| {
        let mut bufs = Buffers { send, recv, scratch };
        match exec::run(&sched, &mut bufs, &mut PmpiTransport::new(state.private), combiner) {
            Ok(()) => MPI_SUCCESS as c_int,
            Err(rc) => rc,
        }
    })
}

/// Runs a node algorithm or a composition on this rank's node (its check
/// made sure the node has a segment).
fn run_on_node(
    rt: &Runtime,
    state: &CommState,
    call: &Planned,
    layout: &GatherLayout,
    send: Option<&[u8]>,
    recv: &mut [u8],
    combiner: &dyn Combiner,
) {
    let node = &state.node;
    let mut team_state = node.state.take();
    // Only reductions use scratch on a node (for zero copy's sub-chunks).
    let sub_chunk = team_state.memory.sizes.sub_chunk;
    let need = if call.desc.coll.is_reduction() { reduce::zero_copy_scratch(node.size, sub_chunk) } else { 0 };
    with_scratch(need, |scratch| {
        run_team(rt, state, call, layout, &mut team_state, Buffers { send, recv, scratch }, combiner)
    })
}

/// [`run_on_node`] once the communicator's protocol state is taken.
fn run_team(
    rt: &Runtime,
    state: &CommState,
    call: &Planned,
    layout: &GatherLayout,
    team_state: &mut TeamState<NodeMemory>,
    bufs: Buffers<'_>,
    combiner: &dyn Combiner,
) {
    let desc = &call.desc;
    let node = &state.node;
    let mapping = node.mapping.as_ref().expect("a node algorithm runs where the segment is");
    let mut team = Team {
        rank: node.rank,
        size: node.size,
        seg: &mapping.seg,
        peers: node.cma.as_ref().map(|c| c as &dyn PeerMemory),
        state: team_state,
        settings: node.settings,
    };
    let root = node.local_of[desc.root];
    let node_call = match desc.coll {
        Coll::Allreduce => NodeCall::Reduce { bufs, unit: desc.unit, root: None },
        Coll::Reduce => NodeCall::Reduce { bufs, unit: desc.unit, root: Some(root) },
        Coll::Bcast => NodeCall::Bcast { data: bufs.recv, root },
        Coll::Gatherv => NodeCall::Gatherv(Gather {
            send: bufs.send.unwrap_or(&[]),
            recv: bufs.recv,
            layout,
            root,
            in_place: desc.in_place,
        }),
    };
    match call.algo.imp {
        Impl::Node(run) => run(&mut team, node_call, combiner),
        Impl::Hier(run) => {
            let map = NodeMap { node_of: &node.node_of, local_of: &node.local_of };
            let stages = call.stages.as_ref().expect("a composition's call has its stages planned");
            let mut inter = PmpiBetween { state, plan: &stages.between, leaders: None };
            let part = Part {
                team: &mut team,
                map: &map,
                rank: desc.rank,
                inter: &mut inter,
                params: &call.params,
                leaders: rt.cfg.shm.leaders,
                plan: stages,
                memo: &mut state.memo.lock().unwrap(),
            };
            run(part, desc, node_call, combiner)
        }
        Impl::Schedule(_) => unreachable!("schedules run over the transport"),
    }
}

/// The inter-node stage of the compositions: a point-to-point algorithm
/// among the nodes' representatives, over the private communicator.
struct PmpiBetween<'a> {
    state: &'a CommState,
    /// The call's plan of what runs between the nodes.
    plan: &'a BetweenPlan,
    /// The leaders' window while a call uses it.
    leaders: Option<MutexGuard<'a, Leaders>>,
}

impl BetweenNodes for PmpiBetween<'_> {
    fn run(
        &mut self,
        desc: &CallDesc,
        reps: &[usize],
        layout: &GatherLayout,
        send: Option<&[u8]>,
        recv: &mut [u8],
        combiner: &dyn Combiner,
    ) {
        let (algo, params) = self.plan.for_bytes(desc.bytes);
        log::debug!("{} between {} nodes: {}{:?}", desc.coll, desc.size, algo.name, &params[..]);
        let sched = self.state.schedules.lock().unwrap().get(algo, &params, desc, layout);
        let mut scratch = vec![0u8; sched.scratch_bytes];
        let mut bufs = Buffers { send, recv, scratch: &mut scratch };
        let mut transport = PmpiTransport::mapped(self.state.private, reps);
        if let Err(rc) = exec::run(&sched, &mut bufs, &mut transport, combiner) {
            panic!("the {} between nodes failed: MPI error {rc}", desc.coll);
        }
    }

    fn one_sided(&mut self, leader: bool, bytes: usize) -> Option<&mut dyn OneSided> {
        let node = self.state.node.node_of[self.state.rank];
        let private = self.state.private;
        let leaders = self.leaders.insert(self.state.leaders.lock().unwrap());
        leaders.window(private, leader, node, bytes).map(|w| w as &mut dyn OneSided)
    }
}

/// Allreduce (`root` None) and Reduce.
#[allow(clippy::too_many_arguments)]
pub(super) fn reduction(
    rt: &Runtime,
    coll: Coll,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: Option<c_int>,
    comm: MPI_Comm,
) -> Outcome {
    let in_place = sendbuf == in_place();
    let key = Key { comm, count, datatype, op: Some(op), root: root.map_or(-1, i64::from), in_place };
    let prepared = match prepared::recall(rt, coll, &key) {
        Some(prepared) => {
            let desc = &prepared.call.desc;
            if let Err(why) = reduction_buffers(desc.in_place, is_reduction_root(desc), sendbuf, recvbuf) {
                return Forward(why);
            }
            prepared
        }
        None => match prepare_reduction(rt, key, comm, (sendbuf, recvbuf), (count, datatype, op, root)) {
            Ok(prepared) => prepared,
            Err(outcome) => return outcome,
        },
    };
    let desc = &prepared.call.desc;
    // SAFETY: MPI requires sendbuf (unless in place) and, at the root or in
    // Allreduce, recvbuf to hold `count` elements of `datatype`, whose
    // extent is `unit`; they do not alias (checked).
    let (send, recv) = unsafe {
        (
            (!desc.in_place).then(|| std::slice::from_raw_parts(sendbuf.cast::<u8>(), desc.bytes)),
            if is_reduction_root(desc) {
                std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), desc.bytes)
            } else {
                &mut [][..]
            },
        )
    };
    let (state, call) = (prepared.state(), &prepared.call);
    let combine = prepared.combine.as_ref().expect("a reduction has its operator");
    Done(verify::reduction(rt, state.private, call, send, recv, (datatype, op, count), |send, recv| {
        execute(rt, state, call, &GatherLayout::default(), send, recv, combine)
    }))
}

/// Whether this rank receives the result.
fn is_reduction_root(desc: &CallDesc) -> bool {
    desc.coll == Coll::Allreduce || desc.rank == desc.root
}

/// The buffer checks of a reduction, which a remembered plan runs again.
fn reduction_buffers(
    in_place: bool,
    is_root: bool,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
) -> Result<(), &'static str> {
    if (!in_place && sendbuf.is_null()) || (is_root && recvbuf.is_null()) {
        return Err("null buffer");
    }
    if is_root && sendbuf == recvbuf.cast_const() {
        return Err("send and receive buffers alias");
    }
    Ok(())
}

/// Checks a reduction and plans it; `Err`: what the call does instead.
fn prepare_reduction(
    rt: &Runtime,
    key: Key,
    comm: MPI_Comm,
    (sendbuf, recvbuf): (*const c_void, *mut c_void),
    (count, datatype, op, root): (i64, MPI_Datatype, MPI_Op, Option<c_int>),
) -> Result<Rc<Prepared>, Outcome> {
    let coll = if root.is_some() { Coll::Reduce } else { Coll::Allreduce };
    let Some((rank, size)) = comm_shape(comm) else { return Err(Forward("communicator")) };
    if count < 0 {
        return Err(Forward("negative count"));
    }
    let root = match root {
        None => 0,
        Some(r) if r >= 0 && (r as usize) < size => r as usize,
        Some(_) => return Err(Forward("invalid root")),
    };
    let red = handles::reduction(datatype, op).map_err(Forward)?;
    if count == 0 {
        return Err(Forward("empty"));
    }
    let in_place = key.in_place;
    let is_root = coll == Coll::Allreduce || rank == root;
    if in_place && !is_root {
        return Err(Forward("MPI_IN_PLACE at a non-root rank"));
    }
    let Some(bytes) = (count as usize).checked_mul(red.unit) else { return Err(Forward("size overflow")) };
    reduction_buffers(in_place, is_root, sendbuf, recvbuf).map_err(Forward)?;
    let epoch = comm::epoch();
    let state = comm::state(comm).map_err(Done)?;
    let desc = CallDesc {
        coll,
        rank,
        size,
        root,
        bytes,
        unit: red.unit,
        commutative: red.commutative,
        in_place,
        topo: state.topo(),
    };
    let call = plan(rt, desc.clone(), rt.decide(&desc, Some(bytes))).map_err(Forward)?;
    let prepared = Prepared::new(state, call, Some(red.combine));
    if !handles::is_user_op(op) {
        prepared::remember(rt, coll, key, epoch, &prepared);
    }
    Ok(prepared)
}

/// Hands a Reduce to the host MPI. MPICH 4.0.2 crashes on MPI_IN_PLACE at a
/// non-zero root from about 2 KiB, so there the root passes a copy of its
/// data as the send buffer instead: same result, valid for every host.
// MPI_Aint is `long` in MPICH and `ptrdiff_t` in Open MPI: the casts are needed for one of them.
#[allow(clippy::unnecessary_cast)]
pub(super) fn forward_reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    call: impl FnOnce(*const c_void, *mut c_void) -> c_int,
) -> c_int {
    let root_in_place = sendbuf == in_place()
        && root != 0
        && count > 0
        && !recvbuf.is_null()
        && handles::is_usable_type(datatype)
        && comm_shape(comm).is_some_and(|(rank, _)| rank as c_int == root);
    if !root_in_place {
        return call(sendbuf, recvbuf);
    }
    let (mut lb, mut extent, mut true_lb, mut true_extent) = (0, 0, 0, 0);
    // SAFETY: a usable datatype; the out-pointers are locals.
    unsafe {
        PMPI_Type_get_extent(datatype, &mut lb, &mut extent);
        PMPI_Type_get_true_extent(datatype, &mut true_lb, &mut true_extent);
    }
    let span = ((count - 1) * extent as i64 + true_extent as i64).max(0) as usize;
    // SAFETY: the root's receive buffer holds `count` elements, whose bytes
    // lie in [recvbuf + true_lb, recvbuf + true_lb + span).
    let data = unsafe { std::slice::from_raw_parts(recvbuf.cast::<u8>().wrapping_offset(true_lb as isize), span) };
    let copy = data.to_vec();
    call(copy.as_ptr().wrapping_offset(-(true_lb as isize)).cast(), recvbuf)
}

/// Runs of at most `c_int::MAX` packed bytes that `count` elements of a
/// type split into, as (first element, elements): MPI_Pack takes int sizes.
fn pack_runs(count: i64, ty: &TypeLayout) -> impl Iterator<Item = (i64, i64)> {
    let per_run = (c_int::MAX as usize / ty.size.max(1)).max(1) as i64;
    (0..count).step_by(per_run as usize).map(move |first| (first, per_run.min(count - first)))
}

/// Calls `f(address, count, datatype)` naming elements `first..first + n`
/// of a user buffer. MPICH's MPI_Pack and MPI_Unpack refuse a NULL buffer
/// (MPI_BOTTOM with a datatype of absolute addresses), so for NULL the same
/// bytes are named from a non-null base through a temporary struct type
/// whose displacement cancels the base.
fn with_elements(
    buf: *mut c_void,
    first: i64,
    n: i64,
    datatype: MPI_Datatype,
    ty: &TypeLayout,
    f: impl FnOnce(*mut c_void, c_int, MPI_Datatype),
) {
    let offset = first as isize * ty.extent;
    if !buf.is_null() {
        return f(buf.cast::<u8>().wrapping_offset(offset).cast(), n as c_int, datatype);
    }
    static BASE: u8 = 0;
    let base = std::ptr::addr_of!(BASE) as *mut c_void;
    let (blocklength, displacement) = (n as c_int, (offset - base as isize) as MPI_Aint);
    let mut run_type = datatype;
    // SAFETY: one block of n elements at an absolute address (base +
    // displacement = the user's address); the type is freed after use.
    unsafe {
        PMPI_Type_create_struct(1, &blocklength, &displacement, &datatype, &mut run_type);
        PMPI_Type_commit(&mut run_type);
    }
    f(base, 1, run_type);
    // SAFETY: the temporary type created above.
    unsafe { PMPI_Type_free(&mut run_type) };
}

/// Packs `count` elements of a non-dense datatype into their signature bytes.
pub(super) fn pack(buf: *const c_void, count: i64, datatype: MPI_Datatype, ty: &TypeLayout, comm: MPI_Comm) -> Vec<u8> {
    let mut packed = vec![0u8; count as usize * ty.size];
    for (first, n) in pack_runs(count, ty) {
        let run = &mut packed[first as usize * ty.size..(first + n) as usize * ty.size];
        let mut position: c_int = 0;
        with_elements(buf.cast_mut(), first, n, datatype, ty, |src, n, dt| {
            // SAFETY: `run` holds the n × size bytes the host packs n
            // elements into (homogeneous native format); `src` names
            // elements of the user's buffer.
            unsafe { PMPI_Pack(src, n, dt, run.as_mut_ptr().cast(), run.len() as c_int, &mut position, comm) };
        });
        assert_eq!(position as usize, run.len(), "packed size differs from the type signature");
    }
    packed
}

/// Inverse of [`pack`].
pub(super) fn unpack(
    packed: &[u8],
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    ty: &TypeLayout,
    comm: MPI_Comm,
) {
    for (first, n) in pack_runs(count, ty) {
        let run = &packed[first as usize * ty.size..(first + n) as usize * ty.size];
        let mut position: c_int = 0;
        with_elements(buf, first, n, datatype, ty, |dst, n, dt| {
            // SAFETY: `run` holds what `pack` produced for these elements;
            // `dst` names them in the user's buffer.
            unsafe { PMPI_Unpack(run.as_ptr().cast(), run.len() as c_int, &mut position, dst, n, dt, comm) };
        });
    }
}

pub(super) fn bcast(
    rt: &Runtime,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Outcome {
    let key = Key { comm, count, datatype, op: None, root: root.into(), in_place: false };
    if let Some(prepared) = prepared::recall(rt, Coll::Bcast, &key) {
        // remembered for dense datatypes only
        if buf.is_null() {
            return Forward("null buffer");
        }
        // SAFETY: a dense buffer of `count` elements is `bytes` contiguous bytes at `buf`.
        let data = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), prepared.call.desc.bytes) };
        return Done(run_bcast(rt, &prepared, data, datatype, count));
    }
    let Some((rank, size)) = comm_shape(comm) else { return Forward("communicator") };
    if count < 0 || !handles::is_usable_type(datatype) || root < 0 || root as usize >= size {
        return Forward("invalid argument");
    }
    let ty = handles::layout(datatype);
    let bytes = count as usize * ty.size;
    if bytes == 0 {
        return Forward("empty");
    }
    if ty.dense && buf.is_null() {
        return Forward("null buffer");
    }
    let root = root as usize;
    let epoch = comm::epoch();
    let state = match comm::state(comm) {
        Ok(state) => state,
        Err(rc) => return Done(rc),
    };
    let desc = CallDesc {
        coll: Coll::Bcast,
        rank,
        size,
        root,
        bytes,
        unit: 1,
        commutative: true,
        in_place: false,
        topo: state.topo(),
    };
    let call = match plan(rt, desc.clone(), rt.decide(&desc, Some(bytes))) {
        Ok(call) => call,
        Err(why) => return Forward(why),
    };
    let prepared = Prepared::new(state, call, None);
    if ty.dense {
        if handles::is_predefined_type(datatype) {
            prepared::remember(rt, Coll::Bcast, key, epoch, &prepared);
        }
        // SAFETY: a dense buffer of `count` elements is `bytes` contiguous bytes at `buf`.
        let data = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), bytes) };
        return Done(run_bcast(rt, &prepared, data, datatype, count));
    }
    let mut packed = if rank == root { pack(buf, count, datatype, &ty, comm) } else { vec![0u8; bytes] };
    let rc = run_bcast(rt, &prepared, &mut packed, datatype, count);
    if rank != root && rc == MPI_SUCCESS as c_int {
        unpack(&packed, buf, count, datatype, &ty, comm);
    }
    Done(rc)
}

/// Runs a planned Bcast on `data` (`count` elements of `datatype`, packed).
fn run_bcast(rt: &Runtime, prepared: &Prepared, data: &mut [u8], datatype: MPI_Datatype, count: i64) -> c_int {
    let (state, call) = (prepared.state(), &prepared.call);
    let type_size = data.len() / count as usize;
    verify::bcast(rt, state.private, call, data, (datatype, type_size, count), |data| {
        execute(rt, state, call, &GatherLayout::default(), None, data, &NoReduction)
    })
}

// ---------------------------------------------------------------------------
// The exported symbols.

/// # Safety
/// Called by MPI programs with MPI_Allreduce's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    entry(
        Coll::Allreduce,
        |rt| reduction(rt, Coll::Allreduce, sendbuf, recvbuf, count.into(), datatype, op, None, comm),
        // SAFETY: the caller's arguments, unchanged.
        || unsafe { PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm) },
    )
}

/// # Safety
/// Called by MPI programs with MPI_Reduce's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    entry(
        Coll::Reduce,
        |rt| reduction(rt, Coll::Reduce, sendbuf, recvbuf, count.into(), datatype, op, Some(root), comm),
        // SAFETY: the caller's arguments, unchanged.
        || {
            forward_reduce(sendbuf, recvbuf, count.into(), datatype, root, comm, |send, recv| {
                // SAFETY: the caller's arguments (or a copy of the root's data, see forward_reduce).
                unsafe { PMPI_Reduce(send, recv, count, datatype, op, root, comm) }
            })
        },
    )
}

/// # Safety
/// Called by MPI programs with MPI_Bcast's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    entry(
        Coll::Bcast,
        |rt| bcast(rt, buffer, count.into(), datatype, root, comm),
        // SAFETY: the caller's arguments, unchanged.
        || unsafe { PMPI_Bcast(buffer, count, datatype, root, comm) },
    )
}

/// # Safety
/// Called by MPI programs with MPI_Gatherv's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Gatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    entry(
        Coll::Gatherv,
        |rt| {
            gatherv::gatherv(rt, sendbuf, sendcount.into(), sendtype, recvbuf, recvcounts, displs, recvtype, root, comm)
        },
        // SAFETY: the caller's arguments, unchanged.
        || unsafe { PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm) },
    )
}

/// Sets how one collective runs from now on, as PCOLL_<COLL> would (an
/// algorithm with parameters, `mpi` or `auto`; an empty string goes back
/// to the configuration), for benchmarks and tuners that compare choices
/// within one run. Every rank must make the same change between the same
/// two calls. Returns MPI_SUCCESS, or MPI_ERR_ARG (with a message on
/// stderr) for an unknown collective or value.
///
/// # Safety
/// Two NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn pcoll_set_algorithm(coll: *const c_char, value: *const c_char) -> c_int {
    let outcome = catch_unwind(|| {
        if coll.is_null() || value.is_null() {
            return Err("null argument".to_string());
        }
        // SAFETY: NUL-terminated strings from the caller.
        let (coll, value) = unsafe { (std::ffi::CStr::from_ptr(coll), std::ffi::CStr::from_ptr(value)) };
        let (coll, value) = (coll.to_string_lossy(), value.to_string_lossy());
        let c = Coll::ALL.into_iter().find(|c| c.name() == coll.trim()).ok_or(format!("no collective {coll:?}"))?;
        runtime::set_choice(c, value.trim())
    });
    match outcome {
        Ok(Ok(())) => MPI_SUCCESS as c_int,
        Ok(Err(why)) => {
            runtime::say(&format!("pcoll_set_algorithm: {why}\n"));
            MPI_ERR_ARG as c_int
        }
        Err(_) => MPI_ERR_OTHER as c_int,
    }
}

/// pcoll's reduction kernels behind MPI_Reduce_local's interface
/// (`inoutbuf = inbuf ∘ inoutbuf`), for benchmarks and tools: what pcoll's
/// collectives combine with. Pairs pcoll has no kernel for, and invalid
/// arguments, go to PMPI_Reduce_local.
///
/// # Safety
/// MPI_Reduce_local's arguments.
#[no_mangle]
pub unsafe extern "C" fn pcoll_reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    // SAFETY: the caller's arguments, unchanged.
    let host = || unsafe { PMPI_Reduce_local(inbuf, inoutbuf, count, datatype, op) };
    let native = catch_unwind(|| match handles::reduction(datatype, op) {
        Ok(handles::Reduction { unit, combine: Combine::Native(kernel), .. })
            if count > 0 && !inbuf.is_null() && !inoutbuf.is_null() =>
        {
            let bytes = count as usize * unit;
            // SAFETY: MPI_Reduce_local's buffers hold `count` elements of
            // `datatype`, whose extent is `unit`; they do not overlap.
            let (src, dst) = unsafe {
                (
                    std::slice::from_raw_parts(inbuf.cast::<u8>(), bytes),
                    std::slice::from_raw_parts_mut(inoutbuf.cast::<u8>(), bytes),
                )
            };
            (kernel.inplace)(src, dst);
            true
        }
        _ => false,
    });
    match native {
        Ok(true) => MPI_SUCCESS as c_int,
        _ => host(),
    }
}

/// Installs pcoll's MPI_Finalize hook on every rank, so that the job-wide
/// summary can be combined across ranks.
///
/// # Safety
/// Called by MPI programs with MPI_Init's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { PMPI_Init(argc, argv) };
    if rc == MPI_SUCCESS as c_int {
        let _ = catch_unwind(runtime::after_init);
    }
    rc
}

/// # Safety
/// Called by MPI programs with MPI_Init_thread's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { PMPI_Init_thread(argc, argv, required, provided) };
    if rc == MPI_SUCCESS as c_int {
        let _ = catch_unwind(runtime::after_init);
    }
    rc
}
