//! What a backend has beyond the plain lock, in one value
//! ([`Capabilities`]), and the optional traits of the primitives whose
//! operations only some backends have.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::engine::backend::outcome::ExtendOutcome;
use crate::engine::state::{
    BarrierState, LatchState, Leader, ListOptions, LockListing, RwLockState, SemaphoreState,
};
use crate::error::{Capability, LockError};
use crate::hold::HoldToken;
use crate::key::LockKey;

/// What a backend was built to do with the config fields that reach its
/// grants, and what it has beyond the plain lock (a [`Capability`] each),
/// in one value: a capability with operations of its own is declared by
/// handing over the backend as the trait that has them
/// ([`with_semaphores`](Self::with_semaphores), ...), so a backend cannot
/// declare what it does not implement, nor implement what it does not
/// declare. [`LockManager::new`](crate::LockManager::new) refuses a config
/// that says otherwise, and a primitive's handle is refused when it is made
/// on a backend without it.
#[derive(Clone, Copy, Default)]
#[non_exhaustive]
pub struct Capabilities<'a> {
    /// `Some(on)`: grants issue fencing tokens exactly when `on`, which the
    /// config's `fencing` must match. `None` (the default): the strategy
    /// decides whatever `fencing` says (Redlock issues none; the reentrant
    /// strategy always issues them).
    pub fencing: Option<bool>,
    /// `Some(on)`: grants store holder information exactly when `on`, which
    /// the config's `holder_info` must match. `None` (the default): no
    /// claim.
    pub holder_info: Option<bool>,
    /// Whether [`LockBackend::release`](crate::LockBackend::release) of a hold whose acquire was never
    /// confirmed can only free what that very attempt took: true for
    /// strategies that store [`HoldToken::value`]; false (the default) where
    /// release is by owner, as with re-entry, since the owner may hold the
    /// lock from before. The manager cleans up a lost acquire reply of a
    /// caller's own owner only when this is true.
    pub releases_only_its_attempt: bool,
    /// The capabilities without operations of their own.
    has: u16,
    semaphores: Option<&'a dyn SemaphoreBackend>,
    rw_locks: Option<&'a dyn RwLockBackend>,
    elections: Option<&'a dyn ElectionBackend>,
    hand_off: Option<&'a dyn HandOffBackend>,
    listing: Option<&'a dyn ListBackend>,
    latches: Option<&'a dyn LatchBackend>,
    barriers: Option<&'a dyn BarrierBackend>,
}

impl<'a> Capabilities<'a> {
    /// No claim on any field, and nothing beyond the plain lock: the default
    /// of a backend that says nothing.
    pub fn unknown() -> Self {
        Capabilities::default()
    }

    /// These capabilities with fair mode ([`Capability::FairQueue`]):
    /// [`Claim::Lock`](crate::Claim::Lock) and [`Claim::Permit`](crate::Claim::Permit) with a place, and
    /// [`LockBackend::leave_queue`](crate::LockBackend::leave_queue).
    pub fn with_fair_queue(mut self) -> Self {
        self.has |= Capability::FairQueue.bit();
        self
    }

    /// These capabilities with multi-key locks ([`Claim::Multi`](crate::Claim::Multi)).
    pub fn with_multi_keys(mut self) -> Self {
        self.has |= Capability::MultiKeys.bit();
        self
    }

    /// These capabilities with semaphores ([`Claim::Permit`](crate::Claim::Permit)), whose own
    /// operations `backend` has.
    pub fn with_semaphores(mut self, backend: &'a dyn SemaphoreBackend) -> Self {
        self.semaphores = Some(backend);
        self
    }

    /// These capabilities with read-write locks ([`Claim::Access`](crate::Claim::Access)), whose
    /// own operations `backend` has.
    pub fn with_rw_locks(mut self, backend: &'a dyn RwLockBackend) -> Self {
        self.rw_locks = Some(backend);
        self
    }

    /// These capabilities with elections, whose operations `backend` has.
    pub fn with_elections(mut self, backend: &'a dyn ElectionBackend) -> Self {
        self.elections = Some(backend);
        self
    }

    /// These capabilities with count-down latches, whose operations
    /// `backend` has.
    pub fn with_latches(mut self, backend: &'a dyn LatchBackend) -> Self {
        self.latches = Some(backend);
        self
    }

    /// These capabilities with barriers ([`Claim::Party`](crate::Claim::Party)),
    /// whose own operations `backend` has.
    pub fn with_barriers(mut self, backend: &'a dyn BarrierBackend) -> Self {
        self.barriers = Some(backend);
        self
    }

    /// These capabilities with hand-off ([`LockManager::resume`](crate::LockManager::resume)).
    pub fn with_hand_off(mut self, backend: &'a dyn HandOffBackend) -> Self {
        self.hand_off = Some(backend);
        self
    }

    /// These capabilities with listing
    /// ([`LockManager::list`](crate::LockManager::list)).
    pub fn with_listing(mut self, backend: &'a dyn ListBackend) -> Self {
        self.listing = Some(backend);
        self
    }

    /// These capabilities without `capability`: what a backend that wraps
    /// another declares for what it does not pass on.
    pub fn without(mut self, capability: Capability) -> Self {
        match capability {
            Capability::FairQueue | Capability::MultiKeys => self.has &= !capability.bit(),
            Capability::Semaphores => self.semaphores = None,
            Capability::RwLocks => self.rw_locks = None,
            Capability::Elections => self.elections = None,
            Capability::HandOff => self.hand_off = None,
            Capability::Listing => self.listing = None,
            Capability::Latches => self.latches = None,
            Capability::Barriers => self.barriers = None,
        }
        self
    }

    /// These capabilities with the grant fields alone and no [`Capability`]:
    /// what a backend that wraps another and passes on only the plain
    /// lock's methods declares.
    pub fn plain_lock_only(self) -> Self {
        Capabilities {
            fencing: self.fencing,
            holder_info: self.holder_info,
            releases_only_its_attempt: self.releases_only_its_attempt,
            ..Capabilities::default()
        }
    }

    /// Whether the backend has `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        match capability {
            Capability::FairQueue | Capability::MultiKeys => self.has & capability.bit() != 0,
            Capability::Semaphores => self.semaphores.is_some(),
            Capability::RwLocks => self.rw_locks.is_some(),
            Capability::Elections => self.elections.is_some(),
            Capability::HandOff => self.hand_off.is_some(),
            Capability::Listing => self.listing.is_some(),
            Capability::Latches => self.latches.is_some(),
            Capability::Barriers => self.barriers.is_some(),
        }
    }

    /// `Ok(())` when the backend has `capability`; otherwise the error of
    /// `strategy` without it, [`LockError::Unsupported`].
    pub fn require(&self, strategy: &'static str, capability: Capability) -> Result<(), LockError> {
        if self.has(capability) {
            Ok(())
        } else {
            Err(unsupported(strategy, capability))
        }
    }

    /// The semaphores' own operations, if the backend has semaphores.
    pub fn semaphores(&self) -> Option<&'a dyn SemaphoreBackend> {
        self.semaphores
    }

    /// The read-write locks' own operations, if the backend has them.
    pub fn rw_locks(&self) -> Option<&'a dyn RwLockBackend> {
        self.rw_locks
    }

    /// The elections' operations, if the backend has elections.
    pub fn elections(&self) -> Option<&'a dyn ElectionBackend> {
        self.elections
    }

    /// The latches' operations, if the backend has latches.
    pub fn latches(&self) -> Option<&'a dyn LatchBackend> {
        self.latches
    }

    /// The barriers' own operations, if the backend has barriers.
    pub fn barriers(&self) -> Option<&'a dyn BarrierBackend> {
        self.barriers
    }

    /// The hand-off operation, if the backend can replace a hold in one
    /// step.
    pub fn hand_off(&self) -> Option<&'a dyn HandOffBackend> {
        self.hand_off
    }

    /// The listing operation, if the backend's locks can be listed.
    pub fn listing(&self) -> Option<&'a dyn ListBackend> {
        self.listing
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

    /// These capabilities with [`releases_only_its_attempt`](Self::releases_only_its_attempt).
    pub fn releasing_only_its_attempt(mut self) -> Self {
        self.releases_only_its_attempt = true;
        self
    }
}

impl fmt::Debug for Capabilities<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let has: Vec<&str> = Capability::ALL
            .iter()
            .filter(|capability| self.has(**capability))
            .map(|capability| capability.as_str())
            .collect();
        f.debug_struct("Capabilities")
            .field("fencing", &self.fencing)
            .field("holder_info", &self.holder_info)
            .field("releases_only_its_attempt", &self.releases_only_its_attempt)
            .field("has", &has)
            .finish()
    }
}

impl PartialEq for Capabilities<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.fencing == other.fencing
            && self.holder_info == other.holder_info
            && self.releases_only_its_attempt == other.releases_only_its_attempt
            && Capability::ALL
                .iter()
                .all(|capability| self.has(*capability) == other.has(*capability))
    }
}

impl Eq for Capabilities<'_> {}

/// A semaphore's own operations, beside [`Claim::Permit`](crate::Claim::Permit): what a backend
/// with [`Capability::Semaphores`] has
/// ([`Capabilities::with_semaphores`]).
#[async_trait]
pub trait SemaphoreBackend: Send + Sync {
    /// Reads the semaphore `key` without changing it.
    async fn semaphore_state(&self, key: &LockKey) -> Result<SemaphoreState, LockError>;

    /// Stores `limit` as the semaphore `key`'s limit, whatever it was, and
    /// wakes its waiters; returns the limit it had. Live permits keep their
    /// weight: after a lower limit, acquires wait until the live weight
    /// fits under it.
    async fn set_semaphore_limit(
        &self,
        key: &LockKey,
        limit: u32,
    ) -> Result<Option<u32>, LockError>;
}

/// A read-write lock's own operations, beside [`Claim::Access`](crate::Claim::Access): what a
/// backend with [`Capability::RwLocks`] has
/// ([`Capabilities::with_rw_locks`]).
#[async_trait]
pub trait RwLockBackend: Send + Sync {
    /// Reads the read-write lock `key` without changing it.
    async fn rw_lock_state(&self, key: &LockKey) -> Result<RwLockState, LockError>;
}

/// An election's operations: what a backend with
/// [`Capability::Elections`] has ([`Capabilities::with_elections`]). A
/// candidate campaigns with [`Claim::LOCK`](crate::Claim::LOCK); its term is its fencing token.
#[async_trait]
pub trait ElectionBackend: Send + Sync {
    /// Binds `value` to the term of `hold`, which has the election `key`'s
    /// lock (its fencing token is the term), and tells the election's
    /// observers: `Ok(false)` when `hold` does not have the lock (nothing
    /// written).
    async fn proclaim(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        value: &str,
    ) -> Result<bool, LockError>;

    /// Reads the election `key`'s leader: the holder of its lock once it has
    /// proclaimed a value for its term; `None` otherwise.
    async fn read_leader(&self, key: &LockKey) -> Result<Option<Leader>, LockError>;
}

/// A count-down latch's operations: what a backend with
/// [`Capability::Latches`] has ([`Capabilities::with_latches`]). A latch
/// holds its name as a lock does: every grant on the name waits beside it
/// until its TTL ends.
#[async_trait]
pub trait LatchBackend: Send + Sync {
    /// Sets the latch `key`'s count to `count` for `ttl`, unless it is set:
    /// `Ok(true)` when this call set it, `Ok(false)` when it was set with
    /// the same count already (nothing written);
    /// [`LockError::CountMismatch`] when it was set with another.
    async fn set_latch(&self, key: &LockKey, count: u32, ttl: Duration) -> Result<bool, LockError>;

    /// Counts the latch `key` down by one, at most once per `id` when one is
    /// given; returns what is left. Nothing is counted at 0, nor for an id
    /// that counted before. [`LockError::LatchNotSet`] when no count is
    /// set.
    async fn count_down_latch(&self, key: &LockKey, id: Option<&str>) -> Result<u32, LockError>;

    /// Reads the latch `key`; `None` when no count is set.
    async fn latch_state(&self, key: &LockKey) -> Result<Option<LatchState>, LockError>;

    /// Deletes the latch `key` and the ids that counted it down, and only a
    /// latch: `Ok(false)` when none was set.
    async fn delete_latch(&self, key: &LockKey) -> Result<bool, LockError>;
}

/// A barrier's own operations, beside [`Claim::Party`](crate::Claim::Party):
/// what a backend with [`Capability::Barriers`] has
/// ([`Capabilities::with_barriers`]).
#[async_trait]
pub trait BarrierBackend: Send + Sync {
    /// Reads the barrier `key` without changing it, and whether `party`
    /// (when given) is one of its live parties.
    async fn barrier_state(
        &self,
        key: &LockKey,
        party: Option<&HoldToken>,
    ) -> Result<BarrierState, LockError>;

    /// Takes `party`, whose TTL is `ttl`, out of the barrier `key`, and
    /// keeps its id out for twice `ttl`, so that an attempt of it that
    /// lands later enters nothing. With `while_filling`, only while its
    /// round fills: `Ok(Some(round))` when it is in the open round `round`
    /// (it was counted, and stays: nothing written). `Ok(None)` when it
    /// left, or was not in.
    async fn leave_barrier(
        &self,
        key: &LockKey,
        party: &HoldToken,
        ttl: Duration,
        while_filling: bool,
    ) -> Result<Option<String>, LockError>;
}

/// Hand-off: what a backend with [`Capability::HandOff`] has
/// ([`Capabilities::with_hand_off`]). A strategy must replace the hold on
/// every node in one step to offer it.
#[async_trait]
pub trait HandOffBackend: Send + Sync {
    /// Replaces `from`, the hold a hand-off token names, with `to` (the same
    /// owner, kind and fencing token, a new nonce) and renews it to `ttl`,
    /// in one atomic step, for [`LockManager::resume`](crate::LockManager::resume):
    /// from then on commands of the old hold still in flight, and other
    /// copies of the token, act on nothing. `NotHeld` when `from` does not
    /// have the lock, or claims a fencing token its grant did not issue
    /// (where the strategy stores it).
    async fn take_over(
        &self,
        key: &LockKey,
        from: &HoldToken,
        to: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError>;
}

/// Listing: what a backend with [`Capability::Listing`] has
/// ([`Capabilities::with_listing`]).
#[async_trait]
pub trait ListBackend: Send + Sync {
    /// Lists the locks held under `prefix` (the manager's `key_prefix`), for
    /// [`LockManager::list`](crate::LockManager::list) and `distlock list`:
    /// a bounded scan of the nodes that hold this backend's keys, each lock
    /// found read with [`LockBackend::inspect`](crate::LockBackend::inspect). The Redis layer does the
    /// scan ([`strategy::list_held`](crate::strategy::list_held)); a
    /// strategy names its nodes.
    async fn list(&self, prefix: &str, options: &ListOptions) -> Result<LockListing, LockError>;
}

/// The error of `strategy` without `capability`.
pub(crate) fn unsupported(strategy: &'static str, capability: Capability) -> LockError {
    LockError::Unsupported {
        strategy,
        capability,
    }
}

#[cfg(test)]
mod capability_tests {
    use std::sync::Arc;

    use super::*;
    use crate::engine::backend::{AccessRequest, Claim, FairPlace, PermitRequest};
    use crate::hold::{Access, HoldKind, Permit};

    /// A backend of every capability, for the value's own rules.
    struct Everything;

    #[async_trait]
    impl SemaphoreBackend for Everything {
        async fn semaphore_state(&self, _: &LockKey) -> Result<SemaphoreState, LockError> {
            unreachable!("never called")
        }
        async fn set_semaphore_limit(&self, _: &LockKey, _: u32) -> Result<Option<u32>, LockError> {
            unreachable!("never called")
        }
    }

    #[async_trait]
    impl RwLockBackend for Everything {
        async fn rw_lock_state(&self, _: &LockKey) -> Result<RwLockState, LockError> {
            unreachable!("never called")
        }
    }

    #[async_trait]
    impl ElectionBackend for Everything {
        async fn proclaim(&self, _: &LockKey, _: &HoldToken, _: &str) -> Result<bool, LockError> {
            unreachable!("never called")
        }
        async fn read_leader(&self, _: &LockKey) -> Result<Option<Leader>, LockError> {
            unreachable!("never called")
        }
    }

    #[async_trait]
    impl LatchBackend for Everything {
        async fn set_latch(&self, _: &LockKey, _: u32, _: Duration) -> Result<bool, LockError> {
            unreachable!("never called")
        }
        async fn count_down_latch(&self, _: &LockKey, _: Option<&str>) -> Result<u32, LockError> {
            unreachable!("never called")
        }
        async fn latch_state(&self, _: &LockKey) -> Result<Option<LatchState>, LockError> {
            unreachable!("never called")
        }
        async fn delete_latch(&self, _: &LockKey) -> Result<bool, LockError> {
            unreachable!("never called")
        }
    }

    #[async_trait]
    impl BarrierBackend for Everything {
        async fn barrier_state(
            &self,
            _: &LockKey,
            _: Option<&HoldToken>,
        ) -> Result<BarrierState, LockError> {
            unreachable!("never called")
        }
        async fn leave_barrier(
            &self,
            _: &LockKey,
            _: &HoldToken,
            _: Duration,
            _: bool,
        ) -> Result<Option<String>, LockError> {
            unreachable!("never called")
        }
    }

    #[async_trait]
    impl HandOffBackend for Everything {
        async fn take_over(
            &self,
            _: &LockKey,
            _: &HoldToken,
            _: &HoldToken,
            _: Duration,
        ) -> Result<ExtendOutcome, LockError> {
            unreachable!("never called")
        }
    }

    #[async_trait]
    impl ListBackend for Everything {
        async fn list(&self, _: &str, _: &ListOptions) -> Result<LockListing, LockError> {
            unreachable!("never called")
        }
    }

    #[test]
    fn capabilities_are_added_and_dropped_one_at_a_time() {
        let backend = Everything;
        let all = Capabilities::unknown()
            .with_fair_queue()
            .with_multi_keys()
            .with_semaphores(&backend)
            .with_rw_locks(&backend)
            .with_elections(&backend)
            .with_hand_off(&backend)
            .with_listing(&backend)
            .with_latches(&backend)
            .with_barriers(&backend);
        for &capability in Capability::ALL {
            assert!(all.has(capability), "{capability}");
            assert!(!Capabilities::unknown().has(capability), "{capability}");
            let less = all.without(capability);
            assert!(!less.has(capability), "{capability} dropped");
            for &other in Capability::ALL.iter().filter(|&&other| other != capability) {
                assert!(less.has(other), "{other} kept without {capability}");
            }
        }
        assert_eq!(all.plain_lock_only(), Capabilities::unknown());
        match Capabilities::unknown().require("test", Capability::Semaphores) {
            Err(LockError::Unsupported {
                strategy: "test",
                capability: Capability::Semaphores,
            }) => {}
            other => panic!("{other:?}"),
        }
        assert!(all.require("test", Capability::Elections).is_ok());
    }

    #[test]
    fn a_claim_names_the_capability_it_needs_and_its_hold_kind() {
        let fair = FairPlace::new(Duration::from_secs(1), true);
        let key = LockKey::new("", "a").expect("key");
        let claims = [
            (Claim::LOCK, None, HoldKind::Lock),
            (
                Claim::Lock { fair: Some(fair) },
                Some(Capability::FairQueue),
                HoldKind::Lock,
            ),
            (
                Claim::Permit(PermitRequest::new(3, 2)),
                Some(Capability::Semaphores),
                HoldKind::Permit(Permit::new(2)),
            ),
            (
                Claim::Access(AccessRequest::new(
                    Access::Shared,
                    Duration::from_secs(1),
                    true,
                )),
                Some(Capability::RwLocks),
                HoldKind::Access(Access::Shared),
            ),
            (
                Claim::Multi(Arc::from(vec![key.clone()])),
                Some(Capability::MultiKeys),
                HoldKind::Multi(Arc::from(vec![key])),
            ),
        ];
        for (claim, capability, kind) in claims {
            assert_eq!(claim.capability(), capability, "{claim:?}");
            assert_eq!(claim.hold_kind(), kind, "{claim:?}");
        }
    }
}
