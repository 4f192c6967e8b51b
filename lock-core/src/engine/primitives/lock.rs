//! The lock of one name as a handle, beside the other primitives'.

use std::future::Future;

use crate::engine::lease::guard::{LeaseHandle, LockGuard};
use crate::engine::manager::LockManager;
use crate::engine::options::AcquireOptions;
use crate::engine::state::LockState;
use crate::error::LockError;
use crate::key::LockKey;

/// The lock of one name, from [`LockManager::lock`]: what
/// [`Semaphore`](crate::Semaphore), [`RwLock`](crate::RwLock),
/// [`MultiLock`](crate::MultiLock) and [`Election`](crate::Election) are
/// for theirs. Its methods are the manager's for this name
/// ([`LockManager::acquire`] and the rest).
///
/// Cheap to clone: clones share the manager.
///
/// # Fencing
///
/// Each grant of the name takes the next token of the name's counter
/// ([`LockGuard::fencing_token`]), so a new holder's token is greater than
/// every earlier one while the server keeps its data. A resource that keeps
/// the highest token it has accepted, and refuses a lower one, turns away a
/// holder that paused past its lease once the next holder has written
/// ([`FencingToken`](crate::FencingToken) shows how). The single-node
/// strategy issues tokens with `fencing` on (the default) and always in
/// fair mode; the reentrant strategy always, a re-entry getting its hold's
/// token; Redlock never (`None`).
///
/// # Examples
///
#[cfg_attr(not(doctest), doc = include_str!("../../doc/lock.md"))]
#[derive(Debug, Clone)]
pub struct Lock {
    key: LockKey,
    manager: LockManager,
}

impl LockManager {
    /// The lock `name`, through this manager's backend and config.
    /// Nothing is sent until an acquire or a read.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidKey`] for a bad name.
    pub fn lock(&self, name: &str) -> Result<Lock, LockError> {
        Ok(Lock {
            key: self.key(name)?,
            manager: self.clone(),
        })
    }
}

impl Lock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        self.key.name()
    }

    /// Tries once: `Ok(None)` when someone else holds the lock.
    ///
    /// # Errors
    ///
    /// As [`LockManager::try_acquire`].
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::try_acquire`].
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>, LockError> {
        self.manager.try_acquire(self.name()).await
    }

    /// Waits up to the configured `wait_timeout` for the lock.
    ///
    /// # Errors
    ///
    /// As [`LockManager::acquire`].
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::acquire_with`].
    pub async fn acquire(&self) -> Result<LockGuard, LockError> {
        self.manager.acquire(self.name()).await
    }

    /// Takes the lock as `options` say.
    ///
    /// # Errors
    ///
    /// As [`LockManager::acquire_with`].
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::acquire_with`].
    pub async fn acquire_with(&self, options: &AcquireOptions) -> Result<LockGuard, LockError> {
        self.manager.acquire_with(self.name(), options).await
    }

    /// Runs `work` while holding the lock, then releases it.
    ///
    /// # Errors
    ///
    /// As [`LockManager::with_lock`].
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::with_lock`].
    pub async fn with_lock<F, Fut, T>(&self, work: F) -> Result<T, LockError>
    where
        F: FnOnce(LeaseHandle) -> Fut,
        Fut: Future<Output = T>,
    {
        self.manager.with_lock(self.name(), work).await
    }

    /// Reads the lock without changing it: free (with the last fencing
    /// token) or held (with its remaining lease, token and holder
    /// information). A name another primitive holds reads as held while
    /// any of its holds lives (see [`NameState`](crate::NameState)'s conversion); what holds
    /// it is [`LockManager::inspect`]'s to say.
    ///
    /// # Errors
    ///
    /// As [`LockManager::inspect`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn state(&self) -> Result<LockState, LockError> {
        self.manager.inspect(self.name()).await.map(LockState::from)
    }
}
