//! The election: the single-node lock's scripts for the leadership (its
//! fencing token is the term), `election/proclaim.lua` binding a value to
//! the holder's term, and `election/leader.lua` showing it while that term
//! is the lock's. A leadership is never handed off (`Leadership` has no
//! `hand_off`): its runs have none.

use stateright::Property;

use crate::lock::{Lock, LockKeys};
use crate::model::{Answer, Grant, Lease, LeaseModel, Op, Protocol, Shown, State};

/// A defect to put back on purpose, to see that the checker finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// A leader read shows the record whatever the lock's term
    /// (`election_leader` shows it only while its term is the lock's).
    ShowsAnyTerm,
    /// A proclaim binds its value to the lock's term whoever holds it
    /// (`election/proclaim.lua` writes only for the hold's own value).
    ProclaimWithoutCompare,
}

/// The election's scripts, with at most one [`Defect`] put back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Election {
    /// A defect put back on purpose, if any.
    pub defect: Option<Defect>,
}

impl Election {
    /// The election's scripts with `defect` put back.
    pub fn with_defect(defect: Defect) -> Self {
        Election {
            defect: Some(defect),
        }
    }
}

/// The server's keys for the election's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ElectionKeys {
    /// The election's lock and its counter.
    pub lock: LockKeys,
    /// The leader record, `<term>:<value>`, kept without a TTL.
    pub leader: Option<Shown>,
}

/// At most one leader at a time.
pub const ONE_LEADER: &str = "at most one client believes it is the leader";
/// What a read shows is what the term's leader proclaimed.
pub const PROCLAIMED: &str = "a shown value was proclaimed in its term";
/// What a read shows is the current term's.
pub const CURRENT_TERM: &str = "a shown term is a live leadership's";
/// The example of a leader read showing a leader.
pub const OBSERVED: &str = "a leader read shows a leader";

impl Protocol for Election {
    type Server = ElectionKeys;

    fn empty(&self) -> ElectionKeys {
        ElectionKeys {
            lock: Lock::default().empty(),
            leader: None,
        }
    }

    fn expire(&self, server: &mut ElectionKeys, now: u64) -> bool {
        Lock::default().expire(&mut server.lock, now)
    }

    fn run(
        &self,
        server: &mut ElectionKeys,
        now: u64,
        ttl: u64,
        client: u8,
        op: Op,
        believed: Option<Lease>,
    ) -> Answer {
        let hold = server.lock.hold;
        match op {
            Op::Proclaim { attempt } => {
                let term = match hold {
                    Some(hold)
                        if (hold.client, hold.attempt) == (client, attempt)
                            || self.defect == Some(Defect::ProclaimWithoutCompare) =>
                    {
                        hold.token
                    }
                    _ => return Answer::NotHeld,
                };
                server.leader = Some(Shown {
                    term,
                    value: client,
                });
                Answer::Proclaimed
            }
            op => Lock::default().run(&mut server.lock, now, ttl, client, op, believed),
        }
    }

    fn holds(&self, server: &ElectionKeys) -> Vec<(u8, u8, Grant, u64)> {
        Lock::default().holds(&server.lock)
    }

    fn counters(&self, server: &ElectionKeys) -> Vec<(u8, u64)> {
        Lock::default().counters(&server.lock)
    }

    fn records(&self, server: &ElectionKeys) -> Vec<Shown> {
        server.leader.into_iter().collect()
    }

    fn elects(&self) -> bool {
        true
    }

    fn shown(&self, server: &ElectionKeys) -> Option<Shown> {
        let current = |shown: &Shown| {
            server
                .lock
                .hold
                .is_some_and(|hold| hold.token == shown.term)
                || self.defect == Some(Defect::ShowsAnyTerm)
        };
        server.leader.filter(current)
    }

    fn script(&self, _: u8, op: Op) -> String {
        match op {
            Op::Proclaim { attempt } => format!("election/proclaim.lua (attempt {attempt})"),
            op => Lock::default().script(0, op),
        }
    }

    fn properties() -> Vec<Property<LeaseModel<Self>>> {
        vec![
            // `Election`'s docs: one leader at a time, its term its fencing
            // token.
            Property::always(ONE_LEADER, |_, state: &State<ElectionKeys>| {
                state.believers().count() <= 1
            }),
            // `Election::leader`: the value the leader of the current term
            // proclaimed, never one from another term; judged in every
            // state, as a read may come at any instant.
            Property::always(
                PROCLAIMED,
                |model: &LeaseModel<Self>, state: &State<ElectionKeys>| {
                    model
                        .protocol
                        .shown(&state.server)
                        .is_none_or(|shown| state.proclaimed.binary_search(&shown).is_ok())
                },
            ),
            Property::always(
                CURRENT_TERM,
                |model: &LeaseModel<Self>, state: &State<ElectionKeys>| {
                    model.protocol.shown(&state.server).is_none_or(|shown| {
                        let live = model.protocol.holds(&state.server);
                        live.iter().any(|&(.., grant, _)| grant.token == shown.term)
                    })
                },
            ),
            Property::sometimes(
                OBSERVED,
                |model: &LeaseModel<Self>, state: &State<ElectionKeys>| {
                    model.protocol.shown(&state.server).is_some()
                },
            ),
        ]
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::model::{discoveries, Bounds, Faults, AGREES, CLEANUP, EVERY, TOKENS};

    /// Two clients, one campaign each, a TTL of two ticks, four ticks, no
    /// renewals.
    const SMALL: Bounds = Bounds {
        clients: 2,
        ttl: 2,
        drift: 0,
        horizon: 4,
        attempts: 1,
        failures: 0,
        renewals: 0,
        hand_offs: false,
        short_extends: false,
        long_extends: false,
    };

    #[test]
    fn the_election_keeps_its_promises_under_every_survivable_fault() {
        // Renewals are the lock's, checked there.
        let bounds = Bounds {
            renewals: 0,
            ..Bounds::QUICK
        };
        let found = discoveries(LeaseModel::new(
            Election::default(),
            bounds,
            Faults::SURVIVABLE,
        ));
        assert_eq!(found, vec![CLEANUP, OBSERVED, EVERY], "only the examples");
    }

    #[test]
    fn a_restart_without_persistence_is_found_unsafe() {
        let faults = Faults {
            restarts: true,
            ..Faults::default()
        };
        let found = discoveries(LeaseModel::new(Election::default(), SMALL, faults));
        for property in [ONE_LEADER, AGREES, TOKENS] {
            assert!(found.contains(&property), "{property}: {found:?}");
        }
    }

    #[test]
    fn a_read_that_shows_any_term_is_found() {
        let model = LeaseModel::new(
            Election::with_defect(Defect::ShowsAnyTerm),
            SMALL,
            Faults::default(),
        );
        assert!(discoveries(model).contains(&CURRENT_TERM));
    }

    #[test]
    fn a_proclaim_without_compare_is_found() {
        let model = LeaseModel::new(
            Election::with_defect(Defect::ProclaimWithoutCompare),
            SMALL,
            Faults::default(),
        );
        assert!(discoveries(model).contains(&PROCLAIMED));
    }
}
