//! Watching a name: a subscription to its channel while the manager waits
//! by notification, with a timer as the fallback, for the handles whose
//! waits are reads (an election's observer, a latch's wait).

use std::time::Duration;

use crate::engine::manager::LockManager;
use crate::engine::settings::WaitMode;
use crate::engine::wake::Wakeups;
use crate::key::LockKey;

/// How long a watcher sleeps at most between reads: what a lost pub/sub
/// message costs it, and how often it reads without a subscription.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// Every message on a name's channel, or none: then reads once a
/// [`RECHECK`].
#[derive(Debug)]
pub(crate) struct NameWatch {
    wakeups: Option<Box<dyn Wakeups>>,
}

impl NameWatch {
    /// Subscribes to `key`'s channel, woken by every message on it. Without
    /// a subscription (`wait_mode = "poll"`, a user whose ACL grants no
    /// channels, a subscriber connection that fails) the watch reads by the
    /// timer alone; `what` names the watcher in the log that says so.
    pub(crate) async fn open(manager: &LockManager, key: &LockKey, what: &'static str) -> Self {
        let wakeups = if manager.settings().wait_mode == WaitMode::Notify {
            match manager.backend().watch_releases(key).await {
                Ok(wakeups) => wakeups,
                Err(err) => {
                    tracing::debug!(name = key.name(), watcher = what, error = %err, "cannot subscribe; reading every second");
                    None
                }
            }
        } else {
            None
        };
        if let Some(wakeups) = wakeups.as_ref() {
            wakeups.wake_on_every_release();
        }
        NameWatch { wakeups }
    }

    /// Call before each read: a message that arrives during it still ends
    /// the next [`sleep`](Self::sleep).
    pub(crate) fn reading(&mut self) {
        if let Some(wakeups) = self.wakeups.as_mut() {
            wakeups.attempt_starting();
        }
    }

    /// Call after each read that succeeded.
    pub(crate) fn read(&mut self) {
        if let Some(wakeups) = self.wakeups.as_mut() {
            wakeups.attempt_finished();
        }
    }

    /// Sleeps until a message on the name's channel, or `at_most`
    /// (at most [`RECHECK`]).
    pub(crate) async fn sleep(&mut self, at_most: Duration) {
        let at_most = at_most.min(RECHECK);
        match self.wakeups.as_mut() {
            Some(wakeups) => {
                tokio::select! {
                    () = wakeups.released() => {}
                    () = tokio::time::sleep(at_most) => {}
                }
            }
            None => tokio::time::sleep(at_most).await,
        }
    }
}
