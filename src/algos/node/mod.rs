//! Node algorithms: collectives among the ranks of one node through the
//! shared segment (and, for large messages, straight between their
//! buffers), built on the node primitives of [`crate::shm`] and adapting
//! at run time through [`crate::adapt`]. Each file is one algorithm (the
//! Reduce ones serve Allreduce too); [`reduction`] holds what the
//! reductions share. The registry holds each algorithm's [`NodeFn`].
//!
//! Everything here is plain memory, so tests map a segment in a heap
//! buffer and run ranks as threads.

pub mod bcast_host_runs;
pub mod bcast_pipeline;
pub mod bcast_queue;
pub mod bcast_queue_zcopy;
pub mod bcast_timed;
pub mod bcast_zcopy;
pub mod gatherv_shm;
pub mod host_runs;
pub mod reduce_flat;
pub mod reduce_flat_zcopy;
pub mod reduce_partition;
pub mod reduce_window;
pub mod reduce_zcopy;
pub mod reduction;
pub mod window;

use crate::adapt::choice::TimedChoice;
use crate::adapt::stores::ReaderChoice;
use crate::adapt::Adaptation;
use crate::core::call::CallDesc;
use crate::exec::{Buffers, Combiner};
use crate::shm::team::Mismatch;
use std::time::Duration;

/// One rank's view of its node for one call, with what the node
/// algorithms keep between calls.
pub type Team<'a> = crate::shm::team::Team<'a, NodeMemory>;

/// What one rank's node algorithms keep between calls, per communicator.
#[derive(Debug)]
pub struct NodeMemory {
    /// Seed 002's queue: its fragment bytes (0: the paper's model) and
    /// notification tree.
    pub queue: QueueSettings,
    /// Sizes the algorithms cut their work into.
    pub sizes: Sizes,
    /// Seed 002's queue operations so far (the same on every rank).
    pub queue_ops: QueueOps,
    /// The window's last call and this rank's window calls so far.
    pub window_calls: window::WindowCalls,
    /// Flat reduction: the ranks' chunks copied out of their slots' lines.
    pub line_copies: Vec<u8>,
    /// Gatherv: where this rank's last block came from, as a non-root (a
    /// block from the same buffer again is taken to be in its caches).
    pub gatherv_sent: usize,
    /// Gatherv: where this rank's last receive buffer was, as root (the
    /// same again is taken to be hot).
    pub gatherv_received: usize,
    /// Gatherv's runs of calls back to back, which spread this rank's
    /// steps through its chunk areas.
    pub gatherv_runs: host_runs::OwnRuns,
    /// Bcast: where this rank's last message was, in either role (a root
    /// that broadcasts from the same buffer again takes it to be hot).
    pub bcast_buffer: usize,
    /// Reduce and Allreduce: where this rank's last input vector was (the
    /// same again is taken to be hot).
    pub reduction_input: usize,
    /// Gatherv's timings of its owners' routes, as root (classes from
    /// the store choices' [`Adaptation::from`]).
    pub gatherv_route: ReaderChoice<gatherv_shm::Route>,
    /// The same for blocks sent from the buffer their owner sent the last
    /// one from (hot).
    pub gatherv_hot_route: ReaderChoice<gatherv_shm::Route>,
    /// Bcast's timings of its methods, as root (from
    /// [`Sizes::bcast_timed_from`] bytes).
    pub bcast_method: TimedChoice<bcast_timed::Method>,
    /// Bcast's timings of the queue and zero copy, as root (below
    /// [`Sizes::bcast_timed_from`] bytes).
    pub bcast_way: TimedChoice<bcast_timed::Way>,
    /// The same for messages the root broadcasts from the buffer of its
    /// last Bcast (hot).
    pub bcast_hot_way: TimedChoice<bcast_timed::Way>,
    /// Reduce's and Allreduce's timings of flat and zero copy on hot
    /// buffers, on rank 0 (from [`reduce_flat_zcopy::TIMED_FROM`] bytes).
    pub reduction_way: TimedChoice<reduce_flat_zcopy::Way>,
    /// Reduce's and Allreduce's runs of calls, flat or voting, agreed
    /// with rank 0.
    pub reduction_runs: reduce_flat_zcopy::Runs,
    /// Whether this rank's reductions come back to back, where their
    /// algorithm's host way takes only such calls.
    pub reduction_pace: host_runs::Pace,
    /// Bcast's runs of calls, where its algorithm hands runs back to back
    /// to the host.
    pub bcast_runs: host_runs::HostRuns,
    /// Whether this rank's Bcasts come back to back, there.
    pub bcast_pace: host_runs::Pace,
    /// What the run-time choices have learnt.
    pub adaptation: Adaptation,
}

impl Default for NodeMemory {
    /// A communicator's first memory with the default settings.
    fn default() -> Self {
        NodeMemory {
            queue: QueueSettings::default(),
            sizes: Sizes::default(),
            queue_ops: QueueOps::default(),
            window_calls: window::WindowCalls::default(),
            line_copies: Vec::new(),
            gatherv_sent: 0,
            gatherv_received: 0,
            gatherv_runs: host_runs::OwnRuns::default(),
            bcast_buffer: 0,
            reduction_input: 0,
            gatherv_route: ReaderChoice::new(crate::adapt::stores::ADAPT_FROM),
            gatherv_hot_route: gatherv_shm::hot_route_choice(crate::adapt::stores::ADAPT_FROM),
            bcast_method: TimedChoice::new(bcast_timed::TIMED_FROM),
            bcast_way: bcast_timed::way_choice(bcast_timed::TIMED_FROM),
            bcast_hot_way: bcast_timed::way_choice(bcast_timed::TIMED_FROM).bounded(),
            reduction_way: TimedChoice::paying_changes(reduce_flat_zcopy::TIMED_FROM),
            reduction_runs: reduce_flat_zcopy::Runs::default(),
            reduction_pace: host_runs::Pace::default(),
            bcast_runs: host_runs::HostRuns::default(),
            bcast_pace: host_runs::Pace::default(),
            adaptation: Adaptation::default(),
        }
    }
}

impl AsRef<Adaptation> for NodeMemory {
    fn as_ref(&self) -> &Adaptation {
        &self.adaptation
    }
}

impl AsMut<Adaptation> for NodeMemory {
    fn as_mut(&mut self) -> &mut Adaptation {
        &mut self.adaptation
    }
}

/// Whether `buffer` is where this rank's last call of the kind `last`
/// remembers was (its lines then taken to be in this rank's caches);
/// remembers `buffer` for the next.
pub fn same_buffer_again(last: &mut usize, buffer: *const u8) -> bool {
    std::mem::replace(last, buffer as usize) == buffer as usize
}

impl NodeMemory {
    /// A communicator's first memory: nothing learnt yet.
    pub fn new(queue: QueueSettings, sizes: Sizes, adapt: bool) -> NodeMemory {
        NodeMemory {
            queue,
            sizes,
            bcast_method: TimedChoice::new(sizes.bcast_timed_from),
            bcast_way: bcast_timed::way_choice(sizes.bcast_timed_from),
            bcast_hot_way: bcast_timed::way_choice(sizes.bcast_timed_from).bounded(),
            adaptation: Adaptation::new(
                adapt,
                crate::adapt::stores::ADAPT_FROM,
                crate::adapt::stores::ALLREDUCE_ADAPT_FROM,
            ),
            ..NodeMemory::default()
        }
    }

    /// The root's choice of Bcast's way for `hot` messages (from the
    /// buffer of its last Bcast) or for the others.
    pub fn bcast_way(&mut self, hot: bool) -> &mut TimedChoice<bcast_timed::Way> {
        if hot {
            &mut self.bcast_hot_way
        } else {
            &mut self.bcast_way
        }
    }

    /// The choices settled by timing, a line each, for the log.
    pub fn summary(&self) -> Vec<String> {
        let mut lines = self.adaptation.summary();
        lines.extend(
            self.gatherv_route.summary("blocks").into_iter().map(|l| format!("shm Gatherv route as root: {l}")),
        );
        lines.extend(
            self.gatherv_hot_route
                .summary("blocks")
                .into_iter()
                .map(|l| format!("shm Gatherv route of hot blocks as root: {l}")),
        );
        let spread = self.gatherv_runs.spread_calls;
        if spread > 0 {
            lines.push(format!(
                "shm Gatherv: {spread} calls back to back or from the last buffers, their steps spread through the chunk areas"
            ));
        }
        let bcast = self.bcast_way.summary("messages").into_iter().chain(self.bcast_method.summary("messages"));
        lines.extend(bcast.map(|l| format!("shm Bcast as root: {l}")));
        lines.extend(
            self.bcast_hot_way
                .summary("messages")
                .into_iter()
                .map(|l| format!("shm Bcast of hot messages as root: {l}")),
        );
        let window::WindowCalls { bcasts, gathers, allreduces, reduces, .. } = self.window_calls;
        if bcasts > 0 {
            lines.push(format!("shm Bcast: {bcasts} hot messages through the window (their root read the last one)"));
        }
        if gathers > 0 {
            lines.push(format!(
                "shm Gatherv: {gathers} hot blocks through the window (2 ranks, their owner read the last one)"
            ));
        }
        if allreduces > 0 {
            lines.push(format!("shm_window: {allreduces} Allreduces through the window (2 ranks)"));
        }
        if reduces > 0 {
            lines.push(format!(
                "shm_window: {reduces} Reduces through the window (2 ranks, the non-root did not write the last one)"
            ));
        }
        lines.extend(self.reduction_way.summary("vectors").into_iter().map(|l| format!("shm_flat_zcopy: {l}")));
        let flat_runs = self.reduction_runs.flat_without_vote;
        if flat_runs > 0 {
            lines.push(format!("shm_flat_zcopy: {flat_runs} calls flat without a vote (rank 0's timings favour flat)"));
        }
        let spread = self.reduction_runs.spread_calls;
        if spread > 0 {
            lines.push(format!(
                "shm_flat_zcopy: {spread} calls flat back to back, their steps spread through the chunk areas"
            ));
        }
        let host_runs = self.reduction_runs.host.by_host_calls;
        if host_runs > 0 {
            lines.push(format!(
                "shm_flat_ring, shm_flat_binomial: {host_runs} calls on hot vectors by their schedule over the host MPI"
            ));
        }
        let bcast_host_runs = self.bcast_runs.by_host_calls;
        if bcast_host_runs > 0 {
            lines.push(format!(
                "shm_binomial, shm_queue_binomial: {bcast_host_runs} Bcasts back to back by the binomial tree over the host MPI"
            ));
        }
        lines
    }
}

/// Seed 002's queue operations (a set taken and filled) so far, and the
/// set of the last one: the same on every rank of the communicator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueOps {
    pub count: u64,
    pub last_set: usize,
}

/// Seed 002's queue broadcast: fragment bytes (0: the paper's model) and
/// notification tree (PCOLL_SHM_FRAGMENT, PCOLL_SHM_TREE).
#[derive(Clone, Copy, Debug)]
pub struct QueueSettings {
    pub fragment: usize,
    pub tree: bcast_queue::Tree,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings { fragment: 0, tree: bcast_queue::Tree::Kary(4) }
    }
}

/// Sizes the node algorithms cut their work into and choose their methods
/// by; the same on every rank of a node (the library takes them from
/// `ShmConfig::node_sizes` in select).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Zero-copy Reduce: bytes of a sub-chunk, per peer in scratch
    /// ([`reduction::SUB_CHUNK`] by default).
    pub sub_chunk: usize,
    /// Flat Reduce: the least bytes of a chunk
    /// ([`reduce_flat::REDUCE_CHUNK_FLOOR`]).
    pub reduce_chunk_floor: usize,
    /// Direct Gatherv: bytes of the pieces that owner and root claim
    /// ([`gatherv_shm::PIECE`]).
    pub gatherv_piece: usize,
    /// Gatherv's auto mode: the largest block that goes through its
    /// owner's area ([`gatherv_shm::COPY_IN_UP_TO`], PCOLL_SHM_GATHERV_COPY_IN).
    pub gatherv_copy_in_up_to: usize,
    /// Gatherv's auto mode with timed routes: the largest hot block that
    /// may go through its owner's area ([`gatherv_shm::HOT_COPY_IN_UP_TO`],
    /// PCOLL_SHM_GATHERV_HOT_COPY_IN).
    pub gatherv_hot_copy_in_up_to: usize,
    /// Gatherv at 2 ranks: the least hot block that goes through the
    /// window ([`gatherv_shm::WINDOW_FROM`]).
    pub gatherv_window_from: usize,
    /// `shm_pipeline` Bcast at 2 ranks: the least hot message that goes
    /// through the window ([`bcast_pipeline::WINDOW_FROM`],
    /// PCOLL_SHM_PIPELINE_WINDOW; 0: none).
    pub pipeline_window_from: usize,
    /// `shm` Bcast: message bytes from which the root times its methods
    /// ([`bcast_timed::TIMED_FROM`], PCOLL_SHM_BCAST_TIMED).
    pub bcast_timed_from: usize,
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes {
            sub_chunk: reduction::SUB_CHUNK,
            reduce_chunk_floor: reduce_flat::REDUCE_CHUNK_FLOOR,
            gatherv_piece: gatherv_shm::PIECE,
            gatherv_copy_in_up_to: gatherv_shm::COPY_IN_UP_TO,
            gatherv_hot_copy_in_up_to: gatherv_shm::HOT_COPY_IN_UP_TO,
            gatherv_window_from: gatherv_shm::WINDOW_FROM,
            pipeline_window_from: bcast_pipeline::WINDOW_FROM,
            bcast_timed_from: bcast_timed::TIMED_FROM,
        }
    }
}

/// A schedule over the host MPI that a node algorithm may hand a call to
/// (`shm_flat_ring`'s hot runs): the same call, on every rank of the node
/// at once.
pub trait HostWay {
    /// Runs the call on `bufs` (their scratch as large as the dispatcher
    /// made it for this way). A failure of the host's transport stays
    /// with the dispatcher, which reports the host's code.
    fn run(&mut self, bufs: &mut Buffers<'_>);
    /// `None` where the way takes every hot call; else it takes only calls
    /// back to back (it pays by pipelining them): those that start within
    /// this time of the end of the same rank's last call.
    fn back_to_back_within(&self) -> Option<Duration>;
}

/// One call to a node algorithm: the collective's buffers, in node ranks.
pub enum NodeCall<'a> {
    /// Reduce (`root` the node rank of the root) or Allreduce (`None`);
    /// `host`, where the algorithm may hand hot calls to the host.
    Reduce {
        bufs: Buffers<'a>,
        unit: usize,
        root: Option<usize>,
        host: Option<&'a mut dyn HostWay>,
    },
    /// Bcast of the whole of `data` (every rank's message); `host`, where
    /// the algorithm may hand calls to the host.
    Bcast {
        data: &'a mut [u8],
        root: usize,
        host: Option<&'a mut dyn HostWay>,
    },
    Gatherv(gatherv_shm::Gather<'a>),
}

impl<'a> NodeCall<'a> {
    /// A Reduce's or an Allreduce's buffers, element bytes and node root.
    pub fn into_reduction(self) -> (Buffers<'a>, usize, Option<usize>) {
        let NodeCall::Reduce { bufs, unit, root, .. } = self else { mismatch() };
        (bufs, unit, root)
    }

    /// A Bcast of `data` from node rank `root` with no way to the host.
    pub fn bcast(data: &'a mut [u8], root: usize) -> NodeCall<'a> {
        NodeCall::Bcast { data, root, host: None }
    }

    /// A Bcast's message and node root.
    pub fn into_bcast(self) -> (&'a mut [u8], usize) {
        let NodeCall::Bcast { data, root, .. } = self else { mismatch() };
        (data, root)
    }

    /// A Gatherv's buffers and layout.
    pub fn into_gatherv(self) -> gatherv_shm::Gather<'a> {
        let NodeCall::Gatherv(g) = self else { mismatch() };
        g
    }
}

/// A node algorithm, as the registry holds it: a [`Mismatch`] where a
/// peer runs another call (an erroneous program), after which this rank
/// has left the call as [`crate::shm::team`] requires.
pub type NodeFn = fn(&mut Team<'_>, NodeCall<'_>, &dyn Combiner) -> Result<(), Mismatch>;

/// Stops a node algorithm handed another collective's call (the registry
/// pairs each with its collective).
pub(crate) fn mismatch() -> ! {
    unreachable!("a node algorithm was handed another collective's call")
}

/// The communicator lies on one node that has a shared segment.
pub(crate) fn on_one_node(desc: &CallDesc) -> Result<(), &'static str> {
    match (desc.topo.nodes, desc.topo.shm) {
        (1, true) => Ok(()),
        (1, false) => Err("no shared segment on this node (PCOLL_SHM=0, or it could not be created)"),
        _ => Err("the communicator spans several nodes"),
    }
}

/// ... and zero copy works there.
pub(crate) fn on_one_node_zero_copy(desc: &CallDesc) -> Result<(), &'static str> {
    on_one_node(desc)?;
    if desc.topo.zcopy {
        Ok(())
    } else {
        Err("no zero copy between processes here (PCOLL_SHM_ZCOPY=0, or cross-memory attach is not allowed)")
    }
}

/// ... with zero copy, and the root's layout fits a chunk area (16 bytes a
/// rank).
pub(crate) fn on_one_node_gatherv_zero_copy(desc: &CallDesc) -> Result<(), &'static str> {
    on_one_node_zero_copy(desc)?;
    if 16 * desc.size <= desc.topo.chunk {
        Ok(())
    } else {
        Err("the layout does not fit a chunk area (raise PCOLL_SHM_CHUNK)")
    }
}

#[cfg(test)]
mod registry_tests;
#[cfg(test)]
mod tests;
