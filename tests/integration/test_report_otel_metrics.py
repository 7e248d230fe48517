"""OpenTelemetry GenAI metrics on /metrics (docs/metrics.md, "OpenTelemetry
GenAI metrics"): the gen_ai_* families in OpenTelemetry's Prometheus
translation, with the conventions' bucket boundaries and attributes, their
counts and sums equal to tokentap's own families over the same traffic,
`promtool check metrics` clean on a live scrape, the model-label cap, and
--metrics-semconv both | tokentap | otel."""
import os
import re
import subprocess

import harness
from harness import chat_body
from test_metrics import promtool_check
from test_slo import samples, scrape, total

TTFT_B = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
          2.5, 5.0, 7.5, 10.0]
TPOT_B = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5]
DUR_B = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
         40.96, 81.92]
TOK_B = [4 ** i for i in range(14)]
FAMS = {
    "gen_ai_server_time_to_first_token_seconds": TTFT_B,
    "gen_ai_server_time_per_output_token_seconds": TPOT_B,
    "gen_ai_server_request_duration_seconds": DUR_B,
    "gen_ai_client_operation_time_to_first_chunk_seconds": DUR_B,
    "gen_ai_client_operation_time_per_output_chunk_seconds": DUR_B,
    "gen_ai_client_token_usage": TOK_B,
}
LABELS = {"upstream", "gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"}


def traffic(px):
    """3 streaming chats, 1 non-streaming chat, 1 anthropic stream, 1 failure"""
    sim = {"ttft_ms": 30, "tokens": 6, "gap_ms": 4, "prompt_tokens": 40}
    for _ in range(3):
        r = px.post("/v1/chat/completions", chat_body(sim, stream_options={"include_usage": True}))
        assert r.status == 200, r.status
    r = px.post("/v1/chat/completions", chat_body(sim, stream=False))
    assert r.status == 200, r.status
    r = px.post("/v1/messages", {"model": "claude-x", "max_tokens": 16, "stream": True,
                                 "messages": [{"role": "user", "content": "hi"}], "sim": sim})
    assert r.status == 200, r.status
    r = px.post("/v1/chat/completions", chat_body({"status": 503}))
    assert r.status == 503, r.status


def test_otel_genai_families_match_tokentap(t):
    """--metrics-semconv both: every gen_ai_* family is a histogram with the
    conventions' boundaries and attributes; its counts and sums equal
    tokentap's families over the same requests; promtool is clean"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--metrics-semconv", "both"])
    traffic(px)
    px.records(6)
    text = scrape(t, px)
    promtool_check(t, text, "a scrape with the gen_ai families")
    for fam, bounds in FAMS.items():
        t.check(f"# TYPE {fam} histogram\n" in text, f"{fam} typed histogram")
        bk = samples(text, fam + "_bucket")
        t.check(bk, f"{fam} has samples")
        for lb, _ in bk:
            want = LABELS | {"le"} | ({"gen_ai_token_type"} if fam.endswith("usage") else set())
            t.eq(set(lb), want, f"{fam} label names")
        les = []
        for lb, _ in bk:
            if lb["le"] not in les:
                les.append(lb["le"])
        t.eq([float(x) for x in les[:-1]], bounds, f"{fam} bucket boundaries")
        t.eq(les[-1], "+Inf", f"{fam} +Inf bucket")
    ops = {(lb["gen_ai_operation_name"], lb["gen_ai_provider_name"], lb["gen_ai_request_model"])
           for lb, _ in samples(text, "gen_ai_client_token_usage_count")}
    t.eq(ops, {("chat", "openai", "sim-model"), ("chat", "anthropic", "claude-x")},
         "operation, provider and model attributes")
    # the same observations as tokentap's own families
    pairs = [("gen_ai_server_time_to_first_token_seconds", "tokentap_time_to_first_token_seconds"),
             ("gen_ai_server_time_per_output_token_seconds", "tokentap_inter_token_latency_seconds"),
             ("gen_ai_server_request_duration_seconds", "tokentap_request_latency_seconds"),
             ("gen_ai_client_operation_time_per_output_chunk_seconds",
              "tokentap_inter_chunk_latency_seconds")]
    for g, tt in pairs:
        t.eq(total(text, g + "_count"), total(text, tt + "_count"), f"{g} count = {tt}")
        t.near(total(text, g + "_sum"), total(text, tt + "_sum"), 1e-9, f"{g} sum = {tt}")
    t.eq(total(text, "gen_ai_server_time_to_first_token_seconds_count"), 4,
         "TTFT: the 4 ok streaming requests")
    t.eq(total(text, "gen_ai_server_request_duration_seconds_count"), 5,
         "request duration: the 5 ok requests (the 503 is not a success)")
    t.eq(total(text, "gen_ai_client_operation_time_to_first_chunk_seconds_count"), 4,
         "first chunk: streaming only")
    t.eq(total(text, "gen_ai_client_token_usage_sum", gen_ai_token_type="input"),
         total(text, "tokentap_input_sequence_length_tokens_sum"), "input tokens = ISL sum")
    t.eq(total(text, "gen_ai_client_token_usage_sum", gen_ai_token_type="output",
               gen_ai_provider_name="openai"),
         total(text, "tokentap_output_sequence_length_tokens_sum", api="openai.chat"),
         "output tokens = OSL sum")
    # a chunk is any stream event (the simulator sends its role/message_start
    # event at once): the first chunk comes no later than the first token
    ttfc = {tuple(sorted(lb.items())): v
            for lb, v in samples(text, "gen_ai_client_operation_time_to_first_chunk_seconds_sum")}
    ttft = {tuple(sorted(lb.items())): v
            for lb, v in samples(text, "gen_ai_server_time_to_first_token_seconds_sum")}
    t.eq(sorted(ttfc), sorted(ttft), "first chunk and first token: same label sets")
    for k, v in ttfc.items():
        t.check(0 < v <= ttft[k], f"first chunk {v} s after 0 and by the first token {ttft[k]} s")


def test_otel_genai_model_label_is_capped(t):
    """gen_ai_request_model takes the aggregator's bounded model label"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--model-label-cap", "2",
                                               "--metrics-semconv", "otel"])
    for k in range(5):
        r = px.post("/v1/chat/completions", chat_body({"tokens": 2}, model=f"m{k}"))
        t.eq(r.status, 200, "status")
    px.records(5)
    text = scrape(t, px)
    promtool_check(t, text, "a capped scrape")
    models = {lb["gen_ai_request_model"]
              for lb, _ in samples(text, "gen_ai_server_request_duration_seconds_count")}
    t.eq(models, {"m0", "m1", "__other__"}, "two models, then __other__")


def test_metrics_semconv_switch(t):
    """default and --metrics-semconv tokentap: no gen_ai_*; otel: no
    tokentap_*; both promtool-clean; a bad value exits 2 naming the flag"""
    sim = t.sim()
    for mode, has, hasnt in ((None, "tokentap_requests_total", "gen_ai_"),
                             ("tokentap", "tokentap_requests_total", "gen_ai_"),
                             ("otel", "gen_ai_server_request_duration_seconds", "tokentap_")):
        px = t.proxy(sim.url, admin="auto",
                     extra=["--metrics-semconv", mode] if mode else [])
        r = px.post("/v1/chat/completions", chat_body({"tokens": 3}))
        t.eq(r.status, 200, "status")
        px.records(1)
        text = scrape(t, px)
        promtool_check(t, text, f"--metrics-semconv {mode}")
        t.check(has in text, f"{mode}: {has} present")
        t.check(not re.search(r"^(# TYPE )?" + hasnt, text, re.M), f"{mode}: no {hasnt} families")
    p = subprocess.run([os.path.join(t.build, "tokentap"), "--upstream", sim.url,
                        "--metrics-semconv", "opentelemetry"], capture_output=True, timeout=30)
    t.eq(p.returncode, 2, "bad --metrics-semconv exits 2")
    t.check(b"metrics-semconv" in p.stderr, "names the flag: " + p.stderr.decode()[-300:])


def test_otel_genai_merged_across_workers(t):
    """--workers 2: the scrape merges both workers' gen_ai families; the
    model cap holds on the merged view (each worker admits its own first
    models) and the counts still equal tokentap's own families"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--workers", "2", "--model-label-cap", "2",
                                               "--metrics-semconv", "both"])
    for k in range(24):                 # a new connection each: both workers see some
        r = px.post("/v1/chat/completions", chat_body({"tokens": 3}, model=f"m{k % 6}"))
        t.eq(r.status, 200, "status")
    px.records(24)
    text = scrape(t, px)
    promtool_check(t, text, "a merged scrape")
    got = {lb["gen_ai_request_model"]
           for lb, _ in samples(text, "gen_ai_server_request_duration_seconds_count")}
    want = {lb["model"] for lb, _ in samples(text, "tokentap_request_latency_seconds_count")}
    t.eq(got, want, "gen_ai_request_model values = tokentap's model values")
    t.check(len(got) <= 3 and "__other__" in got, f"cap 2 + __other__: {got}")
    for m in got:
        t.eq(total(text, "gen_ai_server_request_duration_seconds_count", gen_ai_request_model=m),
             total(text, "tokentap_request_latency_seconds_count", model=m), f"count of {m}")
    t.eq(total(text, "gen_ai_server_request_duration_seconds_count"), 24, "all 24")
