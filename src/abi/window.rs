//! The node leaders' one-sided window (SALaR's transfers between nodes):
//! a communicator of the leaders (local rank 0 of every node, ordered by
//! node) split once from the private duplicate, and a window allocated on
//! it, kept and reused by every later call (registration is paid once) and
//! grown, collectively among the leaders, when a call needs more. Freed
//! with the communicator, or at MPI_Finalize (a window left to MPI_Finalize
//! crashes UCX under MPICH).

use super::shim;
use crate::algos::multinode::OneSided;
use crate::driver::Host;
use mpi_sys::*;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

/// The leaders' communicator and window of one user communicator.
pub(super) struct Leaders {
    /// Whether the split was done (every rank took part).
    split: bool,
    /// The leaders' communicator; MPI_COMM_NULL at other ranks.
    comm: MPI_Comm,
    window: Option<Window>,
}

// SAFETY: the handles and the window's memory are used by one call at a
// time (the communicator's collectives are serialised), from any thread.
unsafe impl Send for Leaders {}

/// A window over memory pcoll allocates. Not MPI_Win_allocate: Open MPI
/// 4.1's osc/rdma names the shared-memory file behind such a window after
/// the communicator's context id, which disjoint communicators on one
/// host may share (their windows then overwrite each other), and MPICH
/// 4.0.2 (ch4:ucx) serves sizes that are not whole pages from the heap,
/// where gets at large offsets silently transfer nothing.
struct Window {
    win: MPI_Win,
    base: *mut u8,
    bytes: usize,
    /// The same at every leader and unique in the job (see [`Window::id`]).
    id: u64,
}

impl Window {
    /// Whole pages, page-aligned, zeroed; collective over `comm`.
    fn create(comm: MPI_Comm, bytes: usize) -> Window {
        let bytes = bytes.next_multiple_of(PAGE);
        let layout = Self::layout(bytes);
        // SAFETY: a non-zero size (at least one page).
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: MPI_WIN_NULL until the creation writes it.
        let mut win = unsafe { RSMPI_WIN_NULL };
        // SAFETY: `base` holds `bytes` bytes that live until `free` (after
        // MPI_Win_free); every leader calls this with the same size.
        let rc = unsafe { PMPI_Win_create(base.cast(), bytes as MPI_Aint, 1, RSMPI_INFO_NULL, comm, &mut win) };
        assert_eq!(rc, MPI_SUCCESS as c_int, "creating the leaders' window of {bytes} bytes failed");
        Window { win, base, bytes, id: Self::agree_on_id(comm) }
    }

    /// A job-wide order of windows: freeing one synchronises its leaders,
    /// so at MPI_Finalize every rank frees its windows in this order
    /// (whatever order its threads created them in), which cannot
    /// deadlock. The first leader numbers the window (its world rank, its
    /// count of windows) and tells the others.
    fn agree_on_id(comm: MPI_Comm) -> u64 {
        static MADE: AtomicU32 = AtomicU32::new(0);
        let mut world_rank = 0;
        // SAFETY: the out-pointer is a local.
        unsafe { PMPI_Comm_rank(RSMPI_COMM_WORLD, &mut world_rank) };
        let mut id = (world_rank as u64) << 32 | MADE.fetch_add(1, Ordering::Relaxed) as u64;
        // SAFETY: one u64 at every leader, from the first.
        let rc = unsafe { PMPI_Bcast((&mut id as *mut u64).cast(), 1, RSMPI_UINT64_T, 0, comm) };
        assert_eq!(rc, MPI_SUCCESS as c_int, "numbering the leaders' window failed");
        id
    }

    fn layout(bytes: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(bytes, PAGE).expect("a page-aligned layout")
    }

    fn free(mut self) {
        // SAFETY: the window pcoll created; every leader frees it at the
        // same point (a growth, the user freeing the communicator, or
        // MPI_Finalize in the order of the windows' ids).
        unsafe { PMPI_Win_free(&mut self.win) };
        // SAFETY: allocated in `create` with this layout; MPI no longer
        // uses it after MPI_Win_free.
        unsafe { std::alloc::dealloc(self.base, Self::layout(self.bytes)) };
    }
}

const PAGE: usize = 4096;

impl Default for Leaders {
    fn default() -> Leaders {
        // SAFETY: reads a handle constant.
        Leaders { split: false, comm: unsafe { RSMPI_COMM_NULL }, window: None }
    }
}

impl Leaders {
    /// The window of at least `bytes` at a leader, `None` elsewhere. Every
    /// rank of `private` calls this at the same point of the same call
    /// (the first time, the split is collective over `private`; a larger
    /// window is allocated collectively among the leaders, who all ask for
    /// the same size). `node` orders the leaders.
    pub(super) fn window(&mut self, private: MPI_Comm, leader: bool, node: usize, bytes: usize) -> Option<&mut Self> {
        if !self.split {
            // SAFETY: a collective over the private duplicate, every rank
            // at the same point; `comm` receives the new communicator.
            let rc = unsafe {
                PMPI_Comm_split(private, if leader { 0 } else { RSMPI_UNDEFINED }, node as c_int, &mut self.comm)
            };
            assert_eq!(rc, MPI_SUCCESS as c_int, "splitting the node leaders off failed");
            self.split = true;
        }
        if !leader {
            return None;
        }
        if self.window.as_ref().is_none_or(|w| w.bytes < bytes) {
            self.free_window();
            self.window = Some(Window::create(self.comm, bytes));
        }
        Some(self)
    }

    fn free_window(&mut self) {
        if let Some(w) = self.window.take() {
            w.free();
        }
    }

    /// Frees the window and the communicator (see [`super::comm::release_all`]
    /// for the order at MPI_Finalize).
    pub(super) fn release(&mut self) {
        self.free_window();
        super::host::Mpi.free_comm(&mut self.comm);
    }

    /// Where this communicator's window comes in the order of
    /// [`Window::agree_on_id`] (`None`: it has none).
    pub(super) fn window_id(&self) -> Option<u64> {
        self.window.as_ref().map(|w| w.id)
    }

    fn win(&self) -> (MPI_Win, *mut u8, usize) {
        let w = self.window.as_ref().expect("a leader's window");
        (w.win, w.base, w.bytes)
    }
}

fn checked(rc: c_int, what: &str) {
    assert_eq!(rc, MPI_SUCCESS as c_int, "{what} on the leaders' window failed");
}

impl OneSided for Leaders {
    fn local(&mut self) -> &mut [u8] {
        let (_, base, bytes) = self.win();
        // SAFETY: the window's memory, `bytes` long, owned by this rank;
        // the salar protocol never stores where a transfer of the current
        // epoch reads or writes.
        unsafe { std::slice::from_raw_parts_mut(base, bytes) }
    }

    fn get(&mut self, peer: usize, from: usize, to: usize, len: usize) {
        let (win, base, bytes) = self.win();
        assert!(to + len <= bytes);
        // SAFETY: the origin range lies in this rank's window memory, which
        // outlives the epoch; the target range in the peer's window of the
        // same size.
        checked(
            unsafe {
                PMPI_Get(
                    base.add(to).cast(),
                    len as c_int,
                    shim::pcoll_dtype_byte(),
                    peer as c_int,
                    from as MPI_Aint,
                    len as c_int,
                    shim::pcoll_dtype_byte(),
                    win,
                )
            },
            "MPI_Get",
        );
    }

    fn put(&mut self, peer: usize, from: usize, to: usize, len: usize) {
        let (win, base, bytes) = self.win();
        assert!(from + len <= bytes);
        // SAFETY: as for `get`, the other way.
        checked(
            unsafe {
                PMPI_Put(
                    base.add(from).cast(),
                    len as c_int,
                    shim::pcoll_dtype_byte(),
                    peer as c_int,
                    to as MPI_Aint,
                    len as c_int,
                    shim::pcoll_dtype_byte(),
                    win,
                )
            },
            "MPI_Put",
        );
    }

    fn fence(&mut self) {
        let (win, ..) = self.win();
        // SAFETY: every leader calls the fence the same number of times.
        checked(unsafe { PMPI_Win_fence(0, win) }, "MPI_Win_fence");
    }
}
