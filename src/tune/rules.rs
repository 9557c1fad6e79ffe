//! From measurements to a rules file: per collective and message size the
//! fastest candidate, merged into size ranges, written in the tuning
//! grammar ([`crate::select::rules`]) for PCOLL_TUNE_FILE, with a header
//! saying where, when and for which job shape it was measured.

use crate::core::types::Coll;
use crate::select::rules::Rules;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One candidate's median time at one message size.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    pub coll: Coll,
    pub bytes: usize,
    /// `mpi` (the host MPI's collective) or an algorithm.
    pub variant: String,
    pub median_us: f64,
}

/// Reads the benchmark's candidates CSV (`pcoll_bench --candidates --csv`):
/// the timings of the points whose check passed, and the host MPI's
/// version string. The benchmark calls the host's collective `stock`.
pub fn parse_csv(text: &str) -> Result<(Vec<Timing>, String), String> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().ok_or("an empty CSV file")?.split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).ok_or(format!("the CSV has no column {name:?}"));
    let (mpi, coll, bytes, variant, med, check) =
        (col("mpi")?, col("coll")?, col("bytes")?, col("variant")?, col("med_us")?, col("check")?);
    let mut host = String::new();
    let mut out = Vec::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let bad = || format!("unreadable CSV line {line:?}");
        if f.len() != head.len() {
            return Err(bad());
        }
        host = f[mpi].replace(';', ",");
        if f[check] != "ok" {
            continue;
        }
        out.push(Timing {
            coll: Coll::ALL.into_iter().find(|c| c.name() == f[coll]).ok_or_else(bad)?,
            bytes: f[bytes].parse().map_err(|_| bad())?,
            variant: if f[variant] == "stock" { "mpi".to_string() } else { f[variant].to_string() },
            median_us: f[med].parse().map_err(|_| bad())?,
        });
    }
    Ok((out, host))
}

/// `8`, `4K`, `1M`: bytes in the grammar's units, exact.
fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

/// Where one winner gives way to the next between two measured sizes: the
/// power of two nearest their geometric mean.
fn boundary(lo: usize, hi: usize) -> usize {
    let mid = ((lo.max(1) as f64) * (hi as f64)).sqrt();
    let pow = 1usize << (mid.log2().round() as u32);
    pow.clamp(lo + 1, hi)
}

/// The job shape the rules are for: they say `p=<procs> nodes=<nodes>`,
/// so other jobs fall through to the next rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub procs: usize,
    pub nodes: usize,
}

/// The rules text: `header` (already comment lines), then per collective
/// a comment with the measured medians of each size and the rules, the
/// fastest candidate per size merged into ranges. Checked by parsing it.
pub fn rules_text(header: &str, shape: Shape, timings: &[Timing]) -> Result<String, String> {
    let mut by_coll: BTreeMap<Coll, BTreeMap<usize, Vec<&Timing>>> = BTreeMap::new();
    for t in timings {
        by_coll.entry(t.coll).or_default().entry(t.bytes).or_default().push(t);
    }
    let mut out = header.to_string();
    let cond = format!("p={} nodes={}", shape.procs, shape.nodes);
    for (coll, sizes) in &by_coll {
        let _ = writeln!(out, "\n# {coll}: median us per size, fastest first");
        // (bytes, winner) per measured size.
        let mut winners: Vec<(usize, &str)> = Vec::new();
        for (&bytes, ts) in sizes {
            let mut ts = ts.clone();
            ts.sort_by(|a, b| a.median_us.total_cmp(&b.median_us));
            let shown: Vec<String> = ts.iter().map(|t| format!("{} {:.2}", t.variant, t.median_us)).collect();
            let _ = writeln!(out, "#   {} B: {}", bytes, shown.join(", "));
            winners.push((bytes, &ts[0].variant));
        }
        for (i, &(bytes, winner)) in winners.iter().enumerate() {
            match winners.get(i + 1) {
                Some(&(_, next)) if next == winner => {}
                Some(&(next_bytes, _)) => {
                    let _ = writeln!(out, "{coll} {cond} bytes<{} {winner}", size(boundary(bytes, next_bytes)));
                }
                None => {
                    let _ = writeln!(out, "{coll} {cond} {winner}");
                }
            }
        }
    }
    Rules::parse(&out, "pcoll tune output").map_err(|e| format!("the rules written do not parse ({e}):\n{out}"))?;
    Ok(out)
}

/// `YYYY-MM-DD HH:MM:SS UTC` of seconds since the Unix epoch (the civil
/// calendar from the day count, as in Howard Hinnant's algorithm).
pub fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "\
mpi,label,ranks,local_ranks,cores,oversubscribed,coll,bytes,iters,variant,med_us,p10_us,p90_us,check,other_tasks
MPICH Version: 4.0.2,tune,2,2,2,0,allreduce,8,100,stock,5.0,4,6,ok,0.00
MPICH Version: 4.0.2,tune,2,2,2,0,allreduce,8,100,recursive_doubling,3.0,2,4,ok,0.00
MPICH Version: 4.0.2,tune,2,2,2,0,allreduce,8,100,ring,1.0,1,1,WRONG,0.00
MPICH Version: 4.0.2,tune,2,2,2,0,allreduce,64,100,stock,5.5,4,6,ok,0.00
MPICH Version: 4.0.2,tune,2,2,2,0,allreduce,64,100,recursive_doubling,3.5,2,4,ok,0.00
MPICH Version: 4.0.2,tune,2,2,2,0,allreduce,65536,100,stock,50,4,6,ok,0.00
MPICH Version: 4.0.2,tune,2,2,2,0,allreduce,65536,100,recursive_doubling,60,2,4,ok,0.00
MPICH Version: 4.0.2,tune,2,2,2,0,allreduce,1048576,100,stock,500,4,6,ok,0.00
MPICH Version: 4.0.2,tune,2,2,2,0,allreduce,1048576,100,rabenseifner,300,2,4,ok,0.00
MPICH Version: 4.0.2,tune,2,2,2,0,bcast,8,100,stock,2,4,6,ok,0.00
MPICH Version: 4.0.2,tune,2,2,2,0,bcast,8,100,binomial,3,4,6,ok,0.00
";

    #[test]
    fn the_fastest_per_size_becomes_rules_that_parse() {
        let (timings, host) = parse_csv(CSV).unwrap();
        assert_eq!(host, "MPICH Version: 4.0.2");
        assert_eq!(timings.len(), 10, "the WRONG point is dropped");
        let text = rules_text("# header\n", Shape { procs: 2, nodes: 1 }, &timings).unwrap();
        let rules: Vec<&str> = text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).collect();
        assert_eq!(
            rules,
            [
                "allreduce p=2 nodes=1 bytes<2K recursive_doubling",
                "allreduce p=2 nodes=1 bytes<256K mpi",
                "allreduce p=2 nodes=1 rabenseifner",
                "bcast p=2 nodes=1 mpi",
            ],
            "{text}"
        );
        assert!(text.starts_with("# header\n"));
        assert!(text.contains("#   8 B: recursive_doubling 3.00, mpi 5.00"), "{text}");
        let parsed = Rules::parse(&text, "t").unwrap();
        assert_eq!(parsed.rules.len(), 4);
    }

    #[test]
    fn boundaries_sizes_and_dates() {
        assert_eq!(boundary(8, 64), 32);
        assert_eq!(boundary(64, 512), 256);
        assert_eq!(boundary(4096, 32768), 16384);
        assert_eq!(boundary(1, 2), 2);
        assert_eq!(boundary(0, 8), 4);
        assert_eq!(
            (size(8), size(2048), size(3 << 20), size(1000)),
            ("8".into(), "2K".into(), "3M".into(), "1000".into())
        );
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400 + 3661), "2000-02-29 01:01:01 UTC");
        assert_eq!(utc(1_735_689_599), "2024-12-31 23:59:59 UTC");
    }

    #[test]
    fn malformed_csv_is_refused() {
        assert!(parse_csv("").is_err());
        assert!(parse_csv("mpi,coll\n").is_err());
        let short = CSV.lines().take(2).collect::<Vec<_>>().join("\n") + "\nMPICH,x";
        assert!(parse_csv(&short).unwrap_err().contains("unreadable CSV line"));
    }
}
