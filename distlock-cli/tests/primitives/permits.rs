//! `distlock run --permits N [--weight W]` with the real binary on a real
//! server, on both clients: at most N weight of `sh -c` jobs (each with a
//! child of its own) run at once, each in a slot no other running job has,
//! with that slot's token; a full semaphore skips as a held lock does
//! (`-n -q -E 0`); another N, `--permits 0`, a weight that can never fit
//! and a strategy without semaphores exit 78 saying why; `status` shows a
//! semaphore's permits.

use std::process::Child;

use super::{code, each_client, eventually, spawn, stderr};
use crate::common::output;

file_helpers!(group: "permits", ttl: "5s", job_secs: 30);

/// `run --permits <permits> --weight <weight> <more>...`: a job that takes
/// `weight` permits of a semaphore of `permits`.
fn weighted<'a>(permits: &'a str, weight: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--permits", permits, "--weight", weight];
    args.extend_from_slice(more);
    args
}

/// A job that holds permits of `name`, a semaphore of `permits`, for 2 s:
/// `weight` of them, or one without `--weight`.
fn hold_permits(
    server: &lock_testkit::RedisServer,
    client: &str,
    name: &str,
    permits: &str,
    weight: Option<&str>,
) -> Child {
    let mut args = vec!["run", "--permits", permits];
    if let Some(weight) = weight {
        args.extend(["--weight", weight]);
    }
    args.extend([name, "-c", "sleep 2 & wait"]);
    spawn(&mut on(server, client, &args))
}

/// Six jobs of weight 1 and 2 under `--permits 3` never run more than 3
/// weight at once, by their own log; every running job has a slot of its
/// own, below 3, and a token.
#[test]
fn at_most_n_weight_of_jobs_run_at_once() {
    each_client(|server, client| {
        let log = scratch(&format!("log-{client}"));
        // Start and end lines around a child that does the work.
        let job = format!(
            "echo \"+ $DISTLOCK_WEIGHT $DISTLOCK_PERMIT_SLOT $DISTLOCK_FENCING_TOKEN\" >> {log}; \
             sleep 0.3 & wait; \
             echo \"- $DISTLOCK_WEIGHT $DISTLOCK_PERMIT_SLOT\" >> {log}",
            log = log.path()
        );
        let jobs: Vec<Child> = (0..6)
            .map(|index| {
                let weight = if index % 3 == 0 { "2" } else { "1" };
                spawn(
                    on(
                        server,
                        client,
                        &weighted("3", weight, &["-w", "20", "pool", "-c", &job]),
                    )
                    .env("DISTLOCK_WEIGHT", weight),
                )
            })
            .collect();
        for job in jobs {
            let (code, err) = finish(job);
            assert_eq!(code, 0, "{client}: {err}");
        }
        let text = std::fs::read_to_string(log.path()).expect("the log");
        let (mut live, mut most) = (0u32, 0u32);
        let mut slots = std::collections::BTreeSet::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let weight: u32 = fields[1].parse().expect("a weight");
            let slot: u32 = fields[2].parse().expect("DISTLOCK_PERMIT_SLOT");
            if fields[0] == "+" {
                assert!(fields.len() == 4, "{client}: no token in {line:?}");
                assert!(slot < 3, "{client}: slot {slot}");
                assert!(slots.insert(slot), "{client}: slot {slot} twice at once");
                live += weight;
                most = most.max(live);
                assert!(live <= 3, "{client}: {live} weight at once:\n{text}");
            } else {
                slots.remove(&slot);
                live -= weight;
            }
        }
        assert_eq!(text.lines().count(), 12, "{client}: {text}");
        assert!(most >= 2, "{client}: the jobs never overlapped:\n{text}");
    });
}

/// A full semaphore is skipped as a held lock is: silently with
/// `-n -q -E 0`, with 75 and a message without `-q`.
#[test]
fn a_full_semaphore_skips_like_a_held_lock() {
    each_client(|server, client| {
        let ran = scratch(&format!("ran-{client}"));
        let holder = hold_permits(server, client, "full", "2", Some("2"));
        // Until the holder has its permits.
        let job = format!("echo ran > {}", ran.path());
        eventually(&format!("{client}: never full"), || {
            let probe = output(on(
                server,
                client,
                &[
                    "run",
                    "--permits",
                    "2",
                    "-n",
                    "-q",
                    "-E",
                    "0",
                    "full",
                    "-c",
                    &job,
                ],
            ));
            assert_eq!(code(&probe), 0, "{client}: {}", stderr(&probe));
            if !std::path::Path::new(ran.path()).exists() {
                assert_eq!(stderr(&probe), "", "{client}: a skip prints nothing");
                return true;
            }
            std::fs::remove_file(ran.path()).expect("remove");
            false
        });
        let loud = output(on(
            server,
            client,
            &["run", "--permits", "2", "-n", "full", "--", "true"],
        ));
        assert_eq!(code(&loud), 75, "{client}: {}", stderr(&loud));
        crate::common::assert_stderr_says(&loud, "held by someone else", "");
        // `status` shows the semaphore, scriptably with -q.
        let status = output(on(server, client, &["status", "full"]));
        let text = String::from_utf8_lossy(&status.stdout).into_owned();
        assert!(text.contains("semaphore, 2 of 2 permits in use"), "{text}");
        assert!(text.contains("slot 0: weight 2"), "{text}");
        let json = output(on(server, client, &["status", "--json", "full"]));
        let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
        assert_eq!(
            (json["limit"].as_u64(), json["used"].as_u64()),
            (Some(2), Some(2))
        );
        assert_eq!(json["permits"][0]["weight"].as_u64(), Some(2), "{json}");
        assert_eq!(
            code(&output(on(server, client, &["status", "-q", "full"]))),
            0
        );
        // `list` shows it as a semaphore, table and JSON.
        let table = output(on(server, client, &["list"]));
        let table = String::from_utf8_lossy(&table.stdout).into_owned();
        assert!(table.contains("2/2 permits"), "{table}");
        let row = super::listed(
            &output(on(server, client, &["list", "--json"])),
            "full",
            client,
        );
        assert_eq!(row["semaphore"]["used"].as_u64(), Some(2), "{row}");
        assert_eq!(row["semaphore"]["limit"].as_u64(), Some(2), "{row}");
        assert_eq!(finish(holder).0, 0);
        assert_eq!(
            code(&output(on(server, client, &["status", "-q", "full"]))),
            1
        );
    });
}

/// Another limit than the stored one, `--permits 0`, a weight above the
/// limit, `--weight` without `--permits`, and a strategy without
/// semaphores all exit 78, saying why.
#[test]
fn bad_permits_exit_78_saying_why() {
    each_client(|server, client| {
        let name = format!("limit-{client}");
        let holder = hold_permits(server, client, &name, "3", None);
        // Until the holder has its permit: then all 3 no longer fit. (A
        // probe asking for 2 would store 2 if it came first.)
        eventually(&format!("{client}: never held"), || {
            let probe = output(on(
                server,
                client,
                &weighted("3", "3", &["-n", &name, "--", "true"]),
            ));
            match code(&probe) {
                75 => true,
                0 => false,
                other => panic!("{client}: the probe exited {other}: {}", stderr(&probe)),
            }
        });
        let other = output(on(
            server,
            client,
            &["run", "--permits", "2", "-n", &name, "--", "true"],
        ));
        assert_eq!(code(&other), 78, "{client}: {}", stderr(&other));
        let err = stderr(&other);
        assert!(
            err.contains("limit of 3") && err.contains("the 2 asked for"),
            "{err}"
        );
        assert_eq!(finish(holder).0, 0);
        for args in [
            &["run", "--permits", "0", "x", "--", "true"][..],
            &["run", "--permits", "3", "--weight", "4", "x", "--", "true"][..],
            &["run", "--weight", "2", "x", "--", "true"][..],
            &["run", "--permits", "1000000000", "x", "--", "true"][..],
        ] {
            let out = output(on(server, client, args));
            assert_eq!(code(&out), 78, "{args:?}: {}", stderr(&out));
            assert!(!stderr(&out).is_empty(), "{args:?} said nothing");
        }
        let reentrant = output(
            on(
                server,
                client,
                &["run", "--permits", "2", "x", "--", "true"],
            )
            .env("DISTLOCK_STRATEGY", "reentrant"),
        );
        assert_eq!(code(&reentrant), 78, "{}", stderr(&reentrant));
        crate::common::assert_stderr_says(&reentrant, "no semaphores", "");
    });
}
