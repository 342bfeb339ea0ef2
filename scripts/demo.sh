#!/usr/bin/env bash
# `make demo`: build what is missing, boot the VM and show the main job end to end with its
# figures: the C siw with rping and ib_write_bw (the data path rsiw does not have yet), and
# rsiw devices coming and going with rdma link add/del, netdev removal and module unload.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
out="$RSIW_CACHE/demo-run"
mkdir -p "$out"
"$here/build-kernel.sh"
"$here/build-image.sh"
"$here/run-vm.sh" "$out/console.log" demo "${RSIW_DEMO:-0[13]-*}"
echo "== what the VM printed"
grep -E '^\[[0-9]+-[^]]+\] ' "$out/console.log" | tr -d '\r'
grep -E '^(ok|not ok) [0-9]+ [0-9]+-' "$out/console.log" | tr -d '\r'
python3 "$here/check-run.py" "$out/console.log" --kunit-py "$KTREE/tools/testing/kunit/kunit.py" \
  --counts "$out/counts.json" >/dev/null || { echo "demo: the VM run failed ($out/console.log)"; exit 1; }
