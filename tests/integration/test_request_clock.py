"""The request clock (SPEC 5, 7): streams with designed timings from the sim,
checked against the numbers in the record.

Every timing check is a causal bracket, true however loaded the machine:

  lower: the sim times event k from the instant the request was complete at
  the sim (t_start) and never sends early (precise timers): event k leaves
  at t_start + design_k or later; t_start comes after the proxy read the
  first request byte (its t0).  So the proxy's "event k at X ms after t0"
  is >= design_k.

  upper: the proxy takes its timestamp on entering the read callback, before
  it writes those bytes to the client; the client sent the request before
  the proxy's t0.  So X <= (the client's recv() of the end of event k) -
  (the client's send), both on the same CLOCK_MONOTONIC.

On an idle machine the bracket is a fraction of a millisecond wide; on a
loaded one it widens by exactly the delays that really happened, so no
tolerance is guessed and no retry is needed.  Differences of two instants
(gaps, ITL, TTFO - TTFT) are bracketed by combining the two brackets.
"""
import re
import statistics

import harness
from harness import build_request, metric, timeline, timeout

EPS = 0.002     # ms: the record's values are rounded to the microsecond


def run(t, px, body, path="/v1/chat/completions", rid=None):
    """one request through the proxy; (Response, its record); the Response
    keeps the client's send time and every recv() time (r.conn)"""
    headers = [("X-Request-Id", rid)] if rid else []
    n0 = len(px.records())
    r = px.post(path, body, headers=headers, timeout=30)
    if rid:
        recs = harness.wait_until(lambda: [x for x in px.records()
                                           if x["metadata"].get("x_request_id") == rid],
                                  5 * t.slow, what=f"record {rid}")
    else:
        recs = px.records(n0 + 1)
    return r, recs[-1]


def warm_proxy(t, **kw):
    """sim + proxy with one pooled upstream connection already open"""
    sim = t.sim()
    px = t.proxy(sim.url, **kw)
    r = px.request("GET", "/health")
    t.eq(r.status, 200, "warm-up status")
    px.records(1)
    return sim, px


class Client:
    """What the client saw of response <r>: ms after its send, when it had
    the end of each event (all events; token events: those carrying a
    token text of the sim, "tokN " / "thinkN ", not seen in an earlier
    event, so that summary events repeating the text do not count) and the
    last body byte."""

    TOKEN = re.compile(rb"(?:tok|think)\d+ ")

    def __init__(self, r):
        self.r = r
        self.t_send = r.conn.sent_ns[0]
        ndjson = "ndjson" in (r.header("content-type") or "")
        sep = re.compile(rb"\r?\n" if ndjson else rb"\r\n\r\n|\n\n")
        body = r.body
        self.events, self.token_events = [], []
        seen = set()
        pos = 0
        while pos < len(body):
            m = sep.search(body, pos)
            end = len(body) if m is None else m.end()
            ev = (self.ms(end - 1), body[pos:end])
            self.events.append(ev)
            toks = set(self.TOKEN.findall(ev[1]))
            if toks - seen:
                self.token_events.append(ev)
            seen |= toks
            pos = end
        self.end = self.ms(len(r.body) - 1) if r.body else 0.0

    def ms(self, body_index):
        return (self.r.body_arrival_ns(body_index) - self.t_send) / 1e6

    def first(self, text):
        """ms when the client had the whole event carrying <text>"""
        for at, ev in self.events:
            if text in ev:
                return at
        raise harness.Failure(f"{text!r} not in the response")


def bracket(t, got, lo, hi, what):
    """lo <= got <= hi (causal bounds, see the module doc)"""
    t.check(got is not None, f"{what}: absent")
    t.check(lo - EPS <= got <= hi + EPS,
            f"{what}: {got:.3f} ms outside the causal bracket [{lo:.3f}, {hi:.3f}]")
    return got


def check_gaps(t, icl, design_at, upper_at):
    """inter-chunk gap k (token event k to k+1) within
    [design_{k+1} - upper_k, upper_{k+1} - design_k]"""
    t.eq(len(icl), len(design_at) - 1, "inter_chunk_latency gaps")
    for k, g in enumerate(icl):
        bracket(t, g, design_at[k + 1] - upper_at[k], upper_at[k + 1] - design_at[k],
                f"inter-chunk gap {k}")


def token_brackets(t, rec, cl, design_at):
    """the token events' brackets: (lower, upper) lists, and the record's
    TTFT bracketed by the first one"""
    upper = [at for at, _ in cl.token_events]
    t.eq(len(upper), len(design_at), "token events the client saw")
    bracket(t, metric(rec, "time_to_first_token"), design_at[0], upper[0], "time_to_first_token")
    return upper


@timeout(40)
def test_ttft_latency_itl_of_designed_stream(t):
    """first token at 450 ms, 119 more 25 ms apart: TTFT 450, request
    latency 3425, ITL 25, every inter-chunk gap 25, OSL 120 from usage"""
    sim, px = warm_proxy(t)
    r, rec = run(t, px, harness.chat_body({"ttft_ms": 450, "tokens": 120, "gap_ms": 25,
                                           "usage": True}), rid="clock-1")
    t.eq(r.status, 200, "status")
    t.eq(rec["error"], None, "record error")
    t.eq(rec["metadata"]["api"], "openai.chat", "api")
    cl = Client(r)
    design = [450 + 25 * k for k in range(120)]
    up = token_brackets(t, rec, cl, design)
    ttft = metric(rec, "time_to_first_token")
    bracket(t, metric(rec, "time_to_first_output_token"), 450, up[0], "time_to_first_output_token")
    lat = bracket(t, metric(rec, "request_latency"), design[-1], cl.end, "request_latency")
    itl = bracket(t, metric(rec, "inter_token_latency"), (design[-1] - up[0]) / 119,
                  (cl.end - design[0]) / 119, "inter_token_latency")
    t.near(itl, (lat - ttft) / 119, 0.01, "ITL by the SPEC formula")
    bracket(t, metric(rec, "time_to_second_token"), design[1] - up[0], up[1] - design[0],
            "time_to_second_token")
    t.near(metric(rec, "output_token_throughput_per_user"), 1000 / itl, 0.01,
           "output_token_throughput_per_user = 1000 / ITL")
    t.eq(metric(rec, "output_sequence_length"), 120, "output_sequence_length")
    t.eq(metric(rec, "output_token_count"), 120, "output_token_count")
    t.eq(metric(rec, "input_sequence_length"), 10, "input_sequence_length")
    t.eq(rec["metadata"]["token_count_source"], "usage", "token_count_source")
    icl = metric(rec, "inter_chunk_latency")
    t.check(isinstance(icl, list), f"inter_chunk_latency is not a list: {icl!r}")
    check_gaps(t, icl, design, up)
    t.eq(rec["metadata"]["token_events"], 120, "token_events")
    t.note(f"bracket widths: TTFT {up[0] - 450:.3f} ms, latency {cl.end - design[-1]:.3f} ms")


@timeout(30)
def test_reasoning_first_ttfo_minus_ttft(t):
    """20 reasoning tokens 20 ms apart, then the answer: TTFT at the first
    reasoning token, TTFO 400 ms later, reasoning_latency 400"""
    sim, px = warm_proxy(t)
    r, rec = run(t, px, harness.chat_body({"ttft_ms": 200, "reasoning_tokens": 20, "tokens": 10,
                                           "gap_ms": 20, "usage": True}))
    t.eq(r.status, 200, "status")
    cl = Client(r)
    up = token_brackets(t, rec, cl, [200 + 20 * k for k in range(30)])
    ttft = metric(rec, "time_to_first_token")
    ttfo = bracket(t, metric(rec, "time_to_first_output_token"), 600, cl.first(b"tok0 "),
                   "time_to_first_output_token")
    t.check(cl.first(b"think0 ") == up[0], "the first token event is reasoning")
    bracket(t, ttfo - ttft, 600 - up[0], cl.first(b"tok0 ") - 200, "TTFO - TTFT")
    t.near(metric(rec, "reasoning_latency"), ttfo - ttft, 0.01, "reasoning_latency = TTFO - TTFT")
    t.eq(metric(rec, "reasoning_token_count"), 20, "reasoning_token_count")
    t.eq(metric(rec, "output_token_count"), 10, "output_token_count")
    t.eq(metric(rec, "output_sequence_length"), 30, "output_sequence_length")
    t.eq(rec["metadata"]["token_count_source"], "usage", "token_count_source")
    bracket(t, metric(rec, "request_latency"), 200 + 29 * 20, cl.end, "request_latency")


@timeout(30)
def test_multi_token_events_icl_vs_itl(t):
    """3 tokens per event every 90 ms: inter-chunk gaps are 90 ms, ITL is
    (request_latency - TTFT) / (OSL - 1) = 810 / 29 ms per token"""
    sim, px = warm_proxy(t)
    r, rec = run(t, px, harness.chat_body({"ttft_ms": 100, "tokens": 30, "tokens_per_event": 3,
                                           "gap_ms": 90, "usage": True}))
    t.eq(r.status, 200, "status")
    cl = Client(r)
    design = [100 + 90 * k for k in range(10)]
    up = token_brackets(t, rec, cl, design)
    icl = metric(rec, "inter_chunk_latency")
    t.check(isinstance(icl, list) and len(icl) == 9, f"inter_chunk_latency: {icl!r}, want 9 gaps")
    check_gaps(t, icl, design, up)
    t.eq(metric(rec, "output_sequence_length"), 30, "output_sequence_length")
    t.eq(rec["metadata"]["token_events"], 10, "token_events")
    ttft = metric(rec, "time_to_first_token")
    rl = bracket(t, metric(rec, "request_latency"), design[-1], cl.end, "request_latency")
    t.near(metric(rec, "inter_token_latency"), (rl - ttft) / 29, 0.01, "ITL by the SPEC formula")
    # 29 token intervals over the 810 ms between the first and last event
    bracket(t, metric(rec, "inter_token_latency"), (design[-1] - up[0]) / 29,
            (cl.end - design[0]) / 29, "inter_token_latency")


@timeout(30)
def test_role_only_chunk_does_not_stop_ttft(t):
    """the role-only first chunk (sent with the headers) is an event but not
    a token event: TTFT is the first content token, 300 ms later"""
    sim, px = warm_proxy(t)
    r, rec = run(t, px, harness.chat_body({"ttft_ms": 300, "tokens": 5, "gap_ms": 10,
                                           "role_chunk": True}))
    t.eq(r.status, 200, "status")
    t.check(b'"role":"assistant"' in harness.sse_events(r.body)[0], "first event is not the role chunk")
    t.check(b'"content":"tok' not in harness.sse_events(r.body)[0], "role chunk carries content")
    cl = Client(r)
    role_at = cl.first(b'"role":"assistant"')
    bracket(t, timeline(rec, "first_event"), 0, role_at, "first_event (the role chunk)")
    t.check(role_at < 300, f"the client had the role chunk at {role_at:.1f} ms, "
                           "not before the first token")
    token_brackets(t, rec, cl, [300 + 10 * k for k in range(5)])
    t.near(timeline(rec, "first_token"), metric(rec, "time_to_first_token"), 0.01,
           "first_token boundary = TTFT")
    t.eq(rec["metadata"]["token_events"], 5, "token_events")
    t.eq(rec["metadata"]["events"], 8, "events (role, 5 tokens, finish, [DONE])")


def test_non_streaming_latency_only(t):
    """a JSON (non-streaming) response: request_latency, token counts from
    usage, and no TTFT/TTFO/ITL/inter-chunk metrics"""
    sim, px = warm_proxy(t)
    r, rec = run(t, px, harness.chat_body({"ttft_ms": 200, "tokens": 10, "gap_ms": 10},
                                          stream=False))
    t.eq(r.status, 200, "status")
    t.eq(r.json()["object"], "chat.completion", "response object")
    t.eq(rec["metadata"]["stream"], False, "metadata.stream")
    # the whole body leaves the sim at t_start + 200 + 9 * 10 or later
    rs = timeline(rec, "request_sent")
    t.check(rs is not None and rs >= 0, f"request_sent {rs}")
    bracket(t, metric(rec, "request_latency"), 290, Client(r).end, "request_latency")
    for tag in ("time_to_first_token", "time_to_second_token", "time_to_first_output_token",
                "inter_token_latency", "inter_chunk_latency", "output_token_throughput_per_user"):
        t.check(tag not in rec["metrics"], f"{tag} present for a non-streaming response")
    t.eq(metric(rec, "output_sequence_length"), 10, "output_sequence_length")
    t.eq(rec["metadata"]["token_count_source"], "usage", "token_count_source")


def test_midstream_error_recorded(t):
    """an error event after 5 tokens (HTTP 200) makes the request an error"""
    sim, px = warm_proxy(t)
    r, rec = run(t, px, harness.chat_body({"tokens": 20, "gap_ms": 5, "error_after": 5}))
    t.eq(r.status, 200, "status")
    t.check(b'"error"' in r.body, "error event not forwarded")
    t.eq(rec["metadata"]["status"], 200, "metadata.status")
    t.check(rec.get("error") is not None, "record has no error")
    t.eq(rec["metadata"]["token_events"], 5, "token_events before the error")


def test_truncated_stream_recorded(t):
    """upstream closes mid-body after 5 events: error type "truncated", and
    the client's body is cut (not completed)"""
    sim, px = warm_proxy(t)
    r, rec = run(t, px, harness.chat_body({"tokens": 20, "gap_ms": 5, "truncate_after": 5}))
    t.eq(r.status, 200, "status")
    t.check(not r.complete, "client saw a complete body from a truncated upstream")
    t.check(rec.get("error") is not None, "record has no error")
    t.eq(rec["error"].get("type"), "truncated", "error.type")


def test_upstream_reset_mid_stream_recorded(t):
    """upstream sends RST after 5 events: the client's body is cut and the
    record is an error"""
    sim, px = warm_proxy(t)
    r, rec = run(t, px, harness.chat_body({"tokens": 20, "gap_ms": 5, "reset_after": 5}))
    t.eq(r.status, 200, "status")
    t.check(not r.complete, "client saw a complete body from a reset upstream")
    t.check(r.body.count(b'"content":"tok') == 5, "the 5 events before the reset did not all arrive")
    t.check(rec.get("error") is not None, "record has no error")
    t.eq(rec["error"].get("code"), 502, "error.code")
    t.eq(rec["metadata"]["token_events"], 5, "token_events")


def test_missing_terminal_marker_truncated(t):
    """a well-framed chunked body without data: [DONE] is a truncated stream"""
    sim, px = warm_proxy(t)
    r, rec = run(t, px, harness.chat_body({"tokens": 5, "gap_ms": 5, "drop_terminal": True}))
    t.eq(r.status, 200, "status")
    t.check(r.complete, "body incomplete")
    t.check(b"[DONE]" not in r.body, "sim sent [DONE] anyway")
    t.check(rec.get("error") is not None, "record has no error")
    t.eq(rec["error"].get("type"), "truncated", "error.type")


@timeout(40)
def test_client_observed_ttft_matches_record(t):
    """the record's TTFT lies between the designed 120 ms and the client's
    own TTFT (send -> recv() of the first token event), for 7 requests; how
    close the two are (the proxy's overhead) is noted, and measured under
    load by bench/run.sh (ttft), not asserted here"""
    sim = t.sim()
    px = t.proxy(sim.url)
    diffs = []
    for i in range(7):
        rid = f"ttft-{i}"
        c = px.conn()
        raw = build_request("POST", "/v1/chat/completions",
                            harness.chat_body({"ttft_ms": 120, "tokens": 3, "gap_ms": 10}),
                            headers=[("X-Request-Id", rid)])
        t_send = c.send(raw)
        r = c.response("POST")
        c.close()
        t.eq(r.status, 200, "status")
        i0 = r.body.find(b'"content":"tok0 ')
        t.check(i0 >= 0, "first token not in the body")
        end = r.body.find(b"\n\n", i0) + 1
        client_ttft = (r.body_arrival_ns(end) - t_send) / 1e6
        rec = harness.wait_until(lambda: [x for x in px.records()
                                          if x["metadata"].get("x_request_id") == rid],
                                 5 * t.slow, what=f"record {rid}")[0]
        ttft = bracket(t, metric(rec, "time_to_first_token"), 120, client_ttft,
                       f"time_to_first_token of {rid}")
        diffs.append(client_ttft - ttft)
    med = statistics.median(diffs)
    t.note(f"client TTFT - record TTFT: median {med:.3f} ms; all {[round(d, 3) for d in diffs]}")


# ---- one designed stream per API dialect -------------------------------------

SIMOPTS = {"ttft_ms": 100, "gap_ms": 20, "tokens": 6, "reasoning_tokens": 4, "usage": True}
MSG = [{"role": "user", "content": "hi"}]

DIALECTS = {
    # name: (path, body without "sim", api, reasoning separate in usage?)
    "openai_chat": ("/v1/chat/completions",
                    {"model": "m", "messages": MSG, "stream": True}, "openai.chat", "usage"),
    "openai_completions": ("/v1/completions",
                           {"model": "m", "prompt": "hi", "stream": True},
                           "openai.completions", "usage"),
    "openai_responses": ("/v1/responses",
                         {"model": "m", "input": "hi", "stream": True,
                          "sim_extra": {"reasoning_field": "reasoning_text"}},
                         "openai.responses", "usage"),
    "anthropic_messages": ("/v1/messages",
                           {"model": "m", "max_tokens": 64, "messages": MSG, "stream": True},
                           "anthropic.messages", "usage+estimate"),
    "gemini": ("/v1beta/models/gemini-test:streamGenerateContent?alt=sse",
               {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, "gemini", "usage"),
    "ollama_chat": ("/api/chat", {"model": "m", "messages": MSG}, "ollama", "usage+estimate"),
    "ollama_generate": ("/api/generate", {"model": "m", "prompt": "hi"}, "ollama",
                        "usage+estimate"),
    "tgi": ("/generate_stream", {"inputs": "hi", "parameters": {"max_new_tokens": 10}},
            "tgi", "usage+estimate"),
}


def dialect_case(path, body, api, source):
    def test(t):
        sim, px = warm_proxy(t)
        body2 = {k: v for k, v in body.items() if k != "sim_extra"}
        body2["sim"] = dict(SIMOPTS, **body.get("sim_extra", {}))
        r, rec = run(t, px, body2, path=path)
        t.eq(r.status, 200, "status")
        t.check(r.complete, "body incomplete")
        md = rec["metadata"]
        t.eq(rec["error"], None, "record error")
        t.eq(md["api"], api, "api")
        t.eq(md["stream"], True, "stream")
        t.eq(md["token_events"], 10, "token_events")
        t.eq(md["reasoning_events"], 4, "reasoning_events")
        cl = Client(r)
        token_brackets(t, rec, cl, [100 + 20 * k for k in range(10)])
        bracket(t, metric(rec, "time_to_first_output_token"), 180, cl.first(b"tok0 "),
                "time_to_first_output_token")
        bracket(t, metric(rec, "request_latency"), 100 + 9 * 20, cl.end, "request_latency")
        t.eq(metric(rec, "output_sequence_length"), 10, "output_sequence_length")
        t.eq(md["token_count_source"], source, "token_count_source")
        if source == "usage":
            t.eq(metric(rec, "reasoning_token_count"), 4, "reasoning_token_count")
            t.eq(metric(rec, "output_token_count"), 6, "output_token_count")
        else:
            rc = metric(rec, "reasoning_token_count")
            t.check(rc is not None and 1 <= rc <= 9,
                    f"estimated reasoning_token_count {rc} not within 1..9")
            t.eq(metric(rec, "output_token_count") + rc, 10, "output + reasoning tokens")
        if api != "tgi":
            # TGI's stream reports no prompt token count (details has
            # generated_tokens only), so ISL is absent there
            t.eq(metric(rec, "input_sequence_length"), 10, "input_sequence_length")
        else:
            t.eq(metric(rec, "input_sequence_length"), None, "input_sequence_length (absent)")
    return test


for _name, (_p, _b, _api, _src) in DIALECTS.items():
    _fn = dialect_case(_p, _b, _api, _src)
    _fn.__name__ = f"test_dialect_{_name}_designed_stream"
    _fn.__doc__ = f"{_api} stream with 4 reasoning + 6 answer tokens: counts and clock"
    globals()[_fn.__name__] = _fn
