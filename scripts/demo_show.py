#!/usr/bin/env python3
"""Readable views for the demo: `records FILE` (one line per record),
`stats` (the /stats JSON on stdin, one line per window) and `compare` (the
shadow comparison of /stats on stdin)."""
import json
import sys


def ms(m, k):
    v = m.get(k, {}).get("value")
    return "-" if v is None else f"{v:.1f}"


def records(path):
    print(f"   {'leg':<9} {'api':<18} {'model':<14} {'st':>3} {'TTFT':>7} {'TTFO':>7} {'ITL':>6} "
          f"{'latency':>8} {'OSL':>4} {'reas':>4} {'src':<14} {'good':<5} error")
    for line in open(path):
        r = json.loads(line)
        md, m = r["metadata"], r["metrics"]
        err = r.get("error") or {}
        good = md.get("slo", {}).get("good")
        osl = m.get("output_sequence_length", {}).get("value", "-")
        reas = m.get("reasoning_token_count", {}).get("value", "-")
        print(f"   {md.get('upstream', '-')[:9]:<9} {md['api']:<18} "
              f"{str(md.get('model') or '-')[:14]:<14} {md['status']:>3} "
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


def compare():
    s = json.load(sys.stdin)
    for name, c in (s.get("comparisons") or {}).items():
        w = c["windows"]["1m"]
        print(f"   {name} vs primary: {w['pairs']} pairs, {w['both_ok']} both ok; "
              f"finish reasons agree {w['finish_reason_agreement']}, "
              f"shadow errors {w['shadow_error_fraction']}, dropped {w['shadow_dropped_fraction']}")
        print(f"   {'metric (shadow - primary)':<28} {'pairs':>5} {'median':>9} {'95% interval':>20}")
        for tag, d in w["difference"].items():
            if not d.get("count"):
                continue
            ci = (f"{d['ci95_low']:+.1f} .. {d['ci95_high']:+.1f}"
                  if "ci95_low" in d else "(too few pairs)")
            print(f"   {tag:<28} {d['count']:>5} {d['median']:>+9.1f} {ci:>20}  {d['unit']}")


if __name__ == "__main__":
    if sys.argv[1] == "records":
        records(sys.argv[2])
    elif sys.argv[1] == "compare":
        compare()
    else:
        stats()
