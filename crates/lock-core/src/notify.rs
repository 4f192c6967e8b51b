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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as SyncMutex};

use futures::future::{pending, select_all};
use tokio::sync::{broadcast, Mutex};

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
        let receiver = hub.subscribe(channel).await?;
        Ok(ReleaseWatch {
            receivers: vec![receiver],
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
    sender: broadcast::Sender<()>,
    watchers: usize,
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
                let channels = listener
                    .channels
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner());
                if let Some(watched) = channels.get(&channel) {
                    let _ = watched.sender.send(());
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

    async fn subscribe(&self, channel: &str) -> Result<broadcast::Receiver<()>, LockError> {
        let _change = self.changes.lock().await;
        if let Some(receiver) = self.join(channel) {
            return Ok(receiver);
        }
        self.client.subscribe(channel).await?;
        let (sender, receiver) = broadcast::channel(16);
        self.channels
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(
                channel.to_owned(),
                Watched {
                    sender,
                    watchers: 1,
                },
            );
        Ok(receiver)
    }

    fn join(&self, channel: &str) -> Option<broadcast::Receiver<()>> {
        let mut channels = self
            .channels
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let watched = channels.get_mut(channel)?;
        watched.watchers += 1;
        Some(watched.sender.subscribe())
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
/// unsubscribes (in the background) once no other waiter watches the channel.
#[derive(Debug)]
pub struct ReleaseWatch {
    receivers: Vec<broadcast::Receiver<()>>,
    subscriptions: Vec<Subscription>,
}

impl ReleaseWatch {
    /// Watches the releases of `other` too (for locks over several nodes).
    pub fn merge(&mut self, mut other: ReleaseWatch) {
        self.receivers.append(&mut other.receivers);
        self.subscriptions.append(&mut other.subscriptions);
    }

    /// Completes at the next release published on any watched node (at once
    /// if one arrived since the last call). Never completes if every
    /// connection is lost: callers wait on a timer as well.
    pub async fn released(&mut self) {
        if self.receivers.is_empty() {
            return pending().await;
        }
        let waits = self.receivers.iter_mut().map(|receiver| {
            Box::pin(async move {
                loop {
                    match receiver.recv().await {
                        Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => return,
                        Err(broadcast::error::RecvError::Closed) => pending::<()>().await,
                    }
                }
            })
        });
        select_all(waits).await;
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
