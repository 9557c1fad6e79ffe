//! Node discovery against the threaded host: the node layout from the
//! host's splits, PCOLL_RANKS_PER_NODE, and the agreement on the segment
//! and on zero copy when a rank cannot have them.

use super::host::{Comm, CommSpec, TestHost, World};
use super::{bcast_call, WORLD};
use crate::core::call::Topo;
use crate::driver::comm::{CallState, CommState};
use crate::driver::host::Outcome::Forward;
use crate::driver::Host;
use std::sync::atomic::Ordering;

/// What a rank learnt of its node, and of every rank's.
#[derive(Debug, PartialEq)]
struct Found {
    /// This rank on its node, and the node's size.
    local: (usize, usize),
    node_of: Vec<usize>,
    local_of: Vec<usize>,
    /// The threads of its node communicator.
    node_comm: Vec<usize>,
    segment: bool,
    zero_copy: bool,
}

/// Every rank's state of `comm`, made by discovery.
fn discover_all(world: &'static World, comm: Comm) -> Vec<(Found, Topo, usize)> {
    world
        .run(|h| {
            let rank = world.members_of(comm).iter().position(|&t| t == h.rank)?;
            let state: &CommState<TestHost> = h.create_state(comm).expect("a state");
            assert_eq!(state.rank, rank);
            let node = &state.node;
            let found = Found {
                local: (node.rank, node.size),
                node_of: node.node_of.clone(),
                local_of: node.local_of.clone(),
                node_comm: world.members_of(state.node_comm).to_vec(),
                segment: state.mapping.is_some(),
                zero_copy: state.peers.is_some(),
            };
            let base = state.node_memory().map_or(0, |(seg, _)| seg.base() as usize);
            Some((found, node.topo, base))
        })
        .into_iter()
        .flatten()
        .collect()
}

#[test]
fn discovery_names_nodes_by_their_first_rank_and_shares_one_segment_per_node() {
    // threads 0 and 2 on host node 1, 1 and 3 on host node 0, 4 alone
    let world = World::new(&[1, 0, 1, 0, 2], &[], vec![]);
    let all = discover_all(world, WORLD);
    let (node_of, local_of) = (vec![0, 1, 0, 1, 2], vec![0, 0, 1, 1, 0]);
    for (rank, (found, topo, _)) in all.iter().enumerate() {
        let node_comm = (0..5).filter(|&t| node_of[t] == node_of[rank]).collect::<Vec<_>>();
        let want = Found {
            local: (local_of[rank], node_comm.len()),
            node_of: node_of.clone(),
            local_of: local_of.clone(),
            node_comm,
            segment: true,
            zero_copy: true,
        };
        assert_eq!(found, &want, "rank {rank}");
        assert_eq!((topo.nodes, topo.contiguous, topo.shm, topo.zcopy), (3, false, true, true));
    }
    // one segment per node, the lone rank's its own; every name unlinked
    let base = |r: usize| all[r].2;
    assert!(base(0) == base(2) && base(1) == base(3));
    assert!(base(0) != base(1) && base(4) != base(0) && base(4) != base(1) && base(4) != 0);
    assert_eq!(world.linked_segments(), 0);
}

#[test]
fn ranks_per_node_groups_consecutive_world_ranks_ordered_by_communicator_rank() {
    // one host node; a communicator of threads 4, 3, 2, 1 in that order
    let reversed = CommSpec { members: vec![4, 3, 2, 1], inter: false };
    let world = World::new(&[0; 5], &[("PCOLL_RANKS_PER_NODE", "2")], vec![reversed]);
    let all = discover_all(world, WORLD);
    assert!(all.iter().all(|(f, t, _)| f.node_of == [0, 0, 1, 1, 2] && t.contiguous && t.nodes == 3));
    assert_eq!(all[3].0.node_comm, [2, 3]);
    // threads 4 | 3 2 | 1: groups 2, 1, 0
    let all = discover_all(world, 2);
    for (found, topo, _) in &all {
        assert_eq!((&found.node_of[..], &found.local_of[..]), (&[0, 1, 1, 2][..], &[0, 0, 1, 0][..]));
        assert!(topo.contiguous && topo.shm);
    }
    assert_eq!(all[2].0.node_comm, [3, 2], "ordered by communicator rank");
}

#[test]
fn a_rank_without_the_segment_turns_it_off_on_its_whole_node() {
    for failing in [2, 0] {
        // nodes {0, 1, 2} and {3, 4}: thread 2 cannot open the segment,
        // or thread 0 cannot create it (the others then open nothing)
        let world = World::new(&[0, 0, 0, 1, 1], &[("PCOLL_BCAST", "hier")], vec![]);
        world.no_segment.store(1 << failing, Ordering::Relaxed);
        let all = discover_all(world, WORLD);
        let segment: Vec<bool> = all.iter().map(|(f, ..)| f.segment).collect();
        assert_eq!(segment, [false, false, false, true, true], "thread {failing} fails");
        assert!(all.iter().all(|(f, t, _)| !t.shm && !t.zcopy && f.zero_copy == f.segment));
        assert_eq!(world.linked_segments(), 0, "the failed segment's name is unlinked too");
        // a composition forced: the host runs the call, at every rank
        let outcomes = world.run(|h| {
            let mut buf = [h.rank as u8; 8];
            bcast_call(h, buf.as_mut_ptr().cast(), 8, super::host::Ty::Byte, 0, WORLD)
        });
        assert!(outcomes.iter().all(|&o| o == Forward("a node has no shared segment")), "{outcomes:?}");
    }
}

#[test]
fn zero_copy_is_used_only_where_every_rank_of_the_node_reaches_its_neighbour() {
    // thread 1 cannot be read: its node {0, 1, 2} has no zero copy; {3, 4} has
    let world = World::new(&[0, 0, 0, 1, 1], &[], vec![]);
    world.no_zero_copy.store(1 << 1, Ordering::Relaxed);
    let all = discover_all(world, WORLD);
    let zero_copy: Vec<bool> = all.iter().map(|(f, ..)| f.zero_copy).collect();
    assert_eq!(zero_copy, [false, false, false, true, true]);
    assert!(all.iter().all(|(f, t, _)| f.segment && t.shm && !t.zcopy));
    // switched off: no probe, and no segment without PCOLL_SHM
    for (var, segment) in [("PCOLL_SHM_ZCOPY", true), ("PCOLL_SHM", false)] {
        let world = World::new(&[0, 0, 1, 1], &[(var, "0")], vec![]);
        let all = discover_all(world, WORLD);
        assert!(all.iter().all(|(f, t, _)| f.segment == segment && t.shm == segment && !f.zero_copy), "{var}");
    }
}

/// Every rank's segment base address on `comm`, set up by an Allreduce
/// whose result is checked (0: no segment).
fn allreduce_and_base(world: &'static World, comm: Comm) -> Vec<usize> {
    world.run(|h| {
        let Some(me) = world.members_of(comm).iter().position(|&t| t == h.rank) else { return 0 };
        let n = world.members_of(comm).len();
        let (send, mut recv) = (super::bytes_of(&super::input(me, 300)), vec![0u8; 1200]);
        let outcome =
            super::reduce_call(h, Some(&send), &mut recv, 300, super::host::Ty::I32, super::host::Op::Sum, None, comm);
        assert_eq!(outcome, crate::driver::host::Outcome::Done(0));
        assert_eq!(super::i32s_of(&recv), super::summed(n, 300));
        let state = world.state(comm, h.rank).expect("set up");
        state.node_memory().map_or(0, |(seg, _)| seg.base() as usize)
    })
}

/// Every member of `comm` frees it (its segment is kept).
fn free_everywhere(world: &'static World, comm: Comm) {
    world.run(|h| {
        if world.members_of(comm).contains(&h.rank) {
            h.free_state(comm)
        }
    });
}

#[test]
fn a_communicator_is_set_up_at_the_call_after_those_left_to_the_host() {
    let world = World::one_node(3, &[("PCOLL_SETUP_AFTER", "2")]);
    for call in 0..3 {
        let outcomes = world.run(|h| {
            let mut buf = [h.rank as u8; 8];
            let outcome = bcast_call(h, buf.as_mut_ptr().cast(), 8, super::host::Ty::Byte, 0, WORLD);
            (outcome, world.state(WORLD, h.rank).is_some())
        });
        let want = match call {
            0 | 1 => (Forward(crate::driver::comm::NEW_COMMUNICATOR), false),
            _ => (crate::driver::host::Outcome::Done(0), true),
        };
        assert!(outcomes.iter().all(|&o| o == want), "call {call}: {outcomes:?}");
    }
    // reproducible reductions never go to the host's own algorithms
    let world = World::one_node(2, &[("PCOLL_SETUP_AFTER", "2"), ("PCOLL_REPRODUCIBLE", "1")]);
    assert!(allreduce_and_base(world, WORLD).iter().all(|&base| base != 0));
}

#[test]
fn a_freed_communicators_segment_serves_the_next_one_of_the_same_ranks_in_the_same_order() {
    let same = || CommSpec { members: vec![0, 1, 2], inter: false };
    let reversed = CommSpec { members: vec![2, 1, 0], inter: false };
    // communicators 2, 3, 4: the world's ranks; 5: reversed
    let world = World::new(&[0; 3], &[], vec![same(), same(), same(), reversed]);
    let first = allreduce_and_base(world, 2);
    assert!(first.iter().all(|&b| b == first[0] && b != 0));
    free_everywhere(world, 2);
    // the same ranks in another order: a new segment
    let other = allreduce_and_base(world, 5);
    assert!(other.iter().all(|&b| b == other[0] && b != first[0]), "{other:?} {first:?}");
    // the same ranks in the same order: the kept one, its protocol state
    // going on where the last communicator left it (results checked)
    assert_eq!(allreduce_and_base(world, 3), first);
    assert_eq!(allreduce_and_base(world, 3), first);
    // and zero copy, probed no more
    world.run(|h| assert!(world.state(3, h.rank).expect("set up").peers.is_some()));
    // a rank that still holds it (communicator 3 is alive at thread 1):
    // nobody takes it
    world.run(|h| {
        if h.rank != 1 {
            h.free_state(3)
        }
    });
    let next = allreduce_and_base(world, 4);
    assert!(next.iter().all(|&b| b == next[0] && b != first[0] && b != other[0]), "{next:?}");
    assert_eq!(world.linked_segments(), 0);
}

#[test]
fn beyond_the_budget_communicators_run_without_segments_on_every_rank_of_the_node() {
    let same = || CommSpec { members: vec![0, 1], inter: false };
    let world = World::new(&[0; 2], &[], vec![same(), same(), same()]);
    // half of 8 MiB between 2 ranks: room for one segment of the defaults
    world.shm_bytes.store(8 << 20, std::sync::atomic::Ordering::Relaxed);
    let first = allreduce_and_base(world, 2);
    assert!(first.iter().all(|&b| b != 0));
    assert_eq!(allreduce_and_base(world, 3), [0, 0], "no room left: point-to-point, correct results");
    free_everywhere(world, 2);
    assert_eq!(allreduce_and_base(world, 4), first, "the freed one, kept, serves the next");
    // a budget given: none at all fits
    let world = World::new(&[0; 2], &[("PCOLL_SHM_BUDGET", "64K")], vec![same()]);
    assert_eq!(allreduce_and_base(world, 2), [0, 0]);
}

#[test]
fn where_the_job_runs_on_one_host_the_node_is_the_communicator_itself() {
    let reversed = CommSpec { members: vec![2, 1, 0], inter: false };
    let world = World::new(&[0; 3], &[], vec![reversed]).on_one_host();
    for comm in [WORLD, 2] {
        let all = discover_all(world, comm);
        assert!(all.iter().all(|(f, t, base)| f.segment && t.shm && t.nodes == 1 && *base == all[0].2));
        world.run(|h| {
            let state = world.state(comm, h.rank).expect("set up");
            assert!(state.node_comm == state.private, "no split");
        });
        assert_eq!(allreduce_and_base(world, comm)[0], all[0].2);
    }
}

/// A communicator's protocol state admits one call at a time, whether it
/// is taken with a compare-and-swap (threads may call at once) or with a
/// load and a store (one thread calls at a time): a second taker, as two
/// threads would be, is refused until the first is done.
#[test]
fn a_communicators_call_state_admits_one_call_at_a_time_at_every_thread_level() {
    let cfg = crate::select::config::Config::default();
    for threads_at_once in [false, true] {
        let state = CallState::fresh(&cfg.shm, threads_at_once);
        let first = state.take().expect("a free state is taken");
        assert!(state.take().is_none(), "taken twice (threads at once: {threads_at_once})");
        drop(first);
        let again = state.take().expect("free again once the first call is done");
        drop(again);
    }
    let state = CallState::fresh(&cfg.shm, true);
    let threads = std::thread::scope(|scope| {
        let state = &state;
        let held = state.take().expect("a free state is taken");
        let other = scope.spawn(|| state.take().is_none()).join().expect("the other thread runs");
        drop(held);
        other
    });
    assert!(threads, "another thread takes a state while a call holds it");
}
