//! The primitives beside the plain lock, on the single-node strategy:
//! semaphores, read-write locks, multi-key locks, leader election,
//! count-down latches and barriers, in one test binary (each binary links the whole
//! stack, so fewer of them keep the suite within its time).

#![cfg(any(feature = "redis", feature = "fred"))]

#[path = "primitives/barrier.rs"]
mod barrier;
#[path = "primitives/barrier_faults.rs"]
mod barrier_faults;
#[path = "primitives/election.rs"]
mod election;
#[path = "primitives/latch.rs"]
mod latch;
#[path = "primitives/multi.rs"]
mod multi;
#[path = "primitives/rwlock.rs"]
mod rwlock;
#[path = "primitives/semaphore.rs"]
mod semaphore;

use std::sync::Arc;
use std::time::Duration;

use lock_core::{AcquireOptions, ClientKind, GrantOptions, LockBackend, LockConfig, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::waiting_up_to;
use lock_testkit::contract::{fast_config, fast_options};
use lock_testkit::RedisServer;

/// A manager over a single-node backend on `server` through `kind`, its
/// grants made with `grants`.
async fn manager_with(
    kind: ClientKind,
    server: &RedisServer,
    config: LockConfig,
    grants: GrantOptions,
) -> LockManager {
    let backend: Arc<dyn LockBackend> = Arc::new(
        SingleNodeBackend::connect(kind, &server.url(), fast_options())
            .await
            .expect("connect")
            .with_grant_options(grants),
    );
    LockManager::new(backend, config).expect("config")
}

/// A manager over a single-node backend on `server` through `kind`.
async fn manager(kind: ClientKind, server: &RedisServer, config: LockConfig) -> LockManager {
    manager_with(kind, server, config, GrantOptions::default()).await
}

/// A manager whose leases nobody renews: a holder that stops, as one that
/// crashed does.
async fn unrenewed(kind: ClientKind, server: &RedisServer, ttl: Duration) -> LockManager {
    let mut config = fast_config(ttl);
    config.watchdog.enabled = false;
    manager(kind, server, config).await
}

/// A manager whose grants give the fencing counter a TTL of `counter_ttl`.
async fn with_counter_ttl(
    kind: ClientKind,
    server: &RedisServer,
    ttl: Duration,
    counter_ttl: Duration,
) -> LockManager {
    let mut config = fast_config(ttl);
    config.fencing_counter_ttl = Some(counter_ttl);
    let grants = GrantOptions::default().with_fencing_counter_ttl(Some(counter_ttl));
    manager_with(kind, server, config, grants).await
}

/// A wait of up to `seconds`.
fn waiting(seconds: u64) -> AcquireOptions {
    waiting_up_to(Duration::from_secs(seconds))
}
