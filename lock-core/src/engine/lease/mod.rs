//! The state one lease shares between its guard, its handles and its
//! watchdog: the hold, the deadline and what set it, the status, and where
//! the watchdog is.

pub(crate) mod background;
pub(crate) mod drop_guard;
pub(crate) mod guard;
pub(crate) mod renewal;
pub(crate) mod roles;
pub(crate) mod schedule;
pub(crate) mod status;
pub(crate) mod timing;
pub(crate) mod watchdog;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::runtime;
use tokio::task::AbortHandle;
use tracing::Instrument;

use crate::engine::backend::{ExtendOutcome, LockBackend};
use crate::engine::lease::drop_guard::DropGuard;
use crate::engine::lease::renewal::{Renewable, RenewalDriver};
use crate::engine::lease::status::{LeaseStatus, StatusCell};
use crate::engine::lease::timing::lease_deadline;
use crate::engine::telemetry::{self, Labels};
use crate::error::{LockError, LossReason};
use crate::hold::HoldToken;
use crate::key::{FencingToken, LockKey};

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
    /// The TTL the grant (or resume) asked for: with the TTL asked since,
    /// whichever is shorter, it paces the watchdog
    /// ([`LeaseShared::pace_ttl`]).
    granted_ttl: Duration,
    /// The labels of this lease's metrics.
    pub(crate) labels: Labels,
    pub(crate) status: StatusCell,
    timing: Mutex<Timing>,
    /// One extend at a time per lease (watchdog or caller): with a single
    /// command in flight, the last one sent is the last one the server ran,
    /// even when a `NOSCRIPT` reload sends a command again. Shared, so that
    /// a renewal nobody waits for can hold it until its reply.
    extending: Arc<tokio::sync::Mutex<()>>,
    /// The watchdog: planned, renewing without a task, or a task.
    watchdog: Mutex<WatchdogState>,
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
    /// The shortest TTL an extend whose reply was lost asked for. Such a
    /// command may still reach the server after any later renewal (stuck on
    /// a connection given up on while the next went by another) and set
    /// that TTL then: no later renewal is trusted for longer.
    unanswered: Option<Duration>,
}

impl Renewable for LeaseShared {
    fn key(&self) -> &LockKey {
        &self.key
    }

    fn hold(&self) -> &HoldToken {
        &self.hold
    }

    fn still_held(&self) -> bool {
        // By the clock too: past its deadline a lease is gone, whether or
        // not anything has marked it so yet.
        matches!(self.status(), LeaseStatus::Held { valid_until } if Instant::now() < valid_until)
    }
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
            granted_ttl: ttl,
            labels,
            status,
            timing: Mutex::new(Timing {
                ttl,
                set_by: sent_at,
                unanswered: None,
            }),
            extending: Arc::new(tokio::sync::Mutex::new(())),
            watchdog: Mutex::new(WatchdogState::Stopped),
        }
    }

    /// The TTL that paces this lease's watchdog: the one it was granted
    /// with, or a shorter one a holder has asked for since. Not a longer one:
    /// until an extend to it succeeds, the deadline is still the old TTL's.
    pub(crate) fn pace_ttl(&self) -> Duration {
        self.granted_ttl.min(self.trusted_ttl())
    }

    /// The right to extend, if no extend is in flight: held by a renewal
    /// sent without a task until its reply.
    pub(crate) fn try_extending(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        Arc::clone(&self.extending).try_lock_owned().ok()
    }

    pub(crate) fn lock_watchdog(&self) -> std::sync::MutexGuard<'_, WatchdogState> {
        // Its state stays valid whatever a panicking holder did.
        self.watchdog.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the watchdog, started or only planned.
    pub(crate) fn stop_watchdog(&self) {
        self.lock_watchdog().stop();
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
        self: &Arc<Self>,
        ttl: Option<Duration>,
        batch: Option<(&RenewalDriver, Option<Instant>)>,
    ) -> Result<ExtendOutcome, LockError> {
        let _one_at_a_time = self.extending.lock().await;
        let ttl = ttl.unwrap_or_else(|| self.ttl());
        // The lease may have ended while this extend waited its turn.
        self.ensure_held()?;
        let sent_at = Instant::now();
        self.sending(sent_at, ttl);
        // Dropped before the reply: the extend may have run, so the deadline
        // is capped at what it would have set.
        let in_flight = DropGuard::new(|| self.maybe_renewed(sent_at, ttl));
        let span = extend_span(self, ttl);
        let (set_by, outcome) = match (batch, self.status()) {
            (Some((driver, ends_by)), LeaseStatus::Held { valid_until }) => {
                driver
                    .renew(self, ttl, valid_until, ends_by)
                    .instrument(span.clone())
                    .await
            }
            _ => (
                sent_at,
                self.backend
                    .extend(&self.key, &self.hold, ttl)
                    .instrument(span.clone())
                    .await,
            ),
        };
        in_flight.disarm();
        span.record("outcome", extend_outcome(&outcome));
        span.record(
            "elapsed_us",
            u64::try_from(sent_at.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
        match &outcome {
            Ok(ExtendOutcome::Extended { ttl: ttl_set }) => {
                // The watchdog may have found the deadline passed meanwhile:
                // then the extend came too late, whatever Redis did with it.
                if !self.renewed(set_by, *ttl_set) {
                    if let LeaseStatus::Lost { reason, .. } = self.status() {
                        return Err(lease_lost(&self.key, reason));
                    }
                }
            }
            Ok(_) | Err(LockError::Corrupted { .. }) => {}
            Err(_) => self.maybe_renewed(sent_at, ttl),
        }
        outcome
    }

    pub(crate) fn status(&self) -> LeaseStatus {
        self.status.get()
    }

    /// `Ok` while the lease is held; else the error an extend of it gets:
    /// [`LockError::LeaseLost`], or [`LockError::NotOwner`] once released.
    pub(crate) fn ensure_held(&self) -> Result<(), LockError> {
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
    pub(crate) fn deadline(&self, sent_at: Instant, ttl: Duration) -> Instant {
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

    /// The TTL a renewal with [`ttl`](Self::ttl) is trusted for: no longer
    /// than an extend whose reply was lost asked for. Renewals are paced by
    /// it.
    pub(crate) fn trusted_ttl(&self) -> Duration {
        let timing = self.timing();
        timing
            .unanswered
            .map_or(timing.ttl, |lost| timing.ttl.min(lost))
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
        let mut timing = self.timing();
        if sent_at < timing.set_by {
            return matches!(self.status(), LeaseStatus::Held { .. });
        }
        let trusted = timing.unanswered.map_or(ttl_set, |lost| ttl_set.min(lost));
        let valid_until = self.deadline(sent_at, trusted);
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
    /// have run, and shortened the key. The deadline moves earlier if so,
    /// and no later renewal is trusted for longer than `ttl` (it may still
    /// run after them).
    pub(crate) fn maybe_renewed(&self, sent_at: Instant, ttl: Duration) {
        let at_most = self.deadline(sent_at, ttl);
        let mut timing = self.timing();
        // Replies to commands sent before this one no longer say what the key
        // has: this one may have run after them.
        timing.set_by = timing.set_by.max(sent_at);
        timing.unanswered = Some(timing.unanswered.map_or(ttl, |lost| lost.min(ttl)));
        self.cap_deadline(at_most);
    }

    /// An extend to `ttl` is about to be sent at `sent_at`: a shorter TTL
    /// takes effect when it runs, before its reply comes back, so the lease
    /// is trusted no longer than it would set from now on. Every extend and
    /// renewal calls it as it sends.
    pub(crate) fn sending(&self, sent_at: Instant, ttl: Duration) {
        self.cap_deadline(self.deadline(sent_at, ttl));
    }

    /// Moves a held lease's deadline back to `at_most` if it is later.
    fn cap_deadline(&self, at_most: Instant) {
        self.status.modify(|status| match status {
            LeaseStatus::Held { valid_until } if *valid_until > at_most => {
                *valid_until = at_most;
                true
            }
            _ => false,
        });
    }

    /// The holder asked for `ttl` from now on.
    pub(crate) fn ask_for(&self, ttl: Duration) {
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
    pub(crate) fn mark_released(&self) -> (LeaseStatus, Option<LossReason>) {
        let before = self.status.replace(LeaseStatus::Released);
        let ended = ended_early(before);
        if let LeaseStatus::Held { .. } = before {
            // Past its deadline, it was lost before the release: count it so.
            telemetry::lease_ended(&self.labels, self.acquired_at, ended);
        }
        (before, ended)
    }
}

/// Where a lease's watchdog is; behind the lease's own lock.
#[derive(Debug, Default)]
pub(crate) enum WatchdogState {
    /// No task: waits in `schedule`'s queue of `runtime` at `slot`, when
    /// its next renewal (or, with renewal off, its deadline) is due.
    Planned {
        schedule: Arc<dyn WatchdogQueue>,
        runtime: runtime::Id,
        slot: Slot,
    },
    /// No task: the schedule sent a renewal, and the lease waits in its
    /// queue at `slot`, its deadline, in case no reply comes by then.
    Renewing {
        schedule: Arc<dyn WatchdogQueue>,
        runtime: runtime::Id,
        slot: Slot,
    },
    /// The watchdog task.
    Running(AbortHandle),
    /// Released, handed off, or never planned.
    #[default]
    Stopped,
}

/// When a watchdog is due, and a number that makes the entry unique.
pub(crate) type Slot = (Instant, u64);

impl WatchdogState {
    /// Stops the watchdog, started or not.
    pub(crate) fn stop(&mut self) {
        match std::mem::take(self) {
            WatchdogState::Planned {
                schedule,
                runtime,
                slot,
            }
            | WatchdogState::Renewing {
                schedule,
                runtime,
                slot,
            } => {
                schedule.unplan(runtime, slot);
            }
            WatchdogState::Running(task) => task.abort(),
            WatchdogState::Stopped => {}
        }
    }

    /// Starts the watchdog task of `lease` now, on the runtime it was
    /// planned on, if it has none yet (a caller's `extend` may bring its
    /// deadline forward).
    pub(crate) fn start_now(&mut self, lease: &Arc<LeaseShared>) {
        let (schedule, runtime, slot, first_renewal) = match &*self {
            WatchdogState::Planned {
                schedule,
                runtime,
                slot,
            } => (schedule, *runtime, *slot, slot.0),
            // The task's first renewal waits for the one in flight, and
            // follows it at once: the task cannot know how that one went.
            WatchdogState::Renewing {
                schedule,
                runtime,
                slot,
            } => (schedule, *runtime, *slot, Instant::now()),
            WatchdogState::Running(_) | WatchdogState::Stopped => return,
        };
        // Without a queue, its ended pump is handing the lease on.
        if let Some(task) = Arc::clone(schedule).start(runtime, slot, lease, first_renewal) {
            *self = WatchdogState::Running(task);
        }
    }
}

/// The schedule that planned a lease's watchdog ([`WatchdogSchedule`]), as the
/// lease sees it: it can take the plan back, or start the watchdog now.
///
/// [`WatchdogSchedule`]: crate::engine::lease::schedule::WatchdogSchedule
pub(crate) trait WatchdogQueue: Send + Sync + std::fmt::Debug {
    /// Forgets the watchdog planned at `slot` on `runtime`.
    fn unplan(&self, runtime: runtime::Id, slot: Slot);

    /// Starts the watchdog task of `lease`, waiting at `slot` on `runtime`,
    /// now, to renew first at `first_renewal`; `None` if its queue ended,
    /// whose pump hands the lease on.
    fn start(
        self: Arc<Self>,
        runtime: runtime::Id,
        slot: Slot,
        lease: &Arc<LeaseShared>,
        first_renewal: Instant,
    ) -> Option<AbortHandle>;
}

/// How a lease had ended before its release, if it had: lost, or past its
/// deadline.
pub(crate) fn ended_early(before: LeaseStatus) -> Option<LossReason> {
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

/// The span of an extend of `lease` to `ttl`, the watchdog's or a
/// caller's; its `outcome` and `elapsed_us` are recorded at the reply.
pub(crate) fn extend_span(lease: &LeaseShared, ttl: Duration) -> tracing::Span {
    tracing::info_span!(
        "extend",
        key = lease.key.name(),
        strategy = lease.backend.strategy(),
        fencing_token = lease.fencing_token().map(FencingToken::get),
        ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
        outcome = tracing::field::Empty,
        elapsed_us = tracing::field::Empty,
    )
}

/// The `outcome` field of an extend's span.
pub(crate) fn extend_outcome(outcome: &Result<ExtendOutcome, LockError>) -> &'static str {
    match outcome {
        Ok(ExtendOutcome::Extended { .. }) => "extended",
        Ok(ExtendOutcome::NotHeld) => "not_held",
        Err(_) => "error",
    }
}
