"""tokentap_proxy_delay_seconds: the proxy measures what it adds itself
(upstream read -> client socket for responses, client read -> upstream
socket for requests)."""
import re
import time

import harness
from harness import timeout


def scrape(px):
    r = harness.http(px.admin_port, "GET", "/metrics")
    return r.body.decode()


def total(text, direction):
    m = re.search(r'^tokentap_proxy_delay_seconds_sum\{direction="%s"\} (\S+)$' % direction,
                  text, re.M)
    return float(m.group(1)) if m else None


def count(text, direction):
    m = re.search(r'^tokentap_proxy_delay_seconds_count\{direction="%s"\} (\d+)$' % direction,
                  text, re.M)
    return int(m.group(1)) if m else None


@timeout(30)
def test_proxy_delay_histogram_counts_every_hand_off(t):
    """one stream of 20 token events 25 ms apart: a response hand-off per
    read of the upstream (events that arrive together share one; at least
    half of them come alone even on a loaded machine), at least one request
    hand-off; buckets cumulative and the +Inf bucket equal to the count.
    What each hand-off measures, without depending on the machine's speed:
    the hand-offs of one stream read as fast as it comes are handled one
    after the other by one worker and all lie between the client's request
    and the end of its response, so their sum cannot exceed that span; timed from any earlier stamp (the request, the previous event)
    the 20 delays would add up to several times it"""
    sim = t.sim()
    px = t.proxy(sim.url, admin="auto")
    before = scrape(px)
    t.eq(count(before, "response"), 0, "response hand-offs before any request")
    t0 = time.monotonic()
    r = px.post("/v1/chat/completions", harness.chat_body({"tokens": 20, "gap_ms": 25}))
    span = time.monotonic() - t0
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
    s_resp, s_req = total(text, "response"), total(text, "request")
    t.note(f"{n_resp} response hand-offs, {s_resp * 1e3:.3f} ms in all; the exchange took "
           f"{span * 1e3:.1f} ms")
    t.check(s_resp is not None and 0 < s_resp <= span,
            f"response hand-offs add up to {s_resp} s, more than the exchange's {span:.4f} s")
    t.check(s_req is not None and 0 < s_req <= span,
            f"request hand-offs add up to {s_req} s, more than the exchange's {span:.4f} s")
