//! What the comparison benchmarks (`benches/`) share: the server and the
//! managers they measure, the loops that measure a primitive's scripts, its
//! cycles and its handoffs, and how they print a handoff row. See
//! `docs/BENCHMARKS.md`.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_core::strategy::{NodeClient, Script};
use lock_core::{
    AcquireOptions, ClientKind, ConnectOptions, LeaseGuard, LockConfig, LockError, LockManager,
    NodeUrl,
};
use lock_redis_single::SingleNodeBackend;
pub use lock_testkit::bench::Criterion;
use lock_testkit::bench::{cycles_per_second, Row, Span, Table};
pub use lock_testkit::bench::{figure, ratio, runtime};
use lock_testkit::RedisServer;
use rand::Rng;

/// One local redis-server, the runtime the measurements run on, and the
/// criterion that measures them ([`lock_testkit::bench::criterion`]:
/// `BENCH_SECONDS`, default 2, of samples per figure, and the command
/// line's options).
pub struct Bench {
    /// The server every figure is measured on.
    pub server: RedisServer,
    /// The runtime every measurement runs on (two worker threads).
    pub runtime: tokio::runtime::Runtime,
    /// What measures the figures.
    pub criterion: Criterion,
}

impl Bench {
    /// Starts the server and the runtime, and prints the output's first line
    /// (and a blank one) saying what is measured.
    pub fn start() -> Self {
        let runtime = runtime();
        let server = RedisServer::start().expect("start redis-server");
        println!(
            "one redis-server on 127.0.0.1:{}, each figure measured by criterion",
            server.port()
        );
        println!();
        Bench {
            server,
            runtime,
            criterion: lock_testkit::bench::criterion(),
        }
    }

    /// A raw connection to the server through `kind`, for the floors and
    /// the scripts sent raw.
    pub fn raw(&self, kind: ClientKind) -> Arc<dyn NodeClient> {
        self.runtime.block_on(async {
            lock_core::strategy::connect(kind, &self.server.url(), ConnectOptions::default())
                .await
                .expect("connect")
        })
    }

    /// `future`'s output, run on the benchmark's runtime (for the set-up
    /// between figures).
    pub fn run<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// The table called `name`: its figures are criterion benchmarks named
    /// `<name>/<row>/<column>`.
    pub fn table(&mut self, name: &str) -> Table<'_> {
        Table::new(&mut self.criterion, &self.runtime, name)
    }

    /// Ends the run: criterion's summary (and its comparison with a
    /// baseline, when one was named).
    pub fn finish(self) {
        self.criterion.final_summary();
    }
}

/// A single-node manager on `server` through `kind`, with leases of `ttl`.
pub async fn single_node_manager(
    kind: ClientKind,
    server: &RedisServer,
    ttl: Duration,
) -> LockManager {
    single_node_manager_at(kind, &server.url(), ttl, false).await
}

/// As [`single_node_manager`], in fair mode.
pub async fn fair_single_node_manager(
    kind: ClientKind,
    server: &RedisServer,
    ttl: Duration,
) -> LockManager {
    single_node_manager_at(kind, &server.url(), ttl, true).await
}

/// A single-node manager on the server at `url` through `kind`, with leases
/// of `ttl`, in fair mode if `fair`.
pub async fn single_node_manager_at(
    kind: ClientKind,
    url: &NodeUrl,
    ttl: Duration,
    fair: bool,
) -> LockManager {
    let backend = SingleNodeBackend::connect(kind, url, ConnectOptions::default())
        .await
        .expect("connect");
    let config = LockConfig::with_nodes([url.expose().to_owned()])
        .with_ttl(ttl)
        .with_client(kind)
        .with_fair(fair);
    LockManager::new(Arc::new(backend), config).expect("config")
}

/// Each task's hold id (an owner's 32 hex digits, `:`, the task as a
/// 16-digit nonce), for the scripts sent raw: as long as a hold's, and made
/// before the measurement.
pub fn hold_ids(tasks: usize) -> Arc<[String]> {
    (0..tasks)
        .map(|task| format!("0123456789abcdef0123456789abcdef:{task:016x}"))
        .collect()
}

/// Runs a primitive's `acquire` script raw for the hold `id` (ARGV: the id,
/// then `argv`), which must grant it.
async fn acquire_raw(
    node: &dyn NodeClient,
    acquire: &Script,
    keys: &[&str],
    id: &[u8],
    argv: &[&str],
) {
    let args: Vec<&[u8]> = std::iter::once(id)
        .chain(argv.iter().map(|arg| arg.as_bytes()))
        .collect();
    let granted = acquire
        .run(node, keys, &args)
        .await
        .expect("EVALSHA acquire");
    assert_eq!(
        granted.as_array().and_then(|reply| reply[0].as_int()),
        Some(1),
        "an uncontended acquire must be granted"
    );
}

/// A primitive's acquire and release scripts sent raw, cycles per second:
/// every task takes a hold of its own id ([`hold_ids`]) on the one primitive
/// whose keys are `keys`, with `acquire` (ARGV: the id, then `argv`), and
/// gives it back with `release` (the lease set's three keys; ARGV: the id). Both
/// must reply that they did (1).
pub async fn script_cycles(
    node: Arc<dyn NodeClient>,
    tasks: usize,
    span: impl Into<Span>,
    keys: &[String],
    (acquire, argv): (&'static Script, &[&str]),
    release: &'static Script,
) -> f64 {
    let keys: Arc<[String]> = keys.into();
    let argv: Arc<[String]> = argv.iter().map(|arg| (*arg).to_owned()).collect();
    let ids = hold_ids(tasks);
    cycles_per_second(tasks, span, move |task| {
        let (node, keys, argv, ids) = (
            Arc::clone(&node),
            Arc::clone(&keys),
            Arc::clone(&argv),
            Arc::clone(&ids),
        );
        async move {
            let id = ids[task].as_bytes();
            let all: Vec<&str> = keys.iter().map(String::as_str).collect();
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            acquire_raw(node.as_ref(), acquire, &all, id, &argv).await;
            let released = release
                .run(node.as_ref(), &all[..3], &[id])
                .await
                .expect("EVALSHA release");
            assert_eq!(released.as_int(), Some(1));
        }
    })
    .await
}

/// The table `<table>/server time`: for each client, the server's time
/// per cycle of a primitive's scripts sent raw by one task (`INFO
/// commandstats`, criterion timing the server's time rather than the
/// wall's) beside 1 and beside 64 live `holds`, and the ratio of the two:
/// what the grant's cost does as holders accumulate.
pub fn server_time_table(
    bench: &mut Bench,
    table: &str,
    holds: &str,
    keys: &[String],
    acquire: (&'static Script, &[&str], usize),
    release: &'static Script,
) {
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let raw = bench.raw(kind);
        let server = &bench.server;
        let mut table = Table::new(
            &mut bench.criterion,
            &bench.runtime,
            format!("{table}/server time"),
        );
        let mut row = table.row(kind);
        let mut beside = |live: usize| {
            row.timed(&format!("beside {live}"), |cycles| {
                server_time(
                    server,
                    Arc::clone(&raw),
                    live,
                    cycles,
                    keys,
                    acquire,
                    release,
                )
            })
        };
        let (one, many) = (beside(1), beside(64));
        let micros = |seconds: Option<f64>| seconds.map(|seconds| seconds * 1e6);
        lines.push(format!("| {kind} | 1 | {} | |", figure(micros(one), 2)));
        lines.push(format!(
            "| {kind} | 64 | {} | {} |",
            figure(micros(many), 2),
            ratio(many, one)
        ));
    }
    println!("| client | live {holds} beside | server µs per cycle | beside 64 / beside 1 |");
    println!("|---|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    println!();
}

/// redis-semaphore's acquire (5.8.0, `lib/semaphore/acquire/lua.js`): drop
/// the entries older than the lease by the client's clock, count, add.
static PEER_ACQUIRE: Script = Script::new(
    "redis_semaphore_acquire",
    "local key = KEYS[1]
local limit = tonumber(ARGV[1])
local identifier = ARGV[2]
local lockTimeout = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local expiredTimestamp = now - lockTimeout
redis.call('zremrangebyscore', key, '-inf', expiredTimestamp)
if redis.call('zcard', key) < limit then
  redis.call('zadd', key, now, identifier)
  redis.call('pexpire', key, lockTimeout)
  return 1
else
  return 0
end",
);

/// redis-semaphore's algorithm sent raw through our client, cycles per
/// second: its acquire script (a semaphore of 64, 30 s leases, the time
/// from this process's clock) and its release, a `ZREM`, by `tasks` tasks
/// on one key: the floor a semaphore without fencing tokens, slots,
/// server-clock deadlines or checks of foreign data costs.
pub async fn peer_algorithm_cycles(
    node: Arc<dyn NodeClient>,
    tasks: usize,
    span: impl Into<Span>,
) -> f64 {
    let ids = hold_ids(tasks);
    cycles_per_second(tasks, span, move |task| {
        let (node, ids) = (Arc::clone(&node), Arc::clone(&ids));
        async move {
            let key = "lock:{peer-pool}";
            let id = ids[task].as_bytes();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis())
                .to_string();
            let granted = PEER_ACQUIRE
                .run(
                    node.as_ref(),
                    &[key],
                    &[b"64", id, b"30000", now.as_bytes()],
                )
                .await
                .expect("EVALSHA acquire");
            assert_eq!(granted.as_int(), Some(1));
            let released = node
                .command("ZREM", &[key.as_bytes(), id])
                .await
                .expect("ZREM");
            assert_eq!(released.as_int(), Some(1));
        }
    })
    .await
}

/// The server's time for `cycles` acquire+release cycles of a primitive's
/// scripts sent raw by one task (`INFO commandstats`, the `EVALSHA` calls'
/// µs), with `live` holds of other ids already taken for an hour beside
/// it: what a grant and its release cost the server as holders accumulate.
/// `acquire`'s ARGV after the id is `argv`, its TTL at `ttl_arg`.
async fn server_time(
    server: &RedisServer,
    node: Arc<dyn NodeClient>,
    live: usize,
    cycles: u64,
    keys: &[String],
    (acquire, argv, ttl_arg): (&'static Script, &[&str], usize),
    release: &'static Script,
) -> Duration {
    let all: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut held: Vec<&str> = argv.to_vec();
    held[ttl_arg] = "3600000";
    for index in 0..live {
        let id = format!("ffffffffffffffffffffffffffffffff:{index:016x}");
        acquire_raw(node.as_ref(), acquire, &all, id.as_bytes(), &held).await;
    }
    server.admin(&["CONFIG", "RESETSTAT"]).expect("RESETSTAT");
    script_cycles(
        node,
        1,
        Span::Cycles(cycles),
        keys,
        (acquire, argv),
        release,
    )
    .await;
    let stats = server.admin(&["INFO", "commandstats"]).expect("INFO");
    let stats = stats.as_text().expect("INFO text");
    let usec: f64 = stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:"))
        .and_then(|line| {
            line.split(',')
                .find_map(|pair| pair.strip_prefix("usec="))
                .and_then(|value| value.parse().ok())
        })
        .expect("cmdstat_evalsha");
    for key in keys {
        server.admin(&["DEL", key]).expect("DEL");
    }
    Duration::from_secs_f64(usec / 1e6)
}

/// Cycles per second of a hold of any role that is free at once (`free`
/// says why it must be), taken through the engine with `try_take(task)`,
/// then released.
pub async fn try_take_cycles<F, Fut, G>(
    tasks: usize,
    span: impl Into<Span>,
    free: &'static str,
    try_take: F,
) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Option<G>, LockError>> + Send + 'static,
    G: LeaseGuard + 'static,
{
    cycles_per_second(tasks, span, move |task| {
        let taken = try_take(task);
        async move {
            let guard = taken.await.expect("try_acquire").expect(free);
            guard.release().await.expect("release");
        }
    })
    .await
}

/// Six holders, each looping: take a hold of any role with `take` (waiting
/// up to 10 s), keep it 20 to 60 ms, release it; for a time, or until
/// that many handoffs were seen ([`Span::Cycles`]). Returns the gaps, in
/// ms, from the start of a release to the next grant.
pub async fn handoff_gaps<F, Fut, G>(span: impl Into<Span>, take: F) -> Vec<f64>
where
    F: Fn(AcquireOptions) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<G, LockError>> + Send,
    G: LeaseGuard + 'static,
{
    let (end, wanted) = match span.into() {
        Span::For(length) => (Instant::now() + length, usize::MAX),
        Span::Cycles(count) => (
            Instant::now() + Duration::from_secs(3600),
            usize::try_from(count).unwrap_or(usize::MAX),
        ),
    };
    let take = Arc::new(take);
    let released: Arc<Mutex<(Option<Instant>, Vec<f64>)>> = Arc::default();
    let holders = (0..6).map(|_| {
        let (take, released) = (Arc::clone(&take), Arc::clone(&released));
        tokio::spawn(async move {
            let more = || Instant::now() < end && released.lock().expect("gaps").1.len() < wanted;
            while more() {
                let options = AcquireOptions::new().with_wait(Duration::from_secs(10));
                let guard = take(options).await.expect("a hold");
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
    let mut gaps = std::mem::take(&mut released.lock().expect("gaps").1);
    gaps.truncate(wanted);
    gaps
}

/// Measures the column `column` of `row` as latencies: `run(n)` measures
/// `n` of them, and criterion times their sum (`sum` of what the run
/// returned); returns what every run returned. Criterion plans a column by
/// the wall time its runs take, and a handoff takes a holder's 20 to 60 ms
/// to come round: the row warms up for 0.5 s and samples for
/// `BENCH_SECONDS` × 2 s of it (a few hundred gaps).
pub fn latency_column<T, F, Fut>(
    row: &mut Row<'_>,
    column: &str,
    mut run: F,
    sum: impl Fn(&T) -> Duration,
) -> Vec<T>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = T>,
{
    let seconds = lock_testkit::bench::env_number("BENCH_SECONDS", 2).max(1);
    row.set_times(Duration::from_millis(500), Duration::from_secs(2 * seconds));
    let runs = std::cell::RefCell::new(Vec::new());
    row.timed(column, |count| {
        let measured = run(count);
        let (runs, sum) = (&runs, &sum);
        async move {
            let measured = measured.await;
            let took = sum(&measured);
            runs.borrow_mut().push(measured);
            took
        }
    });
    runs.into_inner()
}

/// [`latency_column`] of gaps in ms: every gap of every run.
pub fn gap_column<F, Fut>(row: &mut Row<'_>, column: &str, gaps: F) -> Vec<f64>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Vec<f64>>,
{
    let sum = |gaps: &Vec<f64>| Duration::from_secs_f64(gaps.iter().sum::<f64>() / 1000.0);
    latency_column(row, column, gaps, sum)
        .into_iter()
        .flatten()
        .collect()
}

/// The commands a client of ours sends (`INFO commandstats` counts those a
/// script runs too, so only these are counted): scripts, subscriptions,
/// `PING`.
pub const OUR_COMMANDS: [&str; 8] = [
    "evalsha",
    "eval",
    "script|load",
    "subscribe",
    "unsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "ping",
];

/// How many times the server ran the commands `top_level` since its last
/// `CONFIG RESETSTAT` (`INFO commandstats`): the commands clients sent,
/// when no script runs any of them.
pub fn client_commands(server: &RedisServer, top_level: &[&str]) -> u64 {
    let stats = server.admin(&["INFO", "commandstats"]).expect("INFO");
    let stats = stats.as_text().expect("INFO text").to_owned();
    stats
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_")?.split_once(':'))
        .filter(|(name, _)| top_level.contains(name))
        .filter_map(|(_, fields)| {
            fields
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// `measure`'s output, and how many of the commands `top_level` clients
/// sent the server while it ran ([`client_commands`]).
pub async fn counting_commands<T>(
    server: &RedisServer,
    top_level: &[&str],
    measure: impl Future<Output = T>,
) -> (T, u64) {
    server.admin(&["CONFIG", "RESETSTAT"]).expect("RESETSTAT");
    let output = measure.await;
    (output, client_commands(server, top_level))
}

/// How long a steady run of handoffs lasts, beside criterion's runs (each
/// of which starts and stops its holders): what the commands per handoff
/// are counted over.
pub const STEADY: Duration = Duration::from_secs(3);

/// One row of a handoff table: `label`, the p50 and p99 of `gaps` (ms),
/// how many there were, and the commands per handoff of a steady run.
pub fn gap_line(label: &str, mut gaps: Vec<f64>, commands_per_handoff: Option<f64>) -> String {
    let commands = figure(commands_per_handoff, 1);
    if gaps.is_empty() {
        return format!("| {label} | - | - | 0 | {commands} |");
    }
    gaps.sort_by(f64::total_cmp);
    let at = |fraction: f64| gaps[((gaps.len() - 1) as f64 * fraction).round() as usize];
    format!(
        "| {label} | {:.2} | {:.2} | {} | {commands} |",
        at(0.5),
        at(0.99),
        gaps.len(),
    )
}

/// A column of a handoff table: the gaps criterion measured (`gaps(n)`,
/// its runs), then a steady run (`gaps` of as many as [`STEADY`] gives)
/// with the commands `top_level` it sent counted. Returns every gap and
/// the commands per handoff of the steady run.
pub fn handoff_column<F, Fut>(
    row: &mut Row<'_>,
    (runtime, server, top_level): (&tokio::runtime::Runtime, &RedisServer, &[&str]),
    column: &str,
    mut gaps: F,
    steady: impl Future<Output = Vec<f64>>,
) -> (Vec<f64>, Option<f64>)
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Vec<f64>>,
{
    let mut all = gap_column(row, column, &mut gaps);
    let (steady, commands) = runtime.block_on(counting_commands(server, top_level, steady));
    let per_handoff = (!steady.is_empty()).then(|| commands as f64 / steady.len() as f64);
    all.extend(steady);
    (all, per_handoff)
}
