//! Uncontended acquire+release cycles per second on a 3-master Redis Cluster
//! (32 tasks, each on a key of its own, so the keys spread over the slots and
//! the masters), against the floor of the same raw commands through the same
//! cluster client and against our standalone figure, all measured in this
//! run; and the cost of `replicas.count = 1` (a `WAIT` behind every acquire
//! and extend) on a master with one replica, against the same lock without it.
//!
//! Run with `cargo xtask bench`, or `cargo bench -p lock-redis-single
//! --bench topologies --features redis,fred`: each figure is a criterion
//! benchmark (`topologies/<client>/<column>`, `topologies/replicas/<client>/
//! <column>`), sampled for `BENCH_SECONDS` (default 2).

use std::sync::Arc;
use std::time::Duration;

use lock_core::strategy;
use lock_core::{ClientKind, ConnectOptions, Endpoint, LockConfig, LockManager, ReplicasConfig};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::bench::{acquire_release_cycles, figure, ratio, runtime, Table};
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

fn main() {
    let runtime = runtime();
    let mut criterion = lock_testkit::bench::criterion();
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
         {TASKS} tasks, each figure measured by criterion"
    );
    println!();
    let on_cluster = Endpoint::cluster(cluster.seed_urls());
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let (floor_node, clustered, single) = runtime.block_on(async {
            let node = strategy::connect(kind, &on_cluster, ConnectOptions::default())
                .await
                .expect("connect the floor");
            let clustered = manager(kind, on_cluster.clone()).await;
            let single = manager(kind, Endpoint::standalone(standalone.url())).await;
            (node, clustered, single)
        });
        let mut table = Table::new(&mut criterion, &runtime, "topologies");
        let mut row = table.row(kind);
        let floor = row.floor("cluster floor", |span| {
            floor(Arc::clone(&floor_node), TASKS, span)
        });
        let scripts = row.rate("cluster scripts", |span| {
            scripts(Arc::clone(&floor_node), TASKS, span)
        });
        let ours = row.rate("cluster, ours", |span| {
            acquire_release_cycles(clustered.clone(), "cluster", TASKS, span)
        });
        let single = row.rate("standalone, ours", |span| {
            acquire_release_cycles(single.clone(), "standalone", TASKS, span)
        });
        lines.push(format!(
            "| {kind} | {} | {} | {} | {} | {} | {} | {} |",
            figure(floor, 0),
            figure(scripts, 0),
            figure(ours, 0),
            ratio(ours, floor),
            ratio(ours, scripts),
            figure(single, 0),
            ratio(ours, single),
        ));
    }
    println!("| client | cluster floor (cycles/s) | cluster scripts (cycles/s) | cluster, ours (cycles/s) | ours / floor | ours / scripts | standalone, ours (cycles/s) | cluster / standalone |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    println!();
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let (plain, waiting) = runtime.block_on(async {
            let plain = manager(kind, Endpoint::standalone(master.url())).await;
            let waiting = manager(
                kind,
                Endpoint::standalone(master.url())
                    .with_replicas(ReplicasConfig::new(1, Duration::from_millis(50))),
            )
            .await;
            (plain, waiting)
        });
        let mut table = Table::new(&mut criterion, &runtime, "topologies/replicas");
        let mut row = table.row(kind);
        let without = row.floor("no WAIT", |span| {
            acquire_release_cycles(plain.clone(), "plain", TASKS, span)
        });
        let with = row.rate("replicas.count = 1", |span| {
            acquire_release_cycles(waiting.clone(), "waiting", TASKS, span)
        });
        lines.push(format!(
            "| {kind} | {} | {} | {} |",
            figure(without, 0),
            figure(with, 0),
            ratio(with, without)
        ));
    }
    println!("| client | no WAIT (cycles/s) | replicas.count = 1 (cycles/s) | with / without |");
    println!("|---|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    criterion.final_summary();
}
