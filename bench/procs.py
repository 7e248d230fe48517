"""The simulator and tokentap as the memory and latency scripts of bench/
start them: on port 0, tokentap's port read from its ready file."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def start_sim(build):
    """tokentap-sim on 127.0.0.1:0: (process, port)"""
    sim = subprocess.Popen([f"{build}/tokentap-sim", "--listen", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, text=True)
    return sim, int(re.search(r":(\d+)", sim.stdout.readline()).group(1))


def start_tokentap(build, sim_port, extra=()):
    """tokentap on 127.0.0.1:0 in front of the simulator, admin off:
    (process, port, its temporary directory).  tokentap writes the port it
    bound to its ready file (by rename, once listening): a short poll on
    the file's existence"""
    tmp = tempfile.TemporaryDirectory(prefix="tokentap-bench-")
    ready = os.path.join(tmp.name, "ready.json")
    tt = subprocess.Popen([f"{build}/tokentap", "--listen", "127.0.0.1:0", "--ready-file", ready,
                           "--upstream", f"http://127.0.0.1:{sim_port}", "--admin", "off",
                           *extra], stderr=subprocess.DEVNULL)
    end = time.monotonic() + 10
    while not os.path.exists(ready):
        if tt.poll() is not None or time.monotonic() > end:
            tt.kill()
            sys.exit("tokentap did not start")
        time.sleep(0.01)
    with open(ready) as f:
        port = int(json.load(f)["listen"].rsplit(":", 1)[1])
    return tt, port, tmp


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0
