"""
The WebSocket test peers in tests/node (Node.js, npm packages pinned by
tests/node/package-lock.json): the official OpenAI SDK's Responses
WebSocket client (responses_ws.mjs) and Realtime client (realtime_ws.mjs),
and ws_upstream.mjs, an upstream of its own on the `ws` package, beside the
C simulator.  Their command lines and output lines are described at the top
of each script.

    import nodepeer

    up = nodepeer.Upstream(t)                   # ws_upstream.mjs, port 0
    r = nodepeer.run(t, "responses_ws.mjs",
                     ["--base-url", up.url + "/v1", "--turns", "3"])
    r.turns                                     # the "turn" lines, in order
    up.wait_event(lambda e: e["event"] == "close", 10, "the close")

A test that uses them is SKIPPED, with a message naming what is missing,
when node is not installed or tests/node/node_modules lacks the pinned
packages (`sh scripts/deps.sh node` runs npm ci; make test and make check
do that first).

Readiness, as for tokentap and the simulator (harness.py): ws_upstream.mjs
binds port 0, writes {"pid","listen","port"} to its --ready-file (by
rename), then prints {"event":"listening"} on stdout.  A thread reads its
stdout lines as they come; Upstream() blocks on a condition variable until
that line (or the process's exit), then reads the port from the ready file.
Nothing polls or sleeps.
"""
import json
import os
import shutil
import subprocess
import threading
import time

import harness
from harness import Failure, Skip

NODE_DIR = os.path.join(harness.REPO, "tests", "node")
NODE_MIN = 18                  # Debian 12's nodejs; see tests/node/package.json


def node():
    """the node executable, once node and tests/node's pinned packages are
    there; otherwise Skip naming what is missing"""
    exe = shutil.which("node")
    if not exe:
        raise Skip("node is not installed (Debian package nodejs; "
                   "scripts/deps.sh installs it): the WebSocket peers in tests/node need it")
    try:
        ver = subprocess.run([exe, "--version"], capture_output=True, timeout=30).stdout.decode().strip()
        major = int(ver.lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        raise Skip(f"{exe} --version did not answer with a version")
    if major < NODE_MIN:
        raise Skip(f"node {ver} is older than {NODE_MIN}, which tests/node's packages need")
    with open(os.path.join(NODE_DIR, "package-lock.json")) as f:
        lock = json.load(f)["packages"]
    for name in ("openai", "ws"):
        want = lock[f"node_modules/{name}"]["version"]
        pj = os.path.join(NODE_DIR, "node_modules", name, "package.json")
        if not os.path.exists(pj):
            raise Skip(f"tests/node/node_modules/{name} is missing: run `sh scripts/deps.sh node` "
                       "(npm ci of tests/node; make test and make check run it)")
        with open(pj) as f:
            got = json.load(f).get("version")
        if got != want:
            raise Skip(f"tests/node/node_modules/{name} is {got}, package-lock.json pins {want}: "
                       "run `sh scripts/deps.sh node`")
    return exe


def _lines(data, what):
    out = []
    for ln in data.decode("utf-8", "replace").splitlines():
        if not ln.strip():
            continue
        try:
            out.append(json.loads(ln))
        except ValueError:
            raise Failure(f"{what} printed a line that is not JSON: {ln[:200]!r}")
    return out


class Run:
    """What one script run printed: .lines (every JSON object), .turns (the
    "turn" lines), .open and .end (those lines, or None), .rc, .stderr"""

    def __init__(self, lines, rc, stderr):
        self.lines = lines
        self.rc = rc
        self.stderr = stderr
        self.turns = [x for x in lines if x.get("event") == "turn"]
        self.open = next((x for x in lines if x.get("event") == "open"), None)
        self.end = next((x for x in lines if x.get("event") == "end"), None)


def run(t, script, args, timeout=30, expect_rc=0):
    """run tests/node/<script> <args> to its end (at most <timeout> s, x slow)
    and return a Run.  Fails when it exits with another status than
    <expect_rc> (None: any) or prints a line that is not JSON.  Its stdout
    and stderr stay in the test's directory."""
    exe = node()
    timeout *= t.slow
    n = sum(1 for f in os.listdir(t.tmp) if f.startswith(script))
    base = os.path.join(t.tmp, f"{script}.{n}")
    argv = [exe, os.path.join(NODE_DIR, script), *args, "--timeout-ms", str(int(timeout * 1000))]
    try:
        p = subprocess.run(argv, capture_output=True, cwd=NODE_DIR, stdin=subprocess.DEVNULL,
                           timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        raise Failure(f"{script} did not end within {timeout + 10}s (its own limit is {timeout}s)")
    with open(base + ".stdout", "wb") as f:
        f.write(p.stdout)
    with open(base + ".stderr", "wb") as f:
        f.write(p.stderr)
    err = p.stderr.decode("utf-8", "replace")
    if expect_rc is not None and p.returncode != expect_rc:
        raise Failure(f"{script} exited {p.returncode} (expected {expect_rc}); stderr: "
                      f"{err.strip()[-500:]!r}; stdout: {p.stdout.decode('utf-8', 'replace')[-500:]!r}")
    return Run(_lines(p.stdout, script), p.returncode, err)


class Upstream(harness.Proc):
    """ws_upstream.mjs on 127.0.0.1:0 (<extra>: --no-deflate, --tls-cert F
    --tls-key F, ...).  .port; .url (http[s]://127.0.0.1:PORT) and .ws_url
    (ws[s]://...); .events, every stdout line so far (dicts), in order.
    Stopped (SIGTERM, exit 0 expected) with the test."""

    def __init__(self, t, extra=()):
        exe = node()
        name = f"wsup{len(t.procs)}"
        ready = os.path.join(t.tmp, f"{name}.ready.json")
        self.events = []
        self._cond = threading.Condition()
        self._eof = False
        super().__init__(t, name, [exe, os.path.join(NODE_DIR, "ws_upstream.mjs"),
                                   "--listen", "127.0.0.1:0", "--ready-file", ready, *extra],
                         stdout_pipe=True)
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_event(lambda e: e.get("event") == "listening", 10 * t.slow,
                        "ws_upstream.mjs to listen")
        with open(ready) as f:
            info = json.load(f)
        if info.get("pid") != self.pid:
            raise Failure(f"{name}: ready file names pid {info.get('pid')}, not {self.pid}")
        self.port = info["port"]
        tls = "--tls-cert" in extra
        self.url = f"http{'s' if tls else ''}://127.0.0.1:{self.port}"
        self.ws_url = f"ws{'s' if tls else ''}://127.0.0.1:{self.port}"

    def _read(self):
        with open(self.out_path, "wb") as log:
            for raw in self.p.stdout:
                log.write(raw)
                log.flush()
                try:
                    ev = json.loads(raw)
                except ValueError:
                    ev = {"event": "unparsed", "line": raw.decode("utf-8", "replace")}
                with self._cond:
                    self.events.append(ev)
                    self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def wait_event(self, pred, timeout, what):
        """the first stdout line (dict) for which <pred> is true, waiting up
        to <timeout> s (x slow) for it; fails when the process ends first"""
        end = time.monotonic() + timeout * self.ctx.slow
        with self._cond:
            while True:
                for e in self.events:
                    if pred(e):
                        return e
                if self._eof:
                    self.wait(5)
                    raise Failure(f"ws_upstream.mjs ended (status {self.p.poll()}) before {what}: "
                                  f"{self.stderr()[-400:].decode('utf-8', 'replace')}")
                left = end - time.monotonic()
                if left <= 0:
                    raise Failure(f"timed out after {timeout}s waiting for {what}; "
                                  f"ws_upstream.mjs said: {self.events[-5:]}")
                self._cond.wait(left)

    def of_conn(self, conn, event=None):
        """the events of connection <conn> so far (of one kind with <event>)"""
        with self._cond:
            return [e for e in self.events if e.get("conn") == conn
                    and (event is None or e.get("event") == event)]
