"""tokentap_proxy_delay_seconds: the proxy measures what it adds itself
(upstream read -> client socket for responses, client read -> upstream
socket for requests)."""
import re

import harness
from harness import timeout


def scrape(px):
    r = harness.http(px.admin_port, "GET", "/metrics")
    return r.body.decode()


def count(text, direction):
    m = re.search(r'^tokentap_proxy_delay_seconds_count\{direction="%s"\} (\d+)$' % direction,
                  text, re.M)
    return int(m.group(1)) if m else None


@timeout(30)
def test_proxy_delay_histogram_counts_every_hand_off(t):
    """one stream of 20 token events 25 ms apart: a response hand-off per
    read of the upstream (events that arrive together share one; at least
    half of them come alone even on a loaded machine), at least one request
    hand-off; buckets cumulative and the +Inf bucket equal to the count;
    most hand-offs under 1 ms on loopback"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto")
    before = scrape(px)
    t.eq(count(before, "response"), 0, "response hand-offs before any request")
    r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 20, "gap_ms": 25}))
    t.eq(r.status, 200, "status")
    px.records(1)
    text = scrape(px)
    n_resp, n_req = count(text, "response"), count(text, "request")
    t.check(n_resp is not None and 10 <= n_resp <= 24, f"response hand-offs {n_resp}")
    t.check(n_req is not None and n_req >= 1, f"request hand-offs {n_req}")
    buckets = [(float(le) if le != "+Inf" else float("inf"), int(v)) for le, v in re.findall(
        r'^tokentap_proxy_delay_seconds_bucket\{direction="response",le="([^"]+)"\} (\d+)$',
        text, re.M)]
    t.check(all(b[1] <= c[1] for b, c in zip(buckets, buckets[1:])), "cumulative buckets")
    t.eq(buckets[-1][1], n_resp, "+Inf bucket equals the count")
    under_1ms = max(v for le, v in buckets if le <= 0.001 * t.slow)
    t.note(f"{n_resp} response hand-offs, {under_1ms} within 1 ms")
    t.check(under_1ms >= n_resp * 0.9, f"{under_1ms} of {n_resp} hand-offs within 1 ms")
