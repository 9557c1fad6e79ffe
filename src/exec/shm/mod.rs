//! The node layer: collectives among the ranks of one node through a
//! shared segment (and, for large messages, straight between their
//! buffers). The segment and the OS calls come from the library's ABI
//! layer; here everything is plain memory, so tests run ranks as threads.

pub mod bcast;
pub mod choice;
pub mod dpml;
pub mod gatherv;
pub mod hier;
pub mod prefetch;
pub mod reduce;
pub mod salar;
pub mod segment;
pub mod stores;
pub mod stream;
pub mod team;

use crate::exec::{Buffers, Combiner};

/// One call to a node algorithm: the collective's buffers, in node ranks.
pub enum NodeCall<'a> {
    /// Reduce (`root` the node rank of the root) or Allreduce (`None`).
    Reduce {
        bufs: Buffers<'a>,
        unit: usize,
        root: Option<usize>,
    },
    /// Bcast of the whole of `data` (every rank's message).
    Bcast {
        data: &'a mut [u8],
        root: usize,
    },
    Gatherv(gatherv::Gather<'a>),
}

/// A node algorithm, as the registry holds it.
pub type NodeFn = fn(&mut team::Team<'_>, NodeCall<'_>, &dyn Combiner);

/// A node-aware composition, as the registry holds it.
pub type HierFn = fn(hier::Part<'_, '_>, &crate::core::call::CallDesc, NodeCall<'_>, &dyn Combiner);

#[cfg(test)]
mod tests;
