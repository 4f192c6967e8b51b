//! The single-node [`LockBackend`]: the plain lock, its renewal and release
//! here, and each other primitive's paths in a file of its own.

mod barriers;
mod elections;
mod fair;
mod latches;
mod multi_keys;
mod names;
mod rw_locks;
mod semaphores;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::strategy::scripts::{barrier, election, latch, multi, name, rw, semaphore, single};
use lock_core::strategy::{
    list_held, remaining_from_pttl, ttl_millis, KeyNames, MillisText, NodeClient, Reply, Script,
    ScriptedNode,
};
use lock_core::{
    Access, AccessRequest, AcquireOutcome, Acquired, BarrierBackend, BarrierState, Capabilities,
    Claim, ClientKind, ConnectOptions, ElectionBackend, Endpoint, ExtendOutcome, FairPlace,
    FencingToken, FromConfig, GrantOptions, HandOffBackend, HoldKind, HoldToken, HolderInfo,
    LatchBackend, LatchState, Leader, ListBackend, ListOptions, LockBackend, LockConfig, LockError,
    LockKey, LockListing, LockState, NameState, OwnerToken, PartyRequest, PermitRequest,
    PermitState, ReleaseOutcome, Renewal, RwHoldState, RwLockBackend, RwLockState,
    SemaphoreBackend, SemaphoreState, Wakeups,
};

/// The most renewals one `lock/extend_many.lua` call carries: a script blocks the
/// server while it runs, and this many keys take well under a millisecond.
const MAX_RENEWALS_PER_SCRIPT: usize = 512;

/// A lock backend over one Redis node.
#[derive(Debug, Clone)]
pub struct SingleNodeBackend {
    node: ScriptedNode,
    grant: GrantOptions,
}

/// The single-node strategy from a config: the first node (or the cluster
/// or sentinel group) of `config`, its client, timeouts and grant options.
impl FromConfig for SingleNodeBackend {
    async fn from_config(config: &LockConfig) -> Result<Self, LockError> {
        let (node, grant) = ScriptedNode::from_config(config).await?;
        Ok(Self::from_scripted(node).with_grant_options(grant))
    }
}

/// The error of a grant that too few replicas acknowledged, which the
/// caller undoes ([`SingleNodeBackend::undo_unacknowledged`]); `None` when
/// the outcome stands as it is.
fn unacknowledged_grant(
    outcome: &AcquireOutcome,
    acknowledged: Result<(), LockError>,
) -> Option<LockError> {
    match (outcome, acknowledged) {
        (AcquireOutcome::Acquired(_), Err(err)) => Some(err),
        _ => None,
    }
}

impl SingleNodeBackend {
    /// Whether a release of a fair lock grants it to the next waiter's
    /// offer on the server: with grants that write the key and `INCR` its
    /// counter only, and no replicas to await (a grant made by a release
    /// could not be acknowledged before the waiter learns of it).
    fn hands_over(&self) -> bool {
        self.grant.counter_only() && !self.node.awaits_replicas()
    }

    /// Runs a script that renews a hold (`lock/extend.lua`, `lock/take_over.lua`):
    /// KEYS are the lock, the counter (always: a counter given a TTL by a
    /// process with `fencing_counter_ttl` must outlive a lease this process
    /// renews, whatever its own options) and, with `holder_info`, the holder
    /// key; the reply is 1 (renewed) or 0 (not this hold's). Unacknowledged
    /// by the replicas asked for, the renewal may not survive a failover: an
    /// error keeps the lease's deadline where it was.
    async fn renew_with(
        &self,
        script: &Script,
        key: &LockKey,
        args: &[&[u8]],
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        // The holder key only with the option: in a cluster, a script whose
        // keys a slot migration splits (an absent one included) gets TRYAGAIN.
        let holder = self.grant.holder_info().then(|| key.holder_key());
        let keys = match &holder {
            Some(holder) => &[key.redis_key(), key.fence_key(), holder][..],
            None => &[key.redis_key(), key.fence_key()][..],
        };
        // A lock's scripts report no foreign data of their own.
        self.renew_hold_with(script, keys, |_| None, args, ttl)
            .await
    }

    /// Renews `renewals` with one `lock/extend_many.lua` call (their keys must
    /// share a slot on a cluster): one outcome each, in order. An error of
    /// the call as a whole is every renewal's.
    async fn renew_in_one_script(
        &self,
        renewals: &[&Renewal<'_>],
    ) -> Vec<Result<ExtendOutcome, LockError>> {
        let with_holder = self.grant.holder_info();
        let holders: Vec<String> = if with_holder {
            renewals
                .iter()
                .map(|renewal| renewal.key.holder_key())
                .collect()
        } else {
            Vec::new()
        };
        let ttls: Vec<MillisText> = renewals
            .iter()
            .map(|renewal| MillisText::of_ttl(renewal.ttl))
            .collect();
        let stride: &[u8] = if with_holder { b"3" } else { b"2" };
        let mut keys = Vec::with_capacity(renewals.len() * 3);
        let mut args: Vec<&[u8]> = Vec::with_capacity(1 + renewals.len() * 2);
        args.push(stride);
        for (index, renewal) in renewals.iter().enumerate() {
            keys.push(renewal.key.redis_key());
            keys.push(renewal.key.fence_key());
            if let Some(holder) = holders.get(index) {
                keys.push(holder);
            }
            args.push(renewal.hold.value().as_bytes());
            args.push(ttls[index].as_bytes());
        }
        let script = &single::EXTEND_MANY;
        let (reply, acknowledged) = match self.node.run_acknowledged(script, &keys, &args).await {
            Ok(answer) => answer,
            // The keys of one call span two nodes (a slot mid-migration, or
            // a cluster client that does not say it is one): the call did
            // not run, and each renewal can, on its own.
            Err(LockError::Server { message, .. }) if spans_nodes(&message) => {
                let each = renewals
                    .iter()
                    .map(|renewal| self.extend(renewal.key, renewal.hold, renewal.ttl));
                return futures::future::join_all(each).await;
            }
            Err(err) => return vec![Err(err); renewals.len()],
        };
        let outcomes = match reply.as_array() {
            Some(outcomes) if outcomes.len() == renewals.len() => outcomes,
            _ => return vec![Err(self.node.unexpected(script, &reply)); renewals.len()],
        };
        renewals
            .iter()
            .zip(outcomes)
            .map(|(renewal, outcome)| match outcome {
                Reply::Int(1) => match &acknowledged {
                    Ok(()) => Ok(ExtendOutcome::Extended { ttl: renewal.ttl }),
                    Err(err) => Err(err.clone()),
                },
                Reply::Int(0) => Ok(ExtendOutcome::NotHeld),
                Reply::Int(-1) => Err(LockError::Corrupted {
                    key: renewal.key.redis_key().to_owned(),
                    detail: "the lock key holds a type no kind of hold uses".to_owned(),
                }),
                _ => Err(self.node.unexpected(script, &reply)),
            })
            .collect()
    }

    /// Renews the hold `hold` names by its id, `<id> <ttl ms>`, with a
    /// primitive of many holders' renewal script ([`renew_hold_with`](Self::renew_hold_with)).
    async fn renew_id_with(
        &self,
        script: &Script,
        keys: &[&str],
        problem: fn(&Reply) -> Option<LockError>,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let ttl_ms = MillisText::of_ttl(ttl);
        let args = [hold.attempt_value().as_bytes(), ttl_ms.as_bytes()];
        self.renew_hold_with(script, keys, problem, &args, ttl)
            .await
    }

    /// Replaces the hold `from` names by `to` with a primitive of many
    /// holders' take-over script, `<from id> <to id> <ttl ms> <entry>`:
    /// only while `from` is live with the `entry` its token claims.
    async fn take_over_id_with(
        &self,
        script: &Script,
        keys: &[&str],
        problem: fn(&Reply) -> Option<LockError>,
        (from, to): (&HoldToken, &HoldToken),
        entry: &str,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let ttl_ms = MillisText::of_ttl(ttl);
        let args = [
            from.attempt_value().as_bytes(),
            to.attempt_value().as_bytes(),
            ttl_ms.as_bytes(),
            entry.as_bytes(),
        ];
        self.renew_hold_with(script, keys, problem, &args, ttl)
            .await
    }

    /// Takes `owner` out of a primitive's line with its give-up script
    /// (`semaphore/give_up.lua`, `rw/give_up.lua`), giving back what a
    /// release granted to one of `offered`: `{left, gave back}`, each 0
    /// or 1; `problem` of any other reply.
    async fn give_up_with(
        &self,
        script: &Script,
        keys: &[&str],
        problem: fn(&Reply) -> Option<LockError>,
        owner: &OwnerToken,
        offered: &[HoldToken],
    ) -> Result<(), LockError> {
        let mut args = vec![owner.expose().as_bytes()];
        args.extend(offered.iter().map(|hold| hold.attempt_value().as_bytes()));
        let reply = self.node.run(script, keys, &args).await?;
        if let Some(problem) = problem(&reply) {
            return Err(problem);
        }
        match reply.as_array() {
            Some([Reply::Int(0 | 1), Reply::Int(0 | 1)]) => Ok(()),
            _ => Err(self.node.unexpected(script, &reply)),
        }
    }

    /// Runs a script that renews a hold with a deadline of its own (a
    /// permit's, a read-write hold's: `semaphore/renew.lua`, `rw/renew.lua`
    /// and their take-overs) on `keys` (the sorted set, its entries hash,
    /// ...), as [`renew_with`](Self::renew_with) does for a lock: 1
    /// renewed, 0 not this hold's, `problem` of any other reply, and an
    /// unacknowledged renewal keeps the deadline.
    async fn renew_hold_with(
        &self,
        script: &Script,
        keys: &[&str],
        problem: fn(&Reply) -> Option<LockError>,
        args: &[&[u8]],
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let (reply, acknowledged) = self.node.run_acknowledged(script, keys, args).await?;
        match reply {
            Reply::Int(1) => {
                acknowledged?;
                Ok(ExtendOutcome::Extended { ttl })
            }
            Reply::Int(0) => Ok(ExtendOutcome::NotHeld),
            other => Err(problem(&other).unwrap_or_else(|| self.node.unexpected(script, &other))),
        }
    }

    /// Runs a script that gives back a hold with a deadline of its own (a
    /// permit's, a read-write hold's) by its id on `keys`: 1 released, 0
    /// not this hold's, `problem` of any other reply.
    async fn release_hold_with(
        &self,
        script: &Script,
        keys: &[&str],
        hold: &HoldToken,
        problem: fn(&Reply) -> Option<LockError>,
    ) -> Result<ReleaseOutcome, LockError> {
        let reply = self
            .node
            .run(script, keys, &[hold.attempt_value().as_bytes()])
            .await?;
        match reply {
            Reply::Int(1) => Ok(ReleaseOutcome::Released),
            Reply::Int(0) => Ok(ReleaseOutcome::NotHeld),
            other => Err(problem(&other).unwrap_or_else(|| self.node.unexpected(script, &other))),
        }
    }

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
    /// [`SingleNodeBackend::from_scripted`] and [`ScriptedNode::with_notifier`].
    pub fn from_node(node: Arc<dyn NodeClient>) -> Self {
        Self::from_scripted(ScriptedNode::from_client(node))
    }

    /// A backend over a prepared [`ScriptedNode`].
    pub fn from_scripted(node: ScriptedNode) -> Self {
        SingleNodeBackend {
            node,
            grant: GrantOptions::default(),
        }
    }

    /// This backend with `grant`: what each grant writes beside the lock
    /// key (a fencing counter that expires, from
    /// [`LockConfig::fencing_counter_ttl`]; holder information, from
    /// [`LockConfig::holder_info`]). The default writes a counter that never
    /// expires and no holder information.
    pub fn with_grant_options(mut self, grant: GrantOptions) -> Self {
        self.grant = grant;
        self
    }

    /// The connection in use.
    pub fn node(&self) -> &Arc<dyn NodeClient> {
        self.node.client()
    }

    /// The acquire with `fencing = false` (and no holder information): a
    /// plain `SET <key> <hold> NX PX <ttl>`, followed by `WAIT` in the same
    /// pipeline when replicas are asked for. When the key is held, a `PTTL`
    /// follows, so a waiter sleeps no longer than the holder's lease: one
    /// more round trip, on the contended path only.
    async fn acquire_plain(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        ttl_ms: &MillisText,
    ) -> Result<AcquireOutcome, LockError> {
        let args: [&[u8]; 5] = [
            key.redis_key().as_bytes(),
            hold.attempt_value().as_bytes(),
            b"NX",
            b"PX",
            ttl_ms.as_bytes(),
        ];
        let (reply, acknowledged) = self
            .node
            .command_acknowledged(key.redis_key(), "SET", &args)
            .await?;
        let outcome = match reply {
            // `OK` arrives as a status or, through fred, as a string.
            ref ok if ok.as_text() == Some("OK") => Acquired::new(None, ttl).into(),
            Reply::Nil => AcquireOutcome::Held {
                remaining: self.holder_remaining(key).await?,
            },
            other => {
                return Err(LockError::UnexpectedReply {
                    node: self.node.client().address().to_owned(),
                    script: "SET NX PX",
                    reply: other.to_string(),
                })
            }
        };
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(self.undo_unacknowledged(key, hold, err).await);
        }
        Ok(outcome)
    }

    /// The default fenced acquire (fencing on, a counter that never
    /// expires, no holder information, no replicas awaited) as one short
    /// script (`lock/acquire_token.lua`). It checks the key before it issues a
    /// token: an attempt that finds the lock held leaves the counter as it
    /// was, so the counter is always the last token granted, which the
    /// reentrant scripts, a read's epoch and `status` rely on. (A
    /// `MULTI`/`EXEC` of `SET NX`, `INCR` and `PERSIST` costs the server
    /// less, but runs the `INCR` whether or not the `SET` granted.)
    async fn acquire_token_only(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        ttl_ms: &MillisText,
    ) -> Result<AcquireOutcome, LockError> {
        let script = &single::ACQUIRE_TOKEN;
        let keys = [key.redis_key(), key.fence_key()];
        let args = [hold.attempt_value().as_bytes(), ttl_ms.as_bytes()];
        let reply = self.node.run(script, &keys, &args).await?;
        acquire_outcome(key, &reply, true, ttl)
            .unwrap_or_else(|| Err(self.node.unexpected(script, &reply)))
    }

    /// How long the holder of `key` has left, from `PTTL`: zero when the
    /// key is already gone (try again at once), `None` for a key without
    /// expiry.
    async fn holder_remaining(&self, key: &LockKey) -> Result<Option<Duration>, LockError> {
        match self
            .node
            .client()
            .command("PTTL", &[key.redis_key().as_bytes()])
            .await?
        {
            Reply::Int(-2) => Ok(Some(Duration::ZERO)),
            Reply::Int(pttl) => Ok(remaining_from_pttl(pttl)),
            other => Err(LockError::UnexpectedReply {
                node: self.node.client().address().to_owned(),
                script: "PTTL",
                reply: other.to_string(),
            }),
        }
    }

    /// A grant stands once enough replicas acknowledged it (when replicas
    /// are asked for); otherwise it is released again here and the acquire
    /// fails with `err` ([`LockError::ReplicasNotAcknowledged`]). Only
    /// called then: in the common case an acquire makes no future for it.
    async fn undo_unacknowledged(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        err: LockError,
    ) -> LockError {
        // Best effort: if this fails too, the key expires with its TTL,
        // and the manager also cleans up an attempt that ended in error.
        if let Err(release) = self.release(key, hold).await {
            tracing::debug!(key = key.name(), error = %release, "could not undo an unacknowledged grant");
        }
        err
    }

    /// A plain lock's attempt: `SET NX PX` where the grant writes nothing
    /// else, the counter-only script where it issues a token alone, and
    /// `lock/acquire.lua` otherwise.
    async fn lock_attempt(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<AcquireOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        let ttl_ms = MillisText::of_ttl(ttl);
        let fencing = self.grant.fencing();
        if !fencing && !self.grant.holder_info() {
            return self.acquire_plain(key, hold, ttl, &ttl_ms).await;
        }
        if self.grant.token_only() && !self.node.awaits_replicas() {
            return self.acquire_token_only(key, hold, ttl, &ttl_ms).await;
        }
        let holder = key.holder_key();
        let keys = [key.redis_key(), key.fence_key(), &holder];
        let grant = self.grant.script_args();
        let mut args = vec![hold.attempt_value().as_bytes(), ttl_ms.as_bytes()];
        args.extend(grant.iter().map(String::as_bytes));
        if !fencing {
            // The script's own flag: store the holder, issue no token.
            args.push(b"0");
        }
        let (reply, acknowledged) = self
            .node
            .run_acknowledged(&single::ACQUIRE, &keys, &args)
            .await?;
        let outcome = acquire_outcome(key, &reply, fencing, ttl)
            .unwrap_or_else(|| Err(self.node.unexpected(&single::ACQUIRE, &reply)))?;
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(self.undo_unacknowledged(key, hold, err).await);
        }
        Ok(outcome)
    }
}

#[async_trait]
impl LockBackend for SingleNodeBackend {
    fn strategy(&self) -> &'static str {
        "single"
    }

    /// Every primitive. Elections are declared with fencing off too, so
    /// `list` shows their leaders; a manager refuses an election's handle
    /// without fencing (a term is a fencing token).
    fn capabilities(&self) -> Capabilities<'_> {
        self.grant
            .capabilities()
            .releasing_only_its_attempt()
            .with_fair_queue()
            .with_multi_keys()
            .with_semaphores(self)
            .with_rw_locks(self)
            .with_hand_off(self)
            .with_listing(self)
            .with_elections(self)
            .with_latches(self)
            .with_barriers(self)
    }

    async fn try_acquire(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        claim: &Claim,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        match claim {
            Claim::Lock { fair: None } => self.lock_attempt(key, hold, ttl).await,
            Claim::Lock { fair: Some(place) } => {
                self.fair_attempt(key, hold, ttl, *place, earlier).await
            }
            Claim::Permit(request) => self.permit_attempt(key, hold, ttl, *request, earlier).await,
            Claim::Access(request) => self.access_attempt(key, hold, ttl, *request, earlier).await,
            Claim::Multi(keys) => self.multi_attempt(keys, hold, ttl).await,
            Claim::Party(request) => self.party_attempt(key, hold, ttl, *request).await,
            _ => Err(claim.unsupported(self.strategy())),
        }
    }

    async fn extend(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        match hold.kind() {
            HoldKind::Permit(_) => self.renew_permit(key, hold, ttl).await,
            HoldKind::Access(_) => self.renew_access(key, hold, ttl).await,
            HoldKind::Party => self.renew_party(key, hold, ttl).await,
            HoldKind::Multi(members) => self.renew_members(members, hold, ttl).await,
            _ => {
                let ttl_ms = MillisText::of_ttl(ttl);
                let args = [hold.value().as_bytes(), ttl_ms.as_bytes()];
                self.renew_with(&single::EXTEND, key, &args, ttl).await
            }
        }
    }

    /// One script call per 512 renewals (`MAX_RENEWALS_PER_SCRIPT`; per hash
    /// slot on a cluster), all sent at once; a single renewal is a plain
    /// [`extend`](LockBackend::extend).
    async fn extend_many(&self, renewals: &[Renewal<'_>]) -> Vec<Result<ExtendOutcome, LockError>> {
        if let [renewal] = renewals {
            return vec![self.extend(renewal.key, renewal.hold, renewal.ttl).await];
        }
        let mut outcomes: Vec<Option<Result<ExtendOutcome, LockError>>> =
            vec![None; renewals.len()];
        // Which renewals go in one script: those of one slot on a cluster.
        let mut groups: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        // Permits and read-write holds are renewed each by its own script,
        // all at once.
        let mut permits = Vec::new();
        for (index, renewal) in renewals.iter().enumerate() {
            if let Err(err) = self.node.validate_ttl(renewal.ttl) {
                outcomes[index] = Some(Err(err));
                continue;
            }
            if !matches!(renewal.hold.kind(), HoldKind::Lock) {
                permits.push(index);
                continue;
            }
            groups
                .entry(self.renewal_group(renewal.key))
                .or_default()
                .push(index);
        }
        let calls = groups
            .values()
            .flat_map(|indices| indices.chunks(MAX_RENEWALS_PER_SCRIPT))
            .map(|chunk| async move {
                let batch: Vec<&Renewal<'_>> =
                    chunk.iter().map(|&index| &renewals[index]).collect();
                (chunk, self.renew_in_one_script(&batch).await)
            });
        let permit_calls = permits.iter().map(|&index| async move {
            let renewal = &renewals[index];
            (
                index,
                self.extend(renewal.key, renewal.hold, renewal.ttl).await,
            )
        });
        let (locks, permits) = futures::future::join(
            futures::future::join_all(calls),
            futures::future::join_all(permit_calls),
        )
        .await;
        for (chunk, results) in locks {
            for (&index, result) in chunk.iter().zip(results) {
                outcomes[index] = Some(result);
            }
        }
        for (index, result) in permits {
            outcomes[index] = Some(result);
        }
        outcomes
            .into_iter()
            .map(|outcome| {
                // Every index was either refused above or in some chunk.
                outcome.unwrap_or_else(|| {
                    Err(LockError::UnexpectedReply {
                        node: self.node.client().address().to_owned(),
                        script: "extend_many",
                        reply: "no outcome for a renewal".to_owned(),
                    })
                })
            })
            .collect()
    }

    /// The hash slot of `key` on a cluster, where one script's keys must
    /// share a slot; elsewhere every key is in one group.
    fn renewal_group(&self, key: &LockKey) -> u32 {
        self.node.renewal_group(key)
    }

    async fn release(&self, key: &LockKey, hold: &HoldToken) -> Result<ReleaseOutcome, LockError> {
        match hold.kind() {
            HoldKind::Permit(_) => return self.release_permit(key, hold).await,
            HoldKind::Access(_) => return self.release_access(key, hold).await,
            HoldKind::Party => return self.leave_party(key, hold).await,
            HoldKind::Multi(members) => return self.release_members(members, hold).await,
            _ => {}
        }
        if hold.is_in_line() && self.hands_over() {
            return self.release_in_line(key, hold).await;
        }
        // The holder key is deleted with the lock with `holder_info` only:
        // every command of the default cycle counts, and holder information
        // another process left (one that handed the lease over) is bound to
        // its hold, shown with no other (lock/inspect.lua), and expires with its
        // TTL. On a cluster a script whose keys a slot migration splits (an
        // absent one included) gets TRYAGAIN, one more reason to leave it.
        let holder = self.grant.holder_info().then(|| key.holder_key());
        let keys = match &holder {
            Some(holder) => &[key.redis_key(), holder][..],
            None => &[key.redis_key()][..],
        };
        let reply = self
            .node
            .run(&single::RELEASE, keys, &[hold.value().as_bytes()])
            .await?;
        match reply {
            Reply::Int(1) => Ok(ReleaseOutcome::Released),
            Reply::Int(0) => Ok(ReleaseOutcome::NotHeld),
            other => Err(self.node.unexpected(&single::RELEASE, &other)),
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

    async fn leave_queue(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: Option<&[HoldToken]>,
    ) -> Result<(), LockError> {
        self.leave_line(key, owner, offered).await
    }

    async fn inspect(&self, key: &LockKey) -> Result<NameState, LockError> {
        self.inspect_name(key).await
    }
}

#[async_trait]
impl HandOffBackend for SingleNodeBackend {
    async fn take_over(
        &self,
        key: &LockKey,
        from: &HoldToken,
        to: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        match from.kind() {
            HoldKind::Permit(_) => return self.take_over_permit(key, from, to, ttl).await,
            HoldKind::Access(_) => return self.take_over_access(key, from, to, ttl).await,
            // A hand-off token never names one.
            HoldKind::Multi(_) | HoldKind::Party => return Ok(ExtendOutcome::NotHeld),
            _ => {}
        }
        // With fencing on, every grant of this strategy is taken to have a
        // token: a hand-off token without one names no hold of it. Whether
        // the claimed token is the hold's own, the key's value says: a grant
        // stores it there (`<owner>:<nonce>#<token>`), and both values name it.
        if from.fencing_token().is_none() && self.grant.fencing() {
            return Ok(ExtendOutcome::NotHeld);
        }
        let ttl_ms = MillisText::of_ttl(ttl);
        let args = [
            from.value().as_bytes(),
            to.value().as_bytes(),
            ttl_ms.as_bytes(),
        ];
        self.renew_with(&single::TAKE_OVER, key, &args, ttl).await
    }
}

#[async_trait]
impl ListBackend for SingleNodeBackend {
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

#[async_trait]
impl SemaphoreBackend for SingleNodeBackend {
    async fn semaphore_state(&self, key: &LockKey) -> Result<SemaphoreState, LockError> {
        self.read_semaphore(key).await
    }

    async fn set_semaphore_limit(
        &self,
        key: &LockKey,
        limit: u32,
    ) -> Result<Option<u32>, LockError> {
        self.write_semaphore_limit(key, limit).await
    }
}

#[async_trait]
impl RwLockBackend for SingleNodeBackend {
    async fn rw_lock_state(&self, key: &LockKey) -> Result<RwLockState, LockError> {
        self.read_rw_lock(key).await
    }
}

#[async_trait]
impl ElectionBackend for SingleNodeBackend {
    async fn proclaim(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        value: &str,
    ) -> Result<bool, LockError> {
        self.proclaim_value(key, hold, value).await
    }

    async fn read_leader(&self, key: &LockKey) -> Result<Option<Leader>, LockError> {
        self.leader_of(key).await
    }
}

#[async_trait]
impl BarrierBackend for SingleNodeBackend {
    async fn barrier_state(
        &self,
        key: &LockKey,
        party: Option<&HoldToken>,
    ) -> Result<BarrierState, LockError> {
        self.read_barrier(key, party).await
    }

    async fn leave_barrier(
        &self,
        key: &LockKey,
        party: &HoldToken,
        ttl: Duration,
        while_filling: bool,
    ) -> Result<Option<String>, LockError> {
        self.leave_with(key, party, ttl, while_filling).await
    }
}

#[async_trait]
impl LatchBackend for SingleNodeBackend {
    async fn set_latch(&self, key: &LockKey, count: u32, ttl: Duration) -> Result<bool, LockError> {
        self.set_latch_count(key, count, ttl).await
    }

    async fn count_down_latch(&self, key: &LockKey, id: Option<&str>) -> Result<u32, LockError> {
        self.count_down(key, id).await
    }

    async fn latch_state(&self, key: &LockKey) -> Result<Option<LatchState>, LockError> {
        self.read_latch(key).await
    }

    async fn delete_latch(&self, key: &LockKey) -> Result<bool, LockError> {
        self.delete_latch_keys(key).await
    }
}

/// Whether a server error says that a script's keys are not all on the
/// node it reached, so it did not run: `CROSSSLOT`, or `TRYAGAIN` and `ASK`
/// while a slot migrates.
fn spans_nodes(message: &str) -> bool {
    let code = message.split_whitespace().next().unwrap_or("");
    matches!(code, "CROSSSLOT" | "TRYAGAIN" | "ASK")
}

/// The `{1, token}` / `{0, pttl}` / `{-1, detail}` reply of the acquire
/// scripts, where `fenced` says whether a token was asked for (without one,
/// an acquire replies `{1, 0}`); `None` for any other shape.
/// The `{3, token}` reply of `fair/acquire.lua`: a release granted the
/// lock to the waiter's earlier attempt. `None` for any other reply;
/// `Some(None)` for one that is malformed, or that names no earlier
/// attempt the call passed.
fn granted_earlier(reply: &Reply, passed_earlier: bool) -> Option<Option<FencingToken>> {
    let [Reply::Int(3), token] = reply.as_array()? else {
        return None;
    };
    let token = token
        .as_text()
        .and_then(|token| token.parse::<u64>().ok())
        .filter(|token| *token >= 1 && passed_earlier);
    Some(token.map(FencingToken::new))
}

fn acquire_outcome(
    key: &LockKey,
    reply: &Reply,
    fenced: bool,
    ttl: Duration,
) -> Option<Result<AcquireOutcome, LockError>> {
    match reply.as_array()? {
        [Reply::Int(1), Reply::Int(0)] if !fenced => Some(Ok(Acquired::new(None, ttl).into())),
        [Reply::Int(1), _] if !fenced => None,
        // An integer below 2^53, the counter's text above (a Lua number
        // would round it).
        [Reply::Int(1), Reply::Int(token)] if *token >= 1 => Some(Ok(Acquired::new(
            Some(FencingToken::new(token.unsigned_abs())),
            ttl,
        )
        .into())),
        [Reply::Int(1), token @ Reply::Data(_)] => {
            let token = token
                .as_text()?
                .parse::<u64>()
                .ok()
                .filter(|token| *token >= 1)?;
            Some(Ok(Acquired::new(Some(FencingToken::new(token)), ttl).into()))
        }
        [Reply::Int(0), Reply::Int(pttl)] => Some(Ok(AcquireOutcome::Held {
            remaining: remaining_from_pttl(*pttl),
        })),
        [Reply::Int(-1), detail] => Some(Err(LockError::Corrupted {
            key: key.redis_key().to_owned(),
            detail: detail.as_text().unwrap_or("unreadable detail").to_owned(),
        })),
        _ => None,
    }
}

/// The `{-2, key, detail}` reply of the semaphore and read-write scripts
/// as [`LockError::Corrupted`]: a bare type name in `detail` is what was
/// found in place of `what`. `None` for any other reply.
fn foreign_data(reply: &Reply, what: &str) -> Option<LockError> {
    let [Reply::Int(-2), key, detail] = reply.as_array()? else {
        return None;
    };
    let detail = detail.as_text()?;
    let detail = if detail.contains(' ') {
        detail.to_owned()
    } else {
        format!("it holds a {detail}, not {what}")
    };
    Some(LockError::Corrupted {
        key: key.as_text()?.to_owned(),
        detail,
    })
}
