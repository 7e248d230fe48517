#!/usr/bin/env python3
"""Soak: tokentap in front of tokentap-sim under a steady load of streams
for an extended run, its RSS, open fds and CPU sampled at a fixed interval
and printed as a table; flat RSS and fds are the pass mark (read the table).
Not part of CI.

    python3 bench/soak.py [--build build] [--minutes 4] [--streams 400]
                          [--tokens 50] [--gap 40] [--interval 15]

The load is bench/sse_load.c (built here with cc -O2): <streams> keep-alive
connections, each sending streaming chat requests back to back (<tokens>
token events <gap> ms apart), so about streams / (tokens * gap) requests a
second.  tokentap records every request to a temp file (--record) and
serves /metrics, so the record writer and the aggregator are soaked too.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from procs import rss_kib

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    # a benchmark, not a test: a port race only costs a retry by hand
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, deadline=10.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def nfds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    text = data.split(b"\r\n\r\n", 1)[-1].decode()
    out = {"ok": 0, "error": 0, "cancelled": 0, "inflight": 0, "dropped": 0}
    for line in text.splitlines():
        m = re.match(r'tokentap_requests_total\{.*outcome="(\w+)"\} (\d+)', line)
        if m:
            out[m.group(1)] += int(m.group(2))
        elif line.startswith("tokentap_inflight_requests "):
            out["inflight"] = int(line.split()[1])
        elif line.startswith("tokentap_records_dropped_total "):
            out["dropped"] = int(line.split()[1])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--minutes", type=float, default=4)
    ap.add_argument("--streams", type=int, default=400)
    ap.add_argument("--tokens", type=int, default=50)
    ap.add_argument("--gap", type=int, default=40)
    ap.add_argument("--interval", type=float, default=15)
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="tt-soak-")
    load = os.path.join(tmp, "sse_load")
    subprocess.run(["cc", "-O2", "-o", load, os.path.join(HERE, "sse_load.c"), "-lm"],
                   check=True)
    sim_port, px_port, adm_port = free_port(), free_port(), free_port()
    rec = os.path.join(tmp, "records.jsonl")
    procs = []
    try:
        sim = subprocess.Popen([os.path.join(a.build, "tokentap-sim"), "--listen",
                                f"127.0.0.1:{sim_port}"], stdout=subprocess.DEVNULL,
                               stderr=open(os.path.join(tmp, "sim.err"), "wb"))
        procs.append(sim)
        wait_port(sim_port)
        px = subprocess.Popen([os.path.join(a.build, "tokentap"),
                               "--listen", f"127.0.0.1:{px_port}",
                               "--upstream", f"http://127.0.0.1:{sim_port}",
                               "--admin", f"127.0.0.1:{adm_port}", "--record", rec],
                              stderr=open(os.path.join(tmp, "proxy.err"), "wb"))
        procs.append(px)
        wait_port(px_port)
        wait_port(adm_port)

        rows = []

        def sample(label, t0, c0):
            m = scrape(adm_port)
            now = time.monotonic()
            c = cpu_s(px.pid)
            with open(rec, "rb") as f:
                nrec = sum(1 for _ in f)
            rows.append((label, f"{now - t0:6.0f}", rss_kib(px.pid), nfds(px.pid),
                         f"{100 * (c - c0[0]) / max(now - c0[1], 1e-9):5.1f}",
                         m["ok"] + m["error"] + m["cancelled"], m["error"], m["cancelled"],
                         m["inflight"], nrec, m["dropped"]))
            c0[0], c0[1] = c, now

        t0 = time.monotonic()
        c0 = [cpu_s(px.pid), t0]
        sample("idle", t0, c0)
        dur = a.minutes * 60
        gen = subprocess.Popen([load, "--connect", f"127.0.0.1:{px_port}",
                                "--streams", str(a.streams), "--tokens", str(a.tokens),
                                "--gap", str(a.gap), "--ttft", "20", "--warmup", "0",
                                "--ramp", "2", "--duration", str(dur), "--prefix", "soak"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(gen)
        out = []
        threading.Thread(target=lambda: out.append(gen.communicate()), daemon=True).start()
        while gen.poll() is None:
            time.sleep(a.interval)
            if gen.poll() is None:
                sample("load", t0, c0)
        gen.wait()
        time.sleep(2)       # the last streams finish, idle connections close
        sample("after", t0, c0)

        hdr = ("phase", "t_s", "rss_kib", "fds", "cpu_%", "requests", "errors",
               "cancelled", "inflight", "records", "rec_dropped")
        w = [max(len(str(x)) for x in col) for col in zip(hdr, *rows)]
        print("  ".join(h.rjust(n) for h, n in zip(hdr, w)))
        for r in rows:
            print("  ".join(str(x).rjust(n) for x, n in zip(r, w)))
        load_rows = [r for r in rows if r[0] == "load"]
        if len(load_rows) >= 2:
            first, last = load_rows[0], load_rows[-1]
            print(f"RSS under load: first sample {first[2]} KiB, last {last[2]} KiB "
                  f"({last[2] - first[2]:+d}); fds {first[3]} -> {last[3]}; "
                  f"after the load: {rows[-1][2]} KiB, {rows[-1][3]} fds "
                  f"(idle before: {rows[0][2]} KiB, {rows[0][3]} fds)")
        if out and out[0][0]:
            print(out[0][0].decode().strip().splitlines()[-1])
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
