//! Property tests of a strategy's barrier against a reference model:
//! random sequences of entries (with a party count of 2 or 3), leaves and
//! expiries by four holders of one barrier, run on a real server through
//! [`LockBackend::try_acquire`] with a
//! [`Claim::Party`] and compared step by step,
//! with the server's own view
//! ([`BarrierBackend::barrier_state`](lock_core::BarrierBackend::barrier_state))
//! after each step.

use std::collections::BTreeSet;
use std::time::Duration;

use lock_core::{
    AcquireOutcome, Claim, HoldKind, HoldToken, LockBackend, LockError, LockKey, OwnerToken,
    PartyRequest, ReleaseOutcome,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::contract::BackendFactory;
use crate::model::{expire_hold, fail, ModelRun};

const HOLDERS: usize = 4;
const TTL: Duration = Duration::from_secs(60);

/// One step of a generated scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// A holder enters (again: a retried attempt of its live party) with
    /// a party count.
    Enter {
        holder: usize,
        parties: u32,
    },
    Leave {
        holder: usize,
    },
    /// A holder's party's lease ends on the server.
    Expire {
        holder: usize,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let holder = 0..HOLDERS;
    prop_oneof![
        6 => (holder.clone(), 2..=3u32).prop_map(|(holder, parties)| Op::Enter { holder, parties }),
        3 => holder.clone().prop_map(|holder| Op::Leave { holder }),
        1 => holder.prop_map(|holder| Op::Expire { holder }),
    ]
}

/// What a step answers, the same way for the model and the server.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Entered,
    Full,
    Mismatch { stored: u32 },
    Left(bool),
    Expired,
}

/// The reference model: the live parties, the party count they entered
/// with, and whether their round is open.
#[derive(Debug, Default)]
struct Model {
    live: BTreeSet<usize>,
    parties: Option<u32>,
    open: bool,
}

impl Model {
    fn apply(&mut self, op: Op) -> Reply {
        let reply = match op {
            // A retried attempt of a live party: renewed, with the count
            // it entered with.
            Op::Enter { holder, parties } if self.live.contains(&holder) => match self.parties {
                Some(stored) if stored != parties => Reply::Mismatch { stored },
                _ => Reply::Entered,
            },
            Op::Enter { holder, parties } => {
                if self.live.is_empty() {
                    self.parties = None;
                    self.open = false;
                }
                match self.parties {
                    Some(stored) if stored != parties => Reply::Mismatch { stored },
                    _ if self.open || self.live.len() >= parties as usize => Reply::Full,
                    _ => {
                        self.live.insert(holder);
                        self.parties = Some(parties);
                        self.open = self.live.len() >= parties as usize;
                        Reply::Entered
                    }
                }
            }
            Op::Leave { holder } => Reply::Left(self.live.remove(&holder)),
            Op::Expire { holder } => {
                self.live.remove(&holder);
                Reply::Expired
            }
        };
        if self.live.is_empty() {
            self.parties = None;
            self.open = false;
        }
        reply
    }
}

/// Runs `cases` random scenarios against the factory's barriers and the
/// model. Panics with the shrunk failing scenario if they ever disagree.
pub fn check_barrier_against_model(factory: &dyn BackendFactory, cases: u32) {
    let run = ModelRun::start(factory);
    let key = LockKey::new("model:", "barrier").expect("key");
    let scenarios = proptest::collection::vec(op_strategy(), 1..=30);
    run.check(cases, scenarios, "the barrier", |scenario| {
        run.block_on(run_scenario(&run, &key, &scenario))
    });
}

/// A new party of a holder.
fn party() -> HoldToken {
    HoldToken::new(OwnerToken::generate().expect("os rng"))
        .expect("os rng")
        .with_kind(HoldKind::Party)
}

async fn run_scenario(run: &ModelRun, key: &LockKey, scenario: &[Op]) -> Result<(), TestCaseError> {
    let backend: &dyn LockBackend = run.deployment.backend.as_ref();
    let barriers = backend.capabilities().barriers().expect("barriers");
    let mut model = Model::default();
    // Each holder's current party: kept while it lives, a new one after.
    let mut holds: Vec<HoldToken> = (0..HOLDERS).map(|_| party()).collect();
    for (step, &op) in scenario.iter().enumerate() {
        let answered = match op {
            Op::Enter { holder, parties } => {
                let claim = Claim::Party(PartyRequest::new(parties));
                match backend
                    .try_acquire(key, &holds[holder], TTL, &claim, None)
                    .await
                {
                    Ok(AcquireOutcome::Acquired(_)) => Reply::Entered,
                    Ok(other) => return Err(fail(step, op, format!("{other:?}"))),
                    Err(LockError::BarrierFull { .. }) => Reply::Full,
                    Err(LockError::CountMismatch { stored, .. }) => Reply::Mismatch { stored },
                    Err(err) => return Err(fail(step, op, err)),
                }
            }
            Op::Leave { holder } => {
                let outcome = backend
                    .release(key, &holds[holder])
                    .await
                    .map_err(|err| fail(step, op, err))?;
                Reply::Left(outcome == ReleaseOutcome::Released)
            }
            Op::Expire { holder } => {
                expire_hold(&run.deployment, key, &holds[holder]);
                Reply::Expired
            }
        };
        let expected = model.apply(op);
        prop_assert_eq!(&answered, &expected, "step {} {:?}", step, op);
        // A holder whose party ended enters next with a new one.
        for (holder, hold) in holds.iter_mut().enumerate() {
            if !model.live.contains(&holder) {
                *hold = party();
            }
        }
        let state = barriers
            .barrier_state(key, None)
            .await
            .map_err(|err| fail(step, op, err))?;
        let read = (state.entered as usize, state.open, state.parties);
        let modelled = (model.live.len(), model.open, model.parties.unwrap_or(0));
        prop_assert_eq!(read, modelled, "step {} {:?}: the state read", step, op);
    }
    Ok(())
}
