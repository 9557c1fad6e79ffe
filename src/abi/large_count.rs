//! The MPI-4 large-count entry points (MPI_Allreduce_c, ...), built only
//! where the host MPI declares them (cfg `pcoll_large_count`, set by
//! build.rs from MPI_VERSION). They take MPI_Count counts and MPI_Aint
//! displacements and share everything else with the int-count entry
//! points: classification, selection, algorithms, statistics.

use super::entry::{entry, forward_reduce, run_gatherv};
use super::host::Mpi;
use crate::core::types::Coll;
use crate::driver::collectives::{bcast, reduction};
use mpi_sys::*;
use std::os::raw::{c_int, c_void};

/// # Safety
/// Called by MPI programs with MPI_Allreduce_c's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Allreduce_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    entry(
        Coll::Allreduce,
        |rt, t| reduction(&Mpi, rt, t, sendbuf, recvbuf, count, datatype, op, None, comm),
        // SAFETY: the caller's arguments, unchanged.
        || unsafe { PMPI_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm) },
    )
}

/// # Safety
/// Called by MPI programs with MPI_Reduce_c's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    entry(
        Coll::Reduce,
        |rt, t| reduction(&Mpi, rt, t, sendbuf, recvbuf, count, datatype, op, Some(root), comm),
        // SAFETY: the caller's arguments, unchanged.
        || {
            forward_reduce(sendbuf, recvbuf, count, datatype, root, comm, |send, recv| {
                // SAFETY: the caller's arguments (or a copy of the root's data, see forward_reduce).
                unsafe { PMPI_Reduce_c(send, recv, count, datatype, op, root, comm) }
            })
        },
    )
}

/// # Safety
/// Called by MPI programs with MPI_Bcast_c's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Bcast_c(
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    entry(
        Coll::Bcast,
        |rt, t| bcast(&Mpi, rt, t, buffer, count, datatype, root, comm),
        // SAFETY: the caller's arguments, unchanged.
        || unsafe { PMPI_Bcast_c(buffer, count, datatype, root, comm) },
    )
}

/// # Safety
/// Called by MPI programs with MPI_Gatherv_c's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Gatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    entry(
        Coll::Gatherv,
        |rt, t| run_gatherv(rt, t, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm),
        // SAFETY: the caller's arguments, unchanged.
        || unsafe { PMPI_Gatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm) },
    )
}
