//! Gatherv within a node. Only the root knows the layout; the others learn
//! what they need through the segment, so no broadcast is spent.
//!
//! Step 1: every other rank copies the first chunk of its block into its
//! area and publishes; the root publishes its decision (the mode, the
//! rounds, its receive buffer and, for zero copy, the layout). Then:
//! - **copy-in**: the root copies every rank's chunk into place, and for
//!   blocks longer than a chunk further rounds follow;
//! - **zero copy** (large blocks): every other rank writes its whole block
//!   straight into place while the root copies its own: all blocks move at
//!   once, each by its owner (pulling would make the root the hot spot).
//!
//! With the mode left to the root, it takes zero copy when the system
//! allows it and the other ranks' blocks total at least
//! [`ZERO_COPY_FROM`] bytes: below that the root's copies cost less than
//! the system calls (measured, 2 ranks: copy-in faster up to 128 KiB).
//!
//! Trace, zero copy, p = 3: ranks 1 and 2 put their first chunk in their
//! area and publish; the root publishes (zero copy, address, layout);
//! ranks 1 and 2 write their blocks into the root's buffer and publish;
//! the root copies its own block and waits for both.
//!
//! Limitations: one node; zero copy needs the layout to fit a chunk area
//! (16 bytes per rank). Memory: the segment. Cost: copy-in moves
//! `2 Σ n_i` bytes, the root's `Σ n_i` in sequence; zero copy moves
//! `max n_i` on every rank in parallel (plus a chunk each, copied in case).
//! Seed: 001's Gatherv within a node, where a single copy does what its
//! message chains do over a network.

use super::team::Team;
use crate::core::call::GatherLayout;

/// From this many bytes of other ranks' blocks on, zero copy when the
/// mode is the root's.
pub const ZERO_COPY_FROM: usize = 256 << 10;

/// How blocks travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    CopyIn,
    ZeroCopy,
    /// The root decides per call (see the module documentation).
    Auto,
}

/// Published words: the root's decision and receive buffer.
const DECISION: usize = 0;
const BUFFER: usize = 1;
/// The decision word: rounds of the copy-in, or zero copy.
const ZERO_COPY: u64 = u64::MAX;

/// This rank's part: its block (`send`, empty at an in-place root) and, at
/// the root, the receive region the layout's offsets refer to.
pub struct Gather<'a> {
    pub send: &'a [u8],
    pub recv: &'a mut [u8],
    /// The root's layout (empty elsewhere).
    pub layout: &'a GatherLayout,
    pub root: usize,
    /// The root's block is already in place (MPI_IN_PLACE).
    pub in_place: bool,
}

pub fn run(team: &mut Team<'_>, g: &mut Gather<'_>, mode: Mode) {
    let (me, p, chunk) = (team.rank, team.size, team.seg.geo.chunk);
    let piece = |round: usize, len: usize| (round * chunk).min(len)..((round + 1) * chunk).min(len);
    let s = team.next_step();
    let decision = if me == g.root {
        let largest = g.layout.blocks.iter().map(|b| b.1).max().unwrap_or(0);
        let others: usize = g.layout.blocks.iter().map(|b| b.1).sum::<usize>() - g.layout.blocks[me].1;
        let zero_copy = team.peers.is_some()
            && 16 * p <= chunk
            && match mode {
                Mode::CopyIn => false,
                Mode::ZeroCopy => true,
                Mode::Auto => others >= ZERO_COPY_FROM,
            };
        team.writable(s);
        let decision = if zero_copy { ZERO_COPY } else { largest.div_ceil(chunk).max(1) as u64 };
        team.set_word(s, DECISION, decision);
        team.set_word(s, BUFFER, g.recv.as_mut_ptr() as u64);
        if zero_copy {
            let table = team.my_area_bytes(s, 16 * p);
            for (entry, &(off, len)) in table.chunks_exact_mut(16).zip(&g.layout.blocks) {
                entry[..8].copy_from_slice(&(off as u64).to_ne_bytes());
                entry[8..].copy_from_slice(&(len as u64).to_ne_bytes());
            }
        }
        team.publish(s);
        if !g.in_place {
            let (off, len) = g.layout.blocks[me];
            g.recv[off..off + len].copy_from_slice(&g.send[..len]);
        }
        decision
    } else {
        team.writable(s);
        let first = piece(0, g.send.len());
        team.my_area_bytes(s, first.len()).copy_from_slice(&g.send[first]);
        team.publish(s);
        team.wait_ready(g.root, s);
        team.word(g.root, s, DECISION)
    };
    if decision == ZERO_COPY {
        if me != g.root {
            let peers = team.peers.expect("the root chose zero copy where every rank has it");
            let entry = &team.area_bytes(g.root, s, 16 * p)[16 * me..16 * me + 16];
            let off = u64::from_ne_bytes(entry[..8].try_into().expect("8 bytes")) as usize;
            let len = u64::from_ne_bytes(entry[8..].try_into().expect("8 bytes")) as usize;
            assert_eq!(len, g.send.len(), "rank {me}'s block differs from the root's count for it");
            peers.write(g.root, team.word(g.root, s, BUFFER) as usize + off, g.send);
        }
        let t = team.next_step();
        team.finish(s);
        team.publish(t);
        if me == g.root {
            team.wait_all_ready(t);
        }
        team.finish(t);
        return;
    }
    // Copy-in: round 0 is step s; each further round one more step.
    for round in 0..decision as usize {
        let s = if round == 0 {
            s
        } else {
            let s = team.next_step();
            if me != g.root {
                team.writable(s);
                let range = piece(round, g.send.len());
                team.my_area_bytes(s, range.len()).copy_from_slice(&g.send[range]);
            }
            team.publish(s);
            s
        };
        if me == g.root {
            team.wait_all_ready(s);
            for r in (0..p).filter(|&r| r != me) {
                let (off, len) = g.layout.blocks[r];
                let range = piece(round, len);
                let bytes = team.area_bytes(r, s, range.len());
                g.recv[off + range.start..off + range.end].copy_from_slice(bytes);
            }
        }
        team.finish(s);
    }
}
