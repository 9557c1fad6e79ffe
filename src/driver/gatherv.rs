//! MPI_Gatherv: the root's layout, and how every rank comes to agree on the
//! algorithm and, for a tree, on the layout (seed 001's two levels).
//!
//! recvcounts and displs are significant only at the root, so a non-root
//! cannot decide from them alone. When the decision depends only on what
//! every rank knows (the communicator size, the configuration), each rank
//! decides and no message is spent. Otherwise:
//! - conservative (default): the root decides with the full layout and
//!   broadcasts its decision and the layout on the private communicator;
//! - aggressive (PCOLL_GATHERV_MODE=aggressive): the user promises every
//!   rank passes the root's recvcounts, displs and recvtype, so each rank
//!   computes the layout itself and all decide alike.

use super::classify;
use super::comm::{self, CommState};
use super::dispatch::{execute, invalid, Invalid, Stand};
use super::host::{Code, ErrorClass, Host, Outcome, TypeLayout, SUCCESS};
use super::pack::{pack, unpack};
use super::plan::{decide, plan};
use super::prepared::{self, Key, Prepared};
use super::runtime::Runtime;
use super::thread::PerThread;
use super::verify::{self, GatherRoot};
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::types::Coll;
use crate::exec::NoReduction;
use crate::select::config::GathervMode;
use crate::select::wire::{decode, encode, refusal, HEADER};
use crate::select::Decision;
use std::borrow::Cow;
use std::ffi::c_void;
use Outcome::{Done, Forward};

/// Where the blocks go at the root, in bytes.
pub struct Layout {
    ty: TypeLayout,
    layout: GatherLayout,
    /// Byte offset of the lowest block from `recvbuf` (dense case).
    base: isize,
    /// Bytes from the lowest block start to the highest block end (dense),
    /// or the total of all blocks (staging).
    span: usize,
}

/// Per rank (count, displacement) from recvcounts and displs.
///
/// # Safety
/// Both point to `size` entries.
unsafe fn blocks<'a, C: Copy + Into<i64> + 'a, D: Copy + Into<i64> + 'a>(
    recvcounts: *const C,
    displs: *const D,
    size: usize,
) -> impl Iterator<Item = (i64, i64)> + Clone + 'a {
    // SAFETY: guaranteed by the caller.
    let (counts, displs) =
        unsafe { (std::slice::from_raw_parts(recvcounts, size), std::slice::from_raw_parts(displs, size)) };
    counts.iter().zip(displs).map(|(&c, &d)| (c.into(), d.into()))
}

/// The last arguments this thread turned into a layout, and the layout (in
/// [`PerThread`]): a loop of Gatherv calls with the same recvcounts,
/// displs and receive type (by its layout, not its handle, which MPI may
/// reuse) computes and allocates nothing.
#[derive(Default)]
pub struct LayoutMemo {
    args: Vec<(i64, i64)>,
    layout: Option<Layout>,
}

impl LayoutMemo {
    pub const fn new() -> LayoutMemo {
        LayoutMemo { args: Vec::new(), layout: None }
    }
}

/// The thread's memo while a call uses it, put back when the call ends.
struct TakenMemo<'a, H: Host>(&'a PerThread<H>, LayoutMemo);

impl<'a, H: Host> TakenMemo<'a, H> {
    fn new(t: &'a PerThread<H>) -> Self {
        TakenMemo(t, t.layout.take())
    }
}

impl<H: Host> Drop for TakenMemo<'_, H> {
    fn drop(&mut self) {
        self.0.layout.set(std::mem::take(&mut self.1));
    }
}

/// The byte layout of `blocks` of `recvtype`, from `memo` when it has the
/// same arguments.
fn layout_of<'m, H: Host>(
    host: &H,
    t: &PerThread<H>,
    blocks: impl Iterator<Item = (i64, i64)> + Clone,
    recvtype: H::Datatype,
    memo: &'m mut LayoutMemo,
) -> Result<&'m Layout, Invalid> {
    if !classify::is_usable_type(host, t, recvtype) {
        return Err(Invalid { why: "invalid receive type", class: ErrorClass::Type });
    }
    let ty = classify::layout(host, t, recvtype);
    // The memo only ever holds arguments that passed the checks below.
    let same = memo.layout.as_ref().is_some_and(|l| l.ty == ty) && memo.args.iter().copied().eq(blocks.clone());
    if !same {
        if blocks.clone().any(|(count, _)| count < 0) {
            return Err(Invalid { why: "negative receive count", class: ErrorClass::Count });
        }
        memo.args.clear();
        memo.args.extend(blocks);
        memo.layout = Some(compute_layout(&memo.args, ty));
    }
    Ok(memo.layout.as_ref().expect("just computed"))
}

/// The byte layout of `blocks` of a type: dense types in place (offsets
/// from the lowest block), others packed one after the other for staging.
/// The same computation on every rank that has the arguments.
fn compute_layout(blocks: &[(i64, i64)], ty: TypeLayout) -> Layout {
    let lens = blocks.iter().map(|&(count, _)| count as usize * ty.size);
    if !ty.dense {
        let mut cursor = 0;
        let layout = lens
            .map(|len| {
                let block = (cursor, len);
                cursor += len;
                block
            })
            .collect();
        return Layout { ty, layout: GatherLayout { blocks: layout }, base: 0, span: cursor };
    }
    let offsets = || blocks.iter().zip(lens.clone()).map(|(&(_, displ), len)| (displ as isize * ty.extent, len));
    let filled = || offsets().filter(|&(_, len)| len > 0);
    let base = filled().map(|(off, _)| off).min().unwrap_or(0);
    let end = filled().map(|(off, len)| off + len as isize).max().unwrap_or(0);
    let layout = offsets().map(|(off, len)| if len > 0 { ((off - base) as usize, len) } else { (0, 0) }).collect();
    Layout { ty, layout: GatherLayout { blocks: layout }, base, span: (end - base) as usize }
}

/// # Safety
/// `ptr` must point to `len` readable bytes when `len > 0`.
unsafe fn slice_or_empty<'a>(ptr: *const c_void, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
    }
}

/// The largest block: what Gatherv rules compare `bytes` with.
fn largest(layout: &GatherLayout) -> usize {
    layout.blocks.iter().map(|b| b.1).max().unwrap_or(0)
}

/// The known layout, or an empty one (a rank without the arguments).
fn layout_or_none(known: Option<&Layout>) -> Cow<'_, GatherLayout> {
    known.map_or(Cow::Owned(GatherLayout::default()), |k| Cow::Borrowed(&k.layout))
}

/// The root broadcasts its decision and layout (`mine`: `Some` at the
/// root, holding `None` where its own arguments are invalid); returns them
/// at every rank, `None` where the root refused the call.
fn agree<'l, H: Host>(
    host: &H,
    state: &CommState<H>,
    root: usize,
    size: usize,
    mine: Option<Option<(Decision, &'l GatherLayout)>>,
) -> Result<Option<(Decision, Cow<'l, GatherLayout>)>, Code> {
    let mut words = match &mine {
        Some(Some((decision, layout))) => encode(decision, layout),
        Some(None) => refusal(size),
        None => vec![0u64; HEADER + 2 * size],
    };
    host.bcast_words(state.private, &mut words, root)?;
    Ok(match mine {
        Some(mine) => mine.map(|(decision, layout)| (decision, Cow::Borrowed(layout))),
        None => decode(&words).map(|(decision, layout)| (decision, Cow::Owned(layout))),
    })
}

/// A call the root refused in the agreement (its arguments are invalid):
/// every rank returns an error without running anything, this rank's own
/// `bad` argument's class, else MPI_ERR_OTHER.
#[cold]
fn refused<H: Host>(host: &H, comm: H::Comm, bad: Option<Invalid>) -> Code {
    let class = bad.map_or(ErrorClass::Other, |b| b.class);
    log::warn!("Gatherv: the root's arguments are invalid; returning {class:?}");
    host.raise(comm, class)
}

/// Runs a planned Gatherv: `layout` is what this rank knows of the
/// blocks; the root's receive region and layout come with `at_root`.
#[allow(clippy::too_many_arguments)]
fn run_planned<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    comm: H::Comm,
    prepared: &Prepared<H>,
    send: Option<&[u8]>,
    at_root: Option<GatherRoot<'_, H>>,
    layout: &GatherLayout,
) -> Code {
    let (state, call) = (prepared.state(), &prepared.call);
    t.ask_for_new(Coll::Gatherv, send, at_root.as_ref().map(|r| &*r.recv));
    let layout = at_root.as_ref().map_or(layout, |r| r.layout);
    verify::gatherv(host, rt, state, call, send, at_root, |recv| {
        execute(host, rt, t, comm, state, call, layout, send, recv, &NoReduction)
    })
}

/// The user's Gatherv arguments (recvcounts and displs as each interface
/// has them: int in C, MPI_Count and MPI_Aint for large counts).
pub struct GathervArgs<H: Host, C, D> {
    pub sendbuf: *const c_void,
    pub sendcount: i64,
    pub sendtype: H::Datatype,
    pub recvbuf: *mut c_void,
    pub recvcounts: *const C,
    pub displs: *const D,
    pub recvtype: H::Datatype,
    pub root: i32,
    pub comm: H::Comm,
}

#[inline]
pub fn gatherv<H: Host, C: Copy + Into<i64>, D: Copy + Into<i64>>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    a: GathervArgs<H, C, D>,
) -> Outcome {
    let GathervArgs { sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm } = a;
    let key = Key {
        comm,
        count: sendcount,
        datatype: sendtype,
        op: None,
        root: root.into(),
        in_place: sendbuf == host.in_place(),
    };
    if let Some(planning) = prepared::recall(host, rt, t, Coll::Gatherv, &key) {
        // remembered for dense send types (or none at an in-place root)
        // where this rank decided alone
        let prepared = match planning {
            Ok(prepared) => prepared,
            Err(why) => return Forward(why),
        };
        let desc = &prepared.call.desc;
        if !desc.in_place && sendbuf.is_null() && desc.bytes > 0 {
            return invalid_gatherv(host, rt, t, comm, &prepared, NULL_BUFFER);
        }
        // SAFETY: a dense send buffer of `sendcount` elements is `bytes` contiguous bytes.
        let send = (!desc.in_place).then(|| unsafe { slice_or_empty(sendbuf, desc.bytes) });
        if desc.rank != desc.root {
            return Done(run_planned(host, rt, t, comm, &prepared, send, None, &GatherLayout::default()));
        }
        if recvcounts.is_null() || displs.is_null() {
            return invalid_gatherv(host, rt, t, comm, &prepared, NULL_ARRAYS);
        }
        // SAFETY: at the root MPI requires recvcounts and displs to hold comm-size entries.
        let args = unsafe { blocks(recvcounts, displs, desc.size) };
        let mut memo = TakenMemo::new(t);
        let plan = match layout_of(host, t, args.clone(), recvtype, &mut memo.1)
            .and_then(|plan| check_root_block(desc.in_place, desc.bytes, plan, desc.rank).map(|()| plan))
        {
            Ok(plan) => plan,
            Err(bad) => return invalid_gatherv(host, rt, t, comm, &prepared, bad),
        };
        return at_root(host, rt, t, &prepared, send, plan, args, (recvbuf, recvtype, comm));
    }
    let Some((rank, size)) = comm::shape(host, t, comm) else { return Forward("communicator") };
    if root < 0 || root as usize >= size {
        return Forward("invalid root");
    }
    let root = root as usize;
    let is_root = rank == root;
    let aggressive = rt.cfg.gatherv_mode == GathervMode::Aggressive;
    let has_args = !recvcounts.is_null() && !displs.is_null();
    // What only this rank sees (its send arguments, the root's receive
    // arguments) is reported once every rank knows the plan.
    let mut bad = None;
    if is_root && !has_args {
        bad = Some(NULL_ARRAYS);
    }
    // SAFETY: at the root MPI requires recvcounts and displs to hold
    // comm-size entries; in the aggressive mode the user promises that of
    // every rank.
    let args = (has_args && (is_root || aggressive)).then(|| unsafe { blocks(recvcounts, displs, size) });
    let in_place = is_root && sendbuf == host.in_place();
    let send_ty = match () {
        _ if in_place => None,
        _ if sendcount < 0 => {
            bad.get_or_insert(Invalid { why: "negative send count", class: ErrorClass::Count });
            None
        }
        _ if !classify::is_usable_type(host, t, sendtype) => {
            bad.get_or_insert(Invalid { why: "invalid send type", class: ErrorClass::Type });
            None
        }
        _ => Some(classify::layout(host, t, sendtype)),
    };
    let my_bytes = send_ty.map_or(0, |t| sendcount as usize * t.size);
    let mut memo = TakenMemo::new(t);
    let known = match args.clone() {
        Some(blocks) => match layout_of(host, t, blocks, recvtype, &mut memo.1) {
            Ok(layout) => Some(layout),
            Err(why) => {
                if is_root {
                    bad.get_or_insert(why);
                }
                None
            }
        },
        None => None,
    };
    if let Some(plan) = known.filter(|_| is_root && bad.is_none()) {
        bad = check_root_block(in_place, my_bytes, plan, rank).err();
    }
    if send_ty.is_some_and(|t| t.dense) && sendbuf.is_null() && my_bytes > 0 {
        bad.get_or_insert(NULL_BUFFER);
    }
    let epoch = host.epoch();
    let state = match comm::state_after(host, t, comm, rt.cfg.calls_before_setup()) {
        Ok(Some(state)) => state,
        Ok(None) => return Forward(comm::NEW_COMMUNICATOR),
        Err(rc) => return Done(rc),
    };
    let desc = CallDesc {
        coll: Coll::Gatherv,
        rank,
        size,
        root,
        bytes: my_bytes,
        unit: 1,
        commutative: true,
        in_place,
        topo: state.topo(),
    };

    // The decision, and the layout this rank builds its schedule from.
    let decide = |bytes| decide(rt, t, &desc, bytes);
    let everywhere = |d: &Decision| matches!(d, Decision::Run(a, ..) if a.layout_everywhere);
    // Whether this rank decided alone, from what it will know again at the
    // next call with the same arguments.
    let mut alone = false;
    let (decision, layout) = if aggressive {
        let d = decide(known.map(|k| largest(&k.layout)));
        if known.is_none() && (everywhere(&d) || matches!(d, Decision::NeedsLayout)) {
            // this rank cannot take part in the agreed algorithm
            host.abort(&format!(
                "pcoll: MPI_Gatherv with PCOLL_GATHERV_MODE=aggressive: rank {rank} passes no valid recvcounts, \
                 displs and recvtype, which that mode requires of every rank; aborting\n"
            ));
        }
        (d, layout_or_none(known))
    } else {
        match decide(None) {
            d @ Decision::Host(_) => {
                alone = true;
                (d, Cow::Owned(GatherLayout::default()))
            }
            d if !everywhere(&d) && !matches!(d, Decision::NeedsLayout) => {
                alone = true;
                (d, layout_or_none(known))
            }
            first => {
                let mine = is_root.then(|| {
                    known.filter(|_| bad.is_none()).map(|k| {
                        let d = match first {
                            Decision::NeedsLayout => decide(Some(largest(&k.layout))),
                            d => d,
                        };
                        (d, &k.layout)
                    })
                });
                match agree(host, state, root, size, mine) {
                    Ok(Some(agreed)) => agreed,
                    Ok(None) => return Done(refused(host, comm, bad)),
                    Err(rc) => return Done(rc),
                }
            }
        }
    };
    if !is_root && bad.is_none() && layout.blocks.len() == size && layout.blocks[rank].1 != my_bytes {
        // the ranks disagree on the message sizes
        host.abort(&format!(
            "pcoll: MPI_Gatherv: rank {rank} sends {my_bytes} bytes but the root's recvcounts expect {}: erroneous \
             program; aborting\n",
            layout.blocks[rank].1
        ));
    }
    let planning = plan(rt, desc, decision).map(|call| Prepared::new(state, call, None));
    // Not with an invalid argument: the remembered plan skips its checks.
    let valid = bad.is_none();
    if valid && alone && send_ty.is_none_or(|ty| ty.dense && classify::is_predefined_type(host, t, sendtype)) {
        prepared::remember(rt, t, Coll::Gatherv, key, epoch, planning.clone());
    }
    let prepared = match planning {
        Ok(prepared) => prepared,
        Err(why) => return Forward(why),
    };
    if let Some(bad) = bad {
        return invalid_gatherv(host, rt, t, comm, &prepared, bad);
    }

    let packed_send;
    let send: Option<&[u8]> = match send_ty {
        None => None,
        Some(ty) if ty.dense => {
            // SAFETY: a dense send buffer of `sendcount` elements is `my_bytes` contiguous bytes.
            Some(unsafe { slice_or_empty(sendbuf, my_bytes) })
        }
        Some(ref ty) => {
            packed_send = pack(host, sendbuf, sendcount, sendtype, ty, comm);
            Some(&packed_send)
        }
    };
    match (known.filter(|_| is_root), args) {
        (Some(plan), Some(args)) => at_root(host, rt, t, &prepared, send, plan, args, (recvbuf, recvtype, comm)),
        _ => Done(run_planned(host, rt, t, comm, &prepared, send, None, &layout)),
    }
}

const NULL_BUFFER: Invalid = Invalid { why: "null buffer", class: ErrorClass::Buffer };
const NULL_ARRAYS: Invalid = Invalid { why: "null recvcounts or displs", class: ErrorClass::Arg };

/// A root whose own block does not fit its receive block.
fn check_root_block(in_place: bool, my_bytes: usize, plan: &Layout, root: usize) -> Result<(), Invalid> {
    if !in_place && my_bytes > plan.layout.blocks[root].1 {
        return Err(Invalid { why: "root's send block larger than its receive block", class: ErrorClass::Truncate });
    }
    Ok(())
}

/// A Gatherv with an argument invalid at this rank: on a node, the root
/// takes part expecting nothing of anyone (it skips the blocks, whose
/// writers complete), a sender stands out.
#[cold]
fn invalid_gatherv<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    comm: H::Comm,
    prepared: &Prepared<H>,
    bad: Invalid,
) -> Outcome {
    let (state, call) = (prepared.state(), &prepared.call);
    let desc = &call.desc;
    let nothing = GatherLayout { blocks: vec![(0, 0); desc.size] };
    let stand = if desc.rank != desc.root {
        Stand::Out
    } else {
        // Its own block is empty in `nothing` too: no bytes to send.
        Stand::Ghost { send: (!desc.in_place).then_some(&[][..]), recv_bytes: 0, layout: &nothing }
    };
    invalid(host, rt, t, comm, state, call, bad, stand, &NoReduction)
}

/// The root's part of a planned Gatherv: the blocks go straight into
/// `recvbuf` (a dense receive type), or into staging and are unpacked
/// into place (`args`: each rank's count and displacement).
#[allow(clippy::too_many_arguments)]
fn at_root<H: Host>(
    host: &H,
    rt: &Runtime,
    t: &PerThread<H>,
    prepared: &Prepared<H>,
    send: Option<&[u8]>,
    plan: &Layout,
    args: impl Iterator<Item = (i64, i64)>,
    (recvbuf, recvtype, comm): (*mut c_void, H::Datatype, H::Comm),
) -> Outcome {
    let desc = &prepared.call.desc;
    let gather_root = |recv| GatherRoot { recv, layout: &plan.layout, recvtype, size: plan.ty.size };
    let run = |recv| run_planned(host, rt, t, comm, prepared, send, Some(gather_root(recv)), &plan.layout);
    if plan.ty.dense {
        // SAFETY: the blocks lie in the user's receive buffer, which spans
        // [recvbuf + base, recvbuf + base + span) by MPI's rules for displs.
        let recv = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>().offset(plan.base), plan.span) };
        return Done(run(recv));
    }
    // A non-dense receive type: gather the signature bytes, then unpack each
    // block into place.
    let mut staging = vec![0u8; plan.span];
    let rc = run(&mut staging);
    if rc == SUCCESS {
        for (peer, ((count, displ), &(off, len))) in args.zip(&plan.layout.blocks).enumerate() {
            if len > 0 && !(desc.in_place && peer == desc.root) {
                let dst = recvbuf.cast::<u8>().wrapping_offset(displ as isize * plan.ty.extent);
                unpack(host, &staging[off..off + len], dst.cast(), count, recvtype, &plan.ty, comm);
            }
        }
    }
    Done(rc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_layouts_start_at_the_lowest_block_and_skip_empty_ones() {
        let ty = TypeLayout::new(4, (0, 4), (0, 4));
        let l = compute_layout(&[(2, 5), (0, 0), (1, 3), (3, 7)], ty);
        assert_eq!(l.base, 12);
        assert_eq!(l.layout.blocks, vec![(8, 8), (0, 0), (0, 4), (16, 12)]);
        assert_eq!(l.span, 28 + 12 - 12);
    }

    #[test]
    fn staged_layouts_pack_the_blocks_in_rank_order() {
        let ty = TypeLayout::new(4, (0, 8), (0, 8));
        let l = compute_layout(&[(2, 9), (0, 0), (1, 3)], ty);
        assert_eq!(l.layout.blocks, vec![(0, 8), (8, 0), (8, 4)]);
        assert_eq!((l.base, l.span), (0, 12));
    }
}
