#!/usr/bin/python3
"""Draw bench-results.json (bench-report.py) as a PNG: one panel per figure (bench.sh).

Arguments: JSON PNG.
Each panel shows the providers' medians as bars (rsiw next to the C siw, and TCP where the figure
has it; or the two providers a pair row compares) and, on its right axis, the paired ratio with
its 95% confidence interval against a dashed line at 1: above it, rsiw (or the row's subject) did
better. Runs with Debian's python3 and python3-matplotlib (make setup installs them).
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"rsiw": "#c0392b", "siw": "#2c3e50", "tcp": "#7f8c8d"}
SUBJECT, REFERENCE = "#c0392b", "#2c3e50"


def providers(row):
    """The providers of a row, in the order drawn, with their colours."""
    if "subject" in row:
        return [(row["subject"], SUBJECT), (row["reference"], REFERENCE)]
    return [(p, COLOURS[p]) for p in ("rsiw", "siw", "tcp") if p in row]


def panel(ax, row):
    drawn = providers(row)
    names = [p for p, _ in drawn]
    values = [row.get(p) for p in names]
    ax.bar(range(len(names)), [v or 0.0 for v in values], color=[c for _, c in drawn], width=0.6)
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ax.set_title(row["name"], fontsize=8)
    ax.set_ylabel(row["unit"], fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    for i, v in enumerate(values):
        # No figure (the C siw has no atomics, say): "n/a" where its bar would be.
        label = "n/a" if v is None else f"{v:.3g}"
        ax.annotate(label, (i, v or 0.0), ha="center", va="bottom", fontsize=6)
    ratio = row.get("paired_ratio")
    if ratio is None:
        return
    right = ax.twinx()
    ci = row.get("paired_ratio_ci95")
    x = len(names) - 0.2
    if ci:
        right.errorbar([x], [ratio], yerr=[[ratio - ci[0]], [ci[1] - ratio]], fmt="D",
                       color="black", ms=4, capsize=3)
    else:
        right.plot([x], [ratio], "D", color="black", ms=4)
    right.axhline(1.0, color="black", ls="--", lw=0.7)
    low = min([ratio, 1.0] + (ci or []))
    high = max([ratio, 1.0] + (ci or []))
    pad = max(0.05, (high - low) * 0.2)
    right.set_ylim(low - pad, high + pad)
    right.tick_params(axis="y", labelsize=7)
    right.set_ylabel("paired ratio" + (" (95% CI)" if ci else ""), fontsize=7)


def main():
    rows = json.load(open(sys.argv[1]))
    if not rows:
        sys.exit("bench-plot: no figures in " + sys.argv[1])
    cols = min(4, len(rows))
    lines = math.ceil(len(rows) / cols)
    fig, axes = plt.subplots(lines, cols, figsize=(4.2 * cols, 3.0 * lines), squeeze=False)
    for ax, row in zip(axes.flat, rows):
        panel(ax, row)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    fig.suptitle("make bench: medians over rounds; diamonds: paired ratio (above 1: rsiw, or the"
                 " row's first provider, did better)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(sys.argv[2], dpi=100)
    print(f"drawn to {sys.argv[2]} ({len(rows)} figures)")


main()
