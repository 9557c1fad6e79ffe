//! Per-call orchestration above selection, written against the [`Host`]
//! trait, so that all of it runs in the unit tests without MPI (ranks as
//! threads, see `tests`):
//! - [`collectives`] and [`gatherv`]: from the user's arguments to an
//!   outcome: classify them ([`classify`]; anything pcoll does not handle
//!   goes to the host), plan the call ([`plan`]), agree on a Gatherv's
//!   layout, pack non-dense datatypes ([`pack`]), run it;
//! - [`dispatch`]: a schedule over the host's transport, a node algorithm
//!   over the segment, a composition with its stage between nodes;
//! - [`verify`]: PCOLL_VERIFY's comparison with the host's collectives;
//! - [`node`]: node discovery, which makes a communicator's state
//!   ([`comm`]), with the process's budget of /dev/shm and the segments
//!   it keeps for later communicators ([`pool`]); [`thread`]: the one per-thread
//!   struct of caches and the reentry guard; [`prepared`]: a thread's
//!   last plans; [`cache`]: schedules; [`stats`]: call statistics;
//!   [`runtime`]: the configuration and `pcoll_set_algorithm`'s choices;
//!   [`calibrate`]: PCOLL_CALIBRATE; [`window`]: the node leaders'
//!   one-sided window; [`family`]: whether the process runs under the MPI
//!   family the library was built for.

pub mod cache;
pub mod calibrate;
pub mod classify;
pub mod collectives;
pub mod comm;
pub mod dispatch;
pub mod family;
pub mod gatherv;
pub mod host;
pub mod node;
pub mod pack;
pub mod plan;
pub mod pool;
pub mod prepared;
pub mod runtime;
pub mod stats;
pub mod thread;
pub mod verify;
pub mod window;

pub use host::Host;

#[cfg(test)]
mod tests;
