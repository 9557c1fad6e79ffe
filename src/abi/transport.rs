//! The PMPI transport: a schedule step's transfers as non-blocking
//! point-to-point on the communicator's private duplicate.

use super::handles;
use super::shim::*;
use crate::core::schedule::Xfer;
use crate::driver::host::check;
use crate::exec::{pieces, Buffers, RawBuffers, Transport};
use crate::shm::wait::Backoff;
use std::os::raw::c_int;

/// All pcoll messages carry this tag. They travel on a private duplicate of
/// the user's communicator, so no user receive can ever match them, and
/// MPI's non-overtaking order keeps successive collectives apart.
const TAG: c_int = 7;

/// Largest piece sent as one message: MPI counts are `int`.
const MAX_PIECE: usize = 1 << 30;

pub(super) struct PmpiTransport<'a> {
    comm: MPI_Comm,
    /// Schedule peer `i` is rank `ranks[i]` of `comm` (all ranks if None):
    /// the schedules between node representatives address nodes.
    ranks: Option<&'a [usize]>,
    requests: Vec<MPI_Request>,
}

impl PmpiTransport<'_> {
    #[inline]
    pub(super) fn new(comm: MPI_Comm, ranks: Option<&[usize]>) -> PmpiTransport<'_> {
        PmpiTransport { comm, ranks, requests: Vec::new() }
    }
}

impl Transport for PmpiTransport<'_> {
    type Error = c_int;

    fn exchange(&mut self, bufs: &mut Buffers<'_>, sends: &[Xfer], recvs: &[Xfer]) -> Result<(), c_int> {
        let raw = bufs.raw();
        self.requests.clear();
        let comm = self.comm;
        // SAFETY: `locate` checked the region lies inside its
        // buffer; the buffers stay borrowed until Waitall returns; receive
        // regions are disjoint from each other and from send regions (a
        // schedule invariant the simulator checks).
        self.post(&raw, recvs, |buf, len, byte, peer, req| unsafe {
            pmpi!(PMPI_Irecv)(buf.cast(), len, byte, peer, TAG, comm, req)
        })?;
        // SAFETY: as above; MPI only reads a send buffer.
        self.post(&raw, sends, |buf, len, byte, peer, req| unsafe {
            pmpi!(PMPI_Isend)(buf.cast(), len, byte, peer, TAG, comm, req)
        })?;
        // Poll rather than block in PMPI_Waitall: some hosts (MPICH's ch4)
        // busy-poll there, starving the peers of an oversubscribed node.
        let mut backoff = Backoff::polling();
        loop {
            let mut done: c_int = 0;
            let n = self.requests.len() as c_int;
            // SAFETY: the requests just posted; completed ones become MPI_REQUEST_NULL.
            check(unsafe { pmpi!(PMPI_Testall)(n, self.requests.as_mut_ptr(), &mut done, handles().statuses_ignore) })?;
            if done != 0 {
                return Ok(());
            }
            backoff.pause();
        }
    }
}

impl PmpiTransport<'_> {
    /// Posts one non-blocking call per piece of each transfer:
    /// `call(address, bytes, MPI_BYTE, peer, request)`.
    fn post(
        &mut self,
        raw: &RawBuffers,
        xfers: &[Xfer],
        call: impl Fn(*mut u8, c_int, MPI_Datatype, c_int, *mut MPI_Request) -> c_int,
    ) -> Result<(), c_int> {
        // SAFETY: returns the MPI_BYTE handle.
        let byte = handles().byte;
        let null = handles().request_null;
        for x in xfers {
            let base = raw.locate(x.region);
            let peer = self.ranks.map_or(x.peer, |ranks| ranks[x.peer]);
            for (off, len) in pieces(x.region.len, MAX_PIECE) {
                let mut req = null;
                let rc = call(base.wrapping_add(off), len as c_int, byte, peer as c_int, &mut req);
                self.requests.push(req);
                check(rc)?;
            }
        }
        Ok(())
    }
}
