//! The models held to the real scripts: random walks through a model's
//! actions run side by side on a real `redis-server`, through the
//! single-node backend's scripts on both clients. A reply, a hold (whose,
//! its token, slot and weight), a fencing counter, or a deadline set where
//! the model keeps it (or kept where the model sets it) that differs from
//! the model's fails the walk, which prints as the model's trace.
//!
//! Time is the model's: the server's holds get a long TTL, lowered to a
//! mark before each script, and a hold the model lets expire is made to
//! expire on the server at that step.

mod election;
mod fair;
mod lease_set;
mod lock;
mod mixed;
mod rwlock;
mod semaphore;

use std::collections::HashMap;
use std::time::Duration;

use distlock::backend::{HoldKind, HoldToken, LockBackend, LockKey, Renewal};
use distlock::{ClientKind, LockError, OwnerToken};
use lock_core::strategy::KeyNames;
use lock_core::{ExtendOutcome, ReleaseOutcome};
use lock_model::{
    trace, Action, Answer, Ask, Bounds, Call, Faults, Grant, LeaseModel, Op, Protocol, Shown,
};
use lock_testkit::RedisServer;
use stateright::Model;

/// How many walks each client takes, and how many steps each at most.
const WALKS: u64 = 60;
const STEPS: usize = 80;

/// The walks of a primitive whose waiters queue: a wait's paths are longer
/// (a grant taken up, a give-up that gives a grant back, a release that
/// hands permits or a write over beside other holds).
const FAIR_WALKS: u64 = 200;

/// The TTL the server's holds get: long enough never to run out by itself
/// during a walk.
const TTL: Duration = Duration::from_secs(60);

/// How long a waiter's place lasts on the server: never out by itself
/// during a walk (the model's places end when it says), and shorter than
/// the TTL, as the engine's is, so that a grant a release makes to a
/// waiter's offer runs for it.
const WAITER_LEASE: Duration = Duration::from_secs(50);

/// The TTL a short extend asks for (the model's a tick shorter).
const SHORT_TTL: Duration = Duration::from_secs(45);

/// The TTL a long extend asks for (the model's twice the TTL).
const LONG_TTL: Duration = Duration::from_secs(120);

/// The TTL `op` asks for on the server, as the model's `Bounds::ttl_of`.
fn ttl_of(op: Op) -> Duration {
    match op {
        Op::Extend {
            ask: Ask::Shorter, ..
        } => SHORT_TTL,
        Op::Extend {
            ask: Ask::Longer, ..
        } => LONG_TTL,
        _ => TTL,
    }
}

/// The TTL in ms every live hold is lowered to before each script, to see
/// which the script sets again.
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
    short_extends: true,
    long_extends: true,
};

/// Every fault, the restart included: a restart is a `FLUSHALL`.
const FAULTS: Faults = Faults {
    lost_replies: true,
    pauses: true,
    crashes: true,
    restarts: true,
};

/// How many clients a walk has at most: [`BOUNDS`]' three, or one of each
/// kind on one name (`mixed.rs`).
const OWNERS: u8 = 5;

/// A primitive's side of a walk on the real server.
trait Subject {
    /// Runs `op` for `client` through the backend's scripts.
    async fn run(&mut self, client: u8, op: Op) -> Answer;

    /// The holds the keys name, as the model's `holds` without deadlines.
    fn holds(&self) -> Vec<(u8, u8, Grant)>;

    /// The fencing counters, as the model's `counters`.
    fn counters(&self) -> Vec<(u8, u64)>;

    /// What the keys show beside the holds, as the model's `records`.
    fn records(&self) -> Vec<Shown> {
        Vec::new()
    }

    /// The waiting writers in line whose places are live, as the model's
    /// `line`.
    fn line(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Makes the places of `clients` in line run out now, as the model's
    /// clock just did.
    fn expire_places(&self, clients: &[u8]) {
        let _ = clients;
    }

    /// What a leader read shows, as the model's `shown`.
    async fn shown(&self) -> Option<Shown> {
        None
    }

    /// Lowers every live hold's TTL to [`MARK`].
    fn mark(&self);

    /// Each live hold and how long it has left, in ms.
    fn left(&self) -> Vec<(u8, u8, i64)>;

    /// Whether the keys themselves outlive every live hold (a hold that
    /// outlives its keys vanishes with them); what is wrong otherwise.
    fn keys_outlive_holds(&self) -> Result<(), String> {
        Ok(())
    }

    /// Makes `holds` expire now, as the model's clock just did.
    async fn expire(&self, holds: &[(u8, u8)]);
}

/// What every subject has: the backend, the walk's key, and one hold per
/// attempt.
struct Real<'a> {
    server: &'a RedisServer,
    backend: &'a dyn LockBackend,
    key: LockKey,
    owners: Vec<OwnerToken>,
    holds: HashMap<(u8, u8), HoldToken>,
}

impl<'a> Real<'a> {
    fn new(server: &'a RedisServer, backend: &'a dyn LockBackend, name: &str) -> Self {
        Real {
            server,
            backend,
            key: LockKey::new("model:", name).expect("key"),
            owners: (0..OWNERS)
                .map(|_| OwnerToken::generate().expect("os rng"))
                .collect(),
            holds: HashMap::new(),
        }
    }

    /// The hold of `client`'s `attempt`, made of `kind` on first use.
    fn hold(&mut self, client: u8, attempt: u8, kind: HoldKind) -> HoldToken {
        let owner = &self.owners[usize::from(client)];
        self.holds
            .entry((client, attempt))
            .or_insert_with(|| {
                HoldToken::new(owner.clone())
                    .expect("os rng")
                    .with_kind(kind)
            })
            .clone()
    }

    /// The hold a resume of `from`'s token makes, as `resume` makes it:
    /// the token's kind, an owner of its own.
    fn successor(from: &HoldToken) -> HoldToken {
        HoldToken::new(OwnerToken::generate().expect("os rng"))
            .expect("os rng")
            .with_kind(from.kind().clone())
    }

    /// The walk's client and attempt whose hold's id is `id`.
    fn who(&self, id: &str) -> (u8, u8) {
        let (&found, _) = self
            .holds
            .iter()
            .find(|(_, hold)| hold.attempt_value() == id)
            .expect("a hold of the walk's");
        found
    }

    /// The waiters in line (the queue of a fair lock, or of a read-write
    /// lock's writers) whose places are live, as the model's `line`.
    fn line(&self) -> Vec<u8> {
        let now = lease_set::now(self);
        let owners = self
            .admin(&["LRANGE", &self.key.queue_key(), "0", "-1"])
            .as_texts()
            .expect("the line");
        let waiters = self.key.waiters_key();
        owners
            .iter()
            .filter(|owner| {
                let until = self.admin(&["ZSCORE", &waiters, owner]);
                let until: f64 = until
                    .as_text()
                    .map_or(0.0, |text| text.parse().expect("ms"));
                until as i64 > now
            })
            .map(|owner| self.client_of(owner))
            .collect()
    }

    /// Makes the places of `clients` in line run out now, as the model's
    /// clock just did.
    fn expire_places(&self, clients: &[u8]) {
        let waiters = self.key.waiters_key();
        for &client in clients {
            let owner = self.owners[usize::from(client)].expose();
            self.admin(&["ZADD", &waiters, "XX", "1", owner]);
        }
    }

    /// The walk's client whose owner is `owner`.
    fn client_of(&self, owner: &str) -> u8 {
        let at = self.owners.iter().position(|token| token.expose() == owner);
        u8::try_from(at.expect("an owner of the walk's")).expect("a few clients")
    }

    fn admin(&self, args: &[&str]) -> lock_testkit::AdminReply {
        self.server.admin(args).expect("admin command")
    }

    fn text(&self, key: &str) -> Option<String> {
        self.admin(&["GET", key]).as_text().map(str::to_owned)
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
    /// Steps after which a writer waited in line.
    lines: u32,
    shown: Vec<Option<Shown>>,
    expiries: u32,
    restarts: u32,
}

impl Seen {
    /// Fails unless every kind of reply (a take-over's where `bounds` hand
    /// leases off), an expiry and a restart were seen.
    fn assert_everything(&self, client: ClientKind, bounds: Bounds) {
        let kinds = [
            |answer: &Answer| matches!(answer, Answer::Granted(_)),
            |answer: &Answer| *answer == Answer::Held,
            |answer: &Answer| *answer == Answer::Extended,
            |answer: &Answer| *answer == Answer::NotHeld,
            |answer: &Answer| *answer == Answer::Released,
        ];
        for kind in kinds {
            assert!(self.answers.iter().any(kind), "{client}: {self:?}");
        }
        let taken_over = self.answers.contains(&Answer::TakenOver);
        assert!(taken_over || !bounds.hand_offs, "{client}: {self:?}");
        assert!(self.expiries > 0 && self.restarts > 0, "{client}: {self:?}");
    }

    /// Fails unless waiters queued, took a grant to an earlier attempt up
    /// and gave up.
    fn assert_waited(&self, client: ClientKind) {
        let took_up = |answer: &Answer| matches!(answer, Answer::TakenUp(_));
        assert!(self.answers.iter().any(took_up), "{client}: {self:?}");
        assert!(self.answers.contains(&Answer::Left), "{client}: {self:?}");
        assert!(self.lines > 0, "{client}: nobody waited in line");
    }
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

/// The holds of the model's keys, without their deadlines.
fn modelled<P: Protocol>(model: &LeaseModel<P>, server: &P::Server) -> Vec<(u8, u8, Grant)> {
    let mut holds: Vec<_> = model
        .protocol
        .holds(server)
        .into_iter()
        .map(|(client, attempt, grant, _)| (client, attempt, grant))
        .collect();
    holds.sort_unstable();
    holds
}

/// One walk of `seed` through `model`, run on `real` as well.
async fn walk<P: Protocol, S: Subject>(
    model: &LeaseModel<P>,
    real: &mut S,
    server: &RedisServer,
    label: &str,
    seed: u64,
    seen: &mut Seen,
) {
    let mut choices = Choices(seed);
    let choose = |actions: &[Action]| (!actions.is_empty()).then(|| pick(&mut choices, actions));
    if let Err(failure) = steps(model, real, server, seen, choose).await {
        panic!("{label}, walk {seed}: {failure}");
    }
}

/// Replays `actions` (a counterexample's, as the checker found it) on
/// `real` beside `model`: `Err` with the first disagreement and the trace
/// up to it, as a walk fails.
async fn replay<P: Protocol, S: Subject>(
    model: &LeaseModel<P>,
    real: &mut S,
    server: &RedisServer,
    actions: Vec<Action>,
) -> Result<(), String> {
    let mut actions = actions.into_iter();
    let choose = |offered: &[Action]| {
        let action = actions.next()?;
        assert!(
            offered.contains(&action),
            "{action:?} is not one of {offered:?}"
        );
        Some(action)
    };
    steps(model, real, server, &mut Seen::default(), choose).await
}

/// Runs the actions `choose` picks, up to [`STEPS`], on `real` beside
/// `model`, checking the server against the model after each: the first
/// disagreement, with the trace up to it, is the `Err`.
async fn steps<P: Protocol, S: Subject>(
    model: &LeaseModel<P>,
    real: &mut S,
    server: &RedisServer,
    seen: &mut Seen,
    mut choose: impl FnMut(&[Action]) -> Option<Action>,
) -> Result<(), String> {
    let mut state = model.init_states().remove(0);
    let mut path = Vec::new();
    let mut actions = Vec::new();
    for _ in 0..STEPS {
        actions.clear();
        model.actions(&state, &mut actions);
        let Some(action) = choose(&actions) else {
            break;
        };
        let next = model
            .next_state(&state, action)
            .expect("an action of the model's");
        path.push((state.clone(), Some(action)));
        // The script the server runs in this step, if any.
        let ran = match action {
            Action::Run(id) => match state.clients[usize::from(id)].call {
                Some(Call::Sent(op, _)) => Some((id, op)),
                _ => None,
            },
            Action::RunOrphan(id, op) => Some((id, op)),
            _ => None,
        };
        let disagreement = if let Some((id, op)) = ran {
            let mut after = state.clone();
            let answer = model.run(&mut after, id, op);
            // What a release granted on the server, to a waiter's offer:
            // its deadline is the grant's run, not a TTL from now.
            let before = modelled(model, &state.server);
            let granted: Vec<(u8, u8)> = modelled(model, &after.server)
                .into_iter()
                .filter(|hold| !before.contains(hold))
                .map(|(client, attempt, _)| (client, attempt))
                .filter(|_| !matches!(op, Op::Acquire { .. } | Op::TakeOver { .. }))
                .collect();
            // Every live hold's TTL is lowered to a mark first: the one a
            // script sets, as the model sets its deadline, rises to the TTL
            // asked for (less the script's own time), and every other stays
            // at or below the mark.
            real.mark();
            let got = real.run(id, op).await;
            seen.answers.push(got);
            let asked = i64::try_from(ttl_of(op).as_millis()).expect("a TTL in ms");
            // A take-up renews the earlier attempt's hold.
            let attempt = match (op, answer) {
                (Op::Acquire { earlier, .. }, Answer::TakenUp(_)) => earlier,
                _ => op.attempt(),
            };
            let set = answer.sets_deadline().then_some((id, attempt));
            let wrong: Vec<(u8, u8, i64)> = real
                .left()
                .into_iter()
                .filter(|&(client, attempt, left)| {
                    if set == Some((client, attempt)) {
                        !(asked - 1000 < left && left <= asked)
                    } else if granted.contains(&(client, attempt)) {
                        let runs = asked.min(WAITER_LEASE.as_millis() as i64);
                        !(0 < left && left <= runs)
                    } else {
                        left > MARK
                    }
                })
                .collect();
            if got != answer {
                Some(format!("the script answered {got:?}, the model {answer:?}"))
            } else if !wrong.is_empty() {
                Some(format!(
                    "after the script, the holds (client, attempt, ms left) {wrong:?}; the \
                     model set the deadline of {set:?} to {asked} ms and kept the rest"
                ))
            } else {
                real.keys_outlive_holds().err()
            }
        } else {
            match action {
                Action::Tick => {
                    let (was, is) = (
                        model.protocol.line(&state.server, state.now),
                        model.protocol.line(&next.server, next.now),
                    );
                    let ended: Vec<u8> = was
                        .into_iter()
                        .filter(|waiter| !is.contains(waiter))
                        .collect();
                    real.expire_places(&ended);
                    let before = modelled(model, &state.server);
                    let after = modelled(model, &next.server);
                    let expired: Vec<(u8, u8)> = before
                        .iter()
                        .filter(|hold| !after.contains(hold))
                        .map(|&(client, attempt, _)| (client, attempt))
                        .collect();
                    if !expired.is_empty() {
                        real.expire(&expired).await;
                        seen.expiries += 1;
                    }
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
            let line = real.line();
            if !line.is_empty() {
                seen.lines += 1;
            }
            let real = (real.holds(), real.counters(), real.records(), line);
            let expected = (
                modelled(model, &state.server),
                model.protocol.counters(&state.server),
                model.protocol.records(&state.server),
                model.protocol.line(&state.server, state.now),
            );
            (real != expected).then(|| {
                format!(
                    "the server has (holds, counters, records, line) {real:?}, the model \
                     {expected:?}"
                )
            })
        });
        // A leader read, which changes nothing, after every step.
        let disagreement = match disagreement {
            None if model.protocol.elects() => {
                let (got, expected) = (real.shown().await, model.protocol.shown(&state.server));
                seen.shown.push(got);
                (got != expected)
                    .then(|| format!("a leader read shows {got:?}, the model {expected:?}"))
            }
            other => other,
        };
        if let Some(disagreement) = disagreement {
            path.push((state, None));
            return Err(format!("{disagreement} after:\n{}", trace(model, &path)));
        }
    }
    Ok(())
}

/// Sends the renewal `op` of `hold` as the engine would: the watchdog's
/// (the TTL asked for at first) in a batch of `extend_many`, beside a
/// renewal of a bystander's hold on another name that is never granted (a
/// batch of one is a plain extend), a caller's `extend` to a shorter TTL
/// alone.
async fn renew(backend: &dyn LockBackend, key: &LockKey, hold: &HoldToken, op: Op) -> Answer {
    let outcome = match op {
        Op::Extend {
            ask: Ask::Lease, ..
        } => {
            let other = LockKey::new("model:", &format!("{}-bystander", key.name())).expect("key");
            let owner = OwnerToken::generate().expect("os rng");
            let bystander = HoldToken::new(owner)
                .expect("os rng")
                .with_kind(hold.kind().clone());
            let renewals = [
                Renewal::new(key, hold, ttl_of(op)),
                Renewal::new(&other, &bystander, ttl_of(op)),
            ];
            let mut outcomes = backend.extend_many(&renewals).await;
            assert_eq!(outcomes.len(), 2, "one outcome per renewal");
            assert!(
                matches!(outcomes[1], Ok(ExtendOutcome::NotHeld)),
                "the bystander's renewal: {:?}",
                outcomes[1]
            );
            outcomes.remove(0)
        }
        _ => backend.extend(key, hold, ttl_of(op)).await,
    };
    match outcome {
        Ok(ExtendOutcome::Extended { .. }) => Answer::Extended,
        Ok(ExtendOutcome::NotHeld) => Answer::NotHeld,
        other => panic!("extend: {other:?}"),
    }
}

/// Releases `hold` through the backend, as the model names the reply.
async fn release(backend: &dyn LockBackend, key: &LockKey, hold: &HoldToken) -> Answer {
    match backend.release(key, hold).await {
        Ok(ReleaseOutcome::Released) => Answer::Released,
        Ok(ReleaseOutcome::NotHeld) => Answer::NotHeld,
        other => panic!("release: {other:?}"),
    }
}

/// Resumes `old`'s hand-off as `new` through the backend, as the model
/// names the reply.
async fn take_over(
    backend: &dyn LockBackend,
    key: &LockKey,
    old: &HoldToken,
    new: &HoldToken,
) -> Answer {
    let hand_off = backend.capabilities().hand_off().expect("hand-off");
    match hand_off.take_over(key, old, new, TTL).await {
        Ok(ExtendOutcome::Extended { .. }) => Answer::TakenOver,
        Ok(ExtendOutcome::NotHeld) => Answer::NotHeld,
        Err(LockError::HandOffRefused { .. }) => Answer::Refused,
        other => panic!("take over: {other:?}"),
    }
}

/// `client`'s give-up through the backend (`leave_queue`), naming the hold
/// of the attempt it offered, as the model names the reply.
async fn give_up(real: &Real<'_>, client: u8, offered: &HoldToken) -> Answer {
    let owner = &real.owners[usize::from(client)];
    let offered = std::slice::from_ref(offered);
    match real
        .backend
        .leave_queue(&real.key, owner, Some(offered))
        .await
    {
        Ok(()) => Answer::Left,
        Err(error) => panic!("give up: {error:?}"),
    }
}

/// The walks of a primitive whose waiters queue, on `client` through
/// `backend`: `FAIR_WALKS` of `model`, each on a name of its own with the
/// subject `subject` makes of it. Fails unless waiters queued, took a grant
/// up and gave up, and a release granted one (`handed_over`, counted by
/// the subject).
async fn walk_waiters<'l, P: Protocol, S: Subject>(
    (server, client, backend): (&'l RedisServer, ClientKind, &'l dyn LockBackend),
    model: &LeaseModel<P>,
    what: &str,
    subject: impl Fn(Real<'l>) -> S,
    handed_over: impl Fn(&S) -> u32,
) {
    let (mut seen, mut handed) = (Seen::default(), 0);
    for seed in 0..FAIR_WALKS {
        let name = format!("{}-{client}-{seed}", what.replace(' ', "-"));
        let mut walked = subject(Real::new(server, backend, &name));
        let label = format!("the {what} on {client}");
        walk(model, &mut walked, server, &label, seed, &mut seen).await;
        handed += handed_over(&walked);
    }
    seen.assert_everything(client, BOUNDS);
    seen.assert_waited(client);
    assert!(handed > 0, "{client}: no release granted a waiter");
}

/// A backend of the single-node strategy on `server` through `client`.
async fn connect(server: &RedisServer, client: ClientKind) -> distlock::LockManager {
    connect_as("single", server, client).await
}

/// A backend of the `strategy` on `server` through `client`.
async fn connect_as(
    strategy: &str,
    server: &RedisServer,
    client: ClientKind,
) -> distlock::LockManager {
    connect_with(strategy, server, client, &[]).await
}

/// A backend of the `strategy` on `server` through `client`, with the
/// config's `extra` variables.
async fn connect_with(
    strategy: &str,
    server: &RedisServer,
    client: ClientKind,
    extra: &[(&str, &str)],
) -> distlock::LockManager {
    let vars = lock_testkit::env::config_vars(strategy, [server], client, extra);
    let config = distlock::Config::from_vars(vars).expect("config");
    distlock::connect(&config).await.expect("connect")
}
