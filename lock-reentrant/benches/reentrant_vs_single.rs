//! Reentrant acquire+release cycles per second against single-node
//! acquire+release, measured in the same run on the same server and client:
//! both through `LockManager::try_acquire` + `LockGuard::release`, each task
//! on its own key, nothing contended.
//!
//! Run with `cargo xtask bench`, or `cargo bench -p lock-reentrant --bench
//! reentrant_vs_single --features redis,fred`: each figure is a criterion
//! benchmark (`reentrant_vs_single/<client>/<tasks> tasks/<column>`),
//! sampled for `BENCH_SECONDS` (default 2).

use std::sync::Arc;

use lock_core::{ClientKind, ConnectOptions, LockBackend, LockConfig, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_reentrant::ReentrantBackend;
use lock_testkit::bench::{acquire_release_cycles, figure, ratio, runtime, Table};
use lock_testkit::RedisServer;

fn main() {
    let runtime = runtime();
    let mut criterion = lock_testkit::bench::criterion();
    let server = RedisServer::start().expect("start redis-server");
    let url = server.url();
    let options = ConnectOptions::default();
    println!(
        "one redis-server on 127.0.0.1:{}, each figure measured by criterion",
        server.port()
    );
    println!();
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let config = LockConfig::with_nodes([url.expose().to_owned()]);
        let (single, reentrant) = runtime.block_on(async {
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
            (single, reentrant)
        });
        let single = LockManager::new(single, config.clone()).expect("config");
        let reentrant = LockManager::new(reentrant, config).expect("config");
        let mut table = Table::new(&mut criterion, &runtime, "reentrant_vs_single");
        for tasks in [1, 32] {
            let mut row = table.row(format_args!("{kind}/{tasks} tasks"));
            let single = row.floor("single", |span| {
                acquire_release_cycles(single.clone(), "single", tasks, span)
            });
            let reentrant = row.rate("reentrant", |span| {
                acquire_release_cycles(reentrant.clone(), "reentrant", tasks, span)
            });
            lines.push(format!(
                "| {kind} | {tasks} | {} | {} | {} |",
                figure(single, 0),
                figure(reentrant, 0),
                ratio(reentrant, single)
            ));
        }
    }
    println!("| client | tasks | single (cycles/s) | reentrant (cycles/s) | reentrant / single |");
    println!("|---|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    criterion.final_summary();
}
