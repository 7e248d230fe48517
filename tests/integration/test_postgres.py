"""Records in PostgreSQL (conf/postgres/tokentap.sql): the records of
several tokentap instances loaded with the documented \\copy, and the
shipped summary view's TTFT/ITL percentiles, goodput and good-request
fraction per upstream and model equal `tokentap report`'s for the same
records.

PostgreSQL is started by the test itself: initdb and pg_ctl in a temp dir
(as nobody when run as root: the server refuses root), no TCP listener at
all (listen_addresses = ''), clients on a unix-domain socket in that dir."""
import glob
import json
import os
import pwd
import shutil
import subprocess
import tempfile

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SQL = os.path.join(REPO, "conf", "postgres", "tokentap.sql")
COPY = ("\\copy tokentap_records(doc) FROM '{}' "
        "WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02')")
PCTS = ["p50", "p90", "p95", "p99"]


def pg_bin(name):
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


class Postgres:
    """a throwaway cluster on a unix socket; stop() removes it"""

    def __init__(self, t):
        self.initdb, self.pg_ctl, self.psql_bin = pg_bin("initdb"), pg_bin("pg_ctl"), shutil.which("psql")
        if not (self.initdb and self.pg_ctl and self.psql_bin):
            raise harness.Skip("PostgreSQL not installed (scripts/deps.sh installs postgresql)")
        self.t = t
        self.root = tempfile.mkdtemp(prefix="tokentap-pg-")
        os.chmod(self.root, 0o755)
        self.data = os.path.join(self.root, "data")
        self.sock = os.path.join(self.root, "sock")
        os.mkdir(self.sock)
        self.as_user = {}
        if os.geteuid() == 0:
            pw = pwd.getpwnam("nobody")
            for p in (self.root, self.sock):
                os.chown(p, pw.pw_uid, pw.pw_gid)
            self.as_user = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
        self.started = False
        self.server(self.initdb, "-D", self.data, "-U", "tokentap", "--auth=trust",
                    "-E", "UTF8", "--no-sync")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"listen_addresses = ''\nunix_socket_directories = '{self.sock}'\n"
                    "fsync = off\nsynchronous_commit = off\n")
        # -w: pg_ctl returns once the server accepts connections
        self.server(self.pg_ctl, "-D", self.data, "-l", os.path.join(self.root, "server.log"),
                    "-w", "-t", str(60 * t.slow), "start")
        self.started = True

    def server(self, *argv):
        p = subprocess.run(list(argv), cwd=self.root, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=120, **self.as_user)
        if p.returncode != 0:
            log = os.path.join(self.root, "server.log")
            tail = open(log).read()[-600:] if os.path.exists(log) else ""
            raise harness.Failure(f"{os.path.basename(argv[0])} exited {p.returncode}: "
                                  f"{p.stdout.decode()[-600:]} {tail}")

    def psql(self, *commands, file=None):
        argv = [self.psql_bin, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", self.sock,
                "-U", "tokentap", "-d", "postgres"]
        for c in commands:
            argv += ["-c", c]
        if file:
            argv += ["-f", file]
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if p.returncode != 0:
            raise harness.Failure(f"psql {commands or file} exited {p.returncode}: "
                                  f"{p.stderr.decode()[-600:]}")
        return p.stdout.decode()

    def stop(self):
        try:
            if self.started:
                self.server(self.pg_ctl, "-D", self.data, "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def make_records(t, sim, name, n, goodput):
    """<n> requests through one proxy instance: two models, TTFT 1..19 ms,
    2..7 tokens, every seventh stream cut (an error); returns its record path.
    The SLO judges the token count, which the sim fixes, so which requests
    are good does not depend on how busy the machine is"""
    px = t.proxy(sim.url, extra=["--goodput", goodput])
    for i in range(n):
        seed = (i * 7 + len(name) * 3) % 19
        sim_opts = {"ttft_ms": 1 + seed, "tokens": 2 + i % 6, "gap_ms": 1 + i % 3,
                    "usage": True}
        if i % 7 == 3:
            sim_opts["truncate_after"] = 1
        body = harness.chat_body(sim_opts, model="model-a" if i % 3 else "model-b")
        px.post("/v1/chat/completions", body, headers=[("X-Request-Id", f"{name}-{i}")])
    px.records(n)
    t.eq(px.stop(), 0, f"{name}: exit status")
    return px.record_path


def report(t, files, upstream, model):
    out = os.path.join(t.tmp, f"export-{upstream}-{model}")
    p = subprocess.run([os.path.join(t.build, "tokentap"), "report", *files,
                        "--upstream", upstream, "--model", model, "--export", out],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    t.eq(p.returncode, 0, f"tokentap report exit status ({p.stderr[-300:]!r})")
    with open(os.path.join(out, "profile_export_aiperf.json")) as f:
        return json.load(f)


# the report's JSON export prints 15 significant digits when they read back
# within DBL_EPSILON (cJSON's print_number), so "equal" is to ~1e-15
SAME = 1e-14


def close(a, b, rel=1e-6):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def test_summary_view_equals_report_across_instances(t):
    """records of three instances in one table; per (upstream, model) the
    view's percentile_cont figures, goodput and good fraction are the
    report's (on the report's float32 values to the digits its export
    prints, on the full-precision values to 1e-6)"""
    sim = t.sim()
    a = make_records(t, sim, "a", 28, "output_sequence_length:4")
    b = make_records(t, sim, "b", 21, "output_sequence_length:4")
    # a third instance in front of another upstream: this build names its
    # one upstream "primary", so instance c's records are b's under the
    # upstream name "canary" (and their own request ids)
    c = os.path.join(t.tmp, "records-c.jsonl")
    with open(b) as src, open(c, "w") as dst:
        for line in src:
            rec = json.loads(line)
            rec["metadata"]["upstream"] = "canary"
            rec["metadata"]["x_request_id"] = "c" + rec["metadata"]["x_request_id"][1:]
            dst.write(json.dumps(rec) + "\n")

    pg = Postgres(t)
    try:
        pg.psql(file=SQL)
        pg.psql(file=SQL)           # idempotent: a second run changes nothing
        for name, path in (("proxy-a", a), ("proxy-b", b), ("proxy-c", c)):
            pg.psql(f"SET tokentap.instance = '{name}'", COPY.format(path))
        t.eq(pg.psql("SELECT instance || '=' || count(*) FROM tokentap_records "
                     "GROUP BY instance ORDER BY 1").split(),
             ["proxy-a=28", "proxy-b=21", "proxy-c=21"], "records loaded per instance")
        # the escapes of a record survive the load: the document is the line
        with open(a) as f:
            first = json.loads(f.readline())
        got = json.loads(pg.psql("SELECT doc FROM tokentap_records WHERE "
                                 "doc->'metadata'->>'x_request_id' = 'a-0'"))
        t.eq(got, first, "a record read back equals its line")

        rows = json.loads(pg.psql("SELECT json_agg(s ORDER BY upstream, model) FROM tokentap_summary s"))
        exact = {(r["upstream"], r["model"]): r for r in json.loads(pg.psql(
            "SELECT json_agg(x) FROM (SELECT upstream, model, "
            "percentile_cont(ARRAY[0.5, 0.9, 0.95, 0.99]) WITHIN GROUP (ORDER BY ttft_ms::real) "
            "FILTER (WHERE NOT is_error) AS ttft, "
            "percentile_cont(ARRAY[0.5, 0.9, 0.95, 0.99]) WITHIN GROUP (ORDER BY itl_ms::real) "
            "FILTER (WHERE NOT is_error) AS itl "
            "FROM tokentap_requests GROUP BY upstream, model) x"))}
    finally:
        pg.stop()

    t.eq([(r["upstream"], r["model"], r["instances"]) for r in rows],
         [("canary", "model-a", 1), ("canary", "model-b", 1),
          ("primary", "model-a", 2), ("primary", "model-b", 2)], "groups of the view")
    files = [a, b, c]
    for r in rows:
        key = (r["upstream"], r["model"])
        rep = report(t, files, *key)
        t.eq(r["requests"] - r["errors"], rep["request_count"]["avg"], f"{key}: valid requests")
        t.eq(r["errors"], rep["error_request_count"]["avg"], f"{key}: errors")
        t.check(r["errors"] > 0 and r["good_requests"] > 0 and
                r["good_requests"] < r["requests"] - r["errors"],
                f"{key}: errors, good and not-good requests all present ({r})")
        for metric, col, ex in (("time_to_first_token", "ttft", "ttft"),
                                ("inter_token_latency", "itl", "itl")):
            for i, p in enumerate(PCTS):
                want = rep[metric][p]
                # the report keeps exact values as float32 (metrics/report/report_set.h):
                # on those, percentile_cont and the report agree exactly
                t.check(close(exact[key][ex][i], want, SAME),
                        f"{key}: {metric} {p} on float32 values: {exact[key][ex][i]} vs {want}")
                t.check(close(r[f"{col}_{p}_ms"], want),
                        f"{key}: {metric} {p}: view {r[f'{col}_{p}_ms']} vs report {want}")
        for col, field in (("goodput_rps", "goodput"), ("good_request_fraction",
                                                         "good_request_fraction")):
            t.check(close(r[col], rep[field]["avg"], SAME),
                    f"{key}: {field}: view {r[col]} vs report {rep[field]['avg']}")
