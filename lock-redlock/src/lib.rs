//! Redlock: a lock taken on a majority of N independent Redis nodes, so it
//! survives the failure of a minority of them.
//!
//! An acquire notes the start `Instant`, sends `SET NX PX` to every node at
//! once, each bounded by the per-node timeout, and succeeds when a majority
//! (`N/2 + 1`) granted it and the validity `ttl - elapsed - drift` (drift =
//! `ttl × clock_drift_factor + 2 ms`) is still positive. It stops waiting as soon
//! as the outcome is certain. On failure it releases, before returning, on
//! every node that may hold its grant: all but those that answered "held",
//! including those that timed out (a late grant would otherwise hold the key
//! until its TTL). Renewal and release go to every node at once too; the
//! watchdog marks the lease lost when a renewal cannot reach a majority.
//!
//! # Speed
//!
//! Every round waits for the first majority of replies, never for the rest: a
//! slow node (another zone, a busy host) does not slow the lock, while its
//! commands still reach it, and a release returns once a majority confirmed
//! (the other deletes finish in the background; [`RedlockBackend::release_reporting`]
//! waits for every node). An acquire + release cycle over five local nodes runs
//! at about 0.8 to 0.9 × the single-node lock with one task, and many times a
//! client that waits for every node once one node is slow; the figures and
//! their limits are in `docs/BENCHMARKS.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lock_core::LockError> {
//! use lock_core::{LockConfig, LockManager};
//! use lock_redlock::RedlockBackend;
//!
//! let config = LockConfig::with_nodes([
//!     "redis://10.0.0.1:6379",
//!     "redis://10.0.0.2:6379",
//!     "redis://10.0.0.3:6379",
//! ]);
//! let locks = LockManager::connect::<RedlockBackend>(&config).await?;
//! let guard = locks.acquire("invoice:77").await?;
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! # No fencing tokens
//!
//! Redlock returns no fencing token (`fencing_token()` is `None`). A counter per
//! node is not monotonic across different majorities, and a "read a majority,
//! write max + 1 to a majority" scheme breaks as soon as a node restarts without
//! its data: the next majority can read an older maximum and hand out a token
//! again (Kleppmann, "How to do distributed locking"). Rather than return a
//! token that can go backwards, we return none. If the resource you protect
//! needs fencing, use a single-node lock on a persistent, non-failing-over
//! Redis, or a consensus system.
//!
//! # What else it assumes
//!
//! Clocks on the nodes must run at about the same rate (the drift allowance
//! covers 1 % by default), and a node that crashes should stay down for at
//! least one TTL before rejoining, or a lock it granted can be granted again.
//!
//! An acquire returns once a majority granted; the other nodes' `SET`s finish
//! in the background of the process that sent them. A release from the same
//! backend may still reach one of those nodes first (a client may hand
//! commands to a connection in another order than they were sent); the
//! backend then sees the release find nothing there and the `SET` grant
//! after it, and deletes that grant by its hold's value. A lease handed off
//! to another process ([`LockGuard::hand_off`](lock_core::LockGuard::hand_off))
//! at once after its acquire is not watched that way: if its release by
//! token reaches a node before the first process's `SET` does, that node
//! keeps the key until its TTL (a minority of nodes at most, so no second
//! holder; later acquires there count that node as held).

// docs.rs builds with `--cfg docsrs` (see Cargo.toml) on nightly, where this
// marks each item that needs a cargo feature with that feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

// Without a client every connect would fail at run time; stop the build instead.
#[cfg(not(any(feature = "redis", feature = "fred")))]
compile_error!(
    "lock-redlock needs a Redis client: enable its `redis` feature (the default) or `fred` \
     (with `default-features = false`, add `features = [\"redis\"]` or `[\"fred\"]`)"
);

mod backend;
mod late_grants;
mod node;
mod options;
mod round;

pub use backend::{validate_config, RedlockBackend, RedlockOptions, ReleaseReport};

/// The core crate (config, errors, the lock manager and its guards),
/// re-exported so this crate alone is enough:
/// `lock_redlock::lock_core::LockConfig`.
pub use lock_core;
