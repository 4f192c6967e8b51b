//! Multi-key locks, measured in one run on one local server: acquire+release
//! cycles per second of a hold of 2 and of 8 names, each task with names of
//! its own, with 1 and 32 tasks on one connection, against
//!
//! - the floor of the lock benchmarks (a raw `SET NX PX` and a raw
//!   `EVALSHA` compare-and-delete of one key per task: two round trips);
//! - *scripts*: the multi-key acquire and release scripts sent raw;
//! - *one by one*: the same names as plain locks through the engine, taken
//!   one after another and released after (what a caller without
//!   multi-key locks does, 2 × N round trips).
//!
//! Run with `cargo xtask bench`, or `cargo bench --bench multi --features
//! redis,fred` in `comparisons/`: each figure is a criterion benchmark
//! (`multi/<client>/<names> names/<tasks> tasks/<column>`), sampled for
//! `BENCH_SECONDS` (default 2); see `lock_testkit::bench::Table`.

use std::sync::Arc;
use std::time::Duration;

use lock_comparisons::{figure, hold_ids, ratio, single_node_manager, try_take_cycles, Bench};
use lock_core::strategy::scripts::multi::{ACQUIRE, RELEASE};
use lock_core::strategy::NodeClient;
use lock_core::{ClientKind, LockManager, MultiLock};
use lock_testkit::bench::{cycles_per_second, lock_floor, Span, Table};

fn main() {
    let mut bench = Bench::start();
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let raw = &bench.raw(kind);
        let locks = &bench.run(single_node_manager(
            kind,
            &bench.server,
            Duration::from_secs(30),
        ));
        let mut table = Table::new(&mut bench.criterion, &bench.runtime, "multi");
        for names in [2usize, 8] {
            for tasks in [1usize, 32] {
                let mut row = table.row(format_args!("{kind}/{names} names/{tasks} tasks"));
                let floor = row.floor("floor", |span| lock_floor(Arc::clone(raw), tasks, span));
                let scripts = row.rate("scripts", |span| {
                    scripts(Arc::clone(raw), names, tasks, span)
                });
                let multi = row.rate("multi-key", |span| multi(locks, names, tasks, span));
                let one_by_one =
                    row.rate("one by one", |span| one_by_one(locks, names, tasks, span));
                lines.push(format!(
                    "| {kind} | {names} | {tasks} | {} | {} | {} | {} | {} | {} |",
                    figure(floor, 0),
                    figure(scripts, 0),
                    figure(multi, 0),
                    figure(one_by_one, 0),
                    ratio(multi, floor),
                    ratio(multi, one_by_one),
                ));
            }
        }
    }
    println!(
        "| client | names | tasks | floor (cycles/s) | scripts (cycles/s) | multi-key (cycles/s) | one by one (cycles/s) | multi-key / floor | multi-key / one by one |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    bench.finish();
}

/// The names of `task`'s hold.
fn names_of(task: usize, names: usize) -> Vec<String> {
    (0..names).map(|name| format!("m{task}-{name}")).collect()
}

/// The multi-key acquire and release scripts sent raw, a hold of its own
/// per task.
async fn scripts(node: Arc<dyn NodeClient>, names: usize, tasks: usize, span: Span) -> f64 {
    let keys: Arc<[Vec<String>]> = (0..tasks)
        .map(|task| {
            names_of(task, names)
                .into_iter()
                .flat_map(|name| {
                    [
                        format!("lock:raw{{{name}}}"),
                        format!("lock:raw{{{name}}}:fence"),
                    ]
                })
                .collect()
        })
        .collect();
    let values = hold_ids(tasks);
    cycles_per_second(tasks, span, move |task| {
        let (node, keys, values) = (Arc::clone(&node), Arc::clone(&keys), Arc::clone(&values));
        async move {
            let all: Vec<&str> = keys[task].iter().map(String::as_str).collect();
            let value = values[task].as_bytes();
            let granted = ACQUIRE
                .run(node.as_ref(), &all, &[value, b"30000", b"0"])
                .await
                .expect("EVALSHA acquire");
            let token = granted
                .as_array()
                .and_then(|reply| reply.get(1))
                .and_then(|token| token.as_text())
                .expect("granted")
                .to_owned();
            let held = format!("{}#{token}", values[task]);
            let locks: Vec<&str> = all.iter().step_by(2).copied().collect();
            let released = RELEASE
                .run(node.as_ref(), &locks, &[held.as_bytes()])
                .await
                .expect("EVALSHA release");
            assert_eq!(released.as_int(), i64::try_from(locks.len()).ok());
        }
    })
    .await
}

/// `MultiLock::try_acquire` + `release` through the engine.
async fn multi(locks: &LockManager, names: usize, tasks: usize, span: Span) -> f64 {
    let holds: Arc<[MultiLock]> = (0..tasks)
        .map(|task| locks.multi_lock(names_of(task, names)).expect("multi lock"))
        .collect();
    try_take_cycles(tasks, span, "its own names", move |task| {
        let holds = Arc::clone(&holds);
        async move { holds[task].try_acquire().await }
    })
    .await
}

/// The same names as plain locks, taken one after another, then released.
async fn one_by_one(locks: &LockManager, names: usize, tasks: usize, span: Span) -> f64 {
    let all: Arc<[Vec<String>]> = (0..tasks).map(|task| names_of(task, names)).collect();
    let locks = locks.clone();
    cycles_per_second(tasks, span, move |task| {
        let (locks, all) = (locks.clone(), Arc::clone(&all));
        async move {
            let mut guards = Vec::new();
            for name in &all[task] {
                guards.push(
                    locks
                        .try_acquire(name)
                        .await
                        .expect("try_acquire")
                        .expect("its own name"),
                );
            }
            for guard in guards {
                guard.release().await.expect("release");
            }
        }
    })
    .await
}
