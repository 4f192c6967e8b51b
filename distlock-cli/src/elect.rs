//! `distlock elect`: run a command while this process leads an election,
//! campaigning again after a loss; or, with `--observe`, print the leader
//! on every change, as `etcdctl elect` and `etcdctl elect -l` do.

use std::time::Duration;

use distlock::state::Leader;
use distlock::{Election, Leadership, LockError, LockManager};

use crate::{
    fail, run_while_held, whole_millis, Interrupts, JobEnd, EXIT_CANNOT_RUN, EXIT_INTERRUPTED,
    EXIT_LEASE_LOST, EXIT_UNAVAILABLE,
};

/// How `elect` runs its command.
pub(crate) struct Campaign<'a> {
    pub(crate) name: &'a str,
    pub(crate) value: String,
    pub(crate) once: bool,
    pub(crate) grace: Duration,
    pub(crate) command: &'a [String],
}

/// The value a leader proclaims when `--value` is not given: the host name.
pub(crate) fn default_value() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The election of `name`, and the signal handling both `campaign` and
/// `observe` need before they touch it; `Err` is the exit code when either
/// cannot be had.
fn election_and_interrupts(locks: &LockManager, name: &str) -> Result<(Election, Interrupts), u8> {
    let election = locks.election(name).map_err(|err| fail(&err))?;
    let interrupts = Interrupts::new().map_err(|err| {
        eprintln!("distlock: cannot handle signals: {err}");
        EXIT_UNAVAILABLE
    })?;
    Ok((election, interrupts))
}

/// Campaigns, runs the command while leader, and campaigns again after a
/// loss (unless `--once`). Exit code: the command's when it ended by
/// itself (after resigning); 76 when the leadership was lost with
/// `--once`; 130 when interrupted; the codes of [`fail`] otherwise.
pub(crate) async fn campaign(locks: &LockManager, campaign: &Campaign<'_>) -> u8 {
    let (election, mut interrupts) = match election_and_interrupts(locks, campaign.name) {
        Ok(both) => both,
        Err(code) => return code,
    };
    loop {
        let leadership = tokio::select! {
            won = election.campaign(&campaign.value) => match won {
                Ok(leadership) => leadership,
                Err(err) if err.is_retryable() => {
                    eprintln!("distlock: campaign for `{}` failed ({err}); trying again", campaign.name);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Err(err) => return fail(&err),
            },
            signal = interrupts.recv() => {
                eprintln!("distlock: interrupted ({signal}) while campaigning for `{}`; nothing is held", campaign.name);
                return EXIT_INTERRUPTED;
            }
        };
        match lead(&leadership, campaign, &mut interrupts).await {
            Led::Ended(code) => {
                report_resign(leadership.resign().await);
                return code;
            }
            Led::Interrupted => {
                report_resign(leadership.resign().await);
                return EXIT_INTERRUPTED;
            }
            Led::Lost if campaign.once => return EXIT_LEASE_LOST,
            Led::Lost => {
                eprintln!(
                    "distlock: campaigning for `{}` again (--once stops instead)",
                    campaign.name
                );
            }
            Led::CannotRun => {
                report_resign(leadership.resign().await);
                return EXIT_CANNOT_RUN;
            }
        }
    }
}

/// How one term of leadership ended.
enum Led {
    /// The command ended by itself, with this exit code.
    Ended(u8),
    /// The leadership was lost; the command was stopped.
    Lost,
    /// A signal came; the command was stopped.
    Interrupted,
    /// The command could not be started.
    CannotRun,
}

/// Runs the command under `leadership`, in its own process group, until it
/// ends, the leadership is lost, or a signal comes.
async fn lead(
    leadership: &Leadership,
    campaign: &Campaign<'_>,
    interrupts: &mut Interrupts,
) -> Led {
    let term = leadership.term();
    eprintln!(
        "distlock: leading `{}` in term {term} as {:?}",
        campaign.name,
        leadership.value()
    );
    let env = [
        ("DISTLOCK_KEY", campaign.name.to_owned()),
        ("DISTLOCK_FENCING_TOKEN", term.to_string()),
    ];
    let ran = run_while_held(
        campaign.command,
        &env,
        leadership.lost(),
        campaign.grace,
        interrupts,
    )
    .await;
    match ran {
        JobEnd::Ended(code) => Led::Ended(code),
        JobEnd::Lost(reason) => {
            eprintln!(
                "distlock: the leadership of `{}` (term {term}) was lost ({}); the command was stopped",
                campaign.name,
                reason.map_or("resigned".to_owned(), |reason| reason.to_string())
            );
            Led::Lost
        }
        JobEnd::Interrupted(signal) => {
            eprintln!(
                "distlock: interrupted ({signal}); the command was stopped, resigning `{}`",
                campaign.name
            );
            Led::Interrupted
        }
        JobEnd::CannotRun => Led::CannotRun,
    }
}

/// Reports a resignation that did not end the term cleanly.
fn report_resign(resigned: Result<(), LockError>) {
    match resigned {
        Ok(()) => {}
        Err(err @ LockError::LeaseLost { .. }) => {
            eprintln!("distlock: {err}; the command may have overlapped with the next leader");
        }
        Err(err) => eprintln!("distlock: resign failed ({err}); the leadership expires by its TTL"),
    }
}

/// Prints the leader of `name` now and on every change, one line each
/// (`--json`: one object each), until interrupted, which ends it with 0.
pub(crate) async fn observe(locks: &LockManager, name: &str, json: bool) -> u8 {
    let (election, mut interrupts) = match election_and_interrupts(locks, name) {
        Ok(both) => both,
        Err(code) => return code,
    };
    let mut observer = match election.observe().await {
        Ok(observer) => observer,
        Err(err) => return fail(&err),
    };
    loop {
        tokio::select! {
            changed = observer.changed() => match changed {
                Ok(leader) => print_leader(name, leader.as_ref(), json),
                Err(err) => return fail(&err),
            },
            _ = interrupts.recv() => return 0,
        }
    }
}

/// One line: the leader's value (text), or an object with its term and
/// lease (`--json`); `(no leader)` / `"leader": null` when there is none.
fn print_leader(name: &str, leader: Option<&Leader>, json: bool) {
    use std::io::Write as _;
    if json {
        let value = match leader {
            Some(leader) => serde_json::json!({
                "key": name,
                "leader": leader.value,
                "term": leader.term.get(),
                "remaining_ms": leader.remaining.map(whole_millis),
            }),
            None => serde_json::json!({ "key": name, "leader": null }),
        };
        println!("{value}");
    } else {
        match leader {
            Some(leader) => println!("{}", leader.value),
            None => println!("(no leader)"),
        }
    }
    // A pipe (`| while read`) sees each change as it happens.
    let _ = std::io::stdout().flush();
}
