#!/usr/bin/env python3
"""
Integration test runner for tokentap.

    python3 tests/integration/run.py --build build [--filter SUBSTR] [--list]

Discovers tests/integration/test_*.py and runs every function named test_*
in it, each in its own child process (its own session, so a hung test and
everything it started can be killed as one process group) with a fresh
harness.Ctx and a deadline (the function's .timeout, default 30 s, scaled
for sanitizer builds).  Prints one line per test:

    ok   module.test_name
    FAIL module.test_name: reason
    SKIP module.test_name: reason

and finally exactly "RESULT passed=N failed=N skipped=N".

Adding tests: create tests/integration/test_<area>.py with functions
`def test_<behaviour>(t):` (t is a harness.Ctx); nothing to register.
"""
import argparse
import glob
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

DEFAULT_TIMEOUT = 30


def load(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def discover():
    """[(module_name, func_name, timeout)] in file order, then source order"""
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "test_*.py"))):
        mod = load(path)
        fns = [(getattr(f, "__code__", None) and f.__code__.co_firstlineno or 0, n, f)
               for n, f in vars(mod).items()
               if n.startswith("test_") and callable(f)]
        order = getattr(mod, "ORDER", None)
        fns.sort(key=lambda x: (order.index(x[1]) if order and x[1] in order else 0, x[0], x[1]))
        for _, n, f in fns:
            out.append((mod.__name__, n, getattr(f, "timeout", DEFAULT_TIMEOUT),
                        getattr(f, "retries", 0)))
    return out


def run_one(build, module, func, tmp):
    """child side: run one test; prints a JSON verdict as its last line"""
    mod = load(os.path.join(HERE, module + ".py"))
    fn = getattr(mod, func)
    ctx = harness.Ctx(build, tmp, f"{module}.{func}")
    verdict, reason = "ok", ""
    try:
        fn(ctx)
    except harness.Skip as e:
        verdict, reason = "SKIP", str(e)
    except AssertionError as e:
        verdict, reason = "FAIL", str(e) or "assertion failed"
        tb = traceback.extract_tb(e.__traceback__)
        where = [f for f in tb if os.path.basename(f.filename).startswith("test_")]
        if where:
            reason += f" [{os.path.basename(where[-1].filename)}:{where[-1].lineno}]"
    except Exception as e:  # an unexpected error is a failure with a trace
        verdict = "FAIL"
        reason = f"{type(e).__name__}: {e}"
        tb = traceback.format_exc().strip().splitlines()
        reason += " | " + " | ".join(l.strip() for l in tb[-6:])
    try:
        problems = ctx.teardown()
    except Exception as e:
        problems = [f"teardown: {type(e).__name__}: {e}"]
    if problems:
        if verdict != "FAIL":
            verdict, reason = "FAIL", "; ".join(problems)
        else:
            reason += " (also: " + "; ".join(problems) + ")"
    if verdict == "ok" and ctx.notes:
        reason = "; ".join(ctx.notes)
    print(json.dumps({"verdict": verdict, "reason": reason}))
    sys.stdout.flush()
    return 0


def run_child(build, module, func, tmp, deadline, repo):
    """run one test in its own process group; its verdict dict"""
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--build", build,
                          "--one", f"{module}::{func}", "--tmp", tmp],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, cwd=repo)
    try:
        out, err = p.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        # the test and everything it started share its process group
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        return {"verdict": "FAIL", "reason": f"timed out after {deadline}s"}
    for line in reversed(out.decode("utf-8", "replace").splitlines()):
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if isinstance(v, dict) and "verdict" in v:
            return v
    return {"verdict": "FAIL",
            "reason": f"test process exited {p.returncode} without a verdict: "
                      + err.decode("utf-8", "replace").strip()[-600:].replace("\n", " | ")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--filter", default="", help="run tests whose name contains SUBSTR")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep per-test temp dirs")
    ap.add_argument("--verbose", "-v", action="store_true",
                    help="print notes of passing tests")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    a = ap.parse_args()

    repo = harness.REPO
    build = a.build if os.path.isabs(a.build) else os.path.join(repo, a.build)

    if a.one:
        module, func = a.one.split("::")
        return run_one(build, module, func, a.tmp)

    tests = [t for t in discover() if a.filter in f"{t[0]}.{t[1]}"]
    if a.list:
        for m, f, to, rt in tests:
            print(f"{m}.{f}  (timeout {to}s{', retried' if rt else ''})")
        return 0

    san = os.path.basename(os.path.normpath(build)).endswith("-san")
    scale = 4 if san else 1
    passed = failed = skipped = 0
    root = tempfile.mkdtemp(prefix="tt-integ-")
    t_all = time.monotonic()
    for module, func, to, retries in tests:
        name = f"{module}.{func}"
        tmp = os.path.join(root, name)
        deadline = to * scale
        t0 = time.monotonic()
        first_failure = None
        for attempt in range(retries + 1):
            run_tmp = tmp if attempt == 0 else f"{tmp}.retry{attempt}"
            os.makedirs(run_tmp, exist_ok=True)
            verdict = run_child(build, module, func, run_tmp, deadline, repo)
            if verdict["verdict"] != "FAIL" or attempt == retries:
                break
            first_failure = verdict["reason"]
        if first_failure and verdict["verdict"] == "ok":
            verdict["reason"] = (verdict["reason"] + "; " if verdict["reason"] else "") + \
                f"passed on retry, first attempt: {first_failure}"
            print(f"# {name}: passed on retry; first attempt failed: {first_failure}",
                  file=sys.stderr)
        dt = time.monotonic() - t0
        v, reason = verdict["verdict"], verdict["reason"]
        if v == "ok":
            passed += 1
            extra = f"  ({dt:.1f}s{'; ' + reason if a.verbose and reason else ''})"
            if first_failure:
                extra += f"  [RETRIED; first attempt: {first_failure}]"
            print(f"ok   {name}{extra}")
        elif v == "SKIP":
            skipped += 1
            print(f"SKIP {name}: {reason}")
        else:
            failed += 1
            print(f"FAIL {name}: {reason}  ({dt:.1f}s; logs in {tmp})")
        sys.stdout.flush()
    if not a.keep and failed == 0:
        shutil.rmtree(root, ignore_errors=True)
    elif failed:
        print(f"# logs of failed tests kept under {root}", file=sys.stderr)
    print(f"# integration: {time.monotonic() - t_all:.1f}s", file=sys.stderr)
    print(f"RESULT passed={passed} failed={failed} skipped={skipped}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
