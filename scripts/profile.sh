#!/usr/bin/env bash
# `make profile` (never part of `make test`): where rsiw's and the C siw's time per small
# message goes, as exact counts rather than timings. A QEMU plugin (scripts/qemu/tb-count.c)
# counts the guest's executed translation blocks while ib_send_lat 8 B runs over one provider;
# each provider runs at two iteration counts in boots of their own, and the difference,
# attributed to functions with the guest's /proc/kallsyms, is the cost of one message (one
# Send and its receive), free of boot and setup. Prints per message: guest instructions,
# translation blocks and calls, by module and by function.
#
# Under TCG a call and its return cost more than many plain instructions (each return is a
# lookup of the next block), so look at blocks and calls as much as at instructions.
#
# PROFILE_SCENARIO=20-write-bw profiles a 64 KiB ib_write_bw message instead (one message per
# iteration; its iterations default to 2000 and 6000).
set -euo pipefail
export RSIW_FLAVOUR=${RSIW_FLAVOUR:-bench}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
: "${PROFILE_SCENARIO:=10-send-lat}"
case $PROFILE_SCENARIO in
  10-send-lat) : "${PROFILE_ITERS:=4000 24000}"; per_iter=2; what="one 8-byte Send and its receive" ;;
  20-write-bw) : "${PROFILE_ITERS:=2000 6000}"; per_iter=1; what="one 64 KiB RDMA Write, sent and placed" ;;
  *) echo "profile: no scenario kunit/profile/$PROFILE_SCENARIO.sh" >&2; exit 2 ;;
esac
: "${PROFILE_PROVIDERS:=rsiw siw}"
out="$RSIW_CACHE/profile-run/$PROFILE_SCENARIO"
mkdir -p "$out"
"$here/build-kernel.sh"
"$here/build-image.sh"
plugin="$out/tb-count.so"
gcc -O2 -Wall -shared -fPIC -fvisibility=hidden -o "$plugin" "$here/qemu/tb-count.c"

for provider in $PROFILE_PROVIDERS; do
  for iters in $PROFILE_ITERS; do
    run="$out/$provider-$iters"
    rm -f "$run.counts"
    RSIW_VM_APPEND="profile.provider=$provider profile.iters=$iters" \
      RSIW_QEMU_ARGS="-plugin $plugin,out=$run.counts" \
      "$here/run-vm.sh" "$run.log" profile "$PROFILE_SCENARIO"
    grep -q "PROFILE $provider $iters done" "$run.log" && [ -s "$run.counts" ] &&
      [ -s "$run.share/kallsyms" ] || { echo "profile: the $provider run failed ($run.log)"; exit 1; }
  done
done

python3 - "$out" "$PROFILE_ITERS" "$per_iter" "$what" $PROFILE_PROVIDERS <<'PY'
import bisect, collections, re, sys
out, iters, per_iter, what = sys.argv[1], [int(i) for i in sys.argv[2].split()], int(sys.argv[3]), sys.argv[4]
providers = sys.argv[5:]
lo, hi = min(iters), max(iters)
msgs = float(per_iter * (hi - lo))

def counts(provider, n):
    """Per symbol: instructions, blocks and entries (executions of the block at its start)."""
    syms = []
    for line in open(f"{out}/{provider}-{n}.share/kallsyms"):
        f = line.split()
        if len(f) >= 3 and f[1] in "tTwW":
            syms.append((int(f[0], 16), f[2] + (" " + f[3] if len(f) > 3 else "")))
    syms.sort()
    addrs = [a for a, _ in syms]
    starts = dict(syms)
    c = collections.defaultdict(lambda: [0, 0, 0])
    for line in open(f"{out}/{provider}-{n}.counts"):
        v, insns, execs = line.split()
        v, insns, execs = int(v, 16), int(insns), int(execs)
        if v < 0xFFFF800000000000:
            name = "<user space>"
        else:
            i = bisect.bisect_right(addrs, v) - 1
            name = syms[i][1] if i >= 0 else "<unknown>"
        row = c[name]
        row[0] += insns * execs
        row[1] += execs
        if starts.get(v) == name:
            row[2] += execs
    return c

def per_message(provider):
    a, b = counts(provider, lo), counts(provider, hi)
    return {k: [(b[k][i] - a[k][i]) / msgs for i in range(3)] for k in set(a) | set(b)}

def short(name):
    name = re.sub(r"Cs[0-9A-Za-z_]{9,14}_", "", name)
    return name if len(name) <= 100 else name[:97] + "..."

def group(name):
    m = re.search(r"\[(\w+)\]$", name)
    if name == "<user space>":
        return "user space"
    if m:
        return "module " + m.group(1)
    return "kernel (Rust)" if name.startswith("_R") else "kernel (C)"

per = {p: per_message(p) for p in providers}
print(f"per message ({what}), from {lo} and {hi} iterations")
print(f"{'':28s}" + "".join(f"{p + ' insns':>13s}{'blocks':>9s}" for p in providers))
groups = sorted({group(k) for p in providers for k in per[p]})
for g in groups:
    sums = [(sum(v[0] for k, v in per[p].items() if group(k) == g),
             sum(v[1] for k, v in per[p].items() if group(k) == g)) for p in providers]
    # Modules that only loaded (KUnit suites) do no work per message.
    if all(abs(ins) < 0.5 for ins, _ in sums):
        continue
    print(f"{g:28s}" + "".join(f"{ins:13.0f}{blk:9.0f}" for ins, blk in sums))
print("\n(user space includes each side's polling while it waits, so it grows with latency)\n")
helpers = ["memcpy_orig", "memset_orig", "_raw_spin_lock", "_raw_spin_lock_bh",
           "_raw_spin_lock_irqsave", "__local_bh_enable_ip", "mutex_lock",
           "__x86_indirect_thunk_r11"]
print("calls per message " + "".join(f"{p:>10s}" for p in providers))
for h in helpers:
    print(f"  {h:26s}" + "".join(f"{per[p].get(h, [0, 0, 0])[2]:10.2f}" for p in providers))
for p in providers:
    rows = [(v[0], k, v) for k, v in per[p].items()
            if group(k) not in ("user space", "kernel (C)") and v[0] >= 2]
    rows.sort(reverse=True)
    print(f"\n{p}: module and Rust kernel functions (insns, blocks, calls per message)")
    for _, k, v in rows[:40]:
        print(f"  {v[0]:7.0f} {v[1]:6.1f} {v[2]:5.2f}  {short(k)}")
PY
