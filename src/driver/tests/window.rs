//! The leaders' window against the threaded host: made once, reused,
//! grown collectively when a call needs more, numbered alike at every
//! leader, moving data between the leaders, and freed in the job-wide
//! order at MPI_Finalize.

use super::host::{CommSpec, TestHost, World};
use super::WORLD;
use crate::driver::Host;
use crate::shm::segment::PAGE;
use std::sync::atomic::Ordering;

#[test]
fn the_leaders_window_is_made_once_reused_and_grown_when_a_call_needs_more() {
    // nodes {0}, {1, 2}, {3}: leaders 0, 1 and 3, in node order
    let world = World::new(&[0, 1, 1, 2], &[], vec![]).with_states(WORLD);
    let ids = world.run(|h| {
        let state = world.state(WORLD, h.rank).unwrap();
        let (leader, node) = (state.node.rank == 0, state.node.node_of[state.rank]);
        let mut leaders = state.leaders.lock().unwrap();
        let mut sizes = vec![];
        for bytes in [100, PAGE, PAGE + 1, 10, 3 * PAGE] {
            let window = leaders.window(&h, state, leader, bytes).expect("every leader makes the window");
            assert_eq!(window.is_some(), leader, "rank {}", h.rank);
            let Some(w) = window else { continue };
            sizes.push(w.local().len());
            // each leader reads the next one's node index
            w.local()[0] = node as u8;
            w.get((node + 1) % 3, 0, 1, 1);
            w.fence();
            assert_eq!(w.local()[1] as usize, (node + 1) % 3);
        }
        if leader {
            assert_eq!(sizes, [PAGE, PAGE, 2 * PAGE, 2 * PAGE, 3 * PAGE], "whole pages, grown only when needed");
        }
        let id = leaders.window_id();
        leaders.release(&h);
        assert_eq!(leaders.window_id(), None);
        id
    });
    // three windows at each of three leaders, all freed in the end
    assert_eq!(world.windows_created.load(Ordering::Relaxed), 9);
    assert_eq!((0..4).map(|r| world.freed_windows(r).len()).collect::<Vec<_>>(), [3, 3, 0, 3]);
    // numbered by the first leader (world rank 0) for all
    assert!(ids[0].is_some_and(|id| id >> 32 == 0) && ids[0] == ids[1] && ids[0] == ids[3] && ids[2].is_none());
}

#[test]
fn at_finalize_every_state_is_released_and_windows_go_in_the_job_wide_order() {
    // two nodes of one rank: both threads lead on every communicator;
    // communicator 2's windows are numbered by thread 1, the others by 0
    let reversed = CommSpec { members: vec![1, 0], inter: false };
    let same = CommSpec { members: vec![0, 1], inter: false };
    let world = World::new(&[0, 1], &[], vec![reversed, same]);
    let before = world.registry.epoch();
    let made = world.run(|h| {
        let mut made: Vec<(Option<u64>, usize)> = [2, WORLD, 3]
            .into_iter()
            .map(|comm| {
                let state = h.create_state(comm).unwrap();
                let mut leaders = state.leaders.lock().unwrap();
                let base = leaders.window(&h, state, true, 100).unwrap().unwrap().local().as_ptr() as usize;
                (leaders.window_id(), base)
            })
            .collect();
        made.sort();
        made
    });
    // SAFETY: no thread uses the states any more.
    unsafe { world.registry.release_all(&TestHost { world, rank: 0 }) };
    assert!(world.registry.epoch() > before);
    for (rank, made) in made.iter().enumerate() {
        assert_eq!(made[2].0.map(|id| id >> 32), Some(1), "communicator 2's window comes last");
        assert_eq!(world.freed_windows(rank), made.iter().map(|m| m.1).collect::<Vec<_>>(), "rank {rank}");
    }
}
