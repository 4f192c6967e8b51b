//! Uncontended acquire+release cycles per second: our Redlock over 5 nodes,
//! against our single-node strategy on one of those nodes, and against rslock
//! (crates.io) over the same 5 nodes, all in the same run.
//!
//! Two floors put those figures in proportion. "quorum floor": raw commands
//! through our client connections, no lock API, sent to all 5 nodes at once
//! and waiting for 3 replies per round (`SET NX PX`, then an `EVALSHA`
//! compare-and-delete; the other replies finish in the background): the least
//! a majority client can cost on these crates and this machine. "all-nodes
//! floor": the same, waiting for all 5 replies, as rslock does. The
//! floors send keys and a value as long as Redlock's (`lock:{base:t<task>}`
//! beside Redlock's `lock:{rdlk:t<task>}`, and a 49-byte value like a
//! hold's), and every column's names are made before the measurement. The last
//! column, "redlock / quorum floor", is the median of each round's ratio
//! (Redlock against the floor measured in the same round, the mean of its
//! two measurements when `quorum-again` is named), not a ratio of medians:
//! this machine's speed drifts between rounds by more than the gap measured.
//!
//! A second table repeats the 5-node figures with one node behind a
//! [`DelayProxy`] that adds at least `BENCH_SLOW_MS` (default 1) milliseconds each
//! way (the table header gives the measured round trip): a node that is slow
//! but alive, as one in another zone would be.
//!
//! `cargo xtask bench` runs it. `BENCH_SECONDS` (default 2) is the length of one
//! measurement; each figure is the median of `BENCH_ROUNDS` (default 3)
//! interleaved measurements (`BENCH_VERBOSE=1` prints each on stderr, with
//! its CPU per cycle;
//! `BENCH_SLOW_MS=0` leaves out the second table, and the column name
//! `quorum-again`, measured only when named, measures the quorum floor a
//! second time each round, after Redlock, to show how far two measurements
//! of one thing differ). Every task uses its own
//! key. To profile one row, `BENCH_CLIENT` (`redis` or `fred`) and
//! `BENCH_TASKS` (`1` or `16`) narrow the run, and `BENCH_ONLY` (a
//! comma-separated list of `single`, `quorum`, `all`, `redlock` and
//! `rslock`) measures only those columns (the others read 0).
//! `BENCH_PIN=1` pins the servers to the last CPU and the benchmark to the
//! others (see `lock_testkit::bench::pin_apart_if_asked`): the figures then
//! vary by a few percent between rounds instead of a fifth.
//! `BENCH_FLOOR_SPIN_NS` makes every floor cycle first spin on the CPU for
//! that long: a calibration of how much rate a little client work costs on
//! the machine (on two cores shared with five servers, a client that spends
//! longer per cycle also writes fewer commands per system call, so a
//! microsecond costs far more than a microsecond).

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use lock_core::strategy::scripts::single::RELEASE;
use lock_core::strategy::{self, NodeClient};
use lock_core::{ClientKind, ConnectOptions, LockBackend, LockConfig, LockManager, NodeUrl};
use lock_redis_single::SingleNodeBackend;
use lock_redlock::{RedlockBackend, RedlockOptions};
use lock_testkit::bench::{
    acquire_release_cycles, cycles_per_second, env_number, median, task_keys, task_names,
    FLOOR_VALUE,
};
use lock_testkit::{DelayProxy, RedisServer};

const NODES: usize = 5;
const TTL: Duration = Duration::from_secs(30);

async fn rslock(locks: rslock::LockManager, tasks: usize, length: Duration) -> f64 {
    let names = task_names("rslk", tasks);
    cycles_per_second(tasks, length, move |task| {
        let (locks, names) = (locks.clone(), Arc::clone(&names));
        async move {
            let lock = locks
                .lock(names[task].as_str(), TTL)
                .await
                .expect("rslock acquires an uncontended key");
            locks.unlock(&lock).await;
        }
    })
    .await
}

/// Raw acquire+release rounds over `nodes`, each round sent to every node at
/// once and done after `replies` answers; see the module docs.
async fn floor(
    nodes: Vec<Arc<dyn NodeClient>>,
    replies: usize,
    tasks: usize,
    length: Duration,
) -> f64 {
    for node in &nodes {
        RELEASE
            .load(node.as_ref())
            .await
            .expect("load release script");
    }
    let nodes = Arc::new(nodes);
    let spin = Duration::from_nanos(env_number("BENCH_FLOOR_SPIN_NS", 0));
    let keys = task_keys("base", tasks);
    cycles_per_second(tasks, length, move |task| {
        let (nodes, keys) = (Arc::clone(&nodes), Arc::clone(&keys));
        async move {
            if !spin.is_zero() {
                let started = std::time::Instant::now();
                while started.elapsed() < spin {
                    std::hint::spin_loop();
                }
            }
            let mut acquires: FuturesUnordered<_> = nodes
                .iter()
                .map(|node| {
                    let (node, keys) = (Arc::clone(node), Arc::clone(&keys));
                    async move {
                        let key = &keys[task];
                        let args: [&[u8]; 5] =
                            [key.as_bytes(), FLOOR_VALUE, b"NX", b"PX", b"30000"];
                        node.command("SET", &args).await.expect("SET NX PX")
                    }
                })
                .collect();
            for _ in 0..replies {
                acquires.next().await;
            }
            // As Redlock does, and as the doc above says: the SETs not waited
            // for finish in the background. Dropped, the `redis` crate may
            // skip sending them (seen: 4 % fewer SETs than EVALSHAs on a
            // node), and the floor would do less than a lock may.
            if !acquires.is_empty() {
                tokio::spawn(async move { while acquires.next().await.is_some() {} });
            }
            let mut releases: FuturesUnordered<_> = nodes
                .iter()
                .map(|node| {
                    let (node, keys) = (Arc::clone(node), Arc::clone(&keys));
                    async move {
                        RELEASE
                            .run(node.as_ref(), &[keys[task].as_str()], &[FLOOR_VALUE])
                            .await
                            .expect("EVALSHA release")
                    }
                })
                .collect();
            for _ in 0..replies {
                releases.next().await;
            }
            // As Redlock does: the replies not waited for finish in the background.
            if !releases.is_empty() {
                tokio::spawn(async move { while releases.next().await.is_some() {} });
            }
        }
    })
    .await
}

/// Which rows and columns to measure (`BENCH_CLIENT`, `BENCH_TASKS`,
/// `BENCH_ONLY`), and for how long.
struct Plan {
    length: Duration,
    rounds: u64,
    only_client: Option<String>,
    only_tasks: Option<String>,
    only: Option<String>,
}

impl Plan {
    fn from_env() -> Self {
        Plan {
            length: Duration::from_secs(env_number("BENCH_SECONDS", 2)),
            rounds: env_number("BENCH_ROUNDS", 3).max(1),
            only_client: std::env::var("BENCH_CLIENT").ok(),
            only_tasks: std::env::var("BENCH_TASKS").ok(),
            only: std::env::var("BENCH_ONLY").ok(),
        }
    }

    fn measures(&self, column: &str) -> bool {
        self.only
            .as_deref()
            .is_none_or(|only| only.split(',').any(|name| name == column))
    }

    /// Whether `BENCH_ONLY` names `column` (for columns measured only on
    /// request).
    fn names(&self, column: &str) -> bool {
        self.only
            .as_deref()
            .is_some_and(|only| only.split(',').any(|name| name == column))
    }

    fn kinds(&self) -> Vec<ClientKind> {
        ClientKind::compiled()
            .into_iter()
            .filter(|kind| {
                self.only_client
                    .as_deref()
                    .is_none_or(|only| only == kind.name())
            })
            .collect()
    }

    fn task_counts(&self) -> Vec<usize> {
        [1, 16]
            .into_iter()
            .filter(|tasks| {
                self.only_tasks
                    .as_deref()
                    .is_none_or(|only| only == tasks.to_string())
            })
            .collect()
    }
}

/// One table: every compiled client, 1 and 16 tasks, over `urls`; the single
/// node column (on `urls[0]`) only when `with_single`.
async fn table(plan: &Plan, urls: &[NodeUrl], with_single: bool) {
    println!("| client | tasks | single | quorum floor | all-nodes floor | redlock | rslock | redlock / single | redlock / rslock | quorum floor / rslock | redlock / quorum floor |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let peer = rslock::LockManager::new(urls.iter().map(|url| url.expose().to_owned()).collect());
    let (length, measures) = (plan.length, |column| plan.measures(column));
    for kind in plan.kinds() {
        let options = ConnectOptions::default();
        let config = LockConfig::with_nodes(urls.iter().map(|url| url.expose().to_owned()));
        let single: Arc<dyn LockBackend> = Arc::new(
            SingleNodeBackend::connect(kind, &urls[0], options)
                .await
                .expect("connect single"),
        );
        let redlock: Arc<dyn LockBackend> = Arc::new(
            RedlockBackend::connect(kind, urls, options, RedlockOptions::default())
                .await
                .expect("connect redlock"),
        );
        let mut raw = Vec::new();
        for url in urls {
            raw.push(
                strategy::connect(kind, url, options)
                    .await
                    .expect("connect a node"),
            );
        }
        let single = LockManager::new(single, config.clone()).expect("config");
        let redlock = LockManager::new(redlock, config).expect("config");
        for tasks in plan.task_counts() {
            let (mut singles, mut redlocks, mut peers) = (Vec::new(), Vec::new(), Vec::new());
            let (mut quorum_floors, mut all_floors) = (Vec::new(), Vec::new());
            let mut floors_again = Vec::new();
            for _ in 0..plan.rounds {
                if with_single && measures("single") {
                    singles
                        .push(acquire_release_cycles(single.clone(), "sngl", tasks, length).await);
                }
                if measures("quorum") {
                    quorum_floors.push(floor(raw.clone(), NODES / 2 + 1, tasks, length).await);
                }
                if measures("all") {
                    all_floors.push(floor(raw.clone(), NODES, tasks, length).await);
                }
                if measures("redlock") {
                    redlocks
                        .push(acquire_release_cycles(redlock.clone(), "rdlk", tasks, length).await);
                    report_grants_left(&raw).await;
                }
                // The floor a second time, where the lock ran: how far two
                // measurements of the same thing differ on this machine.
                if plan.names("quorum-again") {
                    floors_again.push(floor(raw.clone(), NODES / 2 + 1, tasks, length).await);
                }
                if measures("rslock") {
                    peers.push(rslock(peer.clone(), tasks, length).await);
                }
            }
            // Each round's Redlock figure against that round's floor (the
            // mean of the floor before and after it, when measured twice):
            // the machine's speed drifts between rounds by more than the
            // gap measured, and a ratio within one round cancels the drift.
            let redlock_per_round: Vec<f64> = redlocks
                .iter()
                .enumerate()
                .filter_map(|(round, redlock)| {
                    let before = quorum_floors.get(round)?;
                    let floor = floors_again
                        .get(round)
                        .map_or(*before, |after| (before + after) / 2.0);
                    Some(redlock / floor)
                })
                .collect();
            if std::env::var_os("BENCH_VERBOSE").is_some() {
                let paired = |column: &[f64]| -> Vec<String> {
                    quorum_floors
                        .iter()
                        .zip(column)
                        .map(|(floor, other)| format!("{:.2}", other / floor))
                        .collect()
                };
                eprintln!(
                    "{kind} {tasks} tasks, each round: quorum floor {quorum_floors:.0?}, \
                     redlock {redlocks:.0?}, redlock / quorum floor {:?}, \
                     quorum floor again / quorum floor {:?}",
                    paired(&redlocks),
                    paired(&floors_again),
                );
            }
            let redlock_ratio = median(redlock_per_round);
            let (single, redlock, peer) = (median(singles), median(redlocks), median(peers));
            let (quorum_floor, all_floor) = (median(quorum_floors), median(all_floors));
            let single_column = if with_single {
                format!("{single:.0}")
            } else {
                "-".to_owned()
            };
            let single_ratio = if with_single {
                format!("{:.2}", redlock / single)
            } else {
                "-".to_owned()
            };
            println!(
                "| {kind} | {tasks} | {single_column} | {quorum_floor:.0} | {all_floor:.0} | {redlock:.0} | {peer:.0} | {single_ratio} | {:.2} | {:.2} | {:.2} |",
                redlock / peer,
                quorum_floor / peer,
                redlock_ratio,
            );
        }
    }
}

/// Says on stderr how many Redlock keys the nodes still hold once every
/// cycle's release has returned and its last deletes had time to land: any is
/// a grant that outlived its release. (Until this was fixed, a background
/// `SET` could land after its release on the `redis` client, and the lock
/// then spent its time waiting on the nodes that were left.)
async fn report_grants_left(nodes: &[Arc<dyn NodeClient>]) {
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut left = Vec::new();
    for node in nodes {
        let keys = node
            .command("KEYS", &[b"lock:{rdlk:*"])
            .await
            .expect("KEYS");
        left.push(keys.as_array().map_or(0, <[_]>::len));
    }
    if left.iter().any(|&keys| keys > 0) {
        eprintln!("redlock: keys left behind after their release, per node: {left:?}");
    }
}

/// The median of 20 `PING` round trips to `url`.
async fn ping_time(url: &NodeUrl) -> Duration {
    let node = strategy::connect(ClientKind::default(), url, ConnectOptions::default())
        .await
        .expect("connect for PING");
    let mut times = Vec::new();
    for _ in 0..20 {
        let started = std::time::Instant::now();
        node.command("PING", &[]).await.expect("PING");
        times.push(started.elapsed());
    }
    times.sort();
    times[times.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let plan = Plan::from_env();
    let slow = Duration::from_millis(env_number("BENCH_SLOW_MS", 1));
    let servers: Vec<RedisServer> = (0..NODES)
        .map(|_| RedisServer::start().expect("start redis-server"))
        .collect();
    let urls: Vec<NodeUrl> = servers.iter().map(RedisServer::url).collect();
    lock_testkit::bench::pin_apart_if_asked(&servers.iter().collect::<Vec<_>>());
    println!(
        "{NODES} redis-servers on 127.0.0.1, {:?} per measurement, median of {}",
        plan.length, plan.rounds
    );
    println!();
    table(&plan, &urls, true).await;
    if env_number("BENCH_SLOW_MS", 1) == 0 {
        return;
    }

    let proxy = DelayProxy::start(servers[NODES - 1].port(), slow)
        .await
        .expect("start the delay proxy");
    let mut slow_urls = urls.clone();
    slow_urls[NODES - 1] = proxy.url();
    let (fast_trip, slow_trip) = (ping_time(&urls[0]).await, ping_time(&proxy.url()).await);
    println!();
    println!(
        "The same 5 nodes, the last one behind a DelayProxy of {slow:?} each way \
         (PING round trip, median of 20: {fast_trip:?} direct, {slow_trip:?} through the proxy):"
    );
    println!();
    table(&plan, &slow_urls, false).await;
}
