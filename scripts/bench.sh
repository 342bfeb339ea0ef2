#!/usr/bin/env bash
# `make bench` (never part of `make test`): boot the VM once in bench mode, run kunit/bench/*.sh
# (every provider side by side in the same boot); then boot a pair run in bench mode
# (run-pair.sh DIR bench: two guests on a link running kunit/pair-bench/*.sh), for what needs
# two kernels: the rpcrdma2 NFS client against the C client, both mounting the C server of the
# other guest (the two client transports cannot be loaded in one kernel, and the C server is
# part of the C one). With bench-report.py print the tables and write bench-results.json: a
# list of {"name", "unit", "rsiw", "siw", ...} rows, null where a figure is missing; a row of
# two other providers (rpcrdma2 and c_rpcrdma) names them as "subject" and "reference". A figure measured in paired rounds also has "paired_ratio" (the median of
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
# is one such draw. The pair run is booted BENCH_BOOTS times too.
#
# BENCH_ONLY=single or BENCH_ONLY=pair runs only the single-guest boot or only the pair run
# (default: both). RSIW_BENCH_OUT is where the console logs go (default $RSIW_CACHE/bench-run).
set -euo pipefail
export RSIW_FLAVOUR=${RSIW_FLAVOUR:-bench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
only=${BENCH_ONLY:-all}
case $only in all | single | pair) ;; *) echo "bench: BENCH_ONLY must be single or pair, not $only" >&2; exit 2 ;; esac
out="${RSIW_BENCH_OUT:-$RSIW_CACHE/bench-run}"
mkdir -p "$out"
"$here/build-kernel.sh"
"$here/build-image.sh"
logs=()
for boot in $(seq "${BENCH_BOOTS:-1}"); do
  [ "$only" != pair ] || break
  log="$out/console.log"
  [ "${BENCH_BOOTS:-1}" = 1 ] || log="$out/console.$boot.log"
  "$here/run-vm.sh" "$log" bench '*'
  grep -q '^ok [0-9]* 10-' "$log" || {
    grep -E '^\[10-' "$log" | tail -30; echo "bench: the run failed ($log)"; exit 1; }
  logs+=("$log")
done
# The pair run: guest a's log has the figures; both guests must have finished every scenario.
for boot in $(seq "${BENCH_BOOTS:-1}"); do
  [ "$only" != single ] || break
  dir="$out"
  [ "${BENCH_BOOTS:-1}" = 1 ] || dir="$out/pair.$boot"
  "$here/run-pair.sh" "$dir" bench '*'
  for role in a b; do
    log="$dir/pair-$role.log"
    grep -q "^ok [0-9]* pair-$role:" "$log" && ! grep -q "^not ok [0-9]* pair-$role:" "$log" || {
      grep -E "^\[pair-$role:|^rsiw-guest: " "$log" | tail -30; echo "bench: the pair run failed ($log)"; exit 1; }
  done
  logs+=("$dir/pair-a.log")
done
python3 "$here/bench-report.py" "$RSIW_TOP/bench-results.json" "${logs[@]}"
# Debian's python3, which has python3-matplotlib.
/usr/bin/python3 "$here/bench-plot.py" "$RSIW_TOP/bench-results.json" "$RSIW_TOP/bench-results.png"
