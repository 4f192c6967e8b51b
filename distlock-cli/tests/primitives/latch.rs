//! `distlock latch` with the real binary on a real server, on both
//! clients: `sh -c` jobs that start once a latch opens and not before
//! (waiting on a latch not set yet, with `DISTLOCK_LOG` set), count-downs
//! that count once per `--id`, the count set once (another exits 78),
//! `--wait -n`/`-w`/`-q` exiting 75, `status` and `list` showing the
//! latch, and bad arguments exiting 78.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{code, each_client, listed, stderr, Scratch};
use crate::common::{assert_stderr_says, output, DISTLOCK};

file_helpers!(group: "latch", ttl: "5s", job_secs: 20);

/// What `out` printed on stdout, trimmed.
fn printed(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A shell job, as a user's script runs it: waits for the latch `name`,
/// then appends `go` to `log` from a child of its own.
fn job_after(
    server: &lock_testkit::RedisServer,
    client: &str,
    name: &str,
    log: &Scratch,
) -> Command {
    let mut job = Command::new("/bin/sh");
    job.arg("-c")
        .arg(format!(
            "\"$D\" latch {name} --wait -w 20s && (sh -c 'echo go >> {log}')",
            log = log.path()
        ))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("D", DISTLOCK)
        .env("DISTLOCK_NODES", server.url().expose())
        .env("DISTLOCK_CLIENT", client)
        .env("DISTLOCK_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    job
}

/// Two `sh -c` jobs wait behind a latch that no host has set yet; the
/// count is set (again by a second host with the same count, and refused
/// with another), counted down with ids (a retry counting nothing), and
/// the jobs start once the last count-down opens it, not before.
#[test]
fn jobs_start_when_the_latch_opens() {
    each_client(|server, client| {
        let name = format!("drained-{client}");
        let log = scratch(&format!("log-{client}"));
        let jobs: Vec<_> = (0..2)
            .map(|_| {
                job_after(server, client, &name, &log)
                    .spawn()
                    .expect("spawn a job")
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            log.lines().is_empty(),
            "{client}: a job started before any count"
        );
        let set = output(on(server, client, &["latch", &name, "--count", "3"]));
        assert_eq!(
            (code(&set), printed(&set).as_str()),
            (0, "3"),
            "{client}: {}",
            stderr(&set)
        );
        let again = output(on(server, client, &["latch", &name, "--count", "3"]));
        assert_eq!(code(&again), 0, "{client}: {}", stderr(&again));
        assert_stderr_says(&again, "set to 3 already", client);
        let other = output(on(server, client, &["latch", &name, "--count", "4"]));
        assert_eq!(code(&other), 78, "{client}: {}", stderr(&other));
        assert_stderr_says(&other, "latch count of 3, not the 4", client);
        for (args, left) in [
            (&["--down", "--id", "host-a"][..], "2"),
            (&["--down", "--id", "host-a"][..], "2"),
            (&["--down"][..], "1"),
        ] {
            let mut all = vec!["latch", name.as_str()];
            all.extend_from_slice(args);
            let down = output(on(server, client, &all));
            assert_eq!(
                (code(&down), printed(&down).as_str()),
                (0, left),
                "{client} {args:?}: {}",
                stderr(&down)
            );
        }
        std::thread::sleep(Duration::from_millis(1_200));
        assert!(log.lines().is_empty(), "{client}: a job started above zero");
        let status = output(on(server, client, &["status", &name, "--json"]));
        let state: serde_json::Value = serde_json::from_slice(&status.stdout).expect("JSON");
        assert_eq!(
            (
                state["latch"].as_bool(),
                state["count"].as_u64(),
                state["initial"].as_u64()
            ),
            (Some(true), Some(1), Some(3)),
            "{client}: {state}"
        );
        let opened = Instant::now();
        let down = output(on(
            server,
            client,
            &["latch", &name, "--down", "--id", "host-b"],
        ));
        assert_eq!(printed(&down), "0", "{client}: {}", stderr(&down));
        for job in jobs {
            let (code, err) = finish(job);
            assert_eq!(code, 0, "{client}: {err}");
            assert!(
                err.contains("the latch is shut; waiting"),
                "{client}: DISTLOCK_LOG=debug logged nothing: {err}"
            );
        }
        assert!(
            opened.elapsed() < Duration::from_secs(5),
            "{client}: the jobs started late"
        );
        assert_eq!(log.lines(), ["go", "go"], "{client}");
        let listing = output(on(server, client, &["list", "--json", "--prefix", &name]));
        let row = listed(&listing, &name, client);
        assert_eq!(row["latch"]["count"], 0, "{client}: {row}");
        let text = output(on(server, client, &["status", &name]));
        assert!(
            printed(&text).contains("latch, open"),
            "{client}: {}",
            printed(&text)
        );
    });
}

/// `--wait -n` exits 75 unless the latch is open now, `-w` 75 when it does
/// not open in time (silently with `-q`), 0 once it is open; `--down`
/// before any count exits 78 and counts nothing.
#[test]
fn waits_that_run_out_exit_75() {
    each_client(|server, client| {
        let name = format!("exports-{client}");
        let unset = output(on(server, client, &["latch", &name, "--down"]));
        assert_eq!(code(&unset), 78, "{client}: {}", stderr(&unset));
        assert_stderr_says(&unset, "no count set", client);
        let now = output(on(server, client, &["latch", &name, "--wait", "-n"]));
        assert_eq!(code(&now), 75, "{client}: {}", stderr(&now));
        assert_eq!(
            code(&output(on(
                server,
                client,
                &["latch", &name, "--count", "1"]
            ))),
            0
        );
        let started = Instant::now();
        let late = output(on(server, client, &["latch", &name, "--wait", "-w", "0.3"]));
        assert_eq!(code(&late), 75, "{client}: {}", stderr(&late));
        assert_stderr_says(&late, "did not open within", client);
        assert!(started.elapsed() < Duration::from_secs(5), "{client}");
        let quiet = output(on(
            server,
            client,
            &["latch", &name, "--wait", "-w", "0.3", "-q"],
        ));
        assert_eq!(
            (code(&quiet), stderr(&quiet).as_str()),
            (75, ""),
            "{client}"
        );
        assert_eq!(
            printed(&output(on(server, client, &["latch", &name, "--down"]))),
            "0"
        );
        for args in [&["--wait", "-n"][..], &["--wait", "-w", "1"][..]] {
            let mut all = vec!["latch", name.as_str()];
            all.extend_from_slice(args);
            let open = output(on(server, client, &all));
            assert_eq!(code(&open), 0, "{client} {args:?}: {}", stderr(&open));
        }
    });
}

/// Bad arguments exit 78 and touch nothing.
#[test]
fn bad_arguments_exit_78() {
    each_client(|server, client| {
        let name = format!("args-{client}");
        for args in [
            &["latch", &name][..],
            &["latch", &name, "--count", "-1"],
            &["latch", &name, "--count", "1000000000"],
            &["latch", &name, "--count", "2", "--down"],
            &["latch", &name, "--down", "--wait"],
            &["latch", &name, "--id", "a"],
            &["latch", &name, "--wait", "-n", "-w", "1"],
            &["latch", &name, "--count", "2", "--ttl", "0"],
            &["latch", &name, "--down", "--id", ""],
        ] {
            let out = output(on(server, client, args));
            assert_eq!(code(&out), 78, "{client} {args:?}: {}", stderr(&out));
        }
        let status = output(on(server, client, &["status", &name, "-q"]));
        assert_eq!(code(&status), 1, "{client}: something was written");
    });
}
