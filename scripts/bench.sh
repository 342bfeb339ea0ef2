#!/usr/bin/env bash
# `make bench` (never part of `make test`): boot the VM once in bench mode, run kunit/bench/*.sh
# (every provider side by side in the same boot), print a table and write bench-results.json:
# a list of {"name", "unit", "rsiw", "siw", ...} rows, null where a figure is missing.
# It runs on the bench flavour of the kernel (scripts/env.sh: no lockdep; its own tree, built
# on first use); RSIW_FLAVOUR=test benches the test kernel instead. Compare columns with each
# other, not with figures from another kernel.
set -euo pipefail
export RSIW_FLAVOUR=${RSIW_FLAVOUR:-bench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
out="$RSIW_CACHE/bench-run"
mkdir -p "$out"
"$here/build-kernel.sh"
"$here/build-image.sh"
"$here/run-vm.sh" "$out/console.log" bench '*'
grep -q '^ok [0-9]* 10-' "$out/console.log" || {
  grep -E '^\[10-' "$out/console.log" | tail -30; echo "bench: the run failed ($out/console.log)"; exit 1; }
python3 - "$out/console.log" "$RSIW_TOP/bench-results.json" <<'PY'
import json, re, sys
rows = {}
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"^\[[^]]+\] BENCH (\S+) (\S+) (\S+) (\S+)", line.strip())
    if not m:
        continue
    name, unit, provider, value = m.groups()
    row = rows.setdefault(name, {"name": name, "unit": unit})
    try:
        row[provider] = float(value)
    except ValueError:
        row[provider] = None
out = list(rows.values())
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(f"{'figure':32s} {'unit':6s} {'rsiw':>10s} {'siw':>10s} {'tcp':>10s}")
fmt = lambda v: "-" if v is None else f"{v:.3f}"
for r in out:
    print(f"{r['name']:32s} {r['unit']:6s} {fmt(r.get('rsiw')):>10s} {fmt(r.get('siw')):>10s} {fmt(r.get('tcp')):>10s}")
print(f"written to {sys.argv[2]}")
PY
