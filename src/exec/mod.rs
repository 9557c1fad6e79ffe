//! Runs a schedule: transfers through a [`Transport`] (PMPI point-to-point
//! in the library, mailboxes in the simulator), local copies and reductions
//! here ([`copy`], [`kernels`]). Safe Rust but for the vector loops those
//! two compile for the processor's instruction sets; the transport owns
//! anything else unsafe.

pub mod calibrate;
pub mod copy;
pub mod kernels;
pub mod verify;

use crate::core::schedule::{BufId, Local, Region, Schedule, Xfer};

/// The three buffers a schedule addresses, as this rank sees them.
pub struct Buffers<'a> {
    /// The user's send buffer; `None` under MPI_IN_PLACE (or where the call
    /// has no send buffer), in which case `Send` regions address `recv`.
    pub send: Option<&'a [u8]>,
    pub recv: &'a mut [u8],
    pub scratch: &'a mut [u8],
}

/// Base addresses and lengths of [`Buffers`], taken once per step so that a
/// transport can post several transfers into one buffer at a time.
pub struct RawBuffers {
    send: (*const u8, usize),
    recv: (*mut u8, usize),
    scratch: (*mut u8, usize),
}

impl RawBuffers {
    /// Address of a region's first byte. Panics if the region is outside its
    /// buffer, so a transport never touches memory outside the user's
    /// buffers. The pointer is only valid while the [`Buffers`] it came
    /// from are borrowed, and `Send` regions must only be read.
    pub fn locate(&self, region: Region) -> *mut u8 {
        let (base, len) = match region.buf {
            BufId::Send => (self.send.0 as *mut u8, self.send.1),
            BufId::Recv => self.recv,
            BufId::Scratch => self.scratch,
        };
        assert!(region.end() <= len, "{region:?} outside a buffer of {len} bytes");
        base.wrapping_add(region.off)
    }
}

impl<'a> Buffers<'a> {
    /// With MPI_IN_PLACE a `Send` region is the same bytes of `recv`.
    fn resolve(&self, region: Region) -> Region {
        if region.buf == BufId::Send && self.send.is_none() {
            Region { buf: BufId::Recv, ..region }
        } else {
            region
        }
    }

    pub fn raw(&mut self) -> RawBuffers {
        let recv = (self.recv.as_mut_ptr(), self.recv.len());
        RawBuffers {
            send: self.send.map_or((recv.0 as *const u8, recv.1), |s| (s.as_ptr(), s.len())),
            recv,
            scratch: (self.scratch.as_mut_ptr(), self.scratch.len()),
        }
    }

    pub fn read(&self, region: Region) -> &[u8] {
        let r = self.resolve(region);
        let buf: &[u8] = match r.buf {
            BufId::Send => self.send.unwrap_or(&[]),
            BufId::Recv => self.recv,
            BufId::Scratch => self.scratch,
        };
        &buf[r.off..r.end()]
    }

    pub fn write(&mut self, region: Region) -> &mut [u8] {
        let r = self.resolve(region);
        let buf: &mut [u8] = match r.buf {
            BufId::Send => panic!("schedule writes to the send buffer: {region:?}"),
            BufId::Recv => self.recv,
            BufId::Scratch => self.scratch,
        };
        &mut buf[r.off..r.end()]
    }

    /// Up to `N` regions to read and one disjoint region to write, any of
    /// them possibly in the same buffer. A read region must not share a
    /// byte with the written one (checked), reads may overlap each other.
    fn operands<const N: usize>(&mut self, reads: [Region; N], write: Region) -> ([&[u8]; N], &mut [u8]) {
        let write = self.resolve(write);
        let in_place = self.send.is_none();
        let send = self.send.unwrap_or(&[]);
        let (whole, other): (&mut [u8], &[u8]) = match write.buf {
            BufId::Send => panic!("schedule writes to the send buffer: {write:?}"),
            BufId::Recv => (&mut *self.recv, &*self.scratch),
            BufId::Scratch => (&mut *self.scratch, &*self.recv),
        };
        let (lo, rest) = whole.split_at_mut(write.off);
        let (out, hi) = rest.split_at_mut(write.len);
        let (lo, hi): (&[u8], &[u8]) = (lo, hi);
        let inputs = reads.map(|r| {
            let r = if r.buf == BufId::Send && in_place { Region { buf: BufId::Recv, ..r } } else { r };
            if r.buf != write.buf {
                let buf = if r.buf == BufId::Send { send } else { other };
                return &buf[r.off..r.end()];
            }
            assert!(!r.overlaps(&write), "local operation reads {r:?} while writing {write:?}");
            if r.end() <= write.off {
                &lo[r.off..r.end()]
            } else {
                &hi[r.off - write.end()..r.end() - write.end()]
            }
        });
        (inputs, out)
    }
}

/// Moves bytes between ranks, one step at a time.
pub trait Transport {
    type Error;

    /// Posts every receive and send of one step at once, then waits until
    /// all of them have completed. Receive regions are disjoint from each
    /// other and from the send regions.
    fn exchange(&mut self, bufs: &mut Buffers<'_>, sends: &[Xfer], recvs: &[Xfer]) -> Result<(), Self::Error>;
}

/// Combines two vectors of whole elements: `dst = src ∘ dst`, where `src`
/// is the operand that comes first in rank order.
pub trait Combiner {
    fn combine(&self, src: &[u8], dst: &mut [u8]);

    /// `out = first ∘ second`; `out` shares no byte with either operand.
    fn combine_into(&self, first: &[u8], second: &[u8], out: &mut [u8]) {
        copy::copy(out, second);
        self.combine(first, out);
    }

    /// `first = first ∘ second`, in place into the operand that comes
    /// first in rank order, where the combiner can; false, with `first`
    /// untouched, where it cannot (MPI_Reduce_local, through which the
    /// host combines user-defined operators, writes its second operand).
    fn combine_after(&self, first: &mut [u8], second: &[u8]) -> bool {
        let _ = (first, second);
        false
    }

    /// Whether a vector combined in pieces of a KiB costs about what it
    /// costs whole: true of a kernel, not of a call into the host MPI per
    /// piece.
    fn cheap_in_pieces(&self) -> bool {
        true
    }
}

/// Splits a transfer of `len` bytes into pieces of at most `max` bytes, as
/// (offset, length): for transports whose messages have a size limit. Both
/// ends of a transfer know its length, so they split alike.
pub fn pieces(len: usize, max: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len).step_by(max).map(move |off| (off, (len - off).min(max)))
}

/// Runs one local operation.
pub fn apply_local<C: Combiner + ?Sized>(bufs: &mut Buffers<'_>, local: &Local, combiner: &C) {
    match *local {
        Local::Copy { src, dst } => {
            if bufs.resolve(src) != bufs.resolve(dst) {
                let ([from], to) = bufs.operands([src], dst);
                copy::copy(to, from);
            }
        }
        Local::Reduce { src, dst } => {
            let ([from], to) = bufs.operands([src], dst);
            combiner.combine(from, to);
        }
        Local::ReduceInto { first, second, dst } => {
            let ([a, b], to) = bufs.operands([first, second], dst);
            combiner.combine_into(a, b, to);
        }
    }
}

/// Runs a whole schedule on this rank.
pub fn run<T: Transport, C: Combiner + ?Sized>(
    sched: &Schedule,
    bufs: &mut Buffers<'_>,
    transport: &mut T,
    combiner: &C,
) -> Result<(), T::Error> {
    for step in &sched.steps {
        if !step.sends.is_empty() || !step.recvs.is_empty() {
            transport.exchange(bufs, &step.sends, &step.recvs)?;
        }
        for local in &step.locals {
            apply_local(bufs, local, combiner);
        }
    }
    Ok(())
}

/// The combiner of collectives that reduce nothing (Bcast, Gatherv): their
/// schedules contain no `Reduce`.
pub struct NoReduction;

impl Combiner for NoReduction {
    fn combine(&self, _: &[u8], _: &mut [u8]) {
        unreachable!("a schedule without reductions asked for one");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_length() {
        assert_eq!(pieces(0, 4).count(), 0);
        assert_eq!(pieces(3, 4).collect::<Vec<_>>(), vec![(0, 3)]);
        assert_eq!(pieces(9, 4).collect::<Vec<_>>(), vec![(0, 4), (4, 4), (8, 1)]);
    }
}
