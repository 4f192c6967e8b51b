//! The primitives built on the lease engine, on the single-node strategy:
//! semaphores, read-write locks, multi-key locks and leader election, in one
//! test binary (each binary links the whole stack, so fewer of them keep the
//! suite within its time).

#![cfg(any(feature = "redis", feature = "fred"))]

#[path = "primitives/election.rs"]
mod election;
#[path = "primitives/multi.rs"]
mod multi;
#[path = "primitives/rwlock.rs"]
mod rwlock;
#[path = "primitives/semaphore.rs"]
mod semaphore;

use std::sync::Arc;

use lock_core::{ClientKind, LockBackend, LockConfig, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::fast_options;
use lock_testkit::{AdminReply, RedisServer};

/// A manager over a single-node backend on `server` through `kind`.
async fn manager(kind: ClientKind, server: &RedisServer, config: LockConfig) -> LockManager {
    let backend: Arc<dyn LockBackend> = Arc::new(
        SingleNodeBackend::connect(kind, &server.url(), fast_options())
            .await
            .expect("connect"),
    );
    LockManager::new(backend, config).expect("config")
}

/// Every key the server has, with its type, to compare before and after.
fn keys(server: &RedisServer) -> Vec<String> {
    let script = "local out = {} \
        for _, key in ipairs(redis.call('keys', '*')) do \
          out[#out + 1] = key .. ' ' .. redis.call('type', key)['ok'] \
        end \
        table.sort(out) return out";
    match server.admin(&["EVAL", script, "0"]).expect("EVAL") {
        AdminReply::Array(Some(items)) => items
            .iter()
            .map(|item| item.as_text().expect("text").to_owned())
            .collect(),
        other => panic!("{other:?}"),
    }
}
