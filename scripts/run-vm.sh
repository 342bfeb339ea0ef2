#!/usr/bin/env bash
# Boot the test VM (QEMU TCG, serial console, no NIC) on the built kernel and image and write
# the console log. The guest powers off by itself; a hard timeout stops a hung guest.
#   run-vm.sh LOG [mode] [scenario-glob]
# RSIW_VM_APPEND adds to the kernel command line, RSIW_QEMU_ARGS to QEMU's (tools/tcg-profile/);
# RSIW_IMAGE picks the image (scripts/env.sh). Two guests on a link: run-pair.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/vm-lib.sh"

log=$1; mode=${2:-test}; only=${3:-*}
echo "run-vm: booting (mode=$mode, timeout ${RSIW_VM_TIMEOUT}s), console -> $log"
start=$(date +%s)
rc=0
# A directory the guest mounts at /share (virtio 9p) for what does not fit the console.
vm_qemu "$log" "${log%.log}.share" "$(vm_append "$mode" "$only")" -nic none || rc=$?
echo "run-vm: guest ran $(( $(date +%s) - start ))s, qemu exit $rc"
exit 0
