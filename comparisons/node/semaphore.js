// redis-semaphore (on ioredis) as our semaphore benchmark drives it:
// `node semaphore.js PORT TASKS SPAN LIMIT`, on one connection as ours,
// TASKS concurrent loops of acquire+release of one permit of a semaphore of
// LIMIT (never full), for SPAN: a number of seconds, or `x<N>` for N cycles
// in all (what a criterion sample asks for); prints `{"cycles": N,
// "seconds": S}`, S the time they took.
// With `handoff` as a fifth argument: LIMIT permits, TASKS holders of 20 to
// 60 ms each, and the gaps from a release's start to the next acquire, in
// ms (with `x<N>`: the first N).
'use strict';
const Redis = require('ioredis');
const { Semaphore } = require('redis-semaphore');

const [port, tasks, , limit] = process.argv.slice(2, 6).map(Number);
const span = process.argv[4];
const counted = span.startsWith('x');
const seconds = counted ? 3600 : Number(span);
// The cycles (or gaps) left to run, with `x<N>`.
let left = counted ? Number(span.slice(1)) : Infinity;
const handoff = process.argv[6] === 'handoff';
const client = new Redis({ host: '127.0.0.1', port, lazyConnect: false });

async function cycles(end) {
  let count = 0;
  while (Date.now() < end && left > 0) {
    left -= 1;
    const semaphore = new Semaphore(client, 'rs-pool', limit, { lockTimeout: 30000 });
    await semaphore.acquire();
    await semaphore.release();
    count += 1;
  }
  return count;
}

async function handoffs(end, gaps, state) {
  while (Date.now() < end && gaps.length < left) {
    const semaphore = new Semaphore(client, 'rs-handoff', limit, {
      lockTimeout: 10000,
      acquireTimeout: 10000,
    });
    await semaphore.acquire();
    if (state.releaseStarted !== null) {
      gaps.push(Number(process.hrtime.bigint() - state.releaseStarted) / 1e6);
      state.releaseStarted = null;
    }
    await new Promise((done) => setTimeout(done, 20 + Math.random() * 40));
    state.releaseStarted = process.hrtime.bigint();
    await semaphore.release();
    // Compete again only after someone else took one.
    await new Promise((done) => setTimeout(done, 1));
  }
}

(async () => {
  const end = Date.now() + seconds * 1000;
  if (handoff) {
    const gaps = [];
    const state = { releaseStarted: null };
    await Promise.all(Array.from({ length: tasks }, () => handoffs(end, gaps, state)));
    console.log(JSON.stringify({ gaps: gaps.slice(0, left) }));
  } else {
    // One cycle first, not counted: the connection and the script's load
    // are not what a sample measures.
    const first = new Semaphore(client, 'rs-pool', limit, { lockTimeout: 30000 });
    await first.acquire();
    await first.release();
    const started = process.hrtime.bigint();
    const counts = await Promise.all(Array.from({ length: tasks }, () => cycles(end)));
    const took = Number(process.hrtime.bigint() - started) / 1e9;
    console.log(JSON.stringify({ cycles: counts.reduce((a, b) => a + b, 0), seconds: took }));
  }
  client.disconnect();
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
