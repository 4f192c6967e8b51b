//! `distlock`: run a command under a distributed lock, and inspect or clear
//! locks, from the shell.
//!
//! Config comes from `--config FILE` (TOML), then `DISTLOCK_*` variables,
//! then `--nodes`, each winning over the one before:
//! `DISTLOCK_NODES=redis://127.0.0.1:6379 distlock run nightly -- ./job.sh`.
//! Several standalone nodes need an explicit `strategy` (`redlock`, or a
//! `topology` of `cluster` or `sentinel`): a second URL never turns the lock
//! into Redlock by itself.
//!
//! # Flags as flock(1) has them
//!
//! Every verb names its lock as `NAME` or `--key NAME`. `run` and `acquire`
//! take `-n`/`--nonblock` (do not wait), `-w`/`--wait TIME` (bare seconds as
//! flock takes them, `5` or `0.5`, a duration such as `30s`, or `forever`;
//! the default is the config's `wait_timeout`), `-E`/`--conflict-exit-code N`
//! (the code when the lock stayed held, 75 by default; not 0 for `acquire`,
//! after which a script would go on unlocked) and `-q`/`--quiet`
//! (print nothing then). `--ttl` and `--grace` take bare seconds or a
//! duration as `-w` does; a negative duration is refused (78) and runs
//! nothing. `run` also takes `-c 'COMMAND'`, run through
//! `/bin/sh -c`, instead of `-- CMD...`. `-s` takes a shared (read) hold
//! of NAME beside other `-s` jobs, `-x` its exclusive (write) hold, which
//! waits ahead of new `-s` jobs so a stream of them cannot starve it. A
//! plain `run` (neither) is exclusive, as flock's default is, and on the
//! single-node strategy it is that same write; the reentrant and Redlock
//! strategies have no read-write locks, and there a plain run and `-x` are
//! the plain lock. Cron skips a run that another host is doing, silently
//! and with success:
//!
//! ```sh
//! distlock run -n -q -E 0 nightly -c './report.sh'
//! ```
//!
//! # Several names, semaphores, elections and latches
//!
//! `distlock run --key A --key B -- CMD` holds A and B as one hold, all or
//! none, with one `DISTLOCK_FENCING_TOKEN` (greater than every earlier token
//! of each) and `DISTLOCK_KEY=A,B`; a plain run of either name excludes it.
//!
//! `distlock run --permits N NAME -- CMD` lets up to N jobs hold NAME at
//! once (`--weight W` for one that counts for more), N from 1 to
//! 999,999,999; every host must pass the same N, and another N exits 78
//! naming `distlock limit NAME --permits N`, which changes the stored limit
//! for every host. The job sees `DISTLOCK_PERMIT_SLOT` and its slot's
//! `DISTLOCK_FENCING_TOKEN`. `distlock elect NAME [--value V] -- CMD` runs
//! CMD while this process leads, stops it when the leadership is lost and
//! campaigns again (`--once`: exit 76); `distlock elect NAME --observe`
//! prints the leader on every change. `distlock latch NAME --count N` sets
//! a count-down latch once (another N exits 78), `--down [--id ID]` counts
//! it down (once per id) and prints what is left, and `--wait [-w TIME]`
//! waits until it reaches zero (75 when the wait runs out). `distlock
//! barrier NAME --parties N -- CMD` runs CMD once all N parties have
//! entered, then leaves and waits until every party has left (75 when they
//! did not all enter within `-w`). `status` and `list` show each of them.
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
//! | 75, or `-E`'s | the lock was held by someone else for the whole wait (with `-n`: at once) |
//! | 76 | the lease was lost while the command ran; its process group was sent SIGTERM, then SIGKILL after `--grace`, and distlock exits at most 1 s later |
//! | 69 | Redis could not be reached, refused the credentials or an ACL rule (the error names the rule), or failed otherwise |
//! | 78 | the config or the arguments are invalid (clap's usage errors included) |
//! | 127 | the command could not be started |
//! | 130 | distlock was interrupted (SIGINT, SIGTERM or SIGHUP): while waiting, the wait ended and nothing is held; once the command ran, it was stopped as for 76 and the lock released |
//!
//! The command sees `DISTLOCK_KEY` and, when the strategy issues them,
//! `DISTLOCK_FENCING_TOKEN` (not with `redlock`). `fencing = false` drops
//! the token of a plain lock only (`acquire`), not that of a `run`, whose
//! holds are a read-write lock's, a semaphore's or several names'.
//!
//! # A lock across several commands: `acquire`, `extend`, `release`
//!
//! For scripts whose steps are separate commands:
//!
//! ```sh
//! out=$(distlock acquire deploy --ttl 5m -w 30) || exit $?
//! eval "$out"        # exports DISTLOCK_OWNER and DISTLOCK_FENCING_TOKEN
//! ./migrate.sh
//! distlock extend deploy || exit $?   # 5m again; 76: the lock is gone, stop
//! ./roll-out.sh
//! distlock release deploy
//! ```
//!
//! `acquire` prints the lease's hand-off token (`DISTLOCK_OWNER`): a secret
//! that lets whoever has it extend or release that lease, and nothing else.
//! Nothing renews the lease between the commands; it ends at its TTL unless
//! extended. `extend` sets the TTL from now to `--ttl`, or without it to the
//! TTL `acquire` took the lock with (the token carries it); a `--ttl` shorter
//! than that is reported as "shortened". The exported token is inherited by
//! every command the script runs. The reentrant strategy cannot hand a lease
//! over (78). `extend` and `release` read the token from `--owner`,
//! `--owner-file FILE` or `DISTLOCK_OWNER`; prefer the last two, since a
//! command line is visible to every user in `ps`. Both act only if that hold
//! still has the lock.
//!
//! | code | `acquire` | `extend`, `release` (with a token) |
//! |---|---|---|
//! | 0 | taken; the token is printed | done |
//! | 75, or `-E`'s | held by someone else for the whole wait | |
//! | 76 | | the lock is not held by that token's owner (expired, released, or taken): nothing changed |
//! | 69 | Redis failed | Redis failed, or the key holds something that is not a lock |
//! | 78 | bad config or arguments; a strategy that cannot hand off (reentrant) | bad config or arguments, or a missing or malformed token |
//!
//! # Exit codes of `status`, `list`, `limit` and `release --force`
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done (for `list`, every node was scanned; a `--limit` that cut the scan short is said in the output, not in the code); for `status -q`, the lock is held |
//! | 1 | `status -q` only: the lock is free |
//! | 69 | Redis could not be reached, refused the credentials or an ACL rule, or failed otherwise; `list` first prints what the other nodes hold; for `limit`, the key holds something that is not a semaphore |
//! | 78 | the config or the arguments are invalid (`--limit 0`, `--permits 0`, an unknown flag; clap's own code, 2, is not used); for `limit`, a strategy without semaphores |
//!
//! `status` and `list` print control characters in a name escaped
//! (`\u{1b}`), so a name cannot drive the operator's terminal; JSON
//! escapes them its own way.
//!
//! # `distlock list`
//!
//! The held locks, from a `SCAN` of the lock keys (`MATCH <prefix>{...}`,
//! `COUNT` 1,000) on every node: each standalone or Redlock node, every
//! master of a cluster (from `CLUSTER SLOTS`), the master of a sentinel
//! group. `--limit` bounds the keys examined in all (100,000 by default);
//! `--prefix` keeps the names that start with it. Each lock found is read as
//! `status` reads it, so Redlock lists what a majority holds. The table has
//! one row per lock (`NAME TTL TOKEN HOLDS QUEUED HOLDER`, `-` where the
//! strategy has no such thing); `--json` prints one array of objects with
//! `key`, `remaining_ms`, `fencing_token`, `hold_count`, `queued`, `holder`
//! and `error` (a lock that could not be read, such as a key of foreign
//! data). When the limit stops the scan, a note follows the table, or goes
//! to stderr beside the JSON.
//!
//! # Stopping the command
//!
//! The command runs in a process group of its own. When the lease is lost or
//! distlock gets SIGINT, SIGTERM or SIGHUP, the whole group is sent SIGTERM,
//! and whatever is left of it after `--grace` gets SIGKILL, so a shell's
//! background jobs stop with it (`sh -c 'worker & worker; wait'`). distlock
//! then releases the lock (ownership-checked: another holder's key is left
//! alone) and exits. After a lost lease (76) it waits at most 1 s for that
//! release, which a frozen or unreachable server may never answer: the
//! key, if it is still ours, expires by its TTL.
//!
//! distlock killed with SIGKILL, or by the OOM killer, sees nothing. On Linux
//! the group then dies with it: `run` starts the command under a small
//! supervisor, a hidden mode of this binary that leads the group and gets a
//! parent-death signal from the kernel, on which it sends SIGKILL to the whole
//! group (see `supervise.rs`). Exit codes and signals are as if the command
//! were distlock's child: the supervisor exits with the command's code, or
//! 128 + n when signal n killed it, and a signal sent to the group is the
//! command's to answer. Not covered:
//!
//! - Processes that leave the group (`setsid`, daemons that detach): nothing
//!   reaches them, whether the lease is lost, distlock is interrupted, or it
//!   is killed. Where that matters, run distlock under a supervisor that kills
//!   by cgroup, such as systemd with `KillMode=control-group`.
//! - Elsewhere than Linux, distlock killed with SIGKILL leaves the whole group
//!   running (there is no parent-death signal and no supervisor) while the
//!   lease expires by its TTL.
//! - Processes left in the background when the command exits by itself: the
//!   lock is released and they are not waited for.
//!
//! Because the group is not the terminal's foreground group, a command that
//! reads from the terminal is stopped by SIGTTIN; Ctrl-C reaches distlock,
//! which stops the group as above. `distlock run` is meant for jobs that do
//! not talk to a terminal.

// Computing the layout of `dispatch`'s future (every subcommand's futures
// nested in one state machine) goes deeper than rustc's default query limit
// of 128 in a fresh build (CI's clean clone failed there; an incremental
// rebuild did not).
#![recursion_limit = "256"]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use distlock::error::AclNeed;
use distlock::state::HolderInfo;
use distlock::state::{LockState, NameState};
use distlock::{Config, HandoffToken, LockError, LockGuard, LockManager};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

mod barrier;
mod elect;
mod latch;
mod list;
#[cfg(target_os = "linux")]
mod supervise;

/// The hidden subcommand that runs the supervisor (`supervise.rs`).
const SUPERVISE: &str = "__supervise";

/// Exit code: the lock was not acquired within the wait.
const EXIT_NOT_ACQUIRED: u8 = 75;
/// Exit code: the lease was lost while the command ran.
const EXIT_LEASE_LOST: u8 = 76;
/// How long distlock waits, once a lease is known lost (exit 76), for the
/// release still on its way: the job has been stopped and the TTL frees the
/// key anyway, so a server that stopped answering must not hold the exit for
/// the release's own timeouts (13 s more with the default timeouts).
const LOST_RELEASE_WITHIN: Duration = Duration::from_secs(1);
/// Exit code: Redis failed (unreachable, credentials, server errors).
const EXIT_UNAVAILABLE: u8 = 69;
/// Exit code of `status -q`: the lock is free.
const EXIT_FREE: u8 = 1;
/// Exit code: invalid config or arguments.
const EXIT_CONFIG: u8 = 78;
/// Exit code: the command could not be started.
const EXIT_CANNOT_RUN: u8 = 127;
/// Exit code: interrupted by Ctrl-C or SIGTERM.
const EXIT_INTERRUPTED: u8 = 130;

/// The exit codes of `run`, for `--help`.
const RUN_EXIT_CODES: &str = "\
Exit codes:
  the command's  the command ran to its end under a lease that held throughout
  128+n          the command was killed by signal n
  75             the lock was held by someone else for the whole wait (-E changes it); with
                 --permits, N jobs' weight was running for the whole wait
  76             the lease was lost while the command ran; the command was stopped, and
                 distlock exits at most 1 s later (the TTL frees a key the release missed)
  69             Redis could not be reached, refused the user, or failed otherwise
  78             bad config or arguments; --permits N where NAME was made with another N
                 (`distlock limit NAME --permits N` changes it for every host)
  127            the command could not be started
  130            interrupted (SIGINT, SIGTERM, SIGHUP): the wait ended, or the command was stopped
                 and the lock released

Cron, skipping a run while another host has the lock, silently and with success:
  distlock run -n -q -E 0 nightly -c './report.sh > /var/log/report.log'

At most 4 exports at once across every host, waiting up to 10 minutes for a turn:
  distlock run --permits 4 -w 10m exports -- ./export.sh

Readers beside each other, a writer alone and ahead of new readers (flock -s / -x; a
plain run is -x); two accounts as one hold:
  distlock run -s app-config -- ./read.sh;  distlock run app-config -- ./reload.sh
  distlock run --key acct-1 --key acct-2 -- ./transfer.sh";

/// The exit codes of `elect`, for `--help`.
const ELECT_EXIT_CODES: &str = "\
Exit codes:
  the command's  the command ended by itself while leading (the leadership is then resigned)
  76             with --once: the leadership was lost; the command was stopped, and distlock
                 exits at most 1 s later
  69             Redis could not be reached, refused the user, or failed otherwise
  78             bad config or arguments (a strategy without elections: reentrant, redlock)
  127            the command could not be started
  130            interrupted (SIGINT, SIGTERM, SIGHUP): the campaign ended, or the command
                 was stopped and the leadership resigned
  0              --observe, interrupted

Without --once, a lost leadership stops the command and campaigns again. The command
sees DISTLOCK_KEY and DISTLOCK_FENCING_TOKEN (the term: pass it with every write).
  distlock elect scheduler --value \"$(hostname):8080\" -- ./scheduler
  distlock elect scheduler -l --json";

/// `duration` in whole milliseconds, as JSON and the tables show it.
fn whole_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// How a job run while a lease holds ([`run_while_held`]) ended.
enum JobEnd {
    /// It ended by itself, with this exit code.
    Ended(u8),
    /// The lease was lost (`None`: it was given back); the job was stopped.
    Lost(Option<distlock::LossReason>),
    /// A signal came; the job was stopped.
    Interrupted(&'static str),
    /// It could not be started.
    CannotRun,
}

/// Runs `command` in its own process group with `env`, until it ends,
/// `lost` completes (the lease it runs under ended), or a signal comes;
/// the last two stop its group (SIGTERM, then SIGKILL after `grace`).
async fn run_while_held(
    command: &[String],
    env: &[(&str, String)],
    lost: impl std::future::Future<Output = Option<distlock::LossReason>>,
    grace: Duration,
    interrupts: &mut Interrupts,
) -> JobEnd {
    let mut child = job(command);
    for (name, value) in env {
        child.env(name, value);
    }
    child.process_group(0);
    let mut child = match child.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!(
                "distlock: cannot run {}: {err}",
                child.as_std().get_program().to_string_lossy()
            );
            return JobEnd::CannotRun;
        }
    };
    let group = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .map(Pid::from_raw);
    tokio::select! {
        status = child.wait() => match status {
            Ok(status) => JobEnd::Ended(exit_code_of(status)),
            Err(err) => {
                eprintln!("distlock: lost track of the command: {err}");
                JobEnd::Ended(EXIT_UNAVAILABLE)
            }
        },
        reason = lost => {
            stop(&mut child, group, grace).await;
            JobEnd::Lost(reason)
        }
        signal = interrupts.recv() => {
            stop(&mut child, group, grace).await;
            JobEnd::Interrupted(signal)
        }
    }
}

/// The exit codes of `barrier`, for `--help`.
const BARRIER_EXIT_CODES: &str = "\
Exit codes:
  the command's  the command ended by itself, after every party entered; distlock then
                 left and waited for every party to leave
  75             the parties did not all enter within the wait (-w; -n: not all in now), or a
                 round was under way (full, or not every party had left yet)
  76             this party's lease was lost while the command ran; the command was stopped
  69             Redis could not be reached, refused the user, or failed otherwise
  78             bad config or arguments; --parties N where the barrier's parties entered with
                 another N; a strategy without barriers (reentrant, redlock)
  127            the command could not be started
  130            interrupted: the wait ended, or the command was stopped and the party left

Every shard starts the migration together, and none goes on until all are done:
  distlock barrier migration --parties 5 -w 10m -- ./migrate-shard.sh";

/// The exit codes of `latch`, for `--help`.
const LATCH_EXIT_CODES: &str = "\
Exit codes:
  0    --count: set (or set to that count already); --down: counted (or open already, or
       that --id counted before); --wait: the latch is open
  75   --wait: not open within the wait (-w; -n: not open now)
  69   Redis could not be reached, refused the user, or failed otherwise
  78   bad config or arguments; --count N where the latch was set with another N; --down
       before any host set the count; a name a lock or semaphore holds; a strategy
       without latches (reentrant, redlock)
  130  interrupted while waiting

--count and --down print what is left to count down. Start the reindex once the five
workers are drained, each worker counting down once even if it retries:
  distlock latch reindex --count 5 && distlock latch reindex --wait -w 1h && ./reindex.sh
  distlock latch reindex --down --id \"$(hostname)\"";

/// The exit codes of `acquire`, for `--help`.
const ACQUIRE_EXIT_CODES: &str = "\
Exit codes: 0 taken (the token is printed); 75 held by someone else for the whole wait
(-E changes it); 69 Redis failed; 78 bad config or arguments, or a strategy that cannot
hand a lock over (reentrant); 130 interrupted while waiting (nothing is held).";

/// The exit codes of `extend` and `release`, for `--help`.
const OWNER_EXIT_CODES: &str = "\
Exit codes: 0 done; 76 the lock is not held by that token's owner (expired, released or
taken): nothing changed; 69 Redis failed, or the key holds something that is not a lock;
78 bad config or arguments, or a missing or malformed token.";

/// The exit codes of `limit`, for `--help`.
const LIMIT_EXIT_CODES: &str = "\
Exit codes: 0 done (the limit it had is printed); 69 Redis failed, or the key holds
something that is not a semaphore; 78 bad config or arguments, or a strategy without
semaphores (reentrant, redlock).";

/// The exit codes of `status`, for `--help`.
const STATUS_EXIT_CODES: &str = "\
Exit codes: 0 done (with -q: the lock is held); 1 with -q: the lock is free; 69 Redis
failed; 78 bad config or arguments.";

#[derive(Parser)]
#[command(
    name = "distlock",
    version,
    about = "Run commands under a distributed lock on Redis",
    after_help = "Config: --config FILE (TOML), then DISTLOCK_NODES, DISTLOCK_TTL and the other \
                  DISTLOCK_<FIELD> variables, then --nodes. DISTLOCK_LOG is the log filter \
                  (default `warn`; e.g. `debug`).\n\n\
                  Exit codes: 69 Redis failed (unreachable, refused the user or an ACL rule, \
                  answered with an error); 78 bad config or arguments; `run`, `acquire`, \
                  `extend`, `release` and `status` add their own (see their --help)."
)]
struct Cli {
    /// A TOML config file; DISTLOCK_* environment variables and --nodes
    /// override it.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The Redis nodes, comma-separated (as DISTLOCK_NODES, which it
    /// overrides). A password in a URL here is visible in `ps`: prefer
    /// DISTLOCK_NODES or --config for those.
    #[arg(long, global = true, value_name = "URL,...")]
    nodes: Option<String>,
    #[command(subcommand)]
    command: Task,
}

/// The lock a verb acts on: `NAME` or `--key NAME`, one of them.
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct LockName {
    /// The lock name.
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// The lock name, as a flag (the same as NAME).
    #[arg(long = "key", value_name = "NAME")]
    key: Option<String>,
}

impl LockName {
    fn get(&self) -> &str {
        // clap's group makes exactly one of them present.
        self.name
            .as_deref()
            .or(self.key.as_deref())
            .unwrap_or_default()
    }
}

/// What `run` holds: `NAME`, or one or more `--key NAME`s, taken together
/// as one hold when there are several.
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct RunNames {
    /// The lock name.
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// A lock name, as a flag; several (`--key A --key B`) are taken as one
    /// hold, all or none, with one DISTLOCK_FENCING_TOKEN.
    #[arg(long = "key", value_name = "NAME")]
    keys: Vec<String>,
}

impl RunNames {
    fn get(&self) -> Vec<&str> {
        // clap's group makes exactly one of them present.
        match &self.name {
            Some(name) => vec![name.as_str()],
            None => self.keys.iter().map(String::as_str).collect(),
        }
    }
}

/// How `run` and `acquire` wait for a held lock, and what they do when it
/// stays held: flock(1)'s -n, -w, -E, and a -q for cron.
#[derive(clap::Args)]
struct WaitArgs {
    /// Do not wait: if the lock is held, give up at once (the same as -w 0).
    #[arg(short = 'n', long = "nonblock", conflicts_with = "wait")]
    nonblock: bool,
    /// How long to wait for a held lock: seconds as flock takes them ("5",
    /// "0.5"), a duration ("30s", "5m", "1h 30m"), or "forever". Default:
    /// the config's wait_timeout (10s unless set).
    #[arg(
        short = 'w',
        long,
        value_name = "TIME",
        value_parser = wait_time,
        allow_hyphen_values = true
    )]
    wait: Option<Duration>,
    /// The exit code when the lock was held by someone else for the whole
    /// wait: 0 lets cron count a skipped run as a success (`run` only:
    /// `acquire` refuses 0, after which a script would go on unlocked).
    #[arg(
        short = 'E',
        long = "conflict-exit-code",
        value_name = "N",
        default_value_t = EXIT_NOT_ACQUIRED
    )]
    conflict_exit_code: u8,
    /// Print nothing when the lock was held by someone else for the whole
    /// wait, so cron mails nothing; other errors are still printed.
    #[arg(short = 'q', long)]
    quiet: bool,
}

impl WaitArgs {
    /// The wait asked for, if any: `-n` is a wait of zero.
    fn wait(&self) -> Option<Duration> {
        if self.nonblock {
            Some(Duration::ZERO)
        } else {
            self.wait
        }
    }

    /// How a lock that stayed held is reported.
    fn conflict(&self) -> Conflict {
        Conflict {
            code: self.conflict_exit_code,
            quiet: self.quiet,
        }
    }
}

#[derive(Subcommand)]
enum Task {
    /// Run a command while holding the lock, renewing it; stop the command
    /// if the lock is lost: `distlock run NAME -- CMD...` or `distlock run
    /// NAME -c 'shell command'`.
    #[command(
        after_help = RUN_EXIT_CODES,
        group = clap::ArgGroup::new("job").required(true).args(["shell", "argv"])
    )]
    Run {
        #[command(flatten)]
        lock: RunNames,
        /// The lease TTL, renewed every TTL/3 while the command runs: seconds
        /// ("30") or a duration ("30s", "5m"). Default: the config's ttl (30s
        /// unless set).
        #[arg(long, value_parser = cli_duration, allow_hyphen_values = true)]
        ttl: Option<Duration>,
        #[command(flatten)]
        wait: WaitArgs,
        /// How long the command's process group gets between SIGTERM and
        /// SIGKILL when the lock is lost or distlock is interrupted (SIGINT,
        /// SIGTERM, SIGHUP), in seconds ("10") or as a duration ("10s").
        #[arg(
            long,
            value_parser = cli_duration,
            allow_hyphen_values = true,
            default_value = "10s"
        )]
        grace: Duration,
        /// The exclusive (write) hold of a read-write lock, as flock's -x:
        /// alone, and queued ahead of new -s jobs so a stream of them cannot
        /// starve it. DISTLOCK_FENCING_TOKEN is the next write token. A
        /// plain run (without -s or --permits) is the same hold; on a
        /// strategy without read-write locks (reentrant, redlock) both are
        /// the plain lock.
        #[arg(short = 'x', long, conflicts_with_all = ["shared", "permits"])]
        exclusive: bool,
        /// A shared (read) hold, as flock's -s: beside other -s jobs, never
        /// beside an -x job or a plain run, which wait ahead of new ones.
        /// DISTLOCK_FENCING_TOKEN is the write epoch (the last write's
        /// token): a store that has seen a higher one has newer data than
        /// this job read.
        #[arg(short = 's', long, conflicts_with = "permits")]
        shared: bool,
        /// Let up to N jobs hold NAME at once (a semaphore of N permits, as
        /// `consul lock -n N`), from 1 to 999999999. Every host must pass
        /// the same N: another N exits 78 naming both, and `distlock limit
        /// NAME --permits N` changes it for all. The job sees
        /// DISTLOCK_PERMIT_SLOT (0..N, no two running jobs share one) and
        /// DISTLOCK_FENCING_TOKEN (that slot's). Default: 1, an exclusive
        /// lock.
        #[arg(
            long,
            value_name = "N",
            value_parser = permit_count,
            allow_hyphen_values = true
        )]
        permits: Option<u32>,
        /// How many of the --permits this job counts for (a bigger job
        /// takes more). Default: 1.
        #[arg(
            long,
            value_name = "W",
            requires = "permits",
            value_parser = permit_count,
            allow_hyphen_values = true
        )]
        weight: Option<u32>,
        /// Run this through `/bin/sh -c`, as flock's -c does.
        #[arg(
            short = 'c',
            long = "command",
            value_name = "COMMAND",
            conflicts_with = "argv"
        )]
        shell: Option<String>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, value_name = "CMD")]
        argv: Vec<String>,
    },
    /// Run a command while this process leads the election NAME, and
    /// campaign again after a loss: `distlock elect NAME -- CMD...`, as
    /// `etcdctl elect`; or print the leader on every change with
    /// `--observe` (`-l`), as `etcdctl elect -l`.
    #[command(after_help = ELECT_EXIT_CODES)]
    Elect {
        #[command(flatten)]
        lock: LockName,
        /// What this process proclaims while it leads (an address, a host
        /// name): what observers print. Default: the host name.
        #[arg(long, value_name = "VALUE", conflicts_with = "observe")]
        value: Option<String>,
        /// Print the leader's value now and on every change, one line each,
        /// until interrupted (exit 0), instead of campaigning.
        #[arg(short = 'l', long)]
        observe: bool,
        /// With --observe: one JSON object per change (`key`, `leader`,
        /// `term`, `remaining_ms`).
        #[arg(long, requires = "observe")]
        json: bool,
        /// Lead once: after a loss, exit 76 instead of campaigning again.
        #[arg(long, conflicts_with = "observe")]
        once: bool,
        /// The leadership's TTL, renewed every TTL/3; a leader that stops
        /// renewing is deposed this long after its last renewal. Default:
        /// the config's ttl (30s unless set).
        #[arg(long, value_parser = cli_duration, allow_hyphen_values = true)]
        ttl: Option<Duration>,
        /// How long the command's process group gets between SIGTERM and
        /// SIGKILL when the leadership is lost or distlock is interrupted.
        #[arg(
            long,
            value_parser = cli_duration,
            allow_hyphen_values = true,
            default_value = "10s"
        )]
        grace: Duration,
        /// Run this through `/bin/sh -c` while leading.
        #[arg(
            short = 'c',
            long = "command",
            value_name = "COMMAND",
            conflicts_with_all = ["argv", "observe"]
        )]
        shell: Option<String>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, value_name = "CMD")]
        argv: Vec<String>,
    },
    /// Run a command as one of the N parties of the barrier NAME: once all
    /// N have entered, then leave and wait until every party has left, as
    /// Curator's double barrier across hosts. Each party is a lease: a
    /// party whose host dies is not counted once its lease ends.
    #[command(
        after_help = BARRIER_EXIT_CODES,
        group = clap::ArgGroup::new("job").required(true).args(["shell", "argv"])
    )]
    Barrier {
        #[command(flatten)]
        lock: LockName,
        /// How many parties the barrier has (1 to 10000); every host must
        /// pass the same N.
        #[arg(
            long,
            value_name = "N",
            required = true,
            value_parser = party_count,
            allow_hyphen_values = true
        )]
        parties: u32,
        /// How long to wait for every party to enter, as `run -w` takes it.
        /// Default: the config's wait_timeout (10s unless set).
        #[arg(
            short = 'w',
            long,
            value_name = "TIME",
            value_parser = wait_time,
            allow_hyphen_values = true
        )]
        wait: Option<Duration>,
        /// Do not wait for the parties: exit 75 unless this one completes the count.
        #[arg(short = 'n', long = "nonblock", conflicts_with = "wait")]
        nonblock: bool,
        /// Print nothing when the parties did not all enter in time.
        #[arg(short = 'q', long)]
        quiet: bool,
        /// The party's lease TTL, renewed every TTL/3. Default: the
        /// config's ttl (30s unless set).
        #[arg(long, value_parser = cli_duration, allow_hyphen_values = true)]
        ttl: Option<Duration>,
        /// How long the command's process group gets between SIGTERM and
        /// SIGKILL when the party is lost or distlock is interrupted.
        #[arg(
            long,
            value_parser = cli_duration,
            allow_hyphen_values = true,
            default_value = "10s"
        )]
        grace: Duration,
        /// Run this through `/bin/sh -c` once every party is in.
        #[arg(
            short = 'c',
            long = "command",
            value_name = "COMMAND",
            conflicts_with = "argv"
        )]
        shell: Option<String>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, value_name = "CMD")]
        argv: Vec<String>,
    },
    /// Set the count-down latch NAME (--count N, once: every host may pass
    /// the same N), count it down (--down), or wait until it is counted
    /// down to zero (--wait), as Java's CountDownLatch across hosts.
    #[command(
        after_help = LATCH_EXIT_CODES,
        group = clap::ArgGroup::new("action").required(true).args(["count", "down", "wait"])
    )]
    Latch {
        #[command(flatten)]
        lock: LockName,
        /// Set the count to N (0 to 999999999) unless the latch is set:
        /// the same N again changes nothing, another N exits 78.
        #[arg(long, value_name = "N", value_parser = latch_count)]
        count: Option<u32>,
        /// With --count: how long the latch lives, counted down or not
        /// ("24h", "30m"). Default: 24h.
        #[arg(
            long,
            requires = "count",
            value_parser = cli_duration,
            allow_hyphen_values = true
        )]
        ttl: Option<Duration>,
        /// Count the latch down by one (nothing once it is open).
        #[arg(long)]
        down: bool,
        /// With --down: count once for ID (a host name, a job id), so a
        /// retried count-down does not count twice.
        #[arg(long, value_name = "ID", requires = "down")]
        id: Option<String>,
        /// Wait until the latch is open: set and counted down to zero.
        #[arg(long)]
        wait: bool,
        /// With --wait: how long to wait, as `run -w` takes it ("30s",
        /// "1h", "forever"). Default: the config's wait_timeout (10s unless
        /// set).
        #[arg(
            short = 'w',
            long = "timeout",
            value_name = "TIME",
            requires = "wait",
            value_parser = wait_time,
            allow_hyphen_values = true
        )]
        timeout: Option<Duration>,
        /// With --wait: do not wait; exit 75 unless it is open now.
        #[arg(short = 'n', long, requires = "wait", conflicts_with = "timeout")]
        nonblock: bool,
        /// With --wait: print nothing when it does not open in time.
        #[arg(short = 'q', long, requires = "wait")]
        quiet: bool,
    },
    /// Show whether a lock is held, its remaining TTL and fencing token.
    #[command(after_help = STATUS_EXIT_CODES)]
    Status {
        #[command(flatten)]
        lock: LockName,
        /// Print JSON instead of text.
        #[arg(long, conflicts_with = "quiet")]
        json: bool,
        /// Print nothing; exit 0 when the lock is held, 1 when it is free.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// List the held locks: name, remaining TTL, fencing token, holds,
    /// fair-queue length and holder information, from a bounded SCAN of every
    /// node (every master of a cluster).
    List {
        /// Only locks whose name starts with this (under the configured key_prefix).
        #[arg(long, default_value = "")]
        prefix: String,
        /// How many keys the scan may examine in all (SCAN COUNT hints, 1,000
        /// per call); the output says when it stopped there.
        #[arg(long, default_value_t = 100_000, value_parser = at_least_one)]
        limit: u64,
        /// Print one JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Take the lock and keep it for later steps of a script: prints
    /// `export DISTLOCK_OWNER=<hand-off token>` (and `DISTLOCK_FENCING_TOKEN`,
    /// where the lock has one) for `eval`. Nothing renews it: `extend` it, then `release` it.
    #[command(after_help = ACQUIRE_EXIT_CODES)]
    Acquire {
        #[command(flatten)]
        lock: LockName,
        /// The lease TTL, in seconds ("300") or as a duration ("5m"): the
        /// lock is free this long after the acquire unless extended.
        /// Default: the config's ttl (30s unless set).
        #[arg(long, value_parser = cli_duration, allow_hyphen_values = true)]
        ttl: Option<Duration>,
        #[command(flatten)]
        wait: WaitArgs,
        /// Print JSON (`key`, `owner`, `fencing_token`, `ttl_ms`) instead.
        #[arg(long)]
        json: bool,
    },
    /// Renew a lock taken with `acquire`, only if that owner still holds it.
    #[command(after_help = OWNER_EXIT_CODES)]
    Extend {
        #[command(flatten)]
        lock: LockName,
        /// The new TTL from now, in seconds ("300") or as a duration ("5m").
        /// Default: the TTL `acquire` took
        /// the lock with (carried in its token; the config's ttl for a token
        /// of an earlier version, which does not carry it).
        #[arg(long, value_parser = cli_duration, allow_hyphen_values = true)]
        ttl: Option<Duration>,
        #[command(flatten)]
        owner: OwnerArgs,
    },
    /// Give back a lock taken with `acquire` (only if that owner still holds
    /// it), or, with --force, delete it whoever holds it.
    #[command(after_help = OWNER_EXIT_CODES)]
    Release {
        #[command(flatten)]
        lock: LockName,
        /// Delete the lock whoever holds it (for a holder you know is dead).
        #[arg(long, conflicts_with_all = ["owner", "owner_file"])]
        force: bool,
        #[command(flatten)]
        owner: OwnerArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Change the limit of the semaphore NAME for every host, as `run
    /// --permits N` takes it: prints the limit it had. Live permits keep
    /// their weight; after a lower limit, new ones wait until the weight in
    /// use fits under it. Change what every host passes as --permits too:
    /// one that still asks for the old limit exits 78.
    #[command(after_help = LIMIT_EXIT_CODES)]
    Limit {
        #[command(flatten)]
        lock: LockName,
        /// The new limit, from 1 to 999999999.
        #[arg(
            long,
            value_name = "N",
            required = true,
            value_parser = permit_count,
            allow_hyphen_values = true
        )]
        permits: u32,
    },
    /// Internal to `run`: supervise CMD in this process group, and kill the
    /// group if the `distlock run` that started it dies.
    #[command(name = SUPERVISE, hide = true)]
    Supervise {
        /// The pid of that `distlock run`.
        #[arg(long)]
        parent: i32,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
}

/// What `run` and `acquire` do when the lock stayed held: the exit code
/// (`-E`), and whether to say so (`-q`).
#[derive(Clone, Copy)]
struct Conflict {
    code: u8,
    quiet: bool,
}

/// Where the hand-off token of `extend` and `release` comes from: the flag,
/// a file, or `DISTLOCK_OWNER` (in that order).
#[derive(clap::Args)]
struct OwnerArgs {
    /// The hand-off token `acquire` printed. Visible to everyone in `ps`
    /// while distlock runs: prefer DISTLOCK_OWNER or --owner-file.
    #[arg(long, value_name = "TOKEN")]
    owner: Option<String>,
    /// A file holding the hand-off token (readable only by its user).
    #[arg(long, value_name = "FILE", conflicts_with = "owner")]
    owner_file: Option<PathBuf>,
}

impl OwnerArgs {
    /// The token, from the flag, the file or `DISTLOCK_OWNER`; `None` when
    /// none is given.
    fn token(&self) -> Result<Option<HandoffToken>, LockError> {
        let text = if let Some(text) = &self.owner {
            text.clone()
        } else if let Some(path) = &self.owner_file {
            std::fs::read_to_string(path).map_err(|err| LockError::InvalidOwner {
                reason: format!("cannot read {}: {err}", path.display()),
            })?
        } else {
            match std::env::var("DISTLOCK_OWNER") {
                Ok(text) => text,
                Err(_) => return Ok(None),
            }
        };
        HandoffToken::parse(&text).map(Some)
    }
}

fn main() -> ExitCode {
    // Bad arguments exit with 78, like bad config, as documented; --help and
    // --version with 0.
    // Bad arguments exit with 78, as bad config does (clap's own code is 2);
    // --help and --version print to stdout and exit 0.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { EXIT_CONFIG } else { 0 });
        }
    };
    // No logging and no runtime: the supervisor is one thread that waits.
    if let Task::Supervise { parent, command } = &cli.command {
        return ExitCode::from(supervise(*parent, command));
    }
    // Warnings show by default: a misspelt DISTLOCK_* variable, a release that
    // failed. DISTLOCK_LOG (`debug`, `lock_core=trace`) changes the filter.
    // fred warns on every connection of a user that may not run INFO (its
    // version probe), which a least-privilege lock user may not: noise, not news.
    let filter = match std::env::var("DISTLOCK_LOG") {
        Ok(directives) if !directives.trim().is_empty() => {
            tracing_subscriber::EnvFilter::builder().parse_lossy(directives)
        }
        _ => tracing_subscriber::EnvFilter::new("warn,fred::protocol::connection=error"),
    };
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

/// The lock names a task names.
fn lock_names(task: &Task) -> Vec<&str> {
    match task {
        Task::Run { lock, .. } => lock.get(),
        Task::Elect { lock, .. }
        | Task::Acquire { lock, .. }
        | Task::Extend { lock, .. }
        | Task::Status { lock, .. }
        | Task::Limit { lock, .. }
        | Task::Latch { lock, .. }
        | Task::Barrier { lock, .. }
        | Task::Release { lock, .. } => vec![lock.get()],
        Task::Supervise { .. } | Task::List { .. } => Vec::new(),
    }
}

async fn dispatch(cli: Cli) -> u8 {
    // A hand-off token typed where the name goes would reach logs, spans and
    // error messages as a lock name.
    if lock_names(&cli.command)
        .iter()
        .any(|name| HandoffToken::parse(name).is_ok())
    {
        eprintln!(
            "distlock: the lock name is an owner token; pass the token with --owner, \
             --owner-file or DISTLOCK_OWNER"
        );
        return EXIT_CONFIG;
    }
    let overrides = cli.nodes.as_deref().map(|nodes| ("DISTLOCK_NODES", nodes));
    let config = match Config::load_with(cli.config.as_deref(), overrides) {
        Ok(config) => config,
        Err(err) => return fail(&err),
    };
    let _ = KEY_PREFIX.set(config.lock.key_prefix.clone());
    // A background release is tried up to five times (under a second
    // between tries), each bounded by the command timeout, after a reconnect
    // at worst: this bounds the worst case; the usual wait is one round trip.
    let settle_within = config
        .lock
        .command_timeout
        .saturating_mul(5)
        .saturating_add(config.lock.connect_timeout)
        .saturating_add(Duration::from_secs(1));
    let code = perform(cli.command, config).await;
    let settle_within = if code == EXIT_LEASE_LOST {
        settle_within.min(LOST_RELEASE_WITHIN)
    } else {
        settle_within
    };
    // A release the task left in the background (a guard given up on, an
    // acquire whose reply was lost) must reach Redis before the runtime,
    // and the task with it, is dropped at exit.
    if !distlock::settle_background_releases(settle_within).await {
        tracing::warn!(
            "a background release did not finish within {settle_within:?}; its lock expires by its TTL"
        );
    }
    code
}

/// Runs one task; every path out of it returns its exit code.
async fn perform(command: Task, mut config: Config) -> u8 {
    match command {
        Task::Run {
            lock,
            ttl,
            wait,
            grace,
            exclusive,
            shared,
            permits,
            weight,
            shell,
            argv,
        } => {
            if let Some(ttl) = ttl {
                config.lock.ttl = ttl;
            }
            let command = match shell {
                Some(line) => vec!["/bin/sh".to_owned(), "-c".to_owned(), line],
                None => argv,
            };
            let locks = match connect(&config).await {
                Ok(locks) => locks,
                Err(code) => return code,
            };
            let names = lock.get();
            let joined = names.join(",");
            if names.len() > 1 && (shared || exclusive || permits.is_some()) {
                eprintln!(
                    "distlock: several --key names are one plain hold of them all; -s, -x and \
                     --permits take one name"
                );
                return EXIT_CONFIG;
            }
            let permits = Permits::asked(permits, weight);
            // An exclusive run of one name (`-x`, or neither `-s` nor
            // `--permits`: flock's default) is the write of the name's
            // read-write lock, so it queues ahead of new `-s` jobs instead
            // of waiting for a gap between them. Where read-write locks are
            // missing it is the plain lock: the only kind of hold such a
            // strategy has, exclusive against all.
            let access = if shared {
                Some(distlock::state::Access::Shared)
            } else if names.len() == 1
                && permits.is_none()
                && locks
                    .backend()
                    .capabilities()
                    .has(distlock::error::Capability::RwLocks)
            {
                Some(distlock::state::Access::Exclusive)
            } else {
                None
            };
            let what = Take {
                key: &joined,
                wait: wait.wait(),
                permits,
                access,
                members: (names.len() > 1).then_some(names.as_slice()),
            };
            run(&locks, &what, &wait, grace, &command).await
        }
        Task::Elect {
            lock,
            value,
            observe,
            json,
            once,
            ttl,
            grace,
            shell,
            argv,
        } => {
            let command = match shell {
                Some(line) => vec!["/bin/sh".to_owned(), "-c".to_owned(), line],
                None => argv,
            };
            if observe != command.is_empty() {
                eprintln!(
                    "distlock: elect takes a command (-c 'COMMAND' or -- CMD...), or --observe \
                     without one"
                );
                return EXIT_CONFIG;
            }
            if let Some(ttl) = ttl {
                config.lock.ttl = ttl;
            }
            let locks = match connect(&config).await {
                Ok(locks) => locks,
                Err(code) => return code,
            };
            if observe {
                return elect::observe(&locks, lock.get(), json).await;
            }
            let campaign = elect::Campaign {
                name: lock.get(),
                value: value.unwrap_or_else(elect::default_value),
                once,
                grace,
                command: &command,
            };
            elect::campaign(&locks, &campaign).await
        }
        Task::Status { lock, json, quiet } => {
            let locks = match connect(&config).await {
                Ok(locks) => locks,
                Err(code) => return code,
            };
            let name = lock.get();
            // One read says what holds the name, whichever primitive it is.
            let state = match locks.inspect(name).await {
                Ok(state) => state,
                Err(err) => return fail(&err),
            };
            if quiet {
                return if state.is_held() { 0 } else { EXIT_FREE };
            }
            let strategy = config.strategy().name();
            match &state {
                NameState::Semaphore(semaphore) => print_semaphore(name, semaphore, json),
                NameState::RwLock(rw_lock) => print_rw_lock(name, rw_lock, json),
                NameState::Latch(latch) => latch::print_state(name, latch, json),
                NameState::Barrier(barrier) => barrier::print_state(name, barrier, json),
                NameState::Election { lock, leader } => {
                    print_status(name, strategy, lock, Some(leader), json)
                }
                NameState::Lock(lock) => print_status(name, strategy, lock, None, json),
                _ => print_status(name, strategy, &LockState::from(state.clone()), None, json),
            }
            0
        }
        Task::Barrier {
            lock,
            parties,
            wait,
            nonblock,
            quiet,
            ttl,
            grace,
            shell,
            argv,
        } => {
            let command = match shell {
                Some(line) => vec!["/bin/sh".to_owned(), "-c".to_owned(), line],
                None => argv,
            };
            if let Some(ttl) = ttl {
                config.lock.ttl = ttl;
            }
            let wait = if nonblock {
                Duration::ZERO
            } else {
                wait.unwrap_or(config.lock.wait_timeout)
            };
            let locks = match connect(&config).await {
                Ok(locks) => locks,
                Err(code) => return code,
            };
            let gathering = barrier::Gathering {
                name: lock.get(),
                parties,
                wait,
                quiet,
                grace,
                command: &command,
            };
            barrier::gather(&locks, &gathering).await
        }
        Task::Latch {
            lock,
            count,
            ttl,
            down,
            id,
            wait,
            timeout,
            nonblock,
            quiet,
        } => {
            let action = match (count, down, wait) {
                (Some(count), _, _) => latch::Action::Set {
                    count,
                    ttl: ttl.unwrap_or(distlock::limits::DEFAULT_LATCH_TTL),
                },
                (None, true, _) => latch::Action::Down { id },
                _ => latch::Action::Wait {
                    wait: (!nonblock).then(|| timeout.unwrap_or(config.lock.wait_timeout)),
                    quiet,
                },
            };
            let locks = match connect(&config).await {
                Ok(locks) => locks,
                Err(code) => return code,
            };
            latch::latch(&locks, lock.get(), action).await
        }
        Task::Limit { lock, permits } => {
            let locks = match connect(&config).await {
                Ok(locks) => locks,
                Err(code) => return code,
            };
            set_limit(&locks, lock.get(), permits).await
        }
        Task::List {
            prefix,
            limit,
            json,
        } => {
            let locks = match connect(&config).await {
                Ok(locks) => locks,
                Err(code) => return code,
            };
            list::list(&locks, &prefix, limit, json).await
        }
        Task::Supervise { parent, command } => supervise(parent, &command),
        Task::Acquire {
            lock,
            ttl,
            wait,
            json,
        } => {
            let key = lock.get();
            // A script goes on after `acquire` exits 0, as if it held the lock.
            if wait.conflict_exit_code == 0 {
                eprintln!(
                    "distlock: `acquire -E 0` would exit 0 without the lock, and a script would \
                     go on as if it held it; use -E with a code of 1 or more"
                );
                return EXIT_CONFIG;
            }
            if let Some(ttl) = ttl {
                config.lock.ttl = ttl;
            }
            let locks = match connect(&config).await {
                Ok(locks) => locks,
                Err(code) => return code,
            };
            // Refused before the lock is taken: a lock taken and then not
            // handed off would be held, by nobody, for its whole TTL.
            if !locks.can_hand_off() {
                return fail(&LockError::HandOffUnsupported {
                    strategy: locks.backend().strategy(),
                    operation: "hand off",
                });
            }
            let mut interrupts = match Interrupts::new() {
                Ok(interrupts) => interrupts,
                Err(err) => {
                    eprintln!("distlock: cannot handle signals: {err}");
                    return EXIT_UNAVAILABLE;
                }
            };
            let what = Take {
                key,
                wait: wait.wait(),
                permits: None,
                access: None,
                members: None,
            };
            let taken = take_unless_interrupted(&locks, &what, &mut interrupts).await;
            let guard = match taken {
                Ok(Ok((guard, _))) => guard,
                Ok(Err(err)) => return fail_to_take(&err, wait.conflict()),
                Err(code) => return code,
            };
            let handoff = match guard.hand_off() {
                Ok(handoff) => handoff,
                Err(err) => return fail(&err),
            };
            if let Err(err) = print_acquired(key, &handoff, config.lock.ttl, json) {
                eprintln!("distlock: cannot print the owner token ({err}); releasing `{key}`");
                let _ = locks.release_by_token(key, &handoff).await;
                return EXIT_UNAVAILABLE;
            }
            0
        }
        Task::Extend { lock, ttl, owner } => {
            let token = match owner.token() {
                Ok(Some(token)) => token,
                Ok(None) => return missing_owner("extend"),
                Err(err) => return fail(&err),
            };
            let locks = match connect(&config).await {
                Ok(locks) => locks,
                Err(code) => return code,
            };
            extend(&locks, lock.get(), &token, ttl).await
        }
        Task::Release {
            lock,
            force,
            owner,
            json,
        } => {
            let name = lock.get();
            let token = if force {
                None
            } else {
                match owner.token() {
                    Ok(Some(token)) => Some(token),
                    Ok(None) => {
                        eprintln!(
                            "distlock: `release` needs the owner's hand-off token (--owner, \
                             --owner-file or DISTLOCK_OWNER), or --force to delete the lock \
                             whoever holds it"
                        );
                        return EXIT_CONFIG;
                    }
                    Err(err) => return fail(&err),
                }
            };
            let locks = match connect(&config).await {
                Ok(locks) => locks,
                Err(code) => return code,
            };
            match token {
                Some(token) => release_as_owner(&locks, name, &token, json).await,
                None => force_release(&locks, name, json).await,
            }
        }
    }
}

/// `extend`: renews to `--ttl`, else to the TTL the token says the lock was
/// taken with; says when that is shorter than what the lock was taken with.
async fn extend(
    locks: &LockManager,
    key: &str,
    token: &HandoffToken,
    asked: Option<Duration>,
) -> u8 {
    let taken = token.ttl();
    let ttl = asked.unwrap_or(taken);
    match locks.extend_by_token(key, token, ttl).await {
        Ok(left) => {
            let left = humantime::format_duration(left);
            if ttl < taken {
                println!(
                    "{key}: shortened to a {} TTL (it was taken with {}), {left} left",
                    humantime::format_duration(ttl),
                    humantime::format_duration(taken)
                );
            } else {
                println!("{key}: extended, {left} left");
            }
            0
        }
        Err(err) => fail(&err),
    }
}

/// `limit`: stores `limit` as the semaphore `name`'s limit for every
/// process and says what it was.
async fn set_limit(locks: &LockManager, name: &str, limit: u32) -> u8 {
    let mut semaphore = match locks.semaphore(name, limit) {
        Ok(semaphore) => semaphore,
        Err(err) => return fail(&err),
    };
    let shown = list::printable(name);
    match semaphore.set_limit(limit).await {
        Ok(Some(was)) => {
            println!("{shown}: limit set to {limit} permits (was {was})");
            0
        }
        Ok(None) => {
            println!("{shown}: limit set to {limit} permits (none was stored)");
            0
        }
        Err(err) => fail(&err),
    }
}

/// Connects, or says why not and picks the exit code.
async fn connect(config: &Config) -> Result<LockManager, u8> {
    if let Err(err) = config.validate() {
        return Err(fail(&err));
    }
    distlock::connect(config).await.map_err(|err| fail(&err))
}

/// `extend` or `release` without a token.
fn missing_owner(verb: &str) -> u8 {
    eprintln!(
        "distlock: `{verb}` needs the owner's hand-off token: --owner, --owner-file, or \
         DISTLOCK_OWNER (what `distlock acquire` printed)"
    );
    EXIT_CONFIG
}

/// What `acquire` prints: lines for `eval`, or JSON. A failed write (a
/// closed pipe) is an error, not a panic: the caller then releases.
fn print_acquired(
    key: &str,
    handoff: &HandoffToken,
    ttl: Duration,
    json: bool,
) -> std::io::Result<()> {
    use std::io::Write as _;
    let fencing_token = handoff.fencing_token().map(|token| token.get());
    let mut out = std::io::stdout().lock();
    if json {
        let ttl_ms = whole_millis(ttl);
        let value = serde_json::json!({
            "key": key,
            "owner": handoff.expose(),
            "fencing_token": fencing_token,
            "ttl_ms": ttl_ms,
        });
        writeln!(out, "{value}")?;
    } else {
        // A generated owner is hex and the rest digits and dots: safe to
        // `eval`, and quoted anyway.
        writeln!(out, "export DISTLOCK_OWNER='{}'", handoff.expose())?;
        if let Some(token) = fencing_token {
            writeln!(out, "export DISTLOCK_FENCING_TOKEN={token}")?;
        }
    }
    out.flush()
}

/// `release` with the owner's token: only that hold's lock is released.
async fn release_as_owner(locks: &LockManager, name: &str, token: &HandoffToken, json: bool) -> u8 {
    match locks.release_by_token(name, token).await {
        Ok(()) => {
            if json {
                println!("{}", serde_json::json!({ "key": name, "released": true }));
            } else {
                println!("{name}: released");
            }
            0
        }
        Err(err) => fail(&err),
    }
}

/// `release --force`: deletes the key whoever holds it.
async fn force_release(locks: &LockManager, name: &str, json: bool) -> u8 {
    let key = match locks.key(name) {
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

/// The longest duration any flag takes: far beyond any lock's use, and
/// short enough that adding it to any instant cannot overflow.
const MAX_CLI_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A duration flag (`--ttl`, `--grace`, and `--wait` but for `forever`):
/// bare seconds as flock(1) takes them (`5`, `0.5`), or humantime's syntax
/// (`30s`, `5m`, `1h 30m`), at most [`MAX_CLI_DURATION`]. The flags take a
/// value that starts with `-`, so a negative one is refused here, plainly,
/// rather than read as a flag (clap would then suggest `--`, which starts
/// the command).
fn cli_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(
            "is negative: a duration is seconds (`5`, `0.5`) or a span such as \
                    `30s` or `5m`"
                .to_owned(),
        );
    }
    let duration = if text.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    {
        let seconds: f64 = text
            .parse()
            .map_err(|_| format!("`{text}` is not a number of seconds"))?;
        Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
    } else {
        humantime::parse_duration(text).map_err(|err| err.to_string())?
    };
    if duration > MAX_CLI_DURATION {
        return Err("is longer than 100 years, the longest duration distlock takes".to_owned());
    }
    Ok(duration)
}

/// A `-w`/`--wait`: a duration in [`cli_duration`]'s syntax, or `forever`
/// (the longest duration distlock takes, which no lock outlasts).
fn wait_time(text: &str) -> Result<Duration, String> {
    if text.trim().eq_ignore_ascii_case("forever") {
        return Ok(MAX_CLI_DURATION);
    }
    cli_duration(text).map_err(|reason| {
        if reason.starts_with("is longer") {
            "is longer than 100 years; use `forever`".to_owned()
        } else {
            reason
        }
    })
}

/// A `--permits` or `--weight`: a whole number from 1 to
/// [`MAX_SEMAPHORE_LIMIT`](distlock::limits::MAX_SEMAPHORE_LIMIT), a semaphore's
/// real range, whichever side a number misses it on.
fn permit_count(text: &str) -> Result<u32, String> {
    let max = distlock::limits::MAX_SEMAPHORE_LIMIT;
    let out_of_range = || format!("must be a whole number from 1 to {max}");
    let count: u64 = text.trim().parse().map_err(|_| {
        if text.trim().starts_with('-') || text.trim().bytes().all(|b| b.is_ascii_digit()) {
            out_of_range()
        } else {
            "is not a whole number".to_owned()
        }
    })?;
    u32::try_from(count)
        .ok()
        .filter(|count| (1..=max).contains(count))
        .ok_or_else(out_of_range)
}

/// A barrier's `--parties`: a whole number from 1 to
/// [`MAX_BARRIER_PARTIES`](distlock::limits::MAX_BARRIER_PARTIES).
fn party_count(text: &str) -> Result<u32, String> {
    let max = distlock::limits::MAX_BARRIER_PARTIES;
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|count| (1..=max).contains(count))
        .ok_or_else(|| format!("must be a whole number from 1 to {max}"))
}

/// A latch's `--count`: a whole number from 0 to
/// [`MAX_LATCH_COUNT`](distlock::limits::MAX_LATCH_COUNT).
fn latch_count(text: &str) -> Result<u32, String> {
    let max = distlock::limits::MAX_LATCH_COUNT;
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|count| *count <= max)
        .ok_or_else(|| format!("must be a whole number from 0 to {max}"))
}

/// A `--limit`: a whole number of at least 1.
fn at_least_one(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(limit) => Ok(limit),
        Err(_) => Err("is not a whole number".to_owned()),
    }
}

/// The config's `key_prefix`, once loaded: [`fail`] names the ACL patterns
/// a refused user needs with it.
static KEY_PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Reports an error and picks the exit code for it.
fn fail(err: &LockError) -> u8 {
    match err {
        // The library's message names its Rust method; a shell user gets
        // the verb that does the same.
        LockError::CountMismatch {
            key,
            what: "semaphore limit",
            stored: limit,
            requested,
        } => eprintln!(
            "distlock: semaphore `{}` has a limit of {limit}, not the {requested} asked for: \
             every host must pass the same --permits; to change it for every host, run \
             `distlock limit {} --permits {requested}`",
            list::printable(key),
            shell_word(key)
        ),
        _ => eprintln!("distlock: {err}"),
    }
    if let LockError::PermissionDenied {
        needs: AclNeed::Keys | AclNeed::Channels,
        ..
    } = err
    {
        if let Some(prefix) = KEY_PREFIX.get() {
            eprintln!(
                "distlock: with key_prefix `{prefix}`, the user needs `~{prefix}*` (keys) and \
                 `&{prefix}*` (channels)"
            );
        }
    }
    match err {
        LockError::InvalidConfig { .. }
        | LockError::Unsupported { .. }
        | LockError::CountMismatch { .. }
        | LockError::WrongKind { .. }
        | LockError::InvalidPermits { .. }
        | LockError::HandOffUnsupported { .. }
        | LockError::InvalidKey { .. }
        | LockError::InvalidTtl { .. }
        | LockError::InvalidOwner { .. }
        | LockError::ClientNotCompiled { .. } => EXIT_CONFIG,
        LockError::NotAcquired { .. } => EXIT_NOT_ACQUIRED,
        LockError::LeaseLost { .. } | LockError::NotOwner { .. } | LockError::NotHeld { .. } => {
            EXIT_LEASE_LOST
        }
        _ => EXIT_UNAVAILABLE,
    }
}

/// Reports a failed acquire: a lock that stayed held as `conflict` says
/// (`-E`, `-q`), anything else as [`fail`] does.
fn fail_to_take(err: &LockError, conflict: Conflict) -> u8 {
    match err {
        LockError::NotAcquired { .. } => {
            if !conflict.quiet {
                eprintln!("distlock: {err}");
            }
            conflict.code
        }
        _ => fail(err),
    }
}

/// Lock name `name` as an argument to paste into a shell: as it is when
/// that is safe, else in single quotes (after `--key=` when it starts with
/// `-`, which would read as a flag), with control characters escaped so the
/// hint cannot drive the terminal.
fn shell_word(name: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.:/@%+=,".contains(c);
    let quoted = if !name.is_empty() && name.chars().all(plain) {
        name.to_owned()
    } else {
        format!("'{}'", list::printable(&name.replace('\'', "'\\''")))
    };
    if name.starts_with('-') {
        format!("--key={quoted}")
    } else {
        quoted
    }
}

/// What `run` and `acquire` take: a lock, a permit of a semaphore, or a
/// hold of a read-write lock, and how long they wait for it.
struct Take<'a> {
    key: &'a str,
    /// `-n` (a wait of zero), `--wait`, or (`None`) the config's
    /// `wait_timeout`.
    wait: Option<Duration>,
    permits: Option<Permits>,
    /// `-s` or `-x`: a hold of the read-write lock `key`.
    access: Option<distlock::state::Access>,
    /// Several `--key`s: one hold of them all (`key` is their names,
    /// joined by commas, for messages and DISTLOCK_KEY).
    members: Option<&'a [&'a str]>,
}

/// `--permits N --weight W`: a permit of weight W in a semaphore of N.
#[derive(Clone, Copy)]
struct Permits {
    limit: u32,
    weight: u32,
}

impl Permits {
    /// A semaphore when `--permits` or `--weight` is above 1; `--permits 1`
    /// (with or without `--weight 1`) is the lock.
    fn asked(permits: Option<u32>, weight: Option<u32>) -> Option<Self> {
        let limit = permits.unwrap_or(1);
        (limit > 1 || weight.is_some_and(|weight| weight > 1)).then(|| Permits {
            limit,
            weight: weight.unwrap_or(1),
        })
    }
}

/// Takes the lock, or a permit, as `what` says: its lease, and a permit's
/// slot.
async fn take(locks: &LockManager, what: &Take<'_>) -> Result<(LockGuard, Option<u32>), LockError> {
    let options = match what.wait {
        Some(wait) => distlock::AcquireOptions::new().with_wait(wait),
        None => distlock::AcquireOptions::new(),
    };
    if let Some(members) = what.members {
        let guard = locks.multi_lock(members)?.acquire_with(&options).await?;
        return Ok((guard, None));
    }
    match (what.permits, what.access) {
        (_, Some(access)) => {
            let lock = locks.rw_lock(what.key)?;
            let guard = match access {
                distlock::state::Access::Shared => lock.read_with(&options).await?.into(),
                distlock::state::Access::Exclusive => lock.write_with(&options).await?.into(),
            };
            Ok((guard, None))
        }
        (None, None) => Ok((locks.acquire_with(what.key, &options).await?, None)),
        (Some(permits), None) => {
            let semaphore = locks.semaphore(what.key, permits.limit)?;
            let permit = semaphore
                .acquire_many_with(permits.weight, &options)
                .await?;
            let slot = permit.slot();
            Ok((permit.into(), Some(slot)))
        }
    }
}

/// [`take`], unless SIGINT, SIGTERM or SIGHUP comes first: the wait is
/// then dropped (which releases whatever an attempt in flight may have been
/// granted, in the background, settled before exit) and the exit code is
/// 130.
async fn take_unless_interrupted(
    locks: &LockManager,
    what: &Take<'_>,
    interrupts: &mut Interrupts,
) -> Result<Result<(LockGuard, Option<u32>), LockError>, u8> {
    let key = what.key;
    tokio::select! {
        taken = take(locks, what) => Ok(taken),
        signal = interrupts.recv() => {
            eprintln!("distlock: interrupted ({signal}) while waiting for `{key}`; nothing is held");
            Err(EXIT_INTERRUPTED)
        }
    }
}

async fn run(
    locks: &LockManager,
    what: &Take<'_>,
    wait: &WaitArgs,
    grace: Duration,
    command: &[String],
) -> u8 {
    let key = what.key;
    // Taken over before the wait, so a signal while waiting or while the
    // command starts is acted on rather than killing distlock (and
    // orphaning the command, or a grant whose reply is still on its way).
    let mut interrupts = match Interrupts::new() {
        Ok(interrupts) => interrupts,
        Err(err) => {
            eprintln!("distlock: cannot handle signals: {err}");
            return EXIT_UNAVAILABLE;
        }
    };
    let (guard, slot) = match take_unless_interrupted(locks, what, &mut interrupts).await {
        Ok(Ok(taken)) => taken,
        Ok(Err(err)) => return fail_to_take(&err, wait.conflict()),
        Err(code) => return code,
    };
    let mut child = job(command);
    child
        .env("DISTLOCK_KEY", key)
        // Its own process group, so stopping it reaches everything it started.
        .process_group(0);
    if let Some(token) = guard.fencing_token() {
        child.env("DISTLOCK_FENCING_TOKEN", token.to_string());
    }
    if let Some(slot) = slot {
        child.env("DISTLOCK_PERMIT_SLOT", slot.to_string());
    }
    let mut child = match child.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!(
                "distlock: cannot run {}: {err}",
                child.as_std().get_program().to_string_lossy()
            );
            report_release(guard.release().await);
            return EXIT_CANNOT_RUN;
        }
    };
    // The group's id is the child's pid (the supervisor's, on Linux); kept
    // because `Child::id` forgets it once the child is reaped, while the rest
    // of the group may live on.
    let group = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .map(Pid::from_raw);
    tokio::select! {
        status = child.wait() => finish(guard, status).await,
        reason = guard.lost() => {
            eprintln!("distlock: the lock `{key}` was lost ({}); stopping the command", reason.map_or("released".to_owned(), |reason| reason.to_string()));
            stop(&mut child, group, grace).await;
            // Dropped, not released: a lease found gone sends nothing, and
            // one that ran out unrenewed (a frozen or unreachable server)
            // sends its ownership-checked release in the background, which
            // `dispatch` waits for at most LOST_RELEASE_WITHIN; the TTL
            // frees the key if it is still ours.
            drop(guard);
            EXIT_LEASE_LOST
        }
        signal = interrupts.recv() => {
            eprintln!("distlock: interrupted ({signal}); stopping the command and releasing `{key}`");
            stop(&mut child, group, grace).await;
            report_release(guard.release().await);
            EXIT_INTERRUPTED
        }
    }
}

/// Reports a release that did not end the lease cleanly.
fn report_release(released: Result<(), LockError>) {
    match released {
        Ok(()) => {}
        Err(err @ LockError::LeaseLost { .. }) => {
            eprintln!("distlock: {err}; the command may have overlapped with another holder");
        }
        Err(err) => eprintln!("distlock: release failed ({err}); the lock expires by its TTL"),
    }
}

/// The command ended: release, and exit with its code unless the lease ended early.
async fn finish(guard: LockGuard, status: std::io::Result<std::process::ExitStatus>) -> u8 {
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

/// Stops the command's process group: SIGTERM to every process in it, then,
/// after `grace`, SIGKILL to whatever is left. Returns once `child` (the
/// supervisor on Linux, else the command) is reaped and the group is empty or
/// has been sent SIGKILL. The supervisor outlives the SIGTERM and exits when
/// the command does, so the grace runs as if the command were the child.
///
/// A process that left the group (`setsid`, a daemon) is not reached.
async fn stop(child: &mut Child, group: Option<Pid>, grace: Duration) {
    let Some(group) = group else {
        let _ = child.kill().await;
        return;
    };
    // Saturated: the flag is bounded, but `stop` must never panic.
    let now = tokio::time::Instant::now();
    let deadline = now.checked_add(grace).unwrap_or(now + MAX_CLI_DURATION);
    let _ = killpg(group, Signal::SIGTERM);
    // Until the child is reaped, it counts as a member of the group.
    let _ = tokio::time::timeout_at(deadline, child.wait()).await;
    // Then whatever else it started.
    while group_alive(group) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Zombies included: harmless to them, and a member hidden from /proc is
    // not taken for gone.
    if killpg(group, None).is_ok() {
        let _ = killpg(group, Signal::SIGKILL);
    }
    // Cannot hang on a live command: it has had SIGKILL if it was still there.
    let _ = child.wait().await;
}

/// Whether a live process is left in `group`.
fn group_alive(group: Pid) -> bool {
    killpg(group, None).is_ok() && !only_zombies_in(group)
}

/// Whether every process in `group` has exited but waits to be reaped. An
/// orphan's new parent (an init that reaps late, or none in a container whose
/// first process is not an init) may leave it a zombie, which `kill` still
/// counts; waiting for it would use up the whole grace.
#[cfg(target_os = "linux")]
fn only_zombies_in(group: Pid) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    !entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces and `)`.
        let mut fields = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|pgrp| pgrp.parse::<i32>().ok());
        pgrp == Some(group.as_raw()) && !matches!(state, Some("Z" | "X"))
    })
}

/// Without /proc, every member counts.
#[cfg(not(target_os = "linux"))]
fn only_zombies_in(_group: Pid) -> bool {
    false
}

/// The process `run` starts for `command`. On Linux, a supervisor that runs
/// the command and takes its whole process group with it if distlock dies,
/// even by SIGKILL: the lease then stops being renewed, and the job must not
/// outlive it (`supervise.rs`).
#[cfg(target_os = "linux")]
fn job(command: &[String]) -> Command {
    supervise::command(command)
}

/// Elsewhere there is no parent-death signal: the command itself, which a
/// distlock killed with SIGKILL leaves running.
#[cfg(not(target_os = "linux"))]
fn job(command: &[String]) -> Command {
    let mut job = Command::new(&command[0]);
    job.args(&command[1..]);
    job
}

/// Runs the supervisor of `distlock run`'s command (`supervise.rs`).
#[cfg(target_os = "linux")]
fn supervise(parent: i32, command: &[String]) -> u8 {
    supervise::run(parent, command)
}

/// Only Linux has a supervisor; `run` never asks for one elsewhere.
#[cfg(not(target_os = "linux"))]
fn supervise(_parent: i32, _command: &[String]) -> u8 {
    eprintln!("distlock: `{SUPERVISE}` is internal to `distlock run` on Linux");
    EXIT_CONFIG
}

/// SIGINT (Ctrl-C), SIGTERM and SIGHUP, taken over from their default of
/// killing distlock, so each stops the command and releases the lock.
struct Interrupts {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Interrupts {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Interrupts {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// Completes with the signal's name when one arrives.
    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.hangup.recv() => "SIGHUP",
        }
    }
}

fn print_status(
    name: &str,
    strategy: &str,
    state: &LockState,
    leader: Option<&distlock::state::Leader>,
    json: bool,
) {
    let (held, remaining, token, holds, holder) = match state {
        LockState::Held {
            remaining,
            token,
            hold_count,
            holder,
            ..
        } => (true, *remaining, *token, *hold_count, holder.as_ref()),
        LockState::Free { last_token } => (false, None, *last_token, None, None),
        _ => (false, None, None, None, None),
    };
    if json {
        let value = serde_json::json!({
            "key": name,
            "strategy": strategy,
            "held": held,
            "remaining_ms": remaining.map(whole_millis),
            "fencing_token": token.map(|token| token.get()),
            "hold_count": holds,
            "holder": holder.map(holder_json),
            "leader": leader.map(|leader| serde_json::json!({
                "value": leader.value,
                "term": leader.term.get(),
            })),
        });
        println!("{value}");
        return;
    }
    // JSON escapes control characters itself; text shows them as `list` does.
    let name = list::printable(name);
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
        if let Some(holder) = holder {
            print!(", by {}", holder_text(holder));
        }
        if let Some(leader) = leader {
            print!(", leader {:?} in term {}", leader.value, leader.term);
        }
        println!(" (the owner token is a secret and is not shown)");
    } else {
        print!("{name}: free");
        if let Some(token) = token {
            print!(", last fencing token {token}");
        }
        println!();
    }
}

/// `status` of a semaphore: its limit, the weight in use and each live
/// permit (slot, weight, lease left, token), as text or JSON.
fn print_semaphore(name: &str, state: &distlock::state::SemaphoreState, json: bool) {
    let millis = whole_millis;
    if json {
        let permits: Vec<serde_json::Value> = state
            .permits
            .iter()
            .map(|permit| {
                serde_json::json!({
                    "slot": permit.slot,
                    "weight": permit.weight,
                    "remaining_ms": millis(permit.remaining),
                    "fencing_token": permit.fencing_token.get(),
                })
            })
            .collect();
        let value = serde_json::json!({
            "key": name,
            "semaphore": true,
            "limit": state.limit,
            "used": state.used,
            "held": state.used > 0,
            "permits": permits,
        });
        println!("{value}");
        return;
    }
    let limit = state
        .limit
        .map_or("?".to_owned(), |limit| limit.to_string());
    println!(
        "{}: semaphore, {} of {limit} permits in use",
        list::printable(name),
        state.used
    );
    for permit in &state.permits {
        println!(
            "  slot {}: weight {}, {} left, fencing token {}",
            permit.slot,
            permit.weight,
            humantime::format_duration(Duration::from_millis(millis(permit.remaining))),
            permit.fencing_token
        );
    }
}

/// `status` of a read-write lock: its epoch, waiting writers and each live
/// hold (mode, lease left, token), as text or JSON.
fn print_rw_lock(name: &str, state: &distlock::state::RwLockState, json: bool) {
    let millis = whole_millis;
    if json {
        let holds: Vec<serde_json::Value> = state
            .holds
            .iter()
            .map(|hold| {
                serde_json::json!({
                    "access": hold.access.as_str(),
                    "remaining_ms": millis(hold.remaining),
                    "fencing_token": hold.fencing_token.get(),
                })
            })
            .collect();
        let value = serde_json::json!({
            "key": name,
            "rw_lock": true,
            "held": state.is_held(),
            "epoch": state.epoch.get(),
            "writers": state.writers().count(),
            "readers": state.readers().count(),
            "waiting_writers": state.waiting_writers,
            "holds": holds,
        });
        println!("{value}");
        return;
    }
    println!(
        "{}: read-write lock, {} writer(s), {} reader(s), {} writer(s) waiting; write epoch {}",
        list::printable(name),
        state.writers().count(),
        state.readers().count(),
        state.waiting_writers,
        state.epoch
    );
    for hold in &state.holds {
        println!(
            "  {}: {} left, fencing token {}",
            hold.access.as_str(),
            humantime::format_duration(Duration::from_millis(millis(hold.remaining))),
            hold.fencing_token
        );
    }
}

/// Holder information as JSON: host, pid, the grant's time (RFC 3339, by the
/// server's clock) and the label.
fn holder_json(holder: &HolderInfo) -> serde_json::Value {
    serde_json::json!({
        "host": holder.host,
        "pid": holder.pid,
        "acquired_at": server_time(holder.acquired_at),
        "label": holder.label,
    })
}

/// Holder information for a line of text: `pid 42 on host-a ("nightly")
/// since 2026-01-01T00:00:00.000000Z`.
fn holder_text(holder: &HolderInfo) -> String {
    let label = holder
        .label
        .as_ref()
        .map(|label| format!(" ({label:?})"))
        .unwrap_or_default();
    // Anyone who may write the lock's keys chooses the host text: escape
    // control characters, so it cannot drive the operator's terminal.
    let host: String = holder.host.escape_debug().collect();
    format!(
        "pid {} on {host}{label} since {}",
        holder.pid,
        server_time(holder.acquired_at)
    )
}

/// A time from holder information, which anyone who may write the lock's
/// keys chooses: RFC 3339 (`2026-01-01T00:00:00.000000Z`) where it has one
/// (years 1970 to 9999), else the raw count it was written as.
fn server_time(time: std::time::SystemTime) -> String {
    // 9999-12-31T23:59:59.999999Z, the last instant RFC 3339 can write.
    const LAST: Duration = Duration::from_micros(253_402_300_799_999_999);
    match time.duration_since(std::time::UNIX_EPOCH) {
        Ok(since) if since <= LAST => humantime::format_rfc3339_micros(time).to_string(),
        Ok(since) => format!("{} µs after 1970 (past year 9999)", since.as_micros()),
        Err(_) => "before 1970".to_owned(),
    }
}
