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
//! cycle from `INFO cpu` (`used_cpu_user_main_thread` +
//! `used_cpu_sys_main_thread`, which also counts reading, parsing and
//! replying), each as a ratio to the floor's. Each column is a criterion
//! benchmark (`server_cost/<client>/<column>`) timing the server's CPU, not
//! the wall's, sampled for `BENCH_SECONDS` (default 2); the grant's µs
//! come from the same runs. `cargo bench -p lock-redis-single --bench
//! server_cost --features redis,fred -- --save-baseline before`, then
//! `--baseline before`, compares a change.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lock_core::strategy::scripts::single::{ACQUIRE, ACQUIRE_TOKEN};
use lock_core::strategy::{self, NodeClient, Script};
use lock_core::{ClientKind, ConnectOptions};
use lock_testkit::bench::{
    acquire_release_cycles, cycles_per_second, env_number, figure, ratio, runtime, task_keys, Span,
    Table,
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

/// What one column's runs measured, summed.
#[derive(Default)]
struct Totals {
    cycles: f64,
    seconds: f64,
    /// The grant command's (`SET` or `EVALSHA`) µs and calls.
    grant_usec: f64,
    grant_calls: f64,
}

fn main() {
    let tasks = usize::try_from(env_number("BENCH_TASKS", 32)).unwrap_or(32);
    let runtime = runtime();
    let mut criterion = lock_testkit::bench::criterion();
    let server = RedisServer::start().expect("start redis-server");
    let url = server.url();
    let options = ConnectOptions::default();
    println!(
        "one redis-server on 127.0.0.1:{}, {tasks} tasks, each figure measured by criterion",
        server.port()
    );
    println!();
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let (node, (fenced, unfenced)) = runtime.block_on(async {
            let node = strategy::connect(kind, &url, options)
                .await
                .expect("connect");
            (node, managers(kind, &url, options).await)
        });
        let mut table = Table::new(&mut criterion, &runtime, "server_cost");
        let mut row = table.row(kind);
        // Per column: the server's main-thread CPU per cycle (criterion's
        // figure), and the totals the other figures come from.
        let mut measured = Vec::new();
        for (index, name) in COLUMNS.iter().enumerate() {
            let totals = RefCell::new(Totals::default());
            let cpu = row.timed(name, |cycles| {
                let (node, fenced, unfenced) =
                    (Arc::clone(&node), fenced.clone(), unfenced.clone());
                let (server, totals) = (&server, &totals);
                async move {
                    admin(server, &["CONFIG", "RESETSTAT"]);
                    let cpu_before = main_thread_cpu(server);
                    let span = Span::Cycles(cycles);
                    let rate = match index {
                        0 => floor(node, tasks, span).await,
                        1 => script_grants(node, &ACQUIRE, tasks, span).await,
                        2 => script_grants(node, &ACQUIRE_TOKEN, tasks, span).await,
                        3 => acquire_release_cycles(fenced, "fenced", tasks, span).await,
                        _ => acquire_release_cycles(unfenced, "unfenced", tasks, span).await,
                    };
                    let cpu = main_thread_cpu(server) - cpu_before;
                    let stats = command_stats(server);
                    // Our fenced grant is `lock/acquire_token.lua`, whose
                    // EVALSHA calls mix with the release's: see that row.
                    let grant = match index {
                        0 | 4 => stats.get("set"),
                        1 | 2 => stats.get("evalsha"),
                        _ => None,
                    };
                    let mut totals = totals.borrow_mut();
                    totals.cycles += cycles as f64;
                    totals.seconds += cycles as f64 / rate.max(f64::MIN_POSITIVE);
                    if let Some((calls, usec)) = grant {
                        totals.grant_calls += calls;
                        totals.grant_usec += usec;
                    }
                    Duration::from_secs_f64(cpu.max(0.0))
                }
            });
            measured.push((cpu.map(|seconds| seconds * 1e6), totals.into_inner()));
        }
        let grant_of = |totals: &Totals| {
            (totals.grant_calls > 0.0).then(|| totals.grant_usec / totals.grant_calls)
        };
        let (floor_cpu, floor_grant) = (measured[0].0, grant_of(&measured[0].1));
        for (name, (cpu, totals)) in COLUMNS.iter().zip(&measured) {
            let rate = (totals.seconds > 0.0).then(|| totals.cycles / totals.seconds);
            let grant = grant_of(totals);
            lines.push(format!(
                "| {kind} | {name} | {} | {} | {} | {} | {} |",
                figure(rate, 0),
                figure(grant, 2),
                ratio(grant, floor_grant),
                figure(*cpu, 2),
                ratio(*cpu, floor_cpu),
            ));
        }
    }
    println!(
        "| client | column | cycles/s | server µs per grant | grant / floor's SET \
         | server CPU µs per cycle | CPU per cycle / floor's |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    criterion.final_summary();
}

/// A fenced acquire script (`lock/acquire.lua` with the default options, as a
/// lock with options sends it, or `lock/acquire_token.lua`), then a raw `DEL`
/// of the key, per second.
async fn script_grants(
    node: Arc<dyn NodeClient>,
    script: &'static Script,
    tasks: usize,
    span: Span,
) -> f64 {
    let keys = task_keys(script.name(), tasks);
    cycles_per_second(tasks, span, move |task| {
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
