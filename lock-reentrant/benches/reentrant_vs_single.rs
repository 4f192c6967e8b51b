//! Reentrant acquire+release cycles per second against single-node
//! acquire+release, measured in the same run on the same server and client:
//! both through `LockManager::try_acquire` + `LockGuard::release`, each task
//! on its own key, nothing contended.
//!
//! Run with `cargo xtask bench`. `BENCH_SECONDS` sets the length of one
//! measurement (default 2); each figure is the median of `BENCH_ROUNDS`
//! (default 3) interleaved measurements.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{ClientKind, ConnectOptions, LockBackend, LockConfig, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_reentrant::ReentrantBackend;
use lock_testkit::bench::{acquire_release_cycles, env_number, median};
use lock_testkit::RedisServer;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let length = Duration::from_secs(env_number("BENCH_SECONDS", 2));
    let rounds = env_number("BENCH_ROUNDS", 3).max(1);
    let server = RedisServer::start().expect("start redis-server");
    let url = server.url();
    let options = ConnectOptions::default();
    println!(
        "one redis-server on 127.0.0.1:{}, {length:?} per measurement, median of {rounds}",
        server.port()
    );
    println!();
    println!("| client | tasks | single (cycles/s) | reentrant (cycles/s) | reentrant / single |");
    println!("|---|---:|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let config = LockConfig::with_nodes([url.expose().to_owned()]);
        let single: Arc<dyn LockBackend> = Arc::new(
            SingleNodeBackend::connect(kind, &url, options)
                .await
                .expect("connect single"),
        );
        let reentrant: Arc<dyn LockBackend> = Arc::new(
            ReentrantBackend::connect(kind, &url, options)
                .await
                .expect("connect reentrant"),
        );
        let single = LockManager::new(single, config.clone()).expect("config");
        let reentrant = LockManager::new(reentrant, config).expect("config");
        for tasks in [1, 32] {
            let (mut singles, mut reentrants) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                singles.push(acquire_release_cycles(single.clone(), "single", tasks, length).await);
                reentrants.push(
                    acquire_release_cycles(reentrant.clone(), "reentrant", tasks, length).await,
                );
            }
            let (single, reentrant) = (median(singles), median(reentrants));
            println!(
                "| {kind} | {tasks} | {single:.0} | {reentrant:.0} | {:.2} |",
                reentrant / single
            );
        }
    }
}
