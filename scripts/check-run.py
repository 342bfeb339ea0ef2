#!/usr/bin/env python3
"""Judge a test VM's console log.

Extracts the KTAP document the guest printed between its markers, parses it with the kernel's
own parser (tools/testing/kunit/kunit.py parse), prints a per-suite summary, and fails on a
failed or missing test, on any kernel splat (Oops, BUG, WARNING, KASAN, KFENCE, lockdep, panic, hung
task, RCU stall) anywhere in the log, or when the guest never reached its end marker.
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
# Lines that match a pattern above but are not splats (KUnit's own failure lines are counted
# through KTAP).
BENIGN = [r"\bEXPECTATION FAILED\b"]


def leaves(node, path=()):
    """Yield (suite path, case name, status) for every leaf test of kunit.py's JSON."""
    subs = node.get("sub_groups") or []
    cases = node.get("test_cases") or []
    for case in cases:
        yield path, case["name"], case["status"]
    for sub in subs:
        yield from leaves(sub, path + (sub.get("name", "?"),))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--kunit-py", required=True)
    ap.add_argument("--counts", required=True)
    args = ap.parse_args()

    text = open(args.log, errors="replace").read()
    problems = []

    splats = []
    for line in text.splitlines():
        if any(re.search(p, line) for p in SPLATS) and not any(re.search(b, line) for b in BENIGN):
            splats.append(line.strip())
    if splats:
        problems.append("kernel splats in the console log:\n    " + "\n    ".join(splats[:20]))

    m = re.search(r"^RSIW-KTAP-BEGIN\r?$(.*?)^RSIW-KTAP-END\r?$", text, re.S | re.M)
    passed = failed = 0
    if not m:
        problems.append("the guest never printed its results (no RSIW-KTAP-END marker)")
    else:
        ktap = m.group(1).replace("\r", "")
        ktap_file = args.log + ".ktap"
        open(ktap_file, "w").write(ktap.lstrip("\n"))
        json_file = args.log + ".json"
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
