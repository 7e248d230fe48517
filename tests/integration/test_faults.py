"""The fault suite: what an upstream, a client, the machine or an operator
can do to a running proxy, and that the proxy comes back from each.  Every
test ends with the proxy serving a normal request with its RSS and open fds
back near where they started (or, for the shutdown ones, with a clean and
prompt exit).  Bounded in time; runs in `make test`."""
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import threading
import time

import harness
from harness import build_request

# RSS may grow a little once (allocator arenas, pools warmed up): the check
# is that it comes back near the baseline, not that it is byte-identical.
# Under ASan freed memory waits in a quarantine: keep it small (ASAN below)
RSS_SLACK_KIB = 8 * 1024
ASAN = "quarantine_size_mb=1"
FD_SLACK = 2


def nfds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid):
    """utime + stime of <pid>, in seconds"""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def baseline(t, px, normal):
    """serve a normal request first (pools and arenas warm), then note RSS and fds"""
    normal()
    time.sleep(0)   # nothing to wait for: the request above is complete
    return px.rss_kib(), nfds(px.pid)


def back_to_baseline(t, px, base, normal):
    """the proxy serves a normal request, and its RSS and fds come back"""
    normal()
    rss0, fds0 = base
    slack = RSS_SLACK_KIB * (4 if t.san else 1)
    harness.wait_until(lambda: nfds(px.pid) <= fds0 + FD_SLACK, 5 * t.slow,
                       what=f"open fds back near {fds0} (now {nfds(px.pid)})")
    rss = px.rss_kib()
    t.check(rss <= rss0 + slack, f"RSS {rss} KiB, baseline {rss0} KiB (+{slack} allowed)")
    t.note(f"RSS {rss0} -> {rss} KiB, fds {fds0} -> {nfds(px.pid)}")


def sim_normal(t, px):
    def go():
        r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 3, "ttft_ms": 1,
                                                               "gap_ms": 1}))
        t.eq(r.status, 200, "a normal request's status")
        t.check(b"[DONE]" in r.body, "a normal stream ends with [DONE]")
    return go


def rst_close(sock):
    """close with a TCP reset"""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def scrape(port):
    r = harness.http(port, "GET", "/metrics")
    return r.body.decode()


# ---------------------------------------------------------------- upstream


@harness.timeout(60)
def test_fault_upstream_resets_at_every_phase(t):
    """an upstream that resets before its head, inside its head, inside its
    body or inside a stream: the client gets a 502 (or, once bytes went out,
    a cut), the request is recorded with its error type and counted in
    tokentap_errors_total, and the proxy carries on unharmed"""
    def handler(sock, req, fake):
        path = req.split(b" ", 2)[1]
        if path == b"/before-head":
            rst_close(sock)
        elif path == b"/mid-head":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Ty")
            time.sleep(0.05)
            rst_close(sock)
        elif path == b"/mid-body":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"partial\":")
            time.sleep(0.05)
            rst_close(sock)
        else:
            body = b'{"ok":true}'
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    fake = t.fake(handler)
    px = t.proxy(fake.url, admin="auto", asan=ASAN)

    def normal():
        r = px.request("GET", "/ok")
        t.eq(r.status, 200, "a normal request's status")
        t.eq(r.body, b'{"ok":true}', "a normal request's body")
    base = baseline(t, px, normal)

    for _ in range(20):
        for path in ("/before-head", "/mid-head"):
            r = px.request("POST", path, {"model": "m"})
            t.eq(r.status, 502, f"{path}: status")
        c = px.conn()
        c.send(build_request("POST", "/mid-body", {"model": "m"}))
        head = c.read_head()
        t.eq(head.status, 200, "/mid-body: the head went out")
        t.check(c.closed_by_peer(5 * t.slow), "/mid-body: the client is cut off")
        c.close()
    recs = px.records(61)
    types = {}
    for rec in recs:
        e = rec.get("error") or {}
        types[e.get("type")] = types.get(e.get("type"), 0) + 1
    t.check(types.get("upstream_reset", 0) + types.get("upstream_bad_response", 0)
            + types.get("truncated", 0) >= 60, f"error types recorded: {types}")
    m = scrape(px.admin_port)
    total = 0
    for line in m.splitlines():
        if line.startswith("tokentap_errors_total{"):
            t.check(line.startswith('tokentap_errors_total{upstream="primary",api='),
                    f"label set: {line}")
            total += int(line.rsplit(" ", 1)[1])
    t.eq(total, sum(v for k, v in types.items() if k), "errors_total agrees with the records")
    back_to_baseline(t, px, base, normal)


@harness.timeout(60)
def test_fault_garbage_and_oversized_responses(t):
    """garbage instead of a response, a head over the limit, and an 8 MiB
    event with no line break: a 502 with a reason (or, for the event, the
    bytes forwarded unchanged) and no lasting memory"""
    big = b"data: " + b"x" * (8 << 20) + b"\n\n" + b"data: [DONE]\n\n"

    def handler(sock, req, fake):
        try:
            serve(sock, req)
        except OSError:
            pass            # the proxy gave up on this upstream first: expected

    def serve(sock, req):
        path = req.split(b" ", 2)[1]
        if path == b"/garbage":
            sock.sendall(bytes(range(256)) * 64)
        elif path == b"/not-http":
            sock.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        elif path == b"/huge-head":
            sock.sendall(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * (1 << 20) + b"\r\n\r\n")
        elif path == b"/big-event":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(big))
            sock.sendall(big)
        else:
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    fake = t.fake(handler)
    px = t.proxy(fake.url, asan=ASAN)

    def normal():
        r = px.request("GET", "/ok")
        t.eq((r.status, r.body), (200, b"ok"), "a normal request")
    base = baseline(t, px, normal)
    for path in ("/garbage", "/not-http", "/huge-head"):
        for _ in range(5):
            r = px.request("POST", path, {"m": 1})
            t.eq(r.status, 502, f"{path}: status")
    for _ in range(3):
        r = px.request("POST", "/big-event", {"model": "m"}, timeout=60)
        t.eq(r.status, 200, "big event: status")
        t.check(r.body == big, f"big event: {len(r.body)} bytes arrived, want {len(big)} unchanged")
    back_to_baseline(t, px, base, normal)


@harness.timeout(60)
def test_fault_close_after_the_last_bytes_while_the_client_is_behind(t):
    """an upstream that sends a whole Content-Length body and closes at
    once, to a client that reads slowly: the client gets every byte and a
    complete response, the record has no error, and the next request is
    served.  The case this guards (proxy/http/leg.c up_eof: the close arriving
    while the last bytes still wait in the upstream input because the
    proxy's socket to the client is full) is only reached when the
    kernel's send buffer towards the client fills; on an idle machine it
    absorbs the backlog and this test passes without that code too"""
    body = bytes(range(256)) * (8 << 12)           # 8 MiB
    conns = []

    def handler(sock, req, fake):
        conns.append(req.split(b" ", 2)[1])
        if req.startswith(b"GET /big"):
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + body)
        else:
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        # closed by the fake right after: no Connection: close announced
    fake = t.fake(handler)
    px = t.proxy(fake.url, asan=ASAN)
    c = px.conn(timeout=30, rcvbuf=4096)    # a small window: the proxy's output backs up
    c.send(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    r = c.read_head()
    t.eq(r.status, 200, "status")
    got = len(c.data) - r.body_off
    while got < len(body):
        time.sleep(0.002)           # a slow reader: 64 KiB per 2 ms
        n = c.fill()
        if n == 0:
            break
        got += n
    t.eq(got, len(body), "body bytes the client got")
    t.check(bytes(c.data[r.body_off:r.body_off + len(body)]) == body, "the body unchanged")
    c.pos = r.body_off + len(body)
    r2 = c.request(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
    t.eq((r2.status, r2.body), (200, b"ok"), "the next request")
    c.close()
    recs = px.records(2)
    t.eq([x["error"] for x in recs], [None, None], "errors in the records")


# ------------------------------------------------------------------ client


@harness.timeout(60)
def test_fault_slowloris_clients_cut_with_408(t):
    """300 clients each dribbling a head that never ends: every one gets a
    408 at head_timeout and is closed; nothing is forwarded"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--head-timeout", "1s"], asan=ASAN)
    normal = sim_normal(t, px)
    base = baseline(t, px, normal)
    requests0 = sim.stats()["requests"]
    conns = []
    for _ in range(300):
        c = px.conn(timeout=10 * t.slow)
        c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-A: ")
        conns.append(c)
    for c in conns:
        c.send(b"a")            # still dribbling
    got = 0
    for c in conns:
        r = c.response()
        got += r.status == 408
        t.check(c.closed_by_peer(5 * t.slow), "a slowloris client is closed after its 408")
        c.close()
    t.eq(got, 300, "clients answered 408")
    t.eq(sim.stats()["requests"], requests0, "requests the upstream saw from them")
    back_to_baseline(t, px, base, normal)


@harness.timeout(60)
def test_fault_fd_exhaustion_pauses_accept(t):
    """RLIMIT_NOFILE 64 and 200 clients: the proxy does not spin (little CPU
    used while out of fds), warns at most about once a second, and once the
    clients go it serves a normal request"""
    sim = t.sim()
    px = t.proxy(sim.url, record=False, asan=ASAN)
    normal = sim_normal(t, px)
    normal()
    resource.prlimit(px.pid, resource.RLIMIT_NOFILE, (64, 64))
    base = (px.rss_kib(), nfds(px.pid))
    err0 = len(px.stderr())
    cpu0 = cpu_seconds(px.pid)
    t0 = time.monotonic()
    clients = []
    for _ in range(200):
        s = socket.create_connection(("127.0.0.1", px.port), timeout=5)
        clients.append(s)
    # hold them: the proxy is out of fds for this whole window
    harness.wait_until(lambda: b"Too many open files" in px.stderr()[err0:], 5 * t.slow,
                       what="the proxy to run out of fds")
    time.sleep(3)       # the measured window: CPU use over a fixed time
    held = time.monotonic() - t0
    cpu = cpu_seconds(px.pid) - cpu0
    log = px.stderr()[err0:].decode("utf-8", "replace").splitlines()
    warn = [ln for ln in log if "accept on" in ln]
    t.note(f"{held:.1f}s out of fds: {cpu:.2f} CPU s, {len(warn)} accept warnings, "
           f"{len(log)} log lines")
    t.check(cpu < 0.5 * t.slow, f"{cpu:.2f} s of CPU in {held:.1f} s out of fds (spinning)")
    t.check(len(warn) <= held + 2, f"{len(warn)} accept warnings in {held:.1f} s")
    t.check(len(log) <= 2 * held + 4, f"{len(log)} log lines in {held:.1f} s")
    for s in clients:
        s.close()
    # accepting resumes within the backoff (at most 1 s)
    harness.wait_until(lambda: nfds(px.pid) <= base[1] + FD_SLACK, 10 * t.slow,
                       what="the held connections to be closed")
    back_to_baseline(t, px, base, normal)


@harness.timeout(60)
def test_fault_over_max_connections_gets_503(t):
    """a client over max_connections is answered 503 (OpenAI error shape,
    Connection: close) and closed; one slot freed, the next client is served"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--max-connections", "4"], asan=ASAN)
    normal = sim_normal(t, px)
    held = []
    for _ in range(4):
        c = px.conn()
        r = c.request(build_request("GET", "/v1/models"))
        t.eq(r.status, 200, "a client under the cap")
        held.append(c)
    for _ in range(20):
        # the answer comes without a request: read it before sending one
        # (bytes sent after the proxy closed would turn its FIN into a reset)
        c = px.conn()
        r = c.response()
        t.eq(r.status, 503, "a client over the cap")
        t.eq((r.header("Connection") or "").lower(), "close", "Connection header")
        j = r.json()
        t.check(isinstance(j.get("error"), dict) and j["error"].get("message"),
                f"OpenAI error shape: {j}")
        t.check(c.closed_by_peer(2 * t.slow), "closed after the 503")
        c.close()
    held.pop().close()
    # the proxy sees the close on its next loop turn: retry until served
    harness.wait_until(lambda: px.request("GET", "/v1/models").status == 200, 5 * t.slow,
                       what="a slot to free up")
    for c in held:
        c.close()
    normal()


@harness.timeout(60)
def test_fault_admin_connection_cap(t):
    """the admin listener holds at most admin_max_connections: beyond, 503"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--admin-max-connections", "2"], asan=ASAN)
    held = []
    for _ in range(2):
        c = harness.Conn(px.admin_port)
        r = c.request(build_request("GET", "/healthz"))
        t.eq(r.status, 200, "an admin client under the cap")
        held.append(c)
    c = harness.Conn(px.admin_port)
    r = c.request(build_request("GET", "/metrics"))
    t.eq(r.status, 503, "an admin client over the cap")
    t.check(c.closed_by_peer(2 * t.slow), "closed after the 503")
    c.close()
    held.pop().close()
    harness.wait_until(lambda: harness.http(px.admin_port, "GET", "/healthz").status == 200,
                       5 * t.slow, what="an admin slot to free up")
    for c in held:
        c.close()


# ---------------------------------------------------------------- records


def mount_tmpfs(t, where, size):
    if os.geteuid() != 0:
        raise harness.Skip("not root: cannot mount a small tmpfs for the full-disk test")
    os.makedirs(where, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", where],
                       capture_output=True)
    if p.returncode != 0:
        raise harness.Skip(f"mount -t tmpfs failed: {p.stderr.decode().strip()}")


@harness.timeout(90)
def test_fault_full_disk_records_stay_whole(t):
    """records onto a 64 KiB tmpfs: when it fills, no line is ever broken or
    glued to another, every record is either a whole line or counted in
    tokentap_records_dropped_total, the loss is logged with its reason (not
    once per record), and writing resumes when space comes back"""
    disk = os.path.join(t.tmp, "disk")
    mount_tmpfs(t, disk, "64k")
    try:
        sim = t.sim()
        px = t.proxy(sim.url, record=False, admin="auto",
                     extra=["--record", os.path.join(disk, "r.jsonl")], asan=ASAN)
        path = os.path.join(disk, "r.jsonl")
        normal = sim_normal(t, px)
        base = baseline(t, px, normal)
        n = 120
        for i in range(n):
            normal()

        def dropped():
            for line in scrape(px.admin_port).splitlines():
                if line.startswith("tokentap_records_dropped_total "):
                    return int(line.split()[1])
            return 0

        def lines():
            with open(path, "rb") as f:
                return f.read().split(b"\n")

        def settled():
            ls = lines()
            return len([x for x in ls if x]) + dropped() >= n + 1
        harness.wait_until(settled, 10 * t.slow, what="every record written or dropped")
        ls = lines()
        t.eq(ls[-1], b"", "the file ends with a whole line")
        for x in ls[:-1]:
            try:
                json.loads(x)
            except ValueError:
                raise harness.Failure(f"a broken line in the record file: {x[:120]!r}...")
        whole = len(ls) - 1
        d = dropped()
        t.note(f"{whole} records written, {d} dropped")
        t.check(d > 0, "the disk filled up (nothing dropped)")
        t.eq(whole + d, n + 1, "written + dropped")
        stats = json.loads(harness.http(px.admin_port, "GET", "/stats").body)
        t.eq(stats.get("records_dropped"), d, "/stats records_dropped")
        err = px.stderr().decode("utf-8", "replace")
        warns = [ln for ln in err.splitlines() if "records:" in ln]
        t.check(any("No space left" in ln for ln in warns), f"the reason is logged: {warns[:3]}")
        t.check(len(warns) < d, f"{len(warns)} warnings for {d} drops: not rate-limited")
        # room again: records resume, still whole lines
        with open(path, "r+b") as f:
            f.truncate(0)
        normal()
        harness.wait_until(lambda: len([x for x in lines() if x]) >= 1, 5 * t.slow,
                           what="a record after space came back")
        for x in lines()[:-1]:
            json.loads(x)
        back_to_baseline(t, px, base, normal)
        px.stop()
    finally:
        subprocess.run(["umount", "-l", disk], capture_output=True)


@harness.timeout(90)
def test_fault_sighup_storm_keeps_every_record(t):
    """200 SIGHUPs while 60 streams run: every record is written whole, the
    proxy keeps serving, and a reopen that fails is logged (the old file kept)"""
    sim = t.sim()
    logdir = os.path.join(t.tmp, "logs")
    os.makedirs(logdir)
    path = os.path.join(logdir, "r.jsonl")
    px = t.proxy(sim.url, record=False, extra=["--record", path], asan=ASAN)
    px.record_path = path
    normal = sim_normal(t, px)
    base = baseline(t, px, normal)
    results = []

    def stream():
        r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 20, "gap_ms": 10}))
        results.append(r.status == 200 and b"[DONE]" in r.body)
    ths = [threading.Thread(target=stream) for _ in range(60)]
    for th in ths:
        th.start()
    for _ in range(200):
        px.signal(signal.SIGHUP)
        time.sleep(0.002)
        # take the RELOADING=1/READY=1 datagrams as they come, as systemd
        # does: an AF_UNIX datagram queue holds 512 and a full one blocks
        # the sender
        px.notify.drain()
    for th in ths:
        th.join(30)
    t.eq(sum(results), 60, "streams delivered whole during the storm")
    recs = px.records(61)
    t.eq(len(recs), 61, "records")
    t.check(px.alive(), "the proxy survived the storm")
    # a reopen that cannot open the path: logged, the old file kept
    os.rename(logdir, logdir + ".gone")
    err0 = len(px.stderr())
    px.signal(signal.SIGHUP)
    harness.wait_until(lambda: b"cannot reopen" in px.stderr()[err0:], 5 * t.slow,
                       what="the failed reopen to be logged")
    normal()
    gone = os.path.join(logdir + ".gone", "r.jsonl")
    harness.wait_until(lambda: len(open(gone, "rb").read().splitlines()) >= 62, 5 * t.slow,
                       what="records to go on into the old file")
    back_to_baseline(t, px, base, normal)


def start_stuck_record_proxy(t, sim, drain):
    """a proxy writing records to stdout, a pipe nobody reads"""
    binary = os.path.join(t.build, "tokentap")
    if not os.access(binary, os.X_OK):
        raise harness.Skip(f"{binary} not built")
    ready = os.path.join(t.tmp, "stuck.ready.json")
    p = harness.Proc(t, "stuck", [binary, "--listen", "127.0.0.1:0", "--upstream",
                                  sim.url, "--admin", "off", "--record", "-",
                                  "--drain-timeout", drain, "--ready-file", ready],
                     stdout_pipe=True, notify=harness.Notify(t, "stuck"))
    port = harness.port_of(p.wait_ready(ready, 10 * t.slow)["listen"])
    p.port = port
    # ~1.5 KiB a record: 200 of them are far more than a 64 KiB pipe holds
    for _ in range(200):
        r = harness.http(port, "POST", "/v1/chat/completions",
                         harness.chat_body({"tokens": 2, "ttft_ms": 0, "gap_ms": 0}))
        t.eq(r.status, 200, "status")
    return p


@harness.timeout(60)
def test_fault_sigterm_with_stuck_record_pipe_exits(t):
    """--record - into a pipe nobody reads: SIGTERM still ends the process
    within drain_timeout (plus the drain), exit 0, the records it could not
    write counted and logged"""
    sim = t.sim()
    p = start_stuck_record_proxy(t, sim, "1s")
    t0 = time.monotonic()
    p.signal(signal.SIGTERM)
    rc = p.wait(10 * t.slow)
    dt = time.monotonic() - t0
    t.eq(rc, 0, "exit status after SIGTERM")
    t.check(dt < 1 + 2 * t.slow, f"exited {dt:.1f}s after SIGTERM, drain_timeout 1s")
    err = p.stderr().decode("utf-8", "replace")
    t.check("not flushed within drain_timeout" in err, f"the give-up is logged: {err[-400:]}")
    t.check("records could not be written" in err, "the drop count is logged")


@harness.timeout(60)
def test_fault_second_signal_ends_stuck_flush(t):
    """the same with a long drain_timeout: a second SIGTERM ends the wait"""
    sim = t.sim()
    p = start_stuck_record_proxy(t, sim, "60s")
    p.signal(signal.SIGTERM)
    t0 = time.monotonic()
    harness.wait_until(lambda: b"records: flushing" in p.stderr(), 5 * t.slow,
                       what="the proxy to reach the record flush")
    t.check(p.alive(), "the proxy waits for the stuck sink")
    p.signal(signal.SIGTERM)
    rc = p.wait(5 * t.slow)
    dt = time.monotonic() - t0
    t.eq(rc, 0, "exit status after the second SIGTERM")
    t.check(dt < 3 * t.slow, f"exited {dt:.1f}s after the first SIGTERM")
    t.check(b"a second signal ended the flush" in p.stderr(), "the cut is logged")


@harness.timeout(90)
def test_fault_sigterm_under_load_delivers_every_stream(t):
    """SIGTERM with 100 streams in flight: each is delivered whole and
    recorded, then the process exits 0"""
    sim = t.sim()
    px = t.proxy(sim.url, asan=ASAN)
    results = []
    started = threading.Barrier(101)

    def stream():
        c = px.conn(timeout=30)
        c.send(build_request("POST", "/v1/chat/completions",
                             harness.chat_body({"tokens": 40, "gap_ms": 20, "ttft_ms": 1})))
        r = c.read_head()
        started.wait(30)
        c.read_body(r, "POST")
        results.append(r.status == 200 and b"[DONE]" in r.body)
        c.close()
    ths = [threading.Thread(target=stream) for _ in range(100)]
    for th in ths:
        th.start()
    started.wait(30)            # every stream has its head: all in flight
    px.signal(signal.SIGTERM)
    for th in ths:
        th.join(30)
    rc = px.wait(15 * t.slow)
    t.eq(rc, 0, "exit status")
    t.eq(sum(results), 100, "streams delivered whole")
    with open(px.record_path, "rb") as f:
        recs = [json.loads(x) for x in f.read().splitlines() if x]
    t.eq(len(recs), 100, "records")
    t.check(all(r.get("error") is None for r in recs), "no record has an error")


# ---------------------------------------------------------------- secrets


SPELLINGS = ["key", "%6Bey", "k%65y", "%4B%45%59", "KEY", "api_key", "access_token",
             "api%5Fkey", "x-goog-api-key"]


@harness.timeout(60)
def test_fault_secrets_never_in_log_or_record(t):
    """a credential in the query string, in every spelling, appears neither
    in the log (requests tokentap fails itself, which it logs) nor in a
    record"""
    dead = t.dead_port()
    px = t.proxy(f"http://127.0.0.1:{dead}", extra=["--log-level", "debug"], asan=ASAN)
    for i, name in enumerate(SPELLINGS):
        path = f"/v1beta/models/gemini-2.5-flash:generateContent?alt=sse&{name}=SECRET{i}x"
        r = px.post(path, {"contents": []})
        t.eq(r.status, 502, "status")
    recs = px.records(len(SPELLINGS))
    err = px.stderr()
    t.check(b"SECRET" not in err, "a secret in the log: " + repr(
        [ln for ln in err.splitlines() if b"SECRET" in ln][:2]))
    blob = json.dumps(recs)
    t.check("SECRET" not in blob, "a secret in a record")
    t.check(err.count(b"REDACTED") >= len(SPELLINGS), "the log shows the redacted path")
    t.eq(sum(1 for r in recs if "REDACTED" in r["metadata"]["path"]), len(SPELLINGS),
         "records with the redacted path")


# ---------------------------------------------------------------- memory


@harness.timeout(60)
def test_fault_inspector_budget_forwards_uninspected(t):
    """with the inspector budget taken by a stalled body, the next request
    is still forwarded whole and answered; its record says its body was not
    inspected; once the budget is free again bodies are read as before"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--inspect-budget", "64k"], asan=ASAN)
    # a body of exactly the budget: its copy, sized from its Content-Length,
    # leaves no room for the 1 KiB a small body's copy starts with
    def big(n):
        return json.dumps(harness.chat_body({"tokens": 2}, stream=False,
                                            pad="p" * n)).encode()
    body = big(60000)
    body = big(60000 + 65536 - len(body))
    t.eq(len(body), 65536, "the stalled body's length")
    stalled = px.conn(timeout=30)
    stalled.send(build_request("POST", "/v1/chat/completions", body)[:-20])
    small = json.dumps(harness.chat_body({"tokens": 2}, stream=False, model="m-small")).encode()

    # the stalled body is read by the proxy as soon as its upstream
    # connection is up; from then on small requests find the budget taken
    sent = [0]

    def over_budget():
        r = px.post("/v1/chat/completions", small)
        t.eq(r.status, 200, "a request over the budget is still forwarded and answered")
        sent[0] += 1
        rec = px.records(sent[0])[-1]
        return rec["metadata"].get("request_not_inspected") == "budget"
    harness.wait_until(over_budget, 5 * t.slow, interval=0.05,
                       what="a request to find the inspector budget taken")
    n = len(px.records())
    stalled.send(body[-20:])
    t.eq(stalled.response("POST").status, 200, "the stalled request completes")
    stalled.close()
    recs = px.records(n + 1)
    t.eq(recs[-1]["metadata"].get("request_not_inspected"), None, "the big body was read")
    r = px.post("/v1/chat/completions", small)
    t.eq(r.status, 200, "status")
    last = px.records(n + 2)[-1]
    t.eq(last["metadata"].get("request_not_inspected"), None, "inspected again")
    t.eq(last["metadata"].get("model"), "m-small", "model from the body")
