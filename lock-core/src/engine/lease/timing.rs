//! Lease arithmetic: how long a lease can be trusted, computed without panics.
//!
//! Every function here saturates instead of overflowing or underflowing, because
//! peers have shipped `ttl - elapsed - drift` on unsigned durations and panicked
//! (or wrapped to a lease of centuries) when a reply came back late.

use std::time::{Duration, Instant};

use crate::ttl::MIN_TTL;

/// The fixed part of the clock-drift allowance, added to `ttl × drift_factor`.
/// It covers the granularity of Redis's expiry (1 ms) and of our timers.
pub(crate) const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// How much of a lease to give up for clocks that run at different rates:
/// `ttl × drift_factor + 2 ms`. A factor that is negative, NaN or infinite is
/// treated as the largest sane factor, 1.0, so a bad input shortens leases
/// instead of lengthening them.
pub fn clock_drift(ttl: Duration, drift_factor: f64) -> Duration {
    let factor = if drift_factor.is_finite() && drift_factor >= 0.0 {
        drift_factor.min(1.0)
    } else {
        1.0
    };
    let proportional = Duration::try_from_secs_f64(ttl.as_secs_f64() * factor).unwrap_or(ttl);
    proportional.saturating_add(DRIFT_FLOOR)
}

/// What is left of a lease of `ttl` after `elapsed` since the request was sent,
/// minus the drift allowance: `ttl - elapsed - drift`, floored at zero.
pub fn validity(ttl: Duration, elapsed: Duration, drift: Duration) -> Duration {
    ttl.saturating_sub(elapsed).saturating_sub(drift)
}

/// The instant until which a lease is known to be valid, given the instant the
/// acquire or renewal was *sent*. The server started the TTL later than that,
/// so this errs on the safe side. `None` when nothing of the lease is left or the
/// instant cannot be represented.
pub(crate) fn lease_deadline(
    sent_at: Instant,
    ttl: Duration,
    drift_factor: f64,
) -> Option<Instant> {
    let usable = validity(ttl, Duration::ZERO, clock_drift(ttl, drift_factor));
    if usable.is_zero() {
        return None;
    }
    sent_at.checked_add(usable)
}

/// The default renewal interval: a third of the TTL, so two renewals can fail
/// before the lease runs out (and never more than [`max_renew_interval`]).
pub(crate) fn default_renew_interval(ttl: Duration, drift_factor: f64) -> Duration {
    (ttl / 3).min(max_renew_interval(ttl, drift_factor))
}

/// The longest renewal interval that leaves room for two renewal attempts
/// before a lease of `ttl` runs out: half of what the lease is trusted for,
/// `(ttl - drift) / 2`, and at least [`MIN_TTL`].
pub(crate) fn max_renew_interval(ttl: Duration, drift_factor: f64) -> Duration {
    (validity(ttl, Duration::ZERO, clock_drift(ttl, drift_factor)) / 2).max(MIN_TTL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_duration() -> impl Strategy<Value = Duration> {
        prop_oneof![
            (0u64..10_000_000).prop_map(Duration::from_micros),
            any::<u64>().prop_map(Duration::from_millis),
            (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        ]
    }

    fn any_factor() -> impl Strategy<Value = f64> {
        prop_oneof![0.0f64..0.5, any::<f64>()]
    }

    proptest! {
        #[test]
        fn validity_never_exceeds_ttl_and_never_panics(
            ttl in any_duration(), elapsed in any_duration(), factor in any_factor()
        ) {
            let drift = clock_drift(ttl, factor);
            let left = validity(ttl, elapsed, drift);
            prop_assert!(left <= ttl, "validity {left:?} exceeds ttl {ttl:?}");
            prop_assert!(drift >= DRIFT_FLOOR, "drift {drift:?} below the floor");
            if elapsed >= ttl {
                prop_assert_eq!(left, Duration::ZERO, "a lease older than its ttl must be worthless");
            }
        }

        #[test]
        fn deadline_is_inside_the_ttl(ttl in any_duration(), factor in any_factor()) {
            let now = Instant::now();
            if let Some(deadline) = lease_deadline(now, ttl, factor) {
                prop_assert!(deadline > now, "deadline must be in the future");
                prop_assert!(deadline - now < ttl, "deadline must leave room for drift");
            }
        }
    }

    proptest! {
        #[test]
        fn renewal_intervals_leave_room_for_two_attempts(ttl in any_duration(), factor in any_factor()) {
            let max = max_renew_interval(ttl, factor);
            let usable = validity(ttl, Duration::ZERO, clock_drift(ttl, factor));
            prop_assert!(max >= MIN_TTL, "interval {max:?} below a millisecond");
            if usable >= MIN_TTL * 2 {
                prop_assert!(max.saturating_mul(2) <= usable, "two intervals {max:?} exceed the usable {usable:?}");
            }
            prop_assert!(default_renew_interval(ttl, factor) <= max, "the default exceeds the maximum");
        }
    }

    #[test]
    fn a_one_millisecond_lease_has_no_usable_validity() {
        assert_eq!(
            lease_deadline(Instant::now(), Duration::from_millis(1), 0.01),
            None
        );
    }
}
