//! Locks on one Redis node.
//!
//! A lock is a string key set with `SET key <owner token> NX PX <ttl>`, where the
//! owner token is 128 random bits from the OS generator. Acquire, renewal
//! (compare-and-extend) and release (compare-and-delete) are each one Lua script
//! and one round trip; the acquire script also increments the key's fencing
//! counter in the same atomic step.
//!
//! With [`LockConfig::fencing`](lock_core::LockConfig::fencing) off, an
//! acquire is one plain `SET NX PX` instead, with no fencing token (fair mode
//! keeps its script and its tokens); see that field for what is lost.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lock_core::LockError> {
//! use lock_core::{LockConfig, LockManager};
//! use lock_redis_single::SingleNodeBackend;
//!
//! let config = LockConfig::with_nodes(["redis://127.0.0.1:6379"]);
//! let locks = LockManager::connect::<SingleNodeBackend>(&config).await?;
//! let guard = locks.acquire("report:daily").await?;
//! println!("holding with fencing token {:?}", guard.fencing_token());
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! # What it does not survive
//!
//! One node is one point of failure: if it restarts without persistence or
//! fails over to a replica that missed the write, a held lock can be granted
//! again and fencing tokens can go backwards. Use Redlock over independent
//! nodes, or persistence with `appendfsync always`, where that matters.

// docs.rs builds with `--cfg docsrs` (see Cargo.toml) on nightly, where this
// marks each item that needs a cargo feature with that feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

// Without a client every connect would fail at run time; stop the build instead.
#[cfg(not(any(feature = "redis", feature = "fred")))]
compile_error!(
    "lock-redis-single needs a Redis client: enable its `redis` feature (the default) or `fred` \
     (with `default-features = false`, add `features = [\"redis\"]` or `[\"fred\"]`)"
);

mod backend;

pub use backend::SingleNodeBackend;

/// The core crate (config, errors, the lock manager and its guards),
/// re-exported so this crate alone is enough:
/// `lock_redis_single::lock_core::LockConfig`.
pub use lock_core;
