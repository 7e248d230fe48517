"""--workers N: one event loop per thread behind SO_REUSEPORT listeners; the
aggregates and the record file are shared, so every request is counted and
recorded exactly once, whichever thread served it (SPEC 3, 8)."""
import os
import threading

import harness
from test_slo import scrape, total


def test_two_workers_serve_count_and_record_every_request(t):
    """60 concurrent streams through --workers 2: all answered intact, 60
    records with distinct ids, requests_total 60, two worker threads"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--workers", "2"])
    n = 60
    results = [None] * n

    def one(i):
        r = px.post("/v1/chat/completions",
                    harness.chat_body({"tokens": 8, "gap_ms": 5, "ttft_ms": 20}),
                    headers=[("X-Request-Id", f"w-{i}")])
        results[i] = (r.status, r.body.count(b'"content":"tok'), r.body.rstrip().endswith(b"[DONE]"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30 * t.slow)
    t.eq([r for r in results if r != (200, 8, True)], [], "responses not complete")
    recs = px.records(n)
    t.eq(sorted(r["metadata"]["x_request_id"] for r in recs),
         sorted(f"w-{i}" for i in range(n)), "one record per request")
    t.eq(total(scrape(t, px), "tokentap_requests_total", outcome="ok"), n,
         "tokentap_requests_total{outcome=ok}")
    # main thread (worker 0) + worker 1 + the record writer
    tasks = os.listdir(f"/proc/{px.pid}/task")
    t.check(len(tasks) >= 3, f"expected at least 3 threads, found {len(tasks)}")
