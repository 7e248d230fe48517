"""WebSocket sessions through tokentap, turn by turn (SPEC section 13;
docs/websocket.md): the official OpenAI SDK's ResponsesWS and Realtime
clients (tests/node) in front of two upstreams, ws_upstream.mjs (the `ws`
package's server) and tokentap-sim, compressed and not.

Each turn is one record whose numbers are the turn's: its usage as the
client received it, its response id, and a TTFT that lies between what the
upstream was asked to wait and what the client measured (the proxy's t0 is
after the client's send, its first token before the client's: causal
bounds, never timing luck).  The session is one more record.
"""
import json
import socket
import statistics
import base64
import hashlib
import os
import zlib

import harness
import nodepeer

SIM = {"ttft_ms": 40, "tokens": 8, "gap_ms": 4, "prompt_tokens": 12,
       "cached_tokens": 4, "reasoning_tokens": 2}
TEXT = "".join(f"tok{i} " for i in range(SIM["tokens"]))


def _turns_and_session(t, px, n_turns, n_sessions=1):
    """the records once there are <n_turns> turns and <n_sessions> sessions"""
    want = n_turns + n_sessions
    recs = px.records(want, timeout=10)
    turns = [r for r in recs if r["metadata"].get("transport") == "websocket"
             and "turn" in r["metadata"]]
    sess = [r for r in recs if r["metadata"].get("transport") == "websocket"
            and "turns" in r["metadata"]]
    t.eq((len(turns), len(sess)), (n_turns, n_sessions),
         f"turn and session records (of {len(recs)}: {[r['metadata'].get('api') for r in recs]})")
    return turns, sess


def _check_turn(t, rec, client, api, what, knob_ttft=SIM["ttft_ms"]):
    md = rec["metadata"]
    t.eq(md["api"], api, f"{what}: api")
    t.eq(md["status"], 101, f"{what}: status")
    t.eq(md["stream"], True, f"{what}: a stream")
    t.eq(md["response_id"], client["response_id"], f"{what}: response id")
    t.check(rec["error"] is None, f"{what}: error {rec['error']}")
    ttft = harness.metric(rec, "time_to_first_token")
    t.check(ttft is not None, f"{what}: no TTFT")
    # causal: the upstream waited knob ms after the proxy's t0; the client
    # sent before the proxy's t0 and got the first token after the proxy
    t.check(ttft >= knob_ttft, f"{what}: TTFT {ttft} below the upstream's wait {knob_ttft}")
    t.check(ttft <= client["ttft_ms"], f"{what}: TTFT {ttft} above the client's own {client['ttft_ms']}")
    return ttft


def _usage_eq(t, rec, cu, what):
    u = rec["metadata"].get("usage", {})
    t.eq(u.get("input_tokens"), cu["input_tokens"], f"{what}: input tokens")
    t.eq(u.get("output_tokens"), cu["output_tokens"], f"{what}: output tokens")
    t.eq(harness.metric(rec, "output_sequence_length"), cu["output_tokens"], f"{what}: OSL")
    t.eq(harness.metric(rec, "input_sequence_length"), cu["input_tokens"], f"{what}: ISL")


@harness.timeout(120)
def test_responses_ws_sdk_turns_are_records(t):
    """ResponsesWS, five turns on one socket, through tokentap to the `ws`
    package's server, compressed and not: five turn records with the
    client's usage, response ids and a bracketed TTFT, and a session record"""
    up = nodepeer.Upstream(t)
    diffs = []
    for k, deflate in enumerate((True, False)):
        what = "permessage-deflate" if deflate else "no compression"
        px = harness.Proxy(t, up.url, admin="auto")
        r = nodepeer.run(t, "responses_ws.mjs",
                         ["--base-url", f"http://127.0.0.1:{px.port}/v1", "--turns", "5",
                          "--sim", json.dumps(SIM), *([] if deflate else ["--no-deflate"])])
        t.eq(r.open["extensions"], "permessage-deflate" if deflate else "", f"{what}: extensions")
        t.eq([(x["status"], x["text"]) for x in r.turns], [("completed", TEXT)] * 5,
             f"{what}: what the client got")
        turns, sess = _turns_and_session(t, px, 5)
        turns.sort(key=lambda x: x["metadata"]["turn"])
        t.eq([x["metadata"]["turn"] for x in turns], [1, 2, 3, 4, 5], f"{what}: turn numbers")
        sid = sess[0]["metadata"]["x_request_id"]
        for rec, cl in zip(turns, r.turns):
            w = f"{what}, turn {cl['turn']}"
            t.eq(rec["metadata"]["ws_session"], sid, f"{w}: session id")
            t.eq(rec["metadata"]["transport"], "websocket", f"{w}: transport")
            t.eq(rec["metadata"]["x_request_id"], f"{sid}.{cl['turn']}", f"{w}: request id")
            ttft = _check_turn(t, rec, cl, "openai.responses", w)
            diffs.append(cl["ttft_ms"] - ttft)
            _usage_eq(t, rec, cl["usage"], w)
            u = rec["metadata"]["usage"]
            t.eq(u.get("reasoning_tokens"), cl["usage"]["output_tokens_details"]["reasoning_tokens"],
                 f"{w}: reasoning tokens")
            t.eq(u.get("cached_input_tokens"), cl["usage"]["input_tokens_details"]["cached_tokens"],
                 f"{w}: cached tokens")
            t.eq(rec["metadata"]["token_events"], SIM["tokens"], f"{w}: token events")
        s = sess[0]["metadata"]
        t.eq((s["api"], s["status"], s["turns"], s["messages_in"]), ("openai.responses", 101, 5, 5),
             f"{what}: the session")
        t.check(sess[0]["metadata"]["bytes_in"] > 0 and sess[0]["metadata"]["bytes_out"] > 0,
                f"{what}: session bytes")
        t.check(harness.metric(sess[0], "request_latency") is None,
                f"{what}: a session's length recorded as a request latency")
        # the turns are requests like any on /metrics
        m = harness.http(px.admin_port, "GET", "/metrics").body.decode()
        line = [ln for ln in m.splitlines()
                if ln.startswith("tokentap_time_to_first_token_seconds_count{")
                and 'api="openai.responses"' in ln]
        t.check(line and line[0].endswith(" 5"), f"{what}: TTFT count on /metrics: {line}")
        px.stop()
    print(f"    client TTFT - tokentap TTFT over {len(diffs)} turns: median "
          f"{statistics.median(diffs):.3f} ms, max {max(diffs):.3f} ms")


@harness.timeout(120)
def test_realtime_sdk_over_wss_audio_cancel_and_beta(t):
    """the Realtime SDK over wss (tokentap's TLS listener) to the `ws`
    package's server: audio turns with time to first audio and the usage
    details, a cancelled turn, text only, and the beta event names"""
    from test_tls import Pki
    pki = Pki(t)
    cert, key = pki.leaf("tokentap")
    up = nodepeer.Upstream(t)
    px = harness.Proxy(t, up.url, admin="auto", extra=["--tls-cert", cert, "--tls-key", key])
    url = f"wss://127.0.0.1:{px.port}/v1/realtime"
    slow = json.dumps({"ttft_ms": 20, "tokens": 40, "gap_ms": 200})
    runs = [
        ("audio", ["--turns", "3", "--cancel-turn", "2", "--sim-turn", "2:" + slow]),
        ("text only", ["--turns", "2", "--text-only", "--no-deflate"]),
        ("beta", ["--turns", "2", "--beta"]),
    ]
    n = 0
    for what, args in runs:
        r = nodepeer.run(t, "realtime_ws.mjs", ["--url", url, "--ca", pki.ca,
                                                "--sim", json.dumps(SIM), *args])
        n += len(r.turns)
        turns, _ = _turns_and_session(t, px, n, runs.index((what, args)) + 1)
        mine = sorted([x for x in turns if x["metadata"]["ws_session"] ==
                       turns[-1]["metadata"]["ws_session"]], key=lambda x: x["metadata"]["turn"])
        t.eq(len(mine), len(r.turns), f"{what}: turns recorded")
        for rec, cl in zip(mine, r.turns):
            w = f"{what}, turn {cl['turn']}"
            t.eq(rec["metadata"]["model"], "gpt-realtime", f"{w}: the session's model")
            if cl["status"] == "cancelled":
                t.eq(rec["metadata"]["was_cancelled"], True, f"{w}: cancelled")
                t.eq(rec["error"]["kind"], "cancelled", f"{w}: error kind")
                t.eq(rec["metadata"]["finish_reason"], "cancelled", f"{w}: finish reason")
                continue
            t.eq(cl["status"], "completed", f"{w}: the client's status")
            _check_turn(t, rec, cl, "openai.realtime", w)
            _usage_eq(t, rec, cl["usage"], w)
            u, cu = rec["metadata"]["usage"], cl["usage"]
            t.eq((u.get("input_text_tokens"), u.get("input_audio_tokens"), u.get("cached_input_tokens")),
                 (cu["input_token_details"]["text_tokens"], cu["input_token_details"]["audio_tokens"],
                  cu["input_token_details"]["cached_tokens"]), f"{w}: input details")
            t.eq((u.get("output_text_tokens"), u.get("output_audio_tokens")),
                 (cu["output_token_details"]["text_tokens"], cu["output_token_details"]["audio_tokens"]),
                 f"{w}: output details")
            ttfa = harness.metric(rec, "time_to_first_audio")
            if what == "text only":
                t.check(ttfa is None, f"{w}: time to first audio without audio: {ttfa}")
            else:
                t.check(ttfa is not None and SIM["ttft_ms"] <= ttfa <= cl["time_to_first_audio_ms"],
                        f"{w}: time to first audio {ttfa}, client's {cl['time_to_first_audio_ms']}")
    m = harness.http(px.admin_port, "GET", "/metrics").body.decode()
    t.check(any(ln.startswith("tokentap_time_to_first_audio_seconds_count{") and not ln.endswith(" 0")
                for ln in m.splitlines()), "time to first audio on /metrics")


@harness.timeout(60)
def test_client_drops_mid_turn_cancels_and_closes_upstream(t):
    """the client's socket dies mid-turn: the turn is recorded cancelled at
    once and the upstream's connection is closed (it stops generating)"""
    up = nodepeer.Upstream(t)
    px = harness.Proxy(t, up.url)
    slow = json.dumps({"ttft_ms": 20, "tokens": 40, "gap_ms": 250})
    r = nodepeer.run(t, "responses_ws.mjs", ["--base-url", f"http://127.0.0.1:{px.port}/v1",
                                             "--turns", "3", "--sim", json.dumps(SIM),
                                             "--drop-turn", "2", "--sim-turn", "2:" + slow])
    t.eq([(x["turn"], x["status"]) for x in r.turns], [(1, "completed"), (2, "dropped")], "turns")
    close = up.wait_event(lambda e: e.get("event") == "close", 10, "the upstream's close")
    t.eq((close["in_flight"], close["turns"]), (True, 2), "the upstream saw the end mid-turn 2")
    t.check(close["deltas"] < 40, f"the upstream sent {close['deltas']} of 40 deltas")
    turns, sess = _turns_and_session(t, px, 2)
    turns.sort(key=lambda x: x["metadata"]["turn"])
    t.eq(turns[0]["error"], None, "turn 1")
    t.eq((turns[1]["metadata"]["was_cancelled"], turns[1]["error"]["kind"]), (True, "cancelled"),
         "turn 2 cancelled")
    t.check(turns[1]["metadata"]["token_events"] < 40, "turn 2 ended early")
    t.eq(sess[0]["metadata"]["turns"], 2, "the session's turns")


@harness.timeout(120)
def test_responses_ws_sdk_through_tokentap_to_the_simulator(t):
    """the same SDK client in front of tokentap-sim, compressed and not:
    the simulator as the upstream gives the same turn records, judged
    against the SLOs (TTFT over 1 ms: missed; at least 1 token/s per user: met)"""
    sim = t.sim()
    for deflate in (True, False):
        what = "permessage-deflate" if deflate else "no compression"
        px = harness.Proxy(t, sim.url, extra=["--goodput", "ttft:1 output_token_throughput_per_user:1"])
        r = nodepeer.run(t, "responses_ws.mjs",
                         ["--base-url", f"http://127.0.0.1:{px.port}/v1", "--turns", "3",
                          "--sim", json.dumps(SIM), *([] if deflate else ["--no-deflate"])])
        t.eq([(x["status"], x["text"]) for x in r.turns], [("completed", TEXT)] * 3,
             f"{what}: what the client got")
        turns, sess = _turns_and_session(t, px, 3)
        turns.sort(key=lambda x: x["metadata"]["turn"])
        for rec, cl in zip(turns, r.turns):
            w = f"{what}, turn {cl['turn']}"
            _check_turn(t, rec, cl, "openai.responses", w)
            _usage_eq(t, rec, cl["usage"], w)
            t.eq(rec["metadata"]["token_events"], SIM["tokens"] + SIM["reasoning_tokens"],
                 f"{w}: token events (reasoning included)")
            t.eq(harness.metric(rec, "reasoning_token_count"), SIM["reasoning_tokens"],
                 f"{w}: reasoning tokens")
            # judged against the SLOs like any streamed request
            t.eq(rec["metadata"]["slo"], {"good": False, "violations": ["time_to_first_token"]},
                 f"{w}: SLO verdict")
        px.stop()
    t.eq(sim.stats()["ws_turns"], 6, "the simulator's turns")


@harness.timeout(60)
def test_frames_split_at_every_byte_both_ways(t):
    """the client's response.create written one byte per write, the
    server's frames split at every byte (sim split=byte), compressed with
    context takeover: the turn is whole, and the client decodes every
    message (the bytes passed unchanged)"""
    from test_sim_ws import WS
    sim = t.sim()
    px = harness.Proxy(t, sim.url)
    ws = WS(t, px.port, offer="permessage-deflate")
    t.check(bool(ws.pmd), "permessage-deflate negotiated through tokentap")
    o = dict(SIM, split="byte")
    for turn in (1, 2):
        data = json.dumps({"type": "response.create", "model": "m", "sim": o}).encode()
        z = ws.deflater.compress(data) + ws.deflater.flush(zlib.Z_SYNC_FLUSH)
        frame = ws.frame(0x1, z[:-4], rsv1=True)
        ws.c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(frame)):
            ws.c.sock.sendall(frame[i:i + 1])
        evs = ws.until("response.completed")
        text = "".join(e.get("delta", "") for e in evs if e["type"] == "response.output_text.delta")
        t.eq(text, TEXT, f"turn {turn}: the client's text")
        recs = px.records(turn)
        rec = [r for r in recs if r["metadata"].get("turn") == turn]
        t.eq(len(rec), 1, f"turn {turn} recorded")
        rec = rec[0]
        t.eq(rec["metadata"]["token_events"], SIM["tokens"] + SIM["reasoning_tokens"],
             f"turn {turn}: token events")
        t.eq(rec["metadata"]["usage"]["output_tokens"], SIM["tokens"] + SIM["reasoning_tokens"],
             f"turn {turn}: output tokens")
        t.eq(rec["metadata"]["response_id"], evs[-1]["response"]["id"], f"turn {turn}: response id")
        t.check(harness.metric(rec, "time_to_first_token") >= SIM["ttft_ms"], f"turn {turn}: TTFT")
    ws.close()
    recs = px.records(3)
    sess = [r for r in recs if "turns" in r["metadata"]]
    t.eq((len(sess), sess[0]["metadata"]["turns"], sess[0]["error"]), (1, 2, None), "the session")


@harness.timeout(60)
def test_broken_frames_pass_and_stop_the_decoding(t):
    """an unmasked client frame breaks RFC 6455: tokentap forwards it as it
    came (the simulator answers close 1002), the turn in progress and the
    session end with stream_parse_error"""
    from test_sim_ws import WS
    import struct
    sim = t.sim()
    px = harness.Proxy(t, sim.url, admin="auto")
    ws = WS(t, px.port)
    ws.send({"type": "response.create", "sim": {"tokens": 200, "ttft_ms": 5, "gap_ms": 20}})
    ws.until("response.output_text.delta")
    ws.c.send(b"\x81\x02{}")                      # a client frame without its mask
    while True:
        m = ws.recv()
        t.check(m is not None, "no close frame from the upstream")
        if m.op == 0x8:
            break
    t.eq(m.data[:2], struct.pack("!H", 1002), "the upstream got the bad frame and closed 1002")
    recs = px.records(2)
    turn = [r for r in recs if "turn" in r["metadata"]][0]
    sess = [r for r in recs if "turns" in r["metadata"]][0]
    t.eq(turn["error"]["kind"], "stream_parse_error", "the turn's error kind")
    t.eq(sess["error"]["kind"], "stream_parse_error", "the session's error kind")
    t.check("mask" in sess["metadata"]["decoding_stopped"],
            f"the reason: {sess['metadata']['decoding_stopped']}")
    m = harness.http(px.admin_port, "GET", "/metrics").body.decode()
    t.check(any(ln.startswith("tokentap_errors_total{") and 'type="stream_parse_error"' in ln
                and ln.endswith(" 2") for ln in m.splitlines()),
            "stream_parse_error counted on /metrics: " +
            str([ln for ln in m.splitlines() if "tokentap_errors_total{" in ln]))


@harness.timeout(60)
def test_message_over_max_event_bytes_is_counted_not_decoded(t):
    """a client message larger than max_event_bytes once inflated is
    forwarded, not decoded, and counted; the turn its answer belongs to is
    still measured from the server's response.created"""
    from test_sim_ws import WS
    sim = t.sim()
    px = harness.Proxy(t, sim.url, extra=["--max-event-bytes", "4k"])
    ws = WS(t, px.port, offer="permessage-deflate")
    ws.send({"type": "response.create", "input": "x" * 20000, "sim": {"tokens": 3, "ttft_ms": 5}})
    evs = ws.until("response.completed")
    t.eq(len([e for e in evs if e["type"] == "response.output_text.delta"]), 3, "the answer")
    ws.close()
    recs = px.records(2)
    sess = [r for r in recs if "turns" in r["metadata"]][0]
    turn = [r for r in recs if "turn" in r["metadata"]][0]
    t.eq(sess["metadata"].get("messages_over_max_event_bytes"), 1, "the oversized message counted")
    t.eq((turn["metadata"]["token_events"], turn["error"]), (3, None), "the turn, from response.created")
