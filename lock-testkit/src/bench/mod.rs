//! Helpers for benchmark binaries: closed-loop throughput and medians, and
//! (with the `criterion` feature) the tables they print, measured on
//! criterion. Speed is measured here and reported as ratios, never asserted
//! in tests.

#[cfg(feature = "criterion")]
mod table;
#[cfg(feature = "criterion")]
#[doc(no_inline)]
pub use criterion::Criterion;
#[cfg(feature = "criterion")]
pub use table::{criterion, figure, ratio, runtime, Rate, Row, Table};

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one benchmark cycle returns: whether it counts as a completed cycle.
pub trait CycleOutcome {
    /// Whether the cycle completed.
    fn completed(&self) -> bool;
}

impl CycleOutcome for () {
    fn completed(&self) -> bool {
        true
    }
}

impl CycleOutcome for bool {
    fn completed(&self) -> bool {
        *self
    }
}

/// How much one measurement runs: for a time, or a number of completed
/// cycles (what a criterion iteration count asks for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// As many cycles as fit in this time.
    For(Duration),
    /// This many completed cycles, however long they take.
    Cycles(u64),
}

impl From<Duration> for Span {
    fn from(length: Duration) -> Self {
        Span::For(length)
    }
}

/// Runs `tasks` concurrent loops of `cycle(task)` for `span` and returns the
/// completed cycles per second (a cycle returning `false` is not counted).
/// Each task calls `cycle` with its index, so tasks can use distinct keys.
/// With [`Span::Cycles`] the tasks share the count, and the rate is that
/// count over the time they took.
pub async fn cycles_per_second<F, Fut>(tasks: usize, span: impl Into<Span>, cycle: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future + Send,
    Fut::Output: CycleOutcome,
{
    let span = span.into();
    let cycle = Arc::new(cycle);
    let cpu_before = CpuTimes::now();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    // The cycles not yet claimed by a task, with `Span::Cycles`.
    let left = Arc::new(AtomicU64::new(match span {
        Span::For(_) => u64::MAX,
        Span::Cycles(cycles) => cycles,
    }));
    let started = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks.max(1) {
        let (cycle, stop, done, left) = (
            Arc::clone(&cycle),
            Arc::clone(&stop),
            Arc::clone(&done),
            Arc::clone(&left),
        );
        handles.push(tokio::spawn(async move {
            let mut count = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let claimed =
                    left.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
                if claimed.is_err() {
                    break;
                }
                if cycle(task).await.completed() {
                    count += 1;
                } else {
                    // Not counted: another try takes its place.
                    left.fetch_add(1, Ordering::AcqRel);
                }
            }
            done.fetch_add(count, Ordering::Relaxed);
        }));
    }
    if let Span::For(length) = span {
        tokio::time::sleep(length).await;
        stop.store(true, Ordering::Relaxed);
    }
    for handle in handles {
        handle.await.expect("benchmark task");
    }
    let cycles = done.load(Ordering::Relaxed);
    if std::env::var_os("BENCH_VERBOSE").is_some() {
        if let (Some(before), Some(after)) = (cpu_before, CpuTimes::now()) {
            eprintln!("    {}", after.since(&before, cycles));
        }
    }
    cycles as f64 / started.elapsed().as_secs_f64()
}

/// CPU time counters of this process and of the whole machine (Linux
/// `/proc`, in clock ticks), to say where a measurement's CPU went: a lock
/// slower than its floor at the same CPU per cycle lost time to scheduling,
/// not to instructions.
struct CpuTimes {
    process: u64,
    busy: u64,
    idle: u64,
}

impl CpuTimes {
    /// The counters now; `None` where `/proc` cannot be read.
    fn now() -> Option<Self> {
        let process = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which may hold spaces), from
        // field 3: utime and stime are fields 14 and 15.
        let after_name = process.rsplit_once(')')?.1;
        let fields: Vec<u64> = after_name
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|field| field.parse().ok())
            .collect();
        let machine = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu: Vec<u64> = machine
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|field| field.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal ...
        let idle = cpu.get(3)? + cpu.get(4).copied().unwrap_or(0);
        let busy = cpu.iter().take(8).sum::<u64>().saturating_sub(idle);
        Some(CpuTimes {
            process: fields.iter().sum(),
            busy,
            idle,
        })
    }

    fn since(&self, before: &CpuTimes, cycles: u64) -> String {
        // Clock ticks are 10 ms on Linux (USER_HZ = 100).
        let per_cycle = |ticks: u64| ticks as f64 * 10_000.0 / cycles.max(1) as f64;
        let (process, busy, idle) = (
            self.process.saturating_sub(before.process),
            self.busy.saturating_sub(before.busy),
            self.idle.saturating_sub(before.idle),
        );
        format!(
            "{cycles} cycles; CPU per cycle: {:.1} µs this process, {:.1} µs the rest of \
             the machine; machine idle {:.0} %",
            per_cycle(process),
            per_cycle(busy.saturating_sub(process)),
            idle as f64 * 100.0 / (busy + idle).max(1) as f64,
        )
    }
}

/// The value the floors store: as long as a hold's value (an owner's 32 hex
/// digits, `:`, a nonce's 16 hex digits), so that a floor's commands carry
/// as many bytes as the lock's.
pub const FLOOR_VALUE: &[u8] = b"0123456789abcdef0123456789abcdef:0123456789abcdef";

/// Each task's lock name, `<column>:t<task>`, made before a measurement so
/// that no cycle formats one. Columns measured against each other should
/// have names of one length: a longer key costs more to send and to hash.
pub fn task_names(column: &str, tasks: usize) -> Arc<[String]> {
    (0..tasks).map(|task| format!("{column}:t{task}")).collect()
}

/// The Redis key a lock with the default key prefix uses for each of
/// [`task_names`]`(column, tasks)`: what a floor sends in the lock's place.
///
/// # Panics
///
/// If `column` makes an invalid lock name (empty, or too long).
pub fn task_keys(column: &str, tasks: usize) -> Arc<[String]> {
    let prefix = lock_core::LockConfig::default().key_prefix;
    task_names(column, tasks)
        .iter()
        .map(|name| {
            lock_core::LockKey::new(&prefix, name)
                .expect("a valid lock name")
                .redis_key()
                .to_owned()
        })
        .collect()
}

/// Raw `SET key val NX PX` then a raw `EVALSHA` compare-and-delete, per
/// second, over `tasks` tasks each on a key (and so a slot) of its own: two
/// round trips, the least a lock can cost. The keys and the value are as
/// long as the lock's (see [`task_keys`]), and made
/// before the measurement, as the lock's names are.
pub async fn lock_floor(
    node: Arc<dyn lock_core::strategy::NodeClient>,
    tasks: usize,
    span: impl Into<Span>,
) -> f64 {
    let keys = task_keys("floor", tasks);
    cycles_per_second(tasks, span, move |task| {
        let (node, keys) = (Arc::clone(&node), Arc::clone(&keys));
        async move {
            let key = &keys[task];
            let reply = node
                .command(
                    "SET",
                    &[key.as_bytes(), FLOOR_VALUE, b"NX", b"PX", b"30000"],
                )
                .await
                .expect("SET");
            assert_eq!(
                reply.as_text(),
                Some("OK"),
                "uncontended SET NX must succeed"
            );
            release_floor(node.as_ref(), key).await;
        }
    })
    .await
}

/// The floor's release: the release script, raw, of a key that holds
/// [`FLOOR_VALUE`] (compare-and-delete).
pub async fn release_floor(node: &dyn lock_core::strategy::NodeClient, key: &str) {
    let released = lock_core::strategy::scripts::single::RELEASE
        .run(node, &[key], &[FLOOR_VALUE])
        .await
        .expect("EVALSHA");
    assert_eq!(released.as_int(), Some(1), "compare-and-delete must delete");
}

/// Uncontended `try_acquire` + `release` cycles per second through `locks`,
/// each task on its own key `<prefix>:t<task>` (see [`task_names`]).
///
/// A cycle that fails with a retryable error (a node timed out, say, when a
/// busy machine stalls a server past the node timeout) is not counted, and the
/// number of such cycles is reported on stderr: the lock refusing to claim
/// what it cannot confirm is correct behaviour, not a benchmark failure. Any
/// other error, and an uncontended key found held, end the benchmark.
pub async fn acquire_release_cycles(
    locks: lock_core::LockManager,
    prefix: &'static str,
    tasks: usize,
    span: impl Into<Span>,
) -> f64 {
    let failed = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&failed);
    let names = task_names(prefix, tasks);
    let rate = cycles_per_second(tasks, span, move |task| {
        let (locks, failed, names) = (locks.clone(), Arc::clone(&counted), Arc::clone(&names));
        async move {
            let outcome = async {
                let guard = locks.try_acquire(&names[task]).await?;
                let guard = guard.expect("an uncontended key is free");
                guard.release().await
            }
            .await;
            match outcome {
                Ok(()) => true,
                Err(err) if err.is_retryable() => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    false
                }
                Err(err) => panic!("{prefix}: {err}"),
            }
        }
    })
    .await;
    let failed = failed.load(Ordering::Relaxed);
    if failed > 0 {
        eprintln!("{prefix}: {failed} cycles failed with a retryable error and are not counted");
    }
    rate
}

/// Pins `servers` to the machine's last CPU and every thread of this
/// process to the others (Linux, through `taskset`), when `BENCH_PIN=1`;
/// says on stderr what it did or why it could not.
///
/// Unpinned, a client and the servers it measures take turns on the same
/// cores, and how the scheduler interleaves them moves a figure by a fifth
/// from one round to the next (two measurements of the same floor: 0.69 to
/// 1.22 of each other). Pinned apart, the client has its own core, the
/// rounds agree within a few percent, and a ratio against a floor measured
/// the same way is the client's cost per cycle against the floor's.
pub fn pin_apart_if_asked(servers: &[&crate::RedisServer]) {
    if env_number("BENCH_PIN", 0) == 0 {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus < 2 {
        eprintln!("BENCH_PIN: one CPU only, nothing pinned");
        return;
    }
    let (client_cpus, server_cpu) = (format!("0-{}", cpus - 2), (cpus - 1).to_string());
    let mut pinned = Vec::new();
    for pid in servers.iter().filter_map(|server| server.pid()) {
        pinned.push(taskset(&["-p", "-c", &server_cpu, &pid.to_string()]));
    }
    pinned.push(taskset(&[
        "-a",
        "-p",
        "-c",
        &client_cpus,
        &std::process::id().to_string(),
    ]));
    match pinned.into_iter().collect::<Result<Vec<()>, String>>() {
        Ok(_) => eprintln!("BENCH_PIN: servers on CPU {server_cpu}, this process on {client_cpus}"),
        Err(err) => eprintln!("BENCH_PIN: not pinned: {err}"),
    }
}

fn taskset(args: &[&str]) -> Result<(), String> {
    let output = std::process::Command::new("taskset")
        .args(args)
        .output()
        .map_err(|err| format!("taskset: {err}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "taskset {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The median of `values` (the upper one for an even count); 0 when empty.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Whether the comma-separated list in the environment variable `variable`
/// names `value`; true when the variable is not set (nothing left out).
pub fn chosen(variable: &str, value: &str) -> bool {
    std::env::var(variable).map_or(true, |only| only.split(',').any(|one| one == value))
}

/// Reads a whole number from the environment, or `default`.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_core::{HoldToken, LockConfig, LockKey, OwnerToken};

    /// The floors send as many bytes as the lock: a shorter value or key
    /// would make a floor cheaper than the same commands a lock sends.
    #[test]
    fn floors_send_what_the_lock_sends() {
        let owner = OwnerToken::generate().expect("os rng");
        let hold = HoldToken::new(owner).expect("os rng");
        assert_eq!(FLOOR_VALUE.len(), hold.value().len());
        let prefix = LockConfig::default().key_prefix;
        let (names, keys) = (task_names("floor", 3), task_keys("floor", 3));
        assert_eq!(names.len(), 3);
        for (name, key) in names.iter().zip(keys.iter()) {
            let lock_key = LockKey::new(&prefix, name).expect("key");
            assert_eq!(key, lock_key.redis_key());
        }
        assert_eq!(&*names[2], "floor:t2");
    }
}
