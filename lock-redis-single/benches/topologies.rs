//! Uncontended acquire+release cycles per second on a 3-master Redis Cluster
//! (32 tasks, each on a key of its own, so the keys spread over the slots and
//! the masters), against the floor of the same raw commands through the same
//! cluster client and against our standalone figure, all measured in this
//! run; and the cost of `replicas.count = 1` (a `WAIT` behind every acquire
//! and extend) on a master with one replica, against the same lock without it.
//!
//! Run with `cargo xtask bench`. `BENCH_SECONDS` sets the length of one
//! measurement (default 2); each figure is the median of `BENCH_ROUNDS`
//! (default 3) interleaved measurements.

use std::sync::Arc;
use std::time::Duration;

use lock_core::strategy;
use lock_core::{ClientKind, ConnectOptions, Endpoint, LockConfig, LockManager, ReplicasConfig};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::bench::{acquire_release_cycles, env_number, median};
use lock_testkit::{AdminReply, RedisCluster, RedisServer};

#[allow(dead_code, reason = "each benchmark uses part of it")]
mod common;
use common::{floor, scripts};

const TASKS: usize = 32;

async fn manager(kind: ClientKind, endpoint: Endpoint) -> LockManager {
    let backend = SingleNodeBackend::connect(kind, endpoint, ConnectOptions::default())
        .await
        .expect("connect");
    LockManager::new(Arc::new(backend), LockConfig::default()).expect("config")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let length = Duration::from_secs(env_number("BENCH_SECONDS", 2));
    let rounds = env_number("BENCH_ROUNDS", 3).max(1);
    let cluster = RedisCluster::start(3, 0).expect("start a cluster");
    let standalone = RedisServer::start().expect("start redis-server");
    let master = RedisServer::start().expect("start a master");
    let _replica = RedisServer::builder()
        .replica_of(master.port())
        .start()
        .expect("start a replica");
    // SET and WAIT on one connection: WAIT counts the replicas that have its
    // own connection's writes.
    while !matches!(
        master
            .admin_session(&[&["SET", "warm-up", "1"], &["WAIT", "1", "100"]])
            .as_deref(),
        Ok([_, AdminReply::Int(1)])
    ) {}
    println!(
        "a 3-master cluster, a standalone server, and a master with one replica, all on 127.0.0.1; \
         {TASKS} tasks, {length:?} per measurement, median of {rounds}"
    );
    println!();
    println!("| client | cluster floor (cycles/s) | cluster scripts (cycles/s) | cluster, ours (cycles/s) | ours / floor | ours / scripts | standalone, ours (cycles/s) | cluster / standalone |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let on_cluster = Endpoint::cluster(cluster.seed_urls());
    for kind in ClientKind::compiled() {
        let floor_node = strategy::connect(kind, &on_cluster, ConnectOptions::default())
            .await
            .expect("connect the floor");
        let clustered = manager(kind, on_cluster.clone()).await;
        let single = manager(kind, Endpoint::standalone(standalone.url())).await;
        let (mut floors, mut scriptses, mut ourses, mut singles) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            floors.push(floor(Arc::clone(&floor_node), TASKS, length).await);
            scriptses.push(scripts(Arc::clone(&floor_node), TASKS, length).await);
            ourses.push(acquire_release_cycles(clustered.clone(), "cluster", TASKS, length).await);
            singles.push(acquire_release_cycles(single.clone(), "standalone", TASKS, length).await);
        }
        let (floor, scripts, ours, single) = (
            median(floors),
            median(scriptses),
            median(ourses),
            median(singles),
        );
        println!(
            "| {kind} | {floor:.0} | {scripts:.0} | {ours:.0} | {:.2} | {:.2} | {single:.0} | {:.2} |",
            ours / floor,
            ours / scripts,
            ours / single
        );
    }
    println!();
    println!("| client | no WAIT (cycles/s) | replicas.count = 1 (cycles/s) | with / without |");
    println!("|---|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let plain = manager(kind, Endpoint::standalone(master.url())).await;
        let waiting = manager(
            kind,
            Endpoint::standalone(master.url())
                .with_replicas(ReplicasConfig::new(1, Duration::from_millis(50))),
        )
        .await;
        let (mut plains, mut waits) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            plains.push(acquire_release_cycles(plain.clone(), "plain", TASKS, length).await);
            waits.push(acquire_release_cycles(waiting.clone(), "waiting", TASKS, length).await);
        }
        let (plain, waited) = (median(plains), median(waits));
        println!(
            "| {kind} | {plain:.0} | {waited:.0} | {:.2} |",
            waited / plain
        );
    }
}
