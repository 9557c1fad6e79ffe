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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algos::find;
    use crate::core::call::Topo;
    use crate::core::types::Coll;
    use crate::sim::check::{check, Case};

    #[test]
    fn a_line_of_segments() {
        let sched = |rank| {
            let desc = CallDesc {
                coll: Coll::Bcast,
                rank,
                size: 5,
                root: 2,
                bytes: 4096,
                unit: 1,
                commutative: true,
                in_place: false,
                topo: Topo::default(),
            };
            build(&desc, &Params::new(&[1024]), &GatherLayout::default())
        };
        // Root 2 sends 4 segments to 3; relative 3 (absolute 0) forwards to
        // absolute 1; the last, absolute 1, only receives.
        let root = sched(2);
        assert_eq!(root.steps.len(), 4);
        assert!(root.steps.iter().all(|s| s.sends.len() == 1 && s.sends[0].peer == 3 && s.recvs.is_empty()));
        let mid = sched(0);
        assert_eq!(mid.steps.len(), 5);
        assert!(mid.steps.iter().skip(1).all(|s| s.sends.len() == 1 && s.sends[0].peer == 1));
        let last = sched(1);
        assert_eq!((last.steps.len(), last.messages_sent()), (4, 0));
        // Latency model: p - 2 + S steps.
        let stats = check(find(Coll::Bcast, "chain").unwrap(), &Params::new(&[1024]), &Case::new(Coll::Bcast, 5, 4096));
        assert_eq!(stats.unwrap().unwrap().depth, 5 - 2 + 4);
    }
}
