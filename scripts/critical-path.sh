#!/usr/bin/env bash
# `make critical-path` (never part of `make test`): how many guest instructions each provider
# spends on the path that ib_send_lat 8 B times, split where the work changes hands.
#
# In the test VM both QPs are on one machine: the Send's doorbell system call runs the driver's
# transmit, TCP's, the loopback device's and, in the softirq before sendmsg returns, the
# receiving QP's work up to its receive completion. The peer polls for that completion, so the
# instructions from the doorbell (`ib_uverbs_write`) to the receive completion are the
# kernel's share of the one-way latency; what the system call does after it is not waited for.
# A QEMU plugin (scripts/qemu/tb-trace.c) records every executed block of both vCPUs; each
# doorbell is cut at `tcp_sendmsg`, `tcp_v4_rcv` and the driver's receive completion, and the
# medians are printed with the functions before sendmsg.
#
# Instruction counts are exact where TCG's latencies wander between boots; session 12 found
# the gap in them (rsiw 10,548 instructions to the completion, siw 9,198: 14.7%) as large as
# the gap in ib_send_lat's median (1.16x). The analysis needs numpy (python3-numpy).
set -euo pipefail
export RSIW_FLAVOUR=${RSIW_FLAVOUR:-bench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
: "${CRITICAL_PATH_ITERS:=500}"
: "${CRITICAL_PATH_PROVIDERS:=rsiw siw}"
python3 -c 'import numpy' 2>/dev/null || { echo "critical-path: needs python3-numpy" >&2; exit 1; }
out="$RSIW_CACHE/critical-path-run"
mkdir -p "$out"
"$here/build-kernel.sh"
"$here/build-image.sh"
plugin="$out/tb-trace.so"
gcc -O2 -Wall -shared -fPIC -fvisibility=hidden -o "$plugin" "$here/qemu/tb-trace.c"
# The trace starts at the guest's `sync`: KASLR off, so that System.map gives its address.
trig=$(awk '$3 == "ksys_sync" {print $1}' "$KTREE/System.map")

for provider in $CRITICAL_PATH_PROVIDERS; do
  run="$out/$provider"
  rm -f "$run".trace.*
  RSIW_VM_APPEND="profile.provider=$provider profile.iters=$CRITICAL_PATH_ITERS nokaslr" \
    RSIW_QEMU_ARGS="-plugin $plugin,arg=out=$run.trace,arg=trig=$trig" \
    "$here/run-vm.sh" "$run.log" profile '10-*'
  grep -q "PROFILE $provider $CRITICAL_PATH_ITERS done" "$run.log" && [ -s "$run.trace.0" ] &&
    [ -s "$run.share/kallsyms" ] || { echo "critical-path: the $provider run failed ($run.log)"; exit 1; }
done

python3 - "$out" $CRITICAL_PATH_PROVIDERS <<'PY'
import collections, re, sys
import numpy as np
out, providers = sys.argv[1], sys.argv[2:]
# Where each driver's receive completion starts (the first after tcp_v4_rcv is the peer's).
COMPLETION = {"rsiw": r"4rsiw2qpNtB5_2Qp8complete$", "siw": r"^siw_rqe_complete$"}
PARTS = ["doorbell..tcp_sendmsg", "tcp_sendmsg..tcp_v4_rcv", "tcp_v4_rcv..completion",
         "completion..syscall exit"]

def analyse(provider):
    syms = []
    for line in open(f"{out}/{provider}.share/kallsyms"):
        f = line.split()
        if len(f) >= 3 and f[1] in "tTwW":
            syms.append((int(f[0], 16), f[2]))
    syms.sort()
    addrs = np.array([a for a, _ in syms], dtype=np.uint64)
    names = [n for _, n in syms]
    first = {}
    for a, n in syms:
        first.setdefault(n, a)
    door, send, rcv, leave = (first[n] for n in
                              ("ib_uverbs_write", "tcp_sendmsg", "tcp_v4_rcv", "syscall_exit_to_user_mode"))
    done = {a for a, n in syms if re.search(COMPLETION[provider], n)}
    parts, before = [[] for _ in PARTS], collections.Counter()
    for cpu in (0, 1):
        try:
            ev = np.fromfile(f"{out}/{provider}.trace.{cpu}", dtype=[("v", "<u8"), ("n", "<u8")])
        except FileNotFoundError:
            continue
        v, n = ev["v"], ev["n"].astype(np.int64)
        cum = np.concatenate([[0], np.cumsum(n)])
        for s in np.nonzero(v == door)[0]:
            marks = [s]
            for j in range(s, min(len(v), s + 200000)):
                x = int(v[j])
                if len(marks) == 1 and x == send or len(marks) == 2 and x == rcv \
                        or len(marks) == 3 and x in done:
                    marks.append(j)
                elif x == leave:
                    marks.append(j)
                    break
            if len(marks) != 5:
                continue  # not a Send's doorbell (setup, or the trace's end)
            for k in range(4):
                parts[k].append(cum[marks[k + 1]] - cum[marks[k]])
            idx = np.searchsorted(addrs, v[marks[0]:marks[1]], side="right") - 1
            for i, c in zip(idx, n[marks[0]:marks[1]]):
                before[names[i]] += int(c)
    return [np.median(p) if p else float("nan") for p in parts], before, len(parts[0])

results = {p: analyse(p) for p in providers}
print("guest instructions per Send (median), " +
      ", ".join(f"{p}: {results[p][2]} Sends" for p in providers))
print(f"{'':28s}" + "".join(f"{p:>10s}" for p in providers))
for k, part in enumerate(PARTS):
    print(f"{part:28s}" + "".join(f"{results[p][0][k]:10.0f}" for p in providers))
print(f"{'doorbell..completion':28s}" + "".join(f"{sum(results[p][0][:3]):10.0f}" for p in providers))
for p in providers:
    _, before, count = results[p]
    print(f"\n{p}: doorbell..tcp_sendmsg by function (mean per Send)")
    for name, c in before.most_common(25):
        print(f"{c / max(count, 1):8.0f}  {re.sub(r'Cs[0-9A-Za-z_]{10,14}_', '', name)[:110]}")
PY
# The traces are about 1 GiB per vCPU: set CRITICAL_PATH_KEEP=1 to keep them for a closer look.
[ -n "${CRITICAL_PATH_KEEP:-}" ] || rm -f "$out"/*.trace.*
