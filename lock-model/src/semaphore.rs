//! The semaphore: `semaphore/acquire.lua`, `semaphore/renew.lua`,
//! `semaphore/release.lua` and `semaphore/take_over.lua` as atomic steps on
//! its permits (id to deadline and `<weight>:<slot>:<token>`) and its
//! per-slot fencing counters; in fair mode, with its line of waiters and
//! their offers, the release that grants permits to the waiters at the head
//! of the line while their weights fit (`sem_hand_off`), and
//! `semaphore/give_up.lua`.

use stateright::Property;

use crate::line::{Line, Tag};
use crate::model::{Answer, Grant, Lease, LeaseModel, Op, Protocol, State};

/// A defect to put back on purpose, to see that the checker finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// A grant takes the slot numbered by the count of live permits, not
    /// the lowest free one (`semaphore/acquire.lua` skips every slot a live
    /// permit has).
    SlotByCount,
    /// A grant counts the live permits, not their weights, against the
    /// limit (`semaphore/acquire.lua` sums each live permit's weight).
    CountsPermits,
    /// A release grants the head of the line its offer whether or not its
    /// weight fits (`sem_hand_off` stops at a head that does not fit).
    HandOffPastTheLimit,
}

/// A semaphore of `limit` whose clients each ask for one weight, with at
/// most one [`Defect`] put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semaphore {
    /// How many permits the semaphore has.
    pub limit: u8,
    /// The weight each client asks for, by client (client `i` asks for
    /// `weights[i % weights.len()]`), each from 1 to the limit.
    pub weights: Vec<u8>,
    /// In fair mode, how long a waiter's place lasts unless it tries
    /// again, in ticks; `None` outside fair mode.
    pub fair: Option<u64>,
    /// A defect put back on purpose, if any.
    pub defect: Option<Defect>,
}

impl Semaphore {
    /// A semaphore of `limit` whose clients ask for `weights`.
    pub fn new(limit: u8, weights: &[u8]) -> Self {
        Semaphore {
            limit,
            weights: weights.to_vec(),
            fair: None,
            defect: None,
        }
    }

    /// This semaphore in fair mode, its waiters' places lasting
    /// `waiter_lease` ticks.
    pub fn in_fair_mode(mut self, waiter_lease: u64) -> Self {
        self.fair = Some(waiter_lease);
        self
    }

    /// This semaphore with `defect` put back.
    pub fn with_defect(mut self, defect: Defect) -> Self {
        self.defect = Some(defect);
        self
    }

    /// The weight `client` asks for.
    pub fn weight(&self, client: u8) -> u8 {
        self.weights[usize::from(client) % self.weights.len()]
    }

    /// The lowest slot no live permit has.
    fn free_slot(server: &SemaphoreKeys) -> u8 {
        let taken = |slot: &u8| server.permits.iter().any(|p| p.grant.slot == *slot);
        (0..).find(|slot| !taken(slot)).unwrap_or(0)
    }

    /// The next token of `slot`.
    fn next_token(server: &mut SemaphoreKeys, slot: u8) -> u64 {
        let index = usize::from(slot);
        if server.fences.len() <= index {
            server.fences.resize(index + 1, 0);
        }
        server.fences[index] += 1;
        server.fences[index]
    }

    /// `sem_hand_off`: grants each live waiter at the head of the line its
    /// offer while its weight fits beside the live permits (the lowest free
    /// slot and its next token, for the offer's run but never past the
    /// place), each taken out of the line; stops at a head that does not
    /// fit or has no current offer.
    fn hand_off(&self, server: &mut SemaphoreKeys, now: u64) {
        if server.line.places.is_empty() {
            return;
        }
        let mut used: u8 = server.permits.iter().map(|p| p.grant.weight).sum();
        while let Some((head, place)) = server.line.head(now) {
            let Some(offer) = server.line.offer_of(head, place, Tag::Permits(1)) else {
                break;
            };
            if used + offer.weight > self.limit && self.defect != Some(Defect::HandOffPastTheLimit)
            {
                break;
            }
            let slot = Semaphore::free_slot(server);
            let grant = Grant {
                token: Semaphore::next_token(server, slot),
                slot,
                weight: offer.weight,
                shared: false,
            };
            server.permits.push(Permit {
                client: head,
                attempt: offer.attempt,
                grant,
                expires: now + offer.runs.min(place.saturating_sub(now)),
            });
            server.permits.sort_unstable();
            used += offer.weight;
            server.line.take(head);
        }
    }
}

/// A live permit, as its sorted-set member and its entry store it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Permit {
    /// The client whose attempt it is (its id is `<owner>:<nonce>`).
    pub client: u8,
    /// Which of that client's attempts.
    pub attempt: u8,
    /// Its weight, slot and token.
    pub grant: Grant,
    /// Its deadline, by the server's clock.
    pub expires: u64,
}

/// The server's keys for the semaphore's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SemaphoreKeys {
    /// The live permits, sorted.
    pub permits: Vec<Permit>,
    /// The last token issued in each slot (0 for none).
    pub fences: Vec<u64>,
    /// In fair mode, the waiters in line and their offers.
    pub line: Line,
    /// In fair mode, the weight of the permits that expired since a script
    /// last ran: the next script drops them, and a release counts them as
    /// freed, which lets it grant the waiters.
    pub expired: u8,
}

/// The property the semaphore exists for.
pub const WITHIN_LIMIT: &str = "the permits believed valid weigh at most the limit";
/// The property per-slot fencing rests on.
pub const OWN_SLOTS: &str = "no two permits believed valid share a slot";
/// The example of the semaphore used by two at once.
pub const SIDE_BY_SIDE: &str = "two clients hold permits at once";

impl Protocol for Semaphore {
    type Server = SemaphoreKeys;

    fn empty(&self) -> SemaphoreKeys {
        SemaphoreKeys {
            permits: Vec::new(),
            fences: Vec::new(),
            line: Line::default(),
            expired: 0,
        }
    }

    fn expire(&self, server: &mut SemaphoreKeys, now: u64) -> bool {
        let before = server.permits.len();
        let gone: u8 = server
            .permits
            .iter()
            .filter(|permit| permit.expires <= now)
            .map(|permit| permit.grant.weight)
            .sum();
        server.permits.retain(|permit| permit.expires > now);
        if self.fair.is_some() {
            server.expired = server.expired.saturating_add(gone);
        }
        server.permits.len() < before
    }

    fn run(
        &self,
        server: &mut SemaphoreKeys,
        now: u64,
        ttl: u64,
        client: u8,
        op: Op,
        _: Option<Lease>,
    ) -> Answer {
        let find = |server: &SemaphoreKeys, client: u8, attempt: u8| {
            server
                .permits
                .iter()
                .position(|permit| (permit.client, permit.attempt) == (client, attempt))
        };
        // Every script drops the expired permits first (`sem_open`,
        // `sem_drop`).
        let expired = std::mem::take(&mut server.expired);
        match op {
            Op::Acquire { attempt, earlier } => {
                // A grant a release made to the earlier attempt's offer is
                // taken up for the TTL, and nothing else is written.
                if let (Some(_), Some(at)) = (self.fair, find(server, client, earlier)) {
                    server.permits[at].expires = now + ttl;
                    return Answer::TakenUp(server.permits[at].grant);
                }
                let weight = self.weight(client);
                let used: u8 = if self.defect == Some(Defect::CountsPermits) {
                    server.permits.len() as u8
                } else {
                    server
                        .permits
                        .iter()
                        .map(|permit| permit.grant.weight)
                        .sum()
                };
                let head = self.fair.and_then(|_| server.line.head(now));
                if used + weight > self.limit || head.is_some_and(|(waiter, _)| waiter != client) {
                    if let Some(lease) = self.fair {
                        server
                            .line
                            .wait(client, attempt, Tag::Permits(weight), now, lease, ttl);
                    }
                    return Answer::Held;
                }
                let slot = if self.defect == Some(Defect::SlotByCount) {
                    server.permits.len() as u8
                } else {
                    Semaphore::free_slot(server)
                };
                let grant = Grant {
                    token: Semaphore::next_token(server, slot),
                    slot,
                    weight,
                    shared: false,
                };
                server.permits.push(Permit {
                    client,
                    attempt,
                    grant,
                    expires: now + ttl,
                });
                server.permits.sort_unstable();
                if self.fair.is_some() {
                    server.line.withdraw(client);
                    if head.is_some() {
                        server.line.take(client);
                    }
                }
                Answer::Granted(grant)
            }
            Op::Extend { attempt, .. } => match find(server, client, attempt) {
                Some(at) => {
                    server.permits[at].expires = now + ttl;
                    Answer::Extended
                }
                None => Answer::NotHeld,
            },
            Op::Release { attempt } | Op::Cleanup { attempt } => {
                let mut freed = expired;
                let answer = match find(server, client, attempt) {
                    Some(at) => {
                        freed += server.permits.remove(at).grant.weight;
                        Answer::Released
                    }
                    None => Answer::NotHeld,
                };
                // With someone in line: a lost attempt's offer is granted
                // to nobody, and what the release freed goes to the line.
                if self.fair.is_some() && !server.line.places.is_empty() {
                    server.line.void(client, attempt, Tag::Permits(1));
                    if freed > 0 {
                        self.hand_off(server, now);
                    }
                }
                answer
            }
            // The waiter leaves the line, gives back a permit granted to
            // its offer, and the line is served.
            Op::GiveUp { offered } => {
                if let Some(at) = find(server, client, offered) {
                    server.permits.remove(at);
                }
                server.line.take(client);
                self.hand_off(server, now);
                Answer::Left
            }
            Op::TakeOver { from, attempt } => match find(server, from.client, from.attempt) {
                // The entry, `<weight>:<slot>:<token>`, must be the token's.
                Some(at) if server.permits[at].grant == from.claim => {
                    server.permits[at] = Permit {
                        client,
                        attempt,
                        grant: from.claim,
                        expires: now + ttl,
                    };
                    server.permits.sort_unstable();
                    Answer::TakenOver
                }
                _ => Answer::NotHeld,
            },
            // Not the semaphore's: never sent, since it does not elect.
            Op::Proclaim { .. } => Answer::NotHeld,
        }
    }

    fn holds(&self, server: &SemaphoreKeys) -> Vec<(u8, u8, Grant, u64)> {
        server
            .permits
            .iter()
            .map(|permit| (permit.client, permit.attempt, permit.grant, permit.expires))
            .collect()
    }

    fn counters(&self, server: &SemaphoreKeys) -> Vec<(u8, u64)> {
        (0..)
            .zip(server.fences.iter().copied())
            .filter(|&(_, last)| last > 0)
            .collect()
    }

    fn line(&self, server: &SemaphoreKeys, now: u64) -> Vec<u8> {
        server.line.live(now)
    }

    fn waiter_lease(&self, _: u8) -> Option<u64> {
        self.fair
    }

    fn script(&self, _: u8, op: Op) -> String {
        match op {
            Op::Acquire { attempt, earlier } if earlier != 0 => format!(
                "semaphore/acquire.lua (attempt {attempt}, having offered attempt {earlier})"
            ),
            Op::Acquire { attempt, .. } => {
                format!("semaphore/acquire.lua (attempt {attempt})")
            }
            Op::Extend { attempt, ask } => {
                format!("semaphore/renew.lua (attempt {attempt}{})", ask.described())
            }
            Op::Release { attempt } => format!("semaphore/release.lua (attempt {attempt})"),
            Op::Cleanup { attempt } => {
                format!("semaphore/release.lua (cleanup of attempt {attempt})")
            }
            Op::TakeOver { from, attempt } => format!(
                "semaphore/take_over.lua (attempt {attempt}, from client {}'s attempt {} \
                 claiming token {} in slot {}, weight {})",
                from.client, from.attempt, from.claim.token, from.claim.slot, from.claim.weight
            ),
            Op::GiveUp { offered } => {
                format!("semaphore/give_up.lua (offered attempt {offered})")
            }
            Op::Proclaim { .. } => format!("{op:?}, which the semaphore has not"),
        }
    }

    fn properties() -> Vec<Property<LeaseModel<Self>>> {
        vec![
            // `Semaphore`'s docs: at most `limit` weight of permits is
            // valid at any instant.
            Property::always(
                WITHIN_LIMIT,
                |model: &LeaseModel<Self>, state: &State<SemaphoreKeys>| {
                    let weight: u8 = state.believers().map(|(_, lease)| lease.grant.weight).sum();
                    weight <= model.protocol.limit
                },
            ),
            // `PermitGuard::slot`: no two valid permits share a slot, so a
            // resource fenced per slot sees one writer at a time.
            Property::always(OWN_SLOTS, |_, state: &State<SemaphoreKeys>| {
                let mut slots: Vec<u8> = state
                    .believers()
                    .map(|(_, lease)| lease.grant.slot)
                    .collect();
                let all = slots.len();
                slots.sort_unstable();
                slots.dedup();
                slots.len() == all
            }),
            Property::sometimes(SIDE_BY_SIDE, |_, state: &State<SemaphoreKeys>| {
                state.believers().count() >= 2
            }),
        ]
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::model::{
        discoveries, Bounds, Faults, AGREES, CLEANUP, EVERY, GIVEN_BACK, HANDED_OVER, RESUMED,
        TAKEN_UP, TOKENS,
    };

    #[test]
    fn the_semaphore_keeps_its_promises_under_every_survivable_fault() {
        let semaphore = Semaphore::new(2, &[1, 1]);
        let found = discoveries(LeaseModel::new(
            semaphore,
            Bounds::QUICK,
            Faults::SURVIVABLE,
        ));
        assert_eq!(
            found,
            vec![CLEANUP, EVERY, SIDE_BY_SIDE],
            "only the examples"
        );
    }

    #[test]
    fn weights_and_hand_offs_keep_the_promises() {
        let bounds = Bounds {
            hand_offs: true,
            ..Bounds::SMALL
        };
        let semaphore = Semaphore::new(2, &[1, 2]);
        let found = discoveries(LeaseModel::new(semaphore, bounds, Faults::default()));
        // Side by side: the weight of one resumed by the client of two,
        // beside a new permit of the first client's.
        assert_eq!(
            found,
            vec![RESUMED, EVERY, SIDE_BY_SIDE],
            "only the examples"
        );
    }

    #[test]
    fn a_restart_without_persistence_is_found_unsafe() {
        let faults = Faults {
            restarts: true,
            ..Faults::default()
        };
        let found = discoveries(LeaseModel::new(
            Semaphore::new(1, &[1]),
            Bounds::SMALL,
            faults,
        ));
        for property in [WITHIN_LIMIT, OWN_SLOTS, AGREES, TOKENS] {
            assert!(found.contains(&property), "{property}: {found:?}");
        }
    }

    #[test]
    fn a_slot_by_count_is_found() {
        let semaphore = Semaphore::new(2, &[1, 1]).with_defect(Defect::SlotByCount);
        let found = discoveries(LeaseModel::new(semaphore, Bounds::SMALL, Faults::default()));
        assert!(found.contains(&OWN_SLOTS), "{found:?}");
    }

    #[test]
    fn counting_permits_for_weights_is_found() {
        let semaphore = Semaphore::new(2, &[1, 2]).with_defect(Defect::CountsPermits);
        let found = discoveries(LeaseModel::new(semaphore, Bounds::SMALL, Faults::default()));
        assert!(found.contains(&WITHIN_LIMIT), "{found:?}");
    }

    /// A fair semaphore of 2 whose clients ask for 1 and 2: two acquires
    /// each (a waiter's second takes up a grant to its first), places of
    /// one tick, three ticks, no renewals.
    fn fair(faults: Faults) -> Vec<&'static str> {
        let bounds = Bounds {
            horizon: 3,
            failures: 1,
            renewals: 0,
            ..Bounds::SMALL
        };
        let semaphore = Semaphore::new(2, &[1, 2]).in_fair_mode(1);
        discoveries(LeaseModel::new(semaphore, bounds, faults))
    }

    #[test]
    fn the_fair_semaphore_keeps_its_promises_with_lost_replies_and_messages() {
        let faults = Faults {
            lost_replies: true,
            ..Faults::default()
        };
        let found = fair(faults);
        for property in [WITHIN_LIMIT, OWN_SLOTS, AGREES, TOKENS] {
            assert!(!found.contains(&property), "{property}: {found:?}");
        }
        for example in [HANDED_OVER, TAKEN_UP, GIVEN_BACK, CLEANUP, EVERY] {
            assert!(found.contains(&example), "{example}: {found:?}");
        }
    }

    /// A permit of 1 is released beside another while a waiter for 2 is
    /// at the head of the line: three clients, one acquire each.
    #[test]
    fn a_hand_off_past_the_limit_is_found() {
        let bounds = Bounds {
            clients: 3,
            horizon: 2,
            attempts: 1,
            renewals: 0,
            ..Bounds::SMALL
        };
        let semaphore = Semaphore::new(2, &[1, 2, 1])
            .in_fair_mode(1)
            .with_defect(Defect::HandOffPastTheLimit);
        let found = discoveries(LeaseModel::new(semaphore, bounds, Faults::default()));
        assert!(found.contains(&WITHIN_LIMIT), "{found:?}");
    }
}
