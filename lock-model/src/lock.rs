//! The single-node lock: its scripts as atomic steps on one server, and
//! clients that send them, wait for replies and trust their leases by
//! their own clocks.

use stateright::{Model, Property};

/// How far the checker explores: the clients, the lease, and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// How many clients contend for the one lock.
    pub clients: u8,
    /// The lease's TTL, in ticks of the server's clock.
    pub ttl: u64,
    /// What a client takes off its lease for clock drift, in ticks: its
    /// deadline is the send instant plus `ttl - drift`.
    pub drift: u64,
    /// The last tick: time does not pass it.
    pub horizon: u64,
    /// How many acquires each client makes at most.
    pub attempts: u8,
    /// How many calls fail (a lost reply, a request given up on) in one
    /// run at most.
    pub failures: u8,
    /// How many renewals each lease gets at most.
    pub renewals: u8,
    /// Whether a holder may hand its lease off, and another client resume
    /// it by the token (with the token's true claim, or a forged one).
    pub hand_offs: bool,
}

impl Bounds {
    /// The bounds `cargo xtask model` checks to: two clients, a TTL of
    /// three ticks with one for drift, five ticks, two acquires each, one
    /// failed call, one renewal a lease.
    pub const FULL: Bounds = Bounds {
        clients: 2,
        ttl: 3,
        drift: 1,
        horizon: 5,
        attempts: 2,
        failures: 1,
        renewals: 1,
        hand_offs: false,
    };

    /// Small bounds for a quick run and for the tests of reintroduced
    /// defects: two clients, a TTL of two ticks, four ticks, one acquire
    /// each, one failed call, one renewal a lease.
    pub const QUICK: Bounds = Bounds {
        clients: 2,
        ttl: 2,
        drift: 0,
        horizon: 4,
        attempts: 1,
        failures: 1,
        renewals: 1,
        hand_offs: false,
    };
}

/// The faults the checker interleaves with the protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// A reply may be lost, and a request may run after its client gave up
    /// on it (a delayed request).
    pub lost_replies: bool,
    /// A client may be paused (a stop-the-world pause) and resumed; time
    /// passes meanwhile.
    pub pauses: bool,
    /// A client may crash: it forgets its lease, and what it sent may still
    /// run.
    pub crashes: bool,
    /// The server may restart once without persistence, losing every key:
    /// the case the docs call unsafe (`FencingToken`'s docs), which the
    /// checker must find.
    pub restarts: bool,
}

impl Faults {
    /// Every fault but the restart: what the protocol must survive.
    pub const SURVIVABLE: Faults = Faults {
        lost_replies: true,
        pauses: true,
        crashes: true,
        restarts: false,
    };
}

/// A defect to put back on purpose, to see that the checker finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// A release deletes the key whoever holds it, as a plain `DEL` does
    /// (`lock/release.lua` compares the value first).
    ReleaseWithoutCompare,
    /// A client counts its lease from when the reply came back, not from
    /// when it sent the acquire (the engine's `sent + ttl - drift`).
    DeadlineFromReply,
    /// A renewal writes its value whoever holds the key, as a `SET ... PX`
    /// does (`lock/extend.lua` renews only a key that holds its value).
    RenewalWithoutCompare,
    /// A take-over replaces the hold whatever fencing token the hand-off
    /// token claims (`lock/take_over.lua` compares the whole stored value,
    /// `#<token>` and all).
    TakeOverIgnoresClaim,
}

/// A model of the single-node lock under [`Bounds`] and [`Faults`], with at
/// most one [`Defect`] put back.
#[derive(Debug, Clone)]
pub struct LockModel {
    /// How far the checker explores.
    pub bounds: Bounds,
    /// Which faults it interleaves.
    pub faults: Faults,
    /// A defect put back on purpose, if any.
    pub defect: Option<Defect>,
}

impl LockModel {
    /// The lock under `bounds` and `faults`, as the scripts are.
    pub fn new(bounds: Bounds, faults: Faults) -> Self {
        LockModel {
            bounds,
            faults,
            defect: None,
        }
    }

    /// This model with `defect` put back.
    pub fn with_defect(mut self, defect: Defect) -> Self {
        self.defect = Some(defect);
        self
    }

    fn has(&self, defect: Defect) -> bool {
        self.defect == Some(defect)
    }
}

/// A hold as the server stores it: whose attempt, and the token it was
/// granted (`<owner>:<nonce>#<token>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hold {
    /// The client whose attempt it is.
    pub client: u8,
    /// Which of that client's attempts (from 1).
    pub attempt: u8,
    /// The fencing token it was granted.
    pub token: u64,
}

/// The server's keys for the lock's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Server {
    /// The lock key's value, while it lives.
    pub hold: Option<Hold>,
    /// When the lock key expires, by the server's clock.
    pub expires: u64,
    /// The fencing counter: the last token issued (0 for none).
    pub counter: u64,
}

/// What a client believes it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The attempt that was granted.
    pub attempt: u8,
    /// Its fencing token.
    pub token: u64,
    /// Until when the client trusts it, by its own clock.
    pub valid_until: u64,
}

/// A script a client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// `lock/acquire_token.lua` for a new attempt.
    Acquire {
        /// The attempt (from 1).
        attempt: u8,
    },
    /// `lock/extend.lua` for the attempt the client holds.
    Extend {
        /// The attempt.
        attempt: u8,
    },
    /// `lock/release.lua` for the attempt the client holds.
    Release {
        /// The attempt.
        attempt: u8,
    },
    /// `lock/release.lua` for an attempt whose reply was lost: the engine
    /// gives back exactly that attempt's hold, in case it was granted.
    Cleanup {
        /// The attempt.
        attempt: u8,
    },
    /// `lock/take_over.lua`: a resume of a hand-off token, replacing the
    /// hold it names with this client's new attempt.
    TakeOver {
        /// The hand-off token: whose attempt, and the token it claims.
        from: HandOff,
        /// This client's new attempt.
        attempt: u8,
    },
}

/// A hand-off token: the hold it names and the fencing token it claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HandOff {
    /// The client that handed its lease off.
    pub client: u8,
    /// Its attempt.
    pub attempt: u8,
    /// The fencing token the token claims: its grant's, or a forged one.
    pub claim: u64,
}

/// A script's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    /// The acquire was granted this token.
    Granted(u64),
    /// The acquire found the lock held.
    Held,
    /// The renewal set the TTL again.
    Extended,
    /// The renewal or release found the key gone or holding another value.
    NotHeld,
    /// The release deleted the key.
    Released,
    /// The take-over replaced the hold and renewed it.
    TakenOver,
}

/// A client's call in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Call {
    /// Sent at the instant given, not yet run by the server.
    Sent(Op, u64),
    /// Run by the server; its answer on the way back.
    Answered(Op, u64, Answer),
}

/// One client.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Client {
    /// What it believes it holds.
    pub lease: Option<Lease>,
    /// Its call in flight.
    pub call: Option<Call>,
    /// How many acquires it has made.
    pub attempts: u8,
    /// Whether it is paused now.
    pub paused: bool,
    /// Whether it has been paused (once at most, to bound the search).
    pub was_paused: bool,
    /// Whether it crashed: it does nothing more.
    pub crashed: bool,
    /// How many renewals it has sent for its lease.
    pub renewals: u8,
}

/// Everything at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// The server's clock, in ticks (the clients' clocks run at its rate;
    /// their drift is what each takes off its lease).
    pub now: u64,
    /// The server's keys.
    pub server: Server,
    /// The clients.
    pub clients: Vec<Client>,
    /// Requests whose clients gave up on them (a timeout, a crash) that the
    /// server may still run, sorted: nobody reads their replies.
    pub orphans: Vec<(u8, Op)>,
    /// The highest token granted so far.
    pub last_granted: u64,
    /// Whether a grant was ever given a token not above every earlier one.
    pub token_reused: bool,
    /// Whether a cleanup has deleted the hold of an attempt whose reply was
    /// lost.
    pub cleaned_up: bool,
    /// Which clients have been granted the lock (a bit each).
    pub granted_to: u8,
    /// Whether the server has restarted.
    pub restarted: bool,
    /// How many calls have failed.
    pub failures: u8,
    /// Whether a client has resumed a handed-off lease.
    pub resumed: bool,
    /// The hand-off tokens made so far (any client may resume one, as a
    /// copied token can be); at most one is made in a run.
    pub hand_offs: Vec<HandOff>,
}

/// One step: a client's, the server's, the clock's or a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock moves one tick; a key whose deadline it reaches expires.
    Tick,
    /// A client sends an acquire.
    Acquire(u8),
    /// A client sends a renewal of its lease (as its watchdog does).
    Extend(u8),
    /// A client gives its lease back.
    Release(u8),
    /// The server runs a client's call.
    Run(u8),
    /// The server runs a request its client gave up on.
    RunOrphan(u8, Op),
    /// A client reads its call's reply.
    Reply(u8),
    /// A client's call fails: its reply is lost, or it gives up waiting
    /// (the request may still run).
    LoseReply(u8),
    /// A client stops (a GC pause, a stopped VM).
    Pause(u8),
    /// A paused client goes on.
    Resume(u8),
    /// A client crashes.
    Crash(u8),
    /// The server restarts without persistence.
    Restart,
    /// A client stops renewing its lease and hands it off as a token.
    HandOff(u8),
    /// A client resumes a hand-off token with the claim given.
    ResumeToken(u8, HandOff),
}

impl State {
    fn live(&self) -> Option<Hold> {
        self.server.hold.filter(|_| self.now < self.server.expires)
    }

    /// The clients that believe they hold the lock now, by their own
    /// clocks.
    pub fn believers(&self) -> impl Iterator<Item = (u8, &Lease)> {
        let now = self.now;
        self.clients
            .iter()
            .enumerate()
            .filter(|(_, client)| !client.crashed)
            .filter_map(move |(index, client)| {
                let lease = client.lease.as_ref()?;
                (lease.valid_until > now).then_some((index as u8, lease))
            })
    }
}

impl LockModel {
    /// What the server does with `op` from `client`, atomically: the
    /// script's reply and the state it leaves.
    pub fn run(&self, state: &mut State, client: u8, op: Op) -> Answer {
        let live = state.live();
        let own =
            |attempt: u8| live.is_some_and(|hold| (hold.client, hold.attempt) == (client, attempt));
        match op {
            Op::Acquire { attempt } => {
                if live.is_some() {
                    return Answer::Held;
                }
                state.server.counter += 1;
                let token = state.server.counter;
                state.server.hold = Some(Hold {
                    client,
                    attempt,
                    token,
                });
                state.server.expires = state.now + self.bounds.ttl;
                if token <= state.last_granted {
                    state.token_reused = true;
                }
                state.last_granted = state.last_granted.max(token);
                Answer::Granted(token)
            }
            Op::Extend { attempt } => {
                if own(attempt) {
                    state.server.expires = state.now + self.bounds.ttl;
                    return Answer::Extended;
                }
                if self.has(Defect::RenewalWithoutCompare) {
                    if let Some(lease) = state.clients[usize::from(client)].lease {
                        state.server.hold = Some(Hold {
                            client,
                            attempt,
                            token: lease.token,
                        });
                        state.server.expires = state.now + self.bounds.ttl;
                        return Answer::Extended;
                    }
                }
                Answer::NotHeld
            }
            Op::TakeOver { from, attempt } => {
                let named = live.is_some_and(|hold| {
                    (hold.client, hold.attempt) == (from.client, from.attempt)
                        && (hold.token == from.claim || self.has(Defect::TakeOverIgnoresClaim))
                });
                match (named, live) {
                    (true, Some(hold)) => {
                        state.server.hold = Some(Hold {
                            client,
                            attempt,
                            token: hold.token,
                        });
                        state.server.expires = state.now + self.bounds.ttl;
                        Answer::TakenOver
                    }
                    _ => Answer::NotHeld,
                }
            }
            Op::Release { attempt } | Op::Cleanup { attempt } => {
                if own(attempt) || (self.has(Defect::ReleaseWithoutCompare) && live.is_some()) {
                    state.server.hold = None;
                    if matches!(op, Op::Cleanup { .. }) {
                        state.cleaned_up = true;
                    }
                    return Answer::Released;
                }
                Answer::NotHeld
            }
        }
    }

    /// What `client` does with `answer` to `op`, sent at `sent`.
    fn read(&self, state: &mut State, client: u8, op: Op, sent: u64, answer: Answer) {
        let ttl = self.bounds.ttl;
        let trusted = ttl.saturating_sub(self.bounds.drift);
        let now = state.now;
        let deadline_from_reply = self.has(Defect::DeadlineFromReply);
        let who = &mut state.clients[usize::from(client)];
        match (op, answer) {
            (Op::Acquire { attempt }, Answer::Granted(token)) => {
                let from = if deadline_from_reply { now } else { sent };
                who.lease = Some(Lease {
                    attempt,
                    token,
                    valid_until: from + trusted,
                });
                state.granted_to |= 1 << client;
            }
            (Op::Extend { .. }, Answer::Extended) => {
                if let Some(lease) = &mut who.lease {
                    let from = if deadline_from_reply { now } else { sent };
                    lease.valid_until = lease.valid_until.max(from + trusted);
                }
            }
            (Op::TakeOver { from, attempt }, Answer::TakenOver) => {
                // `resume` trusts the token's claim and counts from its send.
                who.lease = Some(Lease {
                    attempt,
                    token: from.claim,
                    valid_until: sent + trusted,
                });
                state.granted_to |= 1 << client;
                state.resumed = true;
            }
            // The renewal found the hold gone: the lease is lost.
            (Op::Extend { .. }, Answer::NotHeld) => who.lease = None,
            _ => {}
        }
    }

    /// What `client` does when its call fails: an acquire's hold, in case
    /// it was granted, is given back by that attempt alone; a renewal
    /// leaves the deadline where it was; a release is done with.
    fn fail(&self, state: &mut State, client: u8, op: Op) {
        let who = &mut state.clients[usize::from(client)];
        who.call = match op {
            Op::Acquire { attempt } => Some(Call::Sent(Op::Cleanup { attempt }, state.now)),
            _ => None,
        };
    }

    fn orphan(state: &mut State, client: u8, op: Op) {
        state.orphans.push((client, op));
        state.orphans.sort_unstable();
    }
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            server: Server {
                hold: None,
                expires: 0,
                counter: 0,
            },
            clients: vec![Client::default(); usize::from(self.bounds.clients)],
            orphans: Vec::new(),
            last_granted: 0,
            token_reused: false,
            cleaned_up: false,
            granted_to: 0,
            restarted: false,
            failures: 0,
            hand_offs: Vec::new(),
            resumed: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.now < self.bounds.horizon {
            actions.push(Action::Tick);
        }
        if self.faults.restarts && !state.restarted {
            actions.push(Action::Restart);
        }
        for &(client, op) in &state.orphans {
            actions.push(Action::RunOrphan(client, op));
        }
        for (index, client) in state.clients.iter().enumerate() {
            let id = index as u8;
            if let Some(Call::Sent(..)) = client.call {
                // The request is on the wire: it runs whatever its client does.
                actions.push(Action::Run(id));
            }
            if client.crashed {
                continue;
            }
            if self.faults.crashes {
                actions.push(Action::Crash(id));
            }
            if client.paused {
                actions.push(Action::Resume(id));
                continue;
            }
            if self.faults.pauses && !client.was_paused {
                actions.push(Action::Pause(id));
            }
            let may_fail = self.faults.lost_replies && state.failures < self.bounds.failures;
            match client.call {
                Some(Call::Answered(..)) => {
                    actions.push(Action::Reply(id));
                    if may_fail {
                        actions.push(Action::LoseReply(id));
                    }
                }
                Some(Call::Sent(..)) => {
                    if may_fail {
                        actions.push(Action::LoseReply(id));
                    }
                }
                None => match client.lease {
                    None if client.attempts < self.bounds.attempts => {
                        actions.push(Action::Acquire(id));
                        for &token in &state.hand_offs {
                            actions.push(Action::ResumeToken(id, token));
                            // A token whose claim was changed on the way.
                            let forged = HandOff {
                                claim: token.claim + 1,
                                ..token
                            };
                            actions.push(Action::ResumeToken(id, forged));
                        }
                    }
                    None => {}
                    Some(lease) => {
                        if self.bounds.hand_offs && state.hand_offs.is_empty() {
                            actions.push(Action::HandOff(id));
                        }
                        // The watchdog renews a lease it still trusts.
                        if lease.valid_until > state.now && client.renewals < self.bounds.renewals {
                            actions.push(Action::Extend(id));
                        }
                        actions.push(Action::Release(id));
                    }
                },
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Tick => {
                state.now += 1;
                if state.server.hold.is_some() && state.now >= state.server.expires {
                    state.server.hold = None;
                }
            }
            Action::Restart => {
                state.server = Server {
                    hold: None,
                    expires: 0,
                    counter: 0,
                };
                state.restarted = true;
            }
            Action::Acquire(client) => {
                let who = &mut state.clients[usize::from(client)];
                who.attempts += 1;
                who.renewals = 0;
                who.call = Some(Call::Sent(
                    Op::Acquire {
                        attempt: who.attempts,
                    },
                    state.now,
                ));
            }
            Action::Extend(client) => {
                let who = &mut state.clients[usize::from(client)];
                let attempt = who.lease?.attempt;
                who.renewals += 1;
                who.call = Some(Call::Sent(Op::Extend { attempt }, state.now));
            }
            Action::Release(client) => {
                let who = &mut state.clients[usize::from(client)];
                // The guard is given up as the release is sent.
                let attempt = who.lease.take()?.attempt;
                who.call = Some(Call::Sent(Op::Release { attempt }, state.now));
            }
            Action::Run(client) => {
                let Some(Call::Sent(op, sent)) = state.clients[usize::from(client)].call else {
                    return None;
                };
                let answer = self.run(&mut state, client, op);
                let who = &mut state.clients[usize::from(client)];
                who.call = if who.crashed {
                    None
                } else {
                    Some(Call::Answered(op, sent, answer))
                };
            }
            Action::RunOrphan(client, op) => {
                let at = state.orphans.iter().position(|&o| o == (client, op))?;
                state.orphans.remove(at);
                self.run(&mut state, client, op);
            }
            Action::Reply(client) => {
                let Some(Call::Answered(op, sent, answer)) =
                    state.clients[usize::from(client)].call.take()
                else {
                    return None;
                };
                self.read(&mut state, client, op, sent, answer);
            }
            Action::LoseReply(client) => {
                state.failures += 1;
                let call = state.clients[usize::from(client)].call.take()?;
                let op = match call {
                    Call::Sent(op, _) => {
                        Self::orphan(&mut state, client, op);
                        op
                    }
                    Call::Answered(op, ..) => op,
                };
                self.fail(&mut state, client, op);
            }
            Action::HandOff(client) => {
                // The guard stops renewing and is given up for its token.
                let lease = state.clients[usize::from(client)].lease.take()?;
                state.hand_offs.push(HandOff {
                    client,
                    attempt: lease.attempt,
                    claim: lease.token,
                });
            }
            Action::ResumeToken(client, from) => {
                let who = &mut state.clients[usize::from(client)];
                who.attempts += 1;
                who.renewals = 0;
                who.call = Some(Call::Sent(
                    Op::TakeOver {
                        from,
                        attempt: who.attempts,
                    },
                    state.now,
                ));
            }
            Action::Pause(client) => {
                let who = &mut state.clients[usize::from(client)];
                who.paused = true;
                who.was_paused = true;
            }
            Action::Resume(client) => state.clients[usize::from(client)].paused = false,
            Action::Crash(client) => {
                let who = &mut state.clients[usize::from(client)];
                who.crashed = true;
                who.paused = false;
                who.lease = None;
                if let Some(Call::Sent(op, _)) = who.call.take() {
                    Self::orphan(&mut state, client, op);
                }
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            // README, "What a lease promises": while a guard's lease is
            // valid by its own clock, no other holder's is.
            Property::always(
                "at most one client believes it holds the lock",
                |_, state: &State| state.believers().count() <= 1,
            ),
            // SAFETY.md, "Trusting a lease": a valid lease is the server's
            // hold, and the key lives at least as long as the lease is
            // trusted.
            Property::always(
                "the server agrees with the client that believes it holds the lock",
                |_, state: &State| {
                    state.believers().all(|(client, lease)| {
                        state.live().is_some_and(|hold| {
                            (hold.client, hold.attempt) == (client, lease.attempt)
                                && hold.token == lease.token
                                && state.server.expires >= lease.valid_until
                        })
                    })
                },
            ),
            // `FencingToken`: tokens of successive grants only grow while
            // the server keeps its data.
            Property::always(
                "every grant's token is above every earlier one",
                |_, state: &State| !state.token_reused,
            ),
            Property::sometimes(
                "every client is granted the lock",
                |model: &LockModel, state: &State| {
                    state.granted_to.count_ones() == u32::from(model.bounds.clients)
                },
            ),
            Property::sometimes(
                "a cleanup gives back a lost reply's hold",
                |_, state: &State| state.cleaned_up,
            ),
        ];
        if self.bounds.hand_offs {
            properties.push(Property::sometimes(
                "a handed-off lease is resumed",
                |_, state: &State| state.resumed,
            ));
        }
        properties
    }
}

#[cfg(test)]
mod tests {
    use stateright::Checker;

    use super::*;

    /// Runs the checker on `model` to its end; the names of the properties
    /// with a discovery (a counterexample of an `always`, an example of a
    /// `sometimes`).
    fn discoveries(model: LockModel) -> Vec<&'static str> {
        let checker = model.checker().spawn_bfs().join();
        assert!(checker.is_done(), "the search did not finish");
        let mut found: Vec<_> = checker.discoveries().into_keys().collect();
        found.sort_unstable();
        found
    }

    const MUTEX: &str = "at most one client believes it holds the lock";
    const AGREES: &str = "the server agrees with the client that believes it holds the lock";
    const TOKENS: &str = "every grant's token is above every earlier one";
    const EVERY: &str = "every client is granted the lock";
    const CLEANUP: &str = "a cleanup gives back a lost reply's hold";

    /// Bounds where each defect shows without faults: two clients, two
    /// acquires each, a TTL of two ticks, four ticks.
    const SMALL: Bounds = Bounds {
        clients: 2,
        ttl: 2,
        drift: 0,
        horizon: 4,
        attempts: 2,
        failures: 0,
        renewals: 1,
        hand_offs: false,
    };

    #[test]
    fn the_lock_keeps_its_promises_under_every_survivable_fault() {
        let found = discoveries(LockModel::new(Bounds::QUICK, Faults::SURVIVABLE));
        assert_eq!(found, vec![CLEANUP, EVERY], "only the examples");
    }

    #[test]
    fn a_restart_without_persistence_is_found_unsafe() {
        let faults = Faults {
            restarts: true,
            ..Faults::default()
        };
        let found = discoveries(LockModel::new(SMALL, faults));
        for property in [MUTEX, AGREES, TOKENS] {
            assert!(found.contains(&property), "{property}: {found:?}");
        }
    }

    #[test]
    fn a_release_without_compare_is_found() {
        let model =
            LockModel::new(SMALL, Faults::default()).with_defect(Defect::ReleaseWithoutCompare);
        assert!(discoveries(model).contains(&MUTEX));
    }

    #[test]
    fn a_deadline_from_the_reply_is_found() {
        let model = LockModel::new(SMALL, Faults::default()).with_defect(Defect::DeadlineFromReply);
        assert!(discoveries(model).contains(&MUTEX));
    }

    #[test]
    fn a_renewal_without_compare_is_found() {
        let model =
            LockModel::new(SMALL, Faults::default()).with_defect(Defect::RenewalWithoutCompare);
        assert!(discoveries(model).contains(&MUTEX));
    }

    #[test]
    fn a_take_over_that_ignores_the_claim_is_found() {
        let bounds = Bounds {
            hand_offs: true,
            ..SMALL
        };
        let found = discoveries(LockModel::new(bounds, Faults::default()));
        let resumed = "a handed-off lease is resumed";
        assert_eq!(found, vec![resumed, EVERY], "the take-over as it is");
        let model =
            LockModel::new(bounds, Faults::default()).with_defect(Defect::TakeOverIgnoresClaim);
        assert!(discoveries(model).contains(&AGREES));
    }

    #[test]
    fn a_counterexample_prints_as_script_calls() {
        let model = LockModel::new(SMALL, Faults::default()).with_defect(Defect::DeadlineFromReply);
        let checker = model.clone().checker().spawn_bfs().join();
        let path = checker.discovery(MUTEX).expect("a counterexample");
        let text = crate::trace(&model, &path.into_vec());
        assert!(
            text.contains("sends lock/acquire_token.lua (attempt 1)"),
            "{text}"
        );
        assert!(text.contains("granted, token 2"), "{text}");
        assert!(
            text.lines().last().is_some_and(
                |last| last.contains("client 0 trusts") && last.contains("client 1 trusts")
            ),
            "{text}"
        );
    }
}
