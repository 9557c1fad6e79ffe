//! Copies into the shared segment, and into the application's buffers,
//! that bypass the writer's cache.
//!
//! A chunk that one rank copies into its area is read next by another
//! core, which read the same lines on the previous call. With ordinary
//! stores the writer first takes each line back from that reader, about
//! 40 ns a line between cores that share no last-level cache;
//! non-temporal stores need no line back (32 KiB copied through: 5 us
//! against 15-22). Below a few KiB the flag round trip dominates and
//! ordinary stores win, so streaming starts at a size (PCOLL_SHM_STREAM).
//! Measurements: docs/measurements.md.

/// Copies `src` into a part of the segment that another rank reads next,
/// streaming ([`copy`]) or with ordinary stores
/// ([`super::team::Team::streams`]).
pub fn copy_with(dst: &mut [u8], src: &[u8], stream: bool) {
    if stream {
        copy(dst, src);
    } else {
        crate::exec::copy::copy(dst, src);
    }
}

/// Copies `src` into an application's buffer `dst`: streaming
/// ([`super::team::Team::streams_out`]), or with ordinary stores whose
/// lines are asked for ahead of them as `ahead` says
/// ([`super::prefetch::ahead_of_stores`]).
pub fn copy_out(dst: &mut [u8], src: &[u8], stream: bool, ahead: super::prefetch::Ahead) {
    if stream {
        copy(dst, src);
    } else {
        super::prefetch::ahead_of_stores(dst, 1, ahead, |range, dst| crate::exec::copy::copy(dst, &src[range]));
    }
}

/// Copies `src` into `dst` (same length) with non-temporal stores where
/// the processor has them (x86-64: always), then fences, so that a
/// following release store (a `publish`) is seen after the data.
pub fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len());
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        const LINE: usize = 64;
        // The head up to the first cache-line boundary of `dst`, then
        // whole lines streamed (each fills one write-combining buffer),
        // then the tail.
        let head = dst.as_ptr().align_offset(LINE).min(dst.len());
        let lines = (dst.len() - head) / LINE;
        let body = head..head + lines * LINE;
        dst[..head].copy_from_slice(&src[..head]);
        let (to, from) = (dst[body.clone()].as_mut_ptr(), src[body.clone()].as_ptr());
        for line in 0..lines {
            for part in 0..LINE / 16 {
                let at = line * LINE + part * 16;
                // SAFETY: `at + 16 <= body.len()` for both slices (whole
                // lines of the body); `to + at` is 16-byte aligned (the
                // body starts at `dst`'s first line boundary); the load
                // is unaligned. SSE2 is part of x86-64.
                unsafe {
                    let v = _mm_loadu_si128(from.add(at).cast::<__m128i>());
                    _mm_stream_si128(to.add(at).cast::<__m128i>(), v);
                }
            }
        }
        dst[body.end..].copy_from_slice(&src[body.end..]);
        // SAFETY: SSE2 is part of x86-64. The fence orders the streaming
        // stores above (weakly ordered, unlike ordinary ones) before every
        // later store, in particular the release store that publishes the
        // data: a reader that acquires the flag sees the bytes.
        unsafe { _mm_sfence() };
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    #[test]
    fn copies_every_byte_at_any_alignment_and_length() {
        let src: Vec<u8> = (0..700u32).map(|i| (i * 7 + 3) as u8).collect();
        for dst_off in 0..65 {
            for src_off in [0, 1, 5, 16] {
                for len in [0, 1, 15, 16, 63, 64, 65, 200, 511, 600] {
                    let mut dst = vec![0u8; 700];
                    super::copy(&mut dst[dst_off..dst_off + len], &src[src_off..src_off + len]);
                    assert_eq!(&dst[dst_off..dst_off + len], &src[src_off..src_off + len]);
                    assert!(dst[..dst_off].iter().chain(&dst[dst_off + len..]).all(|&b| b == 0));
                }
            }
        }
    }
}
