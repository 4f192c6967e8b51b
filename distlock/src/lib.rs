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
//! `tls` adds `rediss://` nodes. A library that wants only `fred` writes
//! `default-features = false, features = ["fred"]`; with no client at all the
//! build stops with a message that says which feature to enable.
//!
//! The `distlock` command, which runs a command under a lock
//! (`distlock run -n nightly-report -- ./report.sh`), is a package of its
//! own: `cargo install distlock-cli`.
//!
//! # Bringing your own client
//!
//! An application that already has a connection hands it over instead of a
//! URL: wrap a `redis` [`ConnectionManager`](https://docs.rs/redis/latest/redis/aio/struct.ConnectionManager.html)
//! with [`RedisNode::from_manager`](topology::RedisNode::from_manager) (a
//! cluster connection with `RedisNode::from_cluster`) or a `fred` client
//! with `FredNode::from_client`, and build a strategy's backend on it.
//! Waiters on such a backend poll rather than subscribe (see
//! [`SingleNodeBackend::from_node`](backend::SingleNodeBackend::from_node)).
//!
//! ```no_run
//! # #[cfg(feature = "redis")]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use distlock::backend::SingleNodeBackend;
//! use distlock::topology::RedisNode;
//! use distlock::{LockConfig, LockManager};
//!
//! // The connection the application already has.
//! let client = redis::Client::open("redis://127.0.0.1:6379")?;
//! let connection = redis::aio::ConnectionManager::new(client).await?;
//!
//! let node = RedisNode::from_manager(connection, "127.0.0.1:6379", Duration::from_secs(1));
//! let backend = SingleNodeBackend::from_node(Arc::new(node));
//! let locks = LockManager::new(Arc::new(backend), LockConfig::default())?;
//! let _lease = locks.acquire("invoice:7").await?;
//! # Ok(()) }
//! ```
//!
//! The types re-exported from `lock-core` carry examples written with these
//! paths; they run as this crate's doc tests.

// docs.rs builds with `--cfg docsrs` (see Cargo.toml) on nightly, where this
// marks each item that needs a cargo feature with that feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod build;
pub mod config;

pub use build::connect;
pub use config::Config;

// What a user of the locks needs: the manager, its config, the handles and
// guards, tokens and errors. The rest is in modules by reader.
pub use lock_core::{
    settle_background_releases, AcquireOptions, Barrier, ClientKind, Election, FencingToken,
    HandoffToken, Latch, Leadership, LeaseGuard, LeaseHandle, LeaseStatus, Lock, LockConfig,
    LockError, LockGuard, LockManager, LossReason, MultiLock, Observer, OwnerToken, PartyGuard,
    PermitGuard, ReadGuard, RwLock, Semaphore, WriteGuard,
};

pub mod error {
    //! What an error says beyond its kind: the capability a strategy lacks,
    //! the ACL rule a user needs, the source of a connection error.
    //! [`LockError`] and [`LossReason`] are also at the crate's root.
    pub use lock_core::{AclNeed, Capability, LockError, LossReason, SourceError};
}

pub mod state {
    //! What a name's state reads as ([`NameState`], from
    //! [`LockManager::inspect`](crate::LockManager::inspect)), and a
    //! lock's ([`LockState`]): a semaphore's permits, a read-write lock's
    //! holds, an election's leader, a latch's count, a barrier's parties,
    //! holder information, and the listing of held locks
    //! ([`LockManager::list`](crate::LockManager::list)).
    pub use lock_core::{
        Access, BarrierState, HolderInfo, LatchState, Leader, ListOptions, ListedLock, LockListing,
        LockState, NameState, PermitState, RwHoldState, RwLockState, SemaphoreState,
    };
}

pub mod topology {
    //! Where the servers are and how to reach them: the node URLs, Cluster
    //! and Sentinel deployments, TLS, replicas to await, and connections an
    //! application already has, wrapped for a backend.
    #[cfg(feature = "fred")]
    pub use lock_core::FredNode;
    #[cfg(feature = "redis")]
    pub use lock_core::RedisNode;
    pub use lock_core::{
        ConnectOptions, Endpoint, GrantOptions, NodeUrl, ReplicasConfig, Secret, SentinelAuth,
        TlsConfig, Topology,
    };
}

pub mod limits {
    //! The bounds the library checks its input against, the fair waiter's
    //! lease, and a latch's default TTL.
    pub use lock_core::{
        DEFAULT_LATCH_TTL, FAIR_WAITER_LEASE, MAX_BARRIER_PARTIES, MAX_HOLDER_LABEL_LEN,
        MAX_KEY_LEN, MAX_LATCH_COUNT, MAX_LEADER_VALUE_LEN, MAX_METRICS_LOCK_NAMES, MAX_MULTI_KEYS,
        MAX_OWNER_LEN, MAX_PREFIX_LEN, MAX_SEMAPHORE_LIMIT, MAX_TTL, MIN_TTL,
    };
}

pub mod backend {
    //! For authors of a backend, and for applications that build one by
    //! hand: the [`LockBackend`] trait with its claims and outcomes, the
    //! optional traits of the primitives, holds, the built-in strategies,
    //! and [`strategy`], the building blocks a new strategy is made of.
    pub use crate::build::backend as from_config;
    pub use lock_core::strategy;
    pub use lock_core::{
        async_trait, AccessRequest, AcquireOutcome, Acquired, BarrierBackend, Capabilities, Claim,
        ElectionBackend, ExtendOutcome, FairPlace, FromConfig, Grant, HandOffBackend, HoldKind,
        HoldToken, LatchBackend, ListBackend, LockBackend, LockKey, PartyRequest, Permit,
        PermitRequest, ReleaseOutcome, Renewal, RwLockBackend, SemaphoreBackend, Wakeups,
    };
    pub use lock_redis_single::SingleNodeBackend;
    pub use lock_redlock::{RedlockBackend, RedlockOptions, ReleaseReport};
    pub use lock_reentrant::ReentrantBackend;
}

// The README's Rust examples compile (`cargo test --doc`), with `distlock::`
// paths only: what a user copies from it must build.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExamples;

// The examples on the items re-exported from lock-core, written with
// `distlock::` paths for the users of this crate: they run here, and
// lock-core's own doc tests leave them out (it cannot name its front door).
#[cfg(doctest)]
mod lock_core_examples {
    #[doc = include_str!("../../lock-core/src/doc/acquire_options.md")]
    struct AcquireOptions;
    #[doc = include_str!("../../lock-core/src/doc/acquire_with.md")]
    struct AcquireWith;
    #[doc = include_str!("../../lock-core/src/doc/connect.md")]
    struct Connect;
    #[doc = include_str!("../../lock-core/src/doc/fencing_token.md")]
    struct FencingToken;
    #[doc = include_str!("../../lock-core/src/doc/handoff_token.md")]
    struct HandoffToken;
    #[doc = include_str!("../../lock-core/src/doc/lock_config.md")]
    struct LockConfig;
    #[doc = include_str!("../../lock-core/src/doc/lock_manager.md")]
    struct LockManager;
    #[doc = include_str!("../../lock-core/src/doc/semaphore.md")]
    struct Semaphore;
    #[doc = include_str!("../../lock-core/src/doc/election.md")]
    struct Election;
    #[doc = include_str!("../../lock-core/src/doc/latch.md")]
    struct Latch;
    #[doc = include_str!("../../lock-core/src/doc/barrier.md")]
    struct Barrier;
    #[doc = include_str!("../../lock-core/src/doc/rw_lock.md")]
    struct RwLock;
    #[doc = include_str!("../../lock-core/src/doc/lock.md")]
    struct Lock;
    #[doc = include_str!("../../lock-core/src/doc/multi_lock.md")]
    struct MultiLock;
    #[doc = include_str!("../../lock-core/src/doc/lease_guard.md")]
    struct LockGuard;
}
