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
//! column, "redlock / quorum floor", is the headline: Redlock against the
//! floor measured in the same run.
//!
//! A second table repeats the 5-node figures with one node behind a
//! [`DelayProxy`] that adds at least `BENCH_SLOW_MS` (default 1) milliseconds each
//! way (the table header gives the measured round trip): a node that is slow
//! but alive, as one in another zone would be.
//!
//! `cargo xtask bench` runs it, or `cargo bench --bench redlock --features
//! redis,fred` in `comparisons/`: each figure is a criterion benchmark
//! (`redlock/<client>/<tasks> tasks/<column>`, and `redlock/one slow
//! node/...`), sampled for `BENCH_SECONDS` (default 2); a filter on the
//! command line measures some of them (the others read `-`), and
//! `--save-baseline NAME` / `--baseline NAME` compare a change. Every task
//! uses its own key. `BENCH_SLOW_MS=0` leaves out the second table.
//! `BENCH_PIN=1` pins the servers to the last CPU and the benchmark to the
//! others (see `lock_testkit::bench::pin_apart_if_asked`): the figures then
//! vary by a few percent between samples instead of a fifth.
//! `BENCH_FLOOR_SPIN_NS` makes every floor cycle first spin on the CPU for
//! that long: a calibration of how much rate a little client work costs on
//! the machine (on two cores shared with five servers, a client that spends
//! longer per cycle also writes fewer commands per system call, so a
//! microsecond costs far more than a microsecond).

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use lock_comparisons::{figure, ratio, runtime};
use lock_core::strategy::scripts::single::RELEASE;
use lock_core::strategy::{self, NodeClient};
use lock_core::{ClientKind, ConnectOptions, LockBackend, LockConfig, LockManager, NodeUrl};
use lock_redis_single::SingleNodeBackend;
use lock_redlock::{RedlockBackend, RedlockOptions};
use lock_testkit::bench::{
    acquire_release_cycles, cycles_per_second, env_number, task_keys, task_names, Criterion, Span,
    Table, FLOOR_VALUE,
};
use lock_testkit::{DelayProxy, RedisServer};

const NODES: usize = 5;
const TTL: Duration = Duration::from_secs(30);

async fn rslock(locks: rslock::LockManager, tasks: usize, span: Span) -> f64 {
    let names = task_names("rslk", tasks);
    cycles_per_second(tasks, span, move |task| {
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
async fn floor(nodes: Vec<Arc<dyn NodeClient>>, replies: usize, tasks: usize, span: Span) -> f64 {
    for node in &nodes {
        RELEASE
            .load(node.as_ref())
            .await
            .expect("load release script");
    }
    let nodes = Arc::new(nodes);
    let spin = Duration::from_nanos(env_number("BENCH_FLOOR_SPIN_NS", 0));
    let keys = task_keys("base", tasks);
    cycles_per_second(tasks, span, move |task| {
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

/// One table, `name`: every compiled client, 1 and 16 tasks, over `urls`;
/// the single node column (on `urls[0]`) only when `with_single`.
fn table(
    criterion: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    name: &str,
    urls: &[NodeUrl],
    with_single: bool,
) {
    let peer = rslock::LockManager::new(urls.iter().map(|url| url.expose().to_owned()).collect());
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let (single, redlock, raw) = runtime.block_on(connect(kind, urls));
        let mut table = Table::new(criterion, runtime, name);
        for tasks in [1usize, 16] {
            let mut row = table.row(format_args!("{kind}/{tasks} tasks"));
            let quorum_floor = row.floor("quorum floor", |span| {
                floor(raw.clone(), NODES / 2 + 1, tasks, span)
            });
            let single = with_single
                .then(|| {
                    row.rate("single", |span| {
                        acquire_release_cycles(single.clone(), "sngl", tasks, span)
                    })
                })
                .flatten();
            let all_floor = row.rate("all-nodes floor", |span| {
                floor(raw.clone(), NODES, tasks, span)
            });
            let redlock = row.rate("redlock", |span| {
                let (redlock, raw) = (redlock.clone(), raw.clone());
                async move {
                    let rate = acquire_release_cycles(redlock, "rdlk", tasks, span).await;
                    report_grants_left(&raw).await;
                    rate
                }
            });
            let rslock = row.rate("rslock", |span| rslock(peer.clone(), tasks, span));
            lines.push(format!(
                "| {kind} | {tasks} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                figure(single, 0),
                figure(quorum_floor, 0),
                figure(all_floor, 0),
                figure(redlock, 0),
                figure(rslock, 0),
                ratio(redlock, single),
                ratio(redlock, rslock),
                ratio(quorum_floor, rslock),
                ratio(redlock, quorum_floor),
            ));
        }
    }
    println!("| client | tasks | single | quorum floor | all-nodes floor | redlock | rslock | redlock / single | redlock / rslock | quorum floor / rslock | redlock / quorum floor |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
}

/// Managers over `urls` through `kind`: the single-node strategy on the
/// first, Redlock over all; and a raw connection to each, for the floors.
async fn connect(
    kind: ClientKind,
    urls: &[NodeUrl],
) -> (LockManager, LockManager, Vec<Arc<dyn NodeClient>>) {
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
    (single, redlock, raw)
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

fn main() {
    let slow = Duration::from_millis(env_number("BENCH_SLOW_MS", 1));
    let servers: Vec<RedisServer> = (0..NODES)
        .map(|_| RedisServer::start().expect("start redis-server"))
        .collect();
    let urls: Vec<NodeUrl> = servers.iter().map(RedisServer::url).collect();
    lock_testkit::bench::pin_apart_if_asked(&servers.iter().collect::<Vec<_>>());
    let (runtime, mut criterion) = (runtime(), lock_testkit::bench::criterion());
    println!("{NODES} redis-servers on 127.0.0.1, each figure measured by criterion");
    println!();
    table(&mut criterion, &runtime, "redlock", &urls, true);
    if slow.is_zero() {
        return criterion.final_summary();
    }
    let proxy = runtime
        .block_on(DelayProxy::start(servers[NODES - 1].port(), slow))
        .expect("start the delay proxy");
    let mut slow_urls = urls.clone();
    slow_urls[NODES - 1] = proxy.url();
    let (fast_trip, slow_trip) = (
        runtime.block_on(ping_time(&urls[0])),
        runtime.block_on(ping_time(&proxy.url())),
    );
    println!();
    println!(
        "The same 5 nodes, the last one behind a DelayProxy of {slow:?} each way \
         (PING round trip, median of 20: {fast_trip:?} direct, {slow_trip:?} through the proxy):"
    );
    println!();
    table(
        &mut criterion,
        &runtime,
        "redlock/one slow node",
        &slow_urls,
        false,
    );
    criterion.final_summary();
}
