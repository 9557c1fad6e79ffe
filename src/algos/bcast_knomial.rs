//! K-nomial-tree broadcast (seed 000's trees, applied to Bcast).
//!
//! Relative to the root, rank `r` receives the whole message from `r` with
//! its lowest non-zero base-k digit cleared, then sends it at once to
//! `r + d·k^j` (d = 1..k-1) for every place `k^j` below that digit, largest
//! subtree first: it forwards as soon as its data is in. k = 2 is the
//! binomial tree; larger k makes the tree shallower and the fan-out wider.
//!
//! Trace, p = 9, k = 3, root 0: step 1: 0→3, 0→6, 0→1, 0→2; step 2 (as
//! each arrives): 3→4, 3→5, 6→7, 6→8.
//!
//! Limitations: every rank moves the whole message (for large messages see
//! scatter_allgather, kary with segments or chain). Memory: none beyond the
//! buffer. Cost: at most ⌈log_k p⌉ levels, a rank sends to up to (k-1)
//! children per level; single-port: ⌈log_k p⌉ (k-1) (α + nβ) on the
//! critical path; with the sends of a step overlapping (several links,
//! shared memory) it tends to ⌈log_k p⌉ (α + nβ).
//! Seed: 000 (k-nomial trees with tunable fan-out K = 2, 4, 8; small K wins
//! at small node counts, K = 4 around 128-256 nodes).

use super::bcast_tree;
use crate::algos::{ParamSpec, Params};
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::pattern::{knomial_children, knomial_parent};
use crate::core::schedule::Schedule;

pub(super) const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "k",
    min: 2,
    max: 8,
    default: 4,
    help: "tree radix: each rank sends to up to k-1 children per level",
}];

pub(super) fn build(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
    let k = params[0].max(2) as usize;
    let rel = desc.rel_rank();
    bcast_tree::build(desc, 0, knomial_parent(rel, k), knomial_children(rel, desc.size, k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::call::Topo;
    use crate::core::types::Coll;

    fn desc(rank: usize, size: usize, root: usize, bytes: usize) -> CallDesc {
        CallDesc {
            coll: Coll::Bcast,
            rank,
            size,
            root,
            bytes,
            unit: 1,
            commutative: true,
            in_place: false,
            topo: Topo::default(),
        }
    }

    #[test]
    fn root_sends_to_every_digit_at_once_and_children_forward_next() {
        // p = 16, k = 4, root 3: the root's children are relative 4, 8, 12,
        // 1, 2, 3 (absolute 7, 11, 15, 4, 5, 6), all in its first step.
        let k4 = Params::new(&[4]);
        let root = build(&desc(3, 16, 3, 100), &k4, &GatherLayout::default());
        assert_eq!(root.steps.len(), 1);
        let peers: Vec<usize> = root.steps[0].sends.iter().map(|x| x.peer).collect();
        assert_eq!(peers, vec![7, 11, 15, 4, 5, 6]);
        // Relative 4 (absolute 7): receive from the root, then send to
        // relative 5, 6, 7.
        let inner = build(&desc(7, 16, 3, 100), &k4, &GatherLayout::default());
        assert_eq!(inner.steps.len(), 2);
        assert_eq!(inner.steps[0].recvs[0].peer, 3);
        assert_eq!(inner.steps[1].sends.iter().map(|x| x.peer).collect::<Vec<_>>(), vec![8, 9, 10]);
    }
}
