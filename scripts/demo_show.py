#!/usr/bin/env python3
"""Readable views for the demo: `records FILE` (one line per record) and
`stats` (the /stats JSON on stdin, one line per window)."""
import json
import sys


def ms(m, k):
    v = m.get(k, {}).get("value")
    return "-" if v is None else f"{v:.1f}"


def records(path):
    print(f"   {'api':<18} {'model':<14} {'st':>3} {'TTFT':>7} {'TTFO':>7} {'ITL':>6} "
          f"{'latency':>8} {'OSL':>4} {'reas':>4} {'src':<14} {'good':<5} error")
    for line in open(path):
        r = json.loads(line)
        md, m = r["metadata"], r["metrics"]
        err = r.get("error") or {}
        good = md.get("slo", {}).get("good")
        osl = m.get("output_sequence_length", {}).get("value", "-")
        reas = m.get("reasoning_token_count", {}).get("value", "-")
        print(f"   {md['api']:<18} {str(md.get('model') or '-')[:14]:<14} {md['status']:>3} "
              f"{ms(m, 'time_to_first_token'):>7} {ms(m, 'time_to_first_output_token'):>7} "
              f"{ms(m, 'inter_token_latency'):>6} {ms(m, 'request_latency'):>8} {osl!s:>4} "
              f"{reas!s:>4} {str(md.get('token_count_source') or '-'):<14} {str(good):<5} "
              f"{err.get('type', '')}")
    print("   (times in ms; TTFT counts reasoning, TTFO is the first answer token)")


def stats():
    s = json.load(sys.stdin)
    wins = s.get("windows", {})

    def fmt(v, f):
        return "-" if v is None else format(v, f)

    print(f"   {'window':<7} {'requests':>8} {'errors':>6} {'req/s':>7} {'goodput':>8} "
          f"{'good frac':>9}   {'TTFT p50/p99 ms':>15}   {'ITL p50/p99 ms':>14}")
    for name in ("1m", "5m", "1h", "total"):
        w = wins.get(name)
        if not w:
            continue
        m = w.get("metrics", {})

        def pp(tag):
            x = m.get(tag) or {}
            return "-" if not x.get("count") else f"{x['p50']:.1f}/{x['p99']:.1f}"

        print(f"   {name:<7} {w['requests']['total']:>8} {w['requests']['error']:>6} "
              f"{fmt(w.get('request_throughput'), '.2f'):>7} {fmt(w.get('goodput'), '.2f'):>8} "
              f"{fmt(w.get('good_request_fraction'), '.2f'):>9}   "
              f"{pp('time_to_first_token'):>15}   {pp('inter_token_latency'):>14}")


if __name__ == "__main__":
    if sys.argv[1] == "records":
        records(sys.argv[2])
    else:
        stats()
