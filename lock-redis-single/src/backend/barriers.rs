//! Barriers on one node: a party's entry, renewal and leave, and the
//! barrier read back (`lua/barrier/`).

use super::*;

impl SingleNodeBackend {
    /// A party claim of [`LockBackend::try_acquire`] on one node.
    pub(super) async fn party_attempt(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        request: PartyRequest,
    ) -> Result<AcquireOutcome, LockError> {
        self.node.validate_ttl(ttl)?;
        let (held, record, left) = (key.held_key(), key.barrier_key(), key.barrier_left_key());
        let (parties, ttl_ms) = (request.parties.to_string(), MillisText::of_ttl(ttl));
        let args = [
            hold.attempt_value().as_bytes(),
            parties.as_bytes(),
            ttl_ms.as_bytes(),
        ];
        let script = &barrier::ENTER;
        let (reply, acknowledged) = self
            .node
            .run_acknowledged(script, &[key.redis_key(), &held, &record, &left], &args)
            .await?;
        if let Some(problem) = barrier_problem(&reply) {
            return Err(problem);
        }
        let outcome = match reply.as_array() {
            Some([Reply::Int(1), Reply::Int(entered), Reply::Int(0..=1), _])
                if (1..=i64::from(request.parties)).contains(entered) =>
            {
                Acquired::new(None, ttl).into()
            }
            Some([Reply::Int(0), Reply::Int(wait_ms)]) => AcquireOutcome::Held {
                remaining: remaining_from_pttl(*wait_ms),
            },
            Some([Reply::Int(-1), Reply::Int(stored)]) => {
                return match u32::try_from(*stored) {
                    Ok(stored) => Err(LockError::CountMismatch {
                        key: key.name().to_owned(),
                        what: "barrier parties",
                        stored,
                        requested: request.parties,
                    }),
                    Err(_) => Err(self.node.unexpected(script, &reply)),
                };
            }
            // This party left or withdrew before: an attempt of it that
            // arrives now enters nothing.
            Some([Reply::Int(-4)]) => {
                return Err(LockError::NotHeld {
                    key: key.name().to_owned(),
                })
            }
            Some([Reply::Int(-3), Reply::Int(entered)]) => {
                return match u32::try_from(*entered) {
                    Ok(entered) => Err(LockError::BarrierFull {
                        key: key.name().to_owned(),
                        entered,
                        parties: request.parties,
                    }),
                    Err(_) => Err(self.node.unexpected(script, &reply)),
                };
            }
            _ => return Err(self.node.unexpected(script, &reply)),
        };
        // Not undone: the party may have completed the count, and the
        // engine tries again with the same hold, which renews it.
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(err);
        }
        Ok(outcome)
    }

    /// Renews a barrier's party (`barrier/renew.lua`), acknowledged by the
    /// replicas asked for, as a permit is.
    pub(super) async fn renew_party(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let (held, record) = (key.held_key(), key.barrier_key());
        let keys = [key.redis_key(), &held, &record];
        self.renew_id_with(&barrier::RENEW, &keys, barrier_problem, hold, ttl)
            .await
    }

    /// A party's leave (`barrier/leave.lua`): its entry says for how long
    /// its id is kept out.
    pub(super) async fn leave_party(
        &self,
        key: &LockKey,
        hold: &HoldToken,
    ) -> Result<ReleaseOutcome, LockError> {
        let (held, record, left) = (key.held_key(), key.barrier_key(), key.barrier_left_key());
        let keys = [key.redis_key(), &held, &record, &left];
        self.release_hold_with(&barrier::LEAVE, &keys, hold, barrier_problem)
            .await
    }

    /// [`BarrierBackend::leave_barrier`] on one node: `barrier/leave.lua`
    /// with the party's TTL, and its withdraw flag when `while_filling`.
    pub(super) async fn leave_with(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        while_filling: bool,
    ) -> Result<Option<String>, LockError> {
        let (held, record, left) = (key.held_key(), key.barrier_key(), key.barrier_left_key());
        let ttl_ms = MillisText::of_ttl(ttl);
        let mode: &[u8] = if while_filling { b"w" } else { b"" };
        let script = &barrier::LEAVE;
        let reply = self
            .node
            .run(
                script,
                &[key.redis_key(), &held, &record, &left],
                &[hold.attempt_value().as_bytes(), mode, ttl_ms.as_bytes()],
            )
            .await?;
        if let Some(problem) = barrier_problem(&reply) {
            return Err(problem);
        }
        match &reply {
            Reply::Int(0..=1) => Ok(None),
            _ => match reply.as_array() {
                Some([Reply::Int(2), round]) if while_filling => match round.as_text() {
                    Some(round) if !round.is_empty() => Ok(Some(round.to_owned())),
                    _ => Err(self.node.unexpected(script, &reply)),
                },
                _ => Err(self.node.unexpected(script, &reply)),
            },
        }
    }

    /// [`BarrierBackend::barrier_state`] on one node.
    pub(super) async fn read_barrier(
        &self,
        key: &LockKey,
        party: Option<&HoldToken>,
    ) -> Result<BarrierState, LockError> {
        let (held, record) = (key.held_key(), key.barrier_key());
        let id = party.map_or("", |party| party.attempt_value());
        let script = &barrier::READ;
        let reply = self
            .node
            .run(script, &[key.redis_key(), &held, &record], &[id.as_bytes()])
            .await?;
        if let Some(problem) = barrier_problem(&reply).or_else(|| wrong_kind(key, &reply)) {
            return Err(problem);
        }
        reply
            .as_array()
            .and_then(barrier_state)
            .ok_or_else(|| self.node.unexpected(script, &reply))
    }
}

/// The `{-2, key, detail}` reply of the barrier scripts as
/// [`LockError::Corrupted`]; `None` for any other reply.
fn barrier_problem(reply: &Reply) -> Option<LockError> {
    foreign_data(reply, "this barrier's data")
}

/// The read's `{-3, kind}`: another primitive holds the name.
fn wrong_kind(key: &LockKey, reply: &Reply) -> Option<LockError> {
    let [Reply::Int(-3), kind] = reply.as_array()? else {
        return None;
    };
    let found = match kind.as_text()? {
        "lock" => "lock",
        "zset" => "semaphore or read-write lock",
        _ => return None,
    };
    Some(LockError::WrongKind {
        key: key.name().to_owned(),
        found,
        wanted: "barrier",
    })
}

/// A barrier from `barrier/state.lua`'s `{parties, open, entered, own,
/// wait_ms, round}`; `None` for a shape it never gives.
pub(super) fn barrier_state(fields: &[Reply]) -> Option<BarrierState> {
    let [Reply::Int(parties), Reply::Int(open @ 0..=1), Reply::Int(entered), Reply::Int(own @ 0..=1), Reply::Int(wait_ms), round] =
        fields
    else {
        return None;
    };
    let round = match round {
        Reply::Nil => String::new(),
        other => other.as_text()?.to_owned(),
    };
    let (parties, entered) = (u32::try_from(*parties).ok()?, u32::try_from(*entered).ok()?);
    if entered > 0 && (parties == 0 || round.is_empty()) {
        return None;
    }
    Some(
        BarrierState::new(parties, *open == 1, entered, round)
            .with_party(*own == 1)
            .with_remaining((*wait_ms >= 0).then(|| Duration::from_millis(wait_ms.unsigned_abs()))),
    )
}
