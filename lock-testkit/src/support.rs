//! Small helpers shared by the topologies: bounded waits, `INFO` fields,
//! and child processes run under a time limit.

use std::io::{self, Read};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Calls `probe` every 50 ms until it returns `Ok`, or fails with
/// [`io::ErrorKind::TimedOut`] after `timeout`, naming `what` and the last
/// reason `probe` gave for not being done.
pub(crate) fn wait_until<T>(
    timeout: Duration,
    what: &str,
    mut probe: impl FnMut() -> Result<T, String>,
) -> io::Result<T> {
    let started = Instant::now();
    loop {
        match probe() {
            Ok(value) => return Ok(value),
            Err(reason) if started.elapsed() >= timeout => {
                return Err(timed_out(format!(
                    "{what} did not happen within {timeout:?}; last seen: {reason}"
                )));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// A temporary directory named `lock-testkit-<what>-...`, removed when
/// dropped.
pub(crate) fn temp_dir(what: &str) -> io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("lock-testkit-{what}-"))
        .tempdir()
        .map_err(|err| io::Error::new(err.kind(), format!("a directory for the {what}: {err}")))
}

/// Kills `child` and reaps it: a child past its time.
pub(crate) fn kill_and_reap(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// An [`io::ErrorKind::TimedOut`] error saying `what`.
pub(crate) fn timed_out(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what)
}

/// The value of `field` in the text of an `INFO` reply (`field:value` lines).
pub(crate) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

/// Runs `command` to completion, killing it if it runs past `timeout`, and
/// returns its output (stdout and stderr are captured).
pub(crate) fn run_with_timeout(command: &mut Command, timeout: Duration) -> io::Result<Output> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Readers on threads of their own, so a chatty child cannot fill a pipe
    // and block while we wait for it.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as _));
    let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as _));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > timeout {
            kill_and_reap(&mut child);
            return Err(timed_out(format!("{command:?} ran past {timeout:?}")));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}
