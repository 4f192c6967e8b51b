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
//! Run with `cargo xtask bench`, or `cargo bench -p lock-redis-single
//! --bench cluster_publish --features redis`: each command is a criterion
//! benchmark (`cluster_publish/<command>`) timing the serving master's CPU
//! per message, sampled for `BENCH_SECONDS` (default 2) of it; the other
//! figures come from the same runs.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use lock_core::strategy::{self, KeyNames, NodeClient};
use lock_core::{ClientKind, ConnectOptions, LockKey};
use lock_testkit::bench::{figure, runtime, Table};
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
    let tasks: Vec<_> = (0..TASKS as u64)
        .map(|task| {
            // `messages` in all: the first few send one more.
            let per_task = messages / TASKS as u64 + u64::from(task < messages % TASKS as u64);
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

/// What one command's runs measured, summed.
#[derive(Default)]
struct Totals {
    messages: f64,
    others_cpu: f64,
    bus: f64,
}

fn main() {
    let runtime = runtime();
    let mut criterion = lock_testkit::bench::criterion();
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
    let node = runtime
        .block_on(strategy::connect(
            ClientKind::Redis,
            &owner.url(),
            ConnectOptions::default(),
        ))
        .expect("connect to the channel's master");
    println!(
        "a 3-master cluster (no replicas, no subscribers), {TASKS} tasks, each figure measured \
         by criterion"
    );
    println!();
    let mut lines = Vec::new();
    let mut table = Table::new(&mut criterion, &runtime, "cluster_publish");
    let mut row = table.row("3 masters");
    for (command, bus_field) in [
        ("PUBLISH", "cluster_stats_messages_publish_sent"),
        ("SPUBLISH", "cluster_stats_messages_publishshard_sent"),
    ] {
        let totals = RefCell::new(Totals::default());
        let serving = row.timed(command, |messages| {
            let (node, channel, others, totals) = (&node, &channel, &others, &totals);
            async move {
                let all: Vec<&RedisServer> = std::iter::once(owner)
                    .chain(others.iter().copied())
                    .collect();
                let cpu_before: Vec<f64> = all.iter().map(|node| main_thread_cpu(node)).collect();
                let bus_before = bus_messages_sent(owner, bus_field);
                publish(node, command, channel, messages).await;
                let cpu: Vec<f64> = all
                    .iter()
                    .zip(&cpu_before)
                    .map(|(node, before)| main_thread_cpu(node) - before)
                    .collect();
                let mut totals = totals.borrow_mut();
                totals.messages += messages as f64;
                totals.others_cpu += cpu[1..].iter().sum::<f64>();
                totals.bus += bus_messages_sent(owner, bus_field) - bus_before;
                Duration::from_secs_f64(cpu[0].max(0.0))
            }
        });
        let totals = totals.into_inner();
        let per_message = |total: f64| (totals.messages > 0.0).then(|| total / totals.messages);
        lines.push(format!(
            "| {command} | {} | {} | {} |",
            figure(serving.map(|seconds| seconds * 1e6), 2),
            figure(per_message(totals.others_cpu * 1e6), 2),
            figure(per_message(totals.bus), 2),
        ));
    }
    drop(row);
    drop(table);
    println!(
        "| command | master of the slot: CPU µs per message | other masters: CPU µs per \
         message (sum) | cluster-bus messages sent per message |"
    );
    println!("|---|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    criterion.final_summary();
}
