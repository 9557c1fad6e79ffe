//! Registry entries for the node algorithms (exec::shm): adapters from the
//! common node-call shape to each algorithm, and the checks that say when
//! they can run. The algorithms themselves, with their documentation, are
//! in exec::shm::{reduce, bcast, gatherv}.

use crate::core::call::CallDesc;
use crate::exec::shm::team::Team;
use crate::exec::shm::{bcast, gatherv, reduce, NodeCall};
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

/// ... and the root's layout fits a chunk area (16 bytes a rank).
pub(super) fn on_one_node_gatherv(desc: &CallDesc) -> Result<(), &'static str> {
    on_one_node(desc)
}

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
    let q = team.queue;
    bcast::queue(team, data, root, q.fragment, q.tree)
}

pub(super) fn bcast_zero_copy(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let NodeCall::Bcast { data, root } = call else { mismatch() };
    bcast::zero_copy(team, data, root)
}

pub(super) fn gatherv_copy_in(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let NodeCall::Gatherv(mut g) = call else { mismatch() };
    gatherv::copy_in(team, &mut g)
}

pub(super) fn gatherv_zero_copy(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let NodeCall::Gatherv(mut g) = call else { mismatch() };
    gatherv::zero_copy(team, &mut g)
}
