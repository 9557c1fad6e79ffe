//! `pcoll tune`: measures the candidate algorithms of each collective on
//! this machine and job shape, and writes a rules file that later runs
//! use through PCOLL_TUNE_FILE.
//!
//! It builds (or is given) libpcoll.so for the chosen MPI and the
//! benchmark (bench/pcoll_bench.c), then launches one benchmark run per
//! collective: the host MPI's collective and every candidate timed
//! interleaved at each size (`--candidates`, switching algorithms with
//! `pcoll_set_algorithm`), medians of the slowest rank. The candidates are
//! the registered algorithms whose check accepts the job shape, with their
//! default parameters. The run also writes pcoll's statistics
//! (PCOLL_STATS_FILE): a candidate that never ran itself (the host MPI ran
//! its calls instead, e.g. zero copy refused by the system) does not
//! compete. Per size the fastest wins; [`rules::rules_text`] merges sizes
//! into ranges and writes them with a header. The file is written whole
//! or not at all.

pub mod launch;
pub mod rules;

use crate::algos;
use crate::core::call::{CallDesc, Topo};
use crate::core::types::Coll;
use crate::select::config::Config;
use launch::{mpi_command, run, scratch_dir, MPIS};
use rules::{parse_csv, rules_text, Shape, Timing};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub const HELP: &str = "\
usage: pcoll tune --mpi mpich|openmpi --ranks N [options]

Times every algorithm that can run each collective (and the host MPI's own
collective) on this machine at N ranks, and writes the fastest per message
size as rules for PCOLL_TUNE_FILE:

    pcoll tune --mpi mpich --ranks 4 --out pcoll.rules
    mpiexec.mpich -n 4 -genv LD_PRELOAD .../libpcoll.so -genv PCOLL_TUNE_FILE pcoll.rules ./app

The rules say `p=N nodes=K`: other job shapes fall through to pcoll's
built-in rules. PCOLL_* variables set when running pcoll tune (e.g.
PCOLL_RANKS_PER_NODE, PCOLL_SHM) apply to the measurement; set them the
same way when using the file.

  --mpi M          mpich or openmpi (the MPI the program runs under)
  --ranks N        ranks to measure at (2 or more)
  --out FILE       where to write the rules (default pcoll.rules)
  --colls LIST     allreduce,reduce,bcast,gatherv (default: all)
  --sizes LIST     message sizes (Gatherv: per rank), e.g. 8,1K,64K,1M
                   (default 8,64,512,4K,32K,256K,1M)
  --time SEC       seconds per size and candidate (default 0.2)
  --lib PATH       libpcoll.so for that MPI (default: scripts/build.sh M)
  --bench PATH     a built pcoll_bench (default: compiled from bench/pcoll_bench.c)
  --timeout SEC    limit for one benchmark run (default 900)
";

struct Options {
    mpi: String,
    ranks: usize,
    out: PathBuf,
    colls: Vec<Coll>,
    sizes: Vec<usize>,
    time: f64,
    lib: Option<PathBuf>,
    bench: Option<PathBuf>,
    timeout: Duration,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        mpi: String::new(),
        ranks: 0,
        out: "pcoll.rules".into(),
        colls: Coll::ALL.to_vec(),
        sizes: vec![8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20],
        time: 0.2,
        lib: None,
        bench: None,
        timeout: Duration::from_secs(900),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        let list = |v: &str| -> Vec<String> {
            v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
        };
        match arg.as_str() {
            "--mpi" => o.mpi = value()?.clone(),
            "--ranks" => o.ranks = value()?.parse().map_err(|_| "--ranks needs a whole number")?,
            "--out" => o.out = value()?.into(),
            "--colls" => {
                o.colls = list(value()?)
                    .iter()
                    .map(|c: &String| {
                        Coll::ALL.into_iter().find(|k| k.name() == c).ok_or(format!("no collective {c:?}"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--sizes" => {
                o.sizes = list(value()?)
                    .iter()
                    .map(|s: &String| crate::sim::report::parse_bytes(s).ok_or(format!("{s:?} is not a size")))
                    .collect::<Result<_, _>>()?
            }
            "--time" => o.time = value()?.parse().ok().filter(|&t: &f64| t > 0.0).ok_or("--time needs seconds > 0")?,
            "--lib" => o.lib = Some(value()?.into()),
            "--bench" => o.bench = Some(value()?.into()),
            "--timeout" => {
                o.timeout = Duration::from_secs(value()?.parse().map_err(|_| "--timeout needs whole seconds")?)
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    if !MPIS.iter().any(|m| m.0 == o.mpi) {
        return Err(format!("--mpi must be mpich or openmpi, not {:?}", o.mpi));
    }
    if o.ranks < 2 {
        return Err("--ranks must be 2 or more (pcoll hands single-rank calls to the host MPI)".into());
    }
    if o.colls.is_empty() || o.sizes.is_empty() {
        return Err("--colls and --sizes need at least one entry".into());
    }
    Ok(o)
}

/// The repository (for bench/ and scripts/): above the working directory
/// or above this executable.
fn repository() -> Option<PathBuf> {
    let starts = [std::env::current_dir().ok(), std::env::current_exe().ok()];
    starts
        .into_iter()
        .flatten()
        .flat_map(|p| p.ancestors().map(Path::to_path_buf).collect::<Vec<_>>())
        .find(|d| d.join("bench/pcoll_bench.c").is_file() && d.join("scripts/build.sh").is_file())
}

/// The library given, or built with scripts/build.sh.
fn library(o: &Options, repo: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(lib) = &o.lib {
        return lib.canonicalize().map_err(|e| format!("--lib {}: {e}", lib.display()));
    }
    let repo = repo.ok_or("no --lib given and no pcoll repository (bench/, scripts/) found to build one")?;
    eprintln!("pcoll tune: building libpcoll.so for {} (scripts/build.sh)", o.mpi);
    let mut cmd = Command::new("bash");
    cmd.arg(repo.join("scripts/build.sh")).arg(&o.mpi);
    let done = run(cmd, Duration::from_secs(3600))?;
    let last = done.stdout.lines().last().unwrap_or("").trim().to_string();
    if !done.ok || !Path::new(&last).is_file() {
        return Err(format!("scripts/build.sh {} failed:\n{}", o.mpi, tail(&done.stderr)));
    }
    Ok(last.into())
}

/// The benchmark given, or compiled from the repository's source.
fn benchmark(o: &Options, repo: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(bench) = &o.bench {
        return bench.canonicalize().map_err(|e| format!("--bench {}: {e}", bench.display()));
    }
    let repo = repo.ok_or("no --bench given and no pcoll repository (bench/pcoll_bench.c) found to build it")?;
    let mpicc = MPIS.iter().find(|m| m.0 == o.mpi).expect("checked").1;
    let exe = scratch_dir()?.join("pcoll_bench");
    let mut cmd = Command::new(mpicc);
    cmd.arg("-O2").arg("-I").arg(repo.join("include"));
    cmd.arg("-o").arg(&exe).arg(repo.join("bench/pcoll_bench.c")).arg("-ldl");
    let done = run(cmd, Duration::from_secs(300))?;
    if !done.ok {
        return Err(format!("compiling bench/pcoll_bench.c with {mpicc} failed:\n{}", tail(&done.stderr)));
    }
    Ok(exe)
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// The candidates for `coll` at this job shape: algorithms whose check
/// accepts a call of the benchmark's kind (commutative double sums).
fn candidates(coll: Coll, ranks: usize, topo: Topo) -> Vec<&'static str> {
    let unit = if coll.is_reduction() { 8 } else { 1 };
    let desc =
        CallDesc { coll, rank: 0, size: ranks, root: 0, bytes: 8, unit, commutative: true, in_place: false, topo };
    algos::for_coll(coll).filter(|a| (a.check)(&desc).is_ok()).map(|a| a.name).collect()
}

/// The algorithms of `coll` that ran calls, from a PCOLL_STATS summary.
fn ran(summary: &str, coll: Coll) -> Vec<String> {
    summary
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[0] == "pcoll" && f[1] == coll.name() && f[3].parse::<u64>().is_ok_and(|c| c > 0))
                .then(|| f[2].to_string())
        })
        .collect()
}

/// Machine, date and job shape, as comment lines.
fn header(o: &Options, shape: Shape, host: &str, args: &[String]) -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let hostname = read("/proc/sys/kernel/hostname").trim().to_string();
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map_or("", |m| m.trim_start_matches([' ', '\t', ':']));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let settings: Vec<String> = pcoll_env().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut h = format!("# pcoll tune, {}\n", rules::utc(now));
    h += &format!("# machine: {hostname}, {cpu}, {cores} cores\n");
    h += &format!("# job: {} ranks on {} node(s), host MPI {host}\n", shape.procs, shape.nodes);
    if !settings.is_empty() {
        h += &format!("# settings: {}\n", settings.join(" "));
    }
    if shape.procs > cores {
        h += "# OVERSUBSCRIBED: more ranks than cores; the timings measure the scheduler as much as the algorithms\n";
    }
    h += &format!("# command: pcoll tune {}\n", args.join(" "));
    h += &format!(
        "# use: PCOLL_TUNE_FILE={} (rules for p={} nodes={} only;\n",
        o.out.display(),
        shape.procs,
        shape.nodes
    );
    h += "# other calls fall through to the built-in rules)\n";
    h
}

/// The PCOLL_* settings of this process that shape the measurement (not
/// the statistics pcoll tune sets itself). Read without assuming UTF-8
/// (`std::env::vars` panics on any variable that is not); a PCOLL_ value
/// that is not UTF-8 has stopped `Config::from_env` already, or belongs
/// to a name pcoll ignores.
fn pcoll_env() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| k.starts_with("PCOLL_") && !k.starts_with("PCOLL_STATS"))
        .collect();
    v.sort();
    v
}

/// Measures one collective: the timings of candidates that really ran,
/// and the host MPI's version as the benchmark reports it.
fn measure(o: &Options, coll: Coll, names: &[&str], lib: &Path, bench: &Path) -> Result<(Vec<Timing>, String), String> {
    let dir = scratch_dir()?;
    let (csv, stats) = (dir.join(format!("{coll}.csv")), dir.join(format!("{coll}.stats")));
    let mut env = vec![("LD_PRELOAD".to_string(), lib.display().to_string())];
    env.push(("PCOLL_STATS_FILE".into(), stats.display().to_string()));
    env.extend(pcoll_env());
    let sizes: Vec<String> = o.sizes.iter().map(usize::to_string).collect();
    let args: Vec<String> = [
        "--colls",
        coll.name(),
        "--candidates",
        &names.join(","),
        "--sizes",
        &sizes.join(","),
        "--time",
        &o.time.to_string(),
        "--no-memcpy",
        "--label",
        "tune",
        "--csv",
        &csv.display().to_string(),
    ]
    .map(str::to_string)
    .to_vec();
    let done = run(mpi_command(&o.mpi, o.ranks, &env, bench, &args), o.timeout)?;
    if !done.ok {
        return Err(format!("the benchmark failed:\n{}\n{}", tail(&done.stdout), tail(&done.stderr)));
    }
    let (timings, host) = parse_csv(&std::fs::read_to_string(&csv).map_err(|e| format!("{}: {e}", csv.display()))?)?;
    let ran = ran(&std::fs::read_to_string(&stats).unwrap_or_default(), coll);
    let (kept, dropped): (Vec<Timing>, Vec<Timing>) =
        timings.into_iter().partition(|t| t.variant == "mpi" || ran.contains(&t.variant));
    let mut gone: Vec<&str> = dropped.iter().map(|t| t.variant.as_str()).collect();
    gone.dedup();
    if !gone.is_empty() {
        eprintln!("pcoll tune: {coll}: {} never ran a call here (the host MPI did); not a candidate", gone.join(", "));
    }
    Ok((kept, host))
}

/// Runs `pcoll tune` with its arguments.
pub fn main(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        print!("{HELP}");
        return Ok(());
    }
    let o = parse_options(args).map_err(|e| format!("{e}\n\n{HELP}"))?;
    let cfg = Config::from_env().map_err(|e| e.to_string())?;
    let nodes = cfg.shm.ranks_per_node.map_or(1, |per| o.ranks.div_ceil(per));
    let topo = Topo {
        nodes,
        contiguous: true,
        shm: cfg.shm.enable,
        zcopy: cfg.shm.zcopy,
        chunk: cfg.shm.chunk,
        one_sided: true,
    };
    let shape = Shape { procs: o.ranks, nodes };
    let repo = repository();
    let lib = library(&o, repo.as_deref())?;
    let bench = benchmark(&o, repo.as_deref())?;
    let (mut timings, mut host, mut failed) = (Vec::new(), String::new(), Vec::new());
    for &coll in &o.colls {
        let names = candidates(coll, o.ranks, topo);
        eprintln!("pcoll tune: {coll}: the host MPI and {} at {} ranks", names.join(", "), o.ranks);
        match measure(&o, coll, &names, &lib, &bench) {
            Ok((t, h)) => {
                timings.extend(t);
                host = h;
            }
            Err(e) => {
                eprintln!("pcoll tune: {coll}: {e}");
                failed.push(coll.name());
            }
        }
    }
    let _ = std::fs::remove_dir_all(scratch_dir()?);
    if timings.is_empty() {
        return Err("nothing was measured; no rules written".into());
    }
    let text = rules_text(&header(&o, shape, &host, args), shape, &timings)?;
    write_whole(&o.out, &text)?;
    let rules = text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).count();
    println!(
        "pcoll tune: wrote {rules} rules to {}; use them with PCOLL_TUNE_FILE={}",
        o.out.display(),
        o.out.display()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("no rules for {} (see above)", failed.join(", ")))
    }
}

/// Writes `text` to `path` through a temporary file in the same directory
/// and a rename: readers see the old file or the new one, never a part.
fn write_whole(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_file_name(format!(
        ".{}.tmp{}",
        path.file_name().map_or("rules".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let args = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let o = parse_options(&args("--mpi openmpi --ranks 4 --sizes 8,4K --colls bcast --time 0.05")).unwrap();
        assert_eq!(
            (o.mpi.as_str(), o.ranks, o.sizes.clone(), o.colls.clone()),
            ("openmpi", 4, vec![8, 4096], vec![Coll::Bcast])
        );
        for bad in [
            "--mpi lam --ranks 2",
            "--mpi mpich --ranks 1",
            "--mpi mpich --ranks 2 --colls scan",
            "--mpi mpich --ranks 2 --bogus",
            "--mpi mpich --ranks",
        ] {
            assert!(parse_options(&args(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn candidates_follow_the_job_shape_and_stats_say_what_ran() {
        let one_node = Topo { nodes: 1, contiguous: true, shm: true, zcopy: true, chunk: 1 << 16, one_sided: true };
        let here = candidates(Coll::Allreduce, 4, one_node);
        assert!(here.contains(&"shm_flat") && here.contains(&"ring") && !here.contains(&"hier"), "{here:?}");
        let spread = candidates(Coll::Allreduce, 4, Topo { nodes: 2, ..one_node });
        assert!(spread.contains(&"hier") && !spread.contains(&"shm_flat"), "{spread:?}");
        let summary = "pcoll summary: 2 ranks on 1 node, host MPI: x\n\
                       pcoll   collective algorithm calls bytes time_s_sum time_s_max\n\
                       pcoll   allreduce  ring        10 80 0.1 0.1\n\
                       pcoll   allreduce  mpi         4  0  0.1 0.1\n\
                       pcoll   bcast      binomial    3  8  0.1 0.1\n\
                       pcoll   fallback   allreduce   4  0.1  forced algorithm cannot run\n";
        assert_eq!(ran(summary, Coll::Allreduce), ["ring", "mpi"]);
    }
}
