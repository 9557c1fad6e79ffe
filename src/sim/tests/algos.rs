//! Tests of single algorithms that need the simulator: their critical
//! paths, scratch and results from running every rank's schedule. Each
//! reaches its algorithm through the registry; the algorithm's own file
//! keeps the tests of its schedules' shape.

use crate::algos::{find, BuildFn};
use crate::core::types::Coll;

/// Every rank's schedule of `case` from `build`, each given the root's
/// layout.
fn every_rank(build: BuildFn, case: &crate::sim::check::Case) -> Vec<crate::core::schedule::Schedule> {
    let params = crate::algos::Params::default();
    case.descs().iter().map(|d| build(d, &params, &case.layout)).collect()
}

/// The schedule builder of a registered point-to-point algorithm.
fn builder(coll: Coll, name: &str) -> BuildFn {
    find(coll, name).and_then(|a| a.schedule()).unwrap_or_else(|| panic!("no schedule algorithm {coll}/{name}"))
}

mod bcast_kary {
    use crate::algos::{find, Params};
    use crate::core::types::Coll;
    use crate::sim::check::{check, Case};

    #[test]
    fn pipelined_critical_path_is_height_plus_segments() {
        // Latency model (every step costs one), p = 15, k = 2: height 3.
        // Unsegmented: 3 steps, each moving the whole message. S = 8
        // segments: 3 + 8 - 1 steps, each moving one segment, so in α-β
        // terms (h + S - 1) k (α + sβ) against h k (α + nβ).
        let alg = find(Coll::Bcast, "kary").unwrap();
        let case = Case::new(Coll::Bcast, 15, 80);
        let whole = check(alg, &Params::new(&[2, 0]), &case).unwrap().unwrap();
        let piped = check(alg, &Params::new(&[2, 10]), &case).unwrap().unwrap();
        assert_eq!(whole.depth, 3);
        assert_eq!(piped.depth, 3 + 8 - 1);
        assert_eq!((whole.messages, piped.messages), (14, 14 * 8));
    }
}

mod bcast_knomial {
    use crate::algos::{find, Params};
    use crate::core::pattern::{knomial_parent, tree_height};
    use crate::core::types::Coll;
    use crate::sim::check::{check, Case};

    #[test]
    fn depth_is_the_tree_height() {
        // Critical path in steps (latency model): the most non-zero base-k
        // digits of a relative rank, at most ⌈log_k p⌉.
        let alg = find(Coll::Bcast, "knomial").unwrap();
        for (k, p, depth) in [(2, 16, 4), (2, 17, 4), (4, 16, 2), (4, 17, 2), (4, 64, 3), (8, 64, 2), (8, 65, 2)] {
            let stats = check(alg, &Params::new(&[k]), &Case::new(Coll::Bcast, p, 10)).unwrap().unwrap();
            assert_eq!(stats.depth, depth, "k {k} p {p}");
            assert_eq!(stats.depth, tree_height(p, |r| knomial_parent(r, k as usize)));
            assert!(stats.depth <= (p as f64).log(k as f64).ceil() as usize);
            assert_eq!(stats.messages, p - 1);
        }
    }
}

mod bcast_chain {
    use super::builder;
    use crate::algos::{find, Params};
    use crate::core::call::{CallDesc, GatherLayout, Topo};
    use crate::core::schedule::Schedule;
    use crate::core::types::Coll;
    use crate::sim::check::{check, Case};

    /// `build` of the algorithm's file, through the registry.
    fn build(desc: &CallDesc, params: &Params, layout: &GatherLayout) -> Schedule {
        builder(Coll::Bcast, "chain")(desc, params, layout)
    }

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

mod bcast_scatter_allgather {
    use super::builder;
    use crate::algos::BuildFn;
    use crate::algos::{find, Params};
    use crate::core::call::{CallDesc, GatherLayout};
    use crate::core::schedule::Schedule;
    use crate::core::types::Coll;
    use crate::sim::check::{check, Case};

    /// `build_doubling` of the algorithm's file, through the registry.
    fn build_doubling(desc: &CallDesc, params: &Params, layout: &GatherLayout) -> Schedule {
        builder(Coll::Bcast, "scatter_allgather")(desc, params, layout)
    }

    /// `build_ring` of the algorithm's file, through the registry.
    fn build_ring(desc: &CallDesc, params: &Params, layout: &GatherLayout) -> Schedule {
        builder(Coll::Bcast, "scatter_allgather_ring")(desc, params, layout)
    }

    fn scheds(build: BuildFn, p: usize, root: usize, n: usize) -> Vec<Schedule> {
        super::every_rank(build, &Case { root, ..Case::new(Coll::Bcast, p, n) })
    }

    fn depth(name: &str, p: usize) -> usize {
        let alg = find(Coll::Bcast, name).unwrap();
        check(alg, &Params::default(), &Case::new(Coll::Bcast, p, 100 * p)).unwrap().unwrap().depth
    }

    #[test]
    fn doubling_critical_path_is_two_log_p_for_powers_of_two() {
        for k in 1..=7 {
            assert_eq!(depth("scatter_allgather", 1 << k), 2 * k, "p = 2^{k}");
        }
        // Otherwise the short groups' fix-ups add steps, but few.
        for p in [3usize, 5, 17, 23, 33, 100] {
            let log = p.next_power_of_two().trailing_zeros() as usize;
            assert!(depth("scatter_allgather", p) <= 2 * log + log * (log - 1) / 2, "p {p}");
        }
        // A rank exchanges with one partner per step, one message each way.
        for s in scheds(build_doubling, 23, 4, 2300).iter().skip(1) {
            assert!(s.steps.iter().skip(2).all(|st| st.sends.len() <= 1 && st.recvs.len() <= 1));
        }
    }

    #[test]
    fn ring_critical_path_is_log_p_plus_p_minus_one() {
        for p in [2usize, 8, 16, 32, 64] {
            let log = p.trailing_zeros() as usize;
            assert_eq!(depth("scatter_allgather_ring", p), log + p - 1, "p {p}");
        }
        assert!(depth("scatter_allgather_ring", 12) <= 4 + 11);
        // Each ring step moves one piece in and one out.
        for s in scheds(build_ring, 12, 0, 1200).iter().skip(1) {
            let ring = &s.steps[s.steps.len() - 11..];
            assert!(ring.iter().all(|st| st.sends.len() <= 1 && st.recvs.len() <= 1));
        }
    }
}

mod gatherv_binomial {
    use super::builder;
    use crate::algos::{find, Params};
    use crate::core::call::{CallDesc, GatherLayout};
    use crate::core::gather::{message_chains, ChainKind, Packed};
    use crate::core::gen::runs_layout;
    use crate::core::pattern::binomial_children;
    use crate::core::schedule::{BufId, Region, Schedule};
    use crate::core::types::Coll;
    use crate::sim::check::{check, Case};

    /// `build` of the algorithm's file, through the registry.
    fn build(desc: &CallDesc, params: &Params, layout: &GatherLayout) -> Schedule {
        builder(Coll::Gatherv, "binomial")(desc, params, layout)
    }

    fn scheds(size: usize, root: usize, in_place: bool, layout: &GatherLayout) -> Vec<Schedule> {
        let case = Case { root, in_place, layout: layout.clone(), ..Case::new(Coll::Gatherv, size, 0) };
        super::every_rank(build, &case)
    }

    fn reverse_order(size: usize, len: usize) -> GatherLayout {
        GatherLayout { blocks: (0..size).map(|r| ((size - 1 - r) * (len + 1), len)).collect() }
    }

    #[test]
    fn shuffled_layout_is_received_once_and_scattered() {
        // Blocks in reverse rank order with gaps: nothing is contiguous in
        // packing order, so each child with a subtree sends one scattered
        // chain; the root's scratch is the largest child subtree and each
        // of those blocks is copied once.
        let size = 8;
        let layout = reverse_order(size, 4);
        let root = &scheds(size, 0, true, &layout)[0];
        assert_eq!(root.scratch_bytes, 4 * 4);
        let recvs: Vec<_> = root.steps.iter().flat_map(|st| &st.recvs).map(|x| (x.peer, x.region)).collect();
        assert_eq!(
            recvs,
            vec![
                (1, Region::new(BufId::Recv, 6 * 5, 4)),
                (2, Region::new(BufId::Scratch, 0, 8)),
                (4, Region::new(BufId::Scratch, 0, 16)),
            ]
        );
        let copies = root.steps.iter().map(|st| st.locals.len()).collect::<Vec<_>>();
        assert_eq!(copies, vec![0, 2, 4]);
        let stats = check(find(Coll::Gatherv, "binomial").unwrap(), &Params::default(), &{
            let mut c = Case::new(Coll::Gatherv, size, 4);
            c.layout = layout;
            c
        });
        assert_eq!(stats.unwrap().unwrap().scratch_max, 4 * 4);
    }

    #[test]
    fn runs_of_ranks_give_both_kinds_of_chains() {
        // Runs of consecutive ranks back to back, shuffled: the root gets
        // multi-block direct chains and scattered chains, and the result
        // is right.
        let (mut direct, mut scattered) = (0, 0);
        for seed in 0..20 {
            let size = 37;
            let mut case = Case::new(Coll::Gatherv, size, 0);
            case.layout = runs_layout(size, 6, 6, seed);
            for child in binomial_children(0, size) {
                for chain in message_chains(&Packed::subtree(child, size, 0, &case.layout)) {
                    let blocks = case.layout.blocks[chain.blocks].iter().filter(|b| b.1 > 0).count();
                    match chain.kind {
                        ChainKind::Direct if blocks > 1 => direct += 1,
                        ChainKind::Scatter => scattered += 1,
                        _ => {}
                    }
                }
            }
            check(find(Coll::Gatherv, "binomial").unwrap(), &Params::default(), &case).unwrap().unwrap();
        }
        assert!(direct > 10 && scattered > 10, "{direct} direct, {scattered} scattered");
    }

    #[test]
    fn edge_cases() {
        let alg = find(Coll::Gatherv, "binomial").unwrap();
        // One rank, with and without MPI_IN_PLACE.
        for in_place in [false, true] {
            let mut case = Case::new(Coll::Gatherv, 1, 6);
            case.in_place = in_place;
            check(alg, &Params::default(), &case).unwrap().unwrap();
            let s = &scheds(1, 0, in_place, &case.layout)[0];
            assert_eq!(s.steps.len(), usize::from(!in_place));
        }
        // Every block empty: nobody sends anything.
        let empty = GatherLayout { blocks: vec![(0, 0); 37] };
        assert!(scheds(37, 5, false, &empty).iter().all(|s| s.steps.is_empty() && s.scratch_bytes == 0));
        let mut case = Case::new(Coll::Gatherv, 37, 0);
        case.layout = empty;
        check(alg, &Params::default(), &case).unwrap().unwrap();
    }
}

/// The reduction trees with a small scratch budget, so that children are
/// received in batches.
mod reduce_tree_batched {
    use crate::algos::reduce_tree::{allreduce, reduce, Shape};
    use crate::algos::Params;
    use crate::core::call::{CallDesc, GatherLayout, Topo};
    use crate::core::schedule::Schedule;
    use crate::core::types::Coll;

    fn desc(rank: usize, size: usize, bytes: usize) -> CallDesc {
        let topo = Topo::default();
        CallDesc { coll: Coll::Reduce, rank, size, root: 0, bytes, unit: 8, commutative: true, in_place: false, topo }
    }

    /// A scratch budget of 64 bytes, so that vectors of a few elements are
    /// received in batches (32 MiB for the registered algorithms).
    const TEST_BUDGET: usize = 64;

    fn knomial_reduce_batched(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
        reduce(desc, Shape::Knomial(params[0] as usize), TEST_BUDGET)
    }

    fn kary_reduce_batched(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
        reduce(desc, Shape::Kary(params[0] as usize), TEST_BUDGET)
    }

    fn knomial_allreduce_batched(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
        allreduce(desc, Shape::Knomial(params[0] as usize), TEST_BUDGET)
    }

    fn kary_allreduce_batched(desc: &CallDesc, params: &Params, _: &GatherLayout) -> Schedule {
        allreduce(desc, Shape::Kary(params[0] as usize), TEST_BUDGET)
    }

    /// The trees with [`TEST_BUDGET`], in the simulator: exact results for
    /// every fan-out, communicator size, root, MPI_IN_PLACE and operator,
    /// with children received in batches of one to eight.
    #[test]
    fn batched_children_give_exact_results() {
        use crate::algos::{Algorithm, BuildFn};
        use crate::sim::check::{check, Case, Data};
        use crate::sim::{Protocol, SimOptions};
        let s = reduce(&desc(0, 9, 24), Shape::Kary(8), TEST_BUDGET);
        assert_eq!(s.steps.iter().filter(|st| !st.recvs.is_empty()).count(), 4, "batches of 2 children");
        let trees: [(Coll, &str, BuildFn); 4] = [
            (Coll::Reduce, "knomial", knomial_reduce_batched),
            (Coll::Reduce, "kary", kary_reduce_batched),
            (Coll::Allreduce, "knomial", knomial_allreduce_batched),
            (Coll::Allreduce, "kary", kary_allreduce_batched),
        ];
        let mut failures = Vec::new();
        for (coll, name, build) in trees {
            let alg = Algorithm::new(coll, name, "batched", build);
            for p in (1..=24).chain([31, 33, 64]) {
                let mut roots = if coll == Coll::Reduce { vec![0, p / 2, p - 1] } else { vec![0] };
                roots.dedup();
                for (root, k, count) in roots.into_iter().flat_map(|r| {
                    [2, 4, 8].into_iter().flat_map(move |k| [0, 1, 3, 7, 13].map(move |count| (r, k, count)))
                }) {
                    for (in_place, commutative, data) in [
                        (false, false, Data::Interval),
                        (true, false, Data::Interval),
                        (false, true, Data::Bitset),
                        (true, true, Data::SumU64),
                    ] {
                        let mut case = Case::new(coll, p, count);
                        (case.root, case.in_place, case.commutative, case.data) = (root, in_place, commutative, data);
                        case.opts = SimOptions { protocol: Protocol::Rendezvous, ..SimOptions::default() };
                        match check(&alg, &Params::new(&[k]), &case) {
                            Ok(Some(_)) => {}
                            Ok(None) => failures.push(format!("{alg:?} refused p={p}")),
                            Err(e) => {
                                failures.push(format!("{alg:?} k={k} p={p} root={root} count={count} {data:?}: {e}"))
                            }
                        }
                    }
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} failure(s):\n{}",
            failures.len(),
            failures[..failures.len().min(20)].join("\n")
        );
    }
}
