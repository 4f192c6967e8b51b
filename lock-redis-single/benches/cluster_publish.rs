//! What one release notification costs a 3-master Redis Cluster: a classic
//! `PUBLISH` (what releases send today) against a sharded `SPUBLISH` (Redis
//! 7) on the channel's slot, each sent to the master of that slot.
//!
//! A classic `PUBLISH` on a cluster is forwarded over the cluster bus to
//! every node, whether or not any of them has a subscriber, so each release
//! costs the whole cluster; an `SPUBLISH` stays within the slot's shard (its
//! master and replicas). For each, the main-thread CPU (`INFO cpu`) of the
//! master that serves the channel and of the other masters, per message,
//! and the cluster-bus messages sent per message (`CLUSTER INFO`).
//!
//! Run with `cargo xtask bench`. `BENCH_MESSAGES` sets the messages per
//! measurement (default 20,000); each figure is the median of `BENCH_ROUNDS`
//! (default 3) interleaved measurements.

use std::sync::Arc;

use lock_core::strategy::{self, KeyNames, NodeClient};
use lock_core::{ClientKind, ConnectOptions, LockKey};
use lock_testkit::bench::{env_number, median};
use lock_testkit::{RedisCluster, RedisServer};

#[allow(dead_code, unused_imports, reason = "each benchmark uses part of it")]
mod common;
use common::{admin, main_thread_cpu};

/// Tasks sending at once: enough to keep the serving master busy.
const TASKS: usize = 8;

/// One cluster-bus counter of `CLUSTER INFO` on `node`.
fn bus_messages_sent(node: &RedisServer, field: &str) -> f64 {
    admin(node, &["CLUSTER", "INFO"])
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Sends `messages` of `command` on `channel` through `node`, from
/// [`TASKS`] tasks, and checks each reply is a count of receivers.
async fn publish(node: &Arc<dyn NodeClient>, command: &'static str, channel: &str, messages: u64) {
    let per_task = messages / TASKS as u64;
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (node, channel) = (Arc::clone(node), channel.to_owned());
            tokio::spawn(async move {
                for _ in 0..per_task {
                    let reply = node
                        .command(command, &[channel.as_bytes(), b"1"])
                        .await
                        .unwrap_or_else(|err| panic!("{command}: {err}"));
                    assert!(reply.as_int().is_some(), "{command} answered {reply:?}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("publisher");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let messages = env_number("BENCH_MESSAGES", 20_000).max(TASKS as u64);
    let rounds = env_number("BENCH_ROUNDS", 3).max(1);
    let cluster = RedisCluster::start(3, 0).expect("start a cluster");
    let key = LockKey::new("lock:", "published").expect("key");
    let channel = key.release_channel();
    let owner = cluster
        .master_of_key(key.redis_key())
        .expect("the channel's master");
    let others: Vec<&RedisServer> = cluster
        .masters()
        .expect("masters")
        .into_iter()
        .filter(|node| node.port() != owner.port())
        .collect();
    let node = strategy::connect(ClientKind::Redis, &owner.url(), ConnectOptions::default())
        .await
        .expect("connect to the channel's master");
    println!(
        "a 3-master cluster (no replicas, no subscribers), {messages} messages per \
         measurement, {TASKS} tasks, median of {rounds}"
    );
    println!();
    println!(
        "| command | master of the slot: CPU µs per message | other masters: CPU µs per \
         message (sum) | cluster-bus messages sent per message |"
    );
    println!("|---|---:|---:|---:|");
    let mut runs: [Vec<(f64, f64, f64)>; 2] = Default::default();
    for _ in 0..rounds {
        for (index, (command, bus_field)) in [
            ("PUBLISH", "cluster_stats_messages_publish_sent"),
            ("SPUBLISH", "cluster_stats_messages_publishshard_sent"),
        ]
        .into_iter()
        .enumerate()
        {
            let all: Vec<&RedisServer> = std::iter::once(owner)
                .chain(others.iter().copied())
                .collect();
            let cpu_before: Vec<f64> = all.iter().map(|node| main_thread_cpu(node)).collect();
            let bus_before = bus_messages_sent(owner, bus_field);
            publish(&node, command, &channel, messages).await;
            let cpu: Vec<f64> = all
                .iter()
                .zip(&cpu_before)
                .map(|(node, before)| (main_thread_cpu(node) - before) * 1e6 / messages as f64)
                .collect();
            let bus = (bus_messages_sent(owner, bus_field) - bus_before) / messages as f64;
            runs[index].push((cpu[0], cpu[1..].iter().sum(), bus));
        }
    }
    for (index, command) in ["PUBLISH", "SPUBLISH"].into_iter().enumerate() {
        let column =
            |pick: fn(&(f64, f64, f64)) -> f64| median(runs[index].iter().map(pick).collect());
        println!(
            "| {command} | {:.2} | {:.2} | {:.2} |",
            column(|run| run.0),
            column(|run| run.1),
            column(|run| run.2),
        );
    }
}
