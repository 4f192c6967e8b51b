//! `distlock elect` with the real binary on a real server, on both
//! clients: one leader's `sh -c` job (with a child of its own) at a time,
//! in growing terms; `--observe` printing each leader as it changes; a lost
//! leadership stopping the job and campaigning again (or exiting 76 with
//! `--once`); a signal resigning; bad arguments exiting 78.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::{code, each_client, spawn, stderr, Scratch};
use crate::common::output;

file_helpers!(group: "elect", ttl: "1s", job_secs: 20);

fn signal(child: &Child, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
    nix::sys::signal::kill(pid, signal).expect("kill");
}

/// Waits up to 10 s until `log` has `count` lines.
fn until_lines(log: &Scratch, count: usize) -> Vec<String> {
    let started = Instant::now();
    loop {
        let lines = log.lines();
        if lines.len() >= count {
            return lines;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "log: {lines:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Three campaigners whose jobs end by themselves lead one at a time, in
/// growing terms, each exiting with its job's code after resigning; an
/// observer prints each leader and then no leader, and exits 0 on SIGINT.
#[test]
fn one_leader_at_a_time_and_observers_see_each() {
    each_client(|server, client| {
        let name = format!("sched-{client}");
        let log = scratch(&format!("log-{client}"));
        let mut observer = on(server, client, &["elect", &name, "--observe", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the observer");
        let mut seen = BufReader::new(observer.stdout.take().expect("stdout")).lines();
        let first: serde_json::Value =
            serde_json::from_str(&seen.next().expect("a line").expect("text")).expect("JSON");
        assert_eq!(first["leader"], serde_json::Value::Null, "{first}");
        let job = format!(
            "echo \"+ $DISTLOCK_FENCING_TOKEN\" >> {log}; sleep 0.4 & wait; echo - >> {log}",
            log = log.path()
        );
        let campaigners: Vec<Child> = ["a", "b", "c"]
            .iter()
            .map(|value| {
                spawn(&mut on(
                    server,
                    client,
                    &["elect", &name, "--value", value, "-c", &job],
                ))
            })
            .collect();
        for campaigner in campaigners {
            let (code, err) = finish(campaigner);
            assert_eq!(code, 0, "{client}: {err}");
        }
        let lines = log.lines();
        assert_eq!(lines.len(), 6, "{client}: {lines:?}");
        let mut last = 0u64;
        for pair in lines.chunks(2) {
            assert_eq!(pair[1], "-", "{client}: two leaders at once: {lines:?}");
            let term: u64 = pair[0]
                .strip_prefix("+ ")
                .and_then(|term| term.parse().ok())
                .unwrap_or_else(|| panic!("{client}: {lines:?}"));
            assert!(term > last, "{client}: terms {lines:?}");
            last = term;
        }
        // The observer printed leaders, each a value a campaigner proclaimed,
        // and ends on no leader.
        let mut values = Vec::new();
        loop {
            let line = seen.next().expect("a line").expect("text");
            let change: serde_json::Value = serde_json::from_str(&line).expect("JSON");
            match change["leader"].as_str() {
                Some(value) => {
                    assert!(change["term"].as_u64().is_some(), "{change}");
                    values.push(value.to_owned());
                }
                None if !values.is_empty() => break,
                None => {}
            }
        }
        assert!(
            values
                .iter()
                .all(|value| ["a", "b", "c"].contains(&value.as_str())),
            "{values:?}"
        );
        signal(&observer, nix::sys::signal::Signal::SIGINT);
        assert_eq!(
            finish(observer).0,
            0,
            "{client}: --observe ends with 0 on SIGINT"
        );
    });
}

/// A leadership lost behind the leader's back (its key deleted) stops the
/// job's whole process group and campaigns again, in a greater term; with
/// `--once` it exits 76 instead; SIGTERM stops the job, resigns and exits
/// 130.
#[test]
fn a_lost_leadership_stops_the_job_and_campaigns_again() {
    each_client(|server, client| {
        let name = format!("loss-{client}");
        let key = format!("lock:{{{name}}}");
        let log = scratch(&format!("loss-{client}"));
        let job = format!(
            "echo $DISTLOCK_FENCING_TOKEN >> {}; sleep 30 & wait",
            log.path()
        );
        let leader = spawn(&mut on(
            server,
            client,
            &["elect", &name, "--grace", "2s", "-c", &job],
        ));
        until_lines(&log, 1);
        // `list` shows the leader's value beside its lock.
        let row = super::listed(
            &output(on(server, client, &["list", "--json"])),
            &name,
            client,
        );
        assert!(row["leader"]["term"].as_u64().is_some(), "{row}");
        assert!(row["leader"]["value"].as_str().is_some(), "{row}");
        let status = output(on(server, client, &["status", &name]));
        let text = String::from_utf8_lossy(&status.stdout).into_owned();
        assert!(
            text.contains(", leader \"") && text.contains("in term"),
            "{text}"
        );
        server.admin(&["DEL", &key]).expect("DEL");
        let lines = until_lines(&log, 2);
        let terms: Vec<u64> = lines
            .iter()
            .map(|line| line.parse().expect("a term"))
            .collect();
        assert!(terms[1] > terms[0], "{client}: {terms:?}");
        signal(&leader, nix::sys::signal::Signal::SIGTERM);
        let (exit, err) = finish(leader);
        assert_eq!(exit, 130, "{client}: {err}");
        assert!(err.contains("was lost"), "{client}: {err}");
        let free = output(on(server, client, &["status", "-q", &name]));
        assert_eq!(code(&free), 1, "{client}: resigned on SIGTERM");
        // --once: the loss ends it with 76.
        let once_log = scratch(&format!("once-{client}"));
        let job = format!("echo x >> {}; sleep 30 & wait", once_log.path());
        let once = spawn(&mut on(
            server,
            client,
            &["elect", &name, "--once", "-c", &job],
        ));
        until_lines(&once_log, 1);
        server.admin(&["DEL", &key]).expect("DEL");
        let (code, err) = finish(once);
        assert_eq!(code, 76, "{client}: {err}");
    });
}

/// No command and no --observe, a command with --observe, and a strategy
/// without elections exit 78 saying why.
#[test]
fn bad_arguments_exit_78() {
    each_client(|server, client| {
        for args in [
            &["elect", "x"][..],
            &["elect", "x", "--observe", "--", "true"][..],
            &["elect", "x", "--json", "--", "true"][..],
        ] {
            let out = output(on(server, client, args));
            assert_eq!(code(&out), 78, "{args:?}: {}", stderr(&out));
        }
        let reentrant = output(
            on(server, client, &["elect", "x", "--", "true"]).env("DISTLOCK_STRATEGY", "reentrant"),
        );
        assert_eq!(code(&reentrant), 78, "{}", stderr(&reentrant));
        crate::common::assert_stderr_says(&reentrant, "no elections", "");
        let unfenced = output(
            on(server, client, &["elect", "x", "--", "true"]).env("DISTLOCK_FENCING", "false"),
        );
        assert_eq!(code(&unfenced), 78, "{}", stderr(&unfenced));
        crate::common::assert_stderr_says(&unfenced, "fencing", "");
    });
}
