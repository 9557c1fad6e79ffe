//! DPML (seed 003, the multi-leader design): Allreduce over several nodes
//! with `l` leaders per node, each owning one partition of the vector.
//!
//! 1. Every rank's vector is made available to its node: published in
//!    place for zero copy, or copied chunk by chunk into the segment.
//! 2. Leader `j` (local rank `j < l`) combines partition `j` of every
//!    local vector.
//! 3. The `l` leaders of a node run `l` concurrent Allreduces between
//!    nodes, leader `j` with the leaders `j` of the other nodes, each on
//!    its own partition (a point-to-point algorithm chosen for a call of
//!    `nodes` ranks and `n/l` bytes; the pairs of ranks never overlap, so
//!    the transfers cannot be confused).
//! 4. Every rank takes the finished partitions from the leaders (zero
//!    copy: the leaders write them into every local receive buffer).
//!
//! Trace, 2 nodes of 2 ranks, `l = 2`, vector `[a b]`: rank 0 (node 0,
//! leader 0) combines `a0∘a1`, rank 1 (leader 1) `b0∘b1`; likewise ranks 2
//! and 3 on node 1; ranks 0 and 2 allreduce partition `a`, ranks 1 and 3
//! partition `b`, at the same time; each node then shares both partitions.
//!
//! Order: within a node in local-rank order, between nodes in node order,
//! so with nodes of consecutive ranks the combination is in rank order
//! (the composition check refuses non-commutative operators otherwise).
//! Every rank copies the same partitions: bitwise identical results.
//!
//! Limitations: `l` is at most the smallest node's rank count (leaders
//! must pair up across nodes). Memory: zero copy uses `p + 2` sub-chunks
//! of scratch; copy-in uses the segment's chunk areas.
//!
//! Cost (zero copy, `N` nodes of `q` ranks, `n` bytes): intra-node
//! `(q-1)/l · n` bytes read and `q/l · n γ` combined per leader, then the
//! inter-node Allreduce of `n/l` bytes (Rabenseifner:
//! `2 log N α + 2 (N-1)/N (n/l) β + (N-1)/N (n/l) γ`) by `l` leaders at
//! once, then `(q-1)/l · n` bytes written per leader. Where one process
//! cannot drive the node's link, `l` streams move up to `l` times the data
//! per unit of time (the seed's reason for several leaders).

use super::{between_nodes_call, Part};
use crate::algos::node::reduction::{
    fold, fold_out, own_part, publish_vectors, slice_bytes, vector_len, zero_copy_scratch, INPUT, OUTPUT,
};
use crate::algos::node::NodeCall;
use crate::algos::node::Team;
use crate::algos::ParamSpec;
use crate::core::call::{CallDesc, GatherLayout};
use crate::exec::{Buffers, Combiner};
use crate::shm::team::Mismatch;

/// Concurrent streams one node's link is assumed to need before it
/// saturates: the default number of leaders when nothing says otherwise
/// (the seed measured gains up to a handful of leaders per node).
pub const LINK_STREAMS: usize = 4;

/// The number of leaders: the one asked for (the call's parameter, else
/// PCOLL_LEADERS), else [`LINK_STREAMS`], never more than the smallest
/// node's rank count.
pub fn leaders(asked: Option<usize>, smallest_node: usize) -> usize {
    asked.unwrap_or(LINK_STREAMS).clamp(1, smallest_node.max(1))
}

/// DPML Allreduce with `l` leaders per node (see [`leaders`]).
pub fn allreduce(
    part: Part<'_, '_>,
    desc: &CallDesc,
    mut bufs: Buffers<'_>,
    l: usize,
    c: &dyn Combiner,
) -> Result<(), Mismatch> {
    let Part { team, map, rank, inter, .. } = part;
    let nodes = map.nodes();
    let node = map.node_of[rank];
    let me = team.rank;
    // Leader `me`'s partners: the leaders `me` of every node.
    let partners: Vec<usize> = if me < l { (0..nodes).map(|n| map.rank_of(n, me)).collect() } else { Vec::new() };
    let mut between = |partition: &mut [u8]| {
        let d = between_nodes_call(desc, nodes, node, 0, true, partition.len());
        inter.run(&d, &partners, &GatherLayout::default(), None, partition, c);
    };
    if team.peers.is_some() && bufs.scratch.len() >= zero_copy_scratch(team.size, team.state.memory.sizes.sub_chunk) {
        zero_copy(team, &mut bufs, desc.unit, l, &mut between, c)
    } else {
        copy_in(team, &mut bufs, desc.unit, l, &mut between, c);
        Ok(())
    }
}

/// Leaders read their partition of every local vector straight from the
/// peers, and write the finished partition straight into every peer's
/// receive buffer.
fn zero_copy(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    l: usize,
    between: &mut dyn FnMut(&mut [u8]),
    c: &dyn Combiner,
) -> Result<(), Mismatch> {
    let peers = team.peers.expect("zero copy needs peer memory access");
    let n = vector_len(bufs);
    let (me, q) = (team.rank, team.size);
    let s = publish_vectors(team, bufs)?;
    if me < l {
        let mine = slice_bytes(me, l, n, unit);
        let (lo, hi) = (mine.start, mine.end);
        // Combine in sub-chunks.
        let sub = (team.state.memory.sizes.sub_chunk / unit).max(1) * unit;
        let (own, remote) = bufs.scratch.split_at_mut(sub);
        let mut at = lo;
        while at < hi {
            let len = sub.min(hi - at);
            for r in (0..q).filter(|&r| r != me) {
                peers.read(r, team.word(r, s, INPUT) as usize + at, &mut remote[r * sub..r * sub + len]);
            }
            let mine = own_part(bufs.send, bufs.recv, own, at, len);
            let part = |r: usize| if r == me { mine } else { &remote[r * sub..r * sub + len] };
            fold_out(q, part, &mut bufs.recv[at..at + len], unit, team.settings.ahead, c);
            at += len;
        }
        between(&mut bufs.recv[lo..hi]);
        for r in (0..q).filter(|&r| r != me) {
            peers.write(r, team.word(r, s, OUTPUT) as usize + lo, &bufs.recv[lo..hi]);
        }
    }
    // Every leader has read the inputs and written its partition
    // everywhere: all buffers are final.
    let t = team.next_step();
    team.finish(s);
    team.publish(t);
    team.wait_all_ready(t);
    team.finish(t);
    Ok(())
}

/// Chunk by chunk through the segment: everyone copies in, leaders combine
/// their partition of the chunk into their other area and allreduce it
/// between nodes there, everyone copies the partitions out.
fn copy_in(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    l: usize,
    between: &mut dyn FnMut(&mut [u8]),
    c: &dyn Combiner,
) {
    let n = vector_len(bufs);
    let chunk = crate::algos::node::reduction::chunk_len(team, unit);
    let (me, q) = (team.rank, team.size);
    let mut off = 0;
    while off < n {
        let len = chunk.min(n - off);
        let bytes = |j: usize| slice_bytes(j, l, len, unit);
        let s = team.next_step();
        let input = bufs.send.unwrap_or(&*bufs.recv);
        team.put(s, &input[off..off + len]);
        team.publish(s);
        let t = team.next_step();
        if me < l {
            team.wait_all_ready(s);
            team.writable(t);
            let mine = bytes(me);
            let out = &mut team.my_area_bytes(t, len)[mine.clone()];
            fold(q, |r| &team.area_bytes(r, s, len)[mine.clone()], out, c);
            team.finish(s);
            between(out);
        } else {
            team.finish(s);
        }
        team.publish(t);
        for j in 0..l {
            team.wait_ready(j, t);
            let part = bytes(j);
            let result = &team.area_bytes(j, t, len)[part.clone()];
            let dst = &mut bufs.recv[off + part.start..off + part.end];
            crate::shm::stream::copy_out(dst, result, false, team.settings.ahead);
        }
        team.finish(t);
        off += len;
    }
}

/// DPML's parameter.
pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "leaders",
    min: 0,
    max: 4096,
    default: 0,
    help: "leaders per node (0: PCOLL_LEADERS, else 4; at most the smallest node's rank count)",
}];

/// DPML, as the registry runs it.
pub fn run(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) -> Result<(), Mismatch> {
    let (bufs, _, _) = call.into_reduction();
    let asked = match part.params.first() {
        Some(&l) if l > 0 => Some(l as usize),
        _ => part.leaders,
    };
    let l = leaders(asked, part.map.smallest_node());
    allreduce(part, desc, bufs, l, c)
}
