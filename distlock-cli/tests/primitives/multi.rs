//! `distlock run --key A --key B` with the real binary on a real server, on
//! both clients: jobs (`sh -c` with a child of their own) over overlapping
//! names in opposite orders never run at once, nor beside a plain run of a
//! member; a held member skips the job and takes nothing; `-s`, `-x` and
//! `--permits` with several names exit 78.

use std::process::Child;

use super::{code, each_client, spawn, stderr};
use crate::common::output;

file_helpers!(group: "multi", ttl: "5s", job_secs: 30);

/// Jobs of `--key from --key to`, `--key to --key from` and a plain run of
/// `to` never overlap, by their own log, and each saw one token.
#[test]
fn jobs_over_several_names_run_one_at_a_time() {
    each_client(|server, client| {
        let log = scratch(&format!("log-{client}"));
        let job = format!(
            "echo \"+ $DISTLOCK_FENCING_TOKEN $DISTLOCK_KEY\" >> {log}; sleep 0.2 & wait; \
             echo - >> {log}",
            log = log.path()
        );
        let from = format!("from-{client}");
        let to = format!("to-{client}");
        let shapes: [Vec<&str>; 5] = [
            vec!["--key", &from, "--key", &to],
            vec!["--key", &to, "--key", &from],
            vec![&to],
            vec!["--key", &from, "--key", &to],
            vec!["--key", &to, "--key", &from],
        ];
        let jobs: Vec<Child> = shapes
            .iter()
            .map(|names| {
                let mut args = vec!["run", "-w", "20"];
                args.extend(names.iter().copied());
                args.extend(["-c", &job]);
                spawn(&mut on(server, client, &args))
            })
            .collect();
        for job in jobs {
            let (code, err) = finish(job);
            assert_eq!(code, 0, "{client}: {err}");
        }
        let text = std::fs::read_to_string(log.path()).expect("the log");
        let mut running = 0;
        let mut tokens = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("+ ") {
                running += 1;
                assert_eq!(running, 1, "{client}: two jobs at once:\n{text}");
                let token: u64 = rest
                    .split_whitespace()
                    .next()
                    .and_then(|token| token.parse().ok())
                    .expect("a token");
                tokens.push(token);
            } else {
                running -= 1;
            }
        }
        assert_eq!(tokens.len(), 5, "{client}: {text}");
        let mut sorted = tokens.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 5, "{client}: a token twice: {tokens:?}");
        assert!(
            text.contains(&format!("{from},{to}")) || text.contains(&format!("{to},{from}")),
            "{client}: DISTLOCK_KEY names every member:\n{text}"
        );
    });
}

/// A held member skips the job (`-n -q -E 0`, silently) and leaves the
/// other member free; `-s`, `-x` and `--permits` take one name.
#[test]
fn a_held_member_skips_the_job_and_takes_nothing() {
    each_client(|server, client| {
        let (a, b) = (format!("a-{client}"), format!("b-{client}"));
        let holder = spawn(&mut on(
            server,
            client,
            &["run", &b, "-c", "sleep 1.5 & wait"],
        ));
        super::eventually(&format!("{client}: never held"), || {
            code(&output(on(server, client, &["status", "-q", &b]))) == 0
        });
        super::assert_skipped_silently(
            |args| output(on(server, client, args)),
            &scratch(&format!("ran-{client}")),
            &["--key", &a, "--key", &b],
            client,
            "ran beside a held member",
        );
        let free = output(on(server, client, &["status", "-q", &a]));
        assert_eq!(code(&free), 1, "{client}: a refused job took {a}");
        let (code_of, err) = finish(holder);
        assert_eq!(code_of, 0, "{client}: {err}");
        for flag in [&["-s"][..], &["-x"], &["--permits", "2"]] {
            let mut args = vec!["run"];
            args.extend(flag.iter().copied());
            args.extend(["--key", &a, "--key", &b, "-c", "echo ran"]);
            let out = output(on(server, client, &args));
            assert_eq!(code(&out), 78, "{client} {flag:?}: {}", stderr(&out));
            assert!(out.stdout.is_empty());
        }
    });
}
