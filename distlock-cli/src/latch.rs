//! `distlock latch`: set a count-down latch, count it down, or wait until
//! it opens; and how `status` shows one.

use std::time::Duration;

use distlock::state::LatchState;
use distlock::{LockError, LockManager};

use crate::{
    fail, list, whole_millis, Interrupts, EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_NOT_ACQUIRED,
};

/// What `latch` does to the latch.
pub(crate) enum Action {
    /// Set the count, once, with this TTL.
    Set { count: u32, ttl: Duration },
    /// Count down, once for the id when there is one.
    Down { id: Option<String> },
    /// Wait until the latch opens, this long at most (`None`: read once);
    /// `quiet`: say nothing when it does not.
    Wait { wait: Option<Duration>, quiet: bool },
}

/// Runs `action` on the latch `name`. Exit code: 0 done (set, counted,
/// open); 75 with `Wait`, not open within the wait; 78 for another count
/// than the one set, or a count-down before any set; 130 interrupted while
/// waiting; the codes of [`fail`] otherwise.
pub(crate) async fn latch(locks: &LockManager, name: &str, action: Action) -> u8 {
    let latch = match locks.latch(name) {
        Ok(latch) => latch,
        Err(err) => return fail(&err),
    };
    match action {
        Action::Set { count, ttl } => {
            let latch = match latch.with_ttl(ttl) {
                Ok(latch) => latch,
                Err(err) => return fail(&err),
            };
            match latch.set_count(count).await {
                Ok(set) => {
                    if !set {
                        eprintln!(
                            "distlock: latch `{}` was set to {count} already",
                            list::printable(name)
                        );
                    }
                    // What is left, as `--down` prints it.
                    match latch.count().await {
                        Ok(left) => println!("{}", left.unwrap_or(0)),
                        Err(err) => return fail(&err),
                    }
                    0
                }
                Err(err) => fail(&err),
            }
        }
        Action::Down { id } => {
            let counted = match &id {
                Some(id) => latch.count_down_as(id).await,
                None => latch.count_down().await,
            };
            match counted {
                Ok(left) => {
                    println!("{left}");
                    0
                }
                Err(LockError::LatchNotSet { .. }) => {
                    eprintln!(
                        "distlock: latch `{}` has no count set (or its TTL ended): nothing \
                         counted; set it first with `distlock latch NAME --count N`",
                        list::printable(name)
                    );
                    EXIT_CONFIG
                }
                Err(err) => fail(&err),
            }
        }
        Action::Wait { wait: None, quiet } => match latch.count().await {
            Ok(Some(0)) => 0,
            Ok(left) => {
                if !quiet {
                    let left =
                        left.map_or("no count set".to_owned(), |left| format!("{left} left"));
                    eprintln!(
                        "distlock: latch `{}` is not open ({left})",
                        list::printable(name)
                    );
                }
                EXIT_NOT_ACQUIRED
            }
            Err(err) => fail(&err),
        },
        Action::Wait {
            wait: Some(wait),
            quiet,
        } => {
            let mut interrupts = match Interrupts::new() {
                Ok(interrupts) => interrupts,
                Err(err) => {
                    eprintln!("distlock: cannot handle signals: {err}");
                    return crate::EXIT_UNAVAILABLE;
                }
            };
            tokio::select! {
                opened = tokio::time::timeout(wait, latch.wait()) => match opened {
                    Ok(Ok(())) => 0,
                    Ok(Err(err)) => fail(&err),
                    Err(_) => {
                        if !quiet {
                            eprintln!(
                                "distlock: latch `{}` did not open within {}",
                                list::printable(name),
                                humantime::format_duration(wait)
                            );
                        }
                        EXIT_NOT_ACQUIRED
                    }
                },
                signal = interrupts.recv() => {
                    eprintln!(
                        "distlock: interrupted ({signal}) while waiting for latch `{}`",
                        list::printable(name)
                    );
                    EXIT_INTERRUPTED
                }
            }
        }
    }
}

/// `status` of a latch: its count, the count it was set with, its TTL.
pub(crate) fn print_state(name: &str, state: &LatchState, json: bool) {
    let millis = state.remaining.map(whole_millis);
    if json {
        let value = serde_json::json!({
            "key": name,
            "latch": true,
            "count": state.count,
            "initial": state.initial,
            "open": state.is_open(),
            "held": true,
            "remaining_ms": millis,
        });
        println!("{value}");
        return;
    }
    let left = millis.map_or("no expiry".to_owned(), |millis| {
        format!(
            "expires in {}",
            humantime::format_duration(Duration::from_millis(millis))
        )
    });
    let count = if state.is_open() {
        format!("open (counted down from {})", state.initial)
    } else {
        format!("{} of {} left to count down", state.count, state.initial)
    };
    println!("{}: latch, {count}, {left}", list::printable(name));
}
