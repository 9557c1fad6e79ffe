//! PCOLL_VERIFY's comparison of pcoll's result with the host MPI's, element
//! by element: exact for everything but floating point, where sums and
//! products legitimately differ in the last bits between combination
//! orders.
//!
//! An element of a reduction combines `p` operands, one per rank, with
//! `p - 1` operations; each rounds by at most `u` (the unit roundoff of
//! the format) relative to its result. Two orders of a sum then differ by
//! at most about `2 (p-1) u Σ|x|`, `Σ|x|` the sum of the operands'
//! magnitudes (which the caller computes with the host MPI), whatever the
//! cancellation; two orders of a product by about `2 (p-1) u |x|`
//! relative (products do not cancel). The tolerances below are twice
//! that, plus `p` of the smallest subnormal for results near zero. MIN
//! and MAX pick an operand, so their results compare as numbers (-0 = +0,
//! NaN = NaN). Everything else compares exactly, on the bytes that hold
//! data (not the padding of MINLOC/MAXLOC pairs).
//!
//! Limitations: a product whose partial products overflow or underflow in
//! one order and not in another, and a sum whose operands' magnitudes add
//! up beyond the format (then anything is accepted), are beyond these
//! bounds. Results of user-defined operators on floating-point types are
//! not compared: how they round is unknown.

use std::fmt::Write;

/// A floating-point format as the bytes hold it (native byte order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatFmt {
    F32,
    F64,
    /// x87 extended precision (C `long double` on x86), in 10 of its bytes.
    F80,
}

impl FloatFmt {
    fn bytes(self) -> usize {
        match self {
            FloatFmt::F32 => 4,
            FloatFmt::F64 => 8,
            FloatFmt::F80 => 10,
        }
    }

    /// The value, as f64 (F80 rounded to it).
    fn decode(self, b: &[u8]) -> f64 {
        match self {
            FloatFmt::F32 => f32::from_ne_bytes(b[..4].try_into().unwrap()) as f64,
            FloatFmt::F64 => f64::from_ne_bytes(b[..8].try_into().unwrap()),
            FloatFmt::F80 => f80_to_f64(b[..10].try_into().unwrap()),
        }
    }

    /// The unit roundoff the comparison works with: the format's, but
    /// f64's for F80, which is compared after rounding to f64.
    fn roundoff(self) -> f64 {
        match self {
            FloatFmt::F32 => f32::EPSILON as f64 / 2.0,
            FloatFmt::F64 | FloatFmt::F80 => f64::EPSILON / 2.0,
        }
    }

    /// The smallest subnormal (as f64; F80's is below f64's range).
    fn tiny(self) -> f64 {
        match self {
            FloatFmt::F32 => f32::from_bits(1) as f64,
            FloatFmt::F64 | FloatFmt::F80 => f64::from_bits(1),
        }
    }

    /// Byte and bit of the sign (little-endian formats).
    fn sign_byte(self) -> usize {
        self.bytes() - 1
    }
}

/// x87 extended precision to f64: sign, 15-bit exponent, 64-bit
/// significand with an explicit integer bit, little-endian.
pub fn f80_to_f64(b: [u8; 10]) -> f64 {
    let mant = u64::from_le_bytes(b[..8].try_into().unwrap());
    let se = u16::from_le_bytes([b[8], b[9]]);
    let sign = if se & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = (se & 0x7FFF) as i32;
    if exp == 0x7FFF {
        return if mant << 1 == 0 { sign * f64::INFINITY } else { f64::NAN };
    }
    // value = mant × 2^(e - 16383 - 63), e = 1 for subnormals; scaled in
    // steps that stay within f64's exponent range.
    let mut k = exp.max(1) - 16383 - 63;
    let mut v = mant as f64;
    while k != 0 && v != 0.0 && v.is_finite() {
        let step = k.clamp(-1000, 1000);
        v *= 2f64.powi(step);
        k -= step;
    }
    sign * v
}

/// How the floating-point numbers of an element were combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatOp {
    /// MPI_MIN, MPI_MAX: one operand wins, no rounding.
    Pick,
    Sum,
    /// Of real numbers, or of complex ones (`parts == 2`).
    Prod,
}

/// How the elements of one call compare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compare {
    /// These (offset, length) byte ranges of each element, exactly.
    Exact(Vec<(usize, usize)>),
    /// `parts` numbers of format `fmt`, `stride` bytes apart (2 for
    /// complex numbers), within the tolerance of `op`.
    Float { fmt: FloatFmt, parts: usize, stride: usize, op: FloatOp },
    /// Not compared (user-defined operators on floating point).
    Skip,
}

/// The first element whose values differ beyond the tolerance.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    pub index: usize,
    /// pcoll's and the host's element, for the report.
    pub got: String,
    pub want: String,
}

impl Compare {
    /// Whether the comparison needs `Σ|x|` per element (sums of floats).
    pub fn needs_magnitude(&self) -> bool {
        matches!(self, Compare::Float { op: FloatOp::Sum, .. })
    }

    /// Clears the sign of every number of `data` (elements of `unit`
    /// bytes), for computing `Σ|x|` with the host's MPI_SUM.
    pub fn make_absolute(&self, data: &mut [u8], unit: usize) {
        if let Compare::Float { fmt, parts, stride, .. } = *self {
            for e in data.chunks_exact_mut(unit) {
                for k in 0..parts {
                    e[k * stride + fmt.sign_byte()] &= 0x7F;
                }
            }
        }
    }

    /// The first mismatching element of `got` (pcoll's) and `want` (the
    /// host's), elements of `unit` bytes combined over `p` ranks;
    /// `magnitude` holds `Σ|x|` per element where
    /// [`Compare::needs_magnitude`].
    pub fn first_mismatch(
        &self,
        unit: usize,
        p: usize,
        got: &[u8],
        want: &[u8],
        magnitude: Option<&[u8]>,
    ) -> Option<Mismatch> {
        let count = got.len() / unit;
        let index = (0..count).find(|&i| {
            let (g, w) = (&got[i * unit..(i + 1) * unit], &want[i * unit..(i + 1) * unit]);
            !self.same(p, g, w, magnitude.map(|m| &m[i * unit..(i + 1) * unit]))
        })?;
        let element = |b: &[u8]| self.show(&b[index * unit..(index + 1) * unit]);
        Some(Mismatch { index, got: element(got), want: element(want) })
    }

    fn same(&self, p: usize, got: &[u8], want: &[u8], magnitude: Option<&[u8]>) -> bool {
        match *self {
            Compare::Skip => true,
            Compare::Exact(ref spans) => spans.iter().all(|&(o, l)| got[o..o + l] == want[o..o + l]),
            Compare::Float { fmt, parts, stride, op } => {
                let num = |b: &[u8], k: usize| fmt.decode(&b[k * stride..]);
                let slack = 4.0 * p as f64 * fmt.roundoff();
                let floor = p as f64 * fmt.tiny();
                let close = |a: f64, b: f64, scale: f64| {
                    a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= slack * scale + floor
                };
                match op {
                    FloatOp::Pick => (0..parts).all(|k| {
                        let (a, b) = (num(got, k), num(want, k));
                        a == b || (a.is_nan() && b.is_nan())
                    }),
                    FloatOp::Sum => (0..parts).all(|k| {
                        let m = magnitude.map_or(f64::INFINITY, |m| num(m, k));
                        !m.is_finite() || close(num(got, k), num(want, k), m)
                    }),
                    FloatOp::Prod if parts == 2 => {
                        let (a, b) = ((num(got, 0), num(got, 1)), (num(want, 0), num(want, 1)));
                        let norm = |x: (f64, f64)| x.0.hypot(x.1);
                        a == b
                            || (a.0.is_nan() || a.1.is_nan()) && (b.0.is_nan() || b.1.is_nan())
                            || norm((a.0 - b.0, a.1 - b.1)) <= 2.0 * slack * norm(a).max(norm(b)) + floor
                    }
                    FloatOp::Prod => (0..parts).all(|k| {
                        let (a, b) = (num(got, k), num(want, k));
                        close(a, b, a.abs().max(b.abs()))
                    }),
                }
            }
        }
    }

    /// An element for the report: its numbers, or its bytes in hex.
    fn show(&self, e: &[u8]) -> String {
        let mut out = String::new();
        match *self {
            Compare::Float { fmt, parts, stride, .. } => {
                for k in 0..parts {
                    let b = &e[k * stride..k * stride + fmt.bytes()];
                    let _ = write!(out, "{}{:e}", if k > 0 { ", " } else { "" }, fmt.decode(b));
                }
                let _ = write!(out, " (bytes {})", hex(e));
            }
            _ => out = format!("bytes {}", hex(e)),
        }
        out
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64s(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    fn double(op: FloatOp) -> Compare {
        Compare::Float { fmt: FloatFmt::F64, parts: 1, stride: 8, op }
    }

    #[test]
    fn sums_tolerate_reassociation_but_not_a_lost_operand() {
        // 1e16 + 1 - 1e16 + 0.5: orders give 1.5, 2 or 0.5 (all within
        // 2(p-1)u Σ|x| = 6 × 1.1e-16 × 2e16 ≈ 13).
        let xs: [f64; 4] = [1e16, 1.0, -1e16, 0.5];
        let (left, right) = ((((xs[0] + xs[1]) + xs[2]) + xs[3]), (xs[0] + (xs[1] + (xs[2] + xs[3]))));
        assert_ne!(left, right);
        let magnitude: f64 = xs.iter().map(|x| x.abs()).sum();
        let c = double(FloatOp::Sum);
        assert!(c.needs_magnitude());
        let m = f64s(&[magnitude, 1.0]);
        assert_eq!(c.first_mismatch(8, 4, &f64s(&[left, 3.0]), &f64s(&[right, 3.0]), Some(&m)), None);
        // A wrong second element: 3 against 3 + 1e-14 is beyond 4 × 4 ×
        // 1.1e-16 × 1 (its magnitude).
        let bad = c.first_mismatch(8, 4, &f64s(&[left, 3.0]), &f64s(&[right, 3.0 + 1e-14]), Some(&m)).unwrap();
        assert_eq!(bad.index, 1);
        assert!(bad.got.starts_with("3e0 (bytes "), "{}", bad.got);
        // Overflowing magnitudes accept anything; a NaN against a number
        // with finite magnitudes is a mismatch.
        let inf = f64s(&[f64::INFINITY]);
        assert_eq!(c.first_mismatch(8, 2, &f64s(&[1.0]), &f64s(&[f64::INFINITY]), Some(&inf)), None);
        assert!(c.first_mismatch(8, 2, &f64s(&[f64::NAN]), &f64s(&[1.0]), Some(&f64s(&[1.0]))).is_some());
    }

    #[test]
    fn products_are_relative_and_picks_exact_but_for_zero_signs() {
        let c = double(FloatOp::Prod);
        let (a, b) = (1.1 * 1.3 * 1.7, 1.1 * (1.3 * 1.7));
        assert_eq!(c.first_mismatch(8, 3, &f64s(&[a * 1e200]), &f64s(&[b * 1e200]), None), None);
        assert!(c.first_mismatch(8, 3, &f64s(&[a]), &f64s(&[a * (1.0 + 1e-13)]), None).is_some());
        let pick = double(FloatOp::Pick);
        assert_eq!(pick.first_mismatch(8, 2, &f64s(&[-0.0, f64::NAN]), &f64s(&[0.0, f64::NAN]), None), None);
        assert!(pick
            .first_mismatch(8, 2, &f64s(&[1.0]), &f64s(&[f64::from_bits(1.0f64.to_bits() + 1)]), None)
            .is_some());
        // Complex products compare by modulus: a tiny real part may differ
        // relatively much.
        let cx = Compare::Float { fmt: FloatFmt::F64, parts: 2, stride: 8, op: FloatOp::Prod };
        assert_eq!(cx.first_mismatch(16, 4, &f64s(&[1e-17, 2.0]), &f64s(&[1.1e-17, 2.0]), None), None);
        assert!(cx.first_mismatch(16, 4, &f64s(&[1e-3, 2.0]), &f64s(&[1.1e-3, 2.0]), None).is_some());
    }

    #[test]
    fn exact_spans_ignore_padding_and_floats_of_other_formats_decode() {
        // MPI_DOUBLE_INT: value and index, 4 bytes of padding.
        let c = Compare::Exact(vec![(0, 12)]);
        let mut a = [1u8; 32];
        let mut b = a;
        b[12..16].fill(9);
        b[28] = 7;
        assert_eq!(c.first_mismatch(16, 2, &a, &b, None), None);
        a[17] = 0;
        let m = c.first_mismatch(16, 2, &a, &b, None).unwrap();
        assert_eq!(m.index, 1);
        assert_eq!(&m.got[..10], "bytes 0100");
        // f32 and x87 extended precision.
        let f = Compare::Float { fmt: FloatFmt::F32, parts: 1, stride: 4, op: FloatOp::Pick };
        assert!(f.first_mismatch(4, 2, &1.5f32.to_ne_bytes(), &2.5f32.to_ne_bytes(), None).is_some());
        let one = [0, 0, 0, 0, 0, 0, 0, 0x80, 0xFF, 0x3F];
        assert_eq!(f80_to_f64(one), 1.0);
        let minus_three = [0, 0, 0, 0, 0, 0, 0, 0xC0, 0x00, 0xC0];
        assert_eq!(f80_to_f64(minus_three), -3.0);
        assert_eq!(f80_to_f64([0, 0, 0, 0, 0, 0, 0, 0x80, 0xFF, 0x7F]), f64::INFINITY);
        assert!(f80_to_f64([1, 0, 0, 0, 0, 0, 0, 0xC0, 0xFF, 0x7F]).is_nan());
        assert_eq!(f80_to_f64([0, 0, 0, 0, 0, 0, 0, 0x80, 0x00, 0x40]), 2f64.powi(1));
        assert_eq!(f80_to_f64([0; 10]), 0.0);
        // 2^-16400 is far below f64: zero.
        assert_eq!(f80_to_f64([0, 0, 0, 0, 0, 0, 0, 0x80, 0x0F, 0x00]), 0.0);
        // Sign clearing for Σ|x|.
        let cx = Compare::Float { fmt: FloatFmt::F80, parts: 2, stride: 16, op: FloatOp::Sum };
        let mut e = [0u8; 32];
        e[..10].copy_from_slice(&minus_three);
        e[16..26].copy_from_slice(&minus_three);
        cx.make_absolute(&mut e, 32);
        assert_eq!((f80_to_f64(e[..10].try_into().unwrap()), f80_to_f64(e[16..26].try_into().unwrap())), (3.0, 3.0));
        assert_eq!(Compare::Skip.first_mismatch(8, 2, &[1; 8], &[2; 8], None), None);
    }
}
