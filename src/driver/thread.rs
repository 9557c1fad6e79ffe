//! Everything pcoll keeps per thread, in one struct, so that a call looks
//! up one thread-local and a repeated call finds all it needs there.
//!
//! A small call spends as long getting to its algorithm as the algorithm
//! takes (Open MPI, 2 ranks, 32-byte Gatherv: 0.20-0.34 us through the
//! full path, 0.08-0.12 us straight to the node algorithm), so each step of
//! the path remembers its last answer here:
//! - `comm`: the last communicator looked up (Open MPI's attribute lookup
//!   takes a global lock);
//! - `plans`: the last plans of each collective, one per root up to
//!   [`ROOT_WAYS`] roots ([`super::prepared`]): a loop of calls with the
//!   same arguments, buffers aside, skips the checks, the decision and the
//!   planning, also where the root rotates;
//! - `decision`: the last decision and what it was made from
//!   ([`super::plan::decide`]): calls of one shape do not read the rules
//!   again (27-55 ns a call at 2 ranks);
//! - `schedule`: the key of the schedule a communicator's cache returned
//!   last ([`super::cache::ScheduleCache::get`]): a loop skips hashing;
//! - `types`: the predefined datatypes used last, whose handles never
//!   change meaning (three host queries each);
//! - `scratch`: the scratch buffer of schedules and node reductions (a
//!   fresh large allocation per call costs a page fault per page);
//! - `layout`: the last Gatherv layout computed at a root
//!   ([`super::gatherv`]);
//! - `buffers`: where each collective's last send and receive buffers
//!   were, taken to be in cache when they come again
//!   ([`PerThread::ask_for_new`]).
//!
//! And `busy`, the reentry guard: set while the thread is inside a pcoll
//! call, so that a collective called from inside it (by a user-defined
//! operator that pcoll, or the host on pcoll's behalf, invokes) goes
//! straight to the host ([`PerThread::enter`]). Nothing here is ever used
//! by two calls at once.
//!
//! Each host declares one `thread_local!` of this type ([`Host::with_thread`]).

use super::comm::CommState;
use super::gatherv::LayoutMemo;
use super::host::{Host, TypeKind, TypeLayout};
use super::plan::LastDecision;
use super::prepared::Remembered;
use crate::core::types::Coll;
use crate::shm::prefetch;
use std::cell::{Cell, RefCell};

/// Roots whose plans a thread keeps per collective ([`super::prepared::way`]):
/// IMB rotates the root over every rank; 16 cover the ranks of a node of
/// today's clusters' small jobs, at about 1.5 KiB a thread per collective.
pub const ROOT_WAYS: usize = 16;

/// A communicator looked up: (handle, state, epoch).
type LastComm<H> = (<H as Host>::Comm, *const CommState<H>, u64);
/// A predefined datatype: (handle, kind, layout).
type KnownType<H> = (<H as Host>::Datatype, TypeKind, TypeLayout);

/// The per-thread state of pcoll calls on host `H` (see the module).
pub struct PerThread<H: Host> {
    busy: Cell<bool>,
    /// The last communicator looked up.
    pub(super) comm: Cell<Option<LastComm<H>>>,
    /// The last plans of each collective, by [`crate::core::types::Coll::index`]
    /// and [`super::prepared::way`] of the root.
    pub(super) plans: RefCell<[[Option<Remembered<H>>; ROOT_WAYS]; 4]>,
    pub(super) decision: RefCell<Option<LastDecision>>,
    pub(super) schedule: Cell<Option<u64>>,
    /// Predefined datatypes, the latest first.
    pub(super) types: RefCell<[Option<KnownType<H>>; 4]>,
    scratch: Cell<Vec<u8>>,
    pub(super) layout: Cell<LayoutMemo>,
    buffers: [Cell<[usize; 2]>; 4],
}

impl<H: Host> PerThread<H> {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> PerThread<H> {
        PerThread {
            busy: Cell::new(false),
            comm: Cell::new(None),
            plans: RefCell::new([const { [const { None }; ROOT_WAYS] }; 4]),
            decision: RefCell::new(None),
            schedule: Cell::new(None),
            types: RefCell::new([None; 4]),
            scratch: Cell::new(Vec::new()),
            layout: Cell::new(LayoutMemo::new()),
            buffers: [const { Cell::new([0; 2]) }; 4],
        }
    }

    /// Enters a pcoll call: `None` if this thread is inside one already
    /// (the caller hands the call to the host), else the guard that leaves
    /// it when dropped.
    #[inline]
    pub fn enter(&self) -> Option<Inside<'_>> {
        if self.busy.replace(true) {
            return None;
        }
        Some(Inside(&self.busy))
    }

    /// Asks for the lines of a `coll` call's small send and receive
    /// buffers ([`prefetch::at_start`]) unless they are the thread's last
    /// such call's, which are taken to be in cache: asking again for lines
    /// in cache cost hot Gathervs of 8-512 B 0.01-0.03 us
    /// (docs/measurements.md).
    #[inline]
    pub(super) fn ask_for_new(&self, coll: Coll, send: Option<&[u8]>, recv: Option<&[u8]>) {
        let at = |bytes: Option<&[u8]>| bytes.map_or(0, |b| b.as_ptr() as usize);
        let last = self.buffers[coll.index()].replace([at(send), at(recv)]);
        let (send_up_to, recv_up_to) = prefetch::at_start(coll);
        if let Some(send) = send.filter(|_| last[0] != at(send)) {
            prefetch::small(send, send_up_to);
        }
        if let Some(recv) = recv.filter(|_| last[1] != at(recv)) {
            prefetch::small(recv, recv_up_to);
        }
    }

    /// Runs `f` with `bytes` of the thread's scratch buffer, from a cache
    /// line's start. A call that needs none does not touch it.
    #[inline]
    pub(super) fn with_scratch<R>(&self, bytes: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        if bytes == 0 {
            return f(&mut []);
        }
        let mut scratch = self.scratch.take();
        if scratch.len() < bytes + SCRATCH_ALIGN - 1 {
            scratch.resize(bytes + SCRATCH_ALIGN - 1, 0);
        }
        let start = (scratch.as_ptr() as usize).wrapping_neg() % SCRATCH_ALIGN;
        let result = f(&mut scratch[start..start + bytes]);
        if scratch.len() <= MAX_KEPT_SCRATCH {
            self.scratch.set(scratch);
        }
        result
    }
}

/// Larger scratch buffers are freed after the call instead of kept.
const MAX_KEPT_SCRATCH: usize = 64 << 20;

/// Where scratch starts: a cache line, which the kernel's copies of zero
/// copy want (malloc's large blocks start 16 bytes into a page; 2 ranks,
/// hot, `process_vm_readv` of 128 KiB into such a destination: 9.2 us
/// against 7.7 line-aligned).
const SCRATCH_ALIGN: usize = 64;

/// A thread's stay inside a pcoll call (see [`PerThread::enter`]).
pub struct Inside<'a>(&'a Cell<bool>);

impl Drop for Inside<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.set(false);
    }
}
