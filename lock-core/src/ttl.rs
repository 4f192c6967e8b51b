//! The bounds of a TTL, which both layers check: what a caller may ask for
//! and what Redis can hold exactly.

use std::time::Duration;

use crate::error::LockError;

/// The shortest TTL accepted: Redis expires keys with millisecond precision.
pub const MIN_TTL: Duration = Duration::from_millis(1);

/// The longest TTL accepted. Redis itself accepts more, but a lock that outlives
/// its crashed holder by more than a month is a mistake in the caller's config;
/// long jobs should keep a short TTL renewed by the watchdog.
pub const MAX_TTL: Duration = Duration::from_secs(30 * 24 * 60 * 60);

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ttl_millis_is_as_millis_saturated(ttl in prop_oneof![
            (0u64..10_000_000).prop_map(Duration::from_micros),
            any::<u64>().prop_map(Duration::from_millis),
            (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        ]) {
            let expected = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
            prop_assert_eq!(ttl_millis(ttl), expected);
        }
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
}
