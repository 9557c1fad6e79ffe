//! The node layer with ranks as threads of one process, for tests: a
//! segment in a heap buffer and peer memory by plain copies.

use super::segment::{Geometry, Segment, PAGE};
use super::PeerMemory;

/// A zeroed, page-aligned heap buffer standing in for the shared mapping.
pub struct HeapSegment {
    /// The memory `seg` points into.
    _mem: Vec<u8>,
    pub seg: Segment,
}

impl HeapSegment {
    pub fn new(geo: Geometry) -> HeapSegment {
        let mut mem = vec![0u8; geo.total_bytes() + PAGE];
        let skew = mem.as_ptr().align_offset(PAGE);
        // SAFETY: `mem` holds total_bytes after the alignment skew, zeroed,
        // and lives as long as the segment (same struct, never resized).
        let seg = unsafe { Segment::new(mem.as_mut_ptr().add(skew), geo) };
        HeapSegment { _mem: mem, seg }
    }
}

impl AsRef<Segment> for HeapSegment {
    fn as_ref(&self) -> &Segment {
        &self.seg
    }
}

/// Peer memory between threads of one process: plain copies.
pub struct Threads;

thread_local! {
    /// Bytes this thread has written into its peers' memory, so that a
    /// test can tell which way a transfer went.
    static WRITTEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Bytes the calling thread has written into its peers' memory so far.
pub fn written() -> usize {
    WRITTEN.get()
}

impl PeerMemory for Threads {
    fn read(&self, _peer: usize, from: usize, into: &mut [u8]) {
        // SAFETY: `from` is a buffer a peer thread published for this step
        // and keeps alive and unwritten until every rank has finished it.
        unsafe { std::ptr::copy_nonoverlapping(from as *const u8, into.as_mut_ptr(), into.len()) }
    }

    fn write(&self, _peer: usize, to: usize, from: &[u8]) {
        // SAFETY: `to` is a receive buffer a peer thread published, the
        // range this rank's slice owns, alive until every rank has finished.
        unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), to as *mut u8, from.len()) }
        WRITTEN.set(WRITTEN.get() + from.len());
    }
}
