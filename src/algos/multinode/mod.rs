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

use crate::algos::node::NodeCall;
use crate::core::call::CallDesc;
use crate::exec::Combiner;
pub use hier::Part;

/// A node-aware composition, as the registry holds it.
pub type HierFn = fn(Part<'_, '_>, &CallDesc, NodeCall<'_>, &dyn Combiner);

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
