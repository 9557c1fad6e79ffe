//! Registry entries for the node algorithms (exec::shm): adapters from the
//! common node-call shape to each algorithm, and the checks that say when
//! they can run. The algorithms themselves, with their documentation, are
//! in exec::shm::{reduce, bcast, gatherv}.

use crate::algos::ParamSpec;
use crate::core::call::CallDesc;
use crate::exec::shm::hier::{self, Part};
use crate::exec::shm::team::Team;
use crate::exec::shm::{bcast, dpml, gatherv, reduce, salar, NodeCall};
use crate::exec::Combiner;

/// The communicator lies on one node that has a shared segment.
pub(super) fn on_one_node(desc: &CallDesc) -> Result<(), &'static str> {
    match (desc.topo.nodes, desc.topo.shm) {
        (1, true) => Ok(()),
        (1, false) => Err("no shared segment on this node (PCOLL_SHM=0, or it could not be created)"),
        _ => Err("the communicator spans several nodes"),
    }
}

/// ... and zero copy works there.
pub(super) fn on_one_node_zero_copy(desc: &CallDesc) -> Result<(), &'static str> {
    on_one_node(desc)?;
    if desc.topo.zcopy {
        Ok(())
    } else {
        Err("no zero copy between processes here (PCOLL_SHM_ZCOPY=0, or cross-memory attach is not allowed)")
    }
}

/// ... with zero copy, and the root's layout fits a chunk area (16 bytes a
/// rank).
pub(super) fn on_one_node_gatherv_zero_copy(desc: &CallDesc) -> Result<(), &'static str> {
    on_one_node_zero_copy(desc)?;
    if 16 * desc.size <= desc.topo.chunk {
        Ok(())
    } else {
        Err("the layout does not fit a chunk area (raise PCOLL_SHM_CHUNK)")
    }
}

fn mismatch() -> ! {
    unreachable!("a node algorithm was handed another collective's call")
}

macro_rules! reductions {
    ($($name:ident => $algo:path, $all:expr;)*) => {$(
        pub(super) fn $name(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) {
            let NodeCall::Reduce { mut bufs, unit, root } = call else { mismatch() };
            debug_assert_eq!(root.is_none(), $all);
            $algo(team, &mut bufs, unit, root, combiner)
        }
    )*};
}

reductions! {
    allreduce_flat => reduce::flat, true;
    allreduce_partition => reduce::partition, true;
    allreduce_zero_copy => reduce::zero_copy, true;
    reduce_flat => reduce::flat, false;
    reduce_partition => reduce::partition, false;
    reduce_zero_copy => reduce::zero_copy, false;
}

pub(super) fn bcast_pipeline(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let NodeCall::Bcast { data, root } = call else { mismatch() };
    bcast::pipeline(team, data, root)
}

pub(super) fn bcast_queue(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let NodeCall::Bcast { data, root } = call else { mismatch() };
    let q = team.settings;
    bcast::queue(team, data, root, q.fragment, q.tree)
}

pub(super) fn bcast_zero_copy(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let NodeCall::Bcast { data, root } = call else { mismatch() };
    bcast::zero_copy(team, data, root)
}

pub(super) fn bcast_timed(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let NodeCall::Bcast { data, root } = call else { mismatch() };
    bcast::timed(team, data, root)
}

macro_rules! gathers {
    ($($name:ident => $mode:expr;)*) => {$(
        pub(super) fn $name(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
            let NodeCall::Gatherv(mut g) = call else { mismatch() };
            gatherv::run(team, &mut g, $mode)
        }
    )*};
}

gathers! {
    gatherv_auto => gatherv::Mode::Auto;
    gatherv_copy_in => gatherv::Mode::CopyIn;
    gatherv_zero_copy => gatherv::Mode::ZeroCopy;
}

pub(super) fn hier_allreduce(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) {
    let NodeCall::Reduce { bufs, .. } = call else { mismatch() };
    hier::allreduce(part, desc, bufs, c)
}

pub(super) fn hier_reduce(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) {
    let NodeCall::Reduce { bufs, .. } = call else { mismatch() };
    hier::reduce(part, desc, bufs, c)
}

pub(super) fn hier_bcast(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) {
    let NodeCall::Bcast { data, .. } = call else { mismatch() };
    hier::bcast(part, desc, data, c)
}

pub(super) fn hier_gatherv(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) {
    let NodeCall::Gatherv(g) = call else { mismatch() };
    hier::gatherv(part, desc, g, c)
}

/// DPML's parameter.
pub(super) const DPML_PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "leaders",
    min: 0,
    max: 4096,
    default: 0,
    help: "leaders per node (0: PCOLL_LEADERS, else 4; at most the smallest node's rank count)",
}];

pub(super) fn dpml_allreduce(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) {
    let NodeCall::Reduce { bufs, .. } = call else { mismatch() };
    let asked = match part.params.first() {
        Some(&l) if l > 0 => Some(l as usize),
        _ => part.leaders,
    };
    let l = dpml::leaders(asked, part.map.smallest_node());
    dpml::allreduce(part, desc, bufs, l, c)
}

/// SALaR's parameter.
pub(super) const SALAR_PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "chunk",
    min: 0,
    max: 64 << 20,
    default: 0,
    help: "bytes per pipeline chunk (0: adaptive; at most PCOLL_SHM_CHUNK)",
}];

pub(super) fn salar_allreduce(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) {
    let NodeCall::Reduce { bufs, .. } = call else { mismatch() };
    let fixed = part.params.first().filter(|&&b| b > 0).map(|&b| b as usize);
    salar::allreduce(part, desc, bufs, fixed, c)
}
