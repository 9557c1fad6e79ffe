//! The node layer's link to MPI and to the operating system: which ranks of
//! a communicator share a node, the node's shared segment, and copies
//! straight between processes (Linux cross-memory attach).
//!
//! At the first collective on a communicator (collectively):
//! - the node communicator: `MPI_COMM_TYPE_SHARED`, split further into
//!   groups of PCOLL_RANKS_PER_NODE consecutive world ranks if set, so
//!   that node-aware algorithms run on one machine;
//! - every rank learns every rank's node and local rank (one allgather),
//!   hence the [`Topo`] all ranks agree on;
//! - the segment: local rank 0 creates a POSIX shared-memory object, the
//!   others open it, all map it with read-ahead off (`MADV_RANDOM`) while
//!   each rank first-touches its own block, so that its pages are placed
//!   on that rank's NUMA node (checked with `move_pages` and logged); the
//!   name is unlinked as soon as every rank has mapped it, so nothing is
//!   left in /dev/shm even if the job is killed later;
//! - zero copy: every rank reads a known word from a neighbour with
//!   `process_vm_readv`; it is used only if that works on every rank.

use super::comm;
use super::transport::check;
use crate::algos::node::{NodeMemory, QueueSettings};
use crate::core::call::Topo;
use crate::select::config::{ShmConfig, ShmTree};
use crate::shm::segment::{Geometry, Segment, PAGE};
use crate::shm::team::{NodeSettings, TeamState};
use crate::shm::PeerMemory;
use mpi_sys::*;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A rank's place on its node and the node's resources.
pub(super) struct Node {
    /// The ranks of this node (of the user's communicator, privately).
    pub comm: MPI_Comm,
    pub rank: usize,
    pub size: usize,
    /// Every communicator rank's node index and local rank.
    pub node_of: Vec<usize>,
    pub local_of: Vec<usize>,
    pub topo: Topo,
    pub mapping: Option<Mapping>,
    pub cma: Option<Cma>,
    pub settings: NodeSettings,
    /// The step protocol's state; one call at a time uses it.
    pub state: CallState,
}

/// The step protocol's state of a node communicator, taken by one call
/// at a time. Not a mutex: MPI forbids two collectives on one communicator
/// at once, so a second taker is an erroneous program, stopped with a
/// message instead of made to wait (where it would hang, its collectives
/// out of order). And it is released with a plain store: a mutex's
/// release is a locked instruction, which waits for the call's last
/// stores, often to a cold line of the user's buffer (Open MPI, 2 ranks,
/// 8-byte Allreduce and Bcast with pcoll_bench: 8-15% faster without).
pub(super) struct CallState {
    taken: AtomicBool,
    state: UnsafeCell<TeamState<NodeMemory>>,
}

// SAFETY: `state` is reached only through a `CallGuard`, of which `taken`
// admits one at a time.
unsafe impl Sync for CallState {}

impl CallState {
    fn new(memory: NodeMemory) -> CallState {
        CallState {
            taken: AtomicBool::new(false),
            state: UnsafeCell::new(TeamState { memory, ..TeamState::default() }),
        }
    }

    /// The state for one call.
    pub fn take(&self) -> CallGuard<'_> {
        // Acquire: the previous call's writes to the state (released by
        // its guard) happen before this call's use of it.
        if self.taken.compare_exchange(false, true, Acquire, Relaxed).is_err() {
            super::runtime::abort_job(
                "pcoll: two collectives on one communicator at the same time (from two threads, or one called from \
                 inside a reduction operator): erroneous program; aborting\n",
            );
        }
        CallGuard(self)
    }
}

/// One call's hold on a communicator's protocol state.
pub(super) struct CallGuard<'a>(&'a CallState);

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
    fn drop(&mut self) {
        // Release: this call's writes to the state before the next call's
        // acquire (a plain store on x86).
        self.0.taken.store(false, Release);
    }
}

/// The mapped segment.
pub(super) struct Mapping {
    pub seg: Segment,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping this struct owns; no call uses it any more.
        unsafe { libc::munmap(self.seg.base().cast(), self.len) };
    }
}

/// Cross-memory attach to the node's ranks.
pub(super) struct Cma {
    pids: Vec<libc::pid_t>,
}

/// Copies `len` bytes between this process and `pid` in pieces the kernel
/// accepts (it may copy less than asked).
fn cma_copy(pid: libc::pid_t, local: *mut u8, remote: usize, len: usize, write: bool) {
    let mut done = 0;
    while done < len {
        let local_iov = libc::iovec { iov_base: local.wrapping_add(done).cast(), iov_len: len - done };
        let remote_iov = libc::iovec { iov_base: (remote + done) as *mut c_void, iov_len: len - done };
        // SAFETY: the local range is a live buffer of this process; the
        // remote one is a buffer the peer published for this step and
        // keeps valid until every rank has finished the step.
        let n = unsafe {
            if write {
                libc::process_vm_writev(pid, &local_iov, 1, &remote_iov, 1, 0)
            } else {
                libc::process_vm_readv(pid, &local_iov, 1, &remote_iov, 1, 0)
            }
        };
        if n <= 0 {
            let err = std::io::Error::last_os_error();
            panic!("zero copy with process {pid} failed after {done} of {len} bytes: {err}");
        }
        done += n as usize;
    }
}

impl PeerMemory for Cma {
    fn read(&self, peer: usize, from: usize, into: &mut [u8]) {
        if !into.is_empty() {
            cma_copy(self.pids[peer], into.as_mut_ptr(), from, into.len(), false);
        }
    }

    fn write(&self, peer: usize, to: usize, from: &[u8]) {
        if !from.is_empty() {
            cma_copy(self.pids[peer], from.as_ptr().cast_mut(), to, from.len(), true);
        }
    }
}

/// A word every process holds at a known address, to test zero copy.
static PROBE: AtomicU64 = AtomicU64::new(0x7063_6f6c_6c21); // "pcoll!"

/// Distinguishes the segments one process creates.
static SEGMENTS: AtomicU64 = AtomicU64::new(0);

fn allgather_u64(comm: MPI_Comm, mine: &[u64], size: usize) -> Result<Vec<u64>, c_int> {
    let mut all = vec![0u64; mine.len() * size];
    // SAFETY: `all` holds size × mine.len() words; every rank passes the same count.
    check(unsafe {
        PMPI_Allgather(
            mine.as_ptr().cast(),
            mine.len() as c_int,
            RSMPI_UINT64_T,
            all.as_mut_ptr().cast(),
            mine.len() as c_int,
            RSMPI_UINT64_T,
            comm,
        )
    })?;
    Ok(all)
}

/// Whether every rank of `comm` says yes.
fn all_agree(comm: MPI_Comm, yes: bool) -> Result<bool, c_int> {
    let (mine, mut all) = (yes as c_int, 0 as c_int);
    // SAFETY: one int in, one out, at every rank.
    check(unsafe {
        PMPI_Allreduce(
            (&mine as *const c_int).cast(),
            (&mut all as *mut c_int).cast(),
            1,
            RSMPI_INT32_T,
            RSMPI_MIN,
            comm,
        )
    })?;
    Ok(all != 0)
}

fn rank_size(comm: MPI_Comm) -> (usize, usize) {
    let (mut rank, mut size) = (0, 0);
    // SAFETY: a valid communicator; out-pointers are locals.
    unsafe {
        PMPI_Comm_rank(comm, &mut rank);
        PMPI_Comm_size(comm, &mut size);
    }
    (rank as usize, size as usize)
}

impl Node {
    /// Finds this rank's node within `private` (the user communicator's
    /// duplicate); collective over it.
    pub(super) fn discover(private: MPI_Comm, cfg: &ShmConfig) -> Result<Node, c_int> {
        let (rank, size) = rank_size(private);
        let mut node_comm = private;
        // SAFETY: splits the private communicator; the result is freed with the node.
        check(unsafe {
            PMPI_Comm_split_type(private, RSMPI_COMM_TYPE_SHARED, rank as c_int, RSMPI_INFO_NULL, &mut node_comm)
        })?;
        let (_, on_this_host) = rank_size(node_comm);
        // SAFETY: sysconf has no preconditions.
        let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let oversubscribed = cores > 0 && on_this_host > cores as usize;
        if oversubscribed {
            crate::shm::wait::set_oversubscribed();
        }
        if let Some(per_node) = cfg.ranks_per_node {
            let mut world_rank = 0;
            let shared = node_comm;
            // SAFETY: splits the shared-memory communicator by groups of
            // consecutive world ranks, then frees it.
            unsafe {
                PMPI_Comm_rank(RSMPI_COMM_WORLD, &mut world_rank);
                let rc = PMPI_Comm_split(shared, world_rank / per_node as c_int, rank as c_int, &mut node_comm);
                let mut shared = shared;
                PMPI_Comm_free(&mut shared);
                check(rc)?;
            }
        }
        let (local, local_size) = rank_size(node_comm);
        // The node's first communicator rank names the node.
        let mut leader = rank as c_int;
        // SAFETY: the lowest rank of the node, one int at every rank.
        check(unsafe {
            PMPI_Allreduce(
                (&(rank as c_int) as *const c_int).cast(),
                (&mut leader as *mut c_int).cast(),
                1,
                RSMPI_INT32_T,
                RSMPI_MIN,
                node_comm,
            )
        })?;
        let geo = cfg.geometry(local_size);
        let mapping = match (cfg.enable, local_size) {
            (false, _) => None,
            // A node of one rank (of a communicator that spans nodes) needs
            // no sharing: private memory serves the compositions alike.
            (true, 1) => private_segment(geo),
            (true, _) => map_segment(node_comm, local, geo)?,
        };
        let cma = match &mapping {
            Some(_) if cfg.zcopy => probe_cma(node_comm, local, local_size)?,
            _ => None,
        };
        // What every rank of the communicator learns of every other.
        let mine = [leader as u64, local as u64, mapping.is_some() as u64, cma.is_some() as u64];
        let all = allgather_u64(private, &mine, size)?;
        let rows: Vec<&[u64]> = all.chunks_exact(4).collect();
        let mut leaders: Vec<u64> = Vec::new();
        let node_of: Vec<usize> = rows
            .iter()
            .map(|row| match leaders.iter().position(|&l| l == row[0]) {
                Some(i) => i,
                None => {
                    leaders.push(row[0]);
                    leaders.len() - 1
                }
            })
            .collect();
        let local_of: Vec<usize> = rows.iter().map(|row| row[1] as usize).collect();
        let mut per_node = vec![0usize; leaders.len()];
        node_of.iter().for_each(|&n| per_node[n] += 1);
        // Node indices count from the first rank up, so nodes hold
        // consecutive ranks exactly when the index never steps back.
        let contiguous = node_of.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1);
        // Zero copy means nothing on a node of one rank.
        let ready = |r: usize, flag: usize| rows[r][flag] == 1 || (flag == 3 && per_node[node_of[r]] == 1);
        let topo = Topo {
            nodes: leaders.len(),
            contiguous,
            shm: (0..size).all(|r| ready(r, 2)),
            zcopy: (0..size).all(|r| ready(r, 3)),
            chunk: cfg.chunk,
        };
        let tree = match cfg.tree {
            ShmTree::Flat => crate::algos::node::bcast::Tree::Flat,
            ShmTree::Chain => crate::algos::node::bcast::Tree::Chain,
            ShmTree::Kary => crate::algos::node::bcast::Tree::Kary(cfg.tree_k),
            ShmTree::Knomial => crate::algos::node::bcast::Tree::Knomial(cfg.tree_k),
        };
        log::debug!(
            "node layer: rank {rank} is rank {local} of {local_size} on node {} of {} ({topo:?})",
            node_of[rank],
            topo.nodes
        );
        Ok(Node {
            comm: node_comm,
            rank: local,
            size: local_size,
            node_of,
            local_of,
            topo,
            mapping,
            cma,
            settings: cfg.node_settings(oversubscribed),
            state: CallState::new(NodeMemory::new(QueueSettings { fragment: cfg.fragment, tree }, cfg.adapt)),
        })
    }

    /// Frees the node communicator and unmaps the segment; MPI must still
    /// be running. Logs the timed choices once: MPI may delete the
    /// attribute of a communicator that MPI_Finalize released already.
    pub(super) fn release(&mut self) {
        if self.mapping.take().is_some() {
            for line in self.state.take().memory.summary() {
                log::info!("node layer, {line}");
            }
        }
        comm::free_comm(&mut self.comm);
    }
}

/// The segment's name: unique on the host (creator's pid and a counter).
fn segment_name(pid: u32, n: u64) -> [u8; 64] {
    let mut name = [0u8; 64];
    let text = format!("/pcoll-{pid}-{n}");
    name[..text.len()].copy_from_slice(text.as_bytes());
    name
}

/// A segment in private memory, for a node of one rank.
fn private_segment(geo: Geometry) -> Option<Mapping> {
    let len = geo.total_bytes();
    // SAFETY: a fresh private anonymous mapping (zero-filled).
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `base` maps `len` zeroed bytes, page-aligned, until the Mapping drops.
    let seg = unsafe { Segment::new(base.cast(), geo) };
    Some(Mapping { seg, len })
}

/// Creates (local rank 0) or opens the segment, maps it, places each
/// block by first touch, and unlinks the name once all have mapped it.
/// `None` (on every rank alike) if any rank failed.
fn map_segment(node_comm: MPI_Comm, local: usize, geo: Geometry) -> Result<Option<Mapping>, c_int> {
    let len = geo.total_bytes();
    let mut name = [0u8; 64];
    let mut base: *mut u8 = std::ptr::null_mut();
    if local == 0 {
        name = segment_name(std::process::id(), SEGMENTS.fetch_add(1, Ordering::Relaxed));
        base = create_or_open(&name, len, true);
        if base.is_null() {
            name = [0u8; 64];
        }
    }
    // SAFETY: 64 bytes at every rank.
    check(unsafe { PMPI_Bcast(name.as_mut_ptr().cast(), 64, RSMPI_UINT8_T, 0, node_comm) })?;
    if local != 0 && name[0] != 0 {
        base = create_or_open(&name, len, false);
    }
    let ok = all_agree(node_comm, !base.is_null())?;
    if ok {
        // SAFETY: `base` maps `len` bytes; MADV_RANDOM turns off the fault-around
        // that would place a neighbour's pages on this rank's NUMA node while it
        // touches its own; each rank writes its own block's pages (rank 0 also
        // the header), so they are allocated where it runs.
        unsafe {
            libc::madvise(base.cast(), len, libc::MADV_RANDOM);
            let seg = Segment::new(base, geo);
            let (start, bytes) = seg.block_range(local);
            first_touch(start, bytes);
            if local == 0 {
                first_touch(base, geo.header_bytes());
            }
        }
    }
    // SAFETY: every rank has mapped (or failed to map) the segment by now.
    check(unsafe { PMPI_Barrier(node_comm) })?;
    if local == 0 && name[0] != 0 {
        // SAFETY: the NUL-terminated name this rank created.
        unsafe { libc::shm_unlink(name.as_ptr().cast()) };
    }
    if !ok {
        if !base.is_null() {
            // SAFETY: this rank's mapping of `len` bytes, not used by anyone.
            unsafe { libc::munmap(base.cast(), len) };
        }
        log::warn!("node layer: the shared segment could not be set up on every rank; node algorithms are off");
        return Ok(None);
    }
    // SAFETY: back to normal read-ahead once the pages are placed.
    unsafe { libc::madvise(base.cast(), len, libc::MADV_NORMAL) };
    // SAFETY: `base` maps `len` zeroed bytes, page-aligned, until the Mapping drops.
    let seg = unsafe { Segment::new(base, geo) };
    log_placement(&seg, local);
    Ok(Some(Mapping { seg, len }))
}

/// Maps the named shared-memory object (`create`: new, `len` bytes);
/// null on failure.
fn create_or_open(name: &[u8; 64], len: usize, create: bool) -> *mut u8 {
    let flags = if create { libc::O_CREAT | libc::O_EXCL | libc::O_RDWR } else { libc::O_RDWR };
    // SAFETY: `name` is NUL-terminated; the descriptor is closed below.
    let fd = unsafe { libc::shm_open(name.as_ptr().cast(), flags, 0o600) };
    if fd < 0 {
        log::warn!("node layer: shm_open: {}", std::io::Error::last_os_error());
        return std::ptr::null_mut();
    }
    // SAFETY: sizes the new object; maps it shared; the mapping survives the close.
    let base = unsafe {
        if create && libc::ftruncate(fd, len as libc::off_t) != 0 {
            log::warn!("node layer: ftruncate: {}", std::io::Error::last_os_error());
            libc::close(fd);
            libc::shm_unlink(name.as_ptr().cast());
            return std::ptr::null_mut();
        }
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
        libc::close(fd);
        p
    };
    if base == libc::MAP_FAILED {
        log::warn!("node layer: mmap: {}", std::io::Error::last_os_error());
        if create {
            // SAFETY: the name this rank created.
            unsafe { libc::shm_unlink(name.as_ptr().cast()) };
        }
        return std::ptr::null_mut();
    }
    base.cast()
}

/// Writes one byte per page, so each page is allocated by this rank.
///
/// # Safety
/// `start..start + len` is mapped and writable.
unsafe fn first_touch(start: *mut u8, len: usize) {
    for off in (0..len).step_by(PAGE) {
        // SAFETY: within the range (caller); volatile so it is not elided.
        unsafe { std::ptr::write_volatile(start.add(off), 0) };
    }
}

/// The NUMA node this thread runs on (0 where the system cannot tell).
fn current_numa_node() -> i32 {
    let (mut cpu, mut node) = (0u32, 0u32);
    // SAFETY: getcpu writes two unsigned ints.
    let rc = unsafe { libc::syscall(libc::SYS_getcpu, &mut cpu, &mut node, std::ptr::null_mut::<c_void>()) };
    if rc == 0 {
        node as i32
    } else {
        0
    }
}

/// Logs where this rank's block ended up (move_pages in query mode).
fn log_placement(seg: &Segment, local: usize) {
    if !log::log_enabled!(log::Level::Debug) {
        return;
    }
    let (start, len) = seg.block_range(local);
    let pages: Vec<*mut c_void> = (0..len).step_by(PAGE).map(|off| start.wrapping_add(off).cast()).collect();
    let mut status = vec![0 as c_int; pages.len()];
    // SAFETY: query mode (no target nodes): fills `status` with each page's node.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            pages.len(),
            pages.as_ptr(),
            std::ptr::null::<c_int>(),
            status.as_mut_ptr(),
            0,
        )
    };
    let here = current_numa_node();
    if rc != 0 {
        log::debug!("node layer: block placement unknown (move_pages: {})", std::io::Error::last_os_error());
        return;
    }
    let on_mine = status.iter().filter(|&&n| n == here).count();
    log::debug!("node layer: {on_mine} of {} pages of this rank's block on its NUMA node {here}", status.len());
}

/// Whether zero copy works between the node's ranks: each reads its
/// right neighbour's probe word. `None` on every rank unless all succeed.
fn probe_cma(node_comm: MPI_Comm, local: usize, size: usize) -> Result<Option<Cma>, c_int> {
    let mine = [std::process::id() as u64, PROBE.as_ptr() as u64];
    let all = allgather_u64(node_comm, &mine, size)?;
    let right = (local + 1) % size;
    let mut word = 0u64;
    let cma = Cma { pids: all.chunks_exact(2).map(|w| w[0] as libc::pid_t).collect() };
    let local_iov = libc::iovec { iov_base: (&mut word as *mut u64).cast(), iov_len: 8 };
    let remote_iov = libc::iovec { iov_base: all[2 * right + 1] as *mut c_void, iov_len: 8 };
    // SAFETY: reads 8 bytes of the neighbour's static probe word into a local.
    let n = unsafe { libc::process_vm_readv(cma.pids[right], &local_iov, 1, &remote_iov, 1, 0) };
    let works = n == 8 && word == PROBE.load(Ordering::Relaxed);
    if !works {
        log::debug!("node layer: no zero copy ({})", std::io::Error::last_os_error());
    }
    Ok(all_agree(node_comm, works)?.then_some(cma))
}
