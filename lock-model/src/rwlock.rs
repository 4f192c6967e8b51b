//! The read-write lock: `rw/acquire.lua`, `rw/renew.lua`, `rw/release.lua`
//! and `rw/take_over.lua` as atomic steps on its holds (id to deadline and
//! `r:<epoch>` or `w:<token>`), its write counter and its line of waiting
//! writers. Readers prefer writers (a read waits while a writer waits, the
//! default); writers prefer readers, so they make no offers and a release
//! hands nothing over on the server (the server-side hand-off is not in
//! this model yet).

use stateright::Property;

use crate::line::{Line, Tag};
use crate::model::{Answer, Grant, Lease, LeaseModel, Op, Protocol, State};

/// A defect to put back on purpose, to see that the checker finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// A read is granted beside another owner's write (`rw/acquire.lua`
    /// blocks a read on any other owner's live write).
    ReadBesideWrite,
    /// A read's epoch is 0, not the write counter (`rw/acquire.lua` gives a
    /// read the counter's value).
    EpochFromZero,
    /// A resumed hold keeps the handed-off hold's owner (`resume` gives it
    /// a new one), so that owner's next acquire re-enters beside it.
    ResumeKeepsOwner,
    /// A hold is taken over beside another hold of its owner
    /// (`rw/take_over.lua` refuses when one of the two is a write).
    TakeOverSplitsOwner,
    /// A release grants the write to the next writer's offer while reads
    /// are live (`rw_hand_off` grants only when no hold is).
    HandOffBesideReads,
}

/// A read-write lock whose clients each read or write, with at most one
/// [`Defect`] put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwLock {
    /// Whether each client writes (client `i` writes if
    /// `writers[i % writers.len()]`), or reads.
    pub writers: Vec<bool>,
    /// How long a waiting writer's place lasts unless it tries again, in
    /// ticks.
    pub waiter_lease: u64,
    /// Whether writers prefer writers, so that a waiting writer offers its
    /// attempt and the release that frees the lock grants it the write on
    /// the server (`rw_hand_off`); otherwise they prefer readers, and make
    /// no offers.
    pub hands_over: bool,
    /// A defect put back on purpose, if any.
    pub defect: Option<Defect>,
}

impl RwLock {
    /// A read-write lock whose clients write as `writers` says, with places
    /// that last `waiter_lease` ticks.
    pub fn new(writers: &[bool], waiter_lease: u64) -> Self {
        RwLock {
            writers: writers.to_vec(),
            waiter_lease,
            hands_over: false,
            defect: None,
        }
    }

    /// This lock with writers that prefer writers: they offer their
    /// attempts, and a release hands the write over on the server.
    pub fn handing_over(mut self) -> Self {
        self.hands_over = true;
        self
    }

    /// `rw_hand_off`: when no hold is live, grants the write to the first
    /// live waiting writer's offer made with its place's current deadline
    /// (the next token, for the offer's run but never past the place), and
    /// takes it out of the line. Whether it granted.
    fn hand_off(&self, server: &mut RwKeys, now: u64) -> bool {
        let reads_live = !server.holds.is_empty();
        if (reads_live && self.defect != Some(Defect::HandOffBesideReads))
            || server.line.places.is_empty()
        {
            return false;
        }
        let Some((head, place)) = server.line.head(now) else {
            return false;
        };
        let Some(offer) = server.line.offer_of(head, place, Tag::Write) else {
            return false;
        };
        server.counter += 1;
        server.holds.push(RwHold {
            client: head,
            attempt: offer.attempt,
            owner: Some(head),
            write: true,
            token: server.counter,
            expires: now + offer.runs.min(place.saturating_sub(now)),
        });
        server.holds.sort_unstable();
        server.line.take(head);
        true
    }

    /// This lock with `defect` put back.
    pub fn with_defect(mut self, defect: Defect) -> Self {
        self.defect = Some(defect);
        self
    }

    /// Whether `client` writes.
    pub fn writes(&self, client: u8) -> bool {
        self.writers[usize::from(client) % self.writers.len()]
    }
}

/// A live hold, as its sorted-set member and its mode entry store it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RwHold {
    /// The client whose attempt it is.
    pub client: u8,
    /// Which of that client's attempts.
    pub attempt: u8,
    /// The client whose owner it has, or `None` for a hold resumed from a
    /// hand-off token, whose owner is made for it alone (`resume` gives the
    /// successor a new owner). An owner's holds re-enter beside each other.
    pub owner: Option<u8>,
    /// Whether it is the write.
    pub write: bool,
    /// A write's token, or a read's epoch.
    pub token: u64,
    /// Its deadline, by the server's clock.
    pub expires: u64,
}

impl RwHold {
    /// What a hold of `write` (or a read) with `token` gives.
    fn grant_of(write: bool, token: u64) -> Grant {
        if write {
            Grant::token(token)
        } else {
            Grant::epoch(token)
        }
    }

    /// What this hold gives: its mode and token, as its entry stores them.
    fn grant(&self) -> Grant {
        RwHold::grant_of(self.write, self.token)
    }
}

/// The server's keys for the read-write lock's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RwKeys {
    /// The live holds, sorted.
    pub holds: Vec<RwHold>,
    /// The write counter: the last write's token (0 before the first).
    pub counter: u64,
    /// The waiting writers in line, and their offers.
    pub line: Line,
    /// Whether a hold expired since a script last ran: the next script
    /// drops it, and a release or a give-up then lets a waiter in.
    pub expired: bool,
}

/// The property the read-write lock exists for.
pub const EXCLUSIVE: &str = "no writer believed valid beside another hold believed valid";
/// A read's epoch is the token of the write before it.
pub const EPOCH: &str = "a read's epoch is the last write's token";
/// The example of reads shared.
pub const SHARED: &str = "two clients read at once";

impl Protocol for RwLock {
    type Server = RwKeys;

    fn empty(&self) -> RwKeys {
        RwKeys {
            holds: Vec::new(),
            counter: 0,
            line: Line::default(),
            expired: false,
        }
    }

    fn expire(&self, server: &mut RwKeys, now: u64) -> bool {
        let before = server.holds.len();
        server.holds.retain(|hold| hold.expires > now);
        let expired = server.holds.len() < before;
        server.expired |= expired && self.hands_over;
        expired
    }

    fn run(
        &self,
        server: &mut RwKeys,
        now: u64,
        ttl: u64,
        client: u8,
        op: Op,
        _: Option<Lease>,
    ) -> Answer {
        let find = |server: &RwKeys, client: u8, attempt: u8| {
            server
                .holds
                .iter()
                .position(|hold| (hold.client, hold.attempt) == (client, attempt))
        };
        // Every script drops the expired holds first.
        let expired = std::mem::take(&mut server.expired);
        match op {
            Op::Acquire { attempt, earlier } => {
                let write = self.writes(client);
                // A write a release granted to the earlier attempt's offer
                // is taken up for the TTL, and nothing else is written.
                if let (true, true, Some(at)) =
                    (self.hands_over, write, find(server, client, earlier))
                {
                    if server.holds[at].write {
                        server.holds[at].expires = now + ttl;
                        return Answer::TakenUp(server.holds[at].grant());
                    }
                }
                let mine = |hold: &&RwHold| hold.owner == Some(client);
                let own_write = server.holds.iter().filter(mine).find(|hold| hold.write);
                let own_write = own_write.map(|hold| hold.token);
                let own_read = server.holds.iter().filter(mine).any(|hold| !hold.write);
                let reads_past = self.defect == Some(Defect::ReadBesideWrite);
                let blocked = server
                    .holds
                    .iter()
                    .filter(|hold| hold.owner != Some(client))
                    .any(|hold| write || (hold.write && !reads_past));
                // `line_head`: dead places leave from the head.
                let head = if write && own_write.is_none() {
                    server.line.head(now).map(|(waiter, _)| waiter)
                } else {
                    None
                };
                // A read waits while a writer waits, unless it re-enters.
                let reentry = own_read || own_write.is_some();
                let writers_wait = !server.line.live(now).is_empty();
                let waiting_writer = !(write || reentry) && writers_wait;
                if blocked || head.is_some_and(|waiter| waiter != client) || waiting_writer {
                    if write && self.hands_over {
                        let lease = self.waiter_lease;
                        server
                            .line
                            .wait(client, attempt, Tag::Write, now, lease, ttl);
                    } else if write {
                        server.line.join(client, now, self.waiter_lease);
                    }
                    return Answer::Held;
                }
                let token = if write {
                    own_write.unwrap_or_else(|| {
                        server.counter += 1;
                        server.counter
                    })
                } else if self.defect == Some(Defect::EpochFromZero) {
                    0
                } else {
                    server.counter
                };
                server.holds.push(RwHold {
                    client,
                    attempt,
                    owner: Some(client),
                    write,
                    token,
                    expires: now + ttl,
                });
                server.holds.sort_unstable();
                if head.is_some() {
                    server.line.take(client);
                }
                if write {
                    server.line.withdraw(client);
                }
                Answer::Granted(RwHold::grant_of(write, token))
            }
            Op::Extend { attempt, .. } => match find(server, client, attempt) {
                Some(at) => {
                    server.holds[at].expires = now + ttl;
                    Answer::Extended
                }
                None => Answer::NotHeld,
            },
            Op::Release { attempt } | Op::Cleanup { attempt } => {
                let mut wake = expired;
                let answer = match find(server, client, attempt) {
                    Some(at) => {
                        let released = server.holds.remove(at);
                        wake |= released.write || server.holds.is_empty();
                        Answer::Released
                    }
                    None => Answer::NotHeld,
                };
                // With writers in line: a lost attempt's offer is granted
                // to nobody, and a release that may let one in hands over.
                if !server.line.places.is_empty() {
                    server.line.void(client, attempt, Tag::Write);
                    if wake {
                        self.hand_off(server, now);
                    }
                }
                answer
            }
            // The writer leaves the line, gives back a write granted to its
            // offer, and the next writer may be granted.
            Op::GiveUp { offered } => {
                let granted = find(server, client, offered).filter(|&at| server.holds[at].write);
                if let Some(at) = granted {
                    server.holds.remove(at);
                }
                let placed = server
                    .line
                    .places
                    .iter()
                    .any(|&(waiter, _)| waiter == client);
                server.line.take(client);
                if granted.is_some() || placed || expired {
                    self.hand_off(server, now);
                }
                Answer::Left
            }
            // The entry, `r:<epoch>` or `w:<token>`, must be the token's,
            // and the hold must not share its owner with another hold that
            // the new owner could not stand beside.
            Op::TakeOver { from, attempt } => match find(server, from.client, from.attempt) {
                Some(at) if server.holds[at].grant() == from.claim => {
                    let taken = server.holds[at];
                    let split = server.holds.iter().enumerate().any(|(other, hold)| {
                        other != at
                            && self.defect != Some(Defect::TakeOverSplitsOwner)
                            && hold.owner == taken.owner
                            && (hold.write || taken.write)
                    });
                    if split {
                        return Answer::Refused;
                    }
                    let owner = if self.defect == Some(Defect::ResumeKeepsOwner) {
                        taken.owner
                    } else {
                        None
                    };
                    server.holds[at] = RwHold {
                        client,
                        attempt,
                        owner,
                        expires: now + ttl,
                        ..taken
                    };
                    server.holds.sort_unstable();
                    Answer::TakenOver
                }
                _ => Answer::NotHeld,
            },
            // Not the read-write lock's: never sent, since it does not elect.
            Op::Proclaim { .. } => Answer::NotHeld,
        }
    }

    fn holds(&self, server: &RwKeys) -> Vec<(u8, u8, Grant, u64)> {
        server
            .holds
            .iter()
            .map(|hold| (hold.client, hold.attempt, hold.grant(), hold.expires))
            .collect()
    }

    fn counters(&self, server: &RwKeys) -> Vec<(u8, u64)> {
        (server.counter > 0)
            .then_some((0, server.counter))
            .into_iter()
            .collect()
    }

    fn line(&self, server: &RwKeys, now: u64) -> Vec<u8> {
        server.line.live(now)
    }

    /// Writers that prefer writers queue and offer; readers never do.
    fn waiter_lease(&self, client: u8) -> Option<u64> {
        (self.hands_over && self.writes(client)).then_some(self.waiter_lease)
    }

    fn script(&self, _: u8, op: Op) -> String {
        match op {
            Op::Acquire { attempt, earlier } if earlier != 0 => {
                format!("rw/acquire.lua (attempt {attempt}, having offered attempt {earlier})")
            }
            Op::Acquire { attempt, .. } => format!("rw/acquire.lua (attempt {attempt})"),
            Op::Extend { attempt, ask } => {
                format!("rw/renew.lua (attempt {attempt}{})", ask.described())
            }
            Op::Release { attempt } => format!("rw/release.lua (attempt {attempt})"),
            Op::Cleanup { attempt } => format!("rw/release.lua (cleanup of attempt {attempt})"),
            Op::TakeOver { from, attempt } => format!(
                "rw/take_over.lua (attempt {attempt}, from client {}'s attempt {} claiming \
                 token {})",
                from.client, from.attempt, from.claim.token
            ),
            Op::GiveUp { offered } => format!("rw/give_up.lua (offered attempt {offered})"),
            Op::Proclaim { .. } => format!("{op:?}, which the read-write lock has not"),
        }
    }

    fn properties() -> Vec<Property<LeaseModel<Self>>> {
        vec![
            // `RwLock`'s docs: a write excludes every other hold.
            Property::always(EXCLUSIVE, |_, state: &State<RwKeys>| {
                let writes = state.believers().filter(|(_, lease)| !lease.grant.shared);
                writes.count() == 0 || state.believers().count() <= 1
            }),
            // `ReadGuard::epoch`: the token of the last write granted.
            Property::always(EPOCH, |_, state: &State<RwKeys>| !state.epoch_stale),
            Property::sometimes(SHARED, |_, state: &State<RwKeys>| {
                state
                    .believers()
                    .filter(|(_, lease)| lease.grant.shared)
                    .count()
                    >= 2
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

    /// A writer and two readers, one attempt each, a TTL of two ticks,
    /// four ticks, no renewals.
    const SMALL: Bounds = Bounds {
        clients: 3,
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

    fn lock() -> RwLock {
        RwLock::new(&[true, false, false], 2)
    }

    #[test]
    fn the_rw_lock_keeps_its_promises_with_lost_replies() {
        let faults = Faults {
            lost_replies: true,
            ..Faults::default()
        };
        let bounds = Bounds {
            failures: 1,
            ..SMALL
        };
        let found = discoveries(LeaseModel::new(lock(), bounds, faults));
        assert_eq!(found, vec![CLEANUP, EVERY, SHARED], "only the examples");
    }

    #[test]
    fn a_restart_without_persistence_is_found_unsafe() {
        let faults = Faults {
            restarts: true,
            ..Faults::default()
        };
        let bounds = Bounds {
            clients: 2,
            attempts: 2,
            ..SMALL
        };
        let found = discoveries(LeaseModel::new(
            RwLock::new(&[true, false], 2),
            bounds,
            faults,
        ));
        for property in [EXCLUSIVE, EPOCH, AGREES, TOKENS] {
            assert!(found.contains(&property), "{property}: {found:?}");
        }
    }

    #[test]
    fn a_read_beside_a_write_is_found() {
        let model = LeaseModel::new(
            lock().with_defect(Defect::ReadBesideWrite),
            SMALL,
            Faults::default(),
        );
        assert!(discoveries(model).contains(&EXCLUSIVE));
    }

    #[test]
    fn an_epoch_from_zero_is_found() {
        let model = LeaseModel::new(
            lock().with_defect(Defect::EpochFromZero),
            SMALL,
            Faults::default(),
        );
        assert!(discoveries(model).contains(&EPOCH));
    }

    /// Two writers, two attempts each, handing writes off: an owner that
    /// handed its write off and writes again must not re-enter beside the
    /// process that resumed it.
    fn hand_offs(lock: RwLock) -> Vec<&'static str> {
        let bounds = Bounds {
            clients: 2,
            attempts: 2,
            hand_offs: true,
            ..SMALL
        };
        discoveries(LeaseModel::new(lock, bounds, Faults::default()))
    }

    #[test]
    fn the_rw_lock_keeps_its_promises_with_hand_offs() {
        let found = hand_offs(RwLock::new(&[true, true], 2));
        assert_eq!(found, vec![RESUMED, EVERY], "only the examples");
    }

    #[test]
    fn a_resume_that_keeps_the_owner_is_found() {
        let lock = RwLock::new(&[true, true], 2).with_defect(Defect::ResumeKeepsOwner);
        assert!(hand_offs(lock).contains(&EXCLUSIVE));
    }

    #[test]
    fn a_take_over_beside_the_owners_other_hold_is_found() {
        let lock = RwLock::new(&[true, true], 2).with_defect(Defect::TakeOverSplitsOwner);
        assert!(hand_offs(lock).contains(&EXCLUSIVE));
    }

    /// Two writers that prefer writers, two attempts each (a waiter's
    /// second takes up a grant to its first), places of one tick, three
    /// ticks, no renewals.
    #[test]
    fn writers_handed_over_on_the_server_keep_the_promises() {
        let bounds = Bounds {
            clients: 2,
            horizon: 3,
            attempts: 2,
            failures: 1,
            ..SMALL
        };
        let faults = Faults {
            lost_replies: true,
            ..Faults::default()
        };
        let lock = RwLock::new(&[true, true], 1).handing_over();
        let found = discoveries(LeaseModel::new(lock, bounds, faults));
        for property in [EXCLUSIVE, EPOCH, AGREES, TOKENS] {
            assert!(!found.contains(&property), "{property}: {found:?}");
        }
        for example in [HANDED_OVER, TAKEN_UP, GIVEN_BACK, EVERY] {
            assert!(found.contains(&example), "{example}: {found:?}");
        }
    }

    /// Two readers hold, a writer waits (its place lasting as long as a
    /// lease), one read expires and its reader's release comes late: a
    /// release that hands the write over beside the other read is found.
    #[test]
    fn a_hand_off_beside_reads_is_found() {
        let bounds = Bounds {
            horizon: 3,
            ..SMALL
        };
        let lock = RwLock::new(&[true, false, false], 2)
            .handing_over()
            .with_defect(Defect::HandOffBesideReads);
        let found = discoveries(LeaseModel::new(lock, bounds, Faults::default()));
        assert!(found.contains(&EXCLUSIVE), "{found:?}");
    }
}
