"""Logs and the access log: one structured format (logfmt or JSON lines),
levels, a log file and an access log both reopened on SIGHUP, one access
line per request whose figures are the record's, and no secret in either
(SPEC 4: the query's key= is redacted as records redact it, no header value
but X-Request-Id is written)."""
import json
import os
import re
import signal

import harness

SECRETS = [b"sk-LOGSECRET", b"QUERYSECRET", b"APIKEYSECRET", b"COOKIESECRET"]
SECRET_HEADERS = [("Authorization", "Bearer sk-LOGSECRET"),
                  ("x-api-key", "APIKEYSECRET"), ("Cookie", "session=COOKIESECRET")]
PATH = "/v1/chat/completions?key=QUERYSECRET&alt=sse"

LOGFMT_PAIR = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|[^ "]*)(?: |$)')


def parse_logfmt(line):
    """one logfmt line -> dict; Failure when it is not logfmt"""
    out, pos = {}, 0
    while pos < len(line):
        m = LOGFMT_PAIR.match(line, pos)
        if not m:
            raise harness.Failure(f"not logfmt at {pos}: {line!r}")
        v = m.group(2)
        out[m.group(1)] = json.loads(v) if v.startswith('"') else v
        pos = m.end()
    return out


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        return None             # the writer is mid-line
    return [ln.decode() for ln in data.split(b"\n") if ln]


def wait_lines(t, path, n, what):
    return harness.wait_until(lambda: (lambda x: x if x is not None and len(x) >= n else None)(
        read_lines(path)), 5 * t.slow, what=f"{n} {what} line(s) in {path}")


def no_secrets(t, data, where):
    for s in SECRETS:
        t.check(s not in data, f"{s.decode()} appears in {where}")


def as_ms(v):
    return None if v is None else float(v)


def test_access_log_logfmt_fields_match_records(t):
    """one logfmt access line per request: id, method, redacted path, status,
    api, model, TTFT, latency, tokens and error type equal the record's"""
    sim = t.sim()
    access = os.path.join(t.tmp, "access.log")
    px = t.proxy(sim.url, extra=["--access-log", access, "--log-level", "debug"])
    ok = harness.chat_body({"tokens": 5, "gap_ms": 1, "ttft_ms": 2, "usage": True,
                            "prompt_tokens": 7})
    bad = harness.chat_body({"tokens": 6, "truncate_after": 2})
    t.eq(px.post(PATH, ok, headers=[("X-Request-Id", "acc-ok")] + SECRET_HEADERS).status,
         200, "status of the good request")
    px.post("/v1/chat/completions", bad, headers=[("X-Request-Id", "acc-bad")])
    t.eq(px.request("GET", "/v1/models", headers=[("X-Request-Id", "acc-models")]).status,
         200, "status of GET /v1/models")
    recs = {r["metadata"]["x_request_id"]: r for r in px.records(3)}
    lines = wait_lines(t, access, 3, "access")
    t.eq(len(lines), 3, "one access line per request")
    acc = {}
    for ln in lines:
        d = parse_logfmt(ln)
        t.check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", d.get("ts", "")),
                f"ts is RFC 3339 UTC with milliseconds: {ln}")
        acc[d["id"]] = d
    t.eq(sorted(acc), sorted(recs), "the access log names the records' requests")
    for rid, d in acc.items():
        md = recs[rid]["metadata"]
        t.eq(d["method"], md["method"], f"{rid}: method")
        t.eq(d["path"], md["path"], f"{rid}: path as the record shows it")
        t.eq(int(d["status"]), md["status"], f"{rid}: status")
        t.eq(d["api"], md["api"], f"{rid}: api")
        t.eq(d["model"], md["model"], f"{rid}: model")
        t.eq(d["upstream"], md["upstream"], f"{rid}: upstream")
        for key, tag in (("ttft_ms", "time_to_first_token"), ("latency_ms", "request_latency")):
            want = harness.metric(recs[rid], tag)
            if want is None:
                t.check(key not in d, f"{rid}: {key} absent as in the record")
            else:
                # three decimals: rounded to the microsecond
                t.near(as_ms(d.get(key)), want, 0.00051, f"{rid}: {key}")
        osl = harness.metric(recs[rid], "output_sequence_length")
        t.eq(int(d["output_tokens"]) if "output_tokens" in d else None,
             None if osl is None else int(osl), f"{rid}: output_tokens")
        err = (recs[rid].get("error") or {}).get("type")
        t.eq(d.get("error"), err, f"{rid}: error type")
    t.eq(acc["acc-ok"]["path"], "/v1/chat/completions?key=REDACTED&alt=sse", "redacted path")
    t.eq({d["client"] for d in acc.values()}, {"127.0.0.1"}, "client address")
    t.eq(int(acc["acc-ok"]["input_tokens"]), 7, "input tokens of the good request")
    t.eq(int(acc["acc-ok"]["output_tokens"]), 5, "output tokens of the good request")
    t.check("ttft_ms" in acc["acc-ok"], "TTFT of the streamed request")
    t.check("ttft_ms" not in acc["acc-models"], "no TTFT for GET /v1/models")
    t.eq(acc["acc-bad"]["error"], "truncated", "error type of the cut stream")
    t.eq(px.stop(), 0, "exit status")
    with open(access, "rb") as f:
        no_secrets(t, f.read(), "the access log")
    err = px.stderr()
    t.check(re.search(rb'^ts=\S+ level=info msg="tokentap ', err, re.M),
            "the start-up line is logfmt")
    no_secrets(t, err, "the debug-level log")


def test_json_log_file_and_access_log_reopen_on_sighup(t):
    """--log-format json --log-file: every log line is a JSON object with ts,
    level and msg; renaming the log and the access log, then SIGHUP, sends
    later lines to new files at the configured paths"""
    sim = t.sim()
    log = os.path.join(t.tmp, "tokentap.log")
    access = os.path.join(t.tmp, "access.jsonl")
    px = t.proxy(sim.url, extra=["--log-format", "json", "--log-file", log,
                                 "--access-log", access])
    body = harness.chat_body({"tokens": 3, "gap_ms": 1})
    t.eq(px.post(PATH, body, headers=[("X-Request-Id", "json-0")] + SECRET_HEADERS).status,
         200, "status")
    first = wait_lines(t, access, 1, "access")
    d = json.loads(first[0])
    t.eq((d["id"], d["path"], d["status"], d["api"], d["model"], d["stream"]),
         ("json-0", "/v1/chat/completions?key=REDACTED&alt=sse", 200, "openai.chat",
          "sim-model", "true"), "JSON access line")
    t.check(isinstance(d["ttft_ms"], (int, float)) and isinstance(d["output_tokens"], int),
            f"numbers are JSON numbers: {first[0]}")
    t.check(b"level" not in px.stderr(), "nothing logged on stderr with --log-file")
    start = read_lines(log)
    t.check(start and json.loads(start[0])["msg"].startswith("tokentap "),
            f"the start-up line is in the log file: {start!r}")

    os.rename(log, log + ".1")
    os.rename(access, access + ".1")
    px.signal(signal.SIGHUP)
    # the reload line is written after the log is reopened
    harness.wait_until(lambda: any("reload: SLOs now" in ln for ln in (read_lines(log) or [])),
                       5 * t.slow, what="the reload line in a new log file")
    t.eq(px.post("/v1/chat/completions", body, headers=[("X-Request-Id", "json-1")]).status,
         200, "status after SIGHUP")
    after = wait_lines(t, access, 1, "access")
    t.eq([json.loads(x)["id"] for x in after], ["json-1"], "the new access log")
    t.eq([json.loads(x)["id"] for x in read_lines(access + ".1")], ["json-0"],
         "the rotated access log")
    t.eq(px.stop(), 0, "exit status")
    for path in (log, log + ".1"):
        lines = read_lines(path)
        for ln in lines:
            d = json.loads(ln)
            t.eq(sorted(d), ["level", "msg", "ts"], f"fields of a log line in {path}")
            t.check(d["level"] in ("error", "warn", "info", "debug"), f"level: {ln}")
        with open(path, "rb") as f:
            no_secrets(t, f.read(), path)
    t.check(any("SIGHUP" in json.loads(x)["msg"] for x in read_lines(log + ".1")),
            "the SIGHUP line went to the old file")
    t.check(any("drained, exiting" in json.loads(x)["msg"] for x in read_lines(log)),
            "the exit line went to the new file")


def test_log_level_filters(t):
    """--log-level error: the info start-up line is not written"""
    sim = t.sim()
    log = os.path.join(t.tmp, "tokentap.log")
    px = t.proxy(sim.url, extra=["--log-level", "error", "--log-file", log])
    t.eq(px.request("GET", "/v1/models").status, 200, "status")
    px.signal(signal.SIGHUP)
    t.eq(px.stop(), 0, "exit status")
    t.eq(read_lines(log), [], "no line below error")


def test_unopenable_log_files_fail_start_with_reason(t):
    """a log file or access log that cannot be opened stops the start with
    the flag, the path and the reason (exit 1); both on stdout is refused"""
    sim = t.sim()
    missing = os.path.join(t.tmp, "no-such-dir", "x.log")
    for flag in ("--log-file", "--access-log"):
        px = t.proxy(sim.url, extra=[flag, missing], expect_rc=1, wait=False)
        t.eq(px.wait(10 * t.slow), 1, f"{flag}: exit status")
        err = px.stderr().decode()
        t.check(f"{flag}: cannot open '{missing}': No such file or directory" in err,
                f"{flag}: the reason on stderr: {err!r}")
    px = t.proxy(sim.url, record=False, extra=["--record", "-", "--access-log", "-"],
                 expect_rc=2, wait=False)
    t.eq(px.wait(10 * t.slow), 2, "--record - with --access-log -: exit status")
    t.check(b"--access-log: stdout (-) is already taken by --record -" in px.stderr(),
            f"the conflict named: {px.stderr()!r}")


def start_with_stderr_stream(t, name, argv, journal_of, rc=0):
    """a Proc whose stderr file is created first, so that JOURNAL_STREAM can
    name it (<journal_of> = that file) or another file, as systemd would;
    with <rc> != 0 the process is expected to exit by itself"""
    err_path = os.path.join(t.tmp, f"{name}.stderr")
    with open(err_path, "wb"):
        pass
    st = os.stat(journal_of(err_path))
    os.environ["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
    try:
        p = harness.Proc(t, name, argv, expect_rc=rc)   # reopens err_path: same inode
    finally:
        del os.environ["JOURNAL_STREAM"]
    if rc:
        t.eq(p.wait(10 * t.slow), rc, f"{name}: exit status")
        return p.stderr().decode().splitlines()
    harness.wait_until(lambda: b"listening on" in p.stderr(), 10 * t.slow,
                       what=f"{name}: the start-up line")
    p.signal(signal.SIGTERM)
    t.eq(p.wait(10 * t.slow), 0, f"{name}: exit status")
    return p.stderr().decode().splitlines()


def test_journal_stream_gets_syslog_priorities(t):
    """stderr that is the journal's stream (JOURNAL_STREAM = its dev:inode)
    gets each line prefixed with the level's syslog priority; any other
    stderr gets the bare line"""
    sim = t.sim()
    argv = [os.path.join(t.build, "tokentap"), "--listen", "127.0.0.1:0", "--admin", "off",
            "--upstream", sim.url]
    lines = start_with_stderr_stream(t, "journal", argv, lambda p: p)
    t.check(len(lines) >= 3, f"start, SIGTERM and exit lines: {lines}")
    for ln in lines:
        t.check(ln.startswith("<6>ts=") and " level=info " in ln, f"info at priority 6: {ln!r}")
    bad = os.path.join(t.tmp, "no-such-dir", "access.log")
    lines = start_with_stderr_stream(t, "journal-err", argv + ["--access-log", bad],
                                     lambda p: p, rc=1)
    t.check(any(ln.startswith("<3>ts=") and " level=error " in ln and "--access-log" in ln
                for ln in lines), f"the error at priority 3: {lines}")
    other = os.path.join(t.tmp, "not-stderr")
    with open(other, "wb"):
        pass
    lines = start_with_stderr_stream(t, "plain", argv, lambda p: other)
    for ln in lines:
        t.check(ln.startswith("ts="), f"no priority when stderr is not the journal: {ln!r}")


def test_refused_request_log_line_is_redacted(t):
    """a request tokentap refuses itself (413) is logged with its path
    redacted as records redact it"""
    sim = t.sim()
    px = t.proxy(sim.url, extra=["--max-body-bytes", "10"])
    r = px.post(PATH, harness.chat_body({"tokens": 2}), headers=SECRET_HEADERS)
    t.eq(r.status, 413, "status")
    harness.wait_until(lambda: b"413 payload_too_large" in px.stderr(), 5 * t.slow,
                       what="the refusal logged")
    t.eq(px.stop(), 0, "exit status")
    err = px.stderr()
    t.check(b"?key=REDACTED&alt=sse" in err, f"the redacted path in the log: {err[-400:]!r}")
    no_secrets(t, err, "the log")
