//! What keeps a held lease alive and reports its loss.
//!
//! A lease's watchdog is only planned until its first renewal falls due
//! (see [`crate::engine::lease::schedule`]), and while its renewals succeed the
//! schedule sends them without a task ([`renew_unattended`]): a task per
//! lease costs a wake-up, a select and a lock per renewal. A task
//! ([`keep`]) takes over when a renewal fails (it retries until the
//! deadline), when no reply comes by the deadline, after a caller's
//! `extend`, and with `watchdog.max_hold` or renewal off; without
//! `max_hold`, it gives the lease back at its first renewal that succeeds.
//! With
//! renewal on, it extends the lease every renewal interval (through the manager's [`RenewalDriver`], which sends
//! the renewals that fall due together in one batch) and marks it lost when
//! an extend finds the key gone or taken, or when the deadline passes while
//! the node cannot be reached. With
//! renewal off, it only marks the lease lost (expired) at its deadline, so the
//! loss signal means the same in both modes.
//!
//! With `watchdog.max_hold`, renewals stop at that much time after the
//! acquire: each asks for no more than what is left of it when its batch
//! leaves, so the key runs out at the cap (to the millisecond), and the loss
//! is reported as [`LossReason::MaxHoldReached`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::backend::ExtendOutcome;
use crate::engine::lease::drop_guard::DropGuard;
use crate::engine::lease::renewal::{Renewable, RenewalDriver};
use crate::engine::lease::status::LeaseStatus;
use crate::engine::lease::timing::max_renew_interval;
use crate::engine::lease::{extend_outcome, extend_span, LeaseShared};
use crate::engine::telemetry;
use crate::error::{LockError, LossReason};
use crate::key::FencingToken;
use crate::ttl::MIN_TTL;

/// How soon to try again after a renewal failed: a third of the interval, but
/// at least 5 ms so a dead node is not hammered.
fn retry_delay(interval: Duration) -> Duration {
    (interval / 3).max(Duration::from_millis(5))
}

/// Gives a lease whose watchdog task renewed it back to its schedule, to
/// be renewed next at the instant given without a task; `false` if it
/// cannot (then the task goes on).
pub(crate) type HandBack = Box<dyn Fn(&Arc<LeaseShared>, Instant) -> bool + Send + Sync>;

/// Runs until the lease is released (the guard aborts this task) or lost,
/// or, without `max_hold`, until a renewal succeeds and `hand_back` takes
/// the lease back; with renewal on, renews first at `first_renewal`.
pub(crate) async fn keep(
    shared: Arc<LeaseShared>,
    renew_every: Option<Duration>,
    first_renewal: Instant,
    max_hold: Option<Duration>,
    renewals: Arc<RenewalDriver>,
    hand_back: HandBack,
) {
    let mut changes = shared.status.changes();
    // Sooner after an `extend` to a shorter TTL that started this watchdog
    // before its planned renewal.
    let mut next_renewal = renew_every.map(|interval| {
        let soon = Instant::now() + renewal_interval(&shared, interval);
        first_renewal.min(soon)
    });
    // No renewal reaches past this instant; an overflow is no cap at all.
    let stop_renewing_at = max_hold.and_then(|cap| shared.acquired_at.checked_add(cap));
    // Set once renewals stopped at the cap: the lease then ends as configured.
    let mut capped = false;
    loop {
        let valid_until = match shared.status() {
            LeaseStatus::Held { valid_until } => valid_until,
            LeaseStatus::Lost { .. } | LeaseStatus::Released => return,
        };
        let wake_at = next_renewal.map_or(valid_until, |at| at.min(valid_until));
        tokio::select! {
            // The sender lives in `shared`: this never fails.
            _ = changes.changed() => {
                // A manual extend moved the deadline, or the lease ended.
                // An extend to a shorter TTL needs the next renewal sooner.
                if let (Some(at), Some(configured)) = (next_renewal, renew_every) {
                    let soon = Instant::now() + renewal_interval(&shared, configured);
                    next_renewal = Some(at.min(soon));
                }
                continue;
            }
            () = tokio::time::sleep_until(wake_at.into()) => {}
        }
        // Against the current deadline: an extend may have just moved it.
        let reason = if capped {
            LossReason::MaxHoldReached
        } else {
            LossReason::Expired
        };
        if shared.end_if_due(reason) {
            return;
        }
        let Some(interval) = renew_every.filter(|_| !capped) else {
            next_renewal = None;
            continue;
        };
        // Near the cap, renew only for what is left of it.
        let capped_ttl = match stop_renewing_at {
            None => None,
            Some(at) => {
                // Whole milliseconds, rounded down: what a TTL can be.
                let left = at.saturating_duration_since(Instant::now());
                let left =
                    Duration::from_millis(u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
                if left < MIN_TTL {
                    tracing::debug!(
                        key = shared.key.name(),
                        "watchdog.max_hold reached; the lease runs out at its TTL"
                    );
                    capped = true;
                    next_renewal = None;
                    continue;
                }
                (left < shared.ttl()).then_some(left)
            }
        };
        let batch = (&*renewals, stop_renewing_at);
        let (next, renewed) = renew(&shared, batch, interval, capped_ttl).await;
        // The deadline that renewal set is no news to this loop, which would
        // otherwise wake once more for each renewal. A caller's extend to a
        // shorter TTL meanwhile is still heeded: the interval follows it.
        changes.borrow_and_update();
        let next = next.min(Instant::now() + renewal_interval(&shared, interval));
        next_renewal = Some(next);
        // What needed a task (a failure, a late reply, a caller's extend)
        // is over: the schedule renews the lease without one again.
        if renewed && max_hold.is_none() && hand_back(&shared, next) {
            return;
        }
        if renewed && capped_ttl.is_some() {
            // That renewal ends the lease at the cap; none follows.
            capped = true;
            next_renewal = None;
        }
    }
}

/// What an unattended renewal ([`renew_unattended`]) found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Renewed: the next renewal is due at this instant.
    NextAt(Instant),
    /// The lease ended: lost (the key gone or taken, or the reply came
    /// after the deadline), or released.
    Ended,
    /// The renewal failed, and the lease is still held until its deadline:
    /// it is due again at this instant (a task retries it).
    RetryAt(Instant),
}

/// Sends the next renewal of `lease` (renewed every `configured`) in the
/// driver's next batch, with no task waiting for it, and calls `then` with
/// what it found, on the driver's task (its `extend` span, made there,
/// starts at the reply). Runs no log or metric code itself: the schedule's
/// pump calls it. Holds the lease's right to extend
/// from now until the reply, as a watchdog task's renewal does; `false`
/// (and nothing sent) if the lease is not held, its deadline has passed, or
/// an extend is in flight. Must run inside a Tokio runtime.
pub(crate) fn renew_unattended(
    lease: &Arc<LeaseShared>,
    configured: Duration,
    renewals: &RenewalDriver,
    then: impl FnOnce(&Arc<LeaseShared>, Renewed) + Send + 'static,
) -> bool {
    let asked_at = Instant::now();
    let LeaseStatus::Held { valid_until } = lease.status() else {
        return false;
    };
    if asked_at >= valid_until {
        return false;
    }
    let Some(one_at_a_time) = lease.try_extending() else {
        return false;
    };
    let ttl = lease.ttl();
    // A caller's `extend` may have just asked for a shorter TTL.
    lease.sending(asked_at, ttl);
    let held = Arc::clone(lease);
    // Dropped unanswered (its batch found the lease no longer held, or the
    // driver's runtime shut down): it may have run, as a dropped extend may.
    let unanswered = DropGuard::new(move || held.maybe_renewed(asked_at, ttl));
    let held = Arc::clone(lease);
    renewals.renew_unattended(
        Arc::clone(lease) as Arc<dyn Renewable>,
        ttl,
        valid_until,
        Box::new(move |(sent_at, outcome)| {
            unanswered.disarm();
            let (renewed, counted) = settle(&held, configured, sent_at, ttl, &outcome);
            // Released before `then`, which may start a task that extends.
            drop(one_at_a_time);
            then(&held, renewed);
            // Last, once the lease and its schedule have what the reply
            // said: a panicking subscriber (caught by the driver) leaves
            // nothing half done. Made here, on the driver's task, so the
            // pump runs none of it.
            if counted {
                report(&held, ttl, asked_at, &outcome, renewed);
            }
        }),
    );
    true
}

/// Applies the reply to an unattended renewal of `shared` to `ttl`, whose
/// batch left at `sent_at`, as a watchdog task's renewal does; returns what
/// comes next, and whether the reply counts as a renewal's (it does not
/// once the lease had ended, or its deadline had passed, when it came).
fn settle(
    shared: &LeaseShared,
    configured: Duration,
    sent_at: Instant,
    ttl: Duration,
    outcome: &Result<ExtendOutcome, LockError>,
) -> (Renewed, bool) {
    // A reply after the deadline comes too late, whatever it says: by our
    // conservative clock the lease was gone before it arrived.
    shared.expire_if_due();
    if !matches!(shared.status(), LeaseStatus::Held { .. }) {
        return (Renewed::Ended, false);
    }
    let interval = renewal_interval(shared, configured);
    // Counted before anyone waiting on `lost()` can look, as a task's is.
    telemetry::renewal(&shared.labels, renewal_outcome(outcome));
    let renewed = match outcome {
        Ok(ExtendOutcome::Extended { ttl: ttl_set }) => {
            if shared.renewed(sent_at, *ttl_set) {
                Renewed::NextAt(sent_at + interval)
            } else {
                Renewed::Ended
            }
        }
        Ok(ExtendOutcome::NotHeld) | Err(LockError::Corrupted { .. }) => {
            shared.lose(LossReason::NotHeld);
            Renewed::Ended
        }
        Err(_) => {
            shared.maybe_renewed(sent_at, ttl);
            if matches!(shared.status(), LeaseStatus::Held { .. }) {
                Renewed::RetryAt(Instant::now() + retry_delay(interval))
            } else {
                Renewed::Ended
            }
        }
    };
    (renewed, true)
}

/// The span and log event of an unattended renewal of `shared` to `ttl`,
/// asked for at `asked_at`, which found `outcome`: what a watchdog task's
/// renewal reports (its metric is counted in [`settle`]).
fn report(
    shared: &LeaseShared,
    ttl: Duration,
    asked_at: Instant,
    outcome: &Result<ExtendOutcome, LockError>,
    renewed: Renewed,
) {
    let elapsed_us = u64::try_from(asked_at.elapsed().as_micros()).unwrap_or(u64::MAX);
    let span = extend_span(shared, ttl);
    span.record("outcome", extend_outcome(outcome));
    span.record("elapsed_us", elapsed_us);
    let _in_span = span.enter();
    let fencing_token = shared.fencing_token().map(FencingToken::get);
    match (outcome, renewed) {
        (Ok(ExtendOutcome::Extended { .. }), Renewed::NextAt(_)) => tracing::debug!(
            key = shared.key.name(),
            fencing_token,
            elapsed_us,
            "lease renewed"
        ),
        (Err(err), Renewed::RetryAt(_)) => tracing::warn!(
            key = shared.key.name(),
            fencing_token,
            error = %err,
            remaining_ms = shared.status_remaining().as_millis() as u64,
            "lease renewal failed; retrying until the deadline"
        ),
        _ => {}
    }
}

/// The `outcome` label of a renewal's metric.
fn renewal_outcome(outcome: &Result<ExtendOutcome, LockError>) -> &'static str {
    match outcome {
        Ok(ExtendOutcome::Extended { .. }) => "renewed",
        Ok(ExtendOutcome::NotHeld) | Err(LockError::Corrupted { .. }) => "not_held",
        Err(_) => "failed",
    }
}

/// The configured interval, or less after an `extend` to a TTL too short for
/// it, or one whose reply was lost: renewals keep room for two attempts
/// before the deadline.
fn renewal_interval(shared: &LeaseShared, configured: Duration) -> Duration {
    configured.min(max_renew_interval(
        shared.trusted_ttl(),
        shared.drift_factor,
    ))
}

/// One renewal, with the TTL the holder last asked for (or `capped_ttl`, the
/// rest of `watchdog.max_hold`); returns when to renew next, and whether the
/// lease was renewed.
async fn renew(
    shared: &Arc<LeaseShared>,
    batch: (&RenewalDriver, Option<Instant>),
    configured: Duration,
    capped_ttl: Option<Duration>,
) -> (Instant, bool) {
    let interval = renewal_interval(shared, configured);
    let sent_at = Instant::now();
    let mut changes = shared.status.changes();
    let extend = shared.extend_hold(capped_ttl, Some(batch));
    tokio::pin!(extend);
    let outcome = loop {
        // The current deadline: an extend may move it while this one waits.
        let LeaseStatus::Held { valid_until } = shared.status() else {
            return (sent_at, false);
        };
        tokio::select! {
            outcome = &mut extend => break outcome,
            () = tokio::time::sleep_until(valid_until.into()) => {
                // The deadline passed while the renewal was in flight (or
                // waited for a caller's extend): by our conservative clock the
                // lease is gone, whatever the reply says later.
                if shared.expire_if_due() {
                    return (Instant::now(), false);
                }
            }
            _ = changes.changed() => {}
        }
    };
    let fencing_token = shared.fencing_token().map(FencingToken::get);
    telemetry::renewal(&shared.labels, renewal_outcome(&outcome));
    match outcome {
        Ok(ExtendOutcome::Extended { .. }) => {
            tracing::debug!(
                key = shared.key.name(),
                fencing_token,
                elapsed_us = sent_at.elapsed().as_micros() as u64,
                "lease renewed"
            );
            (sent_at + interval, true)
        }
        // A key that now holds foreign data is as gone as a deleted one: no
        // retry can bring the lease back.
        Ok(ExtendOutcome::NotHeld) | Err(LockError::Corrupted { .. }) => {
            shared.lose(LossReason::NotHeld);
            (sent_at, false)
        }
        Err(err) => {
            tracing::warn!(
                key = shared.key.name(),
                fencing_token,
                error = %err,
                remaining_ms = shared.status_remaining().as_millis() as u64,
                "lease renewal failed; retrying until the deadline"
            );
            (Instant::now() + retry_delay(interval), false)
        }
    }
}
