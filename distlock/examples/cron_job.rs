//! A cron job that runs on one host: every host's cron starts it at the same
//! minute; the first to take the lock runs, the rest skip at once (try once,
//! no waiting). From the shell, `distlock run --key KEY --wait 0 -- CMD` does
//! the same.
//!
//! Finds Redis through `DISTLOCK_NODES`, or starts its own (see `common`).
//! `cargo run -p distlock --example cron_job --features redis`

mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), distlock::LockError> {
    let (config, _server) = common::config_or_local_server();
    let mut hosts = Vec::new();
    for host in ["web-1", "web-2", "web-3"] {
        let locks = distlock::connect(&config).await?;
        hosts.push(tokio::spawn(async move {
            match locks.try_acquire("cron:nightly-report").await? {
                Some(guard) => {
                    println!("{host}: running the nightly report");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    guard.release().await?;
                    Ok::<bool, distlock::LockError>(true)
                }
                None => {
                    println!("{host}: another host is running it; skipping");
                    Ok(false)
                }
            }
        }));
    }
    let mut ran = 0;
    for host in hosts {
        ran += usize::from(host.await.expect("host task")?);
    }
    assert_eq!(ran, 1);
    Ok(())
}
