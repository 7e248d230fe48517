// realtime_ws.mjs: N turns of OpenAI Realtime on one socket, through the
// official SDK's client (OpenAIRealtimeWS from openai/realtime/ws; with
// --beta the beta one from openai/beta/realtime/ws, which adds
// `OpenAI-Beta: realtime=v1` and gets the beta event names).
//
//   node realtime_ws.mjs --url ws[s]://127.0.0.1:PORT/v1/realtime --turns N
//        [--ca FILE] [--no-deflate] [--deflate-threshold B] [--text-only]
//        [--beta] [--cancel-turn K] [--drop-turn K] [--sim JSON] [--sim-turn K:JSON]
//        [--model M] [--timeout-ms T]
//
// The SDK always dials wss://<base URL>/realtime?model=M.  A wss:// --url is
// used as it is (--ca FILE: the private CA, passed to ws's options, which go
// to tls.connect).  For a ws:// --url the SDK's URL stays wss:// and ws's
// `createConnection` option hands it a plain TCP socket instead of a TLS
// one: the same client code and handshake, without TLS.
//
// Per turn: conversation.item.create (the user's text), then
// response.create with the --sim JSON as response.metadata.sim (a string)
// and as a top-level "sim" object; with --text-only, session.update first
// and each response asks for text output only.  The turn ends at
// response.done.
//
// Stdout, one JSON object per line:
//   {"event":"open","url":--url,"sdk_url":the SDK's,"extensions":..,"session_id":..}
//   per turn {"event":"turn","turn":i,"response_id":..,"sent_ns":N,
//     "first_text_ns":N|null,"first_audio_ns":N|null,"ttft_ms":x|null,
//     "time_to_first_audio_ms":x|null,"text":..,"audio_bytes":n,
//     "usage":{..}|null,"events":n,"status":..,"error":..|null}
//   {"event":"end","close_code":c,"close_reason":..,"errors":[..]}
// sent_ns: process.hrtime.bigint() just before response.create was sent;
// first_text_ns: the first text or transcript delta; first_audio_ns: the
// first audio delta (GA and beta names both); ttft_ms: from sent_ns to the
// first of the two; time_to_first_audio_ms: to the first audio delta.
// status: response.done's response.status (completed, cancelled, ...),
// "error", "closed", or "dropped" for --drop-turn.
//
// --cancel-turn K: after turn K's first delta, send `response.cancel` (the
//   Realtime API's cancel event) for it; the turn ends at its response.done
//   (status "cancelled") and the next turns follow on the same socket.
// --drop-turn K: after turn K's first delta, destroy the socket (ws
//   terminate()); nothing follows.  Exit status 0 when every turn ran as asked.

import fs from 'node:fs';
import net from 'node:net';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { OpenAIRealtimeWS as BetaRealtimeWS } from 'openai/beta/realtime/ws';
import { opt, flag, out, now, simOfTurn } from './cli.mjs';

const url = opt('--url');
const turns = Number(opt('--turns', '1'));
const model = opt('--model', 'gpt-realtime');
// --sim-turn K:JSON (repeatable): turn K's knobs instead of --sim's
const simOf = simOfTurn();
const cancelTurn = Number(opt('--cancel-turn', '0'));
const dropTurn = Number(opt('--drop-turn', '0'));
const beta = flag('--beta');
const textOnly = flag('--text-only');
const timeoutMs = Number(opt('--timeout-ms', '30000'));
if (!url || !/^wss?:\/\//.test(url)) {
  process.stderr.write('usage: realtime_ws.mjs --url ws[s]://HOST:PORT/v1/realtime --turns N [options]\n');
  process.exit(2);
}

setTimeout(() => { process.stderr.write(`realtime_ws: no end after ${timeoutMs} ms\n`); process.exit(3); },
           timeoutMs).unref();

// the SDK's base URL: http(s)://HOST:PORT/v1 (it appends /realtime)
const u = new URL(url);
const baseURL = `${u.protocol === 'wss:' ? 'https' : 'http'}://${u.host}${u.pathname.replace(/\/realtime\/?$/, '')}`;
const wsOptions = {};
if (flag('--no-deflate')) wsOptions.perMessageDeflate = false;
else if (opt('--deflate-threshold')) wsOptions.perMessageDeflate = { threshold: Number(opt('--deflate-threshold')) };
if (opt('--ca')) wsOptions.ca = fs.readFileSync(opt('--ca'));
if (u.protocol === 'ws:') wsOptions.createConnection = (o) => net.connect({ host: o.host, port: o.port });

const client = new OpenAI({ apiKey: 'test', baseURL });
const rt = beta ? new BetaRealtimeWS({ model, options: wsOptions }, client)
                : new OpenAIRealtimeWS({ model, options: wsOptions }, client);
const errors = [];
let turn = null;
let closed = null;
const waiters = [];                      // [type, resolve] for one-off events

const TEXT = new Set(['response.output_text.delta', 'response.output_audio_transcript.delta',
                      'response.text.delta', 'response.audio_transcript.delta']);
const AUDIO = new Set(['response.output_audio.delta', 'response.audio.delta']);

rt.on('error', (e) => {
  errors.push(e.message);
  if (turn && turn.response_id === null) turn.end('error', e.message);   // create refused
});
rt.socket.on('close', (code, reason) => {
  closed = { code, reason: reason.toString() };
  if (turn) turn.end(turn.stopped ?? 'closed');
  for (const [, resolve] of waiters.splice(0)) resolve(null);
});
rt.on('event', (ev) => {
  for (let i = 0; i < waiters.length; i++) {
    if (waiters[i][0] === ev.type) { waiters.splice(i, 1)[0][1](ev); break; }
  }
  if (!turn) return;
  const t = turn;
  t.events++;
  const isText = TEXT.has(ev.type);
  const isAudio = AUDIO.has(ev.type);
  if (ev.type === 'response.created') t.response_id = ev.response?.id ?? null;
  else if (isText || isAudio) {
    const at = now();
    if (isText) { if (t.firstText === null) t.firstText = at; t.text += ev.delta; }
    else { if (t.firstAudio === null) t.firstAudio = at; t.audio += Buffer.from(ev.delta, 'base64').length; }
    if (t.n === dropTurn && !t.stopped) {
      t.stopped = 'dropped';
      rt.socket.terminate();
    } else if (t.n === cancelTurn && !t.stopped) {
      t.stopped = 'cancel sent';
      rt.send({ type: 'response.cancel', response_id: t.response_id });
    }
  } else if (ev.type === 'response.done') {
    t.usage = ev.response?.usage ?? null;
    t.end(ev.response?.status ?? 'done');
  }
});

const ms = (a, b) => (a === null ? null : Number(a - b) / 1e6);
const next = (type) => new Promise((resolve) => waiters.push([type, resolve]));

function runTurn(n) {
  return new Promise((resolve) => {
    const t = { n, response_id: null, firstText: null, firstAudio: null, text: '', audio: 0,
                usage: null, events: 0, error: null, stopped: null };
    t.end = (status, error) => {
      if (turn !== t) return;
      turn = null;
      const first = [t.firstText, t.firstAudio].filter((x) => x !== null).sort((a, b) => (a < b ? -1 : 1))[0] ?? null;
      out({ event: 'turn', turn: n, response_id: t.response_id, sent_ns: t.sent,
            first_text_ns: t.firstText, first_audio_ns: t.firstAudio,
            ttft_ms: ms(first, t.sent), time_to_first_audio_ms: ms(t.firstAudio, t.sent),
            text: t.text, audio_bytes: t.audio, usage: t.usage, events: t.events, status,
            error: error ?? null });
      resolve(status);
    };
    rt.send({ type: 'conversation.item.create',
              item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: `turn ${n}: say something` }] } });
    const response = {};
    if (simOf(n)) response.metadata = { sim: simOf(n) };
    if (textOnly) response[beta ? 'modalities' : 'output_modalities'] = ['text'];
    const body = { type: 'response.create', response };
    if (simOf(n)) body.sim = JSON.parse(simOf(n));
    turn = t;
    t.sent = now();
    rt.send(body);
  });
}

const created = next('session.created');
await new Promise((resolve) => {
  rt.socket.once('open', resolve);
  rt.socket.once('close', resolve);
});
const session = await created;
if (!session) {
  process.stderr.write(`realtime_ws: closed before session.created: ${errors.join('; ')}\n`);
  process.exit(1);
}
out({ event: 'open', url, sdk_url: rt.url.href, extensions: rt.socket.extensions, session_id: session.session?.id ?? null });
if (textOnly) {
  const updated = next('session.updated');
  rt.send({ type: 'session.update', session: beta ? { modalities: ['text'] } : { type: 'realtime', output_modalities: ['text'] } });
  await updated;
}

let ok = true;
for (let n = 1; n <= turns && !closed; n++) {
  const status = await runTurn(n);
  const want = n === dropTurn ? 'dropped' : n === cancelTurn ? 'cancelled' : 'completed';
  if (status !== want) ok = false;
  if (status === 'dropped' || status === 'closed' || status === 'error') break;
}
if (!closed) {
  await new Promise((resolve) => {
    rt.socket.once('close', resolve);
    rt.close({ code: 1000, reason: 'done' });
  });
}
out({ event: 'end', close_code: closed?.code ?? null, close_reason: closed?.reason ?? null, errors });
process.exit(ok ? 0 : 1);
