#!/usr/bin/env python3
"""Runs the unit test binaries (cmocka, TAP output) and the integration
tests of one build directory, prints each result, and appends
"passed failed skipped" to the --summary file for tests/run.sh."""
import argparse
import glob
import os
import re
import subprocess
import sys


def run_unit(build):
    passed = failed = skipped = 0
    env = dict(os.environ, CMOCKA_MESSAGE_OUTPUT="TAP")
    for binary in sorted(glob.glob(os.path.join(build, "tests", "test_*"))):
        name = os.path.basename(binary)
        try:
            proc = subprocess.run([binary], capture_output=True, text=True,
                                  env=env, timeout=600)
        except subprocess.TimeoutExpired:
            print(f"FAIL {name}: timed out")
            failed += 1
            continue
        out = proc.stdout + proc.stderr
        seen = 0
        for line in proc.stdout.splitlines():
            m = re.match(r"^(not ok|ok) \d+ - (.*?)(\s*#\s*SKIP.*)?$", line)
            if not m:
                continue
            seen += 1
            test = f"{name}:{m.group(2).strip()}"
            if m.group(3):
                skipped += 1
                print(f"SKIP {test}{m.group(3)}")
            elif m.group(1) == "ok":
                passed += 1
                print(f"ok   {test}")
            else:
                failed += 1
                print(f"FAIL {test}")
        if proc.returncode != 0 and (seen == 0 or failed == 0):
            failed += 1
            print(f"FAIL {name}: exit status {proc.returncode}")
        if proc.returncode != 0:
            sys.stdout.write("".join("    " + l + "\n" for l in out.splitlines()[-30:]))
    return passed, failed, skipped


def run_integration(build):
    proc = subprocess.run([sys.executable, "tests/integration/run.py",
                           "--build", build], text=True,
                          capture_output=True)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    m = re.search(r"^RESULT passed=(\d+) failed=(\d+) skipped=(\d+)$",
                  proc.stdout, re.M)
    if not m:
        print("FAIL integration: runner gave no result")
        return 0, 1, 0
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    up, uf, us = run_unit(a.build)
    ip, if_, is_ = run_integration(a.build)
    p, f, s = up + ip, uf + if_, us + is_
    print(f"-- {a.label}: {p} passed, {f} failed, {s} skipped")
    with open(a.summary, "a") as fh:
        fh.write(f"{p} {f} {s}\n")
    return 1 if f else 0


if __name__ == "__main__":
    sys.exit(main())
