#!/usr/bin/env python3
"""Plot pcoll_bench CSV files, per collective against message size.

    python3 bench/plot.py [--kind ratio|times] -o OUT.png bench/out/mpich-2.csv bench/out/openmpi-2.csv

--kind ratio (default): how many times faster pcoll is than the stock MPI
(stock median / pcoll median), one line per CSV (per host MPI), the 1.0
line marked (below it pcoll is slower).
--kind times: median times, log-log; solid lines are pcoll, dashed the
stock MPI, one colour per CSV; the grey dotted line is one copy of the
message (memcpy_us, in the buffers' state of the mode); the shaded band
is p10..p90.
Needs matplotlib (scripts/setup.sh installs Debian's python3-matplotlib).
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


def size_axis(ax, coll, data):
    """The message-size axis, title, grid and legend of a panel."""
    ax.set_xscale("log", base=2)
    ticks = sorted({int(r["bytes"]) for _, rows in data for r in rows if r["coll"] == coll})
    if len(ticks) > 8:
        ticks = ticks[:: (len(ticks) + 7) // 8]
    ax.set_xticks(ticks)
    ax.set_xticklabels([human(t) for t in ticks])
    ax.set_title(coll)
    ax.set_xlabel("bytes")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def ratio_panel(ax, coll, data, colours):
    """stock/pcoll against size, one line per host MPI, and the 1.0 line."""
    ax.axhline(1.0, color="black", lw=1.2, ls="--", label="1.0: as fast as stock")
    for j, (label, rows) in enumerate(data):
        rs = sorted((r for r in rows if r["coll"] == coll), key=lambda r: int(r["bytes"]))
        pts = [(int(r["bytes"]), num(r["stock_med_us"]), num(r["pcoll_med_us"])) for r in rs if r["check"] != "WRONG"]
        pts = [(x, s / p) for x, s, p in pts if s and p]
        if pts:
            ax.plot(*zip(*pts), "-", color=colours[j % len(colours)], marker="o", ms=3, label=label)
        wrong = [int(r["bytes"]) for r in rs if r["check"] == "WRONG"]
        if wrong:
            ax.plot(wrong, [1.0] * len(wrong), "x", color="red", ms=9, label=f"{label} pcoll WRONG")
    ax.set_ylim(bottom=0)
    size_axis(ax, coll, data)
    ax.set_ylabel("stock time / pcoll time")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("-o", "--output", default="bench/out/pcoll_bench.png")
    ap.add_argument("--kind", choices=("ratio", "times"), default="ratio")
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
    if args.kind == "ratio":
        title = f"How many times faster pcoll is than the stock MPI, {first['ranks']} ranks on {first['cores']} cores"
    modes = {
        "sync": "calls starting together, cold buffers",
        "osu": "barrier-separated calls, hot buffers, ranks averaged (as OSU)",
        "b2b": "back-to-back calls, rotating roots, hot buffers (as IMB)",
        "b2b-cold": "back-to-back calls, rotating roots, cold buffers (as IMB off-cache)",
    }
    if first.get("mode") in modes:
        title += f"\n{modes[first['mode']]}"
    if first.get("oversubscribed") == "1":
        title += " -- OVERSUBSCRIBED: timings measure the scheduler"

    ncol = 2 if len(colls) > 1 else 1
    nrow = (len(colls) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.5 * ncol, 4.5 * nrow), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    for i, coll in enumerate(colls):
        ax = axes[i // ncol][i % ncol]
        if args.kind == "ratio":
            ratio_panel(ax, coll, data, colours)
            continue
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
        ax.set_yscale("log")
        size_axis(ax, coll, data)
        ax.set_ylabel("median time, us")
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
