//! The semaphore's scripts against [`Semaphore`]'s model, outside fair
//! mode and in it: waiters that queue and offer their attempts, releases
//! and give-ups that grant permits to the offers that fit, attempts that
//! take a grant to their earlier one up.

use distlock::backend::{Claim, FairPlace, HoldKind, HoldToken, Permit, PermitRequest};
use distlock::FencingToken;
use lock_core::strategy::KeyNames;
use lock_core::AcquireOutcome;
use lock_model::{Answer, Grant, LeaseModel, Op, Semaphore};

use super::{
    connect, lease_set, walk, Real, Seen, Subject, BOUNDS, FAULTS, TTL, WAITER_LEASE, WALKS,
};

/// The permits (a sorted set of id to deadline), their entries and the
/// slots' counters.
pub(super) struct SemaphoreSubject<'a> {
    pub(super) real: Real<'a>,
    pub(super) semaphore: Semaphore,
    /// Steps after which a release or a give-up had granted a waiter.
    pub(super) handed_over: u32,
}

impl SemaphoreSubject<'_> {
    /// The permit of `client`'s `attempt`; in line in fair mode, as a fair
    /// waiter's is.
    fn hold(&mut self, client: u8, attempt: u8) -> HoldToken {
        let weight = self.semaphore.weight(client);
        let kind = HoldKind::Permit(Permit::new(u32::from(weight)));
        let hold = self.real.hold(client, attempt, kind);
        if self.semaphore.fair.is_none() || hold.is_in_line() {
            return hold;
        }
        let hold = hold.in_line();
        self.real.holds.insert((client, attempt), hold.clone());
        hold
    }

    /// What a release or a give-up did: counts a grant to a waiter.
    fn note_hand_off(&mut self, before: &[(String, i64)]) {
        self.handed_over += u32::from(lease_set::granted_since(&self.real, before));
    }
}

impl Subject for SemaphoreSubject<'_> {
    async fn run(&mut self, client: u8, op: Op) -> Answer {
        let (backend, key) = (self.real.backend, self.real.key.clone());
        match op {
            Op::Acquire { attempt, earlier } => {
                let hold = self.hold(client, attempt);
                let offered = (earlier != 0).then(|| self.hold(client, earlier));
                let weight = self.semaphore.weight(client);
                let mut request =
                    PermitRequest::new(u32::from(self.semaphore.limit), u32::from(weight));
                if self.semaphore.fair.is_some() {
                    request.fair = Some(FairPlace::new(WAITER_LEASE, true));
                }
                match backend
                    .try_acquire(&key, &hold, TTL, &Claim::Permit(request), offered.as_ref())
                    .await
                {
                    Ok(AcquireOutcome::Acquired(granted)) => {
                        let token = granted.fencing_token.expect("a token");
                        let slot = granted.slot.expect("a slot");
                        let (attempt, hold) = match offered {
                            Some(offered) if granted.earlier => (earlier, offered),
                            _ => (attempt, hold),
                        };
                        let held = hold.granted(Some(token)).in_slot(slot);
                        self.real.holds.insert((client, attempt), held);
                        let grant = Grant {
                            token: token.get(),
                            slot: u8::try_from(slot).expect("a small slot"),
                            weight,
                            shared: false,
                        };
                        if granted.earlier {
                            Answer::TakenUp(grant)
                        } else {
                            Answer::Granted(grant)
                        }
                    }
                    Ok(AcquireOutcome::Held { .. }) => Answer::Held,
                    other => panic!("acquire: {other:?}"),
                }
            }
            Op::Extend { attempt, .. } => {
                let hold = self.hold(client, attempt);
                super::renew(backend, &key, &hold, op).await
            }
            Op::TakeOver { from, attempt } => {
                // As `resume` builds them from a token's `permit-W-S`: the
                // token's permit with its weight, slot and claim, and a new
                // permit of the same owner with the same.
                let claim = Some(FencingToken::new(from.claim.token));
                let slot = u32::from(from.claim.slot);
                let kind = HoldKind::Permit(Permit::new(u32::from(from.claim.weight)));
                let old = self
                    .real
                    .hold(from.client, from.attempt, kind.clone())
                    .with_kind(kind)
                    .granted(claim)
                    .in_slot(slot);
                let new = Real::successor(&old).granted(claim).in_slot(slot);
                self.real.holds.insert((client, attempt), new.clone());
                super::take_over(backend, &key, &old, &new).await
            }
            Op::Release { attempt } | Op::Cleanup { attempt } => {
                let hold = self.hold(client, attempt);
                let before = lease_set::live(&self.real);
                let answer = super::release(backend, &key, &hold).await;
                self.note_hand_off(&before);
                answer
            }
            Op::GiveUp { offered } => {
                let offered = self.hold(client, offered);
                let before = lease_set::live(&self.real);
                let answer = super::give_up(&self.real, client, &offered).await;
                self.note_hand_off(&before);
                answer
            }
            Op::Proclaim { .. } => panic!("the semaphore's model sends no {op:?}"),
        }
    }

    fn holds(&self) -> Vec<(u8, u8, Grant)> {
        let held = self.real.key.held_key();
        let mut holds: Vec<_> = lease_set::live(&self.real)
            .into_iter()
            .map(|(id, _)| {
                let entry = self.real.admin(&["HGET", &held, &id]);
                let entry = entry.as_text().expect("an entry");
                let parts: Vec<u64> = entry
                    .split(':')
                    .map(|part| part.parse().expect("<weight>:<slot>:<token>"))
                    .collect();
                let [weight, slot, token] = parts[..] else {
                    panic!("the entry {entry} is not <weight>:<slot>:<token>");
                };
                let (client, attempt) = self.real.who(&id);
                let grant = Grant {
                    token,
                    slot: u8::try_from(slot).expect("a small slot"),
                    weight: u8::try_from(weight).expect("a small weight"),
                    shared: false,
                };
                (client, attempt, grant)
            })
            .collect();
        holds.sort_unstable();
        holds
    }

    fn counters(&self) -> Vec<(u8, u64)> {
        let fences = self.real.key.slot_fences_key();
        let pairs = self
            .real
            .admin(&["HGETALL", &fences])
            .as_texts()
            .expect("counters");
        let mut counters: Vec<(u8, u64)> = pairs
            .chunks(2)
            .map(|pair| {
                let slot = pair[0].parse().expect("a slot");
                (slot, pair[1].parse().expect("a counter"))
            })
            .collect();
        counters.sort_unstable();
        counters
    }

    fn line(&self) -> Vec<u8> {
        self.real.line()
    }

    fn expire_places(&self, clients: &[u8]) {
        self.real.expire_places(clients);
    }

    fn mark(&self) {
        lease_set::mark(&self.real);
    }

    fn left(&self) -> Vec<(u8, u8, i64)> {
        lease_set::left(&self.real)
    }

    fn keys_outlive_holds(&self) -> Result<(), String> {
        lease_set::keys_outlive_holds(&self.real, &self.real.key.held_key())
    }

    async fn expire(&self, holds: &[(u8, u8)]) {
        lease_set::expire(&self.real, holds);
    }
}

/// Every walk agrees with the model, on both clients, with permits of
/// weights 1, 1 and 2 in a semaphore of 3.
#[test]
fn the_semaphore_scripts_do_what_the_model_does() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = connect(server, client).await;
        let semaphore = Semaphore::new(3, &[1, 1, 2]);
        let model = LeaseModel::new(semaphore.clone(), BOUNDS, FAULTS);
        let mut seen = Seen::default();
        for seed in 0..WALKS {
            let name = format!("semaphore-{client}-{seed}");
            let real = Real::new(server, locks.backend().as_ref(), &name);
            let mut subject = SemaphoreSubject {
                real,
                semaphore: semaphore.clone(),
                handed_over: 0,
            };
            let label = format!("the semaphore on {client}");
            walk(&model, &mut subject, server, &label, seed, &mut seen).await;
        }
        seen.assert_everything(client, BOUNDS);
        let side_by_side = seen
            .answers
            .iter()
            .any(|answer| matches!(answer, Answer::Granted(grant) if grant.slot > 0));
        assert!(side_by_side, "{client}: no grant beside another: {seen:?}");
    });
}

/// Every walk agrees with the model in fair mode, on both clients, with
/// permits of weights 1, 1 and 2 in a semaphore of 3.
#[test]
fn the_fair_semaphore_scripts_do_what_the_model_does() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = connect(server, client).await;
        // The model's places last a tick less than its leases.
        let semaphore = Semaphore::new(3, &[1, 1, 2]).in_fair_mode(BOUNDS.ttl - 1);
        let model = LeaseModel::new(semaphore.clone(), BOUNDS, FAULTS);
        let subject = |real| SemaphoreSubject {
            real,
            semaphore: semaphore.clone(),
            handed_over: 0,
        };
        let on = (server, client, locks.backend().as_ref());
        super::walk_waiters(on, &model, "fair semaphore", subject, |walked| {
            walked.handed_over
        })
        .await;
    });
}
