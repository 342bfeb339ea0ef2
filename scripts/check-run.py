#!/usr/bin/env python3
"""Judge a test VM's console log, or the logs of the guests of one run.

Extracts the KTAP document each guest printed between its markers (several are merged into
one, their top-level tests renumbered in the order of the logs), parses it with the kernel's
own parser (tools/testing/kunit/kunit.py parse), prints a per-suite summary, and fails on a
failed or missing test, on any kernel splat (Oops, BUG, WARNING, KASAN, KFENCE, lockdep, panic, hung
task, RCU stall) anywhere in a log, or when a guest never reached its end marker.
Writes the counts as JSON to --counts for the caller's closing line.
"""
import argparse
import json
import os
import re
import subprocess
import sys

SPLATS = [
    r"\bOops\b", r"\bBUG:", r"\bWARNING:", r"KASAN", r"UBSAN", r"possible circular locking",
    r"possible recursive locking", r"inconsistent lock state", r"possible irq lock inversion",
    r"suspicious RCU usage", r"DEBUG_LOCKS_WARN_ON", r"Kernel panic", r"general protection fault", r"blocked for more than",
    r"rcu_.* detected stalls", r"\bpanicked at\b", r"Call Trace:", r"refcount_t:",
    r"list_(add|del) corruption", r"RSIW-TIMEOUT", r"run-vm: TIMEOUT",
    r"KFENCE", r"new suspected memory leaks",
]
# Lines that match a pattern above but are not splats: KUnit's own failure lines (counted
# through KTAP), and a process's own fault as the kernel reports it (show_signal_msg: "traps:
# COMM[PID] general protection fault ip:... in LIB"), which its scenario sees in the process's
# exit status. A fault of the kernel's own prints an Oops.
BENIGN = [
    r"\bEXPECTATION FAILED\b",
    r"\btraps: \S+\[\d+\] general protection fault ip:[0-9a-f]+ sp:[0-9a-f]+ error:[0-9a-f]+ in ",
]


def leaves(node, path=()):
    """Yield (suite path, case name, status) for every leaf test of kunit.py's JSON."""
    subs = node.get("sub_groups") or []
    cases = node.get("test_cases") or []
    for case in cases:
        yield path, case["name"], case["status"]
    for sub in subs:
        yield from leaves(sub, path + (sub.get("name", "?"),))


def merge(docs):
    """One KTAP document of the top-level tests of DOCS, renumbered in order."""
    body, n = [], 0
    for doc in docs:
        for line in doc.splitlines():
            if re.match(r"(KTAP version \d+|1\.\.\d+)$", line):
                continue
            m = re.match(r"(ok|not ok) \d+(.*)", line)
            if m:
                n += 1
                line = f"{m.group(1)} {n}{m.group(2)}"
            body.append(line)
    return "\n".join(["KTAP version 1", f"1..{n}"] + body) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="+", metavar="log")
    ap.add_argument("--kunit-py", required=True)
    ap.add_argument("--counts", required=True)
    ap.add_argument("--merged", help="with several logs, BASE of the merged BASE.ktap and "
                    "kunit.py's BASE.json (default: the first log)")
    args = ap.parse_args()

    problems = []
    docs = []
    for log in args.logs:
        text = open(log, errors="replace").read()
        # Which log a problem is in, when there are several.
        where = f" ({os.path.basename(log)})" if len(args.logs) > 1 else ""
        splats = []
        for line in text.splitlines():
            if any(re.search(p, line) for p in SPLATS) and not any(re.search(b, line) for b in BENIGN):
                splats.append(line.strip())
        if splats:
            problems.append(f"kernel splats in the console log{where}:\n    " + "\n    ".join(splats[:20]))
        m = re.search(r"^RSIW-KTAP-BEGIN\r?$(.*?)^RSIW-KTAP-END\r?$", text, re.S | re.M)
        if not m:
            problems.append(f"the guest never printed its results (no RSIW-KTAP-END marker){where}")
        else:
            docs.append(m.group(1).replace("\r", "").lstrip("\n"))

    passed = failed = 0
    if docs:
        ktap = docs[0] if len(args.logs) == 1 else merge(docs)
        base = args.merged if args.merged and len(args.logs) > 1 else args.logs[0]
        ktap_file = base + ".ktap"
        open(ktap_file, "w").write(ktap)
        json_file = base + ".json"
        parse = subprocess.run(
            [sys.executable, args.kunit_py, "parse", "--json=" + json_file, ktap_file],
            capture_output=True, text=True)
        print(parse.stdout, end="")
        if not os.path.exists(json_file):
            problems.append("kunit.py parse produced no JSON:\n" + parse.stderr)
        else:
            tree = json.load(open(json_file))
            per_suite = {}
            for path, name, status in leaves(tree):
                suite = path[-1] if path else "(top level: scenarios)"
                ok = status in ("PASS",)
                s = per_suite.setdefault(suite, [0, 0, 0])
                if ok:
                    s[0] += 1
                    passed += 1
                elif status == "SKIP":
                    s[2] += 1
                else:
                    s[1] += 1
                    failed += 1
                    problems.append(f"failed: {suite}.{name} ({status})")
            print("per-suite summary (passed/failed/skipped):")
            for suite, (p, f, s) in per_suite.items():
                print(f"  {suite:40s} {p:4d} {f:4d} {s:4d}")
            for line in ktap.splitlines():
                if re.match(r"\s*not ok \d+ .*# suite did not run", line):
                    problems.append("missing suite (counted above): " + line.strip())
    # A failure that is not a test result (splat, no marker) still counts as one failure.
    extra = sum(1 for p in problems if not p.startswith(("failed:", "missing suite")))
    json.dump({"passed": passed, "failed": failed + extra}, open(args.counts, "w"))
    if problems:
        print("VM run FAILED:")
        for p in problems:
            print("  - " + p)
        return 1
    print(f"VM run passed: {passed} tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
