"""Lingering close (proxy/http/linger.h): a client that is still sending when
tokentap answers early (413 for a body over the limit, 503 over the
connection cap) gets to finish its upload and read the answer, instead of a
reset that fails its write or destroys the answer; and the lingering is
bounded in sockets and in time."""
import os
import socket
import threading
import time

import harness
from harness import build_request

BIG = 16 << 20          # more than loopback's socket buffers take at once
LINGER_MAX = 128        # TT_LINGER_MAX, per worker
LINGER_IDLE_S = 5       # LINGER_IDLE_MS
FD_SLACK = 2


def nfds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def post_head(n):
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % n)


def upload(t, c, what):
    """send a BIG request whole, as an SDK does before it reads"""
    try:
        c.sock.sendall(post_head(BIG) + b"x" * BIG)
    except OSError as e:
        raise harness.Failure(f"{what}: the upload failed ({e!r}): the proxy "
                              "closed without reading it and the kernel reset it")


def check_answer(t, c, status, code):
    r = c.response("POST")
    t.eq(r.status, status, "the answer's status")
    t.eq((r.header("Connection") or "").lower(), "close", "Connection header")
    err = r.json().get("error") or {}
    t.eq(err.get("code"), code, f"the error in the body: {err}")
    t.check(c.closed_by_peer(5 * t.slow), "closed after the answer")
    t.check(not c.reset, "closed with a FIN, not a reset")


def full_proxy(t):
    """a proxy over --max-connections 1 whose one slot a client holds"""
    px = t.proxy(t.sim().url, extra=["--max-connections", "1"])
    held = px.conn()
    t.eq(held.request(build_request("GET", "/v1/models")).status, 200, "the held client")
    return px, held


def free_slot(t, px, held):
    held.close()
    harness.wait_until(lambda: px.request("GET", "/v1/models").status == 200, 5 * t.slow,
                       what="the slot to free up")


@harness.timeout(120)
def test_413_reaches_a_client_still_uploading(t):
    """a 16 MiB body over a 64 KiB limit: the 413 comes at the head, the
    client sends all of its body and then reads the 413 and a FIN"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--max-body-bytes", "64k"])
    for _ in range(3):
        c = px.conn()
        upload(t, c, "a body over max_body_bytes")
        check_answer(t, c, 413, "payload_too_large")
        c.close()
    t.eq(sim.stats()["requests"], 0, "requests at the upstream")
    r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 2}))
    t.eq(r.status, 200, "a normal request afterwards")


@harness.timeout(120)
def test_503_reaches_a_client_sending_at_once(t):
    """over max_connections, a client that sends a large request right after
    connecting (as every client does) uploads it whole and reads the 503"""
    px, held = full_proxy(t)
    for _ in range(3):
        c = px.conn()
        upload(t, c, "a request over the connection cap")
        check_answer(t, c, 503, "over_capacity")
        c.close()
    free_slot(t, px, held)


@harness.timeout(120)
def test_lingering_is_bounded(t):
    """200 refused clients that stay open: 128 linger (the set's size), the
    rest are closed at once; a client's close ends its lingering; a silent
    one is closed after the idle limit; every one got its 503"""
    px, held = full_proxy(t)
    base = nfds(px.pid)
    refused = []
    t0 = time.monotonic()
    for _ in range(200):
        c = px.conn()
        r = c.response()
        t.eq(r.status, 503, "a client over the cap")
        t.check(c.closed_by_peer(2 * t.slow), "a FIN after the 503")
        refused.append(c)
    made = time.monotonic() - t0
    # the counts below need the first lingering socket not yet idle for 5 s
    t.check(made < LINGER_IDLE_S - 1, f"200 loopback connections took {made:.1f} s: "
            "too slow for the idle limit's window")
    # every socket's answer is out; the proxy keeps at most 128 of them
    harness.wait_until(lambda: nfds(px.pid) <= base + LINGER_MAX + FD_SLACK, 5 * t.slow,
                       what=f"at most {LINGER_MAX} lingering sockets (now "
                            f"{nfds(px.pid) - base} over the baseline)")
    held_now = nfds(px.pid) - base
    t.check(held_now >= LINGER_MAX - FD_SLACK,
            f"{held_now} sockets lingering: the set holds {LINGER_MAX}")
    # the clients that close end their lingering at once
    for c in refused[:100]:
        c.close()
    harness.wait_until(lambda: nfds(px.pid) <= base + LINGER_MAX - 90, 5 * t.slow,
                       what=f"closed clients' sockets gone (now {nfds(px.pid) - base} "
                            "over the baseline)")
    # the silent ones go after the idle limit, not before
    t.check(nfds(px.pid) > base + FD_SLACK, "silent clients still lingering")
    harness.wait_until(lambda: nfds(px.pid) <= base + FD_SLACK,
                       (LINGER_IDLE_S + 5) * t.slow,
                       what=f"silent clients' sockets closed after {LINGER_IDLE_S} s")
    for c in refused[100:]:
        c.close()
    free_slot(t, px, held)
    # the 72 beyond the set were closed at once: said when it first
    # happened, and counted at exit
    t.eq(px.stop(), 0, "exit status")
    err = px.stderr().decode("utf-8", "replace")
    t.eq(err.count(f"{LINGER_MAX} sockets lingering"), 1, f"the first overflow's warning: {err[-600:]}")
    t.check(f"{200 - LINGER_MAX} closes did not linger" in err,
            f"the count of closes that did not linger at exit: {err[-600:]}")


@harness.timeout(120)
def test_413_over_tls_reaches_a_client_still_uploading(t):
    """the same over a TLS listener: the socket lingers past the TLS
    session's end, so the upload completes and the 413 is read"""
    from test_tls import Pki, tls_conn
    pki = Pki(t)
    cert, key = pki.leaf("server")
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--max-body-bytes", "64k", "--tls-cert", cert,
                                 "--tls-key", key])
    c = tls_conn(px.port, pki.ca)
    upload(t, c, "a body over max_body_bytes, over TLS")
    r = c.response("POST")
    t.eq(r.status, 413, "the answer's status")
    t.eq((r.json().get("error") or {}).get("code"), "payload_too_large", "the error")
    c.close()
    t.eq(sim.stats()["requests"], 0, "requests at the upstream")


class EarlyAnswerUpstream(harness.Listener):
    """An upstream that answers 413 as soon as it has a request's head, as
    nginx does over client_max_body_size, and then lingers itself (reads and
    drops the body until the proxy stops sending)"""

    answered = 0

    def accepted(self, s):
        threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        s.settimeout(5)
        try:
            if harness.read_head(s) is None:
                return
            body = b'{"error":{"message":"too large","code":"upstream_413"}}'
            s.sendall(b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            self.answered += 1
            s.shutdown(socket.SHUT_WR)
            while s.recv(1 << 16):
                pass
        except OSError:
            pass
        finally:
            s.close()


@harness.timeout(120)
def test_upstream_early_answer_reaches_a_client_still_uploading(t):
    """the upstream answers 413 at the head of a 16 MiB request: tokentap
    passes it on and closes the client lingering, so the client finishes
    its upload and reads the upstream's 413"""
    up = EarlyAnswerUpstream(t)
    px = t.proxy(up.url)
    for _ in range(3):
        c = px.conn()
        upload(t, c, "a body the upstream refused early")
        check_answer(t, c, 413, "upstream_413")
        c.close()
    t.eq(up.answered, 3, "answers the upstream gave")
    rec = px.records(3)
    t.eq([x["metadata"]["status"] for x in rec], [413] * 3, "recorded statuses")
