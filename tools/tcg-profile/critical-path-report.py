#!/usr/bin/env python3
"""Print the critical path of ib_send_lat 8 B per provider, from critical-path.sh's runs.

Arguments: OUT PROVIDER...
OUT is the run directory: <provider>.trace.<vCPU> (plugins/tb-trace.c) and
<provider>.share/kallsyms of each provider's traced boot, vmlinux.dis and <provider>.dis
(objdump of the code the traces ran), and of the timed boot paired.time (plugins/tb-time.c),
paired.log (its console) and paired.<provider>.steps (the driver functions it timed). Needs
numpy.
"""
import bisect, collections, re, sys
import numpy as np
out, providers = sys.argv[1], sys.argv[2:]
# Where each driver writes the receive completion (the first after tcp_v4_rcv is the peer's):
# siw's rqe_complete; for rsiw the user CQE's encoding, a few dozen instructions into its
# completion (under the CQ's lock), which is where it stays a function of its own.
COMPLETION = {"rsiw": r"siw_abi_entries10encode_cqe$", "siw": r"^siw_rqe_complete$"}
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
    parts, before, executed = [[] for _ in PARTS], collections.Counter(), []
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
            executed.append(marks[3] - marks[0])
            idx = np.searchsorted(addrs, v[marks[0]:marks[1]], side="right") - 1
            for i, c in zip(idx, n[marks[0]:marks[1]]):
                before[names[i]] += int(c)
    return ([np.median(p) if p else float("nan") for p in parts], before, len(parts[0]),
            np.median(executed) if executed else float("nan"))

results = {p: analyse(p) for p in providers}
print("guest instructions per Send (median), " +
      ", ".join(f"{p}: {results[p][2]} Sends" for p in providers))
print(f"{'':28s}" + "".join(f"{p:>10s}" for p in providers))
for k, part in enumerate(PARTS):
    print(f"{part:28s}" + "".join(f"{results[p][0][k]:10.0f}" for p in providers))
print(f"{'doorbell..completion':28s}" + "".join(f"{sum(results[p][0][:3]):10.0f}" for p in providers))
# TCG runs a block at a time: entering one (its chaining or lookup) costs more than an
# instruction, and a `rep` string instruction is a block per iteration.
print(f"{'  as blocks executed':28s}" + "".join(f"{results[p][3]:10.0f}" for p in providers))
# How TCG finds the next block, in QEMU 7.2 (Debian 12): a block's exit is chained straight to
# the next block only for a direct jump or branch into the page the block starts in. A return,
# an indirect jump or call, or a jump into another page looks the next block up: first in the
# vCPU's jump cache (4096 entries, direct-mapped, indexed by a hash of the address), then, on a
# miss, in the global hash table, which costs several times more. The miss pattern depends on
# where code lies (a module's load address changes between boots), and a driver whose hot
# targets collide with the TCP code's slows that code too. This replays each vCPU's traced
# kernel blocks, from its first doorbell in four to its third, through that cache (user-space
# blocks are not traced; interrupts and exits to the main loop are not modelled).
IND = re.compile(r"(ret|iret|sysret|jmp\s+\*|call\s+\*)")

def disassembly(path):
    """Per function of an objdump: its instructions' addresses and mnemonics (a module's
    sections each start at 0, so only a function's own addresses are in order)."""
    functions, name, at, mnemonic = {}, None, [], []
    for line in open(path):
        if line.endswith(">:\n"):
            if name:
                functions[name] = (np.array(at, dtype=np.uint64), mnemonic)
            name, at, mnemonic = line.split()[1][1:-2], [], []
        elif name and ":\t" in line:
            a, text = line.split(":\t", 1)
            try:
                at.append(int(a, 16))
            except ValueError:
                continue
            mnemonic.append(text.strip())
    if name:
        functions[name] = (np.array(at, dtype=np.uint64), mnemonic)
    return functions

CODE = {name: disassembly(f"{out}/{name}.dis") for name in ["vmlinux"] + providers}

def lookups(provider):
    syms = []
    for line in open(f"{out}/{provider}.share/kallsyms"):
        f = line.split()
        if len(f) >= 3 and f[1] in "tTwW":
            syms.append((int(f[0], 16), f[2], f[3].strip("[]") if len(f) > 3 else "vmlinux"))
    syms.sort()
    starts = [a for a, _, _ in syms]
    door = next(a for a, n, _ in syms if n == "ib_uverbs_write")
    indirect_end = {}

    def ends_indirect(v, k):
        """Whether the block of `k` instructions at `v` ends in a return or indirect jump."""
        if (v, k) not in indirect_end:
            i = bisect.bisect_right(starts, v) - 1
            end = False
            if i >= 0 and syms[i][1] in CODE.get(syms[i][2], {}):
                at, mnemonic = CODE[syms[i][2]][syms[i][1]]
                if len(at):
                    j = int(np.searchsorted(at, at[0] + np.uint64(v - syms[i][0]))) + k - 1
                    end = j < len(mnemonic) and bool(IND.match(mnemonic[j]))
            indirect_end[(v, k)] = end
        return indirect_end[(v, k)]

    totals, by_function, doorbells = collections.Counter(), collections.Counter(), 0
    for cpu in (0, 1):
        try:
            ev = np.fromfile(f"{out}/{provider}.trace.{cpu}", dtype=[("v", "<u8"), ("n", "<u8")])
        except FileNotFoundError:
            continue
        doors = np.nonzero(ev["v"] == door)[0]
        if len(doors) < 8:
            continue
        window = slice(doors[len(doors) // 4], doors[3 * len(doors) // 4])
        cache, prev = [0] * 4096, None
        for a, k in zip(ev["v"][window].tolist(), ev["n"][window].tolist()):
            if a == 1:  # user space
                prev = None
                continue
            doorbells += a == door
            if prev is not None and ((a ^ prev[0]) >> 12 or ends_indirect(*prev)):
                t = a ^ (a >> 6)
                slot = ((t >> 6) & 0xFC0) | (t & 0x3F)
                i = bisect.bisect_right(starts, a) - 1
                group = "driver" if syms[i][2] == provider else "kernel"
                totals[group, "lookups"] += 1
                if cache[slot] != a:
                    cache[slot] = a
                    totals[group, "misses"] += 1
                    by_function[syms[i][1]] += 1
            prev = (a, k)
    return totals, by_function, max(doorbells, 1)

looked = {p: lookups(p) for p in providers}
print("\nnext-block lookups and jump-cache misses per doorbell (QEMU 7.2 model; kernel code)")
print(f"{'':28s}" + "".join(f"{p:>10s}" for p in providers))
for group in ("driver", "kernel"):
    for what in ("lookups", "misses"):
        print(f"{group + ' code, ' + what:28s}" +
              "".join(f"{looked[p][0][group, what] / looked[p][2]:10.1f}" for p in providers))
for p in providers:
    print(f"{p}: functions whose blocks missed most (per doorbell)")
    for name, c in looked[p][1].most_common(8):
        print(f"{c / looked[p][2]:8.2f}  {re.sub(r'Cs[0-9A-Za-z_]{10,14}_', '', name)[:100]}")

# The timed boot's records: host nanoseconds, vCPU, and the index of the point (1 doorbell,
# 2 tcp_sendmsg, 3 tcp_v4_rcv, 4 rsiw's completion, 5 siw's, 6 post_send, 7 sock_sendmsg, then
# rsiw's four steps and siw's four).
DONE = {"rsiw": 4, "siw": 5}
STEP_IDS = {"rsiw": range(8, 12), "siw": range(12, 16)}
ev = np.sort(np.fromfile(f"{out}/paired.time", dtype=[("t", "<u8"), ("c", "<u4"), ("i", "<u4")]),
             order="t")
T, CPU, IDS = ev["t"].astype(np.int64), ev["c"], ev["i"]

def doorbells():
    """Per Send: the provider (by whose receive completion follows its tcp_v4_rcv), the
    index of its doorbell and of its first tcp_sendmsg, tcp_v4_rcv and completion on the
    same vCPU, and where the vCPU's next doorbell is (the end of its points)."""
    for d in np.nonzero(IDS == 1)[0]:
        c, marks, j = CPU[d], [d], d + 1
        while j < len(ev) and len(marks) < 4:
            if CPU[j] == c:
                if IDS[j] == 1:
                    break
                if IDS[j] == len(marks) + 1 or len(marks) == 3 and IDS[j] in (4, 5):
                    marks.append(j)
            j += 1
        if len(marks) == 4:
            yield ("rsiw" if IDS[marks[3]] == 4 else "siw"), marks, j

def timed(provider):
    """Host nanoseconds per Send in the timed boot: the parts above, the peer's reaction (from
    the receive completion to its next doorbell, in user space) and the one-way latency (half
    the time between one vCPU's doorbells)."""
    parts, last = [[] for _ in range(5)], {}
    for p, marks, j in doorbells():
        if p != provider:
            continue
        c, d = CPU[marks[0]], marks[0]
        peer = np.nonzero((IDS[j:] == 1) & (CPU[j:] != c))[0]
        if len(peer) == 0:
            continue
        for k in range(3):
            parts[k].append(T[marks[k + 1]] - T[marks[k]])
        parts[3].append(T[j + peer[0]] - T[marks[3]])
        # Consecutive doorbells of one vCPU in the same run (not across runs).
        if c in last and T[d] - last[c] < 10_000_000:
            parts[4].append((T[d] - last[c]) / 2)
        last[c] = T[d]
    return [np.median(p) if p else float("nan") for p in parts], len(parts[0])

TIMED = ["doorbell..tcp_sendmsg", "tcp_sendmsg..tcp_v4_rcv", "tcp_v4_rcv..completion",
         "completion..peer's doorbell", "one way (doorbells / 2)"]
times = {p: timed(p) for p in providers}
print("\nhost nanoseconds per Send (median), both providers taking turns in one timed boot ("
      + ", ".join(f"{p}: {times[p][1]} Sends" for p in providers) + ")")
print(f"{'':28s}" + "".join(f"{p:>10s}" for p in providers) + ("     ratio" if len(providers) == 2 else ""))
for k, part in enumerate(TIMED):
    row = [times[p][0][k] for p in providers]
    ratio = f"{row[0] / row[1]:10.2f}" if len(row) == 2 and row[1] else ""
    print(f"{part:28s}" + "".join(f"{x:10.0f}" for x in row) + ratio)
for line in open(f"{out}/paired.log"):
    if "PAIRED " in line:
        print("  ib_send_lat " + line.split("PAIRED ", 1)[1].strip() + " us")

def steps(provider):
    """When each vCPU reaches the points that split its doorbell's way to sendmsg (the RDMA
    core's post_send, the driver's steps, sock_sendmsg): median host nanoseconds from the
    doorbell. The RDMA core's share is the same code for both providers."""
    names = ["ib_uverbs_post_send"] + open(f"{out}/paired.{provider}.steps").read().split() \
        + ["sock_sendmsg"]
    ids = [6] + list(STEP_IDS[provider]) + [7]
    at = collections.defaultdict(list)
    for p, marks, _ in doorbells():
        if p != provider:
            continue
        d, send, c = marks[0], marks[1], CPU[marks[0]]
        seen = {}
        for j in range(d + 1, send + 1):
            if CPU[j] == c:
                seen.setdefault(int(IDS[j]), T[j] - T[d])
        for name, i in zip(names, ids):
            if i in seen:
                at[name].append(seen[i])
    return [(n, np.median(at[n])) for n in names if at[n]]

for p in providers:
    print(f"\n{p}: host nanoseconds from the doorbell to (median, timed boot)")
    for name, ns in steps(p) + [("tcp_sendmsg", times[p][0][0])]:
        print(f"{ns:8.0f}  {name.lstrip('*')}")
for p in providers:
    _, before, count, _ = results[p]
    print(f"\n{p}: doorbell..tcp_sendmsg by function (mean per Send)")
    for name, c in before.most_common(25):
        print(f"{c / max(count, 1):8.0f}  {re.sub(r'Cs[0-9A-Za-z_]{10,14}_', '', name)[:110]}")
