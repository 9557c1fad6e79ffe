//! The node leaders' one-sided window (SALaR's transfers between nodes):
//! a communicator of the leaders (local rank 0 of every node, ordered by
//! node) split once from the private duplicate, and a window over memory
//! pcoll allocates, kept and reused by every later call (registration is
//! paid once) and grown, collectively among the leaders, when a call
//! needs more. Freed with the communicator, or at MPI_Finalize (a window
//! left to MPI_Finalize crashes UCX under MPICH).
//!
//! Making it may fail: Open MPI 4.1 across hosts over TCP has no
//! one-sided component for it unless osc/pt2pt is allowed (MPI_ERR_WIN).
//! Every rank of the communicator learns at the same call whether every
//! leader has it, and where one has not, the communicator's calls stop
//! choosing SALaR ([`CommState::one_sided`]).

use super::comm::CommState;
use super::host::{Access, Code, Host, Split};
use crate::algos::multinode::{NoWindow, OneSided};
use crate::shm::os::{random_word, HostLock, NotTaken};
use crate::shm::segment::PAGE;
use std::alloc::Layout;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The leaders' communicator and window of one user communicator.
pub struct Leaders<H: Host> {
    /// The leaders' communicator (null at other ranks), once split.
    comm: Option<H::Comm>,
    window: Option<Window<H>>,
    /// Bytes of the window every leader holds (0: none), known at every
    /// rank, so that all take part when it is made.
    made: usize,
}

impl<H: Host> Default for Leaders<H> {
    fn default() -> Leaders<H> {
        Leaders { comm: None, window: None, made: 0 }
    }
}

impl<H: Host> Leaders<H> {
    /// The window of at least `bytes` at a leader, `None` elsewhere, or
    /// [`NoWindow`] at every rank if a leader could not make it. Every
    /// rank of the state's communicator calls this at the same point of
    /// the same call, with the same `bytes` (the first time, the split is
    /// collective over the private duplicate; a larger window is made
    /// collectively among the leaders, and whether every leader made it is
    /// agreed over the private duplicate).
    pub fn window(
        &mut self,
        host: &H,
        state: &CommState<H>,
        leader: bool,
        bytes: usize,
    ) -> Result<Option<&mut dyn OneSided>, NoWindow> {
        let comm = match self.comm {
            Some(comm) => comm,
            None => {
                let node = state.node.node_of[state.rank];
                let split = host.split(state.private, Split::Color(leader.then_some(0)), node);
                *self.comm.insert(split.unwrap_or_else(|rc| failed("splitting the node leaders off", rc)))
            }
        };
        let bytes = bytes.next_multiple_of(PAGE);
        if self.made < bytes {
            self.free_window();
            self.made = 0;
            let made = leader.then(|| Window::create(*host, comm, bytes));
            let mine = u64::from(!matches!(made, Some(Err(_))));
            let everywhere = host
                .allgather_words(state.private, &[mine])
                .unwrap_or_else(|rc| failed("agreeing on the leaders' window", rc))
                .iter()
                .all(|&ok| ok == 1);
            match made {
                Some(Ok(mut window)) if everywhere => {
                    window.id = Window::agree_on_id(host, comm);
                    self.window = Some(window);
                }
                None if everywhere => {}
                _ => {
                    // A window some leaders made and others did not is
                    // left to the host, and its memory with it: freeing it
                    // would wait for the leaders without one.
                    state.one_sided.store(false, Relaxed);
                    if state.rank == 0 {
                        log::warn!(
                            "the node leaders could not make SALaR's one-sided window of {bytes} B on a communicator of \
                             {} ranks (the host MPI refused it; Open MPI across hosts needs osc pt2pt): this call \
                             runs hier, and later calls on the communicator choose another algorithm",
                            state.size
                        );
                    }
                    return Err(NoWindow);
                }
            }
            self.made = bytes;
        }
        Ok(if leader { self.window.as_mut().map(|w| w as &mut dyn OneSided) } else { None })
    }

    fn free_window(&mut self) {
        if let Some(w) = self.window.take() {
            w.free();
        }
    }

    /// Frees the window and the communicator (see [`Leaders::window_id`]
    /// for the order at MPI_Finalize).
    pub fn release(&mut self, host: &H) {
        self.free_window();
        if let Some(comm) = self.comm.as_mut() {
            host.free_comm(comm);
        }
    }

    /// Where this communicator's window comes in the job-wide order of
    /// windows (`None`: it has none). Freeing a window synchronises its
    /// leaders, so at MPI_Finalize every rank frees its windows in this
    /// order (whatever order its threads created them in), which cannot
    /// deadlock.
    pub fn window_id(&self) -> Option<u64> {
        self.window.as_ref().map(|w| w.id)
    }
}

/// A window over memory pcoll allocates. Not MPI_Win_allocate: Open MPI
/// 4.1's osc/rdma names the shared-memory file behind such a window after
/// the communicator's context id, which disjoint communicators on one
/// host may share (their windows then overwrite each other), and MPICH
/// 4.0.2 (ch4:ucx) serves sizes that are not whole pages from the heap,
/// where gets at large offsets silently transfer nothing.
struct Window<H: Host> {
    host: H,
    win: H::Win,
    base: *mut u8,
    bytes: usize,
    /// The same at every leader and unique in the job (see
    /// [`Leaders::window_id`]).
    id: u64,
}

/// The first and the longest pause between attempts at the hosts' window
/// locks ([`Window::create_alone_on_host`]), each stretched by a random
/// factor up to 2 so that competing communicators fall out of step.
const LOCK_PAUSE_FIRST: Duration = Duration::from_micros(50);
const LOCK_PAUSE_LAST: Duration = Duration::from_millis(20);

/// Stops the job's rank: the leaders' window is in an unknown state.
fn failed(what: &str, rc: Code) -> ! {
    panic!("{what} failed (MPI error {rc})")
}

impl<H: Host> Window<H> {
    /// `bytes` (whole pages), page-aligned, zeroed; collective over
    /// `comm`. Numbered 0: the leaders number it once all have it.
    fn create(host: H, comm: H::Comm, bytes: usize) -> Result<Window<H>, Code> {
        let layout = Self::layout(bytes);
        // SAFETY: a non-zero size (at least one page).
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `base` holds `bytes` bytes that live until `free` (after
        // the host frees the window); every leader asks for the same size.
        let win = unsafe {
            match host.window_names_collide() {
                true => Self::create_alone_on_host(host, comm, base, bytes),
                false => host.win_create(comm, base, bytes),
            }
        };
        match win {
            Ok(win) => Ok(Window { host, win, base, bytes, id: 0 }),
            Err(rc) => {
                // SAFETY: allocated above with this layout; the host kept
                // no reference to it.
                unsafe { std::alloc::dealloc(base, layout) };
                log::debug!("MPI_Win_create of the leaders' window of {bytes} B failed: MPI error {rc}");
                Err(rc)
            }
        }
    }

    /// Creates the window while no other window is being created on any
    /// of its hosts ([`Host::window_names_collide`]): the first leader on
    /// each host tries that host's lock, and the creation starts only
    /// once all hold theirs. Otherwise all let go and try again after a
    /// random pause, so that no one ever waits for a lock while holding
    /// another (two communicators whose leaders span the same hosts
    /// would deadlock). Every leader is out of the creation before the
    /// locks go. Costs a split, a few allgathers and a barrier, once per
    /// window.
    ///
    /// # Safety
    /// As [`Host::win_create`].
    unsafe fn create_alone_on_host(host: H, comm: H::Comm, base: *mut u8, bytes: usize) -> Result<H::Win, Code> {
        let rank = host.comm_shape(comm).map_or(0, |(rank, _)| rank);
        let mut on_host = host.split(comm, Split::Shared, rank)?;
        let (local, local_size) = host.comm_shape(on_host).unwrap_or((0, 1));
        host.free_comm(&mut on_host);
        let mut pause = LOCK_PAUSE_FIRST;
        let lock = loop {
            // Some(lock or none needed), or None: another holds it.
            let attempt = match (local, local_size) {
                // a host of one leader has no file to collide on
                (0, 2..) => match HostLock::try_take("window") {
                    Ok(lock) => Some(Some(lock)),
                    Err(NotTaken::Busy) => None,
                    Err(NotTaken::Unavailable) => Some(None),
                },
                _ => Some(None),
            };
            if host.allgather_words(comm, &[u64::from(attempt.is_some())])?.iter().all(|&ready| ready == 1) {
                break attempt.flatten();
            }
            drop(attempt);
            std::thread::sleep(pause.mul_f64(1.0 + (random_word() % 1024) as f64 / 1024.0));
            pause = (pause * 2).min(LOCK_PAUSE_LAST);
        };
        // SAFETY: as the caller promised.
        let win = unsafe { host.win_create(comm, base, bytes) };
        // every leader, whether it made the window or not
        host.barrier(comm)?;
        drop(lock);
        win
    }

    /// The first leader numbers the window (its world rank, its count of
    /// windows) and tells the others.
    fn agree_on_id(host: &H, comm: H::Comm) -> u64 {
        static MADE: AtomicU32 = AtomicU32::new(0);
        let mut id = [(host.world_rank() as u64) << 32 | MADE.fetch_add(1, Ordering::Relaxed) as u64];
        host.bcast_words(comm, &mut id, 0).unwrap_or_else(|rc| failed("numbering the leaders' window", rc));
        id[0]
    }

    fn layout(bytes: usize) -> Layout {
        Layout::from_size_align(bytes, PAGE).expect("a page-aligned layout")
    }

    /// Every leader frees the window at the same point (a growth, the
    /// user freeing the communicator, or MPI_Finalize in the order of the
    /// windows' ids).
    fn free(mut self) {
        self.host.win_free(&mut self.win);
        // SAFETY: allocated in `create` with this layout; the host no
        // longer uses it once the window is freed.
        unsafe { std::alloc::dealloc(self.base, Self::layout(self.bytes)) };
    }

    /// Starts a transfer between bytes `at..at + len` of this leader's
    /// window and `remote..remote + len` of `peer`'s (of the same size).
    fn transfer(&mut self, access: Access, at: usize, peer: usize, remote: usize, len: usize) {
        assert!(at + len <= self.bytes && remote + len <= self.bytes);
        // SAFETY: both ranges lie in the leaders' window memory (checked),
        // which outlives the epoch.
        let done = unsafe { self.host.win_transfer(&mut self.win, access, self.base.add(at), peer, remote, len) };
        done.unwrap_or_else(|rc| failed(&format!("MPI_{access:?} on the leaders' window"), rc));
    }
}

impl<H: Host> OneSided for Window<H> {
    fn local(&mut self) -> &mut [u8] {
        // SAFETY: the window's memory, `bytes` long, owned by this rank;
        // the salar protocol never stores where a transfer of the current
        // epoch reads or writes.
        unsafe { std::slice::from_raw_parts_mut(self.base, self.bytes) }
    }

    fn get(&mut self, peer: usize, from: usize, to: usize, len: usize) {
        self.transfer(Access::Get, to, peer, from, len);
    }

    fn put(&mut self, peer: usize, from: usize, to: usize, len: usize) {
        self.transfer(Access::Put, from, peer, to, len);
    }

    fn fence(&mut self) {
        self.host.win_fence(&mut self.win).unwrap_or_else(|rc| failed("MPI_Win_fence on the leaders' window", rc));
    }
}
