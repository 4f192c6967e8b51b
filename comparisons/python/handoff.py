"""python-redis-lock beside our locks: the handoff scenario of
comparisons/benches/handoff.rs, on the same server in the same run.

8 threads contend for one lock; the holder keeps it 20 to 60 ms and does
not compete again until another thread has acquired. Prints one JSON object:
the gaps from the start of a release to the next acquire (ms), the
acquisitions, the seconds measured and this client's PING round trip (p50), hot and after an idle 20 to 60 ms.

Usage: python3 handoff.py PORT SECONDS
"""

import json
import random
import sys
import threading
import time

import redis
import redis_lock

TASKS = 8


def main():
    port, seconds = int(sys.argv[1]), float(sys.argv[2])
    guard = threading.Lock()
    state = {"release_started": None, "gaps": [], "acquisitions": 0}
    stop = threading.Event()

    def acquired():
        with guard:
            if state["release_started"] is not None:
                state["gaps"].append((time.perf_counter() - state["release_started"]) * 1e3)
                state["release_started"] = None
            state["acquisitions"] += 1
            return state["acquisitions"]

    def contend():
        # Its own connection, as a process of its own would have.
        conn = redis.Redis(host="127.0.0.1", port=port)
        while not stop.is_set():
            lock = redis_lock.Lock(conn, "peer-handoff", expire=10)
            if not lock.acquire(blocking=True, timeout=1):
                continue
            mine = acquired()
            time.sleep(random.uniform(0.020, 0.060))
            with guard:
                state["release_started"] = time.perf_counter()
            lock.release()
            while not stop.is_set():
                with guard:
                    if state["acquisitions"] > mine:
                        break
                time.sleep(0.001)

    # The floor: one PING round trip on this client, p50 of 500.
    conn = redis.Redis(host="127.0.0.1", port=port)
    pings = []
    for _ in range(500):
        sent = time.perf_counter()
        conn.ping()
        pings.append((time.perf_counter() - sent) * 1e3)
    pings.sort()
    # The same after an idle 20 to 60 ms each, as a holder's release is.
    idle = []
    for _ in range(60):
        time.sleep(random.uniform(0.020, 0.060))
        sent = time.perf_counter()
        conn.ping()
        idle.append((time.perf_counter() - sent) * 1e3)
    idle.sort()

    threads = [threading.Thread(target=contend) for _ in range(TASKS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    print(json.dumps({
        "gaps_ms": state["gaps"],
        "acquisitions": state["acquisitions"],
        "seconds": elapsed,
        "ping_p50_ms": pings[len(pings) // 2],
        "idle_ping_p50_ms": idle[len(idle) // 2],
    }))


if __name__ == "__main__":
    main()
