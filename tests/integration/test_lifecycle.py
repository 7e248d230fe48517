"""Connection lifecycle bounds (issue: hardening): clients that stop reading,
stalled request bodies, half-closed clients, idle tunnels, interim (1xx)
heads split across reads, and pooled upstream connections the server had
already closed.  Each test is one behaviour through real sockets.
"""
import socket
import struct
import threading
import time

import harness
from harness import build_request, timeout


def raw_server(t, serve):
    """a listening socket whose connections go to serve(sock, index) on
    threads; returns (port, stop)"""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    state = {"n": 0, "stop": False}

    def loop():
        while not state["stop"]:
            try:
                s, _ = ls.accept()
            except OSError:
                return
            i = state["n"]
            state["n"] += 1

            def run(s=s, i=i):
                try:
                    s.settimeout(10)
                    serve(s, i)
                except OSError:
                    pass
                finally:
                    s.close()
            threading.Thread(target=run, daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()

    def stop():
        state["stop"] = True
        ls.close()
    t.cleanups = getattr(t, "cleanups", [])
    return ls.getsockname()[1], stop


@timeout(40)
def test_client_that_stops_reading_is_cut_and_upstream_closed(t):
    """a client that never reads a fast stream: after send_timeout it is cut
    (record 499 cancelled) and the upstream request is closed, so the model
    server stops generating.  The stream (70 MB) is far larger than every
    socket buffer on the way (about 14 MB on loopback), so the sim is still
    sending when the proxy gives up"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--send-timeout", "1s", "--buffer-bytes", "16k"])
    c = px.conn(rcvbuf=4096)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.send(build_request("POST", "/v1/chat/completions",
                         harness.chat_body({"tokens": 10000000, "gap_ms": 0,
                                            "tokens_per_event": 100, "ttft_ms": 0})))
    rec = px.records(1, timeout=10 * t.slow)[0]
    t.eq(rec["error"]["type"], "cancelled", "record error type")
    t.eq(rec["error"]["code"], 499, "record error code")
    t.check("send_timeout" in rec["error"]["message"], f"reason: {rec['error']['message']}")
    harness.wait_until(lambda: sim.stats()["aborted"] >= 1, 5 * t.slow,
                       what="the sim seeing its request closed")
    c.close()


@timeout(30)
def test_stalled_request_body_gets_408(t):
    """a body that stops arriving: 408 after body_idle_timeout, recorded as
    request_timeout, not blamed on the upstream"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--body-idle-timeout", "500ms"])
    c = px.conn()
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n")
    c.send(head + b'{"model":')
    t0 = time.monotonic()
    r = c.response("POST")
    took = time.monotonic() - t0
    t.eq(r.status, 408, "status")
    t.check(took < 5 * t.slow, f"408 after {took:.2f}s")
    rec = px.records(1)[0]
    t.eq(rec["error"]["type"], "request_timeout", "record error type")
    t.eq(rec["error"]["code"], 408, "record error code")


@timeout(30)
def test_half_closed_client_gets_its_response(t):
    """a client that shuts down its sending side after the request still
    gets the whole response, recorded as a success"""
    sim = t.sim()
    px = t.proxy(sim.url)
    c = px.conn()
    c.send(build_request("POST", "/v1/chat/completions",
                         harness.chat_body({"tokens": 5, "ttft_ms": 100})))
    c.sock.shutdown(socket.SHUT_WR)
    r = c.response("POST")
    t.eq(r.status, 200, "status")
    t.check(r.complete, "complete body")
    t.eq(len([e for e in harness.sse_events(r.body) if b"tok" in e]), 5, "token events")
    rec = px.records(1)[0]
    t.eq(rec["error"], None, "record error")


@timeout(30)
def test_idle_tunnel_is_closed_after_upstream_idle_timeout(t):
    """a 101 tunnel with no bytes either way is closed after
    upstream_idle_timeout and recorded"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--upstream-idle-timeout", "500ms"])
    c = px.conn()
    c.send(b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
    h = c.read_head()
    t.eq(h.status, 101, "status")
    c.send(b"ping")
    harness.wait_until(lambda: b"ping" in c.data or c.fill(0.2) or b"ping" in c.data,
                       5 * t.slow, what="the echo")
    t.check(c.closed_by_peer(timeout=5 * t.slow), "tunnel closed by the proxy")
    rec = px.records(1)[0]
    t.eq(rec["metadata"]["api"], "other", "record api")


def early_hints_split(s, i):
    harness.read_request(s)
    s.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload")
    time.sleep(0.1)
    s.sendall(b"\r\n\r\n")
    time.sleep(0.1)
    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")


@timeout(30)
def test_split_103_early_hints_reach_client_whole(t):
    """a 103 head split over two reads reaches the client whole"""
    port, stop = raw_server(t, early_hints_split)
    px = t.proxy(f"http://127.0.0.1:{port}")
    c = px.conn()
    c.send(build_request("GET", "/x"))
    harness.wait_until(lambda: c.data.endswith(b"ok") or c.fill(0.5) < 0, 5 * t.slow,
                       what="the final response")
    t.check(c.data.startswith(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
                              b"HTTP/1.1 200 OK\r\n"), f"client bytes: {c.data[:120]!r}")
    t.check(c.data.endswith(b"\r\n\r\nok"), f"final body: {c.data[-40:]!r}")
    stop()


def many_continues(s, i):
    harness.read_request(s)
    s.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" * 5 +
              b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")


@timeout(30)
def test_many_interim_heads_in_one_write_arrive_whole(t):
    """five 100 Continue heads and the final response in one write: the
    client gets five whole interim heads, then the response"""
    port, stop = raw_server(t, many_continues)
    px = t.proxy(f"http://127.0.0.1:{port}")
    c = px.conn()
    c.send(build_request("GET", "/x"))
    r = c.response()
    t.eq(r.status, 200, "final status")
    t.check(c.data.startswith(b"HTTP/1.1 100 Continue\r\n\r\n" * 5 + b"HTTP/1.1 200 OK\r\n"),
            f"interim heads: {c.data[:200]!r}")
    stop()


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\nok"


@timeout(30)
def test_stale_pooled_connection_is_retried_once_on_a_new_one(t):
    """the server closes a kept-alive connection just as the next request
    arrives (no response byte): the request is sent again, once, on a new
    connection, and the client gets its answer"""
    seen = []

    def serve(s, i):
        while True:
            req = harness.read_request(s)
            if req is None:
                return
            seen.append((i, req.split(b"\r\n", 1)[0]))
            if i == 0 and len([x for x in seen if x[0] == 0]) == 2:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return          # reset: the request was never taken
            s.sendall(OK)
    port, stop = raw_server(t, serve)
    px = t.proxy(f"http://127.0.0.1:{port}")
    c = px.conn()
    c.send(build_request("GET", "/first"))
    t.eq(c.response().status, 200, "first status")
    c.send(build_request("GET", "/second"))
    r = c.response()
    t.eq(r.status, 200, "second status (retried)")
    t.eq(r.body, b"ok", "second body")
    t.eq([x[1] for x in seen], [b"GET /first HTTP/1.1", b"GET /second HTTP/1.1",
                                b"GET /second HTTP/1.1"], "requests the server saw")
    t.eq([x[0] for x in seen], [0, 0, 1], "connections they came on")
    recs = px.records(2)
    t.eq(recs[1]["error"], None, "second record error")
    t.eq(recs[1]["metadata"]["upstream_reused"], False, "second request on a new connection")
    stop()
