"""tokentap-sim over WebSocket: the Responses API's WebSocket mode
(GET /v1/responses) and the Realtime API (GET /v1/realtime), compressed
(permessage-deflate) and not.

The client here is the standard library only: a socket (harness.Conn, which
times every recv()), the handshake by hand (hashlib, base64), RFC 6455
frames by hand, and zlib with wbits=-15 (or the negotiated bits) as a real
permessage-deflate decoder and encoder (RFC 7692).  Timing checks are lower
bounds only: an event never arrives before its schedule.
"""
import base64
import hashlib
import json
import os
import socket
import struct
import zlib

import harness
from harness import Failure, build_request, timeout

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


def parse_extensions(v):
    """the server's Sec-WebSocket-Extensions answer: {} or the
    permessage-deflate parameters {name: value or True}"""
    if not v:
        return {}
    parts = [p.strip() for p in v.split(",")[0].split(";")]
    if parts[0].lower() != "permessage-deflate":
        return {}
    out = {"on": True}
    for p in parts[1:]:
        k, _, val = p.partition("=")
        out[k.strip().lower()] = val.strip().strip('"') if val else True
    return out


class Msg:
    def __init__(self, op, data, arrival_ns, compressed, wire_len):
        self.op = op
        self.data = data
        self.arrival_ns = arrival_ns
        self.compressed = compressed
        self.wire_len = wire_len      # payload bytes as framed (compressed)
        self.raw = b""                # the compressed payload, when compressed

    def json(self):
        return json.loads(self.data.decode("utf-8"))


class WS:
    """One WebSocket client session against the sim.

    <offer>: the Sec-WebSocket-Extensions offer, or None.  After the 101,
    self.pmd holds the answer's parameters ({} when not negotiated)."""

    def __init__(self, t, port, path="/v1/responses", offer=None, headers=()):
        self.t = t
        self.c = harness.Conn(port, timeout=10 * t.slow)
        self.key = base64.b64encode(os.urandom(16)).decode()
        hdrs = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                ("Sec-WebSocket-Key", self.key), ("Sec-WebSocket-Version", "13")]
        if offer:
            hdrs.append(("Sec-WebSocket-Extensions", offer))
        hdrs += list(headers)
        self.c.send(build_request("GET", path, headers=hdrs))
        self.head = self.c.read_head()
        if self.head.status != 101:
            raise Failure(f"handshake answered {self.head.status}: "
                          f"{bytes(self.c.data[self.head.head_off:])[:300]!r}")
        want = base64.b64encode(hashlib.sha1(self.key.encode() + GUID).digest()).decode()
        t.eq(self.head.header("Sec-WebSocket-Accept"), want, "Sec-WebSocket-Accept")
        t.eq((self.head.header("Upgrade") or "").lower(), "websocket", "Upgrade")
        self.pmd = parse_extensions(self.head.header("Sec-WebSocket-Extensions"))
        sbits = int(self.pmd.get("server_max_window_bits", 15))
        self.server_bits = sbits
        self.server_reset = "server_no_context_takeover" in self.pmd
        self.client_reset = "client_no_context_takeover" in self.pmd
        cb = self.pmd.get("client_max_window_bits", 15)
        self.client_bits = 15 if cb is True else max(9, int(cb))
        self.inflater = zlib.decompressobj(-sbits)
        self.deflater = zlib.compressobj(6, zlib.DEFLATED, -self.client_bits)
        self.msgs = []

    # ---- writing: client frames are masked
    def frame(self, op, payload, rsv1=False, fin=True):
        b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | op
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", b0, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", b0, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", b0, 0x80 | 127, n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        return head + mask + masked

    def send(self, obj, compress=True):
        """one text message (a dict as JSON); the monotonic ns before it left"""
        data = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
        rsv1 = False
        if self.pmd and compress:
            if self.client_reset:
                self.deflater = zlib.compressobj(6, zlib.DEFLATED, -self.client_bits)
            z = self.deflater.compress(data) + self.deflater.flush(zlib.Z_SYNC_FLUSH)
            assert z.endswith(b"\x00\x00\xff\xff")
            data, rsv1 = z[:-4], True
        return self.c.send(self.frame(TEXT, data, rsv1=rsv1))

    def send_raw(self, op, payload):
        return self.c.send(self.frame(op, payload))

    # ---- reading: server frames are not masked
    def _frame(self):
        c = self.c
        if not c._need(2):
            return None
        b0, b1 = c.data[c.pos], c.data[c.pos + 1]
        self.t.check(not b1 & 0x80, "a server frame is masked")
        n, hl = b1 & 0x7F, 2
        if n == 126:
            if not c._need(4):
                return None
            n, hl = struct.unpack("!H", bytes(c.data[c.pos + 2:c.pos + 4]))[0], 4
        elif n == 127:
            if not c._need(10):
                return None
            n, hl = struct.unpack("!Q", bytes(c.data[c.pos + 2:c.pos + 10]))[0], 10
        if not c._need(hl + n):
            return None
        payload = bytes(c.data[c.pos + hl:c.pos + hl + n])
        end = c.pos + hl + n
        c.pos = end
        return b0, payload, c.arrival_ns(end - 1)

    def recv(self):
        """the next message or control frame (a Msg), None at EOF"""
        parts, first, comp = [], None, False
        while True:
            f = self._frame()
            if f is None:
                return None
            b0, payload, at = f
            op = b0 & 0x0F
            self.t.check(not b0 & 0x30, f"RSV2/RSV3 set: {b0:#x}")
            if op >= 0x8:
                return Msg(op, payload, at, False, len(payload))
            if first is None:
                first, comp = op, bool(b0 & 0x40)
                self.t.check(not comp or self.pmd, "RSV1 without permessage-deflate")
            parts.append(payload)
            if b0 & 0x80:
                break
        raw = b"".join(parts)
        data = raw
        if comp:
            if self.server_reset:
                self.inflater = zlib.decompressobj(-self.server_bits)
            data = self.inflater.decompress(raw + b"\x00\x00\xff\xff")
        m = Msg(first, data, at, comp, len(raw))
        m.raw = raw if comp else b""
        return m

    def event(self):
        """the next text message as a dict (control frames are failures)"""
        m = self.recv()
        if m is None:
            raise Failure("connection closed while waiting for an event "
                          f"(after {[x.json().get('type') for x in self.msgs][-5:]})")
        self.t.eq(m.op, TEXT, "message opcode")
        self.t.check(m.data[:1] == b"{", f"not bare JSON (SSE framing?): {m.data[:60]!r}")
        self.msgs.append(m)
        ev = m.json()
        ev["_at"] = m.arrival_ns
        return ev

    def until(self, *types):
        """events up to and including the first of <types>"""
        out = []
        while True:
            ev = self.event()
            out.append(ev)
            if ev["type"] in types:
                return out

    def close(self):
        self.c.close()


def deltas(evs, typ):
    return [e for e in evs if e["type"] == typ]


def joined(evs, typ, field="delta"):
    return "".join(e[field] for e in deltas(evs, typ))


def words(prefix, n, start=0):
    return "".join(f"{prefix}{i} " for i in range(start, start + n))


def check_responses_turn(t, evs, sent_ns, o, what):
    """one Responses turn: the HTTP dialect's events, in order, each with
    sequence_number 0.., the text, usage as asked, and no event early"""
    types = [e["type"] for e in evs]
    t.eq(types[:2], ["response.created", "response.in_progress"], f"{what}: first events")
    t.eq(types[-1], "response.completed", f"{what}: last event")
    t.eq([e["sequence_number"] for e in evs], list(range(len(evs))), f"{what}: sequence_number")
    n, r = o.get("tokens", 16), o.get("reasoning_tokens", 0)
    t.eq(joined(evs, "response.output_text.delta"), words("tok", n), f"{what}: answer text")
    if r:
        t.eq(joined(evs, "response.reasoning_text.delta"), words("think", r),
             f"{what}: reasoning text")
    for need in ("response.output_item.added", "response.content_part.added",
                 "response.output_text.done", "response.content_part.done",
                 "response.output_item.done"):
        t.check(need in types, f"{what}: no {need} in {types}")
    u = evs[-1]["response"]["usage"]
    t.eq(u["input_tokens"], o.get("prompt_tokens", 10), f"{what}: usage.input_tokens")
    t.eq(u["output_tokens"], n + r, f"{what}: usage.output_tokens")
    t.eq(u["output_tokens_details"]["reasoning_tokens"], r, f"{what}: reasoning_tokens")
    t.eq(u["input_tokens_details"]["cached_tokens"], o.get("cached_tokens", 0),
         f"{what}: cached_tokens")
    # timing: delta k (of all token events, reasoning first) no earlier than
    # ttft + k*gap after the message left
    tok = [e for e in evs if e["type"].endswith(".delta")]
    ttft, gap = o.get("ttft_ms", 50), o.get("gap_ms", 10)
    for k, e in enumerate(tok):
        lag = (e["_at"] - sent_ns) / 1e6
        t.check(lag >= ttft + k * gap,
                f"{what}: delta {k} after {lag:.1f} ms, before its {ttft + k * gap} ms")


TURNS = [
    # top-level "sim"
    {"ttft_ms": 120, "tokens": 5, "gap_ms": 15},
    # reasoning, packing, cached prompt tokens
    {"ttft_ms": 60, "reasoning_tokens": 3, "tokens": 7, "tokens_per_event": 2,
     "prompt_tokens": 40, "cached_tokens": 12, "gap_ms": 5},
    # the same options through metadata.sim (what the official SDK passes)
    {"ttft_ms": 80, "tokens": 9, "gap_ms": 8, "prompt_tokens": 3},
]


def run_three_turns(t, ws, what):
    for i, o in enumerate(TURNS):
        msg = {"type": "response.create", "model": f"m-{i}", "input": "hi"}
        if i == 2:
            msg["metadata"] = {"sim": json.dumps(o), "other": "kept"}
        else:
            msg["sim"] = o
        sent = ws.send(msg)
        evs = ws.until("response.completed", "response.failed", "error")
        check_responses_turn(t, evs, sent, o, f"{what} turn {i + 1}")
        t.eq(evs[0]["response"]["model"], f"m-{i}", f"{what} turn {i + 1}: model")


@timeout(30)
def test_responses_ws_three_turns_uncompressed(t):
    """three response.create turns on one connection, no extension offered:
    each event one uncompressed text message, the HTTP dialect's sequence,
    text, usage and timing; /stats counts the session and its turns"""
    sim = t.sim()
    ws = WS(t, sim.port)
    t.eq(ws.head.header("Sec-WebSocket-Extensions"), None, "extension answered unasked")
    run_three_turns(t, ws, "plain")
    t.check(all(not m.compressed for m in ws.msgs), "a compressed message")
    st = sim.stats()
    t.eq(st["ws_sessions"], 1, "ws_sessions")
    t.eq(st["ws_turns"], 3, "ws_turns")
    t.eq(st["completed"], 3, "completed")
    t.eq(st["aborted"], 0, "aborted")
    ws.close()


@timeout(30)
def test_responses_ws_three_turns_compressed_context_takeover(t):
    """the npm ws package's default offer, permessage-deflate;
    client_max_window_bits: accepted with context takeover both ways; every
    event arrives compressed, our compressed client messages are read, and
    the server's messages refer back into earlier ones (a fresh inflater
    cannot read them all alone)"""
    sim = t.sim()
    ws = WS(t, sim.port, offer="permessage-deflate; client_max_window_bits")
    t.eq(ws.head.header("Sec-WebSocket-Extensions"), "permessage-deflate", "answer")
    run_three_turns(t, ws, "deflate")
    t.check(all(m.compressed for m in ws.msgs), "an uncompressed event")
    alone = 0
    for m in ws.msgs:
        try:
            d = zlib.decompressobj(-15).decompress(m.raw + b"\x00\x00\xff\xff")
            alone += d == m.data
        except zlib.error:
            pass
    t.check(alone < len(ws.msgs), "every message decodes alone: no context takeover")
    ws.close()


@timeout(30)
def test_responses_ws_no_context_takeover_and_window_bits(t):
    """every permessage-deflate parameter offered is honoured and answered:
    each server message decodes alone with a 2^10 window; the client's
    messages (window 2^12, reset per message) are read"""
    sim = t.sim()
    ws = WS(t, sim.port, offer="permessage-deflate; server_no_context_takeover; "
            "client_no_context_takeover; server_max_window_bits=10; "
            "client_max_window_bits=12")
    t.eq(ws.pmd, {"on": True, "server_no_context_takeover": True,
                  "client_no_context_takeover": True, "server_max_window_bits": "10",
                  "client_max_window_bits": "12"}, "answered parameters")
    run_three_turns(t, ws, "no-takeover")
    for m in ws.msgs:
        t.check(m.compressed, "an uncompressed event")
        t.eq(zlib.decompressobj(-10).decompress(m.raw + b"\x00\x00\xff\xff"), m.data,
             "a message decoded alone with a 2^10 window")
    ws.close()


@timeout(30)
def test_ws_offer_choice_and_deflate_off(t):
    """a bad offer is skipped for the next good one; --ws-deflate off
    answers without the extension and nothing is compressed"""
    sim = t.sim()
    ws = WS(t, sim.port, offer="permessage-deflate; bogus_param, "
            "permessage-deflate; server_max_window_bits=9")
    t.eq(ws.head.header("Sec-WebSocket-Extensions"),
         "permessage-deflate; server_max_window_bits=9", "second offer taken")
    sent = ws.send({"type": "response.create", "sim": {"tokens": 3, "ttft_ms": 10}})
    check_responses_turn(t, ws.until("response.completed"), sent,
                         {"tokens": 3, "ttft_ms": 10}, "window 9")
    ws.close()

    off = t.sim(extra=["--ws-deflate", "off"])
    ws = WS(t, off.port, offer="permessage-deflate; client_max_window_bits")
    t.eq(ws.head.header("Sec-WebSocket-Extensions"), None, "extension with --ws-deflate off")
    sent = ws.send({"type": "response.create", "sim": {"tokens": 4, "ttft_ms": 10}})
    check_responses_turn(t, ws.until("response.completed"), sent,
                         {"tokens": 4, "ttft_ms": 10}, "deflate off")
    t.check(all(not m.compressed for m in ws.msgs), "a compressed message")
    ws.close()


def handshake(port, path, headers, method="GET"):
    c = harness.Conn(port)
    c.send(build_request(method, path, headers=headers))
    r = c.read_head()
    c.read_body(r)
    return c, r


@timeout(30)
def test_ws_bad_handshakes_and_the_echo_tunnel(t):
    """a WebSocket API path with a bad handshake gets 400 with the reason
    (and Sec-WebSocket-Version: 13) and a close; an Upgrade elsewhere is
    still the echo tunnel"""
    sim = t.sim()
    good = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13")]
    cases = [
        ("no key", [h for h in good if h[0] != "Sec-WebSocket-Key"], "Sec-WebSocket-Key"),
        ("short key", [h if h[0] != "Sec-WebSocket-Key" else (h[0], "c2hvcnQ=")
                       for h in good], "Sec-WebSocket-Key"),
        ("version 8", [h if h[0] != "Sec-WebSocket-Version" else (h[0], "8")
                       for h in good], "Sec-WebSocket-Version"),
        ("no Connection: Upgrade", [h if h[0] != "Connection" else (h[0], "keep-alive")
                                    for h in good], "Connection"),
    ]
    for what, hdrs, word in cases:
        for path in ("/v1/responses", "/v1/realtime?model=x"):
            c, r = handshake(sim.port, path, hdrs)
            t.eq(r.status, 400, f"{what} on {path}")
            msg = r.json()["error"]["message"]
            t.check(word in msg, f"{what}: reason {msg!r} does not name {word}")
            t.eq(r.header("Sec-WebSocket-Version"), "13", f"{what}: Sec-WebSocket-Version")
            t.check(c.closed_by_peer(5 * t.slow), f"{what}: connection left open")
            c.close()
    c = harness.Conn(sim.port)
    c.send(build_request("POST", "/v1/responses", body=b"{}", headers=good))
    r = c.read_head()
    t.eq(r.status, 400, "POST with Upgrade")
    c.close()
    # the echo tunnel (test_lifecycle, test_shadow) on any other path
    c = harness.Conn(sim.port)
    c.send(b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
    r = c.read_head()
    t.eq(r.status, 101, "echo tunnel status")
    c.send(b"ping")
    harness.wait_until(lambda: c.fill(0.5) >= 0 and b"ping" in c.data[r.body_off:],
                       5 * t.slow, what="the echo")
    c.close()


@timeout(30)
def test_responses_ws_errors_keep_the_session(t):
    """a bad sim option (top level or metadata.sim), a status and an
    unknown event type answer an error event; error_after ends the turn with
    response.failed; the session serves the next turn each time"""
    sim = t.sim()
    ws = WS(t, sim.port, offer="permessage-deflate")
    ws.send({"type": "response.create", "sim": {"tokens": -1}})
    e = ws.event()
    t.eq((e["type"], e["status"], e["error"]["type"]), ("error", 400, "invalid_request_error"),
         "bad option")
    t.check("sim.tokens" in e["error"]["message"], f"message {e['error']['message']!r}")
    t.check("sequence_number" not in e, "sequence_number on a connection error")
    ws.send({"type": "response.create", "metadata": {"sim": "{not json"}})
    e = ws.event()
    t.eq((e["type"], e["status"]), ("error", 400), "bad metadata.sim")
    ws.send({"type": "response.cancel"})
    e = ws.event()
    t.eq((e["type"], e["error"]["param"]), ("error", "type"), "unknown event type")
    ws.send({"type": "response.create", "sim": {"status": 429, "tokens": 2}})
    e = ws.event()
    t.eq((e["type"], e["status"], e["error"]["type"]), ("error", 429, "rate_limit_error"),
         "sim.status")
    sent = ws.send({"type": "response.create", "sim": {"error_after": 2, "tokens": 6,
                                                       "ttft_ms": 10}})
    evs = ws.until("response.completed", "response.failed")
    t.eq(evs[-1]["type"], "response.failed", "error_after")
    t.eq(evs[-1]["response"]["status"], "failed", "failed status")
    t.eq(joined(evs, "response.output_text.delta"), words("tok", 2), "text before the error")
    sent = ws.send({"type": "response.create", "sim": {"tokens": 3, "ttft_ms": 10}})
    check_responses_turn(t, ws.until("response.completed"), sent,
                         {"tokens": 3, "ttft_ms": 10}, "after the errors")
    st = sim.stats()
    t.eq(st["ws_turns"], 3, "ws_turns (status, error_after, good)")
    ws.close()


@timeout(30)
def test_responses_ws_second_create_waits_for_the_first(t):
    """OpenAI's WebSocket mode runs one response at a time per connection:
    a response.create sent during a turn starts when that turn completes,
    and its first delta is no earlier than its own ttft after that"""
    sim = t.sim()
    ws = WS(t, sim.port)
    a = {"tokens": 6, "ttft_ms": 60, "gap_ms": 10}
    b = {"tokens": 4, "ttft_ms": 70, "gap_ms": 5}
    sent = ws.send({"type": "response.create", "model": "first", "sim": a})
    ws.send({"type": "response.create", "model": "second", "sim": b})
    first = ws.until("response.completed")
    check_responses_turn(t, first, sent, a, "first")
    second = ws.until("response.completed")
    t.eq(second[0]["response"]["model"], "second", "second turn's model")
    check_responses_turn(t, second, first[-1]["_at"] - 5_000_000, b, "second")
    t.check(second[0]["response"]["id"] != first[0]["response"]["id"], "same response id")
    ws.close()


def rt_turn(ws, msg):
    """send a Realtime response.create; its events up to response.done"""
    sent = ws.send(msg)
    return sent, ws.until("response.done", "error")


def check_rt_names(t, evs, beta, audio, what):
    """the Realtime response's event sequence, GA or beta names"""
    if audio:
        tr = "response.audio_transcript" if beta else "response.output_audio_transcript"
        au = "response.audio" if beta else "response.output_audio"
    else:
        tr = "response.text" if beta else "response.output_text"
        au = None
    types = [e["type"] for e in evs]
    t.eq(types[:3], ["response.created", "response.output_item.added",
                     "response.content_part.added"], f"{what}: opening events")
    body = types[3:-4 - (1 if audio else 0)]
    if audio:
        t.check(set(body) == {tr + ".delta", au + ".delta"}, f"{what}: deltas {set(body)}")
        t.eq(types[-5:], [au + ".done", tr + ".done", "response.content_part.done",
                          "response.output_item.done", "response.done"],
             f"{what}: closing events")
    else:
        t.eq(set(body), {tr + ".delta"}, f"{what}: deltas")
        t.eq(types[-4:], [tr + ".done", "response.content_part.done",
                          "response.output_item.done", "response.done"],
             f"{what}: closing events")
    ids = [e["event_id"] for e in evs]
    t.eq(len(set(ids)), len(ids), f"{what}: event ids unique")
    rid = evs[0]["response"]["id"]
    for e in evs[1:-1]:
        t.eq(e["response_id"], rid, f"{what}: {e['type']} response_id")
    return tr, au


@timeout(30)
def test_realtime_audio_session(t):
    """/v1/realtime?model=M: session.created, session.update ->
    session.updated, conversation.item.create -> conversation.item.created,
    input_audio_buffer.append taken silently; response.create (audio, the
    default): transcript and audio deltas, the .done events, response.done
    with usage from the options; the first audio delta no earlier than
    ttft_ms"""
    sim = t.sim()
    ws = WS(t, sim.port, path="/v1/realtime?model=gpt-realtime",
            offer="permessage-deflate; client_max_window_bits")
    e = ws.event()
    t.eq(e["type"], "session.created", "first event")
    t.eq((e["session"]["model"], e["session"]["type"], e["session"]["output_modalities"]),
         ("gpt-realtime", "realtime", ["audio"]), "session")
    ws.send({"type": "session.update", "event_id": "c1",
             "session": {"type": "realtime", "instructions": "be brief"}})
    e = ws.event()
    t.eq((e["type"], e["session"]["instructions"]), ("session.updated", "be brief"),
         "session.updated")
    ws.send({"type": "conversation.item.create",
             "item": {"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": "hi"}]}})
    e = ws.event()
    t.eq(e["type"], "conversation.item.created", "item created")
    t.eq(e["previous_item_id"], None, "previous_item_id")
    t.check(e["item"]["id"].startswith("item_"), f"item id {e['item']['id']!r}")
    ws.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(b"\0" * 960).decode()})
    o = {"tokens": 6, "ttft_ms": 80, "gap_ms": 10, "prompt_tokens": 30,
         "input_audio_tokens": 12, "cached_tokens": 5, "audio_tokens": 40}
    sent, evs = rt_turn(ws, {"type": "response.create", "sim": o})
    tr, au = check_rt_names(t, evs, False, True, "audio")
    t.eq(joined(evs, tr + ".delta"), words("tok", 6), "transcript")
    t.eq(evs[-5 + 1]["transcript"], words("tok", 6), "transcript.done")
    audio = b"".join(base64.b64decode(e["delta"]) for e in deltas(evs, au + ".delta"))
    t.eq(len(audio), 6 * 480, "audio bytes (480 per token)")
    first_audio = deltas(evs, au + ".delta")[0]
    t.check(first_audio["_at"] - sent >= 80e6,
            f"first audio delta after {(first_audio['_at'] - sent) / 1e6:.1f} ms")
    for k, d in enumerate(deltas(evs, tr + ".delta")):
        t.check(d["_at"] - sent >= (80 + 10 * k) * 1e6, f"transcript delta {k} early")
    done = evs[-1]["response"]
    t.eq((done["status"], done["object"], done["output_modalities"]),
         ("completed", "realtime.response", ["audio"]), "response.done")
    t.eq(done["output"][0]["content"][0], {"type": "output_audio", "transcript": words("tok", 6)},
         "output item content")
    u = done["usage"]
    t.eq((u["input_tokens"], u["output_tokens"], u["total_tokens"]), (30, 46, 76), "usage totals")
    t.eq({k: u["input_token_details"][k] for k in ("text_tokens", "audio_tokens", "cached_tokens")},
         {"text_tokens": 18, "audio_tokens": 12, "cached_tokens": 5}, "input_token_details")
    t.eq(u["output_token_details"], {"text_tokens": 6, "audio_tokens": 40}, "output_token_details")
    t.check(all(m.compressed for m in ws.msgs), "an uncompressed event")
    t.eq(sim.stats()["ws_turns"], 1, "ws_turns")
    ws.close()


@timeout(30)
def test_realtime_text_only_and_audio_ttft(t):
    """output_modalities ["text"] (options in response.metadata.sim): text
    deltas only; audio_ttft_ms apart from ttft_ms: the transcript starts at
    ttft_ms, the audio at audio_ttft_ms"""
    sim = t.sim()
    ws = WS(t, sim.port, path="/v1/realtime")
    t.eq(ws.event()["type"], "session.created", "first event")
    o = {"tokens": 5, "ttft_ms": 30, "gap_ms": 5}
    sent, evs = rt_turn(ws, {"type": "response.create", "response": {
        "output_modalities": ["text"], "metadata": {"sim": json.dumps(o)}}})
    tr, _ = check_rt_names(t, evs, False, False, "text")
    t.eq(joined(evs, tr + ".delta"), words("tok", 5), "text")
    t.eq(evs[-4]["text"], words("tok", 5), "output_text.done")
    u = evs[-1]["response"]["usage"]
    t.eq(u["output_token_details"], {"text_tokens": 5, "audio_tokens": 0}, "text-only usage")
    t.eq(evs[-1]["response"]["output_modalities"], ["text"], "output_modalities")

    o = {"tokens": 4, "ttft_ms": 20, "audio_ttft_ms": 150, "gap_ms": 5}
    sent, evs = rt_turn(ws, {"type": "response.create", "sim": o})
    tr, au = check_rt_names(t, evs, False, True, "audio late")
    trs, aus = deltas(evs, tr + ".delta"), deltas(evs, au + ".delta")
    t.check(trs[0]["_at"] - sent >= 20e6, "transcript early")
    t.check(aus[0]["_at"] - sent >= 150e6,
            f"first audio after {(aus[0]['_at'] - sent) / 1e6:.1f} ms, before 150")
    t.check(evs.index(trs[-1]) < evs.index(aus[0]),
            "audio before the transcript's end though it starts 130 ms later")

    # audio ahead of the transcript, after two silent reasoning events:
    # audio k at 20 + (2 + k) * 10 ms, transcript k at 120 + (2 + k) * 10 ms
    o = {"tokens": 3, "reasoning_tokens": 2, "ttft_ms": 120, "audio_ttft_ms": 20,
         "gap_ms": 10}
    sent, evs = rt_turn(ws, {"type": "response.create", "sim": o})
    tr, au = check_rt_names(t, evs, False, True, "audio early")
    for name, start in ((tr, 120), (au, 20)):
        for k, d in enumerate(deltas(evs, name + ".delta")):
            lag = (d["_at"] - sent) / 1e6
            t.check(lag >= start + (2 + k) * 10,
                    f"{name} delta {k} after {lag:.1f} ms, before {start + (2 + k) * 10}")
    t.check(evs.index(deltas(evs, au + ".delta")[-1]) <
            evs.index(deltas(evs, tr + ".delta")[0]), "audio did not lead")
    t.eq(evs[-1]["response"]["usage"]["output_token_details"],
         {"text_tokens": 5, "audio_tokens": 3}, "silent reasoning counts as text")
    ws.close()


@timeout(30)
def test_realtime_cancel_and_one_response_at_a_time(t):
    """a second response.create during a turn gets
    conversation_already_has_active_response; response.cancel stops the
    deltas and sends response.done cancelled (client_cancelled); a cancel
    with nothing running is an error; the session goes on"""
    sim = t.sim()
    ws = WS(t, sim.port, path="/v1/realtime", offer="permessage-deflate")
    ws.event()
    ws.send({"type": "response.create", "sim": {"tokens": 200, "ttft_ms": 10, "gap_ms": 20}})
    evs = ws.until("response.output_audio_transcript.delta")
    ws.send({"type": "response.create", "event_id": "evt_dup"})
    ws.send({"type": "response.cancel"})
    rest = ws.until("response.done")
    errs = [e for e in rest if e["type"] == "error"]
    t.eq(len(errs), 1, "one error")
    t.eq((errs[0]["error"]["code"], errs[0]["error"]["event_id"]),
         ("conversation_already_has_active_response", "evt_dup"), "busy error")
    done = rest[-1]["response"]
    t.eq((done["status"], done["status_details"]),
         ("cancelled", {"type": "cancelled", "reason": "client_cancelled"}), "cancelled")
    t.eq(rest[-2]["type"], "response.output_item.done", "item closed")
    t.eq(rest[-2]["item"]["status"], "incomplete", "item status")
    n = len(deltas(evs + rest, "response.output_audio_transcript.delta"))
    t.check(n < 200, f"{n} deltas: not cancelled")
    t.eq(done["usage"]["output_token_details"]["text_tokens"], n, "usage of what was sent")
    ws.send({"type": "response.cancel"})
    e = ws.event()
    t.eq((e["type"], e["error"]["code"]), ("error", "response_cancel_not_active"),
         "cancel with nothing running")
    sent, evs = rt_turn(ws, {"type": "response.create", "sim": {"tokens": 2, "ttft_ms": 5}})
    check_rt_names(t, evs, False, True, "after cancel")
    st = sim.stats()
    t.eq((st["ws_turns"], st["aborted"]), (2, 0), "ws_turns, aborted")
    ws.close()


@timeout(30)
def test_realtime_beta_event_names(t):
    """OpenAI-Beta: realtime=v1 at the handshake (or sim beta:true) gives
    the beta API's names: response.audio_transcript.delta,
    response.audio.delta, response.text.delta"""
    sim = t.sim()
    ws = WS(t, sim.port, path="/v1/realtime?model=gpt-4o-realtime-preview",
            headers=[("OpenAI-Beta", "realtime=v1")])
    e = ws.event()
    t.eq((e["type"], e["session"]["modalities"]), ("session.created", ["text", "audio"]),
         "beta session")
    sent, evs = rt_turn(ws, {"type": "response.create", "sim": {"tokens": 3, "ttft_ms": 5}})
    tr, au = check_rt_names(t, evs, True, True, "beta audio")
    t.eq(joined(evs, "response.audio_transcript.delta"), words("tok", 3), "beta transcript")
    t.eq(evs[-1]["response"]["modalities"], ["audio", "text"], "beta modalities")
    t.eq(evs[-1]["response"]["output"][0]["content"][0]["type"], "audio", "beta content type")
    ws.close()

    ws = WS(t, sim.port, path="/v1/realtime")
    ws.event()
    sent, evs = rt_turn(ws, {"type": "response.create", "sim": {"tokens": 3, "beta": True},
                             "response": {"modalities": ["text"]}})
    check_rt_names(t, evs, True, False, "beta text")
    t.eq(joined(evs, "response.text.delta"), words("tok", 3), "beta text")
    ws.close()


@timeout(30)
def test_ws_ping_pong_and_close(t):
    """a ping is answered with a pong of the same payload; a close is
    echoed with its status code, then the sim closes the TCP connection"""
    sim = t.sim()
    ws = WS(t, sim.port, offer="permessage-deflate")
    ws.send_raw(PING, b"are you there")
    m = ws.recv()
    t.eq((m.op, m.data), (PONG, b"are you there"), "pong")
    ws.send_raw(CLOSE, struct.pack("!H", 1000) + b"bye")
    m = ws.recv()
    t.eq((m.op, m.data[:2]), (CLOSE, struct.pack("!H", 1000)), "close echoed")
    t.check(ws.c.closed_by_peer(5 * t.slow), "TCP connection left open after the close")
    ws.close()
    t.eq(sim.stats()["aborted"], 0, "aborted")


@timeout(30)
def test_ws_fragments_and_bad_messages(t):
    """a text message in three fragments with a ping between them is
    reassembled; binary and non-JSON messages get error events and the
    session goes on; an unmasked frame breaks RFC 6455: close 1002 with the
    reason, then the TCP close"""
    sim = t.sim()
    ws = WS(t, sim.port)
    body = json.dumps({"type": "response.create", "sim": {"tokens": 2, "ttft_ms": 5}}).encode()
    a, b = len(body) // 3, 2 * len(body) // 3
    sent = ws.c.send(ws.frame(TEXT, body[:a], fin=False) + ws.frame(0x0, body[a:b], fin=False)
                     + ws.frame(PING, b"mid") + ws.frame(0x0, body[b:]))
    m = ws.recv()
    t.eq((m.op, m.data), (PONG, b"mid"), "pong between fragments")
    check_responses_turn(t, ws.until("response.completed"), sent,
                         {"tokens": 2, "ttft_ms": 5}, "fragmented create")
    ws.send_raw(BINARY, b"\x00\x01")
    e = ws.event()
    t.eq(e["type"], "error", "binary message")
    ws.send(b"not json")
    e = ws.event()
    t.eq((e["type"], e["error"]["code"]), ("error", "invalid_json"), "not JSON")
    ws.send({"no": "type"})
    t.eq(ws.event()["error"]["code"], "invalid_json", "no type")
    ws.c.send(b"\x81\x02{}")          # unmasked: a server's frame
    m = ws.recv()
    t.eq((m.op, m.data[:2]), (CLOSE, struct.pack("!H", 1002)), "close 1002")
    t.check(b"mask" in m.data[2:].lower(), f"close reason {m.data[2:]!r}")
    t.check(ws.c.closed_by_peer(5 * t.slow), "connection left open after 1002")
    ws.close()


@timeout(30)
def test_ws_client_drops_mid_turn(t):
    """a client that drops the socket mid-turn (Responses), and one that
    sends a close frame mid-turn (Realtime): the timers stop, each counts as
    aborted, and the sim keeps serving WebSocket and HTTP"""
    sim = t.sim()
    ws = WS(t, sim.port, offer="permessage-deflate; client_max_window_bits")
    ws.send({"type": "response.create", "sim": {"tokens": 500, "ttft_ms": 10, "gap_ms": 10}})
    ws.until("response.output_text.delta")
    ws.c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    ws.close()       # RST
    harness.wait_until(lambda: sim.stats()["aborted"] == 1, 5 * t.slow, what="aborted 1")

    rt = WS(t, sim.port, path="/v1/realtime")
    rt.event()
    rt.send({"type": "response.create", "sim": {"tokens": 500, "ttft_ms": 10, "gap_ms": 10}})
    rt.until("response.output_audio.delta")
    rt.send_raw(CLOSE, struct.pack("!H", 1001))
    while True:
        m = rt.recv()
        t.check(m is not None, "no close frame before EOF")
        if m.op == CLOSE:
            break
    t.eq(m.data, struct.pack("!H", 1001), "close echoed")
    t.check(rt.c.closed_by_peer(5 * t.slow), "connection left open after the close")
    rt.close()
    harness.wait_until(lambda: sim.stats()["aborted"] == 2, 5 * t.slow, what="aborted 2")

    ws = WS(t, sim.port)
    sent = ws.send({"type": "response.create", "sim": {"tokens": 3, "ttft_ms": 10}})
    check_responses_turn(t, ws.until("response.completed"), sent,
                         {"tokens": 3, "ttft_ms": 10}, "after the drops")
    ws.close()
    r = harness.http(sim.port, "POST", "/v1/chat/completions",
                     harness.chat_body({"tokens": 2, "ttft_ms": 0}, stream=False))
    t.eq(r.status, 200, "HTTP after the drops")
    st = harness.wait_until(lambda: (lambda s: s if s["open"] == 1 else None)(sim.stats()),
                            5 * t.slow, what="every WebSocket connection freed")
    t.eq((st["aborted"], st["ws_sessions"], st["ws_turns"]), (2, 3, 3), "stats")


@timeout(30)
def test_ws_faults(t):
    """the fault options over WebSocket: split=byte still gives whole
    frames; headers_delay_ms holds the first event back; drop_terminal leaves
    out response.completed; truncate_after ends the connection with a FIN
    and reset_after with an RST, no close frame; hang runs until the client
    leaves (aborted), and a Realtime hang can be cancelled"""
    sim = t.sim()
    ws = WS(t, sim.port, offer="permessage-deflate")
    o = {"tokens": 4, "ttft_ms": 5, "split": "byte", "headers_delay_ms": 60}
    sent = ws.send({"type": "response.create", "sim": o})
    evs = ws.until("response.completed")
    t.check(evs[0]["_at"] - sent >= 60e6, "response.created before headers_delay_ms")
    check_responses_turn(t, evs, sent, dict(o, ttft_ms=60), "split byte")
    ws.send({"type": "response.create", "sim": {"tokens": 2, "ttft_ms": 5,
                                                "drop_terminal": True}})
    ws.send({"type": "response.create", "model": "next", "sim": {"tokens": 1, "ttft_ms": 5}})
    evs = ws.until("response.created")
    evs = ws.until("response.created")
    t.check("response.completed" not in [e["type"] for e in evs], "drop_terminal")
    t.eq(evs[-1]["response"]["model"], "next", "the next turn after drop_terminal")
    ws.until("response.completed")
    ws.send({"type": "response.create", "sim": {"tokens": 9, "ttft_ms": 5,
                                                "truncate_after": 2}})
    evs = []
    while True:
        m = ws.recv()
        if m is None:
            break
        t.eq(m.op, TEXT, "a control frame before the truncation")
        evs.append(json.loads(m.data))
    t.check(not ws.c.reset, "truncate_after: RST, want FIN")
    t.eq(len(deltas(evs, "response.output_text.delta")), 2, "deltas before the truncation")
    ws.close()

    ws = WS(t, sim.port)
    ws.send({"type": "response.create", "sim": {"tokens": 9, "ttft_ms": 5, "reset_after": 1}})
    while ws.recv() is not None:
        pass
    t.check(ws.c.reset, "reset_after: no RST")
    ws.close()

    ws = WS(t, sim.port, path="/v1/realtime")
    ws.event()
    ws.send({"type": "response.create", "sim": {"hang": True}})
    ws.send({"type": "response.create"})
    e = ws.event()
    t.eq(e["error"]["code"], "conversation_already_has_active_response", "hang is active")
    ws.send({"type": "response.cancel"})
    evs = ws.until("response.done")
    t.eq([e["type"] for e in evs], ["response.created", "response.done"], "cancelled hang")
    t.eq(evs[-1]["response"]["status"], "cancelled", "status")
    ws.close()

    ws = WS(t, sim.port)
    ws.send({"type": "response.create", "sim": {"hang": True}})
    ws.send({"type": "response.create", "sim": {"tokens": 1}})
    st = sim.stats()
    t.eq(st["aborted"], 0, "aborted before the client leaves")
    ws.close()
    harness.wait_until(lambda: sim.stats()["aborted"] == 1, 5 * t.slow, what="aborted 1")
    st = harness.wait_until(lambda: (lambda s: s if s["open"] == 1 else None)(sim.stats()),
                            5 * t.slow, what="the connections freed")
    t.eq(st["aborted"], 1, "one abort for a hanging turn and a waiting one")
