#!/usr/bin/env bash
# Capture real RPC-over-RDMA v1 traffic of the kernel's C xprtrdma/svcrdma over the C siw
# (scenario 02 with tcpdump on), and cut it into fixtures for the host tests of the protocol
# core. Run after `make kernel`; rerun when the scenario changes. The fixtures are checked in.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
out="$RSIW_CACHE/capture-run"
mkdir -p "$out"
"$here/build-image.sh"
RSIW_VM_APPEND="rsiw.capture=1" "$here/run-vm.sh" "$out/console.log" test '02-*'
grep -q '^ok [0-9]* 02-' "$out/console.log" || { echo "capture: scenario failed ($out/console.log)"; exit 1; }
dest="$RSIW_TOP/host/rpcrdma2-proto/tests/fixtures/c-xprtrdma-siw"
rm -rf "$dest"
python3 "$here/extract-rpcrdma-fixtures.py" "$out/console.share/nfs-rdma-siw.pcap" 20049 "$dest"
