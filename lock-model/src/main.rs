//! `lock-model [--quick]`: checks the lock model exhaustively, as `cargo
//! xtask model` runs it, and prints for each configuration the states
//! explored, the time taken, and each property's outcome; a property broken
//! where it must hold prints its counterexample as a trace of script calls
//! and fails the run.

use std::process::ExitCode;
use std::time::Instant;

use lock_model::{trace, Bounds, Faults, LockModel};
use stateright::{Checker, Expectation, Model};

/// One configuration to check, and the `always` properties it must break
/// (the documented unsafe case must be found, not pass).
struct Run {
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
}

const RUNS: [Run; 3] = [
    Run {
        name: "lost and delayed replies, pauses, crashes",
        faults: Faults::SURVIVABLE,
        must_break: &[],
        must_reach: true,
        hand_offs: false,
    },
    Run {
        name: "hand-offs resumed by true and forged tokens, lost replies, crashes",
        faults: Faults {
            lost_replies: true,
            pauses: false,
            crashes: true,
            restarts: false,
        },
        must_break: &[],
        must_reach: true,
        hand_offs: true,
    },
    Run {
        name: "a restart without persistence (documented unsafe)",
        faults: Faults {
            lost_replies: false,
            pauses: false,
            crashes: false,
            restarts: true,
        },
        must_break: &[
            "at most one client believes it holds the lock",
            "the server agrees with the client that believes it holds the lock",
            "every grant's token is above every earlier one",
        ],
        must_reach: false,
        hand_offs: false,
    },
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(unknown) = args.iter().find(|arg| *arg != "--quick") {
        eprintln!("lock-model: unknown argument `{unknown}`; usage: lock-model [--quick]");
        return ExitCode::from(2);
    }
    let quick = !args.is_empty();
    let bounds = if quick { Bounds::QUICK } else { Bounds::FULL };
    println!(
        "lock model: {} clients, TTL {} ticks ({} for drift), {} ticks, {} acquires each",
        bounds.clients, bounds.ttl, bounds.drift, bounds.horizon, bounds.attempts
    );
    let mut failed = false;
    for run in &RUNS {
        let bounds = Bounds {
            hand_offs: run.hand_offs,
            ..bounds
        };
        let model = LockModel::new(bounds, run.faults);
        let started = Instant::now();
        let checker = model.clone().checker().spawn_bfs().join();
        let elapsed = started.elapsed();
        println!(
            "\n{}: {} states ({} unique), depth {}, {:.1} s{}",
            run.name,
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
        failed |= !checker.is_done();
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
            failed |= bad;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("    {line}\n")).collect()
}
