//! Node primitives: what the node algorithms (`algos::node`,
//! `algos::multinode`) are built from, and nothing of any algorithm or of
//! run-time adaptation.
//!
//! - [`segment`]: the shared segment of a node and its geometry;
//! - [`team`]: the step protocol that hands the segment's places from
//!   writers to readers and back;
//! - [`stream`] and [`prefetch`]: copies that bypass the writer's cache,
//!   and cache hints ahead of a rank's own loads and stores;
//! - [`PeerMemory`]: zero copy between the ranks' address spaces (the
//!   addresses travel in the step protocol's published words);
//! - [`wait`]: waiting that behaves where ranks outnumber cores;
//! - [`NodeOs`]: where a node's segment and zero copy come from, as node
//!   discovery (`driver::node`) uses it: [`os`] maps the segment and
//!   places its pages, and attaches to the peers' memory (Linux);
//! - [`threads`]: a heap segment and peer memory for ranks as threads
//!   (tests).
//!
//! Apart from [`os`] everything is plain memory, so tests map a segment
//! in a heap buffer and run ranks as threads.

pub mod os;
pub mod prefetch;
pub mod segment;
pub mod stream;
pub mod team;
pub mod threads;
pub mod wait;

use segment::{Geometry, Segment};

/// Copies between this process and a peer's address space (Linux cross
/// memory attach, or plain copies when the ranks are threads).
pub trait PeerMemory: Sync {
    /// Copies `into.len()` bytes from address `from` of rank `peer`.
    fn read(&self, peer: usize, from: usize, into: &mut [u8]);
    /// Copies `from` to address `to` of rank `peer`.
    fn write(&self, peer: usize, to: usize, from: &[u8]);
}

/// A segment's name on the host: NUL-terminated, all zero for none.
pub type SegmentName = [u8; 64];

/// Where a node's memory comes from: the operating system ([`os::Linux`])
/// or, for ranks as threads, the heap. Node discovery (`driver::node`)
/// decides who creates a segment, who opens it and when, and agrees with
/// the node's other ranks on the outcome; this only does what it is told.
pub trait NodeOs {
    /// A mapped segment, unmapped when dropped.
    type Mapping: AsRef<Segment>;
    /// Zero copy to the node's ranks.
    type Peers: PeerMemory;

    /// The cores of this host, if it can tell.
    fn cores(&self) -> Option<usize>;
    /// A segment in private memory, for a node of one rank.
    fn private(&self, geo: Geometry) -> Option<Self::Mapping>;
    /// The bytes of the filesystem segments live in (/dev/shm), if known.
    fn shm_bytes(&self) -> Option<usize>;
    /// A new segment, mapped, with local rank 0's part reserved
    /// ([`Geometry::own_range`]: no page of it can be missing when
    /// touched), and its name. Nothing is left under any name on error
    /// (of kind `StorageFull` when /dev/shm has no room).
    fn create(&self, geo: Geometry) -> std::io::Result<(SegmentName, Self::Mapping)>;
    /// Maps the segment another rank of the node created, with local rank
    /// `local`'s part reserved.
    fn open(&self, name: &SegmentName, geo: Geometry, local: usize) -> std::io::Result<Self::Mapping>;
    /// Removes the name of a segment this rank created, once every rank
    /// has mapped it.
    fn unlink(&self, name: &SegmentName);
    /// Readies a new segment for use, once every rank has mapped it.
    fn settle(&self, mapping: &Self::Mapping, local: usize);
    /// What this rank's peers need to test zero copy to it.
    fn probe_words(&self) -> [u64; 2];
    /// Whether zero copy works to the rank that sent `words`
    /// ([`NodeOs::probe_words`]).
    fn probe(&self, words: &[u64]) -> bool;
    /// Zero copy to the node's ranks, from every local rank's
    /// [`NodeOs::probe_words`] in order.
    fn peers(&self, words: &[u64]) -> Self::Peers;
}
