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
    Access, AccessRequest, AcquireOutcome, HoldToken, LockBackend, LockError, LockKey, OwnerToken,
    FAIR_WAITER_LEASE,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::contract::{BackendFactory, Deployment};
use crate::model::{expire_hold, fail, step_strategy, At, ModelRun, Step};

const HOLDERS: usize = 3;
const TTL: Duration = Duration::from_secs(60);

/// One step of a generated scenario: a take is a read or a write.
type Op = Step<Access>;

fn op_strategy() -> impl Strategy<Value = Op> {
    let access = prop_oneof![Just(Access::Shared), Just(Access::Exclusive)];
    step_strategy(HOLDERS, 5, access)
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

async fn run_scenario(
    deployment: &Deployment,
    key: &LockKey,
    owners: &[OwnerToken],
    scenario: &[Op],
) -> Result<(), TestCaseError> {
    let backend: &dyn LockBackend = deployment.backend.as_ref();
    let rw_locks = backend.capabilities().rw_locks().expect("read-write locks");
    let at = |step, op| At::new(backend, key, step, op);
    let mut model = Model::default();
    for (step, op) in scenario.iter().copied().enumerate() {
        match op {
            Op::Take {
                holder,
                what: access,
            } => {
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
                at(step, op).extend(&held.hold, held.live).await?;
            }
            Op::Release { holder } => {
                let Some(held) = model.holds.get_mut(&holder).and_then(Vec::pop) else {
                    continue;
                };
                at(step, op).release(&held.hold, held.live).await?;
            }
            Op::Expire { holder } => {
                let Some(held) = model
                    .holds
                    .get_mut(&holder)
                    .and_then(|holds| holds.iter_mut().find(|held| held.live))
                else {
                    continue;
                };
                expire_hold(deployment, key, &held.hold);
                held.live = false;
            }
        }
        let state = rw_locks
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
