//! `distlock barrier` with the real binary on a real server, on both
//! clients: `sh -c` jobs of three hosts that start only once the last has
//! entered and exit together once all are done; a party beside a round
//! under way, and a wait that runs out, exit 75; `status` and `list` show
//! the barrier; bad arguments exit 78.

use std::time::{Duration, Instant};

use super::{code, each_client, listed, spawn, stderr};
use crate::common::{assert_stderr_says, output};

file_helpers!(group: "barrier", ttl: "5s", job_secs: 20);

/// Three parties enter a second apart; each job notes when it starts and
/// ends in a shared log. No job starts before the third party entered, and
/// no party exits before every job has ended.
#[test]
fn jobs_start_together_and_parties_leave_together() {
    each_client(|server, client| {
        let name = format!("migration-{client}");
        let log = scratch(&format!("log-{client}"));
        let job = format!(
            "echo start >> {log}; sleep 0.3; echo end >> {log}",
            log = log.path()
        );
        let mut parties = Vec::new();
        for _ in 0..2 {
            parties.push(spawn(&mut on(
                server,
                client,
                &["barrier", &name, "--parties", "3", "-w", "20", "-c", &job],
            )));
            std::thread::sleep(Duration::from_millis(400));
        }
        assert!(
            log.lines().is_empty(),
            "{client}: a job started with two of three in"
        );
        let status = output(on(server, client, &["status", &name, "--json"]));
        let state: serde_json::Value = serde_json::from_slice(&status.stdout).expect("JSON");
        assert_eq!(
            (
                state["barrier"].as_bool(),
                state["entered"].as_u64(),
                state["parties"].as_u64()
            ),
            (Some(true), Some(2), Some(3)),
            "{client}: {state}"
        );
        let listing = output(on(server, client, &["list", "--json", "--prefix", &name]));
        assert_eq!(
            listed(&listing, &name, client)["barrier"]["entered"],
            2,
            "{client}"
        );
        let third = Instant::now();
        parties.push(spawn(&mut on(
            server,
            client,
            &["barrier", &name, "--parties", "3", "-w", "20", "-c", &job],
        )));
        for party in parties {
            let (code, err) = finish(party);
            assert_eq!(code, 0, "{client}: {err}");
        }
        let lines = log.lines();
        assert_eq!(lines.len(), 6, "{client}: {lines:?}");
        assert!(
            lines[..3].iter().all(|line| line == "start"),
            "{client}: a job ended before every job had started: {lines:?}"
        );
        assert!(third.elapsed() < Duration::from_secs(10), "{client}");
        let after = output(on(server, client, &["status", &name, "-q"]));
        assert_eq!(
            code(&after),
            1,
            "{client}: the barrier outlived its parties"
        );
    });
}

/// A wait that runs out exits 75 (silently with `-q`), as does a party
/// beside a round under way; a job that fails passes its code on.
#[test]
fn waits_that_run_out_exit_75() {
    each_client(|server, client| {
        let name = format!("gate-{client}");
        let started = Instant::now();
        let alone = output(on(
            server,
            client,
            &[
                "barrier",
                &name,
                "--parties",
                "2",
                "-w",
                "0.3",
                "--",
                "true",
            ],
        ));
        assert_eq!(code(&alone), 75, "{client}: {}", stderr(&alone));
        assert_stderr_says(&alone, "did not all enter within", client);
        assert!(started.elapsed() < Duration::from_secs(5), "{client}");
        let quiet = output(on(
            server,
            client,
            &["barrier", &name, "--parties", "2", "-n", "-q", "--", "true"],
        ));
        assert_eq!(
            (code(&quiet), stderr(&quiet).as_str()),
            (75, ""),
            "{client}"
        );
        // A round of one: its job runs at once, and its code comes back.
        let failed = output(on(
            server,
            client,
            &["barrier", &name, "--parties", "1", "-c", "exit 3"],
        ));
        assert_eq!(code(&failed), 3, "{client}: {}", stderr(&failed));
        // A round of one under way refuses a second party.
        let busy = spawn(&mut on(
            server,
            client,
            &["barrier", &name, "--parties", "1", "-c", "sleep 1"],
        ));
        super::eventually("the round is under way", || {
            code(&output(on(server, client, &["status", &name, "-q"]))) == 0
        });
        let beside = output(on(
            server,
            client,
            &["barrier", &name, "--parties", "1", "--", "true"],
        ));
        assert_eq!(code(&beside), 75, "{client}: {}", stderr(&beside));
        assert_stderr_says(&beside, "is full", client);
        let (code, err) = finish(busy);
        assert_eq!(code, 0, "{client}: {err}");
    });
}

/// Bad arguments exit 78 and touch nothing.
#[test]
fn bad_arguments_exit_78() {
    each_client(|server, client| {
        let name = format!("args-{client}");
        for args in [
            &["barrier", &name, "--", "true"][..],
            &["barrier", &name, "--parties", "0", "--", "true"],
            &["barrier", &name, "--parties", "10001", "--", "true"],
            &["barrier", &name, "--parties", "2"],
            &[
                "barrier",
                &name,
                "--parties",
                "2",
                "-n",
                "-w",
                "1",
                "--",
                "true",
            ],
        ] {
            let out = output(on(server, client, args));
            assert_eq!(code(&out), 78, "{client} {args:?}: {}", stderr(&out));
        }
        let status = output(on(server, client, &["status", &name, "-q"]));
        assert_eq!(code(&status), 1, "{client}: something was written");
    });
}
