//! The leaders' window against the threaded host: made once, reused,
//! grown collectively when a call needs more, numbered alike at every
//! leader, and moving data between the leaders.

use super::host::World;
use super::WORLD;
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
            let window = leaders.window(&h, state, leader, bytes);
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
    assert_eq!(world.windows_freed.load(Ordering::Relaxed), 9);
    // numbered by the first leader (world rank 0) for all
    assert!(ids[0].is_some_and(|id| id >> 32 == 0) && ids[0] == ids[1] && ids[0] == ids[3] && ids[2].is_none());
}
