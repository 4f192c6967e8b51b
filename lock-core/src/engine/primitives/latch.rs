//! A count-down latch, after Redisson's `RCountDownLatch` and Java's
//! `CountDownLatch`: a count set once, counted down by the parties, and
//! waited on until it reaches zero.

use std::time::Duration;

use crate::engine::manager::LockManager;
use crate::engine::primitives::watch::NameWatch;
use crate::engine::state::LatchState;
use crate::error::{Capability, LockError};
use crate::key::{LockKey, MAX_OWNER_LEN};
use crate::ttl::validate_ttl;

/// How long a latch lives unless [`Latch::with_ttl`] says otherwise: long
/// enough for a day's jobs, short enough that a forgotten latch goes.
pub const DEFAULT_LATCH_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The largest count a latch may be set with.
pub const MAX_LATCH_COUNT: u32 = 999_999_999;

/// A count-down latch on a name, from [`LockManager::latch`]: one process
/// sets its count, the parties count it down, and waiters go on once it
/// reaches zero.
///
/// The count is set once for the latch's life: every process may call
/// [`set_count`](Self::set_count) with the same count (only the first
/// sets it), and another count is [`LockError::CountMismatch`]. A count
/// down with an id ([`count_down_as`](Self::count_down_as)) counts once
/// per id, so a count-down retried after a lost reply does not count
/// twice. The latch, and the ids that counted it down, live for its TTL
/// by the server's clock ([`DEFAULT_LATCH_TTL`] unless
/// [`with_ttl`](Self::with_ttl) says otherwise), counted down or not;
/// [`delete`](Self::delete) ends it sooner.
///
/// A latch holds its name as a lock does: a lock, semaphore or read-write
/// lock on the same name waits until the latch is deleted or expires.
///
/// # Where it differs from Redisson's
///
/// - [`wait`](Self::wait) on a latch that no one has set waits for it to be
///   set and counted down, where Redisson's `await` returns at once: a
///   waiter that starts before the coordinator does not go on early.
/// - An open latch stays, at zero, until its TTL ends, so a waiter that
///   comes late still finds it open; Redisson deletes it at zero. Set a
///   new latch on the name after [`delete`](Self::delete).
/// - Setting the same count again is accepted (`Ok(false)`), another count
///   is an error; Redisson's `trySetCount` answers `false` for both.
/// - Counting down a latch that is not set is [`LockError::LatchNotSet`],
///   where Redisson's `countDown` does nothing, and the count would be
///   lost.
///
/// # Examples
///
#[cfg_attr(not(doctest), doc = include_str!("../../doc/latch.md"))]
#[derive(Debug, Clone)]
pub struct Latch {
    manager: LockManager,
    key: LockKey,
    ttl: Duration,
}

impl LockManager {
    /// The count-down latch `name`, through this manager's backend and
    /// config, with a TTL of [`DEFAULT_LATCH_TTL`]. Nothing is sent until a
    /// call.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidKey`] for a bad name;
    /// [`LockError::Unsupported`] on a strategy without latches
    /// (reentrant, Redlock), before anything is sent.
    pub fn latch(&self, name: &str) -> Result<Latch, LockError> {
        self.require(Capability::Latches)?;
        Ok(Latch {
            key: self.key(name)?,
            manager: self.clone(),
            ttl: DEFAULT_LATCH_TTL,
        })
    }
}

impl Latch {
    /// The latch's name.
    pub fn name(&self) -> &str {
        self.key.name()
    }

    /// This latch with `ttl` as the life a [`set_count`](Self::set_count)
    /// gives it: the server deletes it, and the ids that counted it down,
    /// that long after it was set.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidTtl`] for a TTL below a millisecond, above
    /// [`MAX_TTL`](crate::MAX_TTL), or not a whole number of milliseconds.
    pub fn with_ttl(mut self, ttl: Duration) -> Result<Self, LockError> {
        validate_ttl(ttl)?;
        self.ttl = ttl;
        Ok(self)
    }

    /// Sets the count to `count`, unless the latch is set: `true` when this
    /// call set it, `false` when it was set with the same count already
    /// (counted down or not; nothing changes). A count of 0 opens it at
    /// once.
    ///
    /// # Errors
    ///
    /// [`LockError::CountMismatch`] when the latch is set with another
    /// count (nothing written); [`LockError::InvalidConfig`] on `count`
    /// above [`MAX_LATCH_COUNT`]; [`LockError::WrongKind`] when another
    /// primitive holds the name; [`LockError::ReplicasNotAcknowledged`]
    /// when `replicas` are asked for and too few acknowledged it (set again
    /// to be sure: the same count is accepted). A latch set already is
    /// written again as it is (so that a retry's acknowledgement covers
    /// the first call's write): a server that refuses writes (`OOM`,
    /// `NOREPLICAS`) refuses this too, as [`LockError::Server`].
    pub async fn set_count(&self, count: u32) -> Result<bool, LockError> {
        if count > MAX_LATCH_COUNT {
            return Err(LockError::config(
                "count",
                format!("a latch's count is at most {MAX_LATCH_COUNT}, not {count}"),
            ));
        }
        self.manager
            .latches()?
            .set_latch(&self.key, count, self.ttl)
            .await
    }

    /// Counts the latch down by one and answers what is left: at 0 it is
    /// open and its waiters go on. Nothing is counted once it is open.
    ///
    /// Not idempotent: a count-down whose reply was lost may or may not
    /// have counted. Retry with an id, [`count_down_as`](Self::count_down_as).
    ///
    /// # Errors
    ///
    /// [`LockError::LatchNotSet`] when no count is set (nothing written);
    /// otherwise as [`count_down_as`](Self::count_down_as).
    pub async fn count_down(&self) -> Result<u32, LockError> {
        self.manager
            .latches()?
            .count_down_latch(&self.key, None)
            .await
    }

    /// Counts the latch down by one for `id`, once: a count-down with an
    /// id that counted before (a retry after a lost reply, a restarted
    /// worker) counts nothing. Answers what is left.
    ///
    /// # Errors
    ///
    /// [`LockError::LatchNotSet`] when no count is set (nothing written);
    /// [`LockError::InvalidConfig`] on `id` for an empty id or one over
    /// [`MAX_OWNER_LEN`](crate::MAX_OWNER_LEN) bytes;
    /// [`LockError::WrongKind`] when another primitive holds the name;
    /// [`LockError::ReplicasNotAcknowledged`] when `replicas` are asked for
    /// and too few acknowledged it (count down again with the same id).
    pub async fn count_down_as(&self, id: &str) -> Result<u32, LockError> {
        if id.is_empty() || id.len() > MAX_OWNER_LEN {
            return Err(LockError::config(
                "id",
                format!(
                    "a count-down's id is 1 to {MAX_OWNER_LEN} bytes, not {}",
                    id.len()
                ),
            ));
        }
        self.manager
            .latches()?
            .count_down_latch(&self.key, Some(id))
            .await
    }

    /// What is left to count down; `None` when no count is set.
    pub async fn count(&self) -> Result<Option<u32>, LockError> {
        Ok(self.state().await?.map(|state| state.count))
    }

    /// The latch's count, initial count and remaining TTL; `None` when no
    /// count is set.
    pub async fn state(&self) -> Result<Option<LatchState>, LockError> {
        self.manager.latches()?.latch_state(&self.key).await
    }

    /// Waits until the latch is open: set and counted down to 0. A latch
    /// that is not set yet is waited for too, and so is one whose name
    /// another primitive holds (it may be set there once it is free). Woken by the latch's message
    /// when it opens, and reads at least once a second should a message be
    /// lost (or without a subscription: `wait_mode = "poll"`, a user whose
    /// ACL grants no channels).
    ///
    /// Without a time limit: bound it with `tokio::time::timeout`.
    ///
    /// # Errors
    ///
    /// Those of a read that are not retryable (retryable ones, a restarting
    /// server's, are retried): [`LockError::Corrupted`] for foreign data
    /// in the latch's keys.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn wait(&self) -> Result<(), LockError> {
        let mut watch = NameWatch::open(&self.manager, &self.key, "latch waiter").await;
        loop {
            watch.reading();
            match self.state().await {
                Ok(Some(state)) if state.is_open() => {
                    tracing::debug!(latch = self.name(), "the latch is open");
                    return Ok(());
                }
                Ok(state) => {
                    watch.read();
                    let left = state.map(|state| state.count);
                    tracing::debug!(latch = self.name(), left = ?left, "the latch is shut; waiting");
                }
                // Another kind holds the name: a latch deleted and the name
                // taken before this read. No latch is set, so wait for one.
                Err(err @ LockError::WrongKind { .. }) => {
                    watch.read();
                    tracing::debug!(latch = self.name(), error = %err, "no latch on the name; waiting");
                }
                Err(err) if err.is_retryable() => {
                    tracing::debug!(latch = self.name(), error = %err, "cannot read the latch yet");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Err(err) => return Err(err),
            }
            watch.sleep(Duration::MAX).await;
        }
    }

    /// Deletes the latch, whatever its count, and the ids that counted it
    /// down: `true` when there was one. Its waiters keep waiting, for a
    /// latch set on the name again; waiters of other kinds on the name (a
    /// lock, a semaphore) are woken, as by a release.
    ///
    /// # Errors
    ///
    /// [`LockError::WrongKind`] when another primitive holds the name
    /// (nothing deleted); [`LockError::ReplicasNotAcknowledged`] when
    /// `replicas` are asked for and too few acknowledged it.
    pub async fn delete(&self) -> Result<bool, LockError> {
        self.manager.latches()?.delete_latch(&self.key).await
    }
}
