//! The supervisor `distlock run` puts between itself and the command on
//! Linux, so that a distlock killed with SIGKILL, or by the OOM killer, takes
//! the command's whole process group with it instead of leaving it to run
//! unprotected once the lease expires.
//!
//! The kernel's parent-death signal (`PR_SET_PDEATHSIG`) reaches one process,
//! the child of the one that died, and is not inherited across `fork`. Set on
//! the command, it kills the command but orphans whatever the command started
//! (`sh -c 'worker & worker; wait'`). So `distlock run` starts its own binary
//! again in a hidden mode, `distlock __supervise --parent PID -- CMD...`, as
//! the leader of a new process group and with SIGTERM as its parent-death
//! signal; the supervisor starts CMD in that group and waits for it:
//!
//! - CMD exits: the supervisor exits with CMD's code, or with 128 + n if
//!   signal n killed it, which is the code `distlock run` reports either way.
//! - distlock dies: the supervisor gets SIGTERM, finds that its parent is no
//!   longer distlock, and sends SIGKILL to its own group, itself included.
//! - A signal sent to the group while distlock lives (distlock's SIGTERM when
//!   the lease is lost or it is interrupted, or anyone's `kill -- -PGID`):
//!   CMD gets it too and decides what to do; the supervisor does not die of it
//!   and keeps waiting, so distlock still reports CMD's status, and its grace
//!   period runs exactly as without a supervisor.
//!
//! CMD gets SIGKILL as its own parent-death signal, from the supervisor, as it
//! got it from distlock before there was a supervisor: a supervisor killed on
//! its own does not leave CMD running.
//!
//! Still out of reach: processes that leave the group (`setsid`, daemons that
//! detach). A supervisor killed on its own (`kill -9` on its pid) takes CMD
//! with it but not what CMD started, and distlock, which sees its child end,
//! releases the lock as when CMD exits by itself. Real-time signals, which
//! nix cannot name, are left at their default: one sent to the group kills
//! the supervisor, and with it CMD, which distlock reports as 128 + n.

use std::os::unix::process::CommandExt as _;

use nix::errno::Errno;
use nix::sys::signal::{killpg, SigSet, Signal};
use nix::unistd::{getpgrp, getpid, getppid, Pid};
use tokio::process::Command;

use super::{exit_code_of, EXIT_CANNOT_RUN, EXIT_CONFIG, EXIT_UNAVAILABLE, SUPERVISE};

/// The process `distlock run` starts for `command`: this binary as its
/// supervisor, with SIGTERM as the parent-death signal. The caller adds the
/// environment and puts it in a process group of its own, which the
/// supervisor checks.
pub(crate) fn command(command: &[String]) -> Command {
    // The running binary, even if its file was replaced or removed since
    // distlock started (an upgrade): `current_exe` would name the new file,
    // which may not have this version's hidden mode.
    let mut supervisor = Command::new("/proc/self/exe");
    supervisor
        .arg0("distlock")
        .arg(SUPERVISE)
        .arg("--parent")
        .arg(getpid().to_string())
        .arg("--")
        .args(command);
    // SAFETY: the hook runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed; it makes system calls only, and
    // neither allocates nor takes a lock.
    #[allow(unsafe_code)]
    unsafe {
        supervisor.pre_exec(die_with_parent(Signal::SIGTERM));
    }
    supervisor
}

/// The supervisor's body: starts `command` in the current process group and
/// returns the exit code to leave with, unless distlock (`parent`) dies first,
/// in which case the whole group, the supervisor included, gets SIGKILL.
pub(crate) fn run(parent: i32, command: &[String]) -> u8 {
    let parent = Pid::from_raw(parent);
    // Killing its group is what this process is for; started by hand from a
    // shell, that group would be the shell's.
    if getpgrp() != getpid() {
        eprintln!("distlock: `{SUPERVISE}` is internal to `distlock run`");
        return EXIT_CONFIG;
    }
    let signals = watched();
    // Blocked, they wait for `sigwait` instead of killing the supervisor.
    // Until this point, the parent-death signal kills it, which is right:
    // nothing has been started yet.
    if let Err(err) = signals.thread_block() {
        eprintln!("distlock: cannot block signals: {err}");
        return EXIT_UNAVAILABLE;
    }
    // distlock died after the exec; its SIGTERM is pending, and there is no
    // one left to run the command for.
    if getppid() != parent {
        return EXIT_UNAVAILABLE;
    }
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    let mut die_with_parent = die_with_parent(Signal::SIGKILL);
    // SAFETY: as in `command`; `pthread_sigmask` is async-signal-safe too.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            // The mask is inherited across exec; the command gets a clean one.
            signals.thread_unblock().map_err(std::io::Error::from)?;
            die_with_parent()
        });
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!("distlock: cannot run {}: {err}", command[0]);
            return EXIT_CANNOT_RUN;
        }
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return exit_code_of(status),
            Ok(None) => {}
            Err(err) => {
                // Nothing can tell any more when the command ends, so it must
                // not outlive the supervisor.
                eprintln!("distlock: lost track of the command: {err}");
                let _ = killpg(getpgrp(), Signal::SIGKILL);
                return EXIT_UNAVAILABLE;
            }
        }
        match signals.wait() {
            // The command may have ended.
            Ok(Signal::SIGCHLD) => {}
            // Any other signal may be the parent-death one. If distlock still
            // lives, the signal went to the group (or to the supervisor
            // alone) and the command answers it as it sees fit.
            Ok(_) => {
                if getppid() != parent {
                    let _ = killpg(getpgrp(), Signal::SIGKILL);
                }
            }
            Err(err) => {
                // Cannot happen with a valid set; the command's status is still
                // worth reporting.
                eprintln!("distlock: cannot wait for signals: {err}");
                return child.wait().map_or(EXIT_UNAVAILABLE, exit_code_of);
            }
        }
    }
}

/// A `pre_exec` hook that has the kernel send the new process `signal` when
/// the thread that forks it ends, even by SIGKILL, which no handler sees.
/// The spawn fails if the parent died before the hook ran: the child has then
/// been re-parented, and no signal will ever come.
///
/// The kernel sends the signal when the *thread* that forked the child ends:
/// `distlock run` spawns from the thread in `block_on`, the main thread, which
/// lives as long as the process; the supervisor has no other thread.
fn die_with_parent(signal: Signal) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    let parent = getpid();
    move || {
        nix::sys::prctl::set_pdeathsig(signal).map_err(std::io::Error::from)?;
        if getppid() != parent {
            return Err(std::io::Error::from(Errno::ESRCH));
        }
        Ok(())
    }
}

/// The signals the supervisor takes with `sigwait` instead of dying of them:
/// SIGCHLD, and every asynchronous signal whose default action kills. Left at
/// their defaults: the signals a fault raises (the supervisor should die of
/// its own faults), job control (it stops and continues with its group), and
/// real-time signals, which nix cannot name.
fn watched() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [
        Signal::SIGCHLD,
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGABRT,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGPIPE,
        Signal::SIGALRM,
        Signal::SIGTERM,
        Signal::SIGXCPU,
        Signal::SIGXFSZ,
        Signal::SIGVTALRM,
        Signal::SIGPROF,
        Signal::SIGIO,
        Signal::SIGPWR,
    ] {
        set.add(signal);
    }
    set
}
