//! Kinds mixed on one name against [`Mixed`]'s model: a plain lock, a fair
//! lock, a reentrant lock (through the reentrant strategy), a multi-key
//! lock of the name and another, a permit (of a semaphore in fair mode or
//! not), a read and a write, three kinds a walk, every kind through its
//! own scripts on the one name.

use std::sync::Arc;
use std::time::Duration;

use distlock::backend::{Claim, HoldKind, HoldToken, LockKey};
use distlock::OwnerToken;
use lock_core::strategy::KeyNames;
use lock_core::AcquireOutcome;
use lock_model::{Answer, Bounds, Grant, Kind, LeaseModel, Mixed, Op, OTHER_NAME, PERMIT_SLOTS};

use super::fair::FairSubject;
use super::lock::LockSubject;
use super::rwlock::RwSubject;
use super::semaphore::SemaphoreSubject;
use super::{connect, lease_set, walk, Real, Seen, Subject, BOUNDS, FAULTS, MARK, TTL};

/// Each kind's subject on the one name, each with the holds of its kind's
/// clients (the fair lock's with the plain and the multi-key lock's, the
/// lock key's), every client with one owner across them: the line is one.
struct MixedSubject<'a> {
    mixed: Mixed,
    fair: FairSubject<'a>,
    permits: SemaphoreSubject<'a>,
    rw: RwSubject<'a>,
    reentrant: ReentrantSubject<'a>,
    /// The multi-key lock's other name.
    other: LockKey,
    /// The kinds whose acquire found the name held by another kind, and
    /// that kind's storage.
    crossed: Vec<(Kind, Storage)>,
    /// The kinds whose renewal or release found the name held by another
    /// kind.
    stale: Vec<Kind>,
}

/// Which kind's data the name's key holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Storage {
    Free,
    Lock,
    Permits,
    Rw,
    /// A reentrant lock's hash.
    Hash,
}

impl Storage {
    /// Where holds of `kind` live.
    fn of(kind: Kind) -> Storage {
        match kind {
            Kind::Lock | Kind::Fair | Kind::Multi => Storage::Lock,
            Kind::Reentrant => Storage::Hash,
            Kind::Permit | Kind::FairPermit => Storage::Permits,
            Kind::Read | Kind::Write => Storage::Rw,
        }
    }
}

impl MixedSubject<'_> {
    /// The name's key's storage: a lock's string, or a sorted set of the
    /// permits' or the read-write lock's live holds (a hold's entry in the
    /// lease set's hash tells them apart: `r:` or `w:` for the latter).
    fn storage(&self) -> Storage {
        let real = &self.fair.lock.0;
        match real.admin(&["TYPE", real.key.redis_key()]).as_text() {
            Some("string") => Storage::Lock,
            Some("hash") => Storage::Hash,
            Some("zset") => {
                let live = lease_set::live(real);
                let Some((id, _)) = live.first() else {
                    return Storage::Free;
                };
                let entry = real.admin(&["HGET", &real.key.held_key(), id]);
                match entry.as_text() {
                    Some(entry) if entry.starts_with("r:") || entry.starts_with("w:") => {
                        Storage::Rw
                    }
                    _ => Storage::Permits,
                }
            }
            _ => Storage::Free,
        }
    }

    /// The multi-key hold of `client`'s `attempt`: the other name first.
    fn multi(&mut self, client: u8, attempt: u8) -> distlock::backend::HoldToken {
        let members: Arc<[LockKey]> =
            Arc::from(vec![self.other.clone(), self.fair.lock.0.key.clone()]);
        self.fair
            .lock
            .0
            .hold(client, attempt, HoldKind::Multi(members))
    }

    async fn run_multi(&mut self, client: u8, op: Op) -> Answer {
        let backend = self.fair.lock.0.backend;
        let hold = self.multi(client, op.attempt());
        let HoldKind::Multi(members) = hold.kind().clone() else {
            unreachable!("a multi-key hold");
        };
        let first = members[0].clone();
        match op {
            Op::Acquire { attempt, .. } => {
                let claim = Claim::Multi(members);
                match backend.try_acquire(&first, &hold, TTL, &claim, None).await {
                    Ok(AcquireOutcome::Acquired(granted)) => {
                        let token = granted.fencing_token.expect("a token");
                        self.fair
                            .lock
                            .0
                            .holds
                            .insert((client, attempt), hold.granted(Some(token)));
                        Answer::Granted(Grant::token(token.get()))
                    }
                    Ok(AcquireOutcome::Held { .. }) => Answer::Held,
                    other => panic!("multi acquire: {other:?}"),
                }
            }
            Op::Extend { .. } => super::renew(backend, &first, &hold, op).await,
            Op::Release { .. } | Op::Cleanup { .. } => super::release(backend, &first, &hold).await,
            other => panic!("the mix's model sends a multi-key lock no {other:?}"),
        }
    }

    fn other_text(&self) -> Option<String> {
        self.fair.lock.0.text(self.other.redis_key())
    }

    fn pttl(&self, key: &str) -> i64 {
        let reply = self.fair.lock.0.admin(&["PTTL", key]);
        reply.as_int().expect("PTTL")
    }

    /// Makes the name's sorted set and its companions expire when none of
    /// its holds is live, as they would with the last hold's deadline.
    async fn expire_emptied_set(&self) {
        let real = &self.fair.lock.0;
        let key = real.key.redis_key();
        if real.admin(&["TYPE", key]).as_text() != Some("zset") || !lease_set::live(real).is_empty()
        {
            return;
        }
        for key in [key, &real.key.held_key(), &real.key.slots_key()] {
            real.admin(&["PEXPIRE", key, "1"]);
        }
        gone(real, key).await;
    }
}

/// Waits until `key` has expired.
async fn gone(real: &Real<'_>, key: &str) {
    for _ in 0..100 {
        if real.admin(&["EXISTS", key]).as_int() == Some(0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("{key} did not expire");
}

impl Subject for MixedSubject<'_> {
    async fn run(&mut self, client: u8, op: Op) -> Answer {
        let kind = self.mixed.kind(client);
        let before = self.storage();
        let answer = match kind {
            Kind::Lock => self.fair.lock.run(client, op).await,
            Kind::Fair => self.fair.run(client, op).await,
            Kind::Multi => self.run_multi(client, op).await,
            Kind::Reentrant => self.reentrant.run(client, op).await,
            Kind::Permit | Kind::FairPermit => {
                let in_slots = |grant: Grant| Grant {
                    slot: grant.slot + PERMIT_SLOTS,
                    ..grant
                };
                match self.permits.run(client, op).await {
                    Answer::Granted(grant) => Answer::Granted(in_slots(grant)),
                    Answer::TakenUp(grant) => Answer::TakenUp(in_slots(grant)),
                    other => other,
                }
            }
            Kind::Read | Kind::Write => self.rw.run(client, op).await,
        };
        let other = ![Storage::Free, Storage::of(kind)].contains(&before);
        match (op, answer) {
            (Op::Acquire { .. }, Answer::Held) if other => self.crossed.push((kind, before)),
            (Op::Extend { .. } | Op::Release { .. } | Op::Cleanup { .. }, Answer::NotHeld)
                if other =>
            {
                self.stale.push(kind);
            }
            _ => {}
        }
        answer
    }

    fn holds(&self) -> Vec<(u8, u8, Grant)> {
        match self.storage() {
            Storage::Free => Vec::new(),
            Storage::Lock => Subject::holds(&self.fair.lock),
            Storage::Permits => {
                let mut holds = Subject::holds(&self.permits);
                for (_, _, grant) in &mut holds {
                    grant.slot += PERMIT_SLOTS;
                }
                holds
            }
            Storage::Rw => Subject::holds(&self.rw),
            Storage::Hash => Subject::holds(&self.reentrant),
        }
    }

    fn counters(&self) -> Vec<(u8, u64)> {
        let mut counters = self.fair.lock.counters();
        counters.extend(
            self.permits
                .counters()
                .into_iter()
                .map(|(slot, last)| (slot + PERMIT_SLOTS, last)),
        );
        let other = self.fair.lock.0.text(self.other.fence_key());
        counters.extend(other.map(|text| (OTHER_NAME, text.parse().expect("a counter"))));
        counters
    }

    fn line(&self) -> Vec<u8> {
        self.fair.line()
    }

    fn expire_places(&self, clients: &[u8]) {
        self.fair.expire_places(clients);
    }

    fn mark(&self) {
        match self.storage() {
            Storage::Free => {}
            Storage::Lock => self.fair.lock.mark(),
            Storage::Permits => self.permits.mark(),
            Storage::Rw => self.rw.mark(),
            Storage::Hash => self.reentrant.mark(),
        }
        if self.pttl(self.other.redis_key()) > MARK {
            let key = self.other.redis_key();
            self.fair.lock.0.admin(&["PEXPIRE", key, &MARK.to_string()]);
        }
    }

    fn left(&self) -> Vec<(u8, u8, i64)> {
        match self.storage() {
            Storage::Free => Vec::new(),
            Storage::Lock => self.fair.lock.left(),
            Storage::Permits => self.permits.left(),
            Storage::Rw => self.rw.left(),
            Storage::Hash => self.reentrant.left(),
        }
    }

    /// Beside each kind's own check: a multi-key hold's other name holds
    /// what the name holds, for as long (a ms for rounding, and the
    /// reads between).
    fn keys_outlive_holds(&self) -> Result<(), String> {
        match self.storage() {
            Storage::Free | Storage::Lock | Storage::Hash => {}
            Storage::Permits => self.permits.keys_outlive_holds()?,
            Storage::Rw => self.rw.keys_outlive_holds()?,
        }
        let Some(other) = self.other_text() else {
            return Ok(());
        };
        let name = self.fair.lock.0.key.redis_key();
        let (left, other_left) = (self.pttl(name), self.pttl(self.other.redis_key()));
        if self.fair.lock.0.text(name).as_deref() != Some(other.as_str())
            || (left - other_left).abs() > 50
        {
            return Err(format!(
                "the other name holds {other} for {other_left} ms, the name {:?} for {left} ms",
                self.fair.lock.0.text(name)
            ));
        }
        Ok(())
    }

    async fn expire(&self, holds: &[(u8, u8)]) {
        for &(client, attempt) in holds {
            match self.mixed.kind(client) {
                Kind::Lock | Kind::Fair => self.fair.lock.expire(&[(client, attempt)]).await,
                Kind::Multi => {
                    let real = &self.fair.lock.0;
                    for key in [real.key.redis_key(), self.other.redis_key()] {
                        real.admin(&["PEXPIRE", key, "1"]);
                        gone(real, key).await;
                    }
                }
                Kind::Reentrant => self.reentrant.expire(&[(client, attempt)]).await,
                Kind::Permit | Kind::FairPermit => {
                    self.permits.expire(&[(client, attempt)]).await;
                }
                Kind::Read | Kind::Write => self.rw.expire(&[(client, attempt)]).await,
            }
        }
        self.expire_emptied_set().await;
    }
}

/// Every walk agrees with the model, on both clients, with a plain lock, a
/// multi-key lock, a permit, a read and a write on one name.
#[test]
fn mixed_kinds_on_one_name_do_what_the_model_does() {
    use Kind::{Fair, FairPermit, Lock, Multi, Permit, Read, Reentrant, Write};
    // Three clients a walk, so that kinds meet often: every pair of kinds
    // is in one of these.
    const TRIPLES: [[Kind; 3]; 13] = [
        [FairPermit, Lock, Write],
        [FairPermit, Fair, Multi],
        [FairPermit, Reentrant, Read],
        [Reentrant, Lock, Permit],
        [Reentrant, Fair, Read],
        [Reentrant, Multi, Write],
        [Lock, Fair, Permit],
        [Lock, Multi, Read],
        [Lock, Write, Fair],
        [Fair, Multi, Write],
        [Fair, Read, Permit],
        [Multi, Permit, Write],
        [Read, Write, Multi],
    ];
    // Ten walks a triple: each pair of kinds meets in a few.
    const MIXED_WALKS: u64 = 10 * TRIPLES.len() as u64;
    lock_testkit::on_every_client(async |server, client| {
        let locks = connect(server, client).await;
        let reentrant = super::connect_as("reentrant", server, client).await;
        // Hand-offs stay within a kind: each kind's own walks check them.
        let bounds = Bounds {
            hand_offs: false,
            ..BOUNDS
        };
        let (mut seen, mut crossed, mut stale) = (Seen::default(), Vec::new(), Vec::new());
        for seed in 0..MIXED_WALKS {
            let kinds = TRIPLES[seed as usize % TRIPLES.len()];
            let mixed = Mixed::new(&kinds);
            let model = LeaseModel::new(mixed.clone(), bounds, FAULTS);
            let name = format!("mixed-{client}-{seed}");
            let backend = locks.backend().as_ref();
            let first = Real::new(server, backend, &name);
            let real = || Real {
                owners: first.owners.clone(),
                ..Real::new(server, backend, &name)
            };
            let mut subject = MixedSubject {
                mixed: mixed.clone(),
                fair: FairSubject {
                    lock: LockSubject(real()),
                    handed_over: 0,
                },
                permits: SemaphoreSubject {
                    real: real(),
                    semaphore: mixed.semaphore.clone(),
                    handed_over: 0,
                },
                rw: RwSubject {
                    real: real(),
                    lock: mixed.rw.clone(),
                    handed_over: 0,
                },
                reentrant: ReentrantSubject(Real {
                    backend: reentrant.backend().as_ref(),
                    ..real()
                }),
                other: LockKey::new("model:", &format!("{name}-other")).expect("key"),
                crossed: Vec::new(),
                stale: Vec::new(),
            };
            let label = format!("the mix of {kinds:?} on {client}");
            walk(&model, &mut subject, server, &label, seed, &mut seen).await;
            crossed.extend(subject.crossed);
            stale.extend(subject.stale);
        }
        seen.assert_everything(client, bounds);
        // Every kind found every other kind's storage in its way.
        for kind in [
            Lock, Fair, Reentrant, Multi, Permit, FairPermit, Read, Write,
        ] {
            for storage in [Storage::Lock, Storage::Hash, Storage::Permits, Storage::Rw] {
                let met = crossed.contains(&(kind, storage));
                assert!(
                    met || storage == Storage::of(kind),
                    "{client}: no {kind:?} acquire found {storage:?} in its way"
                );
            }
        }
        // Every kind that stores a lock key or a hash renewed or released
        // over another kind's hold (the permits' and reads' and writes'
        // scripts are the semaphore's and read-write lock's own walks').
        for kind in [Lock, Fair, Reentrant, Multi] {
            assert!(
                stale.contains(&kind),
                "{client}: no {kind:?} renewal or release met another kind's hold"
            );
        }
        assert!(seen.lines > 0, "{client}: nobody waited in line");
    });
}

/// A reentrant lock's hash on the name, through the reentrant strategy's
/// backend: each attempt by an owner of its own, as the engine's acquire
/// makes one unless the caller names it.
struct ReentrantSubject<'a>(Real<'a>);

impl ReentrantSubject<'_> {
    fn hold(&mut self, client: u8, attempt: u8) -> HoldToken {
        let fresh = || {
            let owner = OwnerToken::generate().expect("os rng");
            HoldToken::new(owner).expect("os rng")
        };
        self.0
            .holds
            .entry((client, attempt))
            .or_insert_with(fresh)
            .clone()
    }

    fn is_hash(&self) -> bool {
        let real = &self.0;
        real.admin(&["TYPE", real.key.redis_key()]).as_text() == Some("hash")
    }

    fn pttl(&self) -> i64 {
        let real = &self.0;
        real.admin(&["PTTL", real.key.redis_key()])
            .as_int()
            .expect("PTTL")
    }

    /// The hash's one owner, as the walk's client and attempt.
    fn holder(&self) -> Option<(u8, u8)> {
        if !self.is_hash() {
            return None;
        }
        let real = &self.0;
        let fields = real.admin(&["HKEYS", real.key.redis_key()]).as_texts()?;
        let [owner] = &fields[..] else {
            panic!("a reentrant lock of one owner, not {fields:?}");
        };
        let (&found, _) = real
            .holds
            .iter()
            .find(|(_, hold)| hold.expose_owner() == owner)
            .expect("an owner of the walk's");
        Some(found)
    }
}

impl Subject for ReentrantSubject<'_> {
    async fn run(&mut self, client: u8, op: Op) -> Answer {
        let (backend, key) = (self.0.backend, self.0.key.clone());
        let hold = self.hold(client, op.attempt());
        match op {
            Op::Acquire { attempt, .. } => {
                match backend
                    .try_acquire(&key, &hold, TTL, &Claim::LOCK, None)
                    .await
                {
                    Ok(AcquireOutcome::Acquired(granted)) => {
                        let token = granted.fencing_token.expect("a token");
                        let held = hold.granted(Some(token));
                        self.0.holds.insert((client, attempt), held);
                        Answer::Granted(Grant::token(token.get()))
                    }
                    Ok(AcquireOutcome::Held { .. }) => Answer::Held,
                    other => panic!("reentrant acquire: {other:?}"),
                }
            }
            Op::Extend { .. } => super::renew(backend, &key, &hold, op).await,
            Op::Release { .. } | Op::Cleanup { .. } => super::release(backend, &key, &hold).await,
            other => panic!("the mix's model sends a reentrant lock no {other:?}"),
        }
    }

    /// The hash's owner, with the name's counter: a first hold's token.
    fn holds(&self) -> Vec<(u8, u8, Grant)> {
        let Some((client, attempt)) = self.holder() else {
            return Vec::new();
        };
        let counter = self.0.text(self.0.key.fence_key()).expect("a counter");
        let token = counter.parse().expect("a token");
        vec![(client, attempt, Grant::token(token))]
    }

    fn counters(&self) -> Vec<(u8, u64)> {
        Vec::new()
    }

    fn mark(&self) {
        if self.is_hash() && self.pttl() > MARK {
            let real = &self.0;
            real.admin(&["PEXPIRE", real.key.redis_key(), &MARK.to_string()]);
        }
    }

    fn left(&self) -> Vec<(u8, u8, i64)> {
        let left = self.pttl();
        let holder = self.holder();
        holder
            .map(|(client, attempt)| (client, attempt, left))
            .into_iter()
            .collect()
    }

    async fn expire(&self, _: &[(u8, u8)]) {
        let real = &self.0;
        real.admin(&["PEXPIRE", real.key.redis_key(), "1"]);
        gone(real, real.key.redis_key()).await;
    }
}
