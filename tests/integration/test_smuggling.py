"""Request smuggling defenses (SPEC 9).

Requests: each ambiguous or malformed framing is answered 400, the
connection is closed, and nothing reaches the upstream (the sim's request
counter does not move).  Every request is sent in one write, so the whole
defect is in the proxy's buffer before it decides anything.

Responses: the same defects coming from a (raw, scripted) upstream become a
502 for the client.  A defect inside the body (chunk data without CRLF)
comes after the response head was already forwarded; there the client can
only be cut off: we accept either a 502, or a 200 whose body never completes
and never contains the malformed bytes, and require the record to say
502 "upstream_bad_response" either way.
"""
import harness

H = b"Host: x\r\n"

REQUEST_CASES = {
    "cl_and_te": b"POST /echo HTTP/1.1\r\n" + H +
                 b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te_and_cl": b"POST /echo HTTP/1.1\r\n" + H +
                 b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
    "duplicate_cl_same": b"POST /echo HTTP/1.1\r\n" + H +
                         b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    "duplicate_cl_differ": b"POST /echo HTTP/1.1\r\n" + H +
                           b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "cl_list": b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 5, 5\r\n\r\nhello",
    "invalid_cl_alpha": b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 5x\r\n\r\nhello",
    "invalid_cl_negative": b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: -5\r\n\r\nhello",
    "invalid_cl_plus": b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: +5\r\n\r\nhello",
    "unknown_te_gzip": b"POST /echo HTTP/1.1\r\n" + H +
                       b"Transfer-Encoding: gzip\r\n\r\n0\r\n\r\n",
    "repeated_te_lines": b"POST /echo HTTP/1.1\r\n" + H +
                         b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "repeated_te_list": b"POST /echo HTTP/1.1\r\n" + H +
                        b"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
    "obs_fold": b"GET /health HTTP/1.1\r\n" + H + b"X-Folded: a\r\n b\r\n\r\n",
    "obs_fold_tab": b"GET /health HTTP/1.1\r\n" + H + b"X-Folded: a\r\n\tb\r\n\r\n",
    "bare_cr_in_value": b"GET /health HTTP/1.1\r\n" + H + b"X-Foo: a\rb\r\n\r\n",
    "space_before_colon_host": b"GET /health HTTP/1.1\r\nHost : x\r\n\r\n",
    "space_before_colon_field": b"GET /health HTTP/1.1\r\n" + H + b"X-Foo : bar\r\n\r\n",
    # two requests in one packet, the first with Connection: close; SPEC 9
    # lists "data after Connection: close" among the rejected defects, so we
    # assert the strict outcome: 400, close, neither request upstream
    "data_after_connection_close": b"GET /health HTTP/1.1\r\n" + H + b"Connection: close\r\n\r\n"
                                   b"GET /health HTTP/1.1\r\n" + H + b"\r\n",
    "chunk_data_without_crlf": b"POST /echo HTTP/1.1\r\n" + H +
                               b"Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
    # parser differentials (issue 10 item 11)
    "empty_header_name": b"GET /health HTTP/1.1\r\n" + H + b": ignored\r\n\r\n",
    "empty_header_name_value_empty": b"GET /health HTTP/1.1\r\n" + H + b":\r\nX-A: b\r\n\r\n",
    "cl_leading_zeros": b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 0005\r\n\r\nhello",
    "cl_zero_zero": b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 00\r\n\r\n",
    "http09_request_line": b"GET /health\r\n\r\n",
    "http20_request_line": b"GET /health HTTP/2.0\r\n" + H + b"\r\n",
    "fragment_in_target": b"GET /health#frag HTTP/1.1\r\n" + H + b"\r\n",
    "fragment_after_query": b"GET /health?a=1#x HTTP/1.1\r\n" + H + b"\r\n",
}

# chunk framing against max_body_bytes (issue 10 item 10): the size is
# refused when its line ends, before a byte of its data is forwarded; it
# arrives with the head here, so it is refused before anything goes out,
# with the same 413 as a size read later
TOO_LARGE_CASES = {
    "chunk_size_2_to_64": b"POST /echo HTTP/1.1\r\n" + H +
                          b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc",
    "chunk_size_over_max_body": b"POST /echo HTTP/1.1\r\n" + H +
                                b"Transfer-Encoding: chunked\r\n\r\n2000001\r\nabc",
}


def request_case(raw, status=400):
    def test(t):
        sim = t.sim()
        px = t.proxy(sim.url)
        before = sim.stats()["requests"]
        c = px.conn()
        c.send(raw)
        r = c.read_head()
        t.eq(r.status, status, "status")
        c.read_body(r)
        t.check(r.complete, "400 body incomplete")
        j = r.json()
        t.check("error" in j and "message" in j["error"], f"not an OpenAI error: {j}")
        t.check(c.pos == len(c.data), "bytes after the 400 response")
        t.check(c.closed_by_peer(2 * t.slow), "connection not closed after the 400")
        t.check(len(c.data) == c.pos, "more bytes after the 400 response")
        c.close()
        t.eq(sim.stats()["requests"], before, "requests that reached the upstream")
        rec = px.records(1)[0]
        t.eq((rec.get("error") or {}).get("code"), status, "record error.code")
    return test


def register(cases, make, name, doc):
    """one test per case: make(raw) named name % case, documented doc % case"""
    for case, raw in cases.items():
        fn = make(raw)
        fn.__name__ = name % case
        fn.__doc__ = doc % case
        globals()[fn.__name__] = fn


register(TOO_LARGE_CASES, lambda raw: request_case(raw, 413), "test_request_%s_rejected",
         "request %s: 413 before anything is forwarded, connection closed")
register(REQUEST_CASES, request_case, "test_request_%s_rejected",
         "request defect %s: 400, close, nothing upstream")


BODY = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'


def resp(head_lines, body=BODY):
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + head_lines + b"\r\n" + body


def chunked(body):
    return b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"


RESPONSE_CASES = {
    "cl_and_te": resp(b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(BODY),
                      chunked(BODY)),
    "duplicate_cl": resp(b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(BODY), len(BODY))),
    "invalid_cl": resp(b"Content-Length: %dx\r\n" % len(BODY)),
    "unknown_te_gzip": resp(b"Transfer-Encoding: gzip\r\n"),
    "repeated_te": resp(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                        chunked(BODY)),
    "obs_fold": resp(b"X-Folded: a\r\n b\r\nContent-Length: %d\r\n" % len(BODY)),
    "bare_cr_in_value": resp(b"X-Foo: a\rb\r\nContent-Length: %d\r\n" % len(BODY)),
    "space_before_colon": resp(b"X-Foo : bar\r\nContent-Length: %d\r\n" % len(BODY)),
    "empty_header_name": resp(b": x\r\nContent-Length: %d\r\n" % len(BODY)),
    "cl_leading_zeros": resp(b"Content-Length: 0%d\r\n" % len(BODY)),
    "http20_status_line": b"HTTP/2.0 200 OK\r\nContent-Type: text/event-stream\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY,
    "connection_names_content_length":
        resp(b"Connection: content-length\r\nContent-Length: %d\r\n" % len(BODY)),
    "connection_names_transfer_encoding":
        resp(b"Connection: keep-alive, Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n",
             chunked(BODY)),
}

BAD_CHUNK = resp(b"Transfer-Encoding: chunked\r\n", b"5\r\nhelloXX0\r\n\r\n")


def response_case(raw):
    def test(t):
        fake = t.fake(harness.reply_raw(raw))
        px = t.proxy(fake.url)
        r = px.post("/v1/chat/completions", harness.chat_body({}))
        t.eq(r.status, 502, "status")
        j = r.json()
        t.check("error" in j and "message" in j["error"], f"not an OpenAI error: {j}")
        t.check(b"choices" not in r.body, "upstream body leaked into the 502")
        rec = px.records(1)[0]
        t.eq((rec.get("error") or {}).get("code"), 502, "record error.code")
        t.eq((rec.get("error") or {}).get("type"), "upstream_bad_response", "record error.type")
    return test


register(RESPONSE_CASES, response_case, "test_response_%s_becomes_502",
         "upstream response defect %s: 502")


def test_response_chunk_data_without_crlf_cut(t):
    """upstream chunk data without CRLF: 502, or a body cut before its end
    that never carries the malformed bytes; recorded as a 502"""
    fake = t.fake(harness.reply_raw(BAD_CHUNK))
    px = t.proxy(fake.url)
    c = px.conn()
    c.send(harness.build_request("POST", "/v1/chat/completions", harness.chat_body({})))
    r = c.read_head()
    if r.status == 200:
        try:
            c.read_body(r, "POST")
        except harness.Failure:
            pass   # our parser also refuses the malformed chunk
        t.check(not r.complete, "client received a complete body")
        t.check(b"XX" not in bytes(c.data[r.body_off:]), "malformed chunk bytes reached the client")
        t.check(c.closed_by_peer(2 * t.slow), "connection not closed")
    else:
        t.eq(r.status, 502, "status")
    c.close()
    rec = px.records(1)[0]
    t.eq((rec.get("error") or {}).get("code"), 502, "record error.code")
    t.eq((rec.get("error") or {}).get("type"), "upstream_bad_response", "record error.type")


# --------------------------------------------------------------------------
# Connection naming a framing header (issue 10 item 1).  The proxy drops the
# fields a Connection header names (RFC 9110 7.6.1), so a named
# Content-Length or Transfer-Encoding would leave the forwarded head without
# framing while its body is still forwarded: the upstream would read the
# body as a second request.  Such a message is refused instead.

SMUGGLED = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"


def smuggling_post(connection, chunked_body=False):
    if chunked_body:
        return (b"POST /echo/headers HTTP/1.1\r\nHost: x\r\nConnection: " + connection +
                b"\r\nTransfer-Encoding: chunked\r\n\r\n" +
                b"%x\r\n" % len(SMUGGLED) + SMUGGLED + b"\r\n0\r\n\r\n")
    return (b"POST /echo/headers HTTP/1.1\r\nHost: x\r\nConnection: " + connection +
            b"\r\nContent-Length: %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED)


CONNECTION_FRAMING = {
    "content_length": smuggling_post(b"content-length"),
    "content_length_mixed_case": smuggling_post(b"Content-LENGTH"),
    "content_length_in_list": smuggling_post(b"keep-alive, content-length"),
    "content_length_list_no_space": smuggling_post(b"x-a,Content-Length ,x-b"),
    "transfer_encoding": smuggling_post(b"transfer-encoding", chunked_body=True),
    "transfer_encoding_in_list": smuggling_post(b"close, Transfer-Encoding", chunked_body=True),
}


def connection_framing_case(raw):
    def test(t):
        sim = t.sim()
        px = t.proxy(sim.url)
        before = sim.stats()
        c = px.conn()
        c.send(raw)
        r = c.read_head()
        t.eq(r.status, 400, "status")
        c.read_body(r)
        t.eq(r.json()["error"]["message"], "Connection names a framing header", "reason")
        t.check(c.closed_by_peer(2 * t.slow), "connection not closed after the 400")
        t.eq(bytes(c.data[c.pos:]), b"", "bytes after the 400 (a smuggled response?)")
        c.close()
        # a second client on the same proxy gets its own answer, not the
        # smuggled request's
        h = px.request("GET", "/health")
        t.eq((h.status, h.body), (200, b"ok"), "next client's /health")
        after = sim.stats()
        t.eq(after["requests"] - before["requests"], 1, "requests the sim received (the /health)")
        t.check("/v1/models" not in after.get("paths", {}), f"smuggled GET reached the sim: {after}")
        t.check("/echo/headers" not in after.get("paths", {}), "refused POST reached the sim")
        recs = px.records(2)
        t.eq(len(recs), 2, "records")
        t.eq([(rc.get("error") or {}).get("code") for rc in recs], [400, None], "record error codes")
    return test


register(CONNECTION_FRAMING, connection_framing_case,
         "test_request_connection_names_%s_refused_nothing_smuggled",
         "Connection naming a framing header (%s): 400, nothing upstream")


def test_request_connection_names_framing_nothing_reaches_recording_upstream(t):
    """the issue's reproduction against a recording upstream: in one write
    and split across writes, the upstream receives no byte, the client one
    400 and nothing else, and exactly one request is recorded per attempt"""
    from test_smuggling_corpus import Recorder, exchange, client_statuses
    rec = Recorder(t)
    px = t.proxy(rec.url, extra=["--upstream-pool", "0"])
    raw = CONNECTION_FRAMING["content_length"]
    cut = raw.index(b"\r\n\r\n") + 4
    attempts = [[raw], [raw[:cut], raw[cut:]], [raw[:20], raw[20:cut - 1], raw[cut - 1:]]]
    for parts in attempts:
        got = exchange(px.port, parts)
        t.eq(client_statuses(got), [400], f"client statuses for writes {[len(p) for p in parts]}")
        t.eq(rec.barrier(), [], "bytes the upstream received")
    recs = px.records(len(attempts))
    t.eq(len(recs), len(attempts), "records (one per attempt)")
    t.eq({(rc.get("error") or {}).get("code") for rc in recs}, {400}, "record error codes")


def test_response_connection_names_framing_no_second_response(t):
    """an upstream response naming Content-Length in Connection, with a
    second response in its body: the client gets one 502 and nothing else"""
    second = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nsmuggled!"
    raw = (b"HTTP/1.1 200 OK\r\nConnection: content-length\r\nContent-Length: %d\r\n\r\n"
           % len(second) + second)
    fake = t.fake(harness.reply_raw(raw))
    px = t.proxy(fake.url)
    c = px.conn()
    c.send(harness.build_request("GET", "/v1/models"))
    r = c.read_head()
    t.eq(r.status, 502, "status")
    c.read_body(r)
    t.eq(r.json()["error"]["message"], "Connection names a framing header", "reason")
    c.send(harness.build_request("GET", "/v1/models"))
    got = b""
    try:
        r2 = c.read_head()
        c.read_body(r2)
        got = r2.body
    except harness.Failure:
        pass               # closed: also no second response
    t.check(b"smuggled!" not in bytes(c.data), "the smuggled response reached the client")
    t.check(b"smuggled!" not in got, "the smuggled response reached the client")
    c.close()
    rec = px.records(1)[0]
    t.eq((rec.get("error") or {}).get("type"), "upstream_bad_response", "record error.type")


# --------------------------------------------------------------------------
# chunk extensions count against max_body_bytes (issue 10 item 10)


def test_request_chunk_extension_counts_toward_max_body_bytes(t):
    """a 2 MiB chunk extension under a 64 KiB limit: refused, and at most
    the limit's worth of it reaches the upstream, whether the extension
    comes in one write or in pieces"""
    from test_smuggling_corpus import Recorder, exchange, client_statuses
    rec = Recorder(t)
    px = t.proxy(rec.url, extra=["--upstream-pool", "0", "--max-body-bytes", "64k"])
    head = b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    ext = b"1;name=" + b"v" * (2 << 20)
    body = ext + b"\r\nZ\r\n0\r\n\r\n"
    for parts in ([head + body], [head, body[:100000], body[100000:]]):
        got = exchange(px.port, parts)
        sts = client_statuses(got)
        t.check(sts in ([400], [413]), f"statuses {sts}: {got[:200]!r}")
        fw = rec.barrier()
        sent = sum(len(x) for x in fw)
        t.check(sent <= len(head) + 64 * 1024 + 512,
                f"{sent} bytes reached the upstream with a 64 KiB limit")
        t.check(all(b"\r\nZ\r\n" not in x for x in fw), "the chunk after the extension was forwarded")


def test_request_chunk_size_over_limit_forwards_no_data(t):
    """a chunk size beyond max_body_bytes in a later read: 413 and none of
    the chunk's data reaches the upstream"""
    from test_smuggling_corpus import Recorder, exchange, client_statuses
    rec = Recorder(t)
    px = t.proxy(rec.url, extra=["--upstream-pool", "0", "--max-body-bytes", "1m"])
    head = b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    got = exchange(px.port, [head, b"5\r\nhello\r\n", b"ffffffffffffffff\r\n" + b"D" * 1000])
    t.eq(client_statuses(got), [413], "statuses")
    fw = rec.barrier()
    t.check(all(b"D" not in x for x in fw), f"chunk data forwarded: {fw!r}")
