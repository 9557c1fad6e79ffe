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
//! - [`driver`]: per-call orchestration above selection, against a host
//!   trait (node discovery, classification, planning, the Gatherv
//!   agreement, packing, dispatch, PCOLL_VERIFY), the per-thread caches,
//!   the schedule cache, the call statistics; unit-tested with ranks as
//!   threads;
//! - `sim` (feature `tool`): runs every rank's schedule in one process (tests,
//!   no MPI), and the cost model's pricing;
//! - `tune` (feature `tool`): `pcoll tune`, measuring the algorithms into a
//!   rules file;
//! - `abi` (feature `mpi`): the C entry points, the guard, and the host
//!   trait's implementation with PMPI calls: the only FFI.

pub mod adapt;
pub mod algos;
pub mod core;
pub mod driver;
pub mod exec;
#[cfg(feature = "tool")]
pub mod reference;
pub mod select;
pub mod shm;
#[cfg(feature = "tool")]
pub mod sim;
#[cfg(feature = "tool")]
pub mod tune;

#[cfg(feature = "mpi")]
mod abi;
