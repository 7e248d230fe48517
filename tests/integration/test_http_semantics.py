"""HTTP/1.1 semantics at the proxy: Host rewriting, hop-by-hop headers,
pipelining, Expect: 100-continue, HTTP/1.0 clients, HEAD (SPEC 4)."""
import re
import time

import harness
from harness import build_request


def test_host_rewritten_hop_by_hop_dropped(t):
    """the upstream sees Host = its own authority, no Connection/TE/Keep-Alive
    headers and no header named by Connection; end-to-end headers pass"""
    sim = t.sim()
    px = t.proxy(sim.url)
    raw = (b"POST /echo/headers HTTP/1.1\r\nHost: client.example\r\n"
           b"Connection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n"
           b"X-Hop: secret-hop\r\nX-End: kept\r\nContent-Length: 2\r\n\r\nhi")
    c = px.conn()
    r = c.request(raw)
    c.close()
    t.eq(r.status, 200, "status")
    j = r.json()
    names = [h[0].lower() for h in j["headers"]]
    hosts = [h[1] for h in j["headers"] if h[0].lower() == "host"]
    t.eq(hosts, [f"127.0.0.1:{sim.port}"], "Host at the upstream")
    for hop in ("keep-alive", "te", "x-hop"):
        t.check(hop not in names, f"hop-by-hop header {hop} forwarded: {j['headers']}")
    t.check("x-end" in names, "end-to-end header X-End not forwarded")
    t.eq(j["body_bytes"], 2, "body bytes")


def test_pipelined_requests_answered_in_order(t):
    """two keep-alive requests in one packet are both answered, in order"""
    sim = t.sim()
    px = t.proxy(sim.url)
    before = sim.stats()["requests"]
    c = px.conn()
    c.send(build_request("POST", "/echo", b"first") + build_request("POST", "/echo", b"second"))
    r1 = c.response("POST")
    r2 = c.response("POST")
    c.close()
    t.eq((r1.status, r1.body), (200, b"first"), "first response")
    t.eq((r2.status, r2.body), (200, b"second"), "second response")
    t.eq(sim.stats()["requests"] - before, 2, "requests at the upstream")


def test_expect_100_continue(t):
    """a client that waits for 100 Continue gets it (from the upstream,
    forwarded), then sends its body and gets the final response"""
    sim = t.sim()
    px = t.proxy(sim.url)
    c = px.conn()
    c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
           b"Content-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\n")
    end = time.monotonic() + 3 * t.slow
    while b"\r\n\r\n" not in bytes(c.data) and time.monotonic() < end:
        try:
            if c.fill(timeout=max(0.01, end - time.monotonic())) == 0:
                break
        except OSError:
            break
    head = bytes(c.data).split(b"\r\n", 1)[0]
    t.eq(head, b"HTTP/1.1 100 Continue", "interim response before the body")
    c.send(b"hello")
    r = c.response("POST")
    c.close()
    t.eq(r.status, 200, "final status")
    t.eq(r.body, b"hello", "echoed body")


def test_http10_client_gets_dechunked_stream(t):
    """an HTTP/1.0 client cannot read chunked framing: it gets the same
    stream bytes close-delimited, then the connection closes"""
    sim = t.sim()
    px = t.proxy(sim.url)
    body = harness.chat_body({"tokens": 5, "ttft_ms": 5, "gap_ms": 2})
    direct = harness.http(sim.port, "POST", "/v1/chat/completions", body)
    t.eq(direct.framing, "chunked", "sim framing for HTTP/1.1")
    raw = build_request("POST", "/v1/chat/completions", body).replace(b"HTTP/1.1", b"HTTP/1.0", 1)
    c = px.conn()
    r = c.request(raw)
    c.close()
    t.eq(r.status, 200, "status")
    t.check(r.framing in ("close", "length"), f"framing {r.framing} for an HTTP/1.0 client")
    t.check(r.complete, "body incomplete")
    # ids and creation times differ between the two runs; the rest is equal
    norm = lambda b: re.sub(rb'"(id|created)":("[^"]*"|\d+)', b'"\\1":0', b)
    t.eq(norm(r.body), norm(direct.body), "de-chunked stream bytes (ids normalised)")
    t.check(b"\r\n0\r\n" not in r.body, "chunk framing leaked into the HTTP/1.0 body")


def test_head_request_has_no_body(t):
    """HEAD: the headers come back, no body bytes, connection reusable"""
    sim = t.sim()
    px = t.proxy(sim.url)
    c = px.conn()
    r = c.request(build_request("HEAD", "/health"), "HEAD")
    t.eq(r.status, 200, "status")
    r2 = c.request(build_request("GET", "/health"))
    c.close()
    t.eq((r2.status, r2.body), (200, b"ok"), "next request on the connection")


def test_long_header_fields_forwarded_whole_in_order(t):
    """header fields longer than the proxy's 1 KiB gathering buffer, and
    fields that end across its edge, reach the upstream and the client
    byte for byte and in order, in both directions"""
    fields = [(b"X-A", b"a" * 1000), (b"X-B", b"b" * 14), (b"X-C", b"c" * 3000),
              (b"X-D", b"d" * 1017), (b"X-E", b"e"), (b"X-F", b"f" * 1019)]
    lines = b"".join(n + b": " + v + b"\r\n" for n, v in fields)

    def handler(sock, req, fake):
        sock.sendall(b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 2\r\n\r\nok")

    fake = t.fake(handler)
    px = t.proxy(fake.url)
    c = px.conn()
    r = c.request(b"POST /v1/x HTTP/1.1\r\nHost: client\r\n" + lines +
                  b"Content-Length: 2\r\n\r\nhi")
    c.close()
    t.eq((r.status, r.body), (200, b"ok"), "response")
    t.eq(fake.errors, [], "upstream errors")
    t.eq(len(fake.requests), 1, "requests at the upstream")
    up = fake.requests[0]
    t.check(lines in up, f"the request's fields, whole and in order, at the upstream: {up[:200]!r}")
    got = [(n.encode(), v.encode()) for n, v in r.headers if n.lower().startswith("x-")]
    t.eq(got, fields, "the response's fields at the client, in order")


def test_field_named_by_any_of_many_connection_fields_dropped(t):
    """a header named by the last of 17 Connection fields is hop-by-hop too
    (more Connection fields than the proxy notes up front)"""
    sim = t.sim()
    px = t.proxy(sim.url)
    conns = b"".join(b"Connection: X-Hop%d\r\n" % i for i in range(16)) + b"Connection: X-Last\r\n"
    raw = (b"POST /echo/headers HTTP/1.1\r\nHost: client.example\r\n" + conns +
           b"X-Hop3: a\r\nX-Last: b\r\nX-End: kept\r\nContent-Length: 2\r\n\r\nhi")
    c = px.conn()
    r = c.request(raw)
    c.close()
    t.eq(r.status, 200, "status")
    names = [h[0].lower() for h in r.json()["headers"]]
    for hop in ("connection", "x-hop3", "x-last"):
        t.check(hop not in names, f"hop-by-hop header {hop} forwarded: {names}")
    t.check("x-end" in names, f"end-to-end header X-End not forwarded: {names}")
