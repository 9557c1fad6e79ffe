//! Reduce, Allreduce and Bcast from the user's arguments: classify them
//! (anything pcoll does not handle, including every invalid argument, goes
//! to the host unchanged, so users see the host MPI's own behaviour), plan
//! the call, run it (under PCOLL_VERIFY, compared with the host's).

use super::classify;
use super::comm;
use super::dispatch::{execute, invalid, Invalid, Stand};
use super::host::{Code, ErrorClass, Host, Outcome, SUCCESS};
use super::pack::{pack, unpack};
use super::plan::{decide, plan};
use super::prepared::{self, Key, Prepared};
use super::runtime::Runtime;
use super::thread::PerThread;
use super::verify;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::types::Coll;
use crate::exec::NoReduction;
use std::ffi::c_void;
use std::rc::Rc;
use Outcome::{Done, Forward};

/// Allreduce (`root` None) and Reduce.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn reduction<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: H::Datatype,
    op: H::Op,
    root: Option<i32>,
    comm: H::Comm,
) -> Outcome {
    let coll = if root.is_some() { Coll::Reduce } else { Coll::Allreduce };
    let in_place = sendbuf == host.in_place();
    let key = Key { comm, count, datatype, op: Some(op), root: root.map_or(-1, i64::from), in_place };
    let prepared = match prepared::recall(host, rt, t, coll, &key) {
        Some(Ok(prepared)) => prepared,
        Some(Err(why)) => return Forward(why),
        None => match prepare_reduction(host, rt, t, key, root) {
            Ok(prepared) => prepared,
            Err(outcome) => return outcome,
        },
    };
    let desc = &prepared.call.desc;
    if let Err(bad) = reduction_buffers(desc, sendbuf, recvbuf) {
        return invalid_reduction(host, rt, t, comm, &prepared, sendbuf, bad);
    }
    let desc = &prepared.call.desc;
    // SAFETY: MPI requires sendbuf (unless in place) and, at the root or in
    // Allreduce, recvbuf to hold `count` elements of `datatype`, whose
    // extent is `unit`; they do not alias (checked).
    let (send, recv) = unsafe {
        (
            (!desc.in_place).then(|| std::slice::from_raw_parts(sendbuf.cast::<u8>(), desc.bytes)),
            if is_reduction_root(desc) {
                std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), desc.bytes)
            } else {
                &mut [][..]
            },
        )
    };
    t.ask_for_new(coll, send, is_reduction_root(desc).then_some(&*recv));
    let (state, call) = (prepared.state(), &prepared.call);
    let combine = prepared.combine.as_ref().expect("a reduction has its operator");
    Done(verify::reduction(host, rt, t, state, call, send, recv, (datatype, op, count), |send, recv| {
        execute(host, rt, t, comm, state, call, &GatherLayout::default(), send, recv, combine)
    }))
}

/// Hands a Reduce to the host: `call(sendbuf, recvbuf)`. MPICH 4.0.2
/// crashes on MPI_IN_PLACE at a non-zero root from about 2 KiB, so there
/// the root passes a copy of its data as the send buffer instead: same
/// result, valid for every host. Inline up to that case, so that a
/// forwarded Reduce costs one comparison more than the host's.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn forward_reduce<H: Host>(
    host: &H,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: H::Datatype,
    root: i32,
    comm: H::Comm,
    call: impl FnOnce(*const c_void, *mut c_void) -> Code,
) -> Code {
    if sendbuf == host.in_place() && root != 0 {
        forward_reduce_in_place(host, recvbuf, (count, datatype, root, comm), call)
    } else {
        call(sendbuf, recvbuf)
    }
}

/// [`forward_reduce`] of an in-place Reduce with a non-zero root (its
/// count, datatype, root and communicator).
#[cold]
#[inline(never)]
fn forward_reduce_in_place<H: Host>(
    host: &H,
    recvbuf: *mut c_void,
    (count, datatype, root, comm): (i64, H::Datatype, i32, H::Comm),
    call: impl FnOnce(*const c_void, *mut c_void) -> Code,
) -> Code {
    let at_root = count > 0
        && !recvbuf.is_null()
        && H::with_thread(|t| {
            classify::is_usable_type(host, t, datatype)
                && comm::shape(host, t, comm).is_some_and(|(rank, _)| rank as i32 == root)
        });
    if !at_root {
        return call(host.in_place(), recvbuf);
    }
    let ty = host.type_layout(datatype);
    let span = ((count - 1) * ty.extent as i64 + ty.true_extent as i64).max(0) as usize;
    // SAFETY: the root's receive buffer holds `count` elements, whose bytes
    // lie in [recvbuf + true_lb, recvbuf + true_lb + span).
    let data = unsafe { std::slice::from_raw_parts(recvbuf.cast::<u8>().wrapping_offset(ty.true_lb), span) };
    let copy = data.to_vec();
    call(copy.as_ptr().wrapping_offset(-ty.true_lb).cast(), recvbuf)
}

/// Whether this rank receives the result.
fn is_reduction_root(desc: &CallDesc) -> bool {
    desc.coll == Coll::Allreduce || desc.rank == desc.root
}

/// The buffer checks of a reduction, made after planning: only this rank
/// sees its buffers, and its peers run the plan whatever they are.
#[inline]
fn reduction_buffers(desc: &CallDesc, sendbuf: *const c_void, recvbuf: *mut c_void) -> Result<(), Invalid> {
    let (in_place, is_root, reduce) = (desc.in_place, is_reduction_root(desc), desc.coll == Coll::Reduce);
    if (!in_place && sendbuf.is_null()) || (is_root && recvbuf.is_null()) {
        return Err(Invalid { why: "null buffer", class: ErrorClass::Buffer });
    }
    if is_root && sendbuf == recvbuf.cast_const() {
        // Open MPI's Reduce says MPI_ERR_ARG, its Allreduce MPI_ERR_BUFFER.
        let class = if reduce { ErrorClass::AliasedAtRoot } else { ErrorClass::Buffer };
        return Err(Invalid { why: "send and receive buffers alias", class });
    }
    Ok(())
}

/// A reduction whose buffers are invalid at this rank: where its input is
/// readable (only its receive buffer is null or aliased), it runs the call
/// into scratch, so the peers get the right result; else it stands out.
#[cold]
fn invalid_reduction<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    comm: H::Comm,
    prepared: &Prepared<H>,
    sendbuf: *const c_void,
    bad: Invalid,
) -> Outcome {
    let (state, call) = (prepared.state(), &prepared.call);
    let desc = &call.desc;
    let combine = prepared.combine.as_ref().expect("a reduction has its operator");
    let stand = if !desc.in_place && !sendbuf.is_null() {
        // SAFETY: MPI requires sendbuf to hold `count` elements of the
        // datatype, `bytes` contiguous bytes.
        let send = unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), desc.bytes) };
        let recv_bytes = if is_reduction_root(desc) { desc.bytes } else { 0 };
        Stand::Ghost { send: Some(send), recv_bytes, layout: &GatherLayout::default() }
    } else {
        Stand::Out
    };
    invalid(host, rt, t, comm, state, call, bad, stand, combine)
}

/// Checks a reduction and plans it; `Err`: what the call does instead.
fn prepare_reduction<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    key: Key<H>,
    root: Option<i32>,
) -> Result<Rc<Prepared<H>>, Outcome> {
    let coll = if root.is_some() { Coll::Reduce } else { Coll::Allreduce };
    let Some((rank, size)) = comm::shape(host, t, key.comm) else { return Err(Forward("communicator")) };
    if key.count < 0 {
        return Err(Forward("negative count"));
    }
    let root = match root {
        None => 0,
        Some(r) if r >= 0 && (r as usize) < size => r as usize,
        Some(_) => return Err(Forward("invalid root")),
    };
    let op = key.op.expect("a reduction has its operator");
    let red = classify::reduction(host, t, key.datatype, op).map_err(Forward)?;
    if key.count == 0 {
        return Err(Forward("empty"));
    }
    let in_place = key.in_place;
    let is_root = coll == Coll::Allreduce || rank == root;
    if in_place && !is_root {
        return Err(Forward("MPI_IN_PLACE at a non-root rank"));
    }
    let Some(bytes) = (key.count as usize).checked_mul(red.unit) else { return Err(Forward("size overflow")) };
    let epoch = host.epoch();
    let Some(state) = comm::state_after(host, t, key.comm, rt.cfg.calls_before_setup()).map_err(Done)? else {
        return Err(Forward(comm::NEW_COMMUNICATOR));
    };
    let desc = CallDesc {
        coll,
        rank,
        size,
        root,
        bytes,
        unit: red.unit,
        commutative: red.commutative,
        in_place,
        topo: state.topo(),
    };
    let planning = plan(rt, desc.clone(), decide(rt, t, &desc, Some(bytes)))
        .map(|call| Prepared::new(state, call, Some(red.combine)));
    if !classify::is_user_op(host, op) {
        prepared::remember(rt, t, coll, key, epoch, planning.clone());
    }
    planning.map_err(Forward)
}

#[allow(clippy::too_many_arguments)]
#[inline]
pub fn bcast<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    buf: *mut c_void,
    count: i64,
    datatype: H::Datatype,
    root: i32,
    comm: H::Comm,
) -> Outcome {
    let key = Key { comm, count, datatype, op: None, root: root.into(), in_place: false };
    if let Some(planning) = prepared::recall(host, rt, t, Coll::Bcast, &key) {
        // remembered for dense predefined datatypes only
        let prepared = match planning {
            Ok(prepared) => prepared,
            Err(why) => return Forward(why),
        };
        if buf.is_null() {
            return invalid_bcast(host, rt, t, comm, &prepared);
        }
        // SAFETY: a dense buffer of `count` elements is `bytes` contiguous bytes at `buf`.
        let data = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), prepared.call.desc.bytes) };
        return Done(run_bcast(host, rt, t, comm, &prepared, data, datatype, count));
    }
    let Some((rank, size)) = comm::shape(host, t, comm) else { return Forward("communicator") };
    if count < 0 || !classify::is_usable_type(host, t, datatype) || root < 0 || root as usize >= size {
        return Forward("invalid argument");
    }
    let ty = classify::layout(host, t, datatype);
    let bytes = count as usize * ty.size;
    if bytes == 0 {
        return Forward("empty");
    }
    let root = root as usize;
    let epoch = host.epoch();
    let state = match comm::state_after(host, t, comm, rt.cfg.calls_before_setup()) {
        Ok(Some(state)) => state,
        Ok(None) => return Forward(comm::NEW_COMMUNICATOR),
        Err(rc) => return Done(rc),
    };
    let desc = CallDesc {
        coll: Coll::Bcast,
        rank,
        size,
        root,
        bytes,
        unit: 1,
        commutative: true,
        in_place: false,
        topo: state.topo(),
    };
    let planning =
        plan(rt, desc.clone(), decide(rt, t, &desc, Some(bytes))).map(|call| Prepared::new(state, call, None));
    if ty.dense && classify::is_predefined_type(host, t, datatype) {
        prepared::remember(rt, t, Coll::Bcast, key, epoch, planning.clone());
    }
    let prepared = match planning {
        Ok(prepared) => prepared,
        Err(why) => return Forward(why),
    };
    if ty.dense {
        if buf.is_null() {
            return invalid_bcast(host, rt, t, comm, &prepared);
        }
        // SAFETY: a dense buffer of `count` elements is `bytes` contiguous bytes at `buf`.
        let data = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), bytes) };
        return Done(run_bcast(host, rt, t, comm, &prepared, data, datatype, count));
    }
    let mut packed = if rank == root { pack(host, buf, count, datatype, &ty, comm) } else { vec![0u8; bytes] };
    let rc = run_bcast(host, rt, t, comm, &prepared, &mut packed, datatype, count);
    if rank != root && rc == SUCCESS {
        unpack(host, &packed, buf, count, datatype, &ty, comm);
    }
    Done(rc)
}

/// A Bcast with a null buffer (of a dense datatype) at this rank: a reader
/// receives into scratch, so the others complete; a root stands out.
#[cold]
fn invalid_bcast<H: Host>(host: &H, rt: &Runtime, t: &PerThread<H>, comm: H::Comm, prepared: &Prepared<H>) -> Outcome {
    let (state, call) = (prepared.state(), &prepared.call);
    let desc = &call.desc;
    let stand = if desc.rank == desc.root {
        Stand::Out
    } else {
        Stand::Ghost { send: None, recv_bytes: desc.bytes, layout: &GatherLayout::default() }
    };
    let bad = Invalid { why: "null buffer", class: ErrorClass::Buffer };
    invalid(host, rt, t, comm, state, call, bad, stand, &NoReduction)
}

/// Runs a planned Bcast on `data` (`count` elements of `datatype`, packed).
#[allow(clippy::too_many_arguments)]
fn run_bcast<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    comm: H::Comm,
    prepared: &Prepared<H>,
    data: &mut [u8],
    datatype: H::Datatype,
    count: i64,
) -> Code {
    t.ask_for_new(Coll::Bcast, None, Some(&*data));
    let (state, call) = (prepared.state(), &prepared.call);
    let type_size = data.len() / count as usize;
    verify::bcast(host, rt, state, call, data, (datatype, type_size, count), |data| {
        execute(host, rt, t, comm, state, call, &GatherLayout::default(), None, data, &NoReduction)
    })
}
