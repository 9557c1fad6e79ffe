//! Per-communicator state: the private duplicate all pcoll traffic runs on,
//! and the schedules built for the communicator.
//!
//! It is created at the first collective pcoll runs on a communicator (a
//! point every rank reaches together, since collectives are called in the
//! same order everywhere), cached as an attribute, and freed by the
//! attribute's delete callback when the user frees the communicator. At
//! MPI_Finalize, [`release_all`] frees the duplicates of communicators the
//! user never freed (MPI_COMM_WORLD among them).

use super::node::Node;
use super::shim;
use super::transport::check;
use super::window::Leaders;
use crate::algos::multinode::Memo;
use crate::core::call::Topo;
use crate::driver::cache::ScheduleCache;
use mpi_sys::*;
use once_cell::sync::OnceCell;
use std::cell::Cell;
use std::collections::BTreeSet;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub(super) struct CommState {
    /// The private duplicate; MPI_COMM_NULL once released at finalize.
    pub private: MPI_Comm,
    /// This rank and the size of the communicator (an intracommunicator of
    /// more than one rank: pcoll keeps no state for others).
    pub rank: usize,
    pub size: usize,
    /// Schedules of calls on this communicator. A communicator is used by
    /// one thread at a time (MPI's rule for collectives), so the lock is
    /// never contended; it makes the state shareable.
    pub schedules: Mutex<ScheduleCache>,
    /// This rank's node: its ranks, segment and zero copy.
    pub node: Node,
    /// The node leaders' communicator and one-sided window (SALaR).
    pub leaders: Mutex<Leaders>,
    /// What the node-aware compositions remember between calls.
    pub memo: Mutex<Memo>,
}

impl CommState {
    pub fn topo(&self) -> Topo {
        self.node.topo
    }

    /// Frees what pcoll made for the communicator.
    fn release(&mut self) {
        self.leaders.get_mut().unwrap().release();
        self.node.release();
        free_comm(&mut self.private);
    }
}

/// The keyval pcoll's state hangs on. Attributes with it are not copied by
/// MPI_Comm_dup: a duplicate gets its own private communicator.
static KEYVAL: OnceCell<c_int> = OnceCell::new();

/// Addresses of every live `CommState`, for [`release_all`].
static LIVE: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

fn keyval() -> Result<c_int, c_int> {
    KEYVAL
        .get_or_try_init(|| {
            let mut keyval = 0;
            // SAFETY: `delete_state` has the signature MPI expects; `keyval` is a valid local.
            check(unsafe { shim::pcoll_create_keyval(Some(delete_state), &mut keyval) })?;
            Ok(keyval)
        })
        .copied()
}

/// Bumped whenever a state is deleted: a communicator handle can be reused
/// only after its communicator is freed, so a cached (handle, state) pair
/// of an older epoch may be stale and one of the current epoch is not.
static EPOCH: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The last communicator this thread looked up: (handle, state, epoch).
    /// Open MPI's attribute lookup takes a global lock; a loop of calls on
    /// one communicator skips it.
    static LAST: Cell<Option<(MPI_Comm, usize, u64)>> = const { Cell::new(None) };
}

/// The number of states deleted so far: a state found under one epoch is
/// alive while the epoch stays the same.
pub(super) fn epoch() -> u64 {
    // Acquire: pairs with the release bump of a deletion, so a state
    // cached under the current epoch was not deleted.
    EPOCH.load(Ordering::Acquire)
}

/// pcoll's state for `comm` if it has one already.
pub(super) fn lookup<'a>(comm: MPI_Comm) -> Option<&'a CommState> {
    let epoch = epoch();
    if let Some((c, state, e)) = LAST.get() {
        if c == comm && e == epoch {
            // SAFETY: a live state (its epoch is current), see EPOCH.
            return Some(unsafe { &*(state as *const CommState) });
        }
    }
    let keyval = *KEYVAL.get()?;
    let mut value: *mut c_void = std::ptr::null_mut();
    let mut found: c_int = 0;
    // SAFETY: MPI writes the attribute (a pointer) into `value`.
    let rc = unsafe { PMPI_Comm_get_attr(comm, keyval, (&mut value as *mut *mut c_void).cast(), &mut found) };
    // SAFETY: only pcoll sets this keyval, always to a leaked Box<CommState>
    // that lives until the attribute is deleted.
    let state = (rc == MPI_SUCCESS as c_int && found != 0).then(|| unsafe { &*(value as *const CommState) })?;
    LAST.set(Some((comm, state as *const CommState as usize, epoch)));
    Some(state)
}

/// pcoll's state for `comm`, an intracommunicator of more than one rank,
/// created on first use (collective over `comm` then). It stays valid until
/// the user frees `comm`, which MPI forbids during a collective on it.
pub(super) fn state<'a>(comm: MPI_Comm) -> Result<&'a CommState, c_int> {
    let keyval = keyval()?;
    if let Some(state) = lookup(comm) {
        return Ok(state);
    }
    let (mut rank, mut size) = (0, 0);
    // SAFETY: a valid communicator; out-pointers are locals.
    unsafe {
        PMPI_Comm_rank(comm, &mut rank);
        PMPI_Comm_size(comm, &mut size);
    }
    let mut private = comm;
    // SAFETY: `private` receives the new communicator.
    check(unsafe { PMPI_Comm_dup(comm, &mut private) })?;
    let node = match Node::discover(private, &super::runtime::get().cfg.shm) {
        Ok(node) => node,
        Err(rc) => {
            free_comm(&mut private);
            return Err(rc);
        }
    };
    let state = Box::into_raw(Box::new(CommState {
        private,
        rank: rank as usize,
        size: size as usize,
        schedules: Mutex::default(),
        node,
        leaders: Mutex::default(),
        memo: Mutex::default(),
    }));
    LIVE.lock().unwrap().insert(state as usize);
    // SAFETY: the attribute owns the box until `delete_state` takes it back.
    check(unsafe { PMPI_Comm_set_attr(comm, keyval, state.cast()) })?;
    log::debug!("created the private communicator for a communicator");
    // SAFETY: just attached; lives until the attribute is deleted.
    Ok(unsafe { &*state })
}

pub(super) fn free_comm(comm: &mut MPI_Comm) {
    // SAFETY: `comm` is a communicator pcoll duplicated and still owns.
    unsafe {
        if *comm != RSMPI_COMM_NULL {
            PMPI_Comm_free(comm);
        }
        *comm = RSMPI_COMM_NULL;
    }
}

/// Delete callback of the keyval: the user freed the communicator (or MPI
/// is deleting attributes at finalize).
unsafe extern "C" fn delete_state(_comm: MPI_Comm, _keyval: c_int, value: *mut c_void, _extra: *mut c_void) -> c_int {
    let outcome = std::panic::catch_unwind(|| {
        LIVE.lock().unwrap().remove(&(value as usize));
        // Release: this deletion is seen by any later lookup's acquire.
        EPOCH.fetch_add(1, Ordering::Release);
        // SAFETY: `value` is the Box<CommState> pcoll attached; MPI calls this once per attribute.
        let mut state = unsafe { Box::from_raw(value as *mut CommState) };
        state.release();
    });
    if outcome.is_err() {
        super::runtime::say("pcoll: internal error while freeing a communicator's state\n");
    }
    MPI_SUCCESS as c_int
}

/// Frees what pcoll made for every communicator still alive; called at
/// MPI_Finalize while MPI still works. The leaders' windows are freed
/// collectively, so the states go in the job-wide order of their windows
/// (see `window::Window::agree_on_id`). The states stay (marked released)
/// until MPI deletes their attributes, if it ever does.
pub(super) fn release_all() {
    // Release: as for a deletion (the states become unusable).
    EPOCH.fetch_add(1, Ordering::Release);
    let live = std::mem::take(&mut *LIVE.lock().unwrap());
    // SAFETY: addresses in LIVE are boxes whose attribute was not yet
    // deleted; at finalize no other thread runs collectives.
    let mut states: Vec<&mut CommState> =
        live.into_iter().map(|address| unsafe { &mut *(address as *mut CommState) }).collect();
    states.sort_by_key(|state| state.leaders.lock().unwrap().window_id());
    for state in states {
        state.release();
    }
    if let Some(&keyval) = KEYVAL.get() {
        let mut keyval = keyval;
        // SAFETY: frees pcoll's keyval; attributes still set keep it alive in MPI.
        unsafe { PMPI_Comm_free_keyval(&mut keyval) };
    }
}
