//! What a holder has: the lease guard, a cloneable handle to watch the lease,
//! and the background release used when a guard or an acquire is abandoned.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::backend::{ExtendOutcome, LockBackend, ReleaseOutcome};
use crate::error::{LockError, LossReason};
use crate::keepers::Keeper;
use crate::key::{FencingToken, HandoffToken, HoldToken, LockKey, OwnerToken};
use crate::renewal::RenewalDriver;
use crate::status::StatusCell;
use crate::telemetry::{self, in_span, Labels};
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
    /// The hold this lease was granted for; every extend and release names it.
    pub(crate) hold: HoldToken,
    pub(crate) drift_factor: f64,
    /// When the command that granted (or resumed) the lease was sent:
    /// `watchdog.max_hold` counts from here.
    pub(crate) acquired_at: Instant,
    /// The labels of this lease's metrics.
    pub(crate) labels: Labels,
    pub(crate) status: StatusCell,
    timing: Mutex<Timing>,
    /// One extend at a time per lease (watchdog or caller): with a single
    /// command in flight, the last one sent is the last one the server ran,
    /// even when a `NOSCRIPT` reload sends a command again.
    extending: tokio::sync::Mutex<()>,
    /// The watchdog: planned until its first renewal falls due, then a task.
    keeper: Mutex<Keeper>,
}

/// Which command set the lease's deadline, and the TTL to renew with.
#[derive(Debug, Clone, Copy)]
struct Timing {
    /// The TTL the holder last asked for (the configured one, until an
    /// `extend`): the watchdog renews with it.
    ttl: Duration,
    /// When the command whose reply set the current deadline was sent. A
    /// reply to a command sent earlier than that is stale: on one connection
    /// the server ran that command first, so it no longer says what the key has.
    set_by: Instant,
}

impl LeaseShared {
    /// The shared state of a lease granted for `hold` by a command sent at
    /// `sent_at` that set `ttl`.
    pub(crate) fn new(
        backend: Arc<dyn LockBackend>,
        key: LockKey,
        hold: HoldToken,
        ttl: Duration,
        drift_factor: f64,
        sent_at: Instant,
        labels: Labels,
    ) -> Self {
        // A TTL shorter than the drift allowance leaves nothing usable: the
        // lease starts out expired and its loss is reported at once.
        let valid_until = lease_deadline(sent_at, ttl, drift_factor).unwrap_or(sent_at);
        let status = StatusCell::new(LeaseStatus::Held { valid_until });
        telemetry::lease_started(&labels);
        LeaseShared {
            backend,
            key,
            hold,
            drift_factor,
            acquired_at: sent_at,
            labels,
            status,
            timing: Mutex::new(Timing {
                ttl,
                set_by: sent_at,
            }),
            extending: tokio::sync::Mutex::new(()),
            keeper: Mutex::new(Keeper::Stopped),
        }
    }

    pub(crate) fn lock_keeper(&self) -> std::sync::MutexGuard<'_, Keeper> {
        // Its state stays valid whatever a panicking holder did.
        self.keeper.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the watchdog, started or only planned.
    fn stop_keeper(&self) {
        self.lock_keeper().stop();
    }

    /// Extends this lease's hold to `ttl` (or, with `None`, to the TTL the
    /// holder last asked for, read when its turn comes) and moves the deadline
    /// to what the command set (or, if its reply is lost or this future is
    /// dropped, caps it at what it would have set). Never runs beside another
    /// extend of the same lease. `NotHeld` and `Corrupted` are the caller's to
    /// act on; a lease that ended meanwhile is [`LockError::LeaseLost`].
    ///
    /// With `batch`, the extend goes out in the driver's next batch (the
    /// watchdog's renewals), and the deadline counts from when that batch
    /// was sent; without, it is sent at once (a caller's `extend`). A batched
    /// renewal with an end (`watchdog.max_hold`) asks for no more than what is
    /// left of it when the batch leaves.
    pub(crate) async fn extend_hold(
        &self,
        ttl: Option<Duration>,
        batch: Option<(&RenewalDriver, Option<Instant>)>,
    ) -> Result<ExtendOutcome, LockError> {
        let _one_at_a_time = self.extending.lock().await;
        let ttl = ttl.unwrap_or_else(|| self.ttl());
        // The lease may have ended while this extend waited its turn.
        self.ensure_held()?;
        let mut in_flight = InFlightExtend {
            shared: self,
            sent_at: Instant::now(),
            ttl,
            answered: false,
        };
        let span = tracing::info_span!(
            "extend",
            key = self.key.name(),
            strategy = self.backend.strategy(),
            fencing_token = self.fencing_token().map(FencingToken::get),
            ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            outcome = tracing::field::Empty,
            elapsed_us = tracing::field::Empty,
        );
        let (sent_at, outcome) = match (batch, self.status()) {
            (Some((driver, ends_by)), LeaseStatus::Held { valid_until }) => {
                driver
                    .renew(&self.key, &self.hold, ttl, valid_until, ends_by)
                    .instrument(span.clone())
                    .await
            }
            _ => (
                in_flight.sent_at,
                self.backend
                    .extend(&self.key, &self.hold, ttl)
                    .instrument(span.clone())
                    .await,
            ),
        };
        in_flight.answered = true;
        span.record("outcome", extend_outcome(&outcome));
        span.record(
            "elapsed_us",
            u64::try_from(in_flight.sent_at.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
        match &outcome {
            Ok(ExtendOutcome::Extended { ttl: ttl_set }) => {
                // The watchdog may have found the deadline passed meanwhile:
                // then the extend came too late, whatever Redis did with it.
                if !self.renewed(sent_at, *ttl_set) {
                    if let LeaseStatus::Lost { reason, .. } = self.status() {
                        return Err(lease_lost(&self.key, reason));
                    }
                }
            }
            Ok(_) | Err(LockError::Corrupted { .. }) => {}
            Err(_) => self.maybe_renewed(in_flight.sent_at, ttl),
        }
        outcome
    }

    pub(crate) fn status(&self) -> LeaseStatus {
        self.status.get()
    }

    /// `Ok` while the lease is held; else the error an extend of it gets:
    /// [`LockError::LeaseLost`], or [`LockError::NotOwner`] once released.
    fn ensure_held(&self) -> Result<(), LockError> {
        // Past its deadline a lease is lost, whether or not the watchdog
        // has run: an extend must not bring it back.
        self.expire_if_due();
        match self.status() {
            LeaseStatus::Held { .. } => Ok(()),
            LeaseStatus::Lost { reason, .. } => Err(lease_lost(&self.key, reason)),
            LeaseStatus::Released => Err(LockError::NotOwner {
                key: self.key.name().to_owned(),
            }),
        }
    }

    /// The deadline a command sent at `sent_at` that set `ttl` gives; the
    /// send instant itself when the TTL leaves nothing after drift.
    fn deadline(&self, sent_at: Instant, ttl: Duration) -> Instant {
        lease_deadline(sent_at, ttl, self.drift_factor).unwrap_or(sent_at)
    }

    /// How long the lease is still trusted; zero unless held.
    pub(crate) fn status_remaining(&self) -> Duration {
        match self.status() {
            LeaseStatus::Held { valid_until } => {
                valid_until.saturating_duration_since(Instant::now())
            }
            _ => Duration::ZERO,
        }
    }

    pub(crate) fn fencing_token(&self) -> Option<FencingToken> {
        self.hold.fencing_token()
    }

    /// The TTL the holder last asked for.
    pub(crate) fn ttl(&self) -> Duration {
        self.timing().ttl
    }

    fn timing(&self) -> std::sync::MutexGuard<'_, Timing> {
        // The data is two plain values, valid whatever a panicking holder did.
        self.timing.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An extend sent at `sent_at` set the key's TTL to `ttl_set`: the
    /// deadline becomes what that command set, earlier or later than before,
    /// unless a command sent later has already spoken. Returns whether the
    /// lease is still held.
    pub(crate) fn renewed(&self, sent_at: Instant, ttl_set: Duration) -> bool {
        let valid_until = self.deadline(sent_at, ttl_set);
        let mut timing = self.timing();
        if sent_at < timing.set_by {
            return matches!(self.status(), LeaseStatus::Held { .. });
        }
        let updated = self.status.modify(|status| match status {
            LeaseStatus::Held {
                valid_until: current,
            } => {
                *current = valid_until;
                true
            }
            _ => false,
        });
        if updated {
            timing.set_by = sent_at;
        }
        updated
    }

    /// An extend to `ttl` sent at `sent_at` failed without an answer: it may
    /// have run, and shortened the key. The deadline moves earlier if so.
    pub(crate) fn maybe_renewed(&self, sent_at: Instant, ttl: Duration) {
        let at_most = self.deadline(sent_at, ttl);
        let mut timing = self.timing();
        // Replies to commands sent before this one no longer say what the key
        // has: this one may have run after them.
        timing.set_by = timing.set_by.max(sent_at);
        self.status.modify(|status| match status {
            LeaseStatus::Held { valid_until } if *valid_until > at_most => {
                *valid_until = at_most;
                true
            }
            _ => false,
        });
    }

    /// The holder asked for `ttl` from now on.
    fn ask_for(&self, ttl: Duration) {
        self.timing().ttl = ttl;
    }

    /// Marks a held lease lost; returns whether this call did it.
    pub(crate) fn lose(&self, reason: LossReason) -> bool {
        self.lose_if(reason, |_| true)
    }

    /// Marks a held lease expired if its *current* deadline has passed (an
    /// extend may have moved it since the caller looked); returns whether this
    /// call did it.
    pub(crate) fn expire_if_due(&self) -> bool {
        self.end_if_due(LossReason::Expired)
    }

    /// Like [`expire_if_due`](Self::expire_if_due), with `reason` as the
    /// cause (the watchdog stopped renewing at `watchdog.max_hold`).
    pub(crate) fn end_if_due(&self, reason: LossReason) -> bool {
        let now = Instant::now();
        self.lose_if(reason, |valid_until| now >= valid_until)
    }

    fn lose_if(&self, reason: LossReason, due: impl Fn(Instant) -> bool) -> bool {
        let changed = self.status.modify(|status| match *status {
            LeaseStatus::Held { valid_until } if due(valid_until) => {
                *status = LeaseStatus::Lost {
                    reason,
                    valid_until,
                };
                // Counted before anyone waiting on `lost()` can look.
                telemetry::lease_ended(&self.labels, self.acquired_at, Some(reason));
                true
            }
            _ => false,
        });
        if changed {
            tracing::warn!(
                key = self.key.name(),
                fencing_token = self.fencing_token().map(FencingToken::get),
                %reason,
                "lease lost"
            );
        }
        changed
    }

    /// Marks the lease released; returns the status it had before, and
    /// how it had ended before, if it had ([`ended_early`]).
    fn mark_released(&self) -> (LeaseStatus, Option<LossReason>) {
        let before = self.status.replace(LeaseStatus::Released);
        let ended = ended_early(before);
        if let LeaseStatus::Held { .. } = before {
            // Past its deadline, it was lost before the release: count it so.
            telemetry::lease_ended(&self.labels, self.acquired_at, ended);
        }
        (before, ended)
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
        self.shared.fencing_token()
    }

    /// The owner identity this lease was taken with. Pass it to nested code
    /// that must re-enter a reentrant lock ([`crate::LockManager::acquire_as`]).
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
    /// Set once [`LeaseGuard::release`] has stopped the watchdog and marked
    /// the lease released: dropping the guard then has nothing left to do.
    released: bool,
}

impl LeaseGuard {
    /// The guard of `shared`, whose watchdog is planned (or off).
    pub(crate) fn new(shared: Arc<LeaseShared>) -> Self {
        LeaseGuard {
            handle: LeaseHandle { shared },
            released: false,
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
    /// Errors: [`LockError::InvalidTtl`]; [`LockError::LeaseLost`] if the lease was
    /// already lost or the key is gone or taken (the lease is then marked lost);
    /// connection errors, after which the deadline is the earlier of the old
    /// one and the one this extend would have set (it may have run).
    pub async fn extend(&self, ttl: Duration) -> Result<(), LockError> {
        validate_ttl(ttl)?;
        let shared = &self.handle.shared;
        shared.ensure_held()?;
        shared.ask_for(ttl);
        // The new deadline may come before the watchdog's planned start.
        shared.lock_keeper().start_now(shared);
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

    /// Gives the lock back and says how the lease ended.
    ///
    /// `Ok(())` means the lease was valid until this release removed it. An
    /// [`LockError::LeaseLost`] means it ended earlier (lost, expired, or the key
    /// was gone or taken when the release arrived): whatever ran under it may
    /// have overlapped with another holder. A lease found gone sends nothing;
    /// one past its deadline still sends its release, which names this hold
    /// alone, so a renewal that ran unanswered does not keep the key. Connection
    /// errors leave the key to expire by its TTL. If this future is dropped
    /// before the release was answered, it is sent again in the background
    /// where a release names one attempt's grant (single node, Redlock); a
    /// reentrant release, which takes one off a count the hold's guards share,
    /// is not repeated (it may have run), and the key expires by its TTL.
    pub async fn release(mut self) -> Result<(), LockError> {
        let shared = &self.handle.shared;
        shared.stop_keeper();
        let (_, ended) = shared.mark_released();
        // Nothing above awaits, so no drop of this future comes between.
        self.released = true;
        if ended == Some(LossReason::NotHeld) {
            return Err(lease_lost(&shared.key, LossReason::NotHeld));
        }
        let mut in_flight = InFlightRelease {
            shared,
            answered: false,
        };
        let started = Instant::now();
        let span = release_span(
            &shared.key,
            shared.backend.strategy(),
            shared.fencing_token(),
        );
        let outcome = in_span(shared.backend.release(&shared.key, &shared.hold), &span).await;
        in_flight.answered = true;
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
    /// released.
    ///
    /// Errors: [`LockError::LeaseLost`] if the lease had already ended (its
    /// hold-scoped release is sent in the background, as on drop);
    /// [`LockError::HandOffUnsupported`] for the reentrant strategy, whose
    /// holds an owner's guards share (the guard is then released, as if
    /// dropped; hand over the owner instead, and re-enter with it).
    pub fn hand_off(self) -> Result<HandoffToken, LockError> {
        let shared = Arc::clone(&self.handle.shared);
        if !shared.backend.releases_only_its_attempt() {
            return Err(LockError::HandOffUnsupported {
                strategy: shared.backend.strategy(),
                operation: "hand off",
            });
        }
        shared.stop_keeper();
        // Marked released, so dropping `self` sends no release.
        match shared.mark_released() {
            (_, Some(LossReason::NotHeld)) => {
                return Err(lease_lost(&shared.key, LossReason::NotHeld))
            }
            (_, Some(reason)) => {
                // A renewal may have run unanswered: free what this hold may
                // still have, as a dropped guard would.
                spawn_release(
                    Arc::clone(&shared.backend),
                    shared.key.clone(),
                    shared.hold.clone(),
                );
                return Err(lease_lost(&shared.key, reason));
            }
            (_, None) => {}
        }
        tracing::debug!(
            key = shared.key.name(),
            fencing_token = shared.fencing_token().map(FencingToken::get),
            "lease handed off"
        );
        Ok(HandoffToken::new(shared.hold.clone()))
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let shared = &self.handle.shared;
        shared.stop_keeper();
        match shared.mark_released() {
            (LeaseStatus::Released, _) => return,
            // The key is gone or someone else's: nothing of ours to release.
            (_, Some(LossReason::NotHeld)) => return,
            // Held, or past its deadline (a renewal may have run unanswered):
            // the release names this hold alone.
            _ => {}
        }
        spawn_release(
            Arc::clone(&shared.backend),
            shared.key.clone(),
            shared.hold.clone(),
        );
    }
}

/// An extend in flight: if its future is dropped before the reply, the
/// command may still run, so the deadline is capped at what it would set.
struct InFlightExtend<'a> {
    shared: &'a LeaseShared,
    sent_at: Instant,
    ttl: Duration,
    answered: bool,
}

impl Drop for InFlightExtend<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.shared.maybe_renewed(self.sent_at, self.ttl);
        }
    }
}

/// A release in flight: if `release()` is dropped before the reply (the
/// redis crate may then never send it), the release goes to a background task,
/// where that is safe to repeat: a release that names one attempt's grant
/// (single node, Redlock). A reentrant release takes one off a count that the
/// hold's guards share, so a second one could end the outer guard's hold; a
/// dropped one is left to the TTL.
struct InFlightRelease<'a> {
    shared: &'a Arc<LeaseShared>,
    answered: bool,
}

impl Drop for InFlightRelease<'_> {
    fn drop(&mut self) {
        if !self.answered && self.shared.backend.releases_only_its_attempt() {
            spawn_release(
                Arc::clone(&self.shared.backend),
                self.shared.key.clone(),
                self.shared.hold.clone(),
            );
        }
    }
}

/// How a lease had ended before its release, if it had: lost, or past its
/// deadline.
fn ended_early(before: LeaseStatus) -> Option<LossReason> {
    match before {
        LeaseStatus::Lost { reason, .. } => Some(reason),
        LeaseStatus::Held { valid_until } if Instant::now() >= valid_until => {
            Some(LossReason::Expired)
        }
        _ => None,
    }
}

pub(crate) fn lease_lost(key: &LockKey, reason: LossReason) -> LockError {
    LockError::LeaseLost {
        key: key.name().to_owned(),
        reason,
    }
}

/// How many times a background release is sent, at most, while it fails
/// with a retryable error (a connection, a timeout, a demoted master): 20,
/// 60, 180 and 540 ms apart, under a second of waiting in all.
const BACKGROUND_RELEASE_TRIES: u32 = 5;

/// Releases `hold` on `key` in a background task, for guards that were
/// dropped and acquires whose reply never arrived, counted for
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
    crate::background::spawn(&runtime, async move {
        let started = Instant::now();
        // A release that names one attempt's hold may run twice (the
        // second finds nothing), so one that failed on a connection still
        // coming back (the fault that lost an acquire's reply, say) is
        // tried again a few times. A reentrant release is not: it takes
        // one off a count, and may have run.
        let again = backend.releases_only_its_attempt();
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

/// The `outcome` field of an extend's span.
fn extend_outcome(outcome: &Result<ExtendOutcome, LockError>) -> &'static str {
    match outcome {
        Ok(ExtendOutcome::Extended { .. }) => "extended",
        Ok(ExtendOutcome::NotHeld) => "not_held",
        Err(_) => "error",
    }
}
