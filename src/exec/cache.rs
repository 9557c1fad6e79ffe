//! Schedules built once and reused: applications repeat the same calls
//! (same communicator, sizes and root), so building a schedule per call
//! would be wasted work (for a tree Gatherv at scale, O(p log p)). Each
//! communicator has its own cache, freed with it.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
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

#[derive(Default)]
pub struct ScheduleCache {
    entries: HashMap<u64, Entry>,
    /// Lookups answered from the cache, and schedules built.
    pub hits: u64,
    pub builds: u64,
}

fn key(algo: &Algorithm, params: &Params, desc: &CallDesc, layout: &GatherLayout) -> u64 {
    let mut h = DefaultHasher::new();
    algo.coll.hash(&mut h);
    algo.name.hash(&mut h);
    params.hash(&mut h);
    desc.hash(&mut h);
    layout.hash(&mut h);
    h.finish()
}

impl ScheduleCache {
    /// The schedule of `algo` for this call, built on first use.
    pub fn get(
        &mut self,
        algo: &'static Algorithm,
        params: &Params,
        desc: &CallDesc,
        layout: &GatherLayout,
    ) -> Arc<Schedule> {
        let k = key(algo, params, desc, layout);
        if let Some(e) = self.entries.get(&k) {
            if std::ptr::eq(e.algo, algo) && e.params == *params && e.desc == *desc && e.layout == *layout {
                self.hits += 1;
                return Arc::clone(&e.schedule);
            }
        }
        self.builds += 1;
        let schedule = Arc::new((algo.build)(desc, params, layout));
        if self.entries.len() >= CAPACITY {
            self.entries.clear();
        }
        let entry = Entry {
            algo,
            params: params.clone(),
            desc: desc.clone(),
            layout: layout.clone(),
            schedule: schedule.clone(),
        };
        self.entries.insert(k, entry);
        schedule
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algos;
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
        };
        let mut cache = ScheduleCache::default();
        let none = GatherLayout::default();
        let a = cache.get(rd, &Params::default(), &desc, &none);
        let b = cache.get(rd, &Params::default(), &desc, &none);
        assert!(Arc::ptr_eq(&a, &b));
        let other = CallDesc { bytes: 128, ..desc.clone() };
        let c = cache.get(rd, &Params::default(), &other, &none);
        assert_eq!(c.bytes_sent(), 2 * a.bytes_sent());
        assert_eq!((cache.hits, cache.builds), (1, 2));
        for bytes in 0..2 * CAPACITY {
            cache.get(rd, &Params::default(), &CallDesc { bytes: 8 * bytes, ..desc.clone() }, &none);
        }
        assert!(cache.entries.len() <= CAPACITY);
    }
}
