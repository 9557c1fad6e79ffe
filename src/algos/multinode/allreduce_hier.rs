//! Allreduce over several nodes through one representative per node:
//! reduce within each node to its local rank 0, allreduce between those
//! representatives (the planned point-to-point algorithm for `nodes`
//! ranks), broadcast within each node.
//!
//! Trace, 2 nodes of 2 (ranks 0 1 | 2 3): 0 gets 0∘1 and 2 gets 2∘3
//! through shared memory; 0 and 2 exchange; 0 and 2 broadcast the result
//! to 1 and 3.
//!
//! Order: with nodes holding consecutive ranks (Topo::contiguous), node
//! results combine in rank order, so non-commutative operators are exact;
//! otherwise the check refuses them. One result is copied to everyone:
//! bitwise identical.
//!
//! Limitations: one representative per node (several:
//! [`super::allreduce_dpml`]; pipelined: [`super::allreduce_salar`]).
//! Memory: the node stages'. Cost: node reduction + the inter-node
//! Allreduce of `nodes` ranks + node broadcast, in series.
//! Seed: none of its own; the stage between nodes runs the point-to-point
//! algorithms (seeds 000 and 004), the node stages seed 003's and 002's.

use super::{between_nodes_call, node_bcast, node_reduce, Part};
use crate::algos::node::NodeCall;
use crate::core::call::{CallDesc, GatherLayout};
use crate::exec::{Buffers, Combiner};
use crate::shm::team::Mismatch;

pub fn allreduce(part: Part<'_, '_>, desc: &CallDesc, mut bufs: Buffers<'_>, c: &dyn Combiner) -> Result<(), Mismatch> {
    let Part { team, map, rank, inter, plan, .. } = part;
    node_reduce(plan, team, &mut bufs, desc.unit, Some(0), c)?;
    if team.rank == 0 {
        let reps = map.representatives(None);
        let d = between_nodes_call(desc, reps.len(), map.node_of[rank], 0, true, bufs.recv.len());
        inter.run(&d, &reps, &GatherLayout::default(), None, bufs.recv, c);
    }
    node_bcast(plan, team, bufs.recv, 0, c)
}

/// [`allreduce`], as the registry runs it.
pub fn run(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) -> Result<(), Mismatch> {
    let (bufs, _, _) = call.into_reduction();
    allreduce(part, desc, bufs, c)
}
