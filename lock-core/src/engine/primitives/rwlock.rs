//! Read-write locks: shared holds beside each other, an exclusive hold
//! beside none, each with a lease of its own, held through the same guards,
//! watchdog and waits as a lock.

use std::time::Duration;

use crate::engine::backend::AccessRequest;
use crate::engine::backend::Claim;
use crate::engine::lease::guard::LockGuard;
use crate::engine::lease::roles::{ReadGuard, WriteGuard};
use crate::engine::manager::{LockManager, FAIR_WAITER_LEASE};
use crate::engine::options::AcquireOptions;
use crate::engine::state::RwLockState;
use crate::error::{Capability, LockError, LossReason};
use crate::hold::Access;
use crate::key::LockKey;

/// A named read-write lock, from [`LockManager::rw_lock`]: any number of
/// shared (read) holds at once, or the exclusive (write) hold of one
/// owner, across every process that uses the name.
///
/// Each acquire takes **one hold** with its own lease: a [`ReadGuard`] or a
/// [`WriteGuard`], a lock's lease in its role, renewed by the watchdog,
/// released by
/// `release().await` or in the background on drop, its loss reported by
/// `lost()`. A reader that crashes frees its share when its own lease runs
/// out, however many other readers renew theirs: every hold has its own
/// deadline by the server's clock, every script first drops the holds
/// whose deadline has passed, and a renewal never revives one.
///
/// **Writers first**: a waiting writer keeps new readers out, so a stream
/// of readers cannot starve it, and waiting writers are granted in arrival
/// order. A writer's place lasts [`FAIR_WAITER_LEASE`] unless it tries
/// again (waiting writers do, four times within it): a writer that was
/// cancelled or died holds readers back for at most that. A one-shot
/// [`try_write`](Self::try_write) never queues. Prefer readers instead
/// with [`preferring_readers`](Self::preferring_readers) (a reader then
/// starts whenever no writer holds the lock).
///
/// **Re-entry** is by owner ([`AcquireOptions::with_owner`]): an owner
/// that holds the lock may take more shared holds whatever waits, and one
/// that holds the write may take the write again (with the same token) or
/// shared holds: a **downgrade** ([`downgrade`](Self::downgrade)) is a read
/// taken while writing, then the write released. An **upgrade** (a write asked for by an owner that has
/// only reads) is refused with [`LockError::UpgradeRefused`]: it would
/// wait for its own reads, and two such owners for each other. Nested code
/// that reads again while holding a read must pass the holder's owner
/// ([`LockGuard::owner`]): without it, the nested read is a stranger's and
/// waits behind any waiting writer, which waits for the outer read.
///
/// Wake-ups: a release that may let someone in (a write's, the last
/// read's, a waiting writer giving up) is published, and every waiter of
/// the name in this process tries again; a waiter also tries again when
/// the first hold in its way ends by its lease, as the server said. The
/// release that leaves no hold live grants the write, on the server, to
/// the first waiting writer in line (not to writers that prefer readers,
/// nor where the config sets `holder_info`, `fencing_counter_ttl` or
/// `replicas`): that writer learns
/// it from the message, with no acquire of its own, and extends the grant
/// (made for [`FAIR_WAITER_LEASE`]) to its TTL at once; a writer that died
/// in line blocks the lock for that long at most.
///
/// # Fencing
///
/// A write's token and a read's epoch come from one counter. A write
/// ([`WriteGuard::fencing_token`]) gets the counter's next token, issued as
/// a lock's grant issues it (with `fencing_counter_ttl`, from the server's
/// clock), so write tokens only grow; a read ([`ReadGuard::epoch`]) gets
/// the **write epoch**, the last write token (0 before the first write). A
/// resource that keeps the highest token it has seen accepts a write whose
/// token is at least that, and knows a reader's data is current exactly
/// when its epoch equals it: a reader that paused past its lease while a
/// writer came and went sees a newer epoch and knows its view is stale.
///
/// # Examples
///
#[cfg_attr(not(doctest), doc = include_str!("../../doc/rw_lock.md"))]
#[derive(Debug, Clone)]
pub struct RwLock {
    manager: LockManager,
    key: LockKey,
    prefer_readers: bool,
}

impl LockManager {
    /// The read-write lock `name`, through this manager's backend, config
    /// and watchdog. Nothing is sent until an acquire. The config's `fair`
    /// does not apply: writers are always granted in arrival order, readers
    /// never queue.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidKey`] for a bad name;
    /// [`LockError::Unsupported`] on a strategy without read-write locks
    /// (reentrant, Redlock), before anything is sent.
    pub fn rw_lock(&self, name: &str) -> Result<RwLock, LockError> {
        self.require(Capability::RwLocks)?;
        Ok(RwLock {
            key: self.key(name)?,
            manager: self.clone(),
            prefer_readers: false,
        })
    }

    /// Reads the read-write lock `name`: for operators (`distlock status`).
    /// A name never used as one (or whose keys are gone) reads with no
    /// holds; a plain lock's name is held by another kind
    /// ([`LockError::Corrupted`] here), and a strategy without read-write
    /// locks is [`LockError::Unsupported`].
    pub async fn rw_lock_state(&self, name: &str) -> Result<RwLockState, LockError> {
        self.require(Capability::RwLocks)?;
        let key = self.key(name)?;
        self.rw_locks()?.rw_lock_state(&key).await
    }
}

impl RwLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        self.key.name()
    }

    /// This handle, preferring readers: its reads start whenever no writer
    /// holds the lock, even while writers wait (who may then wait as long
    /// as reads overlap). A policy of each acquire, not of the lock: the
    /// processes that share a name should agree on it.
    pub fn preferring_readers(mut self) -> Self {
        self.prefer_readers = true;
        self
    }

    /// Tries once for a shared hold: `Ok(None)` when a writer holds the
    /// lock (or, preferring writers, waits for it).
    ///
    /// # Errors
    ///
    /// As [`read_with`](Self::read_with).
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::try_acquire`].
    pub async fn try_read(&self) -> Result<Option<ReadGuard>, LockError> {
        Ok(self.try_once(Access::Shared).await?.map(ReadGuard::new))
    }

    /// Waits up to the configured `wait_timeout` for a shared hold.
    ///
    /// # Errors
    ///
    /// As [`read_with`](Self::read_with).
    ///
    /// # Cancel safety
    ///
    /// As [`read_with`](Self::read_with).
    pub async fn read(&self) -> Result<ReadGuard, LockError> {
        self.read_with(&AcquireOptions::new()).await
    }

    /// Takes a shared hold as `options` say: as their owner, waiting up to
    /// their wait, for a lease of their TTL; what they leave unset comes
    /// from the config. Its [`epoch`](ReadGuard::epoch), also its fencing
    /// token, is the last write's token.
    ///
    /// # Errors
    ///
    /// [`LockError::NotAcquired`] when a writer held (or waited) for the
    /// whole wait; [`LockError::Corrupted`] when one of its keys holds
    /// foreign data; otherwise as [`LockManager::acquire_with`]. A name
    /// another kind holds (a lock, a semaphore) is held: the wait goes on.
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::acquire_with`]: a hold granted to a dropped
    /// future is released in the background.
    pub async fn read_with(&self, options: &AcquireOptions) -> Result<ReadGuard, LockError> {
        Ok(ReadGuard::new(
            self.acquire_with(Access::Shared, options).await?,
        ))
    }

    /// Tries once for the exclusive hold, without queueing: `Ok(None)` when
    /// another owner holds the lock or a writer waits before it.
    ///
    /// # Errors
    ///
    /// As [`write_with`](Self::write_with).
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::try_acquire`].
    pub async fn try_write(&self) -> Result<Option<WriteGuard>, LockError> {
        Ok(self.try_once(Access::Exclusive).await?.map(WriteGuard::new))
    }

    /// Waits up to the configured `wait_timeout` for the exclusive hold.
    ///
    /// # Errors
    ///
    /// As [`write_with`](Self::write_with).
    ///
    /// # Cancel safety
    ///
    /// As [`write_with`](Self::write_with).
    pub async fn write(&self) -> Result<WriteGuard, LockError> {
        self.write_with(&AcquireOptions::new()).await
    }

    /// Takes the exclusive hold as `options` say, waiting in the writers'
    /// queue; its [`fencing_token`](WriteGuard::fencing_token) is the
    /// lock's next write token (a re-entry's is its owner's write's).
    ///
    /// # Errors
    ///
    /// [`LockError::UpgradeRefused`] when the owner has only shared holds;
    /// otherwise as [`read_with`](Self::read_with).
    ///
    /// # Cancel safety
    ///
    /// As [`read_with`](Self::read_with); a dropped wait also leaves the
    /// writers' queue in the background.
    pub async fn write_with(&self, options: &AcquireOptions) -> Result<WriteGuard, LockError> {
        Ok(WriteGuard::new(
            self.acquire_with(Access::Exclusive, options).await?,
        ))
    }

    /// Turns `write` into a read of the same owner, without letting a writer
    /// in between (tokio's `RwLockWriteGuard::downgrade`, here on the handle,
    /// which knows the lock's manager): a read is taken
    /// beside the write as its owner, granted whatever waits, with the
    /// write's TTL; then the write is given back. Other readers may start
    /// from then on (once the owner has no other write: a re-entered write
    /// is downgraded one hold at a time); writers wait for the read, and for
    /// every other.
    ///
    /// The read's [`epoch`](ReadGuard::epoch) is the write's token: what it
    /// reads is what the write left. It is a new hold with a lease of its
    /// own, renewed by the watchdog; the write's guard is consumed.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidConfig`] (field `guard`) for a write of another
    /// lock; [`LockError::NotAcquired`] when the read was refused (the
    /// write's lease had ended and another writer holds the lock);
    /// [`LockError::LeaseLost`] when a read was granted but with a later
    /// epoch (the write's lease had ended, and another writer came and
    /// went: no read is kept); otherwise
    /// as [`try_read`](Self::try_read). After an error the write is given
    /// back in the background, as a dropped guard is. A write that cannot be given back once the read is
    /// held (a connection error) is not an error: the read holds the lock
    /// either way, and the write's lease ends with its TTL.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in what it leaves: dropped after the read is granted,
    /// the read and the write are both given back in the background, as
    /// dropped guards are; no hold outlives its TTL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(locks: lock_core::LockManager) -> Result<(), lock_core::LockError> {
    /// let config = locks.rw_lock("config")?;
    /// let write = config.write().await?;
    /// let token = write.fencing_token();
    /// // ... write the new configuration under `token` ...
    /// let read = config.downgrade(write).await?;
    /// assert_eq!(Some(read.epoch()), token);
    /// // ... readers may join while this one reads what it wrote ...
    /// read.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn downgrade(&self, write: WriteGuard) -> Result<ReadGuard, LockError> {
        let write = LockGuard::from(write);
        if write.lock_key() != &self.key {
            return Err(LockError::config(
                "guard",
                format!(
                    "the write of {:?} cannot be downgraded by the read-write lock {:?}",
                    write.key(),
                    self.name()
                ),
            ));
        }
        let owner = write.owner().clone();
        let read = self
            .manager
            .try_once(
                Some(&owner),
                self.name(),
                write.ttl(),
                self.claim(Access::Shared),
            )
            .await?;
        let Some(read) = read else {
            return Err(LockError::NotAcquired {
                key: self.name().to_owned(),
                waited: Duration::ZERO,
                attempts: 1,
            });
        };
        // The read's epoch is the last write's token: another one means the
        // write's lease ended and a writer came between. Such a read is no
        // downgrade: it is given back before the error (if that fails, in
        // the background, as a dropped guard is).
        if read.fencing_token() != write.fencing_token() {
            if let Err(err) = read.release().await {
                tracing::debug!(key = self.name(), %err, "a refused downgrade's read");
            }
            return Err(LockError::LeaseLost {
                key: self.name().to_owned(),
                reason: LossReason::NotHeld,
            });
        }
        if let Err(err) = write.release().await {
            tracing::debug!(
                key = self.name(),
                %err,
                "a downgraded write was not given back; it ends with its TTL"
            );
        }
        Ok(ReadGuard::new(read))
    }

    /// Reads the lock: its write epoch, how many writers wait, and the live
    /// holds (with their leases and tokens, never their ids).
    pub async fn state(&self) -> Result<RwLockState, LockError> {
        self.manager.rw_locks()?.rw_lock_state(&self.key).await
    }

    async fn try_once(&self, access: Access) -> Result<Option<LockGuard>, LockError> {
        let ttl = self.manager.settings().ttl;
        self.manager
            .try_once(None, self.name(), ttl, self.claim(access))
            .await
    }

    async fn acquire_with(
        &self,
        access: Access,
        options: &AcquireOptions,
    ) -> Result<LockGuard, LockError> {
        self.manager
            .acquire_claim(self.name(), options, self.claim(access))
            .await
    }

    fn claim(&self, access: Access) -> Claim {
        Claim::Access(
            AccessRequest::new(access, FAIR_WAITER_LEASE, false)
                .preferring_readers(self.prefer_readers),
        )
    }
}
