//! Erroneous programs on one node: counts that differ between the ranks
//! of a call, with every node algorithm forced in turn and with the
//! built-in rules (where the ranks' counts make them pick different
//! algorithms). Every call ends (a hang fails the test by its timeout),
//! the ranks that MPI would tell get an error, nothing is written past a
//! rank's buffer (canaries), and the next call is right.

use super::host::Op;
use super::host::{TestHost, Ty, World, ERR_OTHER, ERR_TRUNCATE};
use super::{bcast_call, bytes_of, gatherv_call, i32s_of, input, reduce_call, summed, WORLD};
use crate::driver::host::Outcome::Done;
use crate::driver::host::{Code, Outcome, SUCCESS};

/// Bytes after each buffer that no call may touch.
const CANARY: usize = 64;

/// A buffer of `len` bytes of `fill`, followed by the canary.
fn guarded_buffer(len: usize, fill: u8) -> Vec<u8> {
    let mut buf = vec![fill; len + CANARY];
    buf[len..].fill(0xCD);
    buf
}

fn canary_intact(buf: &[u8], len: usize) -> bool {
    buf[len..].iter().all(|&b| b == 0xCD)
}

pub(super) fn code(out: Outcome) -> Code {
    match out {
        Done(rc) => rc,
        other => panic!("pcoll handed an erroneous call to the host: {other:?}"),
    }
}

/// A valid Allreduce right after an erroneous call: the node's protocol is
/// where it should be.
pub(super) fn next_call_is_right(h: TestHost, what: &str) {
    let p = h.world.size;
    let mine = bytes_of(&input(h.rank, 7));
    let mut recv = vec![0u8; 28];
    assert_eq!(reduce_call(h, Some(&mine), &mut recv, 7, Ty::I32, Op::Sum, None, WORLD), Done(SUCCESS), "{what}");
    assert_eq!(i32s_of(&recv), summed(p, 7), "the Allreduce after {what}, rank {}", h.rank);
}

/// Element counts from one slot's bytes to several chunks of the tests'
/// 4 KiB chunks, each with its half (800: one side of a chunk, its double
/// the other, where a Gatherv owner and its root differ on going direct).
const COUNTS: [usize; 7] = [2, 12, 40, 300, 800, 3000, 20000];

/// Bcast: the readers pass half the root's count (each gets
/// MPI_ERR_TRUNCATE and the root's first bytes), then twice it (an error
/// too, MPI_ERR_OTHER); the root succeeds. Every rank passes the start
/// of one buffer, and a round of valid Bcasts from it follows each call,
/// so that at 2 ranks the messages of root 0, which takes every other
/// count, go through the node's window.
fn bcast_mismatches(world: &'static World) {
    world.run(|h| {
        let mut kept = vec![0u8; 2 * COUNTS[COUNTS.len() - 1] * 4 + CANARY];
        for (turn, count) in COUNTS.into_iter().enumerate() {
            for reader_count in [count / 2, count * 2] {
                let root = turn % world.size;
                let is_root = h.rank == root;
                let mine = if is_root { count } else { reader_count };
                let message = bytes_of(&input(root, count));
                let buf = &mut kept[..mine * 4 + CANARY];
                buf[..mine * 4].fill(0xEE);
                buf[mine * 4..].fill(0xCD);
                if is_root {
                    buf[..message.len()].copy_from_slice(&message);
                }
                let what = format!("a Bcast of {count} i32 read as {reader_count}, rank {}", h.rank);
                let rc = code(bcast_call(h, buf.as_mut_ptr().cast(), mine as i64, Ty::I32, root as i32, WORLD));
                let want = match () {
                    _ if is_root => SUCCESS,
                    _ if reader_count < count => ERR_TRUNCATE,
                    _ => ERR_OTHER,
                };
                assert_eq!(rc, want, "{what}");
                assert!(canary_intact(buf, mine * 4), "{what}: written past the buffer");
                if !is_root && reader_count < count {
                    assert_eq!(&buf[..mine * 4], &message[..mine * 4], "{what}: the root's first bytes");
                }
                next_call_is_right(h, &what);
                next_round_is_right(h, &mut kept, &what);
            }
        }
    });
}

/// Reduce and Allreduce: rank 0 passes twice the others' count. A Reduce
/// root gets an error whichever is larger (MPI_ERR_TRUNCATE where the
/// others have more); an Allreduce is refused on every rank.
fn reduction_mismatches(world: &'static World) {
    world.run(|h| {
        for count in COUNTS {
            let mine = if h.rank == 0 { count } else { count / 2 };
            let send = bytes_of(&input(h.rank, mine));
            let mut recv = guarded_buffer(mine * 4, 0xEE);
            let what = format!("an Allreduce of {count} i32 against {}, rank {}", count / 2, h.rank);
            let rc =
                code(reduce_call(h, Some(&send), &mut recv[..mine * 4], mine as i64, Ty::I32, Op::Sum, None, WORLD));
            assert_eq!(rc, if h.rank == 0 { ERR_OTHER } else { ERR_TRUNCATE }, "{what}");
            assert!(canary_intact(&recv, mine * 4), "{what}: written past the buffer");
            next_call_is_right(h, &what);
            for root in [0, world.size - 1] {
                let is_root = h.rank == root;
                let mut recv = guarded_buffer(if is_root { mine * 4 } else { 0 }, 0xEE);
                let len = recv.len() - CANARY;
                let what = format!("a Reduce of {count} i32 against {} to {root}, rank {}", count / 2, h.rank);
                let rc = code(reduce_call(
                    h,
                    Some(&send),
                    &mut recv[..len],
                    mine as i64,
                    Ty::I32,
                    Op::Sum,
                    Some(root as i32),
                    WORLD,
                ));
                if is_root {
                    assert_eq!(rc, if root == 0 { ERR_OTHER } else { ERR_TRUNCATE }, "{what}");
                }
                assert!(canary_intact(&recv, len), "{what}: written past the buffer");
                next_call_is_right(h, &what);
            }
        }
    });
}

/// Gatherv: the others send twice, then half, the count the root expects
/// of them: the root gets MPI_ERR_TRUNCATE, then an error too. Each rank
/// sends from one buffer, so that at 2 ranks a hot block may go through
/// the node's window; hot Bcasts from the owner and valid Gathervs follow.
fn gatherv_mismatches(world: &'static World) {
    let p = world.size;
    world.run(|h| {
        let largest = bytes_of(&input(h.rank, 2 * COUNTS[COUNTS.len() - 1]));
        for count in COUNTS {
            for sent in [count * 2, count / 2] {
                let root = p - 1;
                let is_root = h.rank == root;
                let counts: Vec<i32> = vec![count as i32; p];
                let displs: Vec<i32> = (0..p).map(|r| (r * count) as i32).collect();
                let mine = if is_root { count } else { sent };
                let send = &largest[..mine * 4];
                let total = if is_root { p * count * 4 } else { 0 };
                let mut recv = guarded_buffer(total, 0xEE);
                let what = format!("a Gatherv of {count} i32 a rank, {sent} sent, rank {}", h.rank);
                let rc = code(gatherv_call(
                    h,
                    Some(send),
                    mine as i64,
                    Ty::I32,
                    &mut recv[..total],
                    Some((&counts, &displs)),
                    root as i32,
                    WORLD,
                ));
                if is_root {
                    assert_eq!(rc, if sent > count { ERR_TRUNCATE } else { ERR_OTHER }, "{what}");
                }
                assert!(canary_intact(&recv, total), "{what}: written past the buffer");
                next_call_is_right(h, &what);
                next_bcasts_are_right(h, 0, &what);
                next_gathervs_are_right(h, &largest, &what);
            }
        }
    });
}

/// Valid Bcasts from `root` right after an erroneous call: three of 16,000
/// B from one buffer, so that the later ones are hot (a root that times
/// its queue waits for the readers of the window's last call).
fn next_bcasts_are_right(h: TestHost, root: usize, what: &str) {
    let message = bytes_of(&input(root, 4000));
    let mut buf = if h.rank == root { message.clone() } else { vec![0; message.len()] };
    for call in 0..3 {
        let rc = code(bcast_call(h, buf.as_mut_ptr().cast(), 4000, Ty::I32, root as i32, WORLD));
        assert_eq!(rc, SUCCESS, "Bcast {call} after {what}");
        assert_eq!(buf, message, "Bcast {call} from {root} after {what}, rank {}", h.rank);
    }
}

/// Valid Bcasts of 16,000 B from the start of `buffer`, roots 0 to p - 1
/// in turn: at 2 ranks hot messages whose roots alternate (the window's),
/// and the last one's root is not root 0.
fn next_round_is_right(h: TestHost, buffer: &mut [u8], what: &str) {
    for root in 0..h.world.size {
        let message = bytes_of(&input(root, 4000));
        let buf = &mut buffer[..message.len()];
        if h.rank == root {
            buf.copy_from_slice(&message);
        }
        let rc = code(bcast_call(h, buf.as_mut_ptr().cast(), 4000, Ty::I32, root as i32, WORLD));
        assert_eq!(rc, SUCCESS, "Bcast from {root} after {what}");
        assert_eq!(buf, &message[..], "Bcast from {root} after {what}, rank {}", h.rank);
    }
}

/// Valid Gathervs right after an erroneous one: five of 12,000 B blocks,
/// each rank's from the start of `buffer` (its `input` from the erroneous
/// call's buffer, so that its blocks stay hot), roots alternating, so that at 2 ranks
/// the last ones go through the node's window (its numbers agree on
/// both ranks however the erroneous call took it, or not).
fn next_gathervs_are_right(h: TestHost, buffer: &[u8], what: &str) {
    let (p, count) = (h.world.size, 3000);
    let send = &buffer[..count * 4];
    let counts: Vec<i32> = vec![count as i32; p];
    let displs: Vec<i32> = (0..p).map(|r| (r * count) as i32).collect();
    let want: Vec<i32> = (0..p).flat_map(|r| input(r, count)).collect();
    // The last one's owner is not the next erroneous call's (rank 0 at 2
    // ranks), which may then take the window.
    for call in 0..5 {
        let root = call % p;
        let mut recv = vec![0xEE; if h.rank == root { p * count * 4 } else { 0 }];
        let rc = code(gatherv_call(
            h,
            Some(send),
            count as i64,
            Ty::I32,
            &mut recv,
            Some((&counts, &displs)),
            root as i32,
            WORLD,
        ));
        assert_eq!(rc, SUCCESS, "Gatherv {call} after {what}");
        if h.rank == root {
            assert_eq!(i32s_of(&recv), want, "Gatherv {call} to {root} after {what}");
        }
    }
}

/// The node's settings of these tests: 4 KiB chunks and chunk areas, so
/// the larger counts take several steps (and a Gatherv's large blocks may
/// go through their owners' rings).
const NODE: [(&str, &str); 3] =
    [("PCOLL_SHM_CHUNK", "4K"), ("PCOLL_SHM_ALLREDUCE_CHUNK", "4K"), ("PCOLL_SHM_SLOTS", "8")];

pub(super) fn world(p: usize, forced: Option<(&str, &str)>) -> &'static World {
    let mut vars = NODE.to_vec();
    vars.extend(forced);
    World::one_node(p, &vars)
}

#[test]
fn mismatched_bcasts_truncate_at_the_readers_with_every_node_algorithm() {
    for p in [2, 3] {
        bcast_mismatches(world(p, None));
        for algo in ["shm_pipeline", "shm_queue", "shm_queue_zcopy", "shm_zcopy", "shm"] {
            bcast_mismatches(world(p, Some(("PCOLL_BCAST", algo))));
        }
    }
}

#[test]
fn mismatched_reductions_fail_without_writing_past_a_buffer() {
    for p in [2, 3] {
        reduction_mismatches(world(p, None));
        for algo in ["shm_flat", "shm_partition", "shm_zcopy", "shm_window"] {
            reduction_mismatches(world(p, Some(("PCOLL_ALLREDUCE", algo))));
            reduction_mismatches(world(p, Some(("PCOLL_REDUCE", algo))));
        }
    }
}

#[test]
fn mismatched_gathervs_fail_at_the_root() {
    for p in [2, 3] {
        gatherv_mismatches(world(p, None));
        for algo in ["shm", "shm_copy", "shm_zcopy"] {
            gatherv_mismatches(world(p, Some(("PCOLL_GATHERV", algo))));
        }
    }
}
