//! A lease's status and a signal for its changes.
//!
//! What `tokio::sync::watch` gives, without what it costs on every acquire
//! and release when, as usual, nobody is waiting: its own allocation, and a
//! walk over eight wake-up lists (each behind a lock) at every change. Here a
//! change with no waiter is a lock, a store and two atomics.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::Notify;

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

#[derive(Debug)]
pub(crate) struct StatusCell {
    status: Mutex<LeaseStatus>,
    /// Bumped after every change, so that a waiter can tell one happened.
    /// A `usize`, as in `tokio::sync::watch`, for targets without 64-bit
    /// atomics: a waiter compares it for inequality only, and would have to
    /// miss 2^32 changes to be fooled.
    version: AtomicUsize,
    /// How many are waiting for a change: a change wakes nobody without.
    waiting: AtomicUsize,
    changed: Notify,
}

impl StatusCell {
    pub(crate) fn new(status: LeaseStatus) -> Self {
        StatusCell {
            status: Mutex::new(status),
            version: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            changed: Notify::new(),
        }
    }

    pub(crate) fn get(&self) -> LeaseStatus {
        *self.lock()
    }

    /// Runs `change` on the status under its lock; if it says it changed
    /// it, every waiter is told (after `change` returned, so whatever it
    /// did is done before any waiter looks). Returns what `change` said.
    pub(crate) fn modify(&self, change: impl FnOnce(&mut LeaseStatus) -> bool) -> bool {
        let changed = change(&mut self.lock());
        if changed {
            // SeqCst against `Waiting::register`: either this sees the
            // waiter, or the waiter sees the new version.
            self.version.fetch_add(1, Ordering::SeqCst);
            if self.waiting.load(Ordering::SeqCst) > 0 {
                self.changed.notify_waiters();
            }
        }
        changed
    }

    /// Sets the status; returns the one it had.
    pub(crate) fn replace(&self, status: LeaseStatus) -> LeaseStatus {
        let mut before = status;
        self.modify(|current| {
            std::mem::swap(current, &mut before);
            true
        });
        before
    }

    /// The number of changes so far: pass it to [`changed_since`](Self::changed_since).
    pub(crate) fn version(&self) -> usize {
        self.version.load(Ordering::SeqCst)
    }

    /// Completes once the status has changed since `seen` was read (at
    /// once if it already has); returns the version then.
    pub(crate) fn changed_since(&self, seen: usize) -> impl Future<Output = usize> + '_ {
        self.wait(move |cell| {
            let now = cell.version();
            (now != seen).then_some(now)
        })
    }

    /// Completes with the status once `done` holds for it.
    pub(crate) async fn wait_for(&self, done: impl Fn(&LeaseStatus) -> bool) -> LeaseStatus {
        self.wait(|cell| {
            let status = cell.get();
            done(&status).then_some(status)
        })
        .await
    }

    async fn wait<T>(&self, ready: impl Fn(&Self) -> Option<T>) -> T {
        loop {
            // Made before the check: a `notify_waiters` after it wakes it
            // even before it is first polled.
            let notified = self.changed.notified();
            let _waiting = Waiting::register(&self.waiting);
            if let Some(value) = ready(self) {
                return value;
            }
            notified.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LeaseStatus> {
        // A plain value, valid whatever a panicking holder did.
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One waiter counted in [`StatusCell::waiting`] while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn register(waiting: &'a AtomicUsize) -> Self {
        waiting.fetch_add(1, Ordering::SeqCst);
        Waiting(waiting)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
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
                let seen = cell.version();
                let waiter = {
                    let cell = Arc::clone(&cell);
                    tokio::spawn(async move {
                        let changed = cell.changed_since(seen).await;
                        let ended = cell
                            .wait_for(|status| !matches!(status, LeaseStatus::Held { .. }))
                            .await;
                        (changed, ended)
                    })
                };
                let other = {
                    let cell = Arc::clone(&cell);
                    tokio::spawn(async move {
                        cell.replace(LeaseStatus::Released);
                    })
                };
                other.await.expect("change");
                let (changed, ended) = tokio::time::timeout(Duration::from_secs(5), waiter)
                    .await
                    .expect("a change was missed")
                    .expect("waiter");
                assert_eq!(changed, 1);
                assert_eq!(ended, LeaseStatus::Released);
            }
        });
    }

    #[test]
    fn modify_reports_and_counts_only_changes() {
        let cell = StatusCell::new(held());
        assert!(!cell.modify(|_| false));
        assert_eq!(cell.version(), 0);
        let lost = LeaseStatus::Lost {
            reason: LossReason::Expired,
            valid_until: Instant::now(),
        };
        assert!(cell.modify(|status| {
            *status = lost;
            true
        }));
        assert_eq!((cell.version(), cell.get()), (1, lost));
        assert_eq!(cell.replace(LeaseStatus::Released), lost);
        assert_eq!(cell.version(), 2);
    }
}
