//! A double barrier of leased parties, after Apache Curator's
//! `DistributedDoubleBarrier`: `parties` processes enter, all go on
//! together once the last has entered, and each leaves waiting until every
//! one has left. Each party is a lease, as a permit is.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::backend::{AcquireOutcome, BarrierBackend, Claim, LockBackend, PartyRequest};
use crate::engine::lease::drop_guard::DropGuard;
use crate::engine::lease::guard::{LeaseHandle, LockGuard};
use crate::engine::manager::{Granted, LockManager};
use crate::engine::options::AcquireOptions;
use crate::engine::primitives::watch::{NameWatch, RECHECK};
use crate::engine::state::BarrierState;
use crate::engine::wait::grant_to;
use crate::error::{Capability, LockError, LossReason};
use crate::hold::{HoldKind, HoldToken};
use crate::key::{LockKey, OwnerToken};
use crate::ttl::validate_ttl;

/// The most parties a barrier may have: each entry and leave reads every
/// party's lease.
pub const MAX_BARRIER_PARTIES: u32 = 10_000;

/// A double barrier on a name, from [`LockManager::barrier`]: `parties`
/// processes [`enter`](Self::enter), all go on together once the last has
/// entered, and each [`leave`](PartyGuard::leave)s waiting until every
/// one has left; then the barrier is ready for its next round.
///
/// Each party is a lease, as a permit is: renewed by the watchdog, ended
/// by the server's clock when its process stops renewing (a crash, a
/// pause, a partition), and reported through [`PartyGuard::lost`]. A
/// barrier never counts a dead party as present: the round opens only when
/// `parties` live parties are in, and a party that dies while the others
/// wait to leave is no longer waited for once its lease ends.
///
/// Every party must pass the same count (another is
/// [`LockError::CountMismatch`] while the barrier has live parties), and a
/// party that arrives while a round is under way (full, or open until its
/// last party has left) gets [`LockError::BarrierFull`]: it enters the next
/// round by trying again once the round is over.
///
/// A barrier holds its name as a lock does: a lock, semaphore or latch on
/// the same name waits until its parties have left.
///
/// # Examples
///
#[cfg_attr(not(doctest), doc = include_str!("../../doc/barrier.md"))]
#[derive(Debug, Clone)]
pub struct Barrier {
    manager: LockManager,
    key: LockKey,
    parties: u32,
}

impl LockManager {
    /// The barrier `name` of `parties` parties, through this manager's
    /// backend and config. Nothing is sent until a call.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidKey`] for a bad name; [`LockError::InvalidConfig`]
    /// on `parties` for 0 or more than [`MAX_BARRIER_PARTIES`];
    /// [`LockError::Unsupported`] on a strategy without barriers
    /// (reentrant, Redlock), before anything is sent.
    pub fn barrier(&self, name: &str, parties: u32) -> Result<Barrier, LockError> {
        self.require(Capability::Barriers)?;
        if parties == 0 || parties > MAX_BARRIER_PARTIES {
            return Err(LockError::config(
                "parties",
                format!("a barrier has 1 to {MAX_BARRIER_PARTIES} parties, not {parties}"),
            ));
        }
        Ok(Barrier {
            key: self.key(name)?,
            manager: self.clone(),
            parties,
        })
    }
}

impl Barrier {
    /// The barrier's name.
    pub fn name(&self) -> &str {
        self.key.name()
    }

    /// How many parties it has.
    pub fn parties(&self) -> u32 {
        self.parties
    }

    /// Enters as a party and waits, without a time limit, until every party
    /// has entered. As [`enter_with`](Self::enter_with).
    ///
    /// # Errors
    ///
    /// As [`enter_with`](Self::enter_with).
    ///
    /// # Cancel safety
    ///
    /// As [`enter_with`](Self::enter_with).
    pub async fn enter(&self) -> Result<PartyGuard, LockError> {
        self.enter_with(&AcquireOptions::new()).await
    }

    /// Enters as a party, with the TTL and owner of `options`, and waits
    /// until every party has entered: the round is then open, and every
    /// party goes on. Waits at most `options`' wait in all (without one,
    /// without a time limit), including while another kind holds the name.
    ///
    /// # Errors
    ///
    /// [`LockError::BarrierFull`] when a round is under way (nothing
    /// written); [`LockError::CountMismatch`] when its live parties entered
    /// with another count; [`LockError::NotAcquired`] when the wait ran out
    /// before every party was in (this party withdrew; one counted in a
    /// round that opened as the wait ran out goes on instead);
    /// [`LockError::LeaseLost`] when this party's lease ended while it
    /// waited (it is no longer counted); a retryable error (a connection's,
    /// too few replicas) when attempts failed until the wait ran out, each
    /// retried as the same party; otherwise as
    /// [`LockManager::acquire_with`].
    ///
    /// # Cancel safety
    ///
    /// Drop the future to give up: a party already in leaves in the
    /// background, as a dropped guard does.
    pub async fn enter_with(&self, options: &AcquireOptions) -> Result<PartyGuard, LockError> {
        let started = Instant::now();
        let deadline = options.wait.and_then(|wait| started.checked_add(wait));
        let ttl = options.ttl.unwrap_or(self.manager.settings().ttl);
        validate_ttl(ttl)?;
        let (guard, round) = self
            .take_place(options.owner.as_ref(), ttl, started, deadline)
            .await?;
        let party = PartyGuard {
            guard,
            barrier: self.clone(),
            round: round.unwrap_or_default(),
        };
        if !party.round.is_empty() {
            // In an open round found by a give-up: its lease counts from
            // the first unanswered attempt, which may be long ago.
            if !party.guard.is_valid() {
                return Err(party.guard.lose_hold());
            }
            return Ok(party);
        }
        let opened = match deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                tokio::time::timeout(left, party.until_open()).await
            }
            None => Ok(party.until_open().await),
        };
        match opened {
            Ok(Ok(round)) => Ok(PartyGuard { round, ..party }),
            Ok(Err(err)) => Err(err),
            Err(_) => {
                let left = self
                    .barriers()?
                    .leave_barrier(&self.key, party.guard.hold(), ttl, true)
                    .await?;
                match left {
                    // Counted in a round that opened as the wait ran out:
                    // this party goes on with the others rather than leave
                    // it short.
                    Some(round) if party.guard.is_valid() => Ok(PartyGuard { round, ..party }),
                    Some(_) => Err(party.guard.lose_hold()),
                    None => Err(LockError::NotAcquired {
                        key: self.name().to_owned(),
                        waited: started.elapsed(),
                        attempts: 1,
                    }),
                }
            }
        }
    }

    /// Takes this process's place among the parties, with one hold for
    /// every attempt: an attempt whose reply was lost (or that too few
    /// replicas acknowledged) is retried as itself, which the enter script
    /// renews, so a process never has two parties, and a party that
    /// completed the count is taken out again only when this call ends
    /// without it (dropped, or failing at its deadline). Waits while another
    /// kind holds the name, until `deadline`. With the guard, the round's
    /// id when a give-up at the deadline found this party in an open round.
    ///
    /// Once an attempt has gone unanswered, the party may be in: whatever
    /// ends this call without a guard (an error, the deadline, a drop)
    /// takes it out and keeps its id out, so one that lands later enters
    /// nothing.
    async fn take_place(
        &self,
        owner: Option<&OwnerToken>,
        ttl: Duration,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Result<(LockGuard, Option<String>), LockError> {
        let backend = Arc::clone(self.manager.backend());
        let hold = match owner {
            Some(owner) => HoldToken::new(owner.clone())?,
            None => HoldToken::fresh()?,
        }
        .with_kind(HoldKind::Party);
        let claim = Claim::Party(PartyRequest::new(self.parties));
        // When the first attempt whose reply was lost was sent: it may
        // still land, and renew the party for the TTL from then.
        let mut stray: Option<Instant> = None;
        let mut watch: Option<NameWatch> = None;
        let mut attempts: u32 = 0;
        // Armed from the first attempt on: taken out of the barrier in the
        // background unless this call hands the hold to a guard or takes
        // it out itself.
        let unresolved = DropGuard::new(|| {
            spawn_leave(Arc::clone(&backend), self.key.clone(), hold.clone(), ttl);
        });
        loop {
            attempts = attempts.saturating_add(1);
            let sent_at = Instant::now();
            let outcome = backend
                .try_acquire(&self.key, &hold, ttl, &claim, None)
                .await;
            let sleep = match outcome {
                Ok(AcquireOutcome::Acquired(_)) => {
                    unresolved.disarm();
                    let granted = self.granted(&hold, sent_at, ttl, backend.strategy())?;
                    let guard = self.manager.keep_past(self.key.clone(), granted, stray);
                    return Ok((guard, None));
                }
                // Another kind holds the name.
                Ok(AcquireOutcome::Held { remaining }) => remaining.unwrap_or(RECHECK),
                Err(err) if err.is_retryable() => {
                    tracing::debug!(barrier = self.name(), error = %err, "cannot enter yet; trying again as the same party");
                    stray.get_or_insert(sent_at);
                    Duration::from_millis(50)
                }
                Err(err) => {
                    if stray.is_none() {
                        unresolved.disarm();
                    }
                    return Err(err);
                }
            };
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                if stray.is_none() {
                    unresolved.disarm();
                    return Err(LockError::NotAcquired {
                        key: self.name().to_owned(),
                        waited: started.elapsed(),
                        attempts,
                    });
                }
                // An unanswered attempt may have entered: out, unless its
                // round is open (then this party goes on).
                let left = self
                    .barriers()?
                    .leave_barrier(&self.key, &hold, ttl, true)
                    .await;
                return match left {
                    Ok(Some(round)) => {
                        unresolved.disarm();
                        let at = stray.unwrap_or(started);
                        let granted = self.granted(&hold, at, ttl, backend.strategy())?;
                        let guard = self.manager.keep_past(self.key.clone(), granted, stray);
                        Ok((guard, Some(round)))
                    }
                    Ok(None) => {
                        unresolved.disarm();
                        Err(LockError::NotAcquired {
                            key: self.name().to_owned(),
                            waited: started.elapsed(),
                            attempts,
                        })
                    }
                    // Left to the background, which tries again.
                    Err(err) => Err(err),
                };
            }
            if watch.is_none() {
                watch = Some(NameWatch::open(&self.manager, &self.key, "barrier party").await);
            }
            if let Some(watch) = watch.as_mut() {
                let left = deadline.map_or(sleep, |deadline| {
                    sleep.min(deadline.saturating_duration_since(Instant::now()))
                });
                watch.sleep(left).await;
            }
        }
    }

    /// `hold` as granted by an attempt sent at `sent_at`, for the lease.
    fn granted(
        &self,
        hold: &HoldToken,
        sent_at: Instant,
        ttl: Duration,
        strategy: &'static str,
    ) -> Result<Granted, LockError> {
        let hold =
            grant_to(hold.clone(), None, None).map_err(|reply| LockError::UnexpectedReply {
                node: strategy.to_owned(),
                script: "try_acquire",
                reply: reply.to_owned(),
            })?;
        Ok(Granted {
            hold,
            sent_at,
            ttl,
            ttl_set: ttl,
        })
    }

    /// The barrier's parties and round, read without changing anything.
    pub async fn state(&self) -> Result<BarrierState, LockError> {
        self.barriers()?.barrier_state(&self.key, None).await
    }

    fn barriers(&self) -> Result<&dyn BarrierBackend, LockError> {
        self.manager.barriers()
    }
}

/// A party's place in a [`Barrier`]'s round, from [`Barrier::enter`]: a
/// lease, renewed until [`leave`](Self::leave) or a drop.
///
/// Dropped without `leave`, the party leaves in the background, without
/// waiting for the others.
#[derive(Debug)]
pub struct PartyGuard {
    guard: LockGuard,
    barrier: Barrier,
    /// The round this party is in, once it opened.
    round: String,
}

impl PartyGuard {
    /// The barrier's name.
    pub fn barrier(&self) -> &str {
        self.barrier.name()
    }

    /// Completes when this party's lease is lost (see [`LockGuard::lost`]);
    /// `None` once it has left.
    pub async fn lost(&self) -> Option<LossReason> {
        self.guard.lost().await
    }

    /// Whether this party's lease is still valid by its deadline.
    pub fn is_valid(&self) -> bool {
        self.guard.is_valid()
    }

    /// A cloneable view of the lease.
    pub fn handle(&self) -> LeaseHandle {
        self.guard.handle()
    }

    /// Leaves the barrier, and waits, without a time limit, until every
    /// party of this round has left (or its lease has ended): then the
    /// round is over. Bound it with `tokio::time::timeout`.
    ///
    /// # Errors
    ///
    /// [`LockError::LeaseLost`] when this party's lease had ended before it
    /// left (it no longer counted; nothing waited); otherwise those of a
    /// read that are not retryable.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe once the party has left: the wait only reads.
    pub async fn leave(self) -> Result<(), LockError> {
        let PartyGuard {
            guard,
            barrier,
            round,
        } = self;
        guard.release().await?;
        let mut watch = NameWatch::open(&barrier.manager, &barrier.key, "barrier party").await;
        loop {
            watch.reading();
            match barrier.state().await {
                Ok(state) if state.entered == 0 || state.round != round => return Ok(()),
                // Another kind has the name: every party has left.
                Err(LockError::WrongKind { .. }) => return Ok(()),
                Ok(state) => {
                    watch.read();
                    tracing::debug!(
                        barrier = barrier.name(),
                        left = state.entered,
                        "waiting for the others to leave"
                    );
                    watch.sleep(state.remaining.unwrap_or(Duration::MAX)).await;
                }
                Err(err) if err.is_retryable() => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Waits until this party's round is open; its id.
    async fn until_open(&self) -> Result<String, LockError> {
        let barriers = self.barrier.barriers()?;
        let mut watch =
            NameWatch::open(&self.barrier.manager, &self.barrier.key, "barrier party").await;
        loop {
            watch.reading();
            let read = barriers
                .barrier_state(&self.barrier.key, Some(self.guard.hold()))
                .await;
            let state = match read {
                Ok(state) => state,
                Err(err) if err.is_retryable() => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Err(err) => return Err(err),
            };
            watch.read();
            if !state.is_party || !self.guard.is_valid() {
                // Its lease ended on the server, or by its own deadline:
                // the round would open without it.
                return Err(self.guard.lose_hold());
            }
            if state.open {
                return Ok(state.round);
            }
            tracing::debug!(
                barrier = self.barrier.name(),
                entered = state.entered,
                parties = self.barrier.parties,
                "waiting for the other parties"
            );
            tokio::select! {
                () = watch.sleep(Duration::MAX) => {}
                reason = self.guard.lost() => {
                    tracing::debug!(barrier = self.barrier.name(), ?reason, "the party's lease was lost");
                }
            }
        }
    }

    /// The lease this party is.
    pub(crate) fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// This party as its lease.
    pub(crate) fn into_guard(self) -> LockGuard {
        self.guard
    }
}

/// Takes `hold` out of the barrier `key` in the background, keeping its id
/// out for twice `ttl`: for a party whose entry may have run, and whose
/// call ended without a guard. Tried a few times, a second apart at most;
/// after that the party ends by its TTL.
fn spawn_leave(backend: Arc<dyn LockBackend>, key: LockKey, hold: HoldToken, ttl: Duration) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        for attempt in 0..5u64 {
            let Some(barriers) = backend.capabilities().barriers() else {
                return;
            };
            match barriers.leave_barrier(&key, &hold, ttl, false).await {
                Ok(_) => return,
                Err(err) if err.is_retryable() => {
                    tracing::debug!(barrier = key.name(), error = %err, "cannot take out a party whose entry went unanswered yet");
                    tokio::time::sleep(Duration::from_millis(200 * (attempt + 1))).await;
                }
                Err(err) => {
                    tracing::warn!(barrier = key.name(), error = %err, "cannot take out a party whose entry went unanswered; it ends by its TTL");
                    return;
                }
            }
        }
    });
}
