#!/usr/bin/env bash
# `make fuzz`: run every cargo-fuzz target of the host crates for FUZZ_SECONDS each (default
# 600) and print each target's execution count. Fails on a crash, timeout or OOM.
# cargo-fuzz passes -Z flags (the sanitizer) to rustc, which only a nightly compiler takes:
# the script uses rustup's nightly toolchain (scripts/setup.sh installs it; FUZZ_TOOLCHAIN
# names another), and only without one falls back to the default toolchain with
# RUSTC_BOOTSTRAP=1.
# A fuzz crate with a committed seed corpus (fuzz/seeds/<target>/, made by
# scripts/fuzz-seeds.sh) gets it as a second, read-only corpus directory after
# its working corpus (fuzz/corpus/<target>/, not committed); crates without
# one run with cargo-fuzz's default corpus as before.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
: "${FUZZ_SECONDS:=600}"
# FUZZ_CRATES limits the run to some host crates (e.g. "rpcrdma2-proto"); default: all.
: "${FUZZ_CRATES:=}"
: "${FUZZ_TOOLCHAIN:=nightly}"
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
# Listed, not probed with `rustup run`, which may install a missing toolchain.
if rustup toolchain list 2>/dev/null | grep -E "^$FUZZ_TOOLCHAIN(-| |\$)" >/dev/null; then
  fuzz=(cargo "+$FUZZ_TOOLCHAIN" fuzz)
else
  echo "fuzz: no $FUZZ_TOOLCHAIN toolchain (rustup toolchain install $FUZZ_TOOLCHAIN --profile minimal);" \
    "trying $(rustc --version) with RUSTC_BOOTSTRAP=1" >&2
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi
status=0
for dir in "$RSIW_TOP"/host/*/fuzz; do
  [ -f "$dir/Cargo.toml" ] || continue
  crate=$(basename "$(dirname "$dir")")
  [ -z "$FUZZ_CRATES" ] || [[ " $FUZZ_CRATES " == *" $crate "* ]] || continue
  for target in $(cd "$dir/.." && "${fuzz[@]}" list); do
    log="$RSIW_CACHE/fuzz-$(basename "$(dirname "$dir")")-$target.log"
    corpus=()
    if [ -d "$dir/seeds/$target" ]; then
      mkdir -p "$dir/corpus/$target"
      corpus=("$dir/corpus/$target" "$dir/seeds/$target")
    fi
    if (cd "$dir/.." && "${fuzz[@]}" run "$target" ${corpus[@]+"${corpus[@]}"} -- -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -timeout=10) >"$log" 2>&1; then
      execs=$(grep -oE 'Done [0-9]+ runs' "$log" | tail -1 | grep -oE '[0-9]+' || echo '?')
      echo "fuzz: $(basename "$(dirname "$dir")")/$target: ok, $execs executions in ${FUZZ_SECONDS}s"
    else
      echo "fuzz: $(basename "$(dirname "$dir")")/$target: FAILED (log: $log)"; tail -20 "$log"; status=1
    fi
  done
done
exit $status
