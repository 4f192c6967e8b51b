//! The primitives built on the lease engine, on the single-node strategy:
//! semaphores and leader election, in one test binary (each binary links
//! the whole stack, so fewer of them keep the suite within its time).

#![cfg(any(feature = "redis", feature = "fred"))]

#[path = "primitives/election.rs"]
mod election;
#[path = "primitives/semaphore.rs"]
mod semaphore;

use std::sync::Arc;

use lock_core::{ClientKind, LockBackend, LockConfig, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::fast_options;
use lock_testkit::RedisServer;

/// A manager over a single-node backend on `server` through `kind`.
async fn manager(kind: ClientKind, server: &RedisServer, config: LockConfig) -> LockManager {
    let backend: Arc<dyn LockBackend> = Arc::new(
        SingleNodeBackend::connect(kind, &server.url(), fast_options())
            .await
            .expect("connect"),
    );
    LockManager::new(backend, config).expect("config")
}
