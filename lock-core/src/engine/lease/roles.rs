//! A guard per role over the one lease guard: a permit with its slot and
//! weight, a read with its epoch, a write; and [`LeaseGuard`], what every
//! guard is, so code that watches or renews a hold is written once.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::engine::lease::guard::{LeaseHandle, LockGuard};
use crate::engine::lease::status::LeaseStatus;
use crate::engine::primitives::barrier::PartyGuard;
use crate::engine::primitives::election::Leadership;
use crate::error::{LockError, LossReason};
use crate::hold::{Access, HandoffToken, HoldKind};
use crate::key::{FencingToken, OwnerToken};

mod sealed {
    use crate::engine::lease::guard::LockGuard;

    /// A proof of being this crate: no other can make one, so the methods
    /// below, though reachable through a bound, cannot be called outside.
    pub struct Private(pub(super) ());

    /// The lease under a guard: only this crate's guards have one.
    pub trait Sealed {
        /// The lease guard this guard is over.
        fn lease(&self, _: Private) -> &LockGuard;

        /// This guard as its lease guard, to release or hand off.
        fn into_lease(self, _: Private) -> LockGuard
        where
            Self: Sized;
    }
}

use sealed::Private;

/// What every guard is: a lease on a name, with its fencing token, its
/// deadline, a signal for its loss, and the ways it ends. Implemented by
/// [`LockGuard`], [`PermitGuard`], [`ReadGuard`], [`WriteGuard`],
/// [`Leadership`] and [`PartyGuard`]; sealed, so that code written against it (`fn
/// supervise(guard: impl LeaseGuard)`) sees every guard the library hands
/// out, and no other. The lock, permit, read and write guards also have
/// these as methods of their own, so calling them needs no import;
/// [`Leadership`] has its own words for some (`term`, `resign`) and the
/// rest through this trait. A leadership cannot be handed off: its
/// [`hand_off`](LeaseGuard::hand_off) resigns and answers
/// [`LockError::HandOffUnsupported`].
///
/// # Examples
///
#[cfg_attr(not(doctest), doc = include_str!("../../doc/lease_guard.md"))]
pub trait LeaseGuard: sealed::Sealed + Send + Sync + Sized {
    /// A cloneable view of this lease ([`LockGuard::handle`]).
    fn handle(&self) -> LeaseHandle {
        self.lease(Private(())).handle()
    }

    /// The name ([`LockGuard::key`]).
    fn key(&self) -> &str {
        self.lease(Private(())).key()
    }

    /// The fencing token of this hold ([`LockGuard::fencing_token`]).
    fn fencing_token(&self) -> Option<FencingToken> {
        self.lease(Private(())).fencing_token()
    }

    /// The owner this lease was taken with ([`LockGuard::owner`]).
    fn owner(&self) -> &OwnerToken {
        self.lease(Private(())).owner()
    }

    /// Where the lease stands now ([`LockGuard::status`]).
    fn status(&self) -> LeaseStatus {
        self.lease(Private(())).status()
    }

    /// Until when the lease is known valid ([`LockGuard::valid_until`]).
    fn valid_until(&self) -> Option<Instant> {
        self.lease(Private(())).valid_until()
    }

    /// Whether the lease is held and unexpired ([`LockGuard::is_valid`]).
    fn is_valid(&self) -> bool {
        self.lease(Private(())).is_valid()
    }

    /// How long the lease is still known valid ([`LockGuard::remaining`]).
    fn remaining(&self) -> Duration {
        self.lease(Private(())).remaining()
    }

    /// Completes when the lease ends: `Some(reason)` if lost
    /// ([`LockGuard::lost`]).
    fn lost(&self) -> impl Future<Output = Option<LossReason>> + Send {
        self.lease(Private(())).lost()
    }

    /// Renews the lease to run `ttl` from now ([`LockGuard::extend`]).
    fn extend(&self, ttl: Duration) -> impl Future<Output = Result<(), LockError>> + Send {
        self.lease(Private(())).extend(ttl)
    }

    /// Gives the hold back and says how the lease ended
    /// ([`LockGuard::release`]).
    fn release(self) -> impl Future<Output = Result<(), LockError>> + Send {
        self.into_lease(Private(())).release()
    }

    /// Stops renewing without releasing, for another process to resume
    /// ([`LockGuard::hand_off`]).
    fn hand_off(self) -> Result<HandoffToken, LockError> {
        self.into_lease(Private(())).hand_off()
    }
}

impl sealed::Sealed for LockGuard {
    fn lease(&self, _: Private) -> &LockGuard {
        self
    }

    fn into_lease(self, _: Private) -> LockGuard {
        self
    }
}

impl LeaseGuard for LockGuard {}

/// A guard over a lease that must not be handed off: its `hand_off`
/// refuses with `operation`, and gives the hold back as any refused
/// hand-off does.
macro_rules! unhandable_guard {
    ($guard:ty, $operation:literal) => {
        impl sealed::Sealed for $guard {
            fn lease(&self, _: Private) -> &LockGuard {
                self.guard()
            }

            fn into_lease(self, _: Private) -> LockGuard {
                self.into_guard()
            }
        }

        impl LeaseGuard for $guard {
            fn hand_off(self) -> Result<HandoffToken, LockError> {
                let guard = self.into_guard();
                let strategy = guard.strategy();
                drop(guard);
                Err(LockError::HandOffUnsupported {
                    strategy,
                    operation: $operation,
                })
            }
        }
    };
}

// A handed-off leadership would come back as a plain lock that can no
// longer proclaim: refused, and resigned.
unhandable_guard!(Leadership, "hand off a leadership");

// A party's place is one process's: handed off, it would be taken over by
// another, which the barrier's other parties did not count. Refused, and
// the party leaves.
unhandable_guard!(PartyGuard, "hand off a barrier's party");

/// A guard of one role: a lease guard whose hold has the kind `matches`
/// says, with [`LeaseGuard`]'s methods as its own.
macro_rules! role_guard {
    ($(#[$doc:meta])* $name:ident, $what:literal, $matches:pat) => {
        $(#[$doc])*
        #[derive(Debug)]
        #[must_use = "dropping the guard releases the hold at once"]
        pub struct $name {
            lease: LockGuard,
        }

        impl sealed::Sealed for $name {
            fn lease(&self, _: Private) -> &LockGuard {
                &self.lease
            }

            fn into_lease(self, _: Private) -> LockGuard {
                self.lease
            }
        }

        impl LeaseGuard for $name {}

        impl TryFrom<LockGuard> for $name {
            type Error = LockGuard;

            #[doc = concat!("The guard of ", $what, " (a lease resumed from a hand-off token, say); the lease guard back if its hold is not one.")]
            fn try_from(lease: LockGuard) -> Result<Self, LockGuard> {
                match lease.hold().kind() {
                    $matches => Ok($name { lease }),
                    _ => Err(lease),
                }
            }
        }

        impl From<$name> for LockGuard {
            #[doc = concat!("The lease guard under ", $what, ", for code that holds guards of several roles alike.")]
            fn from(guard: $name) -> LockGuard {
                guard.lease
            }
        }

        impl $name {
            /// The guard of a hold granted for this role.
            pub(crate) fn new(lease: LockGuard) -> Self {
                $name { lease }
            }

            /// See [`LockGuard::handle`].
            pub fn handle(&self) -> LeaseHandle {
                self.lease.handle()
            }

            /// See [`LockGuard::key`].
            pub fn key(&self) -> &str {
                self.lease.key()
            }

            /// See [`LockGuard::fencing_token`].
            pub fn fencing_token(&self) -> Option<FencingToken> {
                self.lease.fencing_token()
            }

            /// See [`LockGuard::owner`].
            pub fn owner(&self) -> &OwnerToken {
                self.lease.owner()
            }

            /// See [`LockGuard::status`].
            pub fn status(&self) -> LeaseStatus {
                self.lease.status()
            }

            /// See [`LockGuard::valid_until`].
            pub fn valid_until(&self) -> Option<Instant> {
                self.lease.valid_until()
            }

            /// See [`LockGuard::is_valid`].
            pub fn is_valid(&self) -> bool {
                self.lease.is_valid()
            }

            /// See [`LockGuard::remaining`].
            pub fn remaining(&self) -> Duration {
                self.lease.remaining()
            }

            /// See [`LockGuard::lost`].
            pub async fn lost(&self) -> Option<LossReason> {
                self.lease.lost().await
            }

            /// See [`LockGuard::extend`].
            pub async fn extend(&self, ttl: Duration) -> Result<(), LockError> {
                self.lease.extend(ttl).await
            }

            /// See [`LockGuard::release`].
            pub async fn release(self) -> Result<(), LockError> {
                self.lease.release().await
            }

            /// See [`LockGuard::hand_off`]: the token keeps this role.
            pub fn hand_off(self) -> Result<HandoffToken, LockError> {
                self.lease.hand_off()
            }

            /// See [`LockGuard::run`].
            pub async fn run<F, Fut, T>(self, work: F) -> Result<T, LockError>
            where
                F: FnOnce(LeaseHandle) -> Fut,
                Fut: Future<Output = T>,
            {
                self.lease.run(work).await
            }
        }
    };
}

role_guard!(
    /// A held permit of a [`Semaphore`](crate::Semaphore): its lease, its
    /// slot and its weight. Dropping it gives the permit back in the
    /// background.
    ///
    /// # Fencing
    ///
    /// Its [`fencing_token`](Self::fencing_token) is its
    /// [`slot`](Self::slot)'s: a resource that fences permits keeps the
    /// highest token it has seen per slot.
    PermitGuard,
    "a permit",
    HoldKind::Permit(_)
);

role_guard!(
    /// A held read (shared) hold of an [`RwLock`](crate::RwLock): its
    /// lease and its epoch. Dropping it gives the hold back in the
    /// background.
    ///
    /// # Fencing
    ///
    /// Its [`epoch`](Self::epoch) (also its
    /// [`fencing_token`](Self::fencing_token)) is the last write's token: its
    /// view is current exactly when the resource's highest token equals it.
    ReadGuard,
    "a read hold",
    HoldKind::Access(Access::Shared)
);

role_guard!(
    /// The held write (exclusive) hold of an [`RwLock`](crate::RwLock): its
    /// lease. Dropping it gives the hold back in the background.
    ///
    /// # Fencing
    ///
    /// Its [`fencing_token`](Self::fencing_token) is the lock's next write
    /// token (a re-entry's is its owner's write's): write tokens only grow,
    /// and reads taken until the next write get it as their
    /// [`epoch`](ReadGuard::epoch).
    WriteGuard,
    "a write hold",
    HoldKind::Access(Access::Exclusive)
);

impl PermitGuard {
    /// The permit's slot, in `0..limit`: one live permit's slot is never
    /// another's, and [`fencing_token`](Self::fencing_token) is that slot's.
    pub fn slot(&self) -> u32 {
        match self.lease.hold().kind() {
            HoldKind::Permit(permit) => permit.slot().unwrap_or_default(),
            _ => 0,
        }
    }

    /// How many of the semaphore's permits this one counts for.
    pub fn weight(&self) -> u32 {
        match self.lease.hold().kind() {
            HoldKind::Permit(permit) => permit.weight(),
            _ => 0,
        }
    }
}

impl ReadGuard {
    /// The read's epoch: the token of the last write before it (0 before
    /// any), which a resource compares as it does a write's token.
    pub fn epoch(&self) -> FencingToken {
        self.lease.fencing_token().unwrap_or(FencingToken::new(0))
    }
}
