//! Redlock's settings and the checks of a config before any node is
//! reached: an odd number of nodes, the TTL above the per-node timeout, no
//! holder information.

use std::time::Duration;

use lock_core::{LockConfig, LockError};

use crate::backend::quorum;

/// Redlock's own settings; the rest comes from [`LockConfig`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RedlockOptions {
    /// How long one attempt waits for one node. See [`LockConfig::node_timeout`].
    pub node_timeout: Duration,
    /// See [`LockConfig::clock_drift_factor`].
    pub clock_drift_factor: f64,
}

impl RedlockOptions {
    /// Options with the given node timeout and drift factor.
    pub fn new(node_timeout: Duration, clock_drift_factor: f64) -> Self {
        RedlockOptions {
            node_timeout,
            clock_drift_factor,
        }
    }
}

impl From<&LockConfig> for RedlockOptions {
    fn from(config: &LockConfig) -> Self {
        RedlockOptions::new(config.node_timeout, config.clock_drift_factor)
    }
}

impl Default for RedlockOptions {
    fn default() -> Self {
        Self::from(&LockConfig::default())
    }
}

/// Why no holder information: each node's grant is a bare `SET NX PX`, the
/// cheapest command a node can run, so a slow node costs the round as little
/// as possible. Storing who holds the lock would take a script on every node,
/// and reading it a round of answers that can disagree (a minority of nodes
/// keeps an earlier holder's until its TTL; each node's clock names another
/// time). `fencing_counter_ttl` is accepted and changes nothing: Redlock
/// keeps no counter, and a released lock leaves no key behind.
pub fn validate_config(config: &LockConfig) -> Result<(), LockError> {
    config.validate()?;
    if config.node_timeout >= config.ttl {
        // Named after the one of the two the user changed: a short `--ttl`
        // is the usual cause, and a user who never set `node_timeout` should
        // not be told about it first.
        let defaults = LockConfig::default();
        let field = if config.ttl == defaults.ttl && config.node_timeout != defaults.node_timeout {
            "node_timeout"
        } else {
            "ttl"
        };
        return Err(LockError::InvalidConfig {
            field: field.into(),
            reason: format!(
                "ttl ({}) must be above node_timeout ({}): one slow node could use up the \
                 whole lease; raise ttl or lower node_timeout",
                humantime::format_duration(config.ttl),
                humantime::format_duration(config.node_timeout)
            ),
        });
    }
    check_node_count(config.nodes.len())?;
    if config.holder_info {
        return Err(LockError::InvalidConfig {
            field: "holder_info".into(),
            reason: "the redlock strategy stores no holder information (each node's grant is \
                     a bare SET NX PX); use the single or reentrant strategy to see who holds \
                     a lock"
                .into(),
        });
    }
    Ok(())
}

/// Refuses two nodes, whose majority is both, so that one failure stops
/// every lock (worse than one node).
pub(crate) fn check_node_count(count: usize) -> Result<(), LockError> {
    if count == 2 {
        return Err(LockError::InvalidConfig {
            field: "nodes".into(),
            reason: "Redlock over 2 nodes needs both for a majority, so one failed node stops \
                     every lock: use 3 or 5 independent masters, or the single strategy on one \
                     node"
                .into(),
        });
    }
    Ok(())
}

/// Warns of an even count of nodes, which needs one node more for its
/// majority than the odd count below it and survives no more failures.
/// Called once per backend, so that a `distlock` call says it once.
pub(crate) fn warn_if_even(count: usize) {
    if count >= 4 && count.is_multiple_of(2) {
        tracing::warn!(
            "Redlock over {count} nodes needs {} for a majority and survives {} failed nodes, \
             as {} nodes do: the extra node adds a round trip and no availability",
            quorum(count),
            count - quorum(count),
            count - 1
        );
    }
}
