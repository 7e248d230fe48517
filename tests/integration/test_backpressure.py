"""Backpressure: a slow reader stops the upstream from being read (SPEC 4)."""
import json
import os
import time

import harness
from harness import build_request, timeout

MIB = 1024 * 1024


def make_big_stream(path, total):
    """an SSE chat stream of about <total> bytes in ~10 KiB events"""
    text = "x" * 10000
    ev = ("data: " + json.dumps({"id": "big", "object": "chat.completion.chunk",
                                 "choices": [{"index": 0, "delta": {"content": text}}]})
          + "\n\n").encode()
    n = total // len(ev) + 1
    data = ev * n + b"data: [DONE]\n\n"
    with open(path, "wb") as f:
        f.write(data)
    return data


@timeout(90)
def test_slow_reader_bounded_memory(t):
    """a client that stops reading a 48 MiB stream for 3 s: the proxy's RSS
    stays within baseline + 8 MiB (buffer_bytes 256 KiB per direction), and
    once reading resumes the whole body arrives intact"""
    path = os.path.join(t.tmp, "big.sse")
    want = make_big_stream(path, 48 * MIB)
    sim = t.sim()
    # AddressSanitizer keeps freed memory in a quarantine (256 MiB by
    # default), which RSS would count as growth: keep it small here
    px = t.proxy(sim.url, asan="quarantine_size_mb=1")
    # warm up: one small stream, so the baseline includes the normal
    # per-request allocations
    r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 20, "ttft_ms": 1, "gap_ms": 0}))
    t.eq(r.status, 200, "warm-up status")
    time.sleep(0.2)
    base = px.rss_kib()

    c = px.conn(timeout=30)
    c.send(build_request("POST", "/v1/chat/completions",
                         harness.chat_body({"replay": path, "ttft_ms": 0, "gap_ms": 0})))
    r = c.read_head()
    t.eq(r.status, 200, "status")
    while len(c.data) < 64 * 1024:
        if c.fill() == 0:
            break
    got_before = len(c.data)
    # stop reading for 3 s; sample RSS meanwhile
    peak = base
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        peak = max(peak, px.rss_kib())
        time.sleep(0.05)
    growth = (peak - base) / 1024.0
    recs_during = len(px.records())
    r = c.read_body(r, "POST")
    c.close()
    t.check(r.complete, "body incomplete after resuming")
    t.eq(len(r.body), len(want), "body length")
    t.check(r.body == want, "body differs from the stream the sim sent")
    t.check(len(want) > 5 * 8 * MIB, "stream not large enough to prove the bound")
    t.check(growth <= 8.0, f"proxy RSS grew {growth:.1f} MiB while the client did not "
                           f"read (baseline {base // 1024} MiB, peak {peak // 1024} MiB)")
    t.eq(recs_during, 1, "records while paused (only the warm-up may be finished)")
    t.note(f"RSS growth {growth:.2f} MiB; read {got_before} B before the pause")
