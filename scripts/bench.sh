#!/usr/bin/env bash
# `make bench` (never part of `make test`): boot the VM once in bench mode, run kunit/bench/*.sh
# (every provider side by side in the same boot), and with bench-report.py print a table and
# write bench-results.json: a list of {"name", "unit", "rsiw", "siw", ...} rows, null where a
# figure is missing. A figure measured in paired rounds also has "paired_ratio" (the median of
# the rounds' ratios), "paired_ratio_ci95" (a 95% confidence interval of that median, from the
# rounds alone) and "rounds_ahead": in how many of its "rounds" rsiw did at least as well as siw.
# It runs on the bench flavour of the kernel (scripts/env.sh: no lockdep, 250 Hz; its own tree,
# built on first use); RSIW_FLAVOUR=test benches the test kernel instead. Compare columns with
# each other, not with figures from another kernel.
#
# BENCH_BOOTS=N (default 1) boots N times and pools them: a figure is then the median of the
# boots' medians, its paired ratio the median of all their rounds' ratios. Under TCG the host's
# address-space layout of QEMU (its code buffer and heap, which host ASLR draws per boot) moves
# the providers' latencies apart by up to 30% from one boot to the next, the same build and
# guest layout; with `setarch -R` (no ASLR) four boots agreed within a few percent. One boot
# is one such draw.
set -euo pipefail
export RSIW_FLAVOUR=${RSIW_FLAVOUR:-bench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
out="$RSIW_CACHE/bench-run"
mkdir -p "$out"
"$here/build-kernel.sh"
"$here/build-image.sh"
logs=()
for boot in $(seq "${BENCH_BOOTS:-1}"); do
  log="$out/console.log"
  [ "${BENCH_BOOTS:-1}" = 1 ] || log="$out/console.$boot.log"
  "$here/run-vm.sh" "$log" bench '*'
  grep -q '^ok [0-9]* 10-' "$log" || {
    grep -E '^\[10-' "$log" | tail -30; echo "bench: the run failed ($log)"; exit 1; }
  logs+=("$log")
done
python3 "$here/bench-report.py" "$RSIW_TOP/bench-results.json" "${logs[@]}"
