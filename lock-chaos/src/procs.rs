//! What the fault injector needs to know about processes on Linux, read from
//! `/proc`: who is whose child (to find the `distlock run` that holds the
//! lock), whether a process is gone (to bound a killed job's section), and a
//! process's threads with their scheduling policy (to starve a worker of CPU).

use std::io;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// A process's parent and state, from `/proc/<pid>/stat`; `None` if there is
/// no such process (or it vanished while being read).
fn stat(pid: u32) -> Option<(u32, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may hold spaces and `)`.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((parent, state))
}

/// The pids of `parent`'s live children, in no particular order.
pub fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| matches!(stat(*pid), Some((ppid, state)) if ppid == parent && !dead(state)))
        .collect()
}

/// Whether `pid` has exited: no such process, or a zombie waiting to be
/// reaped (an orphan whose new parent reaps late is one for a while, and it
/// runs no more code).
pub fn is_gone(pid: u32) -> bool {
    stat(pid).is_none_or(|(_, state)| dead(state))
}

fn dead(state: char) -> bool {
    matches!(state, 'Z' | 'X' | 'x')
}

/// The thread ids of process `pid`, from `/proc/<pid>/task`; empty if it is
/// gone.
pub fn threads_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

/// The first CPU that thread (or process) `tid` may run on, and the whole set
/// it may run on, to restore later.
pub fn first_cpu(tid: u32) -> io::Result<(usize, CpuSet)> {
    let allowed = sched_getaffinity(pid(tid)?)?;
    (0..CpuSet::count())
        .find(|cpu| allowed.is_set(*cpu).unwrap_or(false))
        .map(|cpu| (cpu, allowed))
        .ok_or_else(|| io::Error::other("no CPU in the affinity mask"))
}

/// Lets thread (or process) `tid` run only on the CPUs in `cpus`.
pub fn set_cpus(tid: u32, cpus: &CpuSet) -> io::Result<()> {
    Ok(sched_setaffinity(pid(tid)?, cpus)?)
}

/// Lets thread (or process) `tid` run only on `cpu`.
pub fn pin_to(tid: u32, cpu: usize) -> io::Result<()> {
    let mut only = CpuSet::new();
    only.set(cpu)?;
    set_cpus(tid, &only)
}

/// Puts thread `tid` in the `SCHED_IDLE` class (`idle`), which runs only when
/// nothing else wants its CPU, or back in the normal `SCHED_OTHER` class.
/// Lowering a thread to `SCHED_IDLE` needs no privilege; raising it back does
/// on some kernels, unless the caller is root or the thread's owner within
/// `RLIMIT_NICE`.
#[allow(unsafe_code)]
pub fn set_idle(tid: u32, idle: bool) -> io::Result<()> {
    let tid = libc::pid_t::try_from(tid).map_err(io::Error::other)?;
    let policy = if idle {
        libc::SCHED_IDLE
    } else {
        libc::SCHED_OTHER
    };
    // Both classes take priority 0.
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler` reads the `sched_param` behind the pointer
    // and nothing else; it points to a live, initialised local for the whole
    // call. A wrong tid or policy is reported through errno, not undefined
    // behaviour.
    let result = unsafe { libc::sched_setscheduler(tid, policy, &param) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn pid(tid: u32) -> io::Result<Pid> {
    Ok(Pid::from_raw(i32::try_from(tid).map_err(io::Error::other)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_a_live_child_of_its_parent_with_threads() {
        let me = std::process::id();
        let parent = nix::unistd::getppid().as_raw().unsigned_abs();
        assert!(
            children_of(parent).contains(&me),
            "not among its parent's children"
        );
        assert!(!is_gone(me), "a running process reads as gone");
        assert!(
            threads_of(me).contains(&me),
            "the main thread's tid is the pid"
        );
        assert!(is_gone(u32::MAX), "no process has pid u32::MAX");
    }

    #[test]
    fn a_thread_goes_idle_and_back() {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw().unsigned_abs()).ok();
            std::thread::park();
        });
        let tid = rx.recv().expect("the thread's tid");
        let policy = || {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
                .expect("the thread's stat");
            // The 41st field of stat is the policy; field 2 (comm) ends at ')'.
            let after_comm = stat.rsplit_once(')').expect("comm").1;
            after_comm.split_whitespace().nth(38).map(str::to_owned)
        };
        set_idle(tid, true).expect("SCHED_IDLE");
        assert_eq!(policy().as_deref(), Some("5"), "SCHED_IDLE is policy 5");
        let restored = set_idle(tid, false);
        thread.thread().unpark();
        thread.join().expect("the thread");
        // Raising a thread out of SCHED_IDLE may need privilege (see
        // `set_idle`); the harness runs as root where it starves a worker.
        match restored {
            Ok(()) => {}
            Err(err) if !nix::unistd::geteuid().is_root() => {
                assert_eq!(
                    err.raw_os_error(),
                    Some(libc::EPERM),
                    "unexpected error {err}"
                );
            }
            Err(err) => panic!("root could not restore SCHED_OTHER: {err}"),
        }
    }
}
