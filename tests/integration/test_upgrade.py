"""Upgrade requests are tunnelled untouched (SPEC 4)."""
import socket
import time

import harness


def echo_after_101(sock, req, fake):
    """answer 101, then echo every byte until the peer closes"""
    fake.upgrade_request = req
    sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
    sock.settimeout(10)
    while True:
        try:
            b = sock.recv(65536)
        except socket.timeout:
            return
        if not b:
            return
        sock.sendall(b)


def test_upgrade_tunnel_both_ways(t):
    """101 passes through, then bytes flow both ways unchanged; the request
    is recorded as api "other" without a timeline of tokens"""
    fake = t.fake(echo_after_101)
    px = t.proxy(fake.url)
    c = px.conn()
    c.send(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    r = c.read_head()
    t.eq(r.status, 101, "status")
    t.eq((r.header("Upgrade") or "").lower(), "websocket", "Upgrade header")
    req = getattr(fake, "upgrade_request", b"")
    t.check(b"\r\nupgrade: websocket\r\n" in req.lower(), "Upgrade header not forwarded upstream")
    t.check(b"sec-websocket-key: dghlihnhbxbszsbub25jzq==" in req.lower(),
            "Sec-WebSocket-Key not forwarded upstream")
    # bytes both ways, including what an HTTP parser would choke on
    for payload in (b"\x81\x05hello", bytes(range(256)), b"GET / HTTP/1.1\r\n\r\n" * 3,
                    b"x" * 200000):
        start = len(c.data)
        c.sock.sendall(payload)
        while len(c.data) - start < len(payload):
            if c.fill() == 0:
                break
        t.eq(bytes(c.data[start:start + len(payload)]) == payload, True,
             f"echoed {len(payload)}-byte payload identical")
    c.close()
    rec = px.records(1)[0]
    t.eq(rec["metadata"]["api"], "other", "api")
    t.eq(rec["metadata"]["status"], 101, "status")
    t.check("time_to_first_token" not in rec["metrics"], "TTFT recorded for a tunnel")
    # SPEC 4: tunnels are "recorded as api:"other" with latency only"
    t.check(harness.metric(rec, "request_latency") is not None,
            f"tunnel record has no request_latency (metrics {rec['metrics']})")
    t.check(rec["error"] is None, f"tunnel recorded as error: {rec['error']}")
