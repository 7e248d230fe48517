"""Keep-alive on both sides (SPEC 4)."""
import re
import socket
import threading

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


def test_bytes_after_a_streamed_response_keep_its_connection_out_of_the_pool(t):
    """an upstream that sends bytes after the end of a chunked response, in
    the same write as its last chunk (read while the body streams: the
    direct path of proxy/http/leg.c): the client gets the response exactly and
    nothing else, the connection is not reused (the bytes could be the
    start of a forged second response), and the next request goes out on
    a new connection"""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)             # closed with the test's process
    per_conn = []                  # requests seen on each upstream connection
    go_on = threading.Event()      # the client has the first chunk
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    forged = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"

    def one(s, k):
        s.settimeout(10)
        with s:
            while True:
                req = harness.read_request(s)
                if req is None:
                    return
                per_conn[k] += 1
                if k == 0 and per_conn[k] == 1:
                    s.sendall(head + b"5\r\nfirst\r\n")
                    go_on.wait(10)
                    s.sendall(b"4\r\nlast\r\n0\r\n\r\n" + forged)
                else:
                    s.sendall(head + b"2\r\nok\r\n0\r\n\r\n")

    def serve():
        while True:
            try:
                s, _ = ls.accept()
            except OSError:
                return
            per_conn.append(0)
            threading.Thread(target=one, args=(s, len(per_conn) - 1), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    px = t.proxy(f"http://127.0.0.1:{ls.getsockname()[1]}")
    c = px.conn()
    c.send(build_request("GET", "/a"))
    r = c.read_head()
    t.eq(r.status, 200, "first status")
    while b"first" not in c.data[r.body_off:]:
        t.check(c.fill() > 0, "connection closed before the first chunk")
    go_on.set()
    r = c.read_body(r)
    t.check(r.complete, "first body incomplete")
    t.eq(r.body, b"firstlast", "first body")
    r2 = c.request(build_request("GET", "/b"))
    t.eq(r2.status, 200, "second status")
    t.eq(r2.body, b"ok", "second body (never the forged bytes)")
    c.close()
    t.eq(per_conn, [1, 1], "requests per upstream connection")
    recs = px.records(2)
    t.eq([x["metadata"]["upstream_reused"] for x in recs], [False, False],
         "upstream_reused of the two records")
