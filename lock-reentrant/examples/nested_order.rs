//! An order service locks an order, then calls helpers that lock the same
//! order again, one of them in another task. With a plain lock the helpers
//! would wait for a lock their own caller holds; with the reentrant lock they
//! enter it, because the caller hands them its owner identity.
//!
//! Finds Redis at `$REDIS_URL`; without it, starts a redis-server of its own
//! (from `$REDIS_SERVER` or `PATH`) on a free port and stops it at the end.
//!
//! `cargo run -p lock-reentrant --example nested_order --features redis`

use std::time::Duration;

use lock_core::{LockConfig, LockError, LockManager, LockState, OwnerToken};
use lock_testkit::RedisServer;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = RedisServer::start()?;
            (server.url().expose().to_owned(), Some(server))
        }
    };
    let mut config = LockConfig::with_nodes([url]);
    config.ttl = Duration::from_secs(10);
    config.wait_timeout = Duration::from_millis(500);
    let locks = LockManager::connect::<lock_reentrant::ReentrantBackend>(&config).await?;

    let order = locks.acquire("order:1001").await?;
    println!(
        "place_order: locked order 1001, fencing token {:?}",
        order.fencing_token()
    );

    reserve_stock(&locks, order.owner()).await?;

    // Re-entry from another task: the owner is a value that moves with the work.
    let owner = order.owner().clone();
    let in_task = locks.clone();
    tokio::spawn(async move { send_confirmation(&in_task, &owner).await }).await??;

    // Someone else, without the owner, is kept out.
    match locks
        .acquire_with(
            "order:1001",
            &lock_core::AcquireOptions::new().with_wait(Duration::from_millis(100)),
        )
        .await
    {
        Err(LockError::NotAcquired { .. }) => {
            println!("another caller: kept out while the order is locked")
        }
        other => return Err(format!("another caller got in: {other:?}").into()),
    }

    order.release().await?;
    let state = locks.inspect("order:1001").await?;
    println!(
        "place_order: released; the lock is now {}",
        if state.is_held() { "held" } else { "free" }
    );
    Ok(())
}

async fn reserve_stock(locks: &LockManager, owner: &OwnerToken) -> Result<(), LockError> {
    let again = locks
        .acquire_with(
            "order:1001",
            &lock_core::AcquireOptions::new().with_owner(owner.clone()),
        )
        .await?;
    if let LockState::Held { hold_count, .. } = locks.lock("order:1001")?.state().await? {
        println!(
            "reserve_stock: re-entered, hold count {hold_count:?}, same token {:?}",
            again.fencing_token()
        );
    }
    again.release().await
}

async fn send_confirmation(locks: &LockManager, owner: &OwnerToken) -> Result<(), LockError> {
    let options = lock_core::AcquireOptions::new().with_owner(owner.clone());
    locks
        .acquire_with("order:1001", &options)
        .await?
        .run(|lease| async move {
            println!(
                "send_confirmation (another task): re-entered, token {:?}",
                lease.fencing_token()
            );
        })
        .await
}
