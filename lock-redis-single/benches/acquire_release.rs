//! Uncontended acquire+release cycles per second, against the floor measured in
//! the same run on the same server and connection kind: a raw `SET key val NX PX`
//! followed by a raw `EVALSHA` compare-and-delete (two round trips, the least a
//! lock can cost). The floor's keys and value are as long as the lock's
//! (`lock:{floor:t<task>}` beside the lock's `lock:{plain:t<task>}`, and a
//! 49-byte value like a hold's), and every column's names are made before
//! the measurement: no column pays for formatting a name or sending a shorter
//! one.
//!
//! A third figure, "scripts", runs our acquire and release scripts through the
//! same raw connection without the lock API, with the keys and arguments the
//! lock sends: the gap between it and the floor is what the server spends on
//! the fenced acquire (a Lua call that also checks the holder key and INCRs the
//! fencing counter); the gap between "ours" and it is our client-side cost.
//!
//! "ours, fencing off" is the lock API with `fencing = false`, whose acquire
//! is a plain `SET NX PX`: the same two commands as the floor, so the gap
//! between the two is our client-side cost alone.
//!
//! Run with `cargo xtask bench`. `BENCH_SECONDS` sets the length of one
//! measurement (default 2); each figure is the median of `BENCH_ROUNDS` (default
//! 3) interleaved measurements. To profile one row, `BENCH_CLIENT` (`redis`
//! or `fred`), `BENCH_TASKS` (`1` or `32`) and `BENCH_ONLY` (a comma-separated
//! list of `floor`, `scripts`, `ours` and `off`) leave out the others.
//! `BENCH_VERBOSE=1` prints every round on stderr, with each round's ratios
//! and CPU per cycle;
//! the column name `floor-again` (measured only when named) measures the
//! floor a second time each round, last, to show how far two measurements
//! of one thing differ on the machine. `BENCH_SLICES=N` measures each round
//! as N interleaved slices of `BENCH_SECONDS / N` per column (every column's
//! first slice, then every column's second, ...), so that a slow spell of
//! the host falls on every column alike. `BENCH_PIN=1` pins the server to the
//! last CPU and the benchmark to the others (see
//! `lock_testkit::bench::pin_apart_if_asked`).

use std::sync::Arc;
use std::time::Duration;

use lock_core::strategy;
use lock_core::{ClientKind, ConnectOptions};
use lock_testkit::bench::{acquire_release_cycles, chosen, env_number, median};
use lock_testkit::RedisServer;

#[allow(dead_code, reason = "each benchmark uses part of it")]
mod common;

/// The columns' names in `BENCH_ONLY`, in the order of the table.
const COLUMNS: [&str; 4] = ["floor", "scripts", "ours", "off"];
use common::{floor, managers, scripts};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let length = Duration::from_secs(env_number("BENCH_SECONDS", 2));
    let rounds = env_number("BENCH_ROUNDS", 3).max(1);
    // Each round's measurements in this many interleaved slices: the host's
    // slow spells then fall on every column alike.
    let slices = u32::try_from(env_number("BENCH_SLICES", 1).clamp(1, 100)).unwrap_or(1);
    let slice = length / slices;
    let server = RedisServer::start().expect("start redis-server");
    lock_testkit::bench::pin_apart_if_asked(&[&server]);
    let url = server.url();
    let options = ConnectOptions::default();
    println!(
        "one redis-server on 127.0.0.1:{}, {length:?} per measurement, median of {rounds}",
        server.port()
    );
    println!();
    println!(
        "| client | tasks | floor (cycles/s) | scripts (cycles/s) | ours (cycles/s) \
         | ours, fencing off (cycles/s) | ours / floor | ours / scripts \
         | fencing off / floor |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let named = |value: &str| {
        std::env::var("BENCH_ONLY").is_ok_and(|only| only.split(',').any(|one| one == value))
    };
    for kind in ClientKind::compiled() {
        if !chosen("BENCH_CLIENT", &kind.to_string()) {
            continue;
        }
        let floor_node = strategy::connect(kind, &url, options)
            .await
            .expect("connect floor");
        let (fenced, unfenced) = managers(kind, &url, options).await;
        for tasks in [1, 32] {
            if !chosen("BENCH_TASKS", &tasks.to_string()) {
                continue;
            }
            // A column left out reads 0.
            let mut runs: [Vec<f64>; 4] = Default::default();
            let mut floors_again = Vec::new();
            for _ in 0..rounds {
                // Each column's rate this round, summed over the slices.
                let (mut sums, mut again) = ([0.0f64; 4], 0.0);
                for _ in 0..slices {
                    if chosen("BENCH_ONLY", "floor") {
                        sums[0] += floor(Arc::clone(&floor_node), tasks, slice).await;
                    }
                    if chosen("BENCH_ONLY", "scripts") {
                        sums[1] += scripts(Arc::clone(&floor_node), tasks, slice).await;
                    }
                    if chosen("BENCH_ONLY", "ours") {
                        sums[2] +=
                            acquire_release_cycles(fenced.clone(), "fence", tasks, slice).await;
                    }
                    if chosen("BENCH_ONLY", "off") {
                        sums[3] +=
                            acquire_release_cycles(unfenced.clone(), "plain", tasks, slice).await;
                    }
                    // The floor a second time, last: how far two
                    // measurements of the same thing differ on this machine.
                    if named("floor-again") {
                        again += floor(Arc::clone(&floor_node), tasks, slice).await;
                    }
                }
                for ((column, sum), name) in runs.iter_mut().zip(sums).zip(COLUMNS) {
                    if chosen("BENCH_ONLY", name) {
                        column.push(sum / f64::from(slices));
                    }
                }
                if named("floor-again") {
                    floors_again.push(again / f64::from(slices));
                }
            }
            if std::env::var_os("BENCH_VERBOSE").is_some() {
                let paired = |column: &[f64]| -> Vec<String> {
                    runs[0]
                        .iter()
                        .zip(column)
                        .map(|(floor, other)| format!("{:.2}", other / floor))
                        .collect()
                };
                eprintln!(
                    "{kind} {tasks} tasks, each round (floor, scripts, ours, off): {runs:.0?}; \
                     fencing off / floor {:?}; floor again / floor {:?}",
                    paired(&runs[3]),
                    paired(&floors_again),
                );
            }
            let [floor, scripts, ours, off] = runs.map(median);
            println!(
                "| {kind} | {tasks} | {floor:.0} | {scripts:.0} | {ours:.0} | {off:.0} | {:.2} | {:.2} | {:.2} |",
                ours / floor,
                ours / scripts,
                off / floor
            );
        }
    }
}
