//! What a name is: one script (`lua/name/inspect.lua`) reads whichever
//! primitive holds it, and its reply becomes a [`NameState`].

use super::barriers::barrier_state;
use super::elections::election_problem;
use super::latches::latch_state;
use super::rw_locks::rw_state;
use super::semaphores::semaphore_state;
use super::*;

impl SingleNodeBackend {
    /// [`LockBackend::inspect`] on one node: the name's every key in one
    /// script.
    pub(super) async fn inspect_name(&self, key: &LockKey) -> Result<NameState, LockError> {
        let script = &name::INSPECT;
        let (holder, held, limit) = (key.holder_key(), key.held_key(), key.limit_key());
        let (waiters, leader, barrier) = (key.waiters_key(), key.leader_key(), key.barrier_key());
        let keys = [
            key.redis_key(),
            key.fence_key(),
            &holder,
            &held,
            &limit,
            &waiters,
            &leader,
            &barrier,
        ];
        let reply = self.node.run(script, &keys, &[]).await?;
        if let Some(problem) =
            election_problem(key, &reply).or_else(|| foreign_data(&reply, "this library's data"))
        {
            return Err(problem);
        }
        let state = match reply.as_array() {
            Some([kind, fields @ ..]) => match kind.as_text() {
                Some("lock") => self.lock_name(key, fields),
                Some("semaphore") => semaphore_state(fields).map(|semaphore| {
                    if semaphore.limit.is_none() && semaphore.permits.is_empty() {
                        NameState::Free { last_token: None }
                    } else {
                        NameState::Semaphore(semaphore)
                    }
                }),
                Some("rw") => rw_state(fields).map(|rw_lock| {
                    if rw_lock.is_held() {
                        NameState::RwLock(rw_lock)
                    } else {
                        NameState::Free {
                            last_token: Some(rw_lock.epoch).filter(|epoch| epoch.get() > 0),
                        }
                    }
                }),
                Some("latch") => latch_state(fields).map(NameState::Latch),
                Some("barrier") => barrier_state(fields).map(|barrier| {
                    if barrier.entered > 0 {
                        NameState::Barrier(barrier)
                    } else {
                        NameState::Free { last_token: None }
                    }
                }),
                _ => None,
            },
            _ => None,
        };
        state.ok_or_else(|| self.node.unexpected(script, &reply))
    }

    /// A lock's fields of the reply (`{pttl, counter, holder, term, value}`),
    /// with its election's leader when one proclaimed for its term; `None`
    /// for a shape the script never gives.
    fn lock_name(&self, key: &LockKey, fields: &[Reply]) -> Option<NameState> {
        let [pttl, counter, holder, term, value] = fields else {
            return None;
        };
        let lock = lock_state(key, pttl, counter, holder)?;
        let Some(value) = value.as_text() else {
            return Some(match lock {
                LockState::Free { last_token } => NameState::Free { last_token },
                held => NameState::Lock(held),
            });
        };
        let term = term
            .as_text()?
            .parse::<u64>()
            .ok()
            .filter(|term| *term >= 1)?;
        let LockState::Held { remaining, .. } = &lock else {
            return None;
        };
        let leader = Leader::new(FencingToken::new(term), value.to_owned(), *remaining);
        Some(NameState::Election { lock, leader })
    }
}

/// A lock's state from `lock/state.lua`'s `{pttl, counter, holder}`; `None`
/// for a shape it never gives. Holder information that cannot be read is
/// left out (anyone who may write the lock's keys writes that hash), and the
/// lock still shows as held.
pub(super) fn lock_state(
    key: &LockKey,
    pttl: &Reply,
    counter: &Reply,
    holder: &Reply,
) -> Option<LockState> {
    let Reply::Int(pttl) = pttl else {
        return None;
    };
    let token = match counter {
        Reply::Nil => None,
        other => Some(FencingToken::new(other.as_text()?.parse::<u64>().ok()?)),
    };
    if *pttl == -2 {
        return Some(LockState::Free { last_token: token });
    }
    let holder = HolderInfo::from_reply(holder).unwrap_or_else(|reason| {
        tracing::warn!(key = key.name(), %reason, "unreadable holder information");
        None
    });
    Some(LockState::Held {
        remaining: remaining_from_pttl(*pttl),
        token,
        hold_count: None,
        holder,
    })
}
