//! Uncontended acquire+release cycles per second: our Redlock over 5 nodes,
//! against our single-node strategy on one of those nodes, and against rslock
//! (crates.io) over the same 5 nodes, all in the same run.
//!
//! `cargo xtask bench` runs it. `BENCH_SECONDS` (default 2) is the length of one
//! measurement; each figure is the median of `BENCH_ROUNDS` (default 3)
//! interleaved measurements. Every task uses its own key.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{ClientKind, ConnectOptions, LockBackend, LockConfig, LockManager, NodeUrl};
use lock_redis_single::SingleNodeBackend;
use lock_redlock::{RedlockBackend, RedlockOptions};
use lock_testkit::bench::{acquire_release_cycles, cycles_per_second, env_number, median};
use lock_testkit::RedisServer;

const NODES: usize = 5;
const TTL: Duration = Duration::from_secs(30);

async fn rslock(locks: rslock::LockManager, tasks: usize, length: Duration) -> f64 {
    cycles_per_second(tasks, length, move |task| {
        let locks = locks.clone();
        async move {
            let resource = format!("rslock:t{task}");
            let lock = locks
                .lock(resource.as_str(), TTL)
                .await
                .expect("rslock acquires an uncontended key");
            locks.unlock(&lock).await;
        }
    })
    .await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let length = Duration::from_secs(env_number("BENCH_SECONDS", 2));
    let rounds = env_number("BENCH_ROUNDS", 3).max(1);
    let servers: Vec<RedisServer> = (0..NODES)
        .map(|_| RedisServer::start().expect("start redis-server"))
        .collect();
    let urls: Vec<NodeUrl> = servers.iter().map(RedisServer::url).collect();
    println!("{NODES} redis-servers on 127.0.0.1, {length:?} per measurement, median of {rounds}");
    println!();
    println!("| client | tasks | single (cycles/s) | redlock, 5 nodes | rslock, 5 nodes | redlock / single | redlock / rslock |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let peer = rslock::LockManager::new(urls.iter().map(|url| url.expose().to_owned()).collect());
    for kind in ClientKind::compiled() {
        let options = ConnectOptions::default();
        let config = LockConfig::with_nodes(urls.iter().map(|url| url.expose().to_owned()));
        let single: Arc<dyn LockBackend> = Arc::new(
            SingleNodeBackend::connect(kind, &urls[0], options)
                .await
                .expect("connect single"),
        );
        let redlock: Arc<dyn LockBackend> = Arc::new(
            RedlockBackend::connect(kind, &urls, options, RedlockOptions::default())
                .await
                .expect("connect redlock"),
        );
        let single = LockManager::new(single, config.clone()).expect("config");
        let redlock = LockManager::new(redlock, config).expect("config");
        for tasks in [1, 16] {
            let (mut singles, mut redlocks, mut peers) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..rounds {
                singles.push(acquire_release_cycles(single.clone(), "single", tasks, length).await);
                redlocks
                    .push(acquire_release_cycles(redlock.clone(), "redlock", tasks, length).await);
                peers.push(rslock(peer.clone(), tasks, length).await);
            }
            let (single, redlock, peer) = (median(singles), median(redlocks), median(peers));
            println!(
                "| {kind} | {tasks} | {single:.0} | {redlock:.0} | {peer:.0} | {:.2} | {:.2} |",
                redlock / single,
                redlock / peer
            );
        }
    }
}
