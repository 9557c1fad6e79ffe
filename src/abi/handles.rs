//! Classification of MPI datatype and operator handles into what pcoll's
//! pure layers understand, and the combiners that apply an operator.

use super::shim::{self, pcoll_class as class, pcoll_op as opc, pcoll_repr as repr};
use crate::core::types::{Elem, ReduceOp, TypeClass};
use crate::exec::kernels::{self, Kernel};
use crate::exec::Combiner;
use mpi_sys::*;
use std::cell::RefCell;
use std::os::raw::{c_int, c_void};

/// Memory layout of `count` elements of a datatype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct TypeLayout {
    /// Bytes of data per element (the type signature's size).
    pub size: usize,
    /// Distance between consecutive elements.
    pub extent: isize,
    /// Whether the bytes of consecutive elements are one contiguous run
    /// starting at the buffer address, so the buffer can be used as bytes.
    pub dense: bool,
}

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

/// Whether collectives may use the datatype: not MPI_DATATYPE_NULL, and
/// predefined or committed (the host reports anything else).
pub(super) fn is_usable_type(datatype: MPI_Datatype) -> bool {
    match classify(datatype).0 {
        class::PCOLL_CLASS_NULL => false,
        // SAFETY: a non-null derived datatype handle from the user.
        class::PCOLL_CLASS_DERIVED => unsafe { shim::pcoll_dtype_committed(datatype) != 0 },
        _ => true,
    }
}

/// Whether a (non-null) datatype is predefined: its handle never comes to
/// mean another type.
pub(super) fn is_predefined_type(datatype: MPI_Datatype) -> bool {
    classify(datatype).0 != class::PCOLL_CLASS_DERIVED
}

/// A predefined datatype's class, representation and layout.
type Predefined = (MPI_Datatype, class::Type, repr::Type, TypeLayout);

thread_local! {
    /// The predefined datatypes this thread used last: their handles never
    /// change meaning, so their class and layout (three MPI queries) are
    /// looked up once. Derived types are not kept (a freed handle can be
    /// reused for another type).
    static PREDEFINED: RefCell<[Option<Predefined>; 4]> = const { RefCell::new([None; 4]) };
}

fn cached(datatype: MPI_Datatype) -> Option<Predefined> {
    PREDEFINED.with_borrow(|all| all.iter().flatten().find(|p| p.0 == datatype).copied())
}

/// A datatype's class and representation (see the shim).
pub(super) fn classify(datatype: MPI_Datatype) -> (class::Type, repr::Type) {
    if let Some((_, cls, rep, _)) = cached(datatype) {
        return (cls, rep);
    }
    let mut rep: c_int = 0;
    // SAFETY: the shim only compares the handle with the predefined ones.
    let cls = unsafe { shim::pcoll_dtype_class(datatype, &mut rep) } as class::Type;
    if !matches!(cls, class::PCOLL_CLASS_NULL | class::PCOLL_CLASS_DERIVED) {
        let entry = (datatype, cls, rep as repr::Type, query_layout(datatype));
        PREDEFINED.with_borrow_mut(|all| {
            all.rotate_right(1);
            all[0] = Some(entry);
        });
    }
    (cls, rep as repr::Type)
}

/// The layout of a (non-null) datatype.
pub(super) fn layout(datatype: MPI_Datatype) -> TypeLayout {
    match cached(datatype) {
        Some((.., layout)) => layout,
        None => query_layout(datatype),
    }
}

/// The layout of a (non-null) datatype, from the host MPI.
fn query_layout(datatype: MPI_Datatype) -> TypeLayout {
    let (mut size, mut lb, mut extent, mut true_lb, mut true_extent) = (0, 0, 0, 0, 0);
    // SAFETY: the out-pointers are valid locals; the handle is not null.
    unsafe {
        PMPI_Type_size(datatype, &mut size);
        PMPI_Type_get_extent(datatype, &mut lb, &mut extent);
        PMPI_Type_get_true_extent(datatype, &mut true_lb, &mut true_extent);
    }
    let size_a = size as MPI_Aint;
    // MPI_Aint is `long` in MPICH and `ptrdiff_t` in Open MPI.
    #[allow(clippy::unnecessary_cast)]
    TypeLayout {
        size: size.max(0) as usize,
        extent: extent as isize,
        dense: lb == 0 && true_lb == 0 && extent == size_a && true_extent == size_a,
    }
}

/// How a reduction combines two vectors.
pub(super) enum Combine {
    /// A pcoll kernel.
    Native(Kernel),
    /// The host MPI's MPI_Reduce_local: user-defined operators, and
    /// predefined ones on types pcoll has no kernel for (long double, ...).
    Host { op: MPI_Op, datatype: MPI_Datatype, extent: usize },
}

impl Combiner for Combine {
    fn combine(&self, src: &[u8], dst: &mut [u8]) {
        match *self {
            Combine::Native(kernel) => (kernel.inplace)(src, dst),
            Combine::Host { op, datatype, extent } => {
                // Reduce_local takes an int count: go in chunks.
                let per_call = (c_int::MAX as usize / extent).max(1) * extent;
                for (s, d) in src.chunks(per_call).zip(dst.chunks_mut(per_call)) {
                    // SAFETY: both slices hold d.len() / extent whole elements of `datatype`.
                    unsafe {
                        PMPI_Reduce_local(
                            s.as_ptr().cast(),
                            d.as_mut_ptr().cast(),
                            (d.len() / extent) as c_int,
                            datatype,
                            op,
                        );
                    }
                }
            }
        }
    }

    fn combine_into(&self, first: &[u8], second: &[u8], out: &mut [u8]) {
        match *self {
            Combine::Native(kernel) => (kernel.into)(first, second, out),
            Combine::Host { .. } => {
                out.copy_from_slice(second);
                self.combine(first, out);
            }
        }
    }

    fn cheap_in_pieces(&self) -> bool {
        matches!(self, Combine::Native(_))
    }
}

/// Whether `op` is a user-defined operator (its handle may come to mean
/// another one once it is freed).
pub(super) fn is_user_op(op: MPI_Op) -> bool {
    // SAFETY: plain handle comparison in the shim.
    (unsafe { shim::pcoll_op_code(op) } as opc::Type) == opc::PCOLL_OP_USER
}

/// What pcoll needs to run a reduction with this datatype and operator.
pub(super) struct Reduction {
    /// Element extent: vectors are cut only at multiples of it.
    pub unit: usize,
    pub commutative: bool,
    pub combine: Combine,
}

/// Classifies a reduction; the error says why the host MPI must run it
/// (including every invalid combination, so the host reports it).
pub(super) fn reduction(datatype: MPI_Datatype, op: MPI_Op) -> Result<Reduction, &'static str> {
    let (cls, rep) = classify(datatype);
    let type_class = match cls {
        class::PCOLL_CLASS_NULL => return Err("null datatype"),
        class::PCOLL_CLASS_DERIVED => return Err("derived datatype"),
        class::PCOLL_CLASS_C_INTEGER => TypeClass::CInteger,
        class::PCOLL_CLASS_FORTRAN_INTEGER => TypeClass::FortranInteger,
        class::PCOLL_CLASS_MULTI_LANGUAGE => TypeClass::MultiLanguage,
        class::PCOLL_CLASS_FLOATING => TypeClass::Floating,
        class::PCOLL_CLASS_LOGICAL => TypeClass::Logical,
        class::PCOLL_CLASS_COMPLEX => TypeClass::Complex,
        class::PCOLL_CLASS_BYTE => TypeClass::Byte,
        class::PCOLL_CLASS_PAIR => TypeClass::Pair,
        _ => return Err("datatype without reduction operators"),
    };
    let unit = layout(datatype).extent;
    if unit <= 0 {
        return Err("datatype of non-positive extent");
    }
    let unit = unit as usize;
    // SAFETY: plain handle comparison in the shim.
    let code = unsafe { shim::pcoll_op_code(op) } as opc::Type;
    let host = Combine::Host { op, datatype, extent: unit };
    let predefined = match code {
        opc::PCOLL_OP_USER => {
            let mut commute: c_int = 0;
            // SAFETY: `op` is a user operator handle; `commute` is a valid local.
            unsafe { PMPI_Op_commutative(op, &mut commute) };
            return Ok(Reduction { unit, commutative: commute != 0, combine: host });
        }
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
        _ => return Err("not a reduction operator"),
    };
    if !predefined.valid_for(type_class) {
        return Err("operator not defined for this datatype");
    }
    // A native kernel only where its element layout is the host's.
    let native = elem(rep).filter(|e| e.extent() == unit);
    let combine = match native.and_then(|e| kernels::native(e, predefined)) {
        Some(kernel) => Combine::Native(kernel),
        None => host,
    };
    Ok(Reduction { unit, commutative: true, combine })
}

fn elem(rep: repr::Type) -> Option<Elem> {
    Some(match rep {
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
        _ => return None,
    })
}
