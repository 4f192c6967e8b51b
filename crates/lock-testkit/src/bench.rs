//! Helpers for benchmark binaries: closed-loop throughput and medians. Speed is
//! measured here and reported as ratios, never asserted in tests.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs `tasks` concurrent loops of `cycle(task)` for `length` and returns the
/// completed cycles per second. Each task calls `cycle` with its index, so
/// tasks can use distinct keys.
pub async fn cycles_per_second<F, Fut>(tasks: usize, length: Duration, cycle: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let cycle = Arc::new(cycle);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (cycle, stop, done) = (Arc::clone(&cycle), Arc::clone(&stop), Arc::clone(&done));
        handles.push(tokio::spawn(async move {
            let mut count = 0u64;
            while !stop.load(Ordering::Relaxed) {
                cycle(task).await;
                count += 1;
            }
            done.fetch_add(count, Ordering::Relaxed);
        }));
    }
    tokio::time::sleep(length).await;
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle.await.expect("benchmark task");
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// Uncontended `try_acquire` + `release` cycles per second through `locks`,
/// each task on its own key `<prefix>:t<task>`.
pub async fn acquire_release_cycles(
    locks: lock_core::LockManager,
    prefix: &'static str,
    tasks: usize,
    length: Duration,
) -> f64 {
    cycles_per_second(tasks, length, move |task| {
        let locks = locks.clone();
        async move {
            let guard = locks
                .try_acquire(&format!("{prefix}:t{task}"))
                .await
                .expect("try_acquire")
                .expect("an uncontended key is free");
            guard.release().await.expect("release");
        }
    })
    .await
}

/// The median of `values` (the upper one for an even count); 0 when empty.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Reads a whole number from the environment, or `default`.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}
