#!/usr/bin/env python3
"""Turn bench-mode console logs into bench-results.json and tables (bench.sh).

Arguments: JSON LOG...
JSON is the file to write; each LOG is one boot's console log (a single guest's, or guest a's of
a pair run), whose BENCH lines and per-round paired ratios are pooled.

A figure's providers are rsiw and siw (and tcp for reference) unless its paired ratio names two
others ("pair:SUBJECT:REFERENCE", bench_pair_ratio in kunit/scenarios/lib.sh): such a figure
has "subject" and "reference" in its row and is printed in a table of its own, one per such
two, with its ratio turned to favour the subject as rsiw's is. A figure compared against two
references (kunit/pair-bench/12-*: rpcrdma2_v2 against nfs_tcp and against c_rpcrdma) gives
one row per comparison, each with that comparison's rounds.
"""
import json, math, re, statistics, sys
rows, round_ratios, compared, owners, boots = {}, {}, {}, {}, sys.argv[2:]
for boot, log in enumerate(boots):
    # "rounds <name> <provider>: ..." (bench_report): a provider's rounds, whose median stands
    # in for its BENCH line when a kernel message cut that line on the console.
    provider_rounds, benched = {}, set()
    for line in open(log, errors="replace"):
        m = re.match(r"^\[[^]]+\] rounds (\S+) ([^:\s]+): ([0-9. ]*)$", line.strip())
        if m and not m.group(1).endswith("_paired_ratio"):
            provider_rounds[m.group(1), m.group(2)] = [float(v) for v in m.group(3).split()]
            continue
        # "rounds <name>_paired_ratio pair[:SUBJECT:REFERENCE]: ..." (bench_report): each
        # round's ratio.
        m = re.match(r"^\[[^]]+\] rounds (\S+)_paired_ratio pair(?::([^:\s]+):([^:\s]+))?: (.*)",
                     line.strip())
        if m:
            name, subject, reference, values = m.groups()
            pair = (subject, reference) if subject else None
            round_ratios.setdefault((name, pair), []).extend(
                float(v) for v in values.split() if re.fullmatch(r"[0-9.]+", v))
            if pair:
                compared.setdefault(name, set()).add(pair)
            continue
        m = re.match(r"^\[([^]]+)\] BENCH (\S+) (\S+) (\S+) (\S+)", line.strip())
        if not m:
            continue
        scenario, name, unit, provider, value = m.groups()
        # A figure is one scenario's: two scenarios reporting one name would share a row, and
        # one's providers and paired ratios would hide the other's.
        owner = owners.setdefault(name, scenario)
        if owner != scenario:
            sys.exit(f"bench-report: figure {name} is reported by both [{owner}] and [{scenario}]")
        try:
            value = float(value)
        except ValueError:
            value = None
        # "nan": no round gave a number.
        if value is not None and not math.isfinite(value):
            value = None
        # "<name>_paired_ratio" (one boot's median of the rounds above) is recomputed below
        # from the pooled rounds.
        if provider == "pair" or provider.startswith("pair:"):
            continue
        row = rows.setdefault(name, {"name": name, "unit": unit})
        row.setdefault(provider, []).append(value)
        row.setdefault("boots", set()).add(boot)
        benched.add((name, provider))
    for (name, provider), values in provider_rounds.items():
        if (name, provider) not in benched and name in rows and values:
            rows[name].setdefault(provider, []).append(statistics.median(values))
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
out = []
for name, row in rows.items():
    nboots = len(row.pop("boots"))
    for provider in [k for k in row if k not in ("name", "unit")]:
        row[provider] = median(row[provider])
    if nboots > 1:
        row["boots"] = nboots
    for pair in sorted(compared.get(name, ())) or [None]:
        one = dict(row)
        if pair:
            one["subject"], one["reference"] = pair
        values = round_ratios.get((name, pair))
        if values:
            one["paired_ratio"] = median(values)
            one["paired_ratio_ci95"] = median_ci95(values)
            one["rounds_ahead"], one["rounds"] = sum(v >= 1 for v in values), len(values)
        out.append(one)
json.dump(out, open(sys.argv[1], "w"), indent=1)
# ratio: of the medians, turned as bench_pair_ratio turns it (above 1, the subject did better).
def ratio(r, subject, reference):
    a, b = r.get(subject), r.get(reference)
    if not a or not b:
        return None
    return b / a if r["unit"] in ("us", "ms", "s") else a / b
fmt = lambda v, w=10: "-".rjust(w) if v is None else f"{v:{w}.3f}"
def table(rows, columns, subject, reference):
    print(f"{'figure':32s} {'unit':6s} " + " ".join(f"{c:>10s}" for c in columns) +
          f" {'ratio':>7s} {'paired':>7s} {'95% CI':>13s} {'ahead':>7s}")
    for r in rows:
        ci = r.get("paired_ratio_ci95")
        print(f"{r['name']:32s} {r['unit']:6s} " + " ".join(fmt(r.get(c)) for c in columns) +
              f" {fmt(ratio(r, subject, reference), 7)} {fmt(r.get('paired_ratio'), 7)}"
              f" {(fmt(ci[0], 6) + '..' + fmt(ci[1], 5)) if ci else '-':>13s}"
              f" {(str(r['rounds_ahead']) + '/' + str(r['rounds'])) if 'rounds' in r else '-':>7s}")
    print(f"ratio: {subject} against {reference} from the medians, paired: the median of each"
          f" round's ratio; above 1, {subject} did better; 95% CI: of that median, from the rounds"
          f" (which leaves out how far apart boots fall); ahead: the rounds in which {subject} did"
          f" at least as well")
# The rsiw/siw table (unless every row is of two other providers: BENCH_ONLY=pair), then one
# table for each two other providers compared, a blank line between tables.
tables = sorted({pair for pairs in compared.values() for pair in pairs})
if any("subject" not in r for r in out) or not compared:
    tables.insert(0, None)
for i, two in enumerate(tables):
    if i:
        print()
    if two is None:
        table([r for r in out if "subject" not in r], ["rsiw", "siw", "tcp"], "rsiw", "siw")
    else:
        table([r for r in out if (r.get("subject"), r.get("reference")) == two], list(two), *two)
pooled = max([r.get("boots", 1) for r in out], default=1)
print(f"written to {sys.argv[1]}" + (f" ({pooled} boots pooled)" if pooled > 1 else ""))
