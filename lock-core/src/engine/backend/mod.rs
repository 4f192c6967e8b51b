//! The contract between the lock API and a locking strategy.

pub(crate) mod capabilities;
pub(crate) mod outcome;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub(crate) use crate::engine::backend::capabilities::unsupported;
pub use crate::engine::backend::capabilities::{
    BarrierBackend, Capabilities, ElectionBackend, HandOffBackend, LatchBackend, ListBackend,
    RwLockBackend, SemaphoreBackend,
};
pub use crate::engine::backend::outcome::{ExtendOutcome, ReleaseOutcome};
use crate::engine::state::NameState;
use crate::engine::wake::Wakeups;
use crate::error::{Capability, LockError};
use crate::hold::{Access, HoldKind, HoldToken, Permit};
use crate::key::{FencingToken, LockKey, OwnerToken};

/// What one acquire attempt asks of a name: the engine's claim, as data.
/// A backend answers every kind through
/// [`LockBackend::try_acquire`], dispatching with one `match`, and the
/// hold it is given has the same kind ([`Claim::hold_kind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim {
    /// The lock of the name; in fair mode, with the waiter's place in its
    /// queue ([`Capability::FairQueue`]).
    Lock {
        /// The place in the queue, in fair mode: the lock is granted only
        /// when the queue is empty or headed by the hold's owner, and
        /// otherwise (if `join`) the owner is queued, or kept queued, for
        /// `waiter_lease`. A backend that hands a fair lock over on the
        /// server keeps the hold as the waiter's offer when it queues it: a
        /// release of an [`in_line`](HoldToken::in_line) hold grants the
        /// lock to the first live waiter's offer and tells it through
        /// [`Wakeups::take_grant`].
        fair: Option<FairPlace>,
    },
    /// A semaphore's permit ([`Capability::Semaphores`]).
    Permit(PermitRequest),
    /// A read-write lock's shared or exclusive hold
    /// ([`Capability::RwLocks`]).
    Access(AccessRequest),
    /// Every key of the list (at least one, no two alike, in the order to
    /// take them, the first being the lease's key) as one hold, all or
    /// nothing ([`Capability::MultiKeys`]).
    Multi(Arc<[LockKey]>),
    /// A place among a barrier's parties ([`Capability::Barriers`]):
    /// granted while the barrier fills, refused with
    /// [`LockError::BarrierFull`] while its round is under way, and
    /// answered `Held` only while another kind holds the name.
    Party(PartyRequest),
}

impl Claim {
    /// The plain lock of a name, outside fair mode.
    pub const LOCK: Claim = Claim::Lock { fair: None };

    /// What a hold granted for this claim takes.
    pub fn hold_kind(&self) -> HoldKind {
        match self {
            Claim::Lock { .. } => HoldKind::Lock,
            Claim::Permit(request) => HoldKind::Permit(Permit::new(request.weight)),
            Claim::Access(request) => HoldKind::Access(request.access),
            Claim::Multi(keys) => HoldKind::Multi(Arc::clone(keys)),
            Claim::Party(_) => HoldKind::Party,
        }
    }

    /// The capability a backend needs to answer this claim; `None` for the
    /// plain lock every backend has.
    pub fn capability(&self) -> Option<Capability> {
        match self {
            Claim::Lock { fair: None } => None,
            Claim::Lock { fair: Some(_) } => Some(Capability::FairQueue),
            Claim::Permit(_) => Some(Capability::Semaphores),
            Claim::Access(_) => Some(Capability::RwLocks),
            Claim::Multi(_) => Some(Capability::MultiKeys),
            Claim::Party(_) => Some(Capability::Barriers),
        }
    }

    /// The error of `strategy`, which cannot take this claim: what a
    /// backend answers for a claim it does not declare (the engine sends
    /// none), [`LockError::Unsupported`].
    pub fn unsupported(&self, strategy: &'static str) -> LockError {
        match self.capability() {
            Some(capability) => unsupported(strategy, capability),
            None => LockError::InvalidConfig {
                field: "strategy".to_owned(),
                reason: format!("the {strategy} strategy cannot take {self:?}"),
            },
        }
    }

    /// The waiter's place in a queue this attempt keeps, if any: a fair
    /// lock's or permit's, or a write's among the waiting writers.
    pub fn place(&self) -> Option<FairPlace> {
        match self {
            Claim::Lock { fair } => *fair,
            Claim::Permit(request) => request.fair,
            Claim::Access(request) => {
                (request.access == Access::Exclusive).then_some(request.waiter)
            }
            Claim::Multi(_) | Claim::Party(_) => None,
        }
    }
}

/// What an acquire attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquireOutcome {
    /// The claim is now held by the caller's hold (or, with
    /// [`Acquired::earlier`], by its earlier attempt's).
    Acquired(Acquired),
    /// Someone else holds the name (for a semaphore: the weight asked for
    /// does not fit beside the live permits).
    Held {
        /// How long the holder's lease has left, if known; a waiter need not
        /// sleep past it.
        remaining: Option<Duration>,
    },
}

/// A grant: what [`AcquireOutcome::Acquired`] says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Acquired {
    /// The hold's fencing token, if the strategy issues tokens: a lock's
    /// or a write's next token, a read's epoch (the last write's token, 0
    /// before any), a permit's slot's next token, a multi-key hold's token
    /// greater than every earlier token of each member.
    pub fencing_token: Option<FencingToken>,
    /// A permit's slot, in `0..limit`: the lowest no live permit had.
    /// `None` for every other claim.
    pub slot: Option<u32>,
    /// The TTL the attempt set, from when the server ran it: the one asked
    /// for. The engine counts an earlier attempt's grant, which this
    /// attempt renewed, by it.
    pub ttl: Duration,
    /// A release already granted the claim, on the server, to the hold of
    /// this waiter's earlier attempt (the `earlier` passed to
    /// [`try_acquire`](LockBackend::try_acquire)), and this attempt renewed
    /// that grant: the earlier hold has it for `ttl`, counted from when this
    /// attempt was sent.
    pub earlier: bool,
}

impl Acquired {
    /// A grant to this attempt's hold with `fencing_token`, for `ttl`.
    pub fn new(fencing_token: Option<FencingToken>, ttl: Duration) -> Self {
        Acquired {
            fencing_token,
            slot: None,
            ttl,
            earlier: false,
        }
    }

    /// A release's grant to the waiter's earlier attempt, with
    /// `fencing_token`, renewed to `ttl` by this attempt.
    pub fn earlier(fencing_token: FencingToken, ttl: Duration) -> Self {
        Acquired {
            earlier: true,
            ..Acquired::new(Some(fencing_token), ttl)
        }
    }

    /// This grant of a permit, in `slot`.
    pub fn in_slot(mut self, slot: u32) -> Self {
        self.slot = Some(slot);
        self
    }
}

impl From<Acquired> for AcquireOutcome {
    fn from(acquired: Acquired) -> Self {
        AcquireOutcome::Acquired(acquired)
    }
}

/// What a semaphore acquire asks for: a permit of `weight` in a semaphore
/// of `limit` permits. The engine checks both (`1 <= weight <= limit <=
/// MAX_SEMAPHORE_LIMIT`) before a backend sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitRequest {
    /// How many permits the semaphore has, as this process expects it.
    pub limit: u32,
    /// How many of them this permit counts for.
    pub weight: u32,
    /// In fair mode, the waiter's place in the semaphore's queue: a permit
    /// is granted only when the queue is empty or headed by the hold's
    /// owner, and otherwise (if `join`) the owner is queued, or kept
    /// queued, for `waiter_lease`, as a fair lock's is ([`Claim::Lock`]).
    /// A backend that hands permits over on the server keeps a queued
    /// hold as its offer: a release grants permits to the offers at the
    /// head of the line while their weights fit, and tells each through
    /// [`Wakeups::take_grant`] (with the permit's slot).
    pub fair: Option<FairPlace>,
}

impl FairPlace {
    /// A place that lasts `waiter_lease` unless tried again, joined when
    /// `join`.
    pub fn new(waiter_lease: Duration, join: bool) -> Self {
        FairPlace { waiter_lease, join }
    }
}

impl PermitRequest {
    /// A permit of `weight` in a semaphore of `limit`, outside fair mode.
    pub fn new(limit: u32, weight: u32) -> Self {
        PermitRequest {
            limit,
            weight,
            fair: None,
        }
    }
}

/// What a barrier's party asks for ([`Claim::Party`]): a place among
/// `parties`, the count every party must agree on while the barrier has
/// live parties. The engine checks it (`1 <= parties <=
/// MAX_BARRIER_PARTIES`) before a backend sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartyRequest {
    /// How many parties the barrier has, as this process expects it.
    pub parties: u32,
}

impl PartyRequest {
    /// A place in a barrier of `parties`.
    pub fn new(parties: u32) -> Self {
        PartyRequest { parties }
    }
}

/// What a read-write lock acquire asks for ([`Claim::Access`]). An owner
/// that has only shared holds and asks for the exclusive one gets
/// [`LockError::UpgradeRefused`]. A backend that hands writes over on the
/// server keeps a queued write's hold as its offer, as a fair lock's: the
/// release that frees the lock grants the write to the first waiting
/// writer's offer and tells it through [`Wakeups::take_grant`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessRequest {
    /// A shared (read) or the exclusive (write) hold.
    pub access: Access,
    /// Whether a read may start while a writer waits: `false` (the
    /// default, writer-preferring) makes readers wait behind a waiting
    /// writer, so a stream of readers cannot starve it.
    pub prefer_readers: bool,
    /// A write's place among the waiting writers, which are granted in
    /// arrival order: queued (if `join`), or kept queued, for
    /// `waiter_lease` when it must wait. Reads never queue.
    pub waiter: FairPlace,
}

impl AccessRequest {
    /// A hold of `access`, writer-preferring, that queues a write for
    /// `waiter_lease` when `join`.
    pub fn new(access: Access, waiter_lease: Duration, join: bool) -> Self {
        AccessRequest {
            access,
            prefer_readers: false,
            waiter: FairPlace { waiter_lease, join },
        }
    }

    /// This request, reader-preferring when `on`.
    pub fn preferring_readers(mut self, on: bool) -> Self {
        self.prefer_readers = on;
        self
    }
}

/// A fair-mode waiter's place in a queue; see [`PermitRequest::fair`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FairPlace {
    /// How long the place lasts unless the waiter tries again.
    pub waiter_lease: Duration,
    /// Whether to join the queue (a waiter) or only try (a one-shot try,
    /// which never queues).
    pub join: bool,
}

/// One renewal of a batch: [`LockBackend::extend`]'s arguments.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Renewal<'a> {
    /// The lock.
    pub key: &'a LockKey,
    /// The hold to renew.
    pub hold: &'a HoldToken,
    /// The TTL to renew it to, from when the server runs the renewal.
    pub ttl: Duration,
}

impl<'a> Renewal<'a> {
    /// Renews `hold` on `key` to `ttl`.
    pub fn new(key: &'a LockKey, hold: &'a HoldToken, ttl: Duration) -> Self {
        Renewal { key, hold, ttl }
    }
}

/// A locking strategy: how a name is taken, renewed, given back and inspected.
///
/// The high-level API ([`crate::LockManager`]) adds waiting, retries, the
/// watchdog and guards on top of any backend; backends only implement
/// single attempts. What only some primitives need lives on optional traits
/// ([`SemaphoreBackend`], [`RwLockBackend`], [`ElectionBackend`],
/// [`LatchBackend`], [`BarrierBackend`], [`HandOffBackend`], [`ListBackend`]) that a backend opts into through its
/// [`Capabilities`]; no method here exists only to refuse.
///
/// # Contract
///
/// Every implementation keeps these rules; `lock-testkit`'s contract suite
/// checks them against real Redis servers.
///
/// 1. **Mutual exclusion.** While a lease acquired with `hold` and `ttl` has not
///    expired and has not been released, `try_acquire` with any other owner
///    returns [`AcquireOutcome::Held`] (and, unless the strategy re-enters, so
///    does any other hold of the same owner). For the primitives with many
///    holders, read "the name is held" as "more than `limit` weight of
///    permits" or "a writer beside any other owner's hold" would be live.
/// 2. **Expiry.** If the holder neither extends nor releases, the key is free
///    again at most `ttl` after the acquire was sent (plus the server's expiry
///    granularity), even if the holder vanished.
/// 3. **Only the hold.** `extend` and `release` act only on the hold they
///    name: with another owner, or with an earlier hold of the same owner (a
///    [`HoldToken`] of an attempt whose hold has since ended), they change
///    nothing and return `NotHeld`. Only a hold whose acquire was never
///    confirmed (no fencing token) may be released by owner alone, and the
///    manager does that only for owners made for that attempt, or where
///    [`Capabilities::releases_only_its_attempt`] says it is safe.
/// 4. **Extend.** An `extend` that returns `Extended { ttl }` set the key's TTL
///    to `ttl` from the moment the server ran it; `ttl` is never more than
///    the key has.
/// 5. **Fencing.** If the backend issues fencing tokens, each outermost
///    acquisition of a key returns a token greater than every token returned
///    before for that key (for a permit, that slot), as long as the server
///    keeps its data.
/// 6. **One attempt.** Each method makes one attempt, bounded by the backend's
///    command timeout; it never waits for the lock to become free.
/// 7. **Replies are checked.** A reply of the wrong shape is an error
///    ([`LockError::UnexpectedReply`]), never a guess.
/// 8. **Safe to abandon.** Dropping an `acquire` future leaves at worst a key
///    that expires after `ttl`.
///
/// What a backend may assume of the engine, and what it may not:
///
/// - It may assume that the engine sends one extend at a time per lease, that
///   every `extend`, `release` and `take_over` names a hold this backend
///   granted (or a hand-off token made from one), that a claim reaches it
///   only when its [`Capabilities`] have [`Claim::capability`], and that a
///   TTL passed in has been checked by
///   [`validate_ttl`](crate::strategy::validate_ttl).
/// - It may not assume that one resource has one holder: a key names a
///   *resource*, and a hold is one of possibly several on it (a reentrant
///   owner's re-entries, and the permits, shares or multi-key holds that
///   other primitives grant). The engine keys its leases by hold, never by
///   key alone.
/// - It may not assume one TTL per manager: every acquire may ask for its
///   own, and the watchdog renews with the TTL the holder last asked for.
/// - It may not assume its futures run to completion: any of them may be
///   dropped at an `.await`, and rule 8 must hold then.
///
/// The trait is object safe: `Arc<dyn LockBackend>` is how the rest of the
/// library holds a backend.
#[async_trait]
pub trait LockBackend: Send + Sync + fmt::Debug {
    /// A short name of the strategy, for logs: `"single"`, `"reentrant"`, ...
    fn strategy(&self) -> &'static str;

    /// What this backend was built to do with the config's grant fields,
    /// and which [`Capability`] it has, with the optional traits of those
    /// that have operations; see [`Capabilities`]. The default claims
    /// nothing and has none. A backend that wraps another declares only
    /// what it passes on ([`Capabilities::without`],
    /// [`Capabilities::plain_lock_only`]).
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::unknown()
    }

    /// Tries once to take `claim` of `key` for `hold` (whose
    /// [`kind`](HoldToken::kind) is the claim's
    /// [`hold_kind`](Claim::hold_kind)) for `ttl`: answers
    /// [`AcquireOutcome::Acquired`] or `Held` with the time until the first
    /// hold in the way ends. For [`Claim::Multi`], `key` is the first
    /// member. A semaphore stored with another limit is
    /// [`LockError::CountMismatch`].
    ///
    /// From then on this backend's `extend`, `extend_many`, `release` and
    /// `take_over` of `hold` act on what its kind took: a permit, a
    /// read-write hold, every member of a multi-key hold (a renewal renews
    /// every member or none; a release gives back every member the hold
    /// still has).
    ///
    /// `earlier` is the hold of this waiter's previous attempt that was
    /// answered `Held` and kept as its offer (a fair lock's or permit's, a
    /// queued write's; see [`Claim::place`]): if a release granted it
    /// meanwhile (a message the waiter missed), the attempt renews that
    /// grant to `ttl` and answers it with [`Acquired::earlier`]. Such a
    /// waiter leaving the queue passes its offered holds to
    /// [`leave_queue`](Self::leave_queue).
    async fn try_acquire(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        claim: &Claim,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError>;

    /// Renews `hold`'s lease on `key` to run `ttl` from now.
    async fn extend(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError>;

    /// Renews every hold of `renewals` as [`LockBackend::extend`] would,
    /// in as few round trips as the strategy can, and returns one outcome per
    /// renewal, in order. The watchdog sends the renewals that fall due
    /// together through this, in batches of one
    /// [`renewal_group`](Self::renewal_group) each, and counts each lease's
    /// deadline from when it sent the batch.
    ///
    /// The default runs `extend` for each, all at once. A backend that
    /// overrides it keeps each renewal's contract (rules 3, 4 and 7): one
    /// key holding foreign data is that renewal's error, not the batch's.
    async fn extend_many(&self, renewals: &[Renewal<'_>]) -> Vec<Result<ExtendOutcome, LockError>> {
        futures::future::join_all(
            renewals
                .iter()
                .map(|renewal| self.extend(renewal.key, renewal.hold, renewal.ttl)),
        )
        .await
    }

    /// Which renewals may share a batch of
    /// [`extend_many`](Self::extend_many): those of keys in the same group.
    /// Groups are renewed independently, so a group whose node is slow or
    /// down holds up no other group's renewals. A strategy over a Redis
    /// Cluster answers the key's hash slot (the keys of one script must
    /// share one); the default puts every key in one group.
    fn renewal_group(&self, key: &LockKey) -> u32 {
        let _ = key;
        0
    }

    /// Gives back `hold` on `key`. A fair lock's or permit's hold
    /// ([`HoldToken::is_in_line`]) hands what it frees to the next waiters'
    /// offers where the backend hands over on the server.
    async fn release(&self, key: &LockKey, hold: &HoldToken) -> Result<ReleaseOutcome, LockError>;

    /// Takes `owner` out of the queue of `key` (it stopped waiting). A fair
    /// lock's or semaphore's waiter, and a read-write lock's waiting
    /// writer, pass `offered`, the holds of their attempts a release may
    /// have granted on the server (see [`try_acquire`](Self::try_acquire)):
    /// a grant to one of them is given back (and handed on). A waiter that
    /// sent no attempt passes `None`. The default does nothing: a backend
    /// without queues has nothing to leave.
    async fn leave_queue(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: Option<&[HoldToken]>,
    ) -> Result<(), LockError> {
        let _ = (key, owner, offered);
        Ok(())
    }

    /// Reads what holds `key`'s name without changing anything, in one
    /// round trip where the strategy can: a backend with only locks answers
    /// [`NameState::Lock`] or [`NameState::Free`]; one with other primitives
    /// says which of them holds the name.
    async fn inspect(&self, key: &LockKey) -> Result<NameState, LockError>;

    /// Deletes the lock whoever holds it, for operators clearing a lock left by
    /// a holder they know is dead (`distlock release --force`). Keeps the
    /// fencing counter, so tokens stay monotonic. Returns how many nodes held
    /// the key. The holder, if alive, learns of it at its next renewal.
    async fn force_release(&self, key: &LockKey) -> Result<usize, LockError>;

    /// Subscribes to the releases of `key`, so a waiter can sleep until one is
    /// published instead of polling. Returns once the subscription is
    /// confirmed. `Ok(None)` means this backend cannot notify, and waiters poll.
    async fn watch_releases(&self, key: &LockKey) -> Result<Option<Box<dyn Wakeups>>, LockError> {
        let _ = key;
        Ok(None)
    }
}
