//! Classification of datatype and operator handles into what pcoll's pure
//! layers understand, and the combiners that apply an operator.

use super::host::{Host, OpKind, Repr, TypeKind, TypeLayout};
use super::thread::PerThread;
use crate::core::types::TypeClass;
use crate::exec::kernels::{self, Kernel};
use crate::exec::Combiner;
use std::ffi::c_void;

/// What a (non-null) predefined datatype is, from the thread's last ones
/// when it is among them.
fn cached<H: Host>(t: &PerThread<H>, datatype: H::Datatype) -> Option<(TypeKind, TypeLayout)> {
    t.types.borrow().iter().flatten().find(|p| p.0 == datatype).map(|p| (p.1, p.2))
}

/// What a datatype is. Predefined ones are remembered with their layout
/// (their handles never change meaning); derived ones are not (a freed
/// handle can be reused for another type).
pub fn kind<H: Host>(host: &H, t: &PerThread<H>, datatype: H::Datatype) -> TypeKind {
    if let Some((kind, _)) = cached(t, datatype) {
        return kind;
    }
    let kind = host.type_kind(datatype);
    if let TypeKind::Predefined { .. } = kind {
        let entry = (datatype, kind, host.type_layout(datatype));
        let mut all = t.types.borrow_mut();
        all.rotate_right(1);
        all[0] = Some(entry);
    }
    kind
}

/// The layout of a (non-null) datatype.
pub fn layout<H: Host>(host: &H, t: &PerThread<H>, datatype: H::Datatype) -> TypeLayout {
    match cached(t, datatype) {
        Some((_, layout)) => layout,
        None => host.type_layout(datatype),
    }
}

/// Whether collectives may use the datatype: not MPI_DATATYPE_NULL, and
/// predefined or committed (the host reports anything else).
pub fn is_usable_type<H: Host>(host: &H, t: &PerThread<H>, datatype: H::Datatype) -> bool {
    match kind(host, t, datatype) {
        TypeKind::Null => false,
        TypeKind::Derived => host.type_committed(datatype),
        TypeKind::Predefined { .. } => true,
    }
}

/// Whether a (non-null) datatype is predefined: its handle never comes to
/// mean another type.
pub fn is_predefined_type<H: Host>(host: &H, t: &PerThread<H>, datatype: H::Datatype) -> bool {
    kind(host, t, datatype) != TypeKind::Derived
}

/// Whether `op` is a user-defined operator (its handle may come to mean
/// another one once it is freed).
pub fn is_user_op<H: Host>(host: &H, op: H::Op) -> bool {
    host.op_kind(op) == OpKind::User
}

/// How a reduction combines two vectors.
pub enum Combine<H: Host> {
    /// A pcoll kernel.
    Native(Kernel),
    /// The host MPI's MPI_Reduce_local: user-defined operators, and
    /// predefined ones on types pcoll has no kernel for (long double, ...).
    Host { host: H, op: H::Op, datatype: H::Datatype, extent: usize },
}

impl<H: Host> Combiner for Combine<H> {
    fn combine(&self, src: &[u8], dst: &mut [u8]) {
        match *self {
            Combine::Native(kernel) => (kernel.inplace)(src, dst),
            Combine::Host { host, op, datatype, extent } => {
                // Reduce_local takes an int count: go in chunks.
                let per_call = (i32::MAX as usize / extent).max(1) * extent;
                for (s, d) in src.chunks(per_call).zip(dst.chunks_mut(per_call)) {
                    let count = d.len() / extent;
                    host.reduce_local(op, datatype, s, d, count);
                }
            }
        }
    }

    fn combine_into(&self, first: &[u8], second: &[u8], out: &mut [u8]) {
        match *self {
            Combine::Native(kernel) => (kernel.into)(first, second, out),
            Combine::Host { .. } => {
                crate::exec::copy::copy(out, second);
                self.combine(first, out);
            }
        }
    }

    fn combine_after(&self, first: &mut [u8], second: &[u8]) -> bool {
        match *self {
            Combine::Native(kernel) => {
                (kernel.after)(first, second);
                true
            }
            Combine::Host { .. } => false,
        }
    }

    fn cheap_in_pieces(&self) -> bool {
        matches!(self, Combine::Native(_))
    }
}

/// What pcoll needs to run a reduction with this datatype and operator.
pub struct Reduction<H: Host> {
    /// Element extent: vectors are cut only at multiples of it.
    pub unit: usize,
    pub commutative: bool,
    pub combine: Combine<H>,
}

/// Classifies a reduction; the error says why the host MPI must run it
/// (including every invalid combination, so the host reports it).
pub fn reduction<H: Host>(
    host: &H,
    t: &PerThread<H>,
    datatype: H::Datatype,
    op: H::Op,
) -> Result<Reduction<H>, &'static str> {
    let (class, repr) = match kind(host, t, datatype) {
        TypeKind::Null => return Err("null datatype"),
        TypeKind::Derived => return Err("derived datatype"),
        TypeKind::Predefined { class: None, .. } => return Err("datatype without reduction operators"),
        TypeKind::Predefined { class: Some(class), repr } => (class, repr),
    };
    let unit = layout(host, t, datatype).extent;
    if unit <= 0 {
        return Err("datatype of non-positive extent");
    }
    let unit = unit as usize;
    let on_host = Combine::Host { host: *host, op, datatype, extent: unit };
    let predefined = match host.op_kind(op) {
        OpKind::User => {
            return Ok(Reduction { unit, commutative: host.op_commutative(op), combine: on_host });
        }
        OpKind::Predefined(op) => op,
        OpKind::Other => return Err("not a reduction operator"),
    };
    if !predefined.valid_for(class) {
        return Err("operator not defined for this datatype");
    }
    // A native kernel only where its element layout is the host's.
    let native = match repr {
        Repr::Elem(e) if e.extent() == unit => kernels::native(e, predefined),
        _ => None,
    };
    let combine = native.map_or(on_host, Combine::Native);
    Ok(Reduction { unit, commutative: true, combine })
}

/// `pcoll_reduce_local`: `inoutbuf = inbuf ∘ inoutbuf` with pcoll's
/// kernel, what pcoll's collectives combine with. `false`, having done
/// nothing, for pairs pcoll has no kernel for and invalid arguments: the
/// host's MPI_Reduce_local takes those.
pub fn reduce_local<H: Host>(
    host: &H,
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: i32,
    datatype: H::Datatype,
    op: H::Op,
) -> bool {
    match H::with_thread(|t| reduction(host, t, datatype, op)) {
        Ok(Reduction { unit, combine: Combine::Native(kernel), .. })
            if count > 0 && !inbuf.is_null() && !inoutbuf.is_null() =>
        {
            let bytes = count as usize * unit;
            // SAFETY: MPI_Reduce_local's buffers hold `count` elements of
            // `datatype`, whose extent is `unit`; they do not overlap.
            let (src, dst) = unsafe {
                (
                    std::slice::from_raw_parts(inbuf.cast::<u8>(), bytes),
                    std::slice::from_raw_parts_mut(inoutbuf.cast::<u8>(), bytes),
                )
            };
            (kernel.inplace)(src, dst);
            true
        }
        _ => false,
    }
}

/// The group of a predefined datatype and its representation (`None` for
/// others).
pub fn predefined<H: Host>(host: &H, t: &PerThread<H>, datatype: H::Datatype) -> Option<(Option<TypeClass>, Repr)> {
    match kind(host, t, datatype) {
        TypeKind::Predefined { class, repr } => Some((class, repr)),
        _ => None,
    }
}
