//! PCOLL_VERIFY: every call pcoll runs is run again by the host MPI's own
//! collective on copies of its inputs, and the results are compared
//! ([`crate::exec::verify`]: exact, but floating-point sums and products
//! within the rounding of another combination order).
//!
//! The host's collective runs on pcoll's private duplicate of the
//! communicator, right after pcoll's algorithm, on every rank in the same
//! order: the user's communicator never sees it, and on the duplicate
//! collectives cannot match pcoll's point-to-point traffic. Inputs are
//! copied before pcoll runs (MPI_IN_PLACE overwrites them); results are
//! compared where MPI defines them: every rank of an Allreduce and a
//! Bcast, the root of a Reduce and a Gatherv. The first mismatch of each
//! rank is reported on stderr with the collective, communicator size,
//! count, datatype, rank and element; later ones are counted. With
//! PCOLL_VERIFY=abort the job stops at the first. pcoll's result is what
//! the program gets either way.

use super::classify;
use super::comm::CommState;
use super::host::{Code, Host, OpKind, Repr, TypeLayout, SUCCESS};
use super::plan::Planned;
use super::runtime::{say, Runtime};
use super::thread::PerThread;
use crate::core::call::GatherLayout;
use crate::core::types::{Coll, Elem, ReduceOp, TypeClass};
use crate::exec::verify::{Compare, FloatFmt, FloatOp, Mismatch};
use crate::select::config::VerifyMode;
use std::sync::atomic::{AtomicU64, Ordering};

/// Calls compared, and of them those that differed, on this rank; calls
/// that could not be compared (user-defined operators on floating point,
/// padded types, a failed or too large host call).
static CHECKED: AtomicU64 = AtomicU64::new(0);
static DIFFERED: AtomicU64 = AtomicU64::new(0);
static UNCOMPARED: AtomicU64 = AtomicU64::new(0);

/// (calls compared, calls that differed, calls not compared) on this rank so far.
pub fn totals() -> [u64; 3] {
    [CHECKED.load(Ordering::Relaxed), DIFFERED.load(Ordering::Relaxed), UNCOMPARED.load(Ordering::Relaxed)]
}

/// Counts a call that is not compared.
fn not_compared() {
    UNCOMPARED.fetch_add(1, Ordering::Relaxed);
}

/// Largest element or byte count one host call takes (an int).
const MAX_COUNT: usize = i32::MAX as usize;

/// A host collective that failed: say so (the comparison is skipped).
fn host_failed(coll: Coll, rc: Code) {
    not_compared();
    log::warn!("PCOLL_VERIFY: the host MPI's {coll} failed (error {rc}); this call is not compared");
}

fn op_name(kind: OpKind) -> &'static str {
    match kind {
        OpKind::Predefined(op) => match op {
            ReduceOp::Max => "MPI_MAX",
            ReduceOp::Min => "MPI_MIN",
            ReduceOp::Sum => "MPI_SUM",
            ReduceOp::Prod => "MPI_PROD",
            ReduceOp::Land => "MPI_LAND",
            ReduceOp::Band => "MPI_BAND",
            ReduceOp::Lor => "MPI_LOR",
            ReduceOp::Bor => "MPI_BOR",
            ReduceOp::Lxor => "MPI_LXOR",
            ReduceOp::Bxor => "MPI_BXOR",
            ReduceOp::MinLoc => "MPI_MINLOC",
            ReduceOp::MaxLoc => "MPI_MAXLOC",
        },
        OpKind::User | OpKind::Other => "a user-defined operator",
    }
}

/// How the elements of a reduction compare: `class` and `repr` of its
/// (predefined) datatype, the operator, the datatype's layout.
fn comparison(class: Option<TypeClass>, repr: Repr, op: OpKind, ty: &TypeLayout) -> Compare {
    let whole = || Compare::Exact(vec![(0, ty.size)]);
    let floating = matches!(class, Some(TypeClass::Floating | TypeClass::Complex));
    if !floating {
        // Data without padding compares whole; the MINLOC/MAXLOC pairs
        // pcoll knows compare value and index, not the padding.
        return match repr {
            Repr::Elem(Elem::F64I32 | Elem::I64I32) => Compare::Exact(vec![(0, 12)]),
            Repr::Elem(Elem::I16I32) => Compare::Exact(vec![(0, 2), (4, 4)]),
            _ if ty.size as isize == ty.extent => whole(),
            _ => Compare::Skip,
        };
    }
    let op = match op {
        OpKind::Predefined(ReduceOp::Max | ReduceOp::Min) => FloatOp::Pick,
        OpKind::Predefined(ReduceOp::Sum) => FloatOp::Sum,
        OpKind::Predefined(ReduceOp::Prod) => FloatOp::Prod,
        _ => return Compare::Skip,
    };
    let (fmt, parts, stride) = match repr {
        Repr::Elem(Elem::F32) => (FloatFmt::F32, 1, 4),
        Repr::Elem(Elem::F64) => (FloatFmt::F64, 1, 8),
        Repr::Elem(Elem::C32) => (FloatFmt::F32, 2, 4),
        Repr::Elem(Elem::C64) => (FloatFmt::F64, 2, 8),
        Repr::F80 => (FloatFmt::F80, 1, 16),
        Repr::C80 => (FloatFmt::F80, 2, 16),
        _ => return Compare::Skip,
    };
    Compare::Float { fmt, parts, stride, op }
}

/// Counts a compared call and reports its mismatch, if any: in full for
/// the first one of this rank; PCOLL_VERIFY=abort stops the job.
fn conclude<H: Host>(
    host: &H,
    rt: &Runtime,
    call: &Planned,
    what: impl FnOnce() -> String,
    mismatch: Option<Mismatch>,
) {
    CHECKED.fetch_add(1, Ordering::Relaxed);
    let Some(m) = mismatch else { return };
    if DIFFERED.fetch_add(1, Ordering::Relaxed) == 0 {
        let d = &call.desc;
        say(&format!(
            "pcoll: PCOLL_VERIFY: mismatch in {coll}: comm_size={size} {what} rank={rank} (world rank {world}) \
             element={index}: pcoll gave {got}, the host MPI {want}; algorithm {algo}{params:?} ({reason}); \
             further mismatches on this rank are counted, not shown\n",
            coll = d.coll,
            size = d.size,
            what = what(),
            rank = d.rank,
            world = host.world_rank(),
            index = m.index,
            got = m.got,
            want = m.want,
            algo = call.algo.name,
            params = &call.params[..],
            reason = call.reason,
        ));
    }
    if rt.cfg.verify == Some(VerifyMode::Abort) {
        // the documented response to a mismatch in this mode
        host.abort("pcoll: PCOLL_VERIFY=abort: aborting the job\n");
    }
}

/// The host's reduction of `input` into `out` (empty at a Reduce's
/// non-root ranks), in runs of at most `MAX_COUNT` elements.
fn host_reduce<H: Host>(
    host: &H,
    state: &CommState<H>,
    call: &Planned,
    input: &[u8],
    out: &mut [u8],
    datatype: H::Datatype,
    op: H::Op,
) -> Result<(), Code> {
    let d = &call.desc;
    let run = MAX_COUNT * d.unit;
    let root = (d.coll == Coll::Reduce).then_some(d.root);
    for (k, chunk) in input.chunks(run).enumerate() {
        let n = chunk.len() / d.unit;
        let to = out.get_mut(k * run..).unwrap_or(&mut []);
        host.reduce(state.private, root, chunk, to, n, datatype, op)?;
    }
    Ok(())
}

/// Runs a Reduce or Allreduce (`run`, pcoll's) and, under PCOLL_VERIFY,
/// the host's on copies, and compares.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn reduction<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    state: &CommState<H>,
    call: &Planned,
    send: Option<&[u8]>,
    recv: &mut [u8],
    (datatype, op, count): (H::Datatype, H::Op, i64),
    run: impl FnOnce(Option<&[u8]>, &mut [u8]) -> Code,
) -> Code {
    if rt.cfg.verify.is_none() {
        return run(send, recv);
    }
    verified_reduction(host, rt, t, state, call, send, recv, (datatype, op, count), run)
}

/// [`reduction`] under PCOLL_VERIFY; out of line, so that the code of a
/// call without it stays compact.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn verified_reduction<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    state: &CommState<H>,
    call: &Planned,
    send: Option<&[u8]>,
    recv: &mut [u8],
    (datatype, op, count): (H::Datatype, H::Op, i64),
    run: impl FnOnce(Option<&[u8]>, &mut [u8]) -> Code,
) -> Code {
    let input = send.unwrap_or(&*recv).to_vec();
    let rc = run(send, recv);
    if rc != SUCCESS {
        return rc;
    }
    let d = &call.desc;
    let ty = classify::layout(host, t, datatype);
    let (class, repr) = classify::predefined(host, t, datatype).unwrap_or((None, Repr::Unknown));
    let compare = comparison(class, repr, host.op_kind(op), &ty);
    if matches!(compare, Compare::Skip) {
        not_compared();
        return rc;
    }
    let mut reference = vec![0u8; recv.len()];
    let mut magnitude = compare.needs_magnitude().then(|| vec![0u8; recv.len()]);
    let mut outcome = host_reduce(host, state, call, &input, &mut reference, datatype, op);
    if let (Some(m), Ok(())) = (&mut magnitude, outcome) {
        let mut abs = input;
        compare.make_absolute(&mut abs, d.unit);
        outcome = host_reduce(host, state, call, &abs, m, datatype, host.op_sum());
    }
    if let Err(e) = outcome {
        host_failed(d.coll, e);
    } else if d.coll == Coll::Allreduce || d.is_root() {
        let mismatch = compare.first_mismatch(d.unit, d.size, recv, &reference, magnitude.as_deref());
        let what = || format!("count={count} datatype={} op={}", host.type_name(datatype), op_name(host.op_kind(op)));
        conclude(host, rt, call, what, mismatch);
    }
    rc
}

/// Runs a Bcast of `data` (the signature bytes of `count` elements of
/// `datatype`, `size` bytes each) and, under PCOLL_VERIFY, the host's from
/// a copy of the root's, and compares.
#[inline]
pub fn bcast<H: Host>(
    host: &H,
    rt: &Runtime,
    state: &CommState<H>,
    call: &Planned,
    data: &mut [u8],
    (datatype, size, count): (H::Datatype, usize, i64),
    run: impl FnOnce(&mut [u8]) -> Code,
) -> Code {
    if rt.cfg.verify.is_none() {
        return run(data);
    }
    verified_bcast(host, rt, state, call, data, (datatype, size, count), run)
}

/// [`bcast`] under PCOLL_VERIFY (out of line, as [`verified_reduction`]).
#[cold]
#[inline(never)]
fn verified_bcast<H: Host>(
    host: &H,
    rt: &Runtime,
    state: &CommState<H>,
    call: &Planned,
    data: &mut [u8],
    (datatype, size, count): (H::Datatype, usize, i64),
    run: impl FnOnce(&mut [u8]) -> Code,
) -> Code {
    let d = &call.desc;
    let mut reference = if d.is_root() { data.to_vec() } else { vec![0u8; data.len()] };
    let rc = run(data);
    if rc != SUCCESS {
        return rc;
    }
    for chunk in reference.chunks_mut(MAX_COUNT) {
        if let Err(e) = host.bcast_bytes(state.private, chunk, d.root) {
            host_failed(d.coll, e);
            return rc;
        }
    }
    if !d.is_root() {
        let mismatch = Compare::Exact(vec![(0, size)]).first_mismatch(size, d.size, data, &reference, None);
        let what = || format!("count={count} datatype={} root={}", host.type_name(datatype), d.root);
        conclude(host, rt, call, what, mismatch);
    }
    rc
}

/// What the root of a Gatherv compares: its receive area as pcoll fills
/// it, the byte layout of the blocks in it, the receive type and the bytes
/// of one of its elements.
pub struct GatherRoot<'a, H: Host> {
    pub recv: &'a mut [u8],
    pub layout: &'a GatherLayout,
    pub recvtype: H::Datatype,
    pub size: usize,
}

/// Runs a Gatherv (`run`, pcoll's, given the root's receive area, empty
/// elsewhere) and, under PCOLL_VERIFY, the host's with the same blocks as
/// bytes, and compares at the root.
#[inline]
pub fn gatherv<H: Host>(
    host: &H,
    rt: &Runtime,
    state: &CommState<H>,
    call: &Planned,
    send: Option<&[u8]>,
    root_side: Option<GatherRoot<'_, H>>,
    run: impl FnOnce(&mut [u8]) -> Code,
) -> Code {
    if rt.cfg.verify.is_none() {
        return run(root_side.map_or(&mut [], |r| r.recv));
    }
    verified_gatherv(host, rt, state, call, send, root_side, run)
}

/// [`gatherv`] under PCOLL_VERIFY (out of line, as [`verified_reduction`]).
#[cold]
#[inline(never)]
fn verified_gatherv<H: Host>(
    host: &H,
    rt: &Runtime,
    state: &CommState<H>,
    call: &Planned,
    send: Option<&[u8]>,
    root_side: Option<GatherRoot<'_, H>>,
    run: impl FnOnce(&mut [u8]) -> Code,
) -> Code {
    let Some(mut at_root) = root_side else {
        let rc = run(&mut []);
        if rc == SUCCESS {
            host_gatherv(host, state, call, send.unwrap_or(&[]), None);
        }
        return rc;
    };
    // Under MPI_IN_PLACE the root's block is already in place: the host
    // gets a copy of it as the root's send buffer.
    let own = match send {
        Some(block) => block.to_vec(),
        None => {
            let (off, len) = at_root.layout.blocks[call.desc.rank];
            at_root.recv[off..off + len].to_vec()
        }
    };
    let rc = run(at_root.recv);
    if rc == SUCCESS {
        if let Some(reference) = host_gatherv(host, state, call, &own, Some(&at_root)) {
            compare_blocks(host, rt, call, &mut at_root, &reference);
        }
    }
    rc
}

/// The host's Gatherv of every rank's bytes; at the root, its receive
/// area. The root first says whether the layout fits int counts and
/// displacements: only it knows the layout, and every rank must take part
/// or none.
fn host_gatherv<H: Host>(
    host: &H,
    state: &CommState<H>,
    call: &Planned,
    send: &[u8],
    root: Option<&GatherRoot<'_, H>>,
) -> Option<Vec<u8>> {
    let d = &call.desc;
    let fits = |v: usize| v <= MAX_COUNT;
    let mut ok = [root.is_none_or(|r| r.layout.blocks.iter().all(|&(o, l)| fits(o) && fits(l))) as u64];
    let said = host.bcast_words(state.private, &mut ok, d.root);
    if said.is_err() || ok[0] == 0 || !fits(send.len()) {
        if root.is_some() {
            not_compared(); // counted where the comparison would be, like compared calls
        }
        log::warn!("PCOLL_VERIFY: a Gatherv beyond int counts or displacements is not compared");
        return None;
    }
    let blocks = root.map_or(&[][..], |r| &r.layout.blocks[..]);
    let mut reference = vec![0u8; root.map_or(0, |r| r.recv.len())];
    match host.gatherv_bytes(state.private, send, &mut reference, blocks, d.root) {
        Ok(()) => root.map(|_| reference),
        Err(e) => {
            host_failed(d.coll, e);
            None
        }
    }
}

/// Compares the blocks of the root's receive area; the report names the
/// block's sender and the element in it.
fn compare_blocks<H: Host>(host: &H, rt: &Runtime, call: &Planned, root: &mut GatherRoot<'_, H>, reference: &[u8]) {
    let exact = Compare::Exact(vec![(0, root.size)]);
    let differs = root.layout.blocks.iter().enumerate().find_map(|(r, &(off, len))| {
        let span = off..off + len;
        exact
            .first_mismatch(root.size, call.desc.size, &root.recv[span.clone()], &reference[span], None)
            .map(|m| (r, m))
    });
    let Some((from, m)) = differs else { return conclude(host, rt, call, String::new, None) };
    let count = root.layout.blocks[from].1 / root.size;
    let what = || format!("block of rank {from}: count={count} datatype={}", host.type_name(root.recvtype));
    conclude(host, rt, call, what, Some(m));
}
