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
//! with an attempt when it arrived.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as SyncMutex, Weak};

use futures::future::{pending, select_all};
use tokio::sync::{Mutex, Notify};

use crate::client::{
    connect_subscriber, ClientKind, ConnectOptions, MessageReceiver, SubscriberClient,
};
use crate::config::NodeUrl;
use crate::error::LockError;

/// Release notifications from one node.
#[derive(Debug)]
pub struct ReleaseNotifier {
    kind: ClientKind,
    url: NodeUrl,
    options: ConnectOptions,
    hub: Mutex<Option<Arc<Hub>>>,
}

impl ReleaseNotifier {
    /// A notifier for the node at `url`; it connects on first use.
    pub fn new(kind: ClientKind, url: NodeUrl, options: ConnectOptions) -> Self {
        ReleaseNotifier {
            kind,
            url,
            options,
            hub: Mutex::new(None),
        }
    }

    /// Subscribes to `channel` and returns once the server confirmed it.
    pub async fn watch(&self, channel: &str) -> Result<ReleaseWatch, LockError> {
        let hub = {
            let mut slot = self.hub.lock().await;
            match slot.as_ref() {
                Some(hub) if hub.alive.load(Ordering::Acquire) => Arc::clone(hub),
                _ => {
                    let (client, messages) =
                        connect_subscriber(self.kind, &self.url, self.options).await?;
                    let hub = Hub::start(client, messages);
                    *slot = Some(Arc::clone(&hub));
                    hub
                }
            }
        };
        let slot = hub.subscribe(channel).await?;
        Ok(ReleaseWatch {
            slots: vec![slot],
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
}

#[derive(Debug)]
struct Watched {
    /// This process's waiters on the channel, longest-waiting first. Entries
    /// of waiters that are gone are skipped and pruned.
    waiters: VecDeque<Weak<Notify>>,
    watchers: usize,
}

impl Watched {
    /// Wakes the longest-waiting live waiter, leaving it in place.
    fn wake_one(&mut self) {
        while let Some(first) = self.waiters.front() {
            match first.upgrade() {
                Some(waiter) => {
                    waiter.notify_one();
                    return;
                }
                None => {
                    self.waiters.pop_front();
                }
            }
        }
    }
}

impl Hub {
    fn start(client: Arc<dyn SubscriberClient>, mut messages: MessageReceiver) -> Arc<Self> {
        let hub = Arc::new(Hub {
            client,
            channels: SyncMutex::new(HashMap::new()),
            changes: Mutex::new(()),
            alive: AtomicBool::new(true),
        });
        let listener = Arc::clone(&hub);
        tokio::spawn(async move {
            while let Some(channel) = messages.recv().await {
                let mut channels = listener
                    .channels
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner());
                if let Some(watched) = channels.get_mut(&channel) {
                    watched.wake_one();
                }
            }
            // The connection is gone: waiters fall back to their timers, and
            // the next watch opens a new connection.
            listener.alive.store(false, Ordering::Release);
            tracing::debug!(
                node = listener.client.address(),
                "release notifications lost their connection"
            );
        });
        hub
    }

    async fn subscribe(&self, channel: &str) -> Result<Arc<Notify>, LockError> {
        let _change = self.changes.lock().await;
        let waiter = Arc::new(Notify::new());
        if self.join(channel, &waiter) {
            return Ok(waiter);
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
                },
            );
        Ok(waiter)
    }

    /// Queues `waiter` on a channel already subscribed; false if it is not.
    fn join(&self, channel: &str, waiter: &Arc<Notify>) -> bool {
        let mut channels = self
            .channels
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let Some(watched) = channels.get_mut(channel) else {
            return false;
        };
        watched.watchers += 1;
        watched.waiters.retain(|waiter| waiter.strong_count() > 0);
        watched.waiters.push_back(Arc::downgrade(waiter));
        true
    }

    async fn leave(&self, channel: &str) {
        let _change = self.changes.lock().await;
        let last = {
            let mut channels = self
                .channels
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            match channels.get_mut(channel) {
                Some(watched) if watched.watchers > 1 => {
                    watched.watchers -= 1;
                    watched.waiters.retain(|waiter| waiter.strong_count() > 0);
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
    slots: Vec<Arc<Notify>>,
    subscriptions: Vec<Subscription>,
}

impl ReleaseWatch {
    /// Watches the releases of `other` too (for locks over several nodes).
    pub fn merge(&mut self, mut other: ReleaseWatch) {
        self.slots.append(&mut other.slots);
        self.subscriptions.append(&mut other.subscriptions);
    }

    /// Completes when a release wakes this waiter (at once if one did since
    /// the last call). Never completes if every connection is lost: callers
    /// wait on a timer as well.
    pub async fn released(&mut self) {
        if self.slots.is_empty() {
            return pending().await;
        }
        select_all(self.slots.iter().map(|slot| Box::pin(slot.notified()))).await;
    }
}

impl Drop for ReleaseWatch {
    fn drop(&mut self) {
        let subscriptions = std::mem::take(&mut self.subscriptions);
        if subscriptions.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            for subscription in subscriptions {
                subscription.hub.leave(&subscription.channel).await;
            }
        });
    }
}
