//! Leader election on a fenced lock, after etcd's `concurrency.Election`:
//! the leader is the lock's holder, its term is the lock's fencing token,
//! and its proclaimed value is bound to that term.

use std::future::Future;
use std::time::Duration;

use crate::engine::lease::guard::{LeaseHandle, LockGuard};
use crate::engine::manager::LockManager;
use crate::engine::options::AcquireOptions;
use crate::engine::primitives::watch::{NameWatch, RECHECK};
use crate::engine::state::Leader;
use crate::error::{Capability, LockError, LossReason};
use crate::key::{FencingToken, LockKey};

/// The longest value a leader may proclaim, in bytes: an address or a host
/// name fits many times over, and observers read it on every change.
pub const MAX_LEADER_VALUE_LEN: usize = 4096;

/// An election among processes that share a name, from
/// [`LockManager::election`].
///
/// A campaigner waits for the election's lock; once it has it, it is the
/// leader for a **term**, the lock's fencing token (greater for every new
/// leader while the server keeps its data), and proclaims a value (an
/// address, a host name) that observers read. The leadership is a lease
/// like any lock's: renewed by the watchdog, ended by
/// [`Leadership::resign`] or a drop, and lost, reported through
/// [`Leadership::lost`], when a renewal finds the lock gone (a pause past
/// the TTL, a partition, a Redis restart without persistence). A leader
/// never keeps believing it leads past its lease.
///
/// # Fencing
///
/// A leader's term ([`Leadership::term`]) is its fencing token. Pass the
/// term with every write the leader makes, and have the resource refuse a
/// lower one than it has seen, as with any fencing token: that is what
/// stops a deposed leader that has not noticed yet.
///
/// Elections need fencing tokens: the single-node strategy with `fencing`
/// on (the default). On a server without persistence, set
/// `fencing_counter_ttl` so terms keep growing after a restart (tokens are
/// then at least the server's time in µs).
///
/// # Examples
///
#[cfg_attr(not(doctest), doc = include_str!("../../doc/election.md"))]
#[derive(Debug, Clone)]
pub struct Election {
    manager: LockManager,
    key: LockKey,
}

impl LockManager {
    /// The election `name`, through this manager's backend and config.
    /// Nothing is sent until a campaign or a read.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidKey`] for a bad name;
    /// [`LockError::InvalidConfig`] on `fencing` for a backend built without
    /// fencing tokens (a term is one); [`LockError::Unsupported`] on a
    /// strategy without elections (reentrant, Redlock), before anything is
    /// sent.
    pub fn election(&self, name: &str) -> Result<Election, LockError> {
        if self.backend().capabilities().fencing == Some(false) {
            return Err(LockError::config(
                "fencing",
                "an election's term is a fencing token: turn fencing on",
            ));
        }
        self.require(Capability::Elections)?;
        Ok(Election {
            key: self.key(name)?,
            manager: self.clone(),
        })
    }
}

impl Election {
    /// The election's name.
    pub fn name(&self) -> &str {
        self.key.name()
    }

    /// Campaigns with `value` until elected: waits for the lock without a
    /// time limit (drop the future to give up; nothing is left held), then
    /// proclaims `value` for the new term.
    ///
    /// # Errors
    ///
    /// As [`campaign_with`](Self::campaign_with).
    ///
    /// # Cancel safety
    ///
    /// As [`campaign_with`](Self::campaign_with).
    pub async fn campaign(&self, value: &str) -> Result<Leadership, LockError> {
        self.campaign_with(value, &AcquireOptions::new()).await
    }

    /// Campaigns with `value` as `options` say (their wait, TTL and owner;
    /// without a wait, without a time limit).
    ///
    /// # Errors
    ///
    /// [`LockError::NotAcquired`] when another leader held on for the whole
    /// wait; [`LockError::InvalidConfig`] on `value` for a value over
    /// [`MAX_LEADER_VALUE_LEN`] bytes, and on `strategy` where the lock
    /// issues no term; [`LockError::LeaseLost`] when the lease ended before
    /// the value was proclaimed; otherwise as
    /// [`LockManager::acquire_with`].
    ///
    /// # Cancel safety
    ///
    /// As [`LockManager::acquire_with`]; a leadership won by a dropped
    /// future is given back in the background.
    pub async fn campaign_with(
        &self,
        value: &str,
        options: &AcquireOptions,
    ) -> Result<Leadership, LockError> {
        validate_value(value)?;
        let mut options = options.clone();
        if options.wait.is_none() {
            options.wait = Some(Duration::MAX);
        }
        let guard = self.manager.acquire_with(self.name(), &options).await?;
        let Some(term) = guard.fencing_token() else {
            return Err(LockError::config(
                "strategy",
                format!(
                    "the {} strategy issued no fencing token, and a leader's term is one",
                    self.manager.backend().strategy()
                ),
            ));
        };
        let mut leadership = Leadership {
            guard,
            term,
            value: String::new(),
            election: self.clone(),
        };
        leadership.proclaim(value).await?;
        Ok(leadership)
    }

    /// The current leader: the lock's holder, once it has proclaimed a value
    /// for its term; `None` when there is none (or it has not proclaimed
    /// yet).
    pub async fn leader(&self) -> Result<Option<Leader>, LockError> {
        self.manager.elections()?.read_leader(&self.key).await
    }

    /// Watches the leader: [`Observer::changed`] answers each new state (a
    /// new leader, a new value, no leader) as it happens, woken by the
    /// election's messages and by the leader's lease running out.
    ///
    /// Without a subscription (`wait_mode = "poll"`, a user whose ACL grants
    /// no channels, a subscriber connection that fails), the observer reads
    /// once a second instead.
    pub async fn observe(&self) -> Result<Observer, LockError> {
        Ok(Observer {
            watch: NameWatch::open(&self.manager, &self.key, "election observer").await,
            election: self.clone(),
            last: None,
        })
    }

    /// Runs `work` while this process leads, and campaigns again when the
    /// leadership is lost, until `work` returns: campaigns with `value`,
    /// runs `work(handle)` with a handle of the leadership (its fencing
    /// token is the term), and if the lease is lost first, drops `work`'s
    /// future, logs, and campaigns again. Once `work` returns, resigns and
    /// returns its output.
    ///
    /// # Errors
    ///
    /// Those of [`campaign`](Self::campaign) that are not retryable
    /// (retryable ones, and a lease lost before its value was proclaimed,
    /// are retried after a second); [`LockError::LeaseLost`] when `work`
    /// returned but the leadership had ended before it did, as
    /// [`LockGuard::run`] answers, since the work may have overlapped the
    /// next leader's.
    ///
    /// # Cancel safety
    ///
    /// Drop the future to stop: a campaign in progress is given up as
    /// [`campaign`](Self::campaign)'s is, and a leadership is given back in
    /// the background.
    pub async fn run_while_leader<F, Fut, T>(
        &self,
        value: &str,
        mut work: F,
    ) -> Result<T, LockError>
    where
        F: FnMut(LeaseHandle) -> Fut,
        Fut: Future<Output = T>,
    {
        loop {
            let leadership = match self.campaign(value).await {
                Ok(leadership) => leadership,
                Err(err) if err.is_retryable() || matches!(err, LockError::LeaseLost { .. }) => {
                    tracing::warn!(election = self.name(), error = %err, "campaign failed; trying again");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Err(err) => return Err(err),
            };
            let term = leadership.term();
            tokio::select! {
                output = work(leadership.handle()) => {
                    return match leadership.resign().await {
                        Ok(()) => Ok(output),
                        Err(err @ LockError::LeaseLost { .. }) => Err(err),
                        Err(err) => {
                            // The term held until the work ended; the lock
                            // expires by its TTL.
                            tracing::warn!(election = self.name(), error = %err, "resign failed after the work ended");
                            Ok(output)
                        }
                    };
                }
                reason = leadership.lost() => {
                    tracing::warn!(
                        election = self.name(),
                        term = term.get(),
                        reason = ?reason,
                        "leadership lost; stopped the work, campaigning again"
                    );
                }
            }
        }
    }
}

/// This process's leadership of an [`Election`], for one term: a lease
/// like any lock's, renewed until [`resign`](Self::resign) or a drop.
///
/// # Fencing
///
/// The [`term`](Self::term) is this leadership's fencing token, what
/// [`LeaseGuard::fencing_token`](crate::LeaseGuard::fencing_token) answers
/// for it: send it with every write the leader makes.
#[derive(Debug)]
pub struct Leadership {
    guard: LockGuard,
    term: FencingToken,
    value: String,
    election: Election,
}

impl Leadership {
    /// The term: the election lock's fencing token. Pass it with every
    /// write the leader makes.
    pub fn term(&self) -> FencingToken {
        self.term
    }

    /// The value last proclaimed.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Proclaims a new value for this term, without a new election.
    ///
    /// # Errors
    ///
    /// [`LockError::LeaseLost`] when this leadership no longer
    /// holds the lock (nothing written; the leadership is lost from then
    /// on, and [`lost`](Self::lost) completes); [`LockError::InvalidConfig`]
    /// on `value` for a value over [`MAX_LEADER_VALUE_LEN`] bytes;
    /// [`LockError::ReplicasNotAcknowledged`] when `replicas` are asked for
    /// and too few acknowledged the value (it may not survive a failover;
    /// proclaim again).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped after it was sent, the value may have been
    /// proclaimed while [`value`](Self::value) still answers the old one.
    /// Proclaim again to be sure.
    pub async fn proclaim(&mut self, value: &str) -> Result<(), LockError> {
        validate_value(value)?;
        if !self
            .election
            .manager
            .elections()?
            .proclaim(&self.election.key, self.guard.hold(), value)
            .await?
        {
            // The server says another hold (or none) has the lock: this
            // leadership is over now, not at its next renewal.
            return Err(self.guard.lose_hold());
        }
        value.clone_into(&mut self.value);
        Ok(())
    }

    /// Completes when the leadership is lost (see [`LockGuard::lost`]);
    /// `None` when it was resigned.
    pub async fn lost(&self) -> Option<LossReason> {
        self.guard.lost().await
    }

    /// Whether this process still leads by its lease's deadline.
    pub fn is_valid(&self) -> bool {
        self.guard.is_valid()
    }

    /// A cloneable view of the lease: its token is the term.
    pub fn handle(&self) -> LeaseHandle {
        self.guard.handle()
    }

    /// Gives the leadership up: the lock is released (only if it is still
    /// this term's), and observers see no leader until the next one.
    ///
    /// # Errors
    ///
    /// As [`LockGuard::release`]: [`LockError::LeaseLost`] when the
    /// leadership had already ended.
    ///
    /// # Cancel safety
    ///
    /// As [`LockGuard::release`].
    pub async fn resign(self) -> Result<(), LockError> {
        self.guard.release().await
    }

    /// The lease this leadership is.
    pub(crate) fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// This leadership as its lease, to release or hand off.
    pub(crate) fn into_guard(self) -> LockGuard {
        self.guard
    }
}

/// Watches an [`Election`]'s leader, from [`Election::observe`].
#[derive(Debug)]
pub struct Observer {
    election: Election,
    watch: NameWatch,
    /// The state last answered; `None` before the first.
    last: Option<Option<Leader>>,
}

impl Observer {
    /// The next state of the election, different from the one this
    /// observer answered last (the first call answers the current state):
    /// `Some(leader)` for a new leader or a new value, `None` once there is
    /// no leader. It never answers a state older than the one it read last,
    /// though changes between two reads are seen as one.
    ///
    /// Errors: those of a read that are not retryable (retryable ones, a
    /// restarting server's, are retried).
    pub async fn changed(&mut self) -> Result<Option<Leader>, LockError> {
        loop {
            self.watch.reading();
            let read = self.election.leader().await;
            let state = match read {
                Ok(state) => state,
                Err(err) if err.is_retryable() => {
                    tracing::debug!(election = self.election.name(), error = %err, "cannot read the leader yet");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Err(err) => return Err(err),
            };
            self.watch.read();
            // The remaining TTL changes with every read: a change is a new
            // term, a new value, or a leader coming or going.
            let same = self.last.as_ref().is_some_and(|last| {
                last.as_ref().map(|leader| (leader.term, &leader.value))
                    == state.as_ref().map(|leader| (leader.term, &leader.value))
            });
            if !same {
                self.last = Some(state.clone());
                return Ok(state);
            }
            let expiry = state
                .as_ref()
                .and_then(|leader| leader.remaining)
                .map_or(RECHECK, |left| {
                    left.saturating_add(Duration::from_millis(1))
                });
            self.watch.sleep(expiry).await;
        }
    }

    /// The states as a stream: each item is what
    /// [`changed`](Self::changed) answers; after an error, the stream ends.
    pub fn into_stream(
        self,
    ) -> impl futures::Stream<Item = Result<Option<Leader>, LockError>> + Send {
        futures::stream::unfold(Some(self), |observer| async move {
            let mut observer = observer?;
            match observer.changed().await {
                Ok(state) => Some((Ok(state), Some(observer))),
                Err(err) => Some((Err(err), None)),
            }
        })
    }
}

/// Refuses a value over [`MAX_LEADER_VALUE_LEN`] bytes.
fn validate_value(value: &str) -> Result<(), LockError> {
    if value.len() > MAX_LEADER_VALUE_LEN {
        return Err(LockError::config(
            "value",
            format!(
                "a leader's value is at most {MAX_LEADER_VALUE_LEN} bytes, not {}",
                value.len()
            ),
        ));
    }
    Ok(())
}
