//! Multi-node algorithms: compositions for communicators that span nodes,
//! with the node algorithms ([`crate::algos::node`]) within each node and
//! point-to-point algorithms (or one-sided transfers) between them.
//!
//! - `<collective>_hier`: one representative per node, for each of the
//!   four collectives;
//! - [`allreduce_dpml`]: seed 003's DPML, several leaders per node;
//! - [`allreduce_salar`]: seed 003's SALaR, a pipeline of chunks with
//!   one-sided transfers between the leaders and an adaptive chunk size.

pub mod allreduce_dpml;
pub mod allreduce_hier;
pub mod allreduce_salar;
pub mod bcast_hier;
pub mod gatherv_hier;
pub mod reduce_hier;

use crate::adapt::chunk::Tuners;
use crate::algos::node::{NodeCall, NodeFn, Team};
use crate::algos::{Algorithm, Params};
use crate::core::call::{CallDesc, GatherLayout, Topo};
use crate::core::types::Coll;
use crate::exec::{Buffers, Combiner};
use crate::shm::team::Mismatch;

/// A node-aware composition, as the registry holds it.
pub type HierFn = fn(Part<'_, '_>, &CallDesc, NodeCall<'_>, &dyn Combiner) -> Result<(), Mismatch>;

/// What a multi-node call runs besides its composition, planned with it
/// (`select::multinode`) so that nothing is decided while it runs.
#[derive(Clone, Debug)]
pub struct StagePlan {
    /// The node algorithm that reduces within each node.
    pub node_reduce: &'static Algorithm,
    /// The node algorithm that broadcasts within each node.
    pub node_bcast: &'static Algorithm,
    /// The point-to-point algorithm between the nodes.
    pub between: BetweenPlan,
}

impl StagePlan {
    /// The entry of a node stage's algorithm.
    pub fn node_fn(algo: &Algorithm) -> NodeFn {
        match algo.imp {
            crate::algos::Impl::Node(run) => run,
            _ => unreachable!("a node stage runs a node algorithm, not {algo:?}"),
        }
    }
}

/// The point-to-point algorithm for a call between the nodes'
/// representatives, by the call's bytes: a composition's calls between
/// nodes differ in size (DPML's partitions and chunks), and rules choose
/// by size. Pieces `(from, algorithm, parameters)`, ordered, the first
/// from 0 bytes.
#[derive(Clone, Debug)]
pub struct BetweenPlan {
    pieces: Vec<(usize, &'static Algorithm, Params)>,
}

impl BetweenPlan {
    /// A plan from its pieces; neighbours with the same choice merge.
    pub fn new(pieces: impl IntoIterator<Item = (usize, &'static Algorithm, Params)>) -> BetweenPlan {
        let mut merged: Vec<(usize, &'static Algorithm, Params)> = Vec::new();
        for piece in pieces {
            match merged.last() {
                Some(last) if std::ptr::eq(last.1, piece.1) && last.2 == piece.2 => {}
                _ => merged.push(piece),
            }
        }
        assert!(merged.first().is_some_and(|first| first.0 == 0), "a plan between nodes starts at 0 bytes");
        assert!(merged.iter().all(|piece| piece.1.schedule().is_some()), "only schedules run between nodes");
        BetweenPlan { pieces: merged }
    }

    /// The algorithm and parameters for a call of `bytes`.
    pub fn for_bytes(&self, bytes: usize) -> (&'static Algorithm, &Params) {
        let i = self.pieces.partition_point(|piece| piece.0 <= bytes) - 1;
        (self.pieces[i].1, &self.pieces[i].2)
    }
}

/// One-sided transfers among the leaders of the nodes (node `k`'s leader
/// is peer `k`), on windows of equal size. Offsets are bytes into a
/// window; transfers start at the call and are complete after the next
/// [`OneSided::fence`], which every leader calls the same number of times.
pub trait OneSided {
    /// This leader's window, for its own loads and stores (never while a
    /// transfer of the current epoch touches the same bytes).
    fn local(&mut self) -> &mut [u8];
    /// Starts copying `len` bytes at `from` of `peer`'s window to `to` of
    /// this leader's window.
    fn get(&mut self, peer: usize, from: usize, to: usize, len: usize);
    /// Starts copying `len` bytes at `from` of this leader's window to
    /// `to` of `peer`'s window.
    fn put(&mut self, peer: usize, from: usize, to: usize, len: usize);
    /// Completes every transfer of the epoch, at every leader.
    fn fence(&mut self);
}

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
    /// [`NoWindow`] at every rank alike where a leader could not make it.
    fn one_sided(&mut self, leader: bool, bytes: usize) -> Result<Option<&mut dyn OneSided>, NoWindow>;
}

/// The node leaders could not make their one-sided window (the host MPI
/// refused it at one of them, e.g. Open MPI 4.1 across hosts over TCP
/// without osc/pt2pt); every rank of the communicator learns it at the
/// same call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoWindow;

/// What the compositions remember of a communicator between calls.
#[derive(Debug, Default)]
pub struct Memo {
    pub salar: Tuners,
}

/// The node stage of a reduction, as the plan says.
pub(crate) fn node_reduce(
    plan: &StagePlan,
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    c: &dyn Combiner,
) -> Result<(), Mismatch> {
    let bufs = Buffers { send: bufs.send, recv: &mut *bufs.recv, scratch: &mut *bufs.scratch };
    StagePlan::node_fn(plan.node_reduce)(team, NodeCall::Reduce { bufs, unit, root, host: None }, c)
}

/// The node stage of a broadcast, as the plan says.
pub(crate) fn node_bcast(
    plan: &StagePlan,
    team: &mut Team<'_>,
    data: &mut [u8],
    root: usize,
    c: &dyn Combiner,
) -> Result<(), Mismatch> {
    StagePlan::node_fn(plan.node_bcast)(team, NodeCall::bcast(data, root), c)
}

/// The call the representatives make between nodes.
pub(crate) fn between_nodes_call(
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
    /// How the node stages run and what runs between the nodes.
    pub plan: &'a StagePlan,
    pub memo: &'a mut Memo,
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
