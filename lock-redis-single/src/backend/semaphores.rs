//! Semaphores on one node: a permit's acquire, renewal, take-over, release and
//! leaving the line, the limit, and their replies (`lua/semaphore/`).

use super::*;

impl SingleNodeBackend {
    /// Renews a semaphore permit (`semaphore/renew.lua`), acknowledged by
    /// the replicas asked for, as [`renew_with`](Self::renew_with) renews a
    /// lock.
    pub(super) async fn renew_permit(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let (held, slots) = (key.held_key(), key.slots_key());
        let keys = [key.redis_key(), &held, &slots];
        self.renew_id_with(&semaphore::RENEW, &keys, semaphore_problem, hold, ttl)
            .await
    }

    /// Takes over the permit `from` names for `to` (`semaphore/take_over.lua`):
    /// only while it is live with the weight, slot and token `from` claims.
    pub(super) async fn take_over_permit(
        &self,
        key: &LockKey,
        from: &HoldToken,
        to: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        // The whole entry the token claims: a token alone names only its
        // slot's counter, and another slot may be at the same number.
        let (Some(token), HoldKind::Permit(permit)) = (from.fencing_token(), from.kind()) else {
            return Ok(ExtendOutcome::NotHeld);
        };
        let Some(slot) = permit.slot() else {
            return Ok(ExtendOutcome::NotHeld);
        };
        let entry = format!("{}:{slot}:{}", permit.weight(), token.get());
        let (held, slots) = (key.held_key(), key.slots_key());
        let keys = [key.redis_key(), &held, &slots];
        let script = &semaphore::TAKE_OVER;
        self.take_over_id_with(script, &keys, semaphore_problem, (from, to), &entry, ttl)
            .await
    }

    /// Gives back a semaphore permit (`semaphore/release.lua`), which
    /// publishes the weight left in use.
    pub(super) async fn release_permit(
        &self,
        key: &LockKey,
        hold: &HoldToken,
    ) -> Result<ReleaseOutcome, LockError> {
        let (held, slots) = (key.held_key(), key.slots_key());
        // What a fair permit's release frees goes to the waiters' offers
        // first; outside fair mode nobody waits in line.
        if hold.is_in_line() && self.hands_over() {
            let (limit_key, fences) = (key.limit_key(), key.slot_fences_key());
            let (queue, waiters, offers) = (key.queue_key(), key.waiters_key(), key.offers_key());
            let keys = [
                key.redis_key(),
                &held,
                &slots,
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
        let keys = [key.redis_key(), &held, &slots];
        self.release_hold_with(&semaphore::RELEASE, &keys, hold, semaphore_problem)
            .await
    }

    /// Takes a fair semaphore's waiter out of the line, giving back a
    /// permit a release granted to one of `offered`
    /// (`semaphore/give_up.lua`).
    pub(super) async fn leave_permit_queue(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: &[HoldToken],
    ) -> Result<(), LockError> {
        let (held, slots) = (key.held_key(), key.slots_key());
        let (limit_key, fences) = (key.limit_key(), key.slot_fences_key());
        let (queue, waiters, offers) = (key.queue_key(), key.waiters_key(), key.offers_key());
        let keys = [
            key.redis_key(),
            &held,
            &slots,
            &limit_key,
            &fences,
            &queue,
            &waiters,
            &offers,
        ];
        self.give_up_with(
            &semaphore::GIVE_UP,
            &keys,
            semaphore_problem,
            owner,
            offered,
        )
        .await
    }

    /// A permit claim of [`LockBackend::try_acquire`] on one node.
    pub(super) async fn permit_attempt(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        request: PermitRequest,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        let (held, slots, limit_key, fences) = (
            key.held_key(),
            key.slots_key(),
            key.limit_key(),
            key.slot_fences_key(),
        );
        // In fair mode, the queue of the fair lock's layout: the same keys.
        let line = request
            .fair
            .map(|_| [key.queue_key(), key.waiters_key(), key.offers_key()]);
        let mut keys = vec![key.redis_key(), &held, &slots, &limit_key, &fences];
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
                    Ok(Acquired::earlier(FencingToken::new(token), ttl)
                        .in_slot(slot)
                        .into())
                }
                _ => Err(self.node.unexpected(script, &reply)),
            };
        }
        let outcome = permit_outcome(key, &reply, request, ttl)
            .unwrap_or_else(|| Err(self.node.unexpected(script, &reply)))?;
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(self.undo_unacknowledged(key, hold, err).await);
        }
        Ok(outcome)
    }

    /// [`SemaphoreBackend::semaphore_state`] on one node.
    pub(super) async fn read_semaphore(&self, key: &LockKey) -> Result<SemaphoreState, LockError> {
        let (held, limit_key) = (key.held_key(), key.limit_key());
        let script = &semaphore::INSPECT;
        let reply = self
            .node
            .run(script, &[key.redis_key(), &held, &limit_key], &[])
            .await?;
        if let Some(problem) = semaphore_problem(&reply) {
            return Err(problem);
        }
        reply
            .as_array()
            .and_then(semaphore_state)
            .ok_or_else(|| self.node.unexpected(script, &reply))
    }

    /// [`SemaphoreBackend::set_semaphore_limit`] on one node.
    pub(super) async fn write_semaphore_limit(
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
}

/// The `{-2, key, detail}` reply of the semaphore scripts as
/// [`LockError::Corrupted`]; `None` for any other reply.
pub(super) fn semaphore_problem(reply: &Reply) -> Option<LockError> {
    foreign_data(reply, "this semaphore's data (a lock of the same name?)")
}

/// The reply of `semaphore/acquire.lua` for `request`; `None` for a shape
/// it never gives.
pub(super) fn permit_outcome(
    key: &LockKey,
    reply: &Reply,
    request: PermitRequest,
    ttl: Duration,
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
            Some(Ok(Acquired::new(Some(FencingToken::new(token)), ttl)
                .in_slot(slot)
                .into()))
        }
        [Reply::Int(0), Reply::Int(_used), Reply::Int(wait_ms)] => Some(Ok(AcquireOutcome::Held {
            remaining: remaining_from_pttl(*wait_ms),
        })),
        [Reply::Int(-1), Reply::Int(limit)] => Some(Err(LockError::CountMismatch {
            key: key.name().to_owned(),
            what: "semaphore limit",
            stored: u32::try_from(*limit).ok()?,
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

/// The fields of `semaphore/state.lua`'s reply; `None` for a shape it never
/// gives.
pub(super) fn semaphore_state(fields: &[Reply]) -> Option<SemaphoreState> {
    let (limit, permits) = fields.split_first()?;
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
