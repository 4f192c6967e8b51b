//! The fair lock's scripts against [`FairLock`]'s model: waiters that queue
//! and offer their attempts, releases that grant the next live offer on the
//! server, attempts that take up a grant to their earlier one, and waiters
//! that give up and give a grant back.

use distlock::backend::{Claim, FairPlace, HoldKind, HoldToken};
use distlock::FencingToken;
use lock_core::AcquireOutcome;
use lock_model::{Answer, FairLock, Grant, LeaseModel, Op};

use super::lock::LockSubject;
use super::{connect, Real, Subject, BOUNDS, FAULTS, TTL, WAITER_LEASE};

/// The lock key and its counter, the line and the offers.
pub(super) struct FairSubject<'a> {
    pub(super) lock: LockSubject<'a>,
    /// Steps after which a release had granted a waiter on the server.
    pub(super) handed_over: u32,
}

impl<'a> FairSubject<'a> {
    fn real(&mut self) -> &mut Real<'a> {
        &mut self.lock.0
    }

    /// The hold of `client`'s `attempt`, in line as a fair waiter's is.
    fn hold(&mut self, client: u8, attempt: u8) -> HoldToken {
        let real = self.real();
        let hold = real.hold(client, attempt, HoldKind::Lock);
        if hold.is_in_line() {
            return hold;
        }
        let hold = hold.in_line();
        real.holds.insert((client, attempt), hold.clone());
        hold
    }

    /// Keeps the hold of `client`'s `attempt` as granted `token`, as the
    /// guard of a grant keeps it (renewals and releases send the token).
    fn granted(&mut self, client: u8, attempt: u8, token: FencingToken) {
        let hold = self.hold(client, attempt).granted(Some(token));
        self.real().holds.insert((client, attempt), hold);
    }

    /// After a release or a give-up: the hold a hand-off granted a waiter
    /// (the lock's holder changed to it), kept with its token as the waiter
    /// keeps it from the message.
    fn note_hand_off(&mut self, before: Option<(u8, u8, u64)>) {
        let Some((holder, granted, token)) = self.lock.holder() else {
            return;
        };
        if before.is_none_or(|(was, earlier, _)| (was, earlier) != (holder, granted)) {
            self.granted(holder, granted, FencingToken::new(token));
            self.handed_over += 1;
        }
    }
}

impl Subject for FairSubject<'_> {
    async fn run(&mut self, client: u8, op: Op) -> Answer {
        let (backend, key) = (self.lock.0.backend, self.lock.0.key.clone());
        match op {
            Op::Acquire { attempt, earlier } => {
                let hold = self.hold(client, attempt);
                let offered = (earlier != 0).then(|| self.hold(client, earlier));
                let claim = Claim::Lock {
                    fair: Some(FairPlace::new(WAITER_LEASE, true)),
                };
                match backend
                    .try_acquire(&key, &hold, TTL, &claim, offered.as_ref())
                    .await
                {
                    Ok(AcquireOutcome::Acquired(granted)) => {
                        let token = granted.fencing_token.expect("a token");
                        if granted.earlier {
                            self.granted(client, earlier, token);
                            Answer::TakenUp(Grant::token(token.get()))
                        } else {
                            self.granted(client, attempt, token);
                            Answer::Granted(Grant::token(token.get()))
                        }
                    }
                    Ok(AcquireOutcome::Held { .. }) => Answer::Held,
                    other => panic!("fair acquire: {other:?}"),
                }
            }
            Op::Release { attempt } | Op::Cleanup { attempt } => {
                let hold = self.hold(client, attempt);
                // A lost attempt's cleanup knows no token: it sends the
                // attempt's value alone, as the engine does.
                let hold = match op {
                    Op::Cleanup { .. } => hold.granted(None),
                    _ => hold,
                };
                let before = self.lock.holder();
                let answer = super::release(backend, &key, &hold).await;
                self.note_hand_off(before);
                answer
            }
            Op::GiveUp { offered } => {
                let offered = self.hold(client, offered);
                let before = self.lock.holder();
                let answer = super::give_up(self.real(), client, &offered).await;
                self.note_hand_off(before);
                answer
            }
            Op::TakeOver { from, attempt } => {
                // As `resume` builds them in fair mode: the token's hold
                // with its claim, and a new hold in line with the same.
                let claim = Some(FencingToken::new(from.claim.token));
                let old = self.hold(from.client, from.attempt).granted(claim);
                let new = Real::successor(&old).in_line().granted(claim);
                self.real().holds.insert((client, attempt), new.clone());
                super::take_over(backend, &key, &old, &new).await
            }
            Op::Extend { .. } => self.lock.run(client, op).await,
            Op::Proclaim { .. } => panic!("the fair lock's model sends no {op:?}"),
        }
    }

    fn holds(&self) -> Vec<(u8, u8, Grant)> {
        self.lock.holds()
    }

    fn counters(&self) -> Vec<(u8, u64)> {
        self.lock.counters()
    }

    fn line(&self) -> Vec<u8> {
        self.lock.0.line()
    }

    fn expire_places(&self, clients: &[u8]) {
        self.lock.0.expire_places(clients);
    }

    fn mark(&self) {
        self.lock.mark();
    }

    fn left(&self) -> Vec<(u8, u8, i64)> {
        self.lock.left()
    }

    async fn expire(&self, holds: &[(u8, u8)]) {
        self.lock.expire(holds).await;
    }
}

/// Every walk agrees with the model, on both clients, with three waiters.
#[test]
fn the_fair_scripts_do_what_the_model_does() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = connect(server, client).await;
        // The model's places last a tick less than its leases.
        let model = LeaseModel::new(FairLock::new(BOUNDS.ttl - 1), BOUNDS, FAULTS);
        let subject = |real| FairSubject {
            lock: LockSubject(real),
            handed_over: 0,
        };
        let on = (server, client, locks.backend().as_ref());
        super::walk_waiters(on, &model, "fair lock", subject, |walked| {
            walked.handed_over
        })
        .await;
    });
}
