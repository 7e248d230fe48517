"""systemd (docs in systemd/tokentap.service): what tokentap says on a real
NOTIFY_SOCKET (READY=1 once the listeners accept, STATUS=, WATCHDOG=1 with
WATCHDOG_USEC, RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 on SIGTERM),
socket activation with a passed descriptor (LISTEN_FDS/LISTEN_PID, fd 3
already listening), port 0 and the ready file, and `systemd-analyze
verify` on the shipped units.

Every proxy of the suite already gets a NOTIFY_SOCKET from the harness
(harness.Notify): px.notify.messages holds what arrived, in order."""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading

import harness
from harness import chat_body


def statuses(px):
    return [m["STATUS"] for m in px.notify.drain() if "STATUS" in m]


def test_ready_once_every_listener_accepts(t):
    """READY=1 comes after the proxy and admin listeners are up: at that
    moment both accept (no retry), the ready file names the ports the
    kernel gave for port 0, and the log line says the same"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--workers", "2"])
    ready = [m for m in px.notify.messages if m.get("READY") == "1"]
    t.eq(len(ready), 1, "READY=1 messages at start")
    t.check(ready[0].get("STATUS", "").startswith(f"listening on 127.0.0.1:{px.port}, "
                                                  f"admin 127.0.0.1:{px.admin_port}"),
            f"STATUS with READY=1: {ready[0]!r}")
    t.check(px.port != 0 and px.admin_port != 0 and px.port != px.admin_port,
            f"ports {px.port} {px.admin_port}")
    with open(px.ready_path) as f:
        info = json.load(f)
    t.eq(info, {"pid": px.pid, "listen": f"127.0.0.1:{px.port}",
                "admin": f"127.0.0.1:{px.admin_port}", "version": info.get("version")},
         "ready file")
    t.check(isinstance(info["version"], str) and info["version"], "version in the ready file")
    t.eq(harness.http(px.admin_port, "GET", "/readyz").status, 200, "admin /readyz")
    t.eq(px.post("/v1/chat/completions", chat_body({"tokens": 3})).status, 200,
         "proxied request")
    log = px.stderr().decode("utf-8", "replace")
    t.check(f"listening on 127.0.0.1:{px.port}," in log and
            f"admin 127.0.0.1:{px.admin_port}, 2 workers" in log,
            f"bound addresses in the log: {log[-400:]!r}")


def test_ready_file_unwritable_exits_1(t):
    """a ready file that cannot be written: exit 1 with the reason, no
    READY=1 (whoever waits for it must not wait forever)"""
    sim = t.sim()
    px = t.proxy(sim.url, record=False, wait=False, expect_rc=1,
                 extra=["--ready-file", os.path.join(t.tmp, "no", "such", "dir", "r.json")])
    t.check(px.wait(10 * t.slow) is not None, "tokentap did not exit")
    t.eq(px.rc, 1, "exit status")
    err = px.stderr().decode("utf-8", "replace")
    t.check("--ready-file: cannot write" in err, f"reason on stderr: {err[-300:]!r}")
    t.check(not any(m.get("READY") == "1" for m in px.notify.drain()), "READY=1 sent anyway")


def test_status_counts_requests_in_flight(t):
    """STATUS= carries requests started and in flight: 1 in flight while a
    stream is held open, then 3 requests, 0 in flight"""
    sim = t.sim()
    px = t.proxy(sim.url, env_extra={"WATCHDOG_USEC": "400000"})
    for _ in range(2):
        t.eq(px.post("/v1/chat/completions", chat_body({"tokens": 2})).status, 200, "status")
    c = px.conn(timeout=30)
    c.send(harness.build_request("POST", "/v1/chat/completions",
                                 chat_body({"ttft_ms": 1, "tokens": 2, "gap_ms": 60000})))
    r = c.read_head()
    t.eq(r.status, 200, "held stream status")
    px.notify.wait(lambda m: m.get("STATUS") == "3 requests, 1 in flight", 10 * t.slow, px,
                   "STATUS=3 requests, 1 in flight")
    # gone, not half-closed: a FIN after the request is a half-close that
    # still gets its response (seen at the next write, 60 s away); whether
    # close() sends FIN or RST depended on whether the first token was
    # still unread, so the reset is made explicit
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    px.notify.wait(lambda m: m.get("STATUS") == "3 requests, 0 in flight", 10 * t.slow, px,
                   "STATUS=3 requests, 0 in flight")


def fill_notify_queue(px):
    """fill the receive queue of px's NOTIFY_SOCKET with junk until the
    kernel refuses more: a blocking send to it now waits until we read"""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setblocking(False)
    n = 0
    try:
        while True:
            s.sendto(b"JUNK=1", "\0" + px.notify.addr[1:])
            n += 1
    except BlockingIOError:
        pass
    finally:
        s.close()
    return n


def test_notify_reader_stuck_never_stops_the_proxy(t):
    """nothing reads NOTIFY_SOCKET (a full queue; status every 100 ms with
    WATCHDOG_USEC): the proxy still serves, SIGHUP's RELOADING=1 and READY=1
    wait and arrive in order once read, and SIGTERM exits 0 at once, saying
    what was not delivered (sd_notify on the loop would block it for good)"""
    sim = t.sim()
    px = t.proxy(sim.url, env_extra={"WATCHDOG_USEC": "400000"})
    n = len(px.notify.drain())
    t.check(fill_notify_queue(px) > 0, "notify queue filled")
    px.signal(signal.SIGHUP)
    for i in range(3):
        r = px.post("/v1/chat/completions", chat_body({"tokens": 2}))
        t.eq(r.status, 200, f"request {i} while the notify queue is full")
    reloading = px.notify.wait(lambda m: m.get("RELOADING") == "1", 10 * t.slow, px,
                               "RELOADING=1, late")
    ready = px.notify.wait(lambda m: m.get("READY") == "1" and px.notify.messages.index(m) > n,
                           10 * t.slow, px, "READY=1 after RELOADING=1, late")
    t.check(px.notify.messages.index(reloading) < px.notify.messages.index(ready),
            "RELOADING=1 before READY=1")
    t.eq(px.post("/v1/chat/completions", chat_body({"tokens": 2})).status, 200, "request")
    t.check(fill_notify_queue(px) > 0, "notify queue filled again")
    t.eq(px.stop(), 0, "exit status after SIGTERM with the notify queue full")
    log = px.stderr().decode("utf-8", "replace")
    t.check(re.search(r"systemd: \d+ notifications? not delivered within 1000 ms: "
                      r"nothing reads NOTIFY_SOCKET", log), f"log: {log[-400:]!r}")
    t.eq(len(px.records(4)), 4, "records")


def test_watchdog_pings_with_watchdog_usec(t):
    """WATCHDOG_USEC=400000: WATCHDOG=1 arrives every 100 ms (a quarter of
    it) while the loops run; without WATCHDOG_USEC there is none"""
    sim = t.sim()
    px = t.proxy(sim.url, record=False, env_extra={"WATCHDOG_USEC": "400000"},
                 extra=["--workers", "3"])
    pings = []
    for _ in range(5):
        pings.append(px.notify.wait(lambda m: m.get("WATCHDOG") == "1" and m not in pings,
                                    5 * t.slow, px, "WATCHDOG=1"))
    # (their spacing is the scheduler's business: the check is that they come)
    log = px.stderr().decode("utf-8", "replace")
    t.check("systemd watchdog: 400 ms, checking 3 event loops every 100 ms" in log,
            f"watchdog log line: {log[-300:]!r}")

    quiet = t.proxy(sim.url, record=False)
    t.eq(quiet.post("/v1/chat/completions", chat_body({"tokens": 2})).status, 200, "status")
    quiet.stop()
    t.check(not any("WATCHDOG" in m for m in quiet.notify.drain()),
            "WATCHDOG=1 without WATCHDOG_USEC")


def test_sighup_reloading_then_ready(t):
    """SIGHUP: RELOADING=1 (with MONOTONIC_USEC), then READY=1 with the
    status once the reload is done; SIGTERM: STOPPING=1"""
    sim = t.sim()
    px = t.proxy(sim.url)
    t.eq(px.post("/v1/chat/completions", chat_body({"tokens": 2})).status, 200, "status")
    n = len(px.notify.drain())
    ready = px.reload()
    msgs = px.notify.messages[n:]
    kinds = [("RELOADING" if m.get("RELOADING") == "1" else
              "READY" if m.get("READY") == "1" else None) for m in msgs]
    kinds = [k for k in kinds if k]
    t.eq(kinds[:2], ["RELOADING", "READY"], "notifications after SIGHUP")
    reloading = next(m for m in msgs if m.get("RELOADING") == "1")
    t.check(re.fullmatch(r"\d+", reloading.get("MONOTONIC_USEC", "")),
            f"MONOTONIC_USEC with RELOADING=1: {reloading!r}")
    t.eq(ready.get("STATUS"), "1 requests, 0 in flight", "STATUS with READY=1 after the reload")
    t.eq(px.post("/v1/chat/completions", chat_body({"tokens": 2})).status, 200,
         "status after the reload")
    px.signal(signal.SIGTERM)
    px.notify.wait(lambda m: m.get("STOPPING") == "1", 10 * t.slow, None, "STOPPING=1")
    t.eq(px.wait(10 * t.slow), 0, "exit status after SIGTERM")


def activated(t, sim, sock_fd, env, workers=1, listen="192.0.2.1:9", **kw):
    """tokentap exec'd by sh with <sock_fd> as fd 3 and LISTEN_PID=$$ (the
    pid sh keeps through exec), as systemd does; --listen names an address
    this machine cannot bind, so serving at all proves the passed socket
    was used"""
    move = "" if sock_fd == 3 else f"exec 3<&{sock_fd} {sock_fd}<&-; "
    script = move + "".join(f"{k}={v} " for k, v in env.items()) + 'exec "$@"'
    return t.proxy(sim.url, listen=listen, extra=["--workers", str(workers)],
                   argv0=("sh", "-c", script, "activate"), pass_fds=(sock_fd,), **kw)


def test_socket_activation_uses_passed_socket(t):
    """LISTEN_FDS=1 and LISTEN_PID = tokentap's pid, fd 3 listening on a
    port this test bound: tokentap serves on it (two workers share it) and
    reports it, and does not bind --listen"""
    sim = t.sim()
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    port = ls.getsockname()[1]
    px = activated(t, sim, ls.fileno(), {"LISTEN_FDS": "1", "LISTEN_PID": "$$"}, workers=2)
    ls.close()                  # the proxy holds its own copies
    t.eq(px.port, port, "port in the ready file")
    log = px.stderr().decode("utf-8", "replace")
    t.check(f"listening on 127.0.0.1:{port} (socket from systemd)" in log,
            f"log line: {log[-300:]!r}")
    results = []

    def client():
        results.append(harness.http(port, "POST", "/v1/chat/completions",
                                    chat_body({"tokens": 3, "gap_ms": 20})).status)
    ths = [threading.Thread(target=client) for _ in range(8)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    t.eq(results, [200] * 8, "statuses through the passed socket")
    t.eq(len(px.records(8)), 8, "records")


def test_socket_activation_for_another_pid_is_ignored(t):
    """LISTEN_PID of another process: the descriptors are not for us; the
    proxy binds --listen (port 0) itself"""
    sim = t.sim()
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    px = activated(t, sim, ls.fileno(), {"LISTEN_FDS": "1", "LISTEN_PID": "1"},
                   listen="127.0.0.1:0")
    t.check(px.port != ls.getsockname()[1], "served on the socket meant for pid 1")
    ls.close()
    t.eq(px.post("/v1/chat/completions", chat_body({"tokens": 2})).status, 200, "status")


def test_socket_activation_not_a_listener_exits_1(t):
    """fd 3 is a pipe: exit 1, the reason on stderr, no READY=1"""
    sim = t.sim()
    r, w = os.pipe()
    try:
        px = activated(t, sim, r, {"LISTEN_FDS": "1", "LISTEN_PID": "$$"}, wait=False,
                       expect_rc=1)
        t.check(px.wait(10 * t.slow) is not None, "tokentap did not exit")
    finally:
        os.close(r)
        os.close(w)
    t.eq(px.rc, 1, "exit status")
    err = px.stderr().decode("utf-8", "replace")
    t.check("socket activation: descriptor 3 is not a listening stream socket" in err,
            f"reason: {err[-300:]!r}")
    t.check(not any(m.get("READY") == "1" for m in px.notify.drain()), "READY=1 sent anyway")


def test_units_verify(t):
    """systemd-analyze verify passes on systemd/tokentap.service and
    tokentap.socket (ExecStart pointed at the built binary, which verify
    requires to exist)"""
    exe = shutil.which("systemd-analyze")
    if not exe:
        raise harness.Skip("systemd-analyze is not installed (Debian package systemd)")
    binary = os.path.abspath(os.path.join(t.build, "tokentap"))
    d = os.path.join(t.tmp, "units")
    os.makedirs(d)
    for name in ("tokentap.service", "tokentap.socket"):
        with open(os.path.join(harness.REPO, "systemd", name)) as f:
            text = f.read()
        if name.endswith(".service"):
            t.check("ExecStart=/usr/local/bin/tokentap " in text, "ExecStart path")
            text = text.replace("ExecStart=/usr/local/bin/tokentap ", f"ExecStart={binary} ")
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    p = subprocess.run([exe, "verify", os.path.join(d, "tokentap.service"),
                        os.path.join(d, "tokentap.socket")],
                       capture_output=True, timeout=60)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    t.eq(p.returncode, 0, f"systemd-analyze verify exit status ({out.strip()[-800:]!r})")
    # verify reports some problems as warnings with exit 0: none may name our units
    t.check("tokentap" not in out, f"systemd-analyze verify says: {out.strip()[-800:]!r}")
    service = open(os.path.join(d, "tokentap.service")).read()
    for key in ("Type=notify", "WatchdogSec=", "ExecReload=", "DynamicUser=yes",
                "StateDirectory=tokentap", "LogsDirectory=tokentap", "ProtectSystem=strict",
                "NoNewPrivileges=yes", "CapabilityBoundingSet=\n", "RestrictAddressFamilies=",
                "SystemCallFilter=@system-service", "LimitNOFILE="):
        t.check(key in service, f"{key.strip()} in tokentap.service")
