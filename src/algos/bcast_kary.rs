//! K-ary-tree broadcast, pipelined in segments.
//!
//! Relative to the root, rank `r` receives from `(r-1)/k` and forwards to
//! `k·r+1 ..= k·r+k`. With `seg` > 0 the message is cut into segments of
//! `seg` bytes and pipelined: a rank forwards segment i to its children in
//! the same step in which it receives segment i+1, so all levels of the
//! tree work at once. `seg` = 0 (or a message no longer than `seg`) sends
//! the message whole, as a plain k-ary tree.
//!
//! Trace, p = 4, k = 2, two segments a, b: root: [→1 a, →2 a] [→1 b, →2 b];
//! rank 1: [←0 a] [←0 b, →3 a] [→3 b]; ranks 2, 3: receive a, then b.
//!
//! Limitations: at most 4096 segments (larger messages get larger
//! segments). A k-ary tree is deeper than a k-nomial one of the same k but
//! balances the work: every inner rank sends to exactly k children.
//! Memory: none beyond the buffer.
//! Cost, h = tree height ≈ log_k p, S = ⌈n/s⌉ segments, single-port:
//! (h + S - 1) · k (α + sβ); without segmentation h · k (α + nβ). The
//! model's best segment is s* = √(nα / ((h-1)β)) (h ≥ 2), about 60 KiB for
//! 1 MiB over 16-32 ranks at α = 1 µs, β = 0.1 ns/B: hence the 64 KiB
//! default, which leaves messages up to 64 KiB unsegmented.
//! Seed: 000 (k-ary trees balance load better than k-nomial) and 002
//! (fragment pipelining down a k-ary notification tree).

use super::bcast_tree;
use crate::algos::{ParamSpec, Params};
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::pattern::{kary_children, kary_parent};
use crate::core::schedule::Schedule;

pub(super) const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "k", min: 2, max: 8, default: 2, help: "fan-out: children per rank" },
    ParamSpec {
        name: "seg",
        min: 0,
        max: 64 << 20,
        default: 64 << 10,
        help: "segment size in bytes for pipelining (0: no segmentation)",
    },
];

pub(super) fn build(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
    let k = params[0].max(1) as usize;
    let seg = params[1] as usize;
    let rel = desc.rel_rank();
    bcast_tree::build(desc, seg, kary_parent(rel, k), kary_children(rel, desc.size, k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::call::Topo;
    use crate::core::types::Coll;

    fn sched(rank: usize, size: usize, bytes: usize, k: u64, seg: u64) -> Schedule {
        let desc = CallDesc {
            coll: Coll::Bcast,
            rank,
            size,
            root: 0,
            bytes,
            unit: 1,
            commutative: true,
            in_place: false,
            topo: Topo::default(),
        };
        build(&desc, &Params::new(&[k, seg]), &GatherLayout::default())
    }

    #[test]
    fn segments_flow_through_the_tree() {
        // p = 7, k = 2, 10 bytes in segments of 3: S = 4.
        let root = sched(0, 7, 10, 2, 3);
        assert_eq!(root.steps.len(), 4);
        assert!(root.steps.iter().all(|s| s.sends.len() == 2 && s.recvs.is_empty()));
        assert_eq!(root.steps[3].sends[0].region.len, 1);
        // Inner rank 1: S + 1 steps, receiving segment i while sending i-1.
        let inner = sched(1, 7, 10, 2, 3);
        assert_eq!(inner.steps.len(), 5);
        for (i, step) in inner.steps.iter().enumerate().skip(1).take(3) {
            assert_eq!(step.recvs[0].region.off, 3 * i);
            assert_eq!(
                step.sends.iter().map(|x| (x.peer, x.region.off)).collect::<Vec<_>>(),
                vec![(3, 3 * (i - 1)), (4, 3 * (i - 1))]
            );
        }
        // A leaf receives one segment per step.
        let leaf = sched(6, 7, 10, 2, 3);
        assert_eq!(leaf.steps.len(), 4);
        assert!(leaf.steps.iter().all(|s| s.sends.is_empty() && s.recvs.len() == 1));
        // seg = 0: whole message, a plain k-ary tree.
        assert_eq!(sched(0, 7, 10, 2, 0).steps.len(), 1);
        assert_eq!(sched(1, 7, 10, 3, 0).steps[1].sends.len(), 3);
    }
}
