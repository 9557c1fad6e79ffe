//! pcoll's state of a user communicator ([`crate::driver::comm::CommState`],
//! made by node discovery over the private duplicate all pcoll traffic
//! runs on), cached as an attribute of the user's communicator.
//!
//! It is created at the first collective pcoll runs on a communicator (a
//! point every rank reaches together), and freed by the attribute's delete
//! callback when the user frees the communicator. At MPI_Finalize,
//! [`release_all`] frees the duplicates of communicators the user never
//! freed (MPI_COMM_WORLD among them). [`States`] keeps the live ones.

use super::host::{Mpi, State};
use crate::driver::comm::States;
use crate::driver::host::{check, Code};
use crate::driver::node::discover;
use crate::driver::Host;
use mpi_sys::*;
use once_cell::sync::OnceCell;
use std::os::raw::{c_int, c_void};

/// The keyval pcoll's state hangs on. Attributes with it are not copied by
/// MPI_Comm_dup: a duplicate gets its own private communicator.
static KEYVAL: OnceCell<c_int> = OnceCell::new();

/// Every live state.
static STATES: States<Mpi> = States::new();

fn keyval() -> Result<c_int, c_int> {
    KEYVAL
        .get_or_try_init(|| {
            let mut keyval = 0;
            // SAFETY: `delete_state` has the signature MPI expects; `keyval` is a valid local.
            check(unsafe { super::shim::pcoll_create_keyval(Some(delete_state), &mut keyval) })?;
            Ok(keyval)
        })
        .copied()
}

/// The number of states deleted so far.
#[inline]
pub(super) fn epoch() -> u64 {
    STATES.epoch()
}

/// pcoll's state for `comm` if it has one (an attribute lookup; Open MPI's
/// takes a global lock, so the driver remembers the thread's last one).
pub(super) fn find<'a>(comm: MPI_Comm) -> Option<&'a State> {
    // SAFETY: reads the handle constant.
    if comm == unsafe { RSMPI_COMM_NULL } {
        return None;
    }
    let keyval = *KEYVAL.get()?;
    let mut value: *mut c_void = std::ptr::null_mut();
    let mut found: c_int = 0;
    // SAFETY: MPI writes the attribute (a pointer) into `value`.
    let rc = unsafe { PMPI_Comm_get_attr(comm, keyval, (&mut value as *mut *mut c_void).cast(), &mut found) };
    // SAFETY: only pcoll sets this keyval, always to a leaked Box<State>
    // that lives until the attribute is deleted.
    (rc == MPI_SUCCESS as c_int && found != 0).then(|| unsafe { &*(value as *const State) })
}

/// Creates pcoll's state for `comm`, an intracommunicator of more than one
/// rank (collective over `comm`). It stays valid until the user frees
/// `comm`, which MPI forbids during a collective on it.
pub(super) fn create<'a>(comm: MPI_Comm) -> Result<&'a State, Code> {
    let keyval = keyval()?;
    let mut private = comm;
    // SAFETY: `private` receives the new communicator.
    check(unsafe { PMPI_Comm_dup(comm, &mut private) })?;
    let state = match discover(&Mpi, private, &super::runtime::get().cfg.shm) {
        Ok(state) => STATES.add(state),
        Err(rc) => {
            Mpi.free_comm(&mut private);
            return Err(rc);
        }
    };
    // SAFETY: the attribute owns the box until `delete_state` takes it back.
    check(unsafe { PMPI_Comm_set_attr(comm, keyval, state.cast()) })?;
    log::debug!("created the private communicator for a communicator");
    // SAFETY: just attached; lives until the attribute is deleted.
    Ok(unsafe { &*state })
}

/// Delete callback of the keyval: the user freed the communicator (or MPI
/// is deleting attributes at finalize).
unsafe extern "C" fn delete_state(_comm: MPI_Comm, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    // SAFETY: `value` is the state pcoll attached; MPI calls this once per attribute.
    let outcome = std::panic::catch_unwind(|| unsafe { STATES.delete(&Mpi, value.cast()) });
    if outcome.is_err() {
        crate::driver::runtime::say("pcoll: internal error while freeing a communicator's state\n");
    }
    MPI_SUCCESS as c_int
}

/// Frees what pcoll made for every communicator still alive, in the order
/// [`States::release_all`] gives; called at MPI_Finalize while MPI still
/// works.
pub(super) fn release_all() {
    // SAFETY: at finalize no other thread runs collectives.
    unsafe { STATES.release_all(&Mpi) };
    if let Some(&keyval) = KEYVAL.get() {
        let mut keyval = keyval;
        // SAFETY: frees pcoll's keyval; attributes still set keep it alive in MPI.
        unsafe { PMPI_Comm_free_keyval(&mut keyval) };
    }
}
