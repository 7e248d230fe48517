"""Delivery (SPEC 12; docs/metrics.md "The whole clock"): the client's own
clock from its TCP acknowledgements, and a departed client noticed at once.

The rate-limited tests put the client in a network namespace of its own
behind a veth pair whose tokentap side shapes with tbf (256 kbit/s): the
client measures its TTFT and end time with its own clock, and the record's
client_* metrics must agree.  Needs root, iproute2 and the tbf qdisc; skips
with the reason otherwise.  The others run on loopback.
"""
import json
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import threading
import time

import harness
from harness import Failure, Skip, build_request, chat_body, metric, timeline


# --------------------------------------------------------------------------
# a client host behind a slow link


class SlowLink:
    """namespace <ns> with the client end of a veth pair; tokentap's end
    (self.host_ip) sends through tbf at <rate>"""

    def __init__(self, t, rate="256kbit"):
        if os.geteuid() != 0:
            raise Skip("network namespaces need root")
        if shutil.which("ip") is None or shutil.which("tc") is None:
            raise Skip("iproute2 (ip, tc) is not installed")
        k = os.getpid() % 200 + 20
        self.ns = f"tt-dl-{os.getpid()}"
        self.hv, self.cv = f"tth{os.getpid() % 100000}", f"ttc{os.getpid() % 100000}"
        self.host_ip, self.client_ip = f"10.231.{k}.1", f"10.231.{k}.2"
        self.t = t
        self._run("ip", "netns", "add", self.ns)
        t.fakes.append(self)            # torn down with the test
        self._run("ip", "link", "add", self.hv, "type", "veth", "peer", "name", self.cv)
        self._run("ip", "link", "set", self.cv, "netns", self.ns)
        self._run("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.hv)
        self._run("ip", "link", "set", self.hv, "up")
        self._run("ip", "-n", self.ns, "addr", "add", f"{self.client_ip}/30", "dev", self.cv)
        self._run("ip", "-n", self.ns, "link", "set", self.cv, "up")
        self._run("ip", "-n", self.ns, "link", "set", "lo", "up")
        p = subprocess.run(["tc", "qdisc", "add", "dev", self.hv, "root", "tbf", "rate", rate,
                            "burst", "1600", "latency", "2s"], capture_output=True)
        if p.returncode != 0:
            raise Skip("the tbf qdisc is not available: " + p.stderr.decode()[-200:])

    def _run(self, *argv):
        p = subprocess.run(argv, capture_output=True)
        if p.returncode != 0:
            raise Skip(f"{' '.join(argv)}: {p.stderr.decode().strip()[-200:]}")

    def client(self, script, *args, timeout=120):
        """run python3 <script> in the namespace; its stdout as JSON"""
        p = subprocess.run(["ip", "netns", "exec", self.ns, "python3", "-c", script,
                            *map(str, args)], capture_output=True, timeout=timeout)
        if p.returncode != 0:
            raise Failure("client failed: " + p.stderr.decode()[-800:])
        return json.loads(p.stdout)

    errors = ()

    def stop(self):
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.hv], capture_output=True)


# the client: N requests on fresh connections; for each, its send instant
# and the instants its kernel received the segment that completed the first
# token event and the one that ended the response (SO_TIMESTAMPNS: the
# client's own clock, not when this Python process got round to reading,
# which a loaded machine delays by milliseconds).  TLS through a memory BIO,
# so that the raw segments and their stamps stay visible.
CLIENT = r'''
import json, socket, ssl, struct, sys, time
host, port, tls, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4]), sys.argv[5]
body = open(path, "rb").read()
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
ctx = None
if tls:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE

def rx(s):
    d, anc, _, _ = s.recvmsg(65536, 256)
    t = None
    for lvl, typ, data in anc:
        if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
            sec, ns = struct.unpack("qq", data[:16])
            t = sec * 1000000000 + ns
    return d, t

out = []
for i in range(n):
    rid = "dl-%d" % i
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    tin = tout = obj = None
    if ctx:
        tin, tout = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(tin, tout, server_hostname=host)
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                s.sendall(tout.read())
                d, _ = rx(s)
                if not d:
                    sys.exit("handshake: closed")
                tin.write(d)
        s.sendall(tout.read())
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"X-Request-Id: " + rid.encode() + b"\r\nContent-Length: " + str(len(body)).encode() +
           b"\r\n\r\n" + body)
    if obj:
        obj.write(req)
        req = tout.read()
    t_send = time.time_ns()
    s.sendall(req)
    buf = bytearray()
    t_first = t_end = None
    while True:
        d, t = rx(s)
        if not d:
            break
        if obj:
            tin.write(d)
            while True:
                try:
                    buf += obj.read(65536)
                except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                    break
        else:
            buf += d
        if t_first is None:
            k = buf.find(b'"tok0"')
            if k >= 0 and buf.find(b"\n\n", k) >= 0:
                t_first = t
        if buf.endswith(b"\r\n0\r\n\r\n") and buf.find(b"\r\n\r\n") < len(buf) - 7:
            t_end = t
            break
    s.close()
    if t_first is None or t_end is None:
        sys.exit("request %s: first token at %s, end at %s; received %r" % (rid, t_first, t_end, bytes(buf[-300:])))
    out.append({"id": rid, "ttft": (t_first - t_send) / 1e6, "end": (t_end - t_send) / 1e6})
print(json.dumps(out))
'''


def big_first_event_stream(t, pad=6000, tokens=8):
    """a replay file: a 6 KB role chunk (as a Responses response.created
    echoing instructions is), then token chunks, usage and [DONE]"""
    path = os.path.join(t.tmp, "bigfirst.jsonl")
    head = {"id": "c1", "object": "chat.completion.chunk", "model": "sim-model",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
            "system_fingerprint": "x" * pad}
    with open(path, "w") as f:
        f.write(json.dumps(head) + "\n")
        for i in range(tokens):
            f.write(json.dumps({"id": "c1", "object": "chat.completion.chunk", "model": "sim-model",
                                "choices": [{"index": 0, "delta": {"content": f"tok{i}"}}]}) + "\n")
        f.write(json.dumps({"id": "c1", "object": "chat.completion.chunk", "model": "sim-model",
                            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}) + "\n")
        f.write("[DONE]\n")
    return path


def agree(t, link, px, tls, n=20):
    path = big_first_event_stream(t)
    body = os.path.join(t.tmp, "body.json")
    with open(body, "w") as f:
        json.dump(chat_body({"replay": path, "ttft_ms": 30, "gap_ms": 20}), f)
    meas = link.client(CLIENT, link.host_ip, px.port, 1 if tls else 0, n, body)
    recs = {r["metadata"]["x_request_id"]: r for r in px.records(n)}
    dt, dl, ahead = [], [], []
    for m in meas:
        r = recs[m["id"]]
        cttft = metric(r, "client_time_to_first_token")
        clat = metric(r, "client_request_latency")
        t.check(cttft is not None and clat is not None, f"{m['id']}: client metrics absent: {r['metrics']}")
        dt.append(abs(cttft - m["ttft"]))
        dl.append(abs(clat - m["end"]))
        ahead.append(cttft - metric(r, "time_to_first_token"))
        t.check(r["metadata"]["delivery"]["acked_token_events"] == 8, "acked token events")
    t.note(f"|client TTFT - record| median {statistics.median(dt):.3f} ms, max {max(dt):.3f} ms; "
           f"|client end - record| median {statistics.median(dl):.3f} ms, max {max(dl):.3f} ms; "
           f"delivery after proxy TTFT median {statistics.median(ahead):.1f} ms")
    # 1 ms at the median, 3 ms at worst; under the sanitizers tokentap reads
    # the request later (t0 is when it reads the first byte), so 2 and 8
    med, worst = (2.0, 8.0) if t.san else (1.0, 3.0)
    t.check(statistics.median(dt) <= med, f"TTFT median disagreement {statistics.median(dt):.3f} ms > {med} ms: {dt}")
    t.check(max(dt) <= worst, f"TTFT worst disagreement {max(dt):.3f} ms > {worst} ms: {dt}")
    t.check(statistics.median(dl) <= med, f"latency median disagreement {statistics.median(dl):.3f} ms: {dl}")
    t.check(max(dl) <= worst, f"latency worst disagreement {max(dl):.3f} ms: {dl}")
    # the 6 KB first event holds the token back ~190 ms on this link
    t.check(min(ahead) > 50, f"proxy-side TTFT not visibly earlier than the client's: {ahead}")


@harness.timeout(180)
def test_delivery_client_clock_through_slow_link(t):
    """256 kbit/s link: client_time_to_first_token and client_request_latency
    equal what the client measured (median 1 ms, worst 3 ms, 20 requests)"""
    link = SlowLink(t)
    sim = t.sim()
    px = t.proxy(sim.url, listen=f"{link.host_ip}:0")
    agree(t, link, px, tls=False)


@harness.timeout(180)
def test_delivery_client_clock_through_slow_link_tls(t):
    """the same through a TLS listener: the mark is the end of the TLS
    record carrying the event"""
    link = SlowLink(t)
    exe = shutil.which("openssl")
    if not exe:
        raise Skip("the openssl command is not installed")
    cert, key = os.path.join(t.tmp, "c.pem"), os.path.join(t.tmp, "k.pem")
    subprocess.run([exe, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=tt"],
                   check=True, capture_output=True)
    sim = t.sim()
    px = t.proxy(sim.url, listen=f"{link.host_ip}:0", extra=["--tls-cert", cert, "--tls-key", key])
    agree(t, link, px, tls=True)


# --------------------------------------------------------------------------
# loopback


def small_window_client(t, pad, rid):
    """a client with a small receive buffer asking for a stream whose first
    event is <pad> bytes: the proxy, its client connection"""
    sim = t.sim()
    px = t.proxy(sim.url)
    path = big_first_event_stream(t, pad=pad, tokens=4)
    c = px.conn(rcvbuf=4096)
    c.send(build_request("POST", "/v1/chat/completions",
                         chat_body({"replay": path, "ttft_ms": 5, "gap_ms": 5}),
                         headers=[("X-Request-Id", rid)]))
    return px, c


def test_delivery_slow_reader(t):
    """a client that reads late (small SO_RCVBUF): delivery_delay grows and
    client_request_latency follows the client's own end"""
    px, c = small_window_client(t, 60000, "slow-1")
    time.sleep(0.3)                     # the reader is late: that is the test
    r = c.read_head()
    c.read_body(r, "POST")
    t_end = c.log[-1][0]
    rec = px.records(1)[0]
    dd = metric(rec, "delivery_delay")
    t.check(dd is not None and dd >= 250, f"delivery_delay {dd} ms, the client read 300 ms late")
    clat = metric(rec, "client_request_latency")
    t.check(clat is not None, "client_request_latency absent")
    # the end the client saw, on the record's wall clock: its last recv
    client_end_ms = (t_end - c.sent_ns[0]) / 1e6
    t.check(abs(clat - client_end_ms) < 20, f"client_request_latency {clat} ms, the client's end {client_end_ms} ms")
    t.check(metric(rec, "request_latency") < clat, "proxy-side latency should end before the client's")


def test_delivery_absent_when_client_leaves_unacked(t):
    """a client that leaves before acknowledging the first token: client
    metrics absent, never zero; acked_token_events 0"""
    px, c = small_window_client(t, 400000, "gone-1")
    c.fill()                            # the head and a few KB: the rest waits
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    c.close()                           # unread bytes: a reset
    rec = px.records(1)[0]
    t.eq(rec["metadata"]["was_cancelled"], True, "was_cancelled")
    for m in ("client_time_to_first_token", "client_time_to_first_output_token",
              "client_request_latency", "delivery_delay"):
        t.eq(metric(rec, m), None, m)
    t.eq(rec["metadata"]["delivery"]["acked_token_events"], 0, "acked_token_events")


def test_delivery_off(t):
    """--delivery off: no client metrics, no delivery fields"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--delivery", "off"])
    r = px.post("/v1/chat/completions", chat_body({"tokens": 3, "gap_ms": 1, "ttft_ms": 1}))
    t.eq(r.status, 200, "status")
    rec = px.records(1)[0]
    t.eq(metric(rec, "client_time_to_first_token"), None, "client TTFT")
    t.check("delivery" not in rec["metadata"] and "client_tcp" not in rec["metadata"],
            "delivery fields with --delivery off")


def test_delivery_metrics_goodput_and_record(t):
    """client metrics in records, on /metrics beside the proxy-side ones,
    and usable in --goodput"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto",
                 extra=["--goodput", "client_time_to_first_token:10000 client_request_latency:10000"])
    for i in range(3):
        r = px.post("/v1/chat/completions", chat_body({"tokens": 4, "gap_ms": 2, "ttft_ms": 5}),
                    headers=[("X-Request-Id", f"m-{i}")])
        t.eq(r.status, 200, "status")
    recs = px.records(3)
    for rec in recs:
        md = rec["metadata"]
        for k in ("first_token_acked", "first_output_token_acked", "response_acked"):
            t.check(timeline(rec, k) is not None, f"timeline {k} absent")
        t.check(timeline(rec, "first_token_acked") >= timeline(rec, "first_token"), "ack before the token")
        t.check(timeline(rec, "response_acked") >= timeline(rec, "response_complete"), "ack before the end")
        t.check(metric(rec, "client_time_to_first_token") >= metric(rec, "time_to_first_token"),
                "client TTFT before proxy TTFT")
        t.eq(md["slo"]["good"], True, "slo good")
        t.eq(md["delivery"]["acked_token_events"], 4, "acked token events")
        t.eq(md["delivery"]["acked_bytes"], md["delivery"]["written_bytes"], "all acked")
        t.check(md["client_tcp"]["rtt_us"] > 0, "rtt")
    m = harness.http(px.admin_port, "GET", "/metrics").body.decode()
    for fam in ("tokentap_client_time_to_first_token_seconds", "tokentap_client_request_latency_seconds",
                "tokentap_client_time_to_first_output_token_seconds"):
        line = [l for l in m.splitlines() if l.startswith(fam + "_count{")]
        t.check(line and line[0].endswith(" 3"), f"{fam}_count: {line}")
    st = json.loads(harness.http(px.admin_port, "GET", "/stats").body)
    for tag in ("client_time_to_first_token", "client_request_latency", "delivery_delay"):
        t.eq(st["windows"]["1m"]["metrics"][tag]["count"], 3, f"/stats 1m {tag} count")
    # the report: the client's clock beside tokentap's, exact, and in the
    # AIPerf export among the record metrics
    exp = os.path.join(t.tmp, "export")
    p = subprocess.run([os.path.join(t.build, "tokentap"), "report", "--format", "json",
                        "--export", exp, px.record_path], capture_output=True, timeout=60)
    t.eq(p.returncode, 0, "report exit status")
    rows = {r[0]: r for tb in json.loads(p.stdout)["tables"] for r in tb.get("rows", [])
            if isinstance(r, list) and r and isinstance(r[0], str)}
    cols = json.loads(p.stdout)["tables"][0]["columns"]
    for name in ("Client Time to First Token (ms)", "Client Request Latency (ms)", "Delivery Delay (ms)"):
        t.check(name in rows, f"report row {name!r}: {sorted(rows)}")
        t.eq(rows[name][cols.index("count")], 3, f"{name} count")
        t.eq(rows[name][cols.index("approximate")], [], f"{name} approximate")
    with open(os.path.join(exp, "profile_export_aiperf.json")) as f:
        ex = json.load(f)
    t.eq(ex["client_time_to_first_token"]["unit"], "ms", "export client_time_to_first_token")
    # an SLO the client clock cannot meet
    px2 = t.proxy(sim.url, extra=["--goodput", "client_time_to_first_token:0.001"])
    px2.post("/v1/chat/completions", chat_body({"tokens": 2, "gap_ms": 1, "ttft_ms": 5}))
    rec = px2.records(1)[0]
    t.eq(rec["metadata"]["slo"]["violations"], ["client_time_to_first_token"], "violations")


# --------------------------------------------------------------------------
# departure


class StreamingUpstream:
    """an upstream streaming chat events at <gap> seconds; notes the instant
    it saw the connection close (self.closed_ns).  <head_delay>: seconds
    before the response head; <split>: the second event is sent in two
    halves <gap> apart (a client may leave inside an event)."""

    def __init__(self, t, gap=1.0, head_delay=0.0, split=False, events=30):
        self.closed_ns = None
        self.sent = 0
        self.done = threading.Event()
        self.gap, self.head_delay, self.split, self.events = gap, head_delay, split, events
        self.fake = t.fake(self.serve)
        self.url = self.fake.url

    def _wait(self, s, secs):
        """sleep <secs> unless the peer closes first; True when it closed"""
        s.settimeout(secs)
        try:
            d = s.recv(1)
        except socket.timeout:
            return False
        except OSError:
            d = b""
        if not d:
            self.closed_ns = harness.now_ns()
            return True
        return False

    def serve(self, s, req, fake):
        try:
            if self.head_delay and self._wait(s, self.head_delay):
                return
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            for i in range(self.events):
                ev = ('data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,'
                      '"delta":{"content":"tok%d"}}]}\n\n' % i).encode()
                parts = [ev[:20], ev[20:]] if self.split and i == 1 else [ev]
                for p in parts:
                    s.sendall(b"%x\r\n%s\r\n" % (len(p), p))
                    self.sent += 1
                    if self._wait(s, self.gap):
                        return
            s.sendall(b"0\r\n\r\n")
            self._wait(s, 5)
        finally:
            self.done.set()


def read_events(t, c, n):
    r = c.read_head()
    t.eq(r.status, 200, "status")
    c.read_body(r, "POST", stop=lambda r, body: body.count(b'"content":"tok') >= n)
    return r


def close_and_time(t, c, up, what):
    t0 = harness.now_ns()
    c.close()
    t.check(up.done.wait(10), f"{what}: the upstream never saw the close")
    t.check(up.closed_ns is not None, f"{what}: the upstream ran to its end")
    dt = (up.closed_ns - t0) / 1e6
    limit = 10 * (2 if t.san else 1)
    t.note(f"{what}: the upstream saw the close {dt:.2f} ms after the client")
    t.check(dt <= limit, f"{what}: the upstream saw the close {dt:.1f} ms after the client (> {limit} ms)")


def departure(t, what, **kw):
    up = StreamingUpstream(t, **kw)
    px = t.proxy(up.url)
    c = px.conn()
    c.send(build_request("POST", "/v1/chat/completions", chat_body({}),
                         headers=[("X-Request-Id", what)]))
    return up, px, c


def test_departure_between_events(t):
    """one event a second: the client's close reaches the upstream at once,
    and the record says what the client got"""
    up, px, c = departure(t, "between")
    read_events(t, c, 3)
    close_and_time(t, c, up, "between events")
    rec = px.records(1)[0]
    t.eq(rec["metadata"]["was_cancelled"], True, "was_cancelled")
    t.eq(rec["error"]["type"], "cancelled", "error.type")
    t.eq(rec["metadata"]["token_events"], 3, "token events the upstream sent before the close")
    t.eq(rec["metadata"]["delivery"]["acked_token_events"], 3, "acked token events")


def test_departure_inside_an_event(t):
    """the client leaves while an event is half sent"""
    up, px, c = departure(t, "inside", split=True)
    r = read_events(t, c, 1)
    c.read_body(r, "POST", stop=lambda r, body: b'{"id":"c","object"' in body.split(b"tok0")[-1])
    close_and_time(t, c, up, "inside an event")
    t.eq(px.records(1)[0]["metadata"]["was_cancelled"], True, "was_cancelled")


def test_departure_waiting_for_the_head(t):
    """before any response byte a FIN may be an HTTP/1.1 half-close: a
    client that really left is noticed when the head reaches it (its reset
    comes back at once), the upstream closed within 10 ms of that"""
    up, px, c = departure(t, "head", head_delay=0.5)
    c.close()
    t.check(up.done.wait(10), "the upstream never saw the close")
    t.check(up.closed_ns is not None, "the upstream ran to its end")
    t.check(up.sent <= 2, f"the upstream sent {up.sent} events to a client that had left")
    t.eq(px.records(1)[0]["metadata"]["was_cancelled"], True, "was_cancelled")


class UploadSink(harness.Listener):
    """an upstream that reads what comes and notes when it saw the close"""

    def __init__(self, t):
        self.got = 0
        self.closed_ns = None
        self.done = threading.Event()
        super().__init__(t)

    def accepted(self, s):
        threading.Thread(target=self._read, args=(s,), daemon=True).start()

    def _read(self, s):
        with s:
            while True:
                try:
                    d = s.recv(65536)
                except OSError:
                    d = b""
                if not d:
                    self.closed_ns = harness.now_ns()
                    self.done.set()
                    return
                self.got += len(d)


def test_departure_during_upload(t):
    """the client leaves in the middle of its request body"""
    up = UploadSink(t)
    px = t.proxy(up.url)
    c = px.conn()
    body = json.dumps(chat_body({})).encode()
    c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (len(body) + 100)
           + body)
    harness.wait_until(lambda: up.got >= len(body) or None, 5, what="the upstream to get the body so far")
    close_and_time(t, c, up, "during the upload")
    t.eq(px.records(1)[0]["error"]["type"], "cancelled", "error.type")


def proxy_holds(port, cport):
    """is tokentap's end of the loopback connection 127.0.0.1:<port> <->
    :<cport> still an open socket?"""
    want_l, want_r = f":{port:04X}", f":{cport:04X}"
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            p = line.split()
            if p[1].endswith(want_l) and p[2].endswith(want_r) and p[9] != "0":
                return True
    return False


def test_departure_keepalive_between_requests(t):
    """a kept-alive client that leaves between requests: its connection
    goes, the record of its last request stays as it was"""
    sim = t.sim()
    px = t.proxy(sim.url)
    c = px.conn()
    r = c.request(build_request("POST", "/v1/chat/completions",
                                chat_body({"tokens": 2, "gap_ms": 1, "ttft_ms": 1})), "POST")
    t.eq(r.status, 200, "status")
    cport = c.sock.getsockname()[1]
    t.check(proxy_holds(px.port, cport), "tokentap does not hold the kept-alive connection")
    c.close()
    rec = px.records(1)[0]
    t.eq(rec["metadata"]["was_cancelled"], False, "the delivered request was cancelled")
    t.check(metric(rec, "client_request_latency") is not None, "client_request_latency")
    # tokentap's socket of the connection is closed too (a socket still
    # open in a process has an inode in /proc/net/tcp; a closed one 0)
    harness.wait_until(lambda: not proxy_holds(px.port, cport) or None, 5,
                       what="tokentap to close the connection")


def test_half_close_is_not_departure(t):
    """shutdown(SHUT_WR) after a complete request: the whole answer comes"""
    sim = t.sim()
    px = t.proxy(sim.url)
    c = px.conn()
    c.send(build_request("POST", "/v1/chat/completions",
                         chat_body({"tokens": 6, "gap_ms": 20, "ttft_ms": 30}),
                         headers=[("Connection", "close")]))
    c.sock.shutdown(socket.SHUT_WR)
    r = c.read_head()
    c.read_body(r, "POST")
    t.eq(r.body.count(b'"content":"tok'), 6, "token events the half-closed client got")
    rec = px.records(1)[0]
    t.eq(rec["metadata"]["was_cancelled"], False, "was_cancelled")
    t.eq(rec["error"], None, "error")
