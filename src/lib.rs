//! pcoll: faster MPI collectives (Reduce, Allreduce, Bcast, Gatherv) that sit
//! in front of the host MPI through the PMPI profiling interface.
//!
//! Layers, from pure to impure:
//! - [`core`]: call descriptors, element types, the schedule IR (no MPI, no unsafe);
//! - [`exec`]: runs a schedule over a [`exec::Transport`], reduction kernels;
//! - [`shm`]: node primitives (segment, step protocol, copies, peer memory);
//! - [`adapt`]: run-time choices made by timing calls;
//! - [`algos`]: one file per algorithm: schedules, node algorithms, compositions;
//! - [`select`]: configuration from the environment and the per-call decision;
//! - [`sim`]: runs every rank's schedule in one process (tests, no MPI);
//! - [`tune`]: `pcoll tune`, measuring the algorithms into a rules file;
//! - `abi` (feature `mpi`): the C entry points, PMPI calls, the only FFI.

pub mod adapt;
pub mod algos;
pub mod core;
pub mod exec;
pub mod select;
pub mod shm;
pub mod sim;
pub mod tune;

#[cfg(feature = "mpi")]
mod abi;
