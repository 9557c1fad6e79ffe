//! The operating system's side of the node layer (Linux), as [`NodeOs`]:
//! mapping the node's segment, reserving and placing its pages, and
//! copies straight between processes (cross-memory attach). No MPI here:
//! node discovery (`driver::node`) decides who creates, who opens and
//! when, and agrees on the outcome.
//!
//! The segment: local rank 0 creates a POSIX shared-memory object under a
//! name with random bytes from the kernel (so another local user cannot
//! create it first; a name that is taken all the same is retried with a
//! new one), the others open it. Each rank reserves its own block
//! (`posix_fallocate`; rank 0 also the header) before anything touches
//! it: a /dev/shm too small for the segment is an error here, at set-up,
//! and never a SIGBUS at the first touch of a page tmpfs cannot supply.
//! The pages are allocated by that call, on the NUMA node of the rank
//! that reserves them (the default policy), so each rank's block lies on
//! its own node (checked with `move_pages` and logged). The name is
//! unlinked as soon as every rank has mapped it, so nothing is left in
//! /dev/shm even if the job is killed later; then each rank maps every
//! page of the segment into its page tables at once, so that no call
//! pays a page fault.

use super::segment::{Geometry, Segment, PAGE};
use super::{NodeOs, PeerMemory, SegmentName};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

/// Linux as the node's [`NodeOs`].
#[derive(Clone, Copy)]
pub struct Linux;

impl NodeOs for Linux {
    type Mapping = Mapping;
    type Peers = Cma;

    /// Counted once per process: sysconf reads /sys each time, 13% of a
    /// create/use/free cycle with a kept segment (perf; MPICH, 2 ranks).
    fn cores(&self) -> Option<usize> {
        static CORES: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
        *CORES.get_or_init(|| {
            // SAFETY: sysconf has no preconditions.
            let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
            (cores > 0).then_some(cores as usize)
        })
    }

    fn private(&self, geo: Geometry) -> Option<Mapping> {
        Mapping::private(geo)
    }

    fn shm_bytes(&self) -> Option<usize> {
        shm_bytes()
    }

    fn create(&self, geo: Geometry) -> std::io::Result<(SegmentName, Mapping)> {
        create_fresh(geo, segment_name)
    }

    fn open(&self, name: &SegmentName, geo: Geometry, local: usize) -> std::io::Result<Mapping> {
        map(name, geo, local)
    }

    fn unlink(&self, name: &SegmentName) {
        unlink(name)
    }

    /// The page tables filled ([`populate`]), the placement logged.
    fn settle(&self, mapping: &Mapping, local: usize) {
        populate(mapping);
        log_placement(&mapping.seg, local);
    }

    fn probe_words(&self) -> [u64; 2] {
        probe_words()
    }

    fn probe(&self, words: &[u64]) -> bool {
        probe_cma(words)
    }

    fn peers(&self, words: &[u64]) -> Cma {
        Cma { pids: words.chunks_exact(2).map(|w| w[0] as libc::pid_t).collect() }
    }
}

/// A mapped segment, unmapped when dropped.
pub struct Mapping {
    pub seg: Segment,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping this struct owns; no call uses it any more.
        unsafe { libc::munmap(self.seg.base().cast(), self.len) };
    }
}

impl AsRef<Segment> for Mapping {
    fn as_ref(&self) -> &Segment {
        &self.seg
    }
}

impl Mapping {
    /// A segment in private memory, for a node of one rank.
    pub fn private(geo: Geometry) -> Option<Mapping> {
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
}

/// Distinguishes the segments one process creates.
static SEGMENTS: AtomicU64 = AtomicU64::new(0);

/// Names [`create_fresh`] tries before it gives up.
const NAME_TRIES: usize = 8;

/// A new segment name, NUL-terminated: this process's id and a counter
/// (unique on the host, and telling whose a segment is) and 8 random
/// bytes from the kernel, so that another local user cannot create the
/// name first.
fn segment_name() -> SegmentName {
    let mut name = [0u8; 64];
    let (pid, n) = (std::process::id(), SEGMENTS.fetch_add(1, Ordering::Relaxed));
    let text = format!("/pcoll-{pid}-{n}-{:016x}", random_word());
    name[..text.len()].copy_from_slice(text.as_bytes());
    name
}

/// 8 random bytes: getrandom(2), or /dev/urandom where that fails (an old
/// kernel, or an entropy pool not ready yet, which /dev/urandom does not
/// wait for). Should both fail, the clock, and a taken name is retried.
pub fn random_word() -> u64 {
    let mut word = [0u8; 8];
    // SAFETY: writes at most `word.len()` bytes into `word`.
    let n = unsafe { libc::getrandom(word.as_mut_ptr().cast(), word.len(), libc::GRND_NONBLOCK) };
    if n == word.len() as isize {
        return u64::from_ne_bytes(word);
    }
    use std::io::Read;
    match std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut word)) {
        Ok(()) => u64::from_ne_bytes(word),
        Err(e) => {
            log::debug!("node layer: no random bytes from the kernel ({e}); the clock stands in");
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            now.as_nanos() as u64
        }
    }
}

/// A lock on this host, held while the value lives: an abstract Unix
/// socket address (strictly, one per network namespace, which is one per
/// host for MPI's purposes), which only one socket can be bound to and
/// which the kernel releases when its holder exits. Nothing of it is
/// ever left behind, in /dev/shm or anywhere else.
pub struct HostLock(libc::c_int);

/// Why [`HostLock::try_take`] did not take the lock.
#[derive(Debug, PartialEq, Eq)]
pub enum NotTaken {
    /// Another holds it.
    Busy,
    /// This host cannot lock (no Unix sockets here, say): go without.
    Unavailable,
}

impl HostLock {
    /// Takes this user's lock `name` (the same text in every process
    /// that shares it) unless another process or thread holds it; never
    /// waits.
    pub fn try_take(name: &str) -> Result<HostLock, NotTaken> {
        // SAFETY: getuid has no preconditions.
        let name = format!("pcoll-{}-{name}", unsafe { libc::getuid() });
        // SAFETY: socket(2) has no memory preconditions.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(NotTaken::Unavailable);
        }
        let lock = HostLock(fd);
        // SAFETY: sockaddr_un is plain data, valid all zero.
        let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        // sun_path[0] stays NUL: the abstract namespace
        let path = &mut addr.sun_path[1..];
        let len = name.len().min(path.len());
        path.iter_mut().zip(&name.as_bytes()[..len]).for_each(|(to, &from)| *to = from as libc::c_char);
        let addr_len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + 1 + len;
        // SAFETY: `addr` is a sockaddr_un whose first `addr_len` bytes are
        // initialised; bind reads no more.
        let rc = unsafe { libc::bind(fd, (&raw const addr).cast(), addr_len as libc::socklen_t) };
        match rc {
            0 => Ok(lock),
            _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EADDRINUSE) => Err(NotTaken::Busy),
            _ => Err(NotTaken::Unavailable),
        }
    }
}

impl Drop for HostLock {
    fn drop(&mut self) {
        // SAFETY: the socket this lock opened, closed once (which unbinds it).
        unsafe { libc::close(self.0) };
    }
}

/// The text of a segment name, for messages.
fn name_text(name: &SegmentName) -> String {
    String::from_utf8_lossy(name.split(|&b| b == 0).next().unwrap_or(&[])).into_owned()
}

/// Creates and maps a new segment under the first of `names` that nobody
/// holds, reserving local rank 0's part: a name that exists already
/// (EEXIST: squatted, or left by a process whose pid was reused) is
/// retried with the next, up to [`NAME_TRIES`] names; any other failure
/// gives up at once.
fn create_fresh(geo: Geometry, mut names: impl FnMut() -> SegmentName) -> std::io::Result<(SegmentName, Mapping)> {
    for _ in 0..NAME_TRIES {
        let name = names();
        match map_new(&name, geo) {
            Ok(mapping) => return Ok((name, mapping)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                log::debug!("node layer: {} exists already; trying another name", name_text(&name))
            }
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!("{NAME_TRIES} segment names in a row exist already"),
    ))
}

/// Creates the named shared-memory object at the segment's size and maps
/// it, reserving local rank 0's part; nothing is left under the name if
/// that fails.
fn map_new(name: &SegmentName, geo: Geometry) -> std::io::Result<Mapping> {
    // SAFETY: `name` is NUL-terminated; the descriptor is closed below.
    let fd = unsafe { libc::shm_open(name.as_ptr().cast(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR, 0o600) };
    if fd < 0 {
        return Err(failed("shm_open", name, std::io::Error::last_os_error()));
    }
    // SAFETY: sizes the new object, which this process owns.
    let sized = unsafe { libc::ftruncate(fd, geo.total_bytes() as libc::off_t) } == 0;
    let mapped = if sized {
        reserve_and_map(fd, name, geo, 0)
    } else {
        let e = failed("ftruncate", name, std::io::Error::last_os_error());
        // SAFETY: the descriptor opened above, no longer needed.
        unsafe { libc::close(fd) };
        Err(e)
    };
    if mapped.is_err() {
        unlink(name);
    }
    mapped
}

/// Maps the segment another rank created, reserving local rank `local`'s
/// part.
fn map(name: &SegmentName, geo: Geometry, local: usize) -> std::io::Result<Mapping> {
    // SAFETY: `name` is NUL-terminated; the descriptor is closed below.
    let fd = unsafe { libc::shm_open(name.as_ptr().cast(), libc::O_RDWR, 0o600) };
    if fd < 0 {
        return Err(failed("shm_open", name, std::io::Error::last_os_error()));
    }
    reserve_and_map(fd, name, geo, local)
}

/// `e` of `step` on segment `name`, said with both and of the same kind
/// (EEXIST: the name is taken; ENOSPC: /dev/shm is full).
fn failed(step: &str, name: &SegmentName, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{step} {}: {e}", name_text(name)))
}

/// Reserves local rank `local`'s part of the sized object open as `fd`
/// ([`Geometry::own_range`]) and maps the whole; closes `fd`. The pages
/// are allocated here, where this rank runs, and none of them can be
/// missing when touched later.
fn reserve_and_map(fd: libc::c_int, name: &SegmentName, geo: Geometry, local: usize) -> std::io::Result<Mapping> {
    let (offset, len) = geo.own_range(local);
    let rc = loop {
        // SAFETY: allocates the range of the object open as `fd`; returns an errno.
        let rc = unsafe { libc::posix_fallocate(fd, offset as libc::off_t, len as libc::off_t) };
        // a signal cut a large reservation short: it is made again
        if rc != libc::EINTR {
            break rc;
        }
    };
    let total = geo.total_bytes();
    let base = if rc == 0 {
        // SAFETY: maps the object shared; the mapping survives the close below.
        unsafe { libc::mmap(std::ptr::null_mut(), total, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) }
    } else {
        libc::MAP_FAILED
    };
    let error = match (rc, base == libc::MAP_FAILED) {
        (0, false) => None,
        (0, true) => Some(failed("mmap", name, std::io::Error::last_os_error())),
        (errno, _) => Some(failed(&format!("reserve {len} bytes of"), name, std::io::Error::from_raw_os_error(errno))),
    };
    // SAFETY: the descriptor opened by the caller, no longer needed.
    unsafe { libc::close(fd) };
    if let Some(e) = error {
        return Err(e);
    }
    // SAFETY: `base` maps `total` bytes of a sized object (zero where
    // nobody wrote yet), page-aligned, until the Mapping drops.
    Ok(Mapping { seg: unsafe { Segment::new(base.cast(), geo) }, len: total })
}

/// The size of /dev/shm, where segments live (statvfs).
fn shm_bytes() -> Option<usize> {
    // SAFETY: an all-zero statvfs is a valid value to be overwritten.
    let mut fs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a struct statvfs to fill.
    let rc = unsafe { libc::statvfs(c"/dev/shm".as_ptr(), &mut fs) };
    (rc == 0).then(|| (fs.f_blocks as usize).saturating_mul(fs.f_frsize as usize))
}

/// Removes the name of a segment this process created.
fn unlink(name: &SegmentName) {
    // SAFETY: `name` is NUL-terminated.
    unsafe { libc::shm_unlink(name.as_ptr().cast()) };
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

/// Fills this process's page tables for the whole segment, once every
/// rank has reserved its pages: a page first touched in a call costs
/// that call a fault (about 1-2 us on the development VMs), and a queue
/// of 2 MiB per rank brings fresh pages to every small Bcast for its
/// first 128 calls (2 ranks, 8 KiB with a synchronised start, Intel MPI
/// host, a 4 MiB queue: 8.4-10.7 us a call instead of 2.5-3.0). Linux
/// 5.14 and later; on older kernels the pages fault in as they are first
/// touched, as before.
fn populate(mapping: &Mapping) {
    // SAFETY: advice on the whole of this process's own mapping; it maps
    // the pages every rank has reserved and changes no byte.
    let rc = unsafe { libc::madvise(mapping.seg.base().cast(), mapping.len, libc::MADV_POPULATE_WRITE) };
    if rc != 0 {
        log::debug!("node layer: segment pages not mapped ahead (madvise: {})", std::io::Error::last_os_error());
    }
}

/// Logs where this rank's block ended up (move_pages in query mode).
fn log_placement(seg: &Segment, local: usize) {
    if !log::log_enabled!(log::Level::Debug) {
        return;
    }
    let (start, len) = seg.block_range(local);
    let pages: Vec<*mut c_void> = (0..len).step_by(PAGE).map(|off| start.wrapping_add(off).cast()).collect();
    let mut status = vec![0 as libc::c_int; pages.len()];
    // SAFETY: query mode (no target nodes): fills `status` with each page's node.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            pages.len(),
            pages.as_ptr(),
            std::ptr::null::<libc::c_int>(),
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

/// Cross-memory attach to the node's ranks (their process ids, by local rank).
pub struct Cma {
    pub pids: Vec<libc::pid_t>,
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

/// This process's id and the address of its probe word, for its peers.
fn probe_words() -> [u64; 2] {
    [std::process::id() as u64, PROBE.as_ptr() as u64]
}

/// Whether zero copy works from this process to the one that sent
/// `words` ([`probe_words`]): it reads that process's probe word.
fn probe_cma(words: &[u64]) -> bool {
    let mut word = 0u64;
    let local_iov = libc::iovec { iov_base: (&mut word as *mut u64).cast(), iov_len: 8 };
    let remote_iov = libc::iovec { iov_base: words[1] as *mut c_void, iov_len: 8 };
    // SAFETY: reads 8 bytes of the peer's static probe word into a local.
    let n = unsafe { libc::process_vm_readv(words[0] as libc::pid_t, &local_iov, 1, &remote_iov, 1, 0) };
    let works = n == 8 && word == PROBE.load(Ordering::Relaxed);
    if !works {
        log::debug!("node layer: no zero copy ({})", std::io::Error::last_os_error());
    }
    works
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small segment of two ranks.
    const GEO: Geometry = Geometry {
        ranks: 2,
        chunk: 4096,
        allreduce_chunk: 4096,
        slots: 1,
        slot_bytes: 4096,
        sets: 1,
        ..Geometry::DEFAULT
    };

    /// Creates `name` as another user would, first.
    fn squat(name: &SegmentName) {
        // SAFETY: `name` is NUL-terminated; the descriptor is closed at once.
        unsafe {
            let fd = libc::shm_open(name.as_ptr().cast(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR, 0o600);
            assert!(fd >= 0, "{}", std::io::Error::last_os_error());
            libc::close(fd);
        }
    }

    #[test]
    fn a_host_lock_has_one_holder_and_is_free_again_once_dropped() {
        let name = format!("pcoll-test-lock-{}", random_word());
        let held = HostLock::try_take(&name).expect("a free lock");
        assert_eq!(HostLock::try_take(&name).err(), Some(NotTaken::Busy));
        assert!(HostLock::try_take(&format!("{name}-other")).is_ok(), "another name is another lock");
        drop(held);
        assert!(HostLock::try_take(&name).is_ok());
    }

    #[test]
    fn names_carry_the_pid_a_counter_and_random_bytes() {
        let (a, b) = (segment_name(), segment_name());
        let (ta, tb) = (name_text(&a), name_text(&b));
        assert_eq!(a[ta.len()], 0, "NUL-terminated");
        let parts: Vec<&str> = ta.split('-').collect();
        assert_eq!(parts.len(), 4, "{ta}");
        assert_eq!((parts[0], parts[1]), ("/pcoll", std::process::id().to_string().as_str()));
        assert!(parts[2].parse::<u64>().is_ok(), "{ta}");
        assert!(parts[3].len() == 16 && parts[3].bytes().all(|c| c.is_ascii_hexdigit()), "{ta}");
        // random parts differ, not only the counter
        assert_ne!(parts[3], tb.rsplit('-').next().unwrap(), "{ta} {tb}");
        assert!(ta.len() < 40, "{ta}");
    }

    #[test]
    fn a_taken_name_is_retried_with_another() {
        let (taken, free) = (segment_name(), segment_name());
        squat(&taken);
        let mut offered = vec![free, taken];
        let (name, mapping) = create_fresh(GEO, || offered.pop().unwrap()).expect("the second name");
        assert_eq!((name, offered.len()), (free, 0));
        assert!(mapping.len >= GEO.total_bytes());
        // whoever holds the taken name keeps it, untouched
        let held = std::fs::metadata(format!("/dev/shm{}", name_text(&taken))).expect("still there");
        assert_eq!(held.len(), 0);
        unlink(&taken);
        unlink(&name);
        // every name taken: no segment, after a few tries
        squat(&taken);
        let mut tries = 0;
        assert!(create_fresh(GEO, || {
            tries += 1;
            taken
        })
        .is_err());
        assert_eq!(tries, NAME_TRIES);
        unlink(&taken);
        // any other failure: no retry
        let mut bad = [0u8; 64];
        bad[..12].copy_from_slice(b"/no/such/dir");
        let mut tries = 0;
        assert!(create_fresh(GEO, || {
            tries += 1;
            bad
        })
        .is_err());
        assert_eq!(tries, 1);
    }

    #[test]
    fn each_rank_reserves_its_part_and_sees_the_others() {
        use std::os::unix::fs::MetadataExt;
        let allocated = |name: &SegmentName| {
            let file = std::fs::metadata(format!("/dev/shm{}", name_text(name))).expect("the segment's file");
            file.blocks() as usize * 512
        };
        let (name, zero) = create_fresh(GEO, segment_name).expect("a segment");
        assert_eq!(allocated(&name), GEO.own_range(0).1, "rank 0's part, before any touch");
        let one = map(&name, GEO, 1).expect("opened");
        assert_eq!(allocated(&name), GEO.total_bytes(), "and rank 1's");
        unlink(&name);
        // SAFETY: rank 1's block, in both mappings of the same object.
        let seen = unsafe {
            one.seg.block_range(1).0.write(7);
            zero.seg.block_range(1).0.read()
        };
        assert_eq!(seen, 7);
    }

    #[test]
    fn a_settled_segment_is_mapped_in_whole() {
        // The resident bytes of the mapping at `start` in /proc/self/smaps.
        let resident = |start: usize| -> usize {
            let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
            let head = format!("{start:x}-");
            let mut fields = smaps.lines().skip_while(|line| !line.starts_with(&head)).skip(1);
            let rss = fields.find(|line| line.starts_with("Rss:"));
            rss.and_then(|line| line.split_whitespace().nth(1)?.parse::<usize>().ok()).expect("an Rss line") << 10
        };
        let (name, zero) = create_fresh(GEO, segment_name).expect("a segment");
        let one = map(&name, GEO, 1).expect("opened");
        unlink(&name);
        let start = zero.seg.base() as usize;
        assert!(resident(start) < GEO.total_bytes(), "not yet mapped in whole");
        Linux.settle(&zero, 0);
        assert_eq!(resident(start), zero.len, "every page mapped");
        drop(one);
    }

    #[test]
    fn a_segment_larger_than_dev_shm_is_an_error_at_creation_and_leaves_nothing() {
        let shm = shm_bytes().expect("a /dev/shm");
        let huge = Geometry { slots: 1, slot_bytes: shm + PAGE, ranks: 1, ..GEO };
        let name = segment_name();
        let e = create_fresh(huge, || name).err().expect("no room");
        assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
        assert!(e.to_string().contains("reserve"), "{e}");
        assert!(std::fs::metadata(format!("/dev/shm{}", name_text(&name))).is_err(), "nothing left");
    }
}
