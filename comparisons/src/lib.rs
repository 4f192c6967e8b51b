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
use lock_testkit::bench::{cycles_per_second, env_number, median};
use lock_testkit::RedisServer;
use rand::Rng;

/// One local redis-server and how long to measure on it: `BENCH_SECONDS`
/// (default 2) per measurement, each throughput figure the median of
/// `BENCH_ROUNDS` (default 3) rounds.
pub struct Bench {
    /// The server every figure is measured on.
    pub server: RedisServer,
    /// The length of one measurement.
    pub length: Duration,
    /// How many rounds each throughput figure is the median of.
    pub rounds: u64,
}

impl Bench {
    /// Starts the server and prints the output's first line (and a blank
    /// one) saying what is measured.
    pub fn start() -> Self {
        let length = Duration::from_secs(env_number("BENCH_SECONDS", 2));
        let rounds = env_number("BENCH_ROUNDS", 3).max(1);
        let server = RedisServer::start().expect("start redis-server");
        println!(
            "one redis-server on 127.0.0.1:{}, {length:?} per measurement, median of {rounds}",
            server.port()
        );
        println!();
        Bench {
            server,
            length,
            rounds,
        }
    }

    /// A raw connection to the server through `kind`, for the floors and
    /// the scripts sent raw.
    pub async fn raw(&self, kind: ClientKind) -> Arc<dyn NodeClient> {
        lock_core::strategy::connect(kind, &self.server.url(), ConnectOptions::default())
            .await
            .expect("connect")
    }

    /// The median of each of `N` columns: `round()` measures every column
    /// once, and is called `rounds` times, so that the columns take turns
    /// and a drift of the machine's speed touches them alike.
    pub async fn medians<const N: usize, F, Fut>(&self, mut round: F) -> [f64; N]
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = [f64; N]>,
    {
        let mut columns: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
        for _ in 0..self.rounds {
            for (column, figure) in columns.iter_mut().zip(round().await) {
                column.push(figure);
            }
        }
        columns.map(median)
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
    length: Duration,
    keys: &[String],
    (acquire, argv): (&'static Script, &[&str]),
    release: &'static Script,
) -> f64 {
    let keys: Arc<[String]> = keys.into();
    let argv: Arc<[String]> = argv.iter().map(|arg| (*arg).to_owned()).collect();
    let ids = hold_ids(tasks);
    cycles_per_second(tasks, length, move |task| {
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

/// Prints, for each client, the server's time per cycle of a primitive's
/// scripts ([`server_us_per_cycle`]) beside 1 and beside 64 `holds`, and
/// the ratio of the two: what the grant's cost does as holders accumulate.
pub async fn print_server_time(
    bench: &Bench,
    holds: &str,
    keys: &[String],
    acquire: (&'static Script, &[&str], usize),
    release: &'static Script,
) {
    println!("| client | live {holds} beside | server µs per cycle | beside 64 / beside 1 |");
    println!("|---|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let raw = &bench.raw(kind).await;
        let (server, length) = (&bench.server, bench.length);
        let [one, many] = bench
            .medians(|| async move {
                let measure = |live| {
                    server_us_per_cycle(
                        server,
                        Arc::clone(raw),
                        live,
                        length,
                        keys,
                        acquire,
                        release,
                    )
                };
                [measure(1).await, measure(64).await]
            })
            .await;
        println!("| {kind} | 1 | {one:.2} | |");
        println!("| {kind} | 64 | {many:.2} | {:.2} |", many / one);
    }
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
    length: Duration,
) -> f64 {
    let ids = hold_ids(tasks);
    cycles_per_second(tasks, length, move |task| {
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

/// The server's time per acquire+release cycle of a primitive's scripts
/// sent raw by one task (`INFO commandstats`, the `EVALSHA` calls' µs),
/// with `live` holds of other ids already taken for an hour beside it:
/// what a grant and its release cost the server as holders accumulate.
/// `acquire`'s ARGV after the id is `argv`, its TTL at `ttl_arg`.
async fn server_us_per_cycle(
    server: &RedisServer,
    node: Arc<dyn NodeClient>,
    live: usize,
    length: Duration,
    keys: &[String],
    (acquire, argv, ttl_arg): (&'static Script, &[&str], usize),
    release: &'static Script,
) -> f64 {
    let all: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut held: Vec<&str> = argv.to_vec();
    held[ttl_arg] = "3600000";
    for index in 0..live {
        let id = format!("ffffffffffffffffffffffffffffffff:{index:016x}");
        acquire_raw(node.as_ref(), acquire, &all, id.as_bytes(), &held).await;
    }
    server.admin(&["CONFIG", "RESETSTAT"]).expect("RESETSTAT");
    script_cycles(node, 1, length, keys, (acquire, argv), release).await;
    let stats = server.admin(&["INFO", "commandstats"]).expect("INFO");
    let stats = stats.as_text().expect("INFO text");
    let field = |name: &str| -> f64 {
        stats
            .lines()
            .find_map(|line| line.strip_prefix("cmdstat_evalsha:"))
            .and_then(|line| {
                line.split(',')
                    .find_map(|pair| pair.strip_prefix(name))
                    .and_then(|value| value.parse().ok())
            })
            .expect("cmdstat_evalsha")
    };
    let (calls, usec) = (field("calls="), field("usec="));
    for key in keys {
        server.admin(&["DEL", key]).expect("DEL");
    }
    // Two calls a cycle.
    2.0 * usec / calls
}

/// Cycles per second of a hold of any role that is free at once (`free`
/// says why it must be), taken through the engine with `try_take(task)`,
/// then released.
pub async fn try_take_cycles<F, Fut, G>(
    tasks: usize,
    length: Duration,
    free: &'static str,
    try_take: F,
) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Option<G>, LockError>> + Send + 'static,
    G: LeaseGuard + 'static,
{
    cycles_per_second(tasks, length, move |task| {
        let taken = try_take(task);
        async move {
            let guard = taken.await.expect("try_acquire").expect(free);
            guard.release().await.expect("release");
        }
    })
    .await
}

/// Six holders for `length`, each looping: take a hold of any role with
/// `take` (waiting up to 10 s), keep it 20 to 60 ms, release it. Returns
/// the gaps, in ms, from the start of a release to the next grant.
pub async fn handoff_gaps<F, Fut, G>(length: Duration, take: F) -> Vec<f64>
where
    F: Fn(AcquireOptions) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<G, LockError>> + Send,
    G: LeaseGuard + 'static,
{
    let take = Arc::new(take);
    let released: Arc<Mutex<(Option<Instant>, Vec<f64>)>> = Arc::default();
    let end = Instant::now() + length;
    let holders = (0..6).map(|_| {
        let (take, released) = (Arc::clone(&take), Arc::clone(&released));
        tokio::spawn(async move {
            while Instant::now() < end {
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
    let gaps = std::mem::take(&mut released.lock().expect("gaps").1);
    gaps
}

/// One row of a handoff table: `label`, the p50 and p99 of `gaps` (ms)
/// and how many there were.
pub fn print_gaps(label: &str, mut gaps: Vec<f64>) {
    if gaps.is_empty() {
        println!("| {label} | - | - | 0 |");
        return;
    }
    gaps.sort_by(f64::total_cmp);
    let at = |fraction: f64| gaps[((gaps.len() - 1) as f64 * fraction).round() as usize];
    println!(
        "| {label} | {:.2} | {:.2} | {} |",
        at(0.5),
        at(0.99),
        gaps.len()
    );
}
