#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Run rdma-core's test suite (tests/ of rdma-core, as its run_tests.py loads it) on one RDMA
device, every test bounded in time, and compare two such runs.

  run-suite.py run --tests DIR --dev DEV --gid N --label NAME --json OUT [--timeout S] [NAME...]
      Runs the tests of the modules, classes or tests NAME (test_qp, test_qp.QPTest,
      test_qp.QPTest.test_x; every test without one) in a child process, one after the other, and prints one line per test. A test that
      runs longer than S seconds is stopped with the child (and everything it forked); the child
      starts again at the next test, and the test counts as an error ("timeout"). OUT gets
      {"label", "dev", "seconds", "results": {id: [status, reason]}}, status one of passed,
      failed, errored, skipped.
  run-suite.py compare BASE.json OTHER.json
      Prints the counts of both runs, the tests that fail or error in both with their reasons,
      and every test that passes in BASE and does not pass in OTHER; exits 1 when there is one.
"""
import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import time

STATUSES = ("passed", "failed", "errored", "skipped")
# Importing pyverbs and the test modules under QEMU's TCG takes a while.
START_TIMEOUT = 180


def one_line(text):
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:300]


# ---- child: load the suite as run_tests.py does, run the tests it is given ----

def child(testdir, dev, gid, proto_fd, ids_file):
    out = os.fdopen(proto_fd, "w", buffering=1)
    sys.path.insert(0, testdir)
    sys.argv = ["run_tests.py", "--dev", dev, "--gid", str(gid)]
    from args_parser import parser
    parser.parse_args()
    import unittest
    from importlib.machinery import SourceFileLoader
    tests = SourceFileLoader("tests", os.path.join(testdir, "__init__.py")).load_module()
    suite = unittest.TestLoader().loadTestsFromModule(tests)

    by_id = {}

    def flatten(s):
        for t in s:
            if isinstance(t, unittest.TestSuite):
                flatten(t)
            else:
                by_id.setdefault(t.id(), t)
    flatten(suite)

    if ids_file is None:
        for i in by_id:
            out.write("T %s\n" % i)
        return 0

    class Result(unittest.TestResult):
        def __init__(self):
            super().__init__()
            self.outcome = []

        def addSuccess(self, test):
            self.outcome.append(("passed", ""))

        def addFailure(self, test, err):
            self.outcome.append(("failed", one_line(self._exc_info_to_string(err, test))))

        def addError(self, test, err):
            self.outcome.append(("errored", one_line(self._exc_info_to_string(err, test))))

        def addSkip(self, test, reason):
            self.outcome.append(("skipped", one_line(reason)))

        def addExpectedFailure(self, test, err):
            self.outcome.append(("passed", "expected failure"))

        def addUnexpectedSuccess(self, test):
            self.outcome.append(("failed", "unexpected success"))

        def addSubTest(self, test, subtest, err):
            if err is not None:
                kind = "failed" if issubclass(err[0], test.failureException) else "errored"
                self.outcome.append((kind, one_line(self._exc_info_to_string(err, test))))

    with open(ids_file) as f:
        ids = [line.strip() for line in f if line.strip()]
    import random
    for i in ids:
        out.write("S %s\n" % i)
        # The suite draws QP types, sizes and flags at random: seeded by the test's id, a test
        # makes the same draws on every device, so that two runs compare.
        random.seed(i)
        res = Result()
        if i in by_id:
            unittest.TestSuite([by_id[i]]).run(res)
        else:
            res.outcome.append(("errored", "not found in the suite"))
        status, reason = "passed", ""
        for want in ("errored", "failed", "skipped", "passed"):
            hit = [r for s, r in res.outcome if s == want]
            if hit:
                status, reason = want, hit[0]
                break
        if not res.outcome:
            status, reason = "errored", "no outcome"
        out.write("R %s %s %s\n" % (i, status, reason.replace("\n", " ")))
    return 0


# ---- parent: run children, bound every test in time ----

def spawn(args, ids_file):
    r, w = os.pipe()
    cmd = [sys.executable, os.path.abspath(__file__), "child", args.tests, args.dev,
           str(args.gid), str(w)] + ([ids_file] if ids_file else [])
    proc = subprocess.Popen(cmd, pass_fds=(w,), start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=args.log, stderr=args.log)
    os.close(w)
    return proc, r


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def read_lines(proc, fd, timeout_for):
    """Yields (line or None on timeout/EOF, 'line'|'timeout'|'eof')."""
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    buf = b""
    deadline = time.monotonic() + timeout_for(None)
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            text = line.decode(errors="replace")
            yield text, "line"
            deadline = time.monotonic() + timeout_for(text)
        left = deadline - time.monotonic()
        if left <= 0:
            yield None, "timeout"
            return
        if sel.select(left):
            chunk = os.read(fd, 65536)
            if not chunk:
                yield None, "eof"
                return
            buf += chunk


def run(args):
    args.log = open(args.json + ".log", "w")
    start = time.monotonic()
    # The list of tests.
    proc, fd = spawn(args, None)
    ids = []
    for line, kind in read_lines(proc, fd, lambda _: START_TIMEOUT):
        if kind != "line":
            break
        if line.startswith("T "):
            ids.append(line[2:])
    kill_group(proc)
    os.close(fd)
    if not ids:
        print("%s: the suite lists no tests (see %s.log)" % (args.label, args.json))
        return 1
    if args.prefix:
        ids = [i for i in ids if any(i[len("tests."):] == p or i[len("tests."):].startswith(p + ".")
                                     for p in args.prefix)]
    print("%s: %d tests on %s (gid %d), at most %d s each" % (args.label, len(ids), args.dev,
                                                              args.gid, args.timeout), flush=True)
    results = {}
    todo = list(ids)
    ids_file = args.json + ".ids"
    while todo:
        with open(ids_file, "w") as f:
            f.write("\n".join(todo) + "\n")
        proc, fd = spawn(args, ids_file)
        current = None
        t0 = time.monotonic()
        log_pos = 0

        def timeout_for(line):
            return args.timeout if line and line.startswith("S ") else START_TIMEOUT

        for line, kind in read_lines(proc, fd, timeout_for):
            if kind == "line" and line.startswith("S "):
                current = line[2:]
                t0 = time.monotonic()
                args.log.flush()
                log_pos = os.path.getsize(args.log.name)
            elif kind == "line" and line.startswith("R "):
                tid, status, reason = (line[2:].split(" ", 2) + [""])[:3]
                if status in ("failed", "errored"):
                    # The rdma_cm tests' processes print what went wrong ("Player active got: ...").
                    with open(args.log.name, errors="replace") as f:
                        f.seek(log_pos)
                        said = [one_line(x) for x in f.read().splitlines() if x.startswith("Player ")]
                    if said:
                        reason += " (" + "; ".join(said[:2]) + ")"
                results[tid] = [status, reason]
                secs = time.monotonic() - t0
                print("%s: %-7s %5.1fs %s%s" % (args.label, status, secs, tid[len("tests."):],
                                                 " -- " + reason if reason and status != "passed" else ""),
                      flush=True)
                current = None
            elif kind == "timeout":
                what = current or (todo[0] if todo else None)
                if what:
                    why = "timeout: still running after %d s" % (args.timeout if current else START_TIMEOUT)
                    results[what] = ["errored", why]
                    print("%s: errored %s -- %s" % (args.label, what[len("tests."):], why), flush=True)
                break
            elif kind == "eof":
                break
        kill_group(proc)
        os.close(fd)
        if current and current not in results:
            results[current] = ["errored", "the test process died (exit %s)" % proc.returncode]
            print("%s: errored %s -- %s" % (args.label, current[len("tests."):], results[current][1]),
                  flush=True)
        todo = [i for i in todo if i not in results]
    secs = time.monotonic() - start
    counts = {s: sum(1 for v in results.values() if v[0] == s) for s in STATUSES}
    with open(args.json, "w") as f:
        json.dump({"label": args.label, "dev": args.dev, "seconds": round(secs),
                   "counts": counts, "results": results}, f, indent=1, sort_keys=True)
    print("%s: %s in %d s" % (args.label, ", ".join("%d %s" % (counts[s], s) for s in STATUSES), secs),
          flush=True)
    return 0


def compare(base_file, other_file):
    with open(base_file) as f:
        base = json.load(f)
    with open(other_file) as f:
        other = json.load(f)
    for run_ in (base, other):
        print("rdma-core suite on %s (%s): %s in %d s" % (
            run_["label"], run_["dev"],
            ", ".join("%d %s" % (run_["counts"][s], s) for s in STATUSES), run_["seconds"]))
    bad = ("failed", "errored")
    for tid in sorted(base["results"]):
        b = base["results"][tid]
        o = other["results"].get(tid, ["missing", ""])
        if b[0] in bad and o[0] in bad:
            print("on both: %s %s %s -- %s: %s" % (tid[len("tests."):], b[0], o[0],
                                                    base["label"], b[1]))
    worse = []
    for tid in sorted(base["results"]):
        if base["results"][tid][0] == "passed":
            o = other["results"].get(tid, ["missing", "not run"])
            if o[0] != "passed":
                worse.append(tid)
                print("REGRESSION: %s passes on %s, %s on %s -- %s" % (
                    tid[len("tests."):], base["label"], o[0], other["label"], o[1]))
    if worse:
        print("%d tests pass on %s and not on %s" % (len(worse), base["label"], other["label"]))
        return 1
    print("every test that passes on %s passes on %s" % (base["label"], other["label"]))
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        a = sys.argv[2:]
        return child(a[0], a[1], int(a[2]), int(a[3]), a[4] if len(a) > 4 else None)
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--tests", required=True)
    r.add_argument("--dev", required=True)
    r.add_argument("--gid", type=int, required=True)
    r.add_argument("--label", required=True)
    r.add_argument("--json", required=True)
    r.add_argument("--timeout", type=int, default=30)
    r.add_argument("prefix", nargs="*")
    c = sub.add_parser("compare")
    c.add_argument("base")
    c.add_argument("other")
    args = p.parse_args()
    if args.cmd == "run":
        return run(args)
    return compare(args.base, args.other)


if __name__ == "__main__":
    sys.exit(main())
