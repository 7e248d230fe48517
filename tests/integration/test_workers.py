"""--workers N: one event loop per thread behind SO_REUSEPORT listeners; the
aggregates and the record file are shared, so every request is counted and
recorded exactly once, whichever thread served it (SPEC 3, 8)."""
import os
import signal
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


WARN_TAKEN = "another socket already listens on"


def test_second_proxy_on_a_taken_address_warns(t):
    """SO_REUSEPORT lets a second tokentap on the same --listen address take
    a share of the traffic (how an upgrade hands over): it starts, but says
    so in a warning naming the address; --workers 3 warns once, about the
    other process, never about its own listeners"""
    sim = t.sim()
    first = t.proxy(sim.url, extra=["--workers", "2"])
    addr = f"127.0.0.1:{first.port}"
    second = t.proxy(sim.url, listen=addr, extra=["--workers", "3"])
    t.eq(second.port, first.port, "the second bound the same port")
    err = second.stderr().decode()
    lines = [l for l in err.splitlines() if WARN_TAKEN in l]
    t.eq(len(lines), 1, "one warning:\n" + err)
    t.check(f"{WARN_TAKEN} {addr}" in lines[0] and "level=warn" in lines[0],
            "names the address: " + lines[0])
    t.check(WARN_TAKEN not in first.stderr().decode(),
            "the first (port 0, two workers) warns about nothing")


def test_alone_on_a_fixed_port_no_warning(t):
    """the proxy's own --workers listeners on a fixed port are not another
    socket: no warning.  The address is a loopback address of this test's
    own (all of 127/8 is loopback; nothing else here binds outside
    127.0.0.1), so the fixed port is free without picking it."""
    sim = t.sim()
    pid = os.getpid()
    addr = f"127.{pid % 200 + 20}.{(pid >> 8) % 250 + 1}.9:8080"
    px = t.proxy(sim.url, listen=addr, extra=["--workers", "3"])
    t.check(WARN_TAKEN not in px.stderr().decode(), "no warning:\n" + px.stderr().decode())


def test_taken_admin_port_gives_the_reason(t):
    """a taken admin port: 'cannot listen on ADDR: Address already in use',
    the reason included"""
    sim = t.sim()
    first = t.proxy(sim.url, admin="auto")
    addr = f"127.0.0.1:{first.admin_port}"
    px = t.proxy(sim.url, admin=addr, wait=False, expect_rc=1)
    px.wait(10 * t.slow)
    err = px.stderr().decode()
    t.check(f"cannot listen on '{addr}': Address already in use" in err, "reason:\n" + err)
