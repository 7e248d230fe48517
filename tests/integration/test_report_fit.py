"""`tokentap report` on any terminal, in other formats, over time, and in
AIPerf's current export schema (docs/report.md):

- every line fits the terminal (COLUMNS 60, 80, 100, 200; and the width
  of a real pty via TIOCGWINSZ), with every statistic still printed
  (columns split into parts, never dropped);
- --format csv | json | markdown carry the same tables;
- --slice-duration: hand-computed slices on the console and in AIPerf's
  timeslice exports (tidy CSV, JSON);
- profile_export_aiperf.json against a sample written from AIPerf's
  schema page (tests/data/aiperf_profile_export_aiperf_1.5.json).
"""
import csv
import fcntl
import io
import json
import os
import pty
import struct
import subprocess
import termios

import harness
from test_report import T0, rec, report, write

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def varied(t):
    """25 ok requests over 24 s plus a long-message error: wide cells"""
    recs = []
    for i in range(25):
        recs.append(rec(i, start_ms=i * 1000, ttft=1000.0 + 37.0 * i, latency=25000.0 + 11 * i,
                        isl=12000 + i, osl=3000 + i, itl=8.0 + i / 10, icl=[8.0, 9.0, 10.0],
                        slo_good=i % 3 != 0, model="a-rather-long-model-name/with-a-path-1.5b"))
    recs.append(rec(99, start_ms=3000, latency=1.0, error={
        "code": 502, "type": "upstream_connect",
        "message": "connect() to 10.0.0.1:8000 failed: Connection refused by the upstream server"}))
    return recs


def widths_ok(t, text, cols, what):
    for n, line in enumerate(text.splitlines()):
        t.check(len(line) <= cols, f"{what}: line {n + 1} is {len(line)} columns wide "
                                   f"(terminal {cols}):\n{line}")


def test_report_every_line_fits_the_terminal(t):
    """at 60, 80, 100 and 200 columns no line (tables, warnings, notes,
    comparison) is wider than the terminal, and the statistics a narrow
    table cannot hold move to further parts instead of disappearing"""
    a = write(t, "a.jsonl", varied(t))
    b = write(t, "b.jsonl", varied(t)[:20])
    full = report(t, a, "--goodput", "ttft:1500", columns=1000).stdout
    for cols in (60, 80, 100, 200):
        p = report(t, a, "--goodput", "ttft:1500", "--slice-duration", "5s", columns=cols)
        widths_ok(t, p.stdout, cols, f"single set at {cols}")
        # p1 and p99 of TTFT and the error type survive any width
        for want in ("1,008.88*", "1,879.12*", "upstream_connect"):
            t.check(want in p.stdout, f"{want!r} missing at {cols} columns:\n{p.stdout}")
        c = report(t, a, "--compare", b, columns=cols)
        widths_ok(t, c.stdout, cols, f"comparison at {cols}")
    t.check("(part 2)" not in full, "a wide terminal gets one table:\n" + full)
    narrow = report(t, a, columns=80).stdout
    t.check("(part 2)" in narrow and "TTFT (ms)" in narrow,
            "80 columns: split parts with short labels:\n" + narrow)


def test_report_width_from_the_terminal_ioctl(t):
    """on a terminal the width comes from TIOCGWINSZ, not from COLUMNS"""
    a = write(t, "a.jsonl", varied(t))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 72, 0, 0))
    env = dict(os.environ, COLUMNS="300")
    p = subprocess.Popen([os.path.join(t.build, "tokentap"), "report", a],
                         stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            d = os.read(master, 65536)
        except OSError:                 # EIO: the child closed the pty
            break
        if not d:
            break
        chunks.append(d)
    os.close(master)
    t.eq(p.wait(timeout=30 * t.slow), 0, "exit status")
    out = b"".join(chunks).decode().replace("\r\n", "\n")
    widths_ok(t, out, 72, "pty of 72 columns")
    t.check("(part 2)" in out, "split at 72 columns:\n" + out)


def test_report_formats_carry_the_tables(t):
    """csv: one block per table (numbers without grouping), notes on
    stderr; json: tables with numeric cells; markdown: pipe tables"""
    a = write(t, "a.jsonl", varied(t))
    c = report(t, a, "--format", "csv", "--goodput", "ttft:1500")
    blocks = c.stdout.strip("\n").split("\n\n")
    rows = list(csv.reader(io.StringIO(blocks[0])))
    t.eq(rows[0][:4], ["Metric", "avg", "min", "max"], "csv stats header")
    ttft = next(r for r in rows if r[0] == "Time to First Token (ms)")
    t.eq(ttft[1], "1444.00", "csv TTFT avg without digit grouping")
    t.eq(ttft[rows[0].index("count")], "25", "csv count")
    t.check("Records: 26 records" in c.stderr and "Records" not in c.stdout,
            "csv: prose on stderr only")
    j = json.loads(report(t, a, "--format", "json", "--goodput", "ttft:1500").stdout)
    t.eq(j["schema"], "tokentap.report/1", "json schema")
    m = j["tables"][0]
    t.eq(m["columns"][:2], ["Metric", "avg"], "json columns")
    row = next(r for r in m["rows"] if r[0] == "Time to First Token (ms)")
    t.eq(row[1], 1444.0, "json TTFT avg is a number")
    t.eq(row[m["columns"].index("count")], 25, "json count")
    t.check(any(n.startswith("Records: 26 records") for n in j["notes"]), "json notes")
    md = report(t, a, "--format", "markdown").stdout
    t.check("| Metric | avg | min | max |" in md and "| :--- | ---: |" in md,
            "markdown table:\n" + md)
    report(t, a, "--format", "yaml", rc=2)


def day(t):
    """requests in three 10 s slices of 2026-01-01 00:00:00..30: 4, 0, 2;
    plus one starting at 00:00:05 that fails"""
    recs = [rec(0, 1000, ttft=100, latency=1000, osl=10, slo_good=True),
            rec(1, 2000, ttft=200, latency=1000, osl=20, slo_good=True),
            rec(2, 3000, ttft=300, latency=1000, osl=30, slo_good=False),
            rec(3, 9999, ttft=400, latency=1000, osl=40, slo_good=True),
            rec(4, 5000, latency=1.0, slo_good=False,
                error={"code": 504, "type": "upstream_timeout", "message": "t"}),
            rec(5, 21000, ttft=50, latency=1000, osl=5, slo_good=True),
            rec(6, 25000, ttft=70, latency=4000, osl=7, slo_good=True)]
    return recs                          # span: 1 s .. 29 s


def test_report_timeslices_console_and_aiperf_exports(t):
    """--slice-duration 10s: clock-aligned slices 00:00:00, :10, :20; a
    request counts where it starts; rates per covered second (first slice
    covers 1..10 s = 9 s, the last 20..29 s = 9 s); AIPerf's tidy CSV and
    JSON timeslice layouts"""
    path = write(t, "d.jsonl", day(t))
    d = os.path.join(t.tmp, "exp")
    p = report(t, path, "--slice-duration", "10s", "--export", d)
    lines = p.stdout.splitlines()
    row = {l.split("\u2502")[1].strip(): [c.strip() for c in l.split("\u2502")[2:-1]]
           for l in lines if l.startswith("\u2502 00:00:")}
    t.eq(sorted(row), ["00:00:00", "00:00:10", "00:00:20"], "slice rows")
    # Req Err Req/s Out tok/s Goodput/s Good % TTFT p50 ...
    t.eq(row["00:00:00"][:7], ["5", "1", "0.44", "11.1", "0.33", "60.0", "250.00"],
         "first slice: 5 requests (1 error), 4 ok / 9 s, 100 tokens / 9 s, 3 good / 5")
    t.eq(row["00:00:10"][:2], ["0", "0"], "empty slice kept")
    t.eq(row["00:00:20"][:7], ["2", "0", "0.22", "1.3", "0.22", "100.0", "60.00"],
         "last slice: 2 ok / 9 s")

    with open(os.path.join(d, "profile_export_aiperf_timeslices.csv"), newline="") as f:
        rows = list(csv.reader(f))
    t.eq(rows[0], ["Timeslice", "Metric", "Unit", "Stat", "Value"], "tidy CSV header")
    got = {(r[0], r[1], r[3]): r[4] for r in rows[1:]}
    t.eq(got[("0", "Time to First Token", "avg")], "250.00", "slice 0 TTFT avg")
    t.eq(got[("0", "Time to First Token", "p50")], "250.00", "slice 0 TTFT p50")
    t.eq(got[("2", "Time to First Token", "max")], "70.00", "slice 2 TTFT max")
    t.eq(got[("0", "Request Throughput", "avg")], "0.44", "slice 0 request throughput")
    t.eq(got[("1", "Request Count", "avg")], "0", "slice 1 request count")
    t.eq(got[("0", "GoodRequestFraction", "avg")], "0.60", "slice 0 good fraction")
    t.check(("1", "Time to First Token", "avg") not in got, "no metric rows for an empty slice")
    for r in rows[1:]:
        t.eq(r[2], {"Time to First Token": "ms", "Request Latency": "ms",
                    "Output Sequence Length": "tokens", "Output Token Count": "tokens",
                    "Request Throughput": "requests/sec", "Output Token Throughput": "tokens/sec",
                    "Request Count": "requests", "Error Request Count": "requests",
                    "Benchmark Duration": "sec", "Goodput": "requests/sec",
                    "Good Request Count": "requests",
                    "GoodRequestFraction": "ratio"}[r[1]], f"unit of {r[1]}")

    with open(os.path.join(d, "profile_export_aiperf_timeslices.json")) as f:
        j = json.load(f)
    ts = j["timeslices"]
    t.eq([s["timeslice_index"] for s in ts], [0, 1, 2], "timeslice_index")
    t.eq(ts[0]["time_to_first_token"]["count"], 4, "slice 0 TTFT count")
    t.eq(ts[0]["time_to_first_token"]["unit"], "ms", "unit")
    t.eq(sorted(ts[0]["request_throughput"].keys()), ["avg", "unit"], "derived: unit + avg")
    t.check("time_to_first_token" not in ts[1], "empty slice: no record metrics")
    meta = j["tokentap_report"]["slices"]
    t.eq(meta[0]["start_time"], "2026-01-01T00:00:00.000000Z", "slice 0 start")
    t.eq(meta[2]["covered_s"], 9, "last slice covered seconds")
    for bad in ("0", "-5m", "5x", "m", "400d"):
        report(t, path, "--slice-duration", bad, rc=2)
    report(t, path, "--slice-duration", "0.5ms", rc=2)          # below 1 ms
    far = write(t, "far.jsonl", day(t) + [rec(9, 86_400_000, ttft=1, latency=2)])
    p = report(t, far, "--slice-duration", "100ms", rc=2)       # 864,000 slices
    t.check("at most 100000" in p.stderr, "slice cap named:\n" + p.stderr)


def load_sample():
    with open(os.path.join(ROOT, "tests", "data", "aiperf_profile_export_aiperf_1.5.json")) as f:
        return {k: v for k, v in json.load(f).items() if not k.startswith("_")}


def test_report_export_matches_aiperf_schema_sample(t):
    """field names and structure of profile_export_aiperf.json against the
    sample written from AIPerf's schema page: the schema version, every
    top-level provenance field we can fill, run_info's fields, record
    metrics with the full stats block, derived and aggregate metrics with
    unit + avg only, error_summary entries; extras only under
    tokentap_report"""
    sample = load_sample()
    recs = day(t)
    d = os.path.join(t.tmp, "exp")
    report(t, write(t, "d.jsonl", recs), "--export", d, "--goodput", "ttft:250")
    with open(os.path.join(d, "profile_export_aiperf.json")) as f:
        j = json.load(f)
    t.eq(j["schema_version"], sample["schema_version"], "schema_version")
    record_fields = sorted(sample["request_latency"].keys())
    derived_fields = sorted(sample["request_throughput"].keys())
    t.eq(derived_fields, sorted(sample["request_count"].keys()), "sample: aggregate = derived")
    documented = set(sample) | {"telemetry_data", "warmup_metrics"}
    record_tags = {"time_to_first_token", "request_latency", "output_sequence_length",
                   "output_token_count"}
    derived_tags = {"request_throughput", "output_token_throughput", "goodput",
                    "good_request_fraction", "request_count", "good_request_count",
                    "error_request_count", "benchmark_duration"}
    for k, v in j.items():
        if k in record_tags:
            t.eq(sorted(v.keys()), record_fields, f"record metric {k}")
            t.eq(type(v["count"]), int, f"{k}.count is an int")
        elif k in derived_tags:
            t.eq(sorted(v.keys()), derived_fields, f"derived metric {k}")
        elif k == "tokentap_report":
            t.eq(type(v), dict, "extras in one block")
        else:
            t.check(k in documented, f"top-level field {k!r} is not in AIPerf's schema")
            if k != "input_config" and k in sample:
                t.eq(type(v), type(sample[k]), f"type of {k}")
    t.check(record_tags <= set(j) and derived_tags <= set(j), "all metrics present")
    t.eq(sorted(j["run_info"].keys()), sorted(sample["run_info"].keys()), "run_info fields")
    t.eq(j["run_info"]["benchmark_id"], j["benchmark_id"], "run_info duplicates benchmark_id")
    t.check(j["run_info"]["cli_command"].startswith("tokentap report "), "cli_command")
    t.eq(sorted(j["error_summary"][0].keys()), sorted(sample["error_summary"][0].keys()),
         "error_summary entry")
    t.eq(sorted(j["error_summary"][0]["error_details"].keys()),
         sorted(sample["error_summary"][0]["error_details"].keys()), "error_details")
    t.eq(j["runtime_submission_invalid_reasons"], [], "no invalid reasons")
    for k in ("start_time", "end_time"):
        t.check(j[k].endswith("Z") and j[k][:4] == "2026", f"{k} in UTC")


def test_report_plot_attainment_uses_the_slices(t):
    """--plot with --slice-duration: the attainment panel draws one point
    per non-empty slice of the table (00:00:00 and 00:00:20: 3/5 and 2/2)"""
    path = write(t, "d.jsonl", day(t))
    svg = os.path.join(t.tmp, "p.svg")
    report(t, path, "--slice-duration", "10s", "--plot", svg)
    with open(svg) as f:
        s = f.read()
    t.check("slice width 10 s" in s, "panel names the slice width")
    i = s.index("SLO attainment over time")
    lines = [ln for ln in s[i:].splitlines() if ln.startswith("<polyline")]
    pts = lines[0].split('points="')[1].split('"')[0].split()
    t.eq(len(pts), 2, f"one point per non-empty slice: {pts}")
    ys = [float(p.split(",")[1]) for p in pts]
    t.check(ys[0] > ys[1], f"3/5 plots lower than 2/2: {ys}")
