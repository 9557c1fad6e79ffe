//! The thread's last call of each collective, kept ready to run again.
//!
//! A small call spends as long getting to its algorithm as the algorithm
//! takes: finding the communicator's state, checking the arguments,
//! deciding, planning, each with its own thread-local lookup (Open MPI, 2
//! ranks, 32-byte Gatherv: the non-root's call took 0.20-0.34 us through
//! that path, 0.08-0.12 us straight to the node algorithm). A loop of calls
//! with the same arguments, apart from the buffers, finds the plan here
//! with one lookup; only the buffer checks run again.
//!
//! A plan is remembered only when its arguments mean the same thing for as
//! long as they are equal: predefined datatypes and operators (a freed
//! derived type's or user operator's handle may come back as another), on
//! a communicator pcoll has state for, which is valid while no state has
//! been deleted since ([`comm::epoch`]), and with the same choice of
//! algorithm ([`Runtime::choice`], which `pcoll_set_algorithm` changes).

use super::comm::{self, CommState};
use super::entry::Planned;
use super::handles::Combine;
use super::runtime::Runtime;
use crate::core::types::Coll;
use crate::select::config::Choice;
use mpi_sys::*;
use std::cell::RefCell;
use std::rc::Rc;

/// What a call's plan depends on besides the communicator's state: the
/// collective's arguments other than buffers (the root is -1 in an
/// Allreduce, the operator `None` outside reductions).
#[derive(Clone, Copy, PartialEq)]
pub(super) struct Key {
    pub comm: MPI_Comm,
    pub count: i64,
    pub datatype: MPI_Datatype,
    pub op: Option<MPI_Op>,
    pub root: i64,
    pub in_place: bool,
}

/// A planned call: the state of its communicator, the plan, and for a
/// reduction how elements combine. Shared with the thread's memory of it
/// (a copy would cost more than the lookup).
pub(super) struct Prepared {
    state: *const CommState,
    pub call: Planned,
    pub combine: Option<Combine>,
}

impl Prepared {
    pub fn new(state: &CommState, call: Planned, combine: Option<Combine>) -> Rc<Prepared> {
        Rc::new(Prepared { state, call, combine })
    }

    pub fn state(&self) -> &CommState {
        // SAFETY: made from a live state, and recalled only while no state
        // was deleted since (see `recall`); MPI forbids freeing the
        // communicator during the call that uses it.
        unsafe { &*self.state }
    }
}

struct Entry {
    key: Key,
    epoch: u64,
    choice: *const Choice,
    prepared: Rc<Prepared>,
}

thread_local! {
    static LAST: RefCell<[Option<Entry>; 4]> = const { RefCell::new([None, None, None, None]) };
}

/// The plan of the thread's last `coll` call if it had this key and is
/// still valid.
pub(super) fn recall(rt: &Runtime, coll: Coll, key: &Key) -> Option<Rc<Prepared>> {
    let epoch = comm::epoch();
    let choice: *const Choice = rt.choice(coll);
    LAST.with_borrow(|last| {
        last[coll.index()]
            .as_ref()
            .filter(|e| e.key == *key && e.epoch == epoch && std::ptr::eq(e.choice, choice))
            .map(|e| e.prepared.clone())
    })
}

/// Keeps `prepared`, planned under `epoch` (read before the communicator's
/// state was looked up), for the next `coll` call with this key.
pub(super) fn remember(rt: &Runtime, coll: Coll, key: Key, epoch: u64, prepared: &Rc<Prepared>) {
    let choice = rt.choice(coll);
    LAST.with_borrow_mut(|last| {
        last[coll.index()] = Some(Entry { key, epoch, choice, prepared: prepared.clone() });
    });
}
