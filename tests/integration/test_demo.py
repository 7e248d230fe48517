"""`make demo` (scripts/demo.sh): it finishes on its own, and it never
prints a dashboard link that is dead by the time anyone opens it.  Without
DEMO_HOLD it says how to keep the dashboard up instead; with DEMO_HOLD=N
the address it prints answers while the demo holds, and the demo still
ends by itself."""
import os
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.request

import harness

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LINK = re.compile(r"https?://[^\s]+/dashboard")


def start(t, hold):
    for b in ("tokentap", "tokentap-sim"):
        if not os.access(os.path.join(t.build, b), os.X_OK):
            raise harness.Skip(f"{b} not built")
    env = dict(os.environ)
    env.pop("DEMO_HOLD", None)
    if hold is not None:
        env["DEMO_HOLD"] = str(hold)
    p = subprocess.Popen(["sh", os.path.join(ROOT, "scripts", "demo.sh"), os.path.abspath(t.build)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    lines = queue.Queue()

    def pump():
        for line in p.stdout:
            lines.put(line.decode(errors="replace"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return p, lines


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)    # the demo's trap stops what it started
        p.wait(30)


def rest(t, p, lines, out, deadline):
    """read to the end of the demo's output; it must end by itself"""
    while True:
        left = deadline - time.monotonic()
        t.check(left > 0, "make demo did not finish on its own:\n" + "".join(out[-10:]))
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            continue
        if line is None:
            break
        out.append(line)
    t.eq(p.wait(30), 0, "demo exit status:\n" + "".join(out[-20:]))
    return "".join(out)


@harness.timeout(150)
def test_demo_ends_by_itself_and_says_how_to_keep_the_dashboard_up(t):
    p, lines = start(t, None)
    try:
        text = rest(t, p, lines, [], time.monotonic() + 120 * t.slow)
    finally:
        stop(p)
    t.check("tokentap drained and exited 0" in text, "the demo stopped tokentap itself")
    t.eq(LINK.findall(text), [], "a dashboard link printed although tokentap is stopped")
    tail = text[text.index("live dashboard"):] if "live dashboard" in text else ""
    t.check("make demo DEMO_HOLD=60" in tail and "stops" in tail,
            f"the demo says how to see the dashboard: {tail!r}")


@harness.timeout(150)
def test_demo_hold_prints_a_dashboard_link_that_answers(t):
    hold = 4
    p, lines = start(t, hold)
    out = []
    try:
        deadline = time.monotonic() + 120 * t.slow
        url = None
        while url is None:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            t.check(line is not None, "the demo ended without a dashboard link:\n" + "".join(out[-20:]))
            out.append(line)
            m = LINK.search(line)
            url = m and m.group(0)
        said = "".join(out[-3:])
        t.check(f"up for {hold} s" in said, f"how long the dashboard stays up: {said!r}")
        t.check("Ctrl-C" in said, f"how to stop it: {said!r}")
        # printed while live: the page and its data answer now
        with urllib.request.urlopen(url, timeout=10) as r:
            t.eq(r.status, 200, "the printed dashboard link")
            t.check("tokentap dashboard" in r.read().decode(), "the link serves the dashboard")
        with urllib.request.urlopen(url.rsplit("/", 1)[0] + "/stats", timeout=10) as r:
            t.eq(r.status, 200, "the dashboard's /stats")
        text = rest(t, p, lines, out, deadline)
    finally:
        stop(p)
    t.check("tokentap drained and exited 0" in text, "the demo ended by itself after the hold")
