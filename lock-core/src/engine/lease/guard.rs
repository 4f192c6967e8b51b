//! What a holder has: the lease guard, a cloneable handle to watch the lease,
//! and the background release used when a guard or an acquire is abandoned.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::backend::{ExtendOutcome, LockBackend, ReleaseOutcome};
use crate::engine::lease::drop_guard::DropGuard;
use crate::engine::lease::status::LeaseStatus;
use crate::engine::lease::{lease_lost, LeaseShared};
use crate::engine::telemetry::in_span;
use crate::error::{LockError, LossReason};
use crate::hold::{HandoffToken, HoldKind, HoldToken};
use crate::key::{FencingToken, LockKey, OwnerToken};
use crate::ttl::validate_ttl;

/// A cheap, cloneable view of a lease: its key, fencing token, deadline and a
/// signal for its loss. Code running under a lock receives one from
/// [`crate::LockManager::with_lock`]; a guard hands them out with
/// [`LockGuard::handle`].
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
        self.shared.fencing_token()
    }

    /// The owner identity this lease was taken with. Pass it to nested code
    /// that must re-enter a reentrant lock ([`AcquireOptions::with_owner`](crate::AcquireOptions::with_owner)).
    /// It is the secret that can release the lock: keep it out of logs.
    pub fn owner(&self) -> &OwnerToken {
        self.shared.hold.owner()
    }

    /// Where the lease stands now. It agrees with [`is_valid`](Self::is_valid)
    /// at every instant: once the deadline has passed, the lease is
    /// [`Lost`](LeaseStatus::Lost) with [`LossReason::Expired`] even before
    /// the watchdog has noticed (a lease that ran out after
    /// `watchdog.max_hold` is then reported `Expired`, not
    /// [`LossReason::MaxHoldReached`]), and stays lost. `Held` always means
    /// "still valid now".
    pub fn status(&self) -> LeaseStatus {
        // Marked lost here, as the watchdog would: an expired lease stays
        // lost (no extend brings it back), and `lost()` completes.
        self.shared.expire_if_due();
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
        matches!(self.status(), LeaseStatus::Held { .. })
    }

    /// How long the lease is still known valid; zero once lost or released.
    pub fn remaining(&self) -> Duration {
        self.shared.status_remaining()
    }

    /// Completes when the lease ends: `Some(reason)` if it was lost, `None` if it
    /// was released. Select on it next to long work to stop when the lock is gone.
    pub async fn lost(&self) -> Option<LossReason> {
        let outcome = self
            .shared
            .status
            .wait_for(|status| !matches!(status, LeaseStatus::Held { .. }))
            .await;
        match outcome {
            LeaseStatus::Lost { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

/// A held lock (or several names held as one, [`MultiLock`](crate::MultiLock)),
/// and the lease under every other guard: [`PermitGuard`](crate::PermitGuard),
/// [`ReadGuard`](crate::ReadGuard), [`WriteGuard`](crate::WriteGuard) and
/// [`Leadership`](crate::Leadership) are each one with what their role adds.
/// Release it with [`LockGuard::release`] to learn the outcome; dropping it
/// releases in a background task instead (never blocking).
///
/// While the guard lives, the watchdog (if enabled) renews the lease every
/// renewal interval, and [`LockGuard::lost`] completes if renewal finds the key
/// gone or taken or the deadline passes unrenewed.
///
/// # Fencing
///
/// [`fencing_token`](Self::fencing_token) is the hold's token, `None` where
/// the strategy issues none (see [`Lock`](crate::Lock)): a lock's, a
/// multi-key hold's one token, or under a role guard a permit's slot token,
/// a read's epoch, a write's token or a leader's term. Send it with every
/// write made under the hold.
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    handle: LeaseHandle,
    /// Set once [`LockGuard::release`] has stopped the watchdog and marked
    /// the lease released: dropping the guard then has nothing left to do.
    released: bool,
}

impl LockGuard {
    /// The guard of `shared`, whose watchdog is planned (or off).
    pub(crate) fn new(shared: Arc<LeaseShared>) -> Self {
        LockGuard {
            handle: LeaseHandle { shared },
            released: false,
        }
    }

    /// The strategy this guard's lease was granted by, for errors.
    pub(crate) fn strategy(&self) -> &'static str {
        self.handle.shared.backend.strategy()
    }

    /// The hold this guard's lease is, for the guards built on this one (an
    /// election proclaims with it; a permit reads its slot).
    pub(crate) fn hold(&self) -> &HoldToken {
        &self.handle.shared.hold
    }

    /// The key this guard's lease is on, prefix and all.
    pub(crate) fn lock_key(&self) -> &LockKey {
        &self.handle.shared.key
    }

    /// The TTL this guard's lease was last asked for.
    pub(crate) fn ttl(&self) -> Duration {
        self.handle.shared.ttl()
    }

    /// Marks the lease lost because the server said its hold no longer has
    /// the lock (a primitive's own script found it so): `lost()` completes
    /// and the watchdog stops, as after a renewal that found it gone.
    pub(crate) fn lose_hold(&self) -> LockError {
        let shared = &self.handle.shared;
        shared.lose(LossReason::NotHeld);
        lease_lost(&shared.key, LossReason::NotHeld)
    }

    /// Runs `work` under this lease, then releases it: what
    /// [`LockManager::with_lock`](crate::LockManager::with_lock) does after
    /// its acquire, for a guard taken with other options.
    ///
    /// `work` receives a [`LeaseHandle`] to read the fencing token and to
    /// notice a loss while it runs. Returns `work`'s output only if the lease
    /// held until the release.
    ///
    /// # Errors
    ///
    /// [`LockError::LeaseLost`] if the lease was lost at any point, after
    /// `work` finished, because its effects may have overlapped with another
    /// holder's. A failed release after a lease that held throughout still
    /// returns the output: the key expires by its TTL.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the guard, whose hold is released in the
    /// background.
    pub async fn run<F, Fut, T>(self, work: F) -> Result<T, LockError>
    where
        F: FnOnce(LeaseHandle) -> Fut,
        Fut: Future<Output = T>,
    {
        let output = work(self.handle()).await;
        let key = self.key().to_owned();
        match self.release().await {
            Ok(()) => Ok(output),
            Err(err @ LockError::LeaseLost { .. }) => Err(err),
            Err(err) => {
                tracing::warn!(key, error = %err, "release failed after the work finished; a retryable failure is sent again in the background where it names one attempt's hold, else the key expires by its TTL");
                Ok(output)
            }
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

    /// Renews the lease to run `ttl` from now, shorter or longer than before;
    /// the watchdog renews with `ttl` from then on.
    ///
    /// The guard's deadline becomes what this command set (from when it was
    /// sent, minus drift), so `extend` with a short TTL shortens it. The
    /// reentrant strategy never shortens a hold that re-entries share: there
    /// the key, and the deadline, keep the longer TTL.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidTtl`]; [`LockError::LeaseLost`] if the lease was
    /// already lost or the key is gone or taken (the lease is then marked lost);
    /// connection errors, after which the deadline is the earlier of the old
    /// one and the one this extend would have set (it may have run), and no
    /// later renewal of this lease is trusted for longer than `ttl`: the
    /// extend may still reach the server after them and set it then.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped after it was sent, the deadline is the earlier of
    /// the old one and the one this extend would have set, and later
    /// renewals are trusted for `ttl` at most, as after a connection error.
    pub async fn extend(&self, ttl: Duration) -> Result<(), LockError> {
        validate_ttl(ttl)?;
        let shared = &self.handle.shared;
        shared.ensure_held()?;
        shared.ask_for(ttl);
        // The new deadline may come before the watchdog's planned start.
        shared.lock_watchdog().start_now(shared);
        let outcome = match shared.extend_hold(Some(ttl), None).await {
            // Foreign data in the key means the lease is as gone as if deleted.
            Err(LockError::Corrupted { .. }) => ExtendOutcome::NotHeld,
            other => other?,
        };
        match outcome {
            ExtendOutcome::Extended { ttl: ttl_set } => {
                tracing::debug!(
                    key = shared.key.name(),
                    ttl_ms = ttl_set.as_millis() as u64,
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

    /// Gives the lock back and says how the lease ended: `Ok(())` means the
    /// lease was valid until this release removed it.
    ///
    /// A lease found gone sends nothing; one past its deadline still sends
    /// its release, which names this hold alone, so a renewal that ran
    /// unanswered does not keep the key.
    ///
    /// # Errors
    ///
    /// [`LockError::LeaseLost`] when the lease ended earlier (lost, expired,
    /// or the key was gone or taken when the release arrived): whatever ran
    /// under it may have overlapped with another holder.
    ///
    /// A release that names one attempt's grant (single node, Redlock) and
    /// fails with a retryable error goes on. After a connection error a
    /// single-node release is sent again at once (a cluster client may refuse
    /// the first command to a slot that moved), and `Ok(())` if that one
    /// removes the key; else the error is returned (also when the second send
    /// finds the key gone, since the first may have run unanswered). After
    /// any other retryable error, or a second one, the error is returned and
    /// the release is sent again in the background; else the key expires by
    /// its TTL.
    ///
    /// # Cancel safety
    ///
    /// If this future is dropped before the release was answered, it is sent
    /// again in the background where a release names one attempt's grant. A
    /// reentrant release, which takes one off a count the hold's guards
    /// share, is never repeated (it may have run): the key then expires by
    /// its TTL.
    pub async fn release(mut self) -> Result<(), LockError> {
        let shared = &self.handle.shared;
        shared.stop_watchdog();
        let (_, ended) = shared.mark_released();
        // Nothing above awaits, so no drop of this future comes between.
        self.released = true;
        if ended == Some(LossReason::NotHeld) {
            return Err(lease_lost(&shared.key, LossReason::NotHeld));
        }
        // Dropped before the reply: the release may not have run, so it is
        // sent again in the background where that cannot end another hold.
        let in_flight = DropGuard::new(|| {
            if shared.backend.capabilities().releases_only_its_attempt {
                release_in_background(shared);
            }
        });
        let started = Instant::now();
        let span = release_span(
            &shared.key,
            shared.backend.strategy(),
            shared.fencing_token(),
        );
        let mut outcome = in_span(shared.backend.release(&shared.key, &shared.hold), &span).await;
        if let Err(first) = &outcome {
            if first.is_retryable() && shared.backend.capabilities().releases_only_its_attempt {
                outcome = release_again(shared, first.clone(), &span).await;
            }
        }
        in_flight.disarm();
        release_ended(&span, &outcome, started);
        // An earlier end of the lease is the news, whatever the release found.
        if let Some(reason) = ended {
            return Err(lease_lost(&shared.key, reason));
        }
        tracing::debug!(
            key = shared.key.name(),
            fencing_token = shared.fencing_token().map(FencingToken::get),
            elapsed_us = started.elapsed().as_micros() as u64,
            outcome = ?outcome,
            "lease released"
        );
        match outcome {
            Ok(ReleaseOutcome::Released) => Ok(()),
            Ok(ReleaseOutcome::NotHeld) | Err(LockError::Corrupted { .. }) => {
                Err(lease_lost(&shared.key, LossReason::NotHeld))
            }
            Err(err) => Err(err),
        }
    }

    /// Stops renewing the lease without releasing it, and returns what
    /// another process needs to act on it: take it over with
    /// [`LockManager::resume`](crate::LockManager::resume) (single-node
    /// strategy), or extend and release it by token
    /// ([`LockManager::extend_by_token`](crate::LockManager::extend_by_token),
    /// `distlock extend`, `distlock release`). The lease stays held until its
    /// TTL runs out unless someone renews it. Handles of this lease see it as
    /// released. A semaphore's permit is handed off with its weight, slot and
    /// token.
    ///
    /// Until it is resumed, the hold is still its owner's: a read-write
    /// lock's owner that acquires again re-enters beside it, so an owner
    /// passed with [`AcquireOptions::with_owner`](crate::AcquireOptions::with_owner)
    /// should not acquire the lock again while its handed-off hold lives
    /// and is renewed by token. A resume gives the hold an owner of its own,
    /// and refuses a read-write hold with another hold of its owner beside
    /// it ([`LockError::HandOffRefused`]).
    ///
    /// # Errors
    ///
    /// [`LockError::LeaseLost`] if the lease had already ended (its
    /// hold-scoped release is sent in the background, as on drop, unless the
    /// key was found gone or taken); [`LockError::HandOffUnsupported`] for
    /// the reentrant strategy, whose holds an owner's guards share (hand over
    /// the owner instead, and re-enter with it), and for a multi-key hold (a
    /// token names one key): the guard is then released, as if dropped.
    pub fn hand_off(self) -> Result<HandoffToken, LockError> {
        let shared = Arc::clone(&self.handle.shared);
        if !shared.backend.capabilities().releases_only_its_attempt {
            return Err(LockError::HandOffUnsupported {
                strategy: shared.backend.strategy(),
                operation: "hand off",
            });
        }
        // A token names one key; a multi-key hold's members would be lost.
        let Some(token) = HandoffToken::new(shared.hold.clone(), shared.ttl()) else {
            return Err(LockError::HandOffUnsupported {
                strategy: shared.backend.strategy(),
                operation: match shared.hold.kind() {
                    HoldKind::Party => "hand off a barrier's party",
                    _ => "hand off a multi-key hold",
                },
            });
        };
        shared.stop_watchdog();
        // Marked released, so dropping `self` sends no release.
        match shared.mark_released() {
            (_, Some(LossReason::NotHeld)) => {
                return Err(lease_lost(&shared.key, LossReason::NotHeld))
            }
            (_, Some(reason)) => {
                // A renewal may have run unanswered: free what this hold may
                // still have, as a dropped guard would.
                release_in_background(&shared);
                return Err(lease_lost(&shared.key, reason));
            }
            (_, None) => {}
        }
        tracing::debug!(
            key = shared.key.name(),
            fencing_token = shared.fencing_token().map(FencingToken::get),
            "lease handed off"
        );
        Ok(token)
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let shared = &self.handle.shared;
        shared.stop_watchdog();
        match shared.mark_released() {
            (LeaseStatus::Released, _) => return,
            // The key is gone or someone else's: nothing of ours to release.
            (_, Some(LossReason::NotHeld)) => return,
            // Held, or past its deadline (a renewal may have run unanswered):
            // the release names this hold alone.
            _ => {}
        }
        release_in_background(shared);
    }
}

/// Follows a release that failed with `first`, a retryable error: one that
/// names one attempt's hold may run twice. A connection error is sent
/// again at once (fred refuses the first command to a slot that moved,
/// counting the redirect as a second write, with its map already
/// refreshed); a timeout (a slow server: another at once would add load
/// and a second timeout's wait) and a refusal by the server (`READONLY`,
/// `BUSY`, a Redlock quorum short) go to the background release and its
/// back-off. Found released, the lease was held until then. Found gone, the
/// first send may have run unanswered, or the key may have been lost before
/// it: which one cannot be told, so `first` is the answer, never a release
/// nor a loss.
async fn release_again(
    shared: &Arc<LeaseShared>,
    first: LockError,
    span: &tracing::Span,
) -> Result<ReleaseOutcome, LockError> {
    if !matches!(first, LockError::Connection { .. }) {
        release_in_background(shared);
        return Err(first);
    }
    match in_span(shared.backend.release(&shared.key, &shared.hold), span).await {
        Ok(ReleaseOutcome::NotHeld) => Err(first),
        Err(err) if err.is_retryable() => {
            release_in_background(shared);
            Err(err)
        }
        other => other,
    }
}

/// Releases `shared`'s hold in the background ([`spawn_release`]).
fn release_in_background(shared: &LeaseShared) {
    spawn_release(
        Arc::clone(&shared.backend),
        shared.key.clone(),
        shared.hold.clone(),
    );
}

/// How many times a background release is sent, at most, while it fails
/// with a retryable error (a connection, a timeout, a demoted master): 20,
/// 60, 180 and 540 ms apart, under a second of waiting in all.
const BACKGROUND_RELEASE_TRIES: u32 = 5;

/// Releases `hold` on `key` in a background task, for guards that were
/// dropped, releases that failed with a retryable error, and acquires
/// whose reply never arrived, counted for
/// [`settle_background_releases`](crate::settle_background_releases).
/// Without a Tokio runtime (dropped during shutdown) nothing is sent and
/// the TTL frees the key.
pub(crate) fn spawn_release(backend: Arc<dyn LockBackend>, key: LockKey, hold: HoldToken) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::debug!(
            key = key.name(),
            "no runtime to release on; the key will expire by its TTL"
        );
        return;
    };
    let span = release_span(&key, backend.strategy(), hold.fencing_token());
    crate::engine::lease::background::spawn(&runtime, async move {
        let started = Instant::now();
        // A release that names one attempt's hold may run twice (the
        // second finds nothing), so one that failed on a connection still
        // coming back (the fault that lost an acquire's reply, say) is
        // tried again a few times. A reentrant release is not: it takes
        // one off a count, and may have run.
        let again = backend.capabilities().releases_only_its_attempt;
        let mut delay = Duration::from_millis(20);
        let mut tries = 1;
        let outcome = loop {
            let outcome = in_span(backend.release(&key, &hold), &span).await;
            match &outcome {
                Err(err) if again && err.is_retryable() && tries < BACKGROUND_RELEASE_TRIES => {
                    tries += 1;
                    tokio::time::sleep(delay).await;
                    delay = delay.saturating_mul(3);
                }
                _ => break outcome,
            }
        };
        release_ended(&span, &outcome, started);
        match outcome {
            Ok(outcome) => {
                tracing::debug!(key = key.name(), ?outcome, "released in the background")
            }
            Err(err) => {
                tracing::warn!(key = key.name(), error = %err, "background release failed; the key will expire by its TTL")
            }
        }
    });
}

/// The span of one release (by a guard, or in the background); its outcome
/// and time are recorded when it ends. Never the owner token.
fn release_span(
    key: &LockKey,
    strategy: &'static str,
    token: Option<FencingToken>,
) -> tracing::Span {
    tracing::info_span!(
        "release",
        key = key.name(),
        strategy,
        fencing_token = token.map(FencingToken::get),
        outcome = tracing::field::Empty,
        elapsed_us = tracing::field::Empty,
    )
}

fn release_ended(
    span: &tracing::Span,
    outcome: &Result<ReleaseOutcome, LockError>,
    started: Instant,
) {
    // Without a subscriber, not even the clock is read.
    if span.is_disabled() {
        return;
    }
    span.record(
        "outcome",
        match outcome {
            Ok(ReleaseOutcome::Released) => "released",
            Ok(ReleaseOutcome::NotHeld) => "not_held",
            Err(_) => "error",
        },
    );
    span.record(
        "elapsed_us",
        u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
    );
}
