#!/usr/bin/env python3
"""Tables of `scripts/bench.sh --algorithms`: for each MPI, rank count and
collective, the median time of every pcoll algorithm (forced in turn)
against the stock MPI, per message size.

    python3 bench/algos_table.py bench/out/algos-*.csv

Each CSV is one pcoll_bench run with one algorithm forced; its file name is
algos-<mpi>-<ranks>-<coll>-<algorithm>.csv. The stock column is the median
over those runs of the stock MPI's time (every run measures it alongside).
In each row `*` marks the fastest, and `ratio` is stock / fastest pcoll.
Rows of runs with more ranks than cores say OVERSUBSCRIBED: they measure
the scheduler. Standard library only.
"""
import csv
import os
import re
import statistics
import sys

NAME = re.compile(r"algos-(\w+)-(\d+)-(\w+)-(\w+)\.csv$")


def main(paths):
    runs = {}  # (mpi, ranks, coll) -> {alg: {bytes: (pcoll_us, stock_us, check)}}
    over = {}
    for path in paths:
        m = NAME.search(os.path.basename(path))
        if not m:
            continue
        mpi, ranks, coll, alg = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                key = (mpi, ranks, coll)
                over[key] = row.get("oversubscribed") == "1"
                pc = row.get("pcoll_med_us") or ""
                runs.setdefault(key, {}).setdefault(alg, {})[int(row["bytes"])] = (
                    float(pc) if pc else None, float(row["stock_med_us"]), row.get("check", ""))
    wrong = 0
    for key in sorted(runs):
        mpi, ranks, coll = key
        algs = sorted(runs[key])
        sizes = sorted({b for a in algs for b in runs[key][a]})
        note = "  OVERSUBSCRIBED (ranks > cores): timings measure the scheduler" if over[key] else ""
        print("\n# %s, %d ranks, %s: median us per algorithm (* fastest), ratio = stock / fastest%s"
              % (mpi, ranks, coll, note))
        print("%10s %10s" % ("bytes", "stock") + "".join(" %19s" % a for a in algs) + " %7s" % "ratio")
        for b in sizes:
            stock = [runs[key][a][b][1] for a in algs if b in runs[key][a]]
            cells = {a: runs[key][a].get(b) for a in algs}
            times = [c[0] for c in cells.values() if c and c[0] is not None and c[2] == "ok"]
            best = min(times) if times else None
            line = "%10d %10.2f" % (b, statistics.median(stock))
            for a in algs:
                c = cells[a]
                if not c:
                    line += " %19s" % "-"
                elif c[2] == "WRONG":
                    line += " %19s" % "WRONG"
                    wrong += 1
                else:
                    line += " %18.2f%s" % (c[0], "*" if c[0] == best else " ")
            line += " %7.2f" % (statistics.median(stock) / best) if best else " %7s" % "-"
            print(line)
    if wrong:
        print("\n# %d point(s) where an algorithm gave a WRONG result" % wrong)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
