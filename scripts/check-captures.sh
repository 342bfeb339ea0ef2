#!/usr/bin/env bash
# Captures a test run left in its shared directory, decoded on the host by the protocol core:
# scripts/extract-rpcrdma-fixtures.py cuts each into one file per Send and the host program
# host/rpcrdma2-proto/examples/decode_capture.rs decodes them in wire order and checks what the
# capture must show. A capture whose scenario did not run is skipped; one that is missing from a
# scenario that ran fails.
#   check-captures.sh SHARE CONSOLE_LOG  ->  one line per capture, then "N passed, M failed"
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
share=$1 log=$2
passed=0 failed=0

# NAME SERVER_PORT SCENARIO CHECKS...: NAME.pcap, from scenario SCENARIO, to a server on
# SERVER_PORT, must pass decode_capture's CHECKS.
captures() {
  cat <<'LIST'
rpcrdma2-v2-server-rbsiz-1024 20049 19-rpcrdma2-v2 --version 2 --connprop --continued-calls 1
rpcrdma2-v2-client-rbsiz-1024 20049 19-rpcrdma2-v2 --version 2 --connprop --continued-calls 1 --continued-replies 1
LIST
}

decoder=$(cd "$RSIW_TOP/host" && cargo build -q -p rpcrdma2-proto --example decode_capture \
  --message-format=json 2>/dev/null | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
while read -r name port scenario checks; do
  if ! grep -qE "^(not )?ok [0-9]+ $scenario( |$)" "$log"; then
    echo "capture $name: skipped ($scenario did not run)"
    continue
  fi
  if [ -z "$decoder" ]; then
    echo "capture $name: FAILED (the host decoder does not build)"; failed=$((failed + 1)); continue
  fi
  if [ ! -s "$share/$name.pcap" ]; then
    echo "capture $name: FAILED (no capture from $scenario)"; failed=$((failed + 1)); continue
  fi
  dir=$(mktemp -d)
  ok=0
  if python3 "$here/extract-rpcrdma-fixtures.py" "$share/$name.pcap" "$port" "$dir/messages" \
    >"$dir/extract.log" 2>&1; then
    "$decoder" "$dir/messages" $checks >"$dir/decode.log" 2>&1 && ok=1
    sed "s/^/capture $name: /" "$dir/decode.log"
  else
    sed "s/^/capture $name: /" "$dir/extract.log"
  fi
  if [ $ok = 1 ]; then
    echo "capture $name: ok ($checks)"; passed=$((passed + 1))
  else
    echo "capture $name: FAILED ($checks)"; failed=$((failed + 1))
  fi
  rm -rf "$dir"
done < <(captures)
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
