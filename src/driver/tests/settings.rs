//! The check at MPI_Init that every rank holds the same settings, against
//! the threaded host, each thread with its own environment: one word per
//! rank when they agree, and a message naming the variable that differs,
//! on every rank, when they do not.

use super::host::World;
use crate::driver::runtime::agree_on_settings;
use crate::select::config::Config;
use std::sync::atomic::Ordering;

/// `agree_on_settings` on 3 ranks, rank r with the environment `envs[r]`:
/// each rank's outcome, and the allgathers made.
fn agree(envs: [&[(&str, &str)]; 3]) -> (Vec<Result<(), String>>, usize) {
    let world = World::one_node(3, &[]);
    let outcomes = world.run(|h| {
        let vars: Vec<(String, String)> = envs[h.rank].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        agree_on_settings(&h, &Config::from_vars(&vars).unwrap().fingerprint)
    });
    (outcomes, world.allgathers.load(Ordering::Relaxed))
}

#[test]
fn ranks_with_the_same_settings_pass_with_one_allgather() {
    let chunk: &[(&str, &str)] = &[("PCOLL_SHM_CHUNK", "128K"), ("PCOLL_BCAST", "mpi")];
    let (outcomes, allgathers) = agree([chunk, chunk, chunk]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(allgathers, 3, "one collective, one call per rank");
    // the same effect in other spellings, the log level, unknown names
    let (outcomes, allgathers) = agree([
        &[("PCOLL_SHM_CHUNK", "64K"), ("PCOLL_LOG", "debug")],
        &[("PCOLL_SHM", "1"), ("PCOLL_ALREDUCE", "ring")],
        &[("PCOLL_SHM_CHUNK", "65536"), ("PCOLL_LIB_MPICH", "/x")],
    ]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(allgathers, 3);
}

#[test]
fn ranks_with_different_settings_stop_naming_the_variable() {
    let (outcomes, allgathers) = agree([
        &[("PCOLL_BCAST", "mpi")],
        &[("PCOLL_BCAST", "mpi"), ("PCOLL_SHM_CHUNK", "128K")],
        &[("PCOLL_BCAST", "mpi")],
    ]);
    assert_eq!(allgathers, 6, "the second exchange only now");
    for (rank, outcome) in outcomes.iter().enumerate() {
        let text = outcome.as_ref().unwrap_err();
        assert!(text.starts_with("pcoll: the ranks were started with different settings"), "{text}");
        assert!(text.contains("PCOLL_SHM_CHUNK (rank "), "rank {rank}: {text}");
        assert!(!text.contains("PCOLL_BCAST"), "rank {rank}: {text}");
    }
    assert!(outcomes[1]
        .as_ref()
        .unwrap_err()
        .contains("PCOLL_SHM_CHUNK (rank 1: \"128K\"; another value at rank(s) 0, 2)"));
    assert!(outcomes[0]
        .as_ref()
        .unwrap_err()
        .contains("PCOLL_SHM_CHUNK (rank 0: unset or the default; another value at rank(s) 1)"));
    // PCOLL_ENABLE=0 on one rank: it would forward while the others run
    // pcoll's algorithms
    let (outcomes, _) = agree([&[("PCOLL_ENABLE", "0")], &[("PCOLL_SHM", "0")], &[]]);
    for outcome in &outcomes {
        let text = outcome.as_ref().unwrap_err();
        assert!(text.contains("PCOLL_ENABLE (rank ") && text.contains("PCOLL_SHM (rank "), "{text}");
    }
}
