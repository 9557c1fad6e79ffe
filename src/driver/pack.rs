//! Non-dense datatypes as bytes: pcoll's algorithms move the type
//! signature's bytes, which the host packs from and unpacks into the
//! user's buffer, in runs whose packed size fits MPI_Pack's int.

use super::host::{Host, TypeLayout};
use std::ffi::c_void;

/// Runs of at most `i32::MAX` packed bytes that `count` elements of a
/// type split into, as (first element, elements).
pub fn pack_runs(count: i64, ty: &TypeLayout) -> impl Iterator<Item = (i64, i64)> {
    let per_run = (i32::MAX as usize / ty.size.max(1)).max(1) as i64;
    (0..count).step_by(per_run as usize).map(move |first| (first, per_run.min(count - first)))
}

/// Packs `count` elements of a non-dense datatype into their signature bytes.
pub fn pack<H: Host>(
    host: &H,
    buf: *const c_void,
    count: i64,
    datatype: H::Datatype,
    ty: &TypeLayout,
    comm: H::Comm,
) -> Vec<u8> {
    let mut packed = vec![0u8; count as usize * ty.size];
    for (first, n) in pack_runs(count, ty) {
        let run = &mut packed[first as usize * ty.size..(first + n) as usize * ty.size];
        let position = host.pack(buf, first as isize * ty.extent, n as usize, datatype, run, comm);
        assert_eq!(position, run.len(), "packed size differs from the type signature");
    }
    packed
}

/// Inverse of [`pack`].
pub fn unpack<H: Host>(
    host: &H,
    packed: &[u8],
    buf: *mut c_void,
    count: i64,
    datatype: H::Datatype,
    ty: &TypeLayout,
    comm: H::Comm,
) {
    for (first, n) in pack_runs(count, ty) {
        let run = &packed[first as usize * ty.size..(first + n) as usize * ty.size];
        host.unpack(run, buf, first as isize * ty.extent, n as usize, datatype, comm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_elements_in_int_sized_pieces() {
        let ty = TypeLayout::new(1 << 20, (0, 3 << 20), (0, 3 << 20));
        let runs: Vec<_> = pack_runs(5000, &ty).collect();
        let per_run = i32::MAX as i64 / (1 << 20);
        assert_eq!(runs[0], (0, per_run));
        assert!(runs.iter().all(|&(_, n)| n as usize * ty.size <= i32::MAX as usize));
        assert_eq!(runs.iter().map(|r| r.1).sum::<i64>(), 5000);
        assert!(runs.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
        assert_eq!(pack_runs(0, &ty).count(), 0);
        let empty = TypeLayout::new(0, (0, 8), (0, 8));
        assert_eq!(pack_runs(3, &empty).collect::<Vec<_>>(), vec![(0, 3)]);
    }
}
