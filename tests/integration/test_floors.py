"""The code's floors (docs/ARCHITECTURE.md, "Folders"): each folder is one
floor and a file includes only its own floor and the floors below it, so
the layers can be read, tested and changed from the ground up.

    0  proxy/base/      log, URLs, the JSON arena, UTF-8, rate limits, man pages
    1  metrics/         the live numbers: request clock, records, aggregates, SLOs, spans
    2  proxy/decode/    stream framing, WebSocket frames, per-API decoders, think filter
    3  proxy/config/    the configuration          tls/   TLS contexts and bufferevents
    4  proxy/http/      connections, legs, upstream pools, heads, turns
    5  proxy/server/    process, workers, admin, systemd, main
    5  metrics/report/  the offline report: apart from the live numbers, included by
                        proxy/server/main.c alone
"""
import os
import re

import harness

ROOT = harness.REPO
FLOORS = {
    "proxy/base": 0,
    "metrics": 1,
    "proxy/decode": 2,
    "proxy/config": 3,
    "tls": 3,
    "proxy/http": 4,
    "proxy/server": 5,
    "metrics/report": 5,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def floor_of(path):
    """the floor of a file (its folder), or None outside the floors"""
    return FLOORS.get(os.path.dirname(path))


def sources():
    for top in ("proxy", "metrics", "tls"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def test_every_source_file_is_on_a_floor(t):
    """no file lies outside the floors (proxy/ holds only floor folders)"""
    stray = [p for p in sources() if floor_of(p) is None]
    t.eq(stray, [], "files outside a floor folder")


def test_no_file_includes_a_higher_floor(t):
    """each project include names a file on the same floor or below, and
    the offline report is included by main.c alone"""
    n = 0
    for p in sources():
        with open(os.path.join(ROOT, p)) as f:
            src = f.read()
        mine = floor_of(p)
        for inc in INCLUDE.findall(src):
            if not os.path.exists(os.path.join(ROOT, inc)):
                continue            # generated or system-relative: not ours
            n += 1
            theirs = floor_of(inc)
            t.check(theirs is not None, f"{p} includes {inc}, which is on no floor")
            t.check(theirs <= mine, f"{p} (floor {mine}) includes {inc} (floor {theirs})")
            if os.path.dirname(inc) == "metrics/report" and os.path.dirname(p) != "metrics/report":
                t.eq(p, "proxy/server/main.c", f"{p} includes the offline report ({inc})")
    t.check(n > 200, f"only {n} project includes read: the scan is broken")
