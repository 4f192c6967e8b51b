//! Semaphores: a name with a limit of N permits, each acquire one permit of
//! a weight with a lease of its own, held through the same guards,
//! watchdog and waits as a lock.

use crate::engine::backend::Claim;
use crate::engine::backend::PermitRequest;
use crate::engine::lease::roles::PermitGuard;
use crate::engine::manager::LockManager;
use crate::engine::options::AcquireOptions;
use crate::engine::state::SemaphoreState;
use crate::error::{Capability, LockError};
use crate::key::LockKey;

/// The largest limit a semaphore may have: the scripts take at most nine
/// digits, and a permit's slot is below the limit.
pub const MAX_SEMAPHORE_LIMIT: u32 = 999_999_999;

/// A named semaphore of `limit` permits, from
/// [`LockManager::semaphore`]: at most `limit` weight of permits are live
/// at once, across every process that uses the name.
///
/// Each acquire takes **one permit** of a weight (1, or `n` with
/// [`acquire_many`](Semaphore::acquire_many)) with its own lease: a
/// [`PermitGuard`], a lock's lease with a slot and a weight, renewed by the
/// watchdog, released by
/// `release().await` or in the background on drop, its loss reported by
/// `lost()`. A holder that crashes gives its weight back when its lease
/// runs out, never earlier: every deadline is the server's clock, and every
/// script first drops the permits whose deadline has passed. A renewal
/// never revives a permit that ended, and a release credits only its own
/// permit, once.
///
/// The limit is stored with the semaphore by its first acquire; a process
/// that asks for another one gets [`LockError::CountMismatch`], naming
/// both. Change it on purpose with [`set_limit`](Self::set_limit).
///
/// Waiting is as for a lock: a release publishes the weight left in use,
/// and the waiters of the semaphore in this process whose weights fit
/// beside it, in order, try again (a woken waiter that finds the room taken
/// passes its wake-up to lighter ones behind it); a waiter whose weight
/// does not fit sleeps until the next release or until the first live
/// permit's lease ends. In fair mode (the config's `fair`),
/// permits go in arrival order: a waiter is granted only at the head of
/// the semaphore's queue, so a large weight is not starved by small ones
/// that keep fitting, and a one-shot try never jumps the queue. A release
/// grants what it frees, on the server, to the waiters at the head of the
/// queue while their weights fit (unless the config sets `holder_info`,
/// `fencing_counter_ttl` or `replicas`): each learns it from the message,
/// with no acquire of its own, and extends the permit (made for
/// [`FAIR_WAITER_LEASE`](crate::FAIR_WAITER_LEASE)) to its TTL at once; a
/// waiter that died in the queue holds its permit that long at most. A place in
/// the queue is an owner's: waits that pass one owner
/// ([`AcquireOptions::with_owner`]) share a place, so give each fair wait
/// its own owner (the default).
///
/// # Fencing
///
/// A permit's token is per slot: its [`slot`](PermitGuard::slot) is in
/// `0..limit`, no two live permits share one, and its
/// [`fencing_token`](PermitGuard::fencing_token) comes from that slot's own
/// counter. A resource keeps the highest token it has accepted per slot
/// and refuses a lower one for the same slot: a holder that paused past
/// its lease is refused once its slot's next holder has written. Send the
/// slot along with the token.
///
/// # Examples
///
#[cfg_attr(not(doctest), doc = include_str!("../../doc/semaphore.md"))]
#[derive(Debug, Clone)]
pub struct Semaphore {
    manager: LockManager,
    key: LockKey,
    limit: u32,
}

impl LockManager {
    /// The semaphore `name` with `limit` permits, through this manager's
    /// backend, config and watchdog. Nothing is sent until an acquire.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidPermits`] for a limit of 0 or above
    /// [`MAX_SEMAPHORE_LIMIT`]; [`LockError::InvalidKey`] for a bad name;
    /// [`LockError::Unsupported`] on a strategy without semaphores
    /// (reentrant, Redlock), before anything is sent.
    pub fn semaphore(&self, name: &str, limit: u32) -> Result<Semaphore, LockError> {
        self.require(Capability::Semaphores)?;
        validate_limit(limit)?;
        Ok(Semaphore {
            key: self.key(name)?,
            manager: self.clone(),
            limit,
        })
    }
}

impl LockManager {
    /// Reads the semaphore `name` whatever its limit: for operators
    /// (`distlock status`), who do not know it. A name never used as a
    /// semaphore (or whose keys are gone) reads with no limit and no
    /// permits; a lock's name is [`LockError::Corrupted`], a strategy
    /// without semaphores [`LockError::Unsupported`].
    pub async fn semaphore_state(&self, name: &str) -> Result<SemaphoreState, LockError> {
        self.require(Capability::Semaphores)?;
        let key = self.key(name)?;
        self.semaphores()?.semaphore_state(&key).await
    }
}

impl Semaphore {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.key.name()
    }

    /// The limit this handle asks for.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Tries once for a permit of weight 1: `Ok(None)` when it does not fit
    /// beside the live permits.
    ///
    /// # Errors
    ///
    /// As [`acquire_with`](Self::acquire_with).
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::try_acquire`].
    pub async fn try_acquire(&self) -> Result<Option<PermitGuard>, LockError> {
        self.try_acquire_many(1).await
    }

    /// Waits up to the configured `wait_timeout` for a permit of weight 1.
    ///
    /// # Errors
    ///
    /// As [`acquire_with`](Self::acquire_with).
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::acquire_with`].
    pub async fn acquire(&self) -> Result<PermitGuard, LockError> {
        self.acquire_many(1).await
    }

    /// Takes a permit of weight 1 as `options` say: as their owner, waiting
    /// up to their wait, for a lease of their TTL; what they leave unset
    /// comes from the config.
    ///
    /// # Errors
    ///
    /// As [`acquire_many_with`](Self::acquire_many_with).
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::acquire_with`]: a permit granted to a dropped
    /// future is released in the background.
    pub async fn acquire_with(&self, options: &AcquireOptions) -> Result<PermitGuard, LockError> {
        self.acquire_many_with(1, options).await
    }

    /// Tries once for one permit of weight `n` (it counts for `n` of the
    /// limit, as tokio's `Semaphore::try_acquire_many`): `Ok(None)` when it
    /// does not fit beside the live permits.
    ///
    /// # Errors
    ///
    /// As [`acquire_many_with`](Self::acquire_many_with).
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::try_acquire`].
    pub async fn try_acquire_many(&self, n: u32) -> Result<Option<PermitGuard>, LockError> {
        validate_weight(n, self.limit)?;
        let settings = self.manager.settings();
        let guard = self
            .manager
            .try_once(None, self.name(), settings.ttl, self.claim(n))
            .await?;
        Ok(guard.map(PermitGuard::new))
    }

    /// Waits up to the configured `wait_timeout` for one permit of weight
    /// `n`.
    ///
    /// # Errors
    ///
    /// As [`acquire_many_with`](Self::acquire_many_with).
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::acquire_with`].
    pub async fn acquire_many(&self, n: u32) -> Result<PermitGuard, LockError> {
        self.acquire_many_with(n, &AcquireOptions::new()).await
    }

    /// Takes one permit of weight `n` as `options` say: as their owner,
    /// waiting up to their wait, for a lease of their TTL; what they leave
    /// unset comes from the config. The permit is one hold, with one slot
    /// and one token, renewed and released whole.
    ///
    /// # Errors
    ///
    /// [`LockError::NotAcquired`] when the weight did not fit for the whole
    /// wait; [`LockError::InvalidPermits`] for a weight of 0 or above the
    /// limit; [`LockError::CountMismatch`] when the semaphore is stored with
    /// another limit; [`LockError::Corrupted`] when one of its keys holds
    /// foreign data; otherwise as [`LockManager::acquire_with`]. A name
    /// another kind holds (a lock, a read-write lock) is held: the wait
    /// goes on.
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::acquire_with`]: a permit granted to a dropped
    /// future is released in the background.
    pub async fn acquire_many_with(
        &self,
        n: u32,
        options: &AcquireOptions,
    ) -> Result<PermitGuard, LockError> {
        validate_weight(n, self.limit)?;
        let guard = self
            .manager
            .acquire_claim(self.name(), options, self.claim(n))
            .await?;
        Ok(PermitGuard::new(guard))
    }

    /// Reads the semaphore: its stored limit, the weight in use and the live
    /// permits (by slot, with their leases and tokens, never their ids).
    pub async fn state(&self) -> Result<SemaphoreState, LockError> {
        self.manager.semaphores()?.semaphore_state(&self.key).await
    }

    /// Stores `limit` as the semaphore's limit for every process, and asks
    /// for it from now on; returns the limit it had (`None` if none was
    /// stored). Live permits keep their weight and slots: after a lower
    /// limit, acquires wait until the live weight fits under it.
    ///
    /// Every process must then ask for the new limit: one that still asks
    /// for the old one gets [`LockError::CountMismatch`], and so do the
    /// waits in progress with the old one, which are woken to learn it at
    /// once rather than at their timers. Change the limit where every
    /// process reads it (their config) first, as with `consul lock -n`.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidPermits`] for a limit of 0 or above
    /// [`MAX_SEMAPHORE_LIMIT`], before anything is sent;
    /// [`LockError::Corrupted`] when the limit's key holds foreign data.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped after it was sent, the limit may have been
    /// stored while this handle still asks for the old one.
    pub async fn set_limit(&mut self, limit: u32) -> Result<Option<u32>, LockError> {
        validate_limit(limit)?;
        let previous = self
            .manager
            .semaphores()?
            .set_semaphore_limit(&self.key, limit)
            .await?;
        self.limit = limit;
        Ok(previous)
    }

    fn claim(&self, weight: u32) -> Claim {
        Claim::Permit(PermitRequest {
            limit: self.limit,
            weight,
            fair: None,
        })
    }
}

/// Refuses a limit of 0 or above [`MAX_SEMAPHORE_LIMIT`].
fn validate_limit(limit: u32) -> Result<(), LockError> {
    if limit == 0 {
        return Err(LockError::InvalidPermits {
            reason: "a semaphore's limit must be at least 1".to_owned(),
        });
    }
    if limit > MAX_SEMAPHORE_LIMIT {
        return Err(LockError::InvalidPermits {
            reason: format!("a semaphore's limit is at most {MAX_SEMAPHORE_LIMIT}, not {limit}"),
        });
    }
    Ok(())
}

/// Refuses a weight of 0 or above `limit`: it could never fit.
fn validate_weight(weight: u32, limit: u32) -> Result<(), LockError> {
    if weight == 0 {
        return Err(LockError::InvalidPermits {
            reason: "a permit's weight must be at least 1".to_owned(),
        });
    }
    if weight > limit {
        return Err(LockError::InvalidPermits {
            reason: format!(
                "a permit of weight {weight} can never fit in a semaphore of {limit} permits"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_weights_out_of_range_are_refused() {
        assert!(validate_limit(0).is_err());
        assert!(validate_limit(MAX_SEMAPHORE_LIMIT + 1).is_err());
        assert!(validate_limit(1).is_ok());
        assert!(validate_limit(MAX_SEMAPHORE_LIMIT).is_ok());
        assert!(validate_weight(0, 3).is_err());
        assert!(validate_weight(4, 3).is_err());
        assert!(validate_weight(3, 3).is_ok());
    }
}
