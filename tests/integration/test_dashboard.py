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


# the page's formatting (proxy/server/dashboard.html fmtPct / fmtMs), mirrored
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


# the paired comparison's formatting (proxy/server/dashboard.html fmtSigned,
# fmtSignedPct, verdict), mirrored
def fmt_amount(a, unit):
    if unit == "ms":
        return fmt_ms(a)
    txt = str(int(a)) if float(a).is_integer() else js_fixed(a, 0) if a >= 100 else js_fixed(a, 1)
    return txt + (" " + unit if unit else "")


def fmt_signed(v, unit):
    if v is None:
        return "–"
    if v == 0:
        return fmt_amount(0, unit)
    return ("+" if v > 0 else "−") + fmt_amount(abs(v), unit)


def fmt_signed_pct(x):
    t = js_fixed(abs(x) * 100, 1)
    return ("" if float(t) == 0 else "+" if x > 0 else "−") + t + "%"


def better_way(tag, unit):
    if "throughput" in tag or "per_second" in tag or "/s" in unit:
        return 1
    if unit == "ms" or "latency" in tag or "time_to" in tag:
        return -1
    return 0


def verdict(tag, d):
    """(words, row class): coloured only when the interval excludes 0"""
    if "ci95_low" not in d:
        return "too few pairs for an interval", "dim"
    if d["ci95_low"] <= 0 <= d["ci95_high"]:
        return "no clear difference", "dim"
    up, way = d["ci95_low"] > 0, better_way(tag, d["unit"])
    if way == 0:
        return ("more" if up else "fewer"), ""
    better = up == (way > 0)
    word = ("faster" if better else "slower") if way < 0 else ("higher" if better else "lower")
    return word, "good" if better else "bad"


def check_comparison(t, b, name, stats, win):
    """the shadow's comparison, as people read a paired comparison: for the
    window chosen at the top, one row per metric with the median
    difference, its 95 % interval, the change relative to the primary's
    p50 and a colour by direction; fractions as percentages; no raw keys"""
    cw_name = win if win in ("1m", "5m", "1h") else "1h"
    cw = stats["comparisons"][name]["windows"][cw_name]
    card = f".up[data-upstream=\"{name}\"]"
    t.eq(b.eval(f"document.querySelectorAll('{card} table.cmp').length"), 1,
         f"one comparison table on {name}'s column (window {win})")
    t.eq(b.eval(f"document.querySelector('{card} h3[data-cmp-window]').dataset.cmpWindow"), cw_name,
         f"the comparison follows the window selector ({win})")
    text = b.eval("document.body.innerText")
    for raw in ("ci95_low", "ci95_high", "difference.", "shadow_error_fraction",
                "finish_reason_agreement", "shadow_dropped_fraction"):
        t.check(raw not in text, f"raw /stats key {raw!r} shown on the page")
    got = shown_values(b)
    k = f"{name}|{cw_name}|cmp."
    want = {k + "pairs": str(cw["pairs"]), k + "both_ok": str(cw["both_ok"])}
    for f in ("finish_reason_agreement", "shadow_error_fraction", "shadow_dropped_fraction"):
        want[k + f] = fmt_pct(cw[f])
        t.check(want[k + f].endswith("%") or cw[f] is None, f"{f} as a percentage")
    primary = stats.get("upstreams", {}).get("primary", {"windows": stats["windows"]})
    pm = primary["windows"][cw_name]["metrics"]
    rows = b.eval(f"[...document.querySelectorAll('{card} table.cmp tr[data-metric]')]"
                  ".map(r => [r.dataset.metric, r.className, r.cells[0].textContent])")
    tags = [tag for tag, d in cw["difference"].items() if d["count"]]
    t.eq([r[0] for r in rows], tags, "one comparison row per metric with pairs")
    t.check(len(rows) >= 1, "the comparison has rows")
    for (tag, cls, label), d in zip(rows, (cw["difference"][x] for x in tags)):
        t.check("_" not in label, f"metric shown by a readable name: {label!r}")
        want[k + tag + ".median"] = fmt_signed(d["median"], d["unit"])
        want[k + tag + ".interval"] = "–" if "ci95_low" not in d else \
            fmt_signed(d["ci95_low"], d["unit"]) + " … " + fmt_signed(d["ci95_high"], d["unit"])
        base = (pm.get(tag) or {}).get("p50")
        want[k + tag + ".relative"] = fmt_signed_pct(d["median"] / base) if base else "–"
        want[k + tag + ".count"] = str(d["count"])
        word, wcls = verdict(tag, d)
        want[k + tag + ".verdict"] = word
        t.eq(cls, wcls, f"colour of the {tag} row")
    for key, v in want.items():
        t.eq(got.get(key), {v}, f"comparison value {key}")


def parse_tick(text):
    """a log-axis tick label back to its value (ms, or tokens)"""
    num, _, unit = text.partition(" ")
    if num.endswith("k"):
        return float(num[:-1]) * 1000
    return float(num) * {"": 1, "ms": 1, "s": 1000, "µs": 0.001}[unit]


def check_layout(t, b):
    """what a two-column page got wrong: titles run together, labels cut
    at the chart's edge or on top of each other, a log axis labelled 0,
    headings saying a word twice"""
    heads = b.eval("[...document.querySelectorAll('h1, h2, h3')].map(e => e.innerText)")
    import re
    for h in heads:
        t.check(not re.search(r"\b(\w+)\s+\1\b", h, re.I), f"a heading repeats a word: {h!r}")
    titles = b.eval("[...document.querySelectorAll('.dist .t')].map(e => [e.textContent,"
                    " e.children[0].getBoundingClientRect().toJSON(), e.children[1].getBoundingClientRect().toJSON()])")
    t.check(titles, "distribution titles")
    for txt, nm, ps in titles:
        t.check(re.match(r"^(TTFT|TTFO|ITL|latency|client TTFT|client latency)\s+p50 ", txt),
                f"title runs together: {txt!r}")
        t.check(nm["right"] + 4 <= ps["left"] or ps["top"] >= nm["bottom"] - 1,
                f"name and percentiles apart on screen: {txt!r}")
    charts = b.eval("""[...document.querySelectorAll('.up svg')].map(g => {
        const r = g.getBoundingClientRect();
        return {box: r.toJSON(), map: !!g.closest('[data-map]'),
                texts: [...g.querySelectorAll('text')].map(x => ({t: x.textContent, c: x.getAttribute('class') || '',
                        v: x.dataset.v, r: x.getBoundingClientRect().toJSON()}))}; })""")
    t.check(len(charts) >= 4, f"charts on the page: {len(charts)}")
    for ch in charts:
        box = ch["box"]
        for x in ch["texts"]:
            r = x["r"]
            t.check(r["left"] >= box["left"] - 0.5 and r["right"] <= box["right"] + 0.5
                    and r["top"] >= box["top"] - 0.5 and r["bottom"] <= box["bottom"] + 0.5,
                    f"label {x['t']!r} inside its chart ({r} in {box})")
        ticks = [x for x in ch["texts"] if "tick" in x["c"].split()]
        t.check(len(ticks) >= 2, f"a log axis with at least two labelled ticks: {[x['t'] for x in ticks]}")
        for x in ticks:
            t.check(not re.match(r"^[0.]+( |$)", x["t"]), f"a log-axis tick labelled zero: {x['t']!r}")
            v = float(x["v"])
            t.check(v > 0 and abs(parse_tick(x["t"]) - v) <= 0.006 * v,
                    f"tick label {x['t']!r} reads its value {v}")
        marks = [x for x in ch["texts"] if "lbl" in x["c"].split()]
        for i, p in enumerate(marks):
            for q in marks[i + 1:]:
                a, c = p["r"], q["r"]
                t.check(a["right"] <= c["left"] or c["right"] <= a["left"] or
                        a["bottom"] <= c["top"] or c["bottom"] <= a["top"],
                        f"labels {p['t']!r} and {q['t']!r} overlap")


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
        check_layout(t, b)

        # the timeline: one row per recent request, the slowest list, in order
        ids = b.eval("[...document.querySelectorAll('#rows .row')].map(e => e.dataset.id)")
        t.eq(ids, [e["record"]["metadata"]["x_request_id"] for e in recent["requests"]],
             "timeline rows (newest first)")
        slow = b.eval("[...document.querySelectorAll('#slow .row')].map(e => e.dataset.id)")
        t.eq(slow, [e["record"]["metadata"]["x_request_id"] for e in recent["slowest"]],
             "slowest rows")
        # the client's clock beside tokentap's: a delivery segment where the
        # client acknowledged the first token, and its TTFT in the label
        dl = b.eval("[...document.querySelectorAll('#rows .row')].map(e => [e.dataset.id,"
                    " [...e.querySelectorAll('rect title')].some(x => x.textContent.startsWith('delivery of the first token')),"
                    " e.querySelector('.lab').textContent])")
        acked = {e["record"]["metadata"]["x_request_id"]: e["record"] for e in recent["requests"]}
        n_dl = 0
        for rid, seg, lab in dl:
            rec = acked[rid]
            has = "first_token_acked" in rec["metadata"]["timeline_ns"] and \
                  "first_token" in rec["metadata"]["timeline_ns"]
            t.eq(seg, has, f"{rid}: delivery segment shown")
            if "client_time_to_first_token" in rec["metrics"]:
                t.check("client " in lab, f"{rid}: the client's TTFT in the row label: {lab!r}")
            n_dl += has
        t.check(n_dl > 0, "no request with a delivery segment")
        cd = b.eval("(() => { const d = document.querySelector('.dist[data-dist=client_time_to_first_token]');"
                    " return d ? d.textContent : null; })()")
        t.check(cd and "n=0" not in cd, f"the client TTFT distribution: {cd!r}")
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
        check_layout(t, b)

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
    # the comparison as /stats has it (docs/shadow.md), with one row of each
    # kind: worse, better, no clear difference, too few pairs for an interval
    def cmp_window(pairs):
        return {"pairs": pairs, "both_ok": pairs - 1, "shadow_error_fraction": 1 / pairs,
                "shadow_dropped_fraction": 0, "finish_reason_agreement": 0.992,
                "exact_match_fraction": None, "difference": {
                    "time_to_first_token": {"unit": "ms", "count": pairs - 1, "median": 41.8,
                                            "ci95_low": 39.2, "ci95_high": 44.1},
                    "time_to_first_output_token": {"unit": "ms", "count": 0},
                    "inter_token_latency": {"unit": "ms", "count": pairs - 1, "median": -2.5,
                                            "ci95_low": -3.0, "ci95_high": -1.0},
                    "request_latency": {"unit": "ms", "count": pairs - 1, "median": 5,
                                        "ci95_low": -1.5, "ci95_high": 10.25},
                    "output_sequence_length": {"unit": "tokens", "count": 3, "median": 1}}}
    stats["comparisons"] = {"shadow-a": {"primary": "primary", "windows": {
        "1m": cmp_window(20), "5m": cmp_window(50), "1h": cmp_window(400)}}}
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
                      " e.querySelector('h2').innerText])")
        t.eq(cols, [["primary", "primary"], ["shadow-a", "shadow-a shadow"]],
             "upstream columns (the role only where the name does not say it)")
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
        check_layout(t, b)
        check_comparison(t, b, "shadow-a", stats, "1m")
        # the rows read as a person reads them, whatever the mirror says
        rows = b.eval("[...document.querySelectorAll('.up[data-upstream=\"shadow-a\"] table.cmp tr')]"
                      ".map(r => [...r.cells].map(c => c.textContent))")
        p50 = stats["windows"]["1m"]["metrics"]["time_to_first_token"]["p50"]
        t.eq(rows[1][:3] + rows[1][4:], ["TTFT", "+41.8 ms", "+39.2 ms … +44.1 ms", "19", "slower"],
             "the TTFT row")
        t.eq(rows[1][3], fmt_signed_pct(41.8 / p50), "TTFT relative to the primary's p50")
        t.check(rows[1][3].startswith("+") and rows[1][3].endswith("%"), f"relative change {rows[1][3]!r}")
        t.eq([r[0] for r in rows[2:]], ["ITL", "request latency", "output tokens"],
             "one row per metric with pairs (TTFO has none)")
        t.eq([rows[2][1], rows[2][5]], ["−2.50 ms", "faster"], "the ITL row")
        t.eq(rows[3][5], "no clear difference", "an interval across 0")
        t.eq([rows[4][1], rows[4][2], rows[4][5]], ["+1 tokens", "–", "too few pairs for an interval"],
             "too few pairs for an interval")
        colours = b.eval("[...document.querySelectorAll('.up[data-upstream=\"shadow-a\"] table.cmp tr[data-metric]')]"
                         ".map(r => getComputedStyle(r.cells[1]).color)")
        red, green = b.eval("(() => { const s = getComputedStyle(document.documentElement);"
                            " const c = (v) => { const e = document.createElement('i'); e.style.color = s.getPropertyValue(v);"
                            " document.body.appendChild(e); const r = getComputedStyle(e).color; e.remove(); return r; };"
                            " return [c('--bad'), c('--good')]; })()")
        t.eq(colours[:2], [red, green], "worse in red, better in green")
        summary = b.eval("document.querySelector('.up[data-upstream=\"shadow-a\"] .cmpsum').innerText")
        t.check("finish reasons agree 99.2%" in summary and "shadow errors 5.0%" in summary
                and "dropped 0.0%" in summary, f"fractions as percentages: {summary!r}")
        t.eq(b.eval("document.querySelectorAll('.up[data-upstream=\"primary\"] table.cmp').length"), 0,
             "no comparison on the primary")
        # one window selector for the whole page, the comparison included
        for win, pairs in (("5m", "50"), ("total", "400")):
            b.eval(f"(() => {{ const s = document.getElementById('win'); s.value = '{win}';"
                   " s.dispatchEvent(new Event('change')); })()")
            check_comparison(t, b, "shadow-a", stats, win)
            cw = "1h" if win == "total" else win
            t.eq(shown_values(b).get(f"shadow-a|{cw}|cmp.pairs"), {pairs}, f"pairs in {win}")
            t.eq(b.eval("document.querySelectorAll('[data-k*=\"|cmp.pairs\"]').length"), 1,
                 f"one comparison shown at a time ({win})")
        b.eval("(() => { const s = document.getElementById('win'); s.value = '1m';"
               " s.dispatchEvent(new Event('change')); })()")
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
                      " e.querySelector('h2').innerText])")
        t.eq(cols, [["primary", "primary"], ["cand", "cand shadow"]], "upstream columns")
        # compare with the /stats the page drew (its poll may be newer than ours)
        shown = json.loads(b.eval("JSON.stringify(last)"))
        check_values(t, b, {name: u["windows"] for name, u in shown["upstreams"].items()})
        check_layout(t, b)
        check_comparison(t, b, "cand", shown, "1m")
        ttft = shown["comparisons"]["cand"]["windows"]["1m"]["difference"]["time_to_first_token"]
        t.check("ci95_low" in ttft and ttft["ci95_low"] > 0,
                f"the twice-as-slow candidate's TTFT is clearly worse: {ttft}")
        t.eq(b.eval("document.querySelector('.up[data-upstream=\"cand\"] tr[data-metric=time_to_first_token]').className"),
             "bad", "a slower candidate's TTFT row is red")
        b.screenshot(os.path.join(t.tmp, "dashboard-real-shadow.png"), full=False)
        errors = [e for e in b.events if e.get("method") == "Runtime.exceptionThrown"]
        t.eq(errors, [], "script errors on the page")
    finally:
        b.close()
    t.note("screenshot: " + os.path.join(t.tmp, "dashboard-real-shadow.png"))
