#!/usr/bin/env python3
"""Memory of client connections: tokentap's RSS with N fresh connections,
N idle keep-alive connections after one request each, and N active slow
streams.  Usage: python3 bench/conn_memory.py [BUILD_DIR] [N]  (ulimit -n
must allow 2N + some descriptors)."""
import socket
import sys
import time

from procs import rss_kib, start_sim, start_tokentap

build = sys.argv[1] if len(sys.argv) > 1 else "build"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000


sim, sim_port = start_sim(build)
tt, port, tmpdir = start_tokentap(build, sim_port)
try:
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
