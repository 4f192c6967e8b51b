//! What a holder has: the lease guard, a cloneable handle to watch the lease,
//! and the background release used when a guard or an acquire is abandoned.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::backend::{ExtendOutcome, LockBackend, ReleaseOutcome};
use crate::error::{LockError, LossReason};
use crate::key::{FencingToken, LockKey, OwnerToken};
use crate::timing::{lease_deadline, validate_ttl};

/// Where a lease stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseStatus {
    /// Held, and known valid until `valid_until` unless renewed further.
    Held {
        /// The monotonic instant until which the lease is known valid.
        valid_until: Instant,
    },
    /// Lost before the holder released it.
    Lost {
        /// How it was lost.
        reason: LossReason,
        /// The last instant the lease was known valid.
        valid_until: Instant,
    },
    /// Released by the holder (explicitly, or by dropping the guard).
    Released,
}

/// The state shared by a guard, its handles and its watchdog.
#[derive(Debug)]
pub(crate) struct LeaseShared {
    pub(crate) backend: Arc<dyn LockBackend>,
    pub(crate) key: LockKey,
    pub(crate) owner: OwnerToken,
    pub(crate) fencing_token: Option<FencingToken>,
    pub(crate) ttl: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) status: watch::Sender<LeaseStatus>,
}

impl LeaseShared {
    pub(crate) fn status(&self) -> LeaseStatus {
        *self.status.borrow()
    }

    /// Moves a held lease to a later deadline; never shortens it.
    pub(crate) fn renewed(&self, valid_until: Instant) {
        self.status.send_if_modified(|status| match status {
            LeaseStatus::Held {
                valid_until: current,
            } if *current < valid_until => {
                *current = valid_until;
                true
            }
            _ => false,
        });
    }

    /// Marks a held lease lost; returns whether this call did it.
    pub(crate) fn lose(&self, reason: LossReason) -> bool {
        let changed = self.status.send_if_modified(|status| match *status {
            LeaseStatus::Held { valid_until } => {
                *status = LeaseStatus::Lost {
                    reason,
                    valid_until,
                };
                true
            }
            _ => false,
        });
        if changed {
            tracing::warn!(
                key = self.key.name(),
                fencing_token = self.fencing_token.map(FencingToken::get),
                %reason,
                "lease lost"
            );
        }
        changed
    }

    /// Marks the lease released; returns the status it had before.
    fn mark_released(&self) -> LeaseStatus {
        self.status.send_replace(LeaseStatus::Released)
    }
}

/// A cheap, cloneable view of a lease: its key, fencing token, deadline and a
/// signal for its loss. Code running under a lock receives one from
/// [`crate::LockManager::with_lock`]; a guard hands them out with
/// [`LeaseGuard::handle`].
#[derive(Debug, Clone)]
pub struct LeaseHandle {
    shared: Arc<LeaseShared>,
}

impl LeaseHandle {
    /// The lock name.
    pub fn key(&self) -> &str {
        self.shared.key.name()
    }

    /// The fencing token of this hold, if the strategy issues tokens. Pass it to
    /// every resource you write under the lock.
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.shared.fencing_token
    }

    /// The owner identity this lease was taken with. Pass it to nested code
    /// that must re-enter a reentrant lock ([`crate::LockManager::acquire_as`]).
    /// It is the secret that can release the lock: keep it out of logs.
    pub fn owner(&self) -> &OwnerToken {
        &self.shared.owner
    }

    /// Where the lease stands now.
    pub fn status(&self) -> LeaseStatus {
        self.shared.status()
    }

    /// The monotonic instant until which the lease is known valid. After a loss,
    /// the last such instant; after release, `None`.
    pub fn valid_until(&self) -> Option<Instant> {
        match self.status() {
            LeaseStatus::Held { valid_until } | LeaseStatus::Lost { valid_until, .. } => {
                Some(valid_until)
            }
            LeaseStatus::Released => None,
        }
    }

    /// Whether the lease is held and its deadline has not passed. Check it just
    /// before an irreversible step; better still, fence the step with the token.
    pub fn is_valid(&self) -> bool {
        matches!(self.status(), LeaseStatus::Held { valid_until } if Instant::now() < valid_until)
    }

    /// How long the lease is still known valid; zero once lost or released.
    pub fn remaining(&self) -> Duration {
        match self.status() {
            LeaseStatus::Held { valid_until } => {
                valid_until.saturating_duration_since(Instant::now())
            }
            _ => Duration::ZERO,
        }
    }

    /// Completes when the lease ends: `Some(reason)` if it was lost, `None` if it
    /// was released. Select on it next to long work to stop when the lock is gone.
    pub async fn lost(&self) -> Option<LossReason> {
        let mut status = self.shared.status.subscribe();
        let outcome = match status
            .wait_for(|status| !matches!(status, LeaseStatus::Held { .. }))
            .await
        {
            Ok(status) => *status,
            // The sender lives in `shared`, which this handle keeps alive.
            Err(_) => LeaseStatus::Released,
        };
        match outcome {
            LeaseStatus::Lost { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

/// A held lock. Release it with [`LeaseGuard::release`] to learn the outcome;
/// dropping it releases in a background task instead (never blocking).
///
/// While the guard lives, the watchdog (if enabled) renews the lease every
/// renewal interval, and [`LeaseGuard::lost`] completes if renewal finds the key
/// gone or taken or the deadline passes unrenewed.
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock at once"]
pub struct LeaseGuard {
    handle: LeaseHandle,
    keeper: Option<JoinHandle<()>>,
}

impl LeaseGuard {
    pub(crate) fn new(shared: Arc<LeaseShared>, keeper: Option<JoinHandle<()>>) -> Self {
        LeaseGuard {
            handle: LeaseHandle { shared },
            keeper,
        }
    }

    /// A cloneable view of this lease.
    pub fn handle(&self) -> LeaseHandle {
        self.handle.clone()
    }

    /// The lock name.
    pub fn key(&self) -> &str {
        self.handle.key()
    }

    /// The fencing token of this hold, if the strategy issues tokens.
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.handle.fencing_token()
    }

    /// See [`LeaseHandle::owner`].
    pub fn owner(&self) -> &OwnerToken {
        self.handle.owner()
    }

    /// Where the lease stands now.
    pub fn status(&self) -> LeaseStatus {
        self.handle.status()
    }

    /// See [`LeaseHandle::valid_until`].
    pub fn valid_until(&self) -> Option<Instant> {
        self.handle.valid_until()
    }

    /// See [`LeaseHandle::is_valid`].
    pub fn is_valid(&self) -> bool {
        self.handle.is_valid()
    }

    /// See [`LeaseHandle::remaining`].
    pub fn remaining(&self) -> Duration {
        self.handle.remaining()
    }

    /// See [`LeaseHandle::lost`].
    pub async fn lost(&self) -> Option<LossReason> {
        self.handle.lost().await
    }

    /// Renews the lease to run `ttl` from now (the watchdog keeps using the
    /// configured TTL).
    ///
    /// Errors: [`LockError::InvalidTtl`]; [`LockError::LeaseLost`] if the lease was
    /// already lost or the key is gone or taken (the lease is then marked lost);
    /// connection errors, after which the lease stands as it was.
    pub async fn extend(&self, ttl: Duration) -> Result<(), LockError> {
        validate_ttl(ttl)?;
        let shared = &self.handle.shared;
        match shared.status() {
            LeaseStatus::Held { .. } => {}
            LeaseStatus::Lost { reason, .. } => return Err(lease_lost(&shared.key, reason)),
            LeaseStatus::Released => {
                return Err(LockError::NotOwner {
                    key: shared.key.name().to_owned(),
                })
            }
        }
        let sent_at = Instant::now();
        let outcome = match shared.backend.extend(&shared.key, &shared.owner, ttl).await {
            // Foreign data in the key means the lease is as gone as if deleted.
            Err(LockError::Corrupted { .. }) => ExtendOutcome::NotHeld,
            other => other?,
        };
        match outcome {
            ExtendOutcome::Extended => {
                if let Some(valid_until) = lease_deadline(sent_at, ttl, shared.drift_factor) {
                    shared.renewed(valid_until);
                }
                tracing::debug!(
                    key = shared.key.name(),
                    ttl_ms = ttl.as_millis() as u64,
                    "lease extended"
                );
                Ok(())
            }
            ExtendOutcome::NotHeld => {
                shared.lose(LossReason::NotHeld);
                Err(lease_lost(&shared.key, LossReason::NotHeld))
            }
        }
    }

    /// Gives the lock back and says how the lease ended.
    ///
    /// `Ok(())` means the lease was valid until this release removed it. An
    /// [`LockError::LeaseLost`] means it ended earlier (lost, expired, or the key
    /// was gone or taken when the release arrived): whatever ran under it may
    /// have overlapped with another holder. Connection errors leave the key to
    /// expire by its TTL.
    pub async fn release(mut self) -> Result<(), LockError> {
        self.stop_keeper();
        let shared = Arc::clone(&self.handle.shared);
        let before = shared.mark_released();
        let started = Instant::now();
        let outcome = shared.backend.release(&shared.key, &shared.owner).await;
        tracing::debug!(
            key = shared.key.name(),
            fencing_token = shared.fencing_token.map(FencingToken::get),
            elapsed_us = started.elapsed().as_micros() as u64,
            outcome = ?outcome,
            "lease released"
        );
        // An earlier end of the lease is the news, whatever the release found.
        match before {
            LeaseStatus::Lost { reason, .. } => return Err(lease_lost(&shared.key, reason)),
            LeaseStatus::Held { valid_until } if Instant::now() >= valid_until => {
                return Err(lease_lost(&shared.key, LossReason::Expired));
            }
            _ => {}
        }
        match outcome {
            Ok(ReleaseOutcome::Released) => Ok(()),
            Ok(ReleaseOutcome::NotHeld) | Err(LockError::Corrupted { .. }) => {
                Err(lease_lost(&shared.key, LossReason::NotHeld))
            }
            Err(err) => Err(err),
        }
    }

    fn stop_keeper(&mut self) {
        if let Some(keeper) = self.keeper.take() {
            keeper.abort();
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.stop_keeper();
        let shared = &self.handle.shared;
        if matches!(shared.mark_released(), LeaseStatus::Released) {
            return;
        }
        spawn_release(
            Arc::clone(&shared.backend),
            shared.key.clone(),
            shared.owner.clone(),
        );
    }
}

pub(crate) fn lease_lost(key: &LockKey, reason: LossReason) -> LockError {
    LockError::LeaseLost {
        key: key.name().to_owned(),
        reason,
    }
}

/// Releases `owner`'s hold on `key` in a background task, for guards that were
/// dropped and acquires whose reply never arrived. Without a Tokio runtime
/// (dropped during shutdown) nothing is sent and the TTL frees the key.
pub(crate) fn spawn_release(backend: Arc<dyn LockBackend>, key: LockKey, owner: OwnerToken) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::debug!(
            key = key.name(),
            "no runtime to release on; the key will expire by its TTL"
        );
        return;
    };
    runtime.spawn(async move {
        match backend.release(&key, &owner).await {
            Ok(outcome) => tracing::debug!(key = key.name(), ?outcome, "released in the background"),
            Err(err) => tracing::warn!(key = key.name(), error = %err, "background release failed; the key will expire by its TTL"),
        }
    });
}
