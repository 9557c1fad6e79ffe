//! SALaR (seed 003, the large-message design): Allreduce over several
//! nodes as a pipeline of chunks, with one-sided transfers between nodes
//! and a chunk size that tunes itself.
//!
//! One leader per node (local rank 0). The vector is cut into chunks; for
//! chunk `i`, in one iteration of the pipeline:
//! - the other ranks of the node (the *reducers*) combine chunk `i`
//!   through the segment, each a slice of it (seed 003: the ppn-1
//!   non-leaders share the reduction; a leader alone on its node does it);
//! - meanwhile the leader finishes the inter-node Allreduce of chunk
//!   `i-1`, then collects chunk `i`'s node result into its window;
//! - the leader broadcasts finished chunk `i-1` in the node.
//!
//! Between nodes (the leaders' window, created once per communicator and
//! reused, so registration is paid once): node `k`'s leader owns block
//! `k` of the chunk; it gets block `k` of every other leader's node result
//! (peers in the order `k+1, k+2, ...`, so that no leader is everyone's
//! first target), combines in node order and puts the finished block into
//! every other leader's result area. Two fences per chunk: one exposes the
//! node results (and completes the previous chunk's puts), one completes
//! the gets.
//!
//! Chunk size (adaptive, seed 003's heuristic): per communicator and size
//! class (power of two of the vector's bytes), start at
//! [`crate::adapt::chunk::START_CHUNK`],
//! double while the time per byte improves, halve once at the first
//! regression and keep that. Communicator rank 0 measures and decides;
//! its decision for the next call travels with this call's data (a word
//! in the leaders' windows, then in the node's last step), so every rank
//! uses the same chunk size without a message of its own. The changes are
//! logged at info level. A fixed chunk (`salar:chunk=BYTES`) turns this
//! off.
//!
//! Trace, 2 nodes of 2 ranks, 2 chunks: rank 1 combines chunk 0 of ranks
//! 0 and 1 while rank 0 waits; rank 0 exposes it, gets block 0 of node 1's
//! result, combines, puts; rank 1 combines chunk 1 meanwhile; after the
//! next fence rank 0 has chunk 0 of the result and broadcasts it in the
//! node while chunk 1 goes between nodes.
//!
//! Order: in local-rank order within nodes, node order between them (rank
//! order with nodes of consecutive ranks). Every rank copies the same
//! blocks: bitwise identical results.
//!
//! Where the leaders cannot make the window (the host MPI refuses it at
//! one of them; all ranks learn it at the same call), that call runs
//! [`super::allreduce_hier`], and [`check`] turns SALaR down for the
//! communicator's later calls.
//!
//! Limitations: the chunk fits a segment chunk area (PCOLL_SHM_CHUNK).
//! Memory: the window, three chunk areas per leader. Cost per chunk of `m`
//! bytes, `N` nodes of `q` ranks, after the pipeline fills: the larger of
//! the node stage `(m + q m/(q-1) γ)` and the leader's stage
//! `2 fence + (N-1)/N m (β + γ) + (N-1)/N m β + 3 m copy`.

use crate::shm::team::Mismatch;
use std::time::Instant;

use super::{allreduce_hier, Memo, NoWindow, NodeMap, OneSided, Part};
use crate::adapt::chunk::ChunkSearch;
use crate::algos::node::reduction::{chunk_len, fold, slice_bytes, vector_len};
use crate::algos::node::NodeCall;
use crate::algos::node::Team;
use crate::algos::ParamSpec;
use crate::core::call::CallDesc;
use crate::exec::{Buffers, Combiner};

/// Where things are in a leader's window, for chunks of at most `chunk`
/// bytes among `nodes` leaders of elements of `unit` bytes: the node's
/// result (`input`), the blocks fetched from the other leaders
/// (`gathered`, one block each), the finished chunk (`output`), and the
/// word with the next call's chunk size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowLayout {
    pub input: usize,
    pub gathered: usize,
    pub output: usize,
    pub next_chunk: usize,
    pub bytes: usize,
    /// Bytes reserved per fetched block.
    block: usize,
}

impl WindowLayout {
    pub fn new(chunk: usize, nodes: usize, unit: usize) -> WindowLayout {
        let block = (chunk / unit).div_ceil(nodes) * unit;
        let gathered = chunk;
        let output = gathered + nodes * block;
        let next_chunk = output + chunk;
        WindowLayout { input: 0, gathered, output, next_chunk, bytes: next_chunk + 8, block }
    }
}

/// Published word of the node's last step: the next call's chunk size.
const NEXT_CHUNK: usize = 0;

/// SALaR Allreduce at communicator rank `rank`, with the leader's `window`
/// (`None` at the other ranks) laid out as `layout`. `fixed` is a chunk
/// size that turns the tuning off.
#[allow(clippy::too_many_arguments)]
fn allreduce(
    team: &mut Team<'_>,
    map: &NodeMap<'_>,
    rank: usize,
    memo: &mut Memo,
    desc: &CallDesc,
    bufs: Buffers<'_>,
    (window, layout): (Option<&mut dyn OneSided>, WindowLayout),
    fixed: Option<usize>,
    c: &dyn Combiner,
) {
    let started = Instant::now();
    let unit = desc.unit;
    let n = vector_len(&bufs);
    let max_chunk = chunk_len(team, unit);
    let nodes = map.nodes();
    let state = memo.salar.class(n, max_chunk);
    let chunk = (fixed.unwrap_or(state.next).min(max_chunk) / unit).max(1) * unit;
    // Rank 0 decides the next call's chunk before this call's data moves.
    let decides = rank == 0;
    let next = if decides {
        match fixed {
            Some(_) => chunk,
            None => {
                let search = state.search.get_or_insert_with(|| ChunkSearch::new(chunk, max_chunk));
                if let Some((used, secs_per_byte)) = state.pending.take() {
                    if let Some(change) = search.observe(used, secs_per_byte) {
                        log::info!("allreduce salar, {n} B ({} ranks on {nodes} nodes): {change}", desc.size);
                    }
                }
                search.proposal()
            }
        }
    } else {
        0
    };
    let pipe = Pipeline { unit, n, chunk, nodes, node: map.node_of[rank], decider: map.node_of[0], layout };
    let next = match window {
        Some(window) => pipe.leader(team, bufs, window, next, c),
        None => pipe.reducer(team, bufs, c),
    };
    let state = memo.salar.class(n, max_chunk);
    state.next = next;
    if decides && fixed.is_none() {
        state.pending = Some((chunk, started.elapsed().as_secs_f64() / n as f64));
    }
}

/// One call's shape, the same at every rank.
struct Pipeline {
    unit: usize,
    n: usize,
    chunk: usize,
    nodes: usize,
    /// This rank's node, and the node of the rank that decides.
    node: usize,
    decider: usize,
    layout: WindowLayout,
}

impl Pipeline {
    fn chunks(&self) -> usize {
        self.n.div_ceil(self.chunk)
    }

    /// Offset and length of chunk `i`.
    fn chunk(&self, i: usize) -> (usize, usize) {
        let off = i * self.chunk;
        (off, self.chunk.min(self.n - off))
    }

    /// Step A of chunk `i`: this rank copies its part of the input into
    /// its area and publishes it. Returns the step.
    fn copy_in(&self, team: &mut Team<'_>, input: &[u8], i: usize) -> u64 {
        let (off, len) = self.chunk(i);
        let a = team.next_step();
        team.put(a, &input[off..off + len]);
        team.publish(a);
        a
    }

    /// Bytes `lo..hi` of part `j` of `parts` of a chunk of `len` bytes.
    fn part(&self, j: usize, parts: usize, len: usize) -> (usize, usize) {
        let bytes = slice_bytes(j, parts, len, self.unit);
        (bytes.start, bytes.end)
    }

    /// The leader's side (local rank 0). Steps per chunk `i`: A_i (every
    /// rank's input), B_i (the reducers' slices), C_(i-1) (the result);
    /// returns the next call's chunk size.
    fn leader(
        &self,
        team: &mut Team<'_>,
        bufs: Buffers<'_>,
        net: &mut dyn OneSided,
        next: usize,
        c: &dyn Combiner,
    ) -> usize {
        let Buffers { send, recv, .. } = bufs;
        let q = team.size;
        let w = self.layout;
        let chunks = self.chunks();
        let mut next = next;
        for i in 0..=chunks {
            if i < chunks {
                let a = self.copy_in(team, send.unwrap_or(&*recv), i);
                team.finish(a);
            }
            if i >= 1 {
                // Chunk i-1 between nodes: its gets complete, then this
                // node's block is combined and put everywhere.
                net.fence();
                self.combine_and_put(net, self.chunk(i - 1).1, c);
            }
            if i < chunks {
                let (off, len) = self.chunk(i);
                let b = team.next_step();
                team.publish(b);
                let input = &mut net.local()[w.input..w.input + len];
                if q == 1 {
                    crate::exec::copy::copy(input, &send.unwrap_or(&*recv)[off..off + len]);
                } else {
                    for r in 1..q {
                        team.wait_ready(r, b);
                        let (lo, hi) = self.part(r - 1, q - 1, len);
                        crate::exec::copy::copy(&mut input[lo..hi], &team.area_bytes(r, b, len)[lo..hi]);
                    }
                }
                team.finish(b);
                // Exposes chunk i's node result (and completes chunk
                // i-1's puts), then fetches this node's block of it.
                net.fence();
                self.get_blocks(net, len);
            } else {
                if self.node == self.decider {
                    net.local()[w.next_chunk..w.next_chunk + 8].copy_from_slice(&(next as u64).to_le_bytes());
                    for k in (1..self.nodes).map(|d| (self.node + d) % self.nodes) {
                        net.put(k, w.next_chunk, w.next_chunk, 8);
                    }
                }
                net.fence();
                let word = &net.local()[w.next_chunk..w.next_chunk + 8];
                next = u64::from_le_bytes(word.try_into().expect("8 bytes")) as usize;
            }
            if i >= 1 {
                let (off, len) = self.chunk(i - 1);
                let cstep = team.next_step();
                team.writable(cstep);
                let result = &net.local()[w.output..w.output + len];
                team.put(cstep, result);
                crate::shm::stream::copy_out(&mut recv[off..off + len], result, false, team.settings.ahead);
                if i == chunks {
                    team.set_word(cstep, NEXT_CHUNK, next as u64);
                }
                team.publish(cstep);
                team.finish(cstep);
            }
        }
        next
    }

    /// Gets this node's block of chunk (of `len` bytes) from every other
    /// leader's node result, in load-balanced order.
    fn get_blocks(&self, net: &mut dyn OneSided, len: usize) {
        let w = self.layout;
        let (lo, hi) = self.part(self.node, self.nodes, len);
        for k in (1..self.nodes).map(|d| (self.node + d) % self.nodes) {
            if hi > lo {
                net.get(k, w.input + lo, w.gathered + k * w.block, hi - lo);
            }
        }
    }

    /// Combines this node's block in node order into the output area and
    /// puts it into every other leader's output area.
    fn combine_and_put(&self, net: &mut dyn OneSided, len: usize, c: &dyn Combiner) {
        let w = self.layout;
        let (lo, hi) = self.part(self.node, self.nodes, len);
        if hi == lo {
            return;
        }
        let (head, tail) = net.local().split_at_mut(w.output);
        let part = |k: usize| {
            if k == self.node {
                &head[w.input + lo..w.input + hi]
            } else {
                &head[w.gathered + k * w.block..][..hi - lo]
            }
        };
        fold(self.nodes, part, &mut tail[lo..hi], c);
        for k in (1..self.nodes).map(|d| (self.node + d) % self.nodes) {
            net.put(k, w.output + lo, w.output + lo, hi - lo);
        }
    }

    /// A reducer's side (local ranks 1..): combines its slice of each
    /// chunk, copies each finished chunk out; returns the next call's
    /// chunk size, which the leader publishes with the last chunk.
    fn reducer(&self, team: &mut Team<'_>, bufs: Buffers<'_>, c: &dyn Combiner) -> usize {
        let Buffers { send, recv, .. } = bufs;
        let (me, q) = (team.rank, team.size);
        let chunks = self.chunks();
        let mut next = 0;
        for i in 0..=chunks {
            if i < chunks {
                let a = self.copy_in(team, send.unwrap_or(&*recv), i);
                let len = self.chunk(i).1;
                team.wait_all_ready(a);
                let b = team.next_step();
                team.writable(b);
                let (lo, hi) = self.part(me - 1, q - 1, len);
                let out = &mut team.my_area_bytes(b, len)[lo..hi];
                fold(q, |r| &team.area_bytes(r, a, len)[lo..hi], out, c);
                team.finish(a);
                team.publish(b);
                team.finish(b);
            }
            if i >= 1 {
                let (off, len) = self.chunk(i - 1);
                let cstep = team.next_step();
                team.wait_ready(0, cstep);
                let ahead = team.settings.ahead;
                crate::shm::stream::copy_out(&mut recv[off..off + len], team.area_bytes(0, cstep, len), false, ahead);
                if i == chunks {
                    next = team.word(0, cstep, NEXT_CHUNK) as usize;
                }
                team.finish(cstep);
                team.publish(cstep);
            }
        }
        next
    }
}

/// SALaR's parameter.
pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "chunk",
    min: 0,
    max: 64 << 20,
    default: 0,
    help: "bytes per pipeline chunk (0: adaptive; at most PCOLL_SHM_CHUNK)",
}];

/// SALaR, as the registry runs it.
pub fn run(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) -> Result<(), Mismatch> {
    let Part { team, map, rank, inter, params, leaders, plan, memo } = part;
    let layout = WindowLayout::new(chunk_len(team, desc.unit), map.nodes(), desc.unit);
    let fixed = params.first().filter(|&&b| b > 0).map(|&b| b as usize);
    match inter.one_sided(team.rank == 0, layout.bytes) {
        Ok(window) => {
            let (bufs, _, _) = call.into_reduction();
            allreduce(team, map, rank, memo, desc, bufs, (window, layout), fixed, c);
            Ok(())
        }
        Err(NoWindow) => {
            allreduce_hier::run(Part { team, map, rank, inter, params, leaders, plan, memo }, desc, call, c)
        }
    }
}

/// Whether SALaR can run a call: as every composition, and while the
/// leaders can make their window.
pub fn check(desc: &CallDesc) -> Result<(), &'static str> {
    super::check(desc)?;
    match desc.topo.one_sided {
        true => Ok(()),
        false => Err("the node leaders could not make a one-sided window on this communicator"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_areas_do_not_overlap() {
        for (chunk, nodes, unit) in [(64 << 10, 3, 8), (136, 5, 8), (100, 7, 4), (8, 9, 8)] {
            let w = WindowLayout::new(chunk, nodes, unit);
            // Every node's block of a chunk fits its gathered slot.
            for k in 0..nodes {
                assert!(slice_bytes(k, nodes, chunk, unit).len() <= w.block);
            }
            assert!(w.gathered >= w.input + chunk);
            assert!(w.output >= w.gathered + nodes * w.block);
            assert!(w.next_chunk >= w.output + chunk);
            assert_eq!(w.bytes, w.next_chunk + 8);
        }
    }
}
