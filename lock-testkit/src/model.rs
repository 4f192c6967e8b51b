//! Property tests against a reference model: random sequences of acquire,
//! re-entry, extend, release and expiry from several owners, run on a real
//! server and compared step by step with what a fenced mutex (reentrant or not,
//! as the strategy says) must do.

use std::collections::HashMap;
use std::time::Duration;

use lock_core::{
    AcquireOutcome, ExtendOutcome, HoldToken, LockBackend, LockKey, LockState, OwnerToken,
    ReleaseOutcome,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::contract::{BackendFactory, Capabilities, Deployment};

/// One step of a generated scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// `owner` tries to take `key`.
    Acquire {
        /// Which owner (an index).
        owner: usize,
        /// Which key (an index).
        key: usize,
    },
    /// `owner` tries to renew `key`.
    Extend {
        /// Which owner (an index).
        owner: usize,
        /// Which key (an index).
        key: usize,
    },
    /// `owner` tries to release `key`.
    Release {
        /// Which owner (an index).
        owner: usize,
        /// Which key (an index).
        key: usize,
    },
    /// `key`'s TTL runs out (made to happen at once on the server).
    Expire {
        /// Which key (an index).
        key: usize,
    },
}

/// One operation by one of `owners` owners on one of `keys` keys.
pub fn op_strategy(owners: usize, keys: usize) -> impl Strategy<Value = Op> {
    let owner = 0..owners;
    let key = 0..keys;
    prop_oneof![
        3 => (owner.clone(), key.clone()).prop_map(|(owner, key)| Op::Acquire { owner, key }),
        2 => (owner.clone(), key.clone()).prop_map(|(owner, key)| Op::Extend { owner, key }),
        3 => (owner, key.clone()).prop_map(|(owner, key)| Op::Release { owner, key }),
        1 => key.prop_map(|key| Op::Expire { key }),
    ]
}

/// A scenario of up to `max_len` operations.
pub fn scenario_strategy(
    owners: usize,
    keys: usize,
    max_len: usize,
) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op_strategy(owners, keys), 1..=max_len)
}

/// The reference model of a fenced mutex: who holds each key and how many
/// times, the last token granted for it, and the highest counter an
/// inspection showed (an attempt that finds a key held may use a token up,
/// so the counter can be past the last grant's token).
#[derive(Debug, Default)]
struct MutexModel {
    /// key -> (owner, hold count)
    holder: HashMap<usize, (usize, u64)>,
    last_token: HashMap<usize, u64>,
    seen_counter: HashMap<usize, u64>,
}

const OWNERS: usize = 3;
const KEYS: usize = 2;
const TTL: Duration = Duration::from_secs(60);

/// Runs `cases` random scenarios against the factory's backend and the model
/// (reentrant if the factory says so). Panics with the shrunk failing scenario
/// if they ever disagree.
pub fn check_against_model(factory: &dyn BackendFactory, cases: u32) {
    let run = ModelRun::start(factory);
    let capabilities = factory.capabilities();
    // One hold per owner for the whole run: the model's owners re-acquire
    // with the same identity, as a caller-chosen owner does.
    let owners: Vec<HoldToken> = (0..OWNERS)
        .map(|_| HoldToken::new(OwnerToken::generate().expect("os rng")).expect("os rng"))
        .collect();
    let keys: Vec<LockKey> = (0..KEYS)
        .map(|index| LockKey::new("model:", &format!("k{index}")).expect("key"))
        .collect();
    run.check(
        cases,
        scenario_strategy(OWNERS, KEYS, 30),
        "the backend",
        |scenario| {
            run.block_on(run_scenario(
                &run.deployment,
                &owners,
                &keys,
                capabilities,
                &scenario,
            ))
        },
    );
}

/// A deployment and the runtime its scenarios run on, for the model tests
/// (this one, [`semaphore_model`](crate::semaphore_model) and
/// [`rw_model`](crate::rw_model)).
pub(crate) struct ModelRun {
    runtime: tokio::runtime::Runtime,
    pub(crate) deployment: Deployment,
}

impl ModelRun {
    /// Starts the factory's servers and backend on a runtime of its own.
    pub(crate) fn start(factory: &dyn BackendFactory) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let deployment = runtime.block_on(Deployment::start(factory));
        ModelRun {
            runtime,
            deployment,
        }
    }

    /// Runs `future` to its end on the run's runtime.
    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Runs `cases` scenarios drawn from `scenarios`, each on flushed
    /// servers, through `one`; panics with the shrunk failing scenario,
    /// saying `what` disagreed with the model.
    pub(crate) fn check<S: Strategy>(
        &self,
        cases: u32,
        scenarios: S,
        what: &str,
        one: impl Fn(S::Value) -> Result<(), TestCaseError>,
    ) {
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&scenarios, |scenario| {
            self.deployment.admin_all(&["FLUSHALL"]);
            one(scenario)
        });
        if let Err(failure) = result {
            panic!("{what} disagreed with the model: {failure}");
        }
    }
}

/// One step of a holder of a primitive in a generated scenario (the
/// [`semaphore_model`](crate::semaphore_model) and
/// [`rw_model`](crate::rw_model)): take what `T` says, or renew, release or
/// let expire its hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step<T> {
    Take { holder: usize, what: T },
    Extend { holder: usize },
    Release { holder: usize },
    Expire { holder: usize },
}

/// Steps of one of `holders` holders: takes of what `what` draws
/// (`take_weight` in 11 of them against renewals, releases and expiries),
/// renewals, releases and expiries.
pub(crate) fn step_strategy<T: std::fmt::Debug + Clone + 'static>(
    holders: usize,
    take_weight: u32,
    what: impl Strategy<Value = T> + 'static,
) -> impl Strategy<Value = Step<T>> {
    let holder = 0..holders;
    prop_oneof![
        take_weight => (holder.clone(), what).prop_map(|(holder, what)| Step::Take { holder, what }),
        2 => holder.clone().prop_map(|holder| Step::Extend { holder }),
        3 => holder.clone().prop_map(|holder| Step::Release { holder }),
        1 => holder.prop_map(|holder| Step::Expire { holder }),
    ]
}

/// A failed call at `step` (`op`) of a scenario.
pub(crate) fn fail(
    step: usize,
    op: impl std::fmt::Debug,
    err: impl std::fmt::Display,
) -> TestCaseError {
    TestCaseError::fail(format!("step {step} {op:?}: {err}"))
}

/// One step of a scenario on `key` through `backend`: `step` is its
/// number and `op` what it does, for the failures.
pub(crate) struct At<'a, O> {
    backend: &'a dyn LockBackend,
    key: &'a LockKey,
    step: usize,
    op: O,
}

impl<'a, O: std::fmt::Debug> At<'a, O> {
    pub(crate) fn new(backend: &'a dyn LockBackend, key: &'a LockKey, step: usize, op: O) -> Self {
        At {
            backend,
            key,
            step,
            op,
        }
    }

    /// Renews `hold`, which must be extended if and only if `live`.
    pub(crate) async fn extend(&self, hold: &HoldToken, live: bool) -> Result<(), TestCaseError> {
        let (step, op) = (self.step, &self.op);
        let outcome = self
            .backend
            .extend(self.key, hold, TTL)
            .await
            .map_err(|err| fail(step, op, err))?;
        let extended = matches!(outcome, ExtendOutcome::Extended { .. });
        prop_assert_eq!(extended, live, "step {} {:?}: {:?}", step, op, outcome);
        Ok(())
    }

    /// Releases `hold`, which must be released if and only if `live`; and
    /// again, which must credit nothing.
    pub(crate) async fn release(&self, hold: &HoldToken, live: bool) -> Result<(), TestCaseError> {
        let (step, op) = (self.step, &self.op);
        let first = match live {
            true => ReleaseOutcome::Released,
            false => ReleaseOutcome::NotHeld,
        };
        for (expected, twice) in [(first, ""), (ReleaseOutcome::NotHeld, ": released twice")] {
            let outcome = self
                .backend
                .release(self.key, hold)
                .await
                .map_err(|err| fail(step, op, err))?;
            prop_assert_eq!(outcome, expected, "step {} {:?}{}", step, op, twice);
        }
        Ok(())
    }
}

/// Puts `hold`'s deadline on `key` in the past on every node: the next
/// script drops it, as if its TTL had run out.
pub(crate) fn expire_hold(deployment: &Deployment, key: &LockKey, hold: &HoldToken) {
    deployment.admin_all(&["ZADD", key.redis_key(), "XX", "1", hold.attempt_value()]);
}

async fn run_scenario(
    deployment: &Deployment,
    owners: &[HoldToken],
    keys: &[LockKey],
    capabilities: Capabilities,
    scenario: &[Op],
) -> Result<(), TestCaseError> {
    let fencing = capabilities.fencing;
    let backend: &dyn LockBackend = deployment.backend.as_ref();
    let burns_tokens = backend.strategy() == "single";
    let mut model = MutexModel::default();
    for (step, op) in scenario.iter().enumerate() {
        match *op {
            Op::Acquire { owner, key } => {
                let outcome = backend
                    .try_acquire(
                        &keys[key],
                        &owners[owner],
                        TTL,
                        &lock_core::Claim::LOCK,
                        None,
                    )
                    .await
                    .map_err(|err| TestCaseError::fail(format!("step {step} {op:?}: {err}")))?;
                let holder = model.holder.get(&key).copied();
                match (holder, outcome) {
                    (None, AcquireOutcome::Acquired(lock_core::Acquired { fencing_token, .. })) => {
                        if fencing {
                            let token = fencing_token
                                .ok_or_else(|| {
                                    TestCaseError::fail(format!("step {step}: no token"))
                                })?
                                .get();
                            let last = model
                                .last_token
                                .get(&key)
                                .copied()
                                .unwrap_or(0)
                                .max(model.seen_counter.get(&key).copied().unwrap_or(0));
                            prop_assert!(
                                token > last,
                                "step {}: token {} not above {}",
                                step,
                                token,
                                last
                            );
                            model.last_token.insert(key, token);
                        } else {
                            prop_assert!(
                                fencing_token.is_none(),
                                "step {}: a token from a strategy without fencing",
                                step
                            );
                        }
                        model.holder.insert(key, (owner, 1));
                    }
                    (
                        Some((holder, holds)),
                        AcquireOutcome::Acquired(lock_core::Acquired { fencing_token, .. }),
                    ) if capabilities.reentrant && holder == owner => {
                        if fencing {
                            prop_assert_eq!(
                                fencing_token.map(|token| token.get()),
                                model.last_token.get(&key).copied(),
                                "step {}: a re-entry must keep the token",
                                step
                            );
                        }
                        model.holder.insert(key, (owner, holds + 1));
                    }
                    (Some((holder, _)), AcquireOutcome::Held { .. })
                        if !(capabilities.reentrant && holder == owner) => {}
                    (expected, actual) => {
                        prop_assert!(
                            false,
                            "step {} {:?}: model holder {:?}, backend said {:?}",
                            step,
                            op,
                            expected,
                            actual
                        )
                    }
                }
            }
            Op::Extend { owner, key } => {
                let outcome = backend
                    .extend(&keys[key], &owners[owner], TTL)
                    .await
                    .map_err(|err| TestCaseError::fail(format!("step {step} {op:?}: {err}")))?;
                let expected = model.holder.get(&key).map(|held| held.0) == Some(owner);
                let extended = match outcome {
                    ExtendOutcome::Extended { ttl } => {
                        prop_assert!(ttl >= TTL, "step {} {:?}: extended to {:?}", step, op, ttl);
                        true
                    }
                    _ => false,
                };
                prop_assert_eq!(extended, expected, "step {} {:?}", step, op);
            }
            Op::Release { owner, key } => {
                let outcome = backend
                    .release(&keys[key], &owners[owner])
                    .await
                    .map_err(|err| TestCaseError::fail(format!("step {step} {op:?}: {err}")))?;
                let expected = match model.holder.get(&key).copied() {
                    Some((holder, holds)) if holder == owner => {
                        if holds > 1 {
                            model.holder.insert(key, (owner, holds - 1));
                        } else {
                            model.holder.remove(&key);
                        }
                        ReleaseOutcome::Released
                    }
                    _ => ReleaseOutcome::NotHeld,
                };
                prop_assert_eq!(outcome, expected, "step {} {:?}", step, op);
            }
            Op::Expire { key } => {
                expire_now(deployment, &keys[key]).await;
                model.holder.remove(&key);
            }
        }
        for (index, key) in keys.iter().enumerate() {
            let state = backend
                .inspect(key)
                .await
                .map(LockState::from)
                .map_err(|err| TestCaseError::fail(format!("step {step} inspect: {err}")))?;
            prop_assert_eq!(
                state.is_held(),
                model.holder.contains_key(&index),
                "step {} {:?}: held state of key {}",
                step,
                op,
                index
            );
            if capabilities.reentrant {
                let holds = match state {
                    LockState::Held { hold_count, .. } => hold_count,
                    _ => None,
                };
                prop_assert_eq!(
                    holds,
                    model.holder.get(&index).map(|held| held.1),
                    "step {} hold count of key {}",
                    step,
                    index
                );
            }
            // Without fencing, the model issues no tokens and expects none.
            let token = match state {
                LockState::Free { last_token } => last_token,
                LockState::Held { token, .. } => token,
                _ => None,
            };
            // The counter: none before the first grant, then the last
            // grant's token; with the single-node default fenced acquire,
            // whose attempts that find a key held use tokens up, at or
            // above it and every counter shown before.
            let token = token.map(|token| token.get());
            match model.last_token.get(&index).copied() {
                None => prop_assert_eq!(token, None, "step {} token of key {}", step, index),
                Some(last) if !burns_tokens => {
                    prop_assert_eq!(token, Some(last), "step {} token of key {}", step, index)
                }
                Some(last) => {
                    let seen = model.seen_counter.get(&index).copied().unwrap_or(0);
                    prop_assert!(
                        token.is_some_and(|token| token >= last.max(seen)),
                        "step {}: the counter of key {} is {:?}, below {} or {}",
                        step,
                        index,
                        token,
                        last,
                        seen
                    );
                    model.seen_counter.insert(index, token.unwrap_or(0));
                }
            }
        }
    }
    Ok(())
}

/// Makes the key's TTL run out now: `PEXPIRE key 1`, then waits until the
/// server has expired it, so real expiry (not a `DEL`) is what the scenario sees.
async fn expire_now(deployment: &Deployment, key: &LockKey) {
    deployment.admin_all(&["PEXPIRE", key.redis_key(), "1"]);
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let gone = deployment.servers.iter().all(|server| {
            server
                .admin(&["EXISTS", key.redis_key()])
                .ok()
                .and_then(|reply| reply.as_int())
                == Some(0)
        });
        if gone {
            return;
        }
    }
    panic!("key {key:?} did not expire within 200 ms of PEXPIRE 1");
}
