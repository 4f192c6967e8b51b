//! Multi-key locks on one node: every name in one script, or on a cluster
//! slot by slot in one canonical order (`lua/multi/`).

use super::*;

impl SingleNodeBackend {
    /// Renews every member of a multi-key hold, or none
    /// (`multi/renew.lua`, once per slot on a cluster), acknowledged as a
    /// lock's renewal is: `NotHeld` when a slot's members are not all held.
    pub(super) async fn renew_members(
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

    /// Takes one slot's members of a multi-key hold (`multi/acquire.lua`),
    /// with a token of at least `floor`, acknowledged by the replicas asked
    /// for (or undone: every member is then released).
    pub(super) async fn acquire_group(
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
                    Some(token) => Acquired::new(Some(FencingToken::new(token)), ttl).into(),
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
    /// (`multi/probe.lua` on every slot, at once): `Some(None)` for one
    /// without expiry.
    pub(super) async fn held_in_some_slot(
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
    pub(super) async fn give_back(
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
    /// (`multi/raise.lua`), acknowledged by the replicas asked for:
    /// `false` when they no longer all hold `from`.
    pub(super) async fn raise_group(
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
    pub(super) async fn release_groups<'k>(
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
    pub(super) fn slot_groups<'k>(&self, keys: &'k [LockKey]) -> Vec<&'k [LockKey]> {
        if !self.node.client().is_cluster() {
            return vec![keys];
        }
        keys.chunk_by(|a, b| a.hash_slot() == b.hash_slot())
            .collect()
    }

    /// Gives back every member a multi-key hold still has
    /// (`multi/release.lua`): `Released` only when it had them all.
    pub(super) async fn release_members(
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

    /// On a cluster, names in several slots are taken slot by slot, in the
    /// canonical order, each slot's members in one script: never waiting
    /// with some of them (what it took is released when a later slot is
    /// held), and raised to one token at the end.
    ///
    /// A multi-key claim of [`LockBackend::try_acquire`] on one node.
    pub(super) async fn multi_attempt(
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
                Ok(AcquireOutcome::Acquired(Acquired {
                    fencing_token: Some(token),
                    ..
                })) => taken.push((group, token.get())),
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
        Ok(Acquired::new(Some(FencingToken::new(token)), ttl).into())
    }
}

/// Each member's lock key and fencing counter, in turn: the KEYS of the
/// multi-key scripts that take and renew.
pub(super) fn member_keys(members: &[LockKey]) -> Vec<&str> {
    members
        .iter()
        .flat_map(|key| [key.redis_key(), key.fence_key()])
        .collect()
}
