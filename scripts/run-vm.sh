#!/usr/bin/env bash
# Boot the test VM (QEMU TCG, serial console, no NIC) on the built kernel and image and write
# the console log. The guest powers off by itself; a hard timeout stops a hung guest.
#   run-vm.sh LOG [mode] [scenario-glob]
# RSIW_VM_APPEND adds to the kernel command line, RSIW_QEMU_ARGS to QEMU's (tools/tcg-profile/);
# RSIW_IMAGE picks the image (scripts/env.sh). Two guests on a link: run-pair.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"

log=$1; mode=${2:-test}; only=${3:-*}
# In test mode the hard timeout (RSIW_VM_TIMEOUT) is by default the limits of the scenarios that
# run and 900 s for boot, the KUnit suites and the leak scan, as run-pair.sh does, at most an
# hour: each scenario's own limit stops it in the guest, and the run grows with the scenarios.
# (The whole single-guest run takes about half an hour.)
if [ "$mode" = test ] && [ -z "${RSIW_VM_TIMEOUT:-}" ]; then
  limits=0
  for f in "$RSIW_TOP"/kunit/scenarios/[0-9]*.sh; do
    case $(basename "$f" .sh) in $only) ;; *) continue ;; esac
    limit=$(sed -n 's/^# timeout: *//p' "$f" | head -n1)
    limits=$((limits + ${limit:-300}))
  done
  RSIW_VM_TIMEOUT=$((900 + limits))
  [ "$RSIW_VM_TIMEOUT" -le 3600 ] || RSIW_VM_TIMEOUT=3600
fi
. "$here/vm-lib.sh"
echo "run-vm: booting (mode=$mode, timeout ${RSIW_VM_TIMEOUT}s), console -> $log"
start=$(date +%s)
rc=0
# A directory the guest mounts at /share (virtio 9p) for what does not fit the console.
vm_qemu "$log" "${log%.log}.share" "$(vm_append "$mode" "$only")" -nic none || rc=$?
echo "run-vm: guest ran $(( $(date +%s) - start ))s, qemu exit $rc"
exit 0
