//! Uncontended acquire+release cycles per second, against the floor measured in
//! the same run on the same server and connection kind: a raw `SET key val NX PX`
//! followed by a raw `EVALSHA` compare-and-delete (two round trips, the least a
//! lock can cost).
//!
//! A third figure, "scripts", runs our acquire and release scripts through the
//! same raw connection without the lock API: the gap between it and the floor is
//! what the server spends on the fenced acquire (a Lua call that also INCRs the
//! fencing counter); the gap between "ours" and it is our client-side cost.
//!
//! Run with `cargo xtask bench`. `BENCH_SECONDS` sets the length of one
//! measurement (default 2); each figure is the median of `BENCH_ROUNDS` (default
//! 3) interleaved measurements.

use std::sync::Arc;
use std::time::Duration;

use lock_core::kit;
use lock_core::{ClientKind, ConnectOptions, LockConfig, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::bench::{acquire_release_cycles, env_number, median};
use lock_testkit::RedisServer;

mod common;
use common::{floor, scripts};

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
    println!("| client | tasks | floor (cycles/s) | scripts (cycles/s) | ours (cycles/s) | ours / floor | ours / scripts |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let floor_node = kit::connect(kind, &url, options)
            .await
            .expect("connect floor");
        let backend = SingleNodeBackend::connect(kind, &url, options)
            .await
            .expect("connect ours");
        let config = LockConfig::with_nodes([url.expose().to_owned()]);
        let locks = LockManager::new(Arc::new(backend), config).expect("config");
        for tasks in [1, 32] {
            let (mut floors, mut scriptses, mut ourses) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..rounds {
                floors.push(floor(Arc::clone(&floor_node), tasks, length).await);
                scriptses.push(scripts(Arc::clone(&floor_node), tasks, length).await);
                ourses.push(acquire_release_cycles(locks.clone(), "bench", tasks, length).await);
            }
            let (floor, scripts, ours) = (median(floors), median(scriptses), median(ourses));
            println!(
                "| {kind} | {tasks} | {floor:.0} | {scripts:.0} | {ours:.0} | {:.2} | {:.2} |",
                ours / floor,
                ours / scripts
            );
        }
    }
}
