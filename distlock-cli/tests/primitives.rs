//! `distlock run --permits`, `run -s`/`-x`, `run --key A --key B`,
//! `distlock elect`, `distlock latch` and `distlock barrier` with the real
//! binary, in one test
//! binary (each binary links the whole stack, so fewer of them
//! keep the suite within its time).

#![cfg(any(feature = "redis", feature = "fred"))]

mod common;

/// The helpers every file below has, with that file's numbers: `on`, the
/// command with the file's TTL; `finish`, waiting as long as the file's
/// jobs may take; `scratch`, a scratch file named for the file.
macro_rules! file_helpers {
    (group: $group:literal, ttl: $ttl:literal, job_secs: $secs:literal) => {
        #[doc = concat!("`distlock args...` on `server` through `client`, with a ", $ttl, " TTL.")]
        fn on(
            server: &lock_testkit::RedisServer,
            client: &str,
            args: &[&str],
        ) -> std::process::Command {
            super::on_with_ttl(server, client, $ttl, args)
        }

        #[doc = concat!("Waits up to ", $secs, " s for `child`; its exit code and stderr.")]
        fn finish(child: std::process::Child) -> (i32, String) {
            super::finish_within(child, std::time::Duration::from_secs($secs))
        }

        /// A scratch file of this file's tests.
        fn scratch(name: &str) -> super::Scratch {
            super::Scratch::new($group, name)
        }
    };
}

#[path = "primitives/barrier.rs"]
mod barrier;
#[path = "primitives/elect.rs"]
mod elect;
#[path = "primitives/latch.rs"]
mod latch;
#[path = "primitives/multi.rs"]
mod multi;
#[path = "primitives/permits.rs"]
mod permits;
#[path = "primitives/shared.rs"]
mod shared;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use lock_testkit::RedisServer;

/// `distlock args...` on `server` through `client`, with a lease of `ttl`
/// (`DISTLOCK_TTL`).
fn on_with_ttl(
    server: &RedisServer,
    client: &str,
    ttl: &str,
    args: &[&str],
) -> std::process::Command {
    common::distlock(
        &[
            ("DISTLOCK_NODES", server.url().expose().to_owned()),
            ("DISTLOCK_CLIENT", client.to_owned()),
            ("DISTLOCK_TTL", ttl.to_owned()),
        ],
        args,
    )
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A scratch file for one test, removed on drop: `distlock-<group>-<name>-<pid>`.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(group: &str, name: &str) -> Self {
        Scratch(
            std::env::temp_dir().join(format!("distlock-{group}-{name}-{}", std::process::id())),
        )
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.0)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Waits up to `within` for `child`; its exit code and stderr.
fn finish_within(mut child: Child, within: Duration) -> (i32, String) {
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            let out = child.wait_with_output().expect("output");
            return (code(&out), stderr(&out));
        }
        assert!(started.elapsed() < within, "a job never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Spawns `command` as a background job: its stdout dropped, its stderr
/// kept for `finish`.
fn spawn(command: &mut Command) -> Child {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a job")
}

/// Polls `done` every 20 ms until it says yes, for at most 10 s; `what`
/// says what a timeout means.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `run -n -q -E 0 <names>... -c 'echo ran > <ran>'` through `run`, as
/// cron would beside a holder, and asserts the job was skipped silently:
/// exit 0, nothing on stderr, nothing in `ran`. `client` leads each
/// failure; `ran_means` says what a run would mean.
fn assert_skipped_silently(
    run: impl FnOnce(&[&str]) -> Output,
    ran: &Scratch,
    names: &[&str],
    client: &str,
    ran_means: &str,
) {
    let job = format!("echo ran > {}", ran.path());
    let mut args = vec!["run", "-n", "-q", "-E", "0"];
    args.extend_from_slice(names);
    args.extend(["-c", &job]);
    let skipped = run(&args);
    assert_eq!(code(&skipped), 0, "{client}: {}", stderr(&skipped));
    assert!(
        stderr(&skipped).is_empty(),
        "{client}: {}",
        stderr(&skipped)
    );
    assert!(ran.lines().is_empty(), "{client}: {ran_means}");
}

/// The row of `name` in `list --json`'s output `out`.
fn listed(out: &Output, name: &str, client: &str) -> serde_json::Value {
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    rows.as_array()
        .and_then(|rows| rows.iter().find(|row| row["key"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("{client}: not listed: {rows}"))
}

/// Runs `check` with each client compiled in, on one server started for
/// them all (each check names its locks after the client).
fn each_client(mut check: impl FnMut(&RedisServer, &str)) {
    let server = RedisServer::start().expect("start");
    for client in common::clients() {
        check(&server, client);
    }
}
