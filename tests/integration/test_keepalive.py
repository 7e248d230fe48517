"""Keep-alive on both sides (SPEC 4)."""
import re

import harness
from harness import build_request


def test_keepalive_reuse_both_sides(t):
    """several requests on one client connection are all answered on it,
    and the proxy reuses one upstream connection for them"""
    sim = t.sim()
    px = t.proxy(sim.url)
    c0 = sim.stats()["connections"]
    c = px.conn()
    seen = []
    reqs = [
        build_request("POST", "/echo", b"one"),
        build_request("POST", "/v1/chat/completions",
                      harness.chat_body({"tokens": 5, "ttft_ms": 5, "gap_ms": 1})),
        build_request("GET", "/health"),
        build_request("POST", "/echo", b"four", chunked=True),
    ]
    for i, raw in enumerate(reqs):
        r = c.request(raw)
        t.eq(r.status, 200, f"request {i + 1} status")
        t.check(r.complete, f"request {i + 1}: body incomplete")
        t.check((r.header("Connection") or "").lower() != "close",
                f"request {i + 1}: proxy announced Connection: close")
        seen.append(r.header("X-Sim-Conn-Requests"))
        if i == 1:
            t.check(r.body.rstrip().endswith(b"data: [DONE]"), "stream did not end with [DONE]")
    t.check(not c.eof, "client connection was closed")
    c.close()
    t.eq(seen, ["1", "2", "3", "4"], "X-Sim-Conn-Requests on one client connection")
    # the second /stats call counts its own connection
    t.eq(sim.stats()["connections"] - c0 - 1, 1, "upstream connections opened")


def test_curl_multiple_urls_reuse_connection(t):
    """curl with several URLs on one command line reuses its connection,
    and so does the proxy upstream"""
    sim = t.sim()
    px = t.proxy(sim.url)
    url = f"http://127.0.0.1:{px.port}/health"
    p = harness.curl(["-D", "-", "-o", "/dev/null", "-w", "num_connects=%{num_connects}\n",
                      url, url, url])
    t.eq(p.returncode, 0, f"curl exit status (stderr {p.stderr[-200:]!r})")
    out = p.stdout.decode("latin-1")
    connects = [int(x) for x in re.findall(r"num_connects=(\d+)", out)]
    statuses = re.findall(r"(?m)^HTTP/1\.1 (\d{3})", out)
    sim_reqs = re.findall(r"(?im)^X-Sim-Conn-Requests:\s*(\d+)", out)
    t.eq(statuses, ["200"] * 3, "statuses")
    t.eq(connects, [1, 0, 0], "curl's new connections per URL")
    t.eq(sim_reqs, ["1", "2", "3"], "X-Sim-Conn-Requests (upstream reuse)")
