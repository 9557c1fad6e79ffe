//! Runs a planned call: a schedule over the host's transport on the
//! communicator's private duplicate, or a node algorithm (or a multi-node
//! composition) over the node's segment.

use super::comm::{CommState, CONTENDED};
use super::host::{Code, Host, SUCCESS};
use super::plan::Planned;
use super::runtime::Runtime;
use super::thread::PerThread;
use super::window::Leaders;
use crate::algos::multinode::{BetweenNodes, NodeMap, Part};
use crate::algos::multinode::{BetweenPlan, OneSided};
use crate::algos::node::gatherv_shm::Gather;
use crate::algos::node::{reduction, NodeCall, NodeMemory, Team};
use crate::algos::Impl;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::types::Coll;
use crate::exec::{self, Buffers, Combiner};
use crate::shm::team::TeamState;
use std::sync::MutexGuard;
use std::time::Instant;

/// Runs the decided algorithm: a schedule over the private duplicate of
/// the user's communicator, or a node algorithm over the node's segment.
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn execute<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    state: &CommState<H>,
    call: &Planned,
    layout: &GatherLayout,
    send: Option<&[u8]>,
    recv: &mut [u8],
    combiner: &dyn Combiner,
) -> Code {
    let start = rt.stats.is_some().then(Instant::now);
    let rc = match call.algo.imp {
        Impl::Schedule(_) => run_schedule(host, t, state, call, layout, send, recv, combiner),
        Impl::Node(_) | Impl::Hier(_) => {
            let node = &state.node;
            let Some(mut team_state) = node.state.take() else { host.abort(CONTENDED) };
            // Only reductions use scratch on a node (for zero copy's sub-chunks).
            let sub_chunk = team_state.memory.sizes.sub_chunk;
            let need =
                if call.desc.coll.is_reduction() { reduction::zero_copy_scratch(node.size, sub_chunk) } else { 0 };
            t.with_scratch(need, |scratch| {
                let bufs = Buffers { send, recv, scratch };
                run_on_node(host, rt, t, state, &mut team_state, call, layout, bufs, combiner);
                SUCCESS
            })
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
) -> Code {
    let sched = state.schedules.lock().unwrap().get(call.algo, &call.params, &call.desc, layout, &t.schedule);
    t.with_scratch(sched.scratch_bytes, |scratch| {
        let mut bufs = Buffers { send, recv, scratch };
        match exec::run(&sched, &mut bufs, &mut host.transport(state, None), combiner) {
            Ok(()) => SUCCESS,
            Err(rc) => rc,
        }
    })
}

/// Runs a node algorithm or a composition on this rank's node (its check
/// made sure the node has a segment).
#[allow(clippy::too_many_arguments)]
fn run_on_node<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    state: &CommState<H>,
    team_state: &mut TeamState<NodeMemory>,
    call: &Planned,
    layout: &GatherLayout,
    bufs: Buffers<'_>,
    combiner: &dyn Combiner,
) {
    let desc = &call.desc;
    let node = &state.node;
    let (seg, peers) = state.node_memory().expect("a node algorithm runs where the segment is");
    let mut team = Team { rank: node.rank, size: node.size, seg, peers, state: team_state, settings: node.settings };
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
            run(part, desc, node_call, combiner)
        }
        Impl::Schedule(_) => unreachable!("schedules run over the transport"),
    }
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

    fn one_sided(&mut self, leader: bool, bytes: usize) -> Option<&mut dyn OneSided> {
        let leaders = self.leaders.insert(self.state.leaders.lock().unwrap());
        leaders.window(self.host, self.state, leader, bytes)
    }
}
