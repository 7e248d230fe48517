"""Records: one line per request, and SIGHUP reopens the file so that log
rotation (rename, then SIGHUP) loses nothing (SPEC 7 and 9)."""
import json
import os
import signal

import harness


def count_lines(path):
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def test_sighup_reopens_record_file(t):
    """rename the record file, SIGHUP: earlier records stay in the renamed
    file, later ones go to a new file at the configured path, each complete"""
    sim = t.sim()
    px = t.proxy(sim.url)
    body = harness.chat_body({"tokens": 3, "gap_ms": 1, "ttft_ms": 1})
    for i in range(3):
        t.eq(px.post("/v1/chat/completions", body,
                     headers=[("X-Request-Id", f"before-{i}")]).status, 200, "status")
    px.records(3)
    rotated = px.record_path + ".1"
    os.rename(px.record_path, rotated)
    px.signal(signal.SIGHUP)
    # the reopen happens on the writer thread: wait until the new file exists
    harness.wait_until(lambda: os.path.exists(px.record_path), 5 * t.slow,
                       what="a new record file after SIGHUP")
    for i in range(2):
        t.eq(px.post("/v1/chat/completions", body,
                     headers=[("X-Request-Id", f"after-{i}")]).status, 200, "status")
    new = px.records(2)
    t.eq([r["metadata"]["x_request_id"] for r in new], ["after-0", "after-1"],
         "records in the new file")
    with open(rotated) as f:
        old = [json.loads(line) for line in f]
    t.eq([r["metadata"]["x_request_id"] for r in old], ["before-0", "before-1", "before-2"],
         "records in the rotated file")
    t.eq(px.stop(), 0, "exit status")
    t.eq(count_lines(px.record_path), 2, "lines in the new file after exit")


def test_sse_comment_lines_change_no_record(t):
    """the sim's "stamp" puts a comment line ": t=N" before every SSE event
    (the bench's one-way delay); a comment is no field, so the client gets
    those lines unchanged and the record of each dialect is the one of the
    same stream without them"""
    sim = t.sim()
    px = t.proxy(sim.url)
    sim_opts = {"tokens": 4, "reasoning_tokens": 2, "gap_ms": 1, "ttft_ms": 1}
    routes = [
        ("/v1/chat/completions", harness.chat_body(dict(sim_opts))),
        ("/v1/messages", {"model": "claude", "max_tokens": 64, "stream": True,
                          "messages": [{"role": "user", "content": "hi"}],
                          "sim": dict(sim_opts)}),
        ("/v1beta/models/g:streamGenerateContent?alt=sse",
         {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
          "sim": dict(sim_opts)}),
        ("/generate_stream", {"inputs": "hi", "sim": dict(sim_opts)}),
    ]
    keep = ("api", "status", "finish_reason", "events", "token_events",
            "reasoning_events", "answer_events", "parse_errors")
    n = 0
    for path, body in routes:
        got = {}
        for stamp in (False, True):
            b = json.loads(json.dumps(body))
            b["sim"]["stamp"] = stamp
            r = px.post(path, b, headers=[("X-Request-Id", f"{path}-{stamp}")])
            t.eq(r.status, 200, f"{path} status")
            lines = [ln for ln in r.body.split(b"\n") if ln.startswith(b": t=")]
            if stamp:
                t.check(len(lines) >= 6, f"{path}: {len(lines)} stamp lines reached the client")
            else:
                t.eq(len(lines), 0, f"{path}: stamp lines without the option")
            rec = px.records(n + 1)[n]
            n += 1
            m = rec["metadata"]
            got[stamp] = ({k: m.get(k) for k in keep},
                          rec["metrics"]["output_token_count"]["value"],
                          rec["error"])
        t.check(got[True][0]["token_events"] == 6 and got[True][1] > 0,
                f"{path}: tokens counted ({got[True]})")
        t.eq(got[True], got[False], f"{path}: record with comment lines = without")
        t.eq(got[True][2], None, f"{path}: no error")


@harness.timeout(150)
def test_fixture_records_same_for_every_split(t):
    """every captured stream, replayed with every split of its bytes into
    chunks (whole, random pieces, one byte a chunk), gives the same record
    facts: what was decoded does not depend on how the upstream's writes
    fell"""
    from test_bytes_identical import SPLITS, fixture_files, route_for
    keep = ("api", "model", "stream", "status", "finish_reason", "token_count_source",
            "usage", "events", "token_events", "reasoning_events", "answer_events",
            "parse_errors", "bytes_out")
    files = fixture_files()
    sim = t.sim()
    px = t.proxy(sim.url)
    n = 0
    problems = []
    for path in files:
        api_path, base = route_for(path)
        facts = {}
        for split, seed in SPLITS:
            body = dict(base)
            body["sim"] = {"replay": path, "ttft_ms": 0, "gap_ms": 0,
                           "split": split, "seed": seed}
            r = px.post(api_path, body)
            rec = px.records(n + 1)[n]
            n += 1
            m = rec["metadata"]
            facts[(split, seed)] = (
                r.status, {k: m.get(k) for k in keep}, rec["error"],
                {k: v.get("value") for k, v in rec["metrics"].items()
                 if isinstance(v, dict) and v.get("unit") == "tokens"})
        first = facts[SPLITS[0]]
        for s in SPLITS[1:]:
            if facts[s] != first:
                problems.append(f"{os.path.basename(path)} split={s[0]} seed={s[1]}: "
                                f"{facts[s]} != whole: {first}")
    t.check(not problems, f"{len(problems)} replays differ: " + "; ".join(problems[:3]))
    t.note(f"{len(files)} fixtures x {len(SPLITS)} splits, {n} records")


def test_many_chunks_in_one_read_decoded_in_order(t):
    """a body read that carries more chunks than the proxy decodes in place
    (pieces of 23 bytes, events cut anywhere, sent in one write once the
    client has the head) gives the record of the same stream sent as one
    chunk: the parts kept in place and the parts copied are decoded in the
    order they came"""
    import threading
    events = [{"id": "c", "object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": {"content": f"w{i} "},
                            "finish_reason": None}]} for i in range(12)]
    events.append({"id": "c", "object": "chat.completion.chunk", "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    events.append({"id": "c", "object": "chat.completion.chunk", "model": "m",
                   "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 12,
                                            "total_tokens": 15}})
    sse = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    sse += b"data: [DONE]\n\n"
    first, rest = sse[:40], sse[40:]
    pieces = [rest[i:i + 23] for i in range(0, len(rest), 23)]
    t.check(len(pieces) > 16 + 8, f"{len(pieces)} pieces")
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")

    def chunk(b):
        return b"%x\r\n" % len(b) + b + b"\r\n"

    go_on = threading.Event()           # the client has the head: the next
                                        # bytes are a body read of their own
    def h(sock, req, fake):
        if b"many" in req:
            sock.sendall(head + chunk(first))
            go_on.wait(10)
            sock.sendall(b"".join(chunk(p) for p in pieces) + b"0\r\n\r\n")
        else:
            sock.sendall(head + chunk(sse) + b"0\r\n\r\n")

    fake = t.fake(h)
    px = t.proxy(fake.url)
    body = json.dumps({"model": "m", "stream": True,
                       "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    got = {}
    for name in ("one", "many"):
        c = px.conn()
        c.send(harness.build_request("POST", "/v1/chat/completions", body,
                                     headers=[("X-Request-Id", name)]))
        r = c.read_head()
        t.eq(r.status, 200, f"{name}: status")
        if name == "many":
            go_on.set()
        c.read_body(r, method="POST")
        c.close()
        t.eq(r.body, sse, f"{name}: the client's body")
        rec = px.records(len(got) + 1)[len(got)]
        m = rec["metadata"]
        got[name] = ({k: m.get(k) for k in ("finish_reason", "usage", "events",
                                            "token_events", "answer_events",
                                            "parse_errors", "bytes_out")},
                     rec["metrics"]["output_token_count"]["value"], rec["error"])
    t.eq(got["one"][0]["token_events"], 12, "token events of the whole stream")
    t.eq(got["one"][0]["parse_errors"], 0, "parse errors")
    t.eq(got["many"], got["one"], f"record of {len(pieces)} chunks in a read = of one chunk")
    t.eq(fake.errors, [], "fake upstream errors")


def llamacpp_prompt_list(sock, req, fake):
    """llama.cpp's /v1/completions for a list of two prompts: each prompt's
    last chunk carries that prompt's own usage (16 tokens each)"""
    def chunk(i, text, fin, usage=None):
        d = {"choices": [{"text": text, "index": i, "logprobs": None,
                          "finish_reason": fin}],
             "created": 1, "model": "m-list", "object": "text_completion"}
        if usage:
            d["usage"] = usage
        return b"data: " + json.dumps(d).encode() + b"\n\n"
    events = []
    for k in range(16):
        events.append(chunk(0, f"a{k}", None))
        events.append(chunk(1, f"b{k}", None))
    events.append(chunk(1, "", "length", {"completion_tokens": 16, "prompt_tokens": 7,
                                          "total_tokens": 23}))
    events.append(chunk(0, "", "length", {"completion_tokens": 16, "prompt_tokens": 5,
                                          "total_tokens": 21}))
    events.append(b"data: [DONE]\n\n")
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    for e in events:
        sock.sendall(b"%x\r\n%s\r\n" % (len(e), e))
    sock.sendall(b"0\r\n\r\n")


def test_usage_per_prompt_summed(t):
    """a list of prompts whose usage comes per prompt (llama.cpp's
    /v1/completions): the record counts the tokens of every prompt, 16 + 16
    out and 5 + 7 in, as AIPerf would"""
    fake = t.fake(llamacpp_prompt_list)
    px = t.proxy(fake.url)
    r = px.post("/v1/completions", {"model": "m-list", "prompt": ["one", "two"],
                                    "stream": True, "max_tokens": 16})
    t.eq(r.status, 200, "status")
    rec = px.records(1)[0]
    t.eq(harness.metric(rec, "output_sequence_length"), 32, "output_sequence_length")
    t.eq(harness.metric(rec, "input_sequence_length"), 12, "input_sequence_length")
    t.eq(rec["metadata"]["api"], "openai.completions", "api")
