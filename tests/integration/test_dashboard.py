"""
The live dashboard (GET /dashboard on the admin listener) in a real browser:
headless Chromium, driven over the DevTools protocol on a pipe (standard
library only), loads the page against tokentap with simulator traffic.  The
numbers the page shows are compared with /stats, a timeline row is clicked
and its record compared, the filters are used, every request the page made
is listed (only the page and GET stats, on the admin origin), and
screenshots are saved into the test's directory (dashboard-laptop.png: the
1440x900 viewport, dashboard-laptop-full.png, dashboard-wall.png: 2560 wide;
also copied into $TT_DASHBOARD_SHOTS when set).
"""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

import harness

SLO = "time_to_first_token:80 inter_token_latency:20"
SECRET_KEY = "sk-dashboard-SECRET-4711"
SECRET_PROMPT = "PROMPT-TEXT-that-must-not-leave-the-proxy"
XSS_MODEL = '<img src=x onerror="document.body.dataset.pwned=1">'



def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class Browser:
    """Chromium with --remote-debugging-pipe: commands on fd 3, replies on fd 4,
    each message JSON terminated by NUL."""

    def __init__(self, t, width, height):
        binary = chromium_binary()
        if binary is None:
            raise harness.Skip("chromium not installed (scripts/deps.sh installs it)")
        self.t = t
        self.profile = tempfile.mkdtemp(prefix="chromium-", dir=t.tmp)
        cmd_r, self.cmd_w = os.pipe()
        self.resp_r, resp_w = os.pipe()

        self.log = open(os.path.join(t.tmp, "chromium.stderr"), "wb")
        args = ["--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--disable-extensions",
                "--hide-scrollbars", "--mute-audio",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
                "--remote-debugging-pipe", "about:blank"]
        # the pipe ends become fds 3 and 4 in chromium; copies above 10
        # first, so the dup2s cannot clobber each other.  Python opens every
        # other fd close-on-exec, so nothing else is inherited.
        hi_r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10)
        hi_w = fcntl.fcntl(resp_w, fcntl.F_DUPFD_CLOEXEC, 10)

        def child_fds():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.p = subprocess.Popen([binary] + args, stdin=subprocess.DEVNULL,
                                  stdout=self.log, stderr=self.log, close_fds=False,
                                  preexec_fn=child_fds, start_new_session=True)
        os.close(hi_r)
        os.close(hi_w)
        os.close(cmd_r)
        os.close(resp_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def _read_msg(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise harness.Failure("chromium did not answer in time")
            r, _, _ = select.select([self.resp_r], [], [], left)
            if not r:
                continue
            chunk = os.read(self.resp_r, 1 << 16)
            if not chunk:
                raise harness.Failure("chromium closed the DevTools pipe (see chromium.stderr)")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout * self.t.slow
        while True:
            m = self._read_msg(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise harness.Failure(f"DevTools {method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def attach(self):
        tid = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": tid, "flatten": True}, session=False)["sessionId"]
        for dom in ("Page.enable", "Runtime.enable", "Network.enable", "Log.enable"):
            self.call(dom)

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise harness.Failure(f"page script error in {expr[:60]!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expr, what, timeout=20):
        """poll a page expression until it is truthy (the page's own readiness marker)"""
        end = time.monotonic() + timeout * self.t.slow
        while True:
            v = self.eval(expr)
            if v:
                return v
            if time.monotonic() > end:
                raise harness.Failure(f"timed out waiting for {what}")
            time.sleep(0.05)

    def screenshot(self, path, full=True):
        r = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": full})
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    def close(self):
        try:
            self.call("Browser.close", session=False, timeout=10)
        except harness.Failure:
            pass
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, 9)
            self.p.wait()
        os.close(self.cmd_w)
        os.close(self.resp_r)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


# the page's formatting (proxy/dashboard.html fmtPct / fmtMs), mirrored
def js_fixed(v, d):
    # Number.prototype.toFixed rounds the exact binary value half up
    from decimal import Decimal, ROUND_HALF_UP
    return str(Decimal(v).quantize(Decimal(1).scaleb(-d), rounding=ROUND_HALF_UP))


def fmt_pct(x):
    return "–" if x is None else js_fixed(x * 100, 1) + "%"


def fmt_ms(v):
    if v is None:
        return "–"
    if v >= 10000:
        return js_fixed(v / 1000, 1) + " s"
    if v >= 100:
        return js_fixed(v, 0) + " ms"
    if v >= 10:
        return js_fixed(v, 1) + " ms"
    return js_fixed(v, 2) + " ms"


def shown_values(b):
    """{data-k: {texts}} of every value the page marks for comparison"""
    got = {}
    for k, v in b.eval("[...document.querySelectorAll('[data-k]')].map(e => [e.dataset.k, e.textContent])"):
        got.setdefault(k, set()).add(v)
    return got


def check_values(t, b, windows_of):
    """the page shows, per upstream, exactly what its /stats windows say"""
    got = shown_values(b)
    want = {}
    for name, ws in windows_of.items():
        for w in ("1m", "5m", "1h"):
            k = f"{name}|{w}|"
            want[k + "slo_attainment"] = fmt_pct(ws[w]["slo_attainment"])
            for f in ("total", "ok", "error", "cancelled"):
                want[k + "requests." + f] = str(ws[w]["requests"][f])
            want[k + "good_requests"] = str(ws[w]["good_requests"])
            for kind, c in ws[w]["errors"].items():
                want[k + "errors." + kind] = str(c)
        for tag in ("time_to_first_token", "time_to_first_output_token",
                    "inter_token_latency", "request_latency"):
            m = ws["1m"]["metrics"][tag]
            for p in ("p50", "p90", "p99"):
                want[f"{name}|1m|{tag}.{p}"] = fmt_ms(m.get(p))
            want[f"{name}|1m|{tag}.count"] = str(m["count"])
    for k, v in want.items():
        t.eq(got.get(k), {v}, f"page value {k}")


def traffic(px):
    """a mix: good and slow streams, reasoning, two models, three APIs,
    an upstream error and a truncated stream; secrets in the key and the
    prompt that must never reach the page"""
    hdr = [("Authorization", f"Bearer {SECRET_KEY}")]
    def chat(model, sim, path="/v1/chat/completions"):
        body = {"model": model, "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": SECRET_PROMPT}], "sim": sim}
        return px.post(path, body, hdr)
    n = 0
    for i in range(6):
        chat("dash-fast", {"ttft_ms": 20 + 3 * i, "tokens": 8 + i, "gap_ms": 4,
                           "prompt_tokens": 40 + 30 * i})
        n += 1
    for i in range(3):
        chat("dash-think", {"ttft_ms": 120 + 20 * i, "reasoning_tokens": 4, "tokens": 6,
                            "gap_ms": 8, "prompt_tokens": 500 * (i + 1)})
        n += 1
    r = chat("dash-fast", {"ttft_ms": 20, "tokens": 5, "gap_ms": 4},
             f"/v1/chat/completions?key={SECRET_KEY}")
    n += 1
    px.post("/v1/messages", {"model": "dash-claude", "stream": True, "max_tokens": 64,
                             "messages": [{"role": "user", "content": SECRET_PROMPT}],
                             "sim": {"ttft_ms": 30, "reasoning_tokens": 2, "tokens": 5, "gap_ms": 5}}, hdr)
    n += 1
    chat("dash-fast", {"status": 503})
    n += 1
    chat(XSS_MODEL, {"ttft_ms": 10, "tokens": 2, "gap_ms": 1})    # client input, shown as text
    n += 1
    chat("dash-fast", {"ttft_ms": 20, "tokens": 30, "gap_ms": 3, "truncate_after": 4})
    n += 1
    return n


@harness.timeout(120)
def test_dashboard_in_headless_chromium_shows_what_stats_says(t):
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--goodput", SLO])
    n = traffic(px)
    px.records(n)            # every request finished and was observed
    admin = f"http://127.0.0.1:{px.admin_port}"

    r = harness.http(px.admin_port, "GET", "/dashboard")
    t.eq(r.status, 200, "GET /dashboard status")
    t.check(r.header("Content-Type", "").startswith("text/html"), "dashboard is HTML")
    csp = r.header("Content-Security-Policy", "")
    t.check("default-src 'none'" in csp and "connect-src 'self'" in csp,
            f"the page may load nothing from elsewhere (CSP {csp!r})")
    page = r.body.decode()
    for bad in ("<script src", "<link", "http://", "https://", "@import"):
        t.check(bad not in page, f"the page references an external asset ({bad!r})")

    st = harness.http(px.admin_port, "GET", "/stats")
    t.eq(st.status, 200, "GET /stats status")
    stats_text = st.body.decode()
    for secret in (SECRET_KEY, SECRET_PROMPT):
        t.check(secret not in stats_text, f"/stats leaks {secret!r}")
    stats = json.loads(stats_text)
    recent = stats["recent"]
    t.eq(len(recent["requests"]), n, "requests in the ring")
    t.check(all(len(e["token_us"]) == min(e["token_events"], recent["token_cap"])
                for e in recent["requests"]), "token offsets kept per request")
    t.check(any("key=REDACTED" in e["record"]["metadata"]["path"] for e in recent["requests"]),
            "the secret query parameter is redacted in the ring")

    b = Browser(t, 1440, 900)
    try:
        b.attach()
        b.call("Page.navigate", {"url": admin + "/dashboard"})
        b.wait_for("document.body && Number(document.body.dataset.updates) >= 1",
                   "the page's first render")

        # every value the page marks for comparison, against /stats
        t.check(stats["windows"]["1m"]["errors"], "the traffic produced errors by type")
        check_values(t, b, {"primary": stats["windows"]})

        # the timeline: one row per recent request, the slowest list, in order
        ids = b.eval("[...document.querySelectorAll('#rows .row')].map(e => e.dataset.id)")
        t.eq(ids, [e["record"]["metadata"]["x_request_id"] for e in recent["requests"]],
             "timeline rows (newest first)")
        slow = b.eval("[...document.querySelectorAll('#slow .row')].map(e => e.dataset.id)")
        t.eq(slow, [e["record"]["metadata"]["x_request_id"] for e in recent["slowest"]],
             "slowest rows")
        ticks = b.eval("[...document.querySelectorAll('#rows .row')].map(e => e.querySelectorAll('line').length)")
        for e, nt in zip(recent["requests"], ticks):
            t.check(nt >= len(e["token_us"]), f"a tick per token event ({nt} < {len(e['token_us'])})")
        points = b.eval("document.querySelectorAll('[data-map=primary] circle').length")
        t.eq(points, sum(1 for e in recent["requests"]
                         if "output_sequence_length" in e["record"]["metrics"]), "workload map points")

        # a real click on the slowest request's row shows its record
        target = recent["slowest"][0]
        rid = target["record"]["metadata"]["x_request_id"]
        box = b.eval(f"(() => {{ const e = document.querySelector('#slow .row[data-id=\"{rid}\"]');"
                     " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                     " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for typ in ("mousePressed", "mouseReleased"):
            b.call("Input.dispatchMouseEvent", {"type": typ, "x": box[0], "y": box[1],
                                                "button": "left", "clickCount": 1})
        txt = b.wait_for("!document.getElementById('record').hidden && document.getElementById('record').textContent",
                         "the record panel")
        shown_rec = json.loads(txt.split("\n\ntoken events:")[0])
        t.eq(shown_rec, target["record"], "record shown for the clicked row")

        b.screenshot(os.path.join(t.tmp, "dashboard-laptop.png"), full=False)
        b.screenshot(os.path.join(t.tmp, "dashboard-laptop-full.png"))

        # the model filter narrows the timeline
        b.eval("(() => { const s = document.getElementById('fmodel'); s.value = 'dash-think';"
               " s.dispatchEvent(new Event('change')); })()")
        models = b.eval("[...document.querySelectorAll('#rows .row .lab')].map(e => e.textContent)")
        t.eq(len(models), sum(1 for e in recent["requests"]
                              if e["record"]["metadata"]["model"] == "dash-think"), "rows after the model filter")
        t.check(all("dash-think" in m for m in models), "only the filtered model is shown")
        b.eval("(() => { const s = document.getElementById('fmodel'); s.value = '';"
               " s.dispatchEvent(new Event('change')); })()")

        # a wall screen: wider, larger type; the page keeps polling
        b.call("Emulation.setDeviceMetricsOverride", {"width": 2560, "height": 1440,
                                                      "deviceScaleFactor": 1, "mobile": False})
        before = b.eval("Number(document.body.dataset.polls)")
        b.wait_for(f"Number(document.body.dataset.polls) > {before}", "another poll of /stats")
        b.screenshot(os.path.join(t.tmp, "dashboard-wall.png"))

        t.eq(b.eval("[document.body.dataset.pwned, document.querySelectorAll('img').length]"),
             [None, 0], "a model name is shown as text, never as markup")
        t.check(b.eval(f"document.body.textContent.includes({json.dumps(XSS_MODEL)})"),
                "the odd model name is shown as written")
        html = b.eval("document.documentElement.outerHTML")
        for secret in (SECRET_KEY, SECRET_PROMPT):
            t.check(secret not in html, f"the page shows {secret!r}")

        # what the page fetched: itself and /stats on the admin origin, nothing else
        urls = [e["params"]["request"]["url"] for e in b.events
                if e.get("method") == "Network.requestWillBeSent"]
        t.check(urls and urls[0] == admin + "/dashboard", f"first request is the page: {urls[:2]}")
        t.check(all(u in (admin + "/dashboard", admin + "/stats") for u in urls),
                f"the page fetched only itself and /stats: {sorted(set(urls))}")
        t.check(urls.count(admin + "/stats") >= 2, "the page polls /stats")
        errors = [e for e in b.events if e.get("method") == "Runtime.exceptionThrown"
                  or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
        t.eq(errors, [], "script errors or console errors on the page")
    finally:
        b.close()

    shots = [os.path.join(t.tmp, f) for f in ("dashboard-laptop.png", "dashboard-laptop-full.png",
                                              "dashboard-wall.png")]
    for s in shots:
        with open(s, "rb") as f:
            t.check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{s} is a PNG")
    dest = os.environ.get("TT_DASHBOARD_SHOTS")
    if dest:
        os.makedirs(dest, exist_ok=True)
        for s in shots:
            shutil.copy(s, dest)
    t.note("screenshots: " + ", ".join(shots))


class ShapeServer:
    """serves the dashboard page as tokentap sent it and a given /stats
    document, to show the page the shape /stats has with shadow upstreams"""

    def __init__(self, page, stats):
        import http.server
        import threading
        body = json.dumps(stats).encode()

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                data, ctype = (page, "text/html; charset=utf-8") if self.path == "/dashboard" \
                    else (body, "application/json") if self.path == "/stats" else (b"", "text/plain")
                self.send_response(200 if data else 404)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)   # bound and kept
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        self.th = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.th.start()

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


@harness.timeout(120)
def test_dashboard_shows_every_upstream_side_by_side(t):
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto", extra=["--goodput", SLO])
    n = traffic(px)
    px.records(n)
    page = harness.http(px.admin_port, "GET", "/dashboard").body
    stats = harness.http(px.admin_port, "GET", "/stats").json()

    # /stats as it is with a shadow leg: per-upstream windows, comparisons,
    # ring entries of both legs.  The shadow's figures are made different.
    shadow = json.loads(json.dumps(stats["windows"]))
    for w in shadow.values():
        w["slo_attainment"] = 0.5
        w["requests"] = {k: v + 100 for k, v in w["requests"].items()}
        w["good_requests"] = (w["good_requests"] or 0) + 3
        w["errors"] = {"upstream_timeout": 7}
        for m in w["metrics"].values():
            for p in ("p50", "p90", "p99"):
                if p in m:
                    m[p] = m[p] * 2 + 1
            m["buckets"] = [[b[0] * 2, b[1] * 2, b[2]] for b in m.get("buckets", [])]
    stats["upstreams"] = {"primary": {"role": "primary", "windows": stats["windows"]},
                          "shadow-a": {"role": "shadow", "windows": shadow}}
    stats["comparisons"] = {"shadow-a": {"windows": {"1m": {"pairs": 5,
                                                            "time_to_first_token": {"delta_p50": 12.5}}}}}
    for i, e in enumerate(stats["recent"]["requests"]):
        if i % 2:
            e["upstream"] = "shadow-a"
            e["record"]["metadata"]["upstream"] = "shadow-a"
            e["record"]["metadata"]["role"] = "shadow"

    srv = ShapeServer(page, stats)
    b = Browser(t, 1800, 1000)
    try:
        b.attach()
        b.call("Page.navigate", {"url": srv.url + "/dashboard"})
        b.wait_for("document.body && Number(document.body.dataset.updates) >= 1",
                   "the page's first render")
        cols = b.eval("[...document.querySelectorAll('.up')].map(e => [e.dataset.upstream,"
                      " e.querySelector('h2 .role').textContent])")
        t.eq(cols, [["primary", "primary"], ["shadow-a", "shadow"]], "upstream columns")
        tops = b.eval("[...document.querySelectorAll('.up')].map(e => Math.round(e.getBoundingClientRect().top))")
        t.eq(tops[0], tops[1], "the columns stand side by side")
        t.check(b.eval("[...document.querySelectorAll('.up')].every(c => [...c.querySelectorAll('svg')]"
                       ".every(g => g.getBoundingClientRect().right <= c.getBoundingClientRect().right + 1))"),
                "every chart fits inside its upstream's column")
        check_values(t, b, {"primary": stats["windows"], "shadow-a": shadow})
        for name in ("primary", "shadow-a"):
            pts = b.eval(f"document.querySelectorAll('[data-map=\"{name}\"] circle').length")
            t.eq(pts, sum(1 for e in stats["recent"]["requests"] if e["upstream"] == name
                          and "output_sequence_length" in e["record"]["metrics"]),
                 f"workload map points of {name}")
        cmp = b.eval("document.querySelector('.up[data-upstream=\"shadow-a\"] table.cmp').textContent")
        t.check("1m pairs5" in cmp and "time_to_first_token.delta_p50" in cmp and "12.500" in cmp,
                f"the comparison is shown: {cmp!r}")
        t.eq(b.eval("document.querySelectorAll('.up[data-upstream=\"primary\"] table.cmp').length"), 0,
             "no comparison on the primary")
        b.screenshot(os.path.join(t.tmp, "dashboard-shadow.png"), full=False)
        errors = [e for e in b.events if e.get("method") == "Runtime.exceptionThrown"]
        t.eq(errors, [], "script errors on the page")
    finally:
        b.close()
        srv.stop()
    shot = os.path.join(t.tmp, "dashboard-shadow.png")
    if os.environ.get("TT_DASHBOARD_SHOTS"):
        shutil.copy(shot, os.environ["TT_DASHBOARD_SHOTS"])
    t.note("screenshot: " + shot)


@harness.timeout(120)
def test_dashboard_with_a_real_shadow_shows_both_legs(t):
    """a real shadow (a second, slower simulator): the page has one column
    per upstream of /stats, each with that upstream's own numbers, and the
    live comparison on the shadow's column"""
    sim = t.sim()
    cand = t.sim(extra=["--latency-scale", "2"])
    px = t.proxy(sim.url, admin="auto",
                 extra=["--goodput", SLO, "--shadow", f"cand={cand.url}"])
    n = traffic(px)
    recs = px.records(2 * n, timeout=20 * t.slow)     # both legs of every request
    t.eq(sum(1 for r in recs if r["metadata"]["role"] == "shadow"), n, "shadow records")
    stats = harness.http(px.admin_port, "GET", "/stats").json()
    t.eq(sorted(stats["upstreams"]), ["cand", "primary"], "upstreams in /stats")
    b = Browser(t, 1800, 1000)
    try:
        b.attach()
        b.call("Page.navigate", {"url": f"http://127.0.0.1:{px.admin_port}/dashboard"})
        b.wait_for("document.body && Number(document.body.dataset.updates) >= 1",
                   "the page's first render")
        cols = b.eval("[...document.querySelectorAll('.up')].map(e => [e.dataset.upstream,"
                      " e.querySelector('h2 .role').textContent])")
        t.eq(cols, [["primary", "primary"], ["cand", "shadow"]], "upstream columns")
        check_values(t, b, {name: u["windows"] for name, u in stats["upstreams"].items()})
        cmp = b.eval("document.querySelector('.up[data-upstream=\"cand\"] table.cmp').textContent")
        t.check("pairs" in cmp and str(stats["comparisons"]["cand"]["windows"]["1m"]["pairs"]) in cmp,
                f"the comparison is shown: {cmp[:300]!r}")
        b.screenshot(os.path.join(t.tmp, "dashboard-real-shadow.png"), full=False)
        errors = [e for e in b.events if e.get("method") == "Runtime.exceptionThrown"]
        t.eq(errors, [], "script errors on the page")
    finally:
        b.close()
    t.note("screenshot: " + os.path.join(t.tmp, "dashboard-real-shadow.png"))
