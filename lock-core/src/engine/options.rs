//! What one acquire call asks for beyond the lock's name.

use std::time::Duration;

use crate::key::OwnerToken;

/// How one acquire call takes its lock: as which owner, how long it waits,
/// and the TTL of its lease. Every field left unset takes the manager's
/// config; see [`LockManager::acquire_with`](crate::LockManager::acquire_with).
///
#[cfg_attr(not(doctest), doc = include_str!("../doc/acquire_options.md"))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AcquireOptions {
    /// Who acquires: with the reentrant strategy, an owner that holds the
    /// lock enters it again (pass `guard.owner()` to nested code); with the
    /// others, a second acquire by the same owner finds the lock held.
    /// Default: an owner made for this call alone.
    pub owner: Option<OwnerToken>,
    /// How long to wait for the lock. `Duration::ZERO` makes one attempt
    /// (in fair mode without joining the queue). Default: the config's
    /// `wait_timeout`, as [`LockManager::acquire`](crate::LockManager::acquire)
    /// waits.
    pub wait: Option<Duration>,
    /// The lease's TTL, which the watchdog renews to. Default: the config's
    /// `ttl`.
    pub ttl: Option<Duration>,
}

impl AcquireOptions {
    /// Options that take everything from the manager's config.
    pub fn new() -> Self {
        AcquireOptions::default()
    }

    /// These options acquiring as `owner`.
    pub fn with_owner(mut self, owner: OwnerToken) -> Self {
        self.owner = Some(owner);
        self
    }

    /// These options waiting up to `wait`.
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// These options making one attempt: `with_wait(Duration::ZERO)`.
    pub fn no_wait(self) -> Self {
        self.with_wait(Duration::ZERO)
    }

    /// These options with a lease of `ttl`.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
}
