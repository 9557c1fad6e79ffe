//! Native reduction kernels: `dst[i] = src[i] ∘ dst[i]` over byte slices
//! holding whole elements of one [`Elem`] representation.
//!
//! Safe Rust but for the AVX2/AVX-512 dispatch. Every kernel is one instance of
//! the generic loop: it walks both slices in `chunks_exact` steps of the element size
//! and decodes with `from_ne_bytes`, so unaligned buffers are fine, the
//! chunk-length checks fold away once the size is a constant, and LLVM turns
//! the loop into packed SIMD for the primitive types.
//!
//! Semantics follow MPICH and Open MPI, whose loops compute
//! `inout[i] = f(inout[i], in[i])` with `inout` = our `dst`, `in` = `src`:
//! * integers: SUM/PROD wrap (two's complement), MAX/MIN, LAND/LOR/LXOR
//!   give 0 or 1 of the same type with C truth (`x != 0`), BAND/BOR/BXOR;
//! * floats: SUM is `dst + src`, PROD `dst * src`, MAX is C's
//!   `dst > src ? dst : src` and MIN `dst < src ? dst : src`. NaN handling
//!   is therefore exactly the C one: a comparison with NaN is false, so the
//!   result is `src` whenever either operand is NaN (a NaN in `src` wins, a
//!   NaN in `dst` is replaced by `src`); for ±0 the result is `src`;
//! * Bool (C `_Bool`): LAND/LOR/LXOR, result 0 or 1;
//! * complex: SUM componentwise, PROD `(a+bi)(c+di) = (ac-bd) + (ad+bc)i`
//!   with `a+bi` from `src` and `c+di` from `dst`;
//! * value/index pairs: MINLOC takes `src` if `src.v < dst.v`, keeps `dst`
//!   if `src.v > dst.v` (or either is NaN), and on equal values keeps the
//!   value of `dst` and the smaller index; MAXLOC the same with `>`. The
//!   padding bytes of `dst` are left untouched.

use std::ops::{Add, BitAnd, BitOr, BitXor, Mul, Sub};

use crate::core::types::{Elem, ReduceOp};

/// A native reduction kernel, in its three forms. Slices have the same
/// length, a multiple of the element's extent (possibly zero), and need no
/// alignment; the operand that comes first in rank order is always the
/// first argument.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    /// `dst[i] = src[i] ∘ dst[i]`.
    pub inplace: fn(src: &[u8], dst: &mut [u8]),
    /// `out[i] = first[i] ∘ second[i]`.
    pub into: fn(first: &[u8], second: &[u8], out: &mut [u8]),
    /// `first[i] = first[i] ∘ second[i]`: in place into the first operand
    /// (a Reduce root that put its own vector into its receive buffer
    /// first; MPI_Reduce_local has no such form).
    pub after: fn(first: &mut [u8], second: &[u8]),
}

/// The native kernel for an element representation and operator, or `None`
/// where the pair makes no sense for the representation (bitwise operators
/// on floats, MINLOC on non-pair types, LAND on complex, ...). Exactly the
/// pairs that [`ReduceOp::valid_for`] accepts for the representation's
/// datatype group have a kernel. The loops are compiled for the widest
/// vector instructions the processor has ([`Isa::best`]).
pub fn native(elem: Elem, op: ReduceOp) -> Option<Kernel> {
    native_for(elem, op, Isa::best())
}

/// The instruction sets the kernels are compiled for: the same loops, LLVM
/// only gets wider vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// The target's baseline (SSE2 on x86-64).
    Baseline,
    /// AVX2: 256-bit vectors.
    Avx2,
    /// AVX-512 F/BW/DQ/VL: 512-bit vectors, byte and 64-bit multiplies.
    /// Open MPI 5's op/avx uses them too. Measured with bench/kernels.c
    /// against Open MPI 5.0.11's MPI_Reduce_local on this project's Xeon:
    /// the AVX2 loops at 0.62-0.95 of its throughput for the common types
    /// (SUM/PROD/MAX/MIN, 4 KiB and 256 KiB), the AVX-512 loops at
    /// 0.78-1.09 (about 1.0 at 256 KiB, 0.85 at 4 KiB).
    Avx512,
}

impl Isa {
    /// The widest set this processor has (detected once).
    pub fn best() -> Isa {
        static BEST: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| Isa::supported().last().copied().unwrap_or(Isa::Baseline))
    }

    /// Every set this processor has, narrowest first.
    fn supported() -> Vec<Isa> {
        let mut sets = vec![Isa::Baseline];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") {
                sets.push(Isa::Avx2);
            }
            if has!("avx512f") && has!("avx512bw") && has!("avx512dq") && has!("avx512vl") {
                sets.push(Isa::Avx512);
            }
        }
        sets
    }
}

/// [`native`] compiled for `isa`, which the caller has checked the
/// processor supports (tests use it to check every set the machine has).
fn native_for(elem: Elem, op: ReduceOp, isa: Isa) -> Option<Kernel> {
    match elem {
        Elem::I8 => integer::<i8>(op, isa),
        Elem::U8 => integer::<u8>(op, isa),
        Elem::I16 => integer::<i16>(op, isa),
        Elem::U16 => integer::<u16>(op, isa),
        Elem::I32 => integer::<i32>(op, isa),
        Elem::U32 => integer::<u32>(op, isa),
        Elem::I64 => integer::<i64>(op, isa),
        Elem::U64 => integer::<u64>(op, isa),
        Elem::F32 => arith::<f32>(op, isa),
        Elem::F64 => arith::<f64>(op, isa),
        // C `_Bool` is one byte holding 0 or 1: the u8 logical kernels.
        Elem::Bool => logical::<u8>(op, isa),
        Elem::C32 => complex::<f32>(op, isa),
        Elem::C64 => complex::<f64>(op, isa),
        Elem::F32I32 => loc::<Pair<f32, 4, 8>>(op, isa),
        Elem::F64I32 => loc::<Pair<f64, 8, 16>>(op, isa),
        Elem::I64I32 => loc::<Pair<i64, 8, 16>>(op, isa),
        Elem::I32I32 => loc::<Pair<i32, 4, 8>>(op, isa),
        Elem::I16I32 => loc::<Pair<i16, 4, 8>>(op, isa),
    }
}

// ---------------------------------------------------------------------------
// Operator tables per kind of representation.

/// SUM, PROD, MAX, MIN: integers and floats.
fn arith<T: Num>(op: ReduceOp, isa: Isa) -> Option<Kernel> {
    let k = match op {
        ReduceOp::Sum => kernel::<T, Sum>(isa),
        ReduceOp::Prod => kernel::<T, Prod>(isa),
        ReduceOp::Max => kernel::<T, Max>(isa),
        ReduceOp::Min => kernel::<T, Min>(isa),
        _ => return None,
    };
    Some(k)
}

/// LAND, LOR, LXOR: integers and C `_Bool`.
fn logical<T: Int>(op: ReduceOp, isa: Isa) -> Option<Kernel> {
    let k = match op {
        ReduceOp::Land => kernel::<T, Land>(isa),
        ReduceOp::Lor => kernel::<T, Lor>(isa),
        ReduceOp::Lxor => kernel::<T, Lxor>(isa),
        _ => return None,
    };
    Some(k)
}

/// Everything but MINLOC/MAXLOC: integers.
fn integer<T: Int>(op: ReduceOp, isa: Isa) -> Option<Kernel> {
    let k = match op {
        ReduceOp::Band => kernel::<T, Band>(isa),
        ReduceOp::Bor => kernel::<T, Bor>(isa),
        ReduceOp::Bxor => kernel::<T, Bxor>(isa),
        _ => return arith::<T>(op, isa).or_else(|| logical::<T>(op, isa)),
    };
    Some(k)
}

/// SUM (componentwise, so the scalar kernel) and PROD: complex.
fn complex<F: Num>(op: ReduceOp, isa: Isa) -> Option<Kernel>
where
    Prod: Op<Cx<F>>,
{
    let k = match op {
        ReduceOp::Sum => kernel::<F, Sum>(isa),
        ReduceOp::Prod => kernel::<Cx<F>, Prod>(isa),
        _ => return None,
    };
    Some(k)
}

/// MINLOC, MAXLOC: value/index pairs.
fn loc<P: Lanes>(op: ReduceOp, isa: Isa) -> Option<Kernel>
where
    MinLoc: Op<P>,
    MaxLoc: Op<P>,
{
    let k = match op {
        ReduceOp::MinLoc => kernel::<P, MinLoc>(isa),
        ReduceOp::MaxLoc => kernel::<P, MaxLoc>(isa),
        _ => return None,
    };
    Some(k)
}

// ---------------------------------------------------------------------------
// The one loop.

/// A value stored in `W` native-endian bytes at any alignment.
trait Lanes: Copy {
    /// Bytes per element (the extent).
    const W: usize;
    /// Whether `store` leaves some of the `W` bytes (padding) untouched.
    const PADDED: bool = false;
    /// Whether LLVM turns an in-place pick of one of two values into
    /// masked stores under AVX2 (floats).
    const MASKED_SELECT: bool = false;
    /// Decodes from a chunk of exactly `W` bytes.
    fn load(b: &[u8]) -> Self;
    /// Encodes into a chunk of exactly `W` bytes (padding may be left as is).
    fn store(self, b: &mut [u8]);
}

/// A reduction operator on `T`: the result of `src ∘ dst`.
trait Op<T> {
    /// The result is one of the operands (max, min).
    const SELECTS: bool = false;
    fn apply(src: T, dst: T) -> T;
}

/// The kernel of `O` on `T` compiled for `isa`. One exception, measured
/// (bench/kernels.c): max and min on floats, in place, keep the baseline
/// loop under AVX2: LLVM stores only the elements that change, and AVX2's
/// masked stores are microcoded and several times slower on AMD
/// processors. AVX-512 has masked stores of its own (mask registers), and
/// there the select loop is the faster: 0.93-1.09 of Open MPI 5's op on
/// f64 max against 0.88-0.93 with the baseline loop.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn kernel<T: Lanes, O: Op<T>>(isa: Isa) -> Kernel {
    let baseline = Kernel { inplace: inplace::<T, O>, into: into::<T, O>, after: after::<T, O> };
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Baseline => {}
        Isa::Avx2 => {
            let masked = O::SELECTS && T::MASKED_SELECT;
            let wide = Kernel { inplace: avx2::inplace::<T, O>, into: avx2::into::<T, O>, after: avx2::after::<T, O> };
            return if masked { Kernel { into: wide.into, ..baseline } } else { wide };
        }
        Isa::Avx512 => {
            return Kernel {
                inplace: avx512::inplace::<T, O>,
                into: avx512::into::<T, O>,
                after: avx512::after::<T, O>,
            }
        }
    }
    baseline
}

/// A module of the three loops compiled with `$features` enabled; its
/// wrappers are only handed out by [`kernel`] for an [`Isa`] that
/// [`Isa::best`] found on the processor (or below it).
#[cfg(target_arch = "x86_64")]
macro_rules! wide_loops {
    ($module:ident, $features:literal) => {
        mod $module {
            use super::{Lanes, Op};

            #[target_feature(enable = $features)]
            fn inplace_wide<T: Lanes, O: Op<T>>(src: &[u8], dst: &mut [u8]) {
                super::inplace::<T, O>(src, dst)
            }

            #[target_feature(enable = $features)]
            fn into_wide<T: Lanes, O: Op<T>>(first: &[u8], second: &[u8], out: &mut [u8]) {
                super::into::<T, O>(first, second, out)
            }

            #[target_feature(enable = $features)]
            fn after_wide<T: Lanes, O: Op<T>>(first: &mut [u8], second: &[u8]) {
                super::after::<T, O>(first, second)
            }

            pub(super) fn inplace<T: Lanes, O: Op<T>>(src: &[u8], dst: &mut [u8]) {
                // SAFETY: handed out only where the processor has the features.
                unsafe { inplace_wide::<T, O>(src, dst) }
            }

            pub(super) fn after<T: Lanes, O: Op<T>>(first: &mut [u8], second: &[u8]) {
                // SAFETY: handed out only where the processor has the features.
                unsafe { after_wide::<T, O>(first, second) }
            }

            pub(super) fn into<T: Lanes, O: Op<T>>(first: &[u8], second: &[u8], out: &mut [u8]) {
                // SAFETY: handed out only where the processor has the features.
                unsafe { into_wide::<T, O>(first, second, out) }
            }
        }
    };
}
#[cfg(target_arch = "x86_64")]
wide_loops!(avx2, "avx2");
#[cfg(target_arch = "x86_64")]
wide_loops!(avx512, "avx512f,avx512bw,avx512dq,avx512vl");

#[inline(always)]
fn inplace<T: Lanes, O: Op<T>>(src: &[u8], dst: &mut [u8]) {
    assert_eq!(src.len(), dst.len(), "reduction operands of different lengths");
    debug_assert_eq!(src.len() % T::W, 0, "reduction of a partial element");
    for (s, d) in src.chunks_exact(T::W).zip(dst.chunks_exact_mut(T::W)) {
        O::apply(T::load(s), T::load(d)).store(d);
    }
}

#[inline(always)]
fn after<T: Lanes, O: Op<T>>(first: &mut [u8], second: &[u8]) {
    assert_eq!(first.len(), second.len(), "reduction operands of different lengths");
    debug_assert_eq!(first.len() % T::W, 0, "reduction of a partial element");
    for (f, s) in first.chunks_exact_mut(T::W).zip(second.chunks_exact(T::W)) {
        O::apply(T::load(f), T::load(s)).store(f);
    }
}

#[inline(always)]
fn into<T: Lanes, O: Op<T>>(first: &[u8], second: &[u8], out: &mut [u8]) {
    assert!(first.len() == out.len() && second.len() == out.len(), "reduction operands of different lengths");
    debug_assert_eq!(out.len() % T::W, 0, "reduction of a partial element");
    if T::PADDED {
        // Padding is not part of the value: keep the second operand's, as
        // the in-place form keeps the destination's.
        super::copy::copy(out, second);
    }
    for ((a, b), o) in first.chunks_exact(T::W).zip(second.chunks_exact(T::W)).zip(out.chunks_exact_mut(T::W)) {
        O::apply(T::load(a), T::load(b)).store(o);
    }
}

// ---------------------------------------------------------------------------
// Element representations.

/// Integers and floats: the arithmetic of MPI's SUM and PROD.
trait Num: Lanes + PartialOrd {
    /// `dst + src`, wrapping for integers.
    fn add(self, src: Self) -> Self;
    /// `dst * src`, wrapping for integers.
    fn mul(self, src: Self) -> Self;
}

/// Integers: C truth values and the bitwise operators.
trait Int: Num + BitAnd<Output = Self> + BitOr<Output = Self> + BitXor<Output = Self> {
    fn truth(self) -> bool;
    fn of(b: bool) -> Self;
}

macro_rules! lanes {
    ($masked:expr; $($t:ty),*) => {$(
        impl Lanes for $t {
            const W: usize = std::mem::size_of::<$t>();
            const MASKED_SELECT: bool = $masked;
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().expect("chunk of one element"))
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
lanes!(false; i8, u8, i16, u16, i32, u32, i64, u64);
lanes!(true; f32, f64);

macro_rules! ints {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)]
            fn add(self, src: Self) -> Self { self.wrapping_add(src) }
            #[inline(always)]
            fn mul(self, src: Self) -> Self { self.wrapping_mul(src) }
        }
        impl Int for $t {
            #[inline(always)]
            fn truth(self) -> bool { self != 0 }
            #[inline(always)]
            fn of(b: bool) -> Self { b as $t }
        }
    )*};
}
ints!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! floats {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)]
            fn add(self, src: Self) -> Self { self + src }
            #[inline(always)]
            fn mul(self, src: Self) -> Self { self * src }
        }
    )*};
}
floats!(f32, f64);

/// A C complex number: real part then imaginary part.
#[derive(Clone, Copy)]
struct Cx<F>(F, F);

impl<F: Lanes> Lanes for Cx<F> {
    const W: usize = 2 * F::W;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        let (re, im) = b.split_at(F::W);
        Cx(F::load(re), F::load(im))
    }
    #[inline(always)]
    fn store(self, b: &mut [u8]) {
        let (re, im) = b.split_at_mut(F::W);
        self.0.store(re);
        self.1.store(im);
    }
}

/// The C struct `{ V v; int i; }` of MINLOC/MAXLOC: the value at offset 0,
/// the index at offset `I`, `E` bytes in all (trailing or inner padding).
#[derive(Clone, Copy)]
struct Pair<V, const I: usize, const E: usize> {
    v: V,
    i: i32,
}

impl<V: Lanes, const I: usize, const E: usize> Lanes for Pair<V, I, E> {
    const W: usize = E;
    const PADDED: bool = V::W + 4 < E;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        Pair { v: V::load(&b[..V::W]), i: i32::load(&b[I..I + 4]) }
    }
    #[inline(always)]
    fn store(self, b: &mut [u8]) {
        self.v.store(&mut b[..V::W]);
        self.i.store(&mut b[I..I + 4]);
    }
}

// ---------------------------------------------------------------------------
// Operators.

struct Sum;
struct Prod;
struct Max;
struct Min;
struct Land;
struct Lor;
struct Lxor;
struct Band;
struct Bor;
struct Bxor;
struct MinLoc;
struct MaxLoc;

macro_rules! op {
    ($name:ident, $bound:ident, $selects:expr, |$s:ident, $d:ident| $body:expr) => {
        impl<T: $bound> Op<T> for $name {
            const SELECTS: bool = $selects;
            #[inline(always)]
            fn apply($s: T, $d: T) -> T {
                $body
            }
        }
    };
}
op!(Sum, Num, false, |s, d| d.add(s));
op!(Prod, Num, false, |s, d| d.mul(s));
// C's `MAX(dst, src)`; a select, so LLVM emits packed max/blend.
op!(Max, Num, true, |s, d| if d > s { d } else { s });
op!(Min, Num, true, |s, d| if d < s { d } else { s });
// `&`, `|`, `!=` on bools rather than `&&`/`||`: no branches to vectorise.
op!(Land, Int, false, |s, d| T::of(d.truth() & s.truth()));
op!(Lor, Int, false, |s, d| T::of(d.truth() | s.truth()));
op!(Lxor, Int, false, |s, d| T::of(d.truth() != s.truth()));
op!(Band, Int, false, |s, d| d & s);
op!(Bor, Int, false, |s, d| d | s);
op!(Bxor, Int, false, |s, d| d ^ s);

impl<F> Op<Cx<F>> for Prod
where
    F: Copy + Add<Output = F> + Sub<Output = F> + Mul<Output = F>,
{
    #[inline(always)]
    fn apply(Cx(a, b): Cx<F>, Cx(c, d): Cx<F>) -> Cx<F> {
        Cx(a * c - b * d, a * d + b * c)
    }
}

/// MINLOC and MAXLOC: `src` if `better(src.v, dst.v)`, the smaller index on
/// equal values, `dst` otherwise (including NaN values).
#[inline(always)]
fn pick<V: PartialOrd, const I: usize, const E: usize>(
    s: Pair<V, I, E>,
    d: Pair<V, I, E>,
    better: bool,
) -> Pair<V, I, E> {
    // Selects rather than branches, so LLVM can use blends.
    let i = if s.v == d.v { d.i.min(s.i) } else { d.i };
    Pair { v: if better { s.v } else { d.v }, i: if better { s.i } else { i } }
}

impl<V: PartialOrd + Copy, const I: usize, const E: usize> Op<Pair<V, I, E>> for MinLoc {
    #[inline(always)]
    fn apply(s: Pair<V, I, E>, d: Pair<V, I, E>) -> Pair<V, I, E> {
        pick(s, d, s.v < d.v)
    }
}

impl<V: PartialOrd + Copy, const I: usize, const E: usize> Op<Pair<V, I, E>> for MaxLoc {
    #[inline(always)]
    fn apply(s: Pair<V, I, E>, d: Pair<V, I, E>) -> Pair<V, I, E> {
        pick(s, d, s.v > d.v)
    }
}

#[cfg(test)]
mod tests {
    //! Every (Elem, ReduceOp) pair against a scalar reference written
    //! independently of the kernels: integers in i128, floats through f64
    //! (exact for one f32 addition or multiplication), complex products and
    //! pairs decoded field by field at their C offsets.

    use super::*;
    use crate::core::types::TypeClass;

    const ELEMS: [Elem; 18] = [
        Elem::I8,
        Elem::U8,
        Elem::I16,
        Elem::U16,
        Elem::I32,
        Elem::U32,
        Elem::I64,
        Elem::U64,
        Elem::F32,
        Elem::F64,
        Elem::Bool,
        Elem::C32,
        Elem::C64,
        Elem::F32I32,
        Elem::F64I32,
        Elem::I64I32,
        Elem::I32I32,
        Elem::I16I32,
    ];
    const OPS: [ReduceOp; 12] = [
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Land,
        ReduceOp::Band,
        ReduceOp::Lor,
        ReduceOp::Bor,
        ReduceOp::Lxor,
        ReduceOp::Bxor,
        ReduceOp::MinLoc,
        ReduceOp::MaxLoc,
    ];

    fn class(e: Elem) -> TypeClass {
        use Elem::*;
        match e {
            I8 | U8 | I16 | U16 | I32 | U32 | I64 | U64 => TypeClass::CInteger,
            F32 | F64 => TypeClass::Floating,
            Bool => TypeClass::Logical,
            C32 | C64 => TypeClass::Complex,
            F32I32 | F64I32 | I64I32 | I32I32 | I16I32 => TypeClass::Pair,
        }
    }

    /// (signed, bytes) of an integer representation.
    fn int_kind(e: Elem) -> Option<(bool, usize)> {
        use Elem::*;
        match e {
            I8 | I16 | I32 | I64 => Some((true, e.extent())),
            U8 | U16 | U32 | U64 => Some((false, e.extent())),
            _ => None,
        }
    }

    /// Native-endian bytes, least significant first.
    fn le(b: &[u8]) -> Vec<u8> {
        let mut b = b.to_vec();
        if cfg!(target_endian = "big") {
            b.reverse();
        }
        b
    }

    fn get_int(b: &[u8], signed: bool) -> i128 {
        let b = le(b);
        let mut x = [0u8; 16];
        x[..b.len()].copy_from_slice(&b);
        if signed && b[b.len() - 1] & 0x80 != 0 {
            x[b.len()..].fill(0xff);
        }
        i128::from_le_bytes(x)
    }

    fn put_int(v: i128, out: &mut [u8]) {
        let n = out.len();
        out.copy_from_slice(&le(&v.to_le_bytes()[..n]));
    }

    fn get_f(b: &[u8]) -> f64 {
        match b.len() {
            4 => f32::from_ne_bytes(b.try_into().unwrap()) as f64,
            _ => f64::from_ne_bytes(b.try_into().unwrap()),
        }
    }

    fn put_f(v: f64, out: &mut [u8]) {
        match out.len() {
            4 => out.copy_from_slice(&(v as f32).to_ne_bytes()),
            _ => out.copy_from_slice(&v.to_ne_bytes()),
        }
    }

    /// Reference for one element; `d` is updated in place.
    fn reference(e: Elem, op: ReduceOp, s: &[u8], d: &mut [u8]) {
        use ReduceOp::*;
        if let Some((signed, _)) = int_kind(e) {
            let (a, b) = (get_int(s, signed), get_int(d, signed));
            let t = |x: i128| x != 0;
            let r = match op {
                Sum => a + b,
                Prod => a.wrapping_mul(b),
                Max => a.max(b),
                Min => a.min(b),
                Land => (t(a) && t(b)) as i128,
                Lor => (t(a) || t(b)) as i128,
                Lxor => (t(a) ^ t(b)) as i128,
                Band => a & b,
                Bor => a | b,
                Bxor => a ^ b,
                MinLoc | MaxLoc => unreachable!(),
            };
            return put_int(r, d);
        }
        match e {
            Elem::F32 | Elem::F64 => {
                let (a, b) = (get_f(s), get_f(d));
                match op {
                    Sum => put_f(b + a, d),
                    Prod => put_f(b * a, d),
                    // MPL_MAX(inout, in): the chosen operand's exact bits.
                    Max if b > a => {}
                    Min if b < a => {}
                    Max | Min => d.copy_from_slice(s),
                    _ => unreachable!(),
                }
            }
            Elem::Bool => {
                let (a, b) = (s[0] != 0, d[0] != 0);
                d[0] = match op {
                    Land => a && b,
                    Lor => a || b,
                    Lxor => a != b,
                    _ => unreachable!(),
                } as u8;
            }
            Elem::C32 | Elem::C64 => {
                let h = e.extent() / 2;
                let (a, b) = (get_f(&s[..h]), get_f(&s[h..]));
                let (c, dd) = (get_f(&d[..h]), get_f(&d[h..]));
                let (re, im) = match (op, h) {
                    (Sum, _) => (c + a, dd + b),
                    // Rounded at every step in the element's precision.
                    (Prod, 4) => {
                        let r = |x: f64| x as f32;
                        let (a, b, c, dd) = (r(a), r(b), r(c), r(dd));
                        ((a * c - b * dd) as f64, (a * dd + b * c) as f64)
                    }
                    (Prod, _) => (a * c - b * dd, a * dd + b * c),
                    _ => unreachable!(),
                };
                put_f(re, &mut d[..h]);
                put_f(im, &mut d[h..]);
            }
            _ => {
                let (vw, io) = pair_layout(e);
                let val = |b: &[u8]| -> (Option<f64>, i128) {
                    match e {
                        Elem::F32I32 | Elem::F64I32 => (Some(get_f(&b[..vw])), 0),
                        _ => (None, get_int(&b[..vw], true)),
                    }
                };
                let (sv, dv) = (val(s), val(d));
                let ord = match (sv.0, dv.0) {
                    (Some(x), Some(y)) => x.partial_cmp(&y),
                    _ => sv.1.partial_cmp(&dv.1),
                };
                let (si, di) = (get_int(&s[io..io + 4], true), get_int(&d[io..io + 4], true));
                let want = if op == MinLoc { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater };
                if ord == Some(want) {
                    d[..vw].copy_from_slice(&s[..vw]);
                    d[io..io + 4].copy_from_slice(&s[io..io + 4]);
                } else if ord == Some(std::cmp::Ordering::Equal) {
                    put_int(si.min(di), &mut d[io..io + 4]);
                }
            }
        }
    }

    /// xorshift64*: deterministic random-ish bytes.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
            xs[(self.next() % xs.len() as u64) as usize]
        }
    }

    /// A pair's value width and index offset: value at 0, index at 4 or 8.
    fn pair_layout(e: Elem) -> (usize, usize) {
        match e {
            Elem::F32I32 | Elem::I32I32 => (4, 4),
            Elem::I16I32 => (2, 4),
            _ => (8, 8),
        }
    }

    /// Whether each byte of an element of `e` is padding (pairs only).
    fn padding(e: Elem) -> Vec<bool> {
        let pair = class(e) == TypeClass::Pair;
        let (vw, io) = pair_layout(e);
        (0..e.extent()).map(|i| pair && i >= vw && !(io..io + 4).contains(&i)).collect()
    }

    /// One random element, biased towards edge cases. `pad` is the byte
    /// written into pair padding.
    fn element(e: Elem, rng: &mut Rng, pad: u8) -> Vec<u8> {
        let w = e.extent();
        let mut b: Vec<u8> = (0..w).map(|_| rng.next() as u8).collect();
        let edge = rng.next().is_multiple_of(3);
        if let Some((signed, n)) = int_kind(e) {
            if edge {
                let bits = 8 * n as u32;
                let (lo, hi) =
                    if signed { (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1) } else { (0, (1i128 << bits) - 1) };
                put_int(rng.pick(&[lo, hi, 0, 1, -1, 2, lo + 1, hi - 1, 3]), &mut b);
            }
            return b;
        }
        let fedge = [0.0, -0.0, 1.0, -1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e-310, 3.25];
        match e {
            Elem::F32 | Elem::F64 | Elem::C32 | Elem::C64 => {
                let h = if matches!(e, Elem::F32 | Elem::F64) { w } else { w / 2 };
                for part in b.chunks_mut(h) {
                    if rng.next().is_multiple_of(3) {
                        put_f(rng.pick(&fedge), part);
                    }
                }
            }
            Elem::Bool => b[0] &= 1,
            _ => {
                let (vw, io) = pair_layout(e);
                b.fill(pad);
                // Few distinct values, so that ties (and NaN) are common.
                let v = rng.pick(&[-2.0, 0.0, -0.0, 1.0, 7.0, f64::NAN]);
                match e {
                    Elem::F32I32 | Elem::F64I32 => put_f(v, &mut b[..vw]),
                    _ => put_int(if v.is_nan() { i64::MIN as i128 } else { v as i128 }, &mut b[..vw]),
                }
                let i = rng.pick(&[0, 1, 2, 5, -1, i32::MIN, i32::MAX]) as i128;
                put_int(i, &mut b[io..io + 4]);
            }
        }
        b
    }

    fn same(e: Elem, op: ReduceOp, got: &[u8], want: &[u8]) -> bool {
        let float = matches!(e, Elem::F32 | Elem::F64 | Elem::C32 | Elem::C64);
        if !float || !matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
            return got == want;
        }
        // Arithmetic NaNs: the payload is unspecified, only NaN-ness counts.
        let h = if e.extent() == 16 || e == Elem::F64 { 8 } else { 4 };
        got.chunks(h).zip(want.chunks(h)).all(|(g, w)| {
            let (g, w) = (get_f(g), get_f(w));
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())
        })
    }

    /// Runs `native(e, op)`, compiled for every instruction set the
    /// processor has, over `n` elements at byte offset `off` (so also
    /// unaligned) and compares with the reference element by element.
    fn check(e: Elem, op: ReduceOp, n: usize, off: usize, seed: u64) {
        let w = e.extent();
        let mut rng = Rng(seed | 1);
        let mut src = vec![0u8; off];
        let mut operand = vec![0u8; off];
        for _ in 0..n {
            src.extend(element(e, &mut rng, 0x5a));
            operand.extend(element(e, &mut rng, 0xa5));
        }
        let mut want = operand.clone();
        for (s, d) in src[off..].chunks(w).zip(want[off..].chunks_mut(w)) {
            reference(e, op, s, d);
        }
        // The form in place into the first operand keeps that one's
        // padding: from a first operand with the second's padding.
        let mut first = src.clone();
        let pad = padding(e);
        for (f, o) in first[off..].chunks_mut(w).zip(operand[off..].chunks(w)) {
            for ((byte, &ob), _) in f.iter_mut().zip(o).zip(&pad).filter(|(_, &is_pad)| is_pad) {
                *byte = ob;
            }
        }
        for isa in Isa::supported() {
            let k = native_for(e, op, isa).unwrap();
            // The ternary form into a buffer of junk, from the untouched operands.
            let mut dst = operand.clone();
            let mut out = vec![0x3cu8; dst.len() - off];
            (k.into)(&src[off..], &dst[off..], &mut out);
            (k.inplace)(&src[off..], &mut dst[off..]);
            let mut after = first.clone();
            (k.after)(&mut after[off..], &operand[off..]);
            for (form, got) in [("in place", &dst[off..]), ("into", &out[..]), ("after", &after[off..])] {
                for (j, ((s, g), x)) in src[off..].chunks(w).zip(got.chunks(w)).zip(want[off..].chunks(w)).enumerate() {
                    assert!(
                        same(e, op, g, x),
                        "{e:?} {op:?} {isa:?} {form} n={n} element {j}: src {s:02x?} got {g:02x?} want {x:02x?}"
                    );
                }
            }
        }
    }

    #[test]
    fn none_exactly_for_meaningless_pairs() {
        let mut some = 0;
        for e in ELEMS {
            for op in OPS {
                assert_eq!(native(e, op).is_some(), op.valid_for(class(e)), "{e:?} {op:?}");
                some += native(e, op).is_some() as usize;
            }
        }
        // 8 integers x 10, 2 floats x 4, Bool x 3, 2 complex x 2, 5 pairs x 2.
        assert_eq!(some, 80 + 8 + 3 + 4 + 10);
        assert!(native(Elem::F64, ReduceOp::Band).is_none());
        assert!(native(Elem::I32, ReduceOp::MinLoc).is_none());
        assert!(native(Elem::C64, ReduceOp::Land).is_none());
        assert!(native(Elem::Bool, ReduceOp::Bor).is_none());
        assert!(native(Elem::I32I32, ReduceOp::Sum).is_none());
    }

    #[test]
    fn every_kernel_matches_reference() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for e in ELEMS {
            for op in OPS {
                if native(e, op).is_none() {
                    continue;
                }
                for (n, off) in [(1, 0), (2, 0), (7, 1), (64, 0), (1000, 3), (1031, 0)] {
                    seed = seed.wrapping_add(0x1234_5678_9abc_def1);
                    check(e, op, n, off, seed);
                }
            }
        }
    }

    #[test]
    fn empty_and_odd_lengths() {
        for e in ELEMS {
            for op in OPS {
                if let Some(k) = native(e, op) {
                    (k.inplace)(&[], &mut []);
                    (k.into)(&[], &[], &mut []);
                    (k.after)(&mut [], &[]);
                    check(e, op, 0, 0, 1);
                    check(e, op, 13, 1, 7);
                }
            }
        }
    }

    #[test]
    fn hand_picked_cases() {
        let f = |e, op, s: &[u8], d: &[u8]| {
            let mut d = d.to_vec();
            (native(e, op).unwrap().inplace)(s, &mut d);
            d
        };
        let b = |xs: &[i32]| xs.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let g = |xs: &[f64]| xs.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        // Wraparound.
        assert_eq!(f(Elem::I32, ReduceOp::Sum, &b(&[i32::MAX]), &b(&[1])), b(&[i32::MIN]));
        assert_eq!(f(Elem::U8, ReduceOp::Prod, &[16], &[17]), [16]);
        assert_eq!(f(Elem::I8, ReduceOp::Prod, &[0x80], &[0xff]), [0x80]);
        // C truth values.
        assert_eq!(f(Elem::I32, ReduceOp::Land, &b(&[4, 0, -3]), &b(&[2, 5, -1])), b(&[1, 0, 1]));
        assert_eq!(f(Elem::I32, ReduceOp::Lxor, &b(&[4, 0, -3]), &b(&[2, 5, 0])), b(&[0, 1, 1]));
        // NaN: C's `dst > src ? dst : src`.
        let m = f(Elem::F64, ReduceOp::Max, &g(&[f64::NAN, 1.0, 0.0]), &g(&[1.0, f64::NAN, -0.0]));
        let m: Vec<f64> = m.chunks(8).map(get_f).collect();
        assert!(m[0].is_nan() && m[1] == 1.0 && m[2].to_bits() == 0.0f64.to_bits());
        // Complex product, src * dst: (1+2i)(3+4i) = -5+10i.
        assert_eq!(f(Elem::C64, ReduceOp::Prod, &g(&[1.0, 2.0]), &g(&[3.0, 4.0])), g(&[-5.0, 10.0]));
        // MINLOC/MAXLOC on {double, int, pad}: ties take the smaller index,
        // padding of dst untouched.
        let p = |v: f64, i: i32, pad: u8| [&v.to_ne_bytes()[..], &i.to_ne_bytes(), &[pad; 4]].concat();
        let s = [p(1.0, 9, 0), p(2.0, 3, 0), p(5.0, 7, 0)].concat();
        let d = [p(2.0, 4, 0xee), p(2.0, 8, 0xee), p(5.0, 2, 0xee)].concat();
        let want_min = [p(1.0, 9, 0xee), p(2.0, 3, 0xee), p(5.0, 2, 0xee)].concat();
        let want_max = [p(2.0, 4, 0xee), p(2.0, 3, 0xee), p(5.0, 2, 0xee)].concat();
        assert_eq!(f(Elem::F64I32, ReduceOp::MinLoc, &s, &d), want_min);
        assert_eq!(f(Elem::F64I32, ReduceOp::MaxLoc, &s, &d), want_max);
        // {short, pad, int}.
        let q = |v: i16, i: i32| [&v.to_ne_bytes()[..], &[0x77, 0x77], &i.to_ne_bytes()].concat();
        assert_eq!(
            f(Elem::I16I32, ReduceOp::MaxLoc, &[q(-1, 0), q(3, 6)].concat(), &[q(-2, 5), q(3, 1)].concat()),
            [q(-1, 0), q(3, 1)].concat()
        );
    }

    /// Throughput of the f64 and i32 SUM kernels on 8 MiB; run with
    /// `cargo test --release --no-default-features --lib exec::kernels -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput() {
        const BYTES: usize = 8 << 20;
        for (e, op) in [
            (Elem::F64, ReduceOp::Sum),
            (Elem::I32, ReduceOp::Sum),
            (Elem::F64, ReduceOp::Max),
            (Elem::C64, ReduceOp::Prod),
            (Elem::F64I32, ReduceOp::MinLoc),
        ] {
            let k = native(e, op).unwrap();
            // 1.0 and 2.0 as f64 (no subnormals), small positive integers.
            let src: Vec<u8> = (0..BYTES).map(|i| [0, 0, 0, 0, 0, 0, 0xf0, 0x3f][i % 8]).collect();
            let mut dst: Vec<u8> = (0..BYTES).map(|i| [0, 0, 0, 0, 0, 0, 0, 0x40][i % 8]).collect();
            (k.inplace)(&src, &mut dst);
            // Best and median of 200 passes: the machine may be shared.
            let mut dt: Vec<f64> = (0..200)
                .map(|_| {
                    let t = std::time::Instant::now();
                    (k.inplace)(std::hint::black_box(&src), std::hint::black_box(&mut dst));
                    t.elapsed().as_secs_f64()
                })
                .collect();
            dt.sort_by(f64::total_cmp);
            let gbs = |t: f64| BYTES as f64 / t / 1e9;
            println!(
                "{e:?} {op:?} on 8 MiB: best {:.1} GB/s, median {:.1} GB/s (of dst; memory traffic is 3x)",
                gbs(dt[0]),
                gbs(dt[dt.len() / 2])
            );
        }
    }
}
