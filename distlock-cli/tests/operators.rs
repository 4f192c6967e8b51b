//! `distlock` as operators run it, with the real binary on real servers:
//! flock(1)'s flags (`-n`, `-w` in seconds or `forever`, `-E`, `-q`, `-c`,
//! `-x`, `-s`), cron-style skips that print nothing, every verb naming its
//! lock as `NAME` or `--key`, `--nodes` on every verb, `status -q`, `extend`
//! that keeps the TTL the lock was taken with, a config that never switches
//! to Redlock by itself, and errors that name their real cause: an ACL
//! user's missing rule, a port that is not Redis, a misspelt TOML field, a
//! TTL too short.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::io::{Read as _, Write as _};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use lock_testkit::RedisServer;

mod common;

use common::{distlock, output, owner_of};

/// `distlock args...` on `server` with a 2 s TTL.
fn on(server: &RedisServer, args: &[&str]) -> std::process::Command {
    distlock(
        &[
            ("DISTLOCK_NODES", server.url().expose().to_owned()),
            ("DISTLOCK_TTL", "2s".to_owned()),
        ],
        args,
    )
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether `name` is held, from `status -q`'s exit code.
fn is_held(server: &RedisServer, name: &str) -> bool {
    let out = output(on(server, &["status", "-q", name]));
    match code(&out) {
        0 => true,
        1 => false,
        other => panic!("status -q {name} exited {other}: {}", stderr(&out)),
    }
}

/// Waits up to 10 s for `name` to be held.
fn until_held(server: &RedisServer, name: &str) {
    let started = Instant::now();
    while !is_held(server, name) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name:?} was never taken"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A job holding `name` for `seconds`: a shell with a background child, as
/// a cron job is. Returns once the lock is held.
fn hold(server: &RedisServer, name: &str, seconds: f64) -> Child {
    let script = format!("sleep {seconds} & wait");
    let child = on(server, &["run", name, "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the holder");
    until_held(server, name);
    child
}

/// Waits up to 15 s for `child` and returns its exit code.
fn finish(mut child: Child) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        assert!(started.elapsed() < Duration::from_secs(15), "a job hangs");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A scratch file path for one test, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        Scratch(std::env::temp_dir().join(format!("distlock-ops-{name}-{}", std::process::id())))
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `-n -q -E 0`, as cron runs it: a skipped run prints nothing (so cron
/// mails nothing), exits 0, and does not run the job; without `-q` it says
/// why, and the code is `-E`'s, 75 by default.
#[test]
fn a_cron_style_skip_prints_nothing_and_exits_as_told() {
    let server = RedisServer::start().expect("start");
    let ran = Scratch::new("skip");
    let job = format!("echo ran > {}", ran.path());
    let holder = hold(&server, "nightly", 3.0);
    let skipped = output(on(
        &server,
        &["run", "-n", "-q", "-E", "0", "nightly", "-c", &job],
    ));
    assert_eq!(code(&skipped), 0, "{}", stderr(&skipped));
    assert_eq!(stdout(&skipped), "", "a skip prints nothing");
    assert_eq!(stderr(&skipped), "", "a skip prints nothing");
    let loud = output(on(
        &server,
        &["run", "--nonblock", "--key", "nightly", "-c", &job],
    ));
    assert_eq!(code(&loud), 75);
    common::assert_stderr_says(&loud, "held by someone else", "");
    let told = output(on(
        &server,
        &[
            "run",
            "--conflict-exit-code",
            "9",
            "-w",
            "0",
            "nightly",
            "--",
            "sh",
            "-c",
            &job,
        ],
    ));
    assert_eq!(code(&told), 9, "{}", stderr(&told));
    // `acquire` skips the same way, but never with 0: the script after it
    // would go on as if it held the lock.
    let zero = output(on(&server, &["acquire", "-n", "-E", "0", "nightly"]));
    assert_eq!(code(&zero), 78, "{}", stderr(&zero));
    assert_eq!(stdout(&zero), "");
    let acquire = output(on(&server, &["acquire", "-n", "-q", "-E", "3", "nightly"]));
    assert_eq!(
        (code(&acquire), stdout(&acquire), stderr(&acquire)),
        (3, String::new(), String::new())
    );
    assert!(
        !std::path::Path::new(ran.path()).exists(),
        "a skipped job ran"
    );
    assert_eq!(finish(holder), 0);
    // Other errors are never quiet: an unreachable server still says so.
    let down = output(distlock(
        &[("DISTLOCK_NODES", "redis://127.0.0.1:1")],
        &["run", "-n", "-q", "-E", "0", "nightly", "-c", &job],
    ));
    assert_eq!(code(&down), 69);
    common::assert_stderr_says(&down, "127.0.0.1:1", "");
}

/// `-w` takes bare seconds as flock does (`0.4`), and `forever` waits until
/// the holder is done.
#[test]
fn wait_takes_seconds_and_forever() {
    let server = RedisServer::start().expect("start");
    let holder = hold(&server, "waits", 1.5);
    let started = Instant::now();
    let timed_out = output(on(&server, &["run", "-w", "0.4", "waits", "-c", "true"]));
    let waited = started.elapsed();
    assert_eq!(code(&timed_out), 75, "{}", stderr(&timed_out));
    assert!(
        waited >= Duration::from_millis(400),
        "-w 0.4 gave up after {waited:?}"
    );
    let forever = output(on(
        &server,
        &["run", "-w", "forever", "waits", "-c", "echo got it"],
    ));
    assert_eq!(code(&forever), 0, "{}", stderr(&forever));
    assert_eq!(stdout(&forever), "got it\n");
    assert_eq!(finish(holder), 0);
    for bad in ["-1", "1e3", "soon", "5x"] {
        let out = output(on(
            &server,
            &["run", &format!("--wait={bad}"), "waits", "-c", "true"],
        ));
        assert_eq!(code(&out), 78, "--wait={bad}: {}", stderr(&out));
    }
    let both = output(on(
        &server,
        &["run", "-n", "-w", "5", "waits", "-c", "true"],
    ));
    assert_eq!(code(&both), 78, "-n and -w together: {}", stderr(&both));
}

/// `-c` runs through `sh -c` with the job's variables; its children are
/// part of the job, and its exit code is `run`'s. `-x` takes the exclusive
/// hold with the next write token, and `-s` a shared one with that epoch.
#[test]
fn a_shell_command_runs_through_sh() {
    let server = RedisServer::start().expect("start");
    let seen = Scratch::new("shell");
    let script = format!(
        "(sleep 0.2; echo \"$DISTLOCK_KEY $DISTLOCK_FENCING_TOKEN\" > {}) & wait; exit 3",
        seen.path()
    );
    let out = output(on(&server, &["run", "-x", "shelled", "-c", &script]));
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let written = std::fs::read_to_string(seen.path()).expect("the child wrote its file");
    assert_eq!(written, "shelled 1\n");
    let shared = output(on(
        &server,
        &["run", "-s", "shelled", "-c", "echo $DISTLOCK_FENCING_TOKEN"],
    ));
    assert_eq!(code(&shared), 0, "{}", stderr(&shared));
    assert_eq!(stdout(&shared), "1\n", "a read's epoch is the last write");
    for args in [
        &["run", "shelled"][..],
        &["run", "shelled", "-c", "true", "--", "true"],
        &["run", "-x", "-s", "shelled", "-c", "true"],
    ] {
        let out = output(on(&server, args));
        assert_eq!(code(&out), 78, "{args:?}: {}", stderr(&out));
    }
}

/// Every verb names its lock as `NAME` or `--key NAME` (not both), takes
/// `--nodes` instead of DISTLOCK_NODES, and `status -q` answers in its code.
#[test]
fn every_verb_takes_a_name_either_way_and_nodes_as_a_flag() {
    let server = RedisServer::start().expect("start");
    let nodes = server.url().expose().to_owned();
    // Nothing in the environment names a server.
    let flagged = |args: &[&str]| {
        let mut all = vec!["--nodes", nodes.as_str()];
        all.extend_from_slice(args);
        output(distlock(&[("DISTLOCK_TTL", "5m")], &all))
    };
    for (by_flag, name) in [(false, "positional"), (true, "flagged")] {
        let named = |verb: &str| -> Vec<String> {
            let mut args = vec![verb.to_owned()];
            if by_flag {
                args.push("--key".to_owned());
            }
            args.push(name.to_owned());
            args
        };
        let run = |verb: &str, more: &[&str]| {
            let mut args = named(verb);
            args.extend(more.iter().map(|arg| (*arg).to_owned()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            flagged(&args)
        };
        let free = run("status", &["-q"]);
        assert_eq!(
            (code(&free), stdout(&free)),
            (1, String::new()),
            "{name} is free"
        );
        let acquired = run("acquire", &[]);
        assert_eq!(code(&acquired), 0, "{}", stderr(&acquired));
        let token = owner_of(&acquired);
        let held = run("status", &["-q"]);
        assert_eq!(
            (code(&held), stdout(&held)),
            (0, String::new()),
            "{name} is held"
        );
        let shown = run("status", &["--json"]);
        assert!(
            stdout(&shown).contains("\"held\":true"),
            "{}",
            stdout(&shown)
        );
        let extended = run("extend", &["--owner", &token]);
        assert_eq!(code(&extended), 0, "{}", stderr(&extended));
        let released = run("release", &["--owner", &token]);
        assert_eq!(code(&released), 0, "{}", stderr(&released));
        let ran = run("run", &["-c", "echo $DISTLOCK_KEY"]);
        assert_eq!(stdout(&ran), format!("{name}\n"), "{}", stderr(&ran));
        let forced = run("release", &["--force"]);
        assert_eq!(code(&forced), 0, "{}", stderr(&forced));
    }
    for verb in ["run", "status", "acquire", "extend", "release"] {
        let both = flagged(&[verb, "one", "--key", "two"]);
        assert_eq!(code(&both), 78, "{verb} with two names: {}", stderr(&both));
        let none = flagged(&[verb]);
        assert_eq!(code(&none), 78, "{verb} without a name: {}", stderr(&none));
    }
    // The flag wins over the environment.
    let out = output(distlock(
        &[("DISTLOCK_NODES", "redis://127.0.0.1:1")],
        &["status", "--nodes", &nodes, "-q", "anything"],
    ));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let down = output(distlock(
        &[("DISTLOCK_NODES", "redis://127.0.0.1:1")],
        &["status", "-q", "x"],
    ));
    assert_eq!(code(&down), 69, "{}", stderr(&down));
    let bad = output(distlock(
        &[("DISTLOCK_TTL", "soon")],
        &["status", "-q", "x"],
    ));
    assert_eq!(code(&bad), 78, "{}", stderr(&bad));
}

/// `extend` without `--ttl` renews to the TTL `acquire` took the lock with
/// (not the config's), and a shorter `--ttl` says it shortened the lock.
#[test]
fn extend_keeps_the_ttl_the_lock_was_taken_with() {
    let server = RedisServer::start().expect("start");
    let remaining_ms = |name: &str| -> u64 {
        let out = output(on(&server, &["status", name, "--json"]));
        let text = stdout(&out);
        let (_, rest) = text.split_once("\"remaining_ms\":").expect("remaining_ms");
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|digits| digits.parse().ok())
            .unwrap_or_else(|| panic!("no remaining TTL in {text}"))
    };
    // The config says 2 s; the lock is taken for 5 minutes.
    let acquired = output(on(&server, &["acquire", "deploy", "--ttl", "5m"]));
    assert_eq!(code(&acquired), 0, "{}", stderr(&acquired));
    let token = owner_of(&acquired);
    let with_token = |args: &[&str]| {
        let mut command = on(&server, args);
        command.env("DISTLOCK_OWNER", &token);
        output(command)
    };
    let kept = with_token(&["extend", "deploy"]);
    assert_eq!(code(&kept), 0, "{}", stderr(&kept));
    common::assert_stdout_says(&kept, "extended", "");
    assert!(
        remaining_ms("deploy") > 240_000,
        "extend without --ttl cut the lock to {} ms",
        remaining_ms("deploy")
    );
    let cut = with_token(&["extend", "--key", "deploy", "--ttl", "30s"]);
    assert_eq!(code(&cut), 0, "{}", stderr(&cut));
    assert!(
        stdout(&cut).contains("shortened") && stdout(&cut).contains("5m"),
        "{}",
        stdout(&cut)
    );
    assert!(remaining_ms("deploy") <= 30_000);
    let longer = with_token(&["extend", "deploy", "--ttl", "10m"]);
    common::assert_stdout_says(&longer, "extended", "");
    // Back to what it was taken with, as the token says.
    let again = with_token(&["extend", "deploy"]);
    common::assert_stdout_says(&again, "extended", "");
    let left = remaining_ms("deploy");
    assert!((240_000..=300_000).contains(&left), "{left} ms");
    assert_eq!(code(&with_token(&["release", "deploy"])), 0);
}

/// Several standalone nodes without `strategy` are a config error naming it
/// (never a silent Redlock); Redlock over two is refused; over four it runs
/// with a warning that says what the fourth node costs.
#[test]
fn several_nodes_never_choose_redlock_by_themselves() {
    let servers: Vec<RedisServer> = (0..4)
        .map(|_| RedisServer::start().expect("start"))
        .collect();
    let urls = |count: usize| -> String {
        servers[..count]
            .iter()
            .map(|server| server.url().expose().to_owned())
            .collect::<Vec<_>>()
            .join(",")
    };
    let ran = Scratch::new("redlock");
    let job = format!("echo ran > {}", ran.path());
    let two = output(distlock(
        &[("DISTLOCK_NODES", urls(2))],
        &["run", "ha", "-c", &job],
    ));
    assert_eq!(code(&two), 78, "{}", stderr(&two));
    for named in ["`strategy`", "redlock", "cluster", "sentinel"] {
        common::assert_stderr_says(&two, named, &format!("names {named}"));
    }
    assert!(!std::path::Path::new(ran.path()).exists(), "the job ran");
    let redlock_two = output(distlock(
        &[
            ("DISTLOCK_NODES", urls(2)),
            ("DISTLOCK_STRATEGY", "redlock".to_owned()),
        ],
        &["run", "ha", "-c", &job],
    ));
    assert_eq!(code(&redlock_two), 78, "{}", stderr(&redlock_two));
    common::assert_stderr_says(&redlock_two, "`nodes`", "");
    let four = output(distlock(
        &[
            ("DISTLOCK_NODES", urls(4)),
            ("DISTLOCK_STRATEGY", "redlock".to_owned()),
        ],
        &["run", "ha", "-c", "echo ran"],
    ));
    assert_eq!(code(&four), 0, "{}", stderr(&four));
    assert_eq!(stdout(&four), "ran\n");
    assert_eq!(
        stderr(&four).matches("needs 3 for a majority").count(),
        1,
        "said once: {}",
        stderr(&four)
    );
    common::assert_stderr_says(&four, "as 3 nodes do", "");
}

/// An ACL user refused a rule the operation needs is told which rule, on
/// both clients: `+time` (holder information reads the server's clock), or
/// the lock keys. Nothing is run and nothing is written.
#[test]
fn a_refused_acl_rule_is_named() {
    let server = RedisServer::start().expect("start");
    let mut rules = vec!["ACL", "SETUSER", "no-time"];
    rules.extend(lock_testkit::safety::LOCK_USER_ACL);
    server.admin(&rules).expect("ACL SETUSER");
    server
        .admin(&[
            "ACL", "SETUSER", "no-keys", "on", ">pw", "~other:*", "&*", "+@all",
        ])
        .expect("ACL SETUSER");
    let user = |name: &str, password: &str| {
        format!("redis://{name}:{password}@127.0.0.1:{}", server.port())
    };
    for client in common::clients() {
        for (url, holder_info, needs) in [
            (user("no-time", "lock-user-pw"), "true", "`+time`"),
            (user("no-keys", "pw"), "false", "~lock:*"),
        ] {
            let out = output(distlock(
                &[
                    ("DISTLOCK_NODES", url.as_str()),
                    ("DISTLOCK_CLIENT", client),
                    ("DISTLOCK_HOLDER_INFO", holder_info),
                ],
                &["run", "acl", "-c", "echo ran"],
            ));
            let context = format!("{client}, {needs}");
            assert_eq!(code(&out), 69, "{context}: {}", stderr(&out));
            assert_eq!(stdout(&out), "", "{context}: the job ran");
            let said = stderr(&out);
            assert!(
                said.contains("permission denied") && said.contains(needs),
                "{context}: {said}"
            );
            assert!(!said.contains("authentication failed"), "{context}: {said}");
            assert!(
                !is_held(&server, "acl"),
                "{context}: the lock was left held"
            );
        }
        // With a prefix of its own, the pattern is spelt out.
        let out = output(distlock(
            &[
                ("DISTLOCK_NODES", user("no-keys", "pw").as_str()),
                ("DISTLOCK_CLIENT", client),
                ("DISTLOCK_KEY_PREFIX", "jobs:"),
            ],
            &["run", "acl", "-c", "echo ran"],
        ));
        assert_eq!(code(&out), 69, "{client}: {}", stderr(&out));
        common::assert_stderr_says(&out, "`~jobs:*`", client);
    }
}

/// A port that answers, but not as Redis, is named as such on both clients.
#[test]
fn a_port_that_is_not_redis_is_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let clients = common::clients();
    let answers = clients.len() * 4;
    let http = std::thread::spawn(move || {
        listener.set_nonblocking(true).expect("nonblocking");
        let started = Instant::now();
        let mut answered = 0;
        while answered < answers && started.elapsed() < Duration::from_secs(20) {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    stream.set_nonblocking(false).expect("blocking");
                    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
                    let mut request = [0_u8; 512];
                    let _ = stream.read(&mut request);
                    let _ =
                        stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
                    answered += 1;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    for client in &clients {
        let out = output(distlock(
            &[
                ("DISTLOCK_NODES", format!("redis://127.0.0.1:{port}")),
                ("DISTLOCK_CLIENT", (*client).to_owned()),
            ],
            &["status", "web"],
        ));
        assert_eq!(code(&out), 69, "{client}: {}", stderr(&out));
        common::assert_stderr_says(&out, "did not answer as Redis", client);
    }
    drop(http);
}

/// Config errors name the field the user set: `ttl` for a TTL too short to
/// use (not Redlock's `node_timeout`), and the field a misspelt TOML key
/// most likely meant.
#[test]
fn config_errors_name_the_field_the_user_set() {
    let server = RedisServer::start().expect("start");
    let short = output(on(
        &server,
        &["run", "tiny", "--ttl", "1ms", "-c", "echo ran"],
    ));
    assert_eq!(code(&short), 78, "{}", stderr(&short));
    assert!(
        !stderr(&short).contains("node_timeout"),
        "{}",
        stderr(&short)
    );
    common::assert_stderr_says(&short, "TTL", "");
    // Three nodes: Redlock refuses one. The config is refused before any
    // node is reached.
    let redlock = output(distlock(
        &[
            (
                "DISTLOCK_NODES",
                format!(
                    "{},redis://127.0.0.1:1,redis://127.0.0.1:2",
                    server.url().expose()
                ),
            ),
            ("DISTLOCK_STRATEGY", "redlock".to_owned()),
        ],
        &["run", "tiny", "--ttl", "20ms", "-c", "echo ran"],
    ));
    assert_eq!(code(&redlock), 78, "{}", stderr(&redlock));
    common::assert_stderr_says(&redlock, "field `ttl`", "");
    let file = Scratch::new("toml");
    std::fs::write(
        &file.0,
        format!("nodes = [\"{}\"]\ntll = \"5s\"\n", server.url().expose()),
    )
    .expect("write the config");
    let misspelt = output(distlock::<&str>(
        &[],
        &["--config", file.path(), "status", "x"],
    ));
    assert_eq!(code(&misspelt), 78, "{}", stderr(&misspelt));
    common::assert_stderr_says(&misspelt, "did you mean `ttl`?", "");
}

/// `--help` lists the flock-style flags with their defaults, and the exit
/// codes.
#[test]
fn help_lists_defaults_and_exit_codes() {
    let top = output(distlock::<&str>(&[], &["--help"]));
    assert_eq!(code(&top), 0);
    for said in ["Exit codes", "69", "78", "--nodes", "DISTLOCK_LOG"] {
        assert!(stdout(&top).contains(said), "distlock --help: {said}");
    }
    let run = output(distlock::<&str>(&[], &["run", "--help"]));
    assert_eq!(code(&run), 0);
    for said in [
        "-n, --nonblock",
        "-w, --wait <TIME>",
        "forever",
        "wait_timeout (10s",
        "-E, --conflict-exit-code <N>",
        "[default: 75]",
        "-q, --quiet",
        "-c, --command <COMMAND>",
        "-s, --shared",
        "-x, --exclusive",
        "[default: 10s]",
        "ttl (30s",
        "128+n",
        "127",
        "130",
        "-n -q -E 0",
    ] {
        assert!(stdout(&run).contains(said), "distlock run --help: {said}");
    }
    for verb in ["status", "acquire", "extend", "release"] {
        let help = output(distlock::<&str>(&[], &[verb, "--help"]));
        assert!(stdout(&help).contains("Exit codes"), "{verb} --help");
    }
}

/// A wait on a server that went away says so at the default log level
/// after 10 s of failed attempts, instead of waiting in silence (`-w
/// forever` would never end otherwise), and SIGTERM then ends the wait
/// with 130. Takes about 11 s.
#[test]
fn a_long_wait_on_a_dead_server_warns() {
    let mut server = RedisServer::start().expect("start");
    server
        .admin(&["SET", "lock:{patient}", "someone-else", "PX", "1000"])
        .expect("SET");
    let log = Scratch::new("dead-wait");
    let mut waiter = on(
        &server,
        &["run", "-w", "forever", "patient", "-c", "echo ran"],
    )
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(log.path()).expect("log file"))
    .spawn()
    .expect("spawn the waiter");
    std::thread::sleep(Duration::from_millis(300));
    server.kill().expect("kill the server");
    let started = Instant::now();
    let said = loop {
        let said = std::fs::read_to_string(log.path()).unwrap_or_default();
        if said.contains("still waiting for the lock")
            || started.elapsed() > Duration::from_secs(20)
        {
            break said;
        }
        assert!(
            waiter.try_wait().expect("wait").is_none(),
            "the waiter ended: {said}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = nix_kill(&waiter);
    let code = finish(waiter);
    assert!(said.contains("still waiting for the lock"), "{said}");
    let said = std::fs::read_to_string(log.path()).unwrap_or_default();
    assert_eq!(code, 130, "interrupted while waiting: {said}");
    assert!(said.contains("while waiting for `patient`"), "{said}");
}

/// SIGTERM to `child`.
fn nix_kill(child: &Child) -> std::io::Result<()> {
    let status = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status()?;
    assert!(status.success(), "kill");
    Ok(())
}

/// A plain `run NAME` is flock's exclusive lock and the write of NAME's
/// read-write lock, as `-x` is: behind a stream of `-s` readers that never
/// leaves NAME free, it queues ahead of new readers and gets in once the
/// readers already in are done. It used to wait for a gap in the stream.
/// Its token is the write's: the next reader's epoch.
#[test]
fn a_plain_run_is_not_starved_by_readers() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let server = RedisServer::start().expect("start");
    for client in common::clients() {
        let name = format!("feed-{client}");
        let with_client = |args: &[&str]| {
            let mut command = on(&server, args);
            command.env("DISTLOCK_CLIENT", client);
            command
        };
        let done = Arc::new(AtomicBool::new(false));
        // Readers of 0.6 s, one every 0.1 s: six overlap, so the name is
        // never free while the stream lasts (at most 15 s).
        let stream = {
            let done = Arc::clone(&done);
            let reader = with_client(&["run", "-s", "-w", "20", &name, "--", "sleep", "0.6"]);
            std::thread::spawn(move || {
                let mut reader = reader;
                reader.stdout(Stdio::null()).stderr(Stdio::null());
                let started = Instant::now();
                let mut readers = Vec::new();
                while !done.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(15) {
                    readers.push(reader.spawn().expect("spawn a reader"));
                    std::thread::sleep(Duration::from_millis(100));
                }
                readers.into_iter().map(finish).collect::<Vec<i32>>()
            })
        };
        until_held(&server, &name);
        // A wait of 5 s: what the readers already in hold (0.6 s) and
        // the start of a few processes, with room for a loaded machine.
        let asked = Instant::now();
        let writer = output(with_client(&[
            "run",
            "-w",
            "5",
            &name,
            "-c",
            "echo $DISTLOCK_FENCING_TOKEN",
        ]));
        let waited = asked.elapsed();
        done.store(true, Ordering::SeqCst);
        let readers = stream.join().expect("the reader stream");
        assert_eq!(
            code(&writer),
            0,
            "{client}: the plain run waited {waited:?} behind readers: {}",
            stderr(&writer)
        );
        assert!(
            readers.iter().all(|code| *code == 0),
            "{client}: every reader ran: {readers:?}"
        );
        let token = stdout(&writer);
        let reader = output(with_client(&[
            "run",
            "-s",
            &name,
            "-c",
            "echo $DISTLOCK_FENCING_TOKEN",
        ]));
        assert_eq!(code(&reader), 0, "{}", stderr(&reader));
        assert_eq!(
            stdout(&reader),
            token,
            "{client}: a read's epoch is the plain run's token"
        );
    }
}

/// Every duration flag takes bare seconds as `-w` does (`--ttl 10` is ten
/// seconds), and a negative one is a plain error (78) that runs nothing,
/// not clap's tip to put it after `--`, where it would start the command.
#[test]
fn duration_flags_take_seconds_and_refuse_negatives() {
    let server = RedisServer::start().expect("start");
    let acquired = output(on(&server, &["acquire", "secs", "--ttl", "10", "--json"]));
    assert_eq!(code(&acquired), 0, "{}", stderr(&acquired));
    assert!(
        stdout(&acquired).contains("\"ttl_ms\":10000"),
        "--ttl 10 is ten seconds: {}",
        stdout(&acquired)
    );
    let out = output(on(&server, &["release", "secs", "--force"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let ran = output(on(
        &server,
        &[
            "run", "secs", "--ttl", "3", "--grace", "0.5", "-c", "echo ran",
        ],
    ));
    assert_eq!(code(&ran), 0, "{}", stderr(&ran));
    assert_eq!(stdout(&ran), "ran\n");
    let touched = Scratch::new("negative");
    for flag in ["--ttl", "--grace", "-w", "--wait"] {
        for value in ["-5s", "-5"] {
            let out = output(on(
                &server,
                &["run", "secs", flag, value, "--", "touch", touched.path()],
            ));
            assert_eq!(code(&out), 78, "{flag} {value}: {}", stderr(&out));
            assert!(
                !stderr(&out).contains("tip") && !stderr(&out).contains("use '--"),
                "{flag} {value}: no tip to use `--`: {}",
                stderr(&out)
            );
            common::assert_stderr_says(
                &out,
                "negative",
                &format!("{flag} {value}: says what is wrong"),
            );
            assert!(
                !std::path::Path::new(touched.path()).exists(),
                "{flag} {value}: the command ran"
            );
        }
    }
    let out = output(on(&server, &["acquire", "secs", "--ttl", "-5s"]));
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    common::assert_stderr_says(&out, "negative", "");
}

/// A semaphore whose limit differs from `--permits` is refused (78) with
/// what a shell user can do about it, `distlock limit NAME --permits N`,
/// which sets the limit for every host; nothing names a Rust method.
#[test]
fn a_mismatched_limit_names_the_distlock_limit_verb() {
    let server = RedisServer::start().expect("start");
    let holder = on(
        &server,
        &["run", "--permits", "4", "exports", "--", "sleep", "30"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn the holder");
    let _cleanup = KillOnDropChild(holder);
    until_held(&server, "exports");
    let mismatched = output(on(
        &server,
        &["run", "--permits", "2", "exports", "-c", "true"],
    ));
    assert_eq!(code(&mismatched), 78, "{}", stderr(&mismatched));
    common::assert_stderr_says(
        &mismatched,
        "distlock limit exports --permits 2",
        "names the verb",
    );
    assert!(
        !stderr(&mismatched).contains("set_limit"),
        "names no Rust method: {}",
        stderr(&mismatched)
    );
    let limited = output(on(&server, &["limit", "exports", "--permits", "2"]));
    assert_eq!(code(&limited), 0, "{}", stderr(&limited));
    common::assert_stdout_says(&limited, "was 4", "says the old limit");
    let now = output(on(
        &server,
        &["run", "--permits", "2", "exports", "-c", "echo in"],
    ));
    assert_eq!(code(&now), 0, "{}", stderr(&now));
    assert_eq!(stdout(&now), "in\n");
    let status = output(on(&server, &["status", "exports"]));
    common::assert_stdout_says(&status, "of 2 permits", "");
    let lock = output(on(
        &server,
        &["limit", "--key", "exports", "--permits", "0"],
    ));
    assert_eq!(code(&lock), 78, "{}", stderr(&lock));
}

/// `--permits` (and `limit`) outside 1..=999999999, the real range of a
/// semaphore's limit, are refused (78) with that range, whichever side
/// they miss it on.
#[test]
fn permits_out_of_range_report_the_real_range() {
    let server = RedisServer::start().expect("start");
    for value in ["0", "1000000000", "4000000000", "99999999999"] {
        for args in [
            &["run", "--permits", value, "ranged", "-c", "echo ran"][..],
            &["limit", "ranged", "--permits", value],
        ] {
            let out = output(on(&server, args));
            assert_eq!(code(&out), 78, "{args:?}: {}", stderr(&out));
            common::assert_stderr_says(
                &out,
                "1 to 999999999",
                &format!("{args:?}: the real range"),
            );
            assert!(stdout(&out).is_empty(), "{args:?}: {}", stdout(&out));
        }
    }
}

/// `status` escapes control characters in a name as `list` does, so a
/// name cannot drive the operator's terminal: held or free, as a lock, a
/// read-write lock or a semaphore.
#[test]
fn status_escapes_control_characters_in_names() {
    let server = RedisServer::start().expect("start");
    let name = "bell\u{7}\u{1b}[31mred";
    let escaped = "bell\\u{7}\\u{1b}[31mred";
    let free = output(on(&server, &["status", name]));
    assert_eq!(code(&free), 0, "{}", stderr(&free));
    assert!(!stdout(&free).contains('\u{1b}'), "{:?}", stdout(&free));
    assert!(stdout(&free).contains(escaped), "{:?}", stdout(&free));
    for (verb, what) in [
        (&["acquire", "--ttl", "10s"][..], "lock"),
        (&["run", "--permits", "3"], "semaphore"),
        (&["run", "-s"], "read-write lock"),
    ] {
        let name = format!("{what} {name}");
        let escaped = format!("{what} {escaped}");
        let name = name.as_str();
        let mut args = verb.to_vec();
        args.push(name);
        if verb[0] == "run" {
            args.extend(["--", "sleep", "30"]);
        }
        let holder = on(&server, &args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the holder");
        let holder = KillOnDropChild(holder);
        until_held(&server, name);
        let held = output(on(&server, &["status", name]));
        assert_eq!(code(&held), 0, "{what}: {}", stderr(&held));
        assert!(
            !stdout(&held).contains('\u{1b}') && !stdout(&held).contains('\u{7}'),
            "{what}: {:?}",
            stdout(&held)
        );
        assert!(
            stdout(&held).contains(&escaped),
            "{what}: {:?}",
            stdout(&held)
        );
        drop(holder);
    }
}

/// Redlock over one node is refused (78, naming `nodes`) as two nodes are:
/// it is a single-node lock without fencing tokens.
#[test]
fn redlock_over_one_node_is_refused() {
    let server = RedisServer::start().expect("start");
    let ran = Scratch::new("redlock-one");
    let out = output(distlock(
        &[
            ("DISTLOCK_NODES", server.url().expose().to_owned()),
            ("DISTLOCK_STRATEGY", "redlock".to_owned()),
        ],
        &["run", "solo", "-c", &format!("echo ran > {}", ran.path())],
    ));
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    common::assert_stderr_says(&out, "`nodes`", "");
    common::assert_stderr_says(&out, "single", "");
    assert!(!std::path::Path::new(ran.path()).exists(), "the job ran");
}

/// Kills a child the test started if it still runs when the test ends.
struct KillOnDropChild(Child);

impl Drop for KillOnDropChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
