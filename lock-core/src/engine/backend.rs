//! The contract between the lock API and a locking strategy.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::engine::state::{
    Leader, ListOptions, LockListing, LockState, RwLockState, SemaphoreState,
};
use crate::engine::wake::Wakeups;
use crate::error::{Capability, LockError};
use crate::key::{Access, FencingToken, HoldToken, LockKey, OwnerToken};

/// What an acquire attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquireOutcome {
    /// The lock is now held by the caller's hold for the requested TTL (or,
    /// for a re-entry, at least that long).
    Acquired {
        /// The fencing token of this hold, if the strategy issues tokens.
        fencing_token: Option<FencingToken>,
    },
    /// A semaphore's permit is now held by the caller's hold for the
    /// requested TTL ([`LockBackend::try_acquire_permit`]).
    PermitAcquired {
        /// The slot the permit took, in `0..limit`: the lowest no live
        /// permit had.
        slot: u32,
        /// The slot's next fencing token.
        fencing_token: FencingToken,
    },
    /// A release already granted the lock, on the server, to the hold of
    /// this waiter's earlier attempt (the `earlier` of
    /// [`try_acquire_fair`](LockBackend::try_acquire_fair) or
    /// [`try_acquire_access`](LockBackend::try_acquire_access)), and this attempt
    /// renewed that grant: the earlier hold has the lock for `ttl`, counted
    /// from when this attempt was sent.
    GrantedEarlier {
        /// The fencing token the release issued to it.
        fencing_token: Option<FencingToken>,
        /// The TTL the attempt set.
        ttl: Duration,
    },
    /// As [`GrantedEarlier`](Self::GrantedEarlier), for a fair semaphore's
    /// waiter ([`try_acquire_permit`](LockBackend::try_acquire_permit)):
    /// the earlier attempt's permit has this slot and token, for `ttl`.
    PermitGrantedEarlier {
        /// The permit's slot.
        slot: u32,
        /// The slot's token the release issued to it.
        fencing_token: FencingToken,
        /// The TTL the attempt set.
        ttl: Duration,
    },
    /// Someone else holds the lock (for a semaphore: the weight asked for
    /// does not fit beside the live permits).
    Held {
        /// How long the holder's lease has left, if known; a waiter need not
        /// sleep past it.
        remaining: Option<Duration>,
    },
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
    /// queued, for `waiter_lease`, as
    /// [`try_acquire_fair`](LockBackend::try_acquire_fair) does for a lock.
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

/// What a read-write lock acquire asks for
/// ([`LockBackend::try_acquire_access`]).
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

/// What a backend was built to do with the config fields that reach its
/// grants, and what it has beyond the plain lock (a [`Capability`] each).
/// [`LockManager::new`](crate::LockManager::new) refuses a config that says
/// otherwise, and a primitive's handle is refused on a backend that does not
/// declare it, so a manager's config and its backend cannot disagree in
/// silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// `Some(on)`: grants issue fencing tokens exactly when `on`, which the
    /// config's `fencing` must match. `None` (the default): the strategy
    /// decides whatever `fencing` says (Redlock issues none; the reentrant
    /// strategy always issues them).
    pub fencing: Option<bool>,
    /// `Some(on)`: grants store holder information exactly when `on`, which
    /// the config's `holder_info` must match. `None` (the default): no
    /// claim.
    pub holder_info: Option<bool>,
    /// What the backend has beyond the plain lock, one bit per
    /// [`Capability`]; see [`has`](Self::has).
    has: u8,
}

impl Capabilities {
    /// No claim on any field, and nothing beyond the plain lock: the default
    /// of a backend that says nothing.
    pub fn unknown() -> Self {
        Capabilities::default()
    }

    /// These capabilities with `capability` too.
    pub fn with(mut self, capability: Capability) -> Self {
        self.has |= capability.bit();
        self
    }

    /// These capabilities without `capability`: what a backend that wraps
    /// another declares for what it does not pass on (a wrapper that
    /// forwards only the plain lock's methods drops every capability).
    pub fn without(mut self, capability: Capability) -> Self {
        self.has &= !capability.bit();
        self
    }

    /// These capabilities with the grant fields alone and no [`Capability`]:
    /// what a backend that wraps another and passes on only the plain
    /// lock's methods declares.
    pub fn plain_lock_only(self) -> Self {
        Capabilities { has: 0, ..self }
    }

    /// Whether the backend has `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        self.has & capability.bit() != 0
    }

    /// `Ok(())` when the backend has `capability`; otherwise the error of
    /// `strategy` without it, [`LockError::Unsupported`].
    pub fn require(&self, strategy: &'static str, capability: Capability) -> Result<(), LockError> {
        if self.has(capability) {
            Ok(())
        } else {
            Err(LockError::Unsupported {
                strategy,
                capability,
            })
        }
    }

    /// These capabilities with fencing tokens issued exactly when `on`.
    pub fn with_fencing(mut self, on: bool) -> Self {
        self.fencing = Some(on);
        self
    }

    /// These capabilities with holder information stored exactly when `on`.
    pub fn with_holder_info(mut self, on: bool) -> Self {
        self.holder_info = Some(on);
        self
    }
}

/// A locking strategy: how one key is taken, renewed, given back and inspected.
///
/// The high-level API ([`crate::LockManager`]) adds waiting, retries, the
/// watchdog and guards on top of any backend; backends only implement these
/// four single attempts.
///
/// # Contract
///
/// Every implementation keeps these rules; `lock-testkit`'s contract suite
/// checks them against real Redis servers.
///
/// 1. **Mutual exclusion.** While a lease acquired with `hold` and `ttl` has not
///    expired and has not been released, `try_acquire` with any other owner
///    returns [`AcquireOutcome::Held`] (and, unless the strategy re-enters, so
///    does any other hold of the same owner).
/// 2. **Expiry.** If the holder neither extends nor releases, the key is free
///    again at most `ttl` after the acquire was sent (plus the server's expiry
///    granularity), even if the holder vanished.
/// 3. **Only the hold.** `extend` and `release` act only on the hold they
///    name: with another owner, or with an earlier hold of the same owner (a
///    [`HoldToken`] of an attempt whose hold has since ended), they change
///    nothing and return `NotHeld`. Only a hold whose acquire was never
///    confirmed (no fencing token) may be released by owner alone, and the
///    manager does that only for owners made for that attempt, or where
///    [`LockBackend::releases_only_its_attempt`] says it is safe.
/// 4. **Extend.** An `extend` that returns `Extended { ttl }` set the key's TTL
///    to `ttl` from the moment the server ran it; `ttl` is never more than
///    the key has.
/// 5. **Fencing.** If the backend issues fencing tokens, each outermost
///    acquisition of a key returns a token greater than every token returned
///    before for that key, as long as the server keeps its data.
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
///   granted (or a hand-off token made from one), and that a TTL passed in
///   has been checked by [`validate_ttl`](crate::strategy::validate_ttl).
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
    /// and which [`Capability`] it has; see [`Capabilities`]. The default
    /// claims nothing and has none. The engine calls a primitive's methods
    /// ([`try_acquire_permit`](Self::try_acquire_permit),
    /// [`try_acquire_access`](Self::try_acquire_access),
    /// [`try_acquire_multi`](Self::try_acquire_multi),
    /// [`proclaim`](Self::proclaim), [`try_acquire_fair`](Self::try_acquire_fair),
    /// ...) only where it is declared; a backend that wraps another declares
    /// only what it passes on ([`Capabilities::without`],
    /// [`Capabilities::plain_lock_only`]).
    fn capabilities(&self) -> Capabilities {
        Capabilities::unknown()
    }

    /// Tries once to take `key` for `hold` for `ttl`.
    async fn try_acquire(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
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

    /// Gives back `hold` on `key`.
    async fn release(&self, key: &LockKey, hold: &HoldToken) -> Result<ReleaseOutcome, LockError>;

    /// Whether [`LockBackend::release`] of a hold whose acquire was never
    /// confirmed can only free what that very attempt took. True for
    /// strategies that store [`HoldToken::value`]; false (the default) where
    /// release is by owner, as with re-entry, since the owner may hold the
    /// lock from before. The manager cleans up a lost acquire reply of a
    /// caller's own owner only when this is true.
    fn releases_only_its_attempt(&self) -> bool {
        false
    }

    /// Replaces `from`, the hold a hand-off token names, with `to` (the same
    /// owner and fencing token, a new nonce) and renews it to `ttl`, in one
    /// atomic step, for [`LockManager::resume`](crate::LockManager::resume):
    /// from then on commands of the old hold still in flight, and other
    /// copies of the token, act on nothing. `NotHeld` when `from` does not
    /// have the lock, or claims a fencing token its grant did not issue
    /// (where the strategy stores it).
    ///
    /// The default refuses with [`LockError::HandOffUnsupported`]: a
    /// strategy must replace the hold on every node in one step to offer it.
    async fn take_over(
        &self,
        key: &LockKey,
        from: &HoldToken,
        to: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let _ = (key, from, to, ttl);
        Err(LockError::HandOffUnsupported {
            strategy: self.strategy(),
            operation: "resume",
        })
    }

    /// Tries once to take a permit of `request.weight` in the semaphore
    /// `key` of `request.limit` permits, for `hold` (whose
    /// [`permit`](HoldToken::permit) says its weight) for `ttl`: answers
    /// [`AcquireOutcome::PermitAcquired`] or, when the weight does not fit,
    /// `Held` with the time until the first live permit ends. A semaphore
    /// stored with another limit is [`LockError::LimitMismatch`].
    ///
    /// From then on this backend's `extend`, `release` and `extend_many`
    /// of a hold that is a permit act on the permit. The contract's rules
    /// hold with "the lock is held" read as "more than `limit` weight would
    /// be live": a permit's lease is its own, and a release credits only
    /// its own weight, once.
    ///
    /// In fair mode, a backend that hands permits over on the server keeps
    /// a queued `hold` as its offer, as
    /// [`try_acquire_fair`](Self::try_acquire_fair) does: a release grants
    /// permits to the offers at the head of the line while their weights
    /// fit, for `waiter_lease`, and tells each through
    /// [`Wakeups::take_grant`] (with the permit's slot). `earlier` is the
    /// hold of this waiter's previous attempt answered
    /// [`AcquireOutcome::Held`]; a grant to it found by this attempt is
    /// renewed to `ttl` and answered
    /// [`AcquireOutcome::PermitGrantedEarlier`].
    ///
    /// The default refuses with [`LockError::Unsupported`].
    async fn try_acquire_permit(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        request: PermitRequest,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        let _ = (key, hold, ttl, request, earlier);
        Err(no_semaphores(self.strategy()))
    }

    /// Reads the semaphore `key` without changing it. The default refuses
    /// as [`try_acquire_permit`](Self::try_acquire_permit) does.
    async fn inspect_semaphore(&self, key: &LockKey) -> Result<SemaphoreState, LockError> {
        let _ = key;
        Err(no_semaphores(self.strategy()))
    }

    /// Stores `limit` as the semaphore `key`'s limit, whatever it was, and
    /// wakes its waiters; returns the limit it had. Live permits keep their
    /// weight: after a lower limit, acquires wait until the live weight
    /// fits under it. The default refuses as
    /// [`try_acquire_permit`](Self::try_acquire_permit) does.
    async fn set_semaphore_limit(
        &self,
        key: &LockKey,
        limit: u32,
    ) -> Result<Option<u32>, LockError> {
        let _ = (key, limit);
        Err(no_semaphores(self.strategy()))
    }

    /// Tries once to take a hold of `request.access` on the read-write lock
    /// `key` for `hold` (whose [`access`](HoldToken::access) says the same)
    /// for `ttl`: answers [`AcquireOutcome::Acquired`] with a fencing
    /// token (a write's next token; a read's epoch, the last write token,
    /// 0 before any) or `Held` with the time until the first hold in the
    /// way ends. An owner that has only shared holds and asks for the
    /// exclusive one gets [`LockError::UpgradeRefused`].
    ///
    /// From then on this backend's `extend`, `release`, `extend_many` and
    /// `take_over` of a hold with an access act on that hold alone. The
    /// contract's rules hold with "the lock is held" read as "a writer
    /// beside any other owner's hold would be live".
    ///
    /// A backend that hands writes over on the server keeps a queued
    /// write's `hold` as its offer, as
    /// [`try_acquire_fair`](Self::try_acquire_fair) does: the release that
    /// frees the lock grants the write to the first waiting writer's offer
    /// for `request.waiter.waiter_lease` and tells it through
    /// [`Wakeups::take_grant`]. `earlier` is the hold of this writer's
    /// previous attempt answered [`AcquireOutcome::Held`]: if a release
    /// granted it meanwhile, the attempt renews that grant to `ttl` and the
    /// reply is [`AcquireOutcome::GrantedEarlier`]. Such a writer leaving
    /// the queue passes its offered holds to
    /// [`leave_fair_queue`](Self::leave_fair_queue).
    ///
    /// The default refuses with [`LockError::Unsupported`].
    async fn try_acquire_access(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        request: AccessRequest,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        let _ = (key, hold, ttl, request, earlier);
        Err(no_rw_locks(self.strategy()))
    }

    /// Tries once to take every key of `keys` (at least one, no two alike,
    /// in the order to take them) as one hold, `hold` (whose
    /// [`members`](HoldToken::members) are the same keys), for `ttl`: all
    /// or nothing. Answers [`AcquireOutcome::Acquired`] with one fencing
    /// token greater than every earlier token of each member, or `Held`
    /// with the time until the first member in the way may be free.
    ///
    /// From then on this backend's `extend`, `release` and `extend_many` of
    /// a hold with members act on all of them: a renewal renews every
    /// member or none (`NotHeld` when one is lost), and a release gives
    /// back every member the hold still has.
    ///
    /// The default refuses with [`LockError::Unsupported`].
    async fn try_acquire_multi(
        &self,
        keys: &[LockKey],
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<AcquireOutcome, LockError> {
        let _ = (keys, hold, ttl);
        Err(LockError::Unsupported {
            strategy: self.strategy(),
            capability: Capability::MultiKeys,
        })
    }

    /// Reads the read-write lock `key` without changing it. The default
    /// refuses as [`try_acquire_access`](Self::try_acquire_access) does.
    async fn inspect_rw_lock(&self, key: &LockKey) -> Result<RwLockState, LockError> {
        let _ = key;
        Err(no_rw_locks(self.strategy()))
    }

    /// Binds `value` to the term of `hold`, which has the election `key`'s
    /// lock (its fencing token is the term), and tells the election's
    /// observers: `Ok(false)` when `hold` does not have the lock (nothing
    /// written). The default refuses with [`LockError::Unsupported`].
    async fn proclaim(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        value: &str,
    ) -> Result<bool, LockError> {
        let _ = (key, hold, value);
        Err(no_elections(self.strategy()))
    }

    /// Reads the election `key`'s leader: the holder of its lock once it has
    /// proclaimed a value for its term; `None` otherwise. The default refuses
    /// as [`proclaim`](Self::proclaim) does.
    async fn read_leader(&self, key: &LockKey) -> Result<Option<Leader>, LockError> {
        let _ = key;
        Err(no_elections(self.strategy()))
    }

    /// Reads the state of `key` without changing it.
    async fn inspect(&self, key: &LockKey) -> Result<LockState, LockError>;

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

    /// Tries once in fair mode: takes the lock for `hold` only if it is free
    /// and no earlier waiter is queued (or `hold`'s owner is the first).
    /// Otherwise, if `join`, queues the owner (or keeps it queued) for
    /// `waiter_lease`: a waiter that does not try again within it leaves the
    /// queue. Backends without a fair mode answer [`LockError::InvalidConfig`].
    ///
    /// A backend that hands a fair lock over on the server keeps `hold` as
    /// the waiter's offer when it queues it: a release of the lock
    /// ([`release`](Self::release) of an [`in_line`](HoldToken::in_line)
    /// hold) then grants it to the first live waiter's offer for
    /// `waiter_lease` and tells it through [`Wakeups::take_grant`]. `earlier`
    /// is the hold of this waiter's previous attempt that was answered
    /// [`AcquireOutcome::Held`]: if a release granted the lock to it
    /// meanwhile (a message the waiter missed), the attempt renews that
    /// grant to `ttl` and the reply is [`AcquireOutcome::GrantedEarlier`].
    async fn try_acquire_fair(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        place: FairPlace,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        let _ = (key, hold, ttl, place, earlier);
        Err(LockError::InvalidConfig {
            field: "fair".to_owned(),
            reason: format!("the {} strategy has no fair mode", self.strategy()),
        })
    }

    /// Takes `owner` out of the fair queue of `key` (it stopped waiting).
    /// A fair lock's or semaphore's waiter, and a read-write lock's
    /// waiting writer, pass `offered`, the holds of their attempts a
    /// release may have granted on the server (see
    /// [`try_acquire_fair`](Self::try_acquire_fair),
    /// [`try_acquire_permit`](Self::try_acquire_permit) and
    /// [`try_acquire_access`](Self::try_acquire_access)): a grant to one of
    /// them is given back (and handed on). A waiter that sent no attempt
    /// passes `None`.
    async fn leave_fair_queue(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: Option<&[HoldToken]>,
    ) -> Result<(), LockError> {
        let _ = (key, owner, offered);
        Ok(())
    }

    /// Lists the locks held under `prefix` (the manager's `key_prefix`), for
    /// [`LockManager::list`](crate::LockManager::list) and `distlock list`:
    /// a bounded scan of the nodes that hold this backend's keys, each lock
    /// found read with [`inspect`](Self::inspect). The Redis layer does the
    /// scan ([`strategy::list_held`](crate::strategy::list_held)); a strategy names
    /// its nodes.
    ///
    /// The default refuses with [`LockError::InvalidConfig`] on `strategy`:
    /// this backend's locks cannot be listed.
    async fn list(&self, prefix: &str, options: &ListOptions) -> Result<LockListing, LockError> {
        let _ = (prefix, options);
        Err(LockError::config(
            "strategy",
            format!(
                "the {} strategy does not say which nodes hold its keys, so its locks \
                 cannot be listed",
                self.strategy()
            ),
        ))
    }
}

/// The error of a strategy without semaphores.
fn no_semaphores(strategy: &'static str) -> LockError {
    LockError::Unsupported {
        strategy,
        capability: Capability::Semaphores,
    }
}

/// The error of a strategy without read-write locks.
fn no_rw_locks(strategy: &'static str) -> LockError {
    LockError::Unsupported {
        strategy,
        capability: Capability::RwLocks,
    }
}

/// The error of a strategy without elections.
fn no_elections(strategy: &'static str) -> LockError {
    LockError::Unsupported {
        strategy,
        capability: Capability::Elections,
    }
}

#[cfg(test)]
mod capability_tests {
    use super::{Capabilities, Capability};
    use crate::error::LockError;

    #[test]
    fn capabilities_are_added_and_dropped_one_at_a_time() {
        let all = Capability::ALL
            .iter()
            .fold(Capabilities::unknown(), |has, &capability| {
                has.with(capability)
            });
        for &capability in Capability::ALL {
            assert!(all.has(capability), "{capability}");
            let less = all.without(capability);
            assert!(!less.has(capability), "{capability} dropped");
            for &other in Capability::ALL.iter().filter(|&&other| other != capability) {
                assert!(less.has(other), "{other} kept without {capability}");
            }
        }
        match Capabilities::unknown().require("test", Capability::Semaphores) {
            Err(LockError::Unsupported {
                strategy: "test",
                capability: Capability::Semaphores,
            }) => {}
            other => panic!("{other:?}"),
        }
        assert!(all.require("test", Capability::Elections).is_ok());
    }
}
