//! One Redis node as the single-node strategies use it: a connection that runs
//! scripts, and release notifications on a second connection opened on the
//! first wait.

use std::sync::Arc;

use crate::client::{self, ClientKind, ConnectOptions, NodeClient, Reply};
use crate::error::LockError;
use crate::key::LockKey;
use crate::notify::{ReleaseNotifier, ReleaseWatch};
use crate::script::{Script, FORCE_RELEASE};
use crate::topology::Endpoint;

/// A node that runs a strategy's scripts and can notify waiters.
#[derive(Debug, Clone)]
pub struct ScriptedNode {
    client: Arc<dyn NodeClient>,
    notifier: Option<Arc<ReleaseNotifier>>,
}

impl ScriptedNode {
    /// Connects to `endpoint` (a [`NodeUrl`](crate::NodeUrl) for a standalone
    /// server) through the `kind` client; see [`client::connect`] for the
    /// errors. Release notifications use a second connection, opened when a
    /// waiter first needs it.
    pub async fn connect(
        kind: ClientKind,
        endpoint: impl Into<Endpoint>,
        options: ConnectOptions,
    ) -> Result<Self, LockError> {
        let endpoint = endpoint.into();
        let client = client::connect(kind, &endpoint, options).await?;
        Ok(ScriptedNode {
            client,
            notifier: Some(Arc::new(ReleaseNotifier::new(kind, endpoint, options))),
        })
    }

    /// A node over a connection you already have. Without a notifier, waiters
    /// poll; add one with [`ScriptedNode::with_notifier`].
    pub fn from_client(client: Arc<dyn NodeClient>) -> Self {
        ScriptedNode {
            client,
            notifier: None,
        }
    }

    /// Uses `notifier` for release notifications.
    pub fn with_notifier(mut self, notifier: Arc<ReleaseNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// The connection that runs scripts.
    pub fn client(&self) -> &Arc<dyn NodeClient> {
        &self.client
    }

    /// Runs `script` on this node; see [`Script::run`].
    pub async fn run(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Reply, LockError> {
        script.run(self.client.as_ref(), keys, args).await
    }

    /// The error for a reply `script` is documented never to give.
    pub fn unexpected(&self, script: &Script, reply: &Reply) -> LockError {
        script.unexpected(self.client.as_ref(), reply)
    }

    /// Deletes `key` whoever holds it and publishes the release; returns 1 if
    /// it existed, 0 if not.
    pub async fn force_release(&self, key: &LockKey) -> Result<usize, LockError> {
        match self.run(&FORCE_RELEASE, &[key.redis_key()], &[]).await? {
            Reply::Int(deleted @ 0..=1) => Ok(deleted.unsigned_abs() as usize),
            other => Err(self.unexpected(&FORCE_RELEASE, &other)),
        }
    }

    /// Subscribes to the releases of `key`; `None` without a notifier.
    pub async fn watch_releases(&self, key: &LockKey) -> Result<Option<ReleaseWatch>, LockError> {
        match &self.notifier {
            Some(notifier) => notifier.watch(&key.release_channel()).await.map(Some),
            None => Ok(None),
        }
    }
}
