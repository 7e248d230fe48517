#!/usr/bin/env python3
"""Designed vs measured: streams with designed timings from tokentap-sim,
through tokentap, and the metrics its records give (a markdown table).
Usage: python3 bench/clock_scenarios.py [BUILD_DIR]"""
import json, re, socket, subprocess, time
import sys
B = sys.argv[1] if len(sys.argv) > 1 else "build"
sim=subprocess.Popen([B+"/tokentap-sim","--listen","127.0.0.1:0"],stdout=subprocess.PIPE,text=True)
sp=int(re.search(r":(\d+)",sim.stdout.readline()).group(1))
import tempfile, os
tmp=tempfile.mkdtemp()
rec=os.path.join(tmp, "rec.jsonl"); open(rec,"w").close()
# port 0; the bound port comes from the ready file (written by rename once
# tokentap listens): a short poll on its existence
ready=os.path.join(tmp, "ready.json")
tt=subprocess.Popen([B+"/tokentap","--listen","127.0.0.1:0","--ready-file",ready,"--upstream",f"http://127.0.0.1:{sp}","--admin","off","--record",rec],stderr=subprocess.DEVNULL)
_end=time.monotonic()+10
while not os.path.exists(ready):
    if tt.poll() is not None or time.monotonic()>_end: sys.exit("tokentap did not start")
    time.sleep(0.01)
PORT=int(json.load(open(ready))["listen"].rsplit(":",1)[1])
def post(path, body, cancel_after=None):
    data=json.dumps(body).encode()
    s=socket.create_connection(("127.0.0.1",PORT))
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"%(path.encode(),len(data),data))
    t0=time.monotonic(); got=b""; first=None
    while True:
        b=s.recv(65536)
        if not b: break
        got+=b
        if first is None and b'"content":"tok' in got: first=(time.monotonic()-t0)*1000
        if cancel_after and time.monotonic()-t0 > cancel_after: break
    s.close(); return first
scen=[
 ("450 ms TTFT, then 119 tokens at 25 ms", "/v1/chat/completions", {"model":"m","stream":True,"stream_options":{"include_usage":True},"sim":{"ttft_ms":450,"tokens":120,"gap_ms":25}},
   {"time_to_first_token":450,"request_latency":3425,"inter_token_latency":25,"output_sequence_length":120}),
 ("20 reasoning tokens at 20 ms before the answer", "/v1/chat/completions", {"model":"m","stream":True,"stream_options":{"include_usage":True},"sim":{"ttft_ms":200,"reasoning_tokens":20,"tokens":20,"gap_ms":20}},
   {"time_to_first_token":200,"time_to_first_output_token":600,"reasoning_latency":400,"reasoning_token_count":20,"output_token_count":20}),
 ("3 tokens per event every 90 ms (usage on)", "/v1/chat/completions", {"model":"m","stream":True,"stream_options":{"include_usage":True},"sim":{"ttft_ms":100,"tokens":30,"tokens_per_event":3,"gap_ms":90}},
   {"time_to_first_token":100,"inter_chunk_latency":90,"inter_token_latency":round(810/29,2),"output_sequence_length":30}),
 ("role-only first chunk, TTFT 300", "/v1/chat/completions", {"model":"m","stream":True,"sim":{"ttft_ms":300,"tokens":5,"gap_ms":10,"role_chunk":True}},
   {"time_to_first_token":300}),
 ("non-streaming, 16 tokens", "/v1/chat/completions", {"model":"m","stream":False,"sim":{"ttft_ms":100,"tokens":16,"gap_ms":10}},
   {"request_latency":250,"time_to_first_token":None}),
 ("anthropic thinking then text", "/v1/messages", {"model":"m","stream":True,"max_tokens":100,"sim":{"ttft_ms":150,"reasoning_tokens":10,"tokens":10,"gap_ms":15}},
   {"time_to_first_token":150,"time_to_first_output_token":300,"request_latency":435}),
 ("gemini thoughts then text", "/v1beta/models/g:streamGenerateContent?alt=sse", {"sim":{"ttft_ms":120,"reasoning_tokens":4,"tokens":8,"gap_ms":30}},
   {"time_to_first_token":120,"time_to_first_output_token":240,"request_latency":450}),
 ("ollama chat", "/api/chat", {"model":"m","sim":{"ttft_ms":80,"tokens":10,"gap_ms":12}},
   {"time_to_first_token":80,"request_latency":188,"inter_token_latency":12}),
 ("openai responses, reasoning text", "/v1/responses", {"model":"m","stream":True,"sim":{"ttft_ms":100,"reasoning_tokens":5,"tokens":5,"gap_ms":20}},
   {"time_to_first_token":100,"time_to_first_output_token":200}),
 ("tgi generate_stream", "/generate_stream", {"inputs":"x","sim":{"ttft_ms":60,"tokens":8,"gap_ms":10}},
   {"time_to_first_token":60,"request_latency":130}),
 ("mid-stream error after 5 tokens", "/v1/chat/completions", {"model":"m","stream":True,"sim":{"ttft_ms":50,"tokens":20,"gap_ms":10,"error_after":5}}, {"error":"stream_error"}),
 ("stream cut after 5 tokens", "/v1/chat/completions", {"model":"m","stream":True,"sim":{"ttft_ms":50,"tokens":20,"gap_ms":10,"truncate_after":5}}, {"error":"truncated"}),
]
firsts=[]
for name,path,body,want in scen:
    firsts.append(post(path,body))
post("/v1/chat/completions",{"model":"m","stream":True,"sim":{"ttft_ms":50,"tokens":100,"gap_ms":20}},cancel_after=0.3)
time.sleep(0.5)
recs=[json.loads(l) for l in open(rec)]
print("| scenario | metric | designed | measured |")
print("|---|---|---|---|")
for (name,path,body,want),r,first in zip(scen,recs,firsts):
    m=r["metrics"]
    for k,v in want.items():
        if k=="error":
            got=(r["error"] or {}).get("type")
        elif k=="inter_chunk_latency":
            vals=m.get(k,{}).get("value",[]); got=round(sorted(vals)[len(vals)//2],2) if vals else None; k="inter_chunk_latency (median)"
        else:
            got=m.get(k,{}).get("value")
            got=round(got,2) if isinstance(got,float) else got
        print(f"| {name} | {k} | {'absent' if v is None and k!='error' else v} | {'absent' if got is None else got} |")
    if first is not None and "time_to_first_token" in m:
        ref = "time_to_first_output_token" if "time_to_first_output_token" in m else "time_to_first_token"
        print(f"| {name} | client-observed first answer token − record {ref} | < 1 | {first - m[ref]['value']:+.2f} ms |")
r=recs[-1]
print(f"| client cancels after 300 ms | error | 499 cancelled | {r['error']['code']} {r['error']['type']}, was_cancelled={r['metadata']['was_cancelled']} |")
tt.terminate(); sim.terminate()
