// ws_upstream.mjs: an independent WebSocket upstream for tokentap's tests,
// on the `ws` package's WebSocketServer (not tokentap-sim's C code).
//
//   node ws_upstream.mjs --listen 127.0.0.1:0 --ready-file F [--no-deflate]
//        [--no-context-takeover] [--deflate-threshold N]
//        [--tls-cert FILE --tls-key FILE]
//
// Serves two APIs over WebSocket (any other path is refused with 404):
//   /v1/responses  OpenAI Responses, WebSocket mode: each client
//                  `response.create` gets the Responses stream events
//                  (response.created ... response.completed).
//   /v1/realtime   OpenAI Realtime: session.created on connect;
//                  session.update -> session.updated; response.create ->
//                  response.created ... response.done; response.cancel ends
//                  the response in flight with status "cancelled".  A client
//                  that sends `OpenAI-Beta: realtime=v1` gets the beta event
//                  names (response.text.delta, response.audio.delta, ...).
//
// Knobs per response.create (as tokentap-sim's "sim" object, docs/simulator.md),
// read from the message's top-level "sim" object, or "metadata.sim" /
// "response.metadata.sim" (a JSON string, as metadata values are strings):
//   ttft_ms (50)  from receiving response.create to the first delta
//   gap_ms (10)   between deltas (absolute targets: no drift)
//   tokens (16)   answer tokens, one per delta: "tok0 ", "tok1 ", ...
//   prompt_tokens (10), cached_tokens (0), reasoning_tokens (0, usage only)
//   audio_tokens (= tokens; Realtime audio output), input_audio_tokens (0)
// An unknown knob gets an `error` event naming it (a typo fails loudly).
// No delta leaves before its target on process.hrtime (CLOCK_MONOTONIC):
// a client's TTFT is never below ttft_ms.
//
// Stdout: one JSON object per line, what a test waits on (no secrets):
//   {"event":"listening","port":P,"tls":bool}        after the ready file
//   {"event":"connection","conn":n,"path":..,"extensions":..,"offered":..,"beta":bool,"auth":bool}
//   {"event":"turn","conn":n,"turn":k,"type":..,"response_id":..,"recv_ns":N,"sim":{..}}
//   {"event":"turn_end","conn":n,"turn":k,"status":..,"deltas":m}
//   {"event":"close","conn":n,"code":c,"reason":..,"in_flight":bool,"deltas":m,"turns":k}
// The ready file gets {"pid":N,"listen":"HOST:PORT","port":P} (temporary
// name, then rename), written once listening on the port the kernel chose.
// SIGTERM and SIGINT exit 0.

import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { WebSocketServer } from 'ws';
import { opt, flag, out, now } from './cli.mjs';


const listen = opt('--listen', '127.0.0.1:0');
const readyFile = opt('--ready-file');
const certFile = opt('--tls-cert');
const keyFile = opt('--tls-key');
const [host, portStr] = [listen.slice(0, listen.lastIndexOf(':')), listen.slice(listen.lastIndexOf(':') + 1)];


// permessage-deflate: on unless --no-deflate; every message compressed
// (threshold 0, ws's default is 1024) so that small events exercise inflate
const deflate = flag('--no-deflate') ? false : {
  threshold: Number(opt('--deflate-threshold', '0')),
  ...(flag('--no-context-takeover') ? { serverNoContextTakeover: true, clientNoContextTakeover: true } : {}),
};

const DEFAULTS = { ttft_ms: 50, gap_ms: 10, tokens: 16, prompt_tokens: 10, cached_tokens: 0,
                   reasoning_tokens: 0, audio_tokens: null, input_audio_tokens: 0 };

// the knobs of one create message; throws Error naming a bad one
function knobs(msg) {
  let sim = msg.sim ?? msg.metadata?.sim ?? msg.response?.metadata?.sim ?? {};
  if (typeof sim === 'string') sim = JSON.parse(sim);
  const k = { ...DEFAULTS };
  for (const [name, v] of Object.entries(sim)) {
    if (!(name in DEFAULTS)) throw new Error(`unknown sim knob "${name}"`);
    if (!Number.isInteger(v) || v < 0) throw new Error(`sim knob "${name}" must be an integer >= 0`);
    k[name] = v;
  }
  if (k.audio_tokens === null) k.audio_tokens = k.tokens;
  return k;
}

// run fn at absolute hrtime target (ns) or later; re-arms when a timer
// fires early (libuv's clock is in whole ms)
function at(target, fn, timers) {
  const left = Number(target - now()) / 1e6;
  if (left <= 0) { fn(); return; }
  const h = setTimeout(() => { timers.delete(h); at(target, fn, timers); }, Math.ceil(left));
  timers.add(h);
}

// deltas 0..n-1 at t0 + i*gap (absolute targets), each timer armed by the
// one before: never early, never out of order; then end() (at t0 when n is 0)
function deltas(t0, n, gapMs, timers, onDelta, end) {
  const step = (i) => {
    if (i === n) { end(); return; }
    at(t0 + BigInt(i * gapMs) * 1000000n, () => { onDelta(i); step(i + 1); }, timers);
  };
  if (n === 0) at(t0, end, timers); else step(0);
}

let connSeq = 0;
let idSeq = 0;
const newId = (prefix) => `${prefix}_${process.pid}_${++idSeq}`;
const words = (n) => Array.from({ length: n }, (_, i) => `tok${i} `);
const created = () => Math.floor(Date.now() / 1000);

// ---- Responses, WebSocket mode ----------------------------------------------------

function responsesSession(ws, conn) {
  let turn = 0;
  let cur = null;              // the response in flight: {timers, deltas, turn}
  const send = (o) => ws.send(JSON.stringify(o));

  ws.on('message', (data, isBinary) => {
    const recv = now();
    let msg;
    try { msg = JSON.parse(data.toString()); } catch { msg = null; }
    if (isBinary || !msg || msg.type !== 'response.create') {
      send({ type: 'error', code: 'invalid_request_error', message: 'expected a response.create text message', param: null, sequence_number: 0 });
      return;
    }
    if (cur) {
      send({ type: 'error', code: 'invalid_request_error', message: 'a response is already in flight on this connection', param: null, sequence_number: 0 });
      return;
    }
    let k;
    try { k = knobs(msg); } catch (e) {
      send({ type: 'error', code: 'invalid_request_error', message: e.message, param: 'metadata.sim', sequence_number: 0 });
      return;
    }
    turn++;
    const id = newId('resp');
    const msgId = newId('msg');
    const model = msg.model ?? 'sim-model';
    const at0 = created();
    let seq = 0;
    const ev = (type, fields) => send({ type, ...fields, sequence_number: seq++ });
    const toks = words(k.tokens);
    const text = toks.join('');
    const resp = (status, extra) => ({
      id, object: 'response', created_at: at0, status, error: null, incomplete_details: null,
      instructions: msg.instructions ?? null, metadata: msg.metadata ?? {}, model,
      output: [], parallel_tool_calls: true, previous_response_id: msg.previous_response_id ?? null,
      temperature: 1, tool_choice: 'auto', tools: [], top_p: 1, usage: null, ...extra,
    });
    const item = (status, content) => ({ id: msgId, type: 'message', status, role: 'assistant', content });
    const part = (t) => ({ type: 'output_text', annotations: [], logprobs: [], text: t });
    cur = { timers: new Set(), deltas: 0, turn };
    const mine = cur;
    out({ event: 'turn', conn, turn, type: 'response.create', response_id: id, recv_ns: recv, sim: k });

    ev('response.created', { response: resp('in_progress') });
    ev('response.in_progress', { response: resp('in_progress') });
    const t0 = recv + BigInt(k.ttft_ms) * 1000000n;
    // after the last delta: the *.done events and response.completed
    const finish = () => {
      if (k.tokens > 0) {
        ev('response.output_text.done', { item_id: msgId, output_index: 0, content_index: 0, text, logprobs: [] });
        ev('response.content_part.done', { item_id: msgId, output_index: 0, content_index: 0, part: part(text) });
        ev('response.output_item.done', { output_index: 0, item: item('completed', [part(text)]) });
      }
      const output_tokens = k.tokens + k.reasoning_tokens;
      ev('response.completed', { response: resp('completed', {
        completed_at: created(),
        output: k.tokens > 0 ? [item('completed', [part(text)])] : [],
        usage: {
          input_tokens: k.prompt_tokens,
          input_tokens_details: { cached_tokens: k.cached_tokens },
          output_tokens,
          output_tokens_details: { reasoning_tokens: k.reasoning_tokens },
          total_tokens: k.prompt_tokens + output_tokens,
        },
      }) });
      out({ event: 'turn_end', conn, turn: mine.turn, status: 'completed', deltas: mine.deltas });
      cur = null;
    };
    deltas(t0, toks.length, k.gap_ms, cur.timers, (i) => {
      if (i === 0) {
        ev('response.output_item.added', { output_index: 0, item: item('in_progress', []) });
        ev('response.content_part.added', { item_id: msgId, output_index: 0, content_index: 0, part: part('') });
      }
      ev('response.output_text.delta', { item_id: msgId, output_index: 0, content_index: 0, delta: toks[i], logprobs: [] });
      mine.deltas++;
    }, finish);
  });

  return () => {                 // on close: stop the response in flight
    const st = { in_flight: !!cur, deltas: cur ? cur.deltas : 0, turns: turn };
    if (cur) for (const h of cur.timers) clearTimeout(h);
    cur = null;
    return st;
  };
}

// ---- Realtime ---------------------------------------------------------------------

function realtimeSession(ws, conn, beta, model) {
  let turn = 0;
  let cur = null;              // {id, timers, deltas, finish(status)}
  let eventSeq = 0;
  const evId = () => `event_${conn}_${++eventSeq}`;
  const send = (o) => ws.send(JSON.stringify({ event_id: evId(), ...o }));
  // GA and beta event names
  const N = beta
    ? { text: 'response.text', audio: 'response.audio', transcript: 'response.audio_transcript', itemAdded: 'conversation.item.created' }
    : { text: 'response.output_text', audio: 'response.output_audio', transcript: 'response.output_audio_transcript', itemAdded: 'conversation.item.added' };
  let sessionModalities = beta ? ['text', 'audio'] : ['audio'];
  const session = () => beta
    ? { id: `sess_${conn}`, object: 'realtime.session', model, modalities: sessionModalities, voice: 'alloy',
        input_audio_format: 'pcm16', output_audio_format: 'pcm16', turn_detection: null, tools: [] }
    : { type: 'realtime', object: 'realtime.session', id: `sess_${conn}`, model, output_modalities: sessionModalities,
        audio: { input: { format: { type: 'audio/pcm', rate: 24000 }, turn_detection: null },
                 output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'alloy' } }, tools: [] };
  send({ type: 'session.created', session: session() });

  ws.on('message', (data) => {
    const recv = now();
    let msg;
    try { msg = JSON.parse(data.toString()); } catch { msg = {}; }
    if (msg.type === 'session.update') {
      const m = beta ? msg.session?.modalities : msg.session?.output_modalities;
      if (Array.isArray(m)) sessionModalities = m;
      send({ type: 'session.updated', session: session() });
      return;
    }
    if (msg.type === 'conversation.item.create') {
      const it = { id: msg.item?.id ?? newId('item'), object: 'realtime.item', status: 'completed', ...msg.item };
      send({ type: N.itemAdded, previous_item_id: null, item: it });
      return;
    }
    if (msg.type === 'response.cancel') {
      if (cur && (!msg.response_id || msg.response_id === cur.id)) cur.finish('cancelled');
      else send({ type: 'error', error: { type: 'invalid_request_error', code: 'response_cancel_not_active', message: 'no active response to cancel', param: null, event_id: msg.event_id ?? null } });
      return;
    }
    if (msg.type !== 'response.create') {
      if (msg.type !== 'input_audio_buffer.append') {
        send({ type: 'error', error: { type: 'invalid_request_error', code: 'unknown_event', message: `not served here: ${msg.type}`, param: null, event_id: msg.event_id ?? null } });
      }
      return;
    }
    if (cur) {
      send({ type: 'error', error: { type: 'invalid_request_error', code: 'conversation_already_has_active_response', message: 'a response is in flight', param: null, event_id: msg.event_id ?? null } });
      return;
    }
    let k;
    try { k = knobs(msg); } catch (e) {
      send({ type: 'error', error: { type: 'invalid_request_error', code: 'invalid_value', message: e.message, param: 'response.metadata.sim', event_id: msg.event_id ?? null } });
      return;
    }
    turn++;
    const r = msg.response ?? {};
    const mods = (beta ? r.modalities : r.output_modalities) ?? sessionModalities;
    const audio = mods.includes('audio');
    const id = newId('resp');
    const itemId = newId('item');
    const toks = words(k.tokens);
    const text = toks.join('');
    const audioChunk = Buffer.alloc(480).toString('base64');   // 10 ms of 24 kHz pcm16 silence
    const partType = audio ? 'audio' : 'text';
    const content = (t) => (audio
      ? { type: beta ? 'audio' : 'output_audio', transcript: t }
      : { type: beta ? 'text' : 'output_text', text: t });
    const item = (status, t) => ({ id: itemId, object: 'realtime.item', type: 'message', status, role: 'assistant',
                                   content: t === null ? [] : [content(t)] });
    const resp = (status, extra) => ({
      id, object: 'realtime.response', status, status_details: null, output: [], conversation_id: `conv_${conn}`,
      [beta ? 'modalities' : 'output_modalities']: mods, metadata: r.metadata ?? null, usage: null, ...extra,
    });
    const ids = { response_id: id, item_id: itemId, output_index: 0, content_index: 0 };
    cur = { id, timers: new Set(), deltas: 0, turn };
    const mine = cur;
    out({ event: 'turn', conn, turn, type: 'response.create', response_id: id, recv_ns: recv, audio, sim: k });

    send({ type: 'response.created', response: resp('in_progress') });
    const t0 = recv + BigInt(k.ttft_ms) * 1000000n;
    // response.done, with usage for the tokens sent so far (all of them
    // when completed, fewer when cancelled)
    cur.finish = (status) => {
      for (const h of mine.timers) clearTimeout(h);
      const sent = toks.slice(0, mine.deltas).join('');
      if (mine.deltas > 0 && status === 'completed') {
        if (audio) {
          send({ type: `${N.audio}.done`, ...ids });
          send({ type: `${N.transcript}.done`, ...ids, transcript: text });
        } else {
          send({ type: `${N.text}.done`, ...ids, text });
        }
        send({ type: 'response.content_part.done', ...ids, part: audio ? { type: partType, transcript: text } : { type: partType, text } });
        send({ type: 'response.output_item.done', response_id: id, output_index: 0, item: item('completed', text) });
      }
      const outText = mine.deltas;
      const outAudio = audio ? Math.round(k.audio_tokens * mine.deltas / Math.max(1, k.tokens)) : 0;
      send({ type: 'response.done', response: resp(status, {
        status_details: status === 'cancelled' ? { type: 'cancelled', reason: 'client_cancelled' } : null,
        output: mine.deltas > 0 ? [item(status === 'completed' ? 'completed' : 'incomplete', sent)] : [],
        usage: {
          total_tokens: k.prompt_tokens + outText + outAudio,
          input_tokens: k.prompt_tokens,
          output_tokens: outText + outAudio,
          input_token_details: {
            text_tokens: k.prompt_tokens - k.input_audio_tokens, audio_tokens: k.input_audio_tokens, image_tokens: 0,
            cached_tokens: k.cached_tokens,
            cached_tokens_details: { text_tokens: k.cached_tokens, audio_tokens: 0, image_tokens: 0 },
          },
          output_token_details: { text_tokens: outText, audio_tokens: outAudio },
        },
      }) });
      out({ event: 'turn_end', conn, turn: mine.turn, status, deltas: mine.deltas });
      cur = null;
    };
    deltas(t0, toks.length, k.gap_ms, cur.timers, (i) => {
      const tok = toks[i];
      if (i === 0) {
        send({ type: 'response.output_item.added', response_id: id, output_index: 0, item: item('in_progress', null) });
        send({ type: N.itemAdded, previous_item_id: null, item: item('in_progress', null) });
        send({ type: 'response.content_part.added', ...ids, part: audio ? { type: partType, transcript: '' } : { type: partType, text: '' } });
      }
      if (audio) {
        send({ type: `${N.transcript}.delta`, ...ids, delta: tok });
        send({ type: `${N.audio}.delta`, ...ids, delta: audioChunk });
      } else {
        send({ type: `${N.text}.delta`, ...ids, delta: tok });
      }
      mine.deltas++;
    }, () => mine.finish('completed'));
  });

  return () => {
    const st = { in_flight: !!cur, deltas: cur ? cur.deltas : 0, turns: turn };
    if (cur) for (const h of cur.timers) clearTimeout(h);
    cur = null;
    return st;
  };
}

// ---- the server -------------------------------------------------------------------

const server = certFile
  ? https.createServer({ cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile) })
  : http.createServer();
server.on('request', (req, res) => { res.writeHead(426, { 'Content-Type': 'text/plain' }); res.end('WebSocket only\n'); });

const PATHS = new Set(['/v1/responses', '/v1/realtime']);
const wss = new WebSocketServer({
  server,
  perMessageDeflate: deflate,
  verifyClient: (info, cb) => {
    const path = new URL(info.req.url, 'http://x').pathname;
    if (PATHS.has(path)) cb(true); else cb(false, 404, 'Not Found');
  },
});

wss.on('connection', (ws, req) => {
  const conn = ++connSeq;
  const url = new URL(req.url, 'http://x');
  const beta = /realtime=v1/.test(req.headers['openai-beta'] ?? '');
  out({ event: 'connection', conn, path: url.pathname, query: url.search, extensions: ws.extensions,
        offered: req.headers['sec-websocket-extensions'] ?? null, beta, auth: !!req.headers.authorization });
  const stop = url.pathname === '/v1/realtime'
    ? realtimeSession(ws, conn, beta, url.searchParams.get('model') ?? 'gpt-realtime')
    : responsesSession(ws, conn);
  ws.on('error', () => {});   // a peer that resets: its close event follows
  ws.on('close', (code, reason) => out({ event: 'close', conn, code, reason: reason.toString(), ...stop() }));
});

server.listen(Number(portStr), host.replace(/^\[|\]$/g, ''), () => {
  const port = server.address().port;
  const shown = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  if (readyFile) {
    fs.writeFileSync(`${readyFile}.tmp`, JSON.stringify({ pid: process.pid, listen: `${shown}:${port}`, port }) + '\n');
    fs.renameSync(`${readyFile}.tmp`, readyFile);
  }
  out({ event: 'listening', port, tls: !!certFile });
});

const bye = () => {
  for (const c of wss.clients) c.terminate();
  server.close();
  process.exit(0);
};
process.on('SIGTERM', bye);
process.on('SIGINT', bye);
