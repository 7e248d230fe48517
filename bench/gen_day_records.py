#!/usr/bin/env python3
"""A day of synthetic tokentap records with a diurnal load pattern.

    python3 bench/gen_day_records.py OUT.jsonl [--seed 7] [--peak-rps 1.0]

Deterministic for a seed.  Arrivals are a Poisson process whose rate
follows the day: lowest at 03:00 UTC (8 % of the peak), highest at
15:00 UTC (--peak-rps).  Latency grows with load (queueing): TTFT and
ITL rise towards the peak, errors (HTTP 503 "overloaded") become more
likely there.  Every record carries an SLO verdict for
"ttft:800 itl:40" so `tokentap report OUT.jsonl --slice-duration 1h`
shows attainment dropping at the peak.  Records follow
tokentap.record/1 (SPEC section 7).
"""
import argparse
import json
import math
import random

DAY_START_NS = 1_767_225_600_000_000_000      # 2026-01-01T00:00:00Z
DAY_S = 86400


def load_at(t):
    """load 0..1 over the day: cosine between 03:00 (min) and 15:00 (max)"""
    return 0.5 - 0.5 * math.cos(2 * math.pi * (t - 3 * 3600) / DAY_S)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--peak-rps", type=float, default=1.0)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    floor = 0.08
    t, n = 0.0, 0
    with open(a.out, "w") as f:
        while True:
            # thinning: candidates at the peak rate, kept with rate(t)/peak
            t += rnd.expovariate(a.peak_rps)
            if t >= DAY_S:
                break
            ld = load_at(t)
            if rnd.random() > floor + (1 - floor) * ld:
                continue
            n += 1
            start = DAY_START_NS + int(t * 1e9)
            isl = max(16, int(rnd.lognormvariate(math.log(800), 0.6)))
            osl = max(2, int(rnd.lognormvariate(math.log(180), 0.7)))
            ttft = rnd.lognormvariate(math.log(180 + 700 * ld ** 3), 0.35)
            itl = rnd.lognormvariate(math.log(18 + 22 * ld ** 2), 0.15)
            latency = ttft + itl * (osl - 1)
            err = rnd.random() < 0.002 + 0.02 * ld ** 4
            meta = {"x_request_id": f"day-{n}", "request_start_ns": start,
                    "request_ack_ns": start + int(ttft * 0.9e6),
                    "request_end_ns": start + int(latency * 1e6),
                    "was_cancelled": False, "upstream": "primary",
                    "api": "openai.chat", "model": "m", "stream": True,
                    "method": "POST", "path": "/v1/chat/completions",
                    "status": 503 if err else 200,
                    "token_count_source": "usage"}
            metrics = {}
            if not err:
                metrics = {
                    "time_to_first_token": {"value": round(ttft, 3), "unit": "ms"},
                    "time_to_first_output_token": {"value": round(ttft, 3), "unit": "ms"},
                    "request_latency": {"value": round(latency, 3), "unit": "ms"},
                    "inter_token_latency": {"value": round(itl, 3), "unit": "ms"},
                    "output_token_throughput_per_user": {"value": round(1000 / itl, 3),
                                                         "unit": "tokens/sec/user"},
                    "input_sequence_length": {"value": isl, "unit": "tokens"},
                    "output_sequence_length": {"value": osl, "unit": "tokens"},
                    "output_token_count": {"value": osl, "unit": "tokens"},
                }
            viol = [] if err else [k for k, v, lim in (("time_to_first_token", ttft, 800),
                                                       ("inter_token_latency", itl, 40))
                                   if v > lim]
            meta["slo"] = {"good": not err and not viol, "violations": viol}
            r = {"schema": "tokentap.record/1", "metadata": meta, "metrics": metrics,
                 "error": {"code": 503, "type": "upstream_status",
                           "message": "overloaded"} if err else None}
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    print(f"{n} records written to {a.out}")


if __name__ == "__main__":
    main()
