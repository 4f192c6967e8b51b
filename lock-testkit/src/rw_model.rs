//! Property tests of a strategy's read-write lock against a reference
//! model: random sequences of one-shot reads and writes (re-entries,
//! downgrades and refused upgrades among them: each holder is one owner),
//! extends, releases and expiries by several holders of one lock, run on a
//! real server through [`LockBackend::try_acquire`] with a
//! [`Claim::Access`](lock_core::Claim::Access) and compared step by step,
//! with the server's own view
//! ([`RwLockBackend::rw_lock_state`](lock_core::RwLockBackend::rw_lock_state))
//! after each step.

use std::collections::HashMap;
use std::time::Duration;

use lock_core::{
    Access, AccessRequest, AcquireOutcome, ExtendOutcome, HoldToken, LockBackend, LockError,
    LockKey, OwnerToken, ReleaseOutcome, FAIR_WAITER_LEASE,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::contract::{BackendFactory, Deployment};
use crate::model::ModelRun;

const HOLDERS: usize = 3;
const TTL: Duration = Duration::from_secs(60);

/// One step of a generated scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Take { holder: usize, access: Access },
    Extend { holder: usize },
    Release { holder: usize },
    Expire { holder: usize },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let holder = 0..HOLDERS;
    let access = prop_oneof![Just(Access::Shared), Just(Access::Exclusive)];
    prop_oneof![
        5 => (holder.clone(), access).prop_map(|(holder, access)| Op::Take { holder, access }),
        2 => holder.clone().prop_map(|holder| Op::Extend { holder }),
        3 => holder.clone().prop_map(|holder| Op::Release { holder }),
        1 => holder.prop_map(|holder| Op::Expire { holder }),
    ]
}

/// One hold of the model: its server hold, mode and token, and whether it
/// is live (an expired one stays until its holder releases it).
#[derive(Debug, Clone)]
struct Held {
    hold: HoldToken,
    access: Access,
    token: u64,
    live: bool,
}

/// The reference model: each holder's holds, latest last, and the last
/// write token.
#[derive(Debug, Default)]
struct Model {
    holds: HashMap<usize, Vec<Held>>,
    last_write: u64,
}

impl Model {
    fn live(&self) -> impl Iterator<Item = (usize, &Held)> {
        self.holds
            .iter()
            .flat_map(|(holder, holds)| holds.iter().map(move |held| (*holder, held)))
            .filter(|(_, held)| held.live)
    }

    /// What `holder` asking for `access` should get: the token, `None` for
    /// "held", or `Err` for a refused upgrade.
    fn expect(&self, holder: usize, access: Access) -> Result<Option<u64>, ()> {
        let own = |mode| {
            self.live()
                .any(|(h, held)| h == holder && held.access == mode)
        };
        let own_write = self
            .live()
            .find(|(h, held)| *h == holder && held.access == Access::Exclusive)
            .map(|(_, held)| held.token);
        let others = |write_only: bool| {
            self.live()
                .any(|(h, held)| h != holder && (!write_only || held.access == Access::Exclusive))
        };
        match access {
            Access::Exclusive if own(Access::Shared) && own_write.is_none() => Err(()),
            Access::Exclusive if own_write.is_some() => Ok(own_write),
            Access::Exclusive if others(false) => Ok(None),
            Access::Exclusive => Ok(Some(self.last_write + 1)),
            Access::Shared if others(true) => Ok(None),
            Access::Shared => Ok(Some(self.last_write)),
        }
    }
}

/// Runs `cases` random scenarios against the factory's read-write locks
/// and the model. Panics with the shrunk failing scenario if they ever
/// disagree.
pub fn check_rw_lock_against_model(factory: &dyn BackendFactory, cases: u32) {
    let run = ModelRun::start(factory);
    let key = LockKey::new("model:", "rw").expect("key");
    let owners: Vec<OwnerToken> = (0..HOLDERS)
        .map(|_| OwnerToken::generate().expect("os rng"))
        .collect();
    let scenarios = proptest::collection::vec(op_strategy(), 1..=30);
    run.check(cases, scenarios, "the read-write lock", |scenario| {
        run.block_on(run_scenario(&run.deployment, &key, &owners, &scenario))
    });
}

fn fail(step: usize, op: Op, err: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(format!("step {step} {op:?}: {err}"))
}

async fn run_scenario(
    deployment: &Deployment,
    key: &LockKey,
    owners: &[OwnerToken],
    scenario: &[Op],
) -> Result<(), TestCaseError> {
    let backend: &dyn LockBackend = deployment.backend.as_ref();
    let mut model = Model::default();
    for (step, op) in scenario.iter().copied().enumerate() {
        match op {
            Op::Take { holder, access } => {
                let hold = HoldToken::new(owners[holder].clone())
                    .expect("os rng")
                    .with_kind(lock_core::HoldKind::Access(access));
                // One-shot: a write never queues, so no writer waits.
                let request = AccessRequest::new(access, FAIR_WAITER_LEASE, false);
                let outcome = backend
                    .try_acquire(key, &hold, TTL, &lock_core::Claim::Access(request), None)
                    .await;
                match (model.expect(holder, access), outcome) {
                    (Err(()), Err(LockError::UpgradeRefused { .. })) => {}
                    (Ok(None), Ok(AcquireOutcome::Held { .. })) => {}
                    (
                        Ok(Some(token)),
                        Ok(AcquireOutcome::Acquired(lock_core::Acquired {
                            fencing_token: Some(granted),
                            ..
                        })),
                    ) => {
                        prop_assert_eq!(granted.get(), token, "step {} {:?}: token", step, op);
                        if access == Access::Exclusive {
                            model.last_write = model.last_write.max(token);
                        }
                        model.holds.entry(holder).or_default().push(Held {
                            hold,
                            access,
                            token,
                            live: true,
                        });
                    }
                    (expected, outcome) => prop_assert!(
                        false,
                        "step {} {:?}: expected {:?}, answered {:?}",
                        step,
                        op,
                        expected,
                        outcome
                    ),
                }
            }
            Op::Extend { holder } => {
                let Some(held) = model.holds.get(&holder).and_then(|holds| holds.last()) else {
                    continue;
                };
                let outcome = backend
                    .extend(key, &held.hold, TTL)
                    .await
                    .map_err(|err| fail(step, op, err))?;
                prop_assert_eq!(
                    matches!(outcome, ExtendOutcome::Extended { .. }),
                    held.live,
                    "step {} {:?}: {:?}",
                    step,
                    op,
                    outcome
                );
            }
            Op::Release { holder } => {
                let Some(held) = model.holds.get_mut(&holder).and_then(Vec::pop) else {
                    continue;
                };
                let outcome = backend
                    .release(key, &held.hold)
                    .await
                    .map_err(|err| fail(step, op, err))?;
                let expected = match held.live {
                    true => ReleaseOutcome::Released,
                    false => ReleaseOutcome::NotHeld,
                };
                prop_assert_eq!(outcome, expected, "step {} {:?}", step, op);
                let again = backend
                    .release(key, &held.hold)
                    .await
                    .map_err(|err| fail(step, op, err))?;
                prop_assert_eq!(
                    again,
                    ReleaseOutcome::NotHeld,
                    "step {} {:?}: released twice",
                    step,
                    op
                );
            }
            Op::Expire { holder } => {
                let Some(held) = model
                    .holds
                    .get_mut(&holder)
                    .and_then(|holds| holds.iter_mut().find(|held| held.live))
                else {
                    continue;
                };
                // Its deadline in the past: the next script drops it.
                deployment.admin_all(&[
                    "ZADD",
                    key.redis_key(),
                    "XX",
                    "1",
                    held.hold.attempt_value(),
                ]);
                held.live = false;
            }
        }
        let state = backend
            .capabilities()
            .rw_locks()
            .expect("read-write locks")
            .rw_lock_state(key)
            .await
            .map_err(|err| fail(step, op, err))?;
        prop_assert_eq!(
            state.epoch.get(),
            model.last_write,
            "step {} {:?}: the epoch",
            step,
            op
        );
        let mut seen: Vec<(bool, u64)> = state
            .holds
            .iter()
            .map(|hold| (hold.access == Access::Exclusive, hold.fencing_token.get()))
            .collect();
        seen.sort_unstable();
        let mut expected: Vec<(bool, u64)> = model
            .live()
            .map(|(_, held)| (held.access == Access::Exclusive, held.token))
            .collect();
        expected.sort_unstable();
        prop_assert_eq!(seen, expected, "step {} {:?}: live holds", step, op);
    }
    Ok(())
}
