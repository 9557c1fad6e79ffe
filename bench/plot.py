#!/usr/bin/env python3
"""Plot pcoll_bench CSV files: median time versus message size per collective.

    python3 bench/plot.py -o bench/out/pcoll_bench-2.png bench/out/mpich-2.csv bench/out/openmpi-2.csv

One panel per collective, log-log; solid lines are pcoll, dashed the stock
MPI, one colour per CSV (per MPI); the grey dotted line is one memcpy of the
message.  The shaded band is p10..p90.  Needs matplotlib (optional for the
project: scripts/bench.sh skips the plot without it).
"""
import argparse
import csv
import os
import sys


def load(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows.append(r)
    return rows


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def human(b):
    b = int(b)
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div}{unit}"
    return str(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("-o", "--output", default="bench/out/pcoll_bench.png")
    args = ap.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = []  # (label, rows)
    for p in args.csv:
        rows = load(p)
        if not rows:
            continue
        label = rows[0].get("label") or os.path.basename(p)
        data.append((label, rows))
    if not data:
        print("plot.py: no data", file=sys.stderr)
        return 1

    colls = []
    for _, rows in data:
        for r in rows:
            if r["coll"] not in colls:
                colls.append(r["coll"])

    first = data[0][1][0]
    title = f"pcoll vs stock MPI, {first['ranks']} ranks on {first['cores']} cores"
    if first.get("oversubscribed") == "1":
        title += " -- OVERSUBSCRIBED: timings measure the scheduler"

    ncol = 2 if len(colls) > 1 else 1
    nrow = (len(colls) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.5 * ncol, 4.5 * nrow), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    for i, coll in enumerate(colls):
        ax = axes[i // ncol][i % ncol]
        mem_drawn = False
        for j, (label, rows) in enumerate(data):
            rs = sorted((r for r in rows if r["coll"] == coll), key=lambda r: int(r["bytes"]))
            if not rs:
                continue
            colour = colours[j % len(colours)]
            x = [int(r["bytes"]) for r in rs]
            for kind, style in (("stock", "--"), ("pcoll", "-")):
                pts = [(xb, num(r[f"{kind}_med_us"]), num(r[f"{kind}_p10_us"]), num(r[f"{kind}_p90_us"]))
                       for xb, r in zip(x, rs)]
                pts = [p for p in pts if p[1] is not None]
                if not pts:
                    continue
                xs, med, lo, hi = zip(*pts)
                ax.plot(xs, med, style, color=colour, marker="o", ms=3, label=f"{label} {kind}")
                ax.fill_between(xs, lo, hi, color=colour, alpha=0.08)
            wrong = [xb for xb, r in zip(x, rs) if r["check"] == "WRONG"]
            if wrong:
                ax.plot(wrong, [num(r["stock_med_us"]) for r in rs if r["check"] == "WRONG"], "x",
                        color="red", ms=9, label=f"{label} pcoll WRONG")
            if not mem_drawn:
                mp = [(xb, num(r.get("memcpy_med_us"))) for xb, r in zip(x, rs)]
                mp = [p for p in mp if p[1]]
                if mp:
                    ax.plot(*zip(*mp), ":", color="grey", label="memcpy")
                    mem_drawn = True
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted({int(r["bytes"]) for _, rows in data for r in rows if r["coll"] == coll})
        if len(ticks) > 8:
            ticks = ticks[:: (len(ticks) + 7) // 8]
        ax.set_xticks(ticks)
        ax.set_xticklabels([human(t) for t in ticks])
        ax.set_title(coll)
        ax.set_xlabel("bytes")
        ax.set_ylabel("median time, us")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for k in range(len(colls), nrow * ncol):
        axes[k // ncol][k % ncol].axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    fig.savefig(args.output, dpi=110)
    print(f"plot.py: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
