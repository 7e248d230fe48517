"""
Integration test harness for tokentap (standard library only).

Owns: starting tokentap-sim and tokentap as child processes with their
stderr captured to files (checked for sanitizer reports at teardown), a raw
socket HTTP/1.1 client that records when every recv() returned, a tiny
scriptable fake upstream (raw bytes), and readers for records, /proc RSS and
the simulator's GET /stats.

A test is a function `test_<behaviour>(t)` in tests/integration/test_*.py;
<t> is a Ctx (below).  tests/integration/run.py runs each test in its own
process with a fresh Ctx and a deadline; whatever the test started is
stopped and checked when it returns.

    def test_something(t):
        sim = t.sim()
        px = t.proxy(sim.url)
        r = px.post("/v1/chat/completions", {"stream": True, "sim": {...}})
        t.eq(r.status, 200, "status")
        rec = px.records(1)[0]

Helpers raise Failure (a failed check) or Skip (the check cannot be made
here, with the reason).  Per-test deadline: decorate with @timeout(SECONDS).

Ports and readiness: every listener of tokentap and tokentap-sim binds port
0 (the kernel picks a free port, nothing is chosen and released here).  A
child is ready when it says so: it is started with NOTIFY_SOCKET naming a
datagram socket of ours (the systemd protocol; they call sd_notify) and
--ready-file; we block in select() on that socket and on the child's pidfd
(so a child that dies at start is seen at once) until READY=1 arrives, then
read the addresses it bound from the ready file (written, by rename,
before READY=1 is sent).  No polling, no sleeps.
"""
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.normpath(os.path.join(REPO, "..", "shared", "fixtures", "streams"))

SANITIZER_MARKS = (b"ERROR: AddressSanitizer", b"ERROR: LeakSanitizer",
                   b"runtime error:", b"ERROR: ThreadSanitizer",
                   b"WARNING: ThreadSanitizer")


class Failure(AssertionError):
    pass


class Skip(Exception):
    pass


def timeout(seconds):
    """decorator: the test's deadline in seconds (release build)"""
    def deco(fn):
        fn.timeout = seconds
        return fn
    return deco


def retry_on_failure(times=1):
    """decorator for timing-sensitive tests: rerun a failed test (fresh
    processes) up to <times> more times; the runner reports the first
    failure next to the eventual pass, so flakiness stays visible"""
    def deco(fn):
        fn.retries = times
        return fn
    return deco


def now_ns():
    return time.monotonic_ns()


class DeadPort:
    """A loopback port where nothing listens, held for the test's lifetime:
    a socket bound to port 0 that never calls listen(), so connecting to it
    is refused and no other process can take the port meanwhile."""

    def __init__(self, ctx):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        ctx.fakes.append(self)

    def stop(self):
        self.sock.close()

    errors = ()


def wait_until(pred, deadline_s, interval=0.01, what="condition"):
    """poll <pred> until it returns a true value (returned) or fail"""
    end = time.monotonic() + deadline_s
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= end:
            raise Failure(f"timed out after {deadline_s}s waiting for {what}")
        time.sleep(interval)


def listening_ports(pid):
    """the TCP ports process <pid> listens on (its socket inodes matched
    against /proc/net/tcp{,6} in state LISTEN), for children that bind port
    0 but cannot say which port they got"""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    col = line.split()
                    if col[3] == "0A" and col[9] in inodes:
                        ports.add(int(col[1].rsplit(":", 1)[1], 16))
        except OSError:
            pass
    return sorted(ports)


def proc_rss_kib(pid):
    """VmRSS of <pid> in KiB (from /proc/PID/status)"""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise Failure(f"no VmRSS for pid {pid}")


# --------------------------------------------------------------------------
# HTTP/1.1 response parsing over a raw socket


class Response:
    """One HTTP response as the client received it.

    status, reason, version, headers [(name, value)], body (de-chunked
    bytes), raw_body (the body bytes exactly as framed on the wire), chunked,
    framing ("length" | "chunked" | "close" | "none"), complete (the framing
    said the body ended), head_off/body_off (offsets in the connection's
    byte stream), body_map [(body_off, stream_off, n)] mapping de-chunked
    body bytes to connection stream offsets.
    """

    def __init__(self):
        self.status = None
        self.reason = ""
        self.version = ""
        self.headers = []
        self.body = b""
        self.raw_body = b""
        self.chunked = False
        self.framing = "none"
        self.complete = False
        self.head_off = 0
        self.body_off = 0
        self.body_map = []
        self.conn = None

    def header(self, name, default=None):
        n = name.lower()
        for k, v in self.headers:
            if k.lower() == n:
                return v
        return default

    def header_all(self, name):
        n = name.lower()
        return [v for k, v in self.headers if k.lower() == n]

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def body_arrival_ns(self, body_index):
        """monotonic ns when de-chunked body byte <body_index> arrived"""
        for boff, soff, n in self.body_map:
            if boff <= body_index < boff + n:
                return self.conn.arrival_ns(soff + body_index - boff)
        raise Failure(f"body offset {body_index} not in the response")

    def __repr__(self):
        return (f"<Response {self.status} {self.framing} body={len(self.body)}B "
                f"complete={self.complete}>")


class Conn:
    """A raw client connection: exact bytes out, every recv() timed.

    The connection's received bytes are kept whole (self.data) with
    self.log = [(monotonic_ns, total_bytes_after_this_recv)].
    """

    def __init__(self, port, host="127.0.0.1", timeout=10.0, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        self.timeout = timeout
        self.data = bytearray()
        self.pos = 0          # parse position in self.data
        self.log = []
        self.eof = False
        self.reset = False
        self.sent_ns = []

    def send(self, raw):
        """send <raw> bytes; returns the monotonic ns just before the send"""
        t = now_ns()
        self.sent_ns.append(t)
        self.sock.sendall(raw)
        return t

    def fill(self, timeout=None):
        """one recv(); returns the number of bytes read (0 at EOF)"""
        if self.eof:
            return 0
        self.sock.settimeout(self.timeout if timeout is None else timeout)
        try:
            b = self.sock.recv(1 << 16)
        except ConnectionResetError:
            self.eof = self.reset = True
            return 0
        t = now_ns()
        if not b:
            self.eof = True
            return 0
        self.data += b
        self.log.append((t, len(self.data)))
        return len(b)

    def arrival_ns(self, offset):
        """monotonic ns of the recv() that delivered stream byte <offset>"""
        for t, total in self.log:
            if total > offset:
                return t
        raise Failure(f"byte {offset} never arrived")

    def _need(self, n):
        while len(self.data) - self.pos < n:
            if self.fill() == 0:
                return False
        return True

    def _line(self):
        while True:
            i = self.data.find(b"\r\n", self.pos)
            if i >= 0:
                line = bytes(self.data[self.pos:i])
                self.pos = i + 2
                return line
            if self.fill() == 0:
                return None

    def read_head(self):
        """read a response head (skipping 100 Continue); Response or Failure"""
        while True:
            r = Response()
            r.conn = self
            r.head_off = self.pos
            while True:
                end = self.data.find(b"\r\n\r\n", self.pos)
                if end >= 0:
                    break
                if self.fill() == 0:
                    raise Failure("connection closed before a response head "
                                  f"(got {bytes(self.data[self.pos:])[:200]!r})")
            head = bytes(self.data[self.pos:end]).decode("latin-1")
            self.pos = end + 4
            r.body_off = self.pos
            lines = head.split("\r\n")
            m = re.match(r"^(HTTP/\d\.\d) (\d{3})(?: (.*))?$", lines[0])
            if not m:
                raise Failure(f"bad status line {lines[0]!r}")
            r.version, r.status, r.reason = m.group(1), int(m.group(2)), m.group(3) or ""
            for ln in lines[1:]:
                k, sep, v = ln.partition(":")
                if not sep:
                    raise Failure(f"bad response header line {ln!r}")
                r.headers.append((k, v.strip()))
            if r.status == 100:
                continue
            return r

    def read_body(self, r, method="GET", stop=None):
        """read the body of <r> per its framing; stop(r) may end early"""
        if method == "HEAD" or r.status in (204, 304) or 100 <= r.status < 200:
            r.framing = "none"
            r.complete = True
            return r
        te = r.header("transfer-encoding")
        cl = r.header("content-length")
        if te is not None and te.lower() == "chunked":
            r.framing = "chunked"
            r.chunked = True
            self._read_chunked(r, stop)
        elif cl is not None:
            r.framing = "length"
            n = int(cl)
            start = r.body_off          # a continued read starts over
            while len(self.data) - start < n:
                if stop and stop(r, bytes(self.data[start:])):
                    break
                if self.fill() == 0:
                    break
            got = min(n, len(self.data) - start)
            r.body = r.raw_body = bytes(self.data[start:start + got])
            r.body_map = [(0, start, got)]
            self.pos = start + got
            r.complete = got == n
        else:
            r.framing = "close"
            start = r.body_off
            while self.fill() > 0:
                if stop and stop(r, bytes(self.data[start:])):
                    break
            r.body = r.raw_body = bytes(self.data[start:])
            r.body_map = [(0, start, len(r.body))]
            self.pos = len(self.data)
            r.complete = self.eof and not self.reset
        return r

    def _read_chunked(self, r, stop):
        # a second call continues where a stop() left off
        start = r.body_off
        body = bytearray(r.body)
        while True:
            line = self._line()
            if line is None:
                break
            size_s = line.split(b";", 1)[0].strip()
            try:
                size = int(size_s, 16)
            except ValueError:
                raise Failure(f"bad chunk size line {line[:80]!r}")
            if size == 0:
                # trailers up to the blank line
                ok = True
                while True:
                    tl = self._line()
                    if tl is None:
                        ok = False
                        break
                    if tl == b"":
                        break
                r.complete = ok
                break
            if not self._need(size + 2):
                got = len(self.data) - self.pos
                r.body_map.append((len(body), self.pos, got))
                body += self.data[self.pos:self.pos + got]
                self.pos += got
                break
            r.body_map.append((len(body), self.pos, size))
            body += self.data[self.pos:self.pos + size]
            if self.data[self.pos + size:self.pos + size + 2] != b"\r\n":
                raise Failure("chunk data not followed by CRLF")
            self.pos += size + 2
            if stop and stop(r, bytes(body)):
                break
        r.body = bytes(body)
        r.raw_body = bytes(self.data[start:self.pos])

    def response(self, method="GET", stop=None):
        r = self.read_head()
        return self.read_body(r, method, stop)

    def request(self, raw, method=None):
        if method is None:
            method = raw.split(b" ", 1)[0].decode()
        self.send(raw)
        return self.response(method)

    def closed_by_peer(self, timeout=2.0):
        """True when the peer closed (EOF or RST) within <timeout>, with no
        further bytes beyond what was parsed; data read meanwhile is kept"""
        end = time.monotonic() + timeout
        while not self.eof:
            left = end - time.monotonic()
            if left <= 0:
                return False
            try:
                self.fill(timeout=left)
            except socket.timeout:
                return False
        return True

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def build_request(method, path, body=None, headers=None, host="localhost",
                  chunked=False, connection=None):
    """bytes of an HTTP/1.1 request; <body> bytes/str/dict (dict = JSON)"""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    h = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    names = set()
    for k, v in (headers or []):
        h.append(f"{k}: {v}")
        names.add(k.lower())
    if body is not None and "content-type" not in names:
        h.append("Content-Type: application/json")
    if connection:
        h.append(f"Connection: {connection}")
    if body is not None:
        if chunked:
            h.append("Transfer-Encoding: chunked")
        else:
            h.append(f"Content-Length: {len(body)}")
    raw = ("\r\n".join(h) + "\r\n\r\n").encode()
    if body is not None:
        if chunked:
            raw += b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n" if body else b"0\r\n\r\n"
        else:
            raw += body
    return raw


def http(port, method, path, body=None, headers=None, timeout=15.0, **kw):
    """one request on a fresh connection; the Response (conn closed)"""
    c = Conn(port, timeout=timeout)
    try:
        r = c.request(build_request(method, path, body, headers, **kw), method)
    finally:
        c.close()
    return r


# --------------------------------------------------------------------------
# child processes


def read_head(s):
    """bytes from socket <s> up to the end of a request head (and whatever
    came with it), or None when the peer closed first"""
    data = b""
    while b"\r\n\r\n" not in data:
        b = s.recv(65536)
        if not b:
            return None
        data += b
    return data


def read_request(s):
    """one whole HTTP/1.1 request (head and Content-Length or chunked body)
    from socket <s> as raw bytes, or None when the peer closed first"""
    data = read_head(s)
    if data is None:
        return None
    head, _, rest = data.partition(b"\r\n\r\n")
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    need = int(m.group(1)) if m else 0
    while len(rest) < need:
        b = s.recv(65536)
        if not b:
            break
        rest += b
    if re.search(rb"(?im)^transfer-encoding:\s*chunked", head):
        # good enough for tests: up to the last-chunk and empty trailer
        while not (rest == b"0\r\n\r\n" or rest.endswith(b"\r\n0\r\n\r\n")):
            b = s.recv(65536)
            if not b:
                break
            rest += b
    return head + b"\r\n\r\n" + rest


class Notify:
    """The receiving end of NOTIFY_SOCKET for one child: an abstract
    AF_UNIX datagram socket (no file, no path length limit).  Every message
    is kept in .messages (dicts of KEY=VALUE lines, with "_t" = monotonic
    seconds on arrival), in order."""

    def __init__(self, ctx, name):
        self.addr = f"@tokentap-test-{os.getpid()}-{name}-{id(self):x}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.addr[1:])
        self.messages = []

    def _take(self, timeout):
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return False
        data = self.sock.recv(65536).decode("utf-8", "replace")
        msg = {"_t": time.monotonic()}
        for line in data.split("\n"):
            k, sep, v = line.partition("=")
            if sep:
                msg[k] = v
        self.messages.append(msg)
        return True

    def wait(self, pred, deadline_s, proc=None, what="a notification"):
        """block until a message satisfies <pred> (returned); fails when
        <proc> exits first or the deadline passes"""
        for m in self.messages:
            if pred(m):
                return m
        end = time.monotonic() + deadline_s
        watch = [self.sock]
        if proc is not None and proc.pidfd is not None:
            watch.append(proc.pidfd)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise Failure(f"timed out after {deadline_s}s waiting for {what}; "
                              f"messages so far: {[{k: v for k, v in m.items() if k != '_t'} for m in self.messages]}")
            r, _, _ = select.select(watch, [], [], left)
            if self.sock in r:
                self._take(0)
                if pred(self.messages[-1]):
                    return self.messages[-1]
            elif r and proc is not None:
                proc.wait(1)
                raise Failure(f"{proc.name} exited {proc.p.returncode} while we waited for "
                              f"{what}: {proc.stderr()[-500:].decode('utf-8', 'replace')}")

    def drain(self):
        """take every message already queued"""
        while self._take(0):
            pass
        return self.messages

    def close(self):
        self.sock.close()


class Proc:
    """A child process with stdout/stderr in files under the test's dir.

    With <notify> (a Notify), the child gets NOTIFY_SOCKET; <env_extra> adds or
    overrides environment variables; <pass_fds> and <preexec_fn> go to
    Popen as they are."""

    def __init__(self, ctx, name, argv, stdout_pipe=False, expect_rc=0, asan="",
                 notify=None, env_extra=None, pass_fds=(), preexec_fn=None):
        self.ctx = ctx
        self.name = name
        self.argv = argv
        self.expect_rc = expect_rc
        self.err_path = os.path.join(ctx.tmp, f"{name}.stderr")
        self.out_path = os.path.join(ctx.tmp, f"{name}.stdout")
        self.errf = open(self.err_path, "wb")
        self.outf = None if stdout_pipe else open(self.out_path, "wb")
        env = dict(os.environ)
        # leaks are reported on stderr (checked below); keep exit codes ours
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:exitcode=23")
        if asan:
            # extra sanitizer options for this process only (e.g. a small
            # quarantine where a test measures memory)
            env["ASAN_OPTIONS"] += ":" + asan
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        # never inherit systemd's variables from whoever runs the tests
        for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
                  "LISTEN_PID", "LISTEN_FDNAMES"):
            env.pop(k, None)
        self.notify = notify
        if notify is not None:
            env["NOTIFY_SOCKET"] = notify.addr
        env.update(env_extra or {})
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE if stdout_pipe else self.outf,
                                  stderr=self.errf, env=env, pass_fds=pass_fds,
                                  preexec_fn=preexec_fn)
        self.pid = self.p.pid
        try:
            self.pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self.pidfd = None       # then only the deadline notices an early exit
        self.rc = None
        ctx.procs.append(self)

    def alive(self):
        return self.p.poll() is None

    def stderr(self):
        self.errf.flush()
        with open(self.err_path, "rb") as f:
            return f.read()

    def signal(self, sig):
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def wait(self, timeout):
        try:
            self.rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.rc

    def stop(self, timeout=None):
        """SIGTERM, wait, SIGKILL if needed; returns the exit status"""
        if timeout is None:
            timeout = 10 * self.ctx.slow
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            if self.wait(timeout) is None:
                self.p.kill()
                self.p.wait()
                self.rc = "killed (no exit within %ss of SIGTERM)" % timeout
                return self.rc
        self.rc = self.p.returncode
        return self.rc

    def problems(self):
        """what is wrong with how the process ended: list of strings"""
        out = []
        err = self.stderr()
        for mark in SANITIZER_MARKS:
            if mark in err:
                i = err.find(mark)
                out.append(f"{self.name}: {mark.decode()} on stderr: "
                           + err[i:i + 600].decode("utf-8", "replace").replace("\n", " | "))
                break
        if self.expect_rc is not None and self.rc != self.expect_rc:
            tail = err[-400:].decode("utf-8", "replace").replace("\n", " | ")
            out.append(f"{self.name} exited {self.rc} (expected {self.expect_rc}); "
                       f"stderr tail: {tail}")
        return out


    def wait_ready(self, ready_path, deadline_s):
        """block until READY=1 (see the module doc); the ready file's JSON"""
        self.notify.wait(lambda m: m.get("READY") == "1", deadline_s, self,
                         f"READY=1 from {self.name}")
        with open(ready_path) as f:
            info = json.load(f)
        if info.get("pid") != self.pid:
            raise Failure(f"{self.name}: ready file names pid {info.get('pid')}, "
                          f"not {self.pid}")
        return info

    def close(self):
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        if self.notify is not None:
            self.notify.close()


def port_of(addr):
    """the port of "127.0.0.1:8080" / "[::1]:8080" """
    return int(addr.rsplit(":", 1)[1])


class Sim(Proc):
    def __init__(self, ctx, extra=()):
        binary = os.path.join(ctx.build, "tokentap-sim")
        if not os.access(binary, os.X_OK):
            raise Skip(f"{binary} not built")
        name = f"sim{len(ctx.procs)}"
        ready = os.path.join(ctx.tmp, f"{name}.ready.json")
        super().__init__(ctx, name,
                         [binary, "--listen", "127.0.0.1:0", "--ready-file", ready, *extra],
                         notify=Notify(ctx, name))
        self.port = port_of(self.wait_ready(ready, 10 * ctx.slow)["listen"])
        self.url = f"http://127.0.0.1:{self.port}"

    def stats(self):
        r = http(self.port, "GET", "/stats")
        if r.status != 200:
            raise Failure(f"sim GET /stats answered {r.status}")
        return r.json()


class Proxy(Proc):
    """tokentap; admin "auto" = an admin listener on 127.0.0.1:0.  With
    wait=False the caller waits (e.g. for an expected exit); <env_extra>,
    <pass_fds>, <preexec_fn> and <listen> (default 127.0.0.1:0) serve the
    systemd tests."""

    def __init__(self, ctx, upstream, record=True, admin="off", extra=(),
                 expect_rc=0, wait=True, asan="", listen="127.0.0.1:0",
                 env_extra=None, pass_fds=(), preexec_fn=None, argv0=()):
        binary = os.path.join(ctx.build, "tokentap")
        if not os.access(binary, os.X_OK):
            raise Skip(f"{binary} not built")
        self.record_path = os.path.join(ctx.tmp, f"records{len(ctx.procs)}.jsonl") if record else None
        name = f"proxy{len(ctx.procs)}"
        self.ready_path = os.path.join(ctx.tmp, f"{name}.ready.json")
        adm = "127.0.0.1:0" if admin == "auto" else admin
        argv = [*argv0, binary]
        if listen is not None:
            argv += ["--listen", listen]
        argv += ["--upstream", upstream, "--admin", adm, "--ready-file", self.ready_path]
        if self.record_path:
            argv += ["--record", self.record_path]
        argv += list(extra)
        super().__init__(ctx, name, argv, expect_rc=expect_rc, asan=asan,
                         notify=Notify(ctx, name), env_extra=env_extra,
                         pass_fds=pass_fds, preexec_fn=preexec_fn)
        self.port = self.admin_port = None
        if wait:
            self.ready = self.wait_ready(self.ready_path, 10 * ctx.slow)
            self.port = port_of(self.ready["listen"])
            if self.ready.get("admin") is not None:
                self.admin_port = port_of(self.ready["admin"])

    def conn(self, **kw):
        return Conn(self.port, **kw)

    def reload(self):
        """SIGHUP, then block until the reload is over: RELOADING=1 and the
        READY=1 after it (proxy/server/sdnotify.c); returns that READY message"""
        n = len(self.notify.drain())
        self.signal(signal.SIGHUP)
        self.notify.wait(lambda m: m.get("RELOADING") == "1", 10 * self.ctx.slow, self,
                         "RELOADING=1 after SIGHUP")
        return self.notify.wait(
            lambda m: m.get("READY") == "1" and self.notify.messages.index(m) > n,
            10 * self.ctx.slow, self, "READY=1 after the reload")

    def request(self, method, path, body=None, headers=None, **kw):
        return http(self.port, method, path, body, headers, **kw)

    def post(self, path, body, headers=None, **kw):
        return http(self.port, "POST", path, body, headers, **kw)

    def records(self, n=None, timeout=None):
        """the records written so far; with <n>, wait until there are n"""
        if not self.record_path:
            raise Failure("proxy started without --record")
        if timeout is None:
            timeout = 5 * self.ctx.slow

        def read():
            if not os.path.exists(self.record_path):
                return []
            with open(self.record_path, "rb") as f:
                data = f.read()
            out = []
            for ln in data.split(b"\n"):
                if ln.strip():
                    try:
                        out.append(json.loads(ln))
                    except ValueError:
                        # a partial line means the writer is mid-write
                        return None
            return out
        if n is None:
            return read() or []
        recs = wait_until(lambda: (lambda x: x if x is not None and len(x) >= n else None)(read()),
                          timeout, what=f"{n} record(s) in {self.record_path}")
        return recs

    def rss_kib(self):
        return proc_rss_kib(self.pid)


class Listener:
    """A loopback listener that hands each accepted socket to
    self.accepted(sock) on its own thread; stopped with the test."""

    errors = ()

    def __init__(self, t):
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(512)
        self.port = self.lsock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()
        t.fakes.append(self)

    def _accept(self):
        while True:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            self.accepted(s)

    def stop(self):
        try:
            self.lsock.close()
        except OSError:
            pass


class FakeUpstream(Listener):
    """A scripted raw-bytes upstream for malformed responses and tunnels.

    handler(sock, request_bytes, fake) runs per request on its own thread;
    request_bytes is the head plus a Content-Length body if any.  Every
    request received is kept in self.requests.
    """

    def __init__(self, ctx, handler):
        self.ctx = ctx
        self.handler = handler
        self.requests = []
        self.errors = []
        super().__init__(ctx)

    def accepted(self, s):
        threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        try:
            s.settimeout(10)
            req = read_request(s)
            if req is None:
                return
            self.requests.append(req)
            self.handler(s, req, self)
        except Exception as e:   # reported by the test through .errors
            self.errors.append(repr(e))
        finally:
            try:
                s.close()
            except OSError:
                pass


def reply_raw(raw):
    """FakeUpstream handler: send <raw> and close"""
    def h(sock, req, fake):
        sock.sendall(raw)
        time.sleep(0.2)
    return h


# --------------------------------------------------------------------------
# curl


def curl(args, timeout=30):
    """run curl with <args>; CompletedProcess (bytes).  Skip when absent."""
    exe = shutil.which("curl")
    if not exe:
        raise Skip("curl is not installed")
    return subprocess.run([exe, "-sS", *args], capture_output=True, timeout=timeout)


# --------------------------------------------------------------------------
# the per-test context


class Ctx:
    """What one test owns: its temp dir, processes and fake upstreams.

    slow: 1 for the release build, larger under sanitizers (scale deadlines)
    """

    def __init__(self, build, tmp, name):
        self.build = build
        self.tmp = tmp
        self.name = name
        self.san = os.path.basename(os.path.normpath(build)).endswith("-san")
        self.slow = 4 if self.san else 1
        self.procs = []
        self.fakes = []
        self.notes = []

    # starting things
    def sim(self, extra=()):
        return Sim(self, extra)

    def proxy(self, upstream, **kw):
        return Proxy(self, upstream, **kw)

    def fake(self, handler):
        return FakeUpstream(self, handler)

    def dead_port(self):
        """a port nothing listens on, for as long as the test runs"""
        return DeadPort(self).port

    def note(self, msg):
        self.notes.append(msg)

    # checks
    def check(self, cond, msg):
        if not cond:
            raise Failure(msg)

    def eq(self, got, want, what):
        if got != want:
            g, w = repr(got), repr(want)
            if len(g) > 300:
                g = g[:300] + "..."
            if len(w) > 300:
                w = w[:300] + "..."
            raise Failure(f"{what}: got {g}, want {w}")

    def near(self, got, want, tol, what):
        if got is None:
            raise Failure(f"{what}: absent, want {want} +- {tol}")
        if abs(got - want) > tol:
            raise Failure(f"{what}: got {got:.3f}, want {want:.3f} +- {tol}")

    def teardown(self):
        problems = []
        for f in self.fakes:
            f.stop()
            for e in f.errors:
                problems.append(f"fake upstream: {e}")
        # proxies first (they may hold upstream connections), then sims
        for p in sorted(self.procs, key=lambda p: 0 if isinstance(p, Proxy) else 1):
            if p.rc is None:
                p.stop()
            problems += p.problems()
            p.close()
        return problems


# --------------------------------------------------------------------------
# record helpers


def metric(rec, tag):
    """record["metrics"][tag]["value"] or None"""
    m = rec.get("metrics", {}).get(tag)
    return None if m is None else m.get("value")


def timeline(rec, name):
    """ms since t0 of a timeline boundary, or None"""
    v = rec.get("metadata", {}).get("timeline_ns", {}).get(name)
    return None if v is None else v / 1e6


def sse_events(body):
    """split an SSE body into raw event blocks (LF or CRLF separated)"""
    text = body.replace(b"\r\n", b"\n")
    return [e for e in text.split(b"\n\n") if e.strip()]


def chat_body(sim, stream=True, model="sim-model", **extra):
    d = {"model": model, "messages": [{"role": "user", "content": "hi"}],
         "stream": stream, "sim": sim}
    d.update(extra)
    return d
