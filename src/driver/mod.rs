//! Per-call orchestration above selection: the schedule cache and the call
//! statistics; later the planner.

pub mod cache;
pub mod stats;
