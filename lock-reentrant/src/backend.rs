//! The reentrant [`LockBackend`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::strategy::scripts::reentrant;
use lock_core::strategy::{
    list_held, remaining_from_pttl, KeyNames, MillisText, NodeClient, Reply, ScriptedNode,
};
use lock_core::{
    AcquireOutcome, Acquired, Capabilities, Claim, ClientKind, ConnectOptions, Endpoint,
    ExtendOutcome, FencingToken, FromConfig, GrantOptions, HoldToken, HolderInfo, ListBackend,
    ListOptions, LockBackend, LockConfig, LockError, LockKey, LockListing, LockState, NameState,
    ReleaseOutcome, Wakeups,
};

/// A reentrant lock backend over one Redis node.
#[derive(Debug, Clone)]
pub struct ReentrantBackend {
    node: ScriptedNode,
    grant: GrantOptions,
}

/// The reentrant strategy from a config: the first node (or the cluster or
/// sentinel group) of `config`, its client, timeouts and grant options.
impl FromConfig for ReentrantBackend {
    async fn from_config(config: &LockConfig) -> Result<Self, LockError> {
        let (node, grant) = ScriptedNode::from_config(config).await?;
        Ok(Self::from_scripted(node).with_grant_options(grant))
    }
}

impl ReentrantBackend {
    /// Connects to `endpoint` (a [`NodeUrl`](lock_core::NodeUrl) for a
    /// standalone server, or a cluster or sentinel [`Endpoint`]) through the
    /// `kind` client.
    ///
    /// Errors within `options.connect_timeout`: [`LockError::InvalidConfig`] for a
    /// malformed URL, [`LockError::Authentication`] for a wrong password,
    /// [`LockError::Connection`] or [`LockError::Timeout`] for an unreachable
    /// node, [`LockError::ClientNotCompiled`] when the client's feature is off.
    /// Waiters are woken by release notifications on a second connection.
    pub async fn connect(
        kind: ClientKind,
        endpoint: impl Into<Endpoint>,
        options: ConnectOptions,
    ) -> Result<Self, LockError> {
        Ok(Self::from_scripted(
            ScriptedNode::connect(kind, endpoint, options).await?,
        ))
    }

    /// A backend over a connection you already have, for example
    /// `Arc::new(lock_core::RedisNode::from_manager(..))` wrapping your own client. Its
    /// waiters poll unless you give it a notifier with
    /// [`ReentrantBackend::from_scripted`] and [`ScriptedNode::with_notifier`].
    pub fn from_node(node: Arc<dyn NodeClient>) -> Self {
        Self::from_scripted(ScriptedNode::from_client(node))
    }

    /// A backend over a prepared [`ScriptedNode`].
    pub fn from_scripted(node: ScriptedNode) -> Self {
        ReentrantBackend {
            node,
            grant: GrantOptions::default(),
        }
    }

    /// This backend with `grant`: what each first hold writes beside the
    /// lock key (a fencing counter that expires, from
    /// [`LockConfig::fencing_counter_ttl`]; holder information, from
    /// [`LockConfig::holder_info`], which re-entries keep). The default
    /// writes a counter that never expires and no holder information.
    pub fn with_grant_options(mut self, grant: GrantOptions) -> Self {
        self.grant = grant;
        self
    }

    /// The connection in use.
    pub fn node(&self) -> &Arc<dyn NodeClient> {
        self.node.client()
    }

    /// The keys of an extend: the lock and its counter, and the holder
    /// information only when this backend stores it (in a cluster, a script
    /// whose keys a slot migration splits gets TRYAGAIN). A release always
    /// names the holder information, to delete it.
    fn keys<'a>(&self, key: &'a LockKey, holder: &'a str) -> Vec<&'a str> {
        let mut keys = vec![key.redis_key(), key.fence_key()];
        if self.grant.holder_info() {
            keys.push(holder);
        }
        keys
    }

    /// The state of the lock on `key`.
    async fn lock_state(&self, key: &LockKey) -> Result<LockState, LockError> {
        let holder = key.holder_key();
        let keys = [key.redis_key(), key.fence_key(), &holder];
        let reply = self.node.run(&reentrant::INSPECT, &keys, &[]).await?;
        let Some([Reply::Int(pttl), counter, holds, Reply::Int(owners), holder]) = reply.as_array()
        else {
            return Err(self.node.unexpected(&reentrant::INSPECT, &reply));
        };
        let (Some(token), Some(holds)) = (parse_count(counter), parse_count(holds)) else {
            return Err(self.node.unexpected(&reentrant::INSPECT, &reply));
        };
        // Anyone who may write the lock's keys writes this hash: what cannot
        // be read is left out, and the lock still shows as held.
        let holder = HolderInfo::from_reply(holder).unwrap_or_else(|reason| {
            tracing::warn!(key = key.name(), %reason, "unreadable holder information");
            None
        });
        let token = token.map(FencingToken::new);
        match (*pttl, *owners, holds) {
            (-2, 0, None) => Ok(LockState::Free { last_token: token }),
            (_, 1, Some(holds)) if holds >= 1 => Ok(LockState::Held {
                remaining: remaining_from_pttl(*pttl),
                token,
                hold_count: Some(holds),
                holder,
            }),
            _ => Err(LockError::Corrupted {
                key: key.redis_key().to_owned(),
                detail: format!("expected one owner with a positive hold count, found {reply}"),
            }),
        }
    }
}

/// The `{-1, detail}` reply every reentrant script gives for a hold count that
/// is not a positive integer.
fn corrupted(key: &LockKey, detail: &Reply) -> LockError {
    LockError::Corrupted {
        key: key.redis_key().to_owned(),
        detail: detail.as_text().unwrap_or("unreadable detail").to_owned(),
    }
}

/// The hold's fencing token as the scripts compare it: the counter's value
/// when the hold was granted, or `''` (any hold of the owner) for a hold
/// whose acquire was never confirmed.
fn hold_token_arg(hold: &HoldToken) -> String {
    hold.fencing_token()
        .map(|token| token.get().to_string())
        .unwrap_or_default()
}

/// Parses an optional decimal string from Redis.
fn parse_count(reply: &Reply) -> Option<Option<u64>> {
    match reply {
        Reply::Nil => Some(None),
        other => other.as_text()?.parse::<u64>().ok().map(Some),
    }
}

#[async_trait]
impl LockBackend for ReentrantBackend {
    fn strategy(&self) -> &'static str {
        "reentrant"
    }

    /// Reentrant grants issue tokens whatever `fencing` says.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::unknown()
            .with_holder_info(self.grant.holder_info())
            .with_listing(self)
    }

    /// The lock alone: re-entry is by owner, which no other primitive has.
    async fn try_acquire(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        claim: &Claim,
        _earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        if !matches!(claim, Claim::Lock { fair: None }) {
            return Err(claim.unsupported(self.strategy()));
        }
        self.node.validate_ttl(ttl)?;
        let ttl_ms = MillisText::of_ttl(ttl);
        let holder = key.holder_key();
        let keys = [key.redis_key(), key.fence_key(), &holder];
        let grant = self.grant.script_args();
        let mut args = vec![hold.expose_owner().as_bytes(), ttl_ms.as_bytes()];
        args.extend(grant.iter().map(String::as_bytes));
        let (reply, acknowledged) = self
            .node
            .run_acknowledged(&reentrant::ACQUIRE, &keys, &args)
            .await?;
        match reply.as_array() {
            Some([Reply::Int(1), token, Reply::Int(holds)]) if *holds >= 1 => {
                // An integer from INCR (a first hold), or the counter's text
                // (a re-entry).
                let token = match token {
                    Reply::Int(token) if *token >= 1 => token.unsigned_abs(),
                    other => match other.as_text().and_then(|text| text.parse::<u64>().ok()) {
                        Some(token) if token >= 1 => token,
                        _ => return Err(self.node.unexpected(&reentrant::ACQUIRE, &reply)),
                    },
                };
                let fencing_token = Some(FencingToken::new(token));
                if let Err(err) = acknowledged {
                    // Undo this hold (one level of a re-entry); if that fails
                    // too, the key expires with its TTL.
                    let granted = hold.clone().granted(fencing_token);
                    if let Err(release) = self.release(key, &granted).await {
                        tracing::debug!(key = key.name(), error = %release, "could not undo an unacknowledged grant");
                    }
                    return Err(err);
                }
                Ok(Acquired::new(fencing_token, ttl).into())
            }
            Some([Reply::Int(0), Reply::Int(pttl)]) => Ok(AcquireOutcome::Held {
                remaining: remaining_from_pttl(*pttl),
            }),
            Some([Reply::Int(-1), detail]) => Err(corrupted(key, detail)),
            _ => Err(self.node.unexpected(&reentrant::ACQUIRE, &reply)),
        }
    }

    async fn extend(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        let ttl_ms = MillisText::of_ttl(ttl);
        let token = hold_token_arg(hold);
        let holder = key.holder_key();
        let keys = self.keys(key, &holder);
        let args = [
            hold.expose_owner().as_bytes(),
            ttl_ms.as_bytes(),
            token.as_bytes(),
        ];
        let (reply, acknowledged) = self
            .node
            .run_acknowledged(&reentrant::EXTEND, &keys, &args)
            .await?;
        match reply {
            // The TTL the key now has: the one asked for, or a longer one the
            // hold's other guards set.
            Reply::Int(ttl_set) if ttl_set >= 1 => {
                // Unacknowledged, the renewal may not survive a failover:
                // an error keeps the lease's deadline where it was.
                acknowledged?;
                Ok(ExtendOutcome::Extended {
                    ttl: Duration::from_millis(ttl_set.unsigned_abs()),
                })
            }
            Reply::Int(0) => Ok(ExtendOutcome::NotHeld),
            other => Err(self.node.unexpected(&reentrant::EXTEND, &other)),
        }
    }

    async fn release(&self, key: &LockKey, hold: &HoldToken) -> Result<ReleaseOutcome, LockError> {
        let token = hold_token_arg(hold);
        // The last release deletes the holder information, whoever wrote it
        // (another process of the owner may have); on a cluster only with
        // the option (see `keys`), where it expires with the lock's TTL.
        let holder = key.holder_key();
        let keys = if self.node.client().is_cluster() {
            self.keys(key, &holder)
        } else {
            vec![key.redis_key(), key.fence_key(), &holder]
        };
        let args = [hold.expose_owner().as_bytes(), token.as_bytes()];
        let reply = self.node.run(&reentrant::RELEASE, &keys, &args).await?;
        match reply.as_array() {
            Some([Reply::Int(1), Reply::Int(left)]) if *left >= 0 => Ok(ReleaseOutcome::Released),
            Some([Reply::Int(0), Reply::Int(0)]) => Ok(ReleaseOutcome::NotHeld),
            Some([Reply::Int(-1), detail]) => Err(corrupted(key, detail)),
            _ => Err(self.node.unexpected(&reentrant::RELEASE, &reply)),
        }
    }

    async fn force_release(&self, key: &LockKey) -> Result<usize, LockError> {
        self.node.force_release(key).await
    }

    async fn watch_releases(&self, key: &LockKey) -> Result<Option<Box<dyn Wakeups>>, LockError> {
        Ok(self
            .node
            .watch_releases(key)
            .await?
            .map(|watch| Box::new(watch) as Box<dyn Wakeups>))
    }

    /// The hash slot of `key` on a cluster, so that a master that stalls
    /// holds up the renewals of its own slots only.
    fn renewal_group(&self, key: &LockKey) -> u32 {
        self.node.renewal_group(key)
    }

    /// Only locks hold its names.
    async fn inspect(&self, key: &LockKey) -> Result<NameState, LockError> {
        self.lock_state(key).await.map(NameState::from)
    }
}

#[async_trait]
impl ListBackend for ReentrantBackend {
    async fn list(&self, prefix: &str, options: &ListOptions) -> Result<LockListing, LockError> {
        list_held(
            self,
            vec![Ok(Arc::clone(self.node.client()))],
            prefix,
            options,
        )
        .await
    }
}
