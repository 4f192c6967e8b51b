//! Reentrant locks on one Redis node: the owner that holds a lock can take it
//! again, and it is free once every hold is given back.
//!
//! A lock is a Redis hash at `<prefix>{<name>}` with one field, the owner
//! token, whose value is the hold count. Acquire, re-entry, renewal and release
//! are each one Lua script and one round trip.
//!
//! # The owner is a value, not a thread
//!
//! Reentrancy keyed on a thread id breaks in async code, where a task moves
//! between threads at every `.await` (Redisson's "attempt to unlock lock, not
//! locked by current thread" under coroutines). Here the owner is an explicit
//! [`OwnerToken`](lock_core::OwnerToken): code that already holds a lock passes
//! `guard.owner()` to the code it calls, which re-enters with
//! [`AcquireOptions::with_owner`](lock_core::AcquireOptions::with_owner). Re-entry
//! therefore works across tasks and `.await` points, and never by accident:
//! two unrelated calls get two different owners and exclude each other.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lock_core::LockError> {
//! use lock_core::{LockConfig, LockManager, OwnerToken};
//! use lock_reentrant::ReentrantBackend;
//!
//! let config = LockConfig::with_nodes(["redis://127.0.0.1:6379"]);
//! let locks = LockManager::connect::<ReentrantBackend>(&config).await?;
//! let order = locks.acquire("order:1001").await?;
//! reserve_stock(&locks, order.owner()).await?; // re-enters the same lock
//! order.release().await?;
//!
//! async fn reserve_stock(locks: &LockManager, owner: &OwnerToken) -> Result<(), lock_core::LockError> {
//!     let again = locks.acquire_with("order:1001", &lock_core::AcquireOptions::new().with_owner(owner.clone())).await?; // hold count 2, same fencing token
//!     again.release().await // hold count back to 1
//! }
//! # Ok(()) }
//! ```
//!
//! # Fencing
//!
//! The outermost acquire gets a new fencing token from the counter at
//! `<prefix>{<name>}:fence`; re-entries return the same token, as a reentrant
//! fenced mutex should. The watchdog renews the hash while any guard of it is
//! alive.

// docs.rs builds with `--cfg docsrs` (see Cargo.toml) on nightly, where this
// marks each item that needs a cargo feature with that feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

// Without a client every connect would fail at run time; stop the build instead.
#[cfg(not(any(feature = "redis", feature = "fred")))]
compile_error!(
    "lock-reentrant needs a Redis client: enable its `redis` feature (the default) or `fred` \
     (with `default-features = false`, add `features = [\"redis\"]` or `[\"fred\"]`)"
);

mod backend;

pub use backend::ReentrantBackend;

/// The core crate (config, errors, the lock manager and its guards),
/// re-exported so this crate alone is enough:
/// `lock_reentrant::lock_core::LockConfig`.
pub use lock_core;
