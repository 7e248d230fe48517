"""The WebSocket test peers themselves (tests/node, nodepeer.py), with no
proxy between them: the official OpenAI SDK's Responses WebSocket client
and Realtime client against ws_upstream.mjs, plain and compressed, over
wss with a private CA, and with a turn dropped or cancelled.  What the
proxy tests will build on: each peer reports what happened on the wire.

Timing checks are causal only: the upstream takes a response.create no
earlier than the client sent it, and sends the first delta no earlier than
ttft_ms after taking it; no upper bounds.
"""
import json

import harness
import nodepeer

SIM = {"ttft_ms": 40, "tokens": 6, "gap_ms": 5, "prompt_tokens": 12,
       "cached_tokens": 4, "reasoning_tokens": 2}
TEXT = "".join(f"tok{i} " for i in range(SIM["tokens"]))
NS_PER_MS = 1000000


def _server_turns(t, up, conn, n):
    """the upstream's "turn" lines for connection <conn>, once it has <n>"""
    up.wait_event(lambda e: e.get("event") == "close" and e.get("conn") == conn, 10,
                  f"connection {conn} to close")
    got = up.of_conn(conn, "turn")
    t.eq(len(got), n, f"turns the upstream served on connection {conn}")
    return got


def _causal(t, turn, srv, ttft_ms, first_key, what):
    """the client's send, the upstream's receipt and the first delta in order"""
    t.check(srv["recv_ns"] >= turn["sent_ns"],
            f"{what}: the upstream took response.create ({srv['recv_ns']}) before the client "
            f"sent it ({turn['sent_ns']})")
    t.check(turn[first_key] - srv["recv_ns"] >= ttft_ms * NS_PER_MS,
            f"{what}: first delta {(turn[first_key] - srv['recv_ns']) / 1e6:.3f} ms after the "
            f"upstream took the request, before ttft_ms={ttft_ms}")
    t.check(turn["ttft_ms"] >= ttft_ms, f"{what}: ttft_ms {turn['ttft_ms']} < {ttft_ms}")


@harness.timeout(60)
def test_responses_ws_sdk_turns_on_one_socket_plain_and_compressed(t):
    up = nodepeer.Upstream(t)
    for conn, deflate in ((1, True), (2, False)):
        what = "permessage-deflate" if deflate else "no compression"
        r = nodepeer.run(t, "responses_ws.mjs",
                         ["--base-url", up.url + "/v1", "--turns", "3", "--sim", json.dumps(SIM),
                          *([] if deflate else ["--no-deflate"])])
        t.eq(r.open["url"], f"ws://127.0.0.1:{up.port}/v1/responses", "the SDK's WebSocket URL")
        t.eq(r.open["extensions"], "permessage-deflate" if deflate else "", f"{what}: client's extensions")
        srv_conn = up.wait_event(lambda e: e.get("event") == "connection" and e["conn"] == conn, 10,
                                 f"connection {conn}")
        t.eq(srv_conn["path"], "/v1/responses", "path")
        t.eq(srv_conn["extensions"], "permessage-deflate" if deflate else "", f"{what}: upstream's extensions")
        t.eq(srv_conn["auth"], True, "the SDK sent its Authorization header")
        t.eq([x["turn"] for x in r.turns], [1, 2, 3], f"{what}: turns")
        srv = _server_turns(t, up, conn, 3)
        for turn, s in zip(r.turns, srv):
            w = f"{what}, turn {turn['turn']}"
            t.eq(turn["status"], "completed", f"{w}: status")
            t.eq(turn["text"], TEXT, f"{w}: text")
            t.eq(turn["response_id"], s["response_id"], f"{w}: response id")
            # created, in_progress, item added, part added, the deltas, text
            # done, part done, item done, completed
            t.eq(turn["events"], 8 + SIM["tokens"], f"{w}: events")
            t.eq(turn["usage"], {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 4},
                                 "output_tokens": 8, "output_tokens_details": {"reasoning_tokens": 2},
                                 "total_tokens": 20}, f"{w}: usage")
            _causal(t, turn, s, SIM["ttft_ms"], "first_delta_ns", w)
        t.eq(len({x["response_id"] for x in r.turns}), 3, f"{what}: distinct response ids")
        close = up.of_conn(conn, "close")[0]
        t.eq((close["code"], close["in_flight"]), (1000, False), f"{what}: the client's close")
        t.eq(r.end["errors"], [], f"{what}: SDK errors")


@harness.timeout(60)
def test_realtime_ws_sdk_turns_audio_text_beta_plain_and_compressed(t):
    up = nodepeer.Upstream(t)
    runs = [("GA audio, permessage-deflate", []),
            ("GA text only, no compression", ["--text-only", "--no-deflate"]),
            ("beta audio", ["--beta"])]
    for conn, (what, extra) in enumerate(runs, 1):
        audio = "--text-only" not in extra
        r = nodepeer.run(t, "realtime_ws.mjs",
                         ["--url", up.ws_url + "/v1/realtime", "--turns", "3", "--sim", json.dumps(SIM),
                          *extra])
        srv_conn = up.wait_event(lambda e: e.get("event") == "connection" and e["conn"] == conn, 10,
                                 f"connection {conn}")
        t.eq((srv_conn["path"], srv_conn["query"]), ("/v1/realtime", "?model=gpt-realtime"), f"{what}: URL")
        t.eq(srv_conn["beta"], "--beta" in extra, f"{what}: OpenAI-Beta: realtime=v1")
        ext = "" if "--no-deflate" in extra else "permessage-deflate"
        t.eq((r.open["extensions"], srv_conn["extensions"]), (ext, ext), f"{what}: extensions")
        srv = _server_turns(t, up, conn, 3)
        t.eq([x["turn"] for x in r.turns], [1, 2, 3], f"{what}: turns")
        for turn, s in zip(r.turns, srv):
            w = f"{what}, turn {turn['turn']}"
            t.eq(turn["status"], "completed", f"{w}: status")
            t.eq(turn["response_id"], s["response_id"], f"{w}: response id")
            t.eq(turn["text"], TEXT, f"{w}: text (transcript)" if audio else f"{w}: text")
            t.eq(s["audio"], audio, f"{w}: audio asked for")
            t.eq(turn["audio_bytes"], 480 * SIM["tokens"] if audio else 0, f"{w}: audio bytes")
            out_audio = SIM["tokens"] if audio else 0
            t.eq(turn["usage"], {
                "total_tokens": 12 + SIM["tokens"] + out_audio, "input_tokens": 12,
                "output_tokens": SIM["tokens"] + out_audio,
                "input_token_details": {"text_tokens": 12, "audio_tokens": 0, "image_tokens": 0,
                                        "cached_tokens": 4,
                                        "cached_tokens_details": {"text_tokens": 4, "audio_tokens": 0,
                                                                  "image_tokens": 0}},
                "output_token_details": {"text_tokens": SIM["tokens"], "audio_tokens": out_audio}},
                f"{w}: usage")
            _causal(t, turn, s, SIM["ttft_ms"], "first_text_ns", w)
            if audio:
                _causal(t, turn, s, SIM["ttft_ms"], "first_audio_ns", w + " (audio)")
                t.check(turn["time_to_first_audio_ms"] >= SIM["ttft_ms"], f"{w}: time to first audio")
            else:
                t.eq((turn["first_audio_ns"], turn["time_to_first_audio_ms"]), (None, None),
                     f"{w}: no audio")
        t.eq(r.end["errors"], [], f"{what}: SDK errors")


@harness.timeout(90)
def test_sdk_clients_over_wss_trust_a_private_ca_and_only_it(t):
    from test_tls import Pki
    pki = Pki(t)
    cert, key = pki.leaf("upstream")
    up = nodepeer.Upstream(t, ["--tls-cert", cert, "--tls-key", key])
    r = nodepeer.run(t, "realtime_ws.mjs", ["--url", up.ws_url + "/v1/realtime", "--turns", "3",
                                            "--ca", pki.ca, "--sim", json.dumps(SIM)])
    t.eq(r.open["url"], f"wss://127.0.0.1:{up.port}/v1/realtime", "a wss URL")
    t.eq([(x["status"], x["text"]) for x in r.turns], [("completed", TEXT)] * 3, "Realtime over wss")
    for x in r.turns:
        t.check(x["ttft_ms"] >= SIM["ttft_ms"], f"turn {x['turn']}: ttft_ms {x['ttft_ms']}")
    r = nodepeer.run(t, "responses_ws.mjs", ["--base-url", up.url + "/v1", "--turns", "3",
                                             "--ca", pki.ca, "--sim", json.dumps(SIM)])
    t.eq(r.open["url"], f"wss://127.0.0.1:{up.port}/v1/responses", "https base URL -> wss")
    t.eq([(x["status"], x["text"]) for x in r.turns], [("completed", TEXT)] * 3, "Responses over wss")
    # without the CA the certificate is refused and no turn runs
    for script, args in (("realtime_ws.mjs", ["--url", up.ws_url + "/v1/realtime"]),
                         ("responses_ws.mjs", ["--base-url", up.url + "/v1"])):
        r = nodepeer.run(t, script, [*args, "--turns", "1"], expect_rc=1)
        t.eq(r.turns, [], f"{script} without --ca: turns")
        t.check("certificate" in r.stderr, f"{script} without --ca: the reason: {r.stderr[-300:]!r}")
    t.eq([e for e in up.events if e.get("event") == "connection"].__len__(), 2,
         "only the two trusting clients got through the handshake")


@harness.timeout(60)
def test_drop_turn_ends_the_socket_and_the_upstream_sees_it_mid_turn(t):
    up = nodepeer.Upstream(t)
    # the dropped turn (only it: --sim-turn) would take 40 deltas x 250 ms
    # if nothing dropped it
    slow = json.dumps({"ttft_ms": 20, "tokens": 40, "gap_ms": 250})
    r = nodepeer.run(t, "responses_ws.mjs", ["--base-url", up.url + "/v1", "--turns", "3",
                                             "--drop-turn", "1", "--sim", slow])
    t.eq([(x["turn"], x["status"], x["text"]) for x in r.turns], [(1, "dropped", "tok0 ")],
         "Responses: the client's turns")
    t.eq(r.end["close_code"], 1006, "Responses: no close frame (abnormal closure)")
    close = up.wait_event(lambda e: e.get("event") == "close" and e["conn"] == 1, 10,
                          "the upstream to see the dropped Responses socket")
    t.eq((close["code"], close["in_flight"], close["turns"]), (1006, True, 1),
         "Responses: the upstream saw the socket end mid-turn")
    t.check(close["deltas"] < 40, f"Responses: {close['deltas']} deltas sent before the drop")

    r = nodepeer.run(t, "realtime_ws.mjs", ["--url", up.ws_url + "/v1/realtime", "--turns", "3",
                                            "--drop-turn", "2", "--sim", json.dumps(SIM),
                                            "--sim-turn", "2:" + slow, "--text-only"])
    t.eq([(x["turn"], x["status"]) for x in r.turns], [(1, "completed"), (2, "dropped")],
         "Realtime: the client's turns")
    close = up.wait_event(lambda e: e.get("event") == "close" and e["conn"] == 2, 10,
                          "the upstream to see the dropped Realtime socket")
    t.eq((close["code"], close["in_flight"], close["turns"]), (1006, True, 2),
         "Realtime: the upstream saw the socket end mid-turn")


@harness.timeout(60)
def test_cancel_turn_closes_responses_ws_and_cancels_a_realtime_response(t):
    up = nodepeer.Upstream(t)
    slow = json.dumps({"ttft_ms": 20, "tokens": 40, "gap_ms": 250})
    # Responses WebSocket mode has no cancel event: the SDK's close()
    r = nodepeer.run(t, "responses_ws.mjs", ["--base-url", up.url + "/v1", "--turns", "3",
                                             "--cancel-turn", "1", "--sim", slow])
    t.eq([(x["turn"], x["status"]) for x in r.turns], [(1, "cancelled")], "Responses: turns")
    t.eq((r.end["close_code"], r.end["close_reason"]), (1000, "cancel"), "Responses: the SDK's close")
    close = up.wait_event(lambda e: e.get("event") == "close" and e["conn"] == 1, 10,
                          "the upstream to see the close")
    t.eq((close["code"], close["reason"], close["in_flight"]), (1000, "cancel", True),
         "Responses: a clean close mid-turn")
    # Realtime: response.cancel; the session goes on
    r = nodepeer.run(t, "realtime_ws.mjs", ["--url", up.ws_url + "/v1/realtime", "--turns", "3",
                                            "--cancel-turn", "2", "--sim", json.dumps(SIM),
                                            "--sim-turn", "2:" + slow, "--text-only"])
    t.eq([(x["turn"], x["status"]) for x in r.turns],
         [(1, "completed"), (2, "cancelled"), (3, "completed")], "Realtime: turns")
    srv = _server_turns(t, up, 2, 3)
    ends = up.of_conn(2, "turn_end")
    t.eq([e["status"] for e in ends], ["completed", "cancelled", "completed"], "Realtime: upstream's turns")
    sent = ends[1]["deltas"]
    cancelled = r.turns[1]
    t.check(1 <= sent < 40, f"Realtime: {sent} deltas before the cancel")
    t.eq(cancelled["usage"]["output_tokens"], sent, "Realtime: the cancelled turn's usage counts what was sent")
    t.eq(cancelled["text"], "".join(f"tok{i} " for i in range(sent)), "Realtime: the cancelled turn's text")
    t.eq(cancelled["response_id"], srv[1]["response_id"], "Realtime: the cancelled response")
    t.eq(r.end["errors"], [], "Realtime: SDK errors")
