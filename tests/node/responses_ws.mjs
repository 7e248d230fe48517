// responses_ws.mjs: N turns of OpenAI Responses WebSocket mode on ONE socket,
// through the official SDK's client (ResponsesWS from
// openai/resources/responses/ws; nothing hand-rolled on the wire).
//
//   node responses_ws.mjs --base-url http://127.0.0.1:PORT/v1 --turns N
//        [--no-deflate] [--deflate-threshold B] [--sim JSON] [--sim-turn K:JSON] [--model M]
//        [--cancel-turn K] [--drop-turn K] [--ca FILE] [--timeout-ms T]
//
// The SDK turns the base URL into ws[s]://HOST:PORT/v1/responses (http ->
// ws, https -> wss).  Each turn sends one `response.create` whose
// metadata.sim is the --sim JSON as a string (metadata values are strings),
// and whose previous_response_id chains the turns as WebSocket mode does.
//
// Stdout, one JSON object per line:
//   {"event":"open","url":..,"extensions":"permessage-deflate"|""}
//   per turn {"event":"turn","turn":i,"response_id":..,"sent_ns":N,
//     "first_delta_ns":N|null,"ttft_ms":x|null,"text":..,"usage":{..}|null,
//     "events":n,"status":..,"error":..|null}
//   {"event":"end","close_code":c,"close_reason":..,"errors":[..]}
// sent_ns: process.hrtime.bigint() (CLOCK_MONOTONIC, comparable with other
// processes' monotonic clocks) just before the SDK's send() of
// response.create; first_delta_ns: on arrival of the turn's first
// response.output_text.delta; ttft_ms = their difference.
// status: the terminal event's (completed, failed, incomplete), "error" (an
// `error` event), "closed" (the socket closed first), or "cancelled" /
// "dropped" for the turn named by --cancel-turn / --drop-turn.
//
// --drop-turn K: after turn K's first delta, destroy the socket (ws
//   terminate(): no close frame, the TCP connection just ends).
// --cancel-turn K: Responses WebSocket mode has no cancel event: the SDK's
//   ResponsesClientEvent is `response.create` only, and POST
//   /v1/responses/{id}/cancel serves background responses, which WebSocket
//   mode does not run.  What the SDK offers is close(): after turn K's first
//   delta we call it (close code 1000, reason "cancel"), the clean way a
//   client abandons the response in flight; the session ends with it.
// Both stop after turn K.  Exit status 0 when every turn ran as asked.

import fs from 'node:fs';
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { opt, flag, out, now, simOfTurn } from './cli.mjs';

const baseURL = opt('--base-url');
const turns = Number(opt('--turns', '1'));
const model = opt('--model', 'sim-model');
// --sim-turn K:JSON (repeatable): turn K's knobs instead of --sim's
const simOf = simOfTurn();
const cancelTurn = Number(opt('--cancel-turn', '0'));
const dropTurn = Number(opt('--drop-turn', '0'));
const caFile = opt('--ca');
const timeoutMs = Number(opt('--timeout-ms', '30000'));
if (!baseURL) {
  process.stderr.write('usage: responses_ws.mjs --base-url URL --turns N [options]\n');
  process.exit(2);
}

setTimeout(() => { process.stderr.write(`responses_ws: no end after ${timeoutMs} ms\n`); process.exit(3); },
           timeoutMs).unref();

// ws options go through ResponsesWS to `new WebSocket(url, options)`
const wsOptions = {};
if (flag('--no-deflate')) wsOptions.perMessageDeflate = false;
else if (opt('--deflate-threshold')) wsOptions.perMessageDeflate = { threshold: Number(opt('--deflate-threshold')) };
if (caFile) wsOptions.ca = fs.readFileSync(caFile);

const client = new OpenAI({ apiKey: 'test', baseURL });
const rws = new ResponsesWS(client, wsOptions);
const raw = () => rws.socket.platformSocket;          // the ws WebSocket
const errors = [];
let turn = null;                                      // the turn in flight
let closed = null;

rws.on('error', (e) => { errors.push(e.message); });
rws.on('close', (code, reason) => {
  closed = { code, reason };
  if (turn) turn.end(turn.stopped ?? 'closed');
});
rws.on('event', (ev) => {
  if (!turn) return;
  const t = turn;
  t.events++;
  if (ev.type === 'response.created') t.response_id = ev.response?.id ?? null;
  else if (ev.type === 'response.output_text.delta') {
    if (t.first === null) t.first = now();
    t.text += ev.delta;
    if (t.n === dropTurn && !t.stopped) {
      t.stopped = 'dropped';
      raw().terminate();
    } else if (t.n === cancelTurn && !t.stopped) {
      t.stopped = 'cancelled';
      rws.close({ code: 1000, reason: 'cancel' });
    }
  } else if (['response.completed', 'response.failed', 'response.incomplete'].includes(ev.type)) {
    t.usage = ev.response?.usage ?? null;
    t.response_id = ev.response?.id ?? t.response_id;
    if (!t.stopped) t.end(ev.response?.status ?? ev.type.slice(9));
  } else if (ev.type === 'error') {
    t.error = ev.message ?? JSON.stringify(ev);
    if (!t.stopped) t.end('error');
  }
});

// one turn: resolves with {status, id}
function runTurn(n, prev) {
  return new Promise((resolve) => {
    const t = { n, response_id: null, first: null, text: '', usage: null, events: 0, error: null, stopped: null };
    t.end = (status) => {
      if (turn !== t) return;
      turn = null;
      out({ event: 'turn', turn: n, response_id: t.response_id, sent_ns: t.sent,
            first_delta_ns: t.first, ttft_ms: t.first === null ? null : Number(t.first - t.sent) / 1e6,
            text: t.text, usage: t.usage, events: t.events, status, error: t.error });
      resolve({ status, id: t.response_id });
    };
    turn = t;
    const body = { type: 'response.create', model, input: `turn ${n}: say something`, store: false };
    if (simOf(n)) body.metadata = { sim: simOf(n) };
    if (prev) body.previous_response_id = prev;
    t.sent = now();
    rws.send(body);
  });
}

// wait for the socket to open (a send before that would be queued by the
// SDK, and sent_ns would not be when it left)
await new Promise((resolve, reject) => {
  rws.socket.once('open', resolve);
  rws.socket.once('close', () => reject(new Error('closed before open')));
}).catch((e) => {
  process.stderr.write(`responses_ws: ${e.message}: ${errors.join('; ')}\n`);
  process.exit(1);
});
out({ event: 'open', url: rws.url.href, extensions: raw().extensions });

let ok = true;
let prev = null;
for (let n = 1; n <= turns; n++) {
  const { status, id } = await runTurn(n, prev);
  const want = n === dropTurn ? 'dropped' : n === cancelTurn ? 'cancelled' : 'completed';
  if (status !== want) ok = false;
  if (status !== 'completed') break;
  prev = id;
}
if (!closed) {
  await new Promise((resolve) => {
    rws.once('close', resolve);
    rws.close({ code: 1000, reason: 'done' });
  });
}
out({ event: 'end', close_code: closed?.code ?? null, close_reason: closed?.reason ?? null, errors });
process.exit(ok ? 0 : 1);
