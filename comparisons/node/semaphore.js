// redis-semaphore (on ioredis) as our semaphore benchmark drives it:
// `node semaphore.js PORT`, one connection as ours, then one request per
// line on stdin, each answered by one line of JSON on stdout (the process
// stays up between a benchmark's samples, so none pays for node starting):
//
//   cycles TASKS LIMIT N   TASKS concurrent loops of acquire+release of one
//                          permit of a semaphore of LIMIT (never full), N
//                          cycles in all: `{"cycles": N, "seconds": S}`, S
//                          the time they took
//   handoff TASKS LIMIT N  LIMIT permits, TASKS holders of 20 to 60 ms each:
//                          `{"gaps": [...]}`, the first N gaps from a
//                          release's start to the next acquire, in ms
'use strict';
const readline = require('readline');
const Redis = require('ioredis');
const { Semaphore } = require('redis-semaphore');

const port = Number(process.argv[2]);
const client = new Redis({ host: '127.0.0.1', port, lazyConnect: false });

async function cycles(tasks, limit, count) {
  // One cycle first, not counted: the connection and the script's load
  // are not what a sample measures.
  const first = new Semaphore(client, 'rs-pool', limit, { lockTimeout: 30000 });
  await first.acquire();
  await first.release();
  let left = count;
  const loop = async () => {
    while (left > 0) {
      left -= 1;
      const semaphore = new Semaphore(client, 'rs-pool', limit, { lockTimeout: 30000 });
      await semaphore.acquire();
      await semaphore.release();
    }
  };
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: tasks }, loop));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { cycles: count, seconds };
}

async function handoffs(tasks, limit, count) {
  const gaps = [];
  const state = { releaseStarted: null };
  const holder = async () => {
    while (gaps.length < count) {
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
  };
  await Promise.all(Array.from({ length: tasks }, holder));
  return { gaps: gaps.slice(0, count) };
}

const requests = readline.createInterface({ input: process.stdin });
// One request at a time, in order.
let queue = Promise.resolve();
requests.on('line', (line) => {
  queue = queue.then(async () => {
    const [kind, tasks, limit, count] = line.trim().split(/\s+/);
    const run = kind === 'handoff' ? handoffs : cycles;
    const answer = await run(Number(tasks), Number(limit), Number(count));
    process.stdout.write(JSON.stringify(answer) + '\n');
  });
});
requests.on('close', () => {
  queue.then(() => client.disconnect());
});
process.on('unhandledRejection', (err) => {
  console.error(err);
  process.exit(1);
});
