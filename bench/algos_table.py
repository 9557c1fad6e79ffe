#!/usr/bin/env python3
"""Tables of `scripts/bench.sh --algorithms`: for each MPI, rank count and
collective, the median time of pcoll's own choice ("auto") and of every
algorithm, forced, against the stock MPI, per message size. All variants of
a table were timed interleaved in one run (pcoll_bench --candidates), so
they share the machine's state of the moment.

    python3 bench/algos_table.py [--predicted CSV] [--note TEXT] bench/out/algos-*.csv

With --predicted (rows mpi,ranks,coll,bytes,variant,pred_us, what
`pcoll predict` prints for `scripts/bench.sh --cluster`), each cell is
`measured/predicted` (`-` where the model has no price); --note goes into
every table's title (e.g. the hosts and the link model).

In each row `*` marks the fastest pcoll variant; `ratio` is stock / auto
(what users get by default) and `best` stock / fastest. Algorithms that
cannot run a call fall back to the host MPI, so their column shows the
stock time. Tables of runs with more ranks than cores say OVERSUBSCRIBED:
they measure the scheduler. Standard library only.
"""
import argparse
import csv
import os
import re
import sys

NAME = re.compile(r"algos-(\w+)-(\d+)-(\w+)\.csv$")


def read_predicted(path):
    """(mpi, ranks, coll, bytes, variant) -> predicted us, or None."""
    pred = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["mpi"], int(row["ranks"]), row["coll"], int(row["bytes"]), row["variant"])
            pred[key] = None if row["pred_us"] == "-" else float(row["pred_us"])
    return pred


def cell(med, key, predicted):
    """A measured time, with the predicted one after a slash where there
    is a prediction for the point (`-`: the model cannot price it)."""
    if predicted is None or key not in predicted:
        return "%.2f" % med
    pred = predicted[key]
    return "%.1f/%s" % (med, "-" if pred is None else "%.1f" % pred)


def main(paths, predicted=None, note=""):
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
        over_note = "  OVERSUBSCRIBED (ranks > cores): timings measure the scheduler" if over[key] else ""
        what = "median us" if predicted is None else "median us measured/predicted"
        print("\n# %s, %d ranks%s, %s: %s (* fastest pcoll variant), ratio = stock / auto, best = stock / fastest%s"
              % (mpi, ranks, note, coll, what, over_note))
        width = 17 if predicted is None else 19
        print("%10s %10s" % ("bytes", "stock") + "".join(" %*s" % (width, v) for v in variants) + " %7s %7s" % ("ratio", "best"))
        for b in sorted(tables[key]):
            cells = tables[key][b]
            stock = cells["stock"][0]
            ok = [cells[v][0] for v in variants if v in cells and cells[v][1] == "ok"]
            best = min(ok) if ok else None
            line = "%10d %10.2f" % (b, stock)
            for v in variants:
                med, check = cells.get(v, (None, "-"))
                if med is None:
                    line += " %*s" % (width, "-")
                elif check != "ok":
                    line += " %*s" % (width, "WRONG")
                    wrong += 1
                else:
                    text = cell(med, (mpi, ranks, coll, b, v), predicted)
                    line += " %*s%s" % (width - 1, text, "*" if med == best else " ")
            auto = cells.get("auto")
            line += " %7.2f" % (stock / auto[0]) if auto and auto[1] == "ok" and auto[0] > 0 else " %7s" % "-"
            line += " %7.2f" % (stock / best) if best else " %7s" % "-"
            print(line)
    if wrong:
        print("\n# %d point(s) where a variant gave a WRONG result" % wrong)
    return 1 if wrong else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Tables of scripts/bench.sh --algorithms and --cluster")
    parser.add_argument("--predicted", help="predicted times (pcoll predict, with mpi and ranks columns)")
    parser.add_argument("--note", default="", help="added to every table's title")
    parser.add_argument("csvs", nargs="*")
    args = parser.parse_args()
    pred = read_predicted(args.predicted) if args.predicted else None
    sys.exit(main(args.csvs, pred, ", " + args.note if args.note else ""))
