//! One harness for every node algorithm in the registry: each runs through
//! its registered entry, as the library calls it, for p = 1..9 ranks (as
//! threads), on a node with and without more ranks than cores, over a
//! sequence of calls with random roots, MPI_IN_PLACE and lengths that
//! cross the test segment's slots, lines and chunks. A new node algorithm
//! is covered by registering it: there is no list here to keep.

use std::sync::atomic::AtomicU64;

use super::gatherv_shm::Gather;
use super::reduction::zero_copy_scratch;
use super::tests::{element, expected, jitter, node_call, on_threads, Interval, TEST_GEO};
use super::NodeCall;
use crate::algos::{Impl, ALGORITHMS};
use crate::core::call::{CallDesc, Topo};
use crate::core::gen::{random_layout, Rng};
use crate::core::types::Coll;
use crate::exec::Buffers;
use crate::shm::segment::Geometry;

/// The test segment with room for the zero-copy Gatherv layout of 9 ranks
/// (16 bytes a rank in a chunk area).
const GEO: Geometry = Geometry { chunk: 16 * 9, ..TEST_GEO };

/// Calls per algorithm, rank count and node kind.
const CALLS: usize = 24;

/// A call as the registry's check sees it on this node.
fn desc(coll: Coll, rank: usize, size: usize, root: usize, bytes: usize) -> CallDesc {
    let topo = Topo { nodes: 1, contiguous: true, shm: true, zcopy: true, chunk: GEO.chunk, one_sided: true };
    CallDesc { coll, rank, size, root, bytes, unit: 8, commutative: false, in_place: false, topo }
}

#[test]
fn every_registered_node_algorithm_is_exact_for_1_to_9_ranks() {
    let node_algorithms = ALGORITHMS.iter().filter_map(|a| match a.imp {
        Impl::Node(run) => Some((a, run)),
        _ => None,
    });
    for (algo, run) in node_algorithms {
        for p in 1..=9 {
            for oversubscribed in [false, true] {
                on_threads(p, GEO, |rank, team| {
                    team.settings.oversubscribed = oversubscribed;
                    let mut rng = Rng(p as u64 * 131 + rank as u64);
                    // The same call sequence on every rank (seeded by p only).
                    let mut plan = Rng(p as u64 * 17 + oversubscribed as u64);
                    for call in 0..CALLS {
                        let root = plan.below(p);
                        let in_place = plan.below(3) == 0;
                        let count = [0, 1, 5, 7, 8, 21, 40, 300][plan.below(8)];
                        let context = || {
                            format!("{algo:?} p={p} oversubscribed={oversubscribed} call={call} rank={rank} root={root} in_place={in_place} count={count}")
                        };
                        assert_eq!(
                            (algo.check)(&desc(algo.coll, rank, p, root, count * 8)),
                            Ok(()),
                            "the check refuses a node call: {}",
                            context()
                        );
                        jitter(&mut rng);
                        match algo.coll {
                            Coll::Allreduce | Coll::Reduce => {
                                let root = (algo.coll == Coll::Reduce).then_some(root);
                                let is_out = root.is_none_or(|r| r == rank);
                                let input: Vec<u8> =
                                    (0..count).flat_map(|j| element(p, rank, j).to_le_bytes()).collect();
                                let mut recv = match (is_out, in_place) {
                                    (true, true) => input.clone(),
                                    (true, false) => vec![0xEE; count * 8],
                                    (false, _) => Vec::new(),
                                };
                                let send = (!(in_place && is_out)).then_some(&input[..]);
                                // What the dispatcher lends it: none where the
                                // registry says it never combines zero copy.
                                let lent = algo
                                    .zero_copy_scratch
                                    .then(|| zero_copy_scratch(p, team.state.memory.sizes.sub_chunk));
                                let mut scratch = vec![0u8; lent.unwrap_or(0)];
                                let op = Interval { combined: AtomicU64::new(0) };
                                let bufs = Buffers { send, recv: &mut recv, scratch: &mut scratch };
                                node_call(team, count * 8, |team| {
                                    run(team, NodeCall::Reduce { bufs, unit: 8, root, host: None }, &op)
                                });
                                if is_out {
                                    for (j, e) in recv.chunks_exact(8).enumerate() {
                                        let got = u64::from_le_bytes(e.try_into().unwrap());
                                        assert_eq!(got, expected(p, j), "element {j}: {}", context());
                                    }
                                }
                            }
                            Coll::Bcast => {
                                let n = count * 8 + plan.below(8);
                                let want: Vec<u8> = (0..n).map(|i| (i * 7 + call + root) as u8).collect();
                                let mut data = if rank == root { want.clone() } else { vec![0xEE; n] };
                                let op = Interval { combined: AtomicU64::new(0) };
                                node_call(team, n, |team| run(team, NodeCall::bcast(&mut data, root), &op));
                                assert_eq!(data, want, "{}", context());
                            }
                            Coll::Gatherv => {
                                let layout = random_layout(p, count * 8, plan.next_u64());
                                let byte = |r: usize, i: usize| (r * 37 + i * 11 + call) as u8;
                                let (off, len) = layout.blocks[rank];
                                let block: Vec<u8> = (0..len).map(|i| byte(rank, i)).collect();
                                let extent = layout.blocks.iter().map(|&(o, l)| o + l).max().unwrap_or(0);
                                let is_root = rank == root;
                                let mut recv = vec![0xEE; if is_root { extent } else { 0 }];
                                if is_root && in_place {
                                    recv[off..off + len].copy_from_slice(&block);
                                }
                                let none = Default::default();
                                let g = Gather {
                                    send: if is_root && in_place { &[] } else { &block },
                                    recv: &mut recv,
                                    layout: if is_root { &layout } else { &none },
                                    root,
                                    in_place: is_root && in_place,
                                };
                                let op = Interval { combined: AtomicU64::new(0) };
                                node_call(team, len, |team| run(team, NodeCall::Gatherv(g), &op));
                                if is_root {
                                    let mut want = vec![0xEE; extent];
                                    for (r, &(o, l)) in layout.blocks.iter().enumerate() {
                                        for i in 0..l {
                                            want[o + i] = byte(r, i);
                                        }
                                    }
                                    assert_eq!(recv, want, "{}", context());
                                }
                            }
                        }
                    }
                });
            }
        }
    }
}
