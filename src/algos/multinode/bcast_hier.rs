//! Bcast over several nodes through one representative per node: the
//! representatives (the root on its node, local rank 0 elsewhere)
//! broadcast between nodes (the planned point-to-point algorithm for
//! `nodes` ranks), then each within its node.
//!
//! Trace, 2 nodes of 2 (ranks 0 1 | 2 3), root 1: 1 sends to 2; 1
//! broadcasts to 0 and 2 to 3 through shared memory.
//!
//! Limitations: one representative per node. Memory: the node stage's.
//! Cost: the inter-node Bcast of `nodes` ranks + node broadcast.
//! Seed: none of its own; the stage between nodes runs seed 000's trees
//! among others, the node stage seed 002's broadcast.

use super::{between_nodes_call, node_bcast, Part};
use crate::algos::node::NodeCall;
use crate::core::call::{CallDesc, GatherLayout};
use crate::exec::Combiner;
use crate::shm::team::Mismatch;

pub fn bcast(part: Part<'_, '_>, desc: &CallDesc, data: &mut [u8], c: &dyn Combiner) -> Result<(), Mismatch> {
    let Part { team, map, rank, inter, plan, .. } = part;
    let reps = map.representatives(Some(desc.root));
    let node = map.node_of[rank];
    if reps[node] == rank {
        let d = between_nodes_call(desc, reps.len(), node, map.node_of[desc.root], false, data.len());
        inter.run(&d, &reps, &GatherLayout::default(), None, &mut *data, c);
    }
    node_bcast(plan, team, data, map.local_of[reps[node]], c)
}

/// [`bcast`], as the registry runs it.
pub fn run(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) -> Result<(), Mismatch> {
    let (data, _) = call.into_bcast();
    bcast(part, desc, data, c)
}
