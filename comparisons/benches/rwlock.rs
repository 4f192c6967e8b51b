//! Read-write locks, measured in one run on one local server:
//!
//! 1. **Read acquire+release** cycles per second of shared holds of one
//!    read-write lock (readers share it, so it is never full), with 1 and
//!    32 tasks on one connection, against the floor of the lock benchmarks
//!    (a raw `SET NX PX` and a raw `EVALSHA` compare-and-delete, per task
//!    key: two round trips) and against our plain lock's cycle (per task
//!    key) through the same engine. *scripts* is the read-write lock's
//!    acquire and release scripts sent raw.
//! 2. **Server time** per cycle of a read's scripts sent raw by one task,
//!    with 1 and with 64 reads held beside (`INFO commandstats`).
//! 3. **Write handoff**: 6 writers of 20 to 60 ms each on one read-write
//!    lock; the gap from the start of a release to the next write's grant
//!    (p50, p99), beside the same for our plain lock and a `PING` round
//!    trip measured in the same run.
//!
//! Run with `cargo xtask bench`; `BENCH_SECONDS` (default 2) is the length
//! of one measurement, each throughput figure the median of `BENCH_ROUNDS`
//! (default 3).

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_comparisons::{
    handoff_gaps, peer_algorithm_cycles, print_gaps, print_server_time, script_cycles,
    single_node_manager, try_take_cycles, Bench,
};
use lock_core::strategy::scripts::rw::{ACQUIRE, RELEASE};
use lock_core::strategy::NodeClient;
use lock_core::{ClientKind, LockGuard, LockManager};
use lock_testkit::bench::lock_floor;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let bench = Bench::start();
    let length = bench.length;
    println!(
        "| client | tasks | floor (cycles/s) | scripts (cycles/s) | reads (cycles/s) | plain lock (cycles/s) | redis-semaphore's algorithm, raw (cycles/s) | reads / floor | reads / plain lock | scripts / that algorithm |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let raw = &bench.raw(kind).await;
        let locks = &single_node_manager(kind, &bench.server, Duration::from_secs(30)).await;
        for tasks in [1usize, 32] {
            let [floor, scripts, reads, plain, algorithm] = bench
                .medians(|| async move {
                    [
                        lock_floor(Arc::clone(raw), tasks, length).await,
                        scripts(Arc::clone(raw), tasks, length).await,
                        reads(locks, tasks, length).await,
                        plain(locks, tasks, length).await,
                        peer_algorithm_cycles(Arc::clone(raw), tasks, length).await,
                    ]
                })
                .await;
            println!(
                "| {kind} | {tasks} | {floor:.0} | {scripts:.0} | {reads:.0} | {plain:.0} | {algorithm:.0} | {:.2} | {:.2} | {:.2} |",
                reads / floor,
                reads / plain,
                scripts / algorithm,
            );
        }
    }
    println!();
    let argv = ["r", "30000", "2000", "0", "w", "0"];
    let cost = (&ACQUIRE, &argv[..], 1);
    print_server_time(&bench, "reads", &keys("lock:{cost-rw}"), cost, &RELEASE).await;
    println!();
    println!("| waiting | gap p50 (ms) | gap p99 (ms) | handoffs |");
    println!("|---|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let raw = bench.raw(kind).await;
        print_gaps(
            &format!("PING round trip, {kind}"),
            pings(raw.as_ref()).await,
        );
        let locks = single_node_manager(kind, &bench.server, Duration::from_secs(10)).await;
        let span = length.max(Duration::from_secs(3));
        let writes = handoffs(&locks, span, Hold::Write).await;
        print_gaps(&format!("read-write lock, writers, {kind}"), writes);
        let plain = handoffs(&locks, span, Hold::Plain).await;
        print_gaps(&format!("plain lock, {kind}"), plain);
    }
}

/// The read-write lock's keys at `base`, as its acquire takes them.
fn keys(base: &str) -> [String; 6] {
    [
        base.to_owned(),
        format!("{base}:held"),
        format!("{base}:slots"),
        format!("{base}:fence"),
        format!("{base}:queue"),
        format!("{base}:waiters"),
    ]
}

/// The read-write lock's acquire and release scripts sent raw, each task
/// with its own hold id, all on one lock.
async fn scripts(node: Arc<dyn NodeClient>, tasks: usize, length: Duration) -> f64 {
    let keys = keys("lock:{raw-rw}");
    let argv = ["r", "30000", "2000", "0", "w", "0"];
    script_cycles(node, tasks, length, &keys, (&ACQUIRE, &argv), &RELEASE).await
}

/// `RwLock::try_read` + `release` through the engine, every task on one
/// lock.
async fn reads(locks: &LockManager, tasks: usize, length: Duration) -> f64 {
    let lock = locks.rw_lock("config").expect("rw lock");
    try_take_cycles(tasks, length, "readers share", move |_| {
        let lock = lock.clone();
        async move { lock.try_read().await }
    })
    .await
}

/// `LockManager::try_acquire` + `release`, each task on a lock of its own.
async fn plain(locks: &LockManager, tasks: usize, length: Duration) -> f64 {
    let names: Arc<[String]> = (0..tasks).map(|task| format!("plain-{task}")).collect();
    let locks = locks.clone();
    try_take_cycles(tasks, length, "its own lock", move |task| {
        let (locks, names) = (locks.clone(), Arc::clone(&names));
        async move { locks.try_acquire(&names[task]).await }
    })
    .await
}

/// 200 `PING` round trips, in ms.
async fn pings(node: &dyn NodeClient) -> Vec<f64> {
    let mut times = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        node.command("PING", &[]).await.expect("PING");
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times
}

#[derive(Clone, Copy)]
enum Hold {
    /// The read-write lock's exclusive hold.
    Write,
    /// The plain lock of the same name.
    Plain,
}

/// Six holders of 20 to 60 ms each: the gaps, in ms, from the start of a
/// release to the next grant.
async fn handoffs(locks: &LockManager, length: Duration, hold: Hold) -> Vec<f64> {
    let name = match hold {
        Hold::Write => "handoff-rw",
        Hold::Plain => "handoff-plain",
    };
    let lock = locks.rw_lock(name).expect("rw lock");
    let locks = locks.clone();
    handoff_gaps(length, move |options| {
        let (locks, lock) = (locks.clone(), lock.clone());
        async move {
            match hold {
                Hold::Write => lock.write_with(&options).await.map(LockGuard::from),
                Hold::Plain => locks.acquire_with(name, &options).await,
            }
        }
    })
    .await
}
