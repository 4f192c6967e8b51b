//! `distlock barrier`: run a command as one of a barrier's parties, once
//! every party has entered, then leave and wait for the others to leave,
//! as Curator's double barrier across hosts.

use std::time::Duration;

use distlock::state::BarrierState;
use distlock::{LockError, LockManager};

use crate::{
    fail, list, run_while_held, whole_millis, Interrupts, JobEnd, EXIT_CANNOT_RUN,
    EXIT_INTERRUPTED, EXIT_LEASE_LOST, EXIT_NOT_ACQUIRED, EXIT_UNAVAILABLE,
};

/// How `barrier` runs its command.
pub(crate) struct Gathering<'a> {
    pub(crate) name: &'a str,
    pub(crate) parties: u32,
    /// How long to wait for every party to enter.
    pub(crate) wait: Duration,
    pub(crate) quiet: bool,
    pub(crate) grace: Duration,
    pub(crate) command: &'a [String],
}

/// Enters, runs the command once every party is in, leaves, and waits
/// until every party has left. Exit code: the command's; 75 when the
/// parties did not all enter within the wait, or a round was under way;
/// 76 when this party's lease was lost while the command ran (the command
/// was stopped); 130 when interrupted; the codes of [`fail`] otherwise.
pub(crate) async fn gather(locks: &LockManager, gathering: &Gathering<'_>) -> u8 {
    let name = list::printable(gathering.name);
    let barrier = match locks.barrier(gathering.name, gathering.parties) {
        Ok(barrier) => barrier,
        Err(err) => return fail(&err),
    };
    let mut interrupts = match Interrupts::new() {
        Ok(interrupts) => interrupts,
        Err(err) => {
            eprintln!("distlock: cannot handle signals: {err}");
            return EXIT_UNAVAILABLE;
        }
    };
    let options = distlock::AcquireOptions::new().with_wait(gathering.wait);
    let party = tokio::select! {
        entered = barrier.enter_with(&options) => match entered {
            Ok(party) => party,
            Err(LockError::NotAcquired { .. }) => {
                if !gathering.quiet {
                    let entered = barrier.state().await.map_or(0, |state| state.entered);
                    eprintln!(
                        "distlock: the {} parties of `{name}` did not all enter within {} \
                         ({entered} in)",
                        gathering.parties,
                        humantime::format_duration(gathering.wait)
                    );
                }
                return EXIT_NOT_ACQUIRED;
            }
            Err(err @ LockError::BarrierFull { .. }) => {
                if !gathering.quiet {
                    eprintln!("distlock: {err}");
                }
                return EXIT_NOT_ACQUIRED;
            }
            Err(err) => return fail(&err),
        },
        signal = interrupts.recv() => {
            eprintln!("distlock: interrupted ({signal}) while waiting for the parties of `{name}`");
            return EXIT_INTERRUPTED;
        }
    };
    let env = [
        ("DISTLOCK_KEY", gathering.name.to_owned()),
        ("DISTLOCK_PARTIES", gathering.parties.to_string()),
    ];
    let ran = run_while_held(
        gathering.command,
        &env,
        party.lost(),
        gathering.grace,
        &mut interrupts,
    )
    .await;
    let code = match ran {
        JobEnd::Ended(code) => code,
        JobEnd::Lost(reason) => {
            eprintln!(
                "distlock: this party of `{name}` was lost ({}); the command was stopped",
                reason.map_or("left".to_owned(), |reason| reason.to_string())
            );
            return EXIT_LEASE_LOST;
        }
        // The party leaves without waiting for the others (the guard's drop).
        JobEnd::Interrupted(signal) => {
            eprintln!(
                "distlock: interrupted ({signal}); the command was stopped and `{name}` left"
            );
            return EXIT_INTERRUPTED;
        }
        JobEnd::CannotRun => return EXIT_CANNOT_RUN,
    };
    tokio::select! {
        left = party.leave() => match left {
            Ok(()) => code,
            Err(err @ LockError::LeaseLost { .. }) => {
                eprintln!("distlock: {err}; the others did not wait for this party");
                EXIT_LEASE_LOST
            }
            Err(err) => fail(&err),
        },
        signal = interrupts.recv() => {
            eprintln!("distlock: interrupted ({signal}) while waiting for the parties of `{name}` to leave");
            EXIT_INTERRUPTED
        }
    }
}

/// `status` of a barrier: its parties, and whether its round is open.
pub(crate) fn print_state(name: &str, state: &BarrierState, json: bool) {
    let millis = state.remaining.map(whole_millis);
    if json {
        let value = serde_json::json!({
            "key": name,
            "barrier": true,
            "parties": state.parties,
            "entered": state.entered,
            "open": state.open,
            "held": state.entered > 0,
            "remaining_ms": millis,
        });
        println!("{value}");
        return;
    }
    let round = if state.open {
        "open: every party entered, not all have left"
    } else {
        "filling"
    };
    println!(
        "{}: barrier, {} of {} parties in, {round}",
        list::printable(name),
        state.entered,
        state.parties
    );
}
