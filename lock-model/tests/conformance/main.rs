//! The model held to the real scripts: random walks through the lock
//! model's actions run side by side on a real `redis-server`, through the
//! single-node backend's scripts on both clients. A reply, the lock key's
//! holder and token, or the fencing counter that differs from the model's
//! fails the walk, which prints as the model's trace.
//!
//! Time is the model's: the server's keys get a long TTL, and a key the
//! model lets expire is made to expire on the server at that step.

use std::collections::HashMap;
use std::time::Duration;

use distlock::backend::{Claim, HoldToken, LockBackend, LockKey};
use distlock::{ClientKind, FencingToken, OwnerToken};
use lock_core::{AcquireOutcome, ExtendOutcome, ReleaseOutcome};
use lock_model::{trace, Action, Answer, Bounds, Call, Faults, LockModel, Op, State};
use lock_testkit::RedisServer;
use stateright::Model;

/// How many walks each client takes, and how many steps each at most.
const WALKS: u64 = 60;
const STEPS: usize = 80;

/// The TTL the server's keys get: long enough never to run out by itself
/// during a walk.
const TTL: Duration = Duration::from_secs(60);

/// The TTL in ms a live key is lowered to before each script, to see
/// whether the script sets it again.
const MARK: i64 = 30_000;

/// The model's bounds for the walks: more room than the checker's, since a
/// walk is one path, not all of them.
const BOUNDS: Bounds = Bounds {
    clients: 3,
    ttl: 3,
    drift: 1,
    horizon: 30,
    attempts: 6,
    failures: 12,
    renewals: 20,
    hand_offs: true,
};

/// Every fault, the restart included: a restart is a `FLUSHALL`.
const FAULTS: Faults = Faults {
    lost_replies: true,
    pauses: true,
    crashes: true,
    restarts: true,
};

/// The real side of a walk: the backend, the key, and one hold per attempt.
struct Real<'a> {
    server: &'a RedisServer,
    backend: &'a dyn LockBackend,
    key: LockKey,
    owners: Vec<OwnerToken>,
    holds: HashMap<(u8, u8), HoldToken>,
}

impl Real<'_> {
    fn hold(&mut self, client: u8, attempt: u8) -> HoldToken {
        let owner = &self.owners[usize::from(client)];
        self.holds
            .entry((client, attempt))
            .or_insert_with(|| HoldToken::new(owner.clone()).expect("os rng"))
            .clone()
    }

    /// Runs `op` for `client` through the backend's scripts.
    async fn run(&mut self, client: u8, op: Op) -> Answer {
        let (backend, key) = (self.backend, self.key.clone());
        match op {
            Op::Acquire { attempt } => {
                let hold = self.hold(client, attempt);
                match backend
                    .try_acquire(&key, &hold, TTL, &Claim::LOCK, None)
                    .await
                {
                    Ok(AcquireOutcome::Acquired(granted)) => {
                        // As a guard keeps it: renewals and releases send
                        // the value with its token, as the key stores it.
                        let token = granted.fencing_token.expect("a token");
                        self.holds
                            .insert((client, attempt), hold.granted(Some(token)));
                        Answer::Granted(token.get())
                    }
                    Ok(AcquireOutcome::Held { .. }) => Answer::Held,
                    other => panic!("acquire: {other:?}"),
                }
            }
            Op::Extend { attempt } => {
                let hold = self.hold(client, attempt);
                match backend.extend(&key, &hold, TTL).await {
                    Ok(ExtendOutcome::Extended { .. }) => Answer::Extended,
                    Ok(ExtendOutcome::NotHeld) => Answer::NotHeld,
                    other => panic!("extend: {other:?}"),
                }
            }
            Op::TakeOver { from, attempt } => {
                // As `resume` builds them: the token's hold with its claim,
                // and a new hold of the same owner with the same claim.
                let claim = Some(FencingToken::new(from.claim));
                let old = self.hold(from.client, from.attempt).granted(claim);
                let owner = self.owners[usize::from(from.client)].clone();
                let new = HoldToken::new(owner).expect("os rng").granted(claim);
                self.holds.insert((client, attempt), new.clone());
                let hand_off = backend.capabilities().hand_off().expect("hand-off");
                match hand_off.take_over(&key, &old, &new, TTL).await {
                    Ok(ExtendOutcome::Extended { .. }) => Answer::TakenOver,
                    Ok(ExtendOutcome::NotHeld) => Answer::NotHeld,
                    other => panic!("take over: {other:?}"),
                }
            }
            Op::Release { attempt } | Op::Cleanup { attempt } => {
                let hold = self.hold(client, attempt);
                match backend.release(&key, &hold).await {
                    Ok(ReleaseOutcome::Released) => Answer::Released,
                    Ok(ReleaseOutcome::NotHeld) => Answer::NotHeld,
                    other => panic!("release: {other:?}"),
                }
            }
        }
    }

    /// The lock key's holder and token, and the counter, as the model
    /// names them.
    fn keys(&self) -> (Option<(u8, u8, u64)>, u64) {
        let text = |key: &str| {
            self.server
                .admin(&["GET", key])
                .expect("GET")
                .as_text()
                .map(str::to_owned)
        };
        let holder = text(self.key.redis_key()).map(|value| {
            let (attempt_value, token) = value.split_once('#').expect("a fenced value");
            let (&(client, attempt), _) = self
                .holds
                .iter()
                .find(|(_, hold)| hold.attempt_value() == attempt_value)
                .expect("a hold of the walk's");
            (client, attempt, token.parse().expect("a token"))
        });
        let counter = text(self.key.fence_key()).map_or(0, |text| text.parse().expect("a counter"));
        (holder, counter)
    }

    /// The lock key's TTL in ms (-2 when it is gone).
    fn pttl(&self) -> i64 {
        self.server
            .admin(&["PTTL", self.key.redis_key()])
            .expect("PTTL")
            .as_int()
            .expect("an integer")
    }

    /// Lets the lock key expire now, as the model's clock just did.
    async fn expire(&self) {
        self.server
            .admin(&["PEXPIRE", self.key.redis_key(), "1"])
            .expect("PEXPIRE");
        for _ in 0..100 {
            if self
                .server
                .admin(&["EXISTS", self.key.redis_key()])
                .expect("EXISTS")
                .as_int()
                == Some(0)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("the key did not expire");
    }
}

/// splitmix64: a walk's choices, reproducible from its seed.
struct Choices(u64);

impl Choices {
    fn pick(&mut self, count: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % count as u64) as usize
    }
}

/// What the walks made the server do, so that they cannot pass by doing
/// nothing: each kind of reply, expiries and restarts.
#[derive(Debug, Default)]
struct Seen {
    answers: Vec<Answer>,
    expiries: u32,
    restarts: u32,
}

/// One of `actions`, a fault (a crash, a pause, a failed call, a restart)
/// one time in eight as often as a step of the protocol, so that walks get
/// far enough to renew, release and expire.
fn pick(choices: &mut Choices, actions: &[Action]) -> Action {
    let weight = |action: &Action| match action {
        Action::Crash(_) | Action::Pause(_) | Action::LoseReply(_) | Action::Restart => 1,
        _ => 8,
    };
    let total: usize = actions.iter().map(weight).sum();
    let mut at = choices.pick(total);
    for action in actions {
        if at < weight(action) {
            return *action;
        }
        at -= weight(action);
    }
    unreachable!("a pick below the total weight")
}

async fn walk(
    server: &RedisServer,
    backend: &dyn LockBackend,
    client: ClientKind,
    seed: u64,
    seen: &mut Seen,
) {
    let model = LockModel::new(BOUNDS, FAULTS);
    let key = LockKey::new("model:", &format!("walk-{client}-{seed}")).expect("key");
    let mut real = Real {
        server,
        backend,
        key,
        owners: (0..BOUNDS.clients)
            .map(|_| OwnerToken::generate().expect("os rng"))
            .collect(),
        holds: HashMap::new(),
    };
    let mut choices = Choices(seed);
    let mut state = model.init_states().remove(0);
    let mut path: Vec<(State, Option<Action>)> = Vec::new();
    let mut actions = Vec::new();
    for _ in 0..STEPS {
        actions.clear();
        model.actions(&state, &mut actions);
        if actions.is_empty() {
            break;
        }
        let action = pick(&mut choices, &actions);
        let next = model
            .next_state(&state, action)
            .expect("an action of the model's");
        path.push((state.clone(), Some(action)));
        // What the server's side of the step must answer.
        let expected = match action {
            Action::Run(id) => match (state.clients[usize::from(id)].call, &next) {
                (Some(Call::Sent(op, _)), next) => {
                    let mut scratch = state.clone();
                    let answer = model.run(&mut scratch, id, op);
                    debug_assert!(next.server == scratch.server);
                    Some((id, op, answer))
                }
                _ => None,
            },
            Action::RunOrphan(id, op) => {
                let mut scratch = state.clone();
                Some((id, op, model.run(&mut scratch, id, op)))
            }
            _ => None,
        };
        let disagreement = if let Some((id, op, answer)) = expected {
            // A live key's TTL is lowered to a mark first: a script that
            // sets the TTL, as the model's sets `expires`, must raise it
            // again, and one that does not must leave it below the mark.
            let live = state.server.hold.is_some();
            if live {
                server
                    .admin(&["PEXPIRE", real.key.redis_key(), &MARK.to_string()])
                    .expect("PEXPIRE");
            }
            let got = real.run(id, op).await;
            seen.answers.push(got);
            // The model sets `expires` to a TTL from now on a grant or a
            // renewal, and leaves it on every other answer.
            let set = matches!(
                answer,
                Answer::Granted(_) | Answer::Extended | Answer::TakenOver
            );
            let pttl = real.pttl();
            if got != answer {
                Some(format!("the script answered {got:?}, the model {answer:?}"))
            } else if next.server.hold.is_some() && set != (pttl > MARK) {
                Some(format!(
                    "the key's TTL is {pttl} ms after the script; the model {} it",
                    if set { "set" } else { "kept" }
                ))
            } else {
                None
            }
        } else {
            match action {
                Action::Tick if state.server.hold.is_some() && next.server.hold.is_none() => {
                    real.expire().await;
                    seen.expiries += 1;
                }
                Action::Restart => {
                    server.admin(&["FLUSHALL"]).expect("FLUSHALL");
                    seen.restarts += 1;
                }
                _ => {}
            }
            None
        };
        state = next;
        let disagreement = disagreement.or_else(|| {
            let (holder, counter) = real.keys();
            let modelled = state
                .server
                .hold
                .map(|hold| (hold.client, hold.attempt, hold.token));
            (holder != modelled || counter != state.server.counter).then(|| {
                format!(
                    "the server has {holder:?} and counter {counter}, the model {modelled:?} \
                     and counter {}",
                    state.server.counter
                )
            })
        });
        if let Some(disagreement) = disagreement {
            path.push((state, None));
            panic!(
                "{client}, walk {seed}: {disagreement} after:\n{}",
                trace(&model, &path)
            );
        }
    }
}

/// Every walk agrees with the model, on both clients.
#[test]
fn the_lock_scripts_do_what_the_model_does() {
    lock_testkit::on_every_client(async |server, client| {
        let vars = lock_testkit::env::config_vars("single", [server], client, &[]);
        let config = distlock::Config::from_vars(vars).expect("config");
        let locks = distlock::connect(&config).await.expect("connect");
        let mut seen = Seen::default();
        for seed in 0..WALKS {
            walk(server, locks.backend().as_ref(), client, seed, &mut seen).await;
        }
        let kinds = [
            |answer: &Answer| matches!(answer, Answer::Granted(_)),
            |answer: &Answer| *answer == Answer::Held,
            |answer: &Answer| *answer == Answer::Extended,
            |answer: &Answer| *answer == Answer::NotHeld,
            |answer: &Answer| *answer == Answer::Released,
            |answer: &Answer| *answer == Answer::TakenOver,
        ];
        for kind in kinds {
            assert!(seen.answers.iter().any(kind), "{client}: {seen:?}");
        }
        assert!(seen.expiries > 0 && seen.restarts > 0, "{client}: {seen:?}");
    });
}
