//! The core of a distributed lock toolkit on Redis: the [`LockBackend`] contract
//! that every strategy implements, the [`LockManager`] that waits, renews and
//! hands out [`LockGuard`]s over any backend, fencing tokens, errors, config,
//! the Lua scripts, and the one module that talks to a Redis client.
//!
//! The crate root is what applications need: the manager and its guards,
//! config, errors, tokens, topology types, and the [`LockBackend`] trait with
//! its outcomes. What a strategy needs to implement that trait (connections,
//! scripts, lease arithmetic, release notifications) is in [`strategy`].
//!
//! # Guarantees, plainly
//!
//! A lease is trusted until a deadline computed on the holder's monotonic clock
//! from the moment the acquire was *sent*, minus a clock-drift allowance. A
//! process that pauses (GC, swap, SIGSTOP) can still act after its deadline;
//! only a resource that checks the [`FencingToken`] is safe against that. The
//! watchdog renews held leases and reports a loss through
//! [`LockGuard::lost`]; it cannot prevent one.
//!
//! # Clients
//!
//! Enable the cargo feature `redis` (redis-rs) or `fred`, or both; pick one per
//! connection with [`ClientKind`]. An application that already holds a
//! connection can wrap it (`RedisNode::from_manager` or
//! `RedisNode::from_cluster` with the `redis` feature, `FredNode::from_client`
//! with `fred`) and hand it to a strategy's `from_node`.
//!
//! # Metrics and spans
//!
//! With the cargo feature `metrics`, the manager, guards and watchdog record
//! through the [`metrics`](https://docs.rs/metrics) facade; the application
//! installs the exporter (Prometheus, StatsD, OpenTelemetry, ...):
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `distlock_acquisitions_total` | counter | `strategy`, `outcome` | acquire calls by result: `acquired`, `busy` (a single try found the lock held), `timeout` (held for the whole wait), `error` |
//! | `distlock_acquire_attempts` | histogram | `strategy` | attempts per acquire call |
//! | `distlock_acquire_wait_seconds` | histogram | `strategy` | time from the call to its result |
//! | `distlock_hold_seconds` | histogram | `strategy` | time from a grant (or resume) to its release, hand-off or loss |
//! | `distlock_renewals_total` | counter | `strategy`, `outcome` | watchdog renewals: `renewed`, `not_held`, `failed` |
//! | `distlock_leases_lost_total` | counter | `strategy`, `reason` | leases lost: `not_held`, `expired`, `max_hold_reached` |
//! | `distlock_leases_held` | gauge | `strategy` | leases this process holds now |
//!
//! With `metrics_lock_names = N` in the config, every metric also carries a
//! `lock` label with the lock name, for the first N distinct names the process
//! sees; later names share the value `other`, so memory stays bounded
//! however many names there are.
//!
//! Every acquire call, extend (the watchdog's renewals included) and release
//! runs in a `tracing` span named `acquire`, `extend` or `release`, at the
//! `INFO` level, with the fields `key`, `strategy`, `outcome`,
//! `fencing_token` and the timing (`waited_us` and `attempts` for an acquire,
//! whose attempts are `DEBUG` events in it; `elapsed_us` otherwise). No span
//! or event carries an owner token.

// docs.rs builds with `--cfg docsrs` (see Cargo.toml) on nightly, where this
// marks each item that needs a cargo feature with that feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
mod engine;
mod error;
mod hold;
mod key;
mod server;
pub mod strategy;
mod ttl;

pub use config::{FromConfig, LockConfig, MAX_METRICS_LOCK_NAMES};
pub use engine::backend::{
    AccessRequest, AcquireOutcome, Acquired, BarrierBackend, Capabilities, Claim, ElectionBackend,
    ExtendOutcome, FairPlace, HandOffBackend, LatchBackend, ListBackend, LockBackend, PartyRequest,
    PermitRequest, ReleaseOutcome, Renewal, RwLockBackend, SemaphoreBackend,
};
pub use engine::lease::background::settle_background_releases;
pub use engine::lease::guard::{LeaseHandle, LockGuard};
pub use engine::lease::roles::{LeaseGuard, PermitGuard, ReadGuard, WriteGuard};
pub use engine::lease::status::LeaseStatus;
pub use engine::manager::{LockManager, FAIR_WAITER_LEASE};
pub use engine::options::AcquireOptions;
pub use engine::primitives::barrier::{Barrier, PartyGuard, MAX_BARRIER_PARTIES};
pub use engine::primitives::election::{Election, Leadership, Observer, MAX_LEADER_VALUE_LEN};
pub use engine::primitives::latch::{Latch, DEFAULT_LATCH_TTL, MAX_LATCH_COUNT};
pub use engine::primitives::lock::Lock;
pub use engine::primitives::multi::{MultiLock, MAX_MULTI_KEYS};
pub use engine::primitives::rwlock::RwLock;
pub use engine::primitives::semaphore::{Semaphore, MAX_SEMAPHORE_LIMIT};
pub use engine::settings::{RetryPolicy, WaitMode, WatchdogConfig};
pub use engine::state::{
    BarrierState, HolderInfo, LatchState, Leader, ListOptions, ListedLock, LockListing, LockState,
    NameState, PermitState, RwHoldState, RwLockState, SemaphoreState,
};
pub use engine::wake::{Grant, Wakeups};
pub use error::{AclNeed, Capability, LockError, LossReason, SourceError};
pub use hold::{Access, HandoffToken, HoldKind, HoldToken, Permit};
pub use key::{FencingToken, LockKey, OwnerToken, MAX_KEY_LEN, MAX_OWNER_LEN, MAX_PREFIX_LEN};
#[cfg(feature = "fred")]
pub use server::client::FredNode;
#[cfg(feature = "redis")]
pub use server::client::RedisNode;
pub use server::client::{ClientKind, ConnectOptions};
pub use server::grant::{GrantOptions, MAX_HOLDER_LABEL_LEN};
pub use server::topology::{Endpoint, ReplicasConfig, Secret, SentinelAuth, TlsConfig, Topology};
pub use server::url::NodeUrl;
pub use ttl::{MAX_TTL, MIN_TTL};

/// Re-exported so backends and users name the same `async_trait`.
pub use async_trait::async_trait;
