//! Semaphores and elections, measured in one run on one local server:
//!
//! 1. **Acquire+release** cycles per second of one permit of a semaphore of
//!    64 (never full), with 1 and 32 tasks on one connection, against the
//!    floor of the lock benchmarks (a raw `SET NX PX` and a raw `EVALSHA`
//!    compare-and-delete, per task key: two round trips) and against
//!    redis-semaphore 5.8.0 (npm, on ioredis 5.9.3, one connection, the
//!    same loop, driven by `comparisons/node/semaphore.js` on the same
//!    server). *scripts* is our semaphore's two scripts sent raw; *its
//!    algorithm, raw* is redis-semaphore's acquire script and `ZREM` sent
//!    through the same Rust client.
//! 2. **Server time** per cycle of our scripts sent raw by one task, with
//!    1 and with 64 permits held beside (`INFO commandstats`): a grant
//!    costs the same however many hold.
//! 3. **Handoff** of a semaphore of 2 among 6 holders of 20 to 60 ms each:
//!    the gap from the start of a release to the next acquire (p50, p99),
//!    ours (woken by the release's message) and redis-semaphore's
//!    (polling, its default 10 ms retry).
//! 4. **Election failover**: a leader in a process of its own (this binary,
//!    `BENCH_ROLE=leader`) renewing a 1 s lease is killed with SIGKILL at a
//!    random moment; the time until a waiting campaigner leads, against the
//!    TTL.
//!
//! Run with `cargo xtask bench`, or `cargo bench --bench semaphore` in
//! `comparisons/`: each figure is a criterion benchmark (`semaphore/<client>/
//! <tasks> tasks/<column>`, `semaphore/server time/...`, `semaphore/handoff/...`),
//! sampled for `BENCH_SECONDS` (default 2); see `lock_testkit::bench::Table`.
//! The node comparison needs `node` and `npm` (it runs `npm ci` in
//! `comparisons/node` once); without them its columns read `-`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_comparisons::{
    counting_commands, fair_single_node_manager, figure, gap_column, gap_line, handoff_gaps,
    peer_algorithm_cycles, ratio, script_cycles, server_time_table, single_node_manager,
    single_node_manager_at, try_take_cycles, Bench,
};
use lock_core::strategy::scripts::semaphore::{ACQUIRE, RELEASE};
use lock_core::strategy::NodeClient;
use lock_core::{ClientKind, LockManager, NodeUrl};
use lock_testkit::bench::{lock_floor, Span, Table};
use lock_testkit::RedisServer;
use rand::Rng;

const LIMIT: u32 = 64;

fn main() {
    if std::env::var("BENCH_ROLE").as_deref() == Ok("leader") {
        return leader();
    }
    let mut bench = Bench::start();
    let node = &node_script();
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let raw = &bench.raw(kind);
        let server = &bench.server;
        let locks = &bench.run(single_node_manager(kind, server, Duration::from_secs(30)));
        let mut table = Table::new(&mut bench.criterion, &bench.runtime, "semaphore");
        for tasks in [1usize, 32] {
            let mut row = table.row(format_args!("{kind}/{tasks} tasks"));
            let floor = row.floor("floor", |span| lock_floor(Arc::clone(raw), tasks, span));
            let scripts = row.rate("scripts", |span| scripts(Arc::clone(raw), tasks, span));
            let ours = row.rate("ours", |span| ours(locks, tasks, span));
            // Without node, the peer's column is left out and printed as `-`.
            let peer = node.as_ref().and_then(|node| {
                row.rate("redis-semaphore", |span| peer(node, server, tasks, span))
            });
            let algorithm = row.rate("its algorithm, raw", |span| {
                peer_algorithm_cycles(Arc::clone(raw), tasks, span)
            });
            lines.push(format!(
                "| {kind} | {tasks} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                figure(floor, 0),
                figure(scripts, 0),
                figure(ours, 0),
                figure(peer, 0),
                figure(algorithm, 0),
                ratio(ours, floor),
                ratio(peer, floor),
                ratio(ours, peer),
                ratio(scripts, algorithm),
            ));
        }
    }
    println!(
        "| client | tasks | floor (cycles/s) | scripts (cycles/s) | ours (cycles/s) | redis-semaphore (cycles/s) | its algorithm, raw (cycles/s) | ours / floor | redis-semaphore / floor | ours / redis-semaphore | scripts / its algorithm |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    println!();
    let argv = ["1", "100", "30000"];
    let cost = (&ACQUIRE, &argv[..], 2);
    let keys = keys("lock:{cost-pool}");
    server_time_table(&mut bench, "semaphore", "permits", &keys, cost, &RELEASE);
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let server = &bench.server;
        let plain = bench.run(single_node_manager(kind, server, Duration::from_secs(10)));
        let fair = bench.run(fair_single_node_manager(
            kind,
            server,
            Duration::from_secs(10),
        ));
        let mut table = Table::new(&mut bench.criterion, &bench.runtime, "semaphore/handoff");
        let mut row = table.row(kind);
        for (column, locks) in [
            ("ours", &plain),
            ("ours, fair (granted on the server)", &fair),
        ] {
            let (gaps, commands) = counting_commands(server, || {
                gap_column(&mut row, column, |count| {
                    permit_handoffs(locks, Span::Cycles(count))
                })
            });
            lines.push(gap_line(&format!("{column}, {kind}"), gaps, commands));
        }
    }
    if let Some(node) = node {
        let server = &bench.server;
        let mut table = Table::new(&mut bench.criterion, &bench.runtime, "semaphore/handoff");
        let mut row = table.row("redis-semaphore");
        let (gaps, commands) = counting_commands(server, || {
            gap_column(&mut row, "polls every 10 ms", |count| {
                peer_handoff_gaps(node, server, count)
            })
        });
        let label = "redis-semaphore 5.8.0 (polls every 10 ms)";
        lines.push(gap_line(label, gaps, commands));
    }
    println!("| waiting | gap p50 (ms) | gap p99 (ms) | handoffs | commands per handoff |");
    println!("|---|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    println!();
    println!("| client | TTL | kills | failover min | median | max | median / TTL |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        bench.run(failover(kind, &bench.server));
    }
    bench.finish();
}

/// Our semaphore's acquire and release scripts sent raw, each task with its
/// own permit id, all on one semaphore.
async fn scripts(node: Arc<dyn NodeClient>, tasks: usize, span: Span) -> f64 {
    let keys = keys("lock:{raw-pool}");
    let limit = LIMIT.to_string();
    let argv = ["1", &limit, "30000"];
    script_cycles(node, tasks, span, &keys, (&ACQUIRE, &argv), &RELEASE).await
}

/// The semaphore's keys at `base`, as its scripts take them (a semaphore of
/// 100 beside 64 permits for the server time).
fn keys(base: &str) -> [String; 5] {
    [
        base.to_owned(),
        format!("{base}:held"),
        format!("{base}:slots"),
        format!("{base}:limit"),
        format!("{base}:slot-fences"),
    ]
}

/// `Semaphore::try_acquire` + `release` through the engine.
async fn ours(locks: &LockManager, tasks: usize, span: Span) -> f64 {
    let semaphore = locks.semaphore("pool", LIMIT).expect("semaphore");
    try_take_cycles(tasks, span, "never full", move |_| {
        let semaphore = semaphore.clone();
        async move { semaphore.try_acquire().await }
    })
    .await
}

/// Where the node script is, once `npm ci` has installed its packages;
/// `None` (and a note) without node or npm.
fn node_script() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("node");
    if !dir.join("node_modules").exists() {
        let installed = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--silent"])
            .current_dir(&dir)
            .status();
        if !installed.is_ok_and(|status| status.success()) {
            eprintln!("semaphore: npm ci failed or npm is missing; the redis-semaphore columns are left out");
            return None;
        }
    }
    Some(dir.join("semaphore.js"))
}

/// The node script's output for `args`.
async fn run_node(script: &Path, args: &[String]) -> serde_json::Value {
    let output = tokio::process::Command::new("node")
        .arg(script)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .await
        .expect("run node");
    assert!(output.status.success(), "node failed");
    serde_json::from_slice(&output.stdout).expect("the node script's JSON")
}

/// redis-semaphore's acquire+release cycles per second, for a time or a
/// number of cycles (`x<count>` to the node script).
async fn peer(script: &Path, server: &RedisServer, tasks: usize, span: Span) -> f64 {
    let span = match span {
        Span::For(length) => length.as_secs().max(1).to_string(),
        Span::Cycles(count) => format!("x{count}"),
    };
    let args = [
        server.port().to_string(),
        tasks.to_string(),
        span,
        LIMIT.to_string(),
    ];
    let out = run_node(script, &args).await;
    let cycles = out["cycles"].as_f64().expect("cycles");
    cycles / out["seconds"].as_f64().expect("seconds")
}

/// `count` of redis-semaphore's handoff gaps, in ms.
async fn peer_handoff_gaps(script: &Path, server: &RedisServer, count: u64) -> Vec<f64> {
    let args = [
        server.port().to_string(),
        "6".to_owned(),
        format!("x{count}"),
        "2".to_owned(),
        "handoff".to_owned(),
    ];
    let out = run_node(script, &args).await;
    out["gaps"]
        .as_array()
        .expect("gaps")
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect()
}

/// Six holders of 20 to 60 ms each on a semaphore of 2: the gaps, in ms,
/// from the start of a release to the next acquire.
async fn permit_handoffs(locks: &LockManager, span: Span) -> Vec<f64> {
    let semaphore = locks.semaphore("handoff", 2).expect("semaphore");
    handoff_gaps(span, move |options| {
        let semaphore = semaphore.clone();
        async move { semaphore.acquire_with(&options).await }
    })
    .await
}

const FAILOVER_TTL: Duration = Duration::from_secs(1);
const KILLS: usize = 5;

/// Kills a leader process `KILLS` times at a random moment of its term
/// and times how long a waiting campaigner takes to lead.
async fn failover(kind: ClientKind, server: &RedisServer) {
    let locks = single_node_manager(kind, server, FAILOVER_TTL).await;
    let election = locks
        .election(&format!("failover-{kind}"))
        .expect("election");
    let me = std::env::current_exe().expect("own path");
    let mut times = Vec::new();
    for _ in 0..KILLS {
        let mut child = tokio::process::Command::new(&me)
            .env("BENCH_ROLE", "leader")
            .env("BENCH_URL", server.url().expose())
            .env("BENCH_CLIENT", kind.to_string())
            .env("BENCH_ELECTION", election.name())
            .stdout(Stdio::null())
            .spawn()
            .expect("start a leader");
        // Until it leads.
        lock_testkit::eventually(Duration::from_secs(10), "the leader leading", || async {
            election.leader().await.expect("leader")
        })
        .await;
        let campaign = {
            let election = election.clone();
            tokio::spawn(async move {
                let leadership = election.campaign("next").await.expect("campaign");
                (Instant::now(), leadership)
            })
        };
        // A random moment of its renewal cycle.
        let wait = rand::rng().random_range(100..=1300);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        child.start_kill().expect("SIGKILL the leader");
        let killed = Instant::now();
        let _ = child.wait().await;
        let (elected, leadership) = campaign.await.expect("campaign task");
        times.push(elected.saturating_duration_since(killed).as_secs_f64() * 1000.0);
        leadership.resign().await.expect("resign");
    }
    times.sort_by(f64::total_cmp);
    let ttl_ms = FAILOVER_TTL.as_secs_f64() * 1000.0;
    println!(
        "| {kind} | {:.0} ms | {KILLS} | {:.0} ms | {:.0} ms | {:.0} ms | {:.2} |",
        ttl_ms,
        times[0],
        times[KILLS / 2],
        times[KILLS - 1],
        times[KILLS / 2] / ttl_ms
    );
}

/// `BENCH_ROLE=leader`: campaign for `BENCH_ELECTION` and lead until
/// killed, renewing a `FAILOVER_TTL` lease.
fn leader() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let url = std::env::var("BENCH_URL").expect("BENCH_URL");
        let kind: ClientKind = std::env::var("BENCH_CLIENT")
            .expect("BENCH_CLIENT")
            .parse()
            .expect("a client");
        let locks = single_node_manager_at(kind, &NodeUrl::new(url), FAILOVER_TTL, false).await;
        let election = locks
            .election(&std::env::var("BENCH_ELECTION").expect("BENCH_ELECTION"))
            .expect("election");
        let leadership = election.campaign("killed").await.expect("campaign");
        let _ = leadership.lost().await;
    });
}
