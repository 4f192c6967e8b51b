//! Handoff under contention: 8 tasks contend for one key; the holder keeps it
//! for a random 20 to 60 ms and does not compete again until another task has
//! acquired. Measures the gap between the start of a release and the next
//! successful acquire (p50, p99), acquisitions per second, and client-issued
//! Redis commands per acquisition, for:
//!
//! - (a) our notification-based waiting (single-node strategy),
//! - (b) our polling mode with the source documents' 100 ms retry delay,
//! - (a') the same in fair mode,
//! - (c) rslock 0.10.0's default retry loop (`acquire`),
//! - (d) python-redis-lock 4.0.1 (PyPI, on redis-py 5.2.1), whose waiters
//!   block in `BLPOP` on a list its release pushes to, driven by
//!   `comparisons/python/handoff.py` on the same server in the same run. It
//!   needs `python3` with `venv` (it makes `comparisons/target/python-peers`
//!   and runs `pip install` there once); without them its row is left out.
//!
//! Each gap p50 is also given against the floor measured in the same run:
//! one `PING` round trip (p50 of 500) on the same client, and one sent after
//! an idle 20 to 60 ms (p50 of 60), as every release is: waking a sleeping
//! runtime and connection task is part of every gap, whoever the peer.
//!
//! Commands are counted from `INFO commandstats` on the server, counting only
//! the commands a client issues (EVALSHA, SUBSCRIBE... for us; SET and EVAL/EVALSHA
//! for rslock), not the commands our scripts run inside one EVALSHA.
//!
//! A second table, "hog": every task re-contends at once after each release,
//! each task with its own connections (as separate processes would), and each
//! row reports the busiest task's acquisitions against a fair share (the total
//! over 8). Fair mode should keep it at most 1.5.
//!
//! `cargo xtask bench` runs it, or `cargo bench --bench handoff` in
//! `comparisons/`: each row's gaps are a criterion benchmark
//! (`handoff/<client>/<waiting>`, `handoff/peers/<peer>`) timing the sum of
//! a number of gaps, sampled for `BENCH_SECONDS` (default 2) × 2 s of
//! handoffs; the hog table runs `BENCH_SECONDS` × 2 s per row, outside
//! criterion (a share of acquisitions, not a time).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_comparisons::{client_commands, latency_column, Bench, OUR_COMMANDS};
use lock_core::{ClientKind, ConnectOptions, LockConfig, LockManager, RetryPolicy, WaitMode};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::bench::{env_number, Row, Table};
use lock_testkit::RedisServer;
use rand::Rng;

const TASKS: usize = 8;
const TTL: Duration = Duration::from_secs(10);

/// What the contenders share: the acquisition count and the handoff gaps.
#[derive(Default)]
struct Handoffs {
    acquisitions: AtomicU64,
    state: Mutex<HandoffState>,
}

#[derive(Default)]
struct HandoffState {
    release_started: Option<Instant>,
    gaps: Vec<Duration>,
}

impl Handoffs {
    /// Records an acquisition; returns its number.
    fn acquired(&self) -> u64 {
        let mut state = self.state.lock().expect("state");
        if let Some(started) = state.release_started.take() {
            state.gaps.push(started.elapsed());
        }
        self.acquisitions.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn releasing(&self) {
        self.state.lock().expect("state").release_started = Some(Instant::now());
    }

    /// Waits until someone else acquired after acquisition `mine`.
    async fn wait_for_another(&self, mine: u64, stop: &AtomicBool) {
        while self.acquisitions.load(Ordering::SeqCst) <= mine && !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// The contenders' lock, whatever it is.
#[derive(Clone)]
enum Contender {
    Ours(LockManager),
    Rslock(rslock::LockManager),
}

impl Contender {
    /// Acquires (waiting as long as needed), holds 20 to 60 ms, releases;
    /// returns the acquisition number.
    async fn cycle(&self, handoffs: &Handoffs) -> u64 {
        let hold = Duration::from_millis(rand::rng().random_range(20..=60));
        self.cycle_for(handoffs, hold).await
    }

    /// Acquires, holds for `hold`, releases; returns the acquisition number.
    async fn cycle_for(&self, handoffs: &Handoffs, hold: Duration) -> u64 {
        match self {
            Contender::Ours(locks) => {
                let guard = locks.acquire("handoff").await.expect("acquire");
                let number = handoffs.acquired();
                tokio::time::sleep(hold).await;
                handoffs.releasing();
                guard.release().await.expect("release");
                number
            }
            Contender::Rslock(locks) => {
                let guard = locks
                    .acquire("rslock:{handoff}", TTL)
                    .await
                    .expect("rslock acquire");
                let number = handoffs.acquired();
                tokio::time::sleep(hold).await;
                handoffs.releasing();
                guard.release().await;
                number
            }
        }
    }
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// The floors of one client that a handoff gap is measured against, in ms.
#[derive(Clone, Copy)]
struct Floors {
    ping: f64,
    idle: f64,
}

impl Floors {
    /// One connection through `kind`: 500 `PING`s back to back, then 60
    /// each sent after an idle 20 to 60 ms, as a holder's release is (the
    /// runtime's threads and the connection's task are asleep then, and
    /// waking them is part of every handoff gap, whoever the peer).
    async fn of(kind: ClientKind, server: &RedisServer) -> Self {
        let node = lock_core::strategy::connect(kind, &server.url(), ConnectOptions::default())
            .await
            .expect("connect");
        Floors {
            ping: ping_p50(node.as_ref(), 500, None).await,
            idle: ping_p50(node.as_ref(), 60, Some(20..=60)).await,
        }
    }
}

/// The p50 of `count` `PING` round trips through `node`, in ms, each after
/// an idle pause drawn from `idle_ms` if given.
async fn ping_p50(
    node: &dyn lock_core::strategy::NodeClient,
    count: usize,
    idle_ms: Option<std::ops::RangeInclusive<u64>>,
) -> f64 {
    let mut pings = Vec::with_capacity(count);
    for _ in 0..count {
        if let Some(idle) = idle_ms.clone() {
            tokio::time::sleep(Duration::from_millis(rand::rng().random_range(idle))).await;
        }
        let sent = Instant::now();
        node.command("PING", &[]).await.expect("PING");
        pings.push(sent.elapsed());
    }
    pings.sort();
    percentile(&pings, 0.5).as_secs_f64() * 1e3
}

/// A Python with the PyPI peers of `comparisons/python/requirements.txt`,
/// in a virtual environment of its own (made, and filled by `pip`, when the
/// requirements change); `None`, with a note, without `python3`, its
/// `venv` module or the packages.
fn python_peers() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = root.join("target/python-peers");
    let python = venv.join("bin/python3");
    let wanted = std::fs::read_to_string(root.join("python/requirements.txt")).ok()?;
    let marker = venv.join("installed-requirements.txt");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str()) {
        return Some(python);
    }
    let ran =
        |command: &mut std::process::Command| command.status().is_ok_and(|status| status.success());
    let made = python.exists()
        || ran(std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv));
    let installed = made
        && ran(std::process::Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "-r"])
            .arg(root.join("python/requirements.txt")));
    if !installed || std::fs::write(&marker, &wanted).is_err() {
        eprintln!(
            "handoff: python3 with venv and pip is missing, or pip failed; \
             the python-redis-lock row is left out"
        );
        return None;
    }
    Some(python)
}

/// What a run of contenders measured.
#[derive(Default)]
struct Measured {
    gaps: Vec<Duration>,
    acquisitions: u64,
    elapsed: Duration,
    commands: u64,
}

impl Measured {
    /// The row: gap percentiles, against the floors, acquisitions per
    /// second and commands per acquisition.
    fn line(mut self, label: &str, Floors { ping, idle }: Floors) -> String {
        if self.gaps.is_empty() {
            return format!("| {label} | - | - | {ping:.3} | {idle:.3} | - | - | - | - |");
        }
        self.gaps.sort();
        let p50 = percentile(&self.gaps, 0.5).as_secs_f64() * 1e3;
        format!(
            "| {label} | {p50:.2} | {:.2} | {ping:.3} | {idle:.3} | {:.1} | {:.1} | {:.1} | {:.1} |",
            percentile(&self.gaps, 0.99).as_secs_f64() * 1e3,
            p50 / ping,
            p50 / idle,
            self.acquisitions as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE),
            self.commands as f64 / self.acquisitions.max(1) as f64,
        )
    }
}

/// `column` of `row`: handoff gaps, criterion timing the sum of `count`
/// of them (`run(count)`), then a steady run of [`STEADY_GAPS`] on
/// `runtime` (each of criterion's runs starts and stops its contenders,
/// which a rate or a count of commands would take for the lock's). Returns
/// every gap, with the steady run's acquisitions, time and commands.
fn gap_column<F, Fut>(
    row: &mut Row<'_>,
    runtime: &tokio::runtime::Runtime,
    column: &str,
    mut run: F,
) -> Measured
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = Measured>,
{
    let sum = |run: &Measured| run.gaps.iter().sum();
    let gaps: Vec<Duration> = latency_column(row, column, &mut run, sum)
        .into_iter()
        .flat_map(|run| run.gaps)
        .collect();
    let mut steady = runtime.block_on(run(STEADY_GAPS));
    steady.gaps.extend(gaps);
    steady
}

/// How many gaps the steady run of a row measures.
const STEADY_GAPS: u64 = 150;

/// python-redis-lock's handoff (`comparisons/python/handoff.py`) on
/// `server` until `count` gaps, and its floors when `floors` is `None`
/// (measured by the first run, kept for the others).
async fn python_run(
    python: &Path,
    server: &RedisServer,
    count: u64,
    floors: &std::cell::Cell<Option<Floors>>,
) -> Measured {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/handoff.py");
    let top_level = ["set", "blpop", "evalsha", "eval", "script|load", "ping"];
    let commands_before = client_commands(server, &top_level);
    let mut command = tokio::process::Command::new(python);
    command
        .arg(&script)
        .arg(server.port().to_string())
        .arg(format!("x{count}"));
    if floors.get().is_none() {
        command.arg("floors");
    }
    let output = command.output().await.expect("run python");
    assert!(
        output.status.success(),
        "handoff.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("handoff.py prints JSON");
    if let (None, Some(ping), Some(idle)) = (
        floors.get(),
        report["ping_p50_ms"].as_f64(),
        report["idle_ping_p50_ms"].as_f64(),
    ) {
        floors.set(Some(Floors { ping, idle }));
    }
    let pings = report["pings"].as_u64().unwrap_or(0);
    let commands = client_commands(server, &top_level) - commands_before;
    Measured {
        gaps: report["gaps_ms"]
            .as_array()
            .expect("gaps")
            .iter()
            .filter_map(serde_json::Value::as_f64)
            .map(|ms| Duration::from_secs_f64(ms / 1e3))
            .collect(),
        acquisitions: report["acquisitions"].as_u64().unwrap_or(0),
        elapsed: Duration::from_secs_f64(report["seconds"].as_f64().unwrap_or(1.0)),
        // The floors' PINGs are the script's own, not the lock's.
        commands: commands.saturating_sub(pings),
    }
}

/// `contender`'s handoffs: `TASKS` tasks contend until `count` gaps were
/// seen.
async fn run(
    contender: &Contender,
    server: &RedisServer,
    top_level: &[&str],
    count: u64,
) -> Measured {
    let handoffs = Arc::new(Handoffs::default());
    let stop = Arc::new(AtomicBool::new(false));
    let commands_before = client_commands(server, top_level);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (contender, handoffs, stop) =
            (contender.clone(), Arc::clone(&handoffs), Arc::clone(&stop));
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let mine = contender.cycle(&handoffs).await;
                handoffs.wait_for_another(mine, &stop).await;
            }
        }));
    }
    let wanted = usize::try_from(count).unwrap_or(usize::MAX);
    while handoffs.state.lock().expect("state").gaps.len() < wanted {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("contender");
    }
    let elapsed = started.elapsed();
    let commands = client_commands(server, top_level) - commands_before;
    let mut gaps = std::mem::take(&mut handoffs.state.lock().expect("state").gaps);
    gaps.truncate(wanted);
    Measured {
        gaps,
        acquisitions: handoffs.acquisitions.load(Ordering::SeqCst),
        elapsed,
        commands,
    }
}

/// Every task re-acquires at once after each release; returns the busiest
/// task's acquisitions over the fair share, and acquisitions per second.
async fn hog(contenders: Vec<Contender>, length: Duration) -> (f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let handoffs = Arc::new(Handoffs::default());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for contender in contenders {
        let (stop, handoffs) = (Arc::clone(&stop), Arc::clone(&handoffs));
        tasks.push(tokio::spawn(async move {
            let mut mine = 0u64;
            while !stop.load(Ordering::Relaxed) {
                contender
                    .cycle_for(&handoffs, Duration::from_millis(2))
                    .await;
                mine += 1;
            }
            mine
        }));
    }
    tokio::time::sleep(length).await;
    stop.store(true, Ordering::Relaxed);
    let mut counts = Vec::new();
    for task in tasks {
        counts.push(task.await.expect("hog task"));
    }
    let total: u64 = counts.iter().sum();
    let busiest = counts.iter().copied().max().unwrap_or(0);
    let fair_share = total as f64 / counts.len() as f64;
    (
        busiest as f64 / fair_share.max(1.0),
        total as f64 / started.elapsed().as_secs_f64(),
    )
}

/// Our single-node manager on `server` as the source documents configure
/// it (100 ms between polls), waiting by `wait_mode`, in fair mode if `fair`.
async fn ours(
    kind: ClientKind,
    server: &RedisServer,
    wait_mode: WaitMode,
    fair: bool,
) -> LockManager {
    let mut config = LockConfig::with_nodes([server.url().expose().to_owned()]);
    config.client = kind;
    config.ttl = TTL;
    config.wait_timeout = Duration::from_secs(60);
    config.wait_mode = wait_mode;
    config.fair = fair;
    // The source documents poll every 100 ms; full jitter draws each delay from 0 to 100 ms.
    config.retry = RetryPolicy::new(Duration::from_millis(100), Duration::from_millis(100));
    let backend = SingleNodeBackend::connect(kind, &server.url(), ConnectOptions::default())
        .await
        .expect("connect");
    LockManager::new(Arc::new(backend), config).expect("config")
}

fn main() {
    let mut bench = Bench::start();
    let mut lines = Vec::new();
    let ours_commands = OUR_COMMANDS;
    let python = python_peers();
    for kind in ClientKind::compiled() {
        let server = &bench.server;
        let floors = bench.run(Floors::of(kind, server));
        let mut table = Table::new(&mut bench.criterion, &bench.runtime, "handoff");
        let mut row = table.row(kind);
        for (label, wait_mode, fair) in [
            ("(a) ours, notify", WaitMode::Notify, false),
            ("(a') ours, fair", WaitMode::Notify, true),
            ("(b) ours, poll 100 ms", WaitMode::Poll, false),
        ] {
            let contender =
                Contender::Ours(bench.runtime.block_on(ours(kind, server, wait_mode, fair)));
            let measured = gap_column(&mut row, &bench.runtime, label, |count| {
                run(&contender, server, &ours_commands, count)
            });
            lines.push(measured.line(&format!("{label}, {kind}"), floors));
        }
    }
    let server = &bench.server;
    let floors = bench.run(Floors::of(ClientKind::Redis, server));
    let mut table = Table::new(&mut bench.criterion, &bench.runtime, "handoff");
    let mut row = table.row("peers");
    let peer = Contender::Rslock(rslock::LockManager::new(vec![server
        .url()
        .expose()
        .to_owned()]));
    let rslock_commands = ["set", "eval", "evalsha", "script|load"];
    let measured = gap_column(&mut row, &bench.runtime, "rslock 0.10.0 default", |count| {
        run(&peer, server, &rslock_commands, count)
    });
    lines.push(measured.line("(c) rslock 0.10.0 default", floors));
    if let Some(python) = &python {
        let floors = std::cell::Cell::new(None);
        let measured = gap_column(
            &mut row,
            &bench.runtime,
            "python-redis-lock 4.0.1",
            |count| python_run(python, server, count, &floors),
        );
        let floors = floors.get().unwrap_or(Floors {
            ping: f64::NAN,
            idle: f64::NAN,
        });
        lines.push(measured.line("(d) python-redis-lock 4.0.1", floors));
    }
    drop(row);
    drop(table);
    println!(
        "| waiting | gap p50 (ms) | gap p99 (ms) | PING p50 (ms) | idle PING p50 (ms) \
         | gap p50 / PING p50 | gap p50 / idle PING p50 | acquisitions/s | commands/acquisition |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    let length = Duration::from_secs(env_number("BENCH_SECONDS", 2).max(1) * 2);
    bench.run(hogs(&bench.server, length));
    bench.finish();
}

/// The hog table: every task re-contends at once, for `length` per row.
async fn hogs(server: &RedisServer, length: Duration) {
    println!();
    println!("Hog: {TASKS} tasks, each with its own connections, re-contend at once; hold 2 ms.");
    println!();
    println!("| waiting | busiest task / fair share | acquisitions/s |");
    println!("|---|---:|---:|");
    let kind = ClientKind::default();
    for (label, wait_mode, fair) in [
        ("ours, fair mode", WaitMode::Notify, true),
        ("ours, notify", WaitMode::Notify, false),
        ("ours, poll 100 ms", WaitMode::Poll, false),
    ] {
        let mut contenders = Vec::new();
        for _ in 0..TASKS {
            contenders.push(Contender::Ours(ours(kind, server, wait_mode, fair).await));
        }
        let (ratio, rate) = hog(contenders, length).await;
        println!("| {label}, {kind} | {ratio:.2} | {rate:.1} |");
    }
    let contenders = (0..TASKS)
        .map(|_| {
            Contender::Rslock(rslock::LockManager::new(vec![server
                .url()
                .expose()
                .to_owned()]))
        })
        .collect();
    let (ratio, rate) = hog(contenders, length).await;
    println!("| rslock 0.10.0 default | {ratio:.2} | {rate:.1} |");
}
