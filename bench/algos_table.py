#!/usr/bin/env python3
"""Tables of `scripts/bench.sh --algorithms`: for each MPI, rank count and
collective, the median time of pcoll's own choice ("auto") and of every
algorithm, forced, against the stock MPI, per message size. All variants of
a table were timed interleaved in one run (pcoll_bench --candidates), so
they share the machine's state of the moment.

    python3 bench/algos_table.py bench/out/algos-*.csv

In each row `*` marks the fastest pcoll variant; `ratio` is stock / auto
(what users get by default) and `best` stock / fastest. Algorithms that
cannot run a call fall back to the host MPI, so their column shows the
stock time. Tables of runs with more ranks than cores say OVERSUBSCRIBED:
they measure the scheduler. Standard library only.
"""
import csv
import os
import re
import sys

NAME = re.compile(r"algos-(\w+)-(\d+)-(\w+)\.csv$")


def main(paths):
    tables = {}  # (mpi, ranks, coll) -> {bytes: {variant: (med, check)}}
    order = {}
    over = {}
    for path in sorted(paths):
        m = NAME.search(os.path.basename(path))
        if not m:
            continue
        key = (m.group(1), int(m.group(2)), m.group(3))
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                over[key] = row.get("oversubscribed") == "1"
                v = row["variant"]
                order.setdefault(key, [])
                if v not in order[key]:
                    order[key].append(v)
                tables.setdefault(key, {}).setdefault(int(row["bytes"]), {})[v] = (float(row["med_us"]), row["check"])
    wrong = 0
    for key in sorted(tables):
        mpi, ranks, coll = key
        variants = [v for v in order[key] if v != "stock"]
        note = "  OVERSUBSCRIBED (ranks > cores): timings measure the scheduler" if over[key] else ""
        print("\n# %s, %d ranks, %s: median us (* fastest pcoll variant), ratio = stock / auto, best = stock / fastest%s"
              % (mpi, ranks, coll, note))
        print("%10s %10s" % ("bytes", "stock") + "".join(" %17s" % v for v in variants) + " %7s %7s" % ("ratio", "best"))
        for b in sorted(tables[key]):
            cells = tables[key][b]
            stock = cells["stock"][0]
            ok = [cells[v][0] for v in variants if v in cells and cells[v][1] == "ok"]
            best = min(ok) if ok else None
            line = "%10d %10.2f" % (b, stock)
            for v in variants:
                med, check = cells.get(v, (None, "-"))
                if med is None:
                    line += " %17s" % "-"
                elif check != "ok":
                    line += " %17s" % "WRONG"
                    wrong += 1
                else:
                    line += " %16.2f%s" % (med, "*" if med == best else " ")
            auto = cells.get("auto")
            line += " %7.2f" % (stock / auto[0]) if auto and auto[1] == "ok" and auto[0] > 0 else " %7s" % "-"
            line += " %7.2f" % (stock / best) if best else " %7s" % "-"
            print(line)
    if wrong:
        print("\n# %d point(s) where a variant gave a WRONG result" % wrong)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
