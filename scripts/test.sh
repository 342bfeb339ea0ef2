#!/usr/bin/env bash
# `make test`: host cargo tests of the pure protocol code, then one QEMU boot that runs every
# KUnit suite and scenario (and the host decodes the packet captures the scenarios left), then
# one pair run (two guests on a link, kunit/pair/*.sh). Ends
# with one line "N passed, M failed" over host tests, KUnit cases and scenarios, and exits
# non-zero when anything failed.
#   RSIW_ONLY=GLOB        only the scenarios (single-guest and pair) whose names match; a glob
#                         that matches pair scenarios and no single-guest one skips the single boot
#   RSIW_PAIR_ONLY=GLOB   the pair scenarios to run instead (e.g. "none": no pair run)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"

passed=0; failed=0
out="$RSIW_CACHE/test-run"
mkdir -p "$out"
t0=$(date +%s)

echo "== host: cargo test (pure protocol code)"
if cargo test --manifest-path "$RSIW_TOP/host/Cargo.toml" --workspace 2>&1 | tee "$out/cargo-test.log"; then :; fi
if grep -q '^test result:' "$out/cargo-test.log"; then
  read -r p f < <(awk '/^test result:/ {for (i = 1; i <= NF; i++) {if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i}} END {print p+0, f+0}' "$out/cargo-test.log")
  passed=$((passed + p)); failed=$((failed + f))
  grep -qE '^error(\[|:)' "$out/cargo-test.log" && { echo "host: cargo reported an error"; failed=$((failed + 1)); }
else
  echo "host: cargo test ran no test (build failure?)"; failed=$((failed + 1))
fi
echo "host: $passed passed, $failed failed ($(( $(date +%s) - t0 ))s)"

echo "== formatting: the kernel's rustfmtcheck (overlaid tree) and rustfmt on every Rust file of ours"
if "$here/kernel-tree.sh" overlay >/dev/null && kmake -s rustfmtcheck >"$out/rustfmt.log" 2>&1 &&
  (cd "$RSIW_TOP" && git ls-files '*.rs' |
    xargs rustfmt --edition 2021 --config-path "$KTREE/.rustfmt.toml" --check) >>"$out/rustfmt.log" 2>&1; then
  echo "format: ok"; passed=$((passed + 1))
else
  echo "format: FAILED"; head -40 "$out/rustfmt.log"; failed=$((failed + 1))
fi

echo "== layering: protocol cores on core only, no module cycles (scripts/check-layering.py)"
if python3 "$here/check-layering.py"; then
  passed=$((passed + 1))
else
  echo "layering: FAILED"; failed=$((failed + 1))
fi

# matches DIR GLOB: some scenario of DIR (kunit/scenarios, kunit/pair) has a name GLOB matches.
matches() {
  local f
  for f in "$RSIW_TOP/kunit/$1"/[0-9]*.sh; do
    case $(basename "$f" .sh) in $2) return 0 ;; esac
  done
  return 1
}

# judge COUNTS LOG...: check-run.py on the logs of one run, its counts added to the totals; on
# a failure the last console lines, then each failed scenario's own last lines, which come last,
# where a truncated CI log still shows them.
judge() {
  local counts=$1 log name p f
  shift
  # Several logs make one KTAP document, $out/pair.ktap.
  python3 "$here/check-run.py" "$@" ${2:+--merged "$out/pair"} \
    --kunit-py "$KTREE/tools/testing/kunit/kunit.py" --counts "$counts"
  read -r p f < <(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["passed"], c["failed"])' "$counts")
  passed=$((passed + p)); failed=$((failed + f))
  [ "$f" != 0 ] || return 0
  for log; do echo "-- last 60 console lines ($log):"; tail -n 60 "$log"; done
  for log; do
    for name in $(sed -n 's/^not ok [0-9]* \(\(pair-[ab]:\)\?[0-9][0-9]-[^ ]*\) # .*/\1/p' "$log"); do
      echo "-- the last 40 lines of scenario $name:"
      grep -a "^\[$name\] " "$log" | tail -n 40
    done
  done
}

only=${RSIW_ONLY:-*}
pair_only=${RSIW_PAIR_ONLY:-$only}
echo "== kernel, modules and VM image"
if "$here/build-kernel.sh" && "$here/build-image.sh"; then
  if [ "$only" != '*' ] && ! matches scenarios "$only" && matches pair "$only"; then
    echo "== VM: skipped (RSIW_ONLY=$only names pair scenarios only)"
  else
    echo "== VM: KUnit suites and scenarios"
    "$here/run-vm.sh" "$out/console.log" test "$only"
    judge "$out/counts.json" "$out/console.log"
    echo "== host: the run's packet captures decoded by the protocol core (scripts/check-captures.sh)"
    "$here/check-captures.sh" "$out/console.share" "$out/console.log" | tee "$out/captures.log"
    p= f=
    read -r p f < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$out/captures.log" | tail -n 1)
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1}))
  fi
  if matches pair "$pair_only"; then
    echo "== pair: two guests on a link, kunit/pair/ scenarios"
    "$here/run-pair.sh" "$out" test "$pair_only"
    judge "$out/pair-counts.json" "$out/pair-a.log" "$out/pair-b.log"
  else
    echo "== pair: skipped (no pair scenario matches $pair_only)"
  fi
else
  echo "build failed: no VM run"; failed=$((failed + 1))
fi

echo "make test: wall time $(( $(date +%s) - t0 ))s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
