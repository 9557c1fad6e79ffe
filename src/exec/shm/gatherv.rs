//! Gatherv within a node. Only the root knows the layout; the others learn
//! what they need through the segment, so no broadcast is spent.
//!
//! - **copy-in**: each rank copies its block, a chunk at a time, into its
//!   chunk area; the root copies every rank's piece into place. The root
//!   publishes how many rounds the largest block needs.
//! - **zero copy** (large blocks): the root publishes its receive buffer
//!   and the layout; every other rank writes its block straight into place
//!   while the root copies its own: all blocks move at once, each by its
//!   owner (the root is not the hot spot that pulling would make it).
//!
//! Trace, zero copy, p = 3: the root publishes (address, layout); ranks 1
//! and 2 write their blocks into it and publish; the root copies its own
//! block and waits for both.
//!
//! Limitations: one node; the layout must fit a chunk area (16 bytes per
//! rank). Memory: the segment. Cost: copy-in `2 Σ n_i` bytes moved, the
//! root's `Σ n_i` in sequence; zero copy `max n_i` in parallel.
//! Seed: 001's Gatherv within a node, where a single copy replaces its
//! message chains.

use super::team::Team;
use crate::core::call::GatherLayout;

/// Published words: rounds of the copy-in, the root's receive buffer.
const ROUNDS: usize = 0;
const BUFFER: usize = 1;

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

/// The root copies its own block into place.
fn own_block(team: &Team<'_>, g: &mut Gather<'_>) {
    if !g.in_place {
        let (off, len) = g.layout.blocks[team.rank];
        g.recv[off..off + len].copy_from_slice(&g.send[..len]);
    }
}

pub fn copy_in(team: &mut Team<'_>, g: &mut Gather<'_>) {
    let (me, p, chunk) = (team.rank, team.size, team.seg.geo.chunk);
    let is_root = me == g.root;
    let mut round = 0;
    let mut rounds = 1;
    while round < rounds {
        let s = team.next_step();
        let piece = |len: usize| (round * chunk).min(len)..((round + 1) * chunk).min(len);
        if is_root {
            if round == 0 {
                let largest = g.layout.blocks.iter().map(|b| b.1).max().unwrap_or(0);
                rounds = largest.div_ceil(chunk).max(1);
                team.writable(s);
                team.set_word(s, ROUNDS, rounds as u64);
                own_block(team, g);
            }
            team.publish(s);
            team.wait_all_ready(s);
            for r in (0..p).filter(|&r| r != me) {
                let (off, len) = g.layout.blocks[r];
                let range = piece(len);
                let bytes = team.area_bytes(r, s, range.len());
                g.recv[off + range.start..off + range.end].copy_from_slice(bytes);
            }
        } else {
            team.writable(s);
            let range = piece(g.send.len());
            team.my_area_bytes(s, range.len()).copy_from_slice(&g.send[range]);
            team.publish(s);
            if round == 0 {
                team.wait_ready(g.root, s);
                rounds = team.word(g.root, s, ROUNDS) as usize;
            }
        }
        team.finish(s);
        round += 1;
    }
}

/// The zero-copy Gatherv; the team must have [`Team::peers`].
pub fn zero_copy(team: &mut Team<'_>, g: &mut Gather<'_>) {
    let peers = team.peers.expect("zero copy needs peer memory access");
    let (me, p) = (team.rank, team.size);
    let s = team.next_step();
    if me == g.root {
        team.writable(s);
        let table = team.my_area_bytes(s, 16 * p);
        for (entry, &(off, len)) in table.chunks_exact_mut(16).zip(&g.layout.blocks) {
            entry[..8].copy_from_slice(&(off as u64).to_ne_bytes());
            entry[8..].copy_from_slice(&(len as u64).to_ne_bytes());
        }
        team.set_word(s, BUFFER, g.recv.as_mut_ptr() as u64);
        team.publish(s);
        own_block(team, g);
    } else {
        team.publish(s);
        team.wait_ready(g.root, s);
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
}
