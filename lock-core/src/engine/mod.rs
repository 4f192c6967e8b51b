//! The lease engine: takes, waits for, renews, hands off and releases holds
//! on resources through the [`LockBackend`](backend::LockBackend) trait, and
//! waits between attempts through [`Wakeups`](wake::Wakeups).
//!
//! Nothing here names Redis, a client crate or a module of
//! [`server`](crate::server): a strategy brings those behind the trait.
//! `cargo xtask layers` checks it.

pub(crate) mod backend;
pub(crate) mod background;
pub(crate) mod capabilities;
pub(crate) mod drop_guard;
pub(crate) mod election;
pub(crate) mod guard;
pub(crate) mod lease;
pub(crate) mod lock;
pub(crate) mod manager;
pub(crate) mod multi;
pub(crate) mod offer;
pub(crate) mod options;
pub(crate) mod outcome;
pub(crate) mod renewal;
pub(crate) mod roles;
pub(crate) mod rwlock;
pub(crate) mod schedule;
pub(crate) mod semaphore;
pub(crate) mod settings;
pub(crate) mod state;
pub(crate) mod status;
pub(crate) mod telemetry;
pub(crate) mod timing;
pub(crate) mod wait;
pub(crate) mod wake;
pub(crate) mod watchdog;
