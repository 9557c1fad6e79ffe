//! The operating system's side of the node layer (Linux), as [`NodeOs`]:
//! mapping the node's segment, placing its pages, and copies straight
//! between processes (cross-memory attach). No MPI here: node discovery
//! (`driver::node`) decides who creates, who opens and when, and agrees
//! on the outcome.
//!
//! The segment: local rank 0 creates a POSIX shared-memory object under a
//! name with random bytes from the kernel (so another local user cannot
//! create it first; a name that is taken all the same is retried with a
//! new one), the others open it, all map it with read-ahead off (`MADV_RANDOM`) while
//! each rank first-touches its own block, so that its pages are placed on
//! that rank's NUMA node (checked with `move_pages` and logged); the name
//! is unlinked as soon as every rank has mapped it, so nothing is left in
//! /dev/shm even if the job is killed later.

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

    fn cores(&self) -> Option<usize> {
        // SAFETY: sysconf has no preconditions.
        let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        (cores > 0).then_some(cores as usize)
    }

    fn private(&self, geo: Geometry) -> Option<Mapping> {
        Mapping::private(geo)
    }

    fn create(&self, geo: Geometry) -> Option<(SegmentName, Mapping)> {
        create_fresh(geo, segment_name)
    }

    fn open(&self, name: &SegmentName, geo: Geometry) -> Option<Mapping> {
        map(name, geo, false).map_err(|e| log::warn!("node layer: {e}")).ok()
    }

    fn place(&self, mapping: &Mapping, local: usize) {
        place(mapping, local)
    }

    fn unlink(&self, name: &SegmentName) {
        unlink(name)
    }

    /// Read-ahead back to normal; the placement logged.
    fn settle(&self, mapping: &Mapping, local: usize) {
        // SAFETY: the mapping's own range.
        unsafe { libc::madvise(mapping.seg.base().cast(), mapping.len, libc::MADV_NORMAL) };
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
fn random_word() -> u64 {
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
            log::debug!("node layer: no random bytes from the kernel ({e}); the segment's name uses the clock");
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            now.as_nanos() as u64
        }
    }
}

/// The text of a segment name, for messages.
fn name_text(name: &SegmentName) -> String {
    String::from_utf8_lossy(name.split(|&b| b == 0).next().unwrap_or(&[])).into_owned()
}

/// Creates and maps a new segment under the first of `names` that nobody
/// holds: a name that exists already (EEXIST: squatted, or left by a
/// process whose pid was reused) is retried with the next, up to
/// [`NAME_TRIES`] names; any other failure gives up at once. `None`, said
/// in the log, if no segment was made.
fn create_fresh(geo: Geometry, mut names: impl FnMut() -> SegmentName) -> Option<(SegmentName, Mapping)> {
    for _ in 0..NAME_TRIES {
        let name = names();
        match map(&name, geo, true) {
            Ok(mapping) => return Some((name, mapping)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                log::debug!("node layer: {} exists already; trying another name", name_text(&name))
            }
            Err(e) => {
                log::warn!("node layer: {e}");
                return None;
            }
        }
    }
    log::warn!("node layer: {NAME_TRIES} segment names in a row exist already; no segment");
    None
}

/// Maps the named shared-memory object (`create`: new, the segment's
/// size). The error says which step failed, and keeps the system's kind
/// (EEXIST: the name is taken).
fn map(name: &SegmentName, geo: Geometry, create: bool) -> Result<Mapping, std::io::Error> {
    let failed = |step: &str| {
        let e = std::io::Error::last_os_error();
        std::io::Error::new(e.kind(), format!("{step} {}: {e}", name_text(name)))
    };
    let len = geo.total_bytes();
    let flags = if create { libc::O_CREAT | libc::O_EXCL | libc::O_RDWR } else { libc::O_RDWR };
    // SAFETY: `name` is NUL-terminated; the descriptor is closed below.
    let fd = unsafe { libc::shm_open(name.as_ptr().cast(), flags, 0o600) };
    if fd < 0 {
        return Err(failed("shm_open"));
    }
    // SAFETY: sizes the new object; maps it shared; the mapping survives the close.
    let base = unsafe {
        if create && libc::ftruncate(fd, len as libc::off_t) != 0 {
            let e = failed("ftruncate");
            libc::close(fd);
            libc::shm_unlink(name.as_ptr().cast());
            return Err(e);
        }
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
        libc::close(fd);
        p
    };
    if base == libc::MAP_FAILED {
        let e = failed("mmap");
        if create {
            unlink(name);
        }
        return Err(e);
    }
    // SAFETY: `base` maps `len` bytes of a new (zeroed) or sized object,
    // page-aligned, until the Mapping drops.
    Ok(Mapping { seg: unsafe { Segment::new(base.cast(), geo) }, len })
}

/// Removes the name of a segment this process created.
fn unlink(name: &SegmentName) {
    // SAFETY: `name` is NUL-terminated.
    unsafe { libc::shm_unlink(name.as_ptr().cast()) };
}

/// Places local rank `local`'s block of a freshly mapped segment on its
/// NUMA node: MADV_RANDOM turns off the fault-around that would place a
/// neighbour's pages on this rank's node while it touches its own; each
/// rank writes its own block's pages (rank 0 also the header), so they
/// are allocated where it runs.
fn place(mapping: &Mapping, local: usize) {
    let (seg, len) = (&mapping.seg, mapping.len);
    let (start, bytes) = seg.block_range(local);
    // SAFETY: the mapping's own range, writable; the block and the header
    // lie in it.
    unsafe {
        libc::madvise(seg.base().cast(), len, libc::MADV_RANDOM);
        first_touch(start, bytes);
        if local == 0 {
            first_touch(seg.base(), seg.geo.header_bytes());
        }
    }
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
    const GEO: Geometry =
        Geometry { ranks: 2, chunk: 4096, allreduce_chunk: 4096, slots: 1, slot_bytes: 4096, sets: 1 };

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
        .is_none());
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
        .is_none());
        assert_eq!(tries, 1);
    }
}
