//! One caller's wait for a claim: its attempts, its sleeps between them
//! (woken by a release, or at the holder's TTL), its place in a queue and
//! what it leaves behind when it ends without the claim.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::backend::{AcquireOutcome, Claim, FairPlace, LockBackend};
use crate::engine::lease::drop_guard::DropGuard;
use crate::engine::lease::guard::spawn_release;
use crate::engine::lease::guard::LockGuard;
use crate::engine::lease::timing::lease_deadline;
use crate::engine::manager::{Attempt, Granted, LockManager, FAIR_WAITER_LEASE};
use crate::engine::offer::Offered;
use crate::engine::settings::WaitMode;
use crate::engine::wake::Wakeups;
use crate::error::LockError;
use crate::hold::{Access, HoldKind, HoldToken};
use crate::key::{FencingToken, LockKey, OwnerToken};

/// How long a waiter whose subscription to releases failed polls before it
/// tries to subscribe again.
const SUBSCRIBE_RETRY: Duration = Duration::from_secs(1);

/// How long after a holder's TTL runs out a waiter tries again: Redis expires
/// keys with millisecond precision.
const EXPIRY_SLACK: Duration = Duration::from_millis(1);

/// How a wait for a claim behaves, by its kind and the manager's fair mode.
impl Claim {
    /// Whether a wait for this claim keeps a place in a queue, by one owner
    /// for the whole wait: a lock's or a permit's in fair mode, and a
    /// write of a read-write lock always (waiting writers are granted in
    /// arrival order, and readers wait behind them).
    pub(super) fn queues(&self, fair: bool) -> bool {
        match self {
            Claim::Lock { .. } | Claim::Permit(_) => fair,
            Claim::Access(request) => request.access == Access::Exclusive,
            Claim::Multi(_) | Claim::Party(_) => false,
        }
    }

    /// Whether a wait for this claim is woken by every release of its name
    /// in this process, and tries again once it has subscribed: where a
    /// release may let in more than one waiter, or not the one that has
    /// waited longest (the queue, not the wake-up, decides in fair mode;
    /// a semaphore's release may not fit the first waiter's weight; a
    /// writer's release lets in every reader; one member's release may not
    /// free a multi-key hold's others).
    pub(super) fn wakes_on_every_release(&self, fair: bool) -> bool {
        fair || !matches!(self, Claim::Lock { .. })
    }

    /// The weight and limit of a semaphore's waiter outside fair mode: a
    /// release that says how much weight is in use wakes it only when its
    /// weight fits (in fair mode the queue decides).
    pub(super) fn fits_when(&self, fair: bool) -> Option<(u32, u32)> {
        match self {
            Claim::Permit(request) if !fair => Some((request.weight, request.limit)),
            _ => None,
        }
    }

    /// Whether a wait for this claim offers its attempts' holds for a
    /// release to grant on the server (where the backend hands over): a
    /// fair lock's or permit's, and a write's that does not prefer readers.
    pub(super) fn offers(&self, fair: bool) -> bool {
        match self {
            Claim::Lock { .. } | Claim::Permit(_) => fair,
            Claim::Access(request) => {
                request.access == Access::Exclusive && !request.prefer_readers
            }
            Claim::Multi(_) | Claim::Party(_) => false,
        }
    }

    /// This claim as one attempt sends it: with the waiter's place in its
    /// queue (joined when `join`) where the claim queues.
    pub(super) fn placed(&self, fair: bool, join: bool) -> Claim {
        let place = FairPlace::new(FAIR_WAITER_LEASE, join);
        match self {
            Claim::Lock { .. } => Claim::Lock {
                fair: fair.then_some(place),
            },
            Claim::Permit(request) => {
                let mut request = *request;
                request.fair = fair.then_some(place);
                Claim::Permit(request)
            }
            Claim::Access(request) => {
                let mut request = *request;
                request.waiter = FairPlace::new(FAIR_WAITER_LEASE, join && self.queues(fair));
                Claim::Access(request)
            }
            Claim::Multi(keys) => Claim::Multi(Arc::clone(keys)),
            Claim::Party(request) => Claim::Party(*request),
        }
    }
}

impl LockManager {
    /// The error of a grant whose reply does not add up.
    fn unexpected_grant(&self, reply: &str) -> LockError {
        LockError::UnexpectedReply {
            node: self.backend.strategy().to_owned(),
            script: "try_acquire",
            reply: reply.to_owned(),
        }
    }

    /// One acquire attempt, with a hold of its own, as `owner` or (with
    /// `None`) as an owner made for this attempt alone, whose lost reply can
    /// be undone by releasing by owner; otherwise only where the backend
    /// releases exactly one attempt.
    ///
    /// A fair waiter passes its `offered` hold and its subscription: the
    /// subscription expects a grant to this attempt's hold before it is
    /// sent, and an attempt answered "held" becomes the offer.
    pub(super) async fn attempt(
        &self,
        key: &LockKey,
        owner: Option<&OwnerToken>,
        ttl: Duration,
        join_queue: bool,
        claim: &Claim,
        offered: Option<(&Offered, Option<&dyn Wakeups>)>,
    ) -> Result<Attempt, LockError> {
        let (hold, fresh_owner) = match owner {
            Some(owner) => (HoldToken::new(owner.clone())?, false),
            None => (HoldToken::fresh()?, true),
        };
        let fair = self.settings.fair;
        let hold = hold.with_kind(claim.hold_kind());
        let hold = if fair { hold.in_line() } else { hold };
        let queues = claim.queues(fair);
        let sent = claim.placed(fair, join_queue);
        let sent_at = Instant::now();
        // If this future is dropped mid-request, the acquire may have run: the
        // guard releases its hold in the background so no key stays held by a
        // hold nobody has.
        // A fair waiter keeps its owner across attempts (its place in the
        // queue), so only a per-attempt release is safe for it.
        let undo_safe =
            (fresh_owner && !queues) || self.backend.capabilities().releases_only_its_attempt;
        let pending = DropGuard::new(|| {
            if undo_safe {
                spawn_release(Arc::clone(&self.backend), key.clone(), hold.clone());
            }
        });
        let earlier = offer_hold(offered, &hold);
        let outcome = self
            .backend
            .try_acquire(key, &hold, ttl, &sent, earlier.as_ref())
            .await;
        pending.disarm();
        match outcome {
            Ok(AcquireOutcome::Acquired(acquired)) => {
                let (hold, ttl_set) = if acquired.earlier {
                    let none_offered = "a grant to an earlier attempt, where none was offered";
                    let Some((offered, _)) = offered else {
                        return Err(self.unexpected_grant(none_offered));
                    };
                    let Some(offer) = offered.take() else {
                        return Err(self.unexpected_grant(none_offered));
                    };
                    let granted = match acquired.fencing_token {
                        Some(token) => grant_to(offer.hold.clone(), Some(token), acquired.slot),
                        None => Err("a grant to an earlier attempt without a fencing token"),
                    };
                    match granted {
                        Ok(granted) => (granted, acquired.ttl),
                        Err(reply) => {
                            // Kept on offer: leaving the queue gives back
                            // what the release granted it.
                            offered.answered(offer.hold, offer.sent_at);
                            return Err(self.unexpected_grant(reply));
                        }
                    }
                } else {
                    match grant_to(hold.clone(), acquired.fencing_token, acquired.slot) {
                        Ok(granted) => (granted, ttl),
                        Err(reply) => {
                            spawn_release(Arc::clone(&self.backend), key.clone(), hold);
                            return Err(self.unexpected_grant(reply));
                        }
                    }
                };
                tracing::debug!(
                    key = key.name(),
                    kind = ?hold.kind(),
                    fencing_token = hold.fencing_token().map(FencingToken::get),
                    slot = acquired.slot,
                    by_release = acquired.earlier,
                    strategy = self.backend.strategy(),
                    elapsed_us = sent_at.elapsed().as_micros() as u64,
                    "acquired"
                );
                // A grant to an earlier attempt was renewed to the TTL by
                // this one: the lease counts from when it was sent.
                Ok(Attempt::Acquired(Granted {
                    hold,
                    sent_at,
                    ttl,
                    ttl_set,
                }))
            }
            Ok(AcquireOutcome::Held { remaining }) => {
                if let (Some((offered, _)), true) = (offered, join_queue) {
                    offered.answered(hold, sent_at);
                }
                Ok(Attempt::Held { remaining })
            }
            Err(error @ (LockError::Timeout { .. } | LockError::Connection { .. })) => {
                Ok(Attempt::Unanswered {
                    error,
                    cleanup: undo_safe.then_some(hold),
                    renews: earlier.map(|earlier| (earlier, sent_at)),
                })
            }
            Err(err) => Err(err),
        }
    }

    /// The attempts of [`LockManager::wait_for`], counted in `attempts`:
    /// attempt, give up if the wait is over, subscribe to releases when
    /// due, sleep, and again ([`Wait`] holds the state between the steps).
    pub(super) async fn wait_attempts(
        &self,
        key: &LockKey,
        owner: Option<&OwnerToken>,
        wait: Duration,
        ttl: Duration,
        claim: Claim,
        attempts: &mut u32,
    ) -> Result<LockGuard, LockError> {
        // A fair waiter keeps one owner for the whole wait: it is its place in
        // the queue. Without fair mode, an owner made for this wait is made
        // anew for each attempt (`None`), so even a release by owner alone
        // (reentrant) only reaches its own attempt.
        let fair_owner = match (claim.queues(self.settings.fair), owner) {
            (false, _) => None,
            (true, Some(owner)) => Some(owner.clone()),
            (true, None) => Some(OwnerToken::generate()?),
        };
        // In fair mode the first attempt queues this owner; leave the queue on
        // any way out but success (the acquire script dequeues a winner),
        // giving back a grant a release made to this waiter's offer.
        let offered = Offered::default();
        let offers = claim.offers(self.settings.fair);
        let queued = fair_owner.as_ref().map(|owner| {
            DropGuard::new(|| {
                // None before any attempt was sent: nothing was offered.
                let offered = Some(offered.holds()).filter(|holds| offers && !holds.is_empty());
                leave_queue(&self.backend, key, owner, offered);
            })
        });
        let mut wait = Wait::new(
            self,
            key,
            fair_owner.as_ref().or(owner),
            wait,
            ttl,
            claim,
            attempts,
        );
        wait.queued = queued;
        if offers && fair_owner.is_some() {
            wait.offered = Some(&offered);
        }
        // A grant a release made on the server to this waiter's offer,
        // found while it slept: it ends the wait as an acquire does.
        let mut granted_on_server = None;
        loop {
            let tried = match granted_on_server.take() {
                Some(granted) => Tried::Acquired(granted),
                None => wait.attempt().await?,
            };
            let (holder_remaining, contended) = match tried {
                Tried::Acquired(granted) => {
                    let stray = wait.stray_renewal_of(&granted.hold);
                    let guard = self.keep_past(key.clone(), granted, stray);
                    // The acquire script, or the release that granted the
                    // lock on the server, took this owner out of the queue.
                    if let Some(queued) = wait.queued.take() {
                        queued.disarm();
                    }
                    wait.log_success();
                    return Ok(guard);
                }
                Tried::Held { remaining } => {
                    wait.give_up_if_over(None)?;
                    (remaining, true)
                }
                Tried::Failed(error) => {
                    wait.give_up_if_over(Some(error))?;
                    (None, false)
                }
            };
            if contended && wait.subscribe_if_due().await == Subscribed::MayHaveMissedOne {
                continue;
            }
            wait.sleep(holder_remaining, contended).await;
            granted_on_server = wait.granted_on_server();
        }
    }
}

/// One caller's wait for a lock, between its steps: when it started and
/// gives up, the owner its attempts use, its subscription to releases, and
/// what it leaves behind if it ends without the lock.
///
/// Fields drop in the order written: the lost attempts' holds are released
/// first, then the fair queue is left, and only then does the release watch
/// pass an unspent wake-up on to the next waiter.
pub(super) struct Wait<'a, Q> {
    /// Holds of attempts whose reply was lost: each is released before the
    /// next attempt, so its cleanup can never land after (and on) a later
    /// grant; what is left at the end is released in the background.
    unanswered: UnansweredHolds<'a>,
    /// In fair mode, leaves the queue when dropped; disarmed on success.
    queued: Option<Q>,
    /// A waiter that offers its holds (a fair lock's or permit's, a writer's):
    /// the hold a release may grant it on the server.
    offered: Option<&'a Offered>,
    releases: Option<Box<dyn Wakeups>>,
    /// When this wait may (next) try to subscribe to releases; `None` once
    /// subscribed, or when the backend cannot notify.
    subscribe_at: Option<Instant>,
    manager: &'a LockManager,
    key: &'a LockKey,
    owner: Option<&'a OwnerToken>,
    ttl: Duration,
    claim: Claim,
    started: Instant,
    give_up_at: Option<Instant>,
    attempts: &'a mut u32,
    /// The hold an attempt whose reply was lost named to take up (the
    /// offer), and when the first such attempt since the last one answered
    /// "held" was sent: it may still land and renew that hold to the TTL.
    /// An answered "held" moves the offer on, so none before it matters.
    stray: Option<(HoldToken, Instant)>,
    /// Since when every attempt has failed (`None` while they get answers),
    /// and when that was last logged: a long wait on a server that is down
    /// says so at `warn`, not only at `debug` when the wait ends.
    failing: Option<(Instant, Option<Instant>)>,
}

/// How long attempts fail in a row before a wait logs a warning, and how
/// often it repeats it while they go on failing.
const FAILING_WARN_AFTER: Duration = Duration::from_secs(10);
const FAILING_WARN_EVERY: Duration = Duration::from_secs(60);

/// What one attempt of a [`Wait`] found.
pub(super) enum Tried {
    Acquired(Granted),
    /// Someone else holds the lock, for `remaining` if the server said.
    Held {
        remaining: Option<Duration>,
    },
    /// A retryable error, or a lost reply (whose hold the wait releases).
    Failed(LockError),
}

/// What subscribing to releases means for the next step.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Subscribed {
    /// Nothing new: sleep as planned.
    AsBefore,
    /// Subscribed just now, with no earlier waiter of this process to have
    /// been woken by a release published meanwhile: try again at once.
    MayHaveMissedOne,
}

impl<'a, Q> Wait<'a, Q> {
    fn new(
        manager: &'a LockManager,
        key: &'a LockKey,
        owner: Option<&'a OwnerToken>,
        wait: Duration,
        ttl: Duration,
        claim: Claim,
        attempts: &'a mut u32,
    ) -> Self {
        let started = Instant::now();
        Wait {
            unanswered: UnansweredHolds::new(&manager.backend, key),
            queued: None,
            offered: None,
            releases: None,
            subscribe_at: Some(started),
            manager,
            key,
            owner,
            ttl,
            claim,
            started,
            give_up_at: started.checked_add(wait),
            attempts,
            stray: None,
            failing: None,
        }
    }

    /// Keeps the run of failed attempts: warns once it has lasted
    /// [`FAILING_WARN_AFTER`], then every [`FAILING_WARN_EVERY`].
    fn note_failure(&mut self, error: Option<&LockError>) {
        let Some(error) = error else {
            self.failing = None;
            return;
        };
        let now = Instant::now();
        let (since, warned) = self.failing.get_or_insert((now, None));
        let failing_for = now.saturating_duration_since(*since);
        let due = match warned {
            None => failing_for >= FAILING_WARN_AFTER,
            Some(at) => now.saturating_duration_since(*at) >= FAILING_WARN_EVERY,
        };
        if due {
            *warned = Some(now);
            tracing::warn!(
                key = self.key.name(),
                error = %error,
                "still waiting for the lock: every attempt for {}s has failed; retrying until \
                 the wait ends",
                failing_for.as_secs()
            );
        }
    }

    /// When an attempt that may still renew `hold` to the TTL was sent (one
    /// whose reply was lost, naming `hold` as the offer to take up).
    fn stray_renewal_of(&self, hold: &HoldToken) -> Option<Instant> {
        let (named, sent_at) = self.stray.as_ref()?;
        (named.attempt_value() == hold.attempt_value()).then_some(*sent_at)
    }

    /// What is left of the wait.
    fn left(&self) -> Duration {
        self.give_up_at.map_or(Duration::MAX, |at| {
            at.saturating_duration_since(Instant::now())
        })
    }

    /// Settles lost replies, then makes one attempt; an error that is not
    /// retryable ends the wait.
    async fn attempt(&mut self) -> Result<Tried, LockError> {
        self.unanswered.settle(self.left()).await;
        if let Some(watch) = self.releases.as_mut() {
            watch.attempt_starting();
        }
        let offered = self
            .offered
            .map(|offered| (offered, self.releases.as_deref()));
        let result = self
            .manager
            .attempt(self.key, self.owner, self.ttl, true, &self.claim, offered)
            .await;
        *self.attempts = self.attempts.saturating_add(1);
        tracing::debug!(
            attempt = *self.attempts,
            outcome = match &result {
                Ok(Attempt::Acquired(_)) => "acquired",
                Ok(Attempt::Held { .. }) => "held",
                Ok(Attempt::Unanswered { .. }) => "unanswered",
                Err(_) => "error",
            },
            "acquire attempt"
        );
        if let (Some(watch), Ok(Attempt::Acquired(_) | Attempt::Held { .. })) =
            (self.releases.as_mut(), &result)
        {
            if matches!(result, Ok(Attempt::Held { .. })) {
                watch.attempt_refused();
            }
            // The wake-ups before the attempt led to one that finished;
            // one that erred keeps them, to pass on if this wait ends.
            watch.attempt_finished();
        }
        self.note_failure(match &result {
            Ok(Attempt::Unanswered { error, .. }) => Some(error),
            Err(err) => Some(err),
            Ok(_) => None,
        });
        let name = self.key.name();
        match result {
            Ok(Attempt::Acquired(granted)) => Ok(Tried::Acquired(granted)),
            Ok(Attempt::Held { remaining }) => {
                self.stray = None;
                Ok(Tried::Held { remaining })
            }
            Ok(Attempt::Unanswered {
                error,
                cleanup,
                renews,
            }) => {
                self.unanswered.push(cleanup);
                if let Some((offer, sent_at)) = renews {
                    let first = self
                        .stray
                        .take()
                        .filter(|(named, _)| named.attempt_value() == offer.attempt_value());
                    self.stray = Some(first.unwrap_or((offer, sent_at)));
                }
                tracing::debug!(key = name, error = %error, "acquire reply lost; retrying");
                Ok(Tried::Failed(error))
            }
            Err(err) if err.is_retryable() => {
                tracing::debug!(key = name, error = %err, "acquire attempt failed; retrying");
                Ok(Tried::Failed(err))
            }
            Err(err) => Err(err),
        }
    }

    /// Ends the wait when its time is up: with the last attempt's `error`
    /// if it failed, otherwise [`LockError::NotAcquired`].
    fn give_up_if_over(&self, error: Option<LockError>) -> Result<(), LockError> {
        if !self.left().is_zero() {
            return Ok(());
        }
        if let Some(err) = error {
            return Err(err);
        }
        tracing::debug!(
            key = self.key.name(),
            attempts = *self.attempts,
            "gave up waiting"
        );
        Err(LockError::NotAcquired {
            key: self.key.name().to_owned(),
            waited: self.started.elapsed(),
            attempts: *self.attempts,
        })
    }

    fn log_success(&self) {
        if *self.attempts > 1 {
            tracing::debug!(
                key = self.key.name(),
                attempts = *self.attempts,
                waited_us = self.started.elapsed().as_micros() as u64,
                "acquired after waiting"
            );
        }
    }

    /// Subscribes to releases if this wait is not subscribed, may try now
    /// (a failed try is repeated after `SUBSCRIBE_RETRY`), and waits for
    /// releases rather than polling.
    async fn subscribe_if_due(&mut self) -> Subscribed {
        let now = Instant::now();
        let due = self.subscribe_at.is_some_and(|at| now >= at);
        if !due || self.manager.settings.wait_mode != WaitMode::Notify {
            return Subscribed::AsBefore;
        }
        let name = self.key.name();
        // A failed subscription is tried again later; meanwhile poll.
        self.subscribe_at = Some(now + SUBSCRIBE_RETRY);
        // Bounded by the wait: an unreachable pub/sub connection may
        // not cost a caller more than it agreed to wait.
        let subscribe = watch_claim(self.manager.backend.as_ref(), self.key, &self.claim);
        match tokio::time::timeout(self.left(), subscribe).await {
            Ok(Ok(Some(watch))) => {
                // A release published before the subscription was
                // confirmed woke an earlier waiter of this process if
                // there was one; otherwise try again at once, or it
                // would be missed.
                let behind_others = watch.joined_behind_others();
                // Fair waiters: the queue, not the wake-up, decides who
                // wins. A semaphore's: a release may let several in, or
                // not the longest waiter (a larger weight than it freed).
                let every_release = self
                    .claim
                    .wakes_on_every_release(self.manager.settings.fair);
                match self.claim.fits_when(self.manager.settings.fair) {
                    Some((weight, limit)) => watch.wake_when_fits(weight, limit),
                    None if every_release => watch.wake_on_every_release(),
                    None => {}
                }
                // A grant to the hold already on offer may come any time.
                if let Some(hold) = self.offered.and_then(Offered::hold) {
                    watch.expect_grants(&[&hold]);
                }
                self.releases = Some(watch);
                self.subscribe_at = None;
                // Where a release may be for more than the waiter it woke,
                // an earlier waiter's wake-up says nothing of this one's.
                if !behind_others || every_release {
                    return Subscribed::MayHaveMissedOne;
                }
            }
            Ok(Ok(None)) => self.subscribe_at = None,
            Ok(Err(err)) => {
                tracing::debug!(key = name, error = %err, "cannot subscribe to releases; polling")
            }
            Err(_) => {
                tracing::debug!(key = name, "no subscription within the wait; polling")
            }
        }
        Subscribed::AsBefore
    }

    /// The lease of a grant a release made on the server to this waiter's
    /// offer, once its message arrived: counted from when the attempt that
    /// offered the hold was sent, for the waiter lease
    /// ([`LockManager::keep`] extends it to the TTL at once). A grant to any
    /// other hold of this waiter (an attempt whose reply was lost, released
    /// before the next one) is not taken up.
    fn granted_on_server(&mut self) -> Option<Granted> {
        let grant = self.releases.as_mut()?.take_grant()?;
        let offered = self.offered?;
        let offer = offered.take_if(&grant.attempt)?;
        let ttl_set = FAIR_WAITER_LEASE.min(self.ttl);
        let drift = self.manager.settings.clock_drift_factor;
        // Found late (an attempt in flight kept this waiter from looking),
        // with little of the grant left: the next attempt, at once, takes
        // it up for the TTL instead (`Acquired::earlier`).
        let left = lease_deadline(offer.sent_at, ttl_set, drift).map_or(Duration::ZERO, |end| {
            end.saturating_duration_since(Instant::now())
        });
        if left < ttl_set / 4 {
            tracing::debug!(
                key = self.key.name(),
                "a grant found late; taken up by an attempt"
            );
            offered.answered(offer.hold, offer.sent_at);
            return None;
        }
        let token = grant.fencing_token;
        // A permit's slot is below the limit: a message that names none, or
        // another, is left to an attempt, which reads the permit itself.
        let slot = match (&self.claim, grant.slot) {
            (Claim::Permit(request), Some(slot)) if slot < request.limit => Some(slot),
            (Claim::Permit(_), _) => {
                offered.answered(offer.hold, offer.sent_at);
                return None;
            }
            _ => None,
        };
        let Ok(hold) = grant_to(offer.hold.clone(), Some(token), slot) else {
            offered.answered(offer.hold, offer.sent_at);
            return None;
        };
        tracing::debug!(
            key = self.key.name(),
            fencing_token = token.get(),
            slot,
            "granted by a release to this waiter's offer"
        );
        Some(Granted {
            hold,
            sent_at: offer.sent_at,
            ttl: self.ttl,
            ttl_set,
        })
    }

    /// Sleeps until the next attempt: while the lock is `contended` and
    /// this wait is subscribed, until a release is published or the
    /// holder's TTL runs out; otherwise a jittered backoff, never past the
    /// holder's TTL. Never past the wait, and in fair mode never long
    /// enough to lose this waiter's place.
    async fn sleep(&mut self, holder_remaining: Option<Duration>, contended: bool) {
        let settings = &self.manager.settings;
        let left = self.left();
        // A fair waiter must try again well within its place's lease, or
        // it drops out of the line between attempts.
        let fair_cap = if self.claim.queues(self.manager.settings.fair) {
            FAIR_WAITER_LEASE / 4
        } else {
            Duration::MAX
        };
        match self.releases.as_mut() {
            Some(watch) if contended => {
                // Wake on a published release, or when the holder's TTL
                // runs out (expiry publishes nothing), whichever is first.
                let expiry = holder_remaining.map_or(settings.retry.max_delay, |remaining| {
                    remaining.saturating_add(EXPIRY_SLACK)
                });
                tokio::select! {
                    () = watch.released() => {}
                    () = tokio::time::sleep(expiry.min(fair_cap).min(left)) => {}
                }
            }
            _ => {
                let mut delay = settings.retry.jittered_delay(*self.attempts - 1);
                if let Some(remaining) = holder_remaining {
                    delay = delay.min(remaining.saturating_add(EXPIRY_SLACK));
                }
                let nap = tokio::time::sleep(delay.min(fair_cap).min(left));
                // A waiter that offers, after a failed attempt: a grant to
                // its offer may still come, and ages while it sleeps.
                let offering = self.offered.is_some();
                match self.releases.as_mut().filter(|_| offering) {
                    Some(watch) => {
                        tokio::select! {
                            () = watch.released() => {}
                            () = nap => {}
                        }
                    }
                    None => nap.await,
                }
            }
        }
    }
}

/// The holds of a wait's attempts whose replies were lost. Each is released
/// before the next attempt ([`UnansweredHolds::settle`]); what is left when the
/// wait ends, however it ends, is released in the background.
struct UnansweredHolds<'a> {
    backend: &'a Arc<dyn LockBackend>,
    key: &'a LockKey,
    holds: Vec<HoldToken>,
}

impl<'a> UnansweredHolds<'a> {
    fn new(backend: &'a Arc<dyn LockBackend>, key: &'a LockKey) -> Self {
        UnansweredHolds {
            backend,
            key,
            holds: Vec::new(),
        }
    }

    fn push(&mut self, hold: Option<HoldToken>) {
        self.holds.extend(hold);
    }

    /// Releases every unanswered hold, within `budget`; keeps those whose
    /// release failed for a retryable reason (tried again before the next
    /// attempt).
    async fn settle(&mut self, budget: Duration) {
        if self.holds.is_empty() {
            return;
        }
        let deadline = Instant::now() + budget.min(Duration::from_secs(3600));
        // Each hold stays listed until its release is answered, so a wait
        // dropped meanwhile still releases it in the background (`Drop`).
        let mut index = 0;
        while index < self.holds.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            let release = self.backend.release(self.key, &self.holds[index]);
            let settled = match tokio::time::timeout(left, release).await {
                Ok(Ok(outcome)) => {
                    tracing::debug!(key = self.key.name(), ?outcome, "lost acquire settled");
                    true
                }
                Ok(Err(err)) if err.is_retryable() => {
                    tracing::debug!(key = self.key.name(), error = %err, "cannot settle a lost acquire yet");
                    false
                }
                Ok(Err(err)) => {
                    tracing::warn!(key = self.key.name(), error = %err, "cannot settle a lost acquire; it expires by its TTL");
                    true
                }
                // The release may still run after the time-out: it names this
                // attempt's hold alone, so it cannot reach a later grant.
                Err(_) => false,
            };
            if settled {
                self.holds.swap_remove(index);
            } else {
                index += 1;
            }
        }
    }
}

impl Drop for UnansweredHolds<'_> {
    fn drop(&mut self) {
        for hold in self.holds.drain(..) {
            spawn_release(Arc::clone(self.backend), self.key.clone(), hold);
        }
    }
}

/// Subscribes to the releases of what `claim` waits for: `key`'s, or every
/// member's of a multi-key hold, merged (`None` when the backend cannot
/// notify of one of them: the wait then polls).
async fn watch_claim(
    backend: &dyn LockBackend,
    key: &LockKey,
    claim: &Claim,
) -> Result<Option<Box<dyn Wakeups>>, LockError> {
    let Claim::Multi(keys) = claim else {
        return backend.watch_releases(key).await;
    };
    let watches = futures::future::try_join_all(keys.iter().map(|key| async move {
        let watch = backend.watch_releases(key).await?;
        // At once, not after every member's subscription: until it is
        // set, this watch counts as the waiter a release of its key
        // wakes, and would take that wake-up from a plain waiter.
        if let Some(watch) = &watch {
            watch.wake_on_every_release();
        }
        Ok::<_, LockError>(watch)
    }))
    .await?;
    Ok(watches
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .map(|watches| Box::new(AnyOf(watches)) as Box<dyn Wakeups>))
}

/// Several subscriptions as one: woken by any, each told of every attempt.
#[derive(Debug)]
struct AnyOf(Vec<Box<dyn Wakeups>>);

#[async_trait::async_trait]
impl Wakeups for AnyOf {
    async fn released(&mut self) {
        if self.0.is_empty() {
            return std::future::pending().await;
        }
        let woken = self.0.iter_mut().map(|watch| watch.released());
        futures::future::select_all(woken).await;
    }

    fn attempt_starting(&mut self) {
        self.0.iter_mut().for_each(|watch| watch.attempt_starting());
    }

    fn attempt_finished(&mut self) {
        self.0.iter_mut().for_each(|watch| watch.attempt_finished());
    }

    fn attempt_refused(&mut self) {
        self.0.iter_mut().for_each(|watch| watch.attempt_refused());
    }

    fn wake_on_every_release(&self) {
        self.0
            .iter()
            .for_each(|watch| watch.wake_on_every_release());
    }

    fn wake_when_fits(&self, weight: u32, limit: u32) {
        self.0
            .iter()
            .for_each(|watch| watch.wake_when_fits(weight, limit));
    }

    fn joined_behind_others(&self) -> bool {
        self.0.iter().all(|watch| watch.joined_behind_others())
    }
}

/// `hold` as granted `token` (and, for a permit, `slot`); what is wrong
/// with the grant otherwise.
pub(super) fn grant_to(
    hold: HoldToken,
    token: Option<FencingToken>,
    slot: Option<u32>,
) -> Result<HoldToken, &'static str> {
    match (hold.kind(), token, slot) {
        (HoldKind::Permit(_), Some(token), Some(slot)) => {
            Ok(hold.granted(Some(token)).in_slot(slot))
        }
        (HoldKind::Permit(_), _, _) => Err("a permit granted without a slot or a fencing token"),
        (HoldKind::Access(_), None, _) => Err("a read-write hold granted without a fencing token"),
        (_, _, Some(_)) => Err("a hold that is not a permit granted a slot"),
        (_, token, None) => Ok(hold.granted(token)),
    }
}

/// For an attempt of a waiter that offers its holds (`offered`), about to
/// be sent with `hold`: records that hold as on offer, tells the release
/// watch to expect a grant to it or the earlier one, and returns the hold
/// of the previous attempt answered "held" (a release may have granted
/// it meanwhile).
pub(super) fn offer_hold(
    offered: Option<(&Offered, Option<&dyn Wakeups>)>,
    hold: &HoldToken,
) -> Option<HoldToken> {
    let (offered, watch) = offered?;
    let earlier = offered.hold();
    offered.sending(hold);
    if let Some(watch) = watch {
        let expected: Vec<&HoldToken> = earlier.iter().chain([hold]).collect();
        watch.expect_grants(&expected);
    }
    earlier
}

/// Takes a waiter's place out of its queue, in the background: on any way
/// out of its wait but success.
pub(super) fn leave_queue(
    backend: &Arc<dyn LockBackend>,
    key: &LockKey,
    owner: &OwnerToken,
    offered: Option<Vec<HoldToken>>,
) {
    let (backend, key, owner) = (Arc::clone(backend), key.clone(), owner.clone());
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        crate::engine::lease::background::spawn(&runtime, async move {
            if let Err(err) = backend.leave_queue(&key, &owner, offered.as_deref()).await {
                tracing::debug!(key = key.name(), error = %err, "could not leave the fair queue; its lease will");
            }
        });
    }
}
