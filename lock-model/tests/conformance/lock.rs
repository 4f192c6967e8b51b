//! The lock's scripts against [`Lock`]'s model.

use std::time::Duration;

use distlock::backend::{Claim, HoldKind, HoldToken};
use distlock::FencingToken;
use lock_core::strategy::KeyNames;
use lock_core::AcquireOutcome;
use lock_model::{
    Answer, Bounds, ClientDefect, Faults, Grant, LeaseModel, Lock, LockDefect, Op, Shown, MUTEX,
};
use stateright::{Checker, Model};

use super::{connect, replay, walk, Real, Seen, Subject, BOUNDS, FAULTS, MARK, TTL, WALKS};

/// The lock key and its counter, and an election's leader record.
pub(super) struct LockSubject<'a>(pub(super) Real<'a>);

impl LockSubject<'_> {
    fn hold(&mut self, client: u8, attempt: u8) -> HoldToken {
        self.0.hold(client, attempt, HoldKind::Lock)
    }

    /// The holder of the lock key: its client and attempt, and its token.
    pub(super) fn holder(&self) -> Option<(u8, u8, u64)> {
        if !self.is_string() {
            return None;
        }
        let value = self.0.text(self.0.key.redis_key())?;
        let (id, token) = value.split_once('#').expect("a fenced value");
        let (client, attempt) = self.0.who(id);
        Some((client, attempt, token.parse().expect("a token")))
    }

    /// Whether the lock key is a lock's (not another kind's on the name).
    fn is_string(&self) -> bool {
        let kind = self.0.admin(&["TYPE", self.0.key.redis_key()]);
        kind.as_text() == Some("string")
    }

    fn pttl(&self) -> i64 {
        self.0
            .admin(&["PTTL", self.0.key.redis_key()])
            .as_int()
            .expect("an integer")
    }
}

impl Subject for LockSubject<'_> {
    async fn run(&mut self, client: u8, op: Op) -> Answer {
        let (backend, key) = (self.0.backend, self.0.key.clone());
        match op {
            Op::Acquire { attempt, .. } => {
                let hold = self.hold(client, attempt);
                match backend
                    .try_acquire(&key, &hold, TTL, &Claim::LOCK, None)
                    .await
                {
                    Ok(AcquireOutcome::Acquired(granted)) => {
                        // As a guard keeps it: renewals and releases send
                        // the value with its token, as the key stores it.
                        let token = granted.fencing_token.expect("a token");
                        self.0
                            .holds
                            .insert((client, attempt), hold.granted(Some(token)));
                        Answer::Granted(Grant::token(token.get()))
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
                // As `resume` builds them: the token's hold with its claim,
                // and a new hold of the same owner with the same claim.
                let claim = Some(FencingToken::new(from.claim.token));
                let old = self.hold(from.client, from.attempt).granted(claim);
                let new = Real::successor(&old).granted(claim);
                self.0.holds.insert((client, attempt), new.clone());
                super::take_over(backend, &key, &old, &new).await
            }
            Op::Release { attempt } | Op::Cleanup { attempt } => {
                let hold = self.hold(client, attempt);
                super::release(backend, &key, &hold).await
            }
            Op::Proclaim { attempt } => {
                // The value is the client's number, as the model's.
                let hold = self.hold(client, attempt);
                let elections = backend.capabilities().elections().expect("elections");
                match elections.proclaim(&key, &hold, &client.to_string()).await {
                    Ok(true) => Answer::Proclaimed,
                    Ok(false) => Answer::NotHeld,
                    Err(error) => panic!("proclaim: {error:?}"),
                }
            }
            Op::GiveUp { .. } => panic!("the lock's model sends no {op:?}"),
        }
    }

    fn holds(&self) -> Vec<(u8, u8, Grant)> {
        self.holder()
            .map(|(client, attempt, token)| (client, attempt, Grant::token(token)))
            .into_iter()
            .collect()
    }

    fn counters(&self) -> Vec<(u8, u64)> {
        self.0
            .text(self.0.key.fence_key())
            .map(|text| (0, text.parse().expect("a counter")))
            .into_iter()
            .collect()
    }

    fn records(&self) -> Vec<Shown> {
        let record = self.0.text(&self.0.key.leader_key());
        record
            .map(|record| {
                let (term, value) = record.split_once(':').expect("<term>:<value>");
                Shown {
                    term: term.parse().expect("a term"),
                    value: value.parse().expect("a client's number"),
                }
            })
            .into_iter()
            .collect()
    }

    async fn shown(&self) -> Option<Shown> {
        let elections = self
            .0
            .backend
            .capabilities()
            .elections()
            .expect("elections");
        let leader = elections
            .read_leader(&self.0.key)
            .await
            .expect("a leader read");
        leader.map(|leader| Shown {
            term: leader.term.get(),
            value: leader.value.parse().expect("a client's number"),
        })
    }

    fn mark(&self) {
        if self.is_string() && self.pttl() > MARK {
            self.0
                .admin(&["PEXPIRE", self.0.key.redis_key(), &MARK.to_string()]);
        }
    }

    fn left(&self) -> Vec<(u8, u8, i64)> {
        let left = self.pttl();
        self.holder()
            .map(|(client, attempt, _)| (client, attempt, left))
            .into_iter()
            .collect()
    }

    async fn expire(&self, _: &[(u8, u8)]) {
        let key = self.0.key.redis_key();
        self.0.admin(&["PEXPIRE", key, "1"]);
        for _ in 0..100 {
            if self.0.admin(&["EXISTS", key]).as_int() == Some(0) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("the key did not expire");
    }
}

/// Every walk agrees with the model, on both clients: through the
/// default grant (`lock/acquire_token.lua`), and with holder information
/// through the grant with options (`lock/acquire.lua`, which also writes
/// the holder's hash beside the lock).
#[test]
fn the_lock_scripts_do_what_the_model_does() {
    lock_testkit::on_every_client(async |server, client| {
        for (grant, extra) in [
            ("default", &[][..]),
            ("holder", &[("DISTLOCK_HOLDER_INFO", "true")][..]),
        ] {
            let locks = super::connect_with("single", server, client, extra).await;
            let model = LeaseModel::new(Lock::default(), BOUNDS, FAULTS);
            let mut seen = Seen::default();
            for seed in 0..WALKS {
                let name = format!("lock-{grant}-{client}-{seed}");
                let real = Real::new(server, locks.backend().as_ref(), &name);
                let label = format!("the lock ({grant} grant) on {client}");
                walk(
                    &model,
                    &mut LockSubject(real),
                    server,
                    &label,
                    seed,
                    &mut seen,
                )
                .await;
            }
            seen.assert_everything(client, BOUNDS);
        }
    });
}

/// The checker's counterexample to the lock's promise under `model`, as
/// the actions that reach it.
fn counterexample(model: &LeaseModel<Lock>) -> Vec<lock_model::Action> {
    let checker = model.clone().checker().spawn_bfs().join();
    let path = checker.discovery(MUTEX).expect("a counterexample");
    path.into_actions()
}

/// A counterexample replays on a real server: one found with a client
/// that counts its lease from the reply runs step by step through the
/// real scripts, which answer as the model's (the defect is the client's,
/// so the two clients that both trust the lock are real), and one found
/// with a release that deletes whoever holds the key parts from them at
/// that release, on both clients.
#[test]
fn a_counterexample_replays_on_the_real_scripts() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = connect(server, client).await;
        let backend = locks.backend().as_ref();
        let model = LeaseModel::new(Lock::default(), Bounds::SMALL, Faults::default())
            .with_client_defect(ClientDefect::DeadlineFromReply);
        let real = Real::new(server, backend, &format!("replay-client-{client}"));
        let replayed = replay(
            &model,
            &mut LockSubject(real),
            server,
            counterexample(&model),
        )
        .await;
        assert_eq!(replayed, Ok(()), "{client}: the client's defect");

        let defect = Lock::with_defect(LockDefect::ReleaseWithoutCompare);
        let model = LeaseModel::new(defect, Bounds::SMALL, Faults::default());
        let real = Real::new(server, backend, &format!("replay-script-{client}"));
        let replayed = replay(
            &model,
            &mut LockSubject(real),
            server,
            counterexample(&model),
        )
        .await;
        let parted = replayed.expect_err("the real release compares");
        assert!(
            parted.starts_with("the script answered NotHeld, the model Released"),
            "{client}: {parted}"
        );
        assert!(parted.contains("lock/release.lua"), "{client}: {parted}");
    });
}
