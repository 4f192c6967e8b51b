//! Duplicate order prevention: a customer double-clicks "pay", and 20 requests
//! for the same order reach different pods at once. Exactly one creates the
//! order; the others see it exists.
//!
//! Finds Redis through `DISTLOCK_NODES`, or starts its own (see `common`).
//! `cargo run -p distlock --example duplicate_order --features redis`

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), distlock::LockError> {
    let (config, _server) = common::config_or_local_server();
    let locks = distlock::connect(&config).await?;
    let created = Arc::new(AtomicUsize::new(0));
    let mut requests = Vec::new();
    for _ in 0..20 {
        let (locks, created) = (locks.clone(), Arc::clone(&created));
        requests.push(tokio::spawn(async move {
            locks
                .with_lock("order:1001", |_lease| async move {
                    // Check-then-create is safe only under the lock.
                    if created.load(Ordering::SeqCst) == 0 {
                        tokio::time::sleep(Duration::from_millis(5)).await; // the INSERT
                        created.fetch_add(1, Ordering::SeqCst);
                        "created"
                    } else {
                        "already exists"
                    }
                })
                .await
        }));
    }
    for request in requests {
        let outcome = request.await.expect("request task")?;
        println!("request: {outcome}");
    }
    assert_eq!(created.load(Ordering::SeqCst), 1);
    println!("order 1001 was created exactly once");
    Ok(())
}
