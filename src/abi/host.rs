//! The host MPI behind the driver's [`Host`] trait: PMPI calls on handles,
//! on the private duplicates of the user's communicators, and on the
//! node's resources.

use super::comm;
use super::handles;
use super::shim::*;
use super::shim::{self, pcoll_class as class, pcoll_op as opc, pcoll_repr as repr};
use super::transport::PmpiTransport;
use super::{runtime, THREAD};
use crate::core::types::{Elem, ReduceOp, TypeClass};
use crate::driver::comm::{CommState, SegmentPool};
use crate::driver::host::{check, Access, Code, ErrorClass, OpKind, Repr, Split, TypeKind, TypeLayout};
use crate::driver::thread::PerThread;
use crate::driver::Host;
use crate::shm::os::Linux;
use std::os::raw::{c_char, c_int, c_void};

/// The host MPI, reached through PMPI.
#[derive(Clone, Copy)]
pub(super) struct Mpi;

pub(super) type State = CommState<Mpi>;

/// The pointers to pass PMPI for a send and a receive buffer. An empty
/// slice's is 0x1, which is Open MPI's MPI_IN_PLACE (its Gatherv refuses
/// that as a non-root's send buffer), so an empty buffer points at a real
/// byte instead, never accessed (its count is 0).
static SPARE: u8 = 0;

pub(super) fn send_ptr(buf: &[u8]) -> *const c_void {
    if buf.is_empty() {
        &SPARE as *const u8 as *const c_void
    } else {
        buf.as_ptr().cast()
    }
}

pub(super) fn recv_ptr(buf: &mut [u8]) -> *mut c_void {
    if buf.is_empty() {
        &SPARE as *const u8 as *mut c_void
    } else {
        buf.as_mut_ptr().cast()
    }
}

fn byte() -> MPI_Datatype {
    handles().byte
}

/// A machine representation of the shim's.
fn repr_of(rep: repr::Type) -> Repr {
    Repr::Elem(match rep {
        repr::PCOLL_REPR_I8 => Elem::I8,
        repr::PCOLL_REPR_U8 => Elem::U8,
        repr::PCOLL_REPR_I16 => Elem::I16,
        repr::PCOLL_REPR_U16 => Elem::U16,
        repr::PCOLL_REPR_I32 => Elem::I32,
        repr::PCOLL_REPR_U32 => Elem::U32,
        repr::PCOLL_REPR_I64 => Elem::I64,
        repr::PCOLL_REPR_U64 => Elem::U64,
        repr::PCOLL_REPR_F32 => Elem::F32,
        repr::PCOLL_REPR_F64 => Elem::F64,
        repr::PCOLL_REPR_BOOL => Elem::Bool,
        repr::PCOLL_REPR_C32 => Elem::C32,
        repr::PCOLL_REPR_C64 => Elem::C64,
        repr::PCOLL_REPR_F32_I32 => Elem::F32I32,
        repr::PCOLL_REPR_F64_I32 => Elem::F64I32,
        repr::PCOLL_REPR_I64_I32 => Elem::I64I32,
        repr::PCOLL_REPR_I32_I32 => Elem::I32I32,
        repr::PCOLL_REPR_I16_I32 => Elem::I16I32,
        repr::PCOLL_REPR_F80 => return Repr::F80,
        repr::PCOLL_REPR_C80 => return Repr::C80,
        _ => return Repr::Unknown,
    })
}

/// Calls `f(address, count, datatype)` naming `n` elements that start
/// `offset` bytes from a user buffer. MPICH's MPI_Pack and MPI_Unpack
/// refuse a NULL buffer (MPI_BOTTOM with a datatype of absolute
/// addresses), so for NULL the same bytes are named from a non-null base
/// through a temporary struct type whose displacement cancels the base.
fn with_elements(
    buf: *mut c_void,
    offset: isize,
    n: usize,
    datatype: MPI_Datatype,
    f: impl FnOnce(*mut c_void, c_int, MPI_Datatype),
) {
    if !buf.is_null() {
        return f(buf.cast::<u8>().wrapping_offset(offset).cast(), n as c_int, datatype);
    }
    static BASE: u8 = 0;
    let base = std::ptr::addr_of!(BASE) as *mut c_void;
    let (blocklength, displacement) = (n as c_int, (offset - base as isize) as MPI_Aint);
    let mut run_type = datatype;
    // SAFETY: one block of n elements at an absolute address (base +
    // displacement = the user's address); the type is freed after use.
    unsafe {
        pmpi!(PMPI_Type_create_struct)(1, &blocklength, &displacement, &datatype, &mut run_type);
        pmpi!(PMPI_Type_commit)(&mut run_type);
    }
    f(base, 1, run_type);
    // SAFETY: the temporary type created above.
    unsafe { pmpi!(PMPI_Type_free)(&mut run_type) };
}

impl Host for Mpi {
    type Comm = MPI_Comm;
    type Datatype = MPI_Datatype;
    type Op = MPI_Op;
    type Os = Linux;
    type Win = MPI_Win;
    type Transport<'a> = PmpiTransport<'a>;

    #[inline]
    fn with_thread<R>(f: impl FnOnce(&PerThread<Mpi>) -> R) -> R {
        THREAD.with(f)
    }

    fn comm_shape(&self, comm: MPI_Comm) -> Option<(usize, usize)> {
        if comm == handles().comm_null {
            return None;
        }
        let (mut inter, mut rank, mut size) = (0, 0, 0);
        // SAFETY: `comm` is a non-null communicator handle from the user; out-pointers are locals.
        unsafe {
            if pmpi!(PMPI_Comm_test_inter)(comm, &mut inter) != MPI_SUCCESS as c_int || inter != 0 {
                return None;
            }
            pmpi!(PMPI_Comm_rank)(comm, &mut rank);
            pmpi!(PMPI_Comm_size)(comm, &mut size);
        }
        Some((rank as usize, size as usize))
    }

    #[inline]
    fn epoch(&self) -> u64 {
        comm::epoch()
    }

    fn find_state<'a>(&self, comm: MPI_Comm) -> Option<&'a State> {
        comm::find(comm)
    }

    fn create_state<'a>(&self, comm: MPI_Comm) -> Result<&'a State, Code> {
        comm::create(comm)
    }

    fn count_host_call(&self, comm: MPI_Comm, after: usize) -> bool {
        comm::count_host_call(comm, after)
    }

    fn world(&self) -> MPI_Comm {
        handles().comm_world
    }

    fn split(&self, comm: MPI_Comm, how: Split, key: usize) -> Result<MPI_Comm, Code> {
        let (mut new, key) = (comm, key as c_int);
        // SAFETY: a collective over `comm`, every rank at the same point;
        // `new` receives the communicator, freed with the state.
        check(unsafe {
            match how {
                Split::Shared => {
                    pmpi!(PMPI_Comm_split_type)(comm, handles().comm_type_shared, key, handles().info_null, &mut new)
                }
                Split::Color(color) => {
                    pmpi!(PMPI_Comm_split)(comm, color.map_or(handles().undefined, |c| c as c_int), key, &mut new)
                }
            }
        })?;
        Ok(new)
    }

    fn free_comm(&self, comm: &mut MPI_Comm) {
        // SAFETY: `comm` is a communicator pcoll made and still owns.
        unsafe {
            if *comm != handles().comm_null {
                pmpi!(PMPI_Comm_free)(comm);
            }
            *comm = handles().comm_null;
        }
    }

    fn allgather_words(&self, comm: MPI_Comm, mine: &[u64]) -> Result<Vec<u64>, Code> {
        let (n, mut size) = (mine.len() as c_int, 0);
        // SAFETY: a valid communicator; the out-pointer is a local.
        unsafe { pmpi!(PMPI_Comm_size)(comm, &mut size) };
        let mut all = vec![0u64; mine.len() * size as usize];
        // SAFETY: `all` holds size × mine.len() words; every rank passes the same count.
        check(unsafe {
            pmpi!(PMPI_Allgather)(
                mine.as_ptr().cast(),
                n,
                handles().uint64,
                all.as_mut_ptr().cast(),
                n,
                handles().uint64,
                comm,
            )
        })?;
        Ok(all)
    }

    fn drive_progress(&self, comm: MPI_Comm) {
        let mut found: c_int = 0;
        let h = handles();
        // SAFETY: a valid communicator; probing receives nothing, and
        // pcoll's communicators carry only pcoll's traffic.
        unsafe { pmpi!(PMPI_Iprobe)(h.any_source, h.any_tag, comm, &mut found, h.status_ignore) };
    }

    fn thread_multiple(&self) -> bool {
        let mut provided: c_int = 0;
        // SAFETY: MPI is initialised whenever pcoll runs; `provided` is a local.
        unsafe { pmpi!(PMPI_Query_thread)(&mut provided) };
        provided == handles().thread_multiple
    }

    fn bcast_words(&self, comm: MPI_Comm, words: &mut [u64], root: usize) -> Result<(), Code> {
        // SAFETY: `words` holds the same number of words at every rank;
        // pcoll's communicators carry only pcoll's traffic.
        check(unsafe {
            pmpi!(PMPI_Bcast)(words.as_mut_ptr().cast(), words.len() as c_int, handles().uint64, root as c_int, comm)
        })
    }

    fn barrier(&self, comm: MPI_Comm) -> Result<(), Code> {
        // SAFETY: a collective on one of pcoll's communicators, every rank alike.
        check(unsafe { pmpi!(PMPI_Barrier)(comm) })
    }

    #[inline]
    fn os(&self) -> Linux {
        Linux
    }

    fn pool(&self) -> &'static SegmentPool<Mpi> {
        &comm::POOL
    }

    #[inline]
    fn transport<'a>(&self, state: &'a State, ranks: Option<&'a [usize]>) -> PmpiTransport<'a> {
        PmpiTransport::new(state.private, ranks)
    }

    fn window_names_collide(&self) -> bool {
        cfg!(pcoll_mpi = "openmpi")
            && crate::driver::family::open_mpi_major(&self.version()).is_none_or(|major| major < 5)
    }

    unsafe fn win_create(&self, comm: MPI_Comm, base: *mut u8, bytes: usize) -> Result<MPI_Win, Code> {
        let mut win = handles().win_null;
        // A window the host refuses is an error of `comm` (pcoll's own:
        // the leaders'): returned, so that pcoll runs the call otherwise
        // instead of the job ending (Open MPI 4.1's osc rdma across hosts).
        // SAFETY: a valid communicator and a predefined handler.
        check(unsafe { pmpi!(PMPI_Comm_set_errhandler)(comm, handles().errors_return) })?;
        // SAFETY: `base` holds `bytes` bytes until the window is freed (the
        // caller's promise); every rank of `comm` calls this alike.
        check(unsafe {
            pmpi!(PMPI_Win_create)(base.cast(), bytes as MPI_Aint, 1, handles().info_null, comm, &mut win)
        })?;
        Ok(win)
    }

    fn win_free(&self, win: &mut MPI_Win) {
        // SAFETY: a window pcoll created; every rank of it frees it at the same point.
        unsafe { pmpi!(PMPI_Win_free)(win) };
    }

    unsafe fn win_transfer(
        &self,
        win: &mut MPI_Win,
        access: Access,
        local: *mut u8,
        peer: usize,
        remote: usize,
        len: usize,
    ) -> Result<(), Code> {
        let (buf, n, peer, remote) = (local.cast(), len as c_int, peer as c_int, remote as MPI_Aint);
        // SAFETY: the ranges lie in the window memory of this rank and of
        // `peer` (the caller's promise), which outlives the epoch.
        check(unsafe {
            match access {
                Access::Get => pmpi!(PMPI_Get)(buf, n, byte(), peer, remote, n, byte(), *win),
                Access::Put => pmpi!(PMPI_Put)(buf, n, byte(), peer, remote, n, byte(), *win),
            }
        })
    }

    fn win_fence(&self, win: &mut MPI_Win) -> Result<(), Code> {
        // SAFETY: every rank of the window calls the fence the same number of times.
        check(unsafe { pmpi!(PMPI_Win_fence)(0, *win) })
    }

    #[inline]
    fn in_place(&self) -> *const c_void {
        handles().in_place
    }

    fn type_kind(&self, datatype: MPI_Datatype) -> TypeKind {
        let mut rep: c_int = 0;
        // SAFETY: the shim only compares the handle with the predefined ones.
        let cls = unsafe { shim::pcoll_dtype_class(datatype, &mut rep) } as class::Type;
        let class = match cls {
            class::PCOLL_CLASS_NULL => return TypeKind::Null,
            class::PCOLL_CLASS_DERIVED => return TypeKind::Derived,
            class::PCOLL_CLASS_C_INTEGER => Some(TypeClass::CInteger),
            class::PCOLL_CLASS_FORTRAN_INTEGER => Some(TypeClass::FortranInteger),
            class::PCOLL_CLASS_MULTI_LANGUAGE => Some(TypeClass::MultiLanguage),
            class::PCOLL_CLASS_FLOATING => Some(TypeClass::Floating),
            class::PCOLL_CLASS_LOGICAL => Some(TypeClass::Logical),
            class::PCOLL_CLASS_COMPLEX => Some(TypeClass::Complex),
            class::PCOLL_CLASS_BYTE => Some(TypeClass::Byte),
            class::PCOLL_CLASS_PAIR => Some(TypeClass::Pair),
            _ => None,
        };
        TypeKind::Predefined { class, repr: repr_of(rep as repr::Type) }
    }

    fn type_layout(&self, datatype: MPI_Datatype) -> TypeLayout {
        let (mut size, mut lb, mut extent, mut true_lb, mut true_extent) = (0, 0, 0, 0, 0);
        // SAFETY: the out-pointers are valid locals; the handle is not null.
        unsafe {
            pmpi!(PMPI_Type_size)(datatype, &mut size);
            pmpi!(PMPI_Type_get_extent)(datatype, &mut lb, &mut extent);
            pmpi!(PMPI_Type_get_true_extent)(datatype, &mut true_lb, &mut true_extent);
        }
        // MPI_Aint is `long` in MPICH and `ptrdiff_t` in Open MPI.
        #[allow(clippy::unnecessary_cast)]
        let (extent, true_extent) = ((lb as isize, extent as isize), (true_lb as isize, true_extent as isize));
        TypeLayout::new(size.max(0) as usize, extent, true_extent)
    }

    fn type_committed(&self, datatype: MPI_Datatype) -> bool {
        // SAFETY: a non-null derived datatype handle from the user.
        unsafe { shim::pcoll_dtype_committed(datatype) != 0 }
    }

    fn type_name(&self, datatype: MPI_Datatype) -> String {
        let mut buf = vec![0 as c_char; MPI_MAX_OBJECT_NAME as usize + 1];
        let mut len = 0;
        // SAFETY: `buf` holds MPI_MAX_OBJECT_NAME characters and a terminator.
        unsafe { pmpi!(PMPI_Type_get_name)(datatype, buf.as_mut_ptr(), &mut len) };
        let name: Vec<u8> = buf[..len.max(0) as usize].iter().map(|&c| c as u8).collect();
        match String::from_utf8_lossy(&name).trim_end_matches('\0') {
            "" => "(unnamed datatype)".to_string(),
            name => name.to_string(),
        }
    }

    fn op_kind(&self, op: MPI_Op) -> OpKind {
        // SAFETY: plain handle comparison in the shim.
        OpKind::Predefined(match unsafe { shim::pcoll_op_code(op) } as opc::Type {
            opc::PCOLL_OP_USER => return OpKind::User,
            opc::PCOLL_OP_MAX => ReduceOp::Max,
            opc::PCOLL_OP_MIN => ReduceOp::Min,
            opc::PCOLL_OP_SUM => ReduceOp::Sum,
            opc::PCOLL_OP_PROD => ReduceOp::Prod,
            opc::PCOLL_OP_LAND => ReduceOp::Land,
            opc::PCOLL_OP_BAND => ReduceOp::Band,
            opc::PCOLL_OP_LOR => ReduceOp::Lor,
            opc::PCOLL_OP_BOR => ReduceOp::Bor,
            opc::PCOLL_OP_LXOR => ReduceOp::Lxor,
            opc::PCOLL_OP_BXOR => ReduceOp::Bxor,
            opc::PCOLL_OP_MINLOC => ReduceOp::MinLoc,
            opc::PCOLL_OP_MAXLOC => ReduceOp::MaxLoc,
            _ => return OpKind::Other,
        })
    }

    fn op_commutative(&self, op: MPI_Op) -> bool {
        let mut commute: c_int = 0;
        // SAFETY: `op` is a user operator handle; `commute` is a valid local.
        unsafe { pmpi!(PMPI_Op_commutative)(op, &mut commute) };
        commute != 0
    }

    fn op_sum(&self) -> MPI_Op {
        handles().sum
    }

    fn reduce_local(&self, op: MPI_Op, datatype: MPI_Datatype, src: &[u8], dst: &mut [u8], count: usize) {
        // SAFETY: both slices hold `count` whole elements of `datatype`.
        unsafe { pmpi!(PMPI_Reduce_local)(src.as_ptr().cast(), dst.as_mut_ptr().cast(), count as c_int, datatype, op) };
    }

    fn pack(
        &self,
        buf: *const c_void,
        offset: isize,
        n: usize,
        datatype: MPI_Datatype,
        out: &mut [u8],
        comm: MPI_Comm,
    ) -> usize {
        let mut position: c_int = 0;
        with_elements(buf.cast_mut(), offset, n, datatype, |src, n, dt| {
            // SAFETY: `out` holds the n × size bytes the host packs n
            // elements into (homogeneous native format); `src` names
            // elements of the user's buffer.
            unsafe { pmpi!(PMPI_Pack)(src, n, dt, out.as_mut_ptr().cast(), out.len() as c_int, &mut position, comm) };
        });
        position as usize
    }

    fn unpack(&self, packed: &[u8], buf: *mut c_void, offset: isize, n: usize, datatype: MPI_Datatype, comm: MPI_Comm) {
        let mut position: c_int = 0;
        with_elements(buf, offset, n, datatype, |dst, n, dt| {
            // SAFETY: `packed` holds what `pack` produced for these
            // elements; `dst` names them in the user's buffer.
            unsafe {
                pmpi!(PMPI_Unpack)(packed.as_ptr().cast(), packed.len() as c_int, &mut position, dst, n, dt, comm)
            };
        });
    }

    fn reduce(
        &self,
        comm: MPI_Comm,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        count: usize,
        datatype: MPI_Datatype,
        op: MPI_Op,
    ) -> Result<(), Code> {
        let (from, to, n) = (send.as_ptr().cast(), recv_ptr(recv), count as c_int);
        // SAFETY: `send` holds `count` elements of `datatype`; `recv` has
        // room for as many where the result is defined (every rank of an
        // Allreduce, the root of a Reduce), and is ignored elsewhere.
        check(unsafe {
            match root {
                None => pmpi!(PMPI_Allreduce)(from, to, n, datatype, op, comm),
                Some(root) => pmpi!(PMPI_Reduce)(from, to, n, datatype, op, root as c_int, comm),
            }
        })
    }

    fn bcast_bytes(&self, comm: MPI_Comm, data: &mut [u8], root: usize) -> Result<(), Code> {
        // SAFETY: `data` holds the bytes every rank passes alike.
        check(unsafe { pmpi!(PMPI_Bcast)(recv_ptr(data), data.len() as c_int, byte(), root as c_int, comm) })
    }

    fn gatherv_bytes(
        &self,
        comm: MPI_Comm,
        send: &[u8],
        recv: &mut [u8],
        blocks: &[(usize, usize)],
        root: usize,
    ) -> Result<(), Code> {
        let (counts, displs): (Vec<c_int>, Vec<c_int>) = blocks.iter().map(|&(o, l)| (l as c_int, o as c_int)).unzip();
        // SAFETY: every rank sends its block of bytes; the root receives the
        // blocks at their offsets in `recv`, as long as its receive area.
        check(unsafe {
            pmpi!(PMPI_Gatherv)(
                send_ptr(send),
                send.len() as c_int,
                byte(),
                recv_ptr(recv),
                counts.as_ptr(),
                displs.as_ptr(),
                byte(),
                root as c_int,
                comm,
            )
        })
    }

    fn world_rank(&self) -> usize {
        runtime::world_rank() as usize
    }

    fn sum_at_root(&self, mine: &[u64]) -> Option<Vec<u64>> {
        let mut sum = vec![0u64; mine.len()];
        let n = mine.len() as c_int;
        // SAFETY: `n` u64 from every rank to world rank 0, into `sum`.
        unsafe {
            pmpi!(PMPI_Reduce)(
                mine.as_ptr().cast(),
                sum.as_mut_ptr().cast(),
                n,
                handles().uint64,
                handles().sum,
                0,
                self.world(),
            )
        };
        (runtime::world_rank() == 0).then_some(sum)
    }

    fn version(&self) -> String {
        runtime::host_version()
    }

    fn raise(&self, comm: MPI_Comm, class: ErrorClass) -> c_int {
        let code = match class {
            ErrorClass::Truncate => MPI_ERR_TRUNCATE,
            ErrorClass::Other => MPI_ERR_OTHER,
            ErrorClass::Count => MPI_ERR_COUNT,
            ErrorClass::Arg => MPI_ERR_ARG,
            ErrorClass::Type => MPI_ERR_TYPE,
            ErrorClass::Buffer => MPI_ERR_BUFFER,
            #[cfg(pcoll_mpi = "openmpi")]
            ErrorClass::AliasedAtRoot => MPI_ERR_ARG,
            #[cfg(not(pcoll_mpi = "openmpi"))]
            ErrorClass::AliasedAtRoot => MPI_ERR_BUFFER,
        } as c_int;
        // SAFETY: a valid communicator (the call's) and an error class,
        // which is an error code.
        unsafe { pmpi!(PMPI_Comm_call_errhandler)(comm, code) };
        code
    }

    fn abort(&self, text: &str) -> ! {
        runtime::abort_job(text)
    }
}
