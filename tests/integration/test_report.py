"""`tokentap report` (docs/report.md): offline analysis of record files.

Record sets with hand-computed answers: percentiles by linear
interpolation, throughput and goodput over a known span, the Wilson
interval, the paired comparison, the mooncake trace fields, the AIPerf
export layout, filters, warnings for mixed schemas and counting methods,
malformed lines, bad arguments, and the plots rendered in headless
Chromium (skipped when chromium is not installed).

Also a generator of synthetic records for the one-million-record
measurement:  python3 tests/integration/test_report.py gen N OUT.jsonl
"""
import csv
import io
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile

import harness
from harness import timeout

T0 = 1_767_225_600_000_000_000          # 2026-01-01T00:00:00Z in ns


def rec(i, start_ms, ttft=None, latency=None, isl=None, osl=None, itl=None,
        icl=None, error=None, rid=None, model="m", api="openai.chat",
        upstream="primary", status=200, source="usage", schema="tokentap.record/1",
        slo_good=None, ttfo=None, end_ms=None):
    """one record line (dict); times in ms relative to T0"""
    metrics = {}
    if ttft is not None:
        metrics["time_to_first_token"] = {"value": ttft, "unit": "ms"}
    if ttfo is not None:
        metrics["time_to_first_output_token"] = {"value": ttfo, "unit": "ms"}
    if latency is not None:
        metrics["request_latency"] = {"value": latency, "unit": "ms"}
    if itl is not None:
        metrics["inter_token_latency"] = {"value": itl, "unit": "ms"}
        metrics["output_token_throughput_per_user"] = {"value": 1000.0 / itl,
                                                       "unit": "tokens/sec/user"}
    if isl is not None:
        metrics["input_sequence_length"] = {"value": isl, "unit": "tokens"}
    if osl is not None:
        metrics["output_sequence_length"] = {"value": osl, "unit": "tokens"}
        metrics["output_token_count"] = {"value": osl, "unit": "tokens"}
    if icl is not None:
        metrics["inter_chunk_latency"] = {"value": icl, "unit": "ms"}
    start = T0 + int(round(start_ms * 1e6))
    if end_ms is None:
        end_ms = start_ms + (latency or 0)
    meta = {"x_request_id": rid or f"req-{i}", "request_start_ns": start,
            "request_ack_ns": start, "request_end_ns": T0 + int(round(end_ms * 1e6)),
            "was_cancelled": False, "upstream": upstream, "api": api, "model": model,
            "stream": True, "method": "POST", "path": "/v1/chat/completions",
            "status": status, "token_count_source": source}
    if slo_good is not None:
        meta["slo"] = {"good": slo_good, "violations": []}
    r = {"metadata": meta, "metrics": metrics, "error": error}
    if schema is not None:
        r = {"schema": schema, **r}
    return r


def write(t, name, recs, extra_lines=()):
    path = os.path.join(t.tmp, name)
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
        for line in extra_lines:
            f.write(line + "\n")
    return path


def report(t, *args, rc=0, columns=400):
    """tokentap report; stdout is a pipe, so the width comes from COLUMNS
    (wide by default: the tests that read cells want the unsplit table)"""
    exe = os.path.join(t.build, "tokentap")
    env = dict(os.environ, COLUMNS=str(columns))
    p = subprocess.run([exe, "report", *args], capture_output=True, text=True,
                       timeout=60 * t.slow, env=env)
    if rc is not None and p.returncode != rc:
        raise harness.Failure(f"tokentap report {' '.join(args)}: exit {p.returncode}, "
                              f"want {rc}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-2000:]}")
    for mark in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
        if mark in p.stderr:
            raise harness.Failure(f"sanitizer report:\n{p.stderr[-3000:]}")
    return p


def export(t, path, *args):
    d = os.path.join(t.tmp, "exp")
    report(t, path, "--export", d, *args)
    with open(os.path.join(d, "profile_export_aiperf.json")) as f:
        j = json.load(f)
    with open(os.path.join(d, "profile_export_aiperf.csv"), newline="") as f:
        c = f.read()
    return j, c


def ten(t):
    """ten successful requests, TTFT 10..100 ms, over a 10 s span; ISL i*100"""
    recs = []
    for i in range(10):
        recs.append(rec(i, start_ms=i * 1000, ttft=10.0 * (i + 1), latency=500.0 + i,
                        isl=100 * (i + 1), osl=20, itl=5.0, end_ms=i * 1000 + 500 + i))
    # the last request ends at 10 s exactly: span = 10 s
    recs[-1]["metadata"]["request_end_ns"] = T0 + 10_000_000_000
    return recs


def near(t, got, want, what, tol=1e-9):
    t.check(got is not None and abs(got - want) <= tol * max(1.0, abs(want)),
            f"{what}: got {got!r}, want {want!r}")


def test_report_percentiles_linear_interpolation(t):
    """percentiles interpolate linearly between closest ranks (numpy
    default), std is the population one, count is the sample count"""
    j, _ = export(t, write(t, "r.jsonl", ten(t)))
    b = j["time_to_first_token"]
    # values 10,20,...,100: h = p/100*9, v = 10 + 10h
    for p, want in (("p1", 10.9), ("p5", 14.5), ("p10", 19.0), ("p25", 32.5),
                    ("p50", 55.0), ("p75", 77.5), ("p90", 91.0), ("p95", 95.5),
                    ("p99", 99.1)):
        near(t, b[p], want, p)
    near(t, b["avg"], 55.0, "avg")
    near(t, b["min"], 10.0, "min")
    near(t, b["max"], 100.0, "max")
    near(t, b["std"], math.sqrt(825.0), "std (population)")
    t.eq(b["count"], 10, "count")
    near(t, b["sum"], 550.0, "sum")
    t.eq(b["unit"], "ms", "unit")


def test_report_throughput_and_goodput_over_span(t):
    """throughput and goodput divide by first start .. last end (10 s);
    the good request fraction carries the Wilson interval"""
    recs = ten(t)
    recs.append(rec(10, start_ms=5000, latency=3.0, error={"code": 502, "type": "upstream_connect",
                                                           "message": "refused"}))
    path = write(t, "r.jsonl", recs)
    # TTFT <= 50 ms: requests 0..4 are good; the error is never good
    j, _ = export(t, path, "--goodput", "ttft:50")
    near(t, j["benchmark_duration"]["avg"], 10.0, "duration")
    near(t, j["request_throughput"]["avg"], 1.0, "request_throughput (10 ok / 10 s)")
    near(t, j["output_token_throughput"]["avg"], 20.0, "output_token_throughput (200 / 10 s)")
    near(t, j["goodput"]["avg"], 0.5, "goodput (5 / 10 s)")
    near(t, j["good_request_fraction"]["avg"], 5 / 11, "good_request_fraction (5 / 11)")
    t.eq(j["error_request_count"]["avg"], 1, "error_request_count")
    t.eq(j["request_count"]["avg"], 10, "request_count")
    # Wilson, k = 5, n = 11, z = 1.959964: hand-computed
    lo, hi = j["tokentap_report"]["good_request_fraction_ci95_wilson"]
    near(t, lo, 0.2127127, "Wilson low", 1e-6)
    near(t, hi, 0.7199085, "Wilson high", 1e-6)
    t.eq(j["error_summary"][0]["error_details"]["type"], "upstream_connect", "error type")
    t.eq(j["error_summary"][0]["count"], 1, "error count")
    p = report(t, path, "--goodput", "ttft:50")
    t.check("0.4545 (5/11)" in p.stdout and "[0.2127, 0.7199]" in p.stdout,
            "console good request fraction with Wilson interval:\n" + p.stdout)
    t.check("upstream_connect" in p.stdout and "502" in p.stdout, "errors by type")


def test_report_uses_record_slo_verdicts_without_goodput(t):
    """without --goodput the records' metadata.slo.good decides; records
    without a verdict are warned about and count as not good"""
    recs = ten(t)
    for i, r in enumerate(recs):
        if i < 8:
            r["metadata"]["slo"] = {"good": i % 2 == 0, "violations": []}
    path = write(t, "r.jsonl", recs)
    j, _ = export(t, path)
    t.eq(j["good_request_count"]["avg"], 4, "good requests from metadata.slo")
    near(t, j["good_request_fraction"]["avg"], 0.4, "fraction")
    p = report(t, path)
    t.check("2 of 10 records carry no SLO verdict" in p.stdout, "unjudged warning:\n" + p.stdout)


def test_report_small_sample_percentiles_are_marked(t):
    """p99 of 10 samples is marked '*' with the footnote; p50 is not"""
    p = report(t, write(t, "r.jsonl", ten(t)))
    line = next(l for l in p.stdout.splitlines() if l.startswith("\u2502 Time to First Token"))
    cells = [c.strip() for c in line.strip("\u2502").split("\u2502")]
    # Metric avg min max p1 p5 p10 p25 p50 p75 p90 p95 p99 std count
    t.eq(cells[4], "10.90*", "p1 of 10 samples")
    t.eq(cells[8], "55.00", "p50 of 10 samples")
    t.eq(cells[10], "91.00", "p90 of 10 samples (needs 10)")
    t.eq(cells[11], "95.50*", "p95 of 10 samples (needs 20)")
    t.eq(cells[12], "99.10*", "p99 of 10 samples (needs 100)")
    t.eq(cells[14], "10", "count")
    t.check("* too few samples" in p.stdout, "footnote")


# the columns of --format csv/json that hold text, not numbers
TEXT_COLUMNS = {"Metric", "set", "Slice (UTC)", "Type", "Codes", "Upstream types",
                "First message", "few_samples", "approximate"}


def with_errors(t):
    """ten(t), one upstream error and one cancelled request (no error
    object: was_cancelled alone makes it an error of code 499)"""
    recs = ten(t)
    recs.append(rec(10, start_ms=3000, latency=3.0,
                    error={"code": 502, "type": "upstream_connect", "message": "refused"}))
    c = rec(11, start_ms=3500, latency=3.0)
    c["metadata"]["was_cancelled"] = True
    recs.append(c)
    return recs


def test_report_csv_and_json_cells_are_numbers(t):
    """--format csv and json are for scripts: every cell of a numeric
    column is a number (or empty / null), never '43.26*', 'N/A' or '12%';
    the too-few-samples marker is its own column (few_samples) listing
    the flagged percentiles; the table format keeps '*' and its footnote"""
    a = write(t, "a.jsonl", with_errors(t))
    b = ten(t)
    for r in b:
        r["metrics"]["time_to_first_token"]["value"] += 5
    b = write(t, "b.jsonl", b)
    runs = (["--slice-duration", "5s"], ["--compare", b], ["--goodput", "ttft:50"],
            ["--compare", b, "--goodput", "ttft:50", "--slice-duration", "5s"])
    for extra in runs:
        j = json.loads(report(t, a, "--format", "json", *extra).stdout)
        for tab in j["tables"]:
            cols = tab["columns"]
            for row in tab["rows"]:
                t.eq(len(row), len(cols), f"{tab['title']}: row as long as the columns")
                for col, cell in zip(cols, row):
                    if col in TEXT_COLUMNS:
                        continue
                    t.check(cell is None or (isinstance(cell, (int, float))
                                             and not isinstance(cell, bool)),
                            f"json {extra} {tab['title']!r} {row[0]!r} {col}: {cell!r} is not a number")
        c = report(t, a, "--format", "csv", *extra).stdout
        for block in c.strip("\n").split("\n\n"):
            rows = list(csv.reader(io.StringIO(block)))
            for row in rows[1:]:
                for col, cell in zip(rows[0], row):
                    if col in TEXT_COLUMNS or cell == "":
                        continue
                    try:
                        float(cell)
                    except ValueError:
                        t.check(False, f"csv {extra} {row[0]!r} {col}: {cell!r} is not a number")
    # the markers, apart: TTFT of 10 samples, p1 p5 p95 p99 too few
    j = json.loads(report(t, a, "--format", "json").stdout)
    m = j["tables"][0]
    row = next(r for r in m["rows"] if r[0] == "Time to First Token (ms)")
    t.eq(row[m["columns"].index("p99")], 99.1, "json p99 a number")
    t.eq(row[m["columns"].index("few_samples")], ["p1", "p5", "p95", "p99"], "json few_samples")
    t.eq(row[m["columns"].index("approximate")], [], "json approximate")
    c = report(t, a, "--format", "csv").stdout
    rows = list(csv.reader(io.StringIO(c.split("\n\n")[0])))
    ttft = next(r for r in rows if r[0] == "Time to First Token (ms)")
    t.eq(ttft[rows[0].index("p99")], "99.10", "csv p99 bare")
    t.eq(ttft[rows[0].index("few_samples")], "p1;p5;p95;p99", "csv few_samples")
    p = report(t, a)
    t.check("99.10*" in p.stdout and "* too few samples" in p.stdout,
            "the table keeps the marker and its footnote")


def test_report_header_counts_cancelled_as_errors(t):
    """a cancelled request is an error (code 499, as AIPerf records it):
    the header, the Error Request Count, the rows by type and the export
    agree"""
    path = write(t, "r.jsonl", with_errors(t))
    p = report(t, path)
    t.check("12 records (10 ok, 2 errors incl. 1 cancelled)" in p.stdout,
            "header:\n" + p.stdout[:400])
    line = next(l for l in p.stdout.splitlines() if "Error Request Count" in l)
    t.eq(line.strip("\u2502 ").split()[-1], "2", "Error Request Count")
    row = next(l for l in p.stdout.splitlines() if l.strip("\u2502 ").startswith("cancelled"))
    t.check("499" in row, "cancelled row with code 499: " + row)
    t.check("Cancelled: 1 of the 2 errors" in p.stdout, "cancelled line")
    j, _ = export(t, path)
    t.eq(j["error_request_count"]["avg"], 2, "export error_request_count")
    t.eq(sum(e["count"] for e in j["error_summary"]), 2, "export error_summary sums to it")


def test_report_narrow_slice_table_title_is_whole(t):
    """a table split into parts repeats its title whole in every part,
    never cut to '..' (the slices' title is wider than its second part)"""
    path = write(t, "r.jsonl", with_errors(t))
    p = report(t, path, "--slice-duration", "5s", columns=100)
    titles = [l for l in p.stdout.splitlines() if l.strip().startswith("Timeslices of")]
    t.check(len(titles) >= 2, "the slice table in parts:\n" + p.stdout)
    for i, l in enumerate(titles):
        t.check(l.strip() == f"Timeslices of 5s from 2026-01-01 (UTC); times in ms (part {i + 1})",
                f"title whole: {l!r}")
    t.check(all(len(l) <= 100 for l in p.stdout.splitlines()), "fits 100 columns")


def test_report_empty_file_says_no_records(t):
    """an empty record file (or one whose records are all filtered out)
    is not an empty report: 'no records' on stderr naming the file, exit 1"""
    empty = write(t, "empty.jsonl", [])
    p = report(t, empty, rc=1)
    t.eq(p.stdout, "", "nothing on stdout")
    t.check("no records" in p.stderr and "empty.jsonl" in p.stderr, "message: " + p.stderr)
    t.eq(len(p.stderr.strip().splitlines()), 1, "one line")
    path = write(t, "r.jsonl", ten(t))
    p = report(t, path, "--model", "nope", rc=1)
    t.check("no records" in p.stderr and "10 filtered out" in p.stderr, "filtered: " + p.stderr)
    p = report(t, path, "--compare", empty, rc=1)
    t.check("set B: no records in" in p.stderr, "set B named: " + p.stderr)
    p = report(t, empty, "--format", "json", rc=1)
    t.eq(p.stdout, "", "json: nothing on stdout")


def test_report_compare_upstreams_refuses_unknown_name(t):
    """--compare-upstreams primary,candiate (a typo) is refused, exit 2,
    one line naming it and listing the upstreams the file has"""
    recs = ten(t)
    for r in ten(t):
        r["metadata"]["upstream"] = "candidate"
        recs.append(r)
    path = write(t, "r.jsonl", recs)
    p = report(t, path, "--compare-upstreams", "primary,candiate", rc=2)
    t.eq(p.stdout, "", "no report")
    lines = p.stderr.strip().splitlines()
    t.eq(len(lines), 1, "one line: " + p.stderr)
    t.check("'candiate'" in lines[0] and "primary 10" in lines[0] and "candidate 10" in lines[0],
            "names the typo and the upstreams: " + lines[0])
    p = report(t, path, "--upstream", "secondary", rc=2)
    t.check("'secondary'" in p.stderr and "primary" in p.stderr, "--upstream too: " + p.stderr)
    p = report(t, path, "--compare-upstreams", "primary,candidate")
    t.check("Paired comparison" in p.stdout, "the right names still compare")


def test_report_export_layout_matches_aiperf(t):
    """profile_export_aiperf.json: per-metric blocks of unit, avg, min, max,
    p1..p99, std, count, sum; scalars as unit + avg; the CSV: a stats block
    (Metric,avg,min,max,sum,p1..p99,std) sorted by tag, a blank line, then
    Metric,Value"""
    recs = ten(t)
    recs[0]["metrics"]["inter_chunk_latency"] = {"value": [1.0, 2.0, 3.0], "unit": "ms"}
    j, c = export(t, write(t, "r.jsonl", recs), "--goodput", "e2el:505")
    want = ["unit", "avg", "min", "max", "p1", "p5", "p10", "p25", "p50", "p75",
            "p90", "p95", "p99", "std", "count", "sum"]
    for tag in ("time_to_first_token", "request_latency", "inter_token_latency",
                "input_sequence_length", "output_sequence_length", "inter_chunk_latency",
                "output_token_throughput_per_user"):
        t.eq(sorted(j[tag].keys()), sorted(want), f"{tag} block fields")
    for tag, unit in (("request_throughput", "requests/sec"), ("goodput", "requests/sec"),
                      ("output_token_throughput", "tokens/sec"), ("request_count", "requests"),
                      ("good_request_fraction", "ratio"), ("benchmark_duration", "sec")):
        t.eq(sorted(j[tag].keys()), ["avg", "unit"], f"{tag} block fields")
        t.eq(j[tag]["unit"], unit, f"{tag} unit")
    t.eq(j["schema_version"], "1.5", "schema_version")
    t.check(j["start_time"].startswith("2026-01-01T00:00:00"), "start_time")
    t.eq(j["inter_chunk_latency"]["count"], 3, "pooled gaps")
    t.check("time_to_second_token" not in j, "absent metrics are omitted")

    blocks = c.split("\r\n\r\n")
    t.eq(len(blocks), 2, "two CSV blocks")
    rows = list(csv.reader(io.StringIO(blocks[0])))
    t.eq(rows[0], ["Metric", "avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50",
                   "p75", "p90", "p95", "p99", "std"], "stats header")
    names = [r[0] for r in rows[1:]]
    t.eq(names[0], "Input Sequence Length (tokens)", "first row (sorted by tag)")
    ttft = next(r for r in rows if r[0] == "Time to First Token (ms)")
    t.eq(ttft[1:6], ["55.00", "10.00", "100.00", "550.00", "10.90"], "TTFT row")
    scal = list(csv.reader(io.StringIO(blocks[1])))
    t.eq(scal[0], ["Metric", "Value"], "scalar header")
    d = {r[0]: r[1] for r in scal[1:] if r}
    t.eq(d.get("Request Throughput (requests/sec)"), "1.00", "request throughput row")
    t.eq(d.get("Request Count"), "10", "request count row")
    t.eq(d.get("Goodput (requests/sec)"), "0.60", "goodput row (6 / 10 s)")


def test_report_trace_is_mooncake(t):
    """--trace writes one line per request in start order: timestamp (ms
    from the first request, integer), input_length, output_length"""
    recs = ten(t)[::-1]                     # file order is not start order
    recs.append(rec(20, start_ms=2500.4, latency=10.0, osl=3))   # no ISL: left out
    path = write(t, "r.jsonl", recs)
    out = os.path.join(t.tmp, "trace.jsonl")
    p = report(t, path, "--trace", out)
    with open(out) as f:
        lines = [json.loads(l) for l in f]
    t.eq(len(lines), 10, "trace lines")
    t.eq(lines[0], {"timestamp": 0, "input_length": 100, "output_length": 20}, "first line")
    t.eq([l["timestamp"] for l in lines], [i * 1000 for i in range(10)], "timestamps")
    t.eq([l["input_length"] for l in lines], [100 * (i + 1) for i in range(10)], "input lengths")
    t.check("1 left out" in p.stdout, "left-out count reported")


def test_report_paired_comparison(t):
    """records sharing x_request_id are compared pair by pair: median of
    B - A with the order-statistic 95% interval (n = 10: d(2), d(9))"""
    a = ten(t)
    b = ten(t)
    # B's TTFT = A's + d_i with d = 1..10 (shuffled over requests)
    ds = [3, 7, 1, 10, 5, 2, 9, 4, 8, 6]
    for r, d in zip(b, ds):
        r["metrics"]["time_to_first_token"]["value"] += d
    b.append(rec(99, start_ms=0, ttft=1.0, latency=1.0, rid="only-in-b"))
    pa, pb = write(t, "a.jsonl", a), write(t, "b.jsonl", b)
    p = report(t, pa, "--compare", pb)
    t.check("Paired comparison: 10 requests in both sets" in p.stdout, "pairs:\n" + p.stdout)
    line = next(l for l in p.stdout.splitlines()
                if l.startswith("\u2502 Time to First Token") and "%" in l and l.count("\u2502") == 8)
    cells = [c.strip() for c in line.strip("\u2502").split("\u2502")]
    # Metric pairs median lo hi coverage rel
    t.eq(cells[1], "10", "pairs")
    t.eq(cells[2], "+5.50", "median of d = 1..10")
    t.eq(cells[3], "+2.00", "95% CI low = d(2)")
    t.eq(cells[4], "+9.00", "95% CI high = d(9)")
    t.eq(cells[5], "97.9%", "exact coverage 1 - 22/1024")
    # the unpaired side by side: avg 55 vs 60.5 (B has an 11th request of TTFT 1)
    t.check("B-A" in p.stdout and "B/A-1" in p.stdout, "difference rows")


def test_report_compare_unpaired_differences(t):
    """without shared ids: no pairing, side-by-side differences only"""
    a = ten(t)
    b = ten(t)
    for i, r in enumerate(b):
        r["metadata"]["x_request_id"] = f"other-{i}"
        r["metrics"]["time_to_first_token"]["value"] *= 2
    p = report(t, write(t, "a.jsonl", a), "--compare", write(t, "b.jsonl", b))
    t.check("no request id (x_request_id) occurs in both sets" in p.stdout, "no pairing note")
    lines = p.stdout.splitlines()
    k = next(i for i, l in enumerate(lines) if l.startswith("\u2502 Time to First Token"))
    diff = [c.strip() for c in lines[k + 2].strip("\u2502").split("\u2502")]
    rel = [c.strip() for c in lines[k + 3].strip("\u2502").split("\u2502")]
    t.eq(diff[1], "B-A", "difference row")
    t.eq(diff[2], "+55.00", "avg difference")
    t.eq(rel[2], "+100.00%", "avg relative difference")


def test_report_filters(t):
    """--model, --api, --upstream, --status, --since/--until select records"""
    recs = ten(t)
    recs[0]["metadata"]["model"] = "other"
    recs[1]["metadata"]["api"] = "anthropic.messages"
    recs[2]["metadata"]["upstream"] = "shadow"
    recs[3]["metadata"]["status"] = 500
    path = write(t, "r.jsonl", recs)
    j, _ = export(t, path, "--model", "m", "--api", "openai.chat", "--upstream", "primary",
                  "--status", "200")
    t.eq(j["time_to_first_token"]["count"], 6, "records left by the field filters")
    # starts at 0..9 s: since 2 s, until 2026-01-01T00:00:05Z -> starts 2,3,4,5
    j, _ = export(t, path, "--since", str((T0 + 2_000_000_000) / 1e9),
                  "--until", "2026-01-01T00:00:05Z")
    t.eq(j["time_to_first_token"]["count"], 4, "records left by --since/--until")
    t.eq(j["tokentap_report"]["filtered_out"], 6, "filtered count")


def test_report_warns_on_mixed_schemas_and_sources(t):
    """different schema versions and token counting methods are reported,
    not silently mixed"""
    recs = ten(t)
    recs[0]["metadata"]["token_count_source"] = "events"
    recs[1]["schema"] = "tokentap.record/2"
    del recs[2]["schema"]
    p = report(t, write(t, "r.jsonl", recs))
    t.check("schema versions are mixed" in p.stdout, "schema mix warning:\n" + p.stdout)
    t.check("tokentap.record/2" in p.stdout, "unknown schema named")
    t.check("2 counting methods" in p.stdout and "events 1" in p.stdout,
            "token source warning:\n" + p.stdout)


def test_report_malformed_lines_are_counted(t):
    """malformed lines are counted and reported, never fatal"""
    path = write(t, "r.jsonl", ten(t), extra_lines=["{not json", "[]", "", "   ",
                                                    '{"metadata": 5}'])
    p = report(t, path)
    t.check("3 malformed lines skipped" in p.stdout, "malformed count:\n" + p.stdout)
    t.check("10 records (10 ok, 0 errors)" in p.stdout, "records still read")


def test_report_bad_arguments_exit_2(t):
    """bad arguments exit 2 with one clear line naming the problem"""
    path = write(t, "r.jsonl", ten(t))
    for args, word in ((["--status", "abc", path], "--status"),
                       (["--since", "yesterday", path], "--since"),
                       (["--goodput", "bogus:1", path], "goodput"),
                       (["--frobnicate", path], "--frobnicate"),
                       ([], "no record files"),
                       ([os.path.join(t.tmp, "missing.jsonl")], "missing.jsonl"),
                       ([path, "--export"], "--export")):
        p = report(t, *args, rc=2)
        t.check(word in p.stderr, f"{args}: message names {word!r}: {p.stderr!r}")
    p = report(t, "--help")
    for opt in ("--goodput", "--model", "--api", "--upstream", "--status", "--since",
                "--until", "--export", "--compare", "--trace", "--plot", "--max-exact"):
        t.check(opt in p.stdout, f"--help documents {opt}")


def test_report_histogram_fallback_beyond_max_exact(t):
    """past --max-exact, percentiles come from the histograms (marked ~),
    within the stated 0.78 %, and the report says so"""
    recs = [rec(i, start_ms=i, ttft=100.0 + i, latency=1000.0) for i in range(300)]
    path = write(t, "r.jsonl", recs)
    p = report(t, path, "--max-exact", "100")
    t.check("records beyond --max-exact 100" in p.stdout, "fallback warning")
    j, _ = export(t, path, "--max-exact", "100")
    exact = 100 + 0.5 * 299                 # p50 of 100..399
    t.check(abs(j["time_to_first_token"]["p50"] - exact) <= exact * 0.0079,
            f"histogram p50 {j['time_to_first_token']['p50']} vs {exact}")
    near(t, j["time_to_first_token"]["avg"], 100 + 299 / 2, "avg stays exact")
    t.check("time_to_first_token" in j["tokentap_report"]["histogram_percentiles"],
            "export lists the approximate metrics")


@timeout(60)
def test_report_on_proxy_records(t):
    """the report reads the records the proxy writes"""
    sim = t.sim()
    px = t.proxy(sim.url)
    for i in range(4):
        r = px.post("/v1/chat/completions",
                    harness.chat_body({"ttft_ms": 20, "tokens": 6, "gap_ms": 2}),
                    headers=[("X-Request-Id", f"r{i}")])
        t.eq(r.status, 200, "status")
    px.records(4)
    path = px.record_path
    j, _ = export(t, path, "--goodput", "ttft:1000")
    t.eq(j["time_to_first_token"]["count"], 4, "TTFT count")
    t.check(15 <= j["time_to_first_token"]["p50"] <= 200, "TTFT about 20 ms")
    t.eq(j["inter_chunk_latency"]["count"], 20, "4 x 5 gaps")
    t.eq(j["good_request_count"]["avg"], 4, "all good")


@timeout(120)
def test_report_plot_renders_in_chromium(t):
    """--plot writes a self-contained HTML page (inline SVG, no scripts, no
    URLs fetched) that headless Chromium renders to a non-blank PNG"""
    rnd = random.Random(7)
    recs = []
    for i in range(400):
        ttft = rnd.lognormvariate(math.log(200), 0.4)
        osl = rnd.randint(20, 400)
        recs.append(rec(i, start_ms=i * 50, ttft=ttft, ttfo=ttft * 1.2,
                        latency=ttft + osl * 8, isl=rnd.randint(100, 4000), osl=osl,
                        itl=rnd.gauss(8, 1)))
    path = write(t, "r.jsonl", recs)
    html = os.path.join(t.tmp, "report.html")
    report(t, path, "--goodput", "ttft:300 itl:9", "--plot", html)
    with open(html) as f:
        page = f.read()
    t.check("<svg" in page and "<script" not in page, "inline SVG, no script")
    t.check("http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', ""),
            "no external URL")
    svg = os.path.join(t.tmp, "report.svg")
    report(t, path, "--plot", svg)
    with open(svg) as f:
        t.check(f.read().startswith("<?xml"), "bare SVG for .svg")

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise harness.Skip("chromium is not installed (apt-get install chromium); "
                           "plot file checked, rendering not")
    png = os.path.join(t.tmp, "report.png")
    prof = tempfile.mkdtemp(dir=t.tmp)
    subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", f"--user-data-dir={prof}",
                    f"--screenshot={png}", "--window-size=1200,1600", "file://" + html],
                   capture_output=True, timeout=90)
    t.check(os.path.exists(png) and os.path.getsize(png) > 20000,
            f"screenshot written ({os.path.getsize(png) if os.path.exists(png) else 0} bytes)")
    with open(png, "rb") as f:
        t.eq(f.read(8), b"\x89PNG\r\n\x1a\n", "PNG signature")


# --------------------------------------------------------------------------
# synthetic records for the 1M measurement


def gen(n, out, seed=1):
    """<n> records of the proxy's shape: lognormal TTFT, 20..400 tokens,
    about 24 inter-chunk gaps each, 1 % errors, two token sources"""
    rnd = random.Random(seed)
    with open(out, "w") as f:
        t_ms = 0.0
        for i in range(n):
            t_ms += rnd.expovariate(1 / 2.0)
            ttft = rnd.lognormvariate(math.log(180), 0.5)
            osl = rnd.randint(20, 400)
            itl = max(0.5, rnd.gauss(9, 1.5))
            gaps = [round(max(0.1, rnd.gauss(itl, 2)), 6) for _ in range(24)]
            err = None
            if rnd.random() < 0.01:
                err = {"code": 502, "type": "upstream_reset", "message": "connection reset"}
            r = rec(i, start_ms=t_ms, ttft=round(ttft, 6), ttfo=round(ttft, 6),
                    latency=round(ttft + itl * (osl - 1), 6), isl=rnd.randint(50, 8000),
                    osl=osl, itl=round(itl, 6), icl=gaps, error=err,
                    rid=f"{i:016x}", source="usage" if i % 10 else "events",
                    slo_good=ttft < 300)
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "gen":
        gen(int(sys.argv[2]), sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)
