//! The thread's last calls of each collective, one per root (up to
//! [`ROOT_WAYS`] roots), kept ready to run again (in [`PerThread`]): a loop
//! of calls with the same arguments, apart from the buffers, finds the plan
//! with no further lookup, also where the root rotates from call to call
//! (as IMB loops rooted collectives); only the buffer checks run again.
//! A call the plan hands to the host (a rule or setting that chooses the
//! host MPI) is remembered as such, so that forwarding it costs no more
//! than the lookup.
//!
//! A plan is remembered only when its arguments mean the same thing for as
//! long as they are equal: predefined datatypes and operators (a freed
//! derived type's or user operator's handle may come back as another), on
//! a communicator pcoll has state for, which is valid while no state has
//! been deleted since ([`Host::epoch`]), and with the same choice of
//! algorithm ([`Runtime::choice`], which `pcoll_set_algorithm` changes).

use super::classify::Combine;
use super::comm::CommState;
use super::plan::Planned;
use super::runtime::Runtime;
use super::thread::{PerThread, ROOT_WAYS};
use super::Host;
use crate::core::types::Coll;
use crate::select::config::Choice;
use std::rc::Rc;

/// What a call's plan depends on besides the communicator's state: the
/// collective's arguments other than buffers (the root is -1 in an
/// Allreduce, the operator `None` outside reductions).
pub struct Key<H: Host> {
    pub comm: H::Comm,
    pub count: i64,
    pub datatype: H::Datatype,
    pub op: Option<H::Op>,
    pub root: i64,
    pub in_place: bool,
}

impl<H: Host> Clone for Key<H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H: Host> Copy for Key<H> {}

impl<H: Host> PartialEq for Key<H> {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.comm == other.comm
            && self.count == other.count
            && self.datatype == other.datatype
            && self.op == other.op
            && self.root == other.root
            && self.in_place == other.in_place
    }
}

/// A planned call: the state of its communicator, the plan, and for a
/// reduction how elements combine. Shared with the thread's memory of it
/// (a copy would cost more than the lookup).
pub struct Prepared<H: Host> {
    state: *const CommState<H>,
    pub call: Planned,
    pub combine: Option<Combine<H>>,
}

impl<H: Host> Prepared<H> {
    pub fn new(state: &CommState<H>, call: Planned, combine: Option<Combine<H>>) -> Rc<Prepared<H>> {
        Rc::new(Prepared { state, call, combine })
    }

    #[inline]
    pub fn state(&self) -> &CommState<H> {
        // SAFETY: made from a live state, and recalled only while no state
        // was deleted since (see `recall`); MPI forbids freeing the
        // communicator during the call that uses it.
        unsafe { &*self.state }
    }
}

/// A planned call, or why the host MPI runs it.
pub type Planning<H> = Result<Rc<Prepared<H>>, &'static str>;

/// A remembered plan and what it is valid for.
pub struct Remembered<H: Host> {
    key: Key<H>,
    epoch: u64,
    choice: *const Choice,
    planning: Planning<H>,
}

/// Where a plan with this root is remembered: a root's own place for up to
/// [`ROOT_WAYS`] roots (an Allreduce's -1 in the last), so that rotating
/// roots do not evict each other's plans. Planning again costs 0.1-0.2 us
/// a call (2 ranks, 8 B, Gatherv with the root rotating: 0.40 -> 0.25 us).
pub fn way(root: i64) -> usize {
    root.rem_euclid(ROOT_WAYS as i64) as usize
}

/// The plan of the thread's last `coll` call with this key's root way if
/// it had this key and is still valid.
#[inline]
pub fn recall<H: Host>(host: &H, rt: &Runtime, t: &PerThread<H>, coll: Coll, key: &Key<H>) -> Option<Planning<H>> {
    let epoch = host.epoch();
    let choice: *const Choice = rt.choice(coll);
    t.plans.borrow()[coll.index()][way(key.root)]
        .as_ref()
        .filter(|e| e.key == *key && e.epoch == epoch && std::ptr::eq(e.choice, choice))
        .map(|e| e.planning.clone())
}

/// Keeps `planning` (a plan, or the host's reason from the plan: never a
/// forward that a later call with this key would not make, such as a new
/// communicator's), made under `epoch` (read before the communicator's
/// state was looked up), for the next `coll` call with this key.
pub fn remember<H: Host>(rt: &Runtime, t: &PerThread<H>, coll: Coll, key: Key<H>, epoch: u64, planning: Planning<H>) {
    let choice = rt.choice(coll);
    t.plans.borrow_mut()[coll.index()][way(key.root)] = Some(Remembered { key, epoch, choice, planning });
}
