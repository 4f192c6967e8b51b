//! Primitives of different kinds on one name, as the docs promise they mix
//! (README, "Every kind of hold on one name (a lock, a read or write, a
//! permit) excludes the others"): a plain lock (`lock/acquire_token.lua`),
//! a multi-key lock of the name and another (`multi/acquire.lua`,
//! `renew.lua`, `release.lua`), a semaphore's permits and a read-write
//! lock's reads and writes, each client taking one kind. The name's main
//! key is one key whatever the kind (a lock's string, a sorted set of
//! permits or of reads and writes), so a hold of one kind is in the way of
//! every other; a plain lock, a multi-key lock and a write issue tokens
//! from the name's one counter, whose last token is a read's epoch.
//!
//! Each kind's scripts are its own model's ([`Lock`], [`Semaphore`],
//! [`RwLock`]) on its own part of the keys; what this model adds is where
//! they meet: an acquire that finds another kind's hold, and the counter
//! they share. Hand-offs stay within a kind (each kind's own runs check
//! them), and the semaphore and writers wait outside fair mode.

use stateright::Property;

use crate::fair::{FairKeys, FairLock};
use crate::line::Tag;
use crate::lock::{Hold, Lock, LockKeys};
use crate::model::{Answer, Grant, Lease, LeaseModel, Op, Protocol, State};
use crate::rwlock::{RwKeys, RwLock, EPOCH};
use crate::semaphore::{Semaphore, SemaphoreKeys, OWN_SLOTS, WITHIN_LIMIT};

/// The kind of hold a client takes of the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A plain single-node lock.
    Lock,
    /// A lock in fair mode, whose waiters share the line with writers.
    Fair,
    /// A reentrant lock (the reentrant strategy's hash of owner to count),
    /// each acquire by an owner of its own, as the engine's are unless
    /// the caller names one: none re-enters here.
    Reentrant,
    /// A multi-key lock of the name and another name of its own.
    Multi,
    /// A permit of the name's semaphore.
    Permit,
    /// A permit of the name's semaphore in fair mode, whose waiters share
    /// the line with writers and fair locks (a mix has permits of one mode
    /// or the other).
    FairPermit,
    /// A read of the name's read-write lock.
    Read,
    /// A write of the name's read-write lock.
    Write,
}

impl Kind {
    /// Whether holds of this kind are the semaphore's permits.
    fn shares_permits(self) -> bool {
        matches!(self, Kind::Permit | Kind::FairPermit)
    }

    /// Whether two holds of this kind may be valid at once (within the
    /// kind's own rule: the semaphore's limit).
    fn shares(self) -> bool {
        matches!(self, Kind::Permit | Kind::FairPermit | Kind::Read)
    }
}

/// A defect to put back on purpose, to see that the checker finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// A read-write acquire that looks at its own holds only, not at
    /// another kind's hold of the name (`sem_held_by_other` in
    /// `rw/acquire.lua`).
    RwIgnoresOtherKinds,
    /// A multi-key acquire whose token is one above its first member's
    /// counter only (`multi/acquire.lua` takes one above every member's).
    MultiTokenFromFirstMember,
    /// A fair acquire that looks at the lock key's string only, not at
    /// another kind's hold of the name (`EXISTS` in `fair/acquire.lua`).
    FairIgnoresOtherKinds,
    /// A reentrant acquire that takes any key that is not another owner's
    /// hash (`reentrant/acquire.lua` holds every other type for another
    /// kind's hold).
    ReentrantIgnoresOtherKinds,
    /// A write whose token comes from a counter of the read-write lock's
    /// own, not the name's one counter that a plain lock's grant raises.
    WriteCounterOfItsOwn,
}

/// The slot a permit's grant counts in here: its slot in the semaphore
/// plus this, so that permits' tokens count apart from the name's counter
/// (slot 0).
pub const PERMIT_SLOTS: u8 = 1;

/// The slot in [`Protocol::counters`] of the counter of the multi-key
/// lock's other name.
pub const OTHER_NAME: u8 = 100;

/// Clients of different kinds on one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mixed {
    /// The kind each client takes (client `i` takes `kinds[i % len]`).
    pub kinds: Vec<Kind>,
    /// The semaphore's scripts: its limit and the weight of each client's
    /// permits (by client number).
    pub semaphore: Semaphore,
    /// The read-write lock's scripts: which clients write.
    pub rw: RwLock,
    /// The fair lock's scripts, with how long its waiters' places last.
    pub fair: FairLock,
    /// A defect put back on purpose, if any.
    pub defect: Option<Defect>,
}

impl Mixed {
    /// Clients taking `kinds` of one name, permits of weight 1 in a
    /// semaphore of 2 (two of them may be held at once), in fair mode if
    /// `kinds` has [`Kind::FairPermit`] (then not [`Kind::Permit`]).
    pub fn new(kinds: &[Kind]) -> Self {
        let writers: Vec<bool> = kinds.iter().map(|&kind| kind == Kind::Write).collect();
        let fair_permits = kinds.contains(&Kind::FairPermit);
        assert!(
            !(fair_permits && kinds.contains(&Kind::Permit)),
            "permits of one mode a mix"
        );
        let semaphore = Semaphore::new(2, &[1]);
        Mixed {
            kinds: kinds.to_vec(),
            // Places a tick less than a lease, as the fair lock's.
            semaphore: if fair_permits {
                semaphore.in_fair_mode(2)
            } else {
                semaphore
            },
            // Places last a lease: a write waiting behind another kind
            // keeps its place while it tries again.
            rw: RwLock::new(&writers, 3),
            // A tick less than a lease, as the fair lock's own runs.
            fair: FairLock::new(2),
            defect: None,
        }
    }

    /// This mix with `defect` put back.
    pub fn with_defect(mut self, defect: Defect) -> Self {
        self.defect = Some(defect);
        self
    }

    /// The kind `client` takes.
    pub fn kind(&self, client: u8) -> Kind {
        self.kinds[usize::from(client) % self.kinds.len()]
    }

    fn has(&self, defect: Defect) -> bool {
        self.defect == Some(defect)
    }

    /// Whether the name's main key holds a hold of another kind than
    /// `kind`'s storage: a lock's string (a plain or a multi-key lock's),
    /// a sorted set of live permits, or one of live reads and writes.
    fn held_by_other(server: &MixedKeys, kind: Kind) -> bool {
        let string = server.name.hold.is_some();
        let hash = server.hash.hold.is_some();
        let permits = !server.permits.permits.is_empty();
        let rw = !server.rw.holds.is_empty();
        match kind {
            Kind::Lock | Kind::Fair | Kind::Multi => hash || permits || rw,
            Kind::Reentrant => string || permits || rw,
            Kind::Permit | Kind::FairPermit => string || hash || rw,
            Kind::Read | Kind::Write => string || hash || permits,
        }
    }

    /// `multi/acquire.lua`, `renew.lua` and `release.lua` over the name
    /// and the other name, in one script each.
    fn run_multi(&self, server: &mut MixedKeys, now: u64, ttl: u64, client: u8, op: Op) -> Answer {
        let own = |keys: &LockKeys, attempt: u8| {
            keys.hold
                .is_some_and(|hold| (hold.client, hold.attempt) == (client, attempt))
        };
        match op {
            Op::Acquire { attempt, .. } => {
                // Any key of either name is in the way, whatever its type.
                if server.name.hold.is_some()
                    || server.other.hold.is_some()
                    || Mixed::held_by_other(server, Kind::Multi)
                {
                    return Answer::Held;
                }
                // The other name is the first member.
                let token = if self.has(Defect::MultiTokenFromFirstMember) {
                    server.other.counter + 1
                } else {
                    server.name.counter.max(server.other.counter) + 1
                };
                for keys in [&mut server.name, &mut server.other] {
                    keys.hold = Some(Hold {
                        client,
                        attempt,
                        token,
                    });
                    keys.expires = now + ttl;
                    keys.counter = token;
                }
                Answer::Granted(Grant::token(token))
            }
            Op::Extend { attempt, .. } => {
                if !(own(&server.name, attempt) && own(&server.other, attempt)) {
                    return Answer::NotHeld;
                }
                server.name.expires = now + ttl;
                server.other.expires = now + ttl;
                Answer::Extended
            }
            Op::Release { attempt } | Op::Cleanup { attempt } => {
                let mut released = 0;
                for keys in [&mut server.name, &mut server.other] {
                    if own(keys, attempt) {
                        keys.hold = None;
                        released += 1;
                    }
                }
                // `Released` only when it had every member.
                if released == 2 {
                    Answer::Released
                } else {
                    Answer::NotHeld
                }
            }
            // Not sent: hand-offs and waiting lines are not in this model.
            Op::TakeOver { .. } | Op::Proclaim { .. } | Op::GiveUp { .. } => Answer::NotHeld,
        }
    }
}

/// The server's keys of the name, by the kind whose data each is, and of
/// the multi-key lock's other name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MixedKeys {
    /// The name's lock key (a plain or a multi-key lock's hold) and its
    /// counter, the name's one counter, which writes share.
    pub name: LockKeys,
    /// The multi-key lock's other name's key and counter.
    pub other: LockKeys,
    /// The name's key as a reentrant lock's hash (its counter is `name`'s).
    pub hash: LockKeys,
    /// The semaphore's permits and slot counters.
    pub permits: SemaphoreKeys,
    /// The read-write lock's holds and line of writers; its counter is
    /// `name`'s, copied in before its scripts run and out after.
    pub rw: RwKeys,
}

/// The property the mix exists for.
pub const KINDS_EXCLUDE: &str = "no holds of two kinds believed valid at once";

impl Protocol for Mixed {
    type Server = MixedKeys;

    fn empty(&self) -> MixedKeys {
        MixedKeys {
            name: Lock::default().empty(),
            other: Lock::default().empty(),
            hash: Lock::default().empty(),
            permits: self.semaphore.empty(),
            rw: self.rw.empty(),
        }
    }

    fn expire(&self, server: &mut MixedKeys, now: u64) -> bool {
        let lock = Lock::default();
        let name = lock.expire(&mut server.name, now);
        let other = lock.expire(&mut server.other, now);
        let hash = lock.expire(&mut server.hash, now);
        let permits = self.semaphore.expire(&mut server.permits, now);
        // The sorted set lives as long as its last live hold: with it gone,
        // so are the expired permits a fair release would count as freed.
        if server.permits.permits.is_empty() {
            server.permits.expired = 0;
        }
        let rw = self.rw.expire(&mut server.rw, now);
        name || other || hash || permits || rw
    }

    fn run(
        &self,
        server: &mut MixedKeys,
        now: u64,
        ttl: u64,
        client: u8,
        op: Op,
        believed: Option<Lease>,
    ) -> Answer {
        let kind = self.kind(client);
        let acquire = matches!(op, Op::Acquire { .. });
        match kind {
            Kind::Multi => self.run_multi(server, now, ttl, client, op),
            Kind::Reentrant => {
                // `EXISTS`, then the key's type: any kind's hold is in the
                // way, another owner's hash too.
                let ignores = self.has(Defect::ReentrantIgnoresOtherKinds);
                if acquire && !ignores && Mixed::held_by_other(server, kind) {
                    return Answer::Held;
                }
                // The plain lock's steps on the hash, with the name's
                // counter.
                server.hash.counter = server.name.counter;
                let was = server.hash.expires;
                let answer = Lock::default().run(&mut server.hash, now, ttl, client, op, believed);
                server.name.counter = server.hash.counter;
                // A renewal never shortens the key: the outer holder of a
                // re-entered lock trusts the TTL it set.
                if answer == Answer::Extended {
                    server.hash.expires = server.hash.expires.max(was);
                }
                answer
            }
            Kind::Lock => {
                // `EXISTS` on the key: any kind's hold is in the way.
                if acquire && Mixed::held_by_other(server, kind) {
                    return Answer::Held;
                }
                Lock::default().run(&mut server.name, now, ttl, client, op, believed)
            }
            Kind::Fair => {
                // `EXISTS` on the key: behind another kind's hold the
                // waiter offers its attempt and keeps its place in the
                // line, which writers share (dead places leave its head
                // first).
                let ignores = self.has(Defect::FairIgnoresOtherKinds);
                if acquire && !ignores && Mixed::held_by_other(server, kind) {
                    let line = &mut server.rw.line;
                    line.head(now);
                    line.wait(
                        client,
                        op.attempt(),
                        Tag::Lock,
                        now,
                        self.fair.waiter_lease,
                        ttl,
                    );
                    return Answer::Held;
                }
                let mut keys = FairKeys {
                    lock: server.name.clone(),
                    line: std::mem::take(&mut server.rw.line),
                };
                let answer = self.fair.run(&mut keys, now, ttl, client, op, believed);
                server.name = keys.lock;
                server.rw.line = keys.line;
                answer
            }
            Kind::Permit | Kind::FairPermit => {
                // `sem_held_by_other`: nothing written, not even the
                // expired permits dropped, but a fair waiter's place and
                // offer, which no other kind's hand-off grants.
                if Mixed::held_by_other(server, kind) {
                    let line = &mut server.rw.line;
                    return match (op, self.semaphore.fair) {
                        (Op::Acquire { attempt, .. }, Some(lease)) => {
                            let tag = Tag::Permits(self.semaphore.weight(client));
                            line.wait(client, attempt, tag, now, lease, ttl);
                            Answer::Held
                        }
                        (Op::Acquire { .. }, None) => Answer::Held,
                        // `sem_open`: not held, and nothing dropped or
                        // handed off, but an offer naming the attempt.
                        (Op::Release { attempt } | Op::Cleanup { attempt }, _) => {
                            line.void(client, attempt, Tag::Permits(1));
                            Answer::NotHeld
                        }
                        // `sem_leave_beside_other`: the place and its offer.
                        (Op::GiveUp { .. }, _) => {
                            line.take(client);
                            Answer::Left
                        }
                        _ => Answer::NotHeld,
                    };
                }
                // In fair mode on the line the kinds share.
                let fair = self.semaphore.fair.is_some();
                if fair {
                    server.permits.line = std::mem::take(&mut server.rw.line);
                }
                let answer =
                    self.semaphore
                        .run(&mut server.permits, now, ttl, client, op, believed);
                if fair {
                    server.rw.line = std::mem::take(&mut server.permits.line);
                }
                let in_slots = |grant: Grant| Grant {
                    slot: grant.slot + PERMIT_SLOTS,
                    ..grant
                };
                match answer {
                    Answer::Granted(grant) => Answer::Granted(in_slots(grant)),
                    Answer::TakenUp(grant) => Answer::TakenUp(in_slots(grant)),
                    other => other,
                }
            }
            Kind::Read | Kind::Write => {
                let ignores = acquire && self.has(Defect::RwIgnoresOtherKinds);
                if !ignores && Mixed::held_by_other(server, kind) {
                    return match op {
                        // In the way as a writer is: a write joins the line
                        // of writers (without an offer), a read does not.
                        Op::Acquire { .. } => {
                            if kind == Kind::Write {
                                server.rw.line.join(client, now, self.rw.waiter_lease);
                            }
                            Answer::Held
                        }
                        // Not held, nothing of it written; writers here
                        // make no offers to drop.
                        Op::GiveUp { .. } => {
                            server.rw.line.take(client);
                            Answer::Left
                        }
                        _ => Answer::NotHeld,
                    };
                }
                let own_counter = self.has(Defect::WriteCounterOfItsOwn);
                if !own_counter {
                    server.rw.counter = server.name.counter;
                }
                let answer = self.rw.run(&mut server.rw, now, ttl, client, op, believed);
                if !own_counter {
                    server.name.counter = server.rw.counter;
                }
                answer
            }
        }
    }

    fn holds(&self, server: &MixedKeys) -> Vec<(u8, u8, Grant, u64)> {
        // A multi-key hold once, as its member the name shows it: its keys
        // are set, renewed and released together.
        let mut holds = Lock::default().holds(&server.name);
        holds.extend(Lock::default().holds(&server.hash));
        holds.extend(self.semaphore.holds(&server.permits).into_iter().map(
            |(client, attempt, grant, expires)| {
                let slot = grant.slot + PERMIT_SLOTS;
                (client, attempt, Grant { slot, ..grant }, expires)
            },
        ));
        holds.extend(self.rw.holds(&server.rw));
        holds.sort_unstable();
        holds
    }

    fn counters(&self, server: &MixedKeys) -> Vec<(u8, u64)> {
        let mut counters = Lock::default().counters(&server.name);
        if self.has(Defect::WriteCounterOfItsOwn) && server.rw.counter > 0 {
            counters.push((0, server.rw.counter));
        }
        counters.extend(
            self.semaphore
                .counters(&server.permits)
                .into_iter()
                .map(|(slot, last)| (slot + PERMIT_SLOTS, last)),
        );
        if server.other.counter > 0 {
            counters.push((OTHER_NAME, server.other.counter));
        }
        counters
    }

    fn line(&self, server: &MixedKeys, now: u64) -> Vec<u8> {
        server.rw.line.live(now)
    }

    /// A fair lock's waiters offer their attempts; writers here prefer
    /// readers, and make none.
    fn waiter_lease(&self, client: u8) -> Option<u64> {
        match self.kind(client) {
            Kind::Fair => Some(self.fair.waiter_lease),
            Kind::FairPermit => self.semaphore.fair,
            _ => None,
        }
    }

    fn script(&self, client: u8, op: Op) -> String {
        match self.kind(client) {
            Kind::Lock => Lock::default().script(client, op),
            Kind::Reentrant => Lock::default()
                .script(client, op)
                .replace("lock/acquire_token.lua", "reentrant/acquire.lua")
                .replace("lock/", "reentrant/"),
            Kind::Fair => self.fair.script(client, op),
            Kind::Permit | Kind::FairPermit => self.semaphore.script(client, op),
            Kind::Read | Kind::Write => self.rw.script(client, op),
            Kind::Multi => match op {
                Op::Acquire { attempt, .. } => format!("multi/acquire.lua (attempt {attempt})"),
                Op::Extend { attempt, ask } => {
                    format!("multi/renew.lua (attempt {attempt}{})", ask.described())
                }
                Op::Release { attempt } => format!("multi/release.lua (attempt {attempt})"),
                Op::Cleanup { attempt } => {
                    format!("multi/release.lua (cleanup of attempt {attempt})")
                }
                op => format!("{op:?}, which a multi-key lock does not send here"),
            },
        }
    }

    fn properties() -> Vec<Property<LeaseModel<Self>>> {
        vec![
            // README: every kind of hold on one name excludes the others;
            // within a kind, only permits (to the limit) and reads share.
            Property::always(
                KINDS_EXCLUDE,
                |model: &LeaseModel<Self>, state: &State<MixedKeys>| {
                    let kinds: Vec<Kind> = state
                        .believers()
                        .map(|(client, _)| model.protocol.kind(client))
                        .collect();
                    kinds.windows(2).all(|pair| pair[0] == pair[1])
                        && (kinds.len() <= 1 || kinds[0].shares())
                },
            ),
            // `Semaphore`: at most `limit` weight of permits valid.
            Property::always(
                WITHIN_LIMIT,
                |model: &LeaseModel<Self>, state: &State<MixedKeys>| {
                    let permits = state
                        .believers()
                        .filter(|&(client, _)| model.protocol.kind(client).shares_permits());
                    let weight: u8 = permits.map(|(_, lease)| lease.grant.weight).sum();
                    weight <= model.protocol.semaphore.limit
                },
            ),
            // `PermitGuard::slot`: no two valid permits share a slot.
            Property::always(
                OWN_SLOTS,
                |model: &LeaseModel<Self>, state: &State<MixedKeys>| {
                    let mut slots: Vec<u8> = state
                        .believers()
                        .filter(|&(client, _)| model.protocol.kind(client).shares_permits())
                        .map(|(_, lease)| lease.grant.slot)
                        .collect();
                    let all = slots.len();
                    slots.sort_unstable();
                    slots.dedup();
                    slots.len() == all
                },
            ),
            // `ReadGuard::epoch`: the token of the last write granted, a
            // plain or multi-key lock's grant of the name included.
            Property::always(EPOCH, |_, state: &State<MixedKeys>| !state.epoch_stale),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{discoveries, Bounds, Faults, CLEANUP, EVERY, TOKENS};

    fn found(
        kinds: &[Kind],
        defect: Option<Defect>,
        bounds: Bounds,
        faults: Faults,
    ) -> Vec<&'static str> {
        let mut mixed = Mixed::new(kinds);
        mixed.defect = defect;
        discoveries(LeaseModel::new(mixed, bounds, faults))
    }

    #[test]
    fn every_pair_of_kinds_keeps_the_promises_under_every_survivable_fault() {
        // The pair `cargo xtask model --bounded` leaves to the full check
        // (it checks three others, to larger bounds).
        let pairs = [[Kind::Permit, Kind::Read]];
        for pair in pairs {
            let found = found(&pair, None, Bounds::QUICK, Faults::SURVIVABLE);
            assert_eq!(found, vec![CLEANUP, EVERY], "{pair:?}: only the examples");
        }
    }

    /// A fair permit's release whose reply was lost runs after a write
    /// took the name and the waiter queued again: it finds another kind's
    /// hold, so it hands nothing off (`sem_open`), nor counts the permits
    /// that expired with their sorted set as freed. The model first did
    /// both, and the checker found a permit granted beside the write.
    #[test]
    fn a_stale_fair_release_beside_a_write_hands_nothing_off() {
        let bounds = Bounds {
            failures: 1,
            renewals: 0,
            horizon: 3,
            ..Bounds::SMALL
        };
        let faults = Faults {
            lost_replies: true,
            ..Faults::default()
        };
        let found = found(&[Kind::FairPermit, Kind::Write], None, bounds, faults);
        assert!(!found.contains(&KINDS_EXCLUDE), "{found:?}");
    }

    #[test]
    fn a_read_beside_another_kind_is_found() {
        let defect = Some(Defect::RwIgnoresOtherKinds);
        let found = found(
            &[Kind::Lock, Kind::Read],
            defect,
            Bounds::SMALL,
            Faults::default(),
        );
        assert!(found.contains(&KINDS_EXCLUDE), "{found:?}");
    }

    #[test]
    fn a_fair_acquire_beside_another_kind_is_found() {
        let defect = Some(Defect::FairIgnoresOtherKinds);
        let found = found(
            &[Kind::Permit, Kind::Fair],
            defect,
            Bounds::SMALL,
            Faults::default(),
        );
        assert!(found.contains(&KINDS_EXCLUDE), "{found:?}");
    }

    #[test]
    fn a_reentrant_acquire_beside_another_kind_is_found() {
        let defect = Some(Defect::ReentrantIgnoresOtherKinds);
        let found = found(
            &[Kind::Write, Kind::Reentrant],
            defect,
            Bounds::SMALL,
            Faults::default(),
        );
        assert!(found.contains(&KINDS_EXCLUDE), "{found:?}");
    }

    #[test]
    fn a_multi_key_token_from_one_member_is_found() {
        let defect = Some(Defect::MultiTokenFromFirstMember);
        let found = found(
            &[Kind::Lock, Kind::Multi],
            defect,
            Bounds::SMALL,
            Faults::default(),
        );
        assert!(found.contains(&TOKENS), "{found:?}");
    }

    #[test]
    fn a_write_counter_apart_from_the_locks_is_found() {
        let defect = Some(Defect::WriteCounterOfItsOwn);
        let found = found(
            &[Kind::Lock, Kind::Write],
            defect,
            Bounds::SMALL,
            Faults::default(),
        );
        assert!(found.contains(&TOKENS), "{found:?}");
    }
}
