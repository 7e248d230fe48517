#!/usr/bin/env python3
"""Memory of client connections: tokentap's RSS with N fresh connections,
N idle keep-alive connections after one request each, and N active slow
streams.  Usage: python3 bench/conn_memory.py [BUILD_DIR] [N]  (ulimit -n
must allow 2N + some descriptors)."""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


sim = subprocess.Popen([f"{build}/tokentap-sim", "--listen", "127.0.0.1:0"],
                       stdout=subprocess.PIPE, text=True)
sim_port = int(re.search(r":(\d+)", sim.stdout.readline()).group(1))
# tokentap binds port 0 and writes the port it got to its ready file (by
# rename, once listening): wait for the file, a short poll on its existence
tmpdir = tempfile.TemporaryDirectory(prefix="tokentap-conn-memory-")
ready = os.path.join(tmpdir.name, "ready.json")
tt = subprocess.Popen([f"{build}/tokentap", "--listen", "127.0.0.1:0", "--ready-file", ready,
                       "--upstream", f"http://127.0.0.1:{sim_port}", "--admin", "off"],
                      stderr=subprocess.DEVNULL)
try:
    end = time.monotonic() + 10
    while not os.path.exists(ready):
        if tt.poll() is not None or time.monotonic() > end:
            sys.exit("tokentap did not start")
        time.sleep(0.01)
    with open(ready) as f:
        port = int(json.load(f)["listen"].rsplit(":", 1)[1])
    time.sleep(0.5)
    base = rss_kib(tt.pid)
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    time.sleep(0.5)
    fresh = rss_kib(tt.pid)
    for s in socks:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    for s in socks:
        s.recv(4096)
    time.sleep(0.5)
    idle = rss_kib(tt.pid)
    body = b'{"model":"m","stream":true,"sim":{"ttft_ms":10,"tokens":100,"gap_ms":1000}}'
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    for s in socks:
        s.sendall(req)
    time.sleep(3)
    streaming = rss_kib(tt.pid)
    per = lambda kib: (kib - base) * 1024 / n
    print(f"baseline RSS {base} KiB")
    print(f"{n} fresh connections:                 {per(fresh):8.0f} B each")
    print(f"{n} idle keep-alive (after 1 request): {per(idle):8.0f} B each (malloc high-water included)")
    print(f"{n} active streams:                    {per(streaming):8.0f} B each")
finally:
    tt.terminate()
    sim.terminate()
