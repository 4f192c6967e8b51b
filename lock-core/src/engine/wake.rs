//! What a waiter sleeps on between attempts: wake-ups a backend delivers
//! when the hold it waits for may have ended.

use std::fmt;

use async_trait::async_trait;

use crate::hold::HoldToken;
use crate::key::FencingToken;

/// A waiter's subscription to the releases of one resource, from
/// [`LockBackend::watch_releases`](crate::LockBackend::watch_releases).
///
/// # Contract
///
/// A wake-up is a stored permit: one delivered while the waiter was busy
/// with an attempt is not lost. The engine marks the wake-ups it has seen
/// when an attempt starts ([`attempt_starting`](Self::attempt_starting)) and
/// spends them only when that attempt took the hold or found it held
/// ([`attempt_finished`](Self::attempt_finished)). A subscription dropped
/// with wake-ups it did not spend passes them on to another waiter of the
/// same resource, so a release is never lost with the waiter it woke.
#[async_trait]
pub trait Wakeups: Send + Sync + fmt::Debug {
    /// Completes at the next wake-up, or at once if one is stored; also
    /// when a hold it waits behind may have ended with no release to tell
    /// (a grant to another waiter's offer, which may have died).
    async fn released(&mut self);

    /// Marks the wake-ups delivered so far: an attempt starts.
    fn attempt_starting(&mut self);

    /// Spends the wake-ups marked by [`attempt_starting`](Self::attempt_starting):
    /// the attempt took the hold or found it held.
    fn attempt_finished(&mut self);

    /// Called before [`attempt_finished`](Self::attempt_finished) when the
    /// attempt found the hold held. A waiter woken because its weight fit
    /// ([`wake_when_fits`](Self::wake_when_fits)) that finds the room taken
    /// passes the wake-up to lighter waiters, which may still fit. The
    /// default does nothing.
    fn attempt_refused(&mut self) {}

    /// Wakes this waiter at every release, not only when it is the longest
    /// waiting one (fair mode: the queue, not the wake-up, decides who wins).
    fn wake_on_every_release(&self);

    /// Wakes this waiter, a semaphore's outside fair mode, only at a
    /// release that leaves room for `weight` of `limit` permits beside the
    /// weight in use and the waiters ahead of it woken by the same release,
    /// or at one that does not say how much is in use. The default wakes
    /// it at every release.
    fn wake_when_fits(&self, weight: u32, limit: u32) {
        let _ = (weight, limit);
        self.wake_on_every_release();
    }

    /// Names the holds this waiter has on offer for a grant on the server
    /// (fair mode; see [`Claim::Lock`]), in place of those
    /// named before: its answered attempt's, and the one about to be sent.
    /// A grant published for one of them is kept for
    /// [`take_grant`](Self::take_grant) and wakes this waiter alone; the
    /// engine takes up only a grant to its answered attempt. The default
    /// keeps nothing: grants are then found by the next attempt.
    ///
    /// [`Claim::Lock`]: crate::Claim::Lock
    fn expect_grants(&self, holds: &[&HoldToken]) {
        let _ = holds;
    }

    /// A grant published for a hold named by
    /// [`expect_grants`](Self::expect_grants) since. Taken once.
    fn take_grant(&mut self) -> Option<Grant> {
        None
    }

    /// Whether other waiters of this process were already watching when
    /// this one joined: a release published before the subscription was
    /// confirmed woke one of them, so this waiter need not try again at once.
    fn joined_behind_others(&self) -> bool;
}

/// A grant a release made on the server to a waiter's offer, as its
/// message named it ([`Wakeups::take_grant`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Grant {
    /// The [`attempt_value`](HoldToken::attempt_value) of the hold granted.
    pub attempt: String,
    /// The fencing token the release issued to it.
    pub fencing_token: FencingToken,
    /// A semaphore permit's slot; `None` for a lock or a write.
    pub slot: Option<u32>,
}
