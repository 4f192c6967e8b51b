//! Metrics, through the [`metrics`](https://docs.rs/metrics) facade when the
//! cargo feature `metrics` is on (the application installs the exporter:
//! Prometheus, StatsD, OpenTelemetry, ...); without it every call here is
//! empty and compiles away.
//!
//! The list of metrics is in the crate docs ("Metrics and spans").

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use futures::future::Either;
use tracing::Instrument;

use crate::error::LossReason;

/// `future` in `span`, or as it is when the span is disabled (no subscriber
/// wants it): even a disabled span is entered and left at every poll and
/// wraps the future in one the size of it, on every acquire and release.
pub(crate) fn in_span<F: Future>(
    future: F,
    span: &tracing::Span,
) -> Either<F, tracing::instrument::Instrumented<F>> {
    if span.is_disabled() {
        Either::Left(future)
    } else {
        Either::Right(future.instrument(span.clone()))
    }
}

/// The `lock` label's value for names past the limit.
pub(crate) const OTHER_LOCKS: &str = "other";

/// The labels every metric of one lease or call carries.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) struct Labels {
    strategy: &'static str,
    lock: Option<String>,
}

impl Labels {
    /// Labels of `strategy`, with a lock name when the config asks for one.
    pub(crate) fn new(strategy: &'static str, lock: Option<String>) -> Self {
        Labels { strategy, lock }
    }
}

/// Which lock names get a `lock` label of their own: the first `limit`
/// distinct names the process sees, remembered in one set for the whole
/// process (so many managers cannot multiply it) that never grows past the
/// largest limit, at most [`crate::MAX_METRICS_LOCK_NAMES`].
#[derive(Debug)]
pub(crate) struct LockNameLabels {
    limit: usize,
    seen: &'static Mutex<HashSet<String>>,
}

/// The lock names that have a label of their own, for every manager.
fn labelled_names() -> &'static Mutex<HashSet<String>> {
    static NAMES: std::sync::OnceLock<Mutex<HashSet<String>>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| Mutex::new(HashSet::new()))
}

impl LockNameLabels {
    /// Labels for at most `limit` names; none with 0, or without the
    /// `metrics` feature (nothing would read them).
    pub(crate) fn new(limit: u32) -> Self {
        let limit = if cfg!(feature = "metrics") { limit } else { 0 };
        LockNameLabels {
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
            seen: labelled_names(),
        }
    }

    /// The `lock` label for `name`: the name itself while there is room,
    /// [`OTHER_LOCKS`] after, `None` when names are not labels.
    pub(crate) fn label(&self, name: &str) -> Option<String> {
        if self.limit == 0 {
            return None;
        }
        // A set of strings, valid whatever a panicking thread did to it.
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.contains(name) {
            return Some(name.to_owned());
        }
        if seen.len() < self.limit {
            seen.insert(name.to_owned());
            return Some(name.to_owned());
        }
        Some(OTHER_LOCKS.to_owned())
    }
}

/// The `reason` label of a loss.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
fn reason_label(reason: LossReason) -> &'static str {
    match reason {
        LossReason::NotHeld => "not_held",
        LossReason::Expired => "expired",
        LossReason::MaxHoldReached => "max_hold_reached",
    }
}

#[cfg(feature = "metrics")]
mod record {
    use metrics::Label;

    use super::Labels;

    /// The labels as the facade takes them, with `extra` appended.
    pub(super) fn labels(
        labels: &Labels,
        extra: Option<(&'static str, &'static str)>,
    ) -> Vec<Label> {
        let mut all = vec![Label::new("strategy", labels.strategy)];
        if let Some(lock) = &labels.lock {
            all.push(Label::new("lock", lock.clone()));
        }
        if let Some((key, value)) = extra {
            all.push(Label::new(key, value));
        }
        all
    }
}

/// An acquire call that started at `started` ended with `outcome` after
/// `attempts` attempts.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn acquisition(labels: &Labels, outcome: &'static str, attempts: u32, started: Instant) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(
            "distlock_acquisitions_total",
            record::labels(labels, Some(("outcome", outcome)))
        )
        .increment(1);
        metrics::histogram!("distlock_acquire_attempts", record::labels(labels, None))
            .record(f64::from(attempts));
        metrics::histogram!(
            "distlock_acquire_wait_seconds",
            record::labels(labels, None)
        )
        .record(started.elapsed().as_secs_f64());
    }
}

/// A lease was granted or resumed: this process holds one more.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn lease_started(labels: &Labels) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("distlock_leases_held", record::labels(labels, None)).increment(1.0);
}

/// A lease this process held since `acquired_at` ended: released or handed
/// off (`lost` is `None`), or lost.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn lease_ended(labels: &Labels, acquired_at: Instant, lost: Option<LossReason>) {
    #[cfg(feature = "metrics")]
    {
        metrics::gauge!("distlock_leases_held", record::labels(labels, None)).decrement(1.0);
        metrics::histogram!("distlock_hold_seconds", record::labels(labels, None))
            .record(acquired_at.elapsed().as_secs_f64());
        if let Some(reason) = lost {
            metrics::counter!(
                "distlock_leases_lost_total",
                record::labels(labels, Some(("reason", reason_label(reason))))
            )
            .increment(1);
        }
    }
}

/// A watchdog renewal ended with `outcome`.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn renewal(labels: &Labels, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "distlock_renewals_total",
        record::labels(labels, Some(("outcome", outcome)))
    )
    .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "metrics")]
    fn lock_name_labels_stop_growing_at_the_limit() {
        let labels = LockNameLabels::new(2);
        assert_eq!(labels.label("a").as_deref(), Some("a"));
        assert_eq!(labels.label("b").as_deref(), Some("b"));
        for name in 0..10_000 {
            assert_eq!(
                labels.label(&format!("n{name}")).as_deref(),
                Some(OTHER_LOCKS)
            );
        }
        assert_eq!(
            labels.label("a").as_deref(),
            Some("a"),
            "a known name keeps its label"
        );
        assert_eq!(labels.seen.lock().expect("not poisoned").len(), 2);
        assert_eq!(LockNameLabels::new(0).label("a"), None);
    }

    #[test]
    fn every_loss_reason_has_a_label() {
        for reason in [
            LossReason::NotHeld,
            LossReason::Expired,
            LossReason::MaxHoldReached,
        ] {
            assert!(!reason_label(reason).is_empty());
        }
    }
}
