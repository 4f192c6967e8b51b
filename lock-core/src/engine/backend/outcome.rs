//! What a renewal and a release found: the answers of
//! [`LockBackend::extend`](crate::LockBackend::extend) and
//! [`LockBackend::release`](crate::LockBackend::release), and of the
//! optional traits that renew (a hand-off's take-over).

use std::time::Duration;

/// What a renewal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExtendOutcome {
    /// The lease now runs for `ttl` from the moment the server ran the
    /// command: the requested TTL, or longer where the strategy never shortens
    /// a hold that several guards share (reentrant). The holder's deadline is
    /// this TTL counted from when the request was sent, minus drift, earlier or
    /// later than before.
    Extended {
        /// The TTL the key was left with.
        ttl: Duration,
    },
    /// The key is gone or held by another hold (another owner, or a later
    /// hold of the same owner); nothing was changed.
    NotHeld,
}

/// What a release found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseOutcome {
    /// The caller's hold was removed.
    Released,
    /// The key is gone or held by another hold (another owner, or a later
    /// hold of the same owner); nothing was changed.
    NotHeld,
}
