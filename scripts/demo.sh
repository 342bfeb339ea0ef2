#!/usr/bin/env bash
# `make demo`: build what is missing, boot the test VM once and show rsiw doing its job, one
# step after the other as the guest runs them (kunit/demo/NN-*.sh, each with a "# demo:" title
# line): rping between rsiw and the C siw both ways with the data verified; perftest's
# ib_write_bw and ib_read_bw at 64 KiB and ib_send_lat over rsiw next to the C siw, in one
# table; NFS over rsiw (rpcrdma2's client and server, RPC-over-RDMA Version 2) with a file
# written, read back and compared; RFC 7306 atomics between two rsiw devices, counted by
# `rdma statistic`. The guest's lines are shown as they come, then one line says which steps
# ran and whether all of them passed; the exit status is 1 if not.
# RSIW_DEMO=GLOB runs only the steps whose names match; the console log goes to
# $RSIW_CACHE/demo-run (RSIW_DEMO_OUT moves it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
out="${RSIW_DEMO_OUT:-$RSIW_CACHE/demo-run}"
log="$out/console.log"
glob="${RSIW_DEMO:-*}"
mkdir -p "$out"
start=$(date +%s)
# elapsed: minutes and seconds since the demo started.
elapsed() { local s=$(( $(date +%s) - start )); printf '%d:%02d' $((s / 60)) $((s % 60)); }
# title NAME: the "# demo:" line of step NAME.
title() { sed -n 's/^# demo: *//p' "$RSIW_TOP/kunit/demo/$1.sh" 2>/dev/null | head -n1; }

"$here/build-kernel.sh"
"$here/build-image.sh"
echo "demo: [$(elapsed)] kernel, modules and image ready; booting the VM (about a minute to the first step)"

# The guest's steps are bounded by their own limits; this bounds a guest that hangs.
: "${RSIW_VM_TIMEOUT:=900}"
export RSIW_VM_TIMEOUT
rm -f "$log"
"$here/run-vm.sh" "$log" demo "$glob" >"$out/run-vm.log" &
vm=$!
# The console as it is written: each step's start and end, and the lines of its own.
while [ ! -e "$log" ] && kill -0 "$vm" 2>/dev/null; do sleep 0.2; done
while IFS= read -r line; do
  line=${line%$'\r'}
  case $line in
    "rsiw-guest: mode="*)
      echo "demo: [$(elapsed)] the guest runs: ${line#rsiw-guest: }" ;;
    "rsiw-guest: scenario "*": start "*)
      name=${line#rsiw-guest: scenario }; name=${name%%:*}
      echo "demo: [$(elapsed)] step $name: $(title "$name")" ;;
    "rsiw-guest: scenario "*": exit "*)
      name=${line#rsiw-guest: scenario }; name=${name%%:*}
      rc=${line##* }
      if [ "$rc" = 0 ]; then echo "demo: [$(elapsed)] step $name: passed"
      else echo "demo: [$(elapsed)] step $name: FAILED (exit $rc)"; fi ;;
    "rsiw-guest: scenario "*": timed out"*)
      echo "demo: [$(elapsed)] ${line#rsiw-guest: }" ;;
    "["[0-9][0-9]-*"] "*)
      echo "    ${line#*] }" ;;
  esac
done < <(tail -n +1 -f --pid="$vm" "$log")
wait "$vm"
grep -v '^run-vm: booting' "$out/run-vm.log" || true

# The verdict: each step's result from the guest's KTAP document, and the run as a whole as
# check-run.py judges it (every KUnit suite, no kernel splat, the end marker reached).
judged=0
python3 "$here/check-run.py" "$log" --kunit-py "$KTREE/tools/testing/kunit/kunit.py" \
  --counts "$out/counts.json" >"$out/check-run.log" 2>&1 || judged=1
ran=() failed=() missing=()
for f in "$RSIW_TOP"/kunit/demo/[0-9]*.sh; do
  name=$(basename "$f" .sh)
  case "$name" in $glob) ;; *) continue ;; esac
  result=$(tr -d '\r' <"$log" | sed -n "s/^\(ok\|not ok\) [0-9]* $name # .*/\1/p" | head -n1)
  case $result in
    ok) ran+=("$(title "$name")") ;;
    "not ok") failed+=("$name") ;;
    *) missing+=("$name") ;;
  esac
done
suites=$(tr -d '\r' <"$log" | grep -cE '^ok [0-9]+ [a-z_0-9]+$' || true)
steps=$(( ${#ran[@]} + ${#failed[@]} + ${#missing[@]} ))
took=$(( $(date +%s) - start ))
list=$(printf '%s; ' "${ran[@]}"); list=${list%; }
if [ "$judged" = 0 ] && [ ${#failed[@]} = 0 ] && [ ${#missing[@]} = 0 ] && [ "$steps" -gt 0 ]; then
  echo "demo: PASSED in $((took / 60)) min $((took % 60)) s, $steps of $steps steps: $list; $suites KUnit suites, no kernel splat"
  exit 0
fi
sed -n '/^VM run FAILED/,$p' "$out/check-run.log"
echo "demo: FAILED in $((took / 60)) min $((took % 60)) s: ${#ran[@]} of $steps steps passed${list:+ ($list)}${failed:+; failed: ${failed[*]}}${missing:+; did not run: ${missing[*]}}; console log $log"
exit 1
