//! The read-write lock's scripts against [`RwLock`]'s model: readers that
//! prefer writers, and writers that prefer readers (no offers, so no
//! hand-off on the server) or writers (their offers granted on the server,
//! taken up, given back).

use distlock::backend::{AccessRequest, Claim, HoldKind, HoldToken};
use distlock::state::Access;
use distlock::FencingToken;
use lock_core::strategy::KeyNames;
use lock_core::AcquireOutcome;
use lock_model::{Answer, Grant, LeaseModel, Op, RwLock};

use super::{
    connect, lease_set, walk, Real, Seen, Subject, BOUNDS, FAULTS, TTL, WAITER_LEASE, WALKS,
};

/// The holds (a sorted set of id to deadline), their modes, the write
/// counter and the line of waiting writers.
pub(super) struct RwSubject<'a> {
    pub(super) real: Real<'a>,
    pub(super) lock: RwLock,
    /// Steps after which a release or a give-up had granted a writer.
    pub(super) handed_over: u32,
}

impl RwSubject<'_> {
    fn access(&self, client: u8) -> Access {
        if self.lock.writes(client) {
            Access::Exclusive
        } else {
            Access::Shared
        }
    }

    fn hold(&mut self, client: u8, attempt: u8) -> HoldToken {
        let kind = HoldKind::Access(self.access(client));
        self.real.hold(client, attempt, kind)
    }

    /// What a release or a give-up did: counts a write granted to a waiting
    /// writer.
    fn note_hand_off(&mut self, before: &[(String, i64)]) {
        self.handed_over += u32::from(lease_set::granted_since(&self.real, before));
    }
}

impl Subject for RwSubject<'_> {
    async fn run(&mut self, client: u8, op: Op) -> Answer {
        let (backend, key) = (self.real.backend, self.real.key.clone());
        match op {
            Op::Acquire { attempt, earlier } => {
                let hold = self.hold(client, attempt);
                let offered = (earlier != 0).then(|| self.hold(client, earlier));
                let access = self.access(client);
                let writes_first = self.lock.hands_over;
                let request = AccessRequest::new(access, WAITER_LEASE, true)
                    .preferring_readers(access == Access::Exclusive && !writes_first);
                let claim = Claim::Access(request);
                match backend
                    .try_acquire(&key, &hold, TTL, &claim, offered.as_ref())
                    .await
                {
                    Ok(AcquireOutcome::Acquired(granted)) => {
                        let token = granted.fencing_token.expect("a token or an epoch");
                        let (attempt, hold) = match offered {
                            Some(offered) if granted.earlier => (earlier, offered),
                            _ => (attempt, hold),
                        };
                        self.real
                            .holds
                            .insert((client, attempt), hold.granted(Some(token)));
                        let grant = match access {
                            Access::Exclusive => Grant::token(token.get()),
                            Access::Shared => Grant::epoch(token.get()),
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
                // As `resume` builds them from a token's `read` or `write`:
                // the token's hold with its claim, and a new hold of the same
                // owner and mode with the same.
                let claim = Some(FencingToken::new(from.claim.token));
                let old = self.hold(from.client, from.attempt).granted(claim);
                let new = Real::successor(&old).granted(claim);
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
            Op::Proclaim { .. } => panic!("the read-write lock's model sends no {op:?}"),
        }
    }

    fn holds(&self) -> Vec<(u8, u8, Grant)> {
        let modes = self.real.key.held_key();
        let mut holds: Vec<_> = lease_set::live(&self.real)
            .into_iter()
            .map(|(id, _)| {
                let entry = self.real.admin(&["HGET", &modes, &id]);
                let entry = entry.as_text().expect("an entry");
                let (mode, token) = entry.split_once(':').expect("<r|w>:<token>");
                let (client, attempt) = self.real.who(&id);
                let token = token.parse().expect("a token");
                let grant = match mode {
                    "w" => Grant::token(token),
                    "r" => Grant::epoch(token),
                    other => panic!("the mode {other} is not r or w"),
                };
                (client, attempt, grant)
            })
            .collect();
        holds.sort_unstable();
        holds
    }

    fn counters(&self) -> Vec<(u8, u64)> {
        self.real
            .text(self.real.key.fence_key())
            .map(|text| (0, text.parse().expect("a counter")))
            .into_iter()
            .collect()
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

/// Every walk agrees with the model, on both clients, with a writer and two
/// readers.
#[test]
fn the_rw_scripts_do_what_the_model_does() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = connect(server, client).await;
        // The model's places last as long as its leases.
        let lock = RwLock::new(&[true, false, false], BOUNDS.ttl);
        let model = LeaseModel::new(lock.clone(), BOUNDS, FAULTS);
        let mut seen = Seen::default();
        for seed in 0..WALKS {
            let name = format!("rw-{client}-{seed}");
            let real = Real::new(server, locks.backend().as_ref(), &name);
            let mut subject = RwSubject {
                real,
                lock: lock.clone(),
                handed_over: 0,
            };
            let label = format!("the read-write lock on {client}");
            walk(&model, &mut subject, server, &label, seed, &mut seen).await;
        }
        seen.assert_everything(client, BOUNDS);
        assert!(
            seen.lines > 0,
            "{client}: no writer ever waited in line: {seen:?}"
        );
    });
}

/// Every walk agrees with the model with writers that prefer writers, on
/// both clients, with three writers: releases hand the write over on the
/// server (readers, who wait behind them, made take-ups too rare to see).
#[test]
fn the_rw_scripts_hand_writes_over_as_the_model_does() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = connect(server, client).await;
        // The model's places last a tick less than its leases.
        let lock = RwLock::new(&[true], BOUNDS.ttl - 1).handing_over();
        let model = LeaseModel::new(lock.clone(), BOUNDS, FAULTS);
        let subject = |real| RwSubject {
            real,
            lock: lock.clone(),
            handed_over: 0,
        };
        let on = (server, client, locks.backend().as_ref());
        let what = "read-write lock handing writes over";
        super::walk_waiters(on, &model, what, subject, |walked| walked.handed_over).await;
    });
}
