//! The high-level lock API over any backend: try once, wait with backoff, or
//! run a closure under the lock.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::backend::{
    unsupported, BarrierBackend, Claim, ElectionBackend, ExtendOutcome, LatchBackend, LockBackend,
    ReleaseOutcome, RwLockBackend, SemaphoreBackend,
};
use crate::engine::lease::guard::{spawn_release, LeaseHandle, LockGuard};
use crate::engine::lease::renewal::RenewalDriver;
use crate::engine::lease::schedule::WatchdogSchedule;
use crate::engine::lease::timing::lease_deadline;
use crate::engine::lease::LeaseShared;
use crate::engine::options::AcquireOptions;
use crate::engine::settings::Settings;
use crate::engine::state::{ListOptions, LockListing, NameState};
use crate::engine::telemetry::{self, in_span, Labels, LockNameLabels};
use crate::error::{Capability, LockError, LossReason};
use crate::hold::{HandoffToken, HoldToken};
use crate::key::{FencingToken, LockKey, OwnerToken};
use crate::ttl::validate_ttl;

/// Takes and holds locks through one backend, with one config.
///
/// Cheap to clone: clones share the backend.
///
#[cfg_attr(not(doctest), doc = include_str!("../doc/lock_manager.md"))]
///
/// Over a backend built by hand, [`LockManager::new`] takes the backend and
/// the config; [`LockManager::connect`] builds both from the config.
#[derive(Debug, Clone)]
pub struct LockManager {
    pub(super) backend: Arc<dyn LockBackend>,
    pub(super) settings: Arc<Settings>,
    /// Which lock names label metrics (`metrics_lock_names`).
    lock_names: Arc<LockNameLabels>,
    /// The watchdogs of this manager's leases: planned at acquire, started
    /// when due, their renewals sent in batches.
    schedule: Arc<WatchdogSchedule>,
}

/// How long a fair-mode waiter stays queued without trying again. Waiting
/// waiters try again at least every quarter of it, so only a waiter that died
/// (or a stalled process) loses its place, and it stops blocking those behind
/// it within this time. A release's grant to a waiter's offer (the
/// server-side hand-off) runs this long, or the TTL if shorter, until the
/// waiter takes it up and extends it.
pub const FAIR_WAITER_LEASE: Duration = Duration::from_secs(2);

/// The result of one acquire attempt.
pub(super) enum Attempt {
    /// Granted; the caller makes the guard ([`LockManager::keep`]), with the
    /// key it owns (a one-shot acquire moves its key into the guard).
    Acquired(Granted),
    Held {
        remaining: Option<Duration>,
    },
    /// The reply was lost (time-out, broken connection): the attempt may have
    /// been granted. `cleanup` is its hold, to release before trying again;
    /// `None` when a release could end an earlier hold of the caller's owner.
    /// `renews` is the earlier attempt's hold it named, whose grant it would
    /// take up for its TTL, and when it was sent: it may still run, and
    /// renew that hold.
    Unanswered {
        error: LockError,
        cleanup: Option<HoldToken>,
        renews: Option<(HoldToken, Instant)>,
    },
}

/// A granted attempt, before its guard is made.
pub(super) struct Granted {
    pub(super) hold: HoldToken,
    pub(super) sent_at: Instant,
    /// The TTL asked for: the one the watchdog renews to.
    pub(super) ttl: Duration,
    /// The TTL the grant set (the reentrant strategy keeps a longer one).
    pub(super) ttl_set: Duration,
}

impl LockManager {
    /// A manager over `backend` with validated `settings`; the public
    /// constructors, which read them from a config, are in `crate::config`.
    pub(crate) fn with_settings(
        backend: Arc<dyn LockBackend>,
        settings: Settings,
    ) -> Result<Self, LockError> {
        if settings.fair && !backend.capabilities().has(Capability::FairQueue) {
            return Err(LockError::InvalidConfig {
                field: "fair".to_owned(),
                reason: format!(
                    "the {} strategy has no fair mode; use the single-node strategy",
                    backend.strategy()
                ),
            });
        }
        Ok(LockManager {
            schedule: Arc::new(WatchdogSchedule::new(
                &settings,
                RenewalDriver::new(Arc::clone(&backend)),
            )),
            backend,
            lock_names: Arc::new(LockNameLabels::new(settings.metrics_lock_names)),
            settings: Arc::new(settings),
        })
    }

    /// `Ok(())` when the backend has `capability`, else
    /// [`LockError::Unsupported`]: what a handle checks when it is made.
    pub(crate) fn require(&self, capability: Capability) -> Result<(), LockError> {
        self.backend
            .capabilities()
            .require(self.backend.strategy(), capability)
    }

    /// The backend's semaphore operations, or [`LockError::Unsupported`].
    pub(crate) fn semaphores(&self) -> Result<&dyn SemaphoreBackend, LockError> {
        let has = self.backend.capabilities();
        has.semaphores()
            .ok_or_else(|| unsupported(self.backend.strategy(), Capability::Semaphores))
    }

    /// The backend's read-write lock operations, or
    /// [`LockError::Unsupported`].
    pub(crate) fn rw_locks(&self) -> Result<&dyn RwLockBackend, LockError> {
        let has = self.backend.capabilities();
        has.rw_locks()
            .ok_or_else(|| unsupported(self.backend.strategy(), Capability::RwLocks))
    }

    /// The backend's election operations, or [`LockError::Unsupported`].
    pub(crate) fn elections(&self) -> Result<&dyn ElectionBackend, LockError> {
        let has = self.backend.capabilities();
        has.elections()
            .ok_or_else(|| unsupported(self.backend.strategy(), Capability::Elections))
    }

    /// The backend's barrier operations, or [`LockError::Unsupported`].
    pub(crate) fn barriers(&self) -> Result<&dyn BarrierBackend, LockError> {
        let has = self.backend.capabilities();
        has.barriers()
            .ok_or_else(|| unsupported(self.backend.strategy(), Capability::Barriers))
    }

    /// The backend's latch operations, or [`LockError::Unsupported`].
    pub(crate) fn latches(&self) -> Result<&dyn LatchBackend, LockError> {
        let has = self.backend.capabilities();
        has.latches()
            .ok_or_else(|| unsupported(self.backend.strategy(), Capability::Latches))
    }

    /// Whether this manager's guards can be handed off
    /// ([`LockGuard::hand_off`]): `false` for the reentrant strategy, whose
    /// holds an owner's guards share. Ask before taking a lock that is to be
    /// handed off, so it is not taken only to be given back.
    pub fn can_hand_off(&self) -> bool {
        self.backend.capabilities().releases_only_its_attempt
    }

    /// The backend in use.
    pub fn backend(&self) -> &Arc<dyn LockBackend> {
        &self.backend
    }

    /// The prefix of every key this manager names (`key_prefix`).
    pub fn key_prefix(&self) -> &str {
        &self.settings.key_prefix
    }

    /// The validated key for a lock name under the configured prefix.
    pub fn key(&self, name: &str) -> Result<LockKey, LockError> {
        // The prefix was validated with the config the settings came from.
        LockKey::under_valid_prefix(&self.settings.key_prefix, name)
    }

    /// Tries once: `Ok(None)` when someone else holds the lock. The short
    /// form of [`acquire_with`](Self::acquire_with) with
    /// [`AcquireOptions::no_wait`], which says what else it can do.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidKey`] for a bad name; connection errors and
    /// [`LockError::Timeout`] when the node does not answer (the attempt's
    /// hold, if it was granted unseen, is released in the background where
    /// the backend can release exactly that attempt);
    /// [`LockError::Corrupted`] for a key that holds foreign data.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if the future is dropped after the attempt was sent, a
    /// hold it may have been granted is released in the background.
    pub async fn try_acquire(&self, name: &str) -> Result<Option<LockGuard>, LockError> {
        self.try_once(None, name, self.settings.ttl, Claim::LOCK)
            .await
    }

    /// Waits up to the configured `wait_timeout` for the lock; the short form
    /// of [`acquire_with`](Self::acquire_with).
    ///
    /// # Errors
    ///
    /// As [`acquire_with`](Self::acquire_with).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_with`](Self::acquire_with).
    pub async fn acquire(&self, name: &str) -> Result<LockGuard, LockError> {
        self.wait_for(
            None,
            name,
            self.settings.wait_timeout,
            self.settings.ttl,
            Claim::LOCK,
        )
        .await
    }

    /// Takes the lock named `name` as `options` say: as their owner, waiting
    /// up to their wait (retrying with exponential backoff and full jitter,
    /// or woken by a published release, never sleeping past the holder's
    /// remaining TTL; transient errors are retried within the wait), for a
    /// lease of their TTL. What they leave unset comes from the config.
    ///
    #[cfg_attr(not(doctest), doc = include_str!("../doc/acquire_with.md"))]
    ///
    /// With an owner that already holds the lock, the reentrant strategy
    /// enters it again. If the reply to an attempt is lost, the attempt's
    /// hold is released in the background where the backend can release
    /// exactly that attempt ([`Capabilities::releases_only_its_attempt`](crate::Capabilities::releases_only_its_attempt):
    /// single node, Redlock); with the reentrant strategy and an explicit
    /// owner nothing is released, since the owner may already hold the lock:
    /// an extra hold that was granted unseen lasts until the TTL.
    ///
    /// # Errors
    ///
    /// [`LockError::NotAcquired`] when the wait runs out (after one attempt
    /// with no wait), or the last transient error if the node never
    /// answered; [`LockError::InvalidTtl`] for a TTL out of range;
    /// [`LockError::InvalidKey`] for a bad name; any other error at once
    /// ([`LockError::Corrupted`] for a key that holds foreign data).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a future dropped while an attempt was in flight releases
    /// the hold that attempt may have been granted, and a fair waiter's place
    /// in the queue, in the background; no lock stays held past its TTL by a
    /// hold nobody has.
    pub async fn acquire_with(
        &self,
        name: &str,
        options: &AcquireOptions,
    ) -> Result<LockGuard, LockError> {
        self.acquire_claim(name, options, Claim::LOCK).await
    }

    /// [`acquire_with`](Self::acquire_with) of `claim`.
    pub(crate) async fn acquire_claim(
        &self,
        name: &str,
        options: &AcquireOptions,
        claim: Claim,
    ) -> Result<LockGuard, LockError> {
        let ttl = options.ttl.unwrap_or(self.settings.ttl);
        validate_ttl(ttl)?;
        if lease_deadline(Instant::now(), ttl, self.settings.clock_drift_factor).is_none() {
            return Err(LockError::InvalidTtl {
                ttl,
                reason: "leaves nothing of the lease after the clock-drift allowance".to_owned(),
            });
        }
        let owner = options.owner.as_ref();
        match options.wait {
            None => {
                self.wait_for(owner, name, self.settings.wait_timeout, ttl, claim)
                    .await
            }
            Some(Duration::ZERO) => match self.try_once(owner, name, ttl, claim).await? {
                Some(guard) => Ok(guard),
                None => Err(LockError::NotAcquired {
                    key: name.to_owned(),
                    waited: Duration::ZERO,
                    attempts: 1,
                }),
            },
            Some(wait) => self.wait_for(owner, name, wait, ttl, claim).await,
        }
    }

    /// One attempt, as `owner`, or (with `None`) as an owner made for it
    /// alone, which holds nothing yet, so a lost reply can be undone by a
    /// release.
    pub(crate) async fn try_once(
        &self,
        owner: Option<&OwnerToken>,
        name: &str,
        ttl: Duration,
        claim: Claim,
    ) -> Result<Option<LockGuard>, LockError> {
        let key = self.key(name)?;
        let started = Instant::now();
        let span = acquire_span(name, self.backend.strategy());
        let attempt = async {
            match self.attempt(&key, owner, ttl, false, &claim, None).await? {
                Attempt::Acquired(granted) => Ok(Some(self.keep(key, granted))),
                Attempt::Held { .. } => Ok(None),
                Attempt::Unanswered { error, cleanup, .. } => {
                    if let Some(hold) = cleanup {
                        spawn_release(Arc::clone(&self.backend), key.clone(), hold);
                    }
                    Err(error)
                }
            }
        };
        let result = in_span(attempt, &span).await;
        let (outcome, token) = match &result {
            Ok(Some(guard)) => ("acquired", guard.fencing_token()),
            Ok(None) => ("busy", None),
            Err(_) => ("error", None),
        };
        self.acquire_ended(&span, name, outcome, token, 1, started);
        result
    }

    /// Records how an acquire call ended, on its span and in the metrics.
    fn acquire_ended(
        &self,
        span: &tracing::Span,
        name: &str,
        outcome: &'static str,
        token: Option<FencingToken>,
        attempts: u32,
        started: Instant,
    ) {
        // Without a subscriber, not even the clock is read.
        if !span.is_disabled() {
            span.record("outcome", outcome);
            span.record("attempts", attempts);
            span.record(
                "waited_us",
                u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            );
            if let Some(token) = token {
                span.record("fencing_token", token.get());
            }
        }
        telemetry::acquisition(&self.labels(name), outcome, attempts, started);
    }

    /// Attempts until acquired or `wait` runs out, in a span of its own; see
    /// [`LockManager::try_once`] for `owner`.
    pub(crate) async fn wait_for(
        &self,
        owner: Option<&OwnerToken>,
        name: &str,
        wait: Duration,
        ttl: Duration,
        claim: Claim,
    ) -> Result<LockGuard, LockError> {
        let key = self.key(name)?;
        let started = Instant::now();
        let span = acquire_span(name, self.backend.strategy());
        let mut attempts: u32 = 0;
        let result = in_span(
            self.wait_attempts(&key, owner, wait, ttl, claim, &mut attempts),
            &span,
        )
        .await;
        let (outcome, token) = match &result {
            Ok(guard) => ("acquired", guard.fencing_token()),
            Err(LockError::NotAcquired { .. }) => ("timeout", None),
            Err(_) => ("error", None),
        };
        self.acquire_ended(&span, name, outcome, token, attempts, started);
        result
    }

    /// Runs `work` while holding the lock named `name` (waiting up to the
    /// configured `wait_timeout` for it), then releases it: the short form
    /// of [`acquire_with`](Self::acquire_with) and [`LockGuard::run`].
    ///
    /// `work` receives a [`LeaseHandle`] to read the fencing token and to notice
    /// a loss while it runs. Returns `work`'s output only if the lease held until
    /// the release.
    ///
    /// # Errors
    ///
    /// Those of [`acquire`](Self::acquire); [`LockError::LeaseLost`] if the
    /// lease was lost at any point, after `work` finished, because its effects
    /// may have overlapped with another holder's. A failed release after a
    /// lease that held throughout still returns the output: the key expires
    /// by its TTL.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_with`](Self::acquire_with) while waiting; once `work`
    /// runs, dropping the future drops the guard, whose hold is released in
    /// the background.
    pub async fn with_lock<F, Fut, T>(&self, name: &str, work: F) -> Result<T, LockError>
    where
        F: FnOnce(LeaseHandle) -> Fut,
        Fut: Future<Output = T>,
    {
        self.acquire(name).await?.run(work).await
    }

    /// Takes over a lease handed off with [`LockGuard::hand_off`], in this
    /// process or another: checks that the hold `token` names still has the
    /// lock `name` (with the fencing token it claims), replaces it with a new
    /// hold of the same lease and renews it to the TTL it was handed off
    /// with ([`HandoffToken::ttl`]), in one atomic step, and returns a guard
    /// whose watchdog keeps it, as if this process had acquired it. Its fencing token is the hold's.
    /// `watchdog.max_hold` counts from here. The new hold has an owner of
    /// its own ([`LockGuard::owner`]), not the one that handed it off: a
    /// read-write lock's owner re-enters its holds, and the process that
    /// handed the lease off must not enter beside this one.
    ///
    /// The token is spent: a second `resume` with it, an
    /// [`extend_by_token`](Self::extend_by_token), and any command of the
    /// process that handed it off that was still in flight, find the lock no
    /// longer theirs.
    ///
    /// Errors: [`LockError::NotOwner`] when another hold has the lock (or
    /// the token is spent, or another lock's), [`LockError::NotHeld`] when
    /// nobody has it (it was released or expired), [`LockError::Corrupted`]
    /// when the key holds data that is not a lock of this strategy,
    /// [`LockError::HandOffUnsupported`] for strategies that cannot replace a
    /// hold in one step (Redlock, reentrant: use
    /// [`extend_by_token`](Self::extend_by_token) and
    /// [`release_by_token`](Self::release_by_token) there),
    /// [`LockError::InvalidTtl`] when the token's TTL is one this manager
    /// cannot grant (at or below its `replicas.timeout`; nothing is sent, and
    /// the lease runs out at its TTL); [`LockError::HandOffRefused`] for a
    /// read-write hold whose owner has another hold beside it, one of the two
    /// a write (the hold is left as it was); connection errors,
    /// after which the lease is as it was or taken over by a hold nobody
    /// has (it then expires at its TTL).
    pub async fn resume(&self, name: &str, token: &HandoffToken) -> Result<LockGuard, LockError> {
        let key = self.key(name)?;
        let ttl = token.ttl();
        let successor = self.in_line_if_fair(token.hold().successor()?);
        let Some(hand_off) = self.backend.capabilities().hand_off() else {
            return Err(LockError::HandOffUnsupported {
                strategy: self.backend.strategy(),
                operation: "resume",
            });
        };
        let sent_at = Instant::now();
        match hand_off
            .take_over(&key, token.hold(), &successor, ttl)
            .await?
        {
            ExtendOutcome::Extended { ttl: ttl_set } => {
                tracing::debug!(
                    key = name,
                    fencing_token = token.fencing_token().map(FencingToken::get),
                    "lease resumed"
                );
                Ok(self.keep(
                    key,
                    Granted {
                        hold: successor,
                        sent_at,
                        ttl,
                        ttl_set,
                    },
                ))
            }
            ExtendOutcome::NotHeld => Err(self.not_held_by_this_hold(&key).await),
        }
    }

    /// Renews the lease a hand-off token names to `ttl` from now, without
    /// taking it over (nothing renews it afterwards): for a lock kept across
    /// the steps of a script (`distlock extend`). The hold stays its
    /// owner's: a read-write lock's owner that acquires again re-enters
    /// beside it ([`LockGuard::hand_off`]). Returns the TTL the key now
    /// has (the reentrant strategy keeps a longer one that re-entries share).
    ///
    /// Errors as for [`resume`](Self::resume), and [`LockError::InvalidTtl`].
    pub async fn extend_by_token(
        &self,
        name: &str,
        token: &HandoffToken,
        ttl: Duration,
    ) -> Result<Duration, LockError> {
        let key = self.key(name)?;
        match self.backend.extend(&key, token.hold(), ttl).await? {
            ExtendOutcome::Extended { ttl } => Ok(ttl),
            ExtendOutcome::NotHeld => Err(self.not_held_by_this_hold(&key).await),
        }
    }

    /// Gives back the lease a hand-off token names (`distlock release`),
    /// only if that hold still has it.
    ///
    /// Errors as for [`resume`](Self::resume).
    pub async fn release_by_token(
        &self,
        name: &str,
        token: &HandoffToken,
    ) -> Result<(), LockError> {
        let key = self.key(name)?;
        let hold = self.in_line_if_fair(token.hold().clone());
        match self.backend.release(&key, &hold).await? {
            ReleaseOutcome::Released => Ok(()),
            ReleaseOutcome::NotHeld => Err(self.not_held_by_this_hold(&key).await),
        }
    }

    /// `hold` as in line ([`HoldToken::in_line`]) in fair mode, if it is a
    /// lock's or a permit's: its release hands what it frees to the next
    /// waiters, whether this process acquired it or resumed it from a
    /// hand-off token (a read-write lock's writers queue in every mode,
    /// and its release hands over by its own keys).
    fn in_line_if_fair(&self, hold: HoldToken) -> HoldToken {
        if self.settings.fair {
            hold.in_line()
        } else {
            hold
        }
    }

    /// The metrics labels of calls and leases on the lock `name`.
    fn labels(&self, name: &str) -> Labels {
        Labels::new(self.backend.strategy(), self.lock_names.label(name))
    }

    /// Why a hold's extend or release found the lock not its own: held by
    /// another ([`LockError::NotOwner`]) or by nobody ([`LockError::NotHeld`]).
    /// A second look, for the error alone; if it fails, "not this owner's"
    /// is still true.
    async fn not_held_by_this_hold(&self, key: &LockKey) -> LockError {
        let name = key.name().to_owned();
        match self.backend.inspect(key).await {
            // Free, or a semaphore whose permits all ended (its limit stays).
            Ok(state) if !state.is_held() => LockError::NotHeld { key: name },
            _ => LockError::NotOwner { key: name },
        }
    }

    /// Lists the held locks: a `SCAN` of the lock keys on every node that
    /// holds the backend's keys (every standalone server, every master of a
    /// cluster, the master of a sentinel group; every Redlock node), bounded
    /// by `options.scan_limit`, then each name found read with
    /// [`inspect`](Self::inspect), so every strategy reports its locks as it
    /// sees them (Redlock: held by a majority). Free locks (fencing counters
    /// without a lock) are not listed. Fair-mode queues are measured with
    /// `LLEN`.
    ///
    /// It reads what is there while locks come and go: a lock taken during
    /// the scan may be missing, and one released may be listed as held.
    ///
    /// Errors: [`LockError::InvalidConfig`] for a backend that cannot list
    /// ([`ListBackend::list`](crate::ListBackend::list)) or a zero `batch`. A node that fails is
    /// reported in [`LockListing::failures`], not as an error, so the other
    /// nodes' locks are still listed.
    pub async fn list(&self, options: &ListOptions) -> Result<LockListing, LockError> {
        if options.batch == 0 {
            return Err(LockError::config("batch", "must be at least 1"));
        }
        let Some(listing) = self.backend.capabilities().listing() else {
            return Err(LockError::config(
                "strategy",
                format!(
                    "the {} strategy does not say which nodes hold its keys, so its locks \
                     cannot be listed",
                    self.backend.strategy()
                ),
            ));
        };
        listing.list(self.key_prefix(), options).await
    }

    /// Reads what holds the name `name`, whichever primitive that is: a lock
    /// (with its holder information), an election's leader, a semaphore's
    /// permits, a read-write lock's holds, or nothing. One round trip on a
    /// single node (one per node with Redlock); it changes nothing.
    ///
    /// For the lock's view alone, [`Lock::state`](crate::Lock::state).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidKey`] for a bad name; [`LockError::Corrupted`]
    /// when a key of the name holds data none of this library's primitives
    /// writes; the connection's errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(locks: &lock_core::LockManager) -> Result<(), lock_core::LockError> {
    /// use lock_core::NameState;
    ///
    /// match locks.inspect("reports").await? {
    ///     NameState::Free { .. } => println!("free"),
    ///     NameState::Semaphore(semaphore) => println!("{} permits in use", semaphore.used),
    ///     other => println!("held: {other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn inspect(&self, name: &str) -> Result<NameState, LockError> {
        let key = self.key(name)?;
        self.backend.inspect(&key).await
    }

    /// The settings this manager was made with.
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A guard for a granted hold on `key`, with its watchdog planned.
    pub(super) fn keep(&self, key: LockKey, granted: Granted) -> LockGuard {
        self.keep_past(key, granted, None)
    }

    /// As [`keep`](Self::keep), for a grant that an attempt whose reply was
    /// lost, sent at `stray`, may still renew to the TTL (a waiter's attempt
    /// that named this hold to take up): no renewal is trusted past that
    /// TTL, which the stray sets when it lands.
    pub(super) fn keep_past(
        &self,
        key: LockKey,
        granted: Granted,
        stray: Option<Instant>,
    ) -> LockGuard {
        let Granted {
            hold,
            sent_at,
            ttl,
            ttl_set,
        } = granted;
        let labels = self.labels(key.name());
        let shared = Arc::new(LeaseShared::new(
            Arc::clone(&self.backend),
            key,
            hold,
            ttl,
            self.settings.clock_drift_factor,
            sent_at,
            labels,
        ));
        // The reentrant strategy keeps a longer TTL that re-entries share; a
        // server-side hand-off grants for the waiter lease only.
        if ttl_set != ttl {
            shared.renewed(sent_at, ttl_set);
        }
        // Not counted from before the grant's own send: a stray that runs
        // before the attempt that took the grant up is overwritten by it.
        if let Some(stray) = stray {
            shared.maybe_renewed(stray.max(sent_at), ttl);
        }
        self.schedule.plan(&shared);
        if ttl_set < ttl {
            extend_at_once(&shared);
        }
        LockGuard::new(shared)
    }
}

/// Extends a lease granted for less than its TTL (a server-side hand-off
/// grants for the waiter lease) to its TTL at once, in the background, and
/// again after a failure that may pass, until it is extended or ends: its
/// watchdog would first renew only a renewal interval after the grant.
fn extend_at_once(shared: &Arc<LeaseShared>) {
    let lease = Arc::clone(shared);
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        loop {
            match lease.extend_hold(None, None).await {
                Ok(ExtendOutcome::Extended { .. }) => return,
                Ok(ExtendOutcome::NotHeld) | Err(LockError::Corrupted { .. }) => {
                    lease.lose(LossReason::NotHeld);
                    return;
                }
                Err(err) if err.is_retryable() => {
                    tracing::debug!(key = lease.key.name(), error = %err, "cannot extend a handed-over lease yet");
                    tokio::time::sleep(EXTEND_RETRY).await;
                }
                Err(err) => {
                    tracing::warn!(key = lease.key.name(), error = %err, "cannot extend a handed-over lease; it ends with the hand-off's grant");
                    return;
                }
            }
        }
    });
}

/// How soon [`extend_at_once`] tries again after a failure.
const EXTEND_RETRY: Duration = Duration::from_millis(20);

/// The span of one acquire call; its outcome, fencing token, attempts and
/// wait are recorded when it ends. Never the owner token.
fn acquire_span(name: &str, strategy: &'static str) -> tracing::Span {
    tracing::info_span!(
        "acquire",
        key = name,
        strategy,
        outcome = tracing::field::Empty,
        fencing_token = tracing::field::Empty,
        attempts = tracing::field::Empty,
        waited_us = tracing::field::Empty,
    )
}
