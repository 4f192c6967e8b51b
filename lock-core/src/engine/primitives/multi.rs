//! Multi-key locks: several names taken as one hold, all or nothing, with
//! one lease, one watchdog, one loss signal and one fencing token.

use std::sync::Arc;

use crate::engine::backend::Claim;
use crate::engine::lease::guard::LockGuard;
use crate::engine::manager::LockManager;
use crate::engine::options::AcquireOptions;
use crate::error::{Capability, LockError};
use crate::key::LockKey;

/// The most names one multi-key lock takes: one script sets them all, and
/// a bound keeps that step short.
pub const MAX_MULTI_KEYS: usize = 64;

/// Several lock names held as one, from [`LockManager::multi_lock`]: a
/// transfer between two accounts, an order touching several stock items.
///
/// An acquire takes **every name or none**, in one atomic step: there is
/// no moment where a holder has some of them, so two holders asking for
/// the same names in opposite orders never deadlock. The hold is one
/// [`LockGuard`]: one lease renewed by one watchdog, one
/// [`lost()`](LockGuard::lost) that completes when any member is lost (a
/// renewal renews every member or none), released together.
///
/// Each member is stored as a plain lock of its name is, so a plain lock
/// of a member name and the multi-key hold exclude each other, and a
/// release wakes the waiters of every member. The hold stores no holder
/// information.
///
/// Names are de-duplicated, and taken in one canonical order (by the
/// backend's renewal group, on a Redis Cluster the slot, then name),
/// whatever order they were given in.
///
/// **Where**: the single-node strategy, on a standalone server or behind
/// Sentinel, in one script; on a Redis Cluster in one script when every
/// name hashes to one slot. Redlock: every node takes
/// all the names in one script, and the quorum rules are a lock's (no
/// fencing token). A name's keys carry the hash
/// tag of the text before its first `}`: names `acct}1` and `acct}2` share
/// the slot of `acct`. Names in several slots are taken **slot by slot**,
/// in the canonical order, each slot's names in one script, and raised to
/// one token at the end: that is **not atomic** across slots (while it is
/// being taken, some members are held and others not yet), but it never
/// waits holding some of them (it gives back what it took when a later
/// slot is held, and tries again), so requests in opposite orders still
/// never deadlock. Hand-off is refused
/// ([`LockError::HandOffUnsupported`]: a token names one key), and, as for
/// any refused hand-off, the hold is then released.
///
/// # Fencing
///
/// The hold has **one fencing token** ([`LockGuard::fencing_token`]),
/// greater than every earlier token of each member name (every member's
/// counter is raised to it): a resource that fences any one member stays
/// correct. The single-node strategy always issues it, also with
/// `fencing = false`; Redlock never (`None`). A member whose counter is at
/// or above 2^53 (only a seeded counter gets there) is refused as
/// [`LockError::Corrupted`]: the script's numbers are doubles.
///
/// # Examples
///
#[cfg_attr(not(doctest), doc = include_str!("../../doc/multi_lock.md"))]
#[derive(Debug, Clone)]
pub struct MultiLock {
    manager: LockManager,
    keys: Arc<[LockKey]>,
}

impl LockManager {
    /// The names of `names` as one multi-key lock, through this manager's
    /// backend, config and watchdog. Nothing is sent until an acquire.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidKey`] for no names, more than
    /// [`MAX_MULTI_KEYS`] distinct ones, or a bad name;
    /// [`LockError::Unsupported`] on a strategy without multi-key locks
    /// (reentrant), before anything is sent.
    pub fn multi_lock<I, S>(&self, names: I) -> Result<MultiLock, LockError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.require(Capability::MultiKeys)?;
        let mut keys = names
            .into_iter()
            .map(|name| self.key(name.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        // The backend's groups are what one script can take together (a
        // Redis Cluster's slots): one group's names end up side by side.
        let backend = self.backend();
        keys.sort_by_cached_key(|key| (backend.renewal_group(key), key.name().to_owned()));
        keys.dedup_by(|a, b| a.name() == b.name());
        if keys.is_empty() {
            return Err(LockError::InvalidKey {
                reason: "a multi-key lock needs at least one name".to_owned(),
            });
        }
        if keys.len() > MAX_MULTI_KEYS {
            return Err(LockError::InvalidKey {
                reason: format!(
                    "a multi-key lock takes at most {MAX_MULTI_KEYS} names, not {}",
                    keys.len()
                ),
            });
        }
        Ok(MultiLock {
            manager: self.clone(),
            keys: keys.into(),
        })
    }
}

impl MultiLock {
    /// The names, de-duplicated, in the order they are taken.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(LockKey::name)
    }

    /// Tries once for every name: `Ok(None)` when one of them is held.
    ///
    /// # Errors
    ///
    /// As [`acquire_with`](Self::acquire_with).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_with`](Self::acquire_with).
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>, LockError> {
        let ttl = self.manager.settings().ttl;
        self.manager
            .try_once(None, self.first(), ttl, self.claim())
            .await
    }

    /// Waits up to the configured `wait_timeout` for every name.
    ///
    /// # Errors
    ///
    /// As [`acquire_with`](Self::acquire_with).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_with`](Self::acquire_with).
    pub async fn acquire(&self) -> Result<LockGuard, LockError> {
        self.acquire_with(&AcquireOptions::new()).await
    }

    /// Takes every name as `options` say: as their owner, waiting up to
    /// their wait (woken by a release of any member), for a lease of their
    /// TTL. The guard's [`fencing_token`](LockGuard::fencing_token) is the
    /// hold's one token.
    ///
    /// # Errors
    ///
    /// [`LockError::NotAcquired`] when some member stayed held for the
    /// whole wait; otherwise as [`LockManager::acquire_with`].
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::acquire_with`]: a hold granted to a dropped future
    /// is released in the background, every member of it.
    pub async fn acquire_with(&self, options: &AcquireOptions) -> Result<LockGuard, LockError> {
        self.manager
            .acquire_claim(self.first(), options, self.claim())
            .await
    }

    /// The first member's name: the lease's key.
    fn first(&self) -> &str {
        self.keys[0].name()
    }

    fn claim(&self) -> Claim {
        Claim::Multi(Arc::clone(&self.keys))
    }
}
