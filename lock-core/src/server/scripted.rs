//! One Redis node as the single-node strategies use it: a connection that runs
//! scripts, and release notifications on a second connection opened on the
//! first wait.

use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::key::LockKey;
use crate::server::client::{self, ClientKind, ConnectOptions, NodeClient, Reply};
use crate::server::keys::KeyNames;
use crate::server::notify::{ReleaseNotifier, ReleaseWatch};
use crate::server::script::{Script, FORCE_RELEASE};
use crate::server::topology::{Endpoint, ReplicasConfig};

/// A node that runs a strategy's scripts and can notify waiters.
#[derive(Debug, Clone)]
pub struct ScriptedNode {
    client: Arc<dyn NodeClient>,
    notifier: Option<Arc<ReleaseNotifier>>,
    replicas: ReplicasConfig,
}

impl ScriptedNode {
    /// Connects to `endpoint` (a [`NodeUrl`](crate::NodeUrl) for a standalone
    /// server) through the `kind` client; see [`connect`](crate::server::client::connect)
    /// for the errors. Release notifications use a second connection, opened when a
    /// waiter first needs it.
    pub async fn connect(
        kind: ClientKind,
        endpoint: impl Into<Endpoint>,
        options: ConnectOptions,
    ) -> Result<Self, LockError> {
        let endpoint = endpoint.into();
        let client = client::connect(kind, &endpoint, options).await?;
        let notifier = ReleaseNotifier::new(kind, endpoint.clone(), options);
        notifier.set_sharded(client.publishes_sharded());
        Ok(ScriptedNode {
            client,
            replicas: endpoint.replicas,
            notifier: Some(Arc::new(notifier)),
        })
    }

    /// A node over a connection you already have. Without a notifier, waiters
    /// poll; add one with [`ScriptedNode::with_notifier`].
    pub fn from_client(client: Arc<dyn NodeClient>) -> Self {
        ScriptedNode {
            client,
            notifier: None,
            replicas: ReplicasConfig::default(),
        }
    }

    /// Waits for `replicas` after each acquire and extend; see
    /// [`ScriptedNode::run_acknowledged`].
    pub fn with_replicas(mut self, replicas: ReplicasConfig) -> Self {
        self.replicas = replicas;
        self
    }

    /// Checks the TTL of a grant or renewal through this node:
    /// [`validate_ttl`](crate::strategy::validate_ttl), and, when replicas are
    /// awaited, above their timeout, or the lease could run out while they
    /// are. Errors with [`LockError::InvalidTtl`].
    pub fn validate_ttl(&self, ttl: Duration) -> Result<(), LockError> {
        crate::ttl::validate_ttl(ttl)?;
        if self.replicas.is_on() && self.replicas.timeout >= ttl {
            return Err(LockError::InvalidTtl {
                ttl,
                reason: format!(
                    "must be above replicas.timeout ({}), or a grant can expire while replicas \
                     are awaited",
                    humantime::format_duration(self.replicas.timeout)
                ),
            });
        }
        Ok(())
    }

    /// Runs `script` like [`ScriptedNode::run`]; when replicas are asked
    /// for, with `WAIT` behind it in one pipeline on one connection (a
    /// `WAIT` on any other connection would count replicas that have none of
    /// this write). Returns the script's reply and whether enough replicas
    /// acknowledged it: `Ok` when none are asked for, otherwise
    /// [`LockError::ReplicasNotAcknowledged`] if fewer did in time. The
    /// caller undoes or disowns a write that was not acknowledged.
    pub async fn run_acknowledged(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<(Reply, Result<(), LockError>), LockError> {
        if !self.replicas.is_on() {
            return Ok((self.run(script, keys, args).await?, Ok(())));
        }
        let (count, millis) = self.wait_args();
        let wait: &[&[u8]] = &[count.as_bytes(), millis.as_bytes()];
        let (reply, waited) = script
            .run_then(self.client.as_ref(), keys, args, ("WAIT", wait))
            .await?;
        Ok((reply, self.acknowledgement(waited)))
    }

    /// Whether grants and renewals wait for replicas (`WAIT` behind each).
    pub fn awaits_replicas(&self) -> bool {
        self.replicas.is_on()
    }

    /// Sends the plain command `name args...` (a `SET`, whose first
    /// argument is its key) like [`ScriptedNode::run_acknowledged`] runs a
    /// script: when replicas are asked for, with `WAIT` behind it in one
    /// pipeline on the connection that serves `key`. Returns the command's
    /// reply as it came and whether enough replicas acknowledged it.
    pub async fn command_acknowledged(
        &self,
        key: &str,
        name: &'static str,
        args: &[&[u8]],
    ) -> Result<(Reply, Result<(), LockError>), LockError> {
        if !self.replicas.is_on() {
            return Ok((self.client.command(name, args).await?, Ok(())));
        }
        let (count, millis) = self.wait_args();
        let wait: &[&[u8]] = &[count.as_bytes(), millis.as_bytes()];
        let mut replies = self
            .client
            .pipeline_on_key(key.as_bytes(), &[(name, args), ("WAIT", wait)])
            .await?
            .into_iter();
        let (Some(reply), Some(waited)) = (replies.next(), replies.next()) else {
            return Err(LockError::UnexpectedReply {
                node: self.client.address().to_owned(),
                script: name,
                reply: "a pipeline without its two replies".to_owned(),
            });
        };
        Ok((reply?, self.acknowledgement(waited)))
    }

    /// `WAIT`'s arguments: the replica count and the timeout in ms.
    fn wait_args(&self) -> (String, String) {
        // WAIT with 0 ms would block the connection until a replica answers.
        let millis = crate::ttl::ttl_millis(self.replicas.timeout).max(1);
        (self.replicas.count.to_string(), millis.to_string())
    }

    /// Whether `WAIT`'s reply shows enough replicas:
    /// [`LockError::ReplicasNotAcknowledged`] if fewer acknowledged in time.
    fn acknowledgement(&self, waited: Result<Reply, LockError>) -> Result<(), LockError> {
        let acknowledged = match waited? {
            Reply::Int(acknowledged) => u32::try_from(acknowledged).unwrap_or(0),
            other => {
                return Err(LockError::UnexpectedReply {
                    node: self.client.address().to_owned(),
                    script: "WAIT",
                    reply: other.to_string(),
                })
            }
        };
        if acknowledged >= self.replicas.count {
            Ok(())
        } else {
            Err(LockError::ReplicasNotAcknowledged {
                node: self.client.address().to_owned(),
                acknowledged,
                needed: self.replicas.count,
                timeout: self.replicas.timeout,
            })
        }
    }

    /// Uses `notifier` for release notifications, on sharded pub/sub if
    /// this node's releases publish there
    /// ([`ReleaseNotifier::set_sharded`]).
    pub fn with_notifier(mut self, notifier: Arc<ReleaseNotifier>) -> Self {
        notifier.set_sharded(self.client.publishes_sharded());
        self.notifier = Some(notifier);
        self
    }

    /// The renewal group of `key` on this node
    /// ([`LockBackend::renewal_group`](crate::LockBackend::renewal_group)):
    /// its hash slot on a cluster, where one script's keys must share a slot
    /// and slots live on different masters; 0 elsewhere.
    pub fn renewal_group(&self, key: &LockKey) -> u32 {
        if self.client.is_cluster() {
            u32::from(key.hash_slot())
        } else {
            0
        }
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

    /// Deletes `key` (with its holder information, a lease set's entries
    /// and slots, a latch's counted-down ids, a barrier's record and the
    /// parties it keeps out)
    /// whoever holds it and publishes the release; returns 1 if it existed,
    /// 0 if not.
    pub async fn force_release(&self, key: &LockKey) -> Result<usize, LockError> {
        let (holder, held, slots) = (key.holder_key(), key.held_key(), key.slots_key());
        let (downs, barrier) = (key.latch_downs_key(), key.barrier_key());
        let left = key.barrier_left_key();
        match self
            .run(
                &FORCE_RELEASE,
                &[
                    key.redis_key(),
                    &holder,
                    &held,
                    &slots,
                    &downs,
                    &barrier,
                    &left,
                ],
                &[],
            )
            .await?
        {
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
