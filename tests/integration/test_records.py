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
