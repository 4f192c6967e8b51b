//! A job longer than the TTL, kept alive by the watchdog: the lease is 1 s,
//! the job takes 3 s, and the lock holds throughout because the watchdog renews
//! it every third of a TTL. The job also watches `lost()`, and would stop early
//! if renewal ever failed.
//!
//! Finds Redis through `DISTLOCK_NODES`, or starts its own (see `common`).
//! `cargo run -p distlock --example long_job --features redis`

mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), distlock::LockError> {
    let (mut config, _server) = common::config_or_local_server();
    config.lock.ttl = Duration::from_secs(1);
    let locks = distlock::connect(&config).await?;
    let guard = locks.acquire("batch:reindex").await?;
    for step in 1..=6 {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {
                println!("step {step}/6 done; lease valid for another {:?}", guard.remaining());
            }
            reason = guard.lost() => {
                println!("lock lost ({reason:?}); stopping before the next step");
                return Ok(());
            }
        }
    }
    guard.release().await?;
    println!("finished 3 s of work under a 1 s lease");
    Ok(())
}
