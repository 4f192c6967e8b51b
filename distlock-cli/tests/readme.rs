//! The docs run as a reader copies them, against real servers: the README's
//! first example with concurrent duplicate requests, and (with the command)
//! the ACL rule of docs/OPERATIONS.md with every verb and primitive of
//! `distlock`. Each reads its text from the file, so the docs and what is
//! tested cannot drift apart.

#![cfg(any(feature = "redis", feature = "fred"))]

mod common;

/// The README, read when a test runs (as the packaged crate would have it).
fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    std::fs::read_to_string(path).expect("the workspace README")
}

/// The operator's guide, where the README sends readers for the ACL rule.
fn operations() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/OPERATIONS.md");
    std::fs::read_to_string(path).expect("docs/OPERATIONS.md")
}

/// The section of `markdown` under the heading `heading` (a whole line),
/// up to the next heading of the same level or higher.
fn section<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let start = markdown
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no `{heading}` section"))
        + heading.len()
        + 2;
    let rest = &markdown[start..];
    let end = rest
        .match_indices("\n#")
        .find(|(at, _)| {
            let hashes = rest[at + 1..].chars().take_while(|c| *c == '#').count();
            hashes <= level && rest[at + 1 + hashes..].starts_with(' ')
        })
        .map_or(rest.len(), |(at, _)| at + 1);
    &rest[..end]
}

/// The body of the first fenced block in `text` whose info string starts
/// with `info` (```` ```rust ```` matches ```` ```rust,no_run ````).
fn first_block<'a>(text: &'a str, info: &str) -> &'a str {
    let open = format!("```{info}");
    let start = text
        .lines()
        .scan(0, |offset, line| {
            let at = *offset;
            *offset += line.len() + 1;
            Some((at, line))
        })
        .find(|(_, line)| line.starts_with(&open))
        .map(|(at, line)| at + line.len() + 1)
        .unwrap_or_else(|| panic!("no ```{info} block"));
    let body = &text[start..];
    let end = body
        .find("\n```")
        .map(|at| at + 1)
        .unwrap_or_else(|| panic!("an unclosed ```{info} block"));
    &body[..end]
}

/// The README's first example, `charge_once`: the code below is the
/// README's block, word for word (`usage_example_is_the_tested_file`
/// checks), and runs against a real server with duplicate requests.
// `connect` reads the process environment; the test connects on its own.
#[allow(dead_code)]
mod usage {
    include!("readme/charge_once.rs");

    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use distlock::ClientKind;
    use lock_testkit::RedisServer;

    /// A payment store that counts the charges it takes and keeps the
    /// charged orders as its idempotency record.
    #[derive(Default)]
    struct Ledger {
        charges: AtomicUsize,
        charged: Mutex<HashSet<u64>>,
    }

    impl Payments for Ledger {
        async fn is_charged(&self, order_id: u64) -> bool {
            self.charged.lock().expect("ledger").contains(&order_id)
        }

        async fn charge(&self, order_id: u64, _token: Option<FencingToken>) {
            // The card network's round trip: long enough for every duplicate
            // to be waiting or checking meanwhile.
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.charges.fetch_add(1, Ordering::SeqCst);
            self.charged.lock().expect("ledger").insert(order_id);
        }
    }

    /// How many duplicates of one order arrive at once, each on a pod (a
    /// lock manager with connections) of its own.
    const DUPLICATES: usize = 6;

    /// `DUPLICATES` requests for one order through `client` charge it once.
    async fn duplicates_charge_once(client: ClientKind) {
        let server = RedisServer::start().expect("start redis-server");
        let ledger = Arc::new(Ledger::default());
        let mut pods = Vec::new();
        for _ in 0..DUPLICATES {
            let vars = lock_testkit::env::config_vars("single", [&server], client, &[]);
            let config = distlock::Config::from_vars(vars).expect("a valid config");
            pods.push(distlock::connect(&config).await.expect("connect"));
        }
        // Every request is connected before any starts, so they overlap.
        let start = Arc::new(tokio::sync::Barrier::new(DUPLICATES));
        let requests: Vec<_> = pods
            .into_iter()
            .map(|locks| {
                let (ledger, start) = (Arc::clone(&ledger), Arc::clone(&start));
                tokio::spawn(async move {
                    start.wait().await;
                    charge_once(&locks, &*ledger, 1001).await
                })
            })
            .collect();
        let mut charged_here = 0;
        for request in requests {
            let charged = request
                .await
                .expect("the request task")
                .expect("a duplicate is answered, not failed");
            charged_here += usize::from(charged);
        }
        assert_eq!(
            ledger.charges.load(Ordering::SeqCst),
            1,
            "{DUPLICATES} duplicate requests of one order through {client}: \
             the README's example must charge the card once"
        );
        assert_eq!(charged_here, 1, "one request says it charged");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn duplicate_requests_charge_once() {
        for client in crate::common::clients() {
            duplicates_charge_once(client.parse().expect("a client name")).await;
        }
    }
}

/// The code `usage` runs is the README's first Rust block under "Quick start".
#[test]
fn usage_example_is_the_tested_file() {
    let readme = readme();
    let block = first_block(section(&readme, "## Quick start"), "rust");
    assert_eq!(
        block,
        include_str!("readme/charge_once.rs"),
        "the README's first example and distlock-cli/tests/readme/charge_once.rs \
         must be the same text: edit both"
    );
}

/// The "Redis users and ACLs" rule of docs/OPERATIONS.md, created as it is
/// written on real servers, then every verb of `distlock` and every primitive run as
/// that user through the real binary, for each strategy, fair mode and the
/// options that read the server's clock.
mod acl {
    use std::cell::RefCell;
    use std::collections::BTreeSet;
    use std::io::{BufRead, BufReader};
    use std::path::Path;
    use std::process::{Child, Command, Output, Stdio};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use lock_testkit::{AdminReply, RedisServer};

    use crate::common::{clients, distlock, output, DISTLOCK};

    /// The documented rule for a lock user: the words of its `ACL SETUSER`
    /// line.
    fn readme_rule() -> Vec<String> {
        let operations = crate::operations();
        let block = crate::first_block(
            crate::section(&operations, "## Redis users and ACLs"),
            "text",
        );
        let line = block
            .lines()
            .find(|line| line.starts_with("ACL SETUSER "))
            .expect("an `ACL SETUSER` line in the ACL section of docs/OPERATIONS.md");
        line.split_whitespace().map(str::to_owned).collect()
    }

    /// How the lock is configured: a strategy over `nodes` servers, and
    /// `vars` on top.
    struct Mode {
        name: &'static str,
        strategy: &'static str,
        nodes: usize,
        vars: &'static [(&'static str, &'static str)],
    }

    impl Mode {
        /// Read-write locks and semaphores: the single-node strategy only.
        fn has_every_primitive(&self) -> bool {
            self.strategy == "single"
        }

        /// Elections: the single-node strategy with fencing on (a term is
        /// a fencing token).
        fn has_elections(&self) -> bool {
            self.has_every_primitive() && !self.vars.contains(&("DISTLOCK_FENCING", "false"))
        }

        /// Several names as one hold, and `acquire`'s hand-off.
        fn has_multi_and_handoff(&self) -> bool {
            self.strategy != "reentrant"
        }
    }

    /// `distlock` as the README's user on a mode's servers, remembering
    /// the verbs it ran.
    struct AsUser<'a> {
        servers: &'a [RedisServer],
        vars: Vec<(&'static str, String)>,
        verbs: RefCell<BTreeSet<String>>,
    }

    impl AsUser<'_> {
        fn command(&self, args: &[&str]) -> Command {
            self.verbs.borrow_mut().insert(args[0].to_owned());
            distlock(&self.vars, args)
        }

        /// Runs `args` to its end, which must be a success with no
        /// permission error on the way.
        fn ok(&self, args: &[&str]) -> Output {
            let out = output(self.command(args));
            assert_clean(args, &out);
            out
        }

        /// Starts `args` with its output piped.
        fn spawn(&self, args: &[&str]) -> Reaped {
            let child = self
                .command(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn distlock");
            Reaped(Some(child))
        }

        /// Whether a waiter on `name` has subscribed to its release channel.
        fn subscribed(&self, name: &str) -> bool {
            self.servers.iter().any(|server| {
                let channels = server
                    .admin(&["PUBSUB", "CHANNELS", &format!("*{{{name}}}*")])
                    .expect("PUBSUB CHANNELS");
                matches!(channels, AdminReply::Array(Some(names)) if !names.is_empty())
            })
        }
    }

    /// The run of `args` ended with 0 and said nothing of permissions.
    fn assert_clean(args: &[&str], out: &Output) {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "`distlock {}` as the README's user: {:?}\n{stderr}",
            args.join(" "),
            out.status
        );
        // What a refused rule looks like: the server's word, the library's
        // `PermissionDenied`, and the rule it names.
        for sign in ["NOPERM", "permission", "ACL", "+time"] {
            assert!(
                !stderr.contains(sign),
                "`distlock {}` as the README's user: {stderr}",
                args.join(" ")
            );
        }
    }

    /// A child killed on drop, so a failed check leaves no process behind.
    struct Reaped(Option<Child>);

    impl Reaped {
        /// Waits up to 10 s for the child's end.
        fn finish(mut self, args: &[&str]) -> Output {
            let mut child = self.0.take().expect("a running child");
            let started = Instant::now();
            while child.try_wait().expect("wait").is_none() {
                if started.elapsed() > Duration::from_secs(10) {
                    let _ = child.kill();
                    panic!("`distlock {}` did not end within 10 s", args.join(" "));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let out = child.wait_with_output().expect("collect output");
            assert_clean(args, &out);
            out
        }
    }

    impl Drop for Reaped {
        fn drop(&mut self) {
            if let Some(child) = self.0.as_mut() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// Polls `fact` every 10 ms for up to 10 s.
    fn eventually(what: &str, mut fact: impl FnMut() -> bool) {
        let started = Instant::now();
        while !fact() {
            assert!(started.elapsed() < Duration::from_secs(10), "never: {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A file a job waits for (up to 10 s), so that it ends when the test
    /// has seen what it needed to, not after a guessed time.
    struct Gate(std::path::PathBuf);

    impl Gate {
        fn new(name: &str) -> Self {
            let path =
                std::env::temp_dir().join(format!("distlock-readme-{name}-{}", std::process::id()));
            let _ = std::fs::remove_file(&path);
            Gate(path)
        }

        /// A shell command that ends with 0 once the gate is open.
        fn wait(&self) -> String {
            format!(
                "for i in $(seq 1000); do [ -e '{}' ] && exit 0; sleep 0.01; done; exit 1",
                self.0.display()
            )
        }

        fn open(&self) {
            std::fs::write(&self.0, "").expect("open the gate");
        }
    }

    impl Drop for Gate {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// The hand-off token in `acquire`'s output.
    fn owner_of(out: &Output) -> String {
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .find_map(|line| line.strip_prefix("export DISTLOCK_OWNER="))
            .map(|token| token.trim_matches('\'').to_owned())
            .unwrap_or_else(|| panic!("no DISTLOCK_OWNER in {stdout}"))
    }

    /// The verbs `distlock --help` lists (but `help`).
    fn listed_verbs() -> BTreeSet<String> {
        let out = output(distlock::<&str>(&[], &["--help"]));
        let help = String::from_utf8_lossy(&out.stdout).into_owned();
        help.lines()
            .skip_while(|line| !line.starts_with("Commands:"))
            .skip(1)
            .take_while(|line| line.starts_with("  "))
            .filter_map(|line| line.split_whitespace().next())
            .filter(|verb| *verb != "help")
            .map(str::to_owned)
            .collect()
    }

    /// Every verb and primitive `mode` has, as the README's user, through
    /// each client; returns the verbs run.
    fn every_verb(mode: &Mode) -> BTreeSet<String> {
        let rule = readme_rule();
        let user = rule[2].clone();
        let password = rule
            .iter()
            .find_map(|word| word.strip_prefix('>'))
            .expect("a >password in the README's rule");
        let servers: Vec<RedisServer> = (0..mode.nodes)
            .map(|_| RedisServer::start().expect("start redis-server"))
            .collect();
        for server in &servers {
            let words: Vec<&str> = rule.iter().map(String::as_str).collect();
            server.admin(&words).expect("the README's ACL SETUSER");
        }
        let nodes: Vec<String> = servers
            .iter()
            .map(|server| format!("redis://{user}:{password}@127.0.0.1:{}", server.port()))
            .collect();
        // Jobs call `distlock` by name, with the variables they inherit.
        let bin = Path::new(DISTLOCK)
            .parent()
            .expect("the binary's directory");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut verbs = BTreeSet::new();
        for client in clients() {
            let mut vars = vec![
                ("PATH", path.clone()),
                ("DISTLOCK_NODES", nodes.join(",")),
                ("DISTLOCK_STRATEGY", mode.strategy.to_owned()),
                ("DISTLOCK_CLIENT", client.to_owned()),
                ("DISTLOCK_TTL", "5s".to_owned()),
            ];
            for (name, value) in mode.vars {
                vars.push((name, (*value).to_owned()));
            }
            let cli = AsUser {
                servers: &servers,
                vars,
                verbs: RefCell::default(),
            };
            every_verb_through(mode, &cli, &format!("{}-{client}", mode.name));
            verbs.extend(cli.verbs.take());
        }
        verbs
    }

    /// The checks of [`every_verb`] for one client; every name starts with
    /// `prefix`.
    fn every_verb_through(mode: &Mode, cli: &AsUser<'_>, prefix: &str) {
        let name = |what: &str| format!("{prefix}-{what}");
        // A plain lock; under it status and list, and a waiter that gives
        // up (exit 75: its give-up step ran and was allowed).
        let plain = name("plain");
        cli.ok(&["run", &plain, "--", "true"]);
        cli.ok(&[
            "run",
            &plain,
            "-c",
            &format!(
                "distlock status {plain} && distlock status -q {plain} && \
                 distlock status --json {plain} && distlock list --prefix {prefix} && \
                 distlock list --json && distlock run -w 0.2 {plain} -- true; test $? -eq 75"
            ),
        ]);
        cli.ok(&["run", "-x", &name("exclusive"), "--", "true"]);
        cli.ok(&["status", &plain]);
        cli.ok(&["list"]);
        cli.ok(&["release", "--force", &name("free")]);

        // A waiter woken by the release, through the lock's channel.
        let wake = name("wake");
        let gate = Gate::new(&wake);
        let holder_script = gate.wait();
        let holder_args = ["run", wake.as_str(), "-c", holder_script.as_str()];
        let holder = cli.spawn(&holder_args);
        eventually("the holder holds", || {
            output(cli.command(&["status", "-q", &wake]))
                .status
                .success()
        });
        let waiter_args = ["run", "-w", "10", wake.as_str(), "--", "true"];
        let waiter = cli.spawn(&waiter_args);
        eventually("the waiter subscribes", || cli.subscribed(&wake));
        gate.open();
        holder.finish(&holder_args);
        waiter.finish(&waiter_args);

        if mode.has_multi_and_handoff() {
            let (a, b, c) = (name("a"), name("b"), name("c"));
            cli.ok(&[
                "run",
                "--key",
                &a,
                "--key",
                &b,
                "-c",
                &format!(
                    "distlock status {a} && distlock list --prefix {prefix} && \
                     distlock run -w 0.2 --key {b} --key {c} -- true; test $? -eq 75"
                ),
            ]);
            // A script's hold: taken, extended, shown, given back.
            let handed = name("handed");
            let owner = owner_of(&cli.ok(&["acquire", &handed]));
            cli.ok(&["extend", &handed, "--owner", &owner]);
            cli.ok(&["status", &handed]);
            cli.ok(&["release", &handed, "--owner", &owner]);
            let forced = name("forced");
            cli.ok(&["acquire", &forced]);
            cli.ok(&["release", "--force", &forced]);
        }

        if mode.has_every_primitive() {
            // A read-write lock: a reader with a writer giving up behind
            // it, and the reverse.
            let rw = name("rw");
            cli.ok(&[
                "run",
                "-s",
                &rw,
                "-c",
                &format!(
                    "distlock status {rw} && distlock list --prefix {prefix} && \
                     distlock run -s {rw} -- true && \
                     distlock run -x -w 0.2 {rw} -- true; test $? -eq 75"
                ),
            ]);
            cli.ok(&[
                "run",
                "-x",
                &rw,
                "-c",
                &format!(
                    "distlock status {rw} && distlock run -s -w 0.2 {rw} -- true; test $? -eq 75"
                ),
            ]);
            // A semaphore of 2: a permit, a weight of 2 that gives up
            // beside it, then that weight alone.
            let permits = name("permits");
            cli.ok(&[
                "run",
                "--permits",
                "2",
                &permits,
                "-c",
                &format!(
                    "distlock status {permits} && distlock list --prefix {prefix} && \
                     distlock run --permits 2 {permits} -- true && \
                     distlock run --permits 2 --weight 2 -w 0.2 {permits} -- true; test $? -eq 75"
                ),
            ]);
            cli.ok(&[
                "run",
                "--permits",
                "2",
                "--weight",
                "2",
                &permits,
                "--",
                "true",
            ]);
            // Its limit changed on purpose, then used.
            cli.ok(&["limit", &permits, "--permits", "3"]);
            cli.ok(&["run", "--permits", "3", &permits, "--", "true"]);

            // A latch of 2: a waiter woken through its channel once both
            // count down, one by id; shown by status and list.
            let latch = name("latch");
            cli.ok(&["latch", &latch, "--count", "2"]);
            let waiter_args = ["latch", latch.as_str(), "--wait", "-w", "10"];
            let waiter = cli.spawn(&waiter_args);
            eventually("the latch's waiter subscribes", || cli.subscribed(&latch));
            cli.ok(&["latch", &latch, "--down", "--id", "readme-user"]);
            cli.ok(&["status", &latch]);
            cli.ok(&["list", "--prefix", prefix]);
            cli.ok(&["latch", &latch, "--down"]);
            waiter.finish(&waiter_args);
            cli.ok(&["latch", &latch, "--wait", "-n"]);

            // A barrier of two: one party waits for the other; both run
            // their jobs and leave.
            let barrier = name("barrier");
            let first_args = [
                "barrier",
                barrier.as_str(),
                "--parties",
                "2",
                "-w",
                "10",
                "--",
                "true",
            ];
            let first = cli.spawn(&first_args);
            eventually("the first party subscribes", || cli.subscribed(&barrier));
            cli.ok(&["status", &barrier]);
            cli.ok(&[
                "barrier",
                &barrier,
                "--parties",
                "2",
                "-w",
                "10",
                "--",
                "true",
            ]);
            first.finish(&first_args);
        }

        if mode.has_elections() {
            // An election: an observer sees a leader come and go.
            let election = name("election");
            let observe_args = ["elect", "--observe", election.as_str()];
            let mut observer = cli.spawn(&observe_args);
            let stdout = observer.0.as_mut().and_then(|child| child.stdout.take());
            let (lines, seen) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout.expect("piped")).lines() {
                    if lines.send(line.expect("read")).is_err() {
                        break;
                    }
                }
            });
            let next = |observer: &mut Reaped| match seen.recv_timeout(Duration::from_secs(10)) {
                Ok(line) => line,
                Err(err) => {
                    let child = observer.0.take().expect("running");
                    let out = child.wait_with_output().expect("the observer's output");
                    panic!(
                        "the observer printed no line ({err}): {:?}\n{}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            };
            assert_eq!(next(&mut observer), "(no leader)");
            // The leader stays until the observer has printed it.
            let gate = Gate::new(&election);
            let leader_script = format!("distlock status {election} && {}", gate.wait());
            let leader_args = [
                "elect",
                "--once",
                "--value",
                "readme-user",
                election.as_str(),
                "-c",
                leader_script.as_str(),
            ];
            let leader = cli.spawn(&leader_args);
            assert_eq!(next(&mut observer), "readme-user");
            gate.open();
            leader.finish(&leader_args);
            assert_eq!(next(&mut observer), "(no leader)", "the leader resigned");
            let pid = observer.0.as_ref().expect("running").id().to_string();
            let interrupted = Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .expect("kill -INT");
            assert!(interrupted.success());
            observer.finish(&observe_args);
        }
    }

    const SINGLE: Mode = Mode {
        name: "single",
        strategy: "single",
        nodes: 1,
        vars: &[],
    };

    #[test]
    fn the_readme_user_runs_every_verb_and_primitive() {
        let verbs = every_verb(&SINGLE);
        let listed = listed_verbs();
        assert!(
            listed.is_subset(&verbs),
            "`distlock --help` lists {:?} that this test does not run as the README's user",
            listed.difference(&verbs).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_readme_user_runs_every_verb_in_fair_mode() {
        every_verb(&Mode {
            name: "fair",
            strategy: "single",
            nodes: 1,
            vars: &[("DISTLOCK_FAIR", "true")],
        });
    }

    /// The options that store more per hold, and the acquire without a counter.
    #[test]
    fn the_readme_user_runs_every_verb_with_holder_info_or_without_fencing() {
        every_verb(&Mode {
            name: "holder",
            strategy: "single",
            nodes: 1,
            vars: &[
                ("DISTLOCK_HOLDER_INFO", "true"),
                ("DISTLOCK_FENCING_COUNTER_TTL", "7d"),
            ],
        });
        every_verb(&Mode {
            name: "unfenced",
            strategy: "single",
            nodes: 1,
            vars: &[("DISTLOCK_FENCING", "false")],
        });
    }

    #[test]
    fn the_readme_user_runs_every_verb_of_the_other_strategies() {
        every_verb(&Mode {
            name: "reentrant",
            strategy: "reentrant",
            nodes: 1,
            vars: &[],
        });
        every_verb(&Mode {
            name: "redlock",
            strategy: "redlock",
            nodes: 3,
            vars: &[],
        });
    }
}
