//! The core of a distributed lock toolkit on Redis: the [`LockBackend`] contract
//! that every strategy implements, the [`LockManager`] that waits, renews and
//! hands out [`LeaseGuard`]s over any backend, fencing tokens, errors, config,
//! the Lua scripts, and the one module that talks to a Redis client.
//!
//! # Guarantees, plainly
//!
//! A lease is trusted until a deadline computed on the holder's monotonic clock
//! from the moment the acquire was *sent*, minus a clock-drift allowance. A
//! process that pauses (GC, swap, SIGSTOP) can still act after its deadline;
//! only a resource that checks the [`FencingToken`] is safe against that. The
//! watchdog renews held leases and reports a loss through
//! [`LeaseGuard::lost`]; it cannot prevent one.
//!
//! # Clients
//!
//! Enable the cargo feature `redis` (redis-rs) or `fred`, or both; pick one per
//! connection with [`ClientKind`].

// docs.rs builds with `--cfg docsrs` (see Cargo.toml) on nightly, where this
// marks each item that needs a cargo feature with that feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;
pub mod client;
mod config;
mod error;
mod guard;
mod key;
mod manager;
pub mod notify;
pub mod script;
mod scripted;
pub mod timing;
mod topology;
mod watchdog;

pub use backend::{AcquireOutcome, ExtendOutcome, LockBackend, LockState, ReleaseOutcome};
pub use client::{ClientKind, ConnectOptions, NodeClient, Reply, SubscriberClient};
pub use config::{LockConfig, NodeUrl, RetryPolicy, WaitMode, WatchdogConfig};
pub use error::{BoxError, LockError, LossReason};
pub use guard::{LeaseGuard, LeaseHandle, LeaseStatus};
pub use key::{
    FencingToken, HoldToken, LockKey, OwnerToken, MAX_KEY_LEN, MAX_OWNER_LEN, MAX_PREFIX_LEN,
};
pub use manager::{LockManager, FAIR_WAITER_LEASE};
pub use notify::{ReleaseNotifier, ReleaseWatch};
pub use scripted::ScriptedNode;
pub use timing::{MAX_TTL, MIN_TTL};
pub use topology::{Endpoint, ReplicasConfig, Secret, SentinelAuth, TlsConfig, Topology};

/// Re-exported so backends and users name the same `async_trait`.
pub use async_trait::async_trait;
