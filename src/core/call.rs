//! The call descriptor: everything an algorithm may depend on, as plain data.
//!
//! Every field is known identically on every rank that takes part in the
//! call (rule 2 of the design: a choice made from information only one rank
//! has deadlocks the job), except `rank` and `in_place`, which only shape the
//! local buffers.

use super::types::Coll;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallDesc {
    pub coll: Coll,
    /// This rank in the communicator.
    pub rank: usize,
    /// Communicator size.
    pub size: usize,
    /// Root rank (0 for Allreduce).
    pub root: usize,
    /// Bytes of the vector: the reduced vector (Reduce/Allreduce), the
    /// broadcast message (Bcast), or this rank's own block (Gatherv).
    pub bytes: usize,
    /// The vector may only be cut at multiples of this (the element extent
    /// for reductions, 1 otherwise).
    pub unit: usize,
    /// Whether the reduction operator is commutative. Schedules combine in
    /// rank order regardless; this only widens the choice of algorithms.
    pub commutative: bool,
    /// MPI_IN_PLACE: this rank's input already sits in the receive buffer.
    pub in_place: bool,
    /// How the communicator sits on nodes.
    pub topo: Topo,
}

/// What every rank knows of how its communicator sits on nodes (agreed
/// when pcoll first meets the communicator).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Topo {
    /// Nodes the communicator spans.
    pub nodes: usize,
    /// Nodes hold consecutive rank ranges, in node order: node-aware
    /// reductions then keep rank order.
    pub contiguous: bool,
    /// Every node has a shared segment: node algorithms can run.
    pub shm: bool,
    /// Zero copy between processes works on every node.
    pub zcopy: bool,
    /// Bytes of a segment's chunk area.
    pub chunk: usize,
    /// The node leaders can make a one-sided window (SALaR): false from
    /// the call where making one failed at any leader of the communicator.
    pub one_sided: bool,
}

impl Default for Topo {
    /// One node without a segment (the simulator's view).
    fn default() -> Topo {
        Topo { nodes: 1, contiguous: true, shm: false, zcopy: false, chunk: 0, one_sided: true }
    }
}

impl CallDesc {
    pub fn is_root(&self) -> bool {
        self.rank == self.root
    }

    /// Rank relative to the root (the root is 0).
    pub fn rel_rank(&self) -> usize {
        (self.rank + self.size - self.root) % self.size
    }

    /// Inverse of [`CallDesc::rel_rank`].
    pub fn abs_rank(&self, rel: usize) -> usize {
        (rel + self.root) % self.size
    }
}

/// Where each rank's block lands in the root's receive buffer (Gatherv),
/// as byte offsets from the start of the root's receive region.
#[derive(Clone, Debug, PartialEq, Eq, Default, Hash)]
pub struct GatherLayout {
    /// `(offset, len)` per rank, in bytes.
    pub blocks: Vec<(usize, usize)>,
}
