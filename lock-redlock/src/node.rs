//! One Redlock node: its connection when there is one, and a background
//! reconnect when there is not, so a node that was down at start can join later
//! without any operation waiting for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use lock_core::strategy::{self, NodeClient, ReleaseNotifier};
use lock_core::{ClientKind, ConnectOptions, Endpoint, LockError};

/// The pause after a failed reconnect before the next may start.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(200);

#[derive(Debug)]
pub(crate) struct Node {
    endpoint: Endpoint,
    address: String,
    kind: ClientKind,
    options: ConnectOptions,
    /// Set once, by the first connect that succeeds, and never replaced
    /// (the connection reconnects by itself), so every round reads it
    /// without a lock.
    client: OnceLock<Arc<dyn NodeClient>>,
    last_error: RwLock<String>,
    reconnecting: AtomicBool,
    notifier: ReleaseNotifier,
}

impl Node {
    pub(crate) fn new(
        endpoint: impl Into<Endpoint>,
        kind: ClientKind,
        options: ConnectOptions,
    ) -> Self {
        let endpoint = endpoint.into();
        Node {
            address: endpoint.address(),
            notifier: ReleaseNotifier::new(kind, endpoint.clone(), options),
            endpoint,
            kind,
            options,
            client: OnceLock::new(),
            last_error: RwLock::new("not connected yet".to_owned()),
            reconnecting: AtomicBool::new(false),
        }
    }

    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    /// This node's release notifications.
    pub(crate) fn notifier(&self) -> &ReleaseNotifier {
        &self.notifier
    }

    /// Connects now; on failure the node stays down and the error is returned.
    pub(crate) async fn connect(&self) -> Result<(), LockError> {
        match strategy::connect(self.kind, &self.endpoint, self.options).await {
            Ok(client) => {
                // Only background reconnects of a node never connected race
                // here, and at most one runs at a time; the loser's
                // connection closes when dropped.
                let _ = self.client.set(client);
                Ok(())
            }
            Err(err) => {
                *self
                    .last_error
                    .write()
                    .unwrap_or_else(|poison| poison.into_inner()) = err.to_string();
                Err(err)
            }
        }
    }

    /// The connection, or the error to count for this node now (and a
    /// reconnect started in the background).
    pub(crate) fn client(self: &Arc<Self>) -> Result<Arc<dyn NodeClient>, LockError> {
        if let Some(client) = self.client.get() {
            return Ok(Arc::clone(client));
        }
        self.reconnect_in_background();
        let message = self
            .last_error
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone();
        Err(LockError::Connection {
            node: self.address.clone(),
            source: Box::<dyn std::error::Error + Send + Sync>::from(message).into(),
        })
    }

    fn reconnect_in_background(self: &Arc<Self>) {
        if self.reconnecting.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.reconnecting.store(false, Ordering::Release);
            return;
        };
        let node = Arc::clone(self);
        runtime.spawn(async move {
            if let Err(err) = node.connect().await {
                tracing::debug!(node = node.address(), error = %err, "redlock node still unreachable");
                tokio::time::sleep(RECONNECT_BACKOFF).await;
            }
            node.reconnecting.store(false, Ordering::Release);
        });
    }
}
