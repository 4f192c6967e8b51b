//! Property tests of a strategy's count-down latch against a reference
//! model: random sequences of sets (of counts 0 to 3), count-downs (with
//! one of three ids, or none), deletes, reads and the latch's TTL ending
//! (its count gone, its ids left behind, as when they were written later
//! than the count), run on a real server through the backend's
//! [`LatchBackend`](lock_core::LatchBackend) and compared step by step,
//! with the latch's state read after each step.

use std::collections::BTreeSet;
use std::time::Duration;

use lock_core::{LockError, LockKey};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::contract::BackendFactory;
use crate::model::{fail, ModelRun};

const TTL: Duration = Duration::from_secs(60);

/// One step of a generated scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Set {
        count: u32,
    },
    Down {
        id: Option<u8>,
    },
    Delete,
    /// The count's TTL ends before its ids' do.
    Expire,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..=3u32).prop_map(|count| Op::Set { count }),
        6 => proptest::option::of(0..3u8).prop_map(|id| Op::Down { id }),
        1 => Just(Op::Delete),
        2 => Just(Op::Expire),
    ]
}

/// The reference model: the latch's count, initial count and the ids that
/// counted it down, or `None` when no count is set.
#[derive(Debug, Default)]
struct Model {
    latch: Option<(u32, u32, BTreeSet<u8>)>,
}

/// What a step answers, the same way for the model and the server.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Set(bool),
    Left(u32),
    Deleted(bool),
    Mismatch { stored: u32, requested: u32 },
    NotSet,
    Expired,
}

impl Model {
    fn apply(&mut self, op: Op) -> Reply {
        match (op, &mut self.latch) {
            (Op::Set { count }, None) => {
                self.latch = Some((count, count, BTreeSet::new()));
                Reply::Set(true)
            }
            (Op::Set { count }, Some((_, initial, _))) if *initial == count => Reply::Set(false),
            (Op::Set { count }, Some((_, initial, _))) => Reply::Mismatch {
                stored: *initial,
                requested: count,
            },
            (Op::Down { .. }, None) => Reply::NotSet,
            (Op::Down { id }, Some((count, _, ids))) => {
                let counted_before = id.is_some_and(|id| ids.contains(&id));
                if *count > 0 && !counted_before {
                    *count -= 1;
                    ids.extend(id);
                }
                Reply::Left(*count)
            }
            (Op::Delete, latch) => Reply::Deleted(latch.take().is_some()),
            (Op::Expire, latch) => {
                *latch = None;
                Reply::Expired
            }
        }
    }
}

/// Runs `cases` random scenarios against the factory's latches and the
/// model. Panics with the shrunk failing scenario if they ever disagree.
pub fn check_latch_against_model(factory: &dyn BackendFactory, cases: u32) {
    let run = ModelRun::start(factory);
    let key = LockKey::new("model:", "latch").expect("key");
    let scenarios = proptest::collection::vec(op_strategy(), 1..=30);
    run.check(cases, scenarios, "the latch", |scenario| {
        run.block_on(run_scenario(&run, &key, &scenario))
    });
}

async fn run_scenario(run: &ModelRun, key: &LockKey, scenario: &[Op]) -> Result<(), TestCaseError> {
    let backend = run.deployment.backend.as_ref();
    let latches = backend.capabilities().latches().expect("latches");
    let mut model = Model::default();
    for (step, &op) in scenario.iter().enumerate() {
        let answered = match op {
            Op::Set { count } => match latches.set_latch(key, count, TTL).await {
                Ok(set) => Reply::Set(set),
                Err(LockError::CountMismatch {
                    stored, requested, ..
                }) => Reply::Mismatch { stored, requested },
                Err(err) => return Err(fail(step, op, err)),
            },
            Op::Down { id } => {
                let id = id.map(|id| format!("party-{id}"));
                match latches.count_down_latch(key, id.as_deref()).await {
                    Ok(left) => Reply::Left(left),
                    Err(LockError::LatchNotSet { .. }) => Reply::NotSet,
                    Err(err) => return Err(fail(step, op, err)),
                }
            }
            Op::Delete => Reply::Deleted(
                latches
                    .delete_latch(key)
                    .await
                    .map_err(|err| fail(step, op, err))?,
            ),
            Op::Expire => {
                run.deployment.admin_all(&["DEL", key.redis_key()]);
                Reply::Expired
            }
        };
        let expected = model.apply(op);
        prop_assert_eq!(&answered, &expected, "step {} {:?}", step, op);
        let state = latches
            .latch_state(key)
            .await
            .map_err(|err| fail(step, op, err))?;
        let read = state.map(|state| (state.count, state.initial));
        let modelled = model
            .latch
            .as_ref()
            .map(|(count, initial, _)| (*count, *initial));
        prop_assert_eq!(read, modelled, "step {} {:?}: the state read", step, op);
    }
    Ok(())
}
