"""SIGTERM: stop accepting, drain in-flight streams, flush records, exit 0 (SPEC 9)."""
import signal
import socket
import time

import harness
from harness import build_request, timeout


def start_stream(t, px, rid, tokens=60, gap=25):
    c = px.conn()
    c.send(build_request("POST", "/v1/chat/completions",
                         harness.chat_body({"tokens": tokens, "gap_ms": gap, "ttft_ms": 10}),
                         headers=[("X-Request-Id", rid)]))
    r = c.read_head()
    t.eq(r.status, 200, "status")
    c.read_body(r, "POST", stop=lambda r, body: body.count(b'"content":"tok') >= 3)
    return c, r


@timeout(40)
def test_sigterm_drains_inflight_stream(t):
    """a stream in flight when SIGTERM arrives finishes intact, tokentap
    then exits 0 and the stream's record is in the file"""
    sim = t.sim()
    px = t.proxy(sim.url)
    c, r = start_stream(t, px, "drain-1")
    px.signal(signal.SIGTERM)
    t_term = time.monotonic()
    time.sleep(0.2)
    t.check(px.alive(), "tokentap exited before the in-flight stream finished")
    c.read_body(r, "POST")
    c.close()
    t.check(r.complete, "in-flight stream incomplete after SIGTERM")
    t.eq(r.body.count(b'"content":"tok'), 60, "token events received")
    t.check(r.body.rstrip().endswith(b"data: [DONE]"), "stream did not end with [DONE]")
    t.check(time.monotonic() - t_term > 1.0, "stream finished implausibly fast")
    rc = px.wait(10 * t.slow)
    t.check(rc is not None, "tokentap still running 10 s after the drained stream ended")
    t.eq(rc, 0, "exit status")
    mine = [x for x in px.records() if x["metadata"].get("x_request_id") == "drain-1"]
    t.eq(len(mine), 1, "records of the drained stream")
    t.eq(mine[0]["error"], None, "record error")
    t.eq(harness.metric(mine[0], "output_sequence_length"), 60, "output_sequence_length")


@timeout(40)
def test_sigterm_refuses_new_connections(t):
    """while a stream drains after SIGTERM, new TCP connections are refused
    (not accepted by the kernel into a backlog nobody serves)"""
    sim = t.sim()
    px = t.proxy(sim.url)
    c, r = start_stream(t, px, "drain-2", tokens=80)
    px.signal(signal.SIGTERM)
    time.sleep(0.2)
    t.check(px.alive(), "tokentap exited before the in-flight stream finished")
    outcome = None
    try:
        s = socket.create_connection(("127.0.0.1", px.port), timeout=1)
    except ConnectionRefusedError:
        outcome = "refused"
    else:
        # connected: see what a client gets from it
        s.settimeout(1.0)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            b = s.recv(1000)
            outcome = f"accepted; request answered {b[:40]!r}" if b else "accepted, then closed"
        except socket.timeout:
            outcome = "accepted by the kernel, request unanswered for 1 s"
        except ConnectionResetError:
            outcome = "accepted, then reset"
        s.close()
    c.read_body(r, "POST")
    c.close()
    t.check(r.complete, "in-flight stream incomplete after SIGTERM")
    rc = px.wait(10 * t.slow)
    t.eq(outcome, "refused", "a new connection during the drain")
    t.eq(rc, 0, "exit status after the drain")


@timeout(60)
def test_drain_grace_over_closes_held_stream(t):
    """a stream whose upstream goes silent (60 s between tokens) when
    SIGTERM arrives: at the end of drain_timeout (1 s here) tokentap closes
    it, records it as cut by the shutdown and exits 0; it neither waits for
    the upstream nor past the grace"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--drain-timeout", "1s"])
    c = px.conn(timeout=30)
    c.send(build_request("POST", "/v1/chat/completions",
                         harness.chat_body({"tokens": 3, "gap_ms": 60000, "ttft_ms": 1}),
                         headers=[("X-Request-Id", "held-1")]))
    r = c.read_head()
    t.eq(r.status, 200, "status")
    c.read_body(r, "POST", stop=lambda r, body: b'"content":"tok' in body)
    px.signal(signal.SIGTERM)
    t_term = time.monotonic()
    rc = px.wait(10 * t.slow)
    dt = time.monotonic() - t_term
    t.check(rc is not None, "tokentap still running 10 s after SIGTERM with a 1 s grace")
    t.eq(rc, 0, "exit status")
    t.check(dt >= 0.9, f"exited {dt:.2f}s after SIGTERM, before the 1 s grace was over")
    c.read_body(r, "POST")
    t.check(not r.complete, "the held stream looks complete to the client")
    log = px.stderr().decode("utf-8", "replace")
    t.check("drain grace period over, closing 1 connections and 0 shadow requests" in log,
            f"log: {log[-400:]!r}")
    mine = [x for x in px.records() if x["metadata"].get("x_request_id") == "held-1"]
    t.eq(len(mine), 1, "records of the held stream")
    t.check(mine[0]["error"] is not None and "shutting down" in str(mine[0]["error"]),
            f"record error: {mine[0]['error']!r}")
    t.eq(harness.metric(mine[0], "output_sequence_length"), 1, "output_sequence_length")
