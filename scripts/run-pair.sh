#!/usr/bin/env bash
# Boot two test guests, a and b, joined by one virtual Ethernet link, and wait for both. Each
# has the single guest's settings (scripts/vm-lib.sh), a virtio-net NIC, its own console log
# and /share, and `rsiw.role=a|b` on its command line: its init then runs kunit/pair/*.sh
# (in bench mode kunit/pair-bench/*.sh, from bench.sh) against the other guest
# (kunit/pair/lib.sh) instead of the single-guest tests.
#   run-pair.sh DIR [mode] [scenario-glob]
# writes DIR/pair-a.log and DIR/pair-b.log (judge them with check-run.py) and DIR/pair-*.share.
# RSIW_PAIR_TIMEOUT (seconds) is each guest's hard timeout; by default 600 more than the limits
# of the scenarios that run (boot, the start wait, the leak scan).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"

dir=$1; mode=${2:-test}; only=${3:-*}
scenarios=pair
[ "$mode" = bench ] && scenarios=pair-bench
limits=0
for f in "$RSIW_TOP/kunit/$scenarios"/[0-9]*.sh; do
  case $(basename "$f" .sh) in $only) ;; *) continue ;; esac
  limit=$(sed -n 's/^# timeout: *//p' "$f" | head -n1)
  limits=$((limits + ${limit:-300}))
done
RSIW_VM_TIMEOUT=${RSIW_PAIR_TIMEOUT:-$((600 + limits))}
. "$here/vm-lib.sh"
mkdir -p "$dir"
# The link is a stream over a unix socket that guest a's QEMU listens on and b's connects to.
# QEMU 7.2 has no reconnect: a client started before the socket exists stays unlinked, so b
# starts once the socket is there. (The path is short: sun_path holds 108 bytes.)
sock=$(mktemp -d /tmp/rsiw-pair.XXXXXX)
trap 'rm -rf "$sock"' EXIT

# boot ROLE N SERVER: one guest in the background; its QEMU status goes to DIR/pair-ROLE.rc.
# pci=noacpi: the PCI interrupt routing from the BIOS table, not ACPI's _PRT method. The test
# kernel's AML interpreter takes about 28 s for _PRT under TCG, once per PCI device that
# needs it; with two guests on the cores and two virtio devices each, both evaluations ran
# into ACPICA's 30 s loop timeout ("AE_AML_LOOP_TIMEOUT"), a minute of each boot.
boot() {
  local role=$1 n=$2 server=$3
  rm -f "$dir/pair-$role.rc"
  ( rc=0
    vm_qemu "$dir/pair-$role.log" "$dir/pair-$role.share" \
      "$(vm_append "$mode" "$only") rsiw.role=$role pci=noacpi" \
      -netdev "stream,id=n0,server=$server,addr.type=unix,addr.path=$sock/link" \
      -device "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:0$n" || rc=$?
    echo "$rc" >"$dir/pair-$role.rc" ) &
}

echo "run-pair: booting guests a and b (mode=$mode, timeout ${RSIW_VM_TIMEOUT}s each), consoles -> $dir/pair-{a,b}.log"
start=$(date +%s)
boot a 1 on
pa=$!
for _ in $(seq 100); do
  [ -S "$sock/link" ] && break
  kill -0 $pa 2>/dev/null || break
  sleep 0.1
done
if [ -S "$sock/link" ]; then
  boot b 2 off
  pb=$!
  wait $pb || true
else
  # Without a there is no link: b is not booted, and its log says why.
  echo "run-pair: guest a's QEMU never listened on $sock/link; guest b not booted" |
    tee "$dir/pair-b.log"
fi
wait $pa || true
echo "run-pair: guests ran $(( $(date +%s) - start ))s, qemu exit a=$(cat "$dir/pair-a.rc" 2>/dev/null) b=$(cat "$dir/pair-b.rc" 2>/dev/null || echo -)"
exit 0
