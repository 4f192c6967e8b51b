//! The single-node lock: `lock/acquire_token.lua`, `lock/extend.lua`,
//! `lock/release.lua` and `lock/take_over.lua` as atomic steps on one key
//! and its fencing counter.

use stateright::Property;

use crate::model::{Answer, Grant, Lease, LeaseModel, Op, Protocol, State};

/// A defect to put back on purpose, to see that the checker finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// A release deletes the key whoever holds it, as a plain `DEL` does
    /// (`lock/release.lua` compares the value first).
    ReleaseWithoutCompare,
    /// A renewal writes its value whoever holds the key, as a `SET ... PX`
    /// does (`lock/extend.lua` renews only a key that holds its value).
    RenewalWithoutCompare,
    /// A take-over replaces the hold whatever fencing token the hand-off
    /// token claims (`lock/take_over.lua` compares the whole stored value,
    /// `#<token>` and all).
    TakeOverIgnoresClaim,
}

/// The single-node lock's scripts, with at most one [`Defect`] put back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lock {
    /// A defect put back on purpose, if any.
    pub defect: Option<Defect>,
}

impl Lock {
    /// The lock's scripts with `defect` put back.
    pub fn with_defect(defect: Defect) -> Self {
        Lock {
            defect: Some(defect),
        }
    }

    fn has(&self, defect: Defect) -> bool {
        self.defect == Some(defect)
    }
}

/// A hold as the lock key stores it: whose attempt, and the token it was
/// granted (`<owner>:<nonce>#<token>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hold {
    /// The client whose attempt it is.
    pub client: u8,
    /// Which of that client's attempts (from 1).
    pub attempt: u8,
    /// The fencing token it was granted.
    pub token: u64,
}

/// The server's keys for the lock's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockKeys {
    /// The lock key's value, while it lives.
    pub hold: Option<Hold>,
    /// When the lock key expires, by the server's clock.
    pub expires: u64,
    /// The fencing counter: the last token issued (0 for none).
    pub counter: u64,
}

/// The property the lock exists for.
pub const MUTEX: &str = "at most one client believes it holds the lock";

impl Protocol for Lock {
    type Server = LockKeys;

    fn empty(&self) -> LockKeys {
        LockKeys {
            hold: None,
            expires: 0,
            counter: 0,
        }
    }

    fn expire(&self, server: &mut LockKeys, now: u64) -> bool {
        let expired = server.hold.is_some() && now >= server.expires;
        if expired {
            server.hold = None;
        }
        expired
    }

    fn run(
        &self,
        server: &mut LockKeys,
        now: u64,
        ttl: u64,
        client: u8,
        op: Op,
        believed: Option<Lease>,
    ) -> Answer {
        let held = server.hold;
        let own =
            |attempt: u8| held.is_some_and(|hold| (hold.client, hold.attempt) == (client, attempt));
        match op {
            Op::Acquire { attempt, .. } => {
                if held.is_some() {
                    return Answer::Held;
                }
                server.counter += 1;
                let token = server.counter;
                server.hold = Some(Hold {
                    client,
                    attempt,
                    token,
                });
                server.expires = now + ttl;
                Answer::Granted(Grant::token(token))
            }
            Op::Extend { attempt, .. } => {
                if own(attempt) {
                    server.expires = now + ttl;
                    return Answer::Extended;
                }
                match (self.has(Defect::RenewalWithoutCompare), believed) {
                    (true, Some(lease)) => {
                        server.hold = Some(Hold {
                            client,
                            attempt,
                            token: lease.grant.token,
                        });
                        server.expires = now + ttl;
                        Answer::Extended
                    }
                    _ => Answer::NotHeld,
                }
            }
            Op::TakeOver { from, attempt } => match held {
                Some(hold)
                    if (hold.client, hold.attempt) == (from.client, from.attempt)
                        && (hold.token == from.claim.token
                            || self.has(Defect::TakeOverIgnoresClaim)) =>
                {
                    server.hold = Some(Hold {
                        client,
                        attempt,
                        token: hold.token,
                    });
                    server.expires = now + ttl;
                    Answer::TakenOver
                }
                _ => Answer::NotHeld,
            },
            Op::Release { attempt } | Op::Cleanup { attempt } => {
                if own(attempt) || (self.has(Defect::ReleaseWithoutCompare) && held.is_some()) {
                    server.hold = None;
                    return Answer::Released;
                }
                Answer::NotHeld
            }
            // Not the lock's: never sent, since it does not elect.
            Op::Proclaim { .. } | Op::GiveUp { .. } => Answer::NotHeld,
        }
    }

    fn holds(&self, server: &LockKeys) -> Vec<(u8, u8, Grant, u64)> {
        server
            .hold
            .iter()
            .map(|hold| {
                let grant = Grant::token(hold.token);
                (hold.client, hold.attempt, grant, server.expires)
            })
            .collect()
    }

    fn counters(&self, server: &LockKeys) -> Vec<(u8, u64)> {
        (server.counter > 0)
            .then_some((0, server.counter))
            .into_iter()
            .collect()
    }

    fn script(&self, _: u8, op: Op) -> String {
        match op {
            Op::Acquire { attempt, .. } => format!("lock/acquire_token.lua (attempt {attempt})"),
            Op::Extend { attempt, ask } => {
                format!("lock/extend.lua (attempt {attempt}{})", ask.described())
            }
            Op::Release { attempt } => format!("lock/release.lua (attempt {attempt})"),
            Op::Cleanup { attempt } => {
                format!("lock/release.lua (cleanup of attempt {attempt})")
            }
            Op::TakeOver { from, attempt } => format!(
                "lock/take_over.lua (attempt {attempt}, from client {}'s attempt {} \
                 claiming token {})",
                from.client, from.attempt, from.claim.token
            ),
            Op::Proclaim { .. } | Op::GiveUp { .. } => format!("{op:?}, which the lock has not"),
        }
    }

    fn properties() -> Vec<Property<LeaseModel<Self>>> {
        // README, "What a lease promises": while a guard's lease is valid
        // by its own clock, no other holder's is.
        vec![Property::always(MUTEX, |_, state: &State<LockKeys>| {
            state.believers().count() <= 1
        })]
    }
}

#[cfg(test)]
mod tests {
    use stateright::{Checker, Model};

    use super::*;
    use crate::model::{
        discoveries, Bounds, ClientDefect, Faults, AGREES, CLEANUP, EVERY, RESUMED, TOKENS,
    };

    fn with(defect: Defect) -> LeaseModel<Lock> {
        LeaseModel::new(Lock::with_defect(defect), Bounds::SMALL, Faults::default())
    }

    #[test]
    fn the_lock_keeps_its_promises_under_every_survivable_fault() {
        let found = discoveries(LeaseModel::new(
            Lock::default(),
            Bounds::QUICK,
            Faults::SURVIVABLE,
        ));
        assert_eq!(found, vec![CLEANUP, EVERY], "only the examples");
    }

    #[test]
    fn a_restart_without_persistence_is_found_unsafe() {
        let faults = Faults {
            restarts: true,
            ..Faults::default()
        };
        let found = discoveries(LeaseModel::new(Lock::default(), Bounds::SMALL, faults));
        for property in [MUTEX, AGREES, TOKENS] {
            assert!(found.contains(&property), "{property}: {found:?}");
        }
    }

    #[test]
    fn a_release_without_compare_is_found() {
        assert!(discoveries(with(Defect::ReleaseWithoutCompare)).contains(&MUTEX));
    }

    #[test]
    fn a_deadline_from_the_reply_is_found() {
        let model = LeaseModel::new(Lock::default(), Bounds::SMALL, Faults::default());
        assert!(
            discoveries(model.with_client_defect(ClientDefect::DeadlineFromReply)).contains(&MUTEX)
        );
    }

    /// Two renewals a lease, of either TTL, and one lost reply: a lost
    /// short renewal may run after a long one.
    const TWO_TTLS: Bounds = Bounds {
        clients: 2,
        ttl: 3,
        drift: 0,
        horizon: 5,
        attempts: 1,
        failures: 1,
        renewals: 2,
        hand_offs: false,
        short_extends: true,
        long_extends: false,
    };

    const LOST_REPLIES: Faults = Faults {
        lost_replies: true,
        pauses: false,
        crashes: false,
        restarts: false,
    };

    #[test]
    fn renewals_of_two_ttls_keep_the_promises() {
        let found = discoveries(LeaseModel::new(Lock::default(), TWO_TTLS, LOST_REPLIES));
        assert_eq!(found, vec![CLEANUP, EVERY], "only the examples");
    }

    #[test]
    fn a_deadline_trusted_while_a_shorter_renewal_runs_is_found() {
        let model = LeaseModel::new(Lock::default(), TWO_TTLS, Faults::default())
            .with_client_defect(ClientDefect::TrustsRenewalsInFlight);
        let found = discoveries(model);
        for property in [MUTEX, AGREES] {
            assert!(found.contains(&property), "{property}: {found:?}");
        }
    }

    #[test]
    fn a_renewal_trusted_past_an_unanswered_shorter_one_is_found() {
        let model = LeaseModel::new(Lock::default(), TWO_TTLS, LOST_REPLIES)
            .with_client_defect(ClientDefect::ForgetsUnansweredRenewals);
        let found = discoveries(model);
        for property in [MUTEX, AGREES] {
            assert!(found.contains(&property), "{property}: {found:?}");
        }
    }

    #[test]
    fn a_renewal_without_compare_is_found() {
        assert!(discoveries(with(Defect::RenewalWithoutCompare)).contains(&MUTEX));
    }

    #[test]
    fn a_take_over_that_ignores_the_claim_is_found() {
        let bounds = Bounds {
            hand_offs: true,
            ..Bounds::SMALL
        };
        let found = discoveries(LeaseModel::new(Lock::default(), bounds, Faults::default()));
        assert_eq!(found, vec![RESUMED, EVERY], "the take-over as it is");
        let model = LeaseModel {
            bounds,
            ..with(Defect::TakeOverIgnoresClaim)
        };
        assert!(discoveries(model).contains(&AGREES));
    }

    #[test]
    fn a_counterexample_prints_as_script_calls() {
        let model = LeaseModel::new(Lock::default(), Bounds::SMALL, Faults::default())
            .with_client_defect(ClientDefect::DeadlineFromReply);
        let checker = model.clone().checker().spawn_bfs().join();
        let path = checker.discovery(MUTEX).expect("a counterexample");
        let text = crate::trace(&model, &path.into_vec());
        assert!(
            text.contains("sends lock/acquire_token.lua (attempt 1)"),
            "{text}"
        );
        assert!(text.contains("granted, token 2"), "{text}");
        assert!(
            text.lines().last().is_some_and(
                |last| last.contains("client 0 trusts") && last.contains("client 1 trusts")
            ),
            "{text}"
        );
    }
}
