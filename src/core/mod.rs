//! Pure vocabulary shared by every layer: what a call is, what an element is,
//! and the schedule IR that algorithms produce and executors run.

pub mod call;
pub mod cost_model;
pub mod gather;
pub mod gen;
pub mod pattern;
pub mod schedule;
pub mod types;
