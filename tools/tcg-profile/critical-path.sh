#!/usr/bin/env bash
# tools/tcg-profile/critical-path.sh (never part of `make test`): how many guest instructions
# each provider spends on the path that ib_send_lat 8 B times, split where the work changes
# hands.
#
# In the test VM both QPs are on one machine: the Send's doorbell system call runs the driver's
# transmit, TCP's, the loopback device's and, in the softirq before sendmsg returns, the
# receiving QP's work up to its receive completion. The peer polls for that completion, so the
# instructions from the doorbell (`ib_uverbs_write`) to the receive completion are the
# kernel's share of the one-way latency; what the system call does after it is not waited for.
# A QEMU plugin (plugins/tb-trace.c) records every executed block of both vCPUs; each
# doorbell is cut at `tcp_sendmsg`, `tcp_v4_rcv` and the driver's receive completion, and the
# medians are printed (as instructions, and as the blocks TCG executes) with the functions
# before sendmsg. The traces are also replayed through a model of TCG's jump cache (QEMU 7.2:
# each return, indirect jump or jump into another page looks the next block up there first),
# which counts per doorbell the lookups and misses of driver and kernel code.
#
# Instruction counts are exact where TCG's latencies wander between boots, but they are not
# time: one more boot records the host time at which each vCPU reaches the same points
# (plugins/tb-time.c) while ib_send_lat runs over rsiw and over siw in turns
# (kunit/profile/11-send-lat-paired.sh). That also shows the peer's reaction in user space and
# the one-way latency, and splits the way to sendmsg at the RDMA core's `post_send`, the
# driver's steps and `sock_sendmsg`. Under TCG a boot's pace moves every figure, code both
# providers share too, by tens of percent between boots; within one boot the providers share
# it, so the times compare. The analysis (critical-path-report.py) needs numpy (python3-numpy).
set -euo pipefail
export RSIW_FLAVOUR=${RSIW_FLAVOUR:-bench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/env.sh"
: "${CRITICAL_PATH_ITERS:=500}"
: "${CRITICAL_PATH_PROVIDERS:=rsiw siw}"
: "${CRITICAL_PATH_TIMED_ITERS:=2000}"
: "${CRITICAL_PATH_ROUNDS:=4}"
# The first Python with numpy: the one on PATH, or Debian's (python3-numpy, from make setup).
py=
for p in python3 /usr/bin/python3; do
  "$p" -c 'import numpy' 2>/dev/null && { py=$p; break; }
done
[ -n "$py" ] || { echo "critical-path: needs python3-numpy (make setup)" >&2; exit 1; }
out="$RSIW_CACHE/critical-path-run"
mkdir -p "$out"
"$RSIW_TOP/scripts/build-kernel.sh"
"$RSIW_TOP/scripts/build-image.sh"
plugin="$out/tb-trace.so"
gcc -O2 -Wall -shared -fPIC -fvisibility=hidden -o "$plugin" "$here/plugins/tb-trace.c"
timer="$out/tb-time.so"
gcc -O2 -Wall -shared -fPIC -fvisibility=hidden -o "$timer" "$here/plugins/tb-time.c"
# The trace starts at the guest's `sync`: KASLR off, so that System.map gives its address.
trig=$(awk '$3 == "ksys_sync" {print $1}' "$KTREE/System.map")

for provider in $CRITICAL_PATH_PROVIDERS; do
  run="$out/$provider"
  rm -f "$run".trace.*
  RSIW_VM_APPEND="profile.provider=$provider profile.iters=$CRITICAL_PATH_ITERS nokaslr" \
    RSIW_QEMU_ARGS="-plugin $plugin,out=$run.trace,trig=$trig" \
    "$RSIW_TOP/scripts/run-vm.sh" "$run.log" profile '10-*'
  grep -q "PROFILE $provider $CRITICAL_PATH_ITERS done" "$run.log" && [ -s "$run.trace.0" ] &&
    [ -s "$run.share/kallsyms" ] || { echo "critical-path: the $provider run failed ($run.log)"; exit 1; }
done

# One more boot times the same points in host nanoseconds, both providers taking turns in it
# (kunit/profile/11-send-lat-paired.sh), so that they share the boot's pace; the plugin is light
# enough to leave that pace as it is. A module's load address changes between boots, so the
# plugin looks the functions up in the symbols the guest writes before its `sync`. After the
# five points (the doorbell, `tcp_sendmsg`, `tcp_v4_rcv`, each driver's receive completion),
# the ones that split the doorbell's way to sendmsg: the RDMA core's `post_send`,
# `sock_sendmsg` and each driver's steps.
rsiw_steps='*2Qp8transmit *UserRings9peek_send *QpContext10local_read *tx8send_all'
siw_steps='siw_post_send siw_activate_tx_from_sq siw_qp_sq_process siw_check_sge'
echo "$rsiw_steps" >"$out/paired.rsiw.steps"
echo "$siw_steps" >"$out/paired.siw.steps"
# Now and then ib_send_lat's client is refused and crashes in librdmacm (kunit/bench/10-*.sh
# sees it too, with either provider): such a boot is run once more.
for try in 1 2; do
  rm -f "$out/paired.time"
  RSIW_VM_APPEND="profile.iters=$CRITICAL_PATH_TIMED_ITERS profile.rounds=$CRITICAL_PATH_ROUNDS nokaslr" \
    RSIW_QEMU_ARGS="-plugin $timer,out=$out/paired.time,trig=$trig,syms=$out/paired.share/kallsyms$(
      printf ',w=%s' ib_uverbs_write tcp_sendmsg tcp_v4_rcv '*siw_abi_entries10encode_cqe' \
        siw_rqe_complete ib_uverbs_post_send sock_sendmsg $rsiw_steps $siw_steps)" \
    "$RSIW_TOP/scripts/run-vm.sh" "$out/paired.log" profile '11-*'
  grep -q "PROFILE paired $CRITICAL_PATH_TIMED_ITERS done" "$out/paired.log" && [ -s "$out/paired.time" ] && break
  echo "critical-path: the timed boot failed ($out/paired.log)"
  [ $try = 2 ] && exit 1
done

# The code the traces ran, for the jump-cache model below.
objdump -d --no-show-raw-insn "$KTREE/vmlinux" >"$out/vmlinux.dis"
for provider in $CRITICAL_PATH_PROVIDERS; do
  case $provider in
    rsiw) ko="$RSIW_CACHE/modules-src/drivers/infiniband/sw/rsiw/rsiw.ko" ;;
    *) ko="$KTREE/drivers/infiniband/sw/$provider/$provider.ko" ;;
  esac
  objdump -d --no-show-raw-insn "$ko" >"$out/$provider.dis"
done

"$py" "$here/critical-path-report.py" "$out" $CRITICAL_PATH_PROVIDERS
# The traces are about 1 GiB per vCPU: set CRITICAL_PATH_KEEP=1 to keep them for a closer look.
[ -n "${CRITICAL_PATH_KEEP:-}" ] || rm -f "$out"/*.trace.* "$out"/*.dis
