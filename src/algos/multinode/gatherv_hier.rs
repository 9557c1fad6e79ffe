//! Gatherv over several nodes: each node gathers its ranks' blocks,
//! packed in local-rank order, at its representative (the root on its
//! node, local rank 0 elsewhere) through the node's `shm` Gatherv; the
//! representatives send their node's blocks to the root in one message
//! each (a linear Gatherv between them: only the root knows the layout);
//! the root puts every block in place.
//!
//! Trace, 2 nodes of 2 (ranks 0 1 | 2 3), root 0: 2 gathers blocks 2 and
//! 3 through shared memory and sends them to 0 as one message, while 0
//! gathers 0 and 1; 0 copies 2's and 3's blocks to their places.
//!
//! Limitations: the layout fits a chunk area (16 bytes a rank). Memory:
//! the node's blocks at each representative, all other nodes' blocks in a
//! staging buffer at the root. Cost: the node Gatherv + `nodes - 1`
//! messages into the root + one copy of the other nodes' blocks.
//! Seed: 001's idea of few root connections (one per node instead of one
//! per rank), with the node stage in shared memory.

use super::{between_nodes_call, Part};
use crate::algos::node::gatherv_shm as gatherv;
use crate::algos::node::NodeCall;
use crate::core::call::{CallDesc, GatherLayout};
use crate::exec::Combiner;
use crate::shm::team::Mismatch;

/// Published word: a rank's block length, for its representative.
const LENGTH: usize = 0;

/// Gatherv; `layout` is the root's (empty elsewhere), `recv` the root's
/// receive region.
pub fn gatherv(part: Part<'_, '_>, desc: &CallDesc, g: gatherv::Gather<'_>, c: &dyn Combiner) -> Result<(), Mismatch> {
    let Part { team, map, rank, inter, .. } = part;
    let reps = map.representatives(Some(desc.root));
    let node = map.node_of[rank];
    let rep = reps[node];
    let rep_local = map.local_of[rep];
    // Step 1: every rank tells its representative its block's length.
    let own = if g.in_place { g.layout.blocks[rank].1 } else { g.send.len() };
    let s = team.next_step();
    team.writable(s);
    team.set_word(s, LENGTH, own as u64);
    team.publish(s);
    let mut lens = vec![0usize; team.size];
    if rank == rep {
        team.wait_all_ready(s);
        for (local, len) in lens.iter_mut().enumerate() {
            *len = team.word(local, s, LENGTH) as usize;
        }
    }
    team.finish(s);
    // Step 2: the node's blocks, packed in local-rank order, at the
    // representative (the root's own block included as sent).
    let mut packed = GatherLayout::default();
    let mut at = 0;
    for &len in &lens {
        packed.blocks.push((at, len));
        at += len;
    }
    let mut node_blocks = vec![0u8; at];
    let in_place_root = g.in_place && rank == rep;
    let root_block: Vec<u8> =
        if in_place_root { g.recv[g.layout.blocks[rank].0..][..own].to_vec() } else { Vec::new() };
    gatherv::run(
        team,
        &mut gatherv::Gather {
            send: if in_place_root { &root_block } else { g.send },
            recv: &mut node_blocks,
            layout: &packed,
            root: rep_local,
            in_place: false,
        },
        gatherv::Mode::Auto,
    )?;
    if rank != rep {
        return Ok(());
    }
    // Step 3: the node's blocks to the root, as one block each of a
    // Gatherv between representatives into the root's staging buffer.
    let root_node = map.node_of[desc.root];
    let nodes = reps.len();
    let mut staging_layout = GatherLayout::default();
    let mut staging = Vec::new();
    if rank == desc.root {
        let mut at = 0;
        for n in 0..nodes {
            let len: usize =
                (0..map.node_of.len()).filter(|&r| map.node_of[r] == n).map(|r| g.layout.blocks[r].1).sum();
            staging_layout.blocks.push((at, len));
            at += len;
        }
        staging = vec![0u8; at];
        let (off, _) = staging_layout.blocks[root_node];
        crate::exec::copy::copy(&mut staging[off..off + node_blocks.len()], &node_blocks);
    }
    let d = CallDesc {
        in_place: rank == desc.root,
        ..between_nodes_call(desc, nodes, node, root_node, false, node_blocks.len())
    };
    let (send, recv): (Option<&[u8]>, &mut [u8]) =
        if rank == desc.root { (None, &mut staging) } else { (Some(&node_blocks), &mut []) };
    inter.run(&d, &reps, &staging_layout, send, recv, c);
    if rank == desc.root {
        // Every block from its node's part of the staging buffer to its place.
        let mut cursor = vec![0usize; nodes];
        for (n, c) in cursor.iter_mut().enumerate() {
            *c = staging_layout.blocks[n].0;
        }
        let mut order: Vec<usize> = (0..map.node_of.len()).collect();
        order.sort_by_key(|&r| (map.node_of[r], map.local_of[r]));
        for r in order {
            let (off, len) = g.layout.blocks[r];
            let from = &mut cursor[map.node_of[r]];
            if !(g.in_place && r == rank) {
                crate::shm::stream::copy_out(
                    &mut g.recv[off..off + len],
                    &staging[*from..*from + len],
                    false,
                    team.settings.ahead,
                );
            }
            *from += len;
        }
    }
    Ok(())
}

/// [`gatherv()`], as the registry runs it.
pub fn run(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) -> Result<(), Mismatch> {
    gatherv(part, desc, call.into_gatherv(), c)
}
