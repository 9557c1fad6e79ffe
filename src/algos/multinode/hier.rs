//! Node-aware compositions for communicators that span nodes: the node
//! layer within each node, one representative per node between nodes.
//!
//! - **Allreduce**: reduce within each node to its local rank 0; those
//!   representatives allreduce between nodes (a point-to-point algorithm
//!   chosen for a call of `nodes` ranks); each broadcasts within its node.
//! - **Reduce**: reduce within each node to its representative (the root
//!   on the root's node, local rank 0 elsewhere); the representatives
//!   reduce to the root.
//! - **Bcast**: the representatives (the root on its node) broadcast
//!   between nodes, then each within its node.
//! - **Gatherv**: each node gathers its ranks' blocks, packed in rank
//!   order, at its representative (the root on its node), which sends the
//!   node's blocks to the root in one message; the root puts every block
//!   in place.
//!
//! Trace, Allreduce over 2 nodes of 2 (ranks 0 1 | 2 3): 0 gets 0∘1 and 2
//! gets 2∘3 through shared memory; 0 and 2 exchange; 0 and 2 broadcast
//! the result to 1 and 3.
//!
//! Order: with nodes holding consecutive ranks (Topo::contiguous), node
//! results combine in rank order, so non-commutative operators are exact;
//! otherwise the check refuses them. Allreduce copies one result to
//! everyone, bitwise identical.
//!
//! Limitations: one representative per node (several: [`super::allreduce_dpml`];
//! pipelined: [`super::allreduce_salar`]). Memory: a vector at representatives (Reduce), the node's
//! blocks at Gatherv representatives. Cost: the node stages (see the node
//! algorithms) plus the inter-node algorithm's cost for `nodes` ranks.

use super::OneSided;
use crate::adapt::chunk::Tuners;
use crate::algos::node::{bcast, gatherv_shm as gatherv, reduce, Team};
use crate::core::call::{CallDesc, GatherLayout, Topo};
use crate::core::types::Coll;
use crate::exec::{Buffers, Combiner};

/// Above this many bytes the node stages reduce in partitions (zero copy
/// where allowed) rather than flat.
pub const NODE_FLAT_MAX: usize = 16 << 10;
/// Above this many bytes the node broadcast goes by zero copy.
pub const NODE_PIPELINE_MAX: usize = 64 << 10;

/// Where every rank of the communicator is: its node and its rank there.
pub struct NodeMap<'a> {
    pub node_of: &'a [usize],
    pub local_of: &'a [usize],
}

impl NodeMap<'_> {
    /// The communicator rank of local rank `local` of node `node`.
    pub fn rank_of(&self, node: usize, local: usize) -> usize {
        (0..self.node_of.len()).find(|&r| self.node_of[r] == node && self.local_of[r] == local).expect("a rank")
    }

    pub fn nodes(&self) -> usize {
        self.node_of.iter().copied().max().map_or(0, |n| n + 1)
    }

    /// The rank count of the smallest node.
    pub fn smallest_node(&self) -> usize {
        (0..self.nodes()).map(|n| self.node_of.iter().filter(|&&m| m == n).count()).min().unwrap_or(0)
    }

    /// The representative of every node for a call rooted at `root`: the
    /// root on its own node, local rank 0 elsewhere.
    pub fn representatives(&self, root: Option<usize>) -> Vec<usize> {
        (0..self.nodes())
            .map(|n| match root {
                Some(r) if self.node_of[r] == n => r,
                _ => self.rank_of(n, 0),
            })
            .collect()
    }
}

/// The inter-node stage: runs `desc` (a call whose ranks are the nodes'
/// representatives `reps`, communicator ranks) at this rank, one of the
/// representatives, with a point-to-point algorithm (Gatherv: linear, so
/// that only the root needs the layout).
pub trait BetweenNodes {
    fn run(
        &mut self,
        desc: &CallDesc,
        reps: &[usize],
        layout: &GatherLayout,
        send: Option<&[u8]>,
        recv: &mut [u8],
        combiner: &dyn Combiner,
    );

    /// The leaders' one-sided window of at least `bytes` (SALaR). Every
    /// rank of the communicator calls it at the same point (setting it up
    /// may be collective); a leader gets its window, the others `None`.
    fn one_sided(&mut self, leader: bool, bytes: usize) -> Option<&mut dyn OneSided>;
}

/// What the compositions remember of a communicator between calls.
#[derive(Debug, Default)]
pub struct Memo {
    pub salar: Tuners,
}

/// The node stage of a reduction: flat for small vectors, else
/// partitioned (zero copy where the system allows).
pub fn node_reduce(team: &mut Team<'_>, bufs: &mut Buffers<'_>, unit: usize, root: Option<usize>, c: &dyn Combiner) {
    let n = bufs.send.map_or(bufs.recv.len(), <[u8]>::len);
    if n <= NODE_FLAT_MAX {
        reduce::flat(team, bufs, unit, root, c)
    } else if team.peers.is_some()
        && bufs.scratch.len() >= reduce::zero_copy_scratch(team.size, team.state.memory.sizes.sub_chunk)
    {
        reduce::zero_copy(team, bufs, unit, root, c)
    } else {
        reduce::partition(team, bufs, unit, root, c)
    }
}

/// The node stage of a broadcast.
pub fn node_bcast(team: &mut Team<'_>, data: &mut [u8], root: usize) {
    if data.len() > NODE_PIPELINE_MAX && team.peers.is_some() {
        bcast::timed(team, data, root)
    } else {
        bcast::pipeline(team, data, root)
    }
}

/// The call the representatives make between nodes.
pub(super) fn between_nodes_call(
    desc: &CallDesc,
    nodes: usize,
    node: usize,
    root_node: usize,
    in_place: bool,
    bytes: usize,
) -> CallDesc {
    CallDesc {
        coll: desc.coll,
        rank: node,
        size: nodes,
        root: root_node,
        bytes,
        unit: desc.unit,
        commutative: desc.commutative,
        in_place,
        // Between nodes only point-to-point algorithms run.
        topo: Topo { nodes, ..Topo::default() },
    }
}

/// A rank's part in a composition.
pub struct Part<'a, 'b> {
    pub team: &'a mut Team<'b>,
    pub map: &'a NodeMap<'a>,
    /// This rank's communicator rank.
    pub rank: usize,
    pub inter: &'a mut dyn BetweenNodes,
    /// The algorithm's parameter values, in registry order.
    pub params: &'a [u64],
    /// PCOLL_LEADERS, if set.
    pub leaders: Option<usize>,
    pub memo: &'a mut Memo,
}

pub fn allreduce(part: Part<'_, '_>, desc: &CallDesc, mut bufs: Buffers<'_>, c: &dyn Combiner) {
    let Part { team, map, rank, inter, .. } = part;
    node_reduce(team, &mut bufs, desc.unit, Some(0), c);
    if team.rank == 0 {
        let reps = map.representatives(None);
        let d = between_nodes_call(desc, reps.len(), map.node_of[rank], 0, true, bufs.recv.len());
        inter.run(&d, &reps, &GatherLayout::default(), None, bufs.recv, c);
    }
    node_bcast(team, bufs.recv, 0);
}

pub fn reduce(part: Part<'_, '_>, desc: &CallDesc, bufs: Buffers<'_>, c: &dyn Combiner) {
    let Part { team, map, rank, inter, .. } = part;
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
        node_reduce(team, &mut b, desc.unit, Some(rep_local), c);
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
}

pub fn bcast(part: Part<'_, '_>, desc: &CallDesc, data: &mut [u8], c: &dyn Combiner) {
    let Part { team, map, rank, inter, .. } = part;
    let reps = map.representatives(Some(desc.root));
    let node = map.node_of[rank];
    if reps[node] == rank {
        let d = between_nodes_call(desc, reps.len(), node, map.node_of[desc.root], false, data.len());
        inter.run(&d, &reps, &GatherLayout::default(), None, &mut *data, c);
    }
    node_bcast(team, data, map.local_of[reps[node]]);
}

/// Published word: a rank's block length, for its representative.
const LENGTH: usize = 0;

/// Gatherv; `layout` is the root's (empty elsewhere), `recv` the root's
/// receive region.
pub fn gatherv(part: Part<'_, '_>, desc: &CallDesc, g: gatherv::Gather<'_>, c: &dyn Combiner) {
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
    );
    if rank != rep {
        return;
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
        staging[off..off + node_blocks.len()].copy_from_slice(&node_blocks);
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
}

/// Whether the compositions can run a call (the Allreduce/Reduce check
/// adds the order condition).
pub fn check(desc: &CallDesc) -> Result<(), &'static str> {
    if desc.topo.nodes < 2 {
        return Err("the communicator lies on one node");
    }
    if !desc.topo.shm {
        return Err("a node has no shared segment");
    }
    if desc.coll.is_reduction() && !desc.commutative && !desc.topo.contiguous {
        return Err("nodes do not hold consecutive ranks, so a non-commutative operator would combine out of order");
    }
    if desc.coll == Coll::Gatherv && 16 * desc.size > desc.topo.chunk {
        return Err("the layout does not fit a chunk area (raise PCOLL_SHM_CHUNK)");
    }
    Ok(())
}
