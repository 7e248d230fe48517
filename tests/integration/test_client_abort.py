"""A client that disconnects mid-stream closes the upstream request (SPEC 4, 6)."""
import time

import harness
from harness import build_request


def start_long_stream(t, px, request_id):
    """open a 20 s stream, read its first 3 token events; the open Conn"""
    c = px.conn()
    c.send(build_request("POST", "/v1/chat/completions",
                         harness.chat_body({"tokens": 1000, "gap_ms": 20, "ttft_ms": 10}),
                         headers=[("X-Request-Id", request_id)]))
    r = c.read_head()
    t.eq(r.status, 200, "status")
    c.read_body(r, "POST", stop=lambda r, body: body.count(b'"content":"tok') >= 3)
    t.check(r.body.count(b'"content":"tok') >= 3, "fewer than 3 token events arrived")
    return c


def test_client_abort_closes_upstream(t):
    """closing the client socket mid-stream ends the upstream request within 1 s"""
    sim = t.sim()
    px = t.proxy(sim.url)
    before = sim.stats()
    c = start_long_stream(t, px, "abort-1")
    t0 = time.monotonic()
    c.close()
    limit = 1.0 * (2 if t.san else 1)
    st = harness.wait_until(lambda: (lambda s: s if s["aborted"] > before["aborted"] else None)(sim.stats()),
                            limit, interval=0.005, what="sim to see the upstream request aborted")
    dt = time.monotonic() - t0
    t.eq(st["aborted"] - before["aborted"], 1, "aborted upstream requests")
    # only the /stats connection of this poll may be open at the sim
    t.eq(st["open"], 1, "connections open at the sim (the /stats poll itself)")
    t.note(f"upstream closed {dt * 1000:.0f} ms after the client")


def test_client_abort_recorded_as_cancelled(t):
    """the aborted request's record: error 499 "cancelled", was_cancelled true"""
    sim = t.sim()
    px = t.proxy(sim.url)
    c = start_long_stream(t, px, "abort-2")
    c.close()
    rec = px.records(1)[0]
    md = rec["metadata"]
    t.eq(md.get("x_request_id"), "abort-2", "x_request_id")
    t.eq(md.get("was_cancelled"), True, "was_cancelled")
    t.check(rec.get("error") is not None, "record has no error")
    t.eq(rec["error"].get("code"), 499, "error.code")
    t.eq(rec["error"].get("type"), "cancelled", "error.type")
    t.check(harness.metric(rec, "time_to_first_token") is not None,
            "TTFT of the tokens that did arrive is missing")


def test_sim_counts_a_half_close_as_an_abort(t):
    """docs/simulator.md: a half-close (shutdown(SHUT_WR)) of the sim's
    peer while a response is in progress counts as "aborted" at once, the
    socket still open: while waiting for the first token and mid-stream.
    (Behind tokentap a client's half-close is not passed on: the client
    still gets its response, test_lifecycle; only its full close aborts.)"""
    import socket
    sim = t.sim()
    for phase, sim_opts in (("waiting for ttft_ms", {"ttft_ms": 60000, "tokens": 5}),
                            ("mid-stream", {"ttft_ms": 10, "tokens": 1000, "gap_ms": 20})):
        before = sim.stats()
        c = harness.Conn(sim.port)
        c.send(build_request("POST", "/v1/chat/completions", harness.chat_body(sim_opts)))
        if phase == "mid-stream":
            r = c.read_head()
            t.eq(r.status, 200, "status")
            c.read_body(r, "POST", stop=lambda r, body: body.count(b'"content":"tok') >= 2)
        else:
            harness.wait_until(lambda: sim.stats()["requests"] > before["requests"], 5 * t.slow,
                               what="the sim to take the request")
        c.sock.shutdown(socket.SHUT_WR)
        st = harness.wait_until(
            lambda: (lambda s: s if s["aborted"] > before["aborted"] else None)(sim.stats()),
            5 * t.slow, interval=0.005, what=f"the half-close {phase} counted as an abort")
        t.eq(st["aborted"] - before["aborted"], 1, f"aborted after a half-close {phase}")
        t.check(c.closed_by_peer(timeout=5 * t.slow), f"the sim closed its side ({phase})")
        c.close()
        t.eq(sim.stats()["aborted"] - before["aborted"], 1, f"the full close adds nothing ({phase})")
