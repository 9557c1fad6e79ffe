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
//! - [`sim`]: runs every rank's schedule in one process (tests, no MPI);
//! - [`tune`]: `pcoll tune`, measuring the algorithms into a rules file;
//! - `abi` (feature `mpi`): the C entry points, PMPI calls, the only FFI.

pub mod algos;
pub mod core;
pub mod driver;
pub mod exec;
pub mod select;
pub mod sim;
pub mod tune;

#[cfg(feature = "mpi")]
mod abi;
