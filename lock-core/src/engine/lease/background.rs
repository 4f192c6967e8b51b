//! The releases this process sends in the background (dropped guards,
//! acquires whose reply was lost or whose future was dropped, fair-queue
//! leaves), counted so that a process about to exit can wait for them: a
//! runtime that shuts down drops them unsent, and their locks stay held by
//! nobody until their TTL.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Notify;

/// Background releases spawned and not yet finished (or dropped).
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// Woken each time `RUNNING` falls to zero.
static SETTLED: Notify = Notify::const_new();

/// Spawns `work` on `runtime`, counted until it finishes or is dropped.
pub(crate) fn spawn(runtime: &Handle, work: impl Future<Output = ()> + Send + 'static) {
    RUNNING.fetch_add(1, Ordering::AcqRel);
    let done = Done;
    runtime.spawn(async move {
        let _done = done;
        work.await;
    });
}

/// Counts one background task as finished when dropped: when it ends, or
/// when its runtime drops it unfinished.
struct Done;

impl Drop for Done {
    fn drop(&mut self) {
        if RUNNING.fetch_sub(1, Ordering::AcqRel) == 1 {
            SETTLED.notify_waiters();
        }
    }
}

/// Waits, for at most `within`, until every release this process sends in
/// the background has finished: those of dropped guards, of acquires whose
/// reply was lost or whose future was dropped, and fair-queue leaves, from
/// every [`LockManager`](crate::LockManager) of the process. Returns whether
/// none is left.
///
/// Call it before the process exits (or its runtime shuts down), or those
/// releases are dropped unsent and their locks stay held, by nobody, until
/// their TTL. Each is usually one command; one that fails on a connection is
/// tried up to five times, under a second apart, so five command timeouts
/// and a second bound the worst case.
pub async fn settle_background_releases(within: Duration) -> bool {
    let deadline = tokio::time::Instant::now()
        .checked_add(within)
        .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(86_400 * 365));
    loop {
        let settled = SETTLED.notified();
        tokio::pin!(settled);
        // Registered before the count is read, so a task ending in between
        // still wakes this wait.
        settled.as_mut().enable();
        if RUNNING.load(Ordering::Acquire) == 0 {
            return true;
        }
        if tokio::time::timeout_at(deadline, settled).await.is_err() {
            return RUNNING.load(Ordering::Acquire) == 0;
        }
    }
}
