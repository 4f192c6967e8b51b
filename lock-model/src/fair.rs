//! The fair lock: `fair/acquire.lua`, `fair/release.lua` and
//! `fair/give_up.lua` beside the lock's `lock/extend.lua` and
//! `lock/take_over.lua`, as atomic steps on the lock key, its fencing
//! counter, the line of waiters (the queue and its places' deadlines) and
//! their offers. A waiter that must wait joins the line and offers its
//! attempt; the release that frees the lock grants it to the first live
//! waiter's offer in the same step (`shared/handoff.lua`), and publishes
//! the grant, which the waiter reads or, when the message is lost, takes up
//! with its next attempt.

use stateright::Property;

use crate::line::{Line, Tag};
use crate::lock::{Hold, Lock, LockKeys, MUTEX};
use crate::model::{Answer, Grant, Lease, LeaseModel, Op, Protocol, State};

/// A defect to put back on purpose, to see that the checker finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// A waiter that gives up deletes the lock key whoever holds it
    /// (`fair/give_up.lua` gives back only a grant to an attempt it
    /// offered).
    GiveUpDeletesAny,
}

/// The server's keys for the fair lock's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FairKeys {
    /// The lock key and its counter, as the plain lock's.
    pub lock: LockKeys,
    /// The waiters in line and their offers.
    pub line: Line,
}

/// The fair lock's scripts, its waiters' places lasting `waiter_lease`
/// ticks, with at most one [`Defect`] put back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairLock {
    /// How long a waiter's place lasts unless it tries again, in ticks.
    pub waiter_lease: u64,
    /// A defect put back on purpose, if any.
    pub defect: Option<Defect>,
}

impl FairLock {
    /// A fair lock whose places last `waiter_lease` ticks.
    pub fn new(waiter_lease: u64) -> Self {
        FairLock {
            waiter_lease,
            defect: None,
        }
    }

    /// This lock with `defect` put back.
    pub fn with_defect(mut self, defect: Defect) -> Self {
        self.defect = Some(defect);
        self
    }

    /// `hand_off` (`shared/handoff.lua`): the lock key was just deleted;
    /// grants it to the first live waiter's offer made with its place's
    /// current deadline, for the offer's run but never past the place.
    fn hand_off(&self, server: &mut FairKeys, now: u64) {
        if server.line.places.is_empty() {
            return;
        }
        let Some((head, place)) = server.line.head(now) else {
            return;
        };
        let Some(offer) = server.line.offer_of(head, place, Tag::Lock) else {
            return;
        };
        server.lock.counter += 1;
        server.lock.hold = Some(Hold {
            client: head,
            attempt: offer.attempt,
            token: server.lock.counter,
        });
        server.lock.expires = now + offer.runs.min(place.saturating_sub(now));
        server.line.take(head);
    }

    /// Whether the key holds `client`'s `attempt`.
    fn holds_attempt(server: &FairKeys, client: u8, attempt: u8) -> bool {
        let held = server.lock.hold;
        held.is_some_and(|hold| (hold.client, hold.attempt) == (client, attempt))
    }
}

impl Protocol for FairLock {
    type Server = FairKeys;

    fn empty(&self) -> FairKeys {
        FairKeys {
            lock: Lock::default().empty(),
            line: Line::default(),
        }
    }

    fn expire(&self, server: &mut FairKeys, now: u64) -> bool {
        Lock::default().expire(&mut server.lock, now)
    }

    fn run(
        &self,
        server: &mut FairKeys,
        now: u64,
        ttl: u64,
        client: u8,
        op: Op,
        believed: Option<Lease>,
    ) -> Answer {
        match op {
            Op::Acquire { attempt, earlier } => {
                // A grant a release made to the earlier attempt's offer is
                // taken up for the TTL, and nothing else is written.
                if earlier != 0 && FairLock::holds_attempt(server, client, earlier) {
                    server.lock.expires = now + ttl;
                    let token = server.lock.hold.map_or(0, |hold| hold.token);
                    return Answer::TakenUp(Grant::token(token));
                }
                let head = server.line.head(now);
                if server.lock.hold.is_none() && head.is_none_or(|(waiter, _)| waiter == client) {
                    server.line.withdraw(client);
                    server.lock.counter += 1;
                    let token = server.lock.counter;
                    server.lock.hold = Some(Hold {
                        client,
                        attempt,
                        token,
                    });
                    server.lock.expires = now + ttl;
                    if head.is_some() {
                        server.line.take(client);
                    }
                    return Answer::Granted(Grant::token(token));
                }
                // In line, offering this attempt.
                server
                    .line
                    .wait(client, attempt, Tag::Lock, now, self.waiter_lease, ttl);
                Answer::Held
            }
            Op::Release { attempt } | Op::Cleanup { attempt } => {
                if !FairLock::holds_attempt(server, client, attempt) {
                    // A lost attempt's offer is granted to nobody.
                    server.line.void(client, attempt, Tag::Lock);
                    return Answer::NotHeld;
                }
                server.lock.hold = None;
                self.hand_off(server, now);
                Answer::Released
            }
            Op::GiveUp { offered } => {
                let granted = offered != 0 && FairLock::holds_attempt(server, client, offered);
                server.line.take(client);
                let anyone = server.lock.hold.is_some();
                if granted || (anyone && self.defect == Some(Defect::GiveUpDeletesAny)) {
                    server.lock.hold = None;
                    self.hand_off(server, now);
                }
                Answer::Left
            }
            Op::Extend { .. } | Op::TakeOver { .. } => {
                Lock::default().run(&mut server.lock, now, ttl, client, op, believed)
            }
            // Not the lock's: never sent, since it does not elect.
            Op::Proclaim { .. } => Answer::NotHeld,
        }
    }

    fn holds(&self, server: &FairKeys) -> Vec<(u8, u8, Grant, u64)> {
        Lock::default().holds(&server.lock)
    }

    fn counters(&self, server: &FairKeys) -> Vec<(u8, u64)> {
        Lock::default().counters(&server.lock)
    }

    fn line(&self, server: &FairKeys, now: u64) -> Vec<u8> {
        server.line.live(now)
    }

    fn waiter_lease(&self, _: u8) -> Option<u64> {
        Some(self.waiter_lease)
    }

    fn script(&self, _: u8, op: Op) -> String {
        match op {
            Op::Acquire { attempt, earlier } if earlier != 0 => {
                format!("fair/acquire.lua (attempt {attempt}, having offered attempt {earlier})")
            }
            Op::Acquire { attempt, .. } => format!("fair/acquire.lua (attempt {attempt})"),
            Op::Release { attempt } => format!("fair/release.lua (attempt {attempt})"),
            Op::Cleanup { attempt } => {
                format!("fair/release.lua (cleanup of attempt {attempt})")
            }
            Op::GiveUp { offered } => format!("fair/give_up.lua (offered attempt {offered})"),
            op => Lock::default().script(0, op),
        }
    }

    fn properties() -> Vec<Property<LeaseModel<Self>>> {
        vec![
            // README, "What a lease promises", in fair mode as in any.
            Property::always(MUTEX, |_, state: &State<FairKeys>| {
                state.believers().count() <= 1
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        discoveries, Bounds, ClientDefect, Faults, AGREES, CLEANUP, EVERY, GIVEN_BACK, HANDED_OVER,
        TAKEN_UP, TOKENS,
    };

    /// Two clients, two attempts each (a waiter's second takes up a grant
    /// to its first), a TTL of two ticks, places of one tick, three ticks,
    /// no renewals (the lock's runs check them).
    const SMALL: Bounds = Bounds {
        clients: 2,
        ttl: 2,
        drift: 0,
        horizon: 3,
        attempts: 2,
        failures: 1,
        renewals: 0,
        hand_offs: false,
        short_extends: false,
        long_extends: false,
    };

    fn lock() -> FairLock {
        FairLock::new(1)
    }

    #[test]
    fn the_fair_lock_keeps_its_promises_with_lost_replies_and_messages() {
        let faults = Faults {
            lost_replies: true,
            ..Faults::default()
        };
        let found = discoveries(LeaseModel::new(lock(), SMALL, faults));
        assert_eq!(
            found,
            vec![CLEANUP, HANDED_OVER, GIVEN_BACK, TAKEN_UP, EVERY],
            "only the examples"
        );
    }

    #[test]
    fn a_grant_counted_from_its_message_is_found() {
        let model = LeaseModel::new(lock(), SMALL, Faults::default())
            .with_client_defect(ClientDefect::GrantFromMessage);
        assert!(discoveries(model).contains(&AGREES));
    }

    #[test]
    fn a_give_up_that_deletes_any_hold_is_found() {
        let model = LeaseModel::new(
            lock().with_defect(Defect::GiveUpDeletesAny),
            SMALL,
            Faults::default(),
        );
        assert!(discoveries(model).contains(&MUTEX));
    }

    /// A waiter's attempt whose reply was lost, naming its offer, runs
    /// after the waiter took the grant to that offer and extended it to a
    /// longer TTL: it sets the acquire's TTL back. The engine trusts no
    /// renewal past that TTL; one that forgets the attempt is found.
    #[test]
    fn a_stray_take_up_is_bounded_and_forgetting_it_is_found() {
        // It all happens within a tick: the stray sets the key back at once.
        let bounds = Bounds {
            renewals: 1,
            long_extends: true,
            horizon: 1,
            ..SMALL
        };
        let faults = Faults {
            lost_replies: true,
            ..Faults::default()
        };
        let found = discoveries(LeaseModel::new(lock(), bounds, faults));
        for property in [MUTEX, AGREES, TOKENS] {
            assert!(!found.contains(&property), "{property}: {found:?}");
        }
        let forgets = LeaseModel::new(lock(), bounds, faults)
            .with_client_defect(ClientDefect::ForgetsStrayTakeUps);
        assert!(discoveries(forgets).contains(&AGREES));
    }
}
