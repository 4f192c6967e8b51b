//! Distributed locks on Redis, through one front door.
//!
//! Pick the client by cargo feature (`redis`, `fred`, or both) and the
//! strategy in config, without changing code:
//!
//! ```no_run
//! # async fn demo() -> Result<(), distlock::LockError> {
//! // DISTLOCK_NODES=redis://127.0.0.1:6379 is enough for a single-node lock;
//! // DISTLOCK_STRATEGY=redlock with three or five nodes switches to Redlock.
//! let config = distlock::Config::from_env()?;
//! let locks = distlock::connect(&config).await?;
//! locks
//!     .with_lock("report:daily", |lease| async move {
//!         println!("running under fencing token {:?}", lease.fencing_token());
//!     })
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! | strategy | nodes | fencing tokens | re-entry | survives | does not survive |
//! |---|---|---|---|---|---|
//! | `single` (default) | one deployment: a server, a cluster or a sentinel group | yes | no | a crashed holder (the TTL frees the lock); a paused one, if the resource checks tokens; a failover, for grants `replicas` acknowledged | a restart without persistence, or a failover to a replica that missed the grant |
//! | `reentrant` | the same | yes (kept on re-entry) | by owner | the same as `single` | the same as `single` |
//! | `redlock` | N independent servers (odd) | no | no | a minority of nodes down, killed, frozen or slow | a node that rejoins within a TTL of a restart; clocks at different rates; a paused holder |
//!
//! # Features
//!
//! `redis` (the default) and `fred` choose the client, and both may be on;
//! `tls` adds `rediss://` nodes; `cli` (a default) builds the `distlock`
//! command, which runs a command under a lock:
//! `distlock run --key nightly-report --wait 0 -- ./report.sh`. A library
//! that wants only the client writes `default-features = false, features =
//! ["redis"]` (or `["fred"]`); with no client at all the build stops with a
//! message that says which feature to enable.

// docs.rs builds with `--cfg docsrs` (see Cargo.toml) on nightly, where this
// marks each item that needs a cargo feature with that feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod build;
mod config;

pub use build::{backend, connect};
pub use config::{Config, Strategy, ENV_PREFIX};

pub use lock_core::settle_background_releases;
pub use lock_core::{
    AcquireOptions, Capabilities, ClientKind, Endpoint, FencingToken, FromConfig, GrantOptions,
    HandoffToken, HoldToken, HolderInfo, LeaseGuard, LeaseHandle, LeaseStatus, ListOptions,
    ListedLock, LockBackend, LockConfig, LockError, LockKey, LockListing, LockManager, LockState,
    LossReason, NodeUrl, OwnerToken, ReplicasConfig, RetryPolicy, SentinelAuth, TlsConfig,
    Topology, WaitMode, WatchdogConfig,
};
pub use lock_redis_single::SingleNodeBackend;
pub use lock_redlock::{RedlockBackend, RedlockOptions};
pub use lock_reentrant::ReentrantBackend;

// The README's Rust examples compile (`cargo test --doc`), with `distlock::`
// paths only: what a user copies from it must build.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExamples;
