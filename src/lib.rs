//! pcoll: faster MPI collectives (Reduce, Allreduce, Bcast, Gatherv) that sit
//! in front of the host MPI through the PMPI profiling interface.
//!
//! Layers, from pure to impure:
//! - [`core`]: call descriptors, element types, the schedule IR (no MPI, no unsafe);
//! - [`algos`]: one file per algorithm, each a pure function returning a schedule;
//! - [`select`]: configuration from the environment and the per-call decision;
//! - [`exec`]: runs a schedule over a [`exec::Transport`], reduction kernels;
//! - [`driver`]: per-call orchestration above selection: the schedule cache,
//!   the call statistics;
//! - `sim` (feature `tool`): runs every rank's schedule in one process (tests,
//!   no MPI), and the cost model's pricing;
//! - `tune` (feature `tool`): `pcoll tune`, measuring the algorithms into a
//!   rules file;
//! - `abi` (feature `mpi`): the C entry points, PMPI calls, the only FFI.

pub mod algos;
pub mod core;
pub mod driver;
pub mod exec;
pub mod select;
#[cfg(feature = "tool")]
pub mod sim;
#[cfg(feature = "tool")]
pub mod tune;

/// Test builds without the feature `tool`: the node layer's tests
/// (exec/shm/tests.rs) still take the generators from `sim::check`, which
/// re-exports them from [`crate::core::gen`]. This stand-in goes once those tests
/// import `core::gen` themselves.
#[cfg(all(test, not(feature = "tool")))]
mod sim {
    pub mod check {
        pub use crate::core::gen::{combine_order, random_layout, Rng};
    }
}

#[cfg(feature = "mpi")]
mod abi;
