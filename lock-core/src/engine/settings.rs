//! How the engine takes, waits for and keeps holds: the parts of the config
//! it reads, gathered once when a manager is built.

use std::time::Duration;

use serde::Deserialize;

use crate::error::LockError;
use crate::ttl::MIN_TTL;

/// How a waiting acquire learns that the lock may be free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum WaitMode {
    /// Subscribe to the lock's release channel and try again when a release is
    /// published, or when the holder's TTL runs out, whichever comes first.
    #[default]
    Notify,
    /// Try again after a backoff delay ([`RetryPolicy`]), for deployments that
    /// forbid pub/sub.
    Poll,
}

/// Exponential backoff with full jitter between acquire attempts: attempt `n`
/// sleeps a uniformly random time in `[0, min(max_delay, initial_delay × multiplier^n)]`,
/// so contenders that failed together do not retry together. A wait never sleeps
/// past the moment the holder's TTL runs out.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// The cap of the first delay. Default: 10 ms.
    #[serde(with = "humantime_serde")]
    pub initial_delay: Duration,
    /// The largest cap any delay reaches. Default: 200 ms.
    #[serde(with = "humantime_serde")]
    pub max_delay: Duration,
    /// How much the cap grows per attempt; at least 1. Default: 2.
    pub multiplier: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(200),
            multiplier: 2.0,
        }
    }
}

impl RetryPolicy {
    /// A policy with the given bounds and a multiplier of 2.
    pub fn new(initial_delay: Duration, max_delay: Duration) -> Self {
        RetryPolicy {
            initial_delay,
            max_delay,
            multiplier: 2.0,
        }
    }

    /// Checks the policy; errors name `retry.<field>`.
    pub fn validate(&self) -> Result<(), LockError> {
        if self.initial_delay < MIN_TTL {
            return Err(LockError::config(
                "retry.initial_delay",
                "must be at least 1 ms",
            ));
        }
        if self.max_delay < self.initial_delay {
            return Err(LockError::config(
                "retry.max_delay",
                "must not be below retry.initial_delay",
            ));
        }
        if self.max_delay > Duration::from_secs(60) {
            return Err(LockError::config("retry.max_delay", "must be at most 60 s"));
        }
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return Err(LockError::config(
                "retry.multiplier",
                "must be a finite number of at least 1",
            ));
        }
        Ok(())
    }

    /// The upper bound of the delay before attempt `attempt` (0 for the first retry).
    pub fn delay_cap(&self, attempt: u32) -> Duration {
        let exponent = i32::try_from(attempt).unwrap_or(i32::MAX);
        let factor = self.multiplier.max(1.0).powi(exponent);
        Duration::try_from_secs_f64(self.initial_delay.as_secs_f64() * factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// A random delay in `[0, delay_cap(attempt)]` (full jitter).
    pub fn jittered_delay(&self, attempt: u32) -> Duration {
        use rand::Rng;
        let cap = self.delay_cap(attempt);
        let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }
}

/// Automatic renewal of held leases.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct WatchdogConfig {
    /// Whether held leases are renewed in the background until released.
    /// Default: true.
    pub enabled: bool,
    /// How often to renew. At most `(ttl - clock drift) / 2`, so a second
    /// attempt fits before the deadline if one fails. Default: a third of the
    /// TTL.
    #[serde(with = "humantime_serde")]
    pub interval: Option<Duration>,
    /// Stop renewing a lease this long after it was acquired (or resumed),
    /// so no holder keeps a lock forever: the last renewal asks only for
    /// what is left, the key runs out at about the cap (a reentrant hold,
    /// which never shortens, up to a TTL later), and `lost()` reports
    /// [`LossReason::MaxHoldReached`](crate::LossReason::MaxHoldReached). A
    /// holder's own `extend` still runs, but the next renewal brings the key
    /// back to the cap. Default: none (renew until released).
    #[serde(with = "humantime_serde")]
    pub max_hold: Option<Duration>,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        WatchdogConfig {
            enabled: true,
            interval: None,
            max_hold: None,
        }
    }
}

impl WatchdogConfig {
    pub(crate) fn validate(&self, ttl: Duration, drift_factor: f64) -> Result<(), LockError> {
        if self.max_hold.is_some_and(|max_hold| max_hold < MIN_TTL) {
            return Err(LockError::config(
                "watchdog.max_hold",
                "must be at least 1 ms (leave it out to renew until released)",
            ));
        }
        if let Some(interval) = self.interval {
            if interval < MIN_TTL {
                return Err(LockError::config(
                    "watchdog.interval",
                    "must be at least 1 ms",
                ));
            }
            // Two renewal attempts must fit before the deadline, or one lost
            // reply loses the lease.
            let largest = crate::engine::lease::timing::max_renew_interval(ttl, drift_factor);
            if interval > largest {
                return Err(LockError::config(
                    "watchdog.interval",
                    format!(
                        "{} leaves no room for a second renewal attempt before a {} lease \
                         runs out; the largest allowed is {} ((ttl - clock drift) / 2)",
                        humantime::format_duration(interval),
                        humantime::format_duration(ttl),
                        humantime::format_duration(largest),
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// What the engine reads of a config, taken once when a manager is built
/// from a validated config (`crate::config` reads it).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The TTL of every lease, until a holder extends it.
    pub(crate) ttl: Duration,
    /// The prefix of every key.
    pub(crate) key_prefix: String,
    /// How long `acquire` waits.
    pub(crate) wait_timeout: Duration,
    pub(crate) wait_mode: WaitMode,
    /// Whether waiters queue in arrival order.
    pub(crate) fair: bool,
    pub(crate) retry: RetryPolicy,
    pub(crate) watchdog: WatchdogConfig,
    /// The share of a TTL kept back for clock drift between nodes.
    pub(crate) clock_drift_factor: f64,
    /// How many lock names label metrics.
    pub(crate) metrics_lock_names: u32,
}

/// The renewal interval in force: `watchdog.interval`, or a third of `ttl`.
pub(crate) fn renew_interval(
    watchdog: &WatchdogConfig,
    ttl: Duration,
    drift_factor: f64,
) -> Duration {
    watchdog
        .interval
        .unwrap_or_else(|| crate::engine::lease::timing::default_renew_interval(ttl, drift_factor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_caps_grow_and_saturate() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay_cap(0), Duration::from_millis(10));
        assert_eq!(policy.delay_cap(1), Duration::from_millis(20));
        assert_eq!(policy.delay_cap(100), Duration::from_millis(200));
        assert_eq!(policy.delay_cap(u32::MAX), Duration::from_millis(200));
        for attempt in 0..20 {
            assert!(policy.jittered_delay(attempt) <= policy.delay_cap(attempt));
        }
    }
}
