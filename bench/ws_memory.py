#!/usr/bin/env python3
"""Memory of WebSocket sessions read turn by turn (docs/websocket.md,
docs/limits.md): tokentap's RSS with N Responses WebSocket sessions held
open mid-turn through it to tokentap-sim, compressed (permessage-deflate,
context takeover, 15-bit windows: one inflate state and window per
direction once each side has sent a compressed message) and not.
Usage: python3 bench/ws_memory.py [BUILD_DIR] [N]  (ulimit -n must allow
2N + some descriptors).  Figures go to bench/README.md."""
import base64
import json
import os
import socket
import struct
import sys
import time
import zlib

from procs import rss_kib, start_sim, start_tokentap

build = sys.argv[1] if len(sys.argv) > 1 else "build"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 500


def ws_open(port, deflate):
    s = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    ext = "Sec-WebSocket-Extensions: permessage-deflate\r\n" if deflate else ""
    s.sendall((f"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\n{ext}\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head[:100]
    assert (b"permessage-deflate" in head) == deflate
    data = json.dumps({"type": "response.create", "input": "hello " * 50,
                       "sim": {"ttft_ms": 5, "tokens": 1000, "gap_ms": 1000}}).encode()
    rsv1 = 0
    if deflate:
        z = zlib.compressobj(6, zlib.DEFLATED, -15)
        data = (z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH))[:-4]
        rsv1 = 0x40
    mask = os.urandom(4)
    n_ = len(data)
    head = struct.pack("!BB", 0x80 | rsv1 | 1, 0x80 | 126) + struct.pack("!H", n_) \
        if n_ >= 126 else struct.pack("!BB", 0x80 | rsv1 | 1, 0x80 | n_)
    s.sendall(head + mask + bytes(b ^ mask[i & 3] for i, b in enumerate(data)))
    return s


sim, sim_port = start_sim(build)


def measure(deflate):
    """a fresh tokentap for each mode: freed memory of one does not hide the other's"""
    tt, port, tmpdir = start_tokentap(build, sim_port)
    try:
        time.sleep(0.5)
        base = rss_kib(tt.pid)
        socks = [ws_open(port, deflate) for _ in range(n)]
        time.sleep(2)           # every session past its first delta (ttft 5 ms)
        held = rss_kib(tt.pid)
        what = "permessage-deflate" if deflate else "uncompressed"
        print(f"{n} sessions mid-turn, {what:18s}: {(held - base) * 1024 / n:8.0f} B each")
        for s in socks:
            s.close()
    finally:
        tt.terminate()
        tt.wait()


try:
    measure(False)
    measure(True)
finally:
    sim.terminate()
