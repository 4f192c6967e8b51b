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
//! Run with `cargo xtask bench`; `BENCH_SECONDS` (default 2) is the length
//! of one measurement, each figure the median of `BENCH_ROUNDS` (default 3).

use std::sync::Arc;
use std::time::Duration;

use lock_comparisons::{hold_ids, single_node_manager, try_take_cycles, Bench};
use lock_core::strategy::scripts::multi::{ACQUIRE, RELEASE};
use lock_core::strategy::NodeClient;
use lock_core::{ClientKind, LockManager, MultiLock};
use lock_testkit::bench::{cycles_per_second, lock_floor};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let bench = Bench::start();
    let length = bench.length;
    println!(
        "| client | names | tasks | floor (cycles/s) | scripts (cycles/s) | multi-key (cycles/s) | one by one (cycles/s) | multi-key / floor | multi-key / one by one |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for kind in ClientKind::compiled() {
        let raw = &bench.raw(kind).await;
        let locks = &single_node_manager(kind, &bench.server, Duration::from_secs(30)).await;
        for names in [2usize, 8] {
            for tasks in [1usize, 32] {
                let [floor, scripts, multi, one_by_one] = bench
                    .medians(|| async move {
                        [
                            lock_floor(Arc::clone(raw), tasks, length).await,
                            scripts(Arc::clone(raw), names, tasks, length).await,
                            multi(locks, names, tasks, length).await,
                            one_by_one(locks, names, tasks, length).await,
                        ]
                    })
                    .await;
                println!(
                    "| {kind} | {names} | {tasks} | {floor:.0} | {scripts:.0} | {multi:.0} | {one_by_one:.0} | {:.2} | {:.2} |",
                    multi / floor,
                    multi / one_by_one,
                );
            }
        }
    }
}

/// The names of `task`'s hold.
fn names_of(task: usize, names: usize) -> Vec<String> {
    (0..names).map(|name| format!("m{task}-{name}")).collect()
}

/// The multi-key acquire and release scripts sent raw, a hold of its own
/// per task.
async fn scripts(node: Arc<dyn NodeClient>, names: usize, tasks: usize, length: Duration) -> f64 {
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
    cycles_per_second(tasks, length, move |task| {
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
async fn multi(locks: &LockManager, names: usize, tasks: usize, length: Duration) -> f64 {
    let holds: Arc<[MultiLock]> = (0..tasks)
        .map(|task| locks.multi_lock(names_of(task, names)).expect("multi lock"))
        .collect();
    try_take_cycles(tasks, length, "its own names", move |task| {
        let holds = Arc::clone(&holds);
        async move { holds[task].try_acquire().await }
    })
    .await
}

/// The same names as plain locks, taken one after another, then released.
async fn one_by_one(locks: &LockManager, names: usize, tasks: usize, length: Duration) -> f64 {
    let all: Arc<[Vec<String>]> = (0..tasks).map(|task| names_of(task, names)).collect();
    let locks = locks.clone();
    cycles_per_second(tasks, length, move |task| {
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
