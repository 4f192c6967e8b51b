//! `distlock run --permits`, `run -s`/`-x`, `run --key A --key B` and
//! `distlock elect` with the real binary, in
//! one test binary (each binary links the whole stack, so fewer of them
//! keep the suite within its time).

#![cfg(any(feature = "redis", feature = "fred"))]

mod common;

#[path = "primitives/elect.rs"]
mod elect;
#[path = "primitives/multi.rs"]
mod multi;
#[path = "primitives/permits.rs"]
mod permits;
#[path = "primitives/shared.rs"]
mod shared;

use std::process::{Child, Output};
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
