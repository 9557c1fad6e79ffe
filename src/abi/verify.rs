//! PCOLL_VERIFY: every call pcoll runs is run again by the host MPI's own
//! collective (PMPI_*) on copies of its inputs, and the results are
//! compared ([`crate::exec::verify`]: exact, but floating-point sums and
//! products within the rounding of another combination order).
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

use super::entry::Planned;
use super::handles::{self, TypeLayout};
use super::runtime::{self, Runtime};
use super::shim::{self, pcoll_class as class, pcoll_op as opc, pcoll_repr as repr};
use super::transport::check;
use crate::core::types::Coll;
use crate::exec::verify::{Compare, FloatFmt, FloatOp, Mismatch};
use crate::select::config::VerifyMode;
use mpi_sys::*;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// Calls compared, and of them those that differed, on this rank; calls
/// that could not be compared (user-defined operators on floating point,
/// padded types, a failed or too large host call).
static CHECKED: AtomicU64 = AtomicU64::new(0);
static DIFFERED: AtomicU64 = AtomicU64::new(0);
static UNCOMPARED: AtomicU64 = AtomicU64::new(0);

/// (calls compared, calls that differed, calls not compared) on this rank so far.
pub(super) fn totals() -> [u64; 3] {
    [CHECKED.load(Ordering::Relaxed), DIFFERED.load(Ordering::Relaxed), UNCOMPARED.load(Ordering::Relaxed)]
}

/// Counts a call that is not compared.
fn not_compared() {
    UNCOMPARED.fetch_add(1, Ordering::Relaxed);
}

/// Largest element or byte count one host call takes (an int).
const MAX_COUNT: usize = c_int::MAX as usize;

/// A host collective that failed: say so (the comparison is skipped).
fn host_failed(coll: Coll, rc: c_int) {
    not_compared();
    log::warn!("PCOLL_VERIFY: the host MPI's {coll} failed (error {rc}); this call is not compared");
}

/// MPI_Type_get_name of a datatype.
fn type_name(datatype: MPI_Datatype) -> String {
    let mut buf = vec![0 as c_char; MPI_MAX_OBJECT_NAME as usize + 1];
    let mut len = 0;
    // SAFETY: `buf` holds MPI_MAX_OBJECT_NAME characters and a terminator.
    unsafe { PMPI_Type_get_name(datatype, buf.as_mut_ptr(), &mut len) };
    let name: Vec<u8> = buf[..len.max(0) as usize].iter().map(|&c| c as u8).collect();
    match String::from_utf8_lossy(&name).trim_end_matches('\0') {
        "" => "(unnamed datatype)".to_string(),
        name => name.to_string(),
    }
}

fn op_name(op: MPI_Op) -> &'static str {
    // SAFETY: plain handle comparison in the shim.
    match unsafe { shim::pcoll_op_code(op) } as opc::Type {
        opc::PCOLL_OP_MAX => "MPI_MAX",
        opc::PCOLL_OP_MIN => "MPI_MIN",
        opc::PCOLL_OP_SUM => "MPI_SUM",
        opc::PCOLL_OP_PROD => "MPI_PROD",
        opc::PCOLL_OP_LAND => "MPI_LAND",
        opc::PCOLL_OP_BAND => "MPI_BAND",
        opc::PCOLL_OP_LOR => "MPI_LOR",
        opc::PCOLL_OP_BOR => "MPI_BOR",
        opc::PCOLL_OP_LXOR => "MPI_LXOR",
        opc::PCOLL_OP_BXOR => "MPI_BXOR",
        opc::PCOLL_OP_MINLOC => "MPI_MINLOC",
        opc::PCOLL_OP_MAXLOC => "MPI_MAXLOC",
        _ => "a user-defined operator",
    }
}

/// How the elements of a reduction of `datatype` with `op` compare.
fn comparison(datatype: MPI_Datatype, op: MPI_Op, ty: &TypeLayout) -> Compare {
    let (cls, rep) = handles::classify(datatype);
    // SAFETY: plain handle comparison in the shim.
    let code = unsafe { shim::pcoll_op_code(op) } as opc::Type;
    let whole = || Compare::Exact(vec![(0, ty.size)]);
    let floating = matches!(cls, class::PCOLL_CLASS_FLOATING | class::PCOLL_CLASS_COMPLEX);
    if !floating {
        // Data without padding compares whole; the MINLOC/MAXLOC pairs
        // pcoll knows compare value and index, not the padding.
        return match rep {
            repr::PCOLL_REPR_F64_I32 | repr::PCOLL_REPR_I64_I32 => Compare::Exact(vec![(0, 12)]),
            repr::PCOLL_REPR_I16_I32 => Compare::Exact(vec![(0, 2), (4, 4)]),
            _ if ty.size as isize == ty.extent => whole(),
            _ => Compare::Skip,
        };
    }
    let op = match code {
        opc::PCOLL_OP_MAX | opc::PCOLL_OP_MIN => FloatOp::Pick,
        opc::PCOLL_OP_SUM => FloatOp::Sum,
        opc::PCOLL_OP_PROD => FloatOp::Prod,
        _ => return Compare::Skip,
    };
    let (fmt, parts, stride) = match rep {
        repr::PCOLL_REPR_F32 => (FloatFmt::F32, 1, 4),
        repr::PCOLL_REPR_F64 => (FloatFmt::F64, 1, 8),
        repr::PCOLL_REPR_C32 => (FloatFmt::F32, 2, 4),
        repr::PCOLL_REPR_C64 => (FloatFmt::F64, 2, 8),
        repr::PCOLL_REPR_F80 => (FloatFmt::F80, 1, 16),
        repr::PCOLL_REPR_C80 => (FloatFmt::F80, 2, 16),
        _ => return Compare::Skip,
    };
    Compare::Float { fmt, parts, stride, op }
}

/// Counts a compared call and reports its mismatch, if any: in full for
/// the first one of this rank; PCOLL_VERIFY=abort stops the job.
fn conclude(rt: &Runtime, call: &Planned, what: impl FnOnce() -> String, mismatch: Option<Mismatch>) {
    CHECKED.fetch_add(1, Ordering::Relaxed);
    let Some(m) = mismatch else { return };
    if DIFFERED.fetch_add(1, Ordering::Relaxed) == 0 {
        let d = &call.desc;
        let mut world = 0;
        // SAFETY: reads this process's rank in MPI_COMM_WORLD into a local.
        unsafe { PMPI_Comm_rank(RSMPI_COMM_WORLD, &mut world) };
        runtime::say(&format!(
            "pcoll: PCOLL_VERIFY: mismatch in {coll}: comm_size={size} {what} rank={rank} (world rank {world}) \
             element={index}: pcoll gave {got}, the host MPI {want}; algorithm {algo}{params:?} ({reason}); \
             further mismatches on this rank are counted, not shown\n",
            coll = d.coll,
            size = d.size,
            what = what(),
            rank = d.rank,
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
        runtime::abort_job("pcoll: PCOLL_VERIFY=abort: aborting the job\n");
    }
}

/// The host's reduction of `input` into `out` (empty at a Reduce's
/// non-root ranks), in runs of at most `MAX_COUNT` elements.
fn host_reduce(
    call: &Planned,
    input: &[u8],
    out: &mut [u8],
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> Result<(), c_int> {
    let d = &call.desc;
    let run = MAX_COUNT * d.unit;
    for (k, chunk) in input.chunks(run).enumerate() {
        let n = (chunk.len() / d.unit) as c_int;
        let to = out.get_mut(k * run..).map_or(std::ptr::null_mut(), |o| o.as_mut_ptr()).cast::<c_void>();
        // SAFETY: `chunk` holds n elements of `datatype`; `to` has room for
        // as many where the result is defined (every rank of an
        // Allreduce, the root of a Reduce), and is ignored elsewhere.
        check(unsafe {
            match d.coll {
                Coll::Allreduce => PMPI_Allreduce(chunk.as_ptr().cast(), to, n, datatype, op, comm),
                _ => PMPI_Reduce(chunk.as_ptr().cast(), to, n, datatype, op, d.root as c_int, comm),
            }
        })?;
    }
    Ok(())
}

/// Runs a Reduce or Allreduce (`run`, pcoll's) and, under PCOLL_VERIFY,
/// the host's on copies, and compares.
#[allow(clippy::too_many_arguments)]
pub(super) fn reduction(
    rt: &Runtime,
    comm: MPI_Comm,
    call: &Planned,
    send: Option<&[u8]>,
    recv: &mut [u8],
    (datatype, op, count): (MPI_Datatype, MPI_Op, i64),
    run: impl FnOnce(Option<&[u8]>, &mut [u8]) -> c_int,
) -> c_int {
    if rt.cfg.verify.is_none() {
        return run(send, recv);
    }
    verified_reduction(rt, comm, call, send, recv, (datatype, op, count), run)
}

/// [`reduction`] under PCOLL_VERIFY; out of line, so that the code of a
/// call without it stays compact.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn verified_reduction(
    rt: &Runtime,
    comm: MPI_Comm,
    call: &Planned,
    send: Option<&[u8]>,
    recv: &mut [u8],
    (datatype, op, count): (MPI_Datatype, MPI_Op, i64),
    run: impl FnOnce(Option<&[u8]>, &mut [u8]) -> c_int,
) -> c_int {
    let input = send.unwrap_or(&*recv).to_vec();
    let rc = run(send, recv);
    if rc != MPI_SUCCESS as c_int {
        return rc;
    }
    let d = &call.desc;
    let ty = handles::layout(datatype);
    let compare = comparison(datatype, op, &ty);
    if matches!(compare, Compare::Skip) {
        not_compared();
        return rc;
    }
    let mut host = vec![0u8; recv.len()];
    let mut magnitude = compare.needs_magnitude().then(|| vec![0u8; recv.len()]);
    let mut outcome = host_reduce(call, &input, &mut host, datatype, op, comm);
    if let (Some(m), Ok(())) = (&mut magnitude, outcome) {
        let mut abs = input;
        compare.make_absolute(&mut abs, d.unit);
        // SAFETY: reads the MPI_SUM constant.
        outcome = host_reduce(call, &abs, m, datatype, unsafe { RSMPI_SUM }, comm);
    }
    if let Err(e) = outcome {
        host_failed(d.coll, e);
    } else if d.coll == Coll::Allreduce || d.is_root() {
        let mismatch = compare.first_mismatch(d.unit, d.size, recv, &host, magnitude.as_deref());
        let what = || format!("count={count} datatype={} op={}", type_name(datatype), op_name(op));
        conclude(rt, call, what, mismatch);
    }
    rc
}

/// Runs a Bcast of `data` (the signature bytes of `count` elements of
/// `datatype`, `size` bytes each) and, under PCOLL_VERIFY, the host's from
/// a copy of the root's, and compares.
pub(super) fn bcast(
    rt: &Runtime,
    comm: MPI_Comm,
    call: &Planned,
    data: &mut [u8],
    (datatype, size, count): (MPI_Datatype, usize, i64),
    run: impl FnOnce(&mut [u8]) -> c_int,
) -> c_int {
    if rt.cfg.verify.is_none() {
        return run(data);
    }
    verified_bcast(rt, comm, call, data, (datatype, size, count), run)
}

/// [`bcast`] under PCOLL_VERIFY (out of line, as [`verified_reduction`]).
#[cold]
#[inline(never)]
fn verified_bcast(
    rt: &Runtime,
    comm: MPI_Comm,
    call: &Planned,
    data: &mut [u8],
    (datatype, size, count): (MPI_Datatype, usize, i64),
    run: impl FnOnce(&mut [u8]) -> c_int,
) -> c_int {
    let d = &call.desc;
    let mut host = if d.is_root() { data.to_vec() } else { vec![0u8; data.len()] };
    let rc = run(data);
    if rc != MPI_SUCCESS as c_int {
        return rc;
    }
    for chunk in host.chunks_mut(MAX_COUNT) {
        // SAFETY: `chunk` holds the bytes every rank passes alike.
        let sent = check(unsafe {
            PMPI_Bcast(chunk.as_mut_ptr().cast(), chunk.len() as c_int, shim::pcoll_dtype_byte(), d.root as c_int, comm)
        });
        if let Err(e) = sent {
            host_failed(d.coll, e);
            return rc;
        }
    }
    if !d.is_root() {
        let mismatch = Compare::Exact(vec![(0, size)]).first_mismatch(size, d.size, data, &host, None);
        conclude(rt, call, || format!("count={count} datatype={} root={}", type_name(datatype), d.root), mismatch);
    }
    rc
}

/// What the root of a Gatherv compares: its receive area as pcoll fills
/// it, the byte layout of the blocks in it, the receive type and the bytes
/// of one of its elements.
pub(super) struct GatherRoot<'a> {
    pub recv: &'a mut [u8],
    pub layout: &'a crate::core::call::GatherLayout,
    pub recvtype: MPI_Datatype,
    pub size: usize,
}

/// Runs a Gatherv (`run`, pcoll's, given the root's receive area, empty
/// elsewhere) and, under PCOLL_VERIFY, the host's with the same blocks as
/// bytes, and compares at the root.
pub(super) fn gatherv(
    rt: &Runtime,
    comm: MPI_Comm,
    call: &Planned,
    send: Option<&[u8]>,
    root_side: Option<GatherRoot<'_>>,
    run: impl FnOnce(&mut [u8]) -> c_int,
) -> c_int {
    if rt.cfg.verify.is_none() {
        return run(root_side.map_or(&mut [], |r| r.recv));
    }
    verified_gatherv(rt, comm, call, send, root_side, run)
}

/// [`gatherv`] under PCOLL_VERIFY (out of line, as [`verified_reduction`]).
#[cold]
#[inline(never)]
fn verified_gatherv(
    rt: &Runtime,
    comm: MPI_Comm,
    call: &Planned,
    send: Option<&[u8]>,
    root_side: Option<GatherRoot<'_>>,
    run: impl FnOnce(&mut [u8]) -> c_int,
) -> c_int {
    let Some(mut at_root) = root_side else {
        let rc = run(&mut []);
        if rc == MPI_SUCCESS as c_int {
            host_gatherv(call, send.unwrap_or(&[]), None, comm);
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
    if rc == MPI_SUCCESS as c_int {
        if let Some(host) = host_gatherv(call, &own, Some(&at_root), comm) {
            compare_blocks(rt, call, &mut at_root, &host);
        }
    }
    rc
}

/// The host's Gatherv of every rank's bytes; at the root, its receive
/// area. The root first says whether the layout fits int counts and
/// displacements: only it knows the layout, and every rank must take part
/// or none.
fn host_gatherv(call: &Planned, send: &[u8], root: Option<&GatherRoot<'_>>, comm: MPI_Comm) -> Option<Vec<u8>> {
    let d = &call.desc;
    let fits = |v: usize| v <= MAX_COUNT;
    let mut ok: c_int = root.is_none_or(|r| r.layout.blocks.iter().all(|&(o, l)| fits(o) && fits(l))) as c_int;
    // SAFETY: one int from the root to every rank, on the private communicator.
    let said = check(unsafe { PMPI_Bcast((&mut ok as *mut c_int).cast(), 1, RSMPI_INT32_T, d.root as c_int, comm) });
    if said.is_err() || ok == 0 || !fits(send.len()) {
        if root.is_some() {
            not_compared(); // counted where the comparison would be, like compared calls
        }
        log::warn!("PCOLL_VERIFY: a Gatherv beyond int counts or displacements is not compared");
        return None;
    }
    let byte = || {
        // SAFETY: reads the MPI_BYTE constant.
        unsafe { shim::pcoll_dtype_byte() }
    };
    let (counts, displs): (Vec<c_int>, Vec<c_int>) =
        root.map_or(&[][..], |r| &r.layout.blocks[..]).iter().map(|&(o, l)| (l as c_int, o as c_int)).unzip();
    let mut host = vec![0u8; root.map_or(0, |r| r.recv.len())];
    // SAFETY: every rank sends its block of bytes; the root receives the
    // blocks at their offsets in `host`, as long as its receive area.
    let rc = check(unsafe {
        PMPI_Gatherv(
            handles::send_ptr(send),
            send.len() as c_int,
            byte(),
            handles::recv_ptr(&mut host),
            counts.as_ptr(),
            displs.as_ptr(),
            byte(),
            d.root as c_int,
            comm,
        )
    });
    match rc {
        Ok(()) => root.map(|_| host),
        Err(e) => {
            host_failed(d.coll, e);
            None
        }
    }
}

/// Compares the blocks of the root's receive area; the report names the
/// block's sender and the element in it.
fn compare_blocks(rt: &Runtime, call: &Planned, root: &mut GatherRoot<'_>, host: &[u8]) {
    let exact = Compare::Exact(vec![(0, root.size)]);
    let differs = root.layout.blocks.iter().enumerate().find_map(|(r, &(off, len))| {
        let span = off..off + len;
        exact.first_mismatch(root.size, call.desc.size, &root.recv[span.clone()], &host[span], None).map(|m| (r, m))
    });
    let Some((from, m)) = differs else { return conclude(rt, call, String::new, None) };
    let count = root.layout.blocks[from].1 / root.size;
    let what = || format!("block of rank {from}: count={count} datatype={}", type_name(root.recvtype));
    conclude(rt, call, what, Some(m));
}
