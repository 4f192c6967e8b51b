//! Elections on one node: a leader's value bound to its term, and the
//! leader read back (`lua/election/`).

use super::*;

impl SingleNodeBackend {
    /// [`ElectionBackend::proclaim`] on one node.
    pub(super) async fn proclaim_value(
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

    /// [`ElectionBackend::read_leader`] on one node.
    pub(super) async fn leader_of(&self, key: &LockKey) -> Result<Option<Leader>, LockError> {
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
}

/// The `{-1, detail}` reply of the election scripts as
/// [`LockError::Corrupted`]; `None` for any other reply.
pub(super) fn election_problem(key: &LockKey, reply: &Reply) -> Option<LockError> {
    let [Reply::Int(-1), detail] = reply.as_array()? else {
        return None;
    };
    Some(LockError::Corrupted {
        key: key.redis_key().to_owned(),
        detail: detail.as_text()?.to_owned(),
    })
}
