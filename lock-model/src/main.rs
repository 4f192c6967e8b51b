//! `lock-model [--quick | --bounded]`: checks each primitive's model
//! exhaustively, as `cargo xtask model` runs it, and prints for each
//! configuration the states explored, the time taken, and each property's
//! outcome; a property broken where it must hold prints its counterexample
//! as a trace of script calls and fails the run.
//!
//! Without a flag it checks to the bounds docs/SAFETY.md states; `--bounded`
//! is the run of about a minute that `cargo xtask test` makes, `--quick` one
//! of a few seconds.

use std::process::ExitCode;
use std::time::Instant;

use lock_model::{
    trace, Bounds, Election, Faults, LeaseModel, Lock, Protocol, RwLock, Semaphore, AGREES, EPOCH,
    EXCLUSIVE, MUTEX, ONE_LEADER, OWN_SLOTS, TOKENS, WITHIN_LIMIT,
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
    /// A semaphore of a limit, and the weight each client asks for.
    Semaphore(u8, &'static [u8]),
    Election,
    /// A read-write lock whose clients write (`true`) or read.
    RwLock(&'static [bool]),
}

/// One configuration to check, and the `always` properties it must break
/// (the documented unsafe case must be found, not pass).
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
    /// Whether a lease gets two renewals, each of the TTL or a shorter one
    /// (with one acquire each).
    two_ttls: bool,
}

const HAND_OFF_FAULTS: Faults = Faults {
    lost_replies: true,
    pauses: false,
    crashes: true,
    restarts: false,
};

/// The engine's deadlines are the same for every primitive: the lock's
/// runs check renewals of two TTLs, with the faults they need.
const TWO_TTL_FAULTS: Faults = Faults {
    lost_replies: true,
    pauses: false,
    crashes: false,
    restarts: false,
};

const RESTART: Faults = Faults {
    lost_replies: false,
    pauses: false,
    crashes: false,
    restarts: true,
};

const RUNS: [Run; 12] = [
    Run {
        primitive: Primitive::Lock,
        name: "lost and delayed replies, pauses, crashes",
        faults: Faults::SURVIVABLE,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        two_ttls: false,
    },
    Run {
        primitive: Primitive::Lock,
        name: "hand-offs resumed by true and forged tokens, lost replies, crashes",
        faults: HAND_OFF_FAULTS,
        must_break: &[],
        must_reach: true,
        hand_offs: true,
        two_ttls: false,
    },
    Run {
        primitive: Primitive::Lock,
        name: "a restart without persistence (documented unsafe)",
        faults: RESTART,
        must_break: &[MUTEX, AGREES, TOKENS],
        must_reach: false,
        hand_offs: false,
        two_ttls: false,
    },
    Run {
        primitive: Primitive::Lock,
        name: "renewals of two TTLs, lost and delayed replies",
        faults: TWO_TTL_FAULTS,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        two_ttls: true,
    },
    Run {
        primitive: Primitive::Semaphore(2, &[1, 1]),
        name: "lost and delayed replies, pauses, crashes",
        faults: Faults::SURVIVABLE,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        two_ttls: false,
    },
    Run {
        primitive: Primitive::Semaphore(3, &[1, 2]),
        name: "hand-offs resumed by true and forged tokens, lost replies, crashes",
        faults: HAND_OFF_FAULTS,
        must_break: &[],
        must_reach: true,
        hand_offs: true,
        two_ttls: false,
    },
    Run {
        primitive: Primitive::Semaphore(2, &[1, 2]),
        name: "a restart without persistence (documented unsafe)",
        faults: RESTART,
        must_break: &[WITHIN_LIMIT, OWN_SLOTS, AGREES, TOKENS],
        must_reach: false,
        hand_offs: false,
        two_ttls: false,
    },
    Run {
        primitive: Primitive::RwLock(&[true, false, false]),
        name: "lost and delayed replies, crashes",
        faults: HAND_OFF_FAULTS,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        two_ttls: false,
    },
    Run {
        primitive: Primitive::RwLock(&[true, false]),
        name: "hand-offs by true and forged tokens, lost replies, crashes",
        faults: HAND_OFF_FAULTS,
        must_break: &[],
        must_reach: true,
        hand_offs: true,
        two_ttls: false,
    },
    Run {
        primitive: Primitive::RwLock(&[true, false]),
        name: "a restart without persistence (documented unsafe)",
        faults: RESTART,
        must_break: &[EXCLUSIVE, EPOCH, AGREES, TOKENS],
        must_reach: false,
        hand_offs: false,
        two_ttls: false,
    },
    Run {
        primitive: Primitive::Election,
        name: "lost and delayed replies, pauses, crashes",
        faults: Faults::SURVIVABLE,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
        two_ttls: false,
    },
    Run {
        primitive: Primitive::Election,
        name: "a restart without persistence (documented unsafe)",
        faults: RESTART,
        must_break: &[ONE_LEADER, AGREES, TOKENS],
        must_reach: false,
        hand_offs: false,
        two_ttls: false,
    },
];

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
    let level = match args.as_slice() {
        [] => Level::Full,
        [flag] if flag == "--bounded" => Level::Bounded,
        [flag] if flag == "--quick" => Level::Quick,
        _ => {
            eprintln!(
                "lock-model: unexpected arguments {args:?}; usage: lock-model [--quick | --bounded]"
            );
            return ExitCode::from(2);
        }
    };
    let mut failed = false;
    for run in &RUNS {
        let mut bounds = Bounds {
            hand_offs: run.hand_offs,
            ..bounds(run.primitive, level)
        };
        if let Primitive::RwLock(writers) = run.primitive {
            bounds.clients = u8::try_from(writers.len()).unwrap_or(u8::MAX);
        }
        if run.two_ttls {
            bounds = Bounds {
                attempts: 1,
                renewals: 2,
                short_extends: true,
                ..bounds
            };
        }
        failed |= !match run.primitive {
            Primitive::Lock => check(run, LeaseModel::new(Lock::default(), bounds, run.faults)),
            Primitive::Semaphore(limit, weights) => check(
                run,
                LeaseModel::new(Semaphore::new(limit, weights), bounds, run.faults),
            ),
            Primitive::Election => check(
                run,
                LeaseModel::new(Election::default(), bounds, run.faults),
            ),
            // A waiting writer's place lasts as long as a lease.
            Primitive::RwLock(writers) => check(
                run,
                LeaseModel::new(RwLock::new(writers, bounds.ttl), bounds, run.faults),
            ),
        };
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Checks `model` as `run` says; whether every property came out as it
/// must.
fn check<P: Protocol>(run: &Run, model: LeaseModel<P>) -> bool {
    let bounds = model.bounds;
    let what = match run.primitive {
        Primitive::Lock => "lock".to_owned(),
        Primitive::Semaphore(limit, weights) => {
            format!("semaphore of {limit}, clients asking for {weights:?}")
        }
        Primitive::Election => "election".to_owned(),
        Primitive::RwLock(writers) => {
            let writing = writers.iter().filter(|&&writes| writes).count();
            format!(
                "read-write lock, {writing} writer(s) and {} reader(s)",
                writers.len() - writing
            )
        }
    };
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
        if bounds.short_extends {
            " (of the TTL or one a tick shorter)"
        } else {
            ""
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
