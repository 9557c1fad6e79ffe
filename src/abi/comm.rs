//! pcoll's state of a user communicator ([`crate::driver::comm::CommState`],
//! made by node discovery over the private duplicate all pcoll traffic
//! runs on), cached as an attribute of the user's communicator.
//!
//! It is created at the call that sets a communicator up (a point every
//! rank reaches together; until then the same attribute counts the calls
//! left to the host, in its value, see [`count_host_call`]), and freed by
//! the attribute's delete callback when the user frees the communicator.
//! At MPI_Finalize, [`release_all`] frees the duplicates of communicators
//! the user never freed (MPI_COMM_WORLD among them). [`States`] keeps the
//! live ones.

use super::handles;
use super::host::{Mpi, State};
use super::shim::*;
use crate::driver::comm::{SegmentPool, States};
use crate::driver::host::{check, Code};
use crate::driver::node::{at_init, discover};
use crate::driver::pool::Pool;
use crate::driver::Host;
use crate::select::config::Config;
use once_cell::sync::OnceCell;
use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

/// The keyval pcoll's state hangs on. Attributes with it are not copied by
/// MPI_Comm_dup: a duplicate gets its own private communicator.
static KEYVAL: OnceCell<c_int> = OnceCell::new();

/// Every live state.
static STATES: States<Mpi> = States::new();

/// The process's budget of /dev/shm and the segments it keeps.
pub(super) static POOL: SegmentPool<Mpi> = Mutex::new(Pool::new());

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

/// The attribute's value for `comm`, if set: a state's address, or (odd:
/// states are aligned) twice the calls left to the host, plus one.
fn attribute(comm: MPI_Comm) -> Option<usize> {
    if comm == handles().comm_null {
        return None;
    }
    let keyval = *KEYVAL.get()?;
    let mut value: *mut c_void = std::ptr::null_mut();
    let mut found: c_int = 0;
    // SAFETY: MPI writes the attribute (a pointer-sized value) into `value`.
    let rc = unsafe { pmpi!(PMPI_Comm_get_attr)(comm, keyval, (&mut value as *mut *mut c_void).cast(), &mut found) };
    (rc == MPI_SUCCESS as c_int && found != 0).then_some(value as usize)
}

/// Whether an attribute value counts calls (else it is a state's address).
fn is_count(value: usize) -> bool {
    value & 1 == 1
}

/// pcoll's state for `comm` if it has one (an attribute lookup; Open MPI's
/// takes a global lock, so the driver remembers the thread's last one).
pub(super) fn find<'a>(comm: MPI_Comm) -> Option<&'a State> {
    let value = attribute(comm).filter(|&v| !is_count(v))?;
    // SAFETY: pcoll sets this keyval to a count (odd) or to a leaked
    // Box<State> that lives until the attribute is deleted.
    Some(unsafe { &*(value as *const State) })
}

/// Whether fewer than `after` calls on `comm` (which has no state) went to
/// the host; if so, counts this one in the attribute. Setting it costs
/// no allocation, and freeing the communicator deletes it.
pub(super) fn count_host_call(comm: MPI_Comm, after: usize) -> bool {
    let calls = attribute(comm).filter(|&v| is_count(v)).map_or(0, |v| v >> 1);
    if calls >= after {
        return false;
    }
    let Ok(keyval) = keyval() else { return false };
    // SAFETY: an odd value that is never dereferenced (see `is_count`).
    unsafe { pmpi!(PMPI_Comm_set_attr)(comm, keyval, ((calls + 1) << 1 | 1) as *mut c_void) == MPI_SUCCESS as c_int }
}

/// At MPI_Init: sizes the node layer's budget, or says which settings
/// /dev/shm cannot hold ([`at_init`]).
pub(super) fn size_node_memory(cfg: &Config) -> Result<(), String> {
    at_init(&Mpi, cfg)
}

/// Creates pcoll's state for `comm`, an intracommunicator of more than one
/// rank (collective over `comm`). It stays valid until the user frees
/// `comm`, which MPI forbids during a collective on it.
pub(super) fn create<'a>(comm: MPI_Comm) -> Result<&'a State, Code> {
    let keyval = keyval()?;
    let mut private = comm;
    // SAFETY: `private` receives the new communicator.
    check(unsafe { pmpi!(PMPI_Comm_dup)(comm, &mut private) })?;
    let state = match discover(&Mpi, private, &super::runtime::get().cfg.shm) {
        Ok(state) => STATES.add(state),
        Err(rc) => {
            Mpi.free_comm(&mut private);
            return Err(rc);
        }
    };
    // SAFETY: the attribute owns the box until `delete_state` takes it back.
    check(unsafe { pmpi!(PMPI_Comm_set_attr)(comm, keyval, state.cast()) })?;
    log::debug!("created the private communicator for a communicator");
    // SAFETY: just attached; lives until the attribute is deleted.
    Ok(unsafe { &*state })
}

/// Delete callback of the keyval: the user freed the communicator (or MPI
/// is deleting attributes at finalize), or a count gives way to a state.
unsafe extern "C" fn delete_state(_comm: MPI_Comm, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    if is_count(value as usize) {
        return MPI_SUCCESS as c_int;
    }
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
        unsafe { pmpi!(PMPI_Comm_free_keyval)(&mut keyval) };
    }
}
