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
