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
//! Run with `cargo xtask bench`; `BENCH_SECONDS` (default 2) is the length
//! of one measurement, each throughput figure the median of `BENCH_ROUNDS`
//! (default 3). The node comparison needs `node` and `npm` (it runs
//! `npm ci` in `comparisons/node` once); without them its columns read `-`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_comparisons::{
    fair_single_node_manager, handoff_gaps, peer_algorithm_cycles, print_gaps, print_server_time,
    script_cycles, single_node_manager, single_node_manager_at, try_take_cycles, Bench,
};
use lock_core::strategy::scripts::semaphore::{ACQUIRE, RELEASE};
use lock_core::strategy::NodeClient;
use lock_core::{ClientKind, LockManager, NodeUrl};
use lock_testkit::bench::lock_floor;
use lock_testkit::RedisServer;
use rand::Rng;

const LIMIT: u32 = 64;

fn main() {
    if std::env::var("BENCH_ROLE").as_deref() == Ok("leader") {
        return leader();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(measure());
}

async fn measure() {
    let bench = Bench::start();
    let (server, length) = (&bench.server, bench.length);
    let node = &node_script();
    println!(
        "| client | tasks | floor (cycles/s) | scripts (cycles/s) | ours (cycles/s) | redis-semaphore (cycles/s) | its algorithm, raw (cycles/s) | ours / floor | redis-semaphore / floor | ours / redis-semaphore | scripts / its algorithm |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let raw = &bench.raw(kind).await;
        let locks = &single_node_manager(kind, server, Duration::from_secs(30)).await;
        for tasks in [1usize, 32] {
            // Without node, the peer's column is 0 and printed as `-`.
            let [floor, scripts, ours, peer, algorithm] = bench
                .medians(|| async move {
                    [
                        lock_floor(Arc::clone(raw), tasks, length).await,
                        scripts(Arc::clone(raw), tasks, length).await,
                        ours(locks, tasks, length).await,
                        match node {
                            Some(node) => peer(node, server, tasks, length).await,
                            None => 0.0,
                        },
                        peer_algorithm_cycles(Arc::clone(raw), tasks, length).await,
                    ]
                })
                .await;
            let peer_text = |value: f64| {
                if node.is_some() {
                    format!("{value:.2}")
                } else {
                    "-".to_owned()
                }
            };
            println!(
                "| {kind} | {tasks} | {floor:.0} | {scripts:.0} | {ours:.0} | {} | {algorithm:.0} | {:.2} | {} | {} | {:.2} |",
                if node.is_some() { format!("{peer:.0}") } else { "-".to_owned() },
                ours / floor,
                peer_text(peer / floor),
                peer_text(ours / peer),
                scripts / algorithm,
            );
        }
    }
    println!();
    let argv = ["1", "100", "30000"];
    let cost = (&ACQUIRE, &argv[..], 2);
    print_server_time(&bench, "permits", &keys("lock:{cost-pool}"), cost, &RELEASE).await;
    println!();
    println!("| waiting | gap p50 (ms) | gap p99 (ms) | handoffs |");
    println!("|---|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let locks = single_node_manager(kind, server, Duration::from_secs(10)).await;
        let gaps = permit_handoffs(&locks, length.max(Duration::from_secs(3))).await;
        print_gaps(&format!("ours, {kind}"), gaps);
        let fair = fair_single_node_manager(kind, server, Duration::from_secs(10)).await;
        let gaps = permit_handoffs(&fair, length.max(Duration::from_secs(3))).await;
        print_gaps(&format!("ours, fair (granted on the server), {kind}"), gaps);
    }
    if let Some(node) = node {
        let gaps = peer_handoff_gaps(node, server, length.max(Duration::from_secs(3))).await;
        print_gaps("redis-semaphore 5.8.0 (polls every 10 ms)", gaps);
    }
    println!();
    println!("| client | TTL | kills | failover min | median | max | median / TTL |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        failover(kind, server).await;
    }
}

/// Our semaphore's acquire and release scripts sent raw, each task with its
/// own permit id, all on one semaphore.
async fn scripts(node: Arc<dyn NodeClient>, tasks: usize, length: Duration) -> f64 {
    let keys = keys("lock:{raw-pool}");
    let limit = LIMIT.to_string();
    let argv = ["1", &limit, "30000"];
    script_cycles(node, tasks, length, &keys, (&ACQUIRE, &argv), &RELEASE).await
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
async fn ours(locks: &LockManager, tasks: usize, length: Duration) -> f64 {
    let semaphore = locks.semaphore("pool", LIMIT).expect("semaphore");
    try_take_cycles(tasks, length, "never full", move |_| {
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

/// redis-semaphore's acquire+release cycles per second.
async fn peer(script: &Path, server: &RedisServer, tasks: usize, length: Duration) -> f64 {
    let args = [
        server.port().to_string(),
        tasks.to_string(),
        length.as_secs().max(1).to_string(),
        LIMIT.to_string(),
    ];
    let out = run_node(script, &args).await;
    let cycles = out["cycles"].as_f64().expect("cycles");
    cycles / out["seconds"].as_f64().expect("seconds")
}

/// redis-semaphore's handoff gaps, in ms.
async fn peer_handoff_gaps(script: &Path, server: &RedisServer, length: Duration) -> Vec<f64> {
    let args = [
        server.port().to_string(),
        "6".to_owned(),
        length.as_secs().max(1).to_string(),
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
async fn permit_handoffs(locks: &LockManager, length: Duration) -> Vec<f64> {
    let semaphore = locks.semaphore("handoff", 2).expect("semaphore");
    handoff_gaps(length, move |options| {
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
