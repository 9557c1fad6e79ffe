//! Schedules built once and reused: applications repeat the same calls
//! (same communicator, sizes and root), so building a schedule per call
//! would be wasted work (for a tree Gatherv at scale, O(p log p)). Each
//! communicator has its own cache, freed with it.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

use crate::algos::{Algorithm, Params};
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::schedule::Schedule;

/// Entries kept before the cache starts over (applications use a handful
/// of distinct calls per communicator; a program sweeping sizes should not
/// grow memory without bound).
const CAPACITY: usize = 64;

struct Entry {
    algo: &'static Algorithm,
    params: Params,
    desc: CallDesc,
    layout: GatherLayout,
    schedule: Arc<Schedule>,
}

/// A multiplicative hash (the FxHash scheme): keys are small and the
/// lookup is on every call's path, where SipHash cost 5 % of an 8-byte
/// Allreduce.
#[derive(Default)]
struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

#[derive(Default)]
pub struct ScheduleCache {
    entries: HashMap<u64, Entry, BuildHasherDefault<FastHasher>>,
    /// Lookups answered from the cache, and schedules built.
    pub hits: u64,
    pub builds: u64,
}

fn key(algo: &Algorithm, params: &Params, desc: &CallDesc, layout: &GatherLayout) -> u64 {
    let mut h = FastHasher::default();
    algo.coll.hash(&mut h);
    algo.name.hash(&mut h);
    params.hash(&mut h);
    desc.hash(&mut h);
    layout.hash(&mut h);
    h.finish()
}

impl ScheduleCache {
    /// The schedule of `algo` for this call, built on first use. `last`
    /// is the key of the entry the thread's last lookup returned (kept in
    /// [`super::thread::PerThread`]): a loop of identical calls skips
    /// hashing. A key from another communicator's cache is only a hint:
    /// the entry it finds here is used only if it is this call's.
    pub fn get(
        &mut self,
        algo: &'static Algorithm,
        params: &Params,
        desc: &CallDesc,
        layout: &GatherLayout,
        last: &Cell<Option<u64>>,
    ) -> Arc<Schedule> {
        let same =
            |e: &Entry| std::ptr::eq(e.algo, algo) && e.desc == *desc && e.params == *params && e.layout == *layout;
        if let Some(e) = last.get().and_then(|k| self.entries.get(&k)).filter(|e| same(e)) {
            self.hits += 1;
            return Arc::clone(&e.schedule);
        }
        let k = key(algo, params, desc, layout);
        if let Some(e) = self.entries.get(&k).filter(|e| same(e)) {
            self.hits += 1;
            last.set(Some(k));
            return Arc::clone(&e.schedule);
        }
        self.builds += 1;
        let build = algo.schedule().expect("a schedule algorithm");
        let schedule = Arc::new(build(desc, params, layout));
        if self.entries.len() >= CAPACITY {
            self.entries.clear();
        }
        let entry =
            Entry { algo, params: *params, desc: desc.clone(), layout: layout.clone(), schedule: schedule.clone() };
        self.entries.insert(k, entry);
        last.set(Some(k));
        schedule
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algos;
    use crate::core::call::Topo;
    use crate::core::types::Coll;

    #[test]
    fn builds_once_per_distinct_call() {
        let rd = algos::find(Coll::Allreduce, "recursive_doubling").unwrap();
        let desc = CallDesc {
            coll: Coll::Allreduce,
            rank: 1,
            size: 4,
            root: 0,
            bytes: 64,
            unit: 8,
            commutative: true,
            in_place: false,
            topo: Topo::default(),
        };
        let mut cache = ScheduleCache::default();
        let none = GatherLayout::default();
        let last = Cell::new(None);
        let a = cache.get(rd, &Params::default(), &desc, &none, &last);
        let b = cache.get(rd, &Params::default(), &desc, &none, &last);
        assert!(Arc::ptr_eq(&a, &b));
        let other = CallDesc { bytes: 128, ..desc.clone() };
        let c = cache.get(rd, &Params::default(), &other, &none, &last);
        assert_eq!(c.bytes_sent(), 2 * a.bytes_sent());
        assert_eq!((cache.hits, cache.builds), (1, 2));
        // another thread's (or communicator's) hint finds the right schedule
        let d = cache.get(rd, &Params::default(), &desc, &none, &Cell::new(last.get()));
        assert!(Arc::ptr_eq(&a, &d));
        assert_eq!((cache.hits, cache.builds), (2, 2));
        for bytes in 0..2 * CAPACITY {
            cache.get(rd, &Params::default(), &CallDesc { bytes: 8 * bytes, ..desc.clone() }, &none, &last);
        }
        assert!(cache.entries.len() <= CAPACITY);
    }
}
