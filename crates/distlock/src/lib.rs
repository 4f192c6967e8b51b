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
//! | strategy | nodes | fencing tokens | re-entry | survives |
//! |---|---|---|---|---|
//! | `single` | 1 | yes | no | nothing: one node is one point of failure |
//! | `reentrant` | 1 | yes (kept on re-entry) | by owner | same as `single` |
//! | `redlock` | N (odd) | no | no | a minority of nodes down |
//!
//! The `distlock` binary (feature `cli`) runs a command under a lock:
//! `distlock run --key nightly-report --wait 0 -- ./report.sh`.

mod build;
mod config;

pub use build::{backend, connect};
pub use config::{Config, Strategy, ENV_PREFIX};

pub use lock_core::{
    ClientKind, Endpoint, FencingToken, LeaseGuard, LeaseHandle, LeaseStatus, LockBackend,
    LockConfig, LockError, LockManager, LockState, LossReason, NodeUrl, OwnerToken, ReplicasConfig,
    RetryPolicy, SentinelAuth, TlsConfig, Topology, WaitMode, WatchdogConfig,
};
pub use lock_redis_single::SingleNodeBackend;
pub use lock_redlock::{RedlockBackend, RedlockOptions};
pub use lock_reentrant::ReentrantBackend;
