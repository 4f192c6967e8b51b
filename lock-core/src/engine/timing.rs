//! Lease arithmetic: how long a lease can be trusted, computed without panics.
//!
//! Every function here saturates instead of overflowing or underflowing, because
//! peers have shipped `ttl - elapsed - drift` on unsigned durations and panicked
//! (or wrapped to a lease of centuries) when a reply came back late.

use std::time::{Duration, Instant};

use crate::error::LockError;

/// The shortest TTL accepted: Redis expires keys with millisecond precision.
pub const MIN_TTL: Duration = Duration::from_millis(1);

/// The longest TTL accepted. Redis itself accepts more, but a lock that outlives
/// its crashed holder by more than a month is a mistake in the caller's config;
/// long jobs should keep a short TTL renewed by the watchdog.
pub const MAX_TTL: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// The fixed part of the clock-drift allowance, added to `ttl × drift_factor`.
/// It covers the granularity of Redis's expiry (1 ms) and of our timers.
pub(crate) const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// Checks that `ttl` is a TTL Redis can hold exactly: at least [`MIN_TTL`], at
/// most [`MAX_TTL`], and a whole number of milliseconds.
pub fn validate_ttl(ttl: Duration) -> Result<(), LockError> {
    let reason = if ttl.is_zero() {
        "the TTL is zero".to_owned()
    } else if ttl < MIN_TTL {
        "the TTL is below one millisecond, the precision of Redis expiry".to_owned()
    } else if ttl > MAX_TTL {
        format!(
            "the TTL is above the maximum of {}",
            humantime::format_duration(MAX_TTL)
        )
    } else if !ttl.subsec_nanos().is_multiple_of(1_000_000) {
        "the TTL is not a whole number of milliseconds".to_owned()
    } else {
        return Ok(());
    };
    Err(LockError::InvalidTtl { ttl, reason })
}

/// The TTL in whole milliseconds, as sent to Redis (`PX`, `PEXPIRE`).
pub fn ttl_millis(ttl: Duration) -> u64 {
    // In u64 arithmetic (`as_millis` is u128): this runs on every acquire.
    ttl.as_secs()
        .saturating_mul(1000)
        .saturating_add(u64::from(ttl.subsec_millis()))
}

/// A count of milliseconds as decimal text, kept inline: the `PX` or
/// `PEXPIRE` argument of every acquire and renewal, made without allocating
/// (an acquire is a few microseconds of client work, and a `String` per
/// call is a measurable part of it).
///
/// ```
/// use std::time::Duration;
/// use lock_core::strategy::MillisText;
///
/// assert_eq!(MillisText::of_ttl(Duration::from_millis(30_000)).as_str(), "30000");
/// assert_eq!(MillisText::new(u64::MAX).as_str(), "18446744073709551615");
/// ```
#[derive(Clone, Copy)]
pub struct MillisText {
    digits: [u8; 20],
    start: u8,
}

impl MillisText {
    /// `millis` in decimal.
    pub const fn new(millis: u64) -> Self {
        // u64::MAX has 20 digits; the digits are written from the right.
        let mut digits = [b'0'; 20];
        let mut start = digits.len();
        let mut rest = millis;
        loop {
            start -= 1;
            digits[start] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        MillisText {
            digits,
            start: start as u8,
        }
    }

    /// A TTL in whole milliseconds ([`ttl_millis`]), in decimal.
    pub fn of_ttl(ttl: Duration) -> Self {
        Self::new(ttl_millis(ttl))
    }

    /// The digits as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits are ever written. Were that ever broken, an
        // empty argument makes Redis refuse the command, where "0" would
        // expire the key at once.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    /// The digits as bytes, as sent to Redis.
    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[usize::from(self.start)..]
    }
}

impl std::fmt::Debug for MillisText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for MillisText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `PTTL` reply as a remaining TTL: `None` for a key without expiry (-1)
/// and, defensively, for any other negative value.
pub fn remaining_from_pttl(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

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
        fn ttl_millis_is_as_millis_saturated(ttl in any_duration()) {
            let expected = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
            prop_assert_eq!(ttl_millis(ttl), expected);
        }

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

    proptest! {
        #[test]
        fn millis_text_is_the_decimal_number(millis in prop_oneof![0u64..100_000, any::<u64>()]) {
            let (text, expected) = (MillisText::new(millis), millis.to_string());
            prop_assert_eq!(text.as_str(), expected.as_str());
            prop_assert_eq!(text.as_bytes(), expected.as_bytes());
        }
    }

    #[test]
    fn millis_text_of_the_edges() {
        assert_eq!(MillisText::new(0).as_str(), "0");
        assert_eq!(MillisText::new(9).as_str(), "9");
        assert_eq!(MillisText::new(10).as_str(), "10");
        assert_eq!(
            MillisText::of_ttl(Duration::from_micros(1_999)).as_str(),
            "1"
        );
        assert_eq!(
            MillisText::of_ttl(Duration::MAX).as_str(),
            u64::MAX.to_string()
        );
    }

    #[test]
    fn ttl_bounds() {
        assert!(validate_ttl(Duration::ZERO).is_err());
        assert!(validate_ttl(Duration::from_micros(999)).is_err());
        assert!(validate_ttl(Duration::from_micros(1500)).is_err());
        assert!(validate_ttl(MAX_TTL + Duration::from_millis(1)).is_err());
        assert!(validate_ttl(Duration::MAX).is_err());
        assert!(validate_ttl(MIN_TTL).is_ok());
        assert!(validate_ttl(MAX_TTL).is_ok());
    }

    #[test]
    fn a_one_millisecond_lease_has_no_usable_validity() {
        assert_eq!(
            lease_deadline(Instant::now(), Duration::from_millis(1), 0.01),
            None
        );
    }
}
