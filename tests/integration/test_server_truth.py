"""Server truth (SPEC 5 and 11): llama.cpp's native API through the proxy,
every choice counted, the server's own timings and cached tokens beside
tokentap's clock, TTFT decomposed, the upstream's error types kept, and the
report keeping cancelled requests apart from errors."""
import json
import os

import harness
from test_report import report
from test_slo import scrape, total


def llama_body(sim, stream=True, **extra):
    d = {"prompt": "Case: the history of Rome", "n_predict": 16, "stream": stream, "sim": sim}
    d.update(extra)
    return d


def metric(rec, name):
    m = rec["metrics"].get(name)
    return None if m is None else m["value"]


def test_llamacpp_native_stream_is_success_on_every_route(t):
    """/completions (no /v1), /completion and /infill, streamed: each a
    success with the server's own counts, the timings under metadata.server
    and TTFT split into server prefill and the rest"""
    sim = t.sim()
    px = t.proxy(sim.url)
    sim_opts = {"tokens": 12, "ttft_ms": 40, "gap_ms": 2, "prompt_tokens": 20,
                "cached_tokens": 5}
    routes = ["/completions", "/completion", "/infill"]
    for path in routes:
        r = px.post(path, llama_body(sim_opts))
        t.eq(r.status, 200, f"{path} status")
        t.check(b'"stop":true' in r.body, f"{path}: the summary event reached the client")
    recs = px.records(len(routes))
    for path, rec in zip(routes, recs):
        md = rec["metadata"]
        t.eq(rec["error"], None, f"{path} record error")
        t.eq(md["api"], "llamacpp.completion", f"{path} api")
        t.eq(md["stream"], True, f"{path} stream")
        t.eq(md["finish_reason"], "eos", f"{path} finish_reason")
        t.eq(md["token_count_source"], "usage", f"{path} token_count_source")
        # 12 answer tokens, one per event; the prompt was 20 tokens, 5 cached
        t.eq(metric(rec, "output_sequence_length"), 12, f"{path} OSL")
        t.eq(metric(rec, "input_sequence_length"), 20, f"{path} ISL")
        t.eq(metric(rec, "cached_input_tokens"), 5, f"{path} cached_input_tokens")
        t.eq(md["token_events"], 12, f"{path} token_events")
        t.eq(md["server"], {"prompt_n": 15, "cache_n": 5, "prompt_ms": 40,
                            "predicted_n": 12, "predicted_ms": 22},
             f"{path} metadata.server")
        # the simulator's prefill is its 40 ms first-token delay, measured
        # from the moment it had the request: the client waited at least
        # that long, the rest is the path
        ttft = metric(rec, "time_to_first_token")
        t.eq(metric(rec, "server_prefill_ms"), 40, f"{path} server_prefill_ms")
        outside = metric(rec, "ttft_outside_server_ms")
        t.check(outside is not None, f"{path}: no ttft_outside_server_ms")
        t.check(abs(outside - (ttft - 40)) < 1e-6,
                f"{path}: outside {outside} != TTFT {ttft} - 40")
        t.check(0 <= outside < ttft, f"{path}: outside {outside} not within [0, TTFT {ttft})")
        t.check("server_queue_ms" not in rec["metrics"], f"{path}: llama.cpp reports no queue")


def test_decomposition_openai_chat_and_ollama(t):
    """llama.cpp's /v1/chat/completions (usage chunk with timings and
    cached_tokens) and Ollama (prompt_eval_duration, load_duration as the
    queue): TTFT = server queue + server prefill + outside, per request"""
    sim = t.sim()
    px = t.proxy(sim.url)
    r = px.post("/v1/chat/completions",
                harness.chat_body({"tokens": 6, "ttft_ms": 35, "gap_ms": 2, "prompt_tokens": 42,
                                   "cached_tokens": 12, "timings": True},
                                  stream_options={"include_usage": True}))
    t.eq(r.status, 200, "chat status")
    r = px.post("/api/chat", {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                              "sim": {"tokens": 4, "ttft_ms": 30, "gap_ms": 2}})
    t.eq(r.status, 200, "ollama status")
    chat, oll = px.records(2)
    t.eq(chat["error"], None, "chat error")
    t.eq(chat["metadata"]["usage"], {"input_tokens": 42, "output_tokens": 6,
                                     "reasoning_tokens": 0, "cached_input_tokens": 12},
         "chat usage")
    t.eq(chat["metadata"]["server"]["prompt_ms"], 35, "chat server prompt_ms")
    t.eq(metric(chat, "cached_input_tokens"), 12, "chat cached_input_tokens")
    ttft = metric(chat, "time_to_first_token")
    out = metric(chat, "ttft_outside_server_ms")
    t.check(out is not None and abs(out - (ttft - 35)) < 1e-6 and 0 <= out < ttft,
            f"chat: outside {out} vs TTFT {ttft} - 35")
    t.eq(oll["error"], None, "ollama error")
    srv = oll["metadata"]["server"]
    t.eq(srv["prompt_eval_duration"], 30000000, "ollama prompt_eval_duration (ns)")
    t.eq(srv["load_duration"], 0, "ollama load_duration")
    t.eq(metric(oll, "server_prefill_ms"), 30, "ollama server_prefill_ms")
    t.eq(metric(oll, "server_queue_ms"), 0, "ollama server_queue_ms")
    ttft = metric(oll, "time_to_first_token")
    out = metric(oll, "ttft_outside_server_ms")
    t.check(out is not None and abs(out - (ttft - 30)) < 1e-6 and 0 <= out < ttft,
            f"ollama: outside {out} vs TTFT {ttft} - 30")


def test_llamacpp_native_nonstream_and_error(t):
    """a non-streamed native completion is a success with usage counts; a
    mid-stream llama.cpp error keeps its type"""
    sim = t.sim()
    px = t.proxy(sim.url)
    r = px.post("/completion", llama_body({"tokens": 7, "prompt_tokens": 9}, stream=False))
    t.eq(r.status, 200, "status")
    t.eq(r.json()["tokens_predicted"], 7, "body tokens_predicted")
    r = px.post("/completion", llama_body({"tokens": 10, "error_after": 3, "gap_ms": 1}))
    t.eq(r.status, 200, "status of the stream that fails midway")
    ok, bad = px.records(2)
    t.eq(ok["error"], None, "non-streamed record error")
    t.eq(ok["metadata"]["api"], "llamacpp.completion", "api")
    t.eq(ok["metadata"]["stream"], False, "stream")
    t.eq(metric(ok, "output_sequence_length"), 7, "OSL")
    t.eq(metric(ok, "input_sequence_length"), 9, "ISL")
    t.eq(ok["metadata"]["server"]["predicted_n"], 7, "server predicted_n")
    t.check(bad["error"] is not None, "the failed stream is an error")
    t.eq(bad["error"]["type"], "server_error", "error.type from the upstream's error")
    t.eq(bad["error"]["message"], "simulated mid-stream error", "error.message")


def test_fixture_replays_count_every_choice(t):
    """the captured llama.cpp streams replayed through the proxy: the native
    stream on /completions is a success (16 out, 9 in), and n=2 counts both
    choices' usage (16 + 16 = 32), with choices 2 in the record"""
    d = harness.FIXTURES
    native = os.path.join(d, "llamacpp-b10587-native-completions-stream.sse")
    n2 = os.path.join(d, "llamacpp-b10587-chat-n2-include_usage.sse")
    for f in (native, n2):
        if not os.path.exists(f):
            raise harness.Skip(f"fixture {f} is missing")
    sim = t.sim()
    px = t.proxy(sim.url)
    replay = {"ttft_ms": 0, "gap_ms": 0, "split": "random", "seed": 7}
    r = px.post("/completions", llama_body(dict(replay, replay=native)))
    t.eq(r.status, 200, "native replay status")
    t.eq(r.body, open(native, "rb").read(), "native replay bytes through the proxy")
    r = px.post("/v1/chat/completions",
                harness.chat_body(dict(replay, replay=n2), n=2,
                                  stream_options={"include_usage": True}))
    t.eq(r.status, 200, "n=2 replay status")
    rn, rc = px.records(2)
    t.eq(rn["error"], None, "native record error")
    t.eq(rn["metadata"]["api"], "llamacpp.completion", "native api (told by its events)")
    t.eq(metric(rn, "output_sequence_length"), 16, "native OSL")
    t.eq(metric(rn, "input_sequence_length"), 9, "native ISL")
    t.eq(metric(rn, "cached_input_tokens"), 3, "native cached")
    t.eq(metric(rn, "server_prefill_ms"), 29.724, "native server_prefill_ms")
    t.check("choices" not in rn["metadata"], "one choice: no choices key")
    t.eq(rc["error"], None, "n=2 record error")
    t.eq(metric(rc, "output_sequence_length"), 32, "n=2 OSL (both choices)")
    t.eq(metric(rc, "input_sequence_length"), 19, "n=2 ISL (one prompt)")
    t.eq(rc["metadata"]["choices"], 2, "n=2 choices")
    t.eq(rc["metadata"]["token_events"], 32, "n=2 token events")
    t.eq(rc["metadata"]["server"]["predicted_n"], 32, "n=2 server predicted_n")


def test_metrics_families_server_prefill_and_cached(t):
    """/metrics: tokentap_server_prefill_seconds observes the server's
    prefill, tokentap_cached_input_tokens_total sums the cached tokens"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto")
    for _ in range(3):
        t.eq(px.post("/completion", llama_body({"tokens": 3, "ttft_ms": 30, "gap_ms": 1,
                                                "prompt_tokens": 12, "cached_tokens": 4})).status,
             200, "status")
    px.records(3)
    text = scrape(t, px)
    lab = {"api": "llamacpp.completion"}
    t.eq(total(text, "tokentap_server_prefill_seconds_count", **lab), 3, "prefill count")
    t.check(abs(total(text, "tokentap_server_prefill_seconds_sum", **lab) - 0.09) < 1e-9,
            "prefill sum is 3 x 30 ms")
    t.eq(total(text, "tokentap_server_prefill_seconds_bucket", le="0.025", **lab), 0,
         "no prefill under 25 ms")
    t.eq(total(text, "tokentap_server_prefill_seconds_bucket", le="0.05", **lab), 3,
         "all prefills under 50 ms")
    t.eq(total(text, "tokentap_cached_input_tokens_total", **lab), 12, "cached tokens 3 x 4")
    t.eq(total(text, "tokentap_requests_total", outcome="ok", **lab), 3, "ok requests")
    t.eq(total(text, "tokentap_requests_total", outcome="error", **lab), 0, "no errors")


def llama_error_upstream(sock, req, fake):
    body = json.dumps({"error": {"code": 400, "type": "exceed_context_size_error",
                                 "message": "the request exceeds the available context size",
                                 "n_prompt_tokens": 5000, "n_ctx": 4096}}).encode()
    sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)


def test_upstream_error_type_kept_and_report_groups(t):
    """llama.cpp's exceed_context_size_error is the record's error type; the
    report lists errors by type, a cancelled request among them (499)"""
    up = harness.FakeUpstream(t, llama_error_upstream)
    px = t.proxy(up.url)
    r = px.post("/v1/chat/completions", harness.chat_body({}, stream=True))
    t.eq(r.status, 400, "status forwarded")
    rec = px.records(1)[0]
    t.eq(rec["error"]["type"], "exceed_context_size_error", "error.type")
    t.eq(rec["error"]["code"], 400, "error.code")
    t.eq(rec["error"]["message"], "the request exceeds the available context size",
         "error.message")
    up.stop()

    # a record file: that error, one ok request, one cancelled request
    ok = dict(rec, error=None)
    ok["metadata"] = dict(rec["metadata"], status=200, x_request_id="ok")
    cancelled = dict(rec, error={"code": 499, "type": "cancelled", "message": "client gone"})
    cancelled["metadata"] = dict(rec["metadata"], was_cancelled=True, x_request_id="gone")
    path = os.path.join(t.tmp, "mixed.jsonl")
    with open(path, "w") as f:
        for x in (rec, ok, cancelled):
            f.write(json.dumps(x) + "\n")
    p = report(t, path)
    out = p.stdout
    # a cancellation is an error (code 499, as AIPerf records it): the
    # header, the Error Request Count and the rows by type agree
    t.check("3 records (1 ok, 2 errors incl. 1 cancelled)" in out, f"header: {out[:300]!r}")
    t.check("Cancelled: 1 of the 2 errors" in out, "cancelled named among the errors")
    t.check("exceed_context_size_error" in out, "the error listed by its type")
    rows = [ln for ln in out.splitlines() if ln.strip("\u2502 ").startswith("cancelled")]
    t.eq(len(rows), 1, "cancelled is an error type row")
    t.check("499" in rows[0], f"with code 499: {rows!r}")
    cnt = next(ln for ln in out.splitlines() if "Error Request Count" in ln)
    t.eq(cnt.strip("\u2502 ").split()[-1], "2", "Error Request Count")
