//! The node layer: collectives among the ranks of one node through a
//! shared segment (and, for large messages, straight between their
//! buffers). The segment and the OS calls come from the library's ABI
//! layer; here everything is plain memory, so tests run ranks as threads.

pub mod bcast;
pub mod gatherv;
pub mod reduce;
pub mod segment;
pub mod team;

#[cfg(test)]
mod tests;
