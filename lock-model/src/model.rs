//! What every primitive with leases shares: clients that send scripts, wait
//! for replies and trust their leases by their own clocks, one server that
//! runs each script as one atomic step, time, and the faults between them.
//! A [`Protocol`] says what the scripts do to the server's keys.

use std::fmt::Debug;
use std::hash::Hash;

use stateright::{Model, Property};

/// What one primitive's scripts do to the server's keys, each call one
/// atomic step, and the properties its docs promise beside the ones every
/// primitive with leases shares ([`LeaseModel`]).
pub trait Protocol: Clone + Debug + Send + Sync + Sized + 'static {
    /// The server's keys for the one name, as this primitive stores them.
    type Server: Clone + Debug + PartialEq + Eq + Hash + Send + Sync;

    /// The keys of a name nobody has used (and of a restarted server).
    fn empty(&self) -> Self::Server;

    /// Drops every hold whose deadline is not after `now`, as the server's
    /// clock reaches it; whether any was.
    fn expire(&self, server: &mut Self::Server, now: u64) -> bool;

    /// What the server does with `op` from `client` at `now`, atomically:
    /// its reply, and its keys changed. `believed` is what the client
    /// believes it holds, for a defect that sends it where the script
    /// sends only the hold's id.
    fn run(
        &self,
        server: &mut Self::Server,
        now: u64,
        ttl: u64,
        client: u8,
        op: Op,
        believed: Option<Lease>,
    ) -> Answer;

    /// The holds the keys name, as (client, attempt, grant, deadline),
    /// sorted.
    fn holds(&self, server: &Self::Server) -> Vec<(u8, u8, Grant, u64)>;

    /// The fencing counters the keys keep, as (slot, last token issued),
    /// without the slots never used.
    fn counters(&self, server: &Self::Server) -> Vec<(u8, u64)>;

    /// What the keys show beside the holds: an election's leader record.
    fn records(&self, server: &Self::Server) -> Vec<Shown> {
        let _ = server;
        Vec::new()
    }

    /// Whether holders proclaim values (an election's [`Op::Proclaim`]).
    fn elects(&self) -> bool {
        false
    }

    /// What a leader read shows now (an election's `election/leader.lua`):
    /// a read changes nothing, so the properties judge what one would show
    /// in every state instead of making reads steps of their own.
    fn shown(&self, server: &Self::Server) -> Option<Shown> {
        let _ = server;
        None
    }

    /// The waiting writers in line whose places are live at `now`, in
    /// order (a dead place stays until a script drops it, and counts for
    /// nothing meanwhile).
    fn line(&self, server: &Self::Server, now: u64) -> Vec<u8> {
        let _ = (server, now);
        Vec::new()
    }

    /// How long `client`'s place in line lasts, in ticks, where its
    /// waits queue and offer their attempts for a release to grant on the
    /// server (fair mode's hand-off, a writer's); `None` where they only
    /// try again.
    fn waiter_lease(&self, client: u8) -> Option<u64> {
        let _ = client;
        None
    }

    /// The script `op` sends for `client`, with its arguments, for a
    /// trace.
    fn script(&self, client: u8, op: Op) -> String;

    /// The properties of this primitive's own (how many may hold at once).
    fn properties() -> Vec<Property<LeaseModel<Self>>>;
}

/// How far the checker explores: the clients, the lease, and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// How many clients contend for the one name.
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
    /// Whether a renewal may ask for a TTL a tick shorter than `ttl` (an
    /// explicit `extend`), besides `ttl` (the watchdog's).
    pub short_extends: bool,
    /// Whether a renewal may ask for twice `ttl` (an explicit `extend`),
    /// besides `ttl`.
    pub long_extends: bool,
}

impl Bounds {
    /// The bounds `cargo xtask model` checks the lock to: two clients, a
    /// TTL of three ticks with one for drift, five ticks, two acquires
    /// each, one failed call, one renewal a lease.
    pub const FULL: Bounds = Bounds {
        clients: 2,
        ttl: 3,
        drift: 1,
        horizon: 5,
        attempts: 2,
        failures: 1,
        renewals: 1,
        hand_offs: false,
        short_extends: false,
        long_extends: false,
    };

    /// The bounds where the tests of reintroduced defects find each one
    /// without faults: two clients, two acquires each, a TTL of two ticks,
    /// four ticks, one renewal a lease.
    pub const SMALL: Bounds = Bounds {
        clients: 2,
        ttl: 2,
        drift: 0,
        horizon: 4,
        attempts: 2,
        failures: 0,
        renewals: 1,
        hand_offs: false,
        short_extends: false,
        long_extends: false,
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
        short_extends: false,
        long_extends: false,
    };

    /// The TTL `op` asks for: a tick less than `ttl` for a shorter extend,
    /// twice `ttl` for a longer one.
    pub fn ttl_of(&self, op: Op) -> u64 {
        match op {
            Op::Extend {
                ask: Ask::Shorter, ..
            } => self.ttl.saturating_sub(1).max(1),
            Op::Extend {
                ask: Ask::Longer, ..
            } => self.ttl * 2,
            _ => self.ttl,
        }
    }

    /// The TTLs a renewal may ask for within these bounds.
    fn asks(&self) -> impl Iterator<Item = Ask> {
        let shorter = self.short_extends.then_some(Ask::Shorter);
        let longer = self.long_extends.then_some(Ask::Longer);
        [Some(Ask::Lease), shorter, longer].into_iter().flatten()
    }
}

/// The TTL a renewal asks for ([`Bounds::ttl_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ask {
    /// The lease's TTL, as the watchdog renews it.
    Lease,
    /// A tick shorter (an explicit `extend`).
    Shorter,
    /// Twice the TTL (an explicit `extend`).
    Longer,
}

impl Ask {
    /// How a trace names it, after the attempt.
    pub fn described(self) -> &'static str {
        match self {
            Ask::Lease => "",
            Ask::Shorter => ", the shorter TTL",
            Ask::Longer => ", the longer TTL",
        }
    }
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

/// What a grant gives, as a hand-off token carries it: the fencing token
/// (for a shared hold, the epoch), the slot (0 but for a semaphore's
/// permits), the weight the hold counts for (1 but for a semaphore's
/// permits), and whether it is shared (a read of a read-write lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Grant {
    /// The fencing token, or a shared hold's epoch.
    pub token: u64,
    /// The slot the token counts in.
    pub slot: u8,
    /// How much of the name's capacity the hold takes.
    pub weight: u8,
    /// Whether the hold is shared: its token is an epoch, the last token
    /// granted in its slot, not a new one.
    pub shared: bool,
}

impl Grant {
    /// An exclusive grant of `token` in slot 0, of weight 1.
    pub const fn token(token: u64) -> Grant {
        Grant {
            token,
            slot: 0,
            weight: 1,
            shared: false,
        }
    }

    /// A shared grant of the epoch `epoch` in slot 0, of weight 1.
    pub const fn epoch(epoch: u64) -> Grant {
        Grant {
            shared: true,
            ..Grant::token(epoch)
        }
    }
}

/// What a client believes it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The attempt that was granted.
    pub attempt: u8,
    /// Its grant.
    pub grant: Grant,
    /// Until when the client trusts it, by its own clock.
    pub valid_until: u64,
    /// When the command whose reply set `valid_until` was sent: a reply to
    /// one sent earlier no longer says what the key has (the engine's
    /// `Timing::set_by`).
    pub set_by: u64,
    /// The shortest TTL a renewal whose reply was lost asked for: it may
    /// still run after any later renewal (the engine's
    /// `Timing::unanswered`).
    pub unanswered: Option<u64>,
}

impl Lease {
    fn new(attempt: u8, grant: Grant, sent: u64, valid_until: u64) -> Lease {
        Lease {
            attempt,
            grant,
            valid_until,
            set_by: sent,
            unanswered: None,
        }
    }
}

/// A script a client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// The acquire script for a new attempt.
    Acquire {
        /// The attempt (from 1).
        attempt: u8,
        /// The earlier attempt a waiter offered for a release to grant (0
        /// for none): the acquire takes that grant up if a release made it.
        earlier: u8,
    },
    /// The renewal script for the attempt the client holds.
    Extend {
        /// The attempt.
        attempt: u8,
        /// The TTL it asks for.
        ask: Ask,
    },
    /// The release script for the attempt the client holds.
    Release {
        /// The attempt.
        attempt: u8,
    },
    /// The release script for an attempt whose reply was lost: the engine
    /// gives back exactly that attempt's hold, in case it was granted.
    Cleanup {
        /// The attempt.
        attempt: u8,
    },
    /// The take-over script: a resume of a hand-off token, replacing the
    /// hold it names with this client's new attempt.
    TakeOver {
        /// The hand-off token: whose attempt, and the grant it claims.
        from: HandOff,
        /// This client's new attempt.
        attempt: u8,
    },
    /// An election's proclaim script: binds the client's value (its
    /// number) to the term of the hold it names.
    Proclaim {
        /// The attempt the client holds.
        attempt: u8,
    },
    /// The give-up script of a waiter that stops waiting: leaves the line
    /// and gives back a grant a release made to the attempt it offered.
    GiveUp {
        /// The attempt it offered (0 for none).
        offered: u8,
    },
}

impl Op {
    /// The attempt the call is for (a take-over's new one).
    pub fn attempt(self) -> u8 {
        match self {
            Op::Acquire { attempt, .. }
            | Op::Extend { attempt, .. }
            | Op::Release { attempt }
            | Op::Cleanup { attempt }
            | Op::TakeOver { attempt, .. }
            | Op::Proclaim { attempt }
            | Op::GiveUp { offered: attempt } => attempt,
        }
    }
}

/// A hand-off token: the hold it names and the grant it claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HandOff {
    /// The client that handed its lease off.
    pub client: u8,
    /// Its attempt.
    pub attempt: u8,
    /// The grant the token claims: its own, or one with a forged token.
    pub claim: Grant,
}

/// A script's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    /// The acquire was granted.
    Granted(Grant),
    /// The acquire took up the grant a release made to the earlier attempt
    /// it offered, renewing it to the TTL.
    TakenUp(Grant),
    /// The acquire found no room.
    Held,
    /// The renewal set the TTL again.
    Extended,
    /// The renewal or release found the hold gone or another's.
    NotHeld,
    /// The release gave the hold back.
    Released,
    /// The take-over replaced the hold and renewed it.
    TakenOver,
    /// The take-over was refused with nothing written: the hold's owner has
    /// another hold beside it that the two would no longer share.
    Refused,
    /// The proclaim bound the value to the hold's term.
    Proclaimed,
    /// The waiter left the line (and gave back what was granted to it).
    Left,
}

/// A leader as an election's read shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shown {
    /// The term: the lock's fencing token.
    pub term: u64,
    /// The value: the number of the client that proclaimed it.
    pub value: u8,
}

impl Answer {
    /// Whether the script set the hold's deadline to a TTL from now.
    pub fn sets_deadline(self) -> bool {
        matches!(
            self,
            Answer::Granted(_) | Answer::TakenUp(_) | Answer::Extended | Answer::TakenOver
        )
    }
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
    /// Whether it has proclaimed its value for its lease.
    pub proclaimed: bool,
    /// While it waits in line: the attempt whose "held" reply it read,
    /// which offered itself for a release to grant, and when it was sent.
    pub offer: Option<(u8, u64)>,
    /// The offer an attempt whose reply was lost named to take up, and
    /// when the first such attempt since the last "held" was sent: it may
    /// still run, and renew a grant to that offer to the TTL.
    pub stray: Option<(u8, u64)>,
}

/// Everything at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State<S> {
    /// The server's clock, in ticks (the clients' clocks run at its rate;
    /// their drift is what each takes off its lease).
    pub now: u64,
    /// The server's keys.
    pub server: S,
    /// The clients.
    pub clients: Vec<Client>,
    /// Requests whose clients gave up on them (a timeout, a crash) that the
    /// server may still run, sorted: nobody reads their replies.
    pub orphans: Vec<(u8, Op)>,
    /// The highest token granted so far in each slot.
    pub last_granted: Vec<u64>,
    /// Whether a grant was ever given a token not above every earlier one
    /// of its slot.
    pub token_reused: bool,
    /// Whether a grant of an epoch (a read's) was ever given one that is
    /// not the last token granted in its slot.
    pub epoch_stale: bool,
    /// Whether a cleanup has given back the hold of an attempt whose reply
    /// was lost.
    pub cleaned_up: bool,
    /// Which clients have been granted (a bit each).
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
    /// Every value a proclaim bound to its hold's term, sorted: what a
    /// leader read may show.
    pub proclaimed: Vec<Shown>,
    /// Grants a release made on the server, published to the waiter whose
    /// attempt it names and not yet read: (client, attempt, grant), sorted.
    /// A message may be lost.
    pub messages: Vec<(u8, u8, Grant)>,
    /// Whether a waiter has taken a grant from a release's message.
    pub handed_over: bool,
    /// Whether a waiter's attempt has taken up a grant to its earlier one.
    pub taken_up: bool,
    /// Whether a waiter that gave up gave back a grant made to it.
    pub given_back: bool,
}

impl<S> State<S> {
    /// The clients that believe they hold a lease now, by their own clocks.
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

/// One step: a client's, the server's, the clock's or a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock moves one tick; a hold whose deadline it reaches expires.
    Tick,
    /// A client sends an acquire.
    Acquire(u8),
    /// A client sends a renewal of its lease (as its watchdog does), asking
    /// for the TTL given.
    Extend(u8, Ask),
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
    /// A holder proclaims its value in its term.
    Proclaim(u8),
    /// A waiter stops waiting and leaves the line.
    GiveUp(u8),
    /// A client reads the grant message for its attempt.
    Deliver(u8, u8),
    /// A grant message is lost (the subscription broke).
    LoseMessage(u8, u8),
}

/// A model of one primitive's protocol `P` under [`Bounds`] and [`Faults`].
#[derive(Debug, Clone)]
pub struct LeaseModel<P> {
    /// The primitive's scripts.
    pub protocol: P,
    /// How far the checker explores.
    pub bounds: Bounds,
    /// Which faults it interleaves.
    pub faults: Faults,
    /// A defect of the client's put back on purpose, if any.
    pub client_defect: Option<ClientDefect>,
}

/// A defect of the engine's to put back on purpose, to see that the checker
/// finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientDefect {
    /// A client counts its lease from when the reply came back, not from
    /// when the acquire was sent (the engine's `sent + ttl - drift`).
    DeadlineFromReply,
    /// A client trusts a renewal's TTL whatever shorter TTL an unanswered
    /// renewal asked for (the engine before `Timing::unanswered`).
    ForgetsUnansweredRenewals,
    /// A client keeps trusting its deadline while a renewal that shortens
    /// it is on its way (the engine before `extend_hold` capped the deadline
    /// when it sends).
    TrustsRenewalsInFlight,
    /// A waiter counts a grant from a release's message from when the
    /// message came (the engine counts it from when the attempt that
    /// offered itself was sent).
    GrantFromMessage,
    /// A waiter that holds a grant to its offer forgets that an attempt
    /// whose reply was lost named that offer, and may still renew it to
    /// the acquire's TTL (the engine before `LockManager::keep_past`).
    ForgetsStrayTakeUps,
}

impl<P: Protocol> LeaseModel<P> {
    /// `protocol` under `bounds` and `faults`.
    pub fn new(protocol: P, bounds: Bounds, faults: Faults) -> Self {
        LeaseModel {
            protocol,
            bounds,
            faults,
            client_defect: None,
        }
    }

    /// This model with clients that have `defect`.
    pub fn with_client_defect(mut self, defect: ClientDefect) -> Self {
        self.client_defect = Some(defect);
        self
    }

    fn trusted(&self, ttl: u64) -> u64 {
        ttl.saturating_sub(self.bounds.drift)
    }

    /// What the server does with `op` from `client`: the script's reply,
    /// and the state it leaves.
    pub fn run(&self, state: &mut State<P::Server>, client: u8, op: Op) -> Answer {
        let believed = state.clients[usize::from(client)].lease;
        let before = self.protocol.holds(&state.server);
        let answer = self.protocol.run(
            &mut state.server,
            state.now,
            self.bounds.ttl_of(op),
            client,
            op,
            believed,
        );
        // The holds this script granted: an acquire's, or a release's
        // hand-off to a waiter (a take-over moves a hold, and a take-up
        // renews one, granting nothing).
        let granted: Vec<(u8, u8, Grant)> = self
            .protocol
            .holds(&state.server)
            .into_iter()
            .filter(|&(holder, attempt, ..)| {
                !before
                    .iter()
                    .any(|&(was, earlier, ..)| (was, earlier) == (holder, attempt))
            })
            .map(|(holder, attempt, grant, _)| (holder, attempt, grant))
            .filter(|_| !matches!(op, Op::TakeOver { .. }))
            .collect();
        for &(holder, attempt, grant) in &granted {
            // A re-entry beside a hold of the same owner shares its token.
            let reentry = before.iter().any(|&(was, _, other, _)| {
                was == holder && (other.slot, other.token) == (grant.slot, grant.token)
            });
            let slot = usize::from(grant.slot);
            if grant.shared {
                let last = state.last_granted.get(slot).copied();
                state.epoch_stale |= grant.token != last.unwrap_or(0);
            } else if !reentry {
                if state.last_granted.len() <= slot {
                    state.last_granted.resize(slot + 1, 0);
                }
                if grant.token <= state.last_granted[slot] {
                    state.token_reused = true;
                }
                state.last_granted[slot] = state.last_granted[slot].max(grant.token);
            }
            // A grant on the server is published to its waiter.
            if !matches!(op, Op::Acquire { .. }) {
                if let Err(at) = state.messages.binary_search(&(holder, attempt, grant)) {
                    state.messages.insert(at, (holder, attempt, grant));
                }
            }
        }
        match (op, answer) {
            (Op::Cleanup { .. }, Answer::Released) => state.cleaned_up = true,
            (Op::GiveUp { offered }, Answer::Left) => {
                let kept = |holds: &[(u8, u8, Grant, u64)]| {
                    holds
                        .iter()
                        .any(|&(holder, attempt, ..)| (holder, attempt) == (client, offered))
                };
                state.given_back |= kept(&before) && !kept(&self.protocol.holds(&state.server));
            }
            (Op::Proclaim { attempt }, Answer::Proclaimed) => {
                let holds = self.protocol.holds(&state.server);
                if let Some(&(_, _, grant, _)) = holds
                    .iter()
                    .find(|&&(holder, held, ..)| (holder, held) == (client, attempt))
                {
                    let shown = Shown {
                        term: grant.token,
                        value: client,
                    };
                    if let Err(at) = state.proclaimed.binary_search(&shown) {
                        state.proclaimed.insert(at, shown);
                    }
                }
            }
            _ => {}
        }
        answer
    }

    /// What `client` does with `answer` to `op`, sent at `sent`.
    fn read(&self, state: &mut State<P::Server>, client: u8, op: Op, sent: u64, answer: Answer) {
        let from = if self.client_defect == Some(ClientDefect::DeadlineFromReply) {
            state.now
        } else {
            sent
        };
        let forgets = self.client_defect == Some(ClientDefect::ForgetsUnansweredRenewals);
        let trusted = self.trusted(self.bounds.ttl_of(op));
        let who = &mut state.clients[usize::from(client)];
        match (op, answer) {
            (Op::Acquire { attempt, .. }, Answer::Granted(grant)) => {
                who.lease = Some(Lease::new(attempt, grant, sent, from + trusted));
                who.offer = None;
                who.stray = None;
                state.granted_to |= 1 << client;
                state.messages.retain(|&(to, ..)| to != client);
            }
            // The grant a release made to the earlier attempt, renewed to
            // the TTL by this one: the lease counts from this one's send.
            (Op::Acquire { earlier, .. }, Answer::TakenUp(grant)) => {
                who.lease = Some(Lease::new(earlier, grant, sent, from + trusted));
                who.offer = None;
                self.past_stray(who);
                state.granted_to |= 1 << client;
                state.taken_up = true;
                state.messages.retain(|&(to, ..)| to != client);
            }
            // A waiter in line: this attempt is its offer from now on.
            (Op::Acquire { attempt, .. }, Answer::Held)
                if self.protocol.waiter_lease(client).is_some() =>
            {
                who.offer = Some((attempt, sent));
                who.stray = None;
            }
            // `LeaseShared::renewed`: the deadline is what this renewal
            // set, earlier or later, unless one sent later has spoken; no
            // longer than an unanswered renewal's TTL allows.
            (Op::Extend { .. }, Answer::Extended) => {
                if let Some(lease) = &mut who.lease {
                    if sent >= lease.set_by {
                        let ttl = match lease.unanswered {
                            Some(lost) if !forgets => self.bounds.ttl_of(op).min(lost),
                            _ => self.bounds.ttl_of(op),
                        };
                        lease.valid_until = from + self.trusted(ttl);
                        lease.set_by = sent;
                    }
                }
            }
            (
                Op::TakeOver {
                    from: token,
                    attempt,
                },
                Answer::TakenOver,
            ) => {
                // `resume` trusts the token's claim and counts from its send.
                who.lease = Some(Lease::new(attempt, token.claim, sent, sent + trusted));
                state.granted_to |= 1 << client;
                state.resumed = true;
            }
            // The renewal found the hold gone: the lease is lost.
            (Op::Extend { .. }, Answer::NotHeld) => who.lease = None,
            _ => {}
        }
    }

    /// What `client` does when its call `op`, sent at `sent`, fails: an
    /// acquire's hold, in case it was granted, is given back by that
    /// attempt alone; a renewal may have run, and may still run after later
    /// ones (`LeaseShared::maybe_renewed`); a release is done with.
    fn fail(&self, state: &mut State<P::Server>, client: u8, op: Op, sent: u64) {
        let now = state.now;
        let ttl = self.bounds.ttl_of(op);
        let at_most = sent + self.trusted(ttl);
        let who = &mut state.clients[usize::from(client)];
        who.call = match op {
            Op::Acquire { attempt, earlier } => {
                // It may still run, and take a grant to its offer up.
                if earlier != 0 && who.stray.is_none_or(|(named, _)| named != earlier) {
                    who.stray = Some((earlier, sent));
                }
                Some(Call::Sent(Op::Cleanup { attempt }, now))
            }
            Op::Extend { .. } => {
                if let Some(lease) = &mut who.lease {
                    lease.valid_until = lease.valid_until.min(at_most);
                    lease.set_by = lease.set_by.max(sent);
                    lease.unanswered = Some(lease.unanswered.map_or(ttl, |lost| lost.min(ttl)));
                }
                None
            }
            _ => None,
        };
    }

    /// A lease granted to the offer an attempt whose reply was lost named
    /// (`LockManager::keep_past`): that attempt may still run, and renew
    /// the hold to the TTL, so no renewal is trusted past that TTL, as after
    /// an extend whose reply was lost.
    fn past_stray(&self, who: &mut Client) {
        let stray = who.stray.take();
        let (Some(lease), Some((named, sent))) = (&mut who.lease, stray) else {
            return;
        };
        if named != lease.attempt || self.client_defect == Some(ClientDefect::ForgetsStrayTakeUps) {
            return;
        }
        // Not from before the grant's own send: a stray that runs before
        // the attempt that took the grant up is overwritten by it.
        let (ttl, sent) = (self.bounds.ttl, sent.max(lease.set_by));
        lease.valid_until = lease.valid_until.min(sent + self.trusted(ttl));
        lease.set_by = sent;
        lease.unanswered = Some(lease.unanswered.map_or(ttl, |lost| lost.min(ttl)));
    }

    /// What a waiter does with the message that a release granted its
    /// `attempt` with `grant` (the engine's `granted_on_server`): a grant to
    /// the attempt it offered is its lease, counted from that attempt's
    /// send for the grant's run (the waiter lease, or the TTL if shorter);
    /// one found with nothing of that left is left to its next attempt to
    /// take up, and one to another attempt is not its.
    fn deliver(&self, state: &mut State<P::Server>, client: u8, attempt: u8, grant: Grant) {
        let Some(lease) = self.protocol.waiter_lease(client) else {
            return;
        };
        let now = state.now;
        let who = &mut state.clients[usize::from(client)];
        let Some((offered, sent)) = who.offer else {
            return;
        };
        if offered != attempt || who.lease.is_some() {
            return;
        }
        let from = if self.client_defect == Some(ClientDefect::GrantFromMessage) {
            now
        } else {
            sent
        };
        let valid_until = from + self.trusted(lease.min(self.bounds.ttl));
        if valid_until <= now {
            return;
        }
        who.lease = Some(Lease::new(attempt, grant, sent, valid_until));
        who.offer = None;
        who.renewals = 0;
        self.past_stray(who);
        state.granted_to |= 1 << client;
        state.handed_over = true;
        state.messages.retain(|&(to, ..)| to != client);
    }

    fn orphan(state: &mut State<P::Server>, client: u8, op: Op) {
        state.orphans.push((client, op));
        state.orphans.sort_unstable();
    }

    /// The one client action, beside faults, that a client with no call
    /// in flight may take.
    fn client_steps(&self, state: &State<P::Server>, id: u8, actions: &mut Vec<Action>) {
        let client = &state.clients[usize::from(id)];
        let elects = self.protocol.elects();
        match client.lease {
            None => {
                // A waiter reads a grant message between its attempts, or
                // stops waiting.
                for &(to, attempt, _) in &state.messages {
                    if to == id {
                        actions.push(Action::Deliver(id, attempt));
                    }
                }
                if client.offer.is_some() {
                    actions.push(Action::GiveUp(id));
                }
                if client.attempts < self.bounds.attempts {
                    actions.push(Action::Acquire(id));
                    for &token in &state.hand_offs {
                        actions.push(Action::ResumeToken(id, token));
                        // A token whose claim was changed on the way.
                        let mut forged = token;
                        forged.claim.token += 1;
                        actions.push(Action::ResumeToken(id, forged));
                    }
                }
            }
            Some(lease) => {
                if self.bounds.hand_offs && state.hand_offs.is_empty() {
                    actions.push(Action::HandOff(id));
                }
                if elects && !client.proclaimed && lease.valid_until > state.now {
                    actions.push(Action::Proclaim(id));
                }
                // The watchdog renews a lease it still trusts; so may the
                // holder, with a shorter or a longer TTL.
                if lease.valid_until > state.now && client.renewals < self.bounds.renewals {
                    for ask in self.bounds.asks() {
                        actions.push(Action::Extend(id, ask));
                    }
                }
                actions.push(Action::Release(id));
            }
        }
    }

    fn send(state: &mut State<P::Server>, client: u8, op: impl FnOnce(&mut Client) -> Op) {
        let now = state.now;
        let who = &mut state.clients[usize::from(client)];
        let op = op(who);
        who.call = Some(Call::Sent(op, now));
    }
}

impl<P: Protocol> Model for LeaseModel<P> {
    type State = State<P::Server>;
    type Action = Action;

    fn init_states(&self) -> Vec<Self::State> {
        vec![State {
            now: 0,
            server: self.protocol.empty(),
            clients: vec![Client::default(); usize::from(self.bounds.clients)],
            orphans: Vec::new(),
            last_granted: Vec::new(),
            token_reused: false,
            epoch_stale: false,
            cleaned_up: false,
            granted_to: 0,
            restarted: false,
            failures: 0,
            hand_offs: Vec::new(),
            resumed: false,
            proclaimed: Vec::new(),
            messages: Vec::new(),
            handed_over: false,
            taken_up: false,
            given_back: false,
        }]
    }

    fn actions(&self, state: &Self::State, actions: &mut Vec<Action>) {
        if state.now < self.bounds.horizon {
            actions.push(Action::Tick);
        }
        if self.faults.restarts && !state.restarted {
            actions.push(Action::Restart);
        }
        for &(client, op) in &state.orphans {
            actions.push(Action::RunOrphan(client, op));
        }
        if self.faults.lost_replies && state.failures < self.bounds.failures {
            for &(client, attempt, _) in &state.messages {
                actions.push(Action::LoseMessage(client, attempt));
            }
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
                None => self.client_steps(state, id, actions),
            }
        }
    }

    fn next_state(&self, last: &Self::State, action: Action) -> Option<Self::State> {
        let mut state = last.clone();
        match action {
            Action::Tick => {
                state.now += 1;
                self.protocol.expire(&mut state.server, state.now);
            }
            Action::Restart => {
                state.server = self.protocol.empty();
                state.restarted = true;
            }
            Action::Acquire(client) => Self::send(&mut state, client, |who| {
                who.attempts += 1;
                who.renewals = 0;
                who.proclaimed = false;
                Op::Acquire {
                    attempt: who.attempts,
                    earlier: who.offer.map_or(0, |(attempt, _)| attempt),
                }
            }),
            Action::Extend(client, ask) => {
                let attempt = state.clients[usize::from(client)].lease?.attempt;
                let op = Op::Extend { attempt, ask };
                // `extend_hold`: a shorter TTL takes effect when the renewal
                // runs, so it is trusted no longer from its send on.
                let at_most = state.now + self.trusted(self.bounds.ttl_of(op));
                let capped = self.client_defect != Some(ClientDefect::TrustsRenewalsInFlight);
                Self::send(&mut state, client, |who| {
                    who.renewals += 1;
                    if let (Some(lease), true) = (&mut who.lease, capped) {
                        lease.valid_until = lease.valid_until.min(at_most);
                    }
                    op
                });
            }
            Action::Release(client) => {
                // The guard is given up as the release is sent.
                let attempt = state.clients[usize::from(client)].lease.take()?.attempt;
                Self::send(&mut state, client, |_| Op::Release { attempt });
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
                let (op, sent) = match call {
                    Call::Sent(op, sent) => {
                        Self::orphan(&mut state, client, op);
                        (op, sent)
                    }
                    Call::Answered(op, sent, _) => (op, sent),
                };
                self.fail(&mut state, client, op, sent);
            }
            Action::HandOff(client) => {
                // The guard stops renewing and is given up for its token.
                let lease = state.clients[usize::from(client)].lease.take()?;
                state.hand_offs.push(HandOff {
                    client,
                    attempt: lease.attempt,
                    claim: lease.grant,
                });
            }
            Action::ResumeToken(client, from) => Self::send(&mut state, client, |who| {
                who.attempts += 1;
                who.renewals = 0;
                who.proclaimed = false;
                Op::TakeOver {
                    from,
                    attempt: who.attempts,
                }
            }),
            Action::Proclaim(client) => {
                let attempt = state.clients[usize::from(client)].lease?.attempt;
                Self::send(&mut state, client, |who| {
                    who.proclaimed = true;
                    Op::Proclaim { attempt }
                });
            }
            Action::GiveUp(client) => {
                // The wait ends: its line is left with what it offered.
                let who = &mut state.clients[usize::from(client)];
                let (offered, _) = who.offer.take()?;
                who.stray = None;
                state.messages.retain(|&(to, ..)| to != client);
                Self::send(&mut state, client, |_| Op::GiveUp { offered });
            }
            Action::Deliver(client, attempt) => {
                let at = state
                    .messages
                    .iter()
                    .position(|&(to, granted, _)| (to, granted) == (client, attempt))?;
                let (_, _, grant) = state.messages.remove(at);
                self.deliver(&mut state, client, attempt, grant);
            }
            Action::LoseMessage(client, attempt) => {
                let at = state
                    .messages
                    .iter()
                    .position(|&(to, granted, _)| (to, granted) == (client, attempt))?;
                state.messages.remove(at);
                state.failures += 1;
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
                who.offer = None;
                if let Some(Call::Sent(op, _)) = who.call.take() {
                    Self::orphan(&mut state, client, op);
                }
                state.messages.retain(|&(to, ..)| to != client);
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = P::properties();
        properties.extend([
            // SAFETY.md, "Trusting a lease": a valid lease is the server's
            // hold, and the hold lives at least as long as it is trusted.
            Property::always(AGREES, |model: &Self, state: &Self::State| {
                let holds = model.protocol.holds(&state.server);
                state.believers().all(|(client, lease)| {
                    holds.iter().any(|&(holder, attempt, grant, expires)| {
                        (holder, attempt, grant) == (client, lease.attempt, lease.grant)
                            && expires >= lease.valid_until
                    })
                })
            }),
            // `FencingToken`: tokens of successive grants only grow (per
            // slot for permits) while the server keeps its data.
            Property::always(TOKENS, |_, state: &Self::State| !state.token_reused),
            Property::sometimes(EVERY, |model: &Self, state: &Self::State| {
                state.granted_to.count_ones() == u32::from(model.bounds.clients)
            }),
            Property::sometimes(CLEANUP, |_, state: &Self::State| state.cleaned_up),
        ]);
        if self.bounds.hand_offs {
            properties.push(Property::sometimes(RESUMED, |_, state: &Self::State| {
                state.resumed
            }));
        }
        let offers =
            (0..self.bounds.clients).any(|client| self.protocol.waiter_lease(client).is_some());
        if offers {
            properties.extend([
                Property::sometimes(HANDED_OVER, |_, state: &Self::State| state.handed_over),
                Property::sometimes(TAKEN_UP, |_, state: &Self::State| state.taken_up),
                Property::sometimes(GIVEN_BACK, |_, state: &Self::State| state.given_back),
            ]);
        }
        properties
    }
}

/// The property that every client that believes it holds has the hold the
/// server keeps, for at least as long as it trusts it.
pub const AGREES: &str = "the server agrees with every client that believes it holds";
/// The property that a grant's token is above every earlier one of its slot.
pub const TOKENS: &str = "every grant's token is above every earlier one";
/// The example of every client granted once.
pub const EVERY: &str = "every client is granted";
/// The example of a lost acquire's hold given back by its cleanup.
pub const CLEANUP: &str = "a cleanup gives back a lost reply's hold";
/// The example of a handed-off lease resumed.
pub const RESUMED: &str = "a handed-off lease is resumed";
/// The example of a release that grants a waiter on the server, which
/// takes the grant from the message.
pub const HANDED_OVER: &str = "a waiter takes a release's grant from its message";
/// The example of a grant whose message was lost, taken up by the
/// waiter's next attempt.
pub const TAKEN_UP: &str = "a waiter's attempt takes up a grant to its earlier one";
/// The example of a waiter that gives up and gives a grant back.
pub const GIVEN_BACK: &str = "a waiter that gives up gives its grant back";

/// Runs the checker on `model` to its end; the names of the properties
/// with a discovery (a counterexample of an `always`, an example of a
/// `sometimes`), sorted. For the models' tests.
#[cfg(test)]
pub(crate) fn discoveries<P: Protocol>(model: LeaseModel<P>) -> Vec<&'static str> {
    use stateright::Checker;
    let checker = model.checker().spawn_bfs().join();
    assert!(checker.is_done(), "the search did not finish");
    let mut found: Vec<_> = checker.discoveries().into_keys().collect();
    found.sort_unstable();
    found
}
