#!/usr/bin/env python3
"""Turn bench-mode console logs into bench-results.json and a table (bench.sh).

Arguments: JSON LOG...
JSON is the file to write; each LOG is one boot's console log, whose BENCH lines and per-round
paired ratios are pooled.
"""
import json, math, re, statistics, sys
rows, round_ratios, boots = {}, {}, sys.argv[2:]
lines = [line for log in boots for line in open(log, errors="replace")]
for line in lines:
    # "rounds <name>_paired_ratio pair: ..." (bench_report): each round's ratio.
    m = re.match(r"^\[[^]]+\] rounds (\S+)_paired_ratio pair: (.*)", line.strip())
    if m:
        round_ratios.setdefault(m.group(1), []).extend(
            float(v) for v in m.group(2).split() if re.fullmatch(r"[0-9.]+", v))
        continue
    m = re.match(r"^\[[^]]+\] BENCH (\S+) (\S+) (\S+) (\S+)", line.strip())
    if not m:
        continue
    name, unit, provider, value = m.groups()
    try:
        value = float(value)
    except ValueError:
        value = None
    # "<name>_paired_ratio" (one boot's median of the rounds above) is recomputed below from
    # the pooled rounds.
    if provider == "pair":
        continue
    row = rows.setdefault(name, {"name": name, "unit": unit})
    row.setdefault(provider, []).append(value)
# One boot's figure is the median of its rounds; several boots' is the median of those.
def median_ci95(values):
    """A distribution-free 95% confidence interval of the median of `values` (order
    statistics: the k-th smallest and largest, k from the binomial distribution), or None
    for fewer than 6 values, which cannot give one."""
    values, n = sorted(values), len(values)
    tail, k = 0.0, 0
    while tail + math.comb(n, k) / 2**n <= 0.025:
        tail += math.comb(n, k) / 2**n
        k += 1
    return [values[k - 1], values[n - k]] if k > 0 else None
def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
for name, row in rows.items():
    for provider in [k for k in row if k not in ("name", "unit")]:
        row[provider] = median(row[provider])
    if name in round_ratios:
        values = round_ratios[name]
        row["paired_ratio"] = median(values)
        row["paired_ratio_ci95"] = median_ci95(values)
        row["rounds_ahead"], row["rounds"] = sum(v >= 1 for v in values), len(values)
    if len(boots) > 1:
        row["boots"] = len(boots)
out = list(rows.values())
json.dump(out, open(sys.argv[1], "w"), indent=1)
# ratio: of the medians, turned as bench_pair_ratio turns it (above 1, rsiw did better).
def ratio(r):
    a, b = r.get("rsiw"), r.get("siw")
    if not a or not b:
        return None
    return b / a if r["unit"] in ("us", "ms", "s") else a / b
print(f"{'figure':32s} {'unit':6s} {'rsiw':>10s} {'siw':>10s} {'tcp':>10s} {'ratio':>7s} {'paired':>7s}"
      f" {'95% CI':>13s} {'ahead':>7s}")
fmt = lambda v, w=10: "-".rjust(w) if v is None else f"{v:{w}.3f}"
for r in out:
    print(f"{r['name']:32s} {r['unit']:6s} {fmt(r.get('rsiw'))} {fmt(r.get('siw'))} {fmt(r.get('tcp'))}"
          f" {fmt(ratio(r), 7)} {fmt(r.get('paired_ratio'), 7)}"
          f" {(fmt(r['paired_ratio_ci95'][0], 6) + '..' + fmt(r['paired_ratio_ci95'][1], 5)) if r.get('paired_ratio_ci95') else '-':>13s}"
          f" {(str(r['rounds_ahead']) + '/' + str(r['rounds'])) if 'rounds' in r else '-':>7s}")
print("ratio: rsiw against siw from the medians, paired: the median of each round's ratio;"
      " above 1, rsiw did better; 95% CI: of that median, from the rounds (which leaves out"
      " how far apart boots fall); ahead: the rounds in which rsiw did at least as well")
print(f"written to {sys.argv[1]}" + (f" ({len(boots)} boots pooled)" if len(boots) > 1 else ""))
