//! Runs a planned call: a schedule over the host's transport on the
//! communicator's private duplicate, or a node algorithm (or a multi-node
//! composition) over the node's segment.

use super::comm::{CommState, CONTENDED};
use super::host::{Code, ErrorClass, Host, Outcome, SUCCESS};
use super::plan::Planned;
use super::runtime::Runtime;
use super::thread::PerThread;
use super::window::Leaders;
use crate::algos::multinode::{BetweenNodes, NodeMap, Part};
use crate::algos::multinode::{BetweenPlan, NoWindow, OneSided};
use crate::algos::node::gatherv_shm::Gather;
use crate::algos::node::{reduction, HostWay, NodeCall, NodeMemory, Team};
use crate::algos::{Algorithm, Impl, ALGORITHMS};
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::schedule::Schedule;
use crate::core::types::Coll;
use crate::exec::{self, Buffers, Combiner};
use crate::shm::team::{Mismatch, Spread, TeamState};
use crate::shm::wait;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

/// Runs the decided algorithm: a schedule over the private duplicate of
/// the user's communicator `comm`, or a node algorithm over the node's
/// segment (a call the node finds erroneous is reported on `comm`).
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn execute<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    comm: H::Comm,
    state: &CommState<H>,
    call: &Planned,
    layout: &GatherLayout,
    send: Option<&[u8]>,
    recv: &mut [u8],
    combiner: &dyn Combiner,
) -> Code {
    let start = rt.stats.is_some().then(Instant::now);
    let rc = match attempt(host, rt, t, state, call, layout, send, recv, combiner) {
        Ok(()) => SUCCESS,
        Err(Failure::Host(rc)) => rc,
        Err(Failure::Node(m)) => erroneous(host, comm, call, m),
    };
    if let (Some(stats), Some(start)) = (&rt.stats, start) {
        stats.lock().unwrap().record(call.desc.coll, call.algo, call.desc.bytes, start.elapsed().as_secs_f64());
    }
    rc
}

/// Why a call did not complete.
enum Failure {
    /// The host's transport failed: its code.
    Host(Code),
    /// The node's ranks ran different calls.
    Node(Mismatch),
}

/// Runs the decided algorithm; the caller reports a failure.
#[inline]
#[allow(clippy::too_many_arguments)]
fn attempt<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    state: &CommState<H>,
    call: &Planned,
    layout: &GatherLayout,
    send: Option<&[u8]>,
    recv: &mut [u8],
    combiner: &dyn Combiner,
) -> Result<(), Failure> {
    match call.algo.imp {
        Impl::Schedule(_) => run_schedule(host, t, state, call, layout, send, recv, combiner).map_err(Failure::Host),
        Impl::Node(_) | Impl::Hier(_) => {
            let node = &state.node;
            let Some(mut team_state) = node.state.take() else { host.abort(CONTENDED) };
            // Scratch on a node: the sub-chunks of reductions that may
            // combine zero copy, and that of the schedule the algorithm may
            // hand calls to.
            let sub_chunk = team_state.memory.sizes.sub_chunk;
            let reduction = call.desc.coll.is_reduction();
            let hot_algo = hot_algorithm(call);
            let hot_schedule = hot_algo.filter(|_| reduction).map(|algo| schedule_of(t, state, algo, call, layout));
            let zero_copy =
                if call.algo.zero_copy_scratch { reduction::zero_copy_scratch(node.size, sub_chunk) } else { 0 };
            let need = hot_schedule.as_ref().map_or(zero_copy, |sched| zero_copy.max(sched.scratch_bytes));
            let within = call.algo.hot_back_to_back.then(|| Duration::from_nanos(rt.cfg.shm.back_to_back_ns));
            let mut hot_way = hot_algo.map(|algo| HostSchedule {
                host,
                t,
                state,
                algo,
                call,
                layout,
                sched: hot_schedule,
                combiner,
                within,
                failed: None,
            });
            let ran = t.with_scratch(need, |scratch| {
                let bufs = Buffers { send, recv, scratch };
                let hot_way = hot_way.as_mut().map(|way| way as &mut dyn HostWay);
                run_on_node(host, rt, t, state, &mut team_state, call, layout, bufs, hot_way, combiner)
            });
            match hot_way.and_then(|way| way.failed) {
                Some(rc) => Err(Failure::Host(rc)),
                None => ran.map_err(Failure::Node),
            }
        }
    }
}

/// An argument only this rank sees is invalid (its own buffers, a root's
/// receive arguments) in a call whose shared arguments (count, datatype,
/// operator, root) gave every rank the same plan: the peers run pcoll's
/// algorithm, so this rank must keep to the call's protocol too, or they
/// would wait for it, or take its next call for this one.
pub struct Invalid {
    pub why: &'static str,
    /// What the host MPI reports for it.
    pub class: ErrorClass,
}

/// How a rank with an [`Invalid`] argument stands in for its part of a
/// node call. On a node, any mix of valid and invalid ranks ends: a rank
/// that waits for one that stood out finds its call ended.
pub enum Stand<'a> {
    /// Its input is valid, only where its result goes is not: it runs the
    /// call with scratch (of `recv_bytes`, laid out as `layout` for a
    /// Gatherv root) in place of its output; its peers' results are right.
    Ghost { send: Option<&'a [u8]>, recv_bytes: usize, layout: &'a GatherLayout },
    /// Its input is invalid: it ends the call without writing anything,
    /// so the peers that need its data find the call erroneous
    /// (MPI_ERR_OTHER).
    Out,
}

/// The call of a rank that found `bad`, in its `stand`: reported on `comm`
/// with the host's class, after the peers' protocol has what it needs.
/// A schedule or a composition goes to the host: a point-to-point peer
/// cannot tell that a rank stood out, and would wait for it; where every
/// rank passes the invalid argument (the usual case), every rank reaches
/// the host's error.
#[cold]
#[allow(clippy::too_many_arguments)]
pub fn invalid<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    comm: H::Comm,
    state: &CommState<H>,
    call: &Planned,
    bad: Invalid,
    stand: Stand<'_>,
    combiner: &dyn Combiner,
) -> Outcome {
    if !matches!(call.algo.imp, Impl::Node(_)) {
        return Outcome::Forward(bad.why);
    }
    match stand {
        Stand::Ghost { send, recv_bytes, layout } => {
            let mut scratch = vec![0u8; recv_bytes];
            // Whatever the peers did, this rank's error is its own argument.
            let _ = attempt(host, rt, t, state, call, layout, send, &mut scratch, combiner);
        }
        Stand::Out => {
            let Some(mut team_state) = state.node.state.take() else { host.abort(CONTENDED) };
            let mut team = team(state, &mut team_state);
            team.begin(call.algo.index(), 0);
            team.end();
        }
    }
    log::warn!(
        "{} of {} B: {} at this rank while the others run {}: returning {:?}",
        call.desc.coll,
        call.desc.bytes,
        bad.why,
        call.algo.name,
        bad.class
    );
    Outcome::Done(host.raise(comm, bad.class))
}

/// This rank's view of the node's team for one call.
fn team<'a, H: Host>(state: &'a CommState<H>, team_state: &'a mut TeamState<NodeMemory>) -> Team<'a> {
    let node = &state.node;
    let (seg, peers) = state.node_memory().expect("a node algorithm runs where the segment is");
    Team {
        rank: node.rank,
        size: node.size,
        seg,
        peers,
        state: team_state,
        settings: node.settings,
        spread: Spread::Off,
    }
}

/// Runs a schedule over the private communicator (out of line: the node
/// algorithms' calls stay compact).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn run_schedule<H: Host>(
    host: &H,
    t: &PerThread<H>,
    state: &CommState<H>,
    call: &Planned,
    layout: &GatherLayout,
    send: Option<&[u8]>,
    recv: &mut [u8],
    combiner: &dyn Combiner,
) -> Result<(), Code> {
    let sched = state.schedules.lock().unwrap().get(call.algo, &call.params, &call.desc, layout, &t.schedule);
    t.with_scratch(sched.scratch_bytes, |scratch| {
        let mut bufs = Buffers { send, recv, scratch };
        exec::run(&sched, &mut bufs, &mut host.transport(state, None), combiner)
    })
}

/// The schedule algorithm over the host that the call's node algorithm
/// hands hot calls to ([`crate::algos::Algorithm::hot_by`]), if it has
/// one and that algorithm takes the call (the ring: a commutative operator).
fn hot_algorithm(call: &Planned) -> Option<&'static Algorithm> {
    let algo = call.algo.hot_algorithm()?;
    (algo.check)(&call.desc).ok()?;
    Some(algo)
}

/// `algo`'s schedule for the call, from the communicator's cache.
fn schedule_of<H: Host>(
    t: &PerThread<H>,
    state: &CommState<H>,
    algo: &'static Algorithm,
    call: &Planned,
    layout: &GatherLayout,
) -> Arc<Schedule> {
    state.schedules.lock().unwrap().get(algo, &algo.default_params(), &call.desc, layout, &t.schedule)
}

/// A schedule over the host's transport on the private duplicate, as a
/// node algorithm's way for hot calls; the host's code of a failure.
struct HostSchedule<'a, H: Host> {
    host: &'a H,
    t: &'a PerThread<H>,
    state: &'a CommState<H>,
    algo: &'static Algorithm,
    call: &'a Planned,
    layout: &'a GatherLayout,
    /// Looked up where the dispatcher reserves its scratch (reductions),
    /// else on the way's first use: most calls of a node algorithm do not
    /// take it, and the look-up cost a tenth of a microsecond on each
    /// (Bcast between barriers, Intel MPI, 16 KiB: 2.2 against 2.1 us).
    sched: Option<Arc<Schedule>>,
    combiner: &'a dyn Combiner,
    within: Option<Duration>,
    failed: Option<Code>,
}

impl<H: Host> HostWay for HostSchedule<'_, H> {
    fn run(&mut self, bufs: &mut Buffers<'_>) {
        let (t, state, algo, call, layout) = (self.t, self.state, self.algo, self.call, self.layout);
        let sched = self.sched.get_or_insert_with(|| schedule_of(t, state, algo, call, layout));
        let mut transport = self.host.transport(self.state, None);
        let ran = if sched.scratch_bytes <= bufs.scratch.len() {
            exec::run(sched, bufs, &mut transport, self.combiner)
        } else {
            // A way looked up here brings its own scratch (a Bcast's tree
            // needs none).
            let mut own = vec![0u8; sched.scratch_bytes];
            let mut bufs = Buffers { send: bufs.send, recv: &mut *bufs.recv, scratch: &mut own };
            exec::run(sched, &mut bufs, &mut transport, self.combiner)
        };
        if let Err(rc) = ran {
            self.failed = Some(rc);
        }
    }

    fn back_to_back_within(&self) -> Option<Duration> {
        self.within
    }
}

/// Runs a node algorithm or a composition on this rank's node (its check
/// made sure the node has a segment) as one call of the node's step
/// protocol. A Bcast reader whose root runs another call (the counts of an
/// erroneous program differ) follows the root's call into scratch, so
/// that the root, which never waits for its readers' verdict, completes,
/// and keeps what fits its own buffer; a [`Mismatch`] tells the caller.
#[allow(clippy::too_many_arguments)]
fn run_on_node<'a, H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    state: &CommState<H>,
    team_state: &mut TeamState<NodeMemory>,
    call: &Planned,
    layout: &'a GatherLayout,
    bufs: Buffers<'a>,
    mut hot_way: Option<&'a mut dyn HostWay>,
    combiner: &dyn Combiner,
) -> Result<(), Mismatch> {
    let desc = &call.desc;
    let node = &state.node;
    let mut team = team(state, team_state);
    let root = node.local_of[desc.root];
    // The bytes a peer checks: this rank's block in a Gatherv, else the
    // call's.
    let bytes = match desc.coll {
        Coll::Gatherv if desc.in_place => layout.blocks[desc.rank].1,
        Coll::Gatherv => bufs.send.map_or(0, <[u8]>::len),
        _ => desc.bytes,
    };
    team.begin(call.algo.index(), bytes);
    let queue_ops = team.state.memory.queue_ops;
    let node_call = |bufs: Buffers<'a>, host: Option<&'a mut dyn HostWay>| match desc.coll {
        Coll::Allreduce => NodeCall::Reduce { bufs, unit: desc.unit, root: None, host },
        Coll::Reduce => NodeCall::Reduce { bufs, unit: desc.unit, root: Some(root), host },
        Coll::Bcast => NodeCall::Bcast { data: bufs.recv, root, host },
        Coll::Gatherv => NodeCall::Gatherv(Gather {
            send: bufs.send.unwrap_or(&[]),
            recv: bufs.recv,
            layout,
            root,
            in_place: desc.in_place,
        }),
    };
    let result = match call.algo.imp {
        Impl::Node(run) if desc.coll == Coll::Bcast => {
            let host = hot_way.as_deref_mut().map(|way| way as &mut dyn HostWay);
            let node_bcast = NodeCall::Bcast { data: &mut *bufs.recv, root, host };
            match run(&mut team, node_bcast, combiner) {
                Err(m) if m.peer == root && team.rank != root => {
                    team.state.memory.queue_ops = queue_ops;
                    follow(&mut team, m, root, bufs.recv, combiner)
                }
                result => result,
            }
        }
        Impl::Node(run) => run(&mut team, node_call(bufs, hot_way), combiner),
        Impl::Hier(run) => {
            let map = NodeMap { node_of: &node.node_of, local_of: &node.local_of };
            let stages = call.stages.as_ref().expect("a composition's call has its stages planned");
            let mut inter = HostBetween { host, t, state, plan: &stages.between, leaders: None };
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
            // A rank waiting in the segment for its leader lets the host
            // progress: the leader's transfers may wait for it (wait::driving).
            let (host, private) = (*host, state.private);
            wait::driving(Box::new(move || host.drive_progress(private)), || {
                run(part, desc, node_call(bufs, None), combiner)
            })
        }
        Impl::Schedule(_) => unreachable!("schedules run over the transport"),
    };
    team.end();
    result
}

/// A Bcast reader whose root runs another Bcast (`m`, found before this
/// rank took part) runs the root's call from its start into scratch, so
/// that the root completes, and keeps what fits `data`; still the
/// mismatch. Where the root's call is not one a reader can follow (no node
/// Bcast of the registry, one that may hand calls to the host, whose runs
/// a reader of another call does not share, or too large for a head to
/// tell), only the mismatch.
fn follow(
    team: &mut Team<'_>,
    m: Mismatch,
    root: usize,
    data: &mut [u8],
    combiner: &dyn Combiner,
) -> Result<(), Mismatch> {
    let Some((head, run, bytes)) = m.head.and_then(|head| {
        let algo = ALGORITHMS.get(head.algorithm()).filter(|a| a.coll == Coll::Bcast && a.hot_by.is_none())?;
        let Impl::Node(run) = algo.imp else { return None };
        Some((head, run, head.bytes()?))
    }) else {
        return Err(m);
    };
    log::debug!("Bcast: the root sends {bytes} B, this rank expects {} B; following the root's call", data.len());
    team.restart_as(head);
    let mut scratch = vec![0u8; bytes];
    run(team, NodeCall::bcast(&mut scratch, root), combiner)?;
    let kept = bytes.min(data.len());
    data[..kept].copy_from_slice(&scratch[..kept]);
    Err(m)
}

/// The code of a call the node found erroneous, reported on `comm`.
#[cold]
fn erroneous<H: Host>(host: &H, comm: H::Comm, call: &Planned, m: Mismatch) -> Code {
    let class = if m.truncates { ErrorClass::Truncate } else { ErrorClass::Other };
    let theirs = match m.head {
        Some(head) => match (head.bytes(), ALGORITHMS.get(head.algorithm())) {
            (Some(bytes), Some(algo)) => format!("{bytes} B with {}", algo.name),
            _ => "another call".into(),
        },
        None => "nothing of this call".into(),
    };
    log::warn!(
        "{} of {} B here: node rank {} runs {theirs} (an erroneous program: counts differ?); returning {class:?}",
        call.desc.coll,
        call.desc.bytes,
        m.peer,
    );
    host.raise(comm, class)
}

/// The inter-node stage of the compositions: a point-to-point algorithm
/// among the nodes' representatives, over the private communicator.
pub struct HostBetween<'a, H: Host> {
    host: &'a H,
    t: &'a PerThread<H>,
    state: &'a CommState<H>,
    /// The call's plan of what runs between the nodes.
    plan: &'a BetweenPlan,
    /// The leaders' window while a call uses it.
    leaders: Option<MutexGuard<'a, Leaders<H>>>,
}

impl<H: Host> BetweenNodes for HostBetween<'_, H> {
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
        let sched = self.state.schedules.lock().unwrap().get(algo, params, desc, layout, &self.t.schedule);
        let mut scratch = vec![0u8; sched.scratch_bytes];
        let mut bufs = Buffers { send, recv, scratch: &mut scratch };
        let mut transport = self.host.transport(self.state, Some(reps));
        if let Err(rc) = exec::run(&sched, &mut bufs, &mut transport, combiner) {
            panic!("the {} between nodes failed: MPI error {rc}", desc.coll);
        }
    }

    fn one_sided(&mut self, leader: bool, bytes: usize) -> Result<Option<&mut dyn OneSided>, NoWindow> {
        let leaders = self.leaders.get_or_insert_with(|| self.state.leaders.lock().unwrap());
        leaders.window(self.host, self.state, leader, bytes)
    }
}
