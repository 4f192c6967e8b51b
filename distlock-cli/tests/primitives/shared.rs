//! `distlock run -s` and `-x` with the real binary on a real server, on
//! both clients: `-s` jobs (`sh -c` with a child of their own) run beside
//! each other, an `-x` job or a plain run beside none; a waiting `-x` job
//! keeps new `-s` jobs out; `status` and `list` show a read-write lock's
//! holds; `-s` with `--permits` exits 78.

use std::process::Child;
use std::time::{Duration, Instant};

use lock_testkit::RedisServer;

use super::{code, each_client, spawn, stderr};
use crate::common::output;

file_helpers!(group: "shared", ttl: "5s", job_secs: 30);

/// Waits up to 10 s until `status --json NAME` says `what`.
fn until_status(server: &RedisServer, client: &str, name: &str, what: &str) -> String {
    let started = Instant::now();
    loop {
        let out = output(on(server, client, &["status", "--json", name]));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.contains(what) {
            return text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{client}: status never said {what}: {text} {}",
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Shared, exclusive and plain jobs on one name: by their own log, an
/// exclusive or plain job never runs beside another job, shared jobs do
/// overlap, and every job saw a token (a write's, or a read's epoch).
#[test]
fn shared_jobs_overlap_and_exclusive_ones_run_alone() {
    each_client(|server, client| {
        let log = scratch(&format!("log-{client}"));
        let job = format!(
            "echo \"+ $DISTLOCK_MODE $DISTLOCK_FENCING_TOKEN\" >> {log}; \
             sleep 0.3 & wait; \
             echo \"- $DISTLOCK_MODE\" >> {log}",
            log = log.path()
        );
        let modes = ["s", "s", "x", "s", "plain", "s", "x"];
        let jobs: Vec<Child> = modes
            .iter()
            .map(|mode| {
                let flag = format!("-{mode}");
                let mut args = vec!["run", "-w", "20"];
                if *mode != "plain" {
                    args.push(&flag);
                }
                args.extend(["report", "-c", &job]);
                let mut command = on(server, client, &args);
                command.env("DISTLOCK_MODE", mode);
                spawn(&mut command)
            })
            .collect();
        for job in jobs {
            let (code, err) = finish(job);
            assert_eq!(code, 0, "{client}: {err}");
        }
        let text = std::fs::read_to_string(log.path()).expect("the log");
        let (mut shared, mut alone, mut most_shared) = (0u32, 0u32, 0u32);
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let exclusive = fields[1] != "s";
            if fields[0] == "+" {
                assert_eq!(fields.len(), 3, "{client}: no token in {line:?}");
                assert_eq!(alone, 0, "{client}: a job beside an exclusive one:\n{text}");
                if exclusive {
                    assert_eq!(
                        shared, 0,
                        "{client}: an exclusive job beside shared:\n{text}"
                    );
                    alone += 1;
                } else {
                    shared += 1;
                    most_shared = most_shared.max(shared);
                }
            } else if exclusive {
                alone -= 1;
            } else {
                shared -= 1;
            }
        }
        assert_eq!(text.lines().count(), 2 * modes.len(), "{client}: {text}");
        assert!(
            most_shared >= 2,
            "{client}: shared jobs never overlapped:\n{text}"
        );
    });
}

/// An `-x` job waiting for a running `-s` job keeps a new `-s` job out
/// (`-n -q -E 0` skips it silently), runs once the reader is done, and
/// `status` and `list` show the holds meanwhile.
#[test]
fn a_waiting_exclusive_job_keeps_new_shared_jobs_out() {
    each_client(|server, client| {
        let name = format!("reload-{client}");
        let reader = spawn(&mut on(
            server,
            client,
            &["run", "-s", &name, "-c", "sleep 1.5 & wait"],
        ));
        until_status(server, client, &name, "\"readers\":1");
        let listed = output(on(server, client, &["list"]));
        let table = String::from_utf8_lossy(&listed.stdout).into_owned();
        assert!(table.contains("1 read"), "{client}: {table}");
        let ran = scratch(&format!("writer-{client}"));
        let writer = spawn(&mut on(
            server,
            client,
            &[
                "run",
                "-x",
                "-w",
                "20",
                &name,
                "-c",
                &format!("echo $DISTLOCK_FENCING_TOKEN > {}", ran.path()),
            ],
        ));
        until_status(server, client, &name, "\"waiting_writers\":1");
        super::assert_skipped_silently(
            |args| output(on(server, client, args)),
            &scratch(&format!("skipped-{client}")),
            &["-s", &name],
            client,
            "a reader passed a waiting writer",
        );
        for job in [reader, writer] {
            let (code, err) = finish(job);
            assert_eq!(code, 0, "{client}: {err}");
        }
        assert_eq!(ran.lines(), ["1"], "{client}: the writer's token");
        let text = output(on(server, client, &["status", &name]));
        assert_eq!(code(&text), 0);
        let text = String::from_utf8_lossy(&text.stdout).into_owned();
        assert!(text.contains("free"), "{client}: {text}");
    });
}

/// `-s` and `-x` take no `--permits`, nor each other: 78 before anything
/// runs.
#[test]
fn shared_with_permits_is_refused() {
    each_client(|server, client| {
        for args in [
            &["run", "-s", "--permits", "3", "both", "-c", "echo ran"][..],
            &["run", "-x", "--permits", "3", "both", "-c", "echo ran"],
            &["run", "-x", "-s", "both", "-c", "echo ran"],
        ] {
            let out = output(on(server, client, args));
            assert_eq!(code(&out), 78, "{client} {args:?}: {}", stderr(&out));
            assert!(out.stdout.is_empty(), "{client}: a refused job ran");
        }
    });
}
