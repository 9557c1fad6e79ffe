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
//! - [`os`]: mapping the segment and placing its pages, cross-memory
//!   attach (the library's host layer decides who does what, with MPI);
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

/// Copies between this process and a peer's address space (Linux cross
/// memory attach, or plain copies when the ranks are threads).
pub trait PeerMemory: Sync {
    /// Copies `into.len()` bytes from address `from` of rank `peer`.
    fn read(&self, peer: usize, from: usize, into: &mut [u8]);
    /// Copies `from` to address `to` of rank `peer`.
    fn write(&self, peer: usize, to: usize, from: &[u8]);
}
