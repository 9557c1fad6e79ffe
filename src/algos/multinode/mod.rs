//! Multi-node algorithms: compositions for communicators that span nodes,
//! with the node algorithms ([`crate::algos::node`]) within each node and
//! point-to-point algorithms (or one-sided transfers) between them.
//!
//! - [`hier`]: one representative per node, for the four collectives;
//! - [`allreduce_dpml`]: seed 003's DPML, several leaders per node;
//! - [`allreduce_salar`]: seed 003's SALaR, a pipeline of chunks with
//!   one-sided transfers between the leaders and an adaptive chunk size.

pub mod allreduce_dpml;
pub mod allreduce_salar;
pub mod hier;

use crate::algos::node::{NodeCall, NodeFn};
use crate::algos::{Algorithm, Params};
use crate::core::call::CallDesc;
use crate::exec::Combiner;
pub use hier::Part;

/// A node-aware composition, as the registry holds it.
pub type HierFn = fn(Part<'_, '_>, &CallDesc, NodeCall<'_>, &dyn Combiner);

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

/// [`hier::allreduce`], as the registry runs it.
pub fn hier_allreduce(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) {
    let (bufs, _, _) = call.into_reduction();
    hier::allreduce(part, desc, bufs, c)
}

/// [`hier::reduce`], as the registry runs it.
pub fn hier_reduce(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) {
    let (bufs, _, _) = call.into_reduction();
    hier::reduce(part, desc, bufs, c)
}

/// [`hier::bcast`], as the registry runs it.
pub fn hier_bcast(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) {
    let (data, _) = call.into_bcast();
    hier::bcast(part, desc, data, c)
}

/// [`hier::gatherv`], as the registry runs it.
pub fn hier_gatherv(part: Part<'_, '_>, desc: &CallDesc, call: NodeCall<'_>, c: &dyn Combiner) {
    hier::gatherv(part, desc, call.into_gatherv(), c)
}
