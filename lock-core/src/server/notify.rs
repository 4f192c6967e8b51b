//! Release notifications: waiters wake when a lock is released instead of
//! polling.
//!
//! Every release script publishes on the key's channel
//! (`<prefix>{<name>}:released`). Each process keeps one subscriber connection
//! per node, opened on first use and shared by all its waiters; a channel is
//! subscribed while at least one waiter watches it. A waiter subscribes
//! *before* its next attempt, so a release that lands between a failed attempt
//! and the wait is not missed. Expiry publishes nothing, and a subscriber
//! connection can drop, so every wait also has a timer: the holder's remaining
//! TTL.
//!
//! A release wakes one waiter per process, the longest-waiting one, not all of
//! them: only one can win, and waking the rest would send the server a herd of
//! attempts bound to fail. The woken waiter keeps its place until it acquires
//! or gives up, so if another process won, the next release wakes it again.
//! The wake-up is a stored permit, so it is not lost if the waiter was busy
//! with an attempt when it arrived. It is spent only when an attempt that
//! started after it finished (took the lock or found it held): a waiter that
//! leaves before then (dropped, or out of time after a failed attempt)
//! passes it on to the next one.
//!
//! Where one release can let in several waiters, it wakes only those that
//! can go: a semaphore's release publishes the weight left in use, and
//! wakes the waiters whose weights fit beside it, in order (one that finds
//! the room taken passes it to lighter ones, and one that leaves without
//! using its wake-up passes on the room it was for). A grant
//! on the server to the next writer or a fair waiter wakes that waiter
//! alone; those that expect no grant (readers, an election's observers)
//! try again a waiter's lease later, when a grant to a waiter that died
//! has ended, unless a release wakes them first.
//!
//! On a cluster whose servers have sharded pub/sub (Redis 7), releases go
//! out with `SPUBLISH` and the subscriber is a cluster connection that
//! subscribes each channel on its slot's master. When the slot moves, that
//! master ends the subscription; the hub subscribes again (reaching the new
//! master) and wakes a waiter, which could have missed a release meanwhile.
//! A waiter whose timer woke it with no release seen also has its channel
//! subscribed again, at most once a second: that follows a move whose
//! notice the client did not pass on.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as SyncMutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::future::{pending, select_all};
use tokio::sync::{Mutex, Notify};

use crate::engine::wake::{Grant, Wakeups};
use crate::error::LockError;
use crate::hold::HoldToken;
use crate::key::FencingToken;
use crate::server::client::{
    connect_subscriber, ClientKind, ConnectOptions, Delivery, MessageReceiver, SubscriberClient,
};
use crate::server::topology::Endpoint;

/// Release notifications from one node.
#[derive(Debug)]
pub struct ReleaseNotifier {
    kind: ClientKind,
    endpoint: Endpoint,
    options: ConnectOptions,
    hub: Arc<Mutex<Option<Arc<Hub>>>>,
    /// Subscribe with `SSUBSCRIBE` (a cluster connection), as the node's
    /// releases publish with `SPUBLISH`; read when the hub connects.
    sharded: AtomicBool,
    /// Until when not to try subscribing again after a failure (a user
    /// without pub/sub rights, an unreachable node): waiters poll meanwhile
    /// instead of each paying for a refused subscription.
    refused_until: SyncMutex<Option<Instant>>,
}

/// How long waiters poll without trying to subscribe after the server
/// refused a subscription (`NOPERM`: the user's ACL has no lock channels).
/// [`ReleaseNotifier::watch`] states it in its docs.
const REFUSED_BACKOFF: Duration = Duration::from_secs(10);

/// How often at most a waiter woken by its timer, not by a release, has its
/// sharded channel subscribed again (to follow a slot move).
const REFRESH_INTERVAL: Duration = Duration::from_secs(1);

/// How long after a grant to another waiter's offer the waiters that
/// expect no grant try again if no release woke them: the longest a grant
/// lasts unless its waiter takes it up ([`FAIR_WAITER_LEASE`], the lease
/// of every offer the engine makes), and a little more for the message's
/// way here.
///
/// [`FAIR_WAITER_LEASE`]: crate::FAIR_WAITER_LEASE
const RECHECK_AFTER_GRANT: Duration =
    Duration::from_millis(crate::engine::manager::FAIR_WAITER_LEASE.as_millis() as u64 + 50);

/// How long after any other failed subscription (a node restarting, a
/// time-out) waiters poll before one tries again. [`ReleaseNotifier::watch`]
/// states it in its docs.
const FAILED_BACKOFF: Duration = Duration::from_secs(1);

impl ReleaseNotifier {
    /// A notifier for `endpoint` (a [`NodeUrl`](crate::NodeUrl) for a
    /// standalone server); it connects on first use.
    pub fn new(kind: ClientKind, endpoint: impl Into<Endpoint>, options: ConnectOptions) -> Self {
        ReleaseNotifier {
            kind,
            endpoint: endpoint.into(),
            options,
            hub: Arc::new(Mutex::new(None)),
            sharded: AtomicBool::new(false),
            refused_until: SyncMutex::new(None),
        }
    }

    /// Subscribes on sharded pub/sub (`SSUBSCRIBE` on the master of each
    /// channel's slot) if `sharded`: it must match the node's
    /// [`publishes_sharded`](crate::server::client::NodeClient::publishes_sharded),
    /// or waiters hear no release and wait for their timers.
    /// [`ScriptedNode::connect`](crate::strategy::ScriptedNode::connect) and
    /// [`with_notifier`](crate::strategy::ScriptedNode::with_notifier) set it
    /// from the node. Ignored off a cluster; takes effect at the next
    /// connection.
    pub fn set_sharded(&self, sharded: bool) {
        self.sharded.store(sharded, Ordering::Release);
    }

    /// Subscribes to `channel` and returns once the server confirmed it.
    ///
    /// After a failure, calls fail at once for a while (10 s after a
    /// `NOPERM`, 1 s after anything else), so waiters fall back to polling
    /// without each waiting for a subscription the server refuses.
    pub async fn watch(&self, channel: &str) -> Result<ReleaseWatch, LockError> {
        self.check_backoff()?;
        let watched = self.subscribe(channel).await;
        if let Err(err) = &watched {
            let refused = matches!(err, LockError::PermissionDenied { .. });
            let backoff = if refused {
                REFUSED_BACKOFF
            } else {
                FAILED_BACKOFF
            };
            *self.refused() = Some(Instant::now() + backoff);
        }
        watched
    }

    fn check_backoff(&self) -> Result<(), LockError> {
        if self
            .refused_until()
            .is_some_and(|until| Instant::now() < until)
        {
            return Err(LockError::Connection {
                node: self.endpoint.address(),
                source: crate::error::source_error(
                    "release notifications are off for a while after a failed subscription",
                ),
            });
        }
        Ok(())
    }

    fn refused(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.refused_until
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn refused_until(&self) -> Option<Instant> {
        *self.refused()
    }

    async fn subscribe(&self, channel: &str) -> Result<ReleaseWatch, LockError> {
        let hub = {
            let mut slot = self.hub.lock().await;
            // Another waiter may have failed while this one queued for the hub.
            self.check_backoff()?;
            match slot.as_ref() {
                Some(hub) if hub.alive.load(Ordering::Acquire) => Arc::clone(hub),
                _ => {
                    // Connect in a task of its own: a waiter that gives up
                    // (Redlock bounds each node by its node timeout, and a
                    // TLS handshake on a busy machine can take longer) must
                    // not cancel the connection the next waiter needs. If
                    // this waiter is gone when the task ends, the task keeps
                    // the hub itself.
                    let (kind, endpoint, options) =
                        (self.kind, self.endpoint.clone(), self.options);
                    let sharded = self.sharded.load(Ordering::Acquire);
                    let shared_slot = Arc::clone(&self.hub);
                    let connecting = tokio::spawn(async move {
                        let (client, messages) =
                            connect_subscriber(kind, &endpoint, options, sharded).await?;
                        let hub = Hub::start(client, messages, sharded);
                        if let Ok(mut orphaned) = shared_slot.try_lock() {
                            if !orphaned
                                .as_ref()
                                .is_some_and(|hub| hub.alive.load(Ordering::Acquire))
                            {
                                *orphaned = Some(Arc::clone(&hub));
                            }
                        }
                        Ok::<_, LockError>(hub)
                    });
                    let hub = connecting.await.map_err(|err| LockError::Connection {
                        node: self.endpoint.address(),
                        source: std::sync::Arc::new(err),
                    })??;
                    *slot = Some(Arc::clone(&hub));
                    hub
                }
            }
        };
        let (slot, behind_others) = hub.subscribe(channel).await?;
        Ok(ReleaseWatch {
            slots: vec![slot],
            seen: vec![0],
            used: vec![0],
            // A waiter behind others sleeps before its first attempt, so
            // that attempt may follow a timer wake.
            attempted: behind_others,
            behind_others,
            subscriptions: vec![Subscription {
                hub,
                channel: channel.to_owned(),
            }],
        })
    }
}

/// One subscriber connection and the channels its waiters watch.
#[derive(Debug)]
struct Hub {
    client: Arc<dyn SubscriberClient>,
    channels: SyncMutex<HashMap<String, Watched>>,
    /// Serialises SUBSCRIBE and UNSUBSCRIBE so a late unsubscribe never undoes
    /// a newer subscribe of the same channel.
    changes: Mutex<()>,
    alive: AtomicBool,
    /// Subscriptions are sharded: each lives on its slot's master, and ends
    /// when the slot moves.
    sharded: bool,
    /// Dropped with the hub, which stops the listener and so closes the
    /// subscriber connection.
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// One waiter's place in a channel's queue.
#[derive(Debug, Default)]
struct Slot {
    notify: Notify,
    /// How many releases woke this waiter. A watch remembers how many of
    /// them its finished attempts used; what the rest were for is passed on
    /// when it leaves ([`Hub::leave`]).
    wakes: AtomicU64,
    /// `wakes` when this waiter's last attempt started: while `wakes` is
    /// above it, the waiter has a wake-up it will answer with an attempt (or
    /// pass on as it leaves), and another one would be spent by that same
    /// attempt.
    started: AtomicU64,
    /// The waiter is gone: its watch was dropped, and it leaves the queue
    /// ([`Hub::leave`]) as soon as it can. Meanwhile no room is counted for
    /// it.
    leaving: AtomicBool,
    /// Woken by every release, not only when first (fair-mode waiters: the
    /// queue in Redis, not this process, decides whose turn it is), unless
    /// `fits` says when; a grant to another waiter wakes it later.
    every: AtomicBool,
    /// A semaphore's waiter outside fair mode: its weight and the limit.
    /// A release that says how much weight is in use wakes it only when
    /// its weight fits beside that and beside the waiters ahead of it
    /// that the same release woke.
    fits: std::sync::OnceLock<(u64, u64)>,
    /// When to try again though no release woke this waiter: a grant went
    /// to another waiter's offer, which may have died, so the hold this
    /// waiter waits on may end with the grant, long before the timer the
    /// last attempt set. Woken now, it would find the grant in its way.
    recheck_at: SyncMutex<Option<Instant>>,
    /// Told when `recheck_at` is set, so a sleeping waiter sees it.
    recheck_set: Notify,
    /// The holds this waiter has on offer for a grant on the server (the
    /// answered attempt's and the one in flight): the SHA-1 of the attempt
    /// value, as a grant message names it, and that value.
    expected: SyncMutex<Vec<(String, String)>>,
    /// A grant published for the expected hold, not yet taken.
    grant: SyncMutex<Option<Grant>>,
}

impl Slot {
    fn wake(&self) {
        self.wakes.fetch_add(1, Ordering::AcqRel);
        self.notify.notify_one();
    }

    /// Whether this waiter has a wake-up its next attempt will answer.
    fn will_try(&self) -> bool {
        self.wakes.load(Ordering::Acquire) > self.started.load(Ordering::Acquire)
    }

    /// This waiter's weight and limit, if it is a semaphore's waiter
    /// outside fair mode that has not left.
    fn fitting(&self) -> Option<(u64, u64)> {
        let fits = *self.fits.get()?;
        (!self.leaving.load(Ordering::Acquire)).then_some(fits)
    }

    /// Keeps the grant of `digest` with `token` if it is this waiter's.
    fn granted(&self, message: &GrantMessage<'_>) -> bool {
        let expected = lock_ignoring_poison(&self.expected);
        let Some((_, attempt)) = expected
            .iter()
            .find(|(expected, _)| expected == message.digest)
        else {
            return false;
        };
        *lock_ignoring_poison(&self.grant) = Some(Grant {
            attempt: attempt.clone(),
            fencing_token: message.token,
            slot: message.slot,
        });
        true
    }
}

fn lock_ignoring_poison<T>(mutex: &SyncMutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain values, valid whatever a panicking holder did.
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// A grant message of a server-side hand-off, parsed.
struct GrantMessage<'a> {
    digest: &'a str,
    token: FencingToken,
    slot: Option<u32>,
}

/// The weight in use a semaphore's release published (`u<weight>`,
/// semaphore/release.lua); `None` for any other message.
fn weight_in_use(payload: &str) -> Option<u64> {
    payload.strip_prefix('u')?.parse().ok()
}

/// A grant message of the server-side hand-off (shared/handoff.lua, rw/common.lua):
/// `g<SHA-1 of the hold>:<token>`, and `:<slot>` behind it for a
/// semaphore's permit (semaphore/common.lua); `None` for a release's `1`, a
/// semaphore's weight in use (`u<n>`) or freed weight, or a leaver's `0`.
fn grant_message(payload: &str) -> Option<GrantMessage<'_>> {
    let (digest, rest) = payload.strip_prefix('g')?.split_once(':')?;
    let (token, slot) = match rest.split_once(':') {
        Some((token, slot)) => (token, Some(slot.parse::<u32>().ok()?)),
        None => (rest, None),
    };
    let token = token.parse::<u64>().ok().filter(|token| *token >= 1)?;
    (digest.len() == 40).then_some(GrantMessage {
        digest,
        token: FencingToken::new(token),
        slot,
    })
}

#[derive(Debug)]
struct Watched {
    /// This process's waiters on the channel, longest-waiting first. Entries
    /// of waiters that are gone are skipped and pruned.
    waiters: VecDeque<Weak<Slot>>,
    watchers: usize,
    /// When the sharded channel was last subscribed again.
    refreshed_at: Option<Instant>,
    /// A resubscription is under way; `Some(true)` if it must run once
    /// more when done (the channel was dropped after it was sent).
    refreshing: Option<bool>,
}

impl Watched {
    /// Wakes the longest-waiting live waiter, leaving it in place, and every
    /// waiter that asked to be woken by every release. With `in_use`, the
    /// weight a semaphore's release left in use, its waiters outside fair
    /// mode are woken in order only while their weights fit: the others
    /// would find no room. Without it (a message that says nothing of the
    /// weight, a resubscription, a plain waiter's wake-up passed on), all
    /// of them are.
    fn wake_one(&mut self, mut in_use: Option<u64>) {
        self.waiters.retain(|waiter| waiter.strong_count() > 0);
        let mut woke_first = false;
        for waiter in self.waiters.iter().filter_map(Weak::upgrade) {
            if let (Some(fits), Some(used)) = (waiter.fits.get(), in_use.as_mut()) {
                let (weight, limit) = *fits;
                if waiter.fitting().is_some() && used.saturating_add(weight) <= limit {
                    *used += weight;
                    waiter.wake();
                }
            } else if waiter.every.load(Ordering::Acquire) {
                waiter.wake();
            } else if !woke_first {
                waiter.wake();
                woke_first = true;
            }
        }
    }

    /// Wakes, in order, the semaphore waiters that weigh `budget` in all at
    /// most, and that hold no wake-up their next attempt will answer (that
    /// attempt would spend this one too): where a waiter woken for room it
    /// did not take (it found the room taken, or it left) passes the room on.
    fn wake_within(&mut self, mut budget: u64) {
        self.waiters.retain(|waiter| waiter.strong_count() > 0);
        for waiter in self.waiters.iter().filter_map(Weak::upgrade) {
            if let Some((weight, _)) = waiter.fitting() {
                if weight <= budget && !waiter.will_try() {
                    budget -= weight;
                    waiter.wake();
                }
            }
        }
    }

    /// Whether every semaphore waiter queued outside fair mode asks for
    /// `weight`.
    fn one_weight(&self, weight: u64) -> bool {
        self.waiters
            .iter()
            .filter_map(Weak::upgrade)
            .filter_map(|waiter| waiter.fitting())
            .all(|(other, _)| other == weight)
    }

    /// Hands a grant message to the waiter whose offer it names, and wakes
    /// it: the lock is that waiter's, and no one else in line has a turn.
    /// A grant for a waiter of another process wakes no one in line here.
    /// Waiters woken by every release that are in no line (they expect no
    /// grant: a read-write lock's readers) are not woken either, as the
    /// grant is in their way; but the hold they waited on was released, and
    /// the grant, which may be to a waiter that died, ends within a
    /// waiter's lease, sooner than their timers may: they try again then
    /// ([`RECHECK_AFTER_GRANT`]) unless a release wakes them first.
    fn grant(&mut self, message: &GrantMessage<'_>) {
        self.waiters.retain(|waiter| waiter.strong_count() > 0);
        let mut handed = false;
        let recheck_at = Instant::now() + RECHECK_AFTER_GRANT;
        for waiter in self.waiters.iter().filter_map(Weak::upgrade) {
            if !handed && waiter.granted(message) {
                // Not counted as a release's wake-up: this one is the
                // waiter's alone, and a waiter that leaves without taking
                // it up gives the grant back on the server, which hands it
                // on.
                waiter.notify.notify_one();
                handed = true;
            } else if waiter.every.load(Ordering::Acquire)
                && lock_ignoring_poison(&waiter.expected).is_empty()
            {
                let mut at = lock_ignoring_poison(&waiter.recheck_at);
                if at.is_none_or(|at| recheck_at < at) {
                    *at = Some(recheck_at);
                    waiter.recheck_set.notify_one();
                }
            }
        }
    }

    /// Whether a live waiter is queued that a release wakes as the longest
    /// one: one that takes what the release freed. A waiter woken by every
    /// release (fair, a semaphore's, an election's observer) may not, so it
    /// tells a newcomer nothing about a release it missed.
    fn has_live_contender(&self) -> bool {
        self.waiters
            .iter()
            .filter_map(Weak::upgrade)
            .any(|waiter| !waiter.every.load(Ordering::Acquire))
    }
}

impl Hub {
    fn start(
        client: Arc<dyn SubscriberClient>,
        mut messages: MessageReceiver,
        sharded: bool,
    ) -> Arc<Self> {
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let hub = Arc::new(Hub {
            client,
            channels: SyncMutex::new(HashMap::new()),
            changes: Mutex::new(()),
            alive: AtomicBool::new(true),
            sharded,
            _stop: stop,
        });
        // The listener holds the hub weakly: once no notifier or waiter needs
        // it, the hub and its connection close, and the listener ends.
        let listener = Arc::downgrade(&hub);
        tokio::spawn(async move {
            loop {
                let delivery = tokio::select! {
                    delivery = messages.recv() => match delivery {
                        Some(delivery) => delivery,
                        None => break,
                    },
                    _ = &mut stopped => return,
                };
                let Some(hub) = listener.upgrade() else {
                    return;
                };
                let (channel, payload) = match delivery {
                    Delivery::Message(channel, payload) => (channel, payload),
                    Delivery::Dropped(channel) => {
                        // Also the confirmation of an UNSUBSCRIBE of our own,
                        // for a channel no longer watched: then nothing is done.
                        hub.resubscribe(channel, true);
                        continue;
                    }
                    Delivery::Lost => {
                        let watched: Vec<String> = lock_ignoring_poison(&hub.channels)
                            .keys()
                            .cloned()
                            .collect();
                        for channel in watched {
                            hub.resubscribe(channel, true);
                        }
                        continue;
                    }
                };
                let mut channels = hub
                    .channels
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner());
                if let Some(watched) = channels.get_mut(&channel) {
                    match grant_message(&payload) {
                        Some(message) => watched.grant(&message),
                        None => watched.wake_one(weight_in_use(&payload)),
                    }
                }
            }
            // The connection is gone: waiters fall back to their timers, and
            // the next watch opens a new connection.
            if let Some(hub) = listener.upgrade() {
                hub.alive.store(false, Ordering::Release);
                tracing::debug!(
                    node = hub.client.address(),
                    "release notifications lost their connection"
                );
            }
        });
        hub
    }

    /// Queues a new waiter on `channel`, subscribing first if no one in this
    /// process watches it yet. Also says whether a live waiter was already
    /// queued: then a release published before this call woke that one.
    async fn subscribe(&self, channel: &str) -> Result<(Arc<Slot>, bool), LockError> {
        let _change = self.changes.lock().await;
        let waiter = Arc::new(Slot::default());
        if let Some(behind_others) = self.join(channel, &waiter) {
            return Ok((waiter, behind_others));
        }
        self.client.subscribe(channel).await?;
        self.channels
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(
                channel.to_owned(),
                Watched {
                    waiters: VecDeque::from([Arc::downgrade(&waiter)]),
                    watchers: 1,
                    refreshed_at: Some(Instant::now()),
                    refreshing: None,
                },
            );
        Ok((waiter, false))
    }

    /// Subscribes to a watched `channel` again, in the background: after the
    /// server ended its sharded subscription or a connection broke
    /// (`dropped`), or when a waiter's timer woke it with no release seen,
    /// at most once per [`REFRESH_INTERVAL`]. A sharded subscription lives
    /// on the master of the channel's slot, and subscribing again reaches
    /// its master of now. One waiter is woken once subscribed: a release
    /// published before (while the slot moved, or between the attempt that
    /// asked for this and the subscription) reached no one.
    ///
    /// One resubscription at a time per channel: a drop while one is under
    /// way has it run once more, anything else is left to it.
    fn resubscribe(self: &Arc<Self>, channel: String, dropped: bool) {
        if !self.sharded {
            return;
        }
        {
            let mut channels = lock_ignoring_poison(&self.channels);
            let Some(watched) = channels.get_mut(&channel) else {
                return;
            };
            if let Some(again) = watched.refreshing.as_mut() {
                *again |= dropped;
                return;
            }
            let now = Instant::now();
            let recent = watched
                .refreshed_at
                .is_some_and(|at| now.saturating_duration_since(at) < REFRESH_INTERVAL);
            if recent && !dropped {
                return;
            }
            watched.refreshed_at = Some(now);
            watched.refreshing = Some(false);
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            if let Some(watched) = lock_ignoring_poison(&self.channels).get_mut(&channel) {
                watched.refreshing = None;
            }
            return;
        };
        let hub = Arc::clone(self);
        runtime.spawn(async move {
            loop {
                {
                    let _change = hub.changes.lock().await;
                    let watched = lock_ignoring_poison(&hub.channels).contains_key(&channel);
                    if watched && hub.alive.load(Ordering::Acquire) {
                        if let Err(err) = hub.client.resubscribe(&channel).await {
                            tracing::debug!(channel, error = %err, "subscribing again failed");
                        }
                    }
                }
                let mut channels = lock_ignoring_poison(&hub.channels);
                let Some(watched) = channels.get_mut(&channel) else {
                    return;
                };
                watched.wake_one(None);
                if watched.refreshing.replace(false) != Some(true) {
                    watched.refreshing = None;
                    return;
                }
            }
        });
    }

    /// Queues `waiter` on a channel already subscribed; `None` if it is not,
    /// else whether a live waiter was ahead.
    fn join(&self, channel: &str, waiter: &Arc<Slot>) -> Option<bool> {
        let mut channels = self
            .channels
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let watched = channels.get_mut(channel)?;
        watched.watchers += 1;
        watched.waiters.retain(|waiter| waiter.strong_count() > 0);
        let behind_others = watched.has_live_contender();
        watched.waiters.push_back(Arc::downgrade(waiter));
        Some(behind_others)
    }

    /// Passes the room a semaphore waiter of `weight` was woken for, and
    /// found taken, to the lighter waiters of `channel`
    /// ([`Watched::wake_within`]): the room left is less than `weight`.
    fn pass_on_lighter(&self, channel: &str, weight: u64) {
        if let Some(watched) = lock_ignoring_poison(&self.channels).get_mut(channel) {
            watched.wake_within(weight.saturating_sub(1));
        }
    }

    /// The waiter `slot` left, having used `used` of its wake-ups. Out of
    /// the queue first, under the channels' lock, so no wake-up can land on
    /// it after it is counted: one it never used is passed on, a
    /// semaphore waiter's as the room it was woken for
    /// ([`Watched::wake_within`]), any other's to the next waiter.
    async fn leave(&self, channel: &str, slot: &Arc<Slot>, used: u64) {
        let _change = self.changes.lock().await;
        let last = {
            let mut channels = self
                .channels
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            match channels.get_mut(channel) {
                Some(watched) if watched.watchers > 1 => {
                    watched.watchers -= 1;
                    let leaving = Arc::as_ptr(slot);
                    watched
                        .waiters
                        .retain(|waiter| waiter.strong_count() > 0 && waiter.as_ptr() != leaving);
                    if slot.wakes.load(Ordering::Acquire) > used {
                        // The room a semaphore waiter leaves is its own
                        // weight and what the release left over, which no
                        // other waiter fitted alone. With one weight on the
                        // channel that is less than one more waiter's: the
                        // next that fits in its weight can go. With several,
                        // a heavier waiter may fit in the two together, and
                        // every waiter is woken.
                        let weight = slot.fits.get().map(|&(weight, _)| weight);
                        match weight.filter(|&weight| watched.one_weight(weight)) {
                            Some(weight) => watched.wake_within(weight),
                            None => watched.wake_one(None),
                        }
                    }
                    false
                }
                Some(_) => {
                    channels.remove(channel);
                    true
                }
                None => false,
            }
        };
        if last && self.alive.load(Ordering::Acquire) {
            if let Err(err) = self.client.unsubscribe(channel).await {
                tracing::debug!(channel, error = %err, "unsubscribe failed");
            }
        }
    }
}

#[derive(Debug)]
struct Subscription {
    hub: Arc<Hub>,
    channel: String,
}

/// A subscription to a lock's releases, on one node or several. Dropping it
/// leaves the queue of waiters, and unsubscribes (in the background) once no
/// other waiter of this process watches the channel.
#[derive(Debug)]
pub struct ReleaseWatch {
    slots: Vec<Arc<Slot>>,
    /// Per slot: its wake count when the current attempt started.
    seen: Vec<u64>,
    /// Per slot: the wake count that finished attempts have used up.
    used: Vec<u64>,
    /// Whether an attempt started since the watch began.
    attempted: bool,
    behind_others: bool,
    subscriptions: Vec<Subscription>,
}

impl ReleaseWatch {
    /// Watches the releases of `other` too (for locks over several nodes).
    pub fn merge(&mut self, mut other: ReleaseWatch) {
        self.behind_others = self.behind_others && other.behind_others;
        self.attempted = self.attempted || other.attempted;
        self.slots.append(&mut other.slots);
        self.seen.append(&mut other.seen);
        self.used.append(&mut other.used);
        self.subscriptions.append(&mut other.subscriptions);
    }
}

#[async_trait]
impl Wakeups for ReleaseWatch {
    /// Asks to be woken by every release, not only when first in this
    /// process's queue. Fair-mode waiters need it: the order that counts is
    /// the queue in Redis.
    fn wake_on_every_release(&self) {
        for slot in &self.slots {
            slot.every.store(true, Ordering::Release);
        }
    }

    /// Asks to be woken by a release that leaves room for `weight` of
    /// `limit`, in order with this process's other such waiters, or by one
    /// that does not say how much is in use.
    fn wake_when_fits(&self, weight: u32, limit: u32) {
        for slot in &self.slots {
            // Set once, before the waiter sleeps; a second call changes nothing.
            let _ = slot.fits.set((u64::from(weight), u64::from(limit)));
            slot.every.store(true, Ordering::Release);
        }
    }

    fn expect_grants(&self, holds: &[&HoldToken]) {
        let expected: Vec<(String, String)> = holds
            .iter()
            .map(|hold| {
                let attempt = hold.attempt_value();
                let digest = sha1_smol::Sha1::from(attempt).digest().to_string();
                (digest, attempt.to_owned())
            })
            .collect();
        for slot in &self.slots {
            lock_ignoring_poison(&slot.expected).clone_from(&expected);
        }
    }

    fn take_grant(&mut self) -> Option<Grant> {
        self.slots
            .iter()
            .find_map(|slot| lock_ignoring_poison(&slot.grant).take())
    }

    /// Whether, on every watched node, another waiter of this process was
    /// already queued when this one joined. If so, a release published just
    /// before the subscription woke that waiter, and this one need not try
    /// again before waiting; otherwise it must, or it could miss that release.
    fn joined_behind_others(&self) -> bool {
        self.behind_others
    }

    /// Completes when a release wakes this waiter (at once if one did since
    /// the last call). Never completes if every connection is lost: callers
    /// wait on a timer as well.
    ///
    /// The wake-up stays this waiter's until an attempt that started after
    /// it finishes ([`attempt_starting`](Self::attempt_starting), then
    /// [`attempt_finished`](Self::attempt_finished)): a waiter that leaves
    /// before then (its future dropped, or its attempt failed as its wait
    /// ran out) passes it on to the next waiter of this process, which
    /// would otherwise sleep while the lock is free.
    ///
    /// Also completes, with no wake-up, when a grant to another waiter's
    /// offer may have ended (a waiter's lease after it was published).
    async fn released(&mut self) {
        if self.slots.is_empty() {
            return pending().await;
        }
        loop {
            let recheck_at = self
                .slots
                .iter()
                .filter_map(|slot| *lock_ignoring_poison(&slot.recheck_at))
                .min();
            let notified = select_all(
                self.slots
                    .iter()
                    .map(|slot| Box::pin(slot.notify.notified())),
            );
            let recheck_set = select_all(
                self.slots
                    .iter()
                    .map(|slot| Box::pin(slot.recheck_set.notified())),
            );
            let recheck = async {
                match recheck_at {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => pending().await,
                }
            };
            tokio::select! {
                _ = notified => return,
                () = recheck => {
                    for slot in &self.slots {
                        lock_ignoring_poison(&slot.recheck_at).take_if(|at| *at <= Instant::now());
                    }
                    return;
                }
                // A recheck set or moved earlier: sleep again with it.
                _ = recheck_set => {}
            }
        }
    }

    /// Call just before each acquire attempt: the wake-ups so far are the
    /// ones it answers. An attempt after the first with no wake-up since the
    /// one before came from the timer: on a sharded channel, that has the
    /// channel subscribed again (see the module docs).
    fn attempt_starting(&mut self) {
        // This attempt finds out whether a grant is still in the way.
        for slot in &self.slots {
            lock_ignoring_poison(&slot.recheck_at).take();
        }
        let attempted = std::mem::replace(&mut self.attempted, true);
        for (index, (seen, slot)) in self.seen.iter_mut().zip(&self.slots).enumerate() {
            let wakes = slot.wakes.load(Ordering::Acquire);
            slot.started.store(wakes, Ordering::Release);
            if attempted && wakes == *seen {
                if let Some(subscription) = self.subscriptions.get(index) {
                    subscription
                        .hub
                        .resubscribe(subscription.channel.clone(), false);
                }
            }
            *seen = wakes;
        }
    }

    /// Call when the attempt found the lock held, before
    /// [`attempt_finished`](Self::attempt_finished): a waiter woken because
    /// its weight fitted, that found the room taken by another process
    /// first, passes the wake-up to lighter waiters of this process, which
    /// the same release did not wake (the room it counted on went to it).
    fn attempt_refused(&mut self) {
        for (index, slot) in self.slots.iter().enumerate() {
            let Some(&(weight, _)) = slot.fits.get() else {
                continue;
            };
            let answered = self.seen.get(index) > self.used.get(index);
            if let (true, Some(subscription)) = (answered, self.subscriptions.get(index)) {
                subscription
                    .hub
                    .pass_on_lighter(&subscription.channel, weight);
            }
        }
    }

    /// Call when the attempt finished: it took the lock, or found it held
    /// again (whose release wakes a waiter anew). The wake-ups that came
    /// before it started are spent; one that came during it, or before an
    /// attempt that failed, is passed on if this waiter leaves.
    fn attempt_finished(&mut self) {
        self.used.clone_from(&self.seen);
    }
}

impl Drop for ReleaseWatch {
    fn drop(&mut self) {
        let subscriptions = std::mem::take(&mut self.subscriptions);
        if subscriptions.is_empty() {
            return;
        }
        // Whether a wake-up went unused is decided as each slot leaves its
        // queue ([`Hub::leave`]): one read here could miss a wake-up that
        // lands before the slot is out.
        let slots = std::mem::take(&mut self.slots);
        let used = std::mem::take(&mut self.used);
        for slot in &slots {
            slot.leaving.store(true, Ordering::Release);
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            for ((subscription, slot), used) in subscriptions.into_iter().zip(slots).zip(used) {
                subscription
                    .hub
                    .leave(&subscription.channel, &slot, used)
                    .await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::client::Delivery;

    const CHANNEL: &str = "lock:{pool}:released";

    /// A subscriber connection that confirms everything and receives what a
    /// test sends.
    #[derive(Debug)]
    struct Confirming;

    #[async_trait]
    impl SubscriberClient for Confirming {
        fn address(&self) -> &str {
            "nowhere"
        }

        async fn subscribe(&self, _: &str) -> Result<(), LockError> {
            Ok(())
        }

        async fn unsubscribe(&self, _: &str) -> Result<(), LockError> {
            Ok(())
        }
    }

    /// A hub fed by hand: its messages, and its semaphore waiters.
    struct Rig {
        hub: Arc<Hub>,
        messages: tokio::sync::mpsc::UnboundedSender<Delivery>,
    }

    impl Rig {
        fn new() -> Self {
            let (messages, receiver) = tokio::sync::mpsc::unbounded_channel();
            Rig {
                hub: Hub::start(Arc::new(Confirming), receiver, false),
                messages,
            }
        }

        /// A semaphore waiter for `weight` of `limit`, queued behind the
        /// others.
        async fn waiter(&self, weight: u32, limit: u32) -> ReleaseWatch {
            let (slot, behind_others) = self.hub.subscribe(CHANNEL).await.expect("subscribe");
            let watch = ReleaseWatch {
                slots: vec![slot],
                seen: vec![0],
                used: vec![0],
                attempted: behind_others,
                behind_others,
                subscriptions: vec![Subscription {
                    hub: Arc::clone(&self.hub),
                    channel: CHANNEL.to_owned(),
                }],
            };
            watch.wake_when_fits(weight, limit);
            watch
        }

        /// Publishes `payload` and lets the listener hand it out.
        async fn publish(&self, payload: &str) {
            let message = Delivery::Message(CHANNEL.to_owned(), payload.to_owned());
            self.messages.send(message).expect("the listener");
            settle().await;
        }
    }

    /// Time for the hub's tasks (the listener, a leaver) to run.
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    /// Whether `watch` has a wake-up it has not used.
    fn woken(watch: &ReleaseWatch) -> bool {
        watch.slots[0].wakes.load(Ordering::Acquire) > watch.used[0]
    }

    /// An attempt by `watch` that found the semaphore full.
    fn refused(watch: &mut ReleaseWatch) {
        watch.attempt_starting();
        watch.attempt_refused();
        watch.attempt_finished();
    }

    #[tokio::test]
    async fn a_release_wakes_the_waiters_that_fit_in_order() {
        let rig = Rig::new();
        let heavy = rig.waiter(3, 4).await;
        let light: Vec<_> = futures::future::join_all((0..3).map(|_| rig.waiter(1, 4))).await;
        // Two of four in use: the heavy head does not fit, two light ones do.
        rig.publish("u2").await;
        assert!(!woken(&heavy));
        let woken_light: Vec<bool> = light.iter().map(woken).collect();
        assert_eq!(woken_light, [true, true, false]);
    }

    #[tokio::test]
    async fn a_winner_woken_twice_passes_one_wake_up_on() {
        let rig = Rig::new();
        let mut first = rig.waiter(1, 2).await;
        let others: Vec<_> = futures::future::join_all((0..4).map(|_| rig.waiter(1, 2))).await;
        rig.publish("u1").await;
        assert!(woken(&first));
        first.attempt_starting();
        // A second release while the first waiter's attempt takes the
        // permit: it counts that permit as in use and the waiter as waiting.
        rig.publish("u1").await;
        first.attempt_finished();
        drop(first);
        settle().await;
        let woken_others = others.iter().filter(|watch| woken(watch)).count();
        assert_eq!(woken_others, 1, "one permit free, {woken_others} woken");
    }

    #[tokio::test]
    async fn room_found_taken_goes_to_one_lighter_waiter() {
        let rig = Rig::new();
        let mut heavy = rig.waiter(2, 2).await;
        let rest: Vec<_> = futures::future::join_all((0..3).map(|_| rig.waiter(1, 2))).await;
        // Both permits free: the heavy head fits, and takes all the room.
        rig.publish("u0").await;
        assert!(woken(&heavy) && rest.iter().all(|watch| !woken(watch)));
        // Another process took one first: the heavy waiter is refused, and
        // the one permit left goes to one light waiter.
        refused(&mut heavy);
        settle().await;
        let woken_rest = rest.iter().filter(|watch| woken(watch)).count();
        assert_eq!(woken_rest, 1, "one permit free, {woken_rest} woken");
        assert!(!woken(&heavy), "the refused waiter woke itself");
    }

    #[tokio::test]
    async fn a_leaver_passes_its_room_past_waiters_about_to_try() {
        let rig = Rig::new();
        let leaving = rig.waiter(1, 2).await;
        let next = rig.waiter(1, 2).await;
        let last = rig.waiter(1, 2).await;
        rig.publish("u0").await;
        assert!(woken(&leaving) && woken(&next) && !woken(&last));
        // Gone before its attempt: its permit's room goes to the last
        // waiter, not to the next one, whose one attempt is already due.
        drop(leaving);
        settle().await;
        assert!(woken(&last), "a free permit, and the last waiter asleep");
        assert_eq!(next.slots[0].wakes.load(Ordering::Acquire), 1);
    }

    #[tokio::test]
    async fn a_heavy_waiter_behind_a_light_leaver_is_woken() {
        let rig = Rig::new();
        let mut light = rig.waiter(1, 3).await;
        let heavy = rig.waiter(2, 3).await;
        // One of three in use: the light waiter fits, the heavy one not.
        rig.publish("u1").await;
        assert!(woken(&light) && !woken(&heavy));
        light.attempt_starting();
        // Another permit released while the light waiter's attempt takes
        // one: it is counted again, and the heavy one still does not fit.
        rig.publish("u1").await;
        light.attempt_finished();
        drop(light);
        settle().await;
        assert!(
            woken(&heavy),
            "two of three free, and the heavy waiter asleep"
        );
    }

    #[tokio::test]
    async fn a_waiter_gone_takes_no_room() {
        let rig = Rig::new();
        let gone = rig.waiter(1, 2).await;
        let next = rig.waiter(1, 2).await;
        // Dropped, and not yet out of the queue (its leave waits for the
        // hub's changes).
        let changes = rig.hub.changes.lock().await;
        drop(gone);
        rig.publish("u1").await;
        assert!(woken(&next), "the room went to a waiter that left");
        drop(changes);
    }

    #[tokio::test]
    async fn a_refused_light_waiter_wakes_no_one() {
        let rig = Rig::new();
        let mut first = rig.waiter(1, 2).await;
        let rest: Vec<_> = futures::future::join_all((0..3).map(|_| rig.waiter(1, 2))).await;
        rig.publish("u1").await;
        refused(&mut first);
        settle().await;
        assert!(rest.iter().all(|watch| !woken(watch)));
    }

    #[tokio::test]
    async fn a_message_without_the_weight_wakes_every_waiter() {
        let rig = Rig::new();
        let waiters: Vec<_> = futures::future::join_all((0..3).map(|_| rig.waiter(2, 2))).await;
        rig.publish("0").await;
        assert!(waiters.iter().all(woken));
    }

    #[test]
    fn a_weight_in_use_is_told_from_other_messages() {
        assert_eq!(weight_in_use("u0"), Some(0));
        assert_eq!(weight_in_use("u17"), Some(17));
        for other in ["1", "0", "u", "u-1", "u1.5", "g", ""] {
            assert_eq!(weight_in_use(other), None, "{other:?}");
        }
        let digest = "0".repeat(40);
        assert!(weight_in_use(&format!("g{digest}:3:1")).is_none());
        assert!(grant_message(&format!("g{digest}:3:1")).is_some());
        assert!(grant_message("u3").is_none());
    }
}
