"""python-redis-lock beside our locks: the handoff scenario of
comparisons/benches/handoff.rs, on the same server in the same run.

8 threads contend for one lock; the holder keeps it 20 to 60 ms and does
not compete again until another thread has acquired. Prints one JSON object:
the gaps from the start of a release to the next acquire (ms), the
acquisitions, the seconds measured, the PINGs sent for the floors, and
this client's PING round trip (p50), hot and after an idle 20 to 60 ms.

Usage: python3 handoff.py PORT SECONDS, or python3 handoff.py PORT x<N>
[floors] for the first N gaps (a criterion sample), with the floors only
when asked.
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
    port, span = int(sys.argv[1]), sys.argv[2]
    # `x<N>`: until N gaps (a criterion sample); else a number of seconds.
    wanted = int(span[1:]) if span.startswith("x") else None
    seconds = 3600.0 if wanted is not None else float(span)
    with_floors = len(sys.argv) > 3 and sys.argv[3] == "floors"
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
    pings, idle = [], []
    for _ in range(500 if with_floors else 0):
        sent = time.perf_counter()
        conn.ping()
        pings.append((time.perf_counter() - sent) * 1e3)
    pings.sort()
    # The same after an idle 20 to 60 ms each, as a holder's release is.
    for _ in range(60 if with_floors else 0):
        time.sleep(random.uniform(0.020, 0.060))
        sent = time.perf_counter()
        conn.ping()
        idle.append((time.perf_counter() - sent) * 1e3)
    idle.sort()

    threads = [threading.Thread(target=contend) for _ in range(TASKS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        with guard:
            if wanted is not None and len(state["gaps"]) >= wanted:
                break
        time.sleep(0.005)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    report = {
        "gaps_ms": state["gaps"][:wanted] if wanted is not None else state["gaps"],
        "acquisitions": state["acquisitions"],
        "seconds": elapsed,
        "pings": len(pings) + len(idle),
    }
    if with_floors:
        report["ping_p50_ms"] = pings[len(pings) // 2]
        report["idle_ping_p50_ms"] = idle[len(idle) // 2]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
