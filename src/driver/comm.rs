//! Per-communicator state: what pcoll keeps of a communicator it runs
//! calls on (its ranks and nodes, the schedules built for it, the node
//! algorithms' memory), and how a call finds it.
//!
//! The host creates it at the call that sets the communicator up
//! ([`state_after`]: after the calls left to the host; a point every rank
//! reaches together, since collectives are called in the same order
//! everywhere), through node discovery ([`super::node::discover`]), and
//! releases it with the communicator, keeping its segment for a later
//! one ([`States::delete`]). A handle can be reused only after its
//! communicator is freed, and every deletion bumps the host's epoch
//! ([`Host::epoch`]), so a (handle, state) pair remembered under the
//! current epoch is valid.

use super::cache::ScheduleCache;
use super::host::{Code, Host};
use super::pool::{Pool, Tag};
use super::thread::PerThread;
use super::window::Leaders;
use crate::algos::multinode::Memo;
use crate::algos::node::bcast_queue::Tree;
use crate::algos::node::{NodeMemory, QueueSettings};
use crate::core::call::Topo;
use crate::select::config::{ShmConfig, ShmTree};
use crate::shm::segment::Segment;
use crate::shm::team::{NodeSettings, TeamState};
use crate::shm::{NodeOs, PeerMemory};
use std::cell::UnsafeCell;
use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;

pub struct CommState<H: Host> {
    /// This rank and the size of the communicator (an intracommunicator of
    /// more than one rank: pcoll keeps no state for others).
    pub rank: usize,
    pub size: usize,
    /// Schedules of calls on this communicator. A communicator is used by
    /// one thread at a time (MPI's rule for collectives), so the lock is
    /// never contended; it makes the state shareable.
    pub schedules: Mutex<ScheduleCache>,
    /// This rank's node: its ranks and the node algorithms' state.
    pub node: NodeState,
    /// The node leaders' one-sided window (SALaR).
    pub leaders: Mutex<Leaders<H>>,
    /// Whether the leaders can make that window ([`Topo::one_sided`]):
    /// cleared at every rank at the call where it failed, so that the
    /// calls after choose another algorithm. Read by every call.
    pub one_sided: AtomicBool,
    /// What the node-aware compositions remember between calls.
    pub memo: Mutex<Memo>,
    /// The private duplicate of the user's communicator, which carries
    /// all of pcoll's traffic; null once released.
    pub private: H::Comm,
    /// The ranks of this rank's node (of the private duplicate; the
    /// private duplicate itself where the job runs on one host).
    pub node_comm: H::Comm,
    /// The node's segment and zero copy, where they could be set up.
    pub mapping: Option<<H::Os as NodeOs>::Mapping>,
    pub peers: Option<<H::Os as NodeOs>::Peers>,
    /// The segment's tag where it is shared with other ranks (not a node
    /// of one rank's private memory): kept for a later communicator when
    /// this one is freed.
    pub segment: Option<Tag>,
}

/// A segment kept for a later communicator ([`Pool`]): the mapping, the
/// step protocol's state that goes with it, and zero copy to the same
/// processes where it worked.
pub struct Kept<H: Host> {
    pub mapping: Mapping<H>,
    pub state: CallState,
    pub peers: Option<Peers<H>>,
}

/// A mapped segment of the host's, and zero copy to a node's ranks.
pub type Mapping<H> = <<H as Host>::Os as NodeOs>::Mapping;
pub type Peers<H> = <<H as Host>::Os as NodeOs>::Peers;

/// A process's budget of /dev/shm and the segments it keeps.
pub type SegmentPool<H> = Mutex<Pool<Kept<H>>>;

impl<H: Host> CommState<H> {
    pub fn topo(&self) -> Topo {
        // Relaxed: only the thread that runs this communicator's calls
        // writes it, between calls.
        Topo { one_sided: self.one_sided.load(Relaxed), ..self.node.topo }
    }

    /// The node's segment and the peer memory of its ranks (zero copy,
    /// where it works); `None` where this node has no segment.
    pub fn node_memory(&self) -> Option<(&Segment, Option<&dyn PeerMemory>)> {
        let peers = self.peers.as_ref().map(|p| p as &dyn PeerMemory);
        self.mapping.as_ref().map(|m| (m.as_ref(), peers))
    }

    /// Frees what pcoll made for the communicator, while the host still
    /// runs, but for a shared segment, which it returns with its tag and
    /// zero copy (to be kept or let go). Logs the node algorithms' timed choices once:
    /// the host may release a state twice (at MPI_Finalize, then when MPI
    /// deletes the communicator's attribute).
    pub fn release(&mut self, host: &H) -> Option<(Tag, Mapping<H>, Option<Peers<H>>)> {
        self.leaders.get_mut().unwrap().release(host);
        let mapping = self.mapping.take();
        if mapping.is_some() {
            for line in self.node.summary() {
                log::info!("node layer, {line}");
            }
        }
        let peers = self.peers.take();
        if self.node_comm != self.private {
            host.free_comm(&mut self.node_comm);
        }
        host.free_comm(&mut self.private);
        self.node_comm = self.private;
        Some((self.segment.take()?, mapping?, peers))
    }
}

/// The states a host keeps alive, each owned through a handle of the
/// host's (MPI: an attribute of the user's communicator) until the user
/// frees the communicator: the epoch that tells a remembered state from a
/// stale one, and what MPI_Finalize releases.
pub struct States<H> {
    /// Addresses of every live state.
    live: Mutex<BTreeSet<usize>>,
    /// Bumped whenever a state is deleted: a communicator handle can be
    /// reused only after its communicator is freed, so a cached (handle,
    /// state) pair of an older epoch may be stale and one of the current
    /// epoch is not.
    epoch: AtomicU64,
    host: PhantomData<fn() -> H>,
}

impl<H: Host> States<H> {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> States<H> {
        States { live: Mutex::new(BTreeSet::new()), epoch: AtomicU64::new(0), host: PhantomData }
    }

    /// The number of deletions so far (see [`Host::epoch`]).
    #[inline]
    pub fn epoch(&self) -> u64 {
        // Acquire: pairs with the release bump of a deletion, so a state
        // cached under the current epoch was not deleted.
        self.epoch.load(Acquire)
    }

    /// Keeps `state` alive until [`States::delete`]; its address, for the
    /// host's handle.
    pub fn add(&self, state: CommState<H>) -> *mut CommState<H> {
        let state = Box::into_raw(Box::new(state));
        self.live.lock().unwrap().insert(state as usize);
        state
    }

    /// Releases and frees a state: the user freed its communicator (or
    /// the host deletes what is left at MPI_Finalize). Its shared segment
    /// is kept for a later communicator of the same ranks.
    ///
    /// # Safety
    /// `state` came from [`States::add`], is deleted once, and no call
    /// uses it any more.
    pub unsafe fn delete(&self, host: &H, state: *mut CommState<H>) {
        self.live.lock().unwrap().remove(&(state as usize));
        // Release: this deletion is seen by any later lookup's acquire.
        self.epoch.fetch_add(1, Release);
        // SAFETY: a box from `add`, not deleted before (the caller's promise).
        let mut state = *unsafe { Box::from_raw(state) };
        if let Some((tag, mapping, peers)) = state.release(host) {
            host.pool().lock().unwrap().keep(tag, Kept { mapping, state: state.node.state, peers });
        }
    }

    /// Releases every live state, at MPI_Finalize while the host still
    /// works. The leaders' windows are freed collectively, so the states
    /// go in the job-wide order of their windows
    /// ([`super::window::Leaders::window_id`]). The states stay (released)
    /// until the host deletes them, if it ever does.
    ///
    /// # Safety
    /// No other thread uses any state.
    pub unsafe fn release_all(&self, host: &H) {
        // Release: as for a deletion (the states become unusable).
        self.epoch.fetch_add(1, Release);
        let live = std::mem::take(&mut *self.live.lock().unwrap());
        // SAFETY: live boxes from `add`, not deleted; nothing else uses
        // them (the caller's promise).
        let mut states: Vec<&mut CommState<H>> =
            live.into_iter().map(|address| unsafe { &mut *(address as *mut CommState<H>) }).collect();
        states.sort_by_key(|state| state.leaders.lock().unwrap().window_id());
        let mut pool = host.pool().lock().unwrap();
        for state in states {
            if let Some((tag, ..)) = state.release(host) {
                pool.unreserve(tag.own_bytes());
            }
        }
        pool.clear();
    }
}

/// A rank's place on its node, agreed by every rank of the communicator.
pub struct NodeState {
    /// This rank on its node, and the node's ranks.
    pub rank: usize,
    pub size: usize,
    /// Every communicator rank's node index and local rank.
    pub node_of: Vec<usize>,
    pub local_of: Vec<usize>,
    pub topo: Topo,
    pub settings: NodeSettings,
    /// The step protocol's state; one call at a time uses it.
    pub state: CallState,
}

/// What a rank tells every other rank of the communicator about its node
/// when the state is created: the first communicator rank of its node
/// (which names the node), its rank there, whether it has the node's
/// segment and whether zero copy works there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeReport {
    pub leader: usize,
    pub local: usize,
    pub segment: bool,
    pub zero_copy: bool,
}

impl NodeReport {
    pub fn to_words(self) -> [u64; 4] {
        [self.leader as u64, self.local as u64, self.segment as u64, self.zero_copy as u64]
    }

    pub fn from_words(w: &[u64]) -> NodeReport {
        NodeReport { leader: w[0] as usize, local: w[1] as usize, segment: w[2] == 1, zero_copy: w[3] == 1 }
    }
}

impl NodeState {
    /// This rank's node from every rank's report (the same at every rank,
    /// so every rank computes the same [`Topo`]): `rank`, `size` on the
    /// node; `oversubscribed`: the host runs more ranks than it has cores;
    /// `state`: the step protocol's ([`CallState::fresh`], or a kept
    /// segment's).
    pub fn new(
        rank: usize,
        size: usize,
        reports: &[NodeReport],
        cfg: &ShmConfig,
        oversubscribed: bool,
        state: CallState,
    ) -> NodeState {
        let mut leaders: Vec<usize> = Vec::new();
        let node_of: Vec<usize> = reports
            .iter()
            .map(|r| match leaders.iter().position(|&l| l == r.leader) {
                Some(i) => i,
                None => {
                    leaders.push(r.leader);
                    leaders.len() - 1
                }
            })
            .collect();
        let local_of: Vec<usize> = reports.iter().map(|r| r.local).collect();
        let mut per_node = vec![0usize; leaders.len()];
        node_of.iter().for_each(|&n| per_node[n] += 1);
        // Node indices count from the first rank up, so nodes hold
        // consecutive ranks exactly when the index never steps back.
        let contiguous = node_of.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1);
        // Zero copy means nothing on a node of one rank.
        let zero_copy = |r: usize| reports[r].zero_copy || per_node[node_of[r]] == 1;
        let topo = Topo {
            nodes: leaders.len(),
            contiguous,
            shm: reports.iter().all(|r| r.segment),
            zcopy: (0..reports.len()).all(zero_copy),
            chunk: cfg.chunk,
            one_sided: true,
        };
        NodeState { rank, size, node_of, local_of, topo, settings: cfg.node_settings(oversubscribed), state }
    }

    /// The choices the node algorithms settled on by timing, a line each,
    /// for the log when the communicator goes.
    pub fn summary(&self) -> Vec<String> {
        self.state.take().map_or_else(Vec::new, |state| state.memory.summary())
    }
}

/// The step protocol's state of a node communicator, taken by one call
/// at a time. Not a mutex: MPI forbids two collectives on one communicator
/// at once, so a second taker (another thread: the reentry guard sends a
/// nested call on the same thread to the host) is an erroneous program,
/// stopped with a message instead of made to wait (where it would hang,
/// its collectives out of order). And it is released with a plain store: a
/// mutex's release is a locked instruction, which waits for the call's
/// last stores, often to a cold line of the user's buffer (Open MPI, 2
/// ranks, 8-byte Allreduce and Bcast with pcoll_bench: 8-15% faster
/// without). It is taken with one only where threads may call MPI at once
/// (MPI_THREAD_MULTIPLE); below that level one thread calls at a time, and
/// a load and a store tell a nested taker (Open MPI, 8-byte Reduce, the
/// non-root: 0.10 -> 0.09 us).
pub struct CallState {
    taken: AtomicBool,
    /// Threads may take it at the same time.
    threads_at_once: bool,
    state: UnsafeCell<TeamState<NodeMemory>>,
}

// SAFETY: `state` is reached only through a `CallGuard`, of which `taken`
// admits one at a time (with a compare-and-swap where threads may race).
unsafe impl Sync for CallState {}

/// What a second taker of a [`CallState`] is told before the job stops.
pub const CONTENDED: &str =
    "pcoll: two collectives on one communicator at the same time (from two threads): erroneous program; aborting\n";

impl CallState {
    /// The state of a new segment, with the node algorithms' settings;
    /// `threads_at_once`: the process's threads may call MPI at once.
    pub fn fresh(cfg: &ShmConfig, threads_at_once: bool) -> CallState {
        let tree = match cfg.tree {
            ShmTree::Flat => Tree::Flat,
            ShmTree::Chain => Tree::Chain,
            ShmTree::Kary => Tree::Kary(cfg.tree_k),
            ShmTree::Knomial => Tree::Knomial(cfg.tree_k),
        };
        let memory = NodeMemory::new(QueueSettings { fragment: cfg.fragment, tree }, cfg.node_sizes(), cfg.adapt);
        CallState {
            taken: AtomicBool::new(false),
            threads_at_once,
            state: UnsafeCell::new(TeamState { memory, ..TeamState::default() }),
        }
    }

    /// The state for one call; `None` while another call holds it.
    #[inline]
    pub fn take(&self) -> Option<CallGuard<'_>> {
        if self.threads_at_once {
            // Acquire: the previous call's writes to the state (released
            // by its guard) happen before this call's use of it.
            return self.taken.compare_exchange(false, true, Acquire, Relaxed).ok().map(|_| CallGuard(self));
        }
        // Acquire: as above, for the thread that called MPI before (the
        // program orders its calls among threads); Relaxed: no other
        // thread calls now.
        if self.taken.load(Acquire) {
            return None;
        }
        self.taken.store(true, Relaxed);
        Some(CallGuard(self))
    }
}

/// One call's hold on a communicator's protocol state.
pub struct CallGuard<'a>(&'a CallState);

impl Deref for CallGuard<'_> {
    type Target = TeamState<NodeMemory>;
    fn deref(&self) -> &TeamState<NodeMemory> {
        // SAFETY: this guard is the only one (see CallState::take).
        unsafe { &*self.0.state.get() }
    }
}

impl DerefMut for CallGuard<'_> {
    fn deref_mut(&mut self) -> &mut TeamState<NodeMemory> {
        // SAFETY: as for deref; `&mut self` makes this borrow unique.
        unsafe { &mut *self.0.state.get() }
    }
}

impl Drop for CallGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: this call's writes to the state before the next call's
        // acquire (a plain store on x86).
        self.0.taken.store(false, Release);
    }
}

/// pcoll's state for `comm` if it has one already: the thread's last
/// communicator, else the host's lookup (remembered for the next call).
#[inline]
pub fn lookup<'a, H: Host>(host: &H, t: &PerThread<H>, comm: H::Comm) -> Option<&'a CommState<H>> {
    let epoch = host.epoch();
    if let Some((c, state, e)) = t.comm.get() {
        if c == comm && e == epoch {
            // SAFETY: a live state (its epoch is current), see the module.
            return Some(unsafe { &*state });
        }
    }
    let state = host.find_state(comm)?;
    t.comm.set(Some((comm, state as *const CommState<H>, epoch)));
    Some(state)
}

/// pcoll's state for `comm`, an intracommunicator of more than one rank,
/// created on first use (collective over `comm` then).
pub fn state<'a, H: Host>(host: &H, t: &PerThread<H>, comm: H::Comm) -> Result<&'a CommState<H>, Code> {
    Ok(state_after(host, t, comm, 0)?.expect("set up at once"))
}

/// Why the host runs a call that pcoll leaves to it while a communicator
/// is new ([`state_after`]).
pub const NEW_COMMUNICATOR: &str = "a new communicator (PCOLL_SETUP_AFTER)";

/// pcoll's state for `comm`, an intracommunicator of more than one rank,
/// set up at the call that follows `after` calls on it that the host ran
/// (collective over `comm` then); `None`: the host runs this one, which
/// is counted. Calls are counted at the same point of every rank's call,
/// so every rank sets up at the same call. Communicators created, used
/// once and freed (the default `after` is 1) then cost pcoll nothing but
/// the count, kept with the communicator ([`Host::count_host_call`]).
pub fn state_after<'a, H: Host>(
    host: &H,
    t: &PerThread<H>,
    comm: H::Comm,
    after: usize,
) -> Result<Option<&'a CommState<H>>, Code> {
    if let Some(state) = lookup(host, t, comm) {
        return Ok(Some(state));
    }
    if after > 0 && host.count_host_call(comm, after) {
        return Ok(None);
    }
    host.create_state(comm).map(Some)
}

/// (rank, size) of an intracommunicator of more than one rank; `None` for
/// a null handle, intercommunicators and single-rank communicators, which
/// the host MPI handles. A communicator pcoll already knows costs no host
/// query.
pub fn shape<H: Host>(host: &H, t: &PerThread<H>, comm: H::Comm) -> Option<(usize, usize)> {
    if let Some(state) = lookup(host, t, comm) {
        return Some((state.rank, state.size));
    }
    host.comm_shape(comm).filter(|&(_, size)| size > 1)
}
