//! `lock-model [--quick | --bounded] [PRIMITIVE]`: checks each primitive's model
//! exhaustively, as `cargo xtask model` runs it, and prints for each
//! configuration the states explored, the time taken, and each property's
//! outcome; a property broken where it must hold prints its counterexample
//! as a trace of script calls and fails the run.
//!
//! Without a flag it checks to the bounds docs/SAFETY.md states; `--bounded`
//! is the run of about a minute that `cargo xtask test` makes, `--quick` one
//! of a few seconds. `PRIMITIVE` picks the runs whose primitive's name
//! contains it (`fair`, `semaphore`, ...).

use std::process::ExitCode;
use std::time::Instant;

use lock_model::{
    trace, Bounds, Election, FairLock, Faults, Kind, LeaseModel, Lock, Mixed, Protocol, RwLock,
    Semaphore, AGREES, EPOCH, EXCLUSIVE, MUTEX, ONE_LEADER, OWN_SLOTS, TOKENS, WITHIN_LIMIT,
};
use stateright::{Checker, Expectation, Model};

/// How far a run explores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Quick,
    Bounded,
    Full,
}

/// Which primitive a run checks.
#[derive(Debug, Clone, Copy)]
enum Primitive {
    Lock,
    /// The lock in fair mode, with its server-side hand-off.
    FairLock,
    /// A semaphore of a limit, and the weight each client asks for.
    Semaphore(u8, &'static [u8]),
    /// The same in fair mode, with its server-side hand-off.
    FairSemaphore(u8, &'static [u8]),
    Election,
    /// A read-write lock whose clients write (`true`) or read.
    RwLock(&'static [bool]),
    /// The same, its writers preferring writers: the server hands the
    /// write over.
    RwHandingOver(&'static [bool]),
    /// Clients of different kinds on one name.
    Mixed(&'static [Kind]),
}

/// One configuration to check, and the `always` properties it must break
/// (the documented unsafe case must be found, not pass).
#[derive(Clone)]
struct Run {
    primitive: Primitive,
    name: &'static str,
    faults: Faults,
    must_break: &'static [&'static str],
    /// Whether its `sometimes` properties must be reached (the faults they
    /// need are on).
    must_reach: bool,
    /// Whether leases are handed off and resumed, by a true or a forged
    /// token (each fault with them multiplies the states: pauses are left
    /// out there).
    hand_offs: bool,
    /// What renewals a lease gets beside the bounds' one of its TTL.
    renewals: Renewals,
    /// Whether only the full check makes this run: at the other levels the
    /// models' tests cover it, so that the bounded run stays about a minute.
    full_only: bool,
}

/// The renewals of a run's leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Renewals {
    /// As the bounds say, each of the lease's TTL.
    OfTheTtl,
    /// Two a lease, each of the TTL or a shorter one (with one acquire
    /// each).
    TwoTtls,
    /// One a lease, of the TTL or a longer one.
    Longer,
}

const HAND_OFF_FAULTS: Faults = Faults {
    lost_replies: true,
    pauses: false,
    crashes: true,
    restarts: false,
};

/// Lost replies alone: the fault that renewals of other TTLs need (the
/// engine's deadlines are the same for every primitive: the lock's runs
/// check renewals of two TTLs, the fair lock's a longer extend beside a
/// lost attempt).
const LOST_REPLIES: Faults = Faults {
    lost_replies: true,
    pauses: false,
    crashes: false,
    restarts: false,
};

/// A fair waiter's grant comes by a message that may be lost, and a waiter
/// may crash: the faults its hand-off must survive (pauses are the lock's
/// runs', whose deadlines a fair lock shares).
const FAIR_FAULTS: Faults = Faults {
    lost_replies: true,
    pauses: false,
    crashes: true,
    restarts: false,
};

const RESTART: Faults = Faults {
    lost_replies: false,
    pauses: false,
    crashes: false,
    restarts: true,
};

const RUNS: [Run; 27] = [
    Run {
        primitive: Primitive::Lock,
        name: "lost and delayed replies, pauses, crashes",
        faults: Faults::SURVIVABLE,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    Run {
        primitive: Primitive::Lock,
        name: "hand-offs resumed by true and forged tokens, lost replies, crashes",
        faults: HAND_OFF_FAULTS,
        must_break: &[],
        must_reach: true,
        hand_offs: true,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    Run {
        primitive: Primitive::Lock,
        name: "a restart without persistence (documented unsafe)",
        faults: RESTART,
        must_break: &[MUTEX, AGREES, TOKENS],
        must_reach: false,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    Run {
        primitive: Primitive::Lock,
        name: "renewals of two TTLs, lost and delayed replies",
        faults: LOST_REPLIES,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        renewals: Renewals::TwoTtls,
        full_only: false,
    },
    Run {
        primitive: Primitive::FairLock,
        name: "lost replies and grant messages, crashes, give-ups",
        faults: FAIR_FAULTS,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    Run {
        primitive: Primitive::FairLock,
        name: "lost replies, longer extends (a lost attempt may take its offer up late)",
        faults: LOST_REPLIES,
        must_break: &[],
        must_reach: false,
        hand_offs: false,
        renewals: Renewals::Longer,
        full_only: true,
    },
    Run {
        primitive: Primitive::FairLock,
        name: "a restart without persistence (documented unsafe)",
        faults: RESTART,
        must_break: &[MUTEX, AGREES, TOKENS],
        must_reach: false,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    Run {
        primitive: Primitive::Semaphore(2, &[1, 1]),
        name: "lost and delayed replies, pauses, crashes",
        faults: Faults::SURVIVABLE,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    Run {
        primitive: Primitive::Semaphore(3, &[1, 2]),
        name: "hand-offs resumed by true and forged tokens, lost replies, crashes",
        faults: HAND_OFF_FAULTS,
        must_break: &[],
        must_reach: true,
        hand_offs: true,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    // Permits of 1 and 2 in a semaphore of 2, so that one waits for the
    // other: never two at once, so that example is not required.
    Run {
        primitive: Primitive::FairSemaphore(2, &[1, 2]),
        name: "lost replies and grant messages, crashes, give-ups",
        faults: FAIR_FAULTS,
        must_break: &[],
        must_reach: false,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: true,
    },
    Run {
        primitive: Primitive::Semaphore(2, &[1, 2]),
        name: "a restart without persistence (documented unsafe)",
        faults: RESTART,
        must_break: &[WITHIN_LIMIT, OWN_SLOTS, AGREES, TOKENS],
        must_reach: false,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    Run {
        primitive: Primitive::RwLock(&[true, false, false]),
        name: "lost and delayed replies, crashes",
        faults: HAND_OFF_FAULTS,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    Run {
        primitive: Primitive::RwLock(&[true, false]),
        name: "hand-offs by true and forged tokens, lost replies, crashes",
        faults: HAND_OFF_FAULTS,
        must_break: &[],
        must_reach: true,
        hand_offs: true,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    // A writer waits for a writer, or for a reader (one reader cannot
    // read beside another: that example is not required).
    Run {
        primitive: Primitive::RwHandingOver(&[true, true]),
        name: "lost replies and grant messages, crashes, give-ups",
        faults: FAIR_FAULTS,
        must_break: &[],
        must_reach: false,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: true,
    },
    Run {
        primitive: Primitive::RwHandingOver(&[true, false]),
        name: "lost replies and grant messages, crashes, give-ups",
        faults: FAIR_FAULTS,
        must_break: &[],
        must_reach: false,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: true,
    },
    Run {
        primitive: Primitive::RwLock(&[true, false]),
        name: "a restart without persistence (documented unsafe)",
        faults: RESTART,
        must_break: &[EXCLUSIVE, EPOCH, AGREES, TOKENS],
        must_reach: false,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    Run {
        primitive: Primitive::Election,
        name: "lost and delayed replies, pauses, crashes",
        faults: Faults::SURVIVABLE,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    Run {
        primitive: Primitive::Election,
        name: "a restart without persistence (documented unsafe)",
        faults: RESTART,
        must_break: &[ONE_LEADER, AGREES, TOKENS],
        must_reach: false,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only: false,
    },
    // The kinds mixed on one name, two at a time (a fair lock's or a fair
    // permit's waiter offers its attempt, but only a release of its own
    // kind grants it, so the waiters' examples are not required there).
    mix(&[Kind::Lock, Kind::Write], false),
    mix(&[Kind::Multi, Kind::Read], false),
    mix(&[Kind::Permit, Kind::Write], true),
    mix(&[Kind::Read, Kind::Permit], true),
    mix(&[Kind::Lock, Kind::Multi], true),
    mix(&[Kind::Reentrant, Kind::Read], true),
    mix(&[Kind::Fair, Kind::Write], false),
    mix(&[Kind::FairPermit, Kind::Write], true),
    mix(&[Kind::Lock, Kind::Fair], true),
];

/// The run of `kinds` mixed on one name under every survivable fault,
/// the full check's alone if `full_only`.
const fn mix(kinds: &'static [Kind], full_only: bool) -> Run {
    let mut waits = false;
    let mut at = 0;
    while at < kinds.len() {
        waits |= matches!(kinds[at], Kind::Fair | Kind::FairPermit);
        at += 1;
    }
    Run {
        primitive: Primitive::Mixed(kinds),
        name: if waits {
            "lost and delayed replies, pauses, crashes, give-ups"
        } else {
            "lost and delayed replies, pauses, crashes"
        },
        faults: Faults::SURVIVABLE,
        must_break: &[],
        must_reach: !waits,
        hand_offs: false,
        renewals: Renewals::OfTheTtl,
        full_only,
    }
}

/// The bounds of `primitive` at `level`.
fn bounds(primitive: Primitive, level: Level) -> Bounds {
    let bounds = match level {
        Level::Quick => Bounds::QUICK,
        // One acquire each: about a minute for every run together.
        Level::Bounded => Bounds {
            attempts: 1,
            ..Bounds::FULL
        },
        Level::Full => Bounds::FULL,
    };
    match (primitive, level) {
        // A permit's keys, and a proclaim a lease, make more states than a
        // lock's: a tick less keeps each run within memory and minutes.
        (Primitive::Semaphore(..), Level::Full) => Bounds {
            horizon: 4,
            ..bounds
        },
        (Primitive::Election, Level::Full) => Bounds {
            horizon: 4,
            renewals: 0,
            ..bounds
        },
        // An election is the lock, whose renewals the lock's runs check,
        // and a proclaim a lease: without renewals, the proclaim's states.
        (Primitive::Election, _) => Bounds {
            renewals: 0,
            ..bounds
        },
        // Three clients (a writer and two readers, so that reads share)
        // make many more states than two: one acquire each and no renewals
        // there (the lock's runs check renewals), a tick less but at the
        // full level.
        (Primitive::RwLock(writers), level) if writers.len() > 2 => Bounds {
            horizon: if level == Level::Full { 5 } else { 4 },
            attempts: 1,
            renewals: 0,
            ..bounds
        },
        // Two attempts each: a waiter's second takes up a grant to its
        // first. No renewals: the lock's runs check them.
        (
            Primitive::FairLock | Primitive::FairSemaphore(..) | Primitive::RwHandingOver(_),
            level,
        ) => Bounds {
            attempts: 2,
            renewals: 0,
            horizon: if level == Level::Full { 4 } else { 3 },
            ..bounds
        },
        // Two kinds' keys make more states than one's: a tick less.
        (Primitive::Mixed(_), Level::Bounded | Level::Full) => Bounds {
            horizon: 4,
            ..bounds
        },
        // Two writes in a run, so that a restart can issue a token twice.
        (Primitive::RwLock(_), _) => Bounds {
            attempts: 2,
            ..bounds
        },
        _ => bounds,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut level, mut only) = (Level::Full, None);
    for arg in &args {
        match arg.as_str() {
            "--bounded" if level == Level::Full => level = Level::Bounded,
            "--quick" if level == Level::Full => level = Level::Quick,
            name if !name.starts_with('-') && only.is_none() => only = Some(name),
            _ => {
                eprintln!(
                    "lock-model: unexpected arguments {args:?}; usage: lock-model [--quick | \
                     --bounded] [PRIMITIVE], where PRIMITIVE picks the runs whose primitive's \
                     description contains it (lock, fair, semaphore, read-write, election, mix)"
                );
                return ExitCode::from(2);
            }
        }
    }
    let mut failed = false;
    let picked = RUNS
        .iter()
        .filter(|run| only.is_none_or(|name| describe(run.primitive).contains(name)));
    let picked: Vec<&Run> = picked
        .filter(|run| level == Level::Full || !run.full_only)
        .collect();
    if let (Some(name), true) = (only, picked.is_empty()) {
        let shown: String = name.chars().take(40).collect();
        eprintln!(
            "lock-model: no run at this level checks a primitive whose name contains {shown:?}; \
             the primitives: lock, fair lock, semaphore, fair semaphore, read-write lock, \
             election, mix"
        );
        return ExitCode::from(2);
    }
    for run in picked {
        let mut run = run.clone();
        let mut bounds = Bounds {
            hand_offs: run.hand_offs,
            ..bounds(run.primitive, level)
        };
        if let Primitive::RwLock(writers) | Primitive::RwHandingOver(writers) = run.primitive {
            bounds.clients = u8::try_from(writers.len()).unwrap_or(u8::MAX);
        }
        // Hand-offs with two acquires each make many states: one acquire
        // each short of the full run (the models' tests reuse an owner
        // after a hand-off).
        if run.hand_offs && level != Level::Full {
            bounds.attempts = 1;
            // A read-write lock's one reader then never reads beside
            // another: that example is the full run's.
            if let Primitive::RwLock(_) = run.primitive {
                run.must_reach = false;
            }
        }
        match run.renewals {
            Renewals::OfTheTtl => {}
            Renewals::TwoTtls => {
                bounds = Bounds {
                    attempts: 1,
                    renewals: 2,
                    short_extends: true,
                    ..bounds
                };
            }
            Renewals::Longer => {
                bounds = Bounds {
                    renewals: 1,
                    long_extends: true,
                    ..bounds
                };
            }
        }
        failed |= !match run.primitive {
            Primitive::Lock => check(&run, LeaseModel::new(Lock::default(), bounds, run.faults)),
            // A waiter's place lasts a tick less than a lease, as the
            // engine's lasts less than a TTL: a grant to its offer runs for
            // the place's lease.
            Primitive::FairLock => check(
                &run,
                LeaseModel::new(FairLock::new(bounds.ttl - 1), bounds, run.faults),
            ),
            Primitive::Semaphore(limit, weights) => check(
                &run,
                LeaseModel::new(Semaphore::new(limit, weights), bounds, run.faults),
            ),
            // A waiter's place lasts a tick less than a lease, as the fair
            // lock's.
            Primitive::FairSemaphore(limit, weights) => {
                let semaphore = Semaphore::new(limit, weights).in_fair_mode(bounds.ttl - 1);
                check(&run, LeaseModel::new(semaphore, bounds, run.faults))
            }
            Primitive::Election => check(
                &run,
                LeaseModel::new(Election::default(), bounds, run.faults),
            ),
            // A waiting writer's place lasts as long as a lease.
            Primitive::RwLock(writers) => check(
                &run,
                LeaseModel::new(RwLock::new(writers, bounds.ttl), bounds, run.faults),
            ),
            // A writer's place lasts a tick less than a lease, as the fair
            // lock's.
            Primitive::RwHandingOver(writers) => {
                let lock = RwLock::new(writers, bounds.ttl - 1).handing_over();
                check(&run, LeaseModel::new(lock, bounds, run.faults))
            }
            Primitive::Mixed(kinds) => {
                check(&run, LeaseModel::new(Mixed::new(kinds), bounds, run.faults))
            }
        };
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// What `primitive` is, as a run's heading names it.
fn describe(primitive: Primitive) -> String {
    match primitive {
        Primitive::Lock => "lock".to_owned(),
        Primitive::Semaphore(limit, weights) => {
            format!("semaphore of {limit}, clients asking for {weights:?}")
        }
        Primitive::FairSemaphore(limit, weights) => {
            format!("fair semaphore of {limit}, clients asking for {weights:?}")
        }
        Primitive::Election => "election".to_owned(),
        Primitive::FairLock => "fair lock".to_owned(),
        Primitive::Mixed(kinds) => {
            let kinds: Vec<String> = kinds.iter().map(|kind| format!("{kind:?}")).collect();
            format!("mix on one name: {}", kinds.join(" and ").to_lowercase())
        }
        Primitive::RwLock(writers) | Primitive::RwHandingOver(writers) => {
            let writing = writers.iter().filter(|&&writes| writes).count();
            let handing = matches!(primitive, Primitive::RwHandingOver(_));
            format!(
                "read-write lock{}, {writing} writer(s) and {} reader(s)",
                if handing { " handing writes over" } else { "" },
                writers.len() - writing
            )
        }
    }
}

/// Checks `model` as `run` says; whether every property came out as it
/// must.
fn check<P: Protocol>(run: &Run, model: LeaseModel<P>) -> bool {
    let bounds = model.bounds;
    let what = describe(run.primitive);
    println!(
        "\n{what}: {}\n  {} clients, TTL {} ticks ({} for drift), {} ticks, {} acquires each, \
         {} failed call(s), {} renewal(s) a lease{}",
        run.name,
        bounds.clients,
        bounds.ttl,
        bounds.drift,
        bounds.horizon,
        bounds.attempts,
        bounds.failures,
        bounds.renewals,
        match (bounds.short_extends, bounds.long_extends) {
            (true, false) => " (of the TTL or one a tick shorter)",
            (false, true) => " (of the TTL or twice the TTL)",
            (true, true) => " (of the TTL, one a tick shorter, or twice the TTL)",
            (false, false) => "",
        },
    );
    let started = Instant::now();
    let checker = model.clone().checker().spawn_bfs().join();
    let elapsed = started.elapsed();
    println!(
        "  {} states ({} unique), depth {}, {:.1} s{}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        elapsed.as_secs_f64(),
        if checker.is_done() {
            ""
        } else {
            " (not finished)"
        }
    );
    let mut good = checker.is_done();
    for property in model.properties() {
        let found = checker.discovery(property.name);
        let (verdict, bad) = match (&property.expectation, &found) {
            (Expectation::Sometimes, Some(_)) => ("reached", false),
            (Expectation::Sometimes, None) => ("never reached", run.must_reach),
            (_, None) if run.must_break.contains(&property.name) => {
                ("holds, but must break here", true)
            }
            (_, None) => ("holds", false),
            (_, Some(_)) if run.must_break.contains(&property.name) => {
                ("broken, as documented", false)
            }
            (_, Some(_)) => ("BROKEN", true),
        };
        println!("  {verdict}: {}", property.name);
        if let (true, Some(path)) = (bad || run.must_break.contains(&property.name), found) {
            print!("{}", indent(&trace(&model, &path.into_vec())));
        }
        good &= !bad;
    }
    good
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("    {line}\n")).collect()
}
