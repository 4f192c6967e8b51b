//! Read-write locks, measured in one run on one local server:
//!
//! 1. **Read acquire+release** cycles per second of shared holds of one
//!    read-write lock (readers share it, so it is never full), with 1 and
//!    32 tasks on one connection, against the floor of the lock benchmarks
//!    (a raw `SET NX PX` and a raw `EVALSHA` compare-and-delete, per task
//!    key: two round trips) and against our plain lock's cycle (per task
//!    key) through the same engine. *scripts* is the read-write lock's
//!    acquire and release scripts sent raw.
//! 2. **Write handoff**: 6 writers of 20 to 60 ms each on one read-write
//!    lock; the gap from the start of a release to the next write's grant
//!    (p50, p99), beside the same for our plain lock and a `PING` round
//!    trip measured in the same run.
//!
//! Run with `cargo xtask bench`; `BENCH_SECONDS` (default 2) is the length
//! of one measurement, each throughput figure the median of `BENCH_ROUNDS`
//! (default 3).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_comparisons::{print_gaps, single_node_manager};
use lock_core::strategy::scripts::rw::{ACQUIRE, RELEASE};
use lock_core::strategy::{self, NodeClient};
use lock_core::{AcquireOptions, ClientKind, ConnectOptions, LockManager};
use lock_testkit::bench::{cycles_per_second, env_number, lock_floor, median};
use lock_testkit::RedisServer;
use rand::Rng;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(measure());
}

async fn measure() {
    let length = Duration::from_secs(env_number("BENCH_SECONDS", 2));
    let rounds = env_number("BENCH_ROUNDS", 3).max(1);
    let server = RedisServer::start().expect("start redis-server");
    let url = server.url();
    println!(
        "one redis-server on 127.0.0.1:{}, {length:?} per measurement, median of {rounds}",
        server.port()
    );
    println!();
    println!(
        "| client | tasks | floor (cycles/s) | scripts (cycles/s) | reads (cycles/s) | plain lock (cycles/s) | reads / floor | reads / plain lock |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let raw = strategy::connect(kind, &url, ConnectOptions::default())
            .await
            .expect("connect");
        let locks = single_node_manager(kind, &server, Duration::from_secs(30)).await;
        for tasks in [1usize, 32] {
            let mut columns: [Vec<f64>; 4] = Default::default();
            for _ in 0..rounds {
                columns[0].push(lock_floor(Arc::clone(&raw), tasks, length).await);
                columns[1].push(scripts(Arc::clone(&raw), tasks, length).await);
                columns[2].push(reads(&locks, tasks, length).await);
                columns[3].push(plain(&locks, tasks, length).await);
            }
            let [floor, scripts, reads, plain] = columns.map(median);
            println!(
                "| {kind} | {tasks} | {floor:.0} | {scripts:.0} | {reads:.0} | {plain:.0} | {:.2} | {:.2} |",
                reads / floor,
                reads / plain,
            );
        }
    }
    println!();
    println!("| waiting | gap p50 (ms) | gap p99 (ms) | handoffs |");
    println!("|---|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let raw = strategy::connect(kind, &url, ConnectOptions::default())
            .await
            .expect("connect");
        print_gaps(
            &format!("PING round trip, {kind}"),
            pings(raw.as_ref()).await,
        );
        let locks = single_node_manager(kind, &server, Duration::from_secs(10)).await;
        let span = length.max(Duration::from_secs(3));
        let writes = handoff_gaps(&locks, span, Hold::Write).await;
        print_gaps(&format!("read-write lock, writers, {kind}"), writes);
        let plain = handoff_gaps(&locks, span, Hold::Plain).await;
        print_gaps(&format!("plain lock, {kind}"), plain);
    }
}

/// The read-write lock's acquire and release scripts sent raw, each task
/// with its own hold id, all on one lock.
async fn scripts(node: Arc<dyn NodeClient>, tasks: usize, length: Duration) -> f64 {
    let base = "lock:{raw-rw}".to_owned();
    let keys: Arc<[String; 5]> = Arc::new([
        base.clone(),
        format!("{base}:modes"),
        format!("{base}:fence"),
        format!("{base}:queue"),
        format!("{base}:waiters"),
    ]);
    let ids: Arc<[String]> = (0..tasks)
        .map(|task| format!("0123456789abcdef0123456789abcdef:{task:016x}"))
        .collect();
    cycles_per_second(tasks, length, move |task| {
        let (node, keys, ids) = (Arc::clone(&node), Arc::clone(&keys), Arc::clone(&ids));
        async move {
            let id = ids[task].as_bytes();
            let all: Vec<&str> = keys.iter().map(String::as_str).collect();
            let granted = ACQUIRE
                .run(
                    node.as_ref(),
                    &all,
                    &[id, b"r", b"30000", b"2000", b"0", b"w", b"0"],
                )
                .await
                .expect("EVALSHA acquire");
            assert_eq!(
                granted.as_array().and_then(|reply| reply[0].as_int()),
                Some(1)
            );
            let released = RELEASE
                .run(node.as_ref(), &all[..2], &[id])
                .await
                .expect("EVALSHA release");
            assert_eq!(released.as_int(), Some(1));
        }
    })
    .await
}

/// `RwLock::try_read` + `release` through the engine, every task on one
/// lock.
async fn reads(locks: &LockManager, tasks: usize, length: Duration) -> f64 {
    let lock = locks.rw_lock("config").expect("rw lock");
    cycles_per_second(tasks, length, move |_| {
        let lock = lock.clone();
        async move {
            let read = lock
                .try_read()
                .await
                .expect("try_read")
                .expect("readers share");
            read.release().await.expect("release");
        }
    })
    .await
}

/// `LockManager::try_acquire` + `release`, each task on a lock of its own.
async fn plain(locks: &LockManager, tasks: usize, length: Duration) -> f64 {
    let names: Arc<[String]> = (0..tasks).map(|task| format!("plain-{task}")).collect();
    let locks = locks.clone();
    cycles_per_second(tasks, length, move |task| {
        let (locks, names) = (locks.clone(), Arc::clone(&names));
        async move {
            let guard = locks
                .try_acquire(&names[task])
                .await
                .expect("try_acquire")
                .expect("its own lock");
            guard.release().await.expect("release");
        }
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
async fn handoff_gaps(locks: &LockManager, length: Duration, hold: Hold) -> Vec<f64> {
    let name = match hold {
        Hold::Write => "handoff-rw",
        Hold::Plain => "handoff-plain",
    };
    let lock = locks.rw_lock(name).expect("rw lock");
    let released: Arc<Mutex<(Option<Instant>, Vec<f64>)>> = Arc::default();
    let end = Instant::now() + length;
    let holders = (0..6).map(|_| {
        let (locks, lock, released) = (locks.clone(), lock.clone(), Arc::clone(&released));
        tokio::spawn(async move {
            while Instant::now() < end {
                let options = AcquireOptions::new().with_wait(Duration::from_secs(10));
                let guard = match hold {
                    Hold::Write => lock.write_with(&options).await,
                    Hold::Plain => locks.acquire_with(name, &options).await,
                }
                .expect("a hold");
                {
                    let mut released = released.lock().expect("gaps");
                    if let Some(started) = released.0.take() {
                        released.1.push(started.elapsed().as_secs_f64() * 1000.0);
                    }
                }
                let held = rand::rng().random_range(20..=60);
                tokio::time::sleep(Duration::from_millis(held)).await;
                released.lock().expect("gaps").0 = Some(Instant::now());
                guard.release().await.expect("release");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    });
    for holder in futures::future::join_all(holders).await {
        holder.expect("holder");
    }
    let gaps = std::mem::take(&mut released.lock().expect("gaps").1);
    gaps
}
