//! Copies of message data, around a slow path of the C library's memcpy.
//!
//! glibc (2.36, Debian 12) copies from 4 KiB up to its non-temporal
//! threshold with `rep movsb` where the processor has fast strings. On
//! AMD Zen 3 (the development VM's EPYC), `rep movsb` whose destination
//! lies 1-31 bytes past its source, counted modulo 4 KiB, runs 12-25
//! times slower: 16 KiB in L1, 8.0 us instead of 0.17. That is pcoll's
//! common case: the segment's areas start on pages, and the buffers
//! malloc returns for large messages start 16 bytes into one, so every
//! copy out of the segment into them met it (2 ranks, Intel MPI, 32 KiB
//! Gatherv blocks from such buffers back to back: 4.9 us, stock 2.1).
//!
//! Such copies of [`LOOP_FROM`] to [`LOOP_UP_TO`] bytes take a loop of
//! 32-byte vector moves instead where the processor has AVX2 (16 KiB:
//! 0.35 us); everything else, memcpy. Beyond `LOOP_UP_TO` glibc no
//! longer uses `rep movsb` here, and its own loop is faster than this one
//! (1 MiB: 37 us against 40). Measurements: docs/measurements.md.

/// Bytes from which a copy whose destination is near past its source
/// takes the loop: glibc's `rep movsb` starts at 2-4 KiB.
pub const LOOP_FROM: usize = 2048;

/// Bytes from which memcpy copies whatever the distance.
pub const LOOP_UP_TO: usize = 1 << 20;

/// Distances (destination less source, modulo [`PAGE`]) below which
/// `rep movsb` is slow: 1-31 bytes measured, the rest of a line kept
/// clear.
const NEAR: usize = 64;

/// The distance `rep movsb` compares addresses modulo.
const PAGE: usize = 4096;

/// Copies `src` into `dst` (same length).
pub fn copy(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if slow_for_memcpy(dst.as_ptr() as usize, src.as_ptr() as usize, dst.len())
        && super::kernels::Isa::best() != super::kernels::Isa::Baseline
    {
        // SAFETY: the processor has AVX2 (every set above the baseline
        // includes it).
        unsafe { avx2_copy(dst, src) };
        return;
    }
    dst.copy_from_slice(src);
}

/// Whether memcpy of `len` bytes from address `src` to `dst` takes the
/// slow path ([`copy`]).
fn slow_for_memcpy(dst: usize, src: usize, len: usize) -> bool {
    (LOOP_FROM..LOOP_UP_TO).contains(&len) && (1..NEAR).contains(&(dst.wrapping_sub(src) % PAGE))
}

/// [`copy`] in 32-byte vector moves, four loads then four stores, so that
/// LLVM does not see the loop as a memcpy; the stores aligned (one that
/// crosses a line costs two).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn avx2_copy(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_store_si256};
    const VECTOR: usize = 32;
    const BLOCK: usize = 4 * VECTOR;
    assert_eq!(dst.len(), src.len());
    let head = dst.as_ptr().align_offset(VECTOR).min(dst.len());
    dst[..head].copy_from_slice(&src[..head]);
    let blocks = (dst.len() - head) / BLOCK;
    let (to, from) = (dst[head..].as_mut_ptr(), src[head..].as_ptr());
    for block in 0..blocks {
        let at = block * BLOCK;
        // SAFETY: `at + BLOCK` is within both slices past `head` (whole
        // blocks); `to + at` is 32-byte aligned (`to` is `dst`'s first
        // 32-byte boundary, `BLOCK` a multiple of 32); the loads are
        // unaligned; the processor has AVX2 (this function's callers
        // checked).
        unsafe {
            let v = [0, 1, 2, 3].map(|i| _mm256_loadu_si256(from.add(at + i * VECTOR).cast::<__m256i>()));
            for (i, v) in v.into_iter().enumerate() {
                _mm256_store_si256(to.add(at + i * VECTOR).cast::<__m256i>(), v);
            }
        }
    }
    let tail = head + blocks * BLOCK;
    dst[tail..].copy_from_slice(&src[tail..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that `copy` writes exactly `dst`'s bytes, at many offsets
    /// and lengths around the loop's.
    fn copies_every_byte(copy: impl Fn(&mut [u8], &[u8])) {
        let src: Vec<u8> = (0..3 * PAGE as u32).map(|i| (i * 7 + 3) as u8).collect();
        for dst_off in [0, 1, 16, 31, 32, 63, 64, 100] {
            for src_off in [0, 1, 16, 40] {
                for len in [0, 1, 100, LOOP_FROM - 1, LOOP_FROM, LOOP_FROM + 1, LOOP_FROM + 129, 2 * PAGE + 5] {
                    let mut dst = vec![0u8; 3 * PAGE + 128];
                    copy(&mut dst[dst_off..dst_off + len], &src[src_off..src_off + len]);
                    assert_eq!(&dst[dst_off..dst_off + len], &src[src_off..src_off + len]);
                    assert!(dst[..dst_off].iter().chain(&dst[dst_off + len..]).all(|&b| b == 0));
                }
            }
        }
    }

    #[test]
    fn copy_copies_every_byte() {
        copies_every_byte(copy);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_loop_copies_every_byte_where_the_processor_has_it() {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2.
            copies_every_byte(|dst, src| unsafe { avx2_copy(dst, src) });
        }
    }

    #[test]
    fn the_loop_takes_the_distances_that_are_slow_for_memcpy() {
        let page = 10 * PAGE;
        assert!(slow_for_memcpy(page + 16, page, 32 << 10), "malloc's 16 B into a page, from a segment page");
        assert!(slow_for_memcpy(page + 1, 3 * page + PAGE, LOOP_FROM), "modulo a page");
        assert!(!slow_for_memcpy(page, page, 32 << 10), "same offset in their pages");
        assert!(!slow_for_memcpy(page, page + 16, 32 << 10), "destination before the source");
        assert!(!slow_for_memcpy(page + 16, page, LOOP_FROM - 1), "too short for rep movsb");
        assert!(!slow_for_memcpy(page + 16, page, LOOP_UP_TO), "long enough for glibc's own loop");
    }
}
