//! Fair mode on one node: a lock taken in arrival order, a release that
//! hands it to the next waiter's offer, and a waiter leaving the line
//! (`lua/fair/`, `lua/shared/handoff.lua`).

use super::*;

impl SingleNodeBackend {
    /// Releases a fair lock's hold and hands the lock to the next waiter
    /// in line (`fair/release.lua`).
    pub(super) async fn release_in_line(
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

    /// A fair lock claim of [`LockBackend::try_acquire`] on one node.
    pub(super) async fn fair_attempt(
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
            return Ok(Acquired::earlier(fencing_token, ttl).into());
        }
        // Fair mode issues tokens whatever `fencing` says.
        let outcome = acquire_outcome(key, &reply, true, ttl)
            .unwrap_or_else(|| Err(self.node.unexpected(&single::FAIR_ACQUIRE, &reply)))?;
        if let Some(err) = unacknowledged_grant(&outcome, acknowledged) {
            return Err(self.undo_unacknowledged(key, hold, err).await);
        }
        Ok(outcome)
    }

    /// [`LockBackend::leave_queue`] on one node.
    pub(super) async fn leave_line(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: Option<&[HoldToken]>,
    ) -> Result<(), LockError> {
        let (queue, waiters) = (key.queue_key(), key.waiters_key());
        // A read-write lock's waiting writer, a fair semaphore's waiter and
        // a fair lock's: each gives back what a release granted its offers.
        let offered = offered.filter(|_| self.hands_over());
        if let Some(offered) = offered.filter(|holds| {
            holds
                .iter()
                .any(|h| matches!(h.kind(), HoldKind::Access(_)))
        }) {
            return self.leave_writers_queue(key, owner, offered).await;
        }
        if let Some(offered) = offered.filter(|holds| {
            holds
                .iter()
                .any(|h| matches!(h.kind(), HoldKind::Permit(_)))
        }) {
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
}
