//! Reduce over several nodes through one representative per node: reduce
//! within each node to its representative (the root on the root's node,
//! local rank 0 elsewhere), then among the representatives to the root
//! (the planned point-to-point algorithm for `nodes` ranks).
//!
//! Trace, 2 nodes of 2 (ranks 0 1 | 2 3), root 3: 0 gets 0∘1 and 3 gets
//! 2∘3 through shared memory; 0 sends its node's result to 3, which
//! combines (0∘1)∘(2∘3).
//!
//! Order: as [`super::allreduce_hier`] (rank order where nodes hold
//! consecutive ranks; otherwise commutative operators only).
//!
//! Limitations: one representative per node. Memory: a vector at each
//! representative other than the root. Cost: node reduction + the
//! inter-node Reduce of `nodes` ranks.
//! Seed: none of its own; the stage between nodes runs the point-to-point
//! algorithms (seeds 000 and 004), the node stage seed 003's.

use super::{between_nodes_call, node_reduce, Part};
use crate::algos::node::NodeCall;
use crate::core::call::{CallDesc, GatherLayout};
use crate::exec::{Buffers, Combiner};
use crate::shm::team::Mismatch;

pub fn reduce(part: Part<'_, '_>, desc: &CallDesc, bufs: Buffers<'_>, c: &dyn Combiner) -> Result<(), Mismatch> {
    let Part { team, map, rank, inter, plan, .. } = part;
    let reps = map.representatives(Some(desc.root));
    let node = map.node_of[rank];
    let rep_local = map.local_of[reps[node]];
    let n = bufs.send.map_or(bufs.recv.len(), <[u8]>::len);
    let is_rep = reps[node] == rank;
    // A representative other than the root reduces its node into scratch.
    let mut node_result = if is_rep && rank != desc.root { vec![0u8; n] } else { Vec::new() };
    {
        let recv: &mut [u8] = if is_rep && rank != desc.root { &mut node_result } else { &mut *bufs.recv };
        let mut b = Buffers { send: bufs.send, recv, scratch: &mut *bufs.scratch };
        node_reduce(plan, team, &mut b, desc.unit, Some(rep_local), c)?;
    }
    if is_rep {
        let root_node = map.node_of[desc.root];
        let at_root = rank == desc.root;
        let d = between_nodes_call(desc, reps.len(), node, root_node, at_root, n);
        if at_root {
            inter.run(&d, &reps, &GatherLayout::default(), None, bufs.recv, c);
        } else {
            inter.run(&d, &reps, &GatherLayout::default(), Some(&node_result), &mut [], c);
        }
    }
    Ok(())
}

/// [`reduce`], as the registry runs it.
pub fn run(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) -> Result<(), Mismatch> {
    let (bufs, _, _) = call.into_reduction();
    reduce(part, desc, bufs, c)
}
