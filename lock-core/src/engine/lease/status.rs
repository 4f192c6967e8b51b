//! A lease's status, and a `tokio::sync::watch` channel for its changes.

use std::time::Instant;

use tokio::sync::watch;

use crate::error::LossReason;

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

/// A lease's status; its watchdog and `lost()` wait for changes.
#[derive(Debug)]
pub(crate) struct StatusCell(watch::Sender<LeaseStatus>);

impl StatusCell {
    pub(crate) fn new(status: LeaseStatus) -> Self {
        StatusCell(watch::Sender::new(status))
    }

    pub(crate) fn get(&self) -> LeaseStatus {
        *self.0.borrow()
    }

    /// Runs `change` on the status; if it says it changed it, every waiter
    /// is told. Returns what `change` said.
    pub(crate) fn modify(&self, change: impl FnOnce(&mut LeaseStatus) -> bool) -> bool {
        self.0.send_if_modified(change)
    }

    /// Sets the status; returns the one it had.
    pub(crate) fn replace(&self, status: LeaseStatus) -> LeaseStatus {
        self.0.send_replace(status)
    }

    /// A receiver that has seen the status as it is now: its `changed()`
    /// completes at the next change.
    pub(crate) fn changes(&self) -> watch::Receiver<LeaseStatus> {
        self.0.subscribe()
    }

    /// Completes with the status once `done` holds for it.
    pub(crate) async fn wait_for(&self, done: impl FnMut(&LeaseStatus) -> bool) -> LeaseStatus {
        match self.0.subscribe().wait_for(done).await {
            Ok(status) => *status,
            // Only when the sender is gone, and `self` is the sender.
            Err(_) => self.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;

    fn held() -> LeaseStatus {
        LeaseStatus::Held {
            valid_until: Instant::now() + Duration::from_secs(60),
        }
    }

    /// Every change reaches a waiter, however the change and the wait
    /// interleave on two threads: a thousand rounds of one change against
    /// one waiter, each bounded.
    #[test]
    fn no_change_is_missed() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            for _ in 0..1000 {
                let cell = Arc::new(StatusCell::new(held()));
                let mut changes = cell.changes();
                let waiter = {
                    let cell = Arc::clone(&cell);
                    tokio::spawn(async move {
                        changes.changed().await.expect("the cell lives");
                        cell.wait_for(|status| !matches!(status, LeaseStatus::Held { .. }))
                            .await
                    })
                };
                let other = {
                    let cell = Arc::clone(&cell);
                    tokio::spawn(async move {
                        cell.replace(LeaseStatus::Released);
                    })
                };
                other.await.expect("change");
                let ended = tokio::time::timeout(Duration::from_secs(5), waiter)
                    .await
                    .expect("a change was missed")
                    .expect("waiter");
                assert_eq!(ended, LeaseStatus::Released);
            }
        });
    }

    #[test]
    fn modify_tells_waiters_only_of_changes() {
        let cell = StatusCell::new(held());
        let mut changes = cell.changes();
        assert!(!cell.modify(|_| false));
        assert!(!changes.has_changed().expect("the cell lives"));
        let lost = LeaseStatus::Lost {
            reason: LossReason::Expired,
            valid_until: Instant::now(),
        };
        assert!(cell.modify(|status| {
            *status = lost;
            true
        }));
        assert!(changes.has_changed().expect("the cell lives"));
        assert_eq!(*changes.borrow_and_update(), lost);
        assert_eq!(cell.replace(LeaseStatus::Released), lost);
        assert!(changes.has_changed().expect("the cell lives"));
        assert_eq!(cell.get(), LeaseStatus::Released);
    }
}
