//! `distlock barrier`: run a command as one of a barrier's parties, once
//! every party has entered, then leave and wait for the others to leave,
//! as Curator's double barrier across hosts.

use std::time::Duration;

use distlock::state::BarrierState;
use distlock::{LockError, LockManager, PartyGuard};
use nix::unistd::Pid;

use crate::{
    exit_code_of, fail, job, list, stop, Interrupts, EXIT_CANNOT_RUN, EXIT_INTERRUPTED,
    EXIT_LEASE_LOST, EXIT_NOT_ACQUIRED, EXIT_UNAVAILABLE,
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
    let code = match run_as_party(&party, gathering, &mut interrupts).await {
        Ran::Ended(code) => code,
        Ran::Lost => return EXIT_LEASE_LOST,
        Ran::Interrupted => {
            // Leaves without waiting for the others (the guard's drop).
            return EXIT_INTERRUPTED;
        }
        Ran::CannotRun => return EXIT_CANNOT_RUN,
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

/// How the command ran.
enum Ran {
    Ended(u8),
    Lost,
    Interrupted,
    CannotRun,
}

/// Runs the command in its own process group while `party` holds, until it
/// ends, the party's lease is lost, or a signal comes.
async fn run_as_party(
    party: &PartyGuard,
    gathering: &Gathering<'_>,
    interrupts: &mut Interrupts,
) -> Ran {
    let mut child = job(gathering.command);
    child
        .env("DISTLOCK_KEY", gathering.name)
        .env("DISTLOCK_PARTIES", gathering.parties.to_string())
        .process_group(0);
    let mut child = match child.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!(
                "distlock: cannot run {}: {err}",
                child.as_std().get_program().to_string_lossy()
            );
            return Ran::CannotRun;
        }
    };
    let group = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .map(Pid::from_raw);
    tokio::select! {
        status = child.wait() => match status {
            Ok(status) => Ran::Ended(exit_code_of(status)),
            Err(err) => {
                eprintln!("distlock: lost track of the command: {err}");
                Ran::Ended(EXIT_UNAVAILABLE)
            }
        },
        reason = party.lost() => {
            eprintln!(
                "distlock: this party of `{}` was lost ({}); stopping the command",
                list::printable(gathering.name),
                reason.map_or("left".to_owned(), |reason| reason.to_string())
            );
            stop(&mut child, group, gathering.grace).await;
            Ran::Lost
        }
        signal = interrupts.recv() => {
            eprintln!("distlock: interrupted ({signal}); stopping the command and leaving `{}`", list::printable(gathering.name));
            stop(&mut child, group, gathering.grace).await;
            Ran::Interrupted
        }
    }
}

/// `status` of a barrier: its parties, and whether its round is open.
pub(crate) fn print_state(name: &str, state: &BarrierState, json: bool) {
    let millis = state
        .remaining
        .map(|left| u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
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
