"""TLS both ways (SPEC 3, 9; docs/tls.md): termination on the listener,
origination to https:// upstreams, verification failures, mTLS, reload,
and ends of streams without close_notify.

Certificates are made at test time with the openssl command: a throwaway
CA, a server certificate for localhost/127.0.0.1, a client certificate, an
expired one (openssl ca -startdate/-enddate: OpenSSL 3.0 has no
x509 -not_before), one for the wrong name and a self-signed one nobody
trusts.
"""
import hashlib
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time

import harness
from harness import Failure, Skip, build_request, chat_body, timeline


# --------------------------------------------------------------------------
# certificates


def _openssl(t, *args, cwd=None):
    exe = shutil.which("openssl")
    if not exe:
        raise Skip("the openssl command is not installed")
    p = subprocess.run([exe, *args], capture_output=True, cwd=cwd or t.tmp, timeout=60)
    if p.returncode != 0:
        raise Failure(f"openssl {' '.join(args[:3])}... failed: "
                      f"{p.stderr.decode('utf-8', 'replace')[-400:]}")
    return p.stdout


class Pki:
    """paths of the test's certificates and keys (PEM), made on demand"""

    def __init__(self, t):
        self.t = t
        self.dir = os.path.join(t.tmp, "pki")
        os.makedirs(self.dir, exist_ok=True)
        self.ca = self.p("ca.pem")
        self.ca_key = self.p("ca.key")
        _openssl(t, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", self.ca_key, "-out", self.ca, "-days", "2",
                 "-subj", "/CN=tokentap test CA")

    def p(self, name):
        return os.path.join(self.dir, name)

    def _csr(self, name, cn):
        key, csr = self.p(name + ".key"), self.p(name + ".csr")
        _openssl(self.t, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", key, "-out", csr, "-subj", f"/CN={cn}")
        return key, csr

    def _ext(self, name, san, client=False):
        path = self.p(name + ".ext")
        with open(path, "w") as f:
            if san:
                f.write(f"subjectAltName={san}\n")
            f.write("basicConstraints=CA:FALSE\n")
            f.write(f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}\n")
        return path

    def leaf(self, name, cn="localhost", san="DNS:localhost,IP:127.0.0.1", client=False):
        """a certificate signed by the CA; (cert, key)"""
        key, csr = self._csr(name, cn)
        cert = self.p(name + ".pem")
        _openssl(self.t, "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key,
                 "-CAcreateserial", "-out", cert, "-days", "2",
                 "-extfile", self._ext(name, san, client))
        return cert, key

    def self_signed(self, name, san="DNS:localhost,IP:127.0.0.1"):
        key, cert = self.p(name + ".key"), self.p(name + ".pem")
        _openssl(self.t, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                 "-subj", "/CN=localhost", "-addext", f"subjectAltName={san}")
        return cert, key

    def expired(self, name, san="DNS:localhost,IP:127.0.0.1"):
        """signed by the CA, valid for one day in January 2020"""
        key, csr = self._csr(name, "localhost")
        cadir = self.p("cadb")
        os.makedirs(os.path.join(cadir, "new"), exist_ok=True)
        open(os.path.join(cadir, "index.txt"), "w").close()
        with open(os.path.join(cadir, "serial"), "w") as f:
            f.write("1000\n")
        cnf = self.p("ca.cnf")
        with open(cnf, "w") as f:
            f.write(f"""[ca]
default_ca = tt
[tt]
database = {cadir}/index.txt
new_certs_dir = {cadir}/new
serial = {cadir}/serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
""")
        cert = self.p(name + ".pem")
        _openssl(self.t, "ca", "-batch", "-notext", "-config", cnf, "-cert", self.ca,
                 "-keyfile", self.ca_key, "-in", csr, "-out", cert,
                 "-startdate", "20200101000000Z", "-enddate", "20200102000000Z",
                 "-extfile", self._ext(name, san))
        return cert, key


def fingerprint_pem(path):
    with open(path) as f:
        der = ssl.PEM_cert_to_DER_cert(f.read())
    return hashlib.sha256(der).hexdigest()


# --------------------------------------------------------------------------
# TLS clients and a TLS fake upstream


def client_ctx(ca, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def tls_conn(port, ca, host="localhost", timeout=10.0):
    """a harness.Conn whose socket speaks TLS (handshake done)"""
    c = harness.Conn(port, timeout=timeout)
    c.sock = client_ctx(ca).wrap_socket(c.sock, server_hostname=host)
    return c


def tls_request(port, ca, raw, method="POST"):
    c = tls_conn(port, ca)
    try:
        return c.request(raw, method)
    finally:
        c.close()


class TlsFake:
    """A scripted HTTPS upstream (Python ssl).  handler(sock, request, fake)
    runs per connection; the connection is then closed WITHOUT close_notify
    (Python only says it on unwrap()), like a crashed or careless server."""

    def __init__(self, t, cert, key, handler, client_ca=None):
        self.handler = handler
        self.errors = []
        self.requests = []
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        if client_ca:
            self.ctx.verify_mode = ssl.CERT_REQUIRED
            self.ctx.load_verify_locations(client_ca)
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()
        t.fakes.append(self)

    def _accept(self):
        while not self.stopping:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, raw):
        try:
            raw.settimeout(10)
            s = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        try:
            req = harness.read_request(s)
            if req is None:
                return
            self.requests.append(req)
            self.handler(s, self.requests[-1], self)
        except Exception as e:
            self.errors.append(repr(e))
        finally:
            s.close()

    def stop(self):
        self.stopping = True
        try:
            self.lsock.close()
        except OSError:
            pass


SSE_CHUNKS = [b'data: {"choices":[{"delta":{"content":"%d "}}]}\n\n' % i for i in range(40)]
SSE_BODY = b"".join(SSE_CHUNKS) + b"data: [DONE]\n\n"


def sse_chunked_handler(sock, req, fake):
    """a streamed, chunked SSE response, one chunk every 2 ms"""
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                 b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    for ch in SSE_CHUNKS + [b"data: [DONE]\n\n"]:
        sock.sendall(b"%x\r\n%s\r\n" % (len(ch), ch))
        time.sleep(0.002)
    sock.sendall(b"0\r\n\r\n")


def proxy_log(px):
    return px.stderr().decode("utf-8", "replace")


def wait_log(px, pattern, what, secs=5):
    return harness.wait_until(lambda: re.search(pattern, proxy_log(px)), secs * px.ctx.slow,
                              what=what)


def error_type(rec):
    return (rec.get("error") or {}).get("type")


def stream_req(sim_opts):
    return build_request("POST", "/v1/chat/completions", chat_body(sim_opts))


# --------------------------------------------------------------------------
# termination + origination


@harness.timeout(60)
def test_tls_both_ways_curl_stream_byte_identical(t):
    """curl over TLS to the proxy, TLS to the upstream: a streamed body
    arrives byte for byte, and the record's timeline has the TCP connect
    before the TLS handshake before the request was sent"""
    pki = Pki(t)
    cert, key = pki.leaf("server")
    fake = TlsFake(t, cert, key, sse_chunked_handler)
    px = t.proxy(f"https://localhost:{fake.port}",
                 extra=["--tls-cert", cert, "--tls-key", key, "--upstream-ca", pki.ca])
    p = harness.curl(["-N", "--cacert", pki.ca, "-o", "-", "-w", "\n%{http_code} %{http_version}",
                      "-H", "Content-Type: application/json",
                      "-d", '{"model":"m","stream":true,"messages":[]}',
                      f"https://localhost:{px.port}/v1/chat/completions"])
    t.eq(p.returncode, 0, f"curl exit status (stderr {p.stderr[-300:]!r})")
    body, _, tail = p.stdout.rpartition(b"\n")
    t.eq(tail, b"200 1.1", "status and HTTP version seen by curl")
    t.eq(body, SSE_BODY, "streamed body through TLS both ways")
    rec = px.records(1)[0]
    t.eq(error_type(rec), None, "record error")
    conn_ms, tls_ms, sent_ms = (timeline(rec, "upstream_connected"),
                                timeline(rec, "upstream_tls"), timeline(rec, "request_sent"))
    t.check(None not in (conn_ms, tls_ms, sent_ms), f"timeline marks missing: {rec['metadata']}")
    t.check(conn_ms < tls_ms <= sent_ms,
            f"timeline order: connected {conn_ms} < tls {tls_ms} <= sent {sent_ms}")
    t.eq(rec["metadata"]["upstream_reused"], False, "upstream_reused")
    t.check("TLS on the listener" in proxy_log(px), "start-up log names the listener certificate")


@harness.timeout(60)
def test_tls_both_ways_sim_echo_and_keepalive(t):
    """against tokentap-sim over TLS: a 1 MiB echo comes back identical, a
    stream completes, and the second request reuses the TLS upstream
    connection (marked reused)"""
    pki = Pki(t)
    cert, key = pki.leaf("server")
    sim = t.sim(["--tls-cert", cert, "--tls-key", key])
    px = t.proxy(f"https://127.0.0.1:{sim.port}",
                 extra=["--tls-cert", cert, "--tls-key", key, "--upstream-ca", pki.ca])
    payload = os.urandom(1 << 20)
    c = tls_conn(px.port, pki.ca)
    r = c.request(build_request("POST", "/echo", payload,
                                headers=[("Content-Type", "application/octet-stream")]))
    t.eq(r.status, 200, "echo status")
    t.check(r.body == payload, f"echo body differs ({len(r.body)} bytes back)")
    r = c.request(stream_req({"tokens": 20, "ttft_ms": 5, "gap_ms": 1}))
    t.eq(r.status, 200, "stream status")
    t.check(r.complete and r.body.rstrip().endswith(b"data: [DONE]"), "stream incomplete")
    c.close()
    recs = px.records(2)
    t.eq([error_type(x) for x in recs], [None, None], "record errors")
    t.eq([x["metadata"]["upstream_reused"] for x in recs], [False, True], "upstream_reused")


# --------------------------------------------------------------------------
# upstream verification


def _bad_upstream(t, make, expect_reason):
    pki = Pki(t)
    cert, key = make(pki)
    fake = TlsFake(t, cert, key, sse_chunked_handler)
    px = t.proxy(f"https://127.0.0.1:{fake.port}", extra=["--upstream-ca", pki.ca])
    r = px.post("/v1/chat/completions", chat_body({}))
    t.eq(r.status, 502, "status")
    rec = px.records(1)[0]
    t.eq(error_type(rec), "upstream_tls", "record error type")
    msg = rec["error"].get("message", "")
    t.check(re.search(expect_reason, msg), f"record message {msg!r} lacks /{expect_reason}/")
    wait_log(px, r"502 upstream_tls: .*" + expect_reason, "the log line naming the reason")
    return pki, fake


def test_upstream_untrusted_certificate_502(t):
    """a self-signed upstream certificate: 502 upstream_tls, reason logged"""
    _bad_upstream(t, lambda pki: pki.self_signed("rogue"),
                  r"certificate verify failed: self[- ]signed certificate")


def test_upstream_expired_certificate_502(t):
    """an expired upstream certificate: 502 upstream_tls, reason logged"""
    _bad_upstream(t, lambda pki: pki.expired("old"),
                  r"certificate verify failed: certificate has expired")


def test_upstream_wrong_name_certificate_502(t):
    """a certificate for another name: 502 upstream_tls, reason logged"""
    _bad_upstream(t, lambda pki: pki.leaf("other", cn="other.example",
                                          san="DNS:other.example"),
                  r"certificate verify failed: IP address mismatch")


def test_upstream_wrong_hostname_certificate_502(t):
    """hostname check by DNS name (SNI sent): a certificate for another name"""
    pki = Pki(t)
    cert, key = pki.leaf("other", cn="other.example", san="DNS:other.example")
    fake = TlsFake(t, cert, key, sse_chunked_handler)
    px = t.proxy(f"https://localhost:{fake.port}", extra=["--upstream-ca", pki.ca])
    r = px.post("/v1/chat/completions", chat_body({}))
    t.eq(r.status, 502, "status")
    rec = px.records(1)[0]
    t.eq(error_type(rec), "upstream_tls", "record error type")
    t.check("hostname mismatch" in rec["error"]["message"], f"message {rec['error']!r}")


def test_upstream_insecure_accepts_untrusted(t):
    """--upstream-insecure: the same untrusted upstream passes, with a
    warning at start"""
    pki = Pki(t)
    cert, key = pki.self_signed("rogue")
    fake = TlsFake(t, cert, key, sse_chunked_handler)
    px = t.proxy(f"https://127.0.0.1:{fake.port}", extra=["--upstream-insecure"])
    r = px.post("/v1/chat/completions", chat_body({}))
    t.eq(r.status, 200, "status")
    t.eq(r.body, SSE_BODY, "body")
    t.check(re.search(r"warn .*--upstream-insecure", proxy_log(px)), "no start-up warning")


def test_upstream_mtls_client_certificate(t):
    """mTLS to the upstream: with --upstream-cert/--upstream-key the
    upstream (sim --tls-client-ca) answers; without, the refusal is a
    502 upstream_tls naming the reason"""
    pki = Pki(t)
    cert, key = pki.leaf("server")
    ccert, ckey = pki.leaf("client", cn="tokentap", san=None, client=True)
    sim = t.sim(["--tls-cert", cert, "--tls-key", key, "--tls-client-ca", pki.ca])
    up = f"https://127.0.0.1:{sim.port}"
    px = t.proxy(up, extra=["--upstream-ca", pki.ca, "--upstream-cert", ccert,
                            "--upstream-key", ckey])
    r = px.post("/v1/chat/completions", chat_body({"tokens": 5, "ttft_ms": 1, "gap_ms": 1}))
    t.eq(r.status, 200, "status with a client certificate")
    t.eq(error_type(px.records(1)[0]), None, "record error")

    px2 = t.proxy(up, extra=["--upstream-ca", pki.ca])
    r = px2.post("/v1/chat/completions", chat_body({"tokens": 5}))
    t.eq(r.status, 502, "status without a client certificate")
    rec = px2.records(1)[0]
    t.eq(error_type(rec), "upstream_tls", "record error type")
    t.check(re.search(r"certificate required|asked for a client certificate", rec["error"]["message"]),
            f"message does not say the certificate was required: {rec['error']!r}")
    wait_log(px2, r"upstream tls: .*(certificate required|asked for a client certificate)",
             "log line naming the refusal")


def test_upstream_session_resumed_on_new_connections(t):
    """each new upstream connection after the first resumes the worker's
    last TLS session"""
    pki = Pki(t)
    cert, key = pki.leaf("server")
    fake = TlsFake(t, cert, key, sse_chunked_handler)   # one response per connection
    px = t.proxy(f"https://localhost:{fake.port}", extra=["--upstream-ca", pki.ca])
    for i in range(3):
        r = px.post("/v1/chat/completions", chat_body({}))
        t.eq(r.status, 200, f"request {i + 1} status")
    stats = fake.ctx.session_stats()
    t.eq(len(fake.requests), 3, "upstream connections")
    t.check(stats["hits"] >= 2, f"sessions resumed: {stats}")


# --------------------------------------------------------------------------
# termination


def test_client_garbage_handshake_does_not_disturb_stream(t):
    """a client sending garbage instead of a ClientHello is closed and
    logged with the reason; a stream running meanwhile ends intact"""
    pki = Pki(t)
    cert, key = pki.leaf("server")
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--tls-cert", cert, "--tls-key", key])
    c = tls_conn(px.port, pki.ca)
    c.send(stream_req({"tokens": 30, "ttft_ms": 10, "gap_ms": 10}))
    r = c.read_head()
    t.eq(r.status, 200, "stream status")
    bad = []
    # fixed junk that no TLS record header can be read into (random bytes
    # sometimes announce a long record and wait for it: see the next test)
    junk_bytes = bytes((7 * i + 3) % 128 for i in range(300))
    for junk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", junk_bytes, b"\x16\x03\x01\x00\x05hello"):
        g = harness.Conn(px.port, timeout=5)
        g.send(junk)
        bad.append(g)
    for g in bad:
        t.check(g.closed_by_peer(5), "the proxy kept a garbage connection open")
        g.close()
    c.read_body(r)
    t.check(r.complete and r.body.rstrip().endswith(b"data: [DONE]"), "stream cut")
    c.close()
    wait_log(px, r"client tls 127\.0\.0\.1: handshake failed: .*http request",
             "the handshake failure logged with the reason")
    rec = px.records(1)[0]
    t.eq(error_type(rec), None, "stream record error")


def test_client_certificate_required(t):
    """--tls-client-ca: a client without a certificate fails its handshake,
    one with a certificate from the CA is served"""
    pki = Pki(t)
    cert, key = pki.leaf("server")
    ccert, ckey = pki.leaf("client", cn="alice", san=None, client=True)
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--tls-cert", cert, "--tls-key", key,
                                 "--tls-client-ca", pki.ca])
    ok = harness.curl(["--cacert", pki.ca, "--cert", ccert, "--key", ckey, "-o", "/dev/null",
                       "-w", "%{http_code}", f"https://localhost:{px.port}/health"])
    t.eq(ok.stdout, b"200", f"with a client certificate (stderr {ok.stderr[-200:]!r})")
    no = harness.curl(["--cacert", pki.ca, "-o", "/dev/null", "-w", "%{http_code}",
                       f"https://localhost:{px.port}/health"])
    t.check(no.returncode != 0, "served a client without a certificate")
    wait_log(px, r"client tls 127\.0\.0\.1: .*certificate", "the refusal logged")


def _s_client_fingerprint(t, port):
    out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                          "-servername", "localhost"], input=b"", capture_output=True,
                         timeout=20).stdout
    m = re.search(rb"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", out, re.S)
    if not m:
        raise Failure(f"openssl s_client showed no certificate: {out[-300:]!r}")
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(m.group(0).decode())).hexdigest()


@harness.timeout(60)
def test_sighup_reloads_certificate_stream_survives(t):
    """SIGHUP with new certificate files: s_client sees the new
    certificate, a stream opened before the reload finishes intact, and a
    reload with a broken file keeps the current certificate"""
    pki = Pki(t)
    a_cert, a_key = pki.leaf("a")
    b_cert, b_key = pki.leaf("b")
    live_cert, live_key = pki.p("live.pem"), pki.p("live.key")
    shutil.copy(a_cert, live_cert)
    shutil.copy(a_key, live_key)
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--tls-cert", live_cert, "--tls-key", live_key])
    t.eq(_s_client_fingerprint(t, px.port), fingerprint_pem(a_cert), "certificate before reload")

    c = tls_conn(px.port, pki.ca)
    c.send(stream_req({"tokens": 40, "ttft_ms": 10, "gap_ms": 15}))
    r = c.read_head()
    t.eq(r.status, 200, "stream status")
    shutil.copy(b_cert, live_cert)
    shutil.copy(b_key, live_key)
    px.reload()
    t.check(re.search(r"reload: TLS on the listener now", proxy_log(px)), "the reload not logged")
    t.eq(_s_client_fingerprint(t, px.port), fingerprint_pem(b_cert), "certificate after reload")
    c.read_body(r)
    t.check(r.complete and r.body.rstrip().endswith(b"data: [DONE]"), "stream cut by reload")
    c.close()

    with open(live_cert, "w") as f:
        f.write("not a certificate\n")
    px.reload()
    t.check(re.search(r"reload: --tls-cert .*keeping the current listener certificate",
                      proxy_log(px)), "the failed reload not logged")
    t.eq(_s_client_fingerprint(t, px.port), fingerprint_pem(b_cert), "certificate after bad reload")
    r = tls_request(px.port, pki.ca, build_request("GET", "/health"), "GET")
    t.eq(r.status, 200, "served after the failed reload")


# --------------------------------------------------------------------------
# ends of streams


def test_tls_upstream_truncated_stream_is_error(t):
    """a TLS upstream that closes mid-stream without close_notify: 502
    truncated in the record; the client sees the cut"""
    pki = Pki(t)
    cert, key = pki.leaf("server")
    sim = t.sim(["--tls-cert", cert, "--tls-key", key])
    px = t.proxy(f"https://127.0.0.1:{sim.port}",
                 extra=["--tls-cert", cert, "--tls-key", key, "--upstream-ca", pki.ca])
    r = tls_request(px.port, pki.ca, stream_req({"tokens": 10, "ttft_ms": 1, "gap_ms": 1,
                                                "truncate_after": 3}))
    t.eq(r.status, 200, "status (the head was forwarded)")
    t.check(not r.complete, "the client saw a complete body")
    rec = px.records(1)[0]
    t.eq(error_type(rec), "truncated", "record error type")


def test_tls_upstream_dirty_close_mid_body_python(t):
    """the same with a Python upstream that sends half a Content-Length
    body and drops the socket without close_notify"""
    pki = Pki(t)
    cert, key = pki.leaf("server")

    def half(sock, req, fake):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n" + b"x" * 40)
        time.sleep(0.05)
    fake = TlsFake(t, cert, key, half)
    px = t.proxy(f"https://127.0.0.1:{fake.port}", extra=["--upstream-ca", pki.ca])
    c = px.conn()
    r = c.request(build_request("POST", "/v1/chat/completions", chat_body({}, stream=False)))
    c.close()
    t.eq(r.status, 200, "status")
    t.check(not r.complete, "client saw a complete body")
    t.eq(error_type(px.records(1)[0]), "truncated", "record error type")


def test_tls_upstream_close_delimited_complete_is_not_error(t):
    """a close-delimited body is complete at EOF, close_notify or not: no
    error record, and the client (curl, TLS) gets it all without error"""
    pki = Pki(t)
    cert, key = pki.leaf("server")

    def close_delimited(sock, req, fake):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Connection: close\r\n\r\n")
        for ch in SSE_CHUNKS + [b"data: [DONE]\n\n"]:
            sock.sendall(ch)
            time.sleep(0.001)
    fake = TlsFake(t, cert, key, close_delimited)      # closes without close_notify
    px = t.proxy(f"https://127.0.0.1:{fake.port}",
                 extra=["--tls-cert", cert, "--tls-key", key, "--upstream-ca", pki.ca])
    for i in range(3):
        p = harness.curl(["-N", "--cacert", pki.ca, "-o", "-", "-H", "Content-Type: application/json",
                          "-d", '{"model":"m","stream":true}',
                          f"https://localhost:{px.port}/v1/chat/completions"])
        t.eq(p.returncode, 0, f"curl {i + 1} exit status (stderr {p.stderr[-300:]!r})")
        t.eq(p.stdout, SSE_BODY, f"curl {i + 1} body")
    recs = px.records(3)
    t.eq([error_type(x) for x in recs], [None] * 3, "record errors")


def test_client_partial_handshake_cut_at_head_deadline(t):
    """a client that sends the start of a TLS record and then nothing is
    closed at the head deadline, not after the idle keep-alive limit"""
    pki = Pki(t)
    cert, key = pki.leaf("server")
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--tls-cert", cert, "--tls-key", key, "--head-timeout", "1s"])
    g = harness.Conn(px.port, timeout=5)
    g.send(b"\x16\x03\x01\x40\x00" + b"\x01" * 10)   # a 16 KiB record, 10 bytes of it
    t0 = time.monotonic()
    t.check(g.closed_by_peer(4 * t.slow), "the partial handshake was not cut within 4 s")
    took = time.monotonic() - t0
    t.check(took >= 0.8, f"cut after {took:.2f} s, before the 1 s deadline")
    g.close()
    # a real client on the same listener still works
    c = tls_conn(px.port, pki.ca)
    c.send(stream_req({"tokens": 3, "ttft_ms": 1, "gap_ms": 1}))
    r = c.read_head()
    t.eq(r.status, 200, "a good client after the cut")
    c.read_body(r)
    c.close()
