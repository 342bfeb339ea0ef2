#!/usr/bin/env python3
"""Print where each provider's time per message goes, from profile.sh's runs.

Arguments: OUT ITERS PER_ITER WHAT PROVIDER...
OUT is the run directory, with <provider>-<iters>.counts (plugins/tb-count.c) and
<provider>-<iters>.share/kallsyms (the guest's symbols) for each provider and iteration count;
ITERS the two iteration counts in one argument; PER_ITER the messages per iteration; WHAT the
message, as the table's title names it. The difference between the two counts, per message, is
printed by module and by function.
"""
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
           "__x86_indirect_thunk_r11", "schedule", "try_to_wake_up", "__queue_work",
           "ib_post_send", "ib_post_recv"]
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
# Where two providers differ, function by function: the kernel's C code and the kernel crate's
# Rust (what each transport or driver makes the rest of the kernel do), largest differences
# first (the TCP paths, the allocator, memcpy, the scheduler). Functions that run once at boot
# (the timer and delay calibration) differ between any two boots and are noise here.
if len(providers) == 2:
    first, second = providers
    names = {k for p in providers for k in per[p] if group(k) in ("kernel (C)", "kernel (Rust)")}
    zero = [0, 0, 0]
    rows = [(per[first].get(k, zero)[0] - per[second].get(k, zero)[0], k) for k in names]
    rows.sort(key=lambda r: -abs(r[0]))
    print(f"\nkernel functions, {first} less {second} (insns per message; insns and calls each)")
    for d, k in rows[:30]:
        a, b = per[first].get(k, zero), per[second].get(k, zero)
        print(f"  {d:+8.0f}  {a[0]:8.0f} {a[2]:7.2f}  {b[0]:8.0f} {b[2]:7.2f}  {short(k)}")
