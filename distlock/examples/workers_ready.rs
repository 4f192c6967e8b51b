//! Start when all workers are ready: three workers, each its own "process"
//! (its own connection), warm up for a different time, count the latch
//! `reindex:ready` down by their names and wait for it; none starts until
//! the last one is ready, and then all start together. A worker's count
//! retried after a lost reply counts once.
//!
//! Finds Redis through `DISTLOCK_NODES`, or starts its own (see `common`).
//! `cargo run -p distlock --example workers_ready`

mod common;

use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), distlock::LockError> {
    let (config, _server) = common::config_or_local_server();
    let coordinator = distlock::connect(&config).await?;
    let ready = coordinator.latch("reindex:ready")?;
    // A latch from an earlier run of this example would be open already.
    ready.delete().await?;
    ready.set_count(3).await?;
    let began = Instant::now();
    let mut workers = Vec::new();
    for (name, warm_up_ms) in [("worker-a", 50), ("worker-b", 300), ("worker-c", 150)] {
        let locks = distlock::connect(&config).await?;
        workers.push(tokio::spawn(async move {
            let ready = locks.latch("reindex:ready")?;
            tokio::time::sleep(Duration::from_millis(warm_up_ms)).await;
            let left = ready.count_down_as(name).await?;
            // A retry, as after a lost reply: it counts nothing more.
            assert_eq!(ready.count_down_as(name).await?, left);
            println!("{name}: ready after {warm_up_ms} ms; {left} still warming up");
            ready.wait().await?;
            let started = began.elapsed();
            println!("{name}: starts at {} ms", started.as_millis());
            Ok::<_, distlock::LockError>(started)
        }));
    }
    let mut starts = Vec::new();
    for worker in workers {
        starts.push(worker.await.expect("worker task")?);
    }
    // The slowest warm-up was 300 ms: nobody started before it was over.
    assert!(starts
        .iter()
        .all(|start| *start >= Duration::from_millis(300)));
    let state = ready.state().await?.expect("the latch");
    println!(
        "all three started at once, after the last was ready; the latch is open \
         ({} of {}) and expires in {:?}",
        state.count,
        state.initial,
        state.remaining.unwrap_or_default()
    );
    ready.delete().await?;
    Ok(())
}
