//! Erroneous programs where one rank's own arguments are invalid (its
//! buffers, a root's receive arguments) while its peers', and the
//! arguments every rank shares, are valid: every node algorithm forced in
//! turn and the built-in rules. The invalid rank gets the host's class,
//! its peers complete (with the right result where its input was valid,
//! else with an error), no call hangs, and the next call is right.

use super::host::{Op, TestHost, Ty, World, ERR_ARG, ERR_BUFFER, ERR_COUNT, ERR_OTHER, ERR_TRUNCATE, ERR_TYPE};
use super::mismatch::{code, next_call_is_right, world};
use super::{bcast_call, bytes_of, guarded, i32s_of, input, summed, WORLD};
use crate::driver::collectives::reduction;
use crate::driver::gatherv::{gatherv, GathervArgs};
use crate::driver::host::Outcome::{Done, Forward};
use crate::driver::host::{Code, Outcome, SUCCESS};
use std::ffi::c_void;

/// Element counts from one slot's bytes to several of the tests' 4 KiB chunks.
const COUNTS: [usize; 4] = [2, 40, 3000, 20000];

/// The invalid rank of each call.
fn culprit(count: usize, p: usize) -> usize {
    count % p
}

/// A reduction with raw buffers: `recvbuf` may be null or alias `sendbuf`.
fn raw_reduction(
    h: TestHost,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    root: Option<i32>,
) -> Outcome {
    guarded(|t| reduction(&h, &h.world.rt, t, sendbuf, recvbuf, count as i64, Ty::I32, Op::Sum, root, WORLD))
}

/// Reduce and Allreduce where one rank's receive buffer is null, then
/// aliases its send buffer: that rank gets MPI_ERR_BUFFER; as its input
/// is valid, the others get the right result.
fn receive_buffers(world: &'static World) {
    let p = world.size;
    world.run(|h| {
        for count in COUNTS {
            let bad = culprit(count, p);
            for (alias, root) in [(false, Some(bad)), (true, Some(bad)), (true, None), (false, None)] {
                let what = format!(
                    "{} of {count} i32, rank {bad}'s receive buffer {}, rank {}",
                    if root.is_some() { "a Reduce" } else { "an Allreduce" },
                    if alias { "aliased" } else { "null" },
                    h.rank
                );
                let send = bytes_of(&input(h.rank, count));
                let mut recv = vec![0u8; count * 4];
                let recvbuf: *mut c_void = match () {
                    _ if h.rank != bad => recv.as_mut_ptr().cast(),
                    _ if alias => send.as_ptr().cast_mut().cast(),
                    _ => std::ptr::null_mut(),
                };
                let rc = code(raw_reduction(h, send.as_ptr().cast(), recvbuf, count, root.map(|r| r as i32)));
                if h.rank == bad {
                    assert_eq!(rc, ERR_BUFFER, "{what}");
                    assert_eq!(send, bytes_of(&input(h.rank, count)), "{what}: the send buffer changed");
                } else {
                    assert_eq!(rc, SUCCESS, "{what}");
                    if root.is_none() {
                        assert_eq!(i32s_of(&recv), summed(p, count), "{what}");
                    }
                }
                next_call_is_right(h, &what);
            }
        }
    });
}

/// An Allreduce where one rank's send buffer is null: its peers on the
/// node cannot have its data and get an error too.
fn null_input(world: &'static World) {
    let p = world.size;
    world.run(|h| {
        for count in COUNTS {
            let bad = culprit(count, p);
            let what = format!("an Allreduce of {count} i32, rank {bad}'s send buffer null, rank {}", h.rank);
            let send = bytes_of(&input(h.rank, count));
            let sendbuf: *const c_void = if h.rank == bad { std::ptr::null() } else { send.as_ptr().cast() };
            let mut recv = vec![0u8; count * 4];
            let rc = code(raw_reduction(h, sendbuf, recv.as_mut_ptr().cast(), count, None));
            assert_eq!(rc, if h.rank == bad { ERR_BUFFER } else { ERR_OTHER }, "{what}");
            next_call_is_right(h, &what);
        }
    });
}

/// Bcast with a null buffer at a reader (MPI_ERR_BUFFER there, the other
/// readers get the data), then at the root (the readers get an error).
fn bcast_null_buffers(world: &'static World) {
    let p = world.size;
    world.run(|h| {
        for count in COUNTS {
            let root = culprit(count, p);
            let message = bytes_of(&input(root, count));
            for bad in [(root + 1) % p, root] {
                let what = format!("a Bcast of {count} i32 from {root}, rank {bad}'s buffer null, rank {}", h.rank);
                let mut buf = if h.rank == root { message.clone() } else { vec![0u8; count * 4] };
                let ptr: *mut c_void = if h.rank == bad { std::ptr::null_mut() } else { buf.as_mut_ptr().cast() };
                let rc = code(bcast_call(h, ptr, count as i64, Ty::I32, root as i32, WORLD));
                let want = match () {
                    _ if h.rank == bad => ERR_BUFFER,
                    _ if bad == root => ERR_OTHER,
                    _ => SUCCESS,
                };
                assert_eq!(rc, want, "{what}");
                if rc == SUCCESS {
                    assert_eq!(buf, message, "{what}");
                }
                next_call_is_right(h, &what);
            }
        }
    });
}

/// Gatherv with invalid arguments at the root (a negative count, null
/// arrays, its own block larger than its receive block) or, where
/// `senders` (on a node), at a sender (a negative count): the invalid rank
/// gets the host's class, the root an error in any case.
fn gatherv_invalid(world: &'static World, senders: bool) {
    let p = world.size;
    world.run(|h| {
        for count in COUNTS {
            let root = culprit(count, p);
            let sender = (root + 1) % p;
            let cases: [(&str, usize, Code); 6] = [
                ("a negative recvcount", root, ERR_COUNT),
                ("null recvcounts", root, ERR_ARG),
                ("a receive block smaller than its own", root, ERR_TRUNCATE),
                ("an uncommitted receive type", root, ERR_TYPE),
                ("a negative sendcount", sender, ERR_COUNT),
                ("an uncommitted send type", sender, ERR_TYPE),
            ];
            for (case, bad, class) in cases.into_iter().filter(|c| senders || c.1 == root) {
                let what = format!("a Gatherv of {count} i32 to {root}, {case} at rank {bad}, rank {}", h.rank);
                let mut counts: Vec<i32> = vec![count as i32; p];
                let displs: Vec<i32> = (0..p).map(|r| (r * count) as i32).collect();
                let mut sendcount = count as i64;
                match case {
                    "a negative recvcount" => counts[sender] = -1,
                    "a receive block smaller than its own" => counts[root] = count as i32 / 2,
                    "a negative sendcount" if h.rank == bad => sendcount = -1,
                    _ => {}
                }
                let send = bytes_of(&input(h.rank, count));
                let mut recv = vec![0u8; if h.rank == root { p * count * 4 } else { 0 }];
                let uncommitted = |side| if case.ends_with(side) && h.rank == bad { Ty::Uncommitted } else { Ty::I32 };
                let null_arrays = case == "null recvcounts";
                let args = GathervArgs {
                    sendbuf: send.as_ptr().cast(),
                    sendcount,
                    sendtype: uncommitted("send type"),
                    recvbuf: recv.as_mut_ptr().cast(),
                    recvcounts: if null_arrays { std::ptr::null() } else { counts.as_ptr() },
                    displs: if null_arrays { std::ptr::null() } else { displs.as_ptr() },
                    recvtype: uncommitted("receive type"),
                    root: root as i32,
                    comm: WORLD,
                };
                let rc = code(guarded(|t| gatherv(&h, &h.world.rt, t, args)));
                if h.rank == bad {
                    assert_eq!(rc, class, "{what}");
                } else if h.rank == root {
                    assert_ne!(rc, SUCCESS, "{what}");
                } else {
                    assert!([SUCCESS, ERR_OTHER, ERR_TRUNCATE].contains(&rc), "{what}: {rc}");
                }
                next_call_is_right(h, &what);
            }
        }
    });
}

#[test]
fn invalid_receive_buffers_of_reductions_fail_at_their_rank_only() {
    for p in [2, 3] {
        receive_buffers(world(p, None));
        for algo in ["shm_flat", "shm_partition", "shm_zcopy"] {
            receive_buffers(world(p, Some(("PCOLL_ALLREDUCE", algo))));
            receive_buffers(world(p, Some(("PCOLL_REDUCE", algo))));
        }
    }
}

/// Every rank passes the same invalid buffers (a NULL Bcast buffer, an
/// aliased Allreduce): on a node every rank gets the class; where the plan
/// is a schedule (`on_node` false) every rank hands the call to the host,
/// which reports it.
fn every_rank_invalid(world: &'static World, on_node: bool) {
    world.run(|h| {
        for count in COUNTS {
            let what = format!("a Bcast of {count} i32, every buffer NULL, rank {}", h.rank);
            let out = bcast_call(h, std::ptr::null_mut(), count as i64, Ty::I32, 0, WORLD);
            assert_eq!(out, if on_node { Done(ERR_BUFFER) } else { Forward("null buffer") }, "{what}");
            next_call_is_right(h, &what);
            let what = format!("an Allreduce of {count} i32, every rank aliased, rank {}", h.rank);
            let mut buf = bytes_of(&input(h.rank, count));
            let p = buf.as_mut_ptr().cast::<c_void>();
            let out = raw_reduction(h, p.cast_const(), p, count, None);
            let alias = Forward("send and receive buffers alias");
            assert_eq!(out, if on_node { Done(ERR_BUFFER) } else { alias }, "{what}");
            next_call_is_right(h, &what);
        }
    });
}

#[test]
fn invalid_buffers_at_every_rank_fail_alike() {
    for p in [2, 3] {
        every_rank_invalid(world(p, None), true);
        for (coll, algo) in [("PCOLL_BCAST", "shm_zcopy"), ("PCOLL_ALLREDUCE", "shm_zcopy")] {
            every_rank_invalid(world(p, Some((coll, algo))), true);
        }
        // schedules over the transport: between pretend nodes
        every_rank_invalid(World::new(&(0..p).collect::<Vec<_>>(), &[("PCOLL_SETUP_AFTER", "0")], vec![]), false);
    }
}

#[test]
fn a_null_send_buffer_fails_the_allreduce_on_the_node() {
    for p in [2, 3] {
        null_input(world(p, None));
        for algo in ["shm_flat", "shm_partition", "shm_zcopy"] {
            null_input(world(p, Some(("PCOLL_ALLREDUCE", algo))));
        }
    }
}

#[test]
fn null_bcast_buffers_fail_without_stopping_the_others() {
    for p in [2, 3] {
        bcast_null_buffers(world(p, None));
        for algo in ["shm_pipeline", "shm_queue", "shm_zcopy", "shm"] {
            bcast_null_buffers(world(p, Some(("PCOLL_BCAST", algo))));
        }
    }
}

#[test]
fn invalid_gatherv_arguments_fail_without_a_hang() {
    for p in [2, 3] {
        gatherv_invalid(world(p, None), true);
        for algo in ["shm", "shm_copy", "shm_zcopy"] {
            gatherv_invalid(world(p, Some(("PCOLL_GATHERV", algo))), true);
        }
        // the root decides with the layout and broadcasts it (a tree)
        gatherv_invalid(world(p, Some(("PCOLL_GATHERV", "binomial"))), false);
    }
}
