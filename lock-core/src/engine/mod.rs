//! The lease engine: takes, waits for, renews, hands off and releases holds
//! on resources through the [`LockBackend`](backend::LockBackend) trait, and
//! waits between attempts through [`Wakeups`](wake::Wakeups).
//!
//! Three folders, one concept each: [`backend`] is the trait a strategy
//! implements (its claims, capabilities and outcomes); [`lease`] is what a
//! held lease is and what keeps it (guards, the watchdog and its schedule,
//! batched renewal, background release); [`primitives`] are the handles
//! users take holds through (a lock, a semaphore, a read-write lock, a
//! multi-key lock, an election). Beside them, the manager and how it waits
//! ([`wait`], [`wake`], [`offer`]), its settings and telemetry, and the state
//! a backend reports.
//!
//! Nothing here names Redis, a client crate or a module of
//! [`server`](crate::server): a strategy brings those behind the trait.
//! `cargo xtask layers` checks it.

pub(crate) mod backend;
pub(crate) mod lease;
pub(crate) mod manager;
pub(crate) mod offer;
pub(crate) mod options;
pub(crate) mod primitives;
pub(crate) mod settings;
pub(crate) mod state;
pub(crate) mod telemetry;
pub(crate) mod wait;
pub(crate) mod wake;
