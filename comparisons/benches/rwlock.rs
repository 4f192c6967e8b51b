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
//! Run with `cargo xtask bench`, or `cargo bench --bench rwlock` in
//! `comparisons/`: each figure is a criterion benchmark (`rwlock/<client>/
//! <tasks> tasks/<column>`, `rwlock/server time/...`, `rwlock/handoff/...`),
//! sampled for `BENCH_SECONDS` (default 2); see `lock_testkit::bench::Table`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_comparisons::{
    figure, gap_line, handoff_column, handoff_gaps, peer_algorithm_cycles, ratio, script_cycles,
    server_time_table, single_node_manager, try_take_cycles, Bench, OUR_COMMANDS, STEADY,
};
use lock_core::strategy::scripts::rw::{ACQUIRE, RELEASE};
use lock_core::strategy::NodeClient;
use lock_core::{ClientKind, LockGuard, LockManager};
use lock_testkit::bench::{lock_floor, Span, Table};

fn main() {
    let mut bench = Bench::start();
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let raw = &bench.raw(kind);
        let locks = &bench.run(single_node_manager(
            kind,
            &bench.server,
            Duration::from_secs(30),
        ));
        let mut table = Table::new(&mut bench.criterion, &bench.runtime, "rwlock");
        for tasks in [1usize, 32] {
            let mut row = table.row(format_args!("{kind}/{tasks} tasks"));
            let floor = row.floor("floor", |span| lock_floor(Arc::clone(raw), tasks, span));
            let scripts = row.rate("scripts", |span| scripts(Arc::clone(raw), tasks, span));
            let reads = row.rate("reads", |span| reads(locks, tasks, span));
            let plain = row.rate("plain lock", |span| plain(locks, tasks, span));
            let algorithm = row.rate("redis-semaphore's algorithm, raw", |span| {
                peer_algorithm_cycles(Arc::clone(raw), tasks, span)
            });
            lines.push(format!(
                "| {kind} | {tasks} | {} | {} | {} | {} | {} | {} | {} | {} |",
                figure(floor, 0),
                figure(scripts, 0),
                figure(reads, 0),
                figure(plain, 0),
                figure(algorithm, 0),
                ratio(reads, floor),
                ratio(reads, plain),
                ratio(scripts, algorithm),
            ));
        }
    }
    println!(
        "| client | tasks | floor (cycles/s) | scripts (cycles/s) | reads (cycles/s) | plain lock (cycles/s) | redis-semaphore's algorithm, raw (cycles/s) | reads / floor | reads / plain lock | scripts / that algorithm |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    println!();
    let argv = ["r", "30000", "2000", "0", "w", "0"];
    let cost = (&ACQUIRE, &argv[..], 1);
    let keys = keys("lock:{cost-rw}");
    server_time_table(&mut bench, "rwlock", "reads", &keys, cost, &RELEASE);
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let raw = bench.raw(kind);
        let locks = bench.run(single_node_manager(
            kind,
            &bench.server,
            Duration::from_secs(10),
        ));
        let mut table = Table::new(&mut bench.criterion, &bench.runtime, "rwlock/handoff");
        let mut row = table.row(kind);
        let server = &bench.server;
        let runtime = &bench.runtime;
        let (gaps, commands) = handoff_column(
            &mut row,
            (runtime, server, &OUR_COMMANDS),
            "PING round trip",
            |count| pings(raw.as_ref(), count),
            pings(raw.as_ref(), 500),
        );
        lines.push(gap_line(
            &format!("PING round trip, {kind}"),
            gaps,
            commands,
        ));
        let (mut writes, write_commands) = handoff_column(
            &mut row,
            (runtime, server, &OUR_COMMANDS),
            "writers",
            |count| handoffs(&locks, Span::Cycles(count), Hold::Write),
            handoffs(&locks, Span::For(STEADY), Hold::Write),
        );
        let (mut plain, plain_commands) = handoff_column(
            &mut row,
            (runtime, server, &OUR_COMMANDS),
            "plain lock",
            |count| handoffs(&locks, Span::Cycles(count), Hold::Plain),
            handoffs(&locks, Span::For(STEADY), Hold::Plain),
        );
        let p50 = |gaps: &mut Vec<f64>| {
            gaps.sort_by(f64::total_cmp);
            gaps.get(gaps.len() / 2).copied()
        };
        let ratio_line = format!(
            "| writers / plain lock, p50, {kind} | {} | | | |",
            ratio(p50(&mut writes), p50(&mut plain))
        );
        let label = format!("read-write lock, writers, {kind}");
        lines.push(gap_line(&label, writes, write_commands));
        lines.push(gap_line(
            &format!("plain lock, {kind}"),
            plain,
            plain_commands,
        ));
        lines.push(ratio_line);
    }
    println!("| waiting | gap p50 (ms) | gap p99 (ms) | handoffs | commands per handoff |");
    println!("|---|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    bench.finish();
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
async fn scripts(node: Arc<dyn NodeClient>, tasks: usize, span: Span) -> f64 {
    let keys = keys("lock:{raw-rw}");
    let argv = ["r", "30000", "2000", "0", "w", "0"];
    script_cycles(node, tasks, span, &keys, (&ACQUIRE, &argv), &RELEASE).await
}

/// `RwLock::try_read` + `release` through the engine, every task on one
/// lock.
async fn reads(locks: &LockManager, tasks: usize, span: Span) -> f64 {
    let lock = locks.rw_lock("config").expect("rw lock");
    try_take_cycles(tasks, span, "readers share", move |_| {
        let lock = lock.clone();
        async move { lock.try_read().await }
    })
    .await
}

/// `LockManager::try_acquire` + `release`, each task on a lock of its own.
async fn plain(locks: &LockManager, tasks: usize, span: Span) -> f64 {
    let names: Arc<[String]> = (0..tasks).map(|task| format!("plain-{task}")).collect();
    let locks = locks.clone();
    try_take_cycles(tasks, span, "its own lock", move |task| {
        let (locks, names) = (locks.clone(), Arc::clone(&names));
        async move { locks.try_acquire(&names[task]).await }
    })
    .await
}

/// `count` `PING` round trips, in ms.
async fn pings(node: &dyn NodeClient, count: u64) -> Vec<f64> {
    let mut times = Vec::new();
    for _ in 0..count {
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
async fn handoffs(locks: &LockManager, span: Span, hold: Hold) -> Vec<f64> {
    let name = match hold {
        Hold::Write => "handoff-rw",
        Hold::Plain => "handoff-plain",
    };
    let lock = locks.rw_lock(name).expect("rw lock");
    let locks = locks.clone();
    handoff_gaps(span, move |options| {
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
