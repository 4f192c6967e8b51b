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
//! Run with `cargo xtask bench`, or `cargo bench -p lock-redis-single
//! --bench acquire_release --features redis,fred`: each figure is a
//! criterion benchmark (`acquire_release/<client>/<tasks> tasks/<column>`,
//! the columns `floor`, `scripts`, `ours` and `ours, fencing off`), sampled
//! for `BENCH_SECONDS` (default 2); a filter on the command line measures
//! some of them (the others read `-`), `--save-baseline before` and then
//! `--baseline before` compare a change, and the HTML reports are under
//! `target/criterion/report/`. `BENCH_PIN=1` pins the server to the last
//! CPU and the benchmark to the others (see
//! `lock_testkit::bench::pin_apart_if_asked`).

use std::sync::Arc;

use lock_core::strategy;
use lock_core::{ClientKind, ConnectOptions};
use lock_testkit::bench::{acquire_release_cycles, figure, ratio, runtime, Table};
use lock_testkit::RedisServer;

#[allow(dead_code, reason = "each benchmark uses part of it")]
mod common;

use common::{floor, managers, scripts};

fn main() {
    let runtime = runtime();
    let mut criterion = lock_testkit::bench::criterion();
    let server = RedisServer::start().expect("start redis-server");
    lock_testkit::bench::pin_apart_if_asked(&[&server]);
    let url = server.url();
    let options = ConnectOptions::default();
    println!(
        "one redis-server on 127.0.0.1:{}, each figure measured by criterion",
        server.port()
    );
    println!();
    let mut lines = Vec::new();
    for kind in ClientKind::compiled() {
        let (floor_node, (fenced, unfenced)) = runtime.block_on(async {
            let node = strategy::connect(kind, &url, options)
                .await
                .expect("connect floor");
            (node, managers(kind, &url, options).await)
        });
        let mut table = Table::new(&mut criterion, &runtime, "acquire_release");
        for tasks in [1, 32] {
            let mut row = table.row(format_args!("{kind}/{tasks} tasks"));
            let floor = row.floor("floor", |span| floor(Arc::clone(&floor_node), tasks, span));
            let scripts = row.rate("scripts", |span| {
                scripts(Arc::clone(&floor_node), tasks, span)
            });
            let ours = row.rate("ours", |span| {
                acquire_release_cycles(fenced.clone(), "fence", tasks, span)
            });
            let off = row.rate("ours, fencing off", |span| {
                acquire_release_cycles(unfenced.clone(), "plain", tasks, span)
            });
            lines.push(format!(
                "| {kind} | {tasks} | {} | {} | {} | {} | {} | {} | {} |",
                figure(floor, 0),
                figure(scripts, 0),
                figure(ours, 0),
                figure(off, 0),
                ratio(ours, floor),
                ratio(ours, scripts),
                ratio(off, floor),
            ));
        }
    }
    println!(
        "| client | tasks | floor (cycles/s) | scripts (cycles/s) | ours (cycles/s) \
         | ours, fencing off (cycles/s) | ours / floor | ours / scripts \
         | fencing off / floor |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    lines.iter().for_each(|line| println!("{line}"));
    criterion.final_summary();
}
