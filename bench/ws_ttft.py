#!/usr/bin/env python3
"""tokentap's TTFT of WebSocket turns against the official SDK clients' own
(tests/node: the openai package's ResponsesWS and Realtime clients), through
tokentap to tokentap-sim on loopback, compressed (permessage-deflate) and
not.  For each turn: client TTFT (send of response.create -> first delta,
process.hrtime) minus the record's time_to_first_token (and the same for
time to first audio); prints the median, p90 and max of the differences and
whether the record's usage equals what the client got.
Usage: python3 bench/ws_ttft.py [BUILD_DIR] [TURNS]   (needs node and
tests/node/node_modules: sh scripts/deps.sh node)."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from procs import start_sim, start_tokentap

build = sys.argv[1] if len(sys.argv) > 1 else "build"
turns = sys.argv[2] if len(sys.argv) > 2 else "30"
node_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "node")
sim_opts = json.dumps({"ttft_ms": 40, "tokens": 8, "gap_ms": 4})

sim, sim_port = start_sim(build)
rec_dir = tempfile.TemporaryDirectory(prefix="tokentap-ws-ttft-")
rec = os.path.join(rec_dir.name, "records.jsonl")
tt, port, tmp = start_tokentap(build, sim_port, ["--record", rec])
try:
    runs = {}
    for script, args in (("responses_ws.mjs", ["--base-url", f"http://127.0.0.1:{port}/v1"]),
                         ("realtime_ws.mjs", ["--url", f"ws://127.0.0.1:{port}/v1/realtime"])):
        for extra in ([], ["--no-deflate"]):
            out = subprocess.run(["node", os.path.join(node_dir, script), *args, "--turns", turns,
                                  "--sim", sim_opts, *extra], capture_output=True, text=True,
                                 timeout=120, check=True).stdout
            runs[(script, "plain" if extra else "permessage-deflate")] = \
                [json.loads(ln) for ln in out.splitlines() if '"event":"turn"' in ln]
    time.sleep(0.5)     # the writer thread's last records
    by_id = {}
    with open(rec) as f:
        for ln in f:
            r = json.loads(ln)
            if "turn" in r["metadata"]:
                by_id[r["metadata"]["response_id"]] = r
    print(f"{'client':18s} {'compression':18s} {'turns':>5s} {'usage=':>6s} "
          f"{'TTFT diff p50':>13s} {'p90':>6s} {'max':>6s} {'audio p50':>9s}  (ms)")
    for (script, comp), tl in runs.items():
        d, a, same = [], [], 0
        for x in tl:
            r = by_id[x["response_id"]]
            d.append(x["ttft_ms"] - r["metrics"]["time_to_first_token"]["value"])
            if x.get("time_to_first_audio_ms") is not None:
                a.append(x["time_to_first_audio_ms"] - r["metrics"]["time_to_first_audio"]["value"])
            cu, ru = x["usage"], r["metadata"]["usage"]
            same += cu["input_tokens"] == ru["input_tokens"] and cu["output_tokens"] == ru["output_tokens"]
        d.sort()
        print(f"{script:18s} {comp:18s} {len(d):5d} {same:6d} {statistics.median(d):13.3f} "
              f"{d[int(0.9 * len(d))]:6.3f} {d[-1]:6.3f} "
              f"{(statistics.median(a) if a else float('nan')):9.3f}")
finally:
    tt.terminate()
    sim.terminate()
