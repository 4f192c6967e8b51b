//! The single-node [`LockBackend`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::strategy::scripts::{election, multi, rw, semaphore, single};
use lock_core::strategy::{
    list_held, remaining_from_pttl, ttl_millis, MillisText, NodeClient, Reply, Script, ScriptedNode,
};
use lock_core::{
    Access, AccessRequest, AcquireOutcome, Capabilities, Capability, ClientKind, ConnectOptions,
    Endpoint, ExtendOutcome, FairPlace, FencingToken, FromConfig, GrantOptions, HoldToken,
    HolderInfo, Leader, ListOptions, LockBackend, LockConfig, LockError, LockKey, LockListing,
    LockState, OwnerToken, PermitRequest, PermitState, ReleaseOutcome, Renewal, RwHoldState,
    RwLockState, SemaphoreState, Wakeups,
};

/// The most renewals one `extend_many.lua` call carries: a script blocks the
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
        (AcquireOutcome::Acquired { .. } | AcquireOutcome::PermitAcquired { .. }, Err(err)) => {
            Some(err)
        }
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

    /// Releases a fair lock's hold and hands the lock to the next waiter
    /// in line (`fair_release.lua`).
    async fn release_in_line(
        &self,
        key: &LockKey,
        hold: &HoldToken,
    ) -> Result<ReleaseOutcome, LockError> {
        let (queue, waiters, offers) = (key.queue_key(), key.waiters_key(), key.offers_key());
        let keys = [key.redis_key(), key.fence_key(), &queue, &waiters, &offers];
        let script = &single::FAIR_RELEASE;
        match self
            .node
            .run(script, &keys, &[hold.value().as_bytes()])
            .await?
        {
            Reply::Int(1) => Ok(ReleaseOutcome::Released),
            Reply::Int(0) => Ok(ReleaseOutcome::NotHeld),
            other => Err(self.node.unexpected(script, &other)),
        }
    }

    /// Runs a script that renews a hold (`extend.lua`, `take_over.lua`):
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
        let (reply, acknowledged) = self.node.run_acknowledged(script, keys, args).await?;
        match reply {
            Reply::Int(1) => {
                acknowledged?;
                Ok(ExtendOutcome::Extended { ttl })
            }
            Reply::Int(0) => Ok(ExtendOutcome::NotHeld),
            other => Err(self.node.unexpected(script, &other)),
        }
    }

    /// Renews `renewals` with one `extend_many.lua` call (their keys must
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
                    detail: "the lock key holds another type than a string".to_owned(),
                }),
                _ => Err(self.node.unexpected(script, &reply)),
            })
            .collect()
    }

    /// Renews a semaphore permit (`semaphore_renew.lua`), acknowledged by
    /// the replicas asked for, as [`renew_with`](Self::renew_with) renews a
    /// lock.
    async fn renew_permit(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let ttl_ms = MillisText::of_ttl(ttl);
        let args = [hold.attempt_value().as_bytes(), ttl_ms.as_bytes()];
        let held = key.permits_held_key();
        let keys = [key.redis_key(), &held];
        self.renew_hold_with(&semaphore::RENEW, &keys, semaphore_problem, &args, ttl)
            .await
    }

    /// Takes over the permit `from` names for `to` (`semaphore_take_over.lua`):
    /// only while it is live with the weight, slot and token `from` claims.
    async fn take_over_permit(
        &self,
        key: &LockKey,
        from: &HoldToken,
        to: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        // The whole entry the token claims: a token alone names only its
        // slot's counter, and another slot may be at the same number.
        let (Some(token), Some(permit)) = (from.fencing_token(), from.permit()) else {
            return Ok(ExtendOutcome::NotHeld);
        };
        let Some(slot) = permit.slot() else {
            return Ok(ExtendOutcome::NotHeld);
        };
        let entry = format!("{}:{slot}:{}", permit.weight(), token.get());
        let ttl_ms = MillisText::of_ttl(ttl);
        let args = [
            from.attempt_value().as_bytes(),
            to.attempt_value().as_bytes(),
            ttl_ms.as_bytes(),
            entry.as_bytes(),
        ];
        let held = key.permits_held_key();
        let keys = [key.redis_key(), &held];
        self.renew_hold_with(&semaphore::TAKE_OVER, &keys, semaphore_problem, &args, ttl)
            .await
    }

    /// Runs a script that renews a hold with a deadline of its own (a
    /// permit's, a read-write hold's: `semaphore_renew.lua`, `rw_renew.lua`
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

    /// Gives back a semaphore permit (`semaphore_release.lua`), which
    /// publishes the weight it freed.
    async fn release_permit(
        &self,
        key: &LockKey,
        hold: &HoldToken,
    ) -> Result<ReleaseOutcome, LockError> {
        let held = key.permits_held_key();
        // What a fair permit's release frees goes to the waiters' offers
        // first; outside fair mode nobody waits in line.
        if hold.is_in_line() && self.hands_over() {
            let (limit_key, fences) = (key.limit_key(), key.slot_fences_key());
            let (queue, waiters, offers) = (key.queue_key(), key.waiters_key(), key.offers_key());
            let keys = [
                key.redis_key(),
                &held,
                &limit_key,
                &fences,
                &queue,
                &waiters,
                &offers,
            ];
            return self
                .release_hold_with(&semaphore::RELEASE, &keys, hold, semaphore_problem)
                .await;
        }
        let keys = [key.redis_key(), &held];
        self.release_hold_with(&semaphore::RELEASE, &keys, hold, semaphore_problem)
            .await
    }

    /// Takes a fair semaphore's waiter out of the line, giving back a
    /// permit a release granted to one of `offered`
    /// (`semaphore_give_up.lua`).
    async fn leave_permit_queue(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: &[HoldToken],
    ) -> Result<(), LockError> {
        let held = key.permits_held_key();
        let (limit_key, fences) = (key.limit_key(), key.slot_fences_key());
        let (queue, waiters, offers) = (key.queue_key(), key.waiters_key(), key.offers_key());
        let keys = [
            key.redis_key(),
            &held,
            &limit_key,
            &fences,
            &queue,
            &waiters,
            &offers,
        ];
        let mut args = vec![owner.expose().as_bytes()];
        args.extend(offered.iter().map(|hold| hold.attempt_value().as_bytes()));
        let script = &semaphore::GIVE_UP;
        let reply = self.node.run(script, &keys, &args).await?;
        if let Some(problem) = semaphore_problem(&reply) {
            return Err(problem);
        }
        match reply.as_array() {
            Some([Reply::Int(0 | 1), Reply::Int(0 | 1)]) => Ok(()),
            _ => Err(self.node.unexpected(script, &reply)),
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

    /// Renews a read-write lock's hold (`rw_renew.lua`), acknowledged as a
    /// permit's renewal is.
    async fn renew_access(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let ttl_ms = MillisText::of_ttl(ttl);
        let args = [hold.attempt_value().as_bytes(), ttl_ms.as_bytes()];
        let modes = key.modes_key();
        let keys = [key.redis_key(), &modes, key.fence_key()];
        self.renew_hold_with(&rw::RENEW, &keys, rw_problem, &args, ttl)
            .await
    }

    /// Takes over the read-write hold `from` names for `to`
    /// (`rw_take_over.lua`): only while it is live with the mode and token
    /// `from` claims.
    async fn take_over_access(
        &self,
        key: &LockKey,
        from: &HoldToken,
        to: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let (Some(token), Some(access)) = (from.fencing_token(), from.access()) else {
            return Ok(ExtendOutcome::NotHeld);
        };
        let entry = format!("{}:{}", access.letter(), token.get());
        let ttl_ms = MillisText::of_ttl(ttl);
        let args = [
            from.attempt_value().as_bytes(),
            to.attempt_value().as_bytes(),
            ttl_ms.as_bytes(),
            entry.as_bytes(),
        ];
        let modes = key.modes_key();
        let keys = [key.redis_key(), &modes, key.fence_key()];
        self.renew_hold_with(&rw::TAKE_OVER, &keys, rw_problem, &args, ttl)
            .await
    }

    /// Gives back a read-write lock's hold (`rw_release.lua`), which
    /// publishes what may let a waiter in.
    async fn release_access(
        &self,
        key: &LockKey,
        hold: &HoldToken,
    ) -> Result<ReleaseOutcome, LockError> {
        let (modes, queue, waiters, offers) = (
            key.modes_key(),
            key.queue_key(),
            key.waiters_key(),
            key.offers_key(),
        );
        let mut keys = vec![key.redis_key(), &modes];
        // The release that frees the lock grants the next writer's offer.
        if self.hands_over() {
            keys.extend([key.fence_key(), &queue, &waiters, &offers]);
        }
        self.release_hold_with(&rw::RELEASE, &keys, hold, rw_problem)
            .await
    }

    /// Takes a waiting writer out of the queue, giving back a write a
    /// release granted to one of `offered` (`rw_give_up.lua`).
    async fn leave_writers_queue(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: &[HoldToken],
    ) -> Result<(), LockError> {
        let (modes, queue, waiters, offers) = (
            key.modes_key(),
            key.queue_key(),
            key.waiters_key(),
            key.offers_key(),
        );
        let keys = [
            key.redis_key(),
            &modes,
            key.fence_key(),
            &queue,
            &waiters,
            &offers,
        ];
        let mut args = vec![owner.expose().as_bytes()];
        args.extend(offered.iter().map(|hold| hold.attempt_value().as_bytes()));
        let script = &rw::GIVE_UP;
        let reply = self.node.run(script, &keys, &args).await?;
        if let Some(problem) = rw_problem(&reply) {
            return Err(problem);
        }
        match reply.as_array() {
            Some([Reply::Int(0 | 1), Reply::Int(0 | 1)]) => Ok(()),
            _ => Err(self.node.unexpected(script, &reply)),
        }
    }

    /// Renews every member of a multi-key hold, or none
    /// (`multi_renew.lua`, once per slot on a cluster), acknowledged as a
    /// lock's renewal is: `NotHeld` when a slot's members are not all held.
    async fn renew_members(
        &self,
        members: &[LockKey],
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let ttl_ms = MillisText::of_ttl(ttl);
        let script = &multi::RENEW;
        let renewals = self.slot_groups(members).into_iter().map(|group| {
            let keys = member_keys(group);
            let ttl_ms = &ttl_ms;
            async move {
                let (reply, acknowledged) = self
                    .node
                    .run_acknowledged(script, &keys, &[hold.value().as_bytes(), ttl_ms.as_bytes()])
                    .await?;
                match reply {
                    Reply::Int(1) => acknowledged.map(|()| true),
                    Reply::Int(0) => Ok(false),
                    other => Err(self.node.unexpected(script, &other)),
                }
            }
        });
        let renewed = futures::future::try_join_all(renewals).await?;
        Ok(match renewed.iter().all(|held| *held) {
            true => ExtendOutcome::Extended { ttl },
            false => ExtendOutcome::NotHeld,
        })
    }

    /// Takes one slot's members of a multi-key hold (`multi_acquire.lua`),
    /// with a token of at least `floor`, acknowledged by the replicas asked
    /// for (or undone: every member is then released).
    async fn acquire_group(
        &self,
        group: &[LockKey],
        hold: &HoldToken,
        ttl: Duration,
        floor: u64,
    ) -> Result<AcquireOutcome, LockError> {
        let ttl_ms = MillisText::of_ttl(ttl);
        let [counter_ttl, ..] = self.grant.script_args();
        let floor = floor.to_string();
        let script = &multi::ACQUIRE;
        let (reply, acknowledged) = self
            .node
            .run_acknowledged(
                script,
                &member_keys(group),
                &[
                    hold.attempt_value().as_bytes(),
                    ttl_ms.as_bytes(),
                    counter_ttl.as_bytes(),
                    floor.as_bytes(),
                ],
            )
            .await?;
        let outcome = match reply.as_array() {
            Some([Reply::Int(1), token]) => {
                match token.as_text().and_then(|text| text.parse().ok()) {
                    Some(token) => AcquireOutcome::Acquired {
                        fencing_token: Some(FencingToken::new(token)),
                    },
                    None => return Err(self.node.unexpected(script, &reply)),
                }
            }
            Some([Reply::Int(0), Reply::Int(pttl)]) => AcquireOutcome::Held {
                remaining: remaining_from_pttl(*pttl),
            },
            Some([Reply::Int(-1), detail]) => {
                return Err(LockError::Corrupted {
                    key: group[0].redis_key().to_owned(),
                    detail: detail.as_text().unwrap_or("unreadable detail").to_owned(),
                })
            }
            _ => return Err(self.node.unexpected(script, &reply)),
        };
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(self.undo_unacknowledged(&group[0], hold, err).await);
        }
        Ok(outcome)
    }

    /// The shortest time a member held by someone else has left, if any is
    /// (`multi_probe.lua` on every slot, at once): `Some(None)` for one
    /// without expiry.
    async fn held_in_some_slot(
        &self,
        groups: &[&[LockKey]],
        hold: &HoldToken,
    ) -> Result<Option<Option<Duration>>, LockError> {
        let script = &multi::PROBE;
        let probes = groups.iter().map(|group| {
            let keys: Vec<&str> = group.iter().map(LockKey::redis_key).collect();
            async move {
                match self
                    .node
                    .run(script, &keys, &[hold.attempt_value().as_bytes()])
                    .await?
                {
                    Reply::Int(-3) => Ok(None),
                    Reply::Int(pttl) => Ok(Some(remaining_from_pttl(pttl))),
                    other => Err(self.node.unexpected(script, &other)),
                }
            }
        });
        let found = futures::future::try_join_all(probes).await?;
        Ok(found.into_iter().flatten().min())
    }

    /// Gives back the slots of a multi-key hold taken so far; an error
    /// (the attempt then ends in it, and the engine releases the whole
    /// hold later) rather than a slot held by nobody for its TTL.
    async fn give_back(
        &self,
        taken: &[(&[LockKey], u64)],
        hold: &HoldToken,
    ) -> Result<(), LockError> {
        if taken.is_empty() {
            return Ok(());
        }
        self.release_groups(taken.iter().map(|(group, _)| *group), hold)
            .await
    }

    /// Raises one slot's members from token `from` to `to`
    /// (`multi_raise.lua`), acknowledged by the replicas asked for:
    /// `false` when they no longer all hold `from`.
    async fn raise_group(
        &self,
        group: &[LockKey],
        hold: &HoldToken,
        from: u64,
        to: u64,
    ) -> Result<bool, LockError> {
        let (held, to) = (format!("{}#{from}", hold.attempt_value()), to.to_string());
        let script = &multi::RAISE;
        let (reply, acknowledged) = self
            .node
            .run_acknowledged(
                script,
                &member_keys(group),
                &[
                    held.as_bytes(),
                    hold.attempt_value().as_bytes(),
                    to.as_bytes(),
                ],
            )
            .await?;
        match reply {
            Reply::Int(1) => acknowledged.map(|()| true),
            Reply::Int(0) => Ok(false),
            ref other => match other.as_array() {
                Some([Reply::Int(-1), detail]) => Err(LockError::Corrupted {
                    key: group[0].redis_key().to_owned(),
                    detail: detail.as_text().unwrap_or("unreadable detail").to_owned(),
                }),
                _ => Err(self.node.unexpected(script, other)),
            },
        }
    }

    /// Gives back the slots of a multi-key hold taken so far, by the
    /// attempt's value (whatever token each slot got); the first error if
    /// one of them failed.
    async fn release_groups<'k>(
        &self,
        groups: impl Iterator<Item = &'k [LockKey]>,
        hold: &HoldToken,
    ) -> Result<(), LockError> {
        let releases = groups.map(|group| {
            let keys: Vec<&str> = group.iter().map(LockKey::redis_key).collect();
            async move {
                self.node
                    .run(&multi::RELEASE, &keys, &[hold.attempt_value().as_bytes()])
                    .await
                    .map(|_| ())
            }
        });
        futures::future::try_join_all(releases).await.map(|_| ())
    }

    /// The members of a multi-key hold by hash slot, in their order (each
    /// group one script's keys): all of them in one group but on a
    /// cluster.
    fn slot_groups<'k>(&self, keys: &'k [LockKey]) -> Vec<&'k [LockKey]> {
        if !self.node.client().is_cluster() {
            return vec![keys];
        }
        keys.chunk_by(|a, b| a.hash_slot() == b.hash_slot())
            .collect()
    }

    /// Gives back every member a multi-key hold still has
    /// (`multi_release.lua`): `Released` only when it had them all.
    async fn release_members(
        &self,
        members: &[LockKey],
        hold: &HoldToken,
    ) -> Result<ReleaseOutcome, LockError> {
        let script = &multi::RELEASE;
        let releases = self.slot_groups(members).into_iter().map(|group| {
            let keys: Vec<&str> = group.iter().map(LockKey::redis_key).collect();
            async move {
                match self
                    .node
                    .run(script, &keys, &[hold.value().as_bytes()])
                    .await?
                {
                    Reply::Int(released) if released >= 0 => Ok(released),
                    other => Err(self.node.unexpected(script, &other)),
                }
            }
        });
        let released: i64 = futures::future::try_join_all(releases).await?.iter().sum();
        Ok(match usize::try_from(released) == Ok(members.len()) {
            true => ReleaseOutcome::Released,
            false => ReleaseOutcome::NotHeld,
        })
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
            ref ok if ok.as_text() == Some("OK") => AcquireOutcome::Acquired {
                fencing_token: None,
            },
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
    /// script (`acquire_token.lua`). It checks the key before it issues a
    /// token: an attempt that finds the lock held leaves the counter as it
    /// was, so the counter is always the last token granted, which the
    /// reentrant scripts, a read's epoch and `status` rely on. (A
    /// `MULTI`/`EXEC` of `SET NX`, `INCR` and `PERSIST` costs the server
    /// less, but runs the `INCR` whether or not the `SET` granted.)
    async fn acquire_token_only(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl_ms: &MillisText,
    ) -> Result<AcquireOutcome, LockError> {
        let script = &single::ACQUIRE_TOKEN;
        let keys = [key.redis_key(), key.fence_key()];
        let args = [hold.attempt_value().as_bytes(), ttl_ms.as_bytes()];
        let reply = self.node.run(script, &keys, &args).await?;
        acquire_outcome(key, &reply, true)
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
}

#[async_trait]
impl LockBackend for SingleNodeBackend {
    fn strategy(&self) -> &'static str {
        "single"
    }

    /// Every primitive; elections only with fencing on (a term is a
    /// fencing token).
    fn capabilities(&self) -> Capabilities {
        let all = self
            .grant
            .capabilities()
            .with(Capability::FairQueue)
            .with(Capability::Semaphores)
            .with(Capability::RwLocks)
            .with(Capability::MultiKeys);
        if self.grant.fencing() {
            all.with(Capability::Elections)
        } else {
            all
        }
    }

    async fn try_acquire(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<AcquireOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        let ttl_ms = MillisText::of_ttl(ttl);
        let fencing = self.grant.fencing();
        if !fencing && !self.grant.holder_info() {
            return self.acquire_plain(key, hold, &ttl_ms).await;
        }
        if self.grant.token_only() && !self.node.awaits_replicas() {
            return self.acquire_token_only(key, hold, &ttl_ms).await;
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
        let outcome = acquire_outcome(key, &reply, fencing)
            .unwrap_or_else(|| Err(self.node.unexpected(&single::ACQUIRE, &reply)))?;
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(self.undo_unacknowledged(key, hold, err).await);
        }
        Ok(outcome)
    }

    async fn extend(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        if hold.permit().is_some() {
            return self.renew_permit(key, hold, ttl).await;
        }
        if hold.access().is_some() {
            return self.renew_access(key, hold, ttl).await;
        }
        if let Some(members) = hold.members() {
            return self.renew_members(members, hold, ttl).await;
        }
        let ttl_ms = MillisText::of_ttl(ttl);
        let args = [hold.value().as_bytes(), ttl_ms.as_bytes()];
        self.renew_with(&single::EXTEND, key, &args, ttl).await
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
            let own_script = renewal.hold.permit().is_some()
                || renewal.hold.access().is_some()
                || renewal.hold.members().is_some();
            if own_script {
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

    async fn take_over(
        &self,
        key: &LockKey,
        from: &HoldToken,
        to: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        if from.permit().is_some() {
            return self.take_over_permit(key, from, to, ttl).await;
        }
        if from.access().is_some() {
            return self.take_over_access(key, from, to, ttl).await;
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

    async fn release(&self, key: &LockKey, hold: &HoldToken) -> Result<ReleaseOutcome, LockError> {
        if hold.permit().is_some() {
            return self.release_permit(key, hold).await;
        }
        if hold.access().is_some() {
            return self.release_access(key, hold).await;
        }
        if let Some(members) = hold.members() {
            return self.release_members(members, hold).await;
        }
        if hold.is_in_line() && self.hands_over() {
            return self.release_in_line(key, hold).await;
        }
        // The holder key is deleted with the lock with `holder_info` only:
        // every command of the default cycle counts, and holder information
        // another process left (one that handed the lease over) is bound to
        // its hold, shown with no other (inspect.lua), and expires with its
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

    fn releases_only_its_attempt(&self) -> bool {
        true
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

    async fn list(&self, prefix: &str, options: &ListOptions) -> Result<LockListing, LockError> {
        list_held(
            self,
            vec![Ok(Arc::clone(self.node.client()))],
            prefix,
            options,
        )
        .await
    }

    async fn try_acquire_fair(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        place: FairPlace,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        let (queue, waiters, holder) = (key.queue_key(), key.waiters_key(), key.holder_key());
        let offers = key.offers_key();
        let mut keys = vec![key.redis_key(), key.fence_key(), &queue, &waiters, &holder];
        let ttl_ms = MillisText::of_ttl(ttl);
        let lease_ms = MillisText::new(ttl_millis(place.waiter_lease).max(1));
        let join: &[u8] = if place.join { b"1" } else { b"0" };
        let grant = self.grant.script_args();
        let mut args = vec![
            hold.expose_owner().as_bytes(),
            ttl_ms.as_bytes(),
            lease_ms.as_bytes(),
            join,
            hold.attempt_value().as_bytes(),
        ];
        args.extend(grant.iter().map(String::as_bytes));
        if self.hands_over() {
            keys.push(&offers);
            args.push(earlier.map_or(&b"-"[..], |hold| hold.attempt_value().as_bytes()));
        }
        let (reply, acknowledged) = self
            .node
            .run_acknowledged(&single::FAIR_ACQUIRE, &keys, &args)
            .await?;
        if let Some(granted) = granted_earlier(&reply, earlier.is_some()) {
            let fencing_token =
                granted.ok_or_else(|| self.node.unexpected(&single::FAIR_ACQUIRE, &reply))?;
            return Ok(AcquireOutcome::GrantedEarlier {
                fencing_token: Some(fencing_token),
                ttl,
            });
        }
        // Fair mode issues tokens whatever `fencing` says.
        let outcome = acquire_outcome(key, &reply, true)
            .unwrap_or_else(|| Err(self.node.unexpected(&single::FAIR_ACQUIRE, &reply)))?;
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(self.undo_unacknowledged(key, hold, err).await);
        }
        Ok(outcome)
    }

    async fn leave_fair_queue(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: Option<&[HoldToken]>,
    ) -> Result<(), LockError> {
        let (queue, waiters) = (key.queue_key(), key.waiters_key());
        // A read-write lock's waiting writer, a fair semaphore's waiter and
        // a fair lock's: each gives back what a release granted its offers.
        let offered = offered.filter(|_| self.hands_over());
        if let Some(offered) = offered.filter(|holds| holds.iter().any(|h| h.access().is_some())) {
            return self.leave_writers_queue(key, owner, offered).await;
        }
        if let Some(offered) = offered.filter(|holds| holds.iter().any(|h| h.permit().is_some())) {
            return self.leave_permit_queue(key, owner, offered).await;
        }
        if let Some(offered) = offered {
            let offers = key.offers_key();
            let keys = [key.redis_key(), key.fence_key(), &queue, &waiters, &offers];
            let mut args = vec![owner.expose().as_bytes()];
            args.extend(offered.iter().map(|hold| hold.attempt_value().as_bytes()));
            let script = &single::FAIR_GIVE_UP;
            let reply = self.node.run(script, &keys, &args).await?;
            return match reply.as_array() {
                Some([Reply::Int(0 | 1), Reply::Int(0 | 1)]) => Ok(()),
                Some([Reply::Int(-1), detail]) => Err(LockError::Corrupted {
                    key: key.redis_key().to_owned(),
                    detail: detail.as_text().unwrap_or("unreadable detail").to_owned(),
                }),
                _ => Err(self.node.unexpected(script, &reply)),
            };
        }
        let reply = self
            .node
            .run(
                &single::FAIR_LEAVE,
                &[&queue, &waiters, key.redis_key()],
                &[owner.expose().as_bytes()],
            )
            .await?;
        match reply {
            Reply::Int(0 | 1) => Ok(()),
            other => Err(self.node.unexpected(&single::FAIR_LEAVE, &other)),
        }
    }

    async fn try_acquire_permit(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        request: PermitRequest,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        let (held, limit_key, fences) = (
            key.permits_held_key(),
            key.limit_key(),
            key.slot_fences_key(),
        );
        // In fair mode, the queue of the fair lock's layout: the same keys.
        let line = request
            .fair
            .map(|_| [key.queue_key(), key.waiters_key(), key.offers_key()]);
        let mut keys = vec![key.redis_key(), &held, &limit_key, &fences];
        let (weight, limit) = (request.weight.to_string(), request.limit.to_string());
        let ttl_ms = MillisText::of_ttl(ttl);
        let mut args = vec![
            hold.attempt_value().as_bytes(),
            weight.as_bytes(),
            limit.as_bytes(),
            ttl_ms.as_bytes(),
        ];
        let lease_ms = request
            .fair
            .map(|place| MillisText::new(ttl_millis(place.waiter_lease).max(1)));
        let mut hands_over = false;
        if let (Some(place), Some(lease_ms), Some([queue, waiters, offers])) =
            (request.fair, &lease_ms, &line)
        {
            keys.extend([queue.as_str(), waiters.as_str()]);
            args.extend([
                hold.expose_owner().as_bytes(),
                lease_ms.as_bytes(),
                if place.join { b"1" } else { b"0" },
            ]);
            hands_over = self.hands_over();
            if hands_over {
                keys.push(offers);
                args.push(earlier.map_or(&b"-"[..], |hold| hold.attempt_value().as_bytes()));
            }
        }
        let script = &semaphore::ACQUIRE;
        let (reply, acknowledged) = self.node.run_acknowledged(script, &keys, &args).await?;
        if let Some([Reply::Int(3), Reply::Int(slot), token]) = reply.as_array() {
            let slot = u32::try_from(*slot)
                .ok()
                .filter(|slot| *slot < request.limit);
            let token = token.as_text().and_then(|token| token.parse::<u64>().ok());
            return match (slot, token, hands_over && earlier.is_some()) {
                (Some(slot), Some(token), true) if token >= 1 => {
                    Ok(AcquireOutcome::PermitGrantedEarlier {
                        slot,
                        fencing_token: FencingToken::new(token),
                        ttl,
                    })
                }
                _ => Err(self.node.unexpected(script, &reply)),
            };
        }
        let outcome = permit_outcome(key, &reply, request)
            .unwrap_or_else(|| Err(self.node.unexpected(script, &reply)))?;
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(self.undo_unacknowledged(key, hold, err).await);
        }
        Ok(outcome)
    }

    async fn inspect_semaphore(&self, key: &LockKey) -> Result<SemaphoreState, LockError> {
        let (held, limit_key) = (key.permits_held_key(), key.limit_key());
        let script = &semaphore::INSPECT;
        let reply = self
            .node
            .run(script, &[key.redis_key(), &held, &limit_key], &[])
            .await?;
        if let Some(problem) = semaphore_problem(&reply) {
            return Err(problem);
        }
        semaphore_state(&reply).ok_or_else(|| self.node.unexpected(script, &reply))
    }

    async fn set_semaphore_limit(
        &self,
        key: &LockKey,
        limit: u32,
    ) -> Result<Option<u32>, LockError> {
        let limit_key = key.limit_key();
        let script = &semaphore::SET_LIMIT;
        let limit = limit.to_string();
        let reply = self
            .node
            .run(script, &[key.redis_key(), &limit_key], &[limit.as_bytes()])
            .await?;
        if let Some(problem) = semaphore_problem(&reply) {
            return Err(problem);
        }
        match reply.as_array() {
            Some([Reply::Int(1), Reply::Int(0)]) => Ok(None),
            Some([Reply::Int(1), Reply::Int(previous)]) => match u32::try_from(*previous) {
                Ok(previous) => Ok(Some(previous)),
                Err(_) => Err(self.node.unexpected(script, &reply)),
            },
            _ => Err(self.node.unexpected(script, &reply)),
        }
    }

    /// On a cluster, names in several slots are taken slot by slot, in the
    /// canonical order, each slot's members in one script: never waiting
    /// with some of them (what it took is released when a later slot is
    /// held), and raised to one token at the end.
    async fn try_acquire_multi(
        &self,
        keys: &[LockKey],
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<AcquireOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        let groups = self.slot_groups(keys);
        if let [group] = groups[..] {
            return self.acquire_group(group, hold, ttl, 0).await;
        }
        // Every slot asked first, writing nothing: a slot taken and given
        // back publishes its release, which would wake this very waiter.
        if let Some(remaining) = self.held_in_some_slot(&groups, hold).await? {
            return Ok(AcquireOutcome::Held { remaining });
        }
        let mut taken: Vec<(&[LockKey], u64)> = Vec::with_capacity(groups.len());
        for group in &groups {
            let floor = taken.last().map_or(0, |(_, token)| *token);
            match self.acquire_group(group, hold, ttl, floor).await {
                Ok(AcquireOutcome::Acquired {
                    fencing_token: Some(token),
                }) => taken.push((group, token.get())),
                outcome => {
                    self.give_back(&taken, hold).await?;
                    return outcome;
                }
            }
        }
        let token = taken.last().map_or(0, |(_, token)| *token);
        // The slots taken first got lower tokens: raise them to the last's,
        // confirming meanwhile that each still holds its members.
        for (group, own) in &taken[..taken.len().saturating_sub(1)] {
            match self.raise_group(group, hold, *own, token).await {
                Ok(true) => {}
                outcome => {
                    self.give_back(&taken, hold).await?;
                    return match outcome {
                        Err(err) => Err(err),
                        // A member was lost meanwhile (expired, deleted by
                        // hand): try again.
                        _ => Ok(AcquireOutcome::Held {
                            remaining: Some(Duration::ZERO),
                        }),
                    };
                }
            }
        }
        Ok(AcquireOutcome::Acquired {
            fencing_token: Some(FencingToken::new(token)),
        })
    }

    async fn try_acquire_access(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        request: AccessRequest,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        let (modes, queue, waiters) = (key.modes_key(), key.queue_key(), key.waiters_key());
        let offers = key.offers_key();
        let mut keys = vec![key.redis_key(), &modes, key.fence_key(), &queue, &waiters];
        let ttl_ms = MillisText::of_ttl(ttl);
        let lease_ms = MillisText::new(ttl_millis(request.waiter.waiter_lease).max(1));
        // Write tokens are issued as this backend's grants issue theirs.
        let [counter_ttl, ..] = self.grant.script_args();
        let mut args: Vec<&[u8]> = vec![
            hold.attempt_value().as_bytes(),
            request.access.letter().as_bytes(),
            ttl_ms.as_bytes(),
            lease_ms.as_bytes(),
            if request.waiter.join { b"1" } else { b"0" },
            if request.prefer_readers { b"r" } else { b"w" },
            counter_ttl.as_bytes(),
        ];
        // Writers that prefer readers make no offers: a release then
        // leaves the lock free for readers to race them.
        let hands_over =
            request.access == Access::Exclusive && !request.prefer_readers && self.hands_over();
        if hands_over {
            keys.push(&offers);
            args.push(earlier.map_or(&b"-"[..], |hold| hold.attempt_value().as_bytes()));
        }
        let script = &rw::ACQUIRE;
        let (reply, acknowledged) = self.node.run_acknowledged(script, &keys, &args).await?;
        if let Some(granted) = granted_earlier(&reply, hands_over && earlier.is_some()) {
            let fencing_token = granted.ok_or_else(|| self.node.unexpected(script, &reply))?;
            return Ok(AcquireOutcome::GrantedEarlier {
                fencing_token: Some(fencing_token),
                ttl,
            });
        }
        let outcome = access_outcome(key, &reply)
            .unwrap_or_else(|| Err(self.node.unexpected(script, &reply)))?;
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(self.undo_unacknowledged(key, hold, err).await);
        }
        Ok(outcome)
    }

    async fn inspect_rw_lock(&self, key: &LockKey) -> Result<RwLockState, LockError> {
        let (modes, waiters) = (key.modes_key(), key.waiters_key());
        let script = &rw::INSPECT;
        let reply = self
            .node
            .run(
                script,
                &[key.redis_key(), &modes, key.fence_key(), &waiters],
                &[],
            )
            .await?;
        if let Some(problem) = rw_problem(&reply) {
            return Err(problem);
        }
        rw_state(&reply).ok_or_else(|| self.node.unexpected(script, &reply))
    }

    async fn proclaim(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        value: &str,
    ) -> Result<bool, LockError> {
        let record = key.leader_key();
        let script = &election::PROCLAIM;
        // Acknowledged as grants are: a value a failover loses would leave
        // the term without one, or show an older one again.
        let (reply, acknowledged) = self
            .node
            .run_acknowledged(
                script,
                &[key.redis_key(), &record],
                &[hold.attempt_value().as_bytes(), value.as_bytes()],
            )
            .await?;
        match reply {
            Reply::Int(1) => acknowledged.map(|()| true),
            Reply::Int(0) => Ok(false),
            other => Err(election_problem(key, &other)
                .unwrap_or_else(|| self.node.unexpected(script, &other))),
        }
    }

    async fn read_leader(&self, key: &LockKey) -> Result<Option<Leader>, LockError> {
        let record = key.leader_key();
        let script = &election::LEADER;
        let reply = self
            .node
            .run(script, &[key.redis_key(), &record], &[])
            .await?;
        if let Some(problem) = election_problem(key, &reply) {
            return Err(problem);
        }
        match reply.as_array() {
            Some([Reply::Int(_), _, Reply::Nil]) => Ok(None),
            Some([Reply::Int(pttl), term, value]) if *pttl != -2 => {
                let term = term.as_text().and_then(|text| text.parse::<u64>().ok());
                match (term, value.as_text()) {
                    (Some(term), Some(value)) if term >= 1 => Ok(Some(Leader::new(
                        FencingToken::new(term),
                        value.to_owned(),
                        remaining_from_pttl(*pttl),
                    ))),
                    _ => Err(self.node.unexpected(script, &reply)),
                }
            }
            _ => Err(self.node.unexpected(script, &reply)),
        }
    }

    async fn inspect(&self, key: &LockKey) -> Result<LockState, LockError> {
        let holder = key.holder_key();
        let keys = [key.redis_key(), key.fence_key(), &holder];
        let reply = self.node.run(&single::INSPECT, &keys, &[]).await?;
        let (pttl, counter, holder) = match reply.as_array() {
            Some([Reply::Int(pttl), counter, holder]) => (*pttl, counter, holder),
            _ => return Err(self.node.unexpected(&single::INSPECT, &reply)),
        };
        // Anyone who may write the lock's keys writes this hash: what cannot
        // be read is left out, and the lock still shows as held.
        let holder = HolderInfo::from_reply(holder).unwrap_or_else(|reason| {
            tracing::warn!(key = key.name(), %reason, "unreadable holder information");
            None
        });
        let token = match counter {
            Reply::Nil => None,
            other => match other.as_text().and_then(|text| text.parse::<u64>().ok()) {
                Some(value) => Some(FencingToken::new(value)),
                None => return Err(self.node.unexpected(&single::INSPECT, &reply)),
            },
        };
        Ok(if pttl == -2 {
            LockState::Free { last_token: token }
        } else {
            LockState::Held {
                remaining: remaining_from_pttl(pttl),
                token,
                hold_count: None,
                holder,
            }
        })
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
/// The `{3, token}` reply of `fair_acquire.lua`: a release granted the
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
) -> Option<Result<AcquireOutcome, LockError>> {
    match reply.as_array()? {
        [Reply::Int(1), Reply::Int(0)] if !fenced => Some(Ok(AcquireOutcome::Acquired {
            fencing_token: None,
        })),
        [Reply::Int(1), _] if !fenced => None,
        // An integer below 2^53, the counter's text above (a Lua number
        // would round it).
        [Reply::Int(1), Reply::Int(token)] if *token >= 1 => Some(Ok(AcquireOutcome::Acquired {
            fencing_token: Some(FencingToken::new(token.unsigned_abs())),
        })),
        [Reply::Int(1), token @ Reply::Data(_)] => {
            let token = token
                .as_text()?
                .parse::<u64>()
                .ok()
                .filter(|token| *token >= 1)?;
            Some(Ok(AcquireOutcome::Acquired {
                fencing_token: Some(FencingToken::new(token)),
            }))
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

/// The `{-2, key, detail}` reply of the semaphore scripts as
/// [`LockError::Corrupted`]; `None` for any other reply.
fn semaphore_problem(reply: &Reply) -> Option<LockError> {
    foreign_data(reply, "this semaphore's data (a lock of the same name?)")
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

/// The reply of `semaphore_acquire.lua` for `request`; `None` for a shape
/// it never gives.
fn permit_outcome(
    key: &LockKey,
    reply: &Reply,
    request: PermitRequest,
) -> Option<Result<AcquireOutcome, LockError>> {
    if let Some(problem) = semaphore_problem(reply) {
        return Some(Err(problem));
    }
    match reply.as_array()? {
        [Reply::Int(1), Reply::Int(slot), token] => {
            let slot = u32::try_from(*slot)
                .ok()
                .filter(|slot| *slot < request.limit)?;
            let token = token
                .as_text()?
                .parse::<u64>()
                .ok()
                .filter(|token| *token >= 1)?;
            Some(Ok(AcquireOutcome::PermitAcquired {
                slot,
                fencing_token: FencingToken::new(token),
            }))
        }
        [Reply::Int(0), Reply::Int(_used), Reply::Int(wait_ms)] => Some(Ok(AcquireOutcome::Held {
            remaining: remaining_from_pttl(*wait_ms),
        })),
        [Reply::Int(-1), Reply::Int(limit)] => Some(Err(LockError::LimitMismatch {
            key: key.name().to_owned(),
            limit: u32::try_from(*limit).ok()?,
            requested: request.limit,
        })),
        [Reply::Int(-3), Reply::Int(limit)] => Some(Err(LockError::InvalidPermits {
            reason: format!(
                "a permit of weight {} can never fit in a semaphore of {limit} permits",
                request.weight
            ),
        })),
        _ => None,
    }
}

/// The reply of `semaphore_inspect.lua`; `None` for a shape it never gives.
fn semaphore_state(reply: &Reply) -> Option<SemaphoreState> {
    let (limit, permits) = reply.as_array()?.split_first()?;
    let Reply::Int(limit) = limit else {
        return None;
    };
    let limit = match *limit {
        0 => None,
        limit => Some(u32::try_from(limit).ok()?),
    };
    if !permits.len().is_multiple_of(4) {
        return None;
    }
    let permits = permits
        .chunks(4)
        .map(|fields| match fields {
            [Reply::Int(slot), Reply::Int(weight), Reply::Int(left), token] => {
                Some(PermitState::new(
                    u32::try_from(*slot).ok()?,
                    u32::try_from(*weight).ok()?,
                    Duration::from_millis(u64::try_from(*left).ok()?),
                    FencingToken::new(token.as_text()?.parse().ok()?),
                ))
            }
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(SemaphoreState::new(limit, permits))
}

/// Each member's lock key and fencing counter, in turn: the KEYS of the
/// multi-key scripts that take and renew.
fn member_keys(members: &[LockKey]) -> Vec<&str> {
    members
        .iter()
        .flat_map(|key| [key.redis_key(), key.fence_key()])
        .collect()
}

/// The `{-2, key, detail}` reply of the read-write scripts as
/// [`LockError::Corrupted`]; `None` for any other reply.
fn rw_problem(reply: &Reply) -> Option<LockError> {
    foreign_data(
        reply,
        "this read-write lock's data (a lock or semaphore of the same name?)",
    )
}

/// The reply of `rw_acquire.lua`; `None` for a shape it never gives.
fn access_outcome(key: &LockKey, reply: &Reply) -> Option<Result<AcquireOutcome, LockError>> {
    if let Some(problem) = rw_problem(reply) {
        return Some(Err(problem));
    }
    match reply.as_array()? {
        [Reply::Int(1), token] => {
            let token = token.as_text()?.parse::<u64>().ok()?;
            Some(Ok(AcquireOutcome::Acquired {
                fencing_token: Some(FencingToken::new(token)),
            }))
        }
        [Reply::Int(0), Reply::Int(wait_ms)] => Some(Ok(AcquireOutcome::Held {
            remaining: remaining_from_pttl(*wait_ms),
        })),
        [Reply::Int(-4)] => Some(Err(LockError::UpgradeRefused {
            key: key.name().to_owned(),
        })),
        _ => None,
    }
}

/// The reply of `rw_inspect.lua`; `None` for a shape it never gives.
fn rw_state(reply: &Reply) -> Option<RwLockState> {
    let [epoch, Reply::Int(waiting), holds @ ..] = reply.as_array()? else {
        return None;
    };
    let epoch = FencingToken::new(epoch.as_text()?.parse().ok()?);
    if !holds.len().is_multiple_of(3) {
        return None;
    }
    let holds = holds
        .chunks(3)
        .map(|fields| match fields {
            [mode, Reply::Int(left), token] => Some(RwHoldState::new(
                match mode.as_text()? {
                    "r" => Access::Shared,
                    "w" => Access::Exclusive,
                    _ => return None,
                },
                Duration::from_millis(u64::try_from(*left).ok()?),
                FencingToken::new(token.as_text()?.parse().ok()?),
            )),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(RwLockState::new(
        epoch,
        u64::try_from(*waiting).ok()?,
        holds,
    ))
}

/// The `{-1, detail}` reply of the election scripts as
/// [`LockError::Corrupted`]; `None` for any other reply.
fn election_problem(key: &LockKey, reply: &Reply) -> Option<LockError> {
    let [Reply::Int(-1), detail] = reply.as_array()? else {
        return None;
    };
    Some(LockError::Corrupted {
        key: key.redis_key().to_owned(),
        detail: detail.as_text()?.to_owned(),
    })
}
