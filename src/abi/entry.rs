//! The C entry points (int and large counts), pcoll's C API, and the guard
//! every collective passes, the Fortran ones too: the panic boundary (no
//! panic crosses into C), PCOLL_ENABLE, the reentry guard (a collective
//! called while this thread is inside pcoll, from a user operator that
//! pcoll or the host on pcoll's behalf invokes, goes straight to the
//! host), and accounting for what the host runs. The driver does the rest:
//! anything pcoll does not handle, including every invalid argument, goes
//! to the host's PMPI function unchanged, so users see the host MPI's own
//! behaviour.

use super::host::Mpi;
use super::shim::*;
use super::{runtime, THREAD};
use crate::core::types::Coll;
use crate::driver::classify;
use crate::driver::collectives::{bcast, forward_reduce, reduction};
use crate::driver::gatherv::{gatherv, GathervArgs};
use crate::driver::host::Outcome::{self, Done, Forward};
use crate::driver::plan::FORCED_MPI;
use crate::driver::runtime::{panic_message, say, set_choice, Runtime};
use crate::driver::thread::PerThread;
use crate::select::config::Choice;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Wraps every collective: the panic boundary, PCOLL_ENABLE, the reentry
/// guard, and accounting for forwarded calls. `run` gets the runtime and
/// the thread's [`PerThread`] (the call's one thread-local lookup). A
/// collective set to `mpi` goes to the host before that lookup (Open MPI,
/// 8-byte Reduce at the non-root: 82 instructions more than calling the
/// host directly, 62 under PCOLL_ENABLE=0, 310 through the remembered
/// plan).
#[inline]
pub(super) fn entry(
    coll: Coll,
    run: impl FnOnce(&Runtime, &PerThread<Mpi>) -> Outcome,
    forward: impl FnOnce() -> c_int,
) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let rt = runtime::get();
        if !rt.cfg.enable {
            return forward();
        }
        if let Choice::Mpi = rt.choice(coll) {
            return rt.forward(coll, FORCED_MPI, forward);
        }
        THREAD.with(|t| {
            let Some(inside) = t.enter() else { return rt.forward(coll, NESTED, forward) };
            match run(rt, t) {
                Done(rc) => rc,
                Forward(why) => {
                    drop(inside);
                    rt.forward(coll, why, forward)
                }
            }
        })
    }));
    result.unwrap_or_else(|panic| internal_error(coll, panic))
}

/// Why the host runs a collective called while this thread is inside
/// pcoll: pcoll's state of the thread (and, for the same communicator, of
/// the communicator) is in use by the outer call.
const NESTED: &str = "called from inside pcoll (a user-defined operator)";

/// A panic in pcoll: the collective is in an unknown state on this rank,
/// so the job stops.
#[cold]
#[inline(never)]
fn internal_error(coll: Coll, panic: Box<dyn std::any::Any + Send>) -> c_int {
    let msg = panic_message(&*panic);
    runtime::abort_job(&format!("pcoll: internal error in MPI_{coll}: {msg}; aborting the job\n"))
}

// ---------------------------------------------------------------------------
// The exported symbols.

/// The four collectives of one C interface: int counts, or MPI-4 large
/// counts (MPI_Count counts, MPI_Aint displacements, the `_c` names, where
/// the host MPI declares them). Each goes through [`entry`] to the driver;
/// the host's function of the same interface runs what pcoll does not.
macro_rules! c_collectives {
    (
        $count:ty, $displ:ty,
        $allreduce:ident / $pmpi_allreduce:ident, $reduce:ident / $pmpi_reduce:ident,
        $bcast:ident / $pmpi_bcast:ident, $gatherv:ident / $pmpi_gatherv:ident $(,)?
    ) => {
        /// # Safety
        /// Called by MPI programs with MPI_Allreduce's arguments.
        #[no_mangle]
        pub unsafe extern "C" fn $allreduce(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            count: $count,
            datatype: MPI_Datatype,
            op: MPI_Op,
            comm: MPI_Comm,
        ) -> c_int {
            entry(
                Coll::Allreduce,
                move |rt, t| reduction(&Mpi, rt, t, sendbuf, recvbuf, count.into(), datatype, op, None, comm),
                // SAFETY: the caller's arguments, unchanged.
                move || unsafe { pmpi!($pmpi_allreduce)(sendbuf, recvbuf, count, datatype, op, comm) },
            )
        }

        /// # Safety
        /// Called by MPI programs with MPI_Reduce's arguments.
        #[no_mangle]
        pub unsafe extern "C" fn $reduce(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            count: $count,
            datatype: MPI_Datatype,
            op: MPI_Op,
            root: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            entry(
                Coll::Reduce,
                move |rt, t| reduction(&Mpi, rt, t, sendbuf, recvbuf, count.into(), datatype, op, Some(root), comm),
                move || {
                    forward_reduce(&Mpi, sendbuf, recvbuf, count.into(), datatype, root, comm, |send, recv| {
                        // SAFETY: the caller's arguments (or a copy of the root's data, see forward_reduce).
                        unsafe { pmpi!($pmpi_reduce)(send, recv, count, datatype, op, root, comm) }
                    })
                },
            )
        }

        /// # Safety
        /// Called by MPI programs with MPI_Bcast's arguments.
        #[no_mangle]
        pub unsafe extern "C" fn $bcast(
            buffer: *mut c_void,
            count: $count,
            datatype: MPI_Datatype,
            root: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            entry(
                Coll::Bcast,
                move |rt, t| bcast(&Mpi, rt, t, buffer, count.into(), datatype, root, comm),
                // SAFETY: the caller's arguments, unchanged.
                move || unsafe { pmpi!($pmpi_bcast)(buffer, count, datatype, root, comm) },
            )
        }

        /// # Safety
        /// Called by MPI programs with MPI_Gatherv's arguments.
        #[no_mangle]
        pub unsafe extern "C" fn $gatherv(
            sendbuf: *const c_void,
            sendcount: $count,
            sendtype: MPI_Datatype,
            recvbuf: *mut c_void,
            recvcounts: *const $count,
            displs: *const $displ,
            recvtype: MPI_Datatype,
            root: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            entry(
                Coll::Gatherv,
                move |rt, t| {
                    let sendcount = sendcount.into();
                    let args =
                        GathervArgs { sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm };
                    gatherv(&Mpi, rt, t, args)
                },
                // SAFETY: the caller's arguments, unchanged.
                move || unsafe {
                    pmpi!($pmpi_gatherv)(
                        sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                    )
                },
            )
        }
    };
}

c_collectives!(
    c_int,
    c_int,
    MPI_Allreduce / PMPI_Allreduce,
    MPI_Reduce / PMPI_Reduce,
    MPI_Bcast / PMPI_Bcast,
    MPI_Gatherv / PMPI_Gatherv,
);

// The large-count forms, where the host MPI declares them (cfg
// `pcoll_large_count`, set by build.rs from MPI_VERSION).
#[cfg(pcoll_large_count)]
c_collectives!(
    MPI_Count,
    MPI_Aint,
    MPI_Allreduce_c / PMPI_Allreduce_c,
    MPI_Reduce_c / PMPI_Reduce_c,
    MPI_Bcast_c / PMPI_Bcast_c,
    MPI_Gatherv_c / PMPI_Gatherv_c,
);

/// The library's version (include/pcoll.h): a static NUL-terminated
/// string, valid at any time.
#[no_mangle]
pub extern "C" fn pcoll_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Sets how one collective runs from now on, as PCOLL_<COLL> would (an
/// algorithm with parameters, `mpi` or `auto`; an empty string goes back
/// to the configuration), for benchmarks and tuners that compare choices
/// within one run. Every rank must make the same change between the same
/// two calls. Returns MPI_SUCCESS, or MPI_ERR_ARG (with a message on
/// stderr) for an unknown collective or value.
///
/// # Safety
/// Two NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn pcoll_set_algorithm(coll: *const c_char, value: *const c_char) -> c_int {
    let outcome = catch_unwind(|| {
        if coll.is_null() || value.is_null() {
            return Err("null argument".to_string());
        }
        // SAFETY: NUL-terminated strings from the caller.
        let (coll, value) = unsafe { (std::ffi::CStr::from_ptr(coll), std::ffi::CStr::from_ptr(value)) };
        let (coll, value) = (coll.to_string_lossy(), value.to_string_lossy());
        let c = Coll::ALL.into_iter().find(|c| c.name() == coll.trim()).ok_or(format!("no collective {coll:?}"))?;
        set_choice(c, value.trim())
    });
    match outcome {
        Ok(Ok(())) => MPI_SUCCESS as c_int,
        Ok(Err(why)) => {
            say(&format!("pcoll_set_algorithm: {why}\n"));
            MPI_ERR_ARG as c_int
        }
        Err(_) => MPI_ERR_OTHER as c_int,
    }
}

/// pcoll's reduction kernels behind MPI_Reduce_local's interface
/// (`inoutbuf = inbuf ∘ inoutbuf`), for benchmarks and tools: what pcoll's
/// collectives combine with. Pairs pcoll has no kernel for, and invalid
/// arguments, go to PMPI_Reduce_local.
///
/// # Safety
/// MPI_Reduce_local's arguments.
#[no_mangle]
pub unsafe extern "C" fn pcoll_reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    runtime::bind();
    match catch_unwind(|| classify::reduce_local(&Mpi, inbuf, inoutbuf, count, datatype, op)) {
        Ok(true) => MPI_SUCCESS as c_int,
        // SAFETY: the caller's arguments, unchanged.
        _ => unsafe { pmpi!(PMPI_Reduce_local)(inbuf, inoutbuf, count, datatype, op) },
    }
}

/// Installs pcoll's MPI_Finalize hook on every rank, so that the job-wide
/// summary can be combined across ranks.
///
/// # Safety
/// Called by MPI programs with MPI_Init's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    runtime::bind();
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { pmpi!(PMPI_Init)(argc, argv) };
    if rc == MPI_SUCCESS as c_int {
        let _ = catch_unwind(runtime::after_init);
    }
    rc
}

/// # Safety
/// Called by MPI programs with MPI_Init_thread's arguments.
#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    runtime::bind();
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { pmpi!(PMPI_Init_thread)(argc, argv, required, provided) };
    if rc == MPI_SUCCESS as c_int {
        let _ = catch_unwind(runtime::after_init);
    }
    rc
}
