//! Read-write locks on one node: a hold's acquire, renewal, take-over,
//! release and a writer leaving the line, and their replies (`lua/rw/`).

use super::*;

impl SingleNodeBackend {
    /// Renews a read-write lock's hold (`rw/renew.lua`), acknowledged as a
    /// permit's renewal is.
    pub(super) async fn renew_access(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let (held, slots) = (key.held_key(), key.slots_key());
        let keys = [key.redis_key(), &held, &slots, key.fence_key()];
        self.renew_id_with(&rw::RENEW, &keys, rw_problem, hold, ttl)
            .await
    }

    /// Takes over the read-write hold `from` names for `to`
    /// (`rw/take_over.lua`): only while it is live with the mode and token
    /// `from` claims, and no other hold of its owner is live beside it with
    /// a write among the two ([`LockError::HandOffRefused`]).
    pub(super) async fn take_over_access(
        &self,
        key: &LockKey,
        from: &HoldToken,
        to: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let (Some(token), HoldKind::Access(access)) = (from.fencing_token(), from.kind()) else {
            return Ok(ExtendOutcome::NotHeld);
        };
        let entry = format!("{}:{}", access.letter(), token.get());
        let (held, slots) = (key.held_key(), key.slots_key());
        let keys = [key.redis_key(), &held, &slots, key.fence_key()];
        let taken = (from, to);
        let outcome =
            self.take_over_id_with(&rw::TAKE_OVER, &keys, take_over_problem, taken, &entry, ttl);
        // The reply names no lock; the refusal gets this one's name here.
        outcome.await.map_err(|err| match err {
            LockError::HandOffRefused { .. } => LockError::HandOffRefused {
                key: key.name().to_owned(),
            },
            other => other,
        })
    }

    /// Gives back a read-write lock's hold (`rw/release.lua`), which
    /// publishes what may let a waiter in.
    pub(super) async fn release_access(
        &self,
        key: &LockKey,
        hold: &HoldToken,
    ) -> Result<ReleaseOutcome, LockError> {
        let (held, slots) = (key.held_key(), key.slots_key());
        let (queue, waiters, offers) = (key.queue_key(), key.waiters_key(), key.offers_key());
        let mut keys = vec![key.redis_key(), &held, &slots];
        // The release that frees the lock grants the next writer's offer.
        if self.hands_over() {
            keys.extend([key.fence_key(), &queue, &waiters, &offers]);
        }
        self.release_hold_with(&rw::RELEASE, &keys, hold, rw_problem)
            .await
    }

    /// Takes a waiting writer out of the queue, giving back a write a
    /// release granted to one of `offered` (`rw/give_up.lua`).
    pub(super) async fn leave_writers_queue(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: &[HoldToken],
    ) -> Result<(), LockError> {
        let (held, slots) = (key.held_key(), key.slots_key());
        let (queue, waiters, offers) = (key.queue_key(), key.waiters_key(), key.offers_key());
        let keys = [
            key.redis_key(),
            &held,
            &slots,
            key.fence_key(),
            &queue,
            &waiters,
            &offers,
        ];
        self.give_up_with(&rw::GIVE_UP, &keys, rw_problem, owner, offered)
            .await
    }

    /// A read-write claim of [`LockBackend::try_acquire`] on one node.
    pub(super) async fn access_attempt(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        request: AccessRequest,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        let (held, slots) = (key.held_key(), key.slots_key());
        let (queue, waiters, offers) = (key.queue_key(), key.waiters_key(), key.offers_key());
        let mut keys = vec![
            key.redis_key(),
            &held,
            &slots,
            key.fence_key(),
            &queue,
            &waiters,
        ];
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
            return Ok(Acquired::earlier(fencing_token, ttl).into());
        }
        let outcome = access_outcome(key, &reply, ttl)
            .unwrap_or_else(|| Err(self.node.unexpected(script, &reply)))?;
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(self.undo_unacknowledged(key, hold, err).await);
        }
        Ok(outcome)
    }

    /// [`RwLockBackend::rw_lock_state`] on one node.
    pub(super) async fn read_rw_lock(&self, key: &LockKey) -> Result<RwLockState, LockError> {
        let (held, waiters) = (key.held_key(), key.waiters_key());
        let script = &rw::INSPECT;
        let reply = self
            .node
            .run(
                script,
                &[key.redis_key(), &held, key.fence_key(), &waiters],
                &[],
            )
            .await?;
        if let Some(problem) = rw_problem(&reply) {
            return Err(problem);
        }
        reply
            .as_array()
            .and_then(rw_state)
            .ok_or_else(|| self.node.unexpected(script, &reply))
    }
}

/// The `{-2, key, detail}` reply of the read-write scripts as
/// [`LockError::Corrupted`]; `None` for any other reply.
pub(super) fn rw_problem(reply: &Reply) -> Option<LockError> {
    foreign_data(
        reply,
        "this read-write lock's data (a lock or semaphore of the same name?)",
    )
}

/// `rw/take_over.lua`'s refusal, `{-4}`, as [`LockError::HandOffRefused`]
/// (its name filled in by the caller), or [`rw_problem`].
fn take_over_problem(reply: &Reply) -> Option<LockError> {
    match reply.as_array() {
        Some([Reply::Int(-4)]) => Some(LockError::HandOffRefused { key: String::new() }),
        _ => rw_problem(reply),
    }
}

/// The reply of `rw/acquire.lua`; `None` for a shape it never gives.
pub(super) fn access_outcome(
    key: &LockKey,
    reply: &Reply,
    ttl: Duration,
) -> Option<Result<AcquireOutcome, LockError>> {
    if let Some(problem) = rw_problem(reply) {
        return Some(Err(problem));
    }
    match reply.as_array()? {
        [Reply::Int(1), token] => {
            let token = token.as_text()?.parse::<u64>().ok()?;
            Some(Ok(Acquired::new(Some(FencingToken::new(token)), ttl).into()))
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

/// The fields of `rw/state.lua`'s reply; `None` for a shape it never gives.
pub(super) fn rw_state(fields: &[Reply]) -> Option<RwLockState> {
    let [epoch, Reply::Int(waiting), holds @ ..] = fields else {
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
