//! Pipelined Bcast within a node through the root's two chunk areas
//! (`shm_pipeline`; small messages, and one of the `shm` Bcast's two
//! methods): the root copies the message chunk by chunk into its chunk
//! areas, alternating, and publishes each chunk; the others copy each out
//! as soon as it is published. Copy-in and copy-out overlap, two chunks
//! deep: the root refills an area once every reader is done with the
//! chunk it held. From PCOLL_SHM_STREAM_OUT bytes the copies out stream
//! past the readers' caches ([`crate::shm::team::STREAM_OUT_FROM`]). The
//! root copies in with the stores its readers' timings favour
//! ([`BcastStores`]) and tells them, in its first chunk's step, which it
//! used. A message of up to `LINES * INLINE` bytes goes in the lines of
//! the root's slot, which the readers wait for all at once
//! ([`Team::put_lines`]), where the stores are not chosen.
//!
//! Trace, p = 3, root 0, a message of three chunks a b c: the root copies
//! a into one area and publishes; ranks 1 and 2 copy a out while the root
//! copies b into its other area; the root waits until 1 and 2 are done
//! with a before it copies c into the first area.
//!
//! Limitations: one node; every reader copies the whole message out of
//! the root's areas and every chunk costs a flag round trip, so for large
//! messages zero copy wins where the ranks have a core each. Memory: the
//! segment's chunk areas. Cost, `c` bytes a chunk:
//! `(⌈m/c⌉ + 1) (c β_copy + t_flag)`: the message moves once in and once
//! out, overlapped but for one chunk.
//! Seed: none (pcoll's baseline; seed 002's queue pipelines the same way
//! through more slots, with a notification tree).

use super::{NodeCall, Team};
use crate::adapt::stores::BcastStores;
use crate::exec::Combiner;
use crate::shm::prefetch;
use crate::shm::team::{in_lines, Expect, Mismatch, Via};

/// The pipeline through the chunk areas. `data` is the whole message at
/// every rank (the root's to send, the others' to fill).
pub fn pipeline(team: &mut Team<'_>, data: &mut [u8], root: usize) -> Result<(), Mismatch> {
    let chunk = team.seg.geo.chunk;
    let stream_out = team.streams_out(data.len());
    let stores = BcastStores::start(team, root, data.len());
    let mut streamed = false;
    // A message that fits a slot's lines travels in them (one chunk),
    // where the readers do not choose the stores: the same on every rank.
    let lines = in_lines(data.len()) && !stores.chosen();
    let mut off = 0;
    while off < data.len() {
        let len = chunk.min(data.len() - off);
        let s = team.next_step();
        if team.rank == root {
            if let (0, Some(tag)) = (off, stores.tag()) {
                // Before the data: a chunk that fits the ring is published
                // by its slot's step, which a reader waits for instead of
                // `ready`.
                team.writable(s);
                team.set_word(s, STORES, u64::from(tag));
            }
            if lines {
                team.put_lines(s, data);
            } else {
                team.put_stored(s, &data[off..off + len], stores.streams(team, len));
            }
            team.publish(s);
        } else if lines {
            prefetch::small(data, prefetch::LONG_WAIT);
            team.wait_lines_expecting(root, s, len, Expect(None))?;
            team.check(root, s, Via::Slot, team.mine())?;
            team.copy_lines(root, s, data);
        } else {
            // Misses on the chunk overlap the wait for the root.
            prefetch::small(&data[off..off + len], prefetch::LONG_WAIT);
            let from_root = team.wait_data(root, s, len)?;
            if off == 0 {
                team.check(root, s, team.via(len, false), team.mine())?;
            }
            crate::shm::stream::copy_out(&mut data[off..off + len], from_root, stream_out, team.settings.ahead);
            if off == 0 && stores.timed() {
                streamed = team.word(root, s, STORES) != 0;
            }
        }
        team.finish(s);
        off += len;
    }
    stores.end(team, streamed);
    Ok(())
}

/// The published word of a pipeline's first step where the readers choose
/// the stores: whether the root's copies streamed ([`BcastStores`]).
const STORES: usize = 0;

/// [`pipeline`], as the registry runs it.
pub fn run_pipeline(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    let (data, root) = call.into_bcast();
    pipeline(team, data, root)
}
