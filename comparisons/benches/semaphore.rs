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

use std::path::Path;
use std::process::Stdio;

use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use lock_comparisons::{
    fair_single_node_manager, figure, gap_line, handoff_column, handoff_gaps,
    peer_algorithm_cycles, ratio, script_cycles, server_time_table, single_node_manager,
    single_node_manager_at, try_take_cycles, Bench, OUR_COMMANDS, STEADY,
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
    let peer = &{
        // The node process's pipes belong to the benchmark's runtime.
        let _runtime = bench.runtime.enter();
        Peer::start(&bench.server)
    };
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
            let peer = peer
                .as_ref()
                .and_then(|peer| row.rate("redis-semaphore", |span| peer.cycles(tasks, span)));
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
            let (gaps, commands) = handoff_column(
                &mut row,
                (&bench.runtime, server, &OUR_COMMANDS),
                column,
                |count| permit_handoffs(locks, Span::Cycles(count)),
                permit_handoffs(locks, Span::For(STEADY)),
            );
            lines.push(gap_line(&format!("{column}, {kind}"), gaps, commands));
        }
    }
    if let Some(peer) = peer {
        let server = &bench.server;
        let mut table = Table::new(&mut bench.criterion, &bench.runtime, "semaphore/handoff");
        let mut row = table.row("redis-semaphore");
        // Its acquire is a script, its release a `ZREM` (no script of ours
        // runs meanwhile).
        let peer_commands = ["evalsha", "eval", "script|load", "zrem", "ping"];
        let (gaps, commands) = handoff_column(
            &mut row,
            (&bench.runtime, server, &peer_commands),
            "polls every 10 ms",
            |count| peer.handoff_gaps(count),
            peer.handoff_gaps(150),
        );
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

/// redis-semaphore driven by `comparisons/node/semaphore.js`: one node
/// process on the server for the whole run, asked one request at a time.
struct Peer {
    requests: tokio::sync::Mutex<(ChildStdin, Lines<BufReader<ChildStdout>>)>,
    _node: Child,
}

impl Peer {
    /// The node process on `server`, once `npm ci` has installed its
    /// packages; `None` (and a note) without node or npm.
    fn start(server: &RedisServer) -> Option<Peer> {
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
        let mut node = tokio::process::Command::new("node")
            .arg(dir.join("semaphore.js"))
            .arg(server.port().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| eprintln!("semaphore: node did not start ({err}); the redis-semaphore columns are left out"))
            .ok()?;
        let stdin = node.stdin.take()?;
        let stdout = BufReader::new(node.stdout.take()?).lines();
        Some(Peer {
            requests: tokio::sync::Mutex::new((stdin, stdout)),
            _node: node,
        })
    }

    /// The answer to `request` (see the script).
    async fn ask(&self, request: String) -> serde_json::Value {
        let mut pipes = self.requests.lock().await;
        let (stdin, stdout) = &mut *pipes;
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .expect("a request to node");
        let line = stdout
            .next_line()
            .await
            .expect("node's answer")
            .expect("node ended");
        serde_json::from_str(&line).expect("the node script's JSON")
    }

    /// redis-semaphore's acquire+release cycles per second, `tasks` at
    /// once on a semaphore of [`LIMIT`], for as many cycles as `span` says
    /// (a time is not asked of it).
    async fn cycles(&self, tasks: usize, span: Span) -> f64 {
        let Span::Cycles(count) = span else {
            unreachable!("criterion asks for cycles")
        };
        let out = self.ask(format!("cycles {tasks} {LIMIT} {count}")).await;
        let cycles = out["cycles"].as_f64().expect("cycles");
        cycles / out["seconds"].as_f64().expect("seconds")
    }

    /// `count` of redis-semaphore's handoff gaps among 6 holders of a
    /// semaphore of 2, in ms.
    async fn handoff_gaps(&self, count: u64) -> Vec<f64> {
        let out = self.ask(format!("handoff 6 2 {count}")).await;
        out["gaps"]
            .as_array()
            .expect("gaps")
            .iter()
            .filter_map(serde_json::Value::as_f64)
            .collect()
    }
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
