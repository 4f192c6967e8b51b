// The chaos worker of the Node.js peers: the protocol of ../README.md, for
//
//   --peer redlock                    redlock 4 (Redlock over every --nodes URL)
//   --peer redis-semaphore-mutex      redis-semaphore's Mutex on the first node
//   --peer redis-semaphore-semaphore  redis-semaphore's MultiSemaphore of
//                                     --permits P on the first node
//
// all on ioredis. The harness installs package.json's pinned versions with
// `npm ci` into target/peers/node and starts this file with NODE_PATH set to
// that directory's node_modules, so every require() of a package below is
// resolved there.
//
// Until --seconds have passed: acquire `chaos`, note start, `SET chaos:holder
// N` on the resource, hold for a drawn time while watching for the library's
// report of a loss, write (the fenced write with token 0) unless the lease
// is known to be gone, note end, release, and log one line:
//
//   N  I  start  end  0  WRITE  LEASE_END  OUTCOME  -  WEIGHT  -
//
// A fault restarts or pauses the lock nodes: every Redis call has a 200 ms
// command timeout, every client and the Redlock object have error listeners,
// and an error is said on stderr and followed by a short pause, never by an
// exit. Exit codes: 0 at the end of the run, 2 for bad flags, 1 if the log
// cannot be written.
'use strict';

const fs = require('fs');

const USAGE = `usage: worker.js --peer redlock|redis-semaphore-mutex|redis-semaphore-semaphore
  --worker N --nodes URL[,URL...] --resource URL --log FILE --seconds S
  --seed X --hold-ms MIN-MAX[,MIN-MAX...] --ttl-ms T --wait-ms W
  --script FILE [--permits P]   (--permits: redis-semaphore-semaphore only, and required there)
`;

const PEERS = ['redlock', 'redis-semaphore-mutex', 'redis-semaphore-semaphore'];

/** The lock (or semaphore) every worker of a run contends for. */
const LOCK_KEY = 'chaos';
/** The fenced resource's keys, and the holder marker, on --resource. */
const RESOURCE_KEY = 'chaos:resource';
const RESOURCE_LOG_KEY = 'chaos:resource:log';
const HOLDER_KEY = 'chaos:holder';
/** Deletes the holder mark if it is still this worker's (before a release). */
const UNMARK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/** The pause after a refusal or an error, before going round again. */
const PAUSE_MS = 20;

/**
 * Every ioredis client's options. The command timeout ends every await of a
 * Redis call while a node is paused (a paused server keeps its connection, so
 * nothing else would); it also covers commands waiting in the offline queue
 * while a restarted node is down. The reconnect delay is ioredis's default
 * (50 ms more per try) capped at 500 ms rather than 2 s, so a worker is back
 * soon after a node restarts.
 */
const CLIENT_OPTIONS = {
  commandTimeout: 200,
  connectTimeout: 500,
  maxRetriesPerRequest: 1,
  enableOfflineQueue: true,
  retryStrategy: (times) => Math.min(times * 50, 500),
};

// ---------------------------------------------------------------- arguments

function fail(message) {
  process.stderr.write(`worker.js: ${message}\n${USAGE}`);
  process.exit(2);
}

/** A non-negative integer flag value. */
function integer(flag, text) {
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(Number(text))) {
    fail(`${flag}: not a number: ${JSON.stringify(text)}`);
  }
  return Number(text);
}

function parseArgs(argv) {
  const takes = {
    '--peer': 'peer',
    '--worker': 'worker',
    '--nodes': 'nodes',
    '--resource': 'resource',
    '--log': 'log',
    '--seconds': 'seconds',
    '--seed': 'seed',
    '--hold-ms': 'holdMs',
    '--ttl-ms': 'ttlMs',
    '--wait-ms': 'waitMs',
    '--script': 'script',
    '--permits': 'permits',
  };
  const raw = {};
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    if (!Object.prototype.hasOwnProperty.call(takes, flag)) {
      fail(flag.startsWith('-') ? `unknown flag ${flag}` : `unexpected argument ${JSON.stringify(flag)}`);
    }
    if (i + 1 >= argv.length) fail(`${flag} needs a value`);
    raw[takes[flag]] = argv[i + 1];
    i += 1;
  }
  for (const [flag, name] of Object.entries(takes)) {
    if (name !== 'permits' && raw[name] === undefined) fail(`${flag} is required`);
  }
  if (!PEERS.includes(raw.peer)) fail(`unknown peer ${JSON.stringify(raw.peer)}`);
  const args = {
    peer: raw.peer,
    worker: integer('--worker', raw.worker),
    nodes: raw.nodes.split(',').filter((url) => url !== ''),
    resource: raw.resource,
    log: raw.log,
    seconds: integer('--seconds', raw.seconds),
    seed: /^[0-9]+$/.test(raw.seed) ? BigInt(raw.seed) : fail(`--seed: not a number: ${raw.seed}`),
    holdMs: raw.holdMs.split(',').map((range) => {
      const parts = range.split('-');
      if (parts.length !== 2) fail(`--hold-ms takes MIN-MAX[,MIN-MAX...], not ${raw.holdMs}`);
      const low = integer('--hold-ms', parts[0]);
      return [low, Math.max(low, integer('--hold-ms', parts[1]))];
    }),
    ttlMs: integer('--ttl-ms', raw.ttlMs),
    waitMs: integer('--wait-ms', raw.waitMs),
    script: raw.script,
    permits: raw.permits === undefined ? undefined : integer('--permits', raw.permits),
  };
  for (const url of [...args.nodes, args.resource]) {
    let parsed;
    try {
      parsed = new URL(url);
    } catch (err) {
      fail(`not a URL: ${JSON.stringify(url)}`);
    }
    if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') fail(`not a redis:// URL: ${url}`);
  }
  if (args.nodes.length === 0) fail('--nodes needs at least one URL');
  if (args.ttlMs === 0) fail('--ttl-ms must be positive');
  if (args.peer === 'redis-semaphore-semaphore') {
    if (args.permits === undefined || args.permits === 0) fail('--peer redis-semaphore-semaphore needs --permits P, P >= 1');
  } else if (args.permits !== undefined) {
    fail(`--permits is for redis-semaphore-semaphore, not ${args.peer}`);
  }
  try {
    args.scriptText = fs.readFileSync(args.script, 'utf8');
  } catch (err) {
    fail(`--script: ${err.message}`);
  }
  return args;
}

// ------------------------------------------------------------------ helpers

/** CLOCK_MONOTONIC in ns, as a BigInt. */
const monotonicNs = () => process.hrtime.bigint();

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** splitmix64 from the seed: a float in [0, 1) per call. */
function seededRandom(seed) {
  let state = BigInt.asUintN(64, seed);
  return () => {
    state = BigInt.asUintN(64, state + 0x9e3779b97f4a7c15n);
    let z = state;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    z ^= z >> 31n;
    return Number(z >> 11n) / 2 ** 53;
  };
}

/** An integer in [low, high]. */
const between = (random, low, high) => low + Math.floor(random() * (high - low + 1));

let saying = '';
let closing = false;
// A write to a stderr whose reader has gone (EPIPE) is an 'error' event on
// process.stderr: without a listener it would be an uncaught exception,
// which said on stderr again would fail again, and so on for ever. Stop
// saying things instead.
let stderrGone = false;
process.stderr.on('error', () => {
  stderrGone = true;
});
/** One line on stderr. */
function say(message) {
  if (stderrGone) return;
  try {
    process.stderr.write(`${saying}: ${message}\n`);
  } catch (err) {
    stderrGone = true;
  }
}

/** `say`, at most once a second for a repeated message of one source. */
function rateLimited(source) {
  let last = '';
  let lastAt = 0;
  return (message) => {
    if (closing) return;
    const now = Date.now();
    if (message !== last || now - lastAt >= 1000) {
      say(`${source}: ${message}`);
      last = message;
      lastAt = now;
    }
  };
}

const describe = (err) => (err && err.message ? `${err.name || 'Error'}: ${err.message}` : String(err));

/** An ioredis client to `url` with an error listener. */
function connect(Redis, url, name, clients, options = {}) {
  const client = new Redis(url, { ...CLIENT_OPTIONS, ...options });
  const report = rateLimited(name);
  client.on('error', (err) => report(describe(err)));
  clients.push(client);
  return client;
}

/**
 * Waits `ms`, or less if `lost` (a promise, or null for none) settles first.
 */
function holdFor(ms, lost) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    if (lost) {
      lost.then(() => {
        clearTimeout(timer);
        resolve();
      });
    }
  });
}

// -------------------------------------------------------------------- peers
//
// A peer is { acquire(signal) }: acquire resolves to a hold, or to a string
// (why it was refused within the wait), and rejects on an error or when
// `signal` (the end of the run) aborts it. A hold is
//   { weight, leaseEndNs, lost, isLost(), release() }
// leaseEndNs: when the lease ends by this process's CLOCK_MONOTONIC (a BigInt,
// 0n for a renewing peer); lost: a promise that resolves when the library
// reports the lease lost (null for a library without such a report);
// release(): resolves to 'released', 'lost' or 'release-failed'.

/**
 * redlock 4.2.0, one ioredis client per --nodes URL.
 *
 * Settings: those of redlock's README, "Configuration" (the example
 * constructor, one client per independent node, which is how it tells you
 * to run it; its "High-Availability Recommendations" add: at least 3
 * independent servers, an odd number):
 *   driftFactor 0.01  clock drift allowed, times the TTL (the code adds 2 ms
 *                     for Redis's expiry precision)
 *   retryCount 10     retries after the first attempt, 11 attempts in all
 *   retryDelay 200    ms between attempts
 *   retryJitter 200   up to +-200 ms added to each delay (the README's
 *                     value; the code's default is 100)
 * So one acquire waits up to 10 delays of 0-400 ms (about 2 s on average)
 * plus the attempts' round trips: the README's settings, not --wait-ms,
 * bound the wait, and --wait-ms is not used by this peer.
 *
 * Redlock 4 does not renew: the lease ends at `lock.expiration` (Date.now()
 * ms: the start of the winning attempt + TTL - drift), converted to
 * CLOCK_MONOTONIC when the acquire returns; the write is skipped once that
 * has passed. It has no report of a loss before the release. Its unlock
 * resolves when a quorum deleted our value and rejects with a LockError
 * ("Unable to fully release the lock") otherwise, whether the nodes answered
 * that the value was gone (expired, or someone else's) or did not answer:
 * the library has no distinct "not held" error, so every unlock error is
 * 'release-failed' (stderr says how many nodes failed to answer).
 */
function redlockPeer(args, clients) {
  const Redis = require('ioredis');
  const Redlock = require('redlock');
  const servers = args.nodes.map((url, i) => connect(Redis, url, `node ${i} ${url}`, clients));
  const redlock = new Redlock(servers, {
    driftFactor: 0.01,
    retryCount: 10,
    retryDelay: 200,
    retryJitter: 200,
  });
  // Redlock reports each node's failure (a timeout, a closed connection) as
  // a 'clientError' and goes on with the others.
  let clientErrors = 0;
  const report = rateLimited('redlock clientError');
  redlock.on('clientError', (err) => {
    clientErrors += 1;
    report(describe(err));
  });

  function hold(lock) {
    const nowNs = monotonicNs();
    const leaseEndNs = nowNs + BigInt(Math.round((lock.expiration - Date.now()) * 1e6));
    return {
      weight: 1,
      leaseEndNs,
      lost: null,
      isLost: () => false,
      async release() {
        const errorsBefore = clientErrors;
        try {
          await lock.unlock();
          return 'released';
        } catch (err) {
          const failed = clientErrors - errorsBefore;
          if (err instanceof Redlock.LockError) {
            say(`unlock: ${err.message} (${failed} of ${servers.length} nodes failed to answer` +
              `${failed === 0 ? '; the others no longer held our value' : ''})`);
          } else {
            say(`unlock: ${describe(err)}`);
          }
          return 'release-failed';
        }
      },
    };
  }

  return {
    acquire(signal) {
      return new Promise((resolve, reject) => {
        let settled = false;
        const onAbort = () => {
          if (settled) return;
          settled = true;
          reject(signal.reason);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        redlock.lock(LOCK_KEY, args.ttlMs).then(
          (lock) => {
            signal.removeEventListener('abort', onAbort);
            if (settled) {
              // The run ended while it was acquiring: give it back.
              lock.unlock().catch(() => {});
              return;
            }
            settled = true;
            resolve(hold(lock));
          },
          (err) => {
            signal.removeEventListener('abort', onAbort);
            if (settled) return;
            settled = true;
            // A LockError is the only rejection of lock(): no quorum in its
            // attempts (held by another, or nodes failing).
            if (err instanceof Redlock.LockError) resolve(err.message);
            else reject(err);
          },
        );
      });
    },
  };
}

/**
 * redis-semaphore 5.8.0: its Mutex (key `mutex:chaos`) or, with --permits P,
 * its MultiSemaphore (key `semaphore:chaos`) of P, on one ioredis client to
 * the first node. lockTimeout = --ttl-ms, acquireTimeout = --wait-ms, and its
 * defaults otherwise: retryInterval 10 ms, no attempts limit, and a refresh
 * every lockTimeout * 0.8 ms, which renews the lease (so LEASE_END is 0).
 *
 * A loss is learned from `onLockLost`, which the refresh calls when the
 * lease was no longer ours (a refresh that fails with an error is not a
 * loss: it tries again at the next interval, and the error escapes as an
 * unhandled rejection from its setInterval callback, which the process's
 * handler below says on stderr; Node 20 would otherwise exit). Its release() deletes our
 * value if it is still there and returns nothing either way: it cannot say
 * the lock was gone, so the outcome is 'lost' only when onLockLost came
 * first, 'release-failed' when release() rejects (a timeout, a closed
 * connection), else 'released'.
 *
 * MultiSemaphore takes `permits` of the semaphore as one holder, all or
 * none, so a hold's weight is drawn per acquisition: 1 or 2 (1 when P is 1),
 * as our own workers draw theirs. A new object is made per acquisition, as
 * its permits are fixed when it is made.
 */
function redisSemaphorePeer(args, clients, random) {
  const Redis = require('ioredis');
  const { Mutex, MultiSemaphore } = require('redis-semaphore');
  const client = connect(Redis, args.nodes[0], `node 0 ${args.nodes[0]}`, clients);

  return {
    async acquire(signal) {
      let lostReported = false;
      let reportLost;
      const lost = new Promise((resolve) => {
        reportLost = resolve;
      });
      const options = {
        lockTimeout: args.ttlMs,
        acquireTimeout: args.waitMs,
        onLockLost(err) {
          lostReported = true;
          say(`onLockLost: ${describe(err)}`);
          reportLost();
        },
      };
      let weight = 1;
      let lock;
      if (args.permits === undefined) {
        lock = new Mutex(client, LOCK_KEY, options);
      } else {
        weight = between(random, 1, Math.min(args.permits, 2));
        lock = new MultiSemaphore(client, LOCK_KEY, args.permits, weight, options);
      }
      // tryAcquire: false when not acquired within acquireTimeout; rejects
      // on a Redis error and when `signal` aborts.
      const acquired = await lock.tryAcquire(signal);
      if (!acquired) {
        // Not ours: make sure no refresh timer was left behind.
        lock.stopRefresh();
        return `not acquired within ${args.waitMs} ms`;
      }
      return {
        weight,
        leaseEndNs: 0n,
        lost,
        isLost: () => lostReported,
        async release() {
          try {
            await lock.release();
          } catch (err) {
            say(`release: ${describe(err)}`);
            lock.stopRefresh();
            return lostReported ? 'lost' : 'release-failed';
          }
          return lostReported ? 'lost' : 'released';
        },
      };
    },
  };
}

// --------------------------------------------------------------------- main

async function run(args) {
  saying = `worker.js ${args.peer} ${args.worker}`;
  const random = seededRandom(args.seed);
  // The log: truncated now, then one write() per line.
  const log = fs.openSync(args.log, 'w');
  const clients = [];
  const Redis = require('ioredis');
  const peer =
    args.peer === 'redlock' ? redlockPeer(args, clients) : redisSemaphorePeer(args, clients, random);
  // The resource is never faulted: the 2 s its own workers give it, so a
  // slow moment of this machine's is not a failed write.
  const resource = connect(Redis, args.resource, `resource ${args.resource}`, clients, {
    commandTimeout: 2000,
  });

  const endsAt = monotonicNs() + BigInt(args.seconds) * 1000000000n;
  const stop = new AbortController();
  const stopTimer = setTimeout(
    () => stop.abort(new Error('the run is over')),
    Math.min(args.seconds * 1000, 2 ** 31 - 1),
  );

  let index = 0;
  while (monotonicNs() < endsAt && !stop.signal.aborted) {
    // 1. Acquire.
    let held;
    try {
      held = await peer.acquire(stop.signal);
    } catch (err) {
      if (stop.signal.aborted) break;
      say(`acquire: ${describe(err)}`);
      await sleep(PAUSE_MS);
      continue;
    }
    if (typeof held === 'string') {
      say(`acquire: refused: ${held}`);
      await sleep(PAUSE_MS);
      continue;
    }
    // 2. start.
    const start = monotonicNs();
    const acquisition = index;
    index += 1;
    // 3. The holder marker.
    try {
      await resource.set(HOLDER_KEY, String(args.worker));
    } catch (err) {
      say(`SET ${HOLDER_KEY}: ${describe(err)}`);
    }
    // 4. Hold, watching for the library's report of a loss.
    const [low, high] = args.holdMs[between(random, 0, args.holdMs.length - 1)];
    await holdFor(between(random, low, high), held.lost);
    // 5. The fenced write, unless the lease is known to be gone.
    let write;
    if (held.isLost() || (held.leaseEndNs !== 0n && monotonicNs() >= held.leaseEndNs)) {
      write = 'skipped';
    } else {
      try {
        const reply = await resource.eval(
          args.scriptText, 2, RESOURCE_KEY, RESOURCE_LOG_KEY, '0', `${args.worker}:${acquisition}`,
        );
        if (Array.isArray(reply) && reply.length === 2) {
          write = `${Number(reply[0]) === 1 ? 'accepted' : 'refused'}:${reply[1]}`;
        } else {
          say(`write: unexpected reply ${JSON.stringify(reply)}`);
          write = 'failed';
        }
      } catch (err) {
        say(`write: ${describe(err)}`);
        write = 'failed';
      }
    }
    // 6. end, then release (the mark first: it names a holder).
    const end = monotonicNs();
    try {
      await resource.eval(UNMARK, 1, HOLDER_KEY, String(args.worker));
    } catch (err) {
      say(`unmark: ${describe(err)}`);
    }
    const outcome = await held.release();
    const leaseEnd = held.leaseEndNs !== 0n && held.leaseEndNs < end ? held.leaseEndNs : 0n;
    // 7. One line, one write().
    fs.writeSync(
      log,
      `${args.worker}\t${acquisition}\t${start}\t${end}\t0\t${write}\t${leaseEnd}\t${outcome}\t-\t${held.weight}\t-\n`,
    );
  }

  clearTimeout(stopTimer);
  closing = true;
  fs.closeSync(log);
  // disconnect(), not quit(): quit waits for a reply a paused node never
  // sends. Commands still pending fail with "Connection is closed".
  for (const client of clients) client.disconnect();
  // The last resort: a redlock acquire cut short by the end of the run goes
  // on with its retries (timers) for a while; don't wait for it.
  setTimeout(() => process.exit(0), 300).unref();
}

// The libraries' timers call async code nobody awaits (redis-semaphore's
// refresh rejects when a node times out): say it, never die of it.
process.on('unhandledRejection', (reason) => {
  if (!closing) say(`unhandled rejection: ${describe(reason)}`);
});
process.on('uncaughtException', (err) => {
  say(`uncaught exception: ${err && err.stack ? err.stack : describe(err)}`);
});

const args = parseArgs(process.argv.slice(2));
run(args).then(
  () => {
    process.exitCode = 0;
  },
  (err) => {
    say(`fatal: ${err && err.stack ? err.stack : describe(err)}`);
    process.exit(1);
  },
);
