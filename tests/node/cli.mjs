// cli.mjs: what the WebSocket test peers share: their command line,
// their output (one JSON object per line, nanosecond bigints as bare
// integers), the monotonic clock, and the clients' per-turn knobs.

const args = process.argv.slice(2);

// the value after <name>, or <dflt>
export const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};

export const flag = (name) => args.includes(name);

// one JSON line on stdout
export const out = (o) =>
  process.stdout.write(JSON.stringify(o, (k, v) => (typeof v === 'bigint' ? `__big${v}` : v))
    .replace(/"__big(\d+)"/g, '$1') + '\n');

// CLOCK_MONOTONIC ns, comparable with other processes' monotonic clocks
export const now = () => process.hrtime.bigint();

// the knobs of turn n: --sim-turn K:JSON (repeatable) for turn K, else --sim
export function simOfTurn() {
  const sim = opt('--sim');
  const simTurn = new Map();
  args.forEach((a, i) => {
    if (a !== '--sim-turn') return;
    const v = args[i + 1];
    simTurn.set(Number(v.slice(0, v.indexOf(':'))), v.slice(v.indexOf(':') + 1));
  });
  return (n) => simTurn.get(n) ?? sim;
}
