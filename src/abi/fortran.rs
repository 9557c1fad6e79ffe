//! The Fortran entry points: what a Fortran program (`include 'mpif.h'`,
//! `use mpi`, `use mpi_f08`) calls, for the MPI the library is built for
//! (`cfg(pcoll_mpi)`, set by build.rs from mpi.h). What each host needs
//! follows from where its Fortran bindings go (`nm -D`, `objdump -d` of the
//! Debian 12 libraries; gfortran names symbols in lower case with one
//! trailing underscore, and each library also exports the other forms).
//!
//! **MPICH 4.0** (libmpichfort.so.12): `mpi_allreduce_` (= `mpi_allreduce`,
//! `mpi_allreduce__`, `MPI_ALLREDUCE`; `use mpi` calls the same symbols)
//! converts the Fortran MPI_IN_PLACE / MPI_BOTTOM (addresses kept in
//! `MPIR_F_MPI_IN_PLACE` / `MPIR_F_MPI_BOTTOM`) and calls `MPI_Allreduce@plt`;
//! `use mpi_f08` calls `mpi_allreduce_f08ts_`, whose descriptor wrapper
//! converts `MPIR_F08_MPI_IN_PLACE` and calls `MPI_Allreduce@plt`
//! (`..._f08ts_large_`: `MPI_Allreduce_c`); likewise Reduce, Bcast, Gatherv.
//! The PLT resolves to the first definition, pcoll's, so pcoll's C entry
//! points already get every Fortran collective with the sentinels converted.
//! Fortran collectives defined here would only redo MPICH's sentinel handling
//! (and its lazy `mpirinitf_` set-up), so pcoll defines none. It does define
//! Init: `mpi_init_f08_` and `mpi_init_thread_f08_` call `PMPI_Init*`
//! directly, bypassing pcoll's C MPI_Init; and `mpi_init_` (which calls
//! `MPI_Init@plt`) is defined too, because a program that references no
//! pcoll symbol loses `-lpcoll` at link time under `--as-needed` (Debian's
//! gcc default), and with it every collective.
//!
//! **Open MPI 4.1** (libmpi_mpifh.so.40): `mpi_allreduce_` (and the other
//! three forms, all `ompi_allreduce_f`; `use mpi` calls `mpi_allreduce_`)
//! calls `PMPI_Allreduce` directly, and `use mpi_f08` calls
//! `mpi_allreduce_f08_` (libmpi_usempif08.so.40), which calls
//! `ompi_allreduce_f`. No Fortran call reaches a C `MPI_` symbol, Init
//! included. So pcoll defines the four mpif.h forms and the mpi_f08 form of
//! the four collectives. They convert their arguments as `ompi_*_f` does:
//! handles with `PMPI_*_f2c`; the Fortran MPI_IN_PLACE (send buffers) and
//! MPI_BOTTOM (all buffers), the addresses of the common blocks
//! `mpi_fortran_in_place_` / `mpi_fortran_bottom_` that the mpif.h, `use
//! mpi` and mpi_f08 bindings all pass (`pcoll_fortran_buffer` in shim.c),
//! into the C constants. Then they call pcoll's C entry points, and the
//! host's C `PMPI_` function runs what pcoll does not handle. ierror is set
//! when present, as Open MPI does (an absent mpi_f08 ierror arrives as NULL).
//!
//! **Init**, both hosts, all five forms: the wrapper calls the host's own
//! definition of the same symbol (`dlsym(RTLD_NEXT)`: pcoll comes first,
//! preloaded or linked before the MPI libraries), so the host's Fortran
//! set-up still happens, then installs the finalize hook as the C MPI_Init
//! does, so that the PCOLL_STATS summary is combined over the whole job.
#![cfg(any(pcoll_mpi = "mpich", pcoll_mpi = "openmpi"))]

use super::runtime;
use super::shim::*;
use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr::null_mut;

type Fint = pcoll_fint;

/// Defines `$imp` under each symbol name; `$imp` gets the name
/// (NUL-terminated) first, then the Fortran arguments.
macro_rules! fortran_symbols {
    ([$($name:expr),+] $imp:ident $args:tt) => {
        $(fortran_symbols!(@one $name, $imp $args);)+
    };
    (@one $name:expr, $imp:ident($($arg:ident: $ty:ty),*)) => {
        const _: () = {
            /// # Safety
            /// Called by Fortran programs with the binding's arguments.
            #[export_name = $name]
            unsafe extern "C" fn fortran_entry($($arg: $ty),*) {
                // SAFETY: the caller's arguments, unchanged.
                unsafe { $imp(concat!($name, "\0"), $($arg),*) }
            }
        };
    };
}

/// The four mpif.h / `use mpi` name forms of `$lower` and its mpi_f08 form.
macro_rules! every_form {
    ($lower:ident $upper:ident => $($imp:tt)*) => {
        fortran_symbols!([
            concat!("mpi_", stringify!($lower)),
            concat!("mpi_", stringify!($lower), "_"),
            concat!("mpi_", stringify!($lower), "__"),
            concat!("MPI_", stringify!($upper)),
            concat!("mpi_", stringify!($lower), "_f08_")
        ] $($imp)*);
    };
}

every_form!(init INIT => init(ierror: *mut Fint));
every_form!(init_thread INIT_THREAD => init_thread(required: *const Fint, provided: *mut Fint, ierror: *mut Fint));

/// Stores a return code where the caller wants it: mpi_f08's optional
/// ierror is NULL when absent.
///
/// # Safety
/// `ierror` is NULL or points to a writable Fortran integer.
unsafe fn set_ierror(ierror: *mut Fint, rc: c_int) {
    if !ierror.is_null() {
        // SAFETY: guaranteed by the caller.
        unsafe { *ierror = rc as Fint };
    }
}

/// The host's definition of `symbol` (NUL-terminated), the next one after pcoll's.
fn host_definition(symbol: &str) -> Option<*mut c_void> {
    // SAFETY: `symbol` is NUL-terminated; dlsym only looks it up.
    let found = unsafe { libc::dlsym(libc::RTLD_NEXT, symbol.as_ptr().cast()) };
    (!found.is_null()).then_some(found)
}

/// After the host's Init: the finalize hook, as in the C MPI_Init.
fn hook_if_initialized() {
    let mut initialized = 0;
    // SAFETY: MPI_Initialized may be called at any time; the flag is a local.
    unsafe { pmpi!(PMPI_Initialized)(&mut initialized) };
    if initialized != 0 {
        let _ = std::panic::catch_unwind(runtime::after_init);
    }
}

/// # Safety
/// `ierror` is NULL or points to a Fortran integer; `symbol` is an Init symbol.
unsafe fn init(symbol: &str, ierror: *mut Fint) {
    runtime::bind();
    match host_definition(symbol) {
        Some(host) => {
            // SAFETY: the host's definition of this Fortran MPI_Init symbol, whose
            // only argument is ierror.
            unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut Fint)>(host)(ierror) }
        }
        // SAFETY: what both hosts' Fortran MPI_Init does: C MPI_Init without arguments.
        None => unsafe { set_ierror(ierror, pmpi!(PMPI_Init)(null_mut(), null_mut())) },
    }
    hook_if_initialized();
}

/// # Safety
/// Fortran MPI_Init_thread's arguments; `symbol` is an Init_thread symbol.
unsafe fn init_thread(symbol: &str, required: *const Fint, provided: *mut Fint, ierror: *mut Fint) {
    runtime::bind();
    type InitThread = unsafe extern "C" fn(*const Fint, *mut Fint, *mut Fint);
    match host_definition(symbol) {
        // SAFETY: the host's definition of this Fortran MPI_Init_thread symbol.
        Some(host) => unsafe { std::mem::transmute::<*mut c_void, InitThread>(host)(required, provided, ierror) },
        // SAFETY: required and provided are Fortran integers passed by reference.
        None => unsafe { set_ierror(ierror, pmpi!(PMPI_Init_thread)(null_mut(), null_mut(), *required, provided)) },
    }
    hook_if_initialized();
}

/// Open MPI only: the four collectives (see the module documentation),
/// which convert their arguments and run as pcoll's C entry points.
#[cfg(pcoll_mpi = "openmpi")]
mod collectives {
    use super::super::entry::{MPI_Allreduce, MPI_Bcast, MPI_Gatherv, MPI_Reduce};
    use super::super::shim;
    use super::{set_ierror, Fint};
    use std::ffi::c_void;
    use std::os::raw::c_int;

    every_form!(allreduce ALLREDUCE => allreduce(
        sendbuf: *mut c_void, recvbuf: *mut c_void, count: *const Fint, datatype: *const Fint,
        op: *const Fint, comm: *const Fint, ierror: *mut Fint));
    every_form!(reduce REDUCE => reduce(
        sendbuf: *mut c_void, recvbuf: *mut c_void, count: *const Fint, datatype: *const Fint,
        op: *const Fint, root: *const Fint, comm: *const Fint, ierror: *mut Fint));
    every_form!(bcast BCAST => bcast(
        buffer: *mut c_void, count: *const Fint, datatype: *const Fint, root: *const Fint,
        comm: *const Fint, ierror: *mut Fint));
    every_form!(gatherv GATHERV => gatherv(
        sendbuf: *mut c_void, sendcount: *const Fint, sendtype: *const Fint, recvbuf: *mut c_void,
        recvcounts: *const Fint, displs: *const Fint, recvtype: *const Fint, root: *const Fint,
        comm: *const Fint, ierror: *mut Fint));

    /// A Fortran buffer argument as C sees it (Fortran MPI_BOTTOM, and
    /// MPI_IN_PLACE where `in_place_allowed`, become the C constants).
    fn buffer(buf: *mut c_void, in_place_allowed: bool) -> *mut c_void {
        // SAFETY: only compares the address with the host's sentinels.
        unsafe { shim::pcoll_fortran_buffer(buf, in_place_allowed as c_int) }
    }

    /// # Safety
    /// Fortran MPI_Allreduce's arguments.
    #[allow(clippy::too_many_arguments)]
    unsafe fn allreduce(
        _: &str,
        sendbuf: *mut c_void,
        recvbuf: *mut c_void,
        count: *const Fint,
        datatype: *const Fint,
        op: *const Fint,
        comm: *const Fint,
        ierror: *mut Fint,
    ) {
        let (sendbuf, recvbuf) = (buffer(sendbuf, true).cast_const(), buffer(recvbuf, false));
        // SAFETY: the binding passes every integer and handle by reference;
        // converted to C as the host's binding does.
        unsafe {
            let (datatype, op, comm) =
                (pmpi!(PMPI_Type_f2c)(*datatype), pmpi!(PMPI_Op_f2c)(*op), pmpi!(PMPI_Comm_f2c)(*comm));
            set_ierror(ierror, MPI_Allreduce(sendbuf, recvbuf, *count, datatype, op, comm))
        }
    }

    /// # Safety
    /// Fortran MPI_Reduce's arguments.
    #[allow(clippy::too_many_arguments)]
    unsafe fn reduce(
        _: &str,
        sendbuf: *mut c_void,
        recvbuf: *mut c_void,
        count: *const Fint,
        datatype: *const Fint,
        op: *const Fint,
        root: *const Fint,
        comm: *const Fint,
        ierror: *mut Fint,
    ) {
        let (sendbuf, recvbuf) = (buffer(sendbuf, true).cast_const(), buffer(recvbuf, false));
        // SAFETY: as for allreduce.
        unsafe {
            let (datatype, op, comm) =
                (pmpi!(PMPI_Type_f2c)(*datatype), pmpi!(PMPI_Op_f2c)(*op), pmpi!(PMPI_Comm_f2c)(*comm));
            set_ierror(ierror, MPI_Reduce(sendbuf, recvbuf, *count, datatype, op, *root, comm))
        }
    }

    /// # Safety
    /// Fortran MPI_Bcast's arguments.
    unsafe fn bcast(
        _: &str,
        buffer_f: *mut c_void,
        count: *const Fint,
        datatype: *const Fint,
        root: *const Fint,
        comm: *const Fint,
        ierror: *mut Fint,
    ) {
        let buf = buffer(buffer_f, false);
        // SAFETY: as for allreduce.
        unsafe {
            let (datatype, comm) = (pmpi!(PMPI_Type_f2c)(*datatype), pmpi!(PMPI_Comm_f2c)(*comm));
            set_ierror(ierror, MPI_Bcast(buf, *count, datatype, *root, comm))
        }
    }

    /// # Safety
    /// Fortran MPI_Gatherv's arguments.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gatherv(
        _: &str,
        sendbuf: *mut c_void,
        sendcount: *const Fint,
        sendtype: *const Fint,
        recvbuf: *mut c_void,
        recvcounts: *const Fint,
        displs: *const Fint,
        recvtype: *const Fint,
        root: *const Fint,
        comm: *const Fint,
        ierror: *mut Fint,
    ) {
        let (sendbuf, recvbuf) = (buffer(sendbuf, true).cast_const(), buffer(recvbuf, false));
        // SAFETY: as for allreduce (recvcounts and displs are arrays, read
        // at the root only).
        unsafe {
            let (sendtype, recvtype) = (pmpi!(PMPI_Type_f2c)(*sendtype), pmpi!(PMPI_Type_f2c)(*recvtype));
            let rc = MPI_Gatherv(
                sendbuf,
                *sendcount,
                sendtype,
                recvbuf,
                recvcounts,
                displs,
                recvtype,
                *root,
                pmpi!(PMPI_Comm_f2c)(*comm),
            );
            set_ierror(ierror, rc)
        }
    }
}
