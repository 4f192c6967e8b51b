// redis-semaphore (on ioredis) as our semaphore benchmark drives it:
// `node semaphore.js PORT TASKS SECONDS LIMIT`, on one connection as ours,
// TASKS concurrent loops of acquire+release of one permit of a semaphore of
// LIMIT (never full), for SECONDS; prints `{"cycles": N, "seconds": S}`.
// With `handoff` as a fifth argument: LIMIT permits, TASKS holders of 20 to
// 60 ms each, and the gaps from a release's start to the next acquire, in ms.
'use strict';
const Redis = require('ioredis');
const { Semaphore } = require('redis-semaphore');

const [port, tasks, seconds, limit] = process.argv.slice(2, 6).map(Number);
const handoff = process.argv[6] === 'handoff';
const client = new Redis({ host: '127.0.0.1', port, lazyConnect: false });

async function cycles(end) {
  let count = 0;
  while (Date.now() < end) {
    const semaphore = new Semaphore(client, 'rs-pool', limit, { lockTimeout: 30000 });
    await semaphore.acquire();
    await semaphore.release();
    count += 1;
  }
  return count;
}

async function handoffs(end, gaps, state) {
  while (Date.now() < end) {
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
    console.log(JSON.stringify({ gaps }));
  } else {
    const counts = await Promise.all(Array.from({ length: tasks }, () => cycles(end)));
    console.log(JSON.stringify({ cycles: counts.reduce((a, b) => a + b, 0), seconds }));
  }
  client.disconnect();
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
