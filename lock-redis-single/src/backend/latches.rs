//! Count-down latches on one node: a count set once, counted down once per
//! id, read and deleted (`lua/latch/`).

use super::*;

impl SingleNodeBackend {
    /// Runs a latch script on the latch's keys, and with `writes`, waits
    /// for the replicas asked for (a write a failover loses would bring an
    /// old count back, or lose one); its reply, once it is none of those
    /// for a name the script cannot act on, and the acknowledgement.
    async fn run_latch(
        &self,
        script: &Script,
        key: &LockKey,
        args: &[&[u8]],
        writes: bool,
    ) -> Result<(Reply, Result<(), LockError>), LockError> {
        let downs = key.latch_downs_key();
        let keys = [key.redis_key(), downs.as_str()];
        let (reply, acknowledged) = if writes {
            self.node.run_acknowledged(script, &keys, args).await?
        } else {
            (self.node.run(script, &keys, args).await?, Ok(()))
        };
        match latch_problem(key, &reply) {
            Some(problem) => Err(problem),
            None => Ok((reply, acknowledged)),
        }
    }

    /// [`LatchBackend::set_latch`] on one node.
    pub(super) async fn set_latch_count(
        &self,
        key: &LockKey,
        count: u32,
        ttl: Duration,
    ) -> Result<bool, LockError> {
        self.node.validate_ttl(ttl)?;
        let script = &latch::SET;
        let (count_text, ttl_ms) = (count.to_string(), MillisText::of_ttl(ttl));
        let args = [count_text.as_bytes(), ttl_ms.as_bytes()];
        let (reply, acknowledged) = self.run_latch(script, key, &args, true).await?;
        match reply.as_array() {
            Some([Reply::Int(1), Reply::Int(set)]) if *set == i64::from(count) => {
                acknowledged.map(|()| true)
            }
            // Set before, perhaps by this process's unacknowledged call: the
            // script wrote the value again, so the acknowledgement covers it.
            Some([Reply::Int(0), Reply::Int(left)]) if (0..=i64::from(count)).contains(left) => {
                acknowledged.map(|()| false)
            }
            Some([Reply::Int(-1), Reply::Int(stored)]) => match u32::try_from(*stored) {
                Ok(stored) => Err(LockError::CountMismatch {
                    key: key.name().to_owned(),
                    what: "latch count",
                    stored,
                    requested: count,
                }),
                Err(_) => Err(self.node.unexpected(script, &reply)),
            },
            _ => Err(self.node.unexpected(script, &reply)),
        }
    }

    /// [`LatchBackend::count_down_latch`] on one node.
    pub(super) async fn count_down(
        &self,
        key: &LockKey,
        id: Option<&str>,
    ) -> Result<u32, LockError> {
        let script = &latch::COUNT_DOWN;
        let args = [id.unwrap_or("").as_bytes()];
        let (reply, acknowledged) = self.run_latch(script, key, &args, true).await?;
        match reply.as_array() {
            Some([]) => Err(LockError::LatchNotSet {
                key: key.name().to_owned(),
            }),
            // Counted now, or before (perhaps by this id's unacknowledged
            // call, whose value the script wrote again): acknowledged either
            // way.
            Some([Reply::Int(left), Reply::Int(0..=1)]) => {
                let left =
                    u32::try_from(*left).map_err(|_| self.node.unexpected(script, &reply))?;
                acknowledged.map(|()| left)
            }
            _ => Err(self.node.unexpected(script, &reply)),
        }
    }

    /// [`LatchBackend::latch_state`] on one node.
    pub(super) async fn read_latch(&self, key: &LockKey) -> Result<Option<LatchState>, LockError> {
        let script = &latch::READ;
        let (reply, _) = self.run_latch(script, key, &[], false).await?;
        match reply.as_array() {
            Some([]) => Ok(None),
            Some(fields) => latch_state(fields)
                .map(Some)
                .ok_or_else(|| self.node.unexpected(script, &reply)),
            None => Err(self.node.unexpected(script, &reply)),
        }
    }

    /// [`LatchBackend::delete_latch`] on one node.
    pub(super) async fn delete_latch_keys(&self, key: &LockKey) -> Result<bool, LockError> {
        let script = &latch::DELETE;
        // A delete a failover loses brings the latch back, holding the name
        // against every other kind for the rest of its TTL.
        let (reply, acknowledged) = self.run_latch(script, key, &[], true).await?;
        match reply {
            Reply::Int(deleted @ 0..=1) => acknowledged.map(|()| deleted == 1),
            other => Err(self.node.unexpected(script, &other)),
        }
    }
}

/// The replies every latch script gives for a name it cannot act on:
/// `{-3, kind}` as [`LockError::WrongKind`], `{-2, key, detail}` as
/// [`LockError::Corrupted`]; `None` for any other reply.
fn latch_problem(key: &LockKey, reply: &Reply) -> Option<LockError> {
    if let Some([Reply::Int(-3), kind]) = reply.as_array() {
        let found = match kind.as_text()? {
            "lock" => "lock",
            "zset" => "semaphore, read-write lock or barrier",
            _ => return None,
        };
        return Some(LockError::WrongKind {
            key: key.name().to_owned(),
            found,
            wanted: "latch",
        });
    }
    foreign_data(reply, "a latch")
}

/// A latch from `latch/state.lua`'s `{count, initial, pttl}`; `None` for a
/// shape it never gives.
pub(super) fn latch_state(fields: &[Reply]) -> Option<LatchState> {
    let [Reply::Int(count), Reply::Int(initial), Reply::Int(pttl)] = fields else {
        return None;
    };
    let (count, initial) = (u32::try_from(*count).ok()?, u32::try_from(*initial).ok()?);
    if count > initial || *pttl == -2 {
        return None;
    }
    Some(LatchState::new(count, initial, remaining_from_pttl(*pttl)))
}
