//! `distlock`: run a command under a distributed lock, and inspect or clear
//! locks, from the shell.
//!
//! Config comes from `--config FILE` (TOML) and `DISTLOCK_*` variables, which
//! win: `DISTLOCK_NODES=redis://127.0.0.1:6379 distlock run --key nightly -- ./job.sh`.
//!
//! # Environment
//!
//! - `DISTLOCK_<FIELD>` sets a config field (`DISTLOCK_TTL`,
//!   `DISTLOCK_RETRY__MAX_DELAY`; see `distlock::Config::from_vars`). Other
//!   `DISTLOCK_*` variables are ignored; one that looks like a misspelt field
//!   (`DISTLOCK_TLL`) is named in a warning.
//! - `DISTLOCK_LOG` is the log filter, in `tracing` `EnvFilter` syntax:
//!   `debug`, `lock_core=trace,warn`. Logs go to stderr; the default is `warn`.
//! - `DISTLOCK_KEY` and `DISTLOCK_FENCING_TOKEN` are set for the command `run`
//!   starts; a `distlock` call inside it does not read them as config.
//!
//! # Exit codes of `distlock run`
//!
//! | code | meaning |
//! |---|---|
//! | the command's | the command ran to the end under a lease that held throughout |
//! | 128 + n | the command was killed by signal n (the lease held) |
//! | 75 | the lock was held by someone else for the whole `--wait` (with `--wait 0`: at once) |
//! | 76 | the lease was lost while the command ran; it was sent SIGTERM, then SIGKILL after `--grace` |
//! | 69 | Redis could not be reached, refused the credentials, or failed otherwise |
//! | 78 | the config or the arguments are invalid |
//! | 127 | the command could not be started |
//! | 130 | distlock was interrupted (Ctrl-C or SIGTERM): the command was stopped and the lock released |
//!
//! The command sees `DISTLOCK_KEY` and, when the strategy issues them,
//! `DISTLOCK_FENCING_TOKEN`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use distlock::{Config, LeaseGuard, LockError, LockManager, LockState};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// Exit code: the lock was not acquired within the wait.
const EXIT_NOT_ACQUIRED: u8 = 75;
/// Exit code: the lease was lost while the command ran.
const EXIT_LEASE_LOST: u8 = 76;
/// Exit code: Redis failed (unreachable, credentials, server errors).
const EXIT_UNAVAILABLE: u8 = 69;
/// Exit code: invalid config or arguments.
const EXIT_CONFIG: u8 = 78;
/// Exit code: the command could not be started.
const EXIT_CANNOT_RUN: u8 = 127;
/// Exit code: interrupted by Ctrl-C or SIGTERM.
const EXIT_INTERRUPTED: u8 = 130;

#[derive(Parser)]
#[command(
    name = "distlock",
    version,
    about = "Run commands under a distributed lock on Redis",
    after_help = "Environment: DISTLOCK_NODES, DISTLOCK_TTL and the other DISTLOCK_<FIELD> variables set config fields; DISTLOCK_LOG is the log filter (default `warn`; e.g. `debug`)."
)]
struct Cli {
    /// A TOML config file; DISTLOCK_* environment variables override it.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Run CMD while holding the lock, renewing it; stop CMD if the lock is lost.
    Run {
        /// The lock name.
        #[arg(long)]
        key: String,
        /// The lease TTL (renewed every TTL/3 while CMD runs), e.g. "30s".
        #[arg(long, value_parser = humantime::parse_duration)]
        ttl: Option<Duration>,
        /// How long to wait for the lock; "0" tries once (skip if taken).
        #[arg(long, value_parser = humantime::parse_duration)]
        wait: Option<Duration>,
        /// How long CMD gets between SIGTERM and SIGKILL when the lock is lost.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
        grace: Duration,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Show whether a lock is held, its remaining TTL and fencing token.
    Status {
        /// The lock name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Delete a lock whoever holds it (for a holder you know is dead).
    Release {
        /// The lock name.
        name: String,
        /// Required: this ignores ownership.
        #[arg(long)]
        force: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Warnings show by default: a misspelt DISTLOCK_* variable, a release that
    // failed. DISTLOCK_LOG (`debug`, `lock_core=trace`) changes the filter.
    let filter = tracing_subscriber::EnvFilter::builder()
        .with_default_directive(tracing_subscriber::filter::LevelFilter::WARN.into())
        .with_env_var("DISTLOCK_LOG")
        .from_env_lossy();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("distlock: cannot start the runtime: {err}");
            return ExitCode::from(EXIT_UNAVAILABLE);
        }
    };
    ExitCode::from(runtime.block_on(dispatch(cli)))
}

async fn dispatch(cli: Cli) -> u8 {
    let mut config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(err) => return fail(&err),
    };
    match cli.command {
        Task::Run {
            key,
            ttl,
            wait,
            grace,
            command,
        } => {
            if let Some(ttl) = ttl {
                config.lock.ttl = ttl;
            }
            if let Err(err) = config.validate() {
                return fail(&err);
            }
            let locks = match distlock::connect(&config).await {
                Ok(locks) => locks,
                Err(err) => return fail(&err),
            };
            run(&locks, &key, wait, grace, &command).await
        }
        Task::Status { name, json } => {
            let locks = match distlock::connect(&config).await {
                Ok(locks) => locks,
                Err(err) => return fail(&err),
            };
            match locks.inspect(&name).await {
                Ok(state) => {
                    print_status(&name, config.strategy().name(), &state, json);
                    0
                }
                Err(err) => fail(&err),
            }
        }
        Task::Release { name, force, json } => {
            if !force {
                eprintln!("distlock: `release` deletes the lock whoever holds it; pass --force to confirm");
                return EXIT_CONFIG;
            }
            let locks = match distlock::connect(&config).await {
                Ok(locks) => locks,
                Err(err) => return fail(&err),
            };
            let key = match locks.key(&name) {
                Ok(key) => key,
                Err(err) => return fail(&err),
            };
            match locks.backend().force_release(&key).await {
                Ok(deleted) => {
                    if json {
                        println!(
                            "{}",
                            serde_json::json!({ "key": name, "released": deleted > 0, "nodes": deleted })
                        );
                    } else if deleted > 0 {
                        println!("{name}: released (the key was on {deleted} node(s))");
                    } else {
                        println!("{name}: was not held");
                    }
                    0
                }
                Err(err) => fail(&err),
            }
        }
    }
}

/// Reports an error and picks the exit code for it.
fn fail(err: &LockError) -> u8 {
    eprintln!("distlock: {err}");
    match err {
        LockError::InvalidConfig { .. }
        | LockError::InvalidKey { .. }
        | LockError::InvalidTtl { .. }
        | LockError::InvalidOwner { .. }
        | LockError::ClientNotCompiled { .. } => EXIT_CONFIG,
        LockError::NotAcquired { .. } => EXIT_NOT_ACQUIRED,
        LockError::LeaseLost { .. } => EXIT_LEASE_LOST,
        _ => EXIT_UNAVAILABLE,
    }
}

async fn run(
    locks: &LockManager,
    key: &str,
    wait: Option<Duration>,
    grace: Duration,
    command: &[String],
) -> u8 {
    let acquired = match wait {
        Some(wait) if wait.is_zero() => locks.try_acquire(key).await.and_then(|guard| {
            guard.ok_or(LockError::NotAcquired {
                key: key.to_owned(),
                waited: Duration::ZERO,
                attempts: 1,
            })
        }),
        Some(wait) => locks.acquire_within(key, wait).await,
        None => locks.acquire(key).await,
    };
    let guard = match acquired {
        Ok(guard) => guard,
        Err(err) => return fail(&err),
    };
    let mut child = Command::new(&command[0]);
    child.args(&command[1..]).env("DISTLOCK_KEY", key);
    if let Some(token) = guard.fencing_token() {
        child.env("DISTLOCK_FENCING_TOKEN", token.to_string());
    }
    let mut child = match child.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!("distlock: cannot run {}: {err}", command[0]);
            let _ = guard.release().await;
            return EXIT_CANNOT_RUN;
        }
    };
    tokio::select! {
        status = child.wait() => finish(guard, status).await,
        reason = guard.lost() => {
            eprintln!("distlock: the lock `{key}` was lost ({}); stopping the command", reason.map_or("released".to_owned(), |reason| reason.to_string()));
            stop(&mut child, grace).await;
            drop(guard);
            EXIT_LEASE_LOST
        }
        () = interrupted() => {
            eprintln!("distlock: interrupted; stopping the command and releasing `{key}`");
            stop(&mut child, grace).await;
            let _ = guard.release().await;
            EXIT_INTERRUPTED
        }
    }
}

/// The command ended: release, and exit with its code unless the lease ended early.
async fn finish(guard: LeaseGuard, status: std::io::Result<std::process::ExitStatus>) -> u8 {
    let released = guard.release().await;
    let code = match status {
        Ok(status) => exit_code_of(status),
        Err(err) => {
            eprintln!("distlock: lost track of the command: {err}");
            EXIT_UNAVAILABLE
        }
    };
    match released {
        Err(err @ LockError::LeaseLost { .. }) => {
            eprintln!("distlock: {err}; the command may have overlapped with another holder");
            EXIT_LEASE_LOST
        }
        Err(err) => {
            eprintln!("distlock: release failed ({err}); the lock expires by its TTL");
            code
        }
        Ok(()) => code,
    }
}

fn exit_code_of(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(1),
        (None, None) => 1,
    }
}

/// SIGTERM, then SIGKILL after `grace`.
async fn stop(child: &mut Child, grace: Duration) {
    if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

/// Completes on Ctrl-C or SIGTERM.
async fn interrupted() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

fn print_status(name: &str, strategy: &str, state: &LockState, json: bool) {
    let (held, remaining, token, holds) = match *state {
        LockState::Held {
            remaining,
            token,
            hold_count,
        } => (true, remaining, token, hold_count),
        LockState::Free { last_token } => (false, None, last_token, None),
        _ => (false, None, None, None),
    };
    if json {
        let value = serde_json::json!({
            "key": name,
            "strategy": strategy,
            "held": held,
            "remaining_ms": remaining.map(|left| u64::try_from(left.as_millis()).unwrap_or(u64::MAX)),
            "fencing_token": token.map(|token| token.get()),
            "hold_count": holds,
        });
        println!("{value}");
        return;
    }
    if held {
        let left = remaining.map_or("no expiry".to_owned(), |left| {
            humantime::format_duration(left).to_string()
        });
        print!("{name}: held, {left} left");
        if let Some(token) = token {
            print!(", fencing token {token}");
        }
        if let Some(holds) = holds {
            print!(", {holds} hold(s)");
        }
        println!(" (the holder's identity is a secret and is not shown)");
    } else {
        print!("{name}: free");
        if let Some(token) = token {
            print!(", last fencing token {token}");
        }
        println!();
    }
}
