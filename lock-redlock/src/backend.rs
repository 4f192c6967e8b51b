//! The Redlock [`LockBackend`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use lock_core::strategy::scripts::{multi, single, FORCE_RELEASE};
use lock_core::strategy::{
    clock_drift, list_held, remaining_from_pttl, validate_ttl, validity, KeyNames, MillisText,
    ReleaseWatch, Reply,
};
use lock_core::{
    AcquireOutcome, Acquired, Capabilities, Claim, ClientKind, ConnectOptions, Endpoint,
    ExtendOutcome, FromConfig, HoldKind, HoldToken, ListBackend, ListOptions, LockBackend,
    LockConfig, LockError, LockKey, LockListing, LockState, NameState, NodeUrl, ReleaseOutcome,
    Topology, Wakeups,
};

use crate::late_grants::{delete_late_grant, LateGrants};
use crate::node::Node;
use crate::options::{check_node_count, warn_if_even};
pub use crate::options::{validate_config, RedlockOptions};
use crate::round::{self, NodeSet, Texts};

/// What a release found on the nodes.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ReleaseReport {
    /// Nodes that deleted the owner's key.
    pub confirmed: usize,
    /// Nodes where the key was gone or held by another owner.
    pub not_held: usize,
    /// The errors of the nodes that failed, each naming its node.
    pub failures: Vec<LockError>,
}

/// A lock backend over N independent Redis nodes.
#[derive(Debug, Clone)]
pub struct RedlockBackend {
    nodes: Arc<[Arc<Node>]>,
    options: RedlockOptions,
    /// Grants still in flight after their acquire returned, matched with
    /// the same hold's releases (see `late_grants`).
    late_grants: Arc<LateGrants>,
}

/// Redlock from a config: every node of `config` (see [`validate_config`]),
/// its client, timeouts and [`RedlockOptions`].
impl FromConfig for RedlockBackend {
    async fn from_config(config: &LockConfig) -> Result<Self, LockError> {
        validate_config(config)?;
        RedlockBackend::connect_endpoints(
            config.client,
            &config.endpoints(),
            ConnectOptions::from(config),
            RedlockOptions::from(config),
        )
        .await
    }
}

/// Checks `config` for Redlock: [`LockConfig::validate`], a `ttl` above
/// `node_timeout`, not two nodes (see [`RedlockBackend::connect`]), and no
/// `holder_info`, which Redlock does not store. Errors with
/// [`LockError::InvalidConfig`] naming the field.
///
/// A multi-key hold's member keys, as the node scripts take them; `None`
/// for a hold of one key.
fn member_keys(hold: &HoldToken) -> Option<Arc<[String]>> {
    let HoldKind::Multi(members) = hold.kind() else {
        return None;
    };
    Some(
        members
            .iter()
            .map(|key| key.redis_key().to_owned())
            .collect(),
    )
}

impl RedlockBackend {
    /// Connects to all `urls` at once through the `kind` client.
    ///
    /// Nodes that cannot be reached or refuse the credentials start out down
    /// and are retried in the background; each operation counts them as failed
    /// meanwhile. The call fails if fewer than a majority connect
    /// ([`LockError::QuorumNotReached`], whose `failures` name each node and
    /// why), and at once for bad input: no nodes, two nodes (whose majority
    /// is both), a malformed URL, the same node twice, a drift factor
    /// outside `[0, 0.5)` or a zero node timeout
    /// ([`LockError::InvalidConfig`]). An even count of four or more is
    /// accepted with a warning: it survives no more failures than one node
    /// fewer.
    pub async fn connect(
        kind: ClientKind,
        urls: &[NodeUrl],
        connect: ConnectOptions,
        options: RedlockOptions,
    ) -> Result<Self, LockError> {
        let endpoints: Vec<Endpoint> = urls.iter().map(Endpoint::from).collect();
        Self::connect_endpoints(kind, &endpoints, connect, options).await
    }

    /// [`RedlockBackend::connect`] over standalone endpoints, each with its
    /// own TLS settings. Errors with [`LockError::InvalidConfig`] on
    /// `topology` for a cluster or sentinel endpoint: each Redlock node is
    /// one independent server.
    pub async fn connect_endpoints(
        kind: ClientKind,
        endpoints: &[Endpoint],
        connect: ConnectOptions,
        options: RedlockOptions,
    ) -> Result<Self, LockError> {
        if let Some(endpoint) = endpoints
            .iter()
            .find(|endpoint| endpoint.topology != Topology::Standalone)
        {
            return Err(LockError::InvalidConfig {
                field: "topology".into(),
                reason: format!(
                    "Redlock runs over independent standalone servers, and {} is a {}: one \
                     deployment whose replicas can take over without a grant. Use the single \
                     or reentrant strategy on it, or Redlock over standalone servers",
                    endpoint.address(),
                    endpoint.topology
                ),
            });
        }
        if let Some(endpoint) = endpoints.iter().find(|endpoint| endpoint.replicas.is_on()) {
            return Err(LockError::InvalidConfig {
                field: "replicas".into(),
                reason: format!(
                    "{}: Redlock does not wait for replicas; its nodes are meant to be \
                     independent masters (use persistence or delayed restarts instead)",
                    endpoint.address()
                ),
            });
        }
        let mut config = LockConfig::default();
        config.nodes = endpoints
            .iter()
            .flat_map(|endpoint| endpoint.nodes.iter().cloned())
            .collect();
        config.client = kind;
        config.node_timeout = options.node_timeout;
        config.clock_drift_factor = options.clock_drift_factor;
        // The TTL is chosen per acquire; check the rest with one above any node timeout.
        config.ttl = lock_core::MAX_TTL;
        config.validate()?;
        for endpoint in endpoints {
            endpoint.validate()?;
        }
        check_node_count(endpoints.len())?;
        warn_if_even(endpoints.len());
        let nodes: Vec<Arc<Node>> = endpoints
            .iter()
            .map(|endpoint| Arc::new(Node::new(endpoint, kind, connect)))
            .collect();
        let results = futures::future::join_all(nodes.iter().map(|node| node.connect())).await;
        let needed = quorum(nodes.len());
        let failures: Vec<LockError> = results.into_iter().filter_map(Result::err).collect();
        let got = nodes.len() - failures.len();
        if got < needed {
            return Err(LockError::QuorumNotReached {
                got,
                needed,
                failures,
            });
        }
        for failure in &failures {
            tracing::warn!(error = %failure, "redlock node down at start; retrying in the background");
        }
        Ok(RedlockBackend {
            nodes: nodes.into(),
            options,
            late_grants: Arc::default(),
        })
    }

    /// How many nodes a majority is.
    pub fn quorum(&self) -> usize {
        quorum(self.nodes.len())
    }

    /// How many nodes there are.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Releases `hold`'s key on every node at once and says how many
    /// confirmed, waiting for every node's answer (or the node timeout).
    pub async fn release_reporting(&self, key: &LockKey, hold: &HoldToken) -> ReleaseReport {
        self.release_on(|_| true, key, hold, usize::MAX).await
    }

    /// Releases `hold`'s key on the nodes whose index `asked` accepts, all at
    /// once, and stops waiting once `enough` nodes confirmed; the deletes still
    /// in flight finish in the background.
    async fn release_on(
        &self,
        asked: impl Fn(usize) -> bool,
        key: &LockKey,
        hold: &HoldToken,
        enough: usize,
    ) -> ReleaseReport {
        let args = (
            Texts::new([key.redis_key(), hold.value()]),
            member_keys(hold),
        );
        // This hold's grants still in flight: one may land after this release
        // on its node (see `late_grants`), and is then deleted.
        let grant = self.late_grants.of(key, hold);
        let mut round = round::start(
            &self.nodes,
            asked,
            self.options.node_timeout,
            args,
            |node, client, (args, members)| {
                let grant = grant.clone();
                async move {
                    let [key, hold] = args.parts();
                    let outcome = match &members {
                        // A multi-key hold: every member it still has.
                        Some(keys) => {
                            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                            multi::RELEASE
                                .run(client.as_ref(), &keys, &[hold.as_bytes()])
                                .await
                                .and_then(|reply| match reply {
                                    Reply::Int(deleted) if deleted >= 0 => Ok(deleted > 0),
                                    other => {
                                        Err(multi::RELEASE.unexpected(client.as_ref(), &other))
                                    }
                                })
                        }
                        None => single::RELEASE
                            .run(client.as_ref(), &[key], &[hold.as_bytes()])
                            .await
                            .and_then(|reply| match reply {
                                Reply::Int(1) => Ok(true),
                                Reply::Int(0) => Ok(false),
                                other => Err(single::RELEASE.unexpected(client.as_ref(), &other)),
                            }),
                    };
                    // An error leaves it open whether the release ran, or ran
                    // before this hold's grant: counted as a miss, so a grant
                    // that may have landed after it is deleted.
                    let deleted = matches!(outcome, Ok(true));
                    if grant.is_some_and(|grant| grant.release_answered(node, deleted)) {
                        delete_late_grant(
                            Arc::clone(&client),
                            key.to_owned(),
                            members,
                            hold.to_owned(),
                        );
                    }
                    outcome
                }
            },
        );
        let mut report = ReleaseReport::default();
        while let Some((_, result)) = round.next().await {
            match result {
                Ok(true) => report.confirmed += 1,
                Ok(false) => report.not_held += 1,
                Err(err) => report.failures.push(err),
            }
            if report.confirmed >= enough {
                break;
            }
        }
        round.finish_in_background();
        report
    }

    /// How long the holder's key has left on `nodes` (the shortest), so a
    /// waiter need not sleep past the moment it may expire. One round, in the
    /// contended path only; `None` if no node answers in time.
    async fn holder_remaining(
        &self,
        asked: impl Fn(usize) -> bool,
        key: &LockKey,
    ) -> Option<Duration> {
        let key = Arc::<str>::from(key.redis_key());
        let mut round = round::start(
            &self.nodes,
            asked,
            self.options.node_timeout,
            key,
            |_, client, key| async move {
                match client.command("PTTL", &[key.as_bytes()]).await? {
                    Reply::Int(pttl) => Ok(pttl),
                    other => Err(LockError::UnexpectedReply {
                        node: client.address().to_owned(),
                        script: "PTTL",
                        reply: other.to_string(),
                    }),
                }
            },
        );
        let mut shortest: Option<Duration> = None;
        while let Some((_, result)) = round.next().await {
            // -2: already gone, so no wait at all; -1: no expiry, no bound.
            let remaining = match result {
                Ok(-2) => Some(Duration::ZERO),
                Ok(pttl) => remaining_from_pttl(pttl),
                Err(_) => None,
            };
            if let Some(remaining) = remaining {
                shortest = Some(shortest.map_or(remaining, |current| current.min(remaining)));
            }
        }
        shortest
    }

    /// The state of the lock on `key`.
    async fn lock_state(&self, key: &LockKey) -> Result<LockState, LockError> {
        let needed = self.quorum();
        let args = Texts::new([key.redis_key(), key.fence_key()]);
        let mut round = round::start(
            &self.nodes,
            |_| true,
            self.options.node_timeout,
            args,
            |_, client, args| async move {
                let [lock_key, fence_key] = args.parts();
                let reply = single::INSPECT
                    .run(client.as_ref(), &[lock_key, fence_key], &[])
                    .await?;
                match reply.as_array() {
                    Some([Reply::Int(pttl), _counter, _holder]) => Ok(*pttl),
                    _ => Err(single::INSPECT.unexpected(client.as_ref(), &reply)),
                }
            },
        );
        let mut answered = 0;
        let mut held: Vec<Option<Duration>> = Vec::new();
        let mut failures = Vec::new();
        while let Some((_, result)) = round.next().await {
            match result {
                Ok(pttl) => {
                    answered += 1;
                    if pttl != -2 {
                        held.push(remaining_from_pttl(pttl));
                    }
                }
                Err(err) => failures.push(err),
            }
        }
        if answered < needed {
            return Err(LockError::QuorumNotReached {
                got: answered,
                needed,
                failures,
            });
        }
        if held.len() >= needed {
            // The lock stays held while `needed` nodes hold it: until the
            // needed-th longest remaining TTL runs out (no expiry sorts last).
            held.sort_by_key(|remaining| remaining.unwrap_or(Duration::MAX));
            let remaining = held[held.len() - needed];
            Ok(LockState::Held {
                remaining,
                token: None,
                hold_count: None,
                holder: None,
            })
        } else {
            Ok(LockState::Free { last_token: None })
        }
    }
}

/// The first `Corrupted` error if a majority of nodes reported one: the key
/// holds foreign data there, so the lock as a whole does.
fn corrupted_majority(failures: &mut Vec<LockError>, needed: usize) -> Option<LockError> {
    let corrupted = failures
        .iter()
        .filter(|err| matches!(err, LockError::Corrupted { .. }))
        .count();
    if corrupted < needed {
        return None;
    }
    let index = failures
        .iter()
        .position(|err| matches!(err, LockError::Corrupted { .. }))?;
    Some(failures.swap_remove(index))
}

pub(crate) fn quorum(nodes: usize) -> usize {
    nodes / 2 + 1
}

#[async_trait]
impl LockBackend for RedlockBackend {
    fn strategy(&self) -> &'static str {
        "redlock"
    }

    /// Redlock issues no tokens whatever `fencing` says, and stores no
    /// holder information.
    /// Multi-key locks (each node takes every name in one script); no
    /// fencing tokens, so no elections; and no semaphores: counted on a
    /// majority of independent nodes, more permits than the limit could
    /// each hold a majority, since no node sees them all (with a limit of 2
    /// over 3 nodes, permits on A+B, B+C and A+C leave every node at 2).
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::unknown()
            .with_holder_info(false)
            .releasing_only_its_attempt()
            .with_multi_keys()
            .with_listing(self)
    }

    /// A lock, or every key of a multi-key lock: each node takes all the
    /// keys in one script (`multi/set.lua`); the quorum, validity and
    /// release rules are a lock's. No fencing token.
    async fn try_acquire(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        claim: &Claim,
        _earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        match (claim, hold.kind()) {
            (Claim::Lock { fair: None }, HoldKind::Lock) => {}
            (Claim::Multi(keys), HoldKind::Multi(members))
                if keys == members && keys.first() == Some(key) => {}
            (Claim::Lock { fair: None } | Claim::Multi(_), _) => {
                return Err(LockError::InvalidKey {
                    reason: "a multi-key acquire names its keys in its hold's members".to_owned(),
                })
            }
            _ => return Err(claim.unsupported(self.strategy())),
        }
        validate_ttl(ttl)?;
        if self.options.node_timeout >= ttl {
            return Err(LockError::InvalidTtl {
                ttl,
                reason: format!(
                    "must be above the per-node timeout of {:?}",
                    self.options.node_timeout
                ),
            });
        }
        let ttl_ms = MillisText::of_ttl(ttl);
        let started = Instant::now();
        let needed = self.quorum();
        // A plain SET NX PX: no script, so the cheapest command a node can run
        // (a multi-key hold's: every member or none, in one script).
        let texts = Texts::new([key.redis_key(), hold.value(), ttl_ms.as_str()]);
        let members = member_keys(hold);
        let mut round = round::start(
            &self.nodes,
            |_| true,
            self.options.node_timeout,
            (texts.clone(), members.clone()),
            |_, client, (args, members)| async move {
                let [key, hold, ttl_ms] = args.parts();
                if let Some(keys) = &members {
                    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                    let reply = multi::SET_ALL
                        .run(
                            client.as_ref(),
                            &keys,
                            &[hold.as_bytes(), ttl_ms.as_bytes()],
                        )
                        .await?;
                    return match reply {
                        Reply::Int(1) => Ok(true),
                        Reply::Int(0) => Ok(false),
                        other => Err(multi::SET_ALL.unexpected(client.as_ref(), &other)),
                    };
                }
                let args: [&[u8]; 5] = [
                    key.as_bytes(),
                    hold.as_bytes(),
                    b"NX",
                    b"PX",
                    ttl_ms.as_bytes(),
                ];
                match client.command("SET", &args).await? {
                    // `OK` arrives as a status or, through fred, as a string.
                    reply if reply.as_text() == Some("OK") => Ok(true),
                    Reply::Nil => Ok(false),
                    other => Err(LockError::UnexpectedReply {
                        node: client.address().to_owned(),
                        script: "SET NX PX",
                        reply: other.to_string(),
                    }),
                }
            },
        );
        let (mut granted, mut held) = (0, 0);
        let mut failures = Vec::new();
        // Nodes that answered "held": this attempt wrote nothing there, so a
        // failed attempt must not release there (the owner may hold the key from
        // an earlier acquire). Every other node may hold this attempt's grant.
        let mut answered_held = NodeSet::default();
        while let Some((index, result)) = round.next().await {
            match result {
                Ok(true) => granted += 1,
                Ok(false) => {
                    held += 1;
                    answered_held.insert(index);
                }
                Err(err) => failures.push(err),
            }
            // Stop as soon as the outcome is certain either way.
            if granted >= needed || granted + round.undecided() < needed {
                break;
            }
        }
        let elapsed = started.elapsed();
        if granted >= needed {
            // The SETs still undecided go on in the background instead of being
            // dropped: the `redis` crate skips sending a command whose caller is
            // gone, and a lock granted on every node it can reach keeps its
            // majority through more node failures than one on a bare majority.
            // A release of this hold may still reach a node before its SET
            // there (a client may hand commands to a connection in another
            // order than they were sent): `late_grants` matches the two answers
            // and deletes a grant that landed after its release.
            self.late_grants
                .track(&texts, members.clone(), &self.nodes, round);
        } else {
            // A failed attempt drops what is undecided: a SET that never left
            // grants nothing, and one that did is queued before the release
            // below on its connection.
            drop(round);
        }
        if granted >= needed {
            let left = validity(
                ttl,
                elapsed,
                clock_drift(ttl, self.options.clock_drift_factor),
            );
            if !left.is_zero() {
                tracing::debug!(
                    key = key.name(),
                    granted,
                    needed,
                    elapsed_us = elapsed.as_micros() as u64,
                    "redlock quorum reached"
                );
                return Ok(Acquired::new(None, ttl).into());
            }
        }
        // Release on every node that may hold this attempt's grant, including
        // nodes that timed out: their grant may still arrive, and must not hold
        // the key until its TTL.
        let report = self
            .release_on(
                |index| !answered_held.contains(index),
                key,
                hold,
                usize::MAX,
            )
            .await;
        tracing::debug!(
            key = key.name(),
            granted,
            held,
            failed = failures.len(),
            released = report.confirmed,
            "redlock acquire failed"
        );
        if granted >= needed {
            return Err(LockError::GrantedTooLate {
                key: key.name().to_owned(),
                elapsed,
                ttl,
            });
        }
        if let Some(corrupted) = corrupted_majority(&mut failures, needed) {
            return Err(corrupted);
        }
        if held > 0 && granted + failures.len() < needed {
            // A multi-key hold's first key may be free while another member
            // is held: no one key's TTL bounds the wait.
            let remaining = match members {
                Some(_) => None,
                None => {
                    self.holder_remaining(|index| answered_held.contains(index), key)
                        .await
                }
            };
            Ok(AcquireOutcome::Held { remaining })
        } else {
            Err(LockError::QuorumNotReached {
                got: granted,
                needed,
                failures,
            })
        }
    }

    async fn extend(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        validate_ttl(ttl)?;
        let ttl_ms = MillisText::of_ttl(ttl);
        let started = Instant::now();
        let needed = self.quorum();
        // "Not held" answers that prove the lease gone: with this many, no
        // majority can hold it, whatever the other nodes would say.
        let proves_gone = self.nodes.len() - needed + 1;
        let args = Texts::new([key.redis_key(), hold.value(), ttl_ms.as_str()]);
        let mut round = round::start(
            &self.nodes,
            |_| true,
            self.options.node_timeout,
            (args, member_keys(hold)),
            |_, client, (args, members)| async move {
                let [key, hold, ttl_ms] = args.parts();
                let (script, reply) = match &members {
                    // Every member renewed on the node, or none.
                    Some(keys) => {
                        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                        let args = [hold.as_bytes(), ttl_ms.as_bytes(), b"1"];
                        (
                            &multi::RENEW,
                            multi::RENEW.run(client.as_ref(), &keys, &args).await?,
                        )
                    }
                    None => {
                        let args = [hold.as_bytes(), ttl_ms.as_bytes()];
                        (
                            &single::EXTEND,
                            single::EXTEND.run(client.as_ref(), &[key], &args).await?,
                        )
                    }
                };
                match reply {
                    Reply::Int(1) => Ok(true),
                    Reply::Int(0) => Ok(false),
                    other => Err(script.unexpected(client.as_ref(), &other)),
                }
            },
        );
        let (mut extended, mut not_held) = (0, 0);
        let mut failures = Vec::new();
        while let Some((_, result)) = round.next().await {
            match result {
                Ok(true) => extended += 1,
                Ok(false) => not_held += 1,
                Err(err) => failures.push(err),
            }
            if extended >= needed
                || not_held >= proves_gone
                || extended + round.undecided() < needed
            {
                break;
            }
        }
        // The renewals still in flight act on our own hold alone; let them
        // land. One to a shorter TTL landing after a later, longer renewal
        // shortens that node's key: docs/SAFETY.md, "Not yet covered".
        round.finish_in_background();
        let elapsed = started.elapsed();
        if extended >= needed {
            if validity(
                ttl,
                elapsed,
                clock_drift(ttl, self.options.clock_drift_factor),
            )
            .is_zero()
            {
                return Err(LockError::GrantedTooLate {
                    key: key.name().to_owned(),
                    elapsed,
                    ttl,
                });
            }
            return Ok(ExtendOutcome::Extended { ttl });
        }
        if let Some(corrupted) = corrupted_majority(&mut failures, needed) {
            return Err(corrupted);
        }
        if not_held >= proves_gone {
            // Too many nodes answered that the key is gone or someone else's
            // for a majority to hold it: no retry can bring this lease back.
            Ok(ExtendOutcome::NotHeld)
        } else {
            // Errors and unanswered nodes leave it open: a transient failure,
            // retried until the deadline.
            Err(LockError::QuorumNotReached {
                got: extended,
                needed,
                failures,
            })
        }
    }

    async fn release(&self, key: &LockKey, hold: &HoldToken) -> Result<ReleaseOutcome, LockError> {
        let needed = self.quorum();
        let proves_gone = self.nodes.len() - needed + 1;
        // Once a majority confirmed, the lock is free for the next holder; the
        // other deletes finish in the background.
        let mut report = self.release_on(|_| true, key, hold, needed).await;
        tracing::debug!(
            key = key.name(),
            confirmed = report.confirmed,
            not_held = report.not_held,
            failed = report.failures.len(),
            "redlock release"
        );
        // Released only when a majority confirmed: fewer deletes leave the
        // lock as it was, held by a majority or by nobody.
        if report.confirmed >= needed {
            Ok(ReleaseOutcome::Released)
        } else if let Some(corrupted) = corrupted_majority(&mut report.failures, needed) {
            Err(corrupted)
        } else if report.not_held >= proves_gone {
            Ok(ReleaseOutcome::NotHeld)
        } else {
            Err(LockError::QuorumNotReached {
                got: report.confirmed,
                needed,
                failures: report.failures,
            })
        }
    }

    async fn force_release(&self, key: &LockKey) -> Result<usize, LockError> {
        let mut round = round::start(
            &self.nodes,
            |_| true,
            self.options.node_timeout,
            Arc::<str>::from(key.redis_key()),
            |_, client, key| async move {
                match FORCE_RELEASE.run(client.as_ref(), &[&*key], &[]).await? {
                    Reply::Int(deleted) => Ok(deleted > 0),
                    other => Err(FORCE_RELEASE.unexpected(client.as_ref(), &other)),
                }
            },
        );
        let (mut deleted, mut answered) = (0, 0);
        let mut failures = Vec::new();
        while let Some((_, result)) = round.next().await {
            match result {
                Ok(held) => {
                    answered += 1;
                    deleted += usize::from(held);
                }
                Err(err) => failures.push(err),
            }
        }
        // Only the deletes of nodes that timed out are left. Dropped, not
        // finished in the background: a delete that has not reached its
        // connection yet could reach it after a later acquire's SET there
        // (see `late_grants`) and delete that holder's grant unseen. Dropped, a
        // delete not yet sent is never sent, and one already sent stays
        // ahead of any later command on its connection.
        drop(round);
        if answered < self.quorum() {
            return Err(LockError::QuorumNotReached {
                got: answered,
                needed: self.quorum(),
                failures,
            });
        }
        Ok(deleted)
    }

    async fn watch_releases(&self, key: &LockKey) -> Result<Option<Box<dyn Wakeups>>, LockError> {
        // Subscribe on every node at once; a node that cannot subscribe only
        // means its releases wake nobody, and the holder's TTL still does.
        let channel = key.release_channel();
        let watches = futures::future::join_all(self.nodes.iter().map(|node| {
            tokio::time::timeout(self.options.node_timeout, node.notifier().watch(&channel))
        }))
        .await;
        let mut merged: Option<ReleaseWatch> = None;
        for watch in watches {
            match watch {
                Ok(Ok(watch)) => match merged.as_mut() {
                    Some(all) => all.merge(watch),
                    None => merged = Some(watch),
                },
                Ok(Err(err)) => tracing::debug!(error = %err, "a redlock node cannot notify"),
                Err(_) => tracing::debug!("a redlock node did not confirm a subscription in time"),
            }
        }
        Ok(merged.map(|watch| Box::new(watch) as Box<dyn Wakeups>))
    }

    /// Only locks hold its names.
    async fn inspect(&self, key: &LockKey) -> Result<NameState, LockError> {
        self.lock_state(key).await.map(NameState::from)
    }
}

#[async_trait]
impl ListBackend for RedlockBackend {
    async fn list(&self, prefix: &str, options: &ListOptions) -> Result<LockListing, LockError> {
        list_held(
            self,
            self.nodes.iter().map(|node| node.client()).collect(),
            prefix,
            options,
        )
        .await
    }
}
