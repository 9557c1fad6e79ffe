//! `pcoll`: the command-line companion of libpcoll.so.
//!
//! `pcoll algorithms [-v]`: every algorithm, one per line as
//! `<collective> <forcing value> <scope>` (the forcing value is what
//! PCOLL_<COLL> accepts; the scope is `p2p`, `node` or `multi-node`, the
//! communicators it runs on); the test runner forces each in turn from this
//! list. `-v` adds a description and the parameters; `--markdown` prints
//! docs/algorithms.md.
//!
//! `pcoll config --markdown`: the reference of every PCOLL_* setting,
//! docs/configuration.md; `--readme-table`: README.md's table of the
//! settings most users need.
//!
//! `pcoll model [options]`: predicted times of every algorithm from the
//! cost model, which prices the algorithms' own schedules (see
//! `pcoll model --help`).
//!
//! `pcoll predict --model K=V,... --nodes N --coll C --bytes LIST
//! --variants LIST`: predicted times across N nodes of one rank each, as
//! CSV, for the measured tables of `scripts/bench.sh --cluster` (see
//! `pcoll predict --help`).
//!
//! `pcoll tune --mpi M --ranks N [options]`: measures the algorithms on
//! this machine and writes rules for PCOLL_TUNE_FILE (see
//! `pcoll tune --help`).

use pcoll::algos::ALGORITHMS;
use pcoll::core::cost_model::CostModel;
use pcoll::core::types::Coll;
use pcoll::sim::across;
use pcoll::sim::report::{self, parse_bytes};

const MODEL_HELP: &str = "\
usage: pcoll model [--coll LIST] [--procs LIST] [--bytes LIST] [--model K=V,...] [--nonpof2 | --gatherv]

Predicted times (microseconds) of every algorithm, priced by running the
algorithms' schedules for all ranks through an alpha-beta-gamma model with
single-port contention (see src/sim/cost.rs).

  --coll LIST     allreduce,reduce,bcast,gatherv (default: all)
  --procs LIST    process counts (default 2,4,8,16,64,256,1024,4096,32768)
  --bytes LIST    message sizes, e.g. 8,1K,64K,1M,64M (default 8,1K,64K,1M,64M)
  --model K=V,..  model parameters: alpha (latency), overhead (software cost
                  per message at each end), beta, gamma, delta (seconds per
                  byte sent / reduced / copied) and eager (bytes); default: a
                  2020 InfiniBand cluster, alpha=1.5e-6,overhead=3e-7,
                  beta=8.3e-11,gamma=2.5e-10,delta=1e-10,eager=16384.
                  Calibrated values come from PCOLL_CALIBRATE=1 on a real job.
  --nonpof2       only the seed-004 split against the classic fold, at
                  p = 3,5,6,7,12,100,1000 (or --procs), for --bytes (default 1M)
  --gatherv       only linear Gatherv against seed 001's binomial tree: peers
                  (connections) and temporary bytes per rank, predicted times,
                  at p = 2,4,...,32768 (or --procs), for --bytes per rank
                  (default 8 and 8K, as in the seed's tables)
";

const PREDICT_HELP: &str = "\
usage: pcoll predict --model K=V,... --nodes N --coll C --bytes LIST --variants LIST

Predicted times of a call across N nodes of one rank each, one CSV line
`coll,bytes,variant,pred_us` per size and variant (`-` where the model
cannot price it): point-to-point algorithms by their schedules, `hier`
and `dpml` by the algorithm they run between the nodes, `salar` by its
formula, `auto` as the built-in rules choose (see src/sim/across.rs).

  --model K=V,..  model parameters, as `pcoll model` takes them (e.g. what
                  PCOLL_CALIBRATE=1 printed on the cluster)
  --nodes N       nodes (default 2)
  --coll C        allreduce, reduce, bcast or gatherv
  --bytes LIST    message sizes, e.g. 8,1K,4M
  --variants LIST algorithm names and `auto`
";

fn fail(msg: &str) -> ! {
    eprintln!("pcoll: {msg}");
    std::process::exit(2);
}

fn list<T>(text: &str, parse: impl Fn(&str) -> Option<T>, what: &str) -> Vec<T> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| parse(s).unwrap_or_else(|| fail(&format!("{s:?} is not {what}"))))
        .collect()
}

fn model(args: &[String]) {
    let mut colls: Vec<Coll> = Coll::ALL.to_vec();
    let mut procs: Option<Vec<usize>> = None;
    let mut sizes: Option<Vec<usize>> = None;
    let mut cost = CostModel::CLUSTER;
    let mut nonpof2 = false;
    let mut gatherv = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| fail(&format!("{arg} needs a value")));
        match arg.as_str() {
            "--coll" => colls = list(value(), |s| Coll::ALL.into_iter().find(|c| c.name() == s.trim()), "a collective"),
            "--procs" => {
                procs = Some(list(value(), |s| s.trim().parse().ok().filter(|&p: &usize| p >= 1), "a process count"))
            }
            "--bytes" => sizes = Some(list(value(), parse_bytes, "a size")),
            "--model" => cost = cost.with(value()).unwrap_or_else(|e| fail(&format!("--model: {e}"))),
            "--nonpof2" => nonpof2 = true,
            "--gatherv" => gatherv = true,
            "-h" | "--help" => {
                print!("{MODEL_HELP}");
                return;
            }
            other => fail(&format!("unknown option {other:?}\n{MODEL_HELP}")),
        }
    }
    println!("# cost model: {cost}");
    if nonpof2 {
        let procs = procs.unwrap_or_else(|| vec![3, 5, 6, 7, 12, 100, 1000]);
        for bytes in sizes.unwrap_or_else(|| vec![1 << 20]) {
            print!("{}", report::schemes_table(&procs, bytes, &cost));
        }
        return;
    }
    if gatherv {
        let procs = procs.unwrap_or_else(|| (1..=15).map(|k| 1 << k).collect());
        for bytes in sizes.unwrap_or_else(|| vec![8, 8 << 10]) {
            print!("{}", report::gatherv_table(&procs, bytes, &cost));
        }
        return;
    }
    let procs = procs.unwrap_or_else(|| vec![2, 4, 8, 16, 64, 256, 1024, 4096, 32768]);
    let sizes = sizes.unwrap_or_else(|| vec![8, 1 << 10, 64 << 10, 1 << 20, 64 << 20]);
    for coll in colls {
        print!("{}", report::times(coll, &sizes, &procs, &cost));
    }
}

fn predict(args: &[String]) {
    let mut cost = CostModel::CLUSTER;
    let (mut nodes, mut coll, mut sizes, mut variants) = (2, None, Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| fail(&format!("{arg} needs a value")));
        match arg.as_str() {
            "--model" => cost = cost.with(value()).unwrap_or_else(|e| fail(&format!("--model: {e}"))),
            "--nodes" => {
                nodes = value()
                    .trim()
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n >= 2)
                    .unwrap_or_else(|| fail("--nodes: 2 or more"))
            }
            "--coll" => {
                let name = value().trim();
                coll = Coll::ALL.into_iter().find(|c| c.name() == name)
            }
            "--bytes" => sizes = list(value(), parse_bytes, "a size"),
            "--variants" => variants = list(value(), |s| Some(s.trim().to_string()), "a name"),
            "-h" | "--help" => {
                print!("{PREDICT_HELP}");
                return;
            }
            other => fail(&format!("unknown option {other:?}\n{PREDICT_HELP}")),
        }
    }
    let coll =
        coll.unwrap_or_else(|| fail(&format!("--coll: one of allreduce, reduce, bcast, gatherv\n{PREDICT_HELP}")));
    println!("coll,bytes,variant,pred_us");
    for &bytes in &sizes {
        for variant in &variants {
            let us = across::predict_across(coll, variant, nodes, bytes, &cost)
                .map_or("-".to_string(), |t| format!("{:.2}", t * 1e6));
            println!("{coll},{bytes},{variant},{us}");
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("algorithms") if args.get(1).is_some_and(|a| a == "--markdown") => {
            print!("{}", pcoll::reference::algorithms_page())
        }
        Some("config") if args.get(1).is_some_and(|a| a == "--markdown") => {
            print!("{}", pcoll::reference::configuration_page())
        }
        Some("config") if args.get(1).is_some_and(|a| a == "--readme-table") => {
            print!("{}", pcoll::reference::readme_table())
        }
        Some("algorithms") => {
            let verbose = args.get(1).is_some_and(|a| a == "-v");
            for algo in ALGORITHMS {
                let scope = algo.imp.scope();
                if !verbose {
                    println!("{} {} {scope}", algo.coll, algo.name);
                    continue;
                }
                let params: Vec<String> = algo
                    .params
                    .iter()
                    .map(|p| format!("{}={}..{} (default {}: {})", p.name, p.min, p.max, p.default, p.help))
                    .collect();
                let seed = algo.seed.map_or(String::new(), |seed| format!(" (seed {seed})"));
                println!("{} {} {scope}\t{}{seed}", algo.coll, algo.name, algo.summary);
                for p in params {
                    println!("\t\t{p}");
                }
            }
        }
        Some("--version") => println!("pcoll {}", env!("CARGO_PKG_VERSION")),
        Some("model") => model(&args[1..]),
        Some("predict") => predict(&args[1..]),
        Some("tune") => {
            if let Err(e) = pcoll::tune::main(&args[1..]) {
                fail(&e);
            }
        }
        _ => {
            eprintln!(
                "usage: pcoll algorithms [-v | --markdown] | pcoll config --markdown|--readme-table | pcoll model [--help] | pcoll predict [--help] | \
                 pcoll tune [--help] | pcoll --version"
            );
            std::process::exit(2);
        }
    }
}
