//! The PMPI transport: a schedule step's transfers as non-blocking
//! point-to-point on the communicator's private duplicate.

use crate::core::schedule::Xfer;
use crate::exec::{pieces, Buffers, Transport};
use mpi_sys::*;
use std::os::raw::c_int;

/// All pcoll messages carry this tag. They travel on a private duplicate of
/// the user's communicator, so no user receive can ever match them, and
/// MPI's non-overtaking order keeps successive collectives apart.
const TAG: c_int = 7;

/// Largest piece sent as one message: MPI counts are `int`.
const MAX_PIECE: usize = 1 << 30;

pub(super) struct PmpiTransport {
    comm: MPI_Comm,
    requests: Vec<MPI_Request>,
}

impl PmpiTransport {
    pub(super) fn new(comm: MPI_Comm) -> PmpiTransport {
        PmpiTransport { comm, requests: Vec::new() }
    }
}

impl Transport for PmpiTransport {
    type Error = c_int;

    fn exchange(&mut self, bufs: &mut Buffers<'_>, sends: &[Xfer], recvs: &[Xfer]) -> Result<(), c_int> {
        let raw = bufs.raw();
        self.requests.clear();
        // SAFETY (whole block): `locate` checks each region lies inside its
        // buffer; the buffers stay borrowed until Waitall returns; receive
        // regions are disjoint from each other and from send regions (a
        // schedule invariant the simulator checks).
        unsafe {
            let byte = super::shim::pcoll_dtype_byte();
            for x in recvs {
                let base = raw.locate(x.region);
                for (off, len) in pieces(x.region.len, MAX_PIECE) {
                    let mut req = RSMPI_REQUEST_NULL;
                    let rc =
                        PMPI_Irecv(base.add(off).cast(), len as c_int, byte, x.peer as c_int, TAG, self.comm, &mut req);
                    self.requests.push(req);
                    check(rc)?;
                }
            }
            for x in sends {
                let base = raw.locate(x.region);
                for (off, len) in pieces(x.region.len, MAX_PIECE) {
                    let mut req = RSMPI_REQUEST_NULL;
                    let rc =
                        PMPI_Isend(base.add(off).cast(), len as c_int, byte, x.peer as c_int, TAG, self.comm, &mut req);
                    self.requests.push(req);
                    check(rc)?;
                }
            }
            check(PMPI_Waitall(self.requests.len() as c_int, self.requests.as_mut_ptr(), RSMPI_STATUSES_IGNORE))
        }
    }
}

pub(super) fn check(rc: c_int) -> Result<(), c_int> {
    if rc == MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(rc)
    }
}
