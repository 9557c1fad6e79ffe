//! pcoll's state of a user communicator ([`crate::driver::comm::CommState`],
//! made by node discovery over the private duplicate all pcoll traffic
//! runs on), cached as an attribute of the user's communicator.
//!
//! It is created at the first collective pcoll runs on a communicator (a
//! point every rank reaches together), and freed by the attribute's delete
//! callback when the user frees the communicator. At MPI_Finalize,
//! [`release_all`] frees the duplicates of communicators the user never
//! freed (MPI_COMM_WORLD among them).

use super::host::{Mpi, State};
use crate::driver::host::{check, Code};
use crate::driver::node::discover;
use crate::driver::Host;
use mpi_sys::*;
use once_cell::sync::OnceCell;
use std::collections::BTreeSet;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The keyval pcoll's state hangs on. Attributes with it are not copied by
/// MPI_Comm_dup: a duplicate gets its own private communicator.
static KEYVAL: OnceCell<c_int> = OnceCell::new();

/// Addresses of every live state, for [`release_all`].
static LIVE: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

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

/// Bumped whenever a state is deleted: a communicator handle can be reused
/// only after its communicator is freed, so a cached (handle, state) pair
/// of an older epoch may be stale and one of the current epoch is not.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// The number of states deleted so far.
#[inline]
pub(super) fn epoch() -> u64 {
    // Acquire: pairs with the release bump of a deletion, so a state
    // cached under the current epoch was not deleted.
    EPOCH.load(Ordering::Acquire)
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
        Ok(state) => Box::into_raw(Box::new(state)),
        Err(rc) => {
            Mpi.free_comm(&mut private);
            return Err(rc);
        }
    };
    LIVE.lock().unwrap().insert(state as usize);
    // SAFETY: the attribute owns the box until `delete_state` takes it back.
    check(unsafe { PMPI_Comm_set_attr(comm, keyval, state.cast()) })?;
    log::debug!("created the private communicator for a communicator");
    // SAFETY: just attached; lives until the attribute is deleted.
    Ok(unsafe { &*state })
}

/// Delete callback of the keyval: the user freed the communicator (or MPI
/// is deleting attributes at finalize).
unsafe extern "C" fn delete_state(_comm: MPI_Comm, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    let outcome = std::panic::catch_unwind(|| {
        LIVE.lock().unwrap().remove(&(value as usize));
        // Release: this deletion is seen by any later lookup's acquire.
        EPOCH.fetch_add(1, Ordering::Release);
        // SAFETY: `value` is the Box<State> pcoll attached; MPI calls this once per attribute.
        let mut state = unsafe { Box::from_raw(value as *mut State) };
        state.release(&Mpi);
    });
    if outcome.is_err() {
        crate::driver::runtime::say("pcoll: internal error while freeing a communicator's state\n");
    }
    MPI_SUCCESS as c_int
}

/// Frees what pcoll made for every communicator still alive; called at
/// MPI_Finalize while MPI still works. The leaders' windows are freed
/// collectively, so the states go in the job-wide order of their windows
/// (see [`crate::driver::window::Leaders::window_id`]). The states stay (marked released)
/// until MPI deletes their attributes, if it ever does.
pub(super) fn release_all() {
    // Release: as for a deletion (the states become unusable).
    EPOCH.fetch_add(1, Ordering::Release);
    let live = std::mem::take(&mut *LIVE.lock().unwrap());
    // SAFETY: addresses in LIVE are boxes whose attribute was not yet
    // deleted; at finalize no other thread runs collectives.
    let mut states: Vec<&mut State> =
        live.into_iter().map(|address| unsafe { &mut *(address as *mut State) }).collect();
    states.sort_by_key(|state| state.leaders.lock().unwrap().window_id());
    for state in states {
        state.release(&Mpi);
    }
    if let Some(&keyval) = KEYVAL.get() {
        let mut keyval = keyval;
        // SAFETY: frees pcoll's keyval; attributes still set keep it alive in MPI.
        unsafe { PMPI_Comm_free_keyval(&mut keyval) };
    }
}
