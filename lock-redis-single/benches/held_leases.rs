//! One client holding many leases at a short TTL (issue 15): how many are
//! lost, what renewing them costs the server and the client, and how the
//! library behaves when the server cannot keep up.
//!
//! For each client, on a fresh `redis-server` each time:
//!
//! - **held**: `BENCH_LEASES` leases (default 100,000) with a `BENCH_TTL_MS`
//!   TTL (default 3000) held for `BENCH_HOLD_SECONDS` (default 10), renewed
//!   by the watchdog in batches (ours), and the same with every renewal sent
//!   as a command of its own (the baseline: what the library did before
//!   batching, measured in the same run). Reported: leases lost, renewal
//!   script calls per second and renewals per second reaching the server,
//!   the client's CPU time and the server's during the hold, and the
//!   releases that failed afterwards.
//! - **overload**: the same leases at `BENCH_OVERLOAD_TTL_MS` (default 300),
//!   a renewal every 100 ms each, more than this machine can carry; then
//!   every lease is released (the load removed) and one probe lease is
//!   acquired, renewed and released: the time each step took to work again.
//!
//! - **acquire throughput**: `BENCH_LEASES` distinct keys taken (256 at
//!   once) and held, fenced and with `fencing = false`, against a raw
//!   `SET key value NX PX` of as many keys through the same client.
//!
//! Run with `cargo bench -p lock-redis-single --bench held_leases --features
//! redis,fred` (or `cargo xtask bench`).
//! To profile one part, `BENCH_ONLY` (a comma-separated list of `held`,
//! `one-each` (the baseline of held), `overload` and `throughput`) and `BENCH_CLIENT` (`redis` or `fred`) leave
//! out the others.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::stream::{self, StreamExt};
use lock_core::{
    AcquireOutcome, ClientKind, ConnectOptions, ExtendOutcome, HoldToken, LockBackend, LockConfig,
    LockError, LockGuard, LockKey, LockManager, LossReason, NameState, OwnerToken, ReleaseOutcome,
};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::bench::{chosen, env_number};
use lock_testkit::RedisServer;

/// Acquires and releases in flight at once.
const CONCURRENCY: usize = 256;

/// The single-node backend with batching undone: every renewal of a batch
/// is an `extend` of its own (one `EVALSHA` each), as before issue 15.
#[derive(Debug)]
struct OneCommandEach(SingleNodeBackend);

#[async_trait]
impl LockBackend for OneCommandEach {
    fn strategy(&self) -> &'static str {
        "single, one command per renewal"
    }

    /// The inner backend's grant fields and listing; none of the
    /// primitives, whose claims this wrapper does not pass on.
    fn capabilities(&self) -> lock_core::Capabilities<'_> {
        self.0
            .capabilities()
            .plain_lock_only()
            .with_listing(&self.0)
    }

    async fn try_acquire(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        claim: &lock_core::Claim,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        self.0.try_acquire(key, hold, ttl, claim, earlier).await
    }

    async fn extend(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        self.0.extend(key, hold, ttl).await
    }

    async fn release(&self, key: &LockKey, hold: &HoldToken) -> Result<ReleaseOutcome, LockError> {
        self.0.release(key, hold).await
    }

    async fn inspect(&self, key: &LockKey) -> Result<NameState, LockError> {
        self.0.inspect(key).await
    }

    async fn force_release(&self, key: &LockKey) -> Result<usize, LockError> {
        self.0.force_release(key).await
    }

    async fn watch_releases(
        &self,
        key: &LockKey,
    ) -> Result<Option<Box<dyn lock_core::Wakeups>>, LockError> {
        self.0.watch_releases(key).await
    }

    async fn leave_queue(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: Option<&[lock_core::HoldToken]>,
    ) -> Result<(), LockError> {
        self.0.leave_queue(key, owner, offered).await
    }
}

/// The process's CPU time (user + system), from `/proc/self/stat` (in
/// `USER_HZ`, 100 per second on Linux).
fn own_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after it.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&index| fields.get(index)?.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// The server's CPU time (`used_cpu_user + used_cpu_sys`).
fn server_cpu(server: &RedisServer) -> Duration {
    let info = server.info("cpu").expect("INFO cpu");
    let seconds: f64 = info
        .lines()
        .filter_map(|line| {
            let (name, value) = line.trim().split_once(':')?;
            matches!(name, "used_cpu_user" | "used_cpu_sys")
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum();
    Duration::from_secs_f64(seconds)
}

fn config(ttl: Duration) -> LockConfig {
    let mut config = LockConfig::default();
    config.ttl = ttl;
    config.wait_timeout = Duration::ZERO;
    config
}

async fn acquire_all(locks: &LockManager, leases: usize, prefix: &str) -> Vec<LockGuard> {
    let failed = AtomicUsize::new(0);
    let guards: Vec<LockGuard> = stream::iter(0..leases)
        .map(|index| {
            let name = format!("{prefix}-{index}");
            async move { locks.try_acquire(&name).await }
        })
        .buffer_unordered(CONCURRENCY)
        .filter_map(|outcome| {
            let kept = match outcome {
                Ok(Some(guard)) => Some(guard),
                _ => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    None
                }
            };
            async move { kept }
        })
        .collect()
        .await;
    let failed = failed.load(Ordering::Relaxed);
    if failed > 0 {
        eprintln!("{prefix}: {failed} acquires failed");
    }
    guards
}

/// Releases every guard; returns (lost before the release, other errors).
async fn release_all(guards: Vec<LockGuard>) -> (usize, usize) {
    let outcomes: Vec<Result<(), LockError>> = stream::iter(guards)
        .map(LockGuard::release)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let lost = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, Err(LockError::LeaseLost { .. })))
        .count();
    let failed = outcomes.iter().filter(|outcome| outcome.is_err()).count() - lost;
    (lost, failed)
}

/// Leases lost so far, by reason.
fn lost_by_reason(guards: &[LockGuard]) -> (usize, usize) {
    let (mut expired, mut not_held) = (0, 0);
    for guard in guards {
        match guard.status() {
            lock_core::LeaseStatus::Lost {
                reason: LossReason::NotHeld,
                ..
            } => not_held += 1,
            lock_core::LeaseStatus::Lost { .. } => expired += 1,
            _ => {}
        }
    }
    (expired, not_held)
}

async fn backend(kind: ClientKind, server: &RedisServer) -> SingleNodeBackend {
    SingleNodeBackend::connect(kind, &server.url(), ConnectOptions::default())
        .await
        .expect("connect")
}

/// One held-leases row.
async fn held(kind: ClientKind, batched: bool, leases: usize, ttl: Duration, hold: Duration) {
    let server = RedisServer::start().expect("start redis-server");
    let backend = backend(kind, &server).await;
    let backend: Arc<dyn LockBackend> = if batched {
        Arc::new(backend)
    } else {
        Arc::new(OneCommandEach(backend))
    };
    let locks = LockManager::new(backend, config(ttl)).expect("config");
    let started = Instant::now();
    let guards = acquire_all(&locks, leases, "held").await;
    let acquired_in = started.elapsed();
    server.admin(&["CONFIG", "RESETSTAT"]).expect("RESETSTAT");
    let (client_before, server_before) = (own_cpu(), server_cpu(&server));
    tokio::time::sleep(hold).await;
    let (client_cpu, server_cpu) = (
        own_cpu().saturating_sub(client_before),
        server_cpu(&server).saturating_sub(server_before),
    );
    let calls = server
        .command_calls(&["evalsha", "eval"])
        .expect("commandstats");
    // One PEXPIRE of a lock key per renewal that ran (inside the scripts).
    let renewed = server.command_calls(&["pexpire"]).expect("commandstats");
    let (expired, not_held) = lost_by_reason(&guards);
    let held_count = guards.len();
    let (_, release_errors) = release_all(guards).await;
    let seconds = hold.as_secs_f64();
    println!(
        "| {} | {} | {held_count} | {:.1} | {:.0} | {:.0} | {:.2} | {:.2} | {} | {release_errors} |",
        kind.name(),
        if batched { "batched (ours)" } else { "one command each" },
        acquired_in.as_secs_f64(),
        calls as f64 / seconds,
        renewed as f64 / seconds,
        client_cpu.as_secs_f64() / seconds,
        server_cpu.as_secs_f64() / seconds,
        expired + not_held,
    );
}

/// One overload row: leases at a TTL this machine cannot renew, then the
/// load removed and a probe lease taken, renewed and released.
async fn overload(kind: ClientKind, leases: usize, ttl: Duration, hold: Duration) {
    let server = RedisServer::start().expect("start redis-server");
    let locks =
        LockManager::new(Arc::new(backend(kind, &server).await), config(ttl)).expect("config");
    let guards = acquire_all(&locks, leases, "overload").await;
    tokio::time::sleep(hold).await;
    let (expired, not_held) = lost_by_reason(&guards);
    let held_count = guards.len();
    let (_, release_errors) = release_all(guards).await;
    // The load is gone: how soon does each operation work again?
    let removed = Instant::now();
    let probe = loop {
        match locks.try_acquire("probe").await {
            Ok(Some(guard)) => break guard,
            _ => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    };
    let acquire_after = removed.elapsed();
    let first_deadline = probe.valid_until();
    while probe.valid_until() == first_deadline && probe.is_valid() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let renewed = probe.is_valid();
    let renew_after = removed.elapsed();
    let released = probe.release().await.is_ok();
    let release_after = removed.elapsed();
    println!(
        "| {} | {} ms | {held_count} | {} | {} | {release_errors} | {:.0} ms | {} | {:.0} ms | {} ({:.0} ms) |",
        kind.name(),
        ttl.as_millis(),
        expired,
        not_held,
        acquire_after.as_secs_f64() * 1000.0,
        if renewed { "yes" } else { "no" },
        renew_after.as_secs_f64() * 1000.0,
        if released { "yes" } else { "no" },
        release_after.as_secs_f64() * 1000.0,
    );
}

/// Acquires per second of `leases` distinct keys on a fresh server: raw
/// `SET NX PX` through the client, then ours fenced and fencing off.
async fn acquire_throughput(kind: ClientKind, leases: usize, ttl: Duration) {
    let server = RedisServer::start().expect("start redis-server");
    let node = lock_core::strategy::connect(kind, &server.url(), ConnectOptions::default())
        .await
        .expect("connect");
    let ttl_ms = ttl.as_millis().to_string();
    let started = Instant::now();
    let granted: usize = stream::iter(0..leases)
        .map(|index| {
            let (node, ttl_ms) = (Arc::clone(&node), &ttl_ms);
            async move {
                let key = format!("raw:{{t{index}}}");
                let args: [&[u8]; 5] = [
                    key.as_bytes(),
                    b"owner-token-0123456789abcdef:0123456789abcdef",
                    b"NX",
                    b"PX",
                    ttl_ms.as_bytes(),
                ];
                let reply = node.command("SET", &args).await.expect("SET");
                usize::from(reply.as_text() == Some("OK"))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .fold(0, |total, granted| async move { total + granted })
        .await;
    assert_eq!(
        granted, leases,
        "every raw SET NX PX of a fresh key succeeds"
    );
    let raw = leases as f64 / started.elapsed().as_secs_f64();
    let mut rates = Vec::new();
    for fencing in [true, false] {
        let backend = backend(kind, &server)
            .await
            .with_grant_options(lock_core::GrantOptions::default().with_fencing(fencing));
        let locks =
            LockManager::new(Arc::new(backend), config(ttl).with_fencing(fencing)).expect("config");
        let prefix = if fencing { "fenced" } else { "unfenced" };
        let started = Instant::now();
        let guards = acquire_all(&locks, leases, prefix).await;
        rates.push(guards.len() as f64 / started.elapsed().as_secs_f64());
        release_all(guards).await;
    }
    println!(
        "| {} | {leases} | {raw:.0} | {:.0} | {:.0} | {:.2} | {:.2} |",
        kind.name(),
        rates[0],
        rates[1],
        rates[0] / raw,
        rates[1] / raw,
    );
}

/// The clients compiled in, less those `BENCH_CLIENT` leaves out.
fn clients() -> impl Iterator<Item = ClientKind> {
    ClientKind::compiled()
        .into_iter()
        .filter(|kind| chosen("BENCH_CLIENT", &kind.to_string()))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let leases = usize::try_from(env_number("BENCH_LEASES", 100_000)).unwrap_or(100_000);
    let ttl = Duration::from_millis(env_number("BENCH_TTL_MS", 3000));
    let hold = Duration::from_secs(env_number("BENCH_HOLD_SECONDS", 10));
    let overload_ttl = Duration::from_millis(env_number("BENCH_OVERLOAD_TTL_MS", 300));
    if chosen("BENCH_ONLY", "held") || chosen("BENCH_ONLY", "one-each") {
        println!(
            "{leases} leases with a {ttl:?} TTL held for {hold:?}; a fresh redis-server per row; \
             CPU in cores (seconds per second)"
        );
        println!();
        println!("| client | renewal | leases | acquired in (s) | script calls/s | renewals/s | client CPU | server CPU | lost | release errors |");
        println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for kind in clients() {
            for (batched, column) in [(true, "held"), (false, "one-each")] {
                if chosen("BENCH_ONLY", column) {
                    held(kind, batched, leases, ttl, hold).await;
                }
            }
        }
        println!();
    }
    if chosen("BENCH_ONLY", "overload") {
        println!(
            "Overload: {leases} leases at the TTL below held for {hold:?}, then all released; \
             the probe's times count from the end of those releases"
        );
        println!();
        println!("| client | TTL | leases | expired | found taken or gone | release errors (not lost) | probe acquired after | probe renewed | renewed after | probe released |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for kind in clients() {
            overload(kind, leases, overload_ttl, hold).await;
        }
        println!();
    }
    if chosen("BENCH_ONLY", "throughput") {
        println!(
            "Acquire throughput: {leases} distinct keys, {CONCURRENCY} at once, acquires per second"
        );
        println!();
        println!("| client | keys | raw SET NX PX | ours, fenced | ours, fencing off | fenced / raw | fencing off / raw |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for kind in clients() {
            acquire_throughput(kind, leases, ttl).await;
        }
    }
}
