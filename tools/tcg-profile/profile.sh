#!/usr/bin/env bash
# tools/tcg-profile/profile.sh (never part of `make test`): where rsiw's and the C siw's time per
# small message goes, as exact counts rather than timings. A QEMU plugin (plugins/tb-count.c)
# counts the guest's executed translation blocks while ib_send_lat 8 B runs over one provider;
# each provider runs at two iteration counts in boots of their own, and the difference,
# attributed to functions with the guest's /proc/kallsyms (profile-report.py), is the cost of
# one message (one Send and its receive), free of boot and setup. Prints per message: guest
# instructions, translation blocks and calls, by module and by function, and for two providers
# the kernel functions where they differ most.
#
# Under TCG a call and its return cost more than many plain instructions (each return is a
# lookup of the next block), so look at blocks and calls as much as at instructions.
#
# PROFILE_SCENARIO=20-write-bw profiles a 64 KiB ib_write_bw message instead (one message per
# iteration; its iterations default to 2000 and 6000). PROFILE_SCENARIO=30-nfs profiles the
# operations of one row of the NFS bench (PROFILE_WORK: randread, a 4 KiB READ at queue depth
# 16, the default; seqread or seqwrite, a 1 MiB read or write; create, an empty file created)
# with the client and server of one NFS transport in one kernel: "providers" rpcrdma2 (Version
# 2) and rpcrdma (the C modules), both over rsiw, and tcp (NFS over TCP), by default the first
# two.
set -euo pipefail
export RSIW_FLAVOUR=${RSIW_FLAVOUR:-bench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/env.sh"
: "${PROFILE_SCENARIO:=10-send-lat}"
case $PROFILE_SCENARIO in
  10-send-lat) : "${PROFILE_ITERS:=4000 24000}"; per_iter=2; what="one 8-byte Send and its receive" ;;
  20-write-bw) : "${PROFILE_ITERS:=2000 6000}"; per_iter=1; what="one 64 KiB RDMA Write, sent and placed" ;;
  30-nfs)
    : "${PROFILE_WORK:=randread}"; : "${PROFILE_PROVIDERS:=rpcrdma2 rpcrdma}"; per_iter=1
    case $PROFILE_WORK in
      randread) : "${PROFILE_ITERS:=1000 4000}"; what="one 4 KiB NFSv4.2 READ at queue depth 16" ;;
      seqread) : "${PROFILE_ITERS:=16 64}"; what="one 1 MiB NFSv4.2 sequential read" ;;
      seqwrite) : "${PROFILE_ITERS:=16 64}"; what="one 1 MiB NFSv4.2 sequential write" ;;
      create) : "${PROFILE_ITERS:=200 800}"; what="one empty file created over NFSv4.2" ;;
      *) echo "profile: PROFILE_WORK must be randread, seqread, seqwrite or create" >&2; exit 2 ;;
    esac
    what="$what, client and server in one kernel" ;;
  *) echo "profile: no scenario kunit/profile/$PROFILE_SCENARIO.sh" >&2; exit 2 ;;
esac
: "${PROFILE_PROVIDERS:=rsiw siw}"
out="$RSIW_CACHE/profile-run/$PROFILE_SCENARIO${PROFILE_WORK:+-$PROFILE_WORK}"
mkdir -p "$out"
"$RSIW_TOP/scripts/build-kernel.sh"
"$RSIW_TOP/scripts/build-image.sh"
plugin="$out/tb-count.so"
gcc -O2 -Wall -shared -fPIC -fvisibility=hidden -o "$plugin" "$here/plugins/tb-count.c"

for provider in $PROFILE_PROVIDERS; do
  for iters in $PROFILE_ITERS; do
    run="$out/$provider-$iters"
    rm -f "$run.counts"
    RSIW_VM_APPEND="profile.provider=$provider profile.iters=$iters${PROFILE_WORK:+ profile.work=$PROFILE_WORK}" \
      RSIW_QEMU_ARGS="-plugin $plugin,out=$run.counts" \
      "$RSIW_TOP/scripts/run-vm.sh" "$run.log" profile "$PROFILE_SCENARIO"
    grep -q "PROFILE $provider $iters done" "$run.log" && [ -s "$run.counts" ] &&
      [ -s "$run.share/kallsyms" ] || { echo "profile: the $provider run failed ($run.log)"; exit 1; }
  done
done

python3 "$here/profile-report.py" "$out" "$PROFILE_ITERS" "$per_iter" "$what" $PROFILE_PROVIDERS
