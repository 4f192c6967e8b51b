//! What a lock costs the server, against the floor measured in the same run
//! on the same server and client: 32 tasks (`BENCH_TASKS`) of uncontended
//! acquire+release on keys of their own.
//!
//! - **floor**: a raw `SET key val NX PX 30000` and the release script
//!   (compare-and-delete) per cycle, the least a lock can cost.
//! - **lock/acquire.lua**: the fenced acquire script a lock with `holder_info`
//!   or `fencing_counter_ttl` sends (here with the default options, as every
//!   fenced acquire sent it before), and a raw `DEL`, to price it alone.
//! - **lock/acquire_token.lua**: the default fenced acquire (fencing on, no
//!   options), and a raw `DEL`.
//! - **ours, fenced**: `LockManager::try_acquire` + `release` with the
//!   defaults (fencing on: `lock/acquire_token.lua`, whose `EVALSHA` calls mix
//!   with the release script's here; see that row for the grant alone).
//! - **ours, fencing off**: the same with `fencing = false`.
//!
//! Per column: the server's time per grant from `INFO commandstats` (the
//! floor's `SET`; the script's `EVALSHA`) and its main thread's CPU per
//! cycle from
//! `INFO cpu` (`used_cpu_user_main_thread` + `used_cpu_sys_main_thread`,
//! which also counts reading, parsing and replying), each as a ratio to the
//! floor's. `BENCH_SECONDS` (default 2) sets each measurement's length;
//! each figure is the median of `BENCH_ROUNDS` (default 3) rounds.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lock_core::strategy::scripts::single::{ACQUIRE, ACQUIRE_TOKEN};
use lock_core::strategy::{self, NodeClient, Script};
use lock_core::{ClientKind, ConnectOptions};
use lock_testkit::bench::{
    acquire_release_cycles, cycles_per_second, env_number, median, task_keys,
};
use lock_testkit::RedisServer;

#[allow(dead_code, reason = "each benchmark uses part of it")]
mod common;

use common::{admin, floor, grant_by_script, main_thread_cpu, managers};

/// The columns, in the order of the table.
const COLUMNS: [&str; 5] = [
    "floor",
    "lock/acquire.lua",
    "lock/acquire_token.lua",
    "ours, fenced",
    "ours, fencing off",
];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let length = Duration::from_secs(env_number("BENCH_SECONDS", 2));
    let rounds = env_number("BENCH_ROUNDS", 3).max(1);
    let tasks = usize::try_from(env_number("BENCH_TASKS", 32)).unwrap_or(32);
    let server = RedisServer::start().expect("start redis-server");
    let url = server.url();
    let options = ConnectOptions::default();
    println!(
        "one redis-server on 127.0.0.1:{}, {tasks} tasks, {length:?} per measurement, \
         median of {rounds}",
        server.port()
    );
    println!();
    println!(
        "| client | column | cycles/s | server µs per grant | grant / floor's SET \
         | server CPU µs per cycle | CPU per cycle / floor's |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let node = strategy::connect(kind, &url, options)
            .await
            .expect("connect");
        let (fenced, unfenced) = managers(kind, &url, options).await;
        // Per column: (cycles/s, µs per grant, CPU µs per cycle), each round.
        let mut runs: [Vec<(f64, f64, f64)>; 5] = Default::default();
        for _ in 0..rounds {
            for (index, run) in runs.iter_mut().enumerate() {
                admin(&server, &["CONFIG", "RESETSTAT"]);
                let cpu_before = main_thread_cpu(&server);
                let rate = match index {
                    0 => floor(Arc::clone(&node), tasks, length).await,
                    1 => script_grants(Arc::clone(&node), &ACQUIRE, tasks, length).await,
                    2 => script_grants(Arc::clone(&node), &ACQUIRE_TOKEN, tasks, length).await,
                    3 => acquire_release_cycles(fenced.clone(), "fenced", tasks, length).await,
                    _ => acquire_release_cycles(unfenced.clone(), "unfenced", tasks, length).await,
                };
                let cpu = main_thread_cpu(&server) - cpu_before;
                let stats = command_stats(&server);
                let grant = match index {
                    0 | 4 => per_call(&stats, &["set"], "set"),
                    1 | 2 => per_call(&stats, &["evalsha"], "evalsha"),
                    // Our grant is `lock/acquire_token.lua`, whose EVALSHA calls
                    // mix with the release's: see that row.
                    _ => f64::NAN,
                };
                let cycles = rate * length.as_secs_f64();
                run.push((rate, grant, cpu * 1e6 / cycles.max(1.0)));
            }
        }
        let medians: Vec<(f64, f64, f64)> = runs
            .iter()
            .map(|run| {
                (
                    median(run.iter().map(|row| row.0).collect()),
                    median(run.iter().map(|row| row.1).collect()),
                    median(run.iter().map(|row| row.2).collect()),
                )
            })
            .collect();
        let (_, floor_grant, floor_cpu) = medians[0];
        for (name, (rate, grant, cpu)) in COLUMNS.iter().zip(&medians) {
            let grant = if grant.is_nan() {
                "- | -".to_owned()
            } else {
                format!("{grant:.2} | {:.2}", grant / floor_grant)
            };
            println!(
                "| {kind} | {name} | {rate:.0} | {grant} | {cpu:.2} | {:.2} |",
                cpu / floor_cpu
            );
        }
    }
}

/// A fenced acquire script (`lock/acquire.lua` with the default options, as a
/// lock with options sends it, or `lock/acquire_token.lua`), then a raw `DEL`
/// of the key, per second.
async fn script_grants(
    node: Arc<dyn NodeClient>,
    script: &'static Script,
    tasks: usize,
    length: Duration,
) -> f64 {
    let keys = task_keys(script.name(), tasks);
    cycles_per_second(tasks, length, move |task| {
        let (node, keys) = (Arc::clone(&node), Arc::clone(&keys));
        async move {
            let key = &keys[task];
            grant_by_script(node.as_ref(), script, key).await;
            node.command("DEL", &[key.as_bytes()]).await.expect("DEL");
        }
    })
    .await
}

/// `INFO commandstats` as command -> (calls, µs).
fn command_stats(server: &RedisServer) -> HashMap<String, (f64, f64)> {
    admin(server, &["INFO", "commandstats"])
        .lines()
        .filter_map(|line| {
            let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |wanted: &str| -> Option<f64> {
                fields
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(wanted)?.strip_prefix('='))?
                    .parse()
                    .ok()
            };
            Some((name.to_owned(), (field("calls")?, field("usec")?)))
        })
        .collect()
}

/// The µs of `commands` together per call of `per`.
fn per_call(stats: &HashMap<String, (f64, f64)>, commands: &[&str], per: &str) -> f64 {
    let usec: f64 = commands
        .iter()
        .filter_map(|command| stats.get(*command))
        .map(|(_, usec)| usec)
        .sum();
    let calls = stats.get(per).map_or(0.0, |(calls, _)| *calls);
    if calls == 0.0 {
        f64::NAN
    } else {
        usec / calls
    }
}
