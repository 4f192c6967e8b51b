//! Property tests of a strategy's semaphore against a reference model:
//! random sequences of acquire (of weights 1 to 3), extend, release and
//! expiry by several holders of one semaphore of 4, run on a real server
//! through [`LockBackend::try_acquire`] with a
//! [`Claim::Permit`](lock_core::Claim::Permit) and compared step by step,
//! with the server's own view
//! ([`SemaphoreBackend::semaphore_state`](lock_core::SemaphoreBackend::semaphore_state))
//! after each step.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use lock_core::{AcquireOutcome, HoldToken, LockBackend, LockKey, OwnerToken, PermitRequest};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::contract::{BackendFactory, Deployment};
use crate::model::{expire_hold, fail, step_strategy, At, ModelRun, Step};

const HOLDERS: usize = 4;
const LIMIT: u32 = 4;
const TTL: Duration = Duration::from_secs(60);

/// One step of a generated scenario: a take is an acquire of a weight.
type Op = Step<u32>;

fn op_strategy() -> impl Strategy<Value = Op> {
    step_strategy(HOLDERS, 4, 1..=3u32)
}

/// A holder's live permit in the model: its slot, weight and token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    slot: u32,
    weight: u32,
    token: u64,
}

/// The reference model: each holder's live permit, and the last token of
/// each slot.
#[derive(Debug, Default)]
struct Model {
    held: HashMap<usize, Held>,
    last_token: BTreeMap<u32, u64>,
}

impl Model {
    fn used(&self) -> u32 {
        self.held.values().map(|held| held.weight).sum()
    }
}

/// Runs `cases` random scenarios against the factory's semaphores and the
/// model. Panics with the shrunk failing scenario if they ever disagree.
pub fn check_semaphore_against_model(factory: &dyn BackendFactory, cases: u32) {
    let run = ModelRun::start(factory);
    let key = LockKey::new("model:", "semaphore").expect("key");
    let scenarios = proptest::collection::vec(op_strategy(), 1..=30);
    run.check(cases, scenarios, "the semaphore", |scenario| {
        run.block_on(run_scenario(&run.deployment, &key, &scenario))
    });
}

/// A new permit attempt of `weight` for a holder.
fn attempt(weight: u32) -> HoldToken {
    HoldToken::new(OwnerToken::generate().expect("os rng"))
        .expect("os rng")
        .with_kind(lock_core::HoldKind::Permit(lock_core::Permit::new(weight)))
}

async fn run_scenario(
    deployment: &Deployment,
    key: &LockKey,
    scenario: &[Op],
) -> Result<(), TestCaseError> {
    let backend: &dyn LockBackend = deployment.backend.as_ref();
    let semaphores = backend.capabilities().semaphores().expect("semaphores");
    let at = |step, op| At::new(backend, key, step, op);
    let mut model = Model::default();
    // Each holder's current hold: kept while its permit lives, a new one
    // (a new id) for the next acquire once it ended.
    let mut holds: HashMap<usize, HoldToken> = HashMap::new();
    for (step, op) in scenario.iter().copied().enumerate() {
        match op {
            Op::Take {
                holder,
                what: weight,
            } => {
                let hold = holds
                    .entry(holder)
                    .or_insert_with(|| attempt(weight))
                    .clone();
                let request = PermitRequest::new(
                    LIMIT,
                    match hold.kind() {
                        lock_core::HoldKind::Permit(permit) => permit.weight(),
                        _ => weight,
                    },
                );
                let outcome = backend
                    .try_acquire(key, &hold, TTL, &lock_core::Claim::Permit(request), None)
                    .await
                    .map_err(|err| fail(step, op, err))?;
                match (model.held.get(&holder).copied(), outcome) {
                    // The same id again: its own permit, as a retried attempt.
                    (
                        Some(held),
                        AcquireOutcome::Acquired(lock_core::Acquired {
                            slot: Some(slot),
                            fencing_token: Some(fencing_token),
                            ..
                        }),
                    ) => {
                        prop_assert_eq!(
                            (slot, fencing_token.get()),
                            (held.slot, held.token),
                            "step {} {:?}",
                            step,
                            op
                        );
                    }
                    (Some(held), other) => {
                        prop_assert!(
                            false,
                            "step {} {:?}: holds {:?}, answered {:?}",
                            step,
                            op,
                            held,
                            other
                        );
                    }
                    (
                        None,
                        AcquireOutcome::Acquired(lock_core::Acquired {
                            slot: Some(slot),
                            fencing_token: Some(fencing_token),
                            ..
                        }),
                    ) => {
                        let weight = request.weight;
                        prop_assert!(
                            model.used() + weight <= LIMIT,
                            "step {} {:?}: granted beyond the limit",
                            step,
                            op
                        );
                        prop_assert!(slot < LIMIT, "step {}: slot {}", step, slot);
                        prop_assert!(
                            model.held.values().all(|held| held.slot != slot),
                            "step {} {:?}: slot {} is live",
                            step,
                            op,
                            slot
                        );
                        // The lowest free slot.
                        let lowest = (0..LIMIT).find(|candidate| {
                            model.held.values().all(|held| held.slot != *candidate)
                        });
                        prop_assert_eq!(Some(slot), lowest, "step {} {:?}", step, op);
                        let token = fencing_token.get();
                        let last = model.last_token.get(&slot).copied().unwrap_or(0);
                        prop_assert!(
                            token > last,
                            "step {}: slot {} token {} after {}",
                            step,
                            slot,
                            token,
                            last
                        );
                        model.last_token.insert(slot, token);
                        model.held.insert(
                            holder,
                            Held {
                                slot,
                                weight,
                                token,
                            },
                        );
                    }
                    (None, AcquireOutcome::Held { .. }) => {
                        prop_assert!(
                            model.used() + request.weight > LIMIT,
                            "step {} {:?}: refused with {} of {} used",
                            step,
                            op,
                            model.used(),
                            LIMIT
                        );
                        holds.remove(&holder);
                    }
                    (None, other) => prop_assert!(false, "step {} {:?}: {:?}", step, op, other),
                }
            }
            Op::Extend { holder } => {
                let Some(hold) = holds.get(&holder) else {
                    continue;
                };
                let live = model.held.contains_key(&holder);
                at(step, op).extend(hold, live).await?;
            }
            Op::Release { holder } => {
                let Some(hold) = holds.remove(&holder) else {
                    continue;
                };
                let live = model.held.remove(&holder).is_some();
                at(step, op).release(&hold, live).await?;
            }
            Op::Expire { holder } => {
                let Some(hold) = holds.get(&holder) else {
                    continue;
                };
                expire_hold(deployment, key, hold);
                model.held.remove(&holder);
            }
        }
        let state = semaphores
            .semaphore_state(key)
            .await
            .map_err(|err| fail(step, op, err))?;
        prop_assert_eq!(
            state.used,
            u64::from(model.used()),
            "step {} {:?}: weight in use",
            step,
            op
        );
        let mut slots: Vec<(u32, u32, u64)> = state
            .permits
            .iter()
            .map(|permit| (permit.slot, permit.weight, permit.fencing_token.get()))
            .collect();
        slots.sort_unstable();
        let mut expected: Vec<(u32, u32, u64)> = model
            .held
            .values()
            .map(|held| (held.slot, held.weight, held.token))
            .collect();
        expected.sort_unstable();
        prop_assert_eq!(slots, expected, "step {} {:?}: live permits", step, op);
    }
    Ok(())
}
