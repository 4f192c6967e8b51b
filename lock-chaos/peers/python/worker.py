"""Chaos worker for the Python peers: python-redis-lock and pottery's Redlock.

It follows the protocol of lock-chaos/peers/README.md:

    worker.py --peer NAME --worker N --nodes URL[,URL...] --resource URL
              --log FILE --seconds S --seed X --hold-ms MIN-MAX[,MIN-MAX...]
              --ttl-ms T --wait-ms W --script FILE [--permits P]

Peers (`--peer`):

- `python-redis-lock` (PyPI python-redis-lock 4.0.1): a single-instance lock
  on the first node, `redis_lock.Lock(conn, 'chaos', expire=...,
  auto_renewal=True)`, the setting its docs recommend for work that may
  outlast the expiry. It renews in a daemon thread every expire*2/3 s and has
  no way to tell the application that a renewal failed (see `hold`), so a
  loss shows only at the release, as `NotAcquired`. It renews, so the lease
  end it logs is 0.
- `pottery` (PyPI pottery 3.0.1): `Redlock(key='chaos', masters={one client
  per node}, auto_release_time=T/1000)` with its other defaults. It does not
  renew on its own and does not expose the validity it computes, so the lease
  ends, by this worker's clock, at the time the acquire's winning attempt
  began plus auto_release_time, and the write is skipped once that has passed.

Every Redis call is guarded: a fault pauses, restarts or blackholes the lock
nodes, and the worker must neither crash nor hang. An error is said on
stderr, the worker pauses about 50 ms and goes on.
"""

import argparse
import logging
import math
import os
import random
import sys
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

PEERS = ("python-redis-lock", "pottery")
# How long to pause after an error before going round again.
ERROR_PAUSE_S = 0.05
# Every client: short socket timeouts, so that a paused or blackholed server
# costs a bounded, short time.
SOCKET_TIMEOUT_S = 0.2
SOCKET_CONNECT_TIMEOUT_S = 0.5
RESOURCE_TIMEOUT_S = 2.0

RESOURCE_KEY = "chaos:resource"
RESOURCE_LOG_KEY = "chaos:resource:log"
HOLDER_KEY = "chaos:holder"
# Deletes the holder mark if it is still this worker's (before a release).
UNMARK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
LOCK_NAME = "chaos"


def say(worker, message):
    """One line on stderr, with one write so that workers' lines do not mix."""
    try:
        os.write(2, f"python-worker {worker}: {message}\n".encode("utf-8", "replace"))
    except OSError:
        pass


def describe(error):
    return f"{type(error).__module__}.{type(error).__qualname__}: {error}"


def hold_ranges(text):
    ranges = []
    for part in text.split(","):
        low, sep, high = part.partition("-")
        if not sep:
            raise argparse.ArgumentTypeError(f"--hold-ms takes MIN-MAX[,MIN-MAX...], not {text}")
        try:
            low, high = int(low), int(high)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--hold-ms takes MIN-MAX[,MIN-MAX...], not {text}")
        if low < 0 or high < 0:
            raise argparse.ArgumentTypeError(f"--hold-ms takes MIN-MAX[,MIN-MAX...], not {text}")
        ranges.append((low, max(low, high)))
    return ranges


def non_negative(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"not a number: {text}")
    return value


def positive(text):
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def url_list(text):
    urls = [url for url in text.split(",") if url]
    if not urls:
        raise argparse.ArgumentTypeError("--nodes takes URL[,URL...]")
    return urls


def parse_args(argv):
    # allow_abbrev=False: a misspelt or shortened flag is an unknown flag
    # (exit 2), not silently taken for another.
    parser = argparse.ArgumentParser(prog="worker.py", allow_abbrev=False)
    parser.add_argument("--peer", required=True, choices=PEERS)
    parser.add_argument("--worker", required=True, type=non_negative)
    parser.add_argument("--nodes", required=True, type=url_list)
    parser.add_argument("--resource", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--seconds", required=True, type=non_negative)
    parser.add_argument("--seed", required=True, type=non_negative)
    parser.add_argument("--hold-ms", required=True, type=hold_ranges)
    parser.add_argument("--ttl-ms", required=True, type=positive)
    parser.add_argument("--wait-ms", required=True, type=non_negative)
    parser.add_argument("--script", required=True)
    parser.add_argument("--permits", type=positive)
    args = parser.parse_args(argv)
    # Neither peer has a semaphore: a lock is one permit of one.
    if args.permits is not None and args.permits != 1:
        parser.error(f"--peer {args.peer} has no semaphore: --permits {args.permits}")
    return args


def client(url, socket_timeout=SOCKET_TIMEOUT_S):
    # retry: none. redis-py 8 gives `Redis(host=..., port=...)` ten retries
    # with backoff on connection errors and timeouts, but `Redis.from_url` none;
    # say it here so that a change in redis-py cannot change it. Retries would
    # stretch a 0.2 s timeout into seconds on a paused server, and would send
    # `SET NX` and the fenced `EVAL`, neither idempotent, twice.
    return redis.Redis.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=SOCKET_CONNECT_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
    )


class OneLine(logging.Formatter):
    """A log record on one line: an exception's type and text, no traceback."""

    def format(self, record):
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({describe(record.exc_info[1])})"
        return self._style._fmt % {"name": record.name, "message": text}


class Section:
    """What one acquisition did, for its log line."""

    def __init__(self):
        self.lease_end_ns = 0  # 0: the peer renews, or the lease outlived `end`
        # The library reported the loss before the write (step 5). Neither
        # peer has such a report; kept so that step 5 reads as the protocol.
        self.lost = False


class PythonRedisLock:
    """python-redis-lock 4.0.1 on the first node."""

    def __init__(self, args):
        import redis_lock

        self.redis_lock = redis_lock
        self.worker = args.worker
        # `expire` is in whole seconds (Lock.__init__ does int(expire)): the
        # smallest whole number of seconds not below --ttl-ms, so that the
        # lease is never shorter than asked for (600 ms -> 1 s).
        self.expire = max(1, math.ceil(args.ttl_ms / 1000))
        # acquire(timeout=...) is whole seconds too (int(timeout)), and a
        # timeout that int() makes 0 means no timeout at all (it then waits
        # with BLPOP for `expire` at a time, without end), so at least 1 s.
        # Its own check, TimeoutTooLarge, forbids a timeout above `expire`;
        # 4.0.1 applies it only without auto_renewal, but keep within it so
        # that the acquire stays valid either way.
        self.timeout = min(max(1, args.wait_ms // 1000), self.expire)
        # --wait-ms 0: one try, no wait.
        self.blocking = args.wait_ms > 0
        # The wait is a BLPOP of up to `timeout` on this connection, so its
        # socket timeout must be longer (with 0.2 s, every wait fails as a
        # timeout and the lock is polled instead): a second above it, which
        # also bounds the renewals on a paused or cut-off server.
        self.conn = client(args.nodes[0], socket_timeout=self.timeout + 1)
        self.lock = None

    def acquire(self):
        # A new Lock each time: its id (the value it sets) is drawn once per
        # Lock, and acquire() refuses (AlreadyAcquired) while the key holds
        # that id, as after a release that failed.
        # auto_renewal=True, as the docs recommend for work that may outlast
        # the expiry: a daemon thread extends the key every expire*2/3 s.
        # The wait is a BLPOP on the lock's signal list with the timeout
        # above.
        lock = self.redis_lock.Lock(self.conn, LOCK_NAME, expire=self.expire, auto_renewal=True)
        if lock.acquire(blocking=self.blocking, timeout=self.timeout if self.blocking else None):
            self.lock = lock
            return True
        return False

    def hold(self, seconds, section):
        # The loss is not reported: the renewal thread calls extend(), which
        # raises NotAcquired when the key is gone or holds another id, and
        # passes on any redis error (a timeout on a paused node); nothing
        # catches either, so the thread ends (threading.excepthook says it on
        # stderr), renewals stop for good, and the Lock is not told. There is
        # no callback, event or flag to watch: the loss shows at release().
        time.sleep(seconds)

    def may_write(self, section):
        return True  # it renews: no lease end of its own to check

    def release(self):
        lock, self.lock = self.lock, None
        try:
            lock.release()
        except self.redis_lock.NotAcquired as error:
            say(self.worker, f"release: {describe(error)}")
            return "lost"
        except Exception as error:  # redis errors, and anything else
            say(self.worker, f"release failed: {describe(error)}")
            return "release-failed"
        return "released"


def attempt_timed(Redlock):
    """pottery's Redlock, noting on CLOCK_MONOTONIC when each attempt begins.

    Redlock.acquire(blocking=True, timeout=W) makes attempts until one wins a
    quorum, pausing up to 0.2 s between them; with W above the TTL, the call
    can begin longer than a TTL before the lease that it won. pottery measures
    the validity from the start of the winning attempt (its ContextTimer in
    _acquire_masters) but does not expose it, so note that start here: its
    acquire() calls the attempt through the private alias
    `_Redlock__acquire_masters` (pottery 3.0.1). Nothing else changes.
    """

    class AttemptTimedRedlock(Redlock):
        __qualname__ = "AttemptTimedRedlock"  # as pottery's log lines name it

        def _Redlock__acquire_masters(self, **kwargs):
            self.attempt_ns = time.monotonic_ns()
            return Redlock._acquire_masters(self, **kwargs)

    return AttemptTimedRedlock


class Pottery:
    """pottery 3.0.1's Redlock on every node."""

    def __init__(self, args):
        from pottery import Redlock, ReleaseUnlockedLock

        self.ReleaseUnlockedLock = ReleaseUnlockedLock
        self.worker = args.worker
        self.masters = [client(url) for url in args.nodes]
        # auto_release_time is in seconds, a float (pottery 3 sets the keys
        # with px=int(auto_release_time * 1000)).
        self.auto_release_s = args.ttl_ms / 1000
        self.ttl_ns = args.ttl_ms * 1_000_000
        self.Redlock = attempt_timed(Redlock)
        self.lock = None
        # acquire(timeout=...) is in seconds: it retries (after a random
        # pause of up to 0.2 s) until that much time has gone.
        self.timeout = args.wait_ms / 1000
        self.began_ns = 0

    def acquire(self):
        # A new Redlock for each acquisition, as its docs advise ("It's
        # safest to instantiate a new Redlock object every time you need to
        # protect your resource"); the clients are the same.
        self.lock = self.Redlock(key=LOCK_NAME, masters=set(self.masters), auto_release_time=self.auto_release_s)
        self.lock.attempt_ns = 0
        self.began_ns = time.monotonic_ns()
        if self.timeout == 0:
            return self.lock.acquire(blocking=False)  # --wait-ms 0: one try
        return self.lock.acquire(blocking=True, timeout=self.timeout)

    def hold(self, seconds, section):
        # pottery does not renew and reports nothing while the lock is held.
        # The lease: auto_release_time from the start of the attempt that won
        # it (the keys were set after that moment). Without the hook, from the
        # start of the acquire call, which is earlier and so still safe.
        # Less pottery's allowance for clock drift (1% of the TTL and 2 ms),
        # as the validity it computes and every other Redlock's is.
        began_ns = self.lock.attempt_ns or self.began_ns
        drift_ns = self.ttl_ns // 100 + 2_000_000
        section.lease_end_ns = began_ns + self.ttl_ns - drift_ns
        time.sleep(seconds)

    def may_write(self, section):
        return time.monotonic_ns() < section.lease_end_ns

    def release(self):
        try:
            self.lock.release()
        except self.ReleaseUnlockedLock as error:
            errors = list(getattr(error, "redis_errors", ()) or ())
            say(self.worker, f"release: ReleaseUnlockedLock ({len(errors)} redis errors)")
            # pottery raises this one error whenever fewer than a quorum of
            # masters deleted our key, counting a master that failed (a
            # timeout on a paused node) as one that did not. Only when every
            # master answered does it say that the lock was no longer held;
            # with an error among them, it may have been held to the end
            # (held on two of three, one of which is unreachable at release):
            # the release failed, the loss is not known.
            if errors:
                return "release-failed"
            return "lost"
        except Exception as error:
            say(self.worker, f"release failed: {describe(error)}")
            return "release-failed"
        return "released"


def main(argv):
    args = parse_args(argv)
    worker = args.worker

    # A renewal thread of python-redis-lock that dies of an exception would
    # print a whole traceback; one line says the same.
    def thread_died(hook):
        say(worker, f"thread {hook.thread.name if hook.thread else '?'} ended: "
                    f"{hook.exc_type.__module__}.{hook.exc_type.__qualname__}: {hook.exc_value}")

    threading.excepthook = thread_died
    # pottery logs every redis error it catches with logger.exception (a
    # traceback each); keep its lines, one each, with the error's type.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine(f"python-worker {worker}: %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.WARNING)

    try:
        with open(args.script, encoding="utf-8") as file:
            script_text = file.read()
    except OSError as error:
        say(worker, f"--script: {error}")
        return 2
    # The log starts empty; each line is one write on an O_APPEND descriptor.
    try:
        log = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    except OSError as error:
        say(worker, f"--log: {error}")
        return 2

    rng = random.Random(args.seed)
    # The resource is never faulted: the 2 s its own workers give it, so a
    # slow moment of this machine's is not a failed write.
    resource = client(args.resource, socket_timeout=RESOURCE_TIMEOUT_S)
    fenced_write = resource.register_script(script_text)
    peer = PythonRedisLock(args) if args.peer == "python-redis-lock" else Pottery(args)

    ends_at = time.monotonic() + args.seconds
    index = 0
    while time.monotonic() < ends_at:
        # 1. Acquire.
        try:
            acquired = peer.acquire()
        except Exception as error:
            say(worker, f"acquire: {describe(error)}")
            time.sleep(ERROR_PAUSE_S)
            continue
        if not acquired:
            say(worker, "acquire: not granted within the wait")
            time.sleep(ERROR_PAUSE_S)
            continue
        # 2. The section starts as soon as the acquire returns.
        start_ns = time.monotonic_ns()
        section = Section()
        # 3. Say who holds it, for the harness.
        try:
            resource.set(HOLDER_KEY, worker)
        except Exception as error:
            say(worker, f"holder marker: {describe(error)}")
        # 4. Hold: one range at random, then a whole number of ms in it.
        low, high = rng.choice(args.hold_ms)
        hold_ms = rng.randint(low, high)
        try:
            peer.hold(hold_ms / 1000, section)
        except Exception as error:
            say(worker, f"hold: {describe(error)}")
        # 5. The fenced write, unless the lease is known to be gone.
        if section.lost or not peer.may_write(section):
            write = "skipped"
        else:
            try:
                accepted, seq = fenced_write(keys=[RESOURCE_KEY, RESOURCE_LOG_KEY], args=["0", f"{worker}:{index}"])
                write = f"{'accepted' if int(accepted) == 1 else 'refused'}:{int(seq)}"
            except Exception as error:
                say(worker, f"fenced write: {describe(error)}")
                write = "failed"
        # 6. End, then release (the mark first: it names a holder).
        end_ns = time.monotonic_ns()
        try:
            resource.eval(UNMARK, 1, HOLDER_KEY, worker)
        except Exception as error:
            say(worker, f"unmark: {describe(error)}")
        outcome = peer.release()
        lease_end_ns = section.lease_end_ns if 0 < section.lease_end_ns < end_ns else 0
        # 7. One line, one write.
        fields = (worker, index, start_ns, end_ns, 0, write, lease_end_ns, outcome, "-", 1, "-")
        line = "\t".join(str(field) for field in fields) + "\n"
        os.write(log, line.encode())
        index += 1
        if outcome != "released":
            time.sleep(ERROR_PAUSE_S)
    os.close(log)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # A renewal thread (python-redis-lock) or a bailed-out executor thread
    # (pottery) stuck on a paused server must not keep the process alive.
    os._exit(code)
