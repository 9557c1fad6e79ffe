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
//! - At 2 ranks (the registry's `shm_pipeline`), a message from the root's
//!   last Bcast's buffer (hot) of [`WINDOW_FROM`] bytes to the window's,
//!   whose root did not write the last window call, goes through the
//!   window the other hot Bcasts and Gathervs share ([`super::window`]):
//!   the root says so in a word of its first step, the reader follows.
//!   Back to back with roots alternating the root then writes lines it
//!   has just read, not lines its reader's cache still holds (EPYC VM, 2
//!   ranks, b2b, Intel host, cores near, 2 / 4 / 6 KiB: 0.30-0.32 /
//!   0.43-0.46 / 0.58 us against the pipeline's 0.40-0.49 / 0.99-1.02 /
//!   1.26-1.37; docs/measurements.md). A reader whose message may come
//!   that way reads the word in the line of words beside the root's
//!   flags, which its cache keeps while the root writes no word.
//!
//! Trace, p = 3, root 0, a message of three chunks a b c: the root copies
//! a into one area and publishes; ranks 1 and 2 copy a out while the root
//! copies b into its other area; the root waits until 1 and 2 are done
//! with a before it copies c into the first area. The window, p = 2, root
//! 1 hot: rank 1 publishes its first step with its number in a word and
//! writes the window's pieces; rank 0 sees the word and reads them.
//!
//! Limitations: one node; every reader copies the whole message out of
//! the root's areas and every chunk costs a flag round trip, so for large
//! messages zero copy wins where the ranks have a core each; the root
//! judges hot by its own buffer only. Memory: the segment's chunk areas
//! (and the window). Cost, `c` bytes a chunk:
//! `(⌈m/c⌉ + 1) (c β_copy + t_flag)`: the message moves once in and once
//! out, overlapped but for one chunk.
//! Seed: none (pcoll's baseline; seed 002's queue pipelines the same way
//! through more slots, with a notification tree).

use super::window::{self, through_window};
use super::{NodeCall, Team};
use crate::adapt::stores::BcastStores;
use crate::exec::Combiner;
use crate::shm::prefetch;
use crate::shm::team::{in_lines, Expect, Mismatch, Via};

/// The least hot message that goes through the window at 2 ranks
/// (PCOLL_SHM_PIPELINE_WINDOW): from 2 KiB the window was ahead back to
/// back with roots alternating; at 1 KiB it tied (0.96-1.01 against
/// 1.01-1.08 us), at 512 B it lost (0.94 against 0.71-0.75).
pub const WINDOW_FROM: usize = 2 << 10;

/// The pipeline through the chunk areas. `data` is the whole message at
/// every rank (the root's to send, the others' to fill).
pub fn pipeline(team: &mut Team<'_>, data: &mut [u8], root: usize) -> Result<(), Mismatch> {
    pipeline_or_window(team, data, root, None)
}

/// Whether a message of `n` bytes may go through the window
/// ([`pipeline_or_window`]): at 2 ranks, from
/// [`super::Sizes::pipeline_window_from`] bytes to the window's, beyond a
/// slot's lines. The same on every rank.
fn window_sized(team: &Team<'_>, n: usize) -> bool {
    let from = team.state.memory.sizes.pipeline_window_from;
    let geo = team.seg.geo;
    team.size == 2 && from > 0 && n >= from && !in_lines(n) && geo.window_pieces > 0 && n <= geo.window
}

/// [`pipeline`], or where `window` says the message may go through the
/// window ([`window_sized`]), whether the root's is `hot` (its last
/// Bcast's buffer): a hot message whose root did not write the last
/// window call ([`window::suits`]) goes through it.
fn pipeline_or_window(team: &mut Team<'_>, data: &mut [u8], root: usize, window: Option<bool>) -> Result<(), Mismatch> {
    if team.rank == root && window.is_some_and(|hot| hot && window::suits(team, root, data.len())) {
        let s = team.next_step();
        // The head and the way first: the reader checks them before it reads.
        team.writable(s);
        team.set_word(s, WINDOW, s);
        team.publish(s);
        team.finish(s);
        through_window(team, data, root, s);
        return Ok(());
    }
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
            if off == 0 && window.is_some() {
                match by_window(team, root, s, len) {
                    Ok(false) => {}
                    Ok(true) => {
                        // Not a call of the pipeline's copies: its time is none of theirs.
                        stores.drop_timing(team);
                        team.finish(s);
                        through_window(team, data, root, s);
                        return Ok(());
                    }
                    Err(mismatch) => {
                        // The root may have written the window, by its count.
                        window::skip(team, root, s);
                        return Err(mismatch);
                    }
                }
            }
            let from_root = team.wait_data(root, s, len)?;
            if off == 0 && window.is_none() {
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

/// A reader's first step of a message that may come through the window:
/// waits for the root's publish and checks its head; whether the root's
/// word says the window (the call's number, never a stale word's).
fn by_window(team: &Team<'_>, root: usize, s: u64, len: usize) -> Result<bool, Mismatch> {
    team.wait_data(root, s, len)?;
    let windowed = team.word(root, s, WINDOW) == s;
    let via = if windowed { Via::Area } else { team.via(len, false) };
    team.check(root, s, via, team.mine())?;
    Ok(windowed)
}

/// The published words of a pipeline's first step: where the readers
/// choose the stores, whether the root's copies streamed
/// ([`BcastStores`]); the window call's number where the message goes
/// through the window.
const STORES: usize = 0;
const WINDOW: usize = 1;

/// [`pipeline`], at 2 ranks with the window for hot messages, as the
/// registry runs it.
pub fn run_pipeline(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    let (data, root) = call.into_bcast();
    let hot = super::same_buffer_again(&mut team.state.memory.bcast_buffer, data.as_ptr());
    let window = window_sized(team, data.len()).then_some(hot);
    pipeline_or_window(team, data, root, window)
}
