//! Pipelined chain broadcast: the root sends segments to relative rank 1,
//! which forwards each to rank 2 while receiving the next, and so on down
//! the line (the k = 1 k-ary tree, through the same pipeline engine).
//!
//! Trace, p = 3, two segments a, b: root: [→1 a] [→1 b]; rank 1: [←0 a]
//! [←0 b, →2 a] [→2 b]; rank 2: [←1 a] [←1 b].
//!
//! Limitations: latency grows with p (p - 1 hops before the last rank has
//! its first segment), so it only pays for large messages. At most 4096
//! segments (larger messages get larger segments). Memory: none beyond the
//! buffer.
//! Cost, S = ⌈n/s⌉: (p - 2 + S)(α + sβ) = nβ + (p-2)sβ + Sα + (p-2)α: the
//! bandwidth term tends to nβ, the best any broadcast does. Model-best
//! segment s* = √(nα / ((p-2)β)): 55 KiB for 4 MiB over 16 ranks at α = 1
//! µs, β = 0.1 ns/B; 64 KiB is the default.
//! Seed: 002 (fragment pipelining along a chain notification tree).

use super::bcast_tree;
use crate::algos::{ParamSpec, Params};
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::pattern::{kary_children, kary_parent};
use crate::core::schedule::Schedule;

pub(super) const PARAMS: &[ParamSpec] =
    &[ParamSpec { name: "seg", min: 1024, max: 64 << 20, default: 64 << 10, help: "segment size in bytes" }];

pub(super) fn build(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
    let seg = params[0].max(1) as usize;
    let rel = desc.rel_rank();
    bcast_tree::build(desc, seg, kary_parent(rel, 1), kary_children(rel, desc.size, 1))
}
