//! `pcoll`: the command-line companion of libpcoll.so.
//!
//! `pcoll algorithms`: every algorithm, one per line as
//! `<collective> <forcing value>` (what PCOLL_<COLL> accepts); the test
//! runner forces each in turn from this list. `pcoll algorithms -v` adds a
//! description.

use pcoll::algos::ALGORITHMS;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("algorithms") => {
            let verbose = args.get(1).is_some_and(|a| a == "-v");
            for algo in ALGORITHMS {
                if verbose {
                    println!("{} {}\t{}", algo.coll, algo.name, algo.summary);
                } else {
                    println!("{} {}", algo.coll, algo.name);
                }
            }
        }
        _ => {
            eprintln!("usage: pcoll algorithms [-v]");
            std::process::exit(2);
        }
    }
}
