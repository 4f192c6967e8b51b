//! Grants still on their way when an acquire returns, and the later commands
//! of the same hold that must not overtake them.
//!
//! An acquire returns as soon as a majority granted; the `SET`s to the other
//! nodes go on in the background. A release sent right after must reach each
//! of those nodes after its `SET`, or the `SET` lands on a key already
//! released and holds it there for the whole TTL: a released lock still
//! counted against every later acquire on that node. Sending the `SET` first
//! is not enough: a client may hand its commands to the connection in another
//! order than they were sent. The `redis` crate's connection queue holds 50
//! commands; when it is full, the commands waiting for room are let in by
//! whichever task runs first, and the background task that owns a `SET` may
//! run after the caller's release (seen with 16 tasks on five local nodes:
//! up to every key left behind on a node). So a command of the same hold on a
//! node whose grant is in flight waits for that grant's reply first.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use lock_core::{HoldToken, LockKey};
use tokio::sync::Notify;

use crate::round::{Round, Tagged};

/// The holds whose grants are still in flight on some node, by key and hold.
#[derive(Default)]
pub(crate) struct Landings {
    in_flight: Mutex<HashMap<String, Arc<Landing>>>,
}

impl fmt::Debug for Landings {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let holds = self
            .in_flight
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .len();
        formatter
            .debug_struct("Landings")
            .field("holds_in_flight", &holds)
            .finish()
    }
}

/// One hold's grants: which nodes' `SET`s have answered (or failed).
pub(crate) struct Landing {
    landed: Box<[AtomicBool]>,
    notify: Notify,
}

impl Landing {
    fn land(&self, node: usize) {
        if let Some(landed) = self.landed.get(node) {
            landed.store(true, Ordering::Release);
        }
        self.notify.notify_waiters();
    }

    fn land_all(&self) {
        for landed in self.landed.iter() {
            landed.store(true, Ordering::Release);
        }
        self.notify.notify_waiters();
    }

    /// Returns once the grant sent to `node` has answered or failed (at
    /// once for a node whose grant was not in flight).
    pub(crate) async fn landed(&self, node: usize) {
        let Some(landed) = self.landed.get(node) else {
            return;
        };
        loop {
            // Registered before the check, so a landing between the two
            // still wakes this waiter.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if landed.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

/// The name of a hold in [`Landings`]: the key's length first, so no key and
/// hold pair can spell another's.
fn hold_id(key: &LockKey, hold: &HoldToken) -> String {
    id_of(key.redis_key(), hold.value())
}

fn id_of(key: &str, hold: &str) -> String {
    let mut id = String::with_capacity(key.len() + hold.len() + 8);
    id.push_str(&key.len().to_string());
    id.push(':');
    id.push_str(key);
    id.push_str(hold);
    id
}

impl Landings {
    /// Lets the grants of an acquire's `round` still in flight finish in the
    /// background, and until each has answered, makes [`Landings::of`] give
    /// `key` and `hold`'s [`Landing`] so later commands can wait for it.
    pub(crate) fn track<F>(
        self: &Arc<Self>,
        key: &LockKey,
        hold: &HoldToken,
        nodes: usize,
        round: Round<F>,
    ) where
        F: Future<Output = Tagged<bool>> + Send + 'static,
    {
        if round.in_flight().is_empty() {
            return;
        }
        let landing = Arc::new(Landing {
            landed: (0..nodes)
                .map(|node| AtomicBool::new(!round.in_flight().contains(&node)))
                .collect(),
            notify: Notify::new(),
        });
        let id = hold_id(key, hold);
        self.in_flight
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(id.clone(), Arc::clone(&landing));
        let registration = Registration {
            landings: Arc::clone(self),
            id,
            landing,
        };
        // The registration goes with the background task: once every grant
        // answered, or if the task is dropped (the runtime shutting down), it
        // lands them all and leaves the map.
        round.settle_in_background(move |node| registration.landing.land(node));
    }

    /// The landing of `key` and `hold`'s grants, while some are in flight.
    pub(crate) fn of(&self, key: &LockKey, hold: &HoldToken) -> Option<Arc<Landing>> {
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if in_flight.is_empty() {
            return None;
        }
        in_flight.get(&hold_id(key, hold)).cloned()
    }
}

/// A hold's entry in [`Landings`], removed when dropped.
struct Registration {
    landings: Arc<Landings>,
    id: String,
    landing: Arc<Landing>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.landing.land_all();
        let mut in_flight = self
            .landings
            .in_flight
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        // A later acquire of the same key and hold may have registered since.
        if in_flight
            .get(&self.id)
            .is_some_and(|current| Arc::ptr_eq(current, &self.landing))
        {
            in_flight.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn landing(in_flight: &[usize]) -> Landing {
        Landing {
            landed: (0..3)
                .map(|node| AtomicBool::new(!in_flight.contains(&node)))
                .collect(),
            notify: Notify::new(),
        }
    }

    #[tokio::test]
    async fn a_node_not_in_flight_does_not_wait() {
        let landing = landing(&[1]);
        tokio::time::timeout(Duration::from_secs(1), landing.landed(0))
            .await
            .expect("node 0 was not in flight");
        tokio::time::timeout(Duration::from_secs(1), landing.landed(7))
            .await
            .expect("a node out of range has nothing to wait for");
    }

    #[tokio::test]
    async fn a_waiter_wakes_when_its_node_lands() {
        let landing = Arc::new(landing(&[1, 2]));
        let waiter = tokio::spawn({
            let landing = Arc::clone(&landing);
            async move { landing.landed(2).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        landing.land(1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "node 2 has not landed yet");
        landing.land(2);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("woken when node 2 landed")
            .expect("waiter");
    }

    #[test]
    fn ids_do_not_run_into_each_other() {
        assert_ne!(id_of("lock:{a}", "bc:00"), id_of("lock:{a}b", "c:00"));
        assert_eq!(id_of("k", "h"), "1:kh");
    }
}
