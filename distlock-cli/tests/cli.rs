//! The `distlock` command end to end, against real servers: exit codes,
//! try-once contention, the fencing token in the environment, a lost lock or
//! a signal stopping the command's whole process group, a killed `distlock`
//! taking its command and everything the command started with it, signals
//! the command answers itself, status and forced release, and the
//! environment it reads.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lock_testkit::RedisServer;

mod common;

use common::{clients, distlock, output, owner_of, DISTLOCK};

/// The variables every check here runs with: `server`, and a 2 s TTL.
fn on(server: &RedisServer) -> [(&'static str, String); 2] {
    [
        ("DISTLOCK_NODES", server.url().expose().to_owned()),
        ("DISTLOCK_TTL", "2s".to_owned()),
    ]
}

/// What `distlock status NAME --json` prints about `name` on `server`.
fn status_json(server: &RedisServer, name: &str) -> String {
    stdout(&output(distlock(&on(server), &["status", name, "--json"])))
}

/// Asserts that `name` is free on `server` with its fencing counter at
/// `token` (`null`: none was written); `context` leads the failure.
fn assert_free_with_token(server: &RedisServer, name: &str, token: &str, context: &str) {
    let status = status_json(server, name);
    assert!(
        status.contains("\"held\":false") && status.contains(&format!("\"fencing_token\":{token}")),
        "{context}: {status}"
    );
}

/// Takes `name` on `server` with `distlock acquire` and returns the owner
/// token it hands over.
fn acquired(server: &RedisServer, name: &str) -> String {
    owner_of(&output(distlock(
        &on(server),
        &["acquire", "--key", name, "--wait", "0"],
    )))
}

/// Asserts that `out` exited with `expected`, showing its stderr if not.
fn assert_code(out: &Output, expected: i32) {
    assert_eq!(code(out), expected, "stderr: {}", stderr(out));
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Polls `distlock status` until `name` is held, for at most 10 s.
fn wait_until_held(server: &RedisServer, name: &str) {
    let started = Instant::now();
    loop {
        if status_json(server, name).contains("\"held\":true") {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name} was never taken"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to 10 s for `child` to exit; `what` says what a hang means.
fn wait_for_exit(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A scratch directory for one test, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("distlock-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Scratch(dir)
    }

    fn file(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits up to 10 s for a process id to appear in `path`.
fn read_pid(path: &std::path::Path) -> String {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') && !text.trim().is_empty() {
                return text.trim().to_owned();
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the command never wrote {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` has ended: gone, or a zombie nobody reaped yet.
fn has_ended(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state is the first field after the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

/// Waits up to 5 s for `pid` to end; `what` names it.
fn assert_ends(pid: &str, what: &str) {
    let started = Instant::now();
    while !has_ended(pid) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what} (pid {pid}) still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The process group of process `pid`, from `/proc`.
fn group_of(pid: &str) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // `pid (comm) state ppid pgrp ...`; comm may hold spaces and `)`.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(2))
        .expect("a process group")
        .to_owned()
}

/// Kills a process the test started, directly or not, if it still runs when
/// the test ends (a failed assertion must not leave it behind).
struct KillOnDrop(String);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !self.0.is_empty() && !has_ended(&self.0) {
            let _ = Command::new("kill")
                .args(["-KILL", &self.0])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A `distlock run` spawned over a shell that wrote a pid into a file:
/// both are killed when this drops, if they still run.
struct Running {
    run: std::process::Child,
    /// The pid the shell wrote.
    pid: String,
    _kill: [KillOnDrop; 2],
    _scratch: Scratch,
}

/// Spawns `distlock run --key <key> <options>... -- sh -c <script>` on
/// `server`, where `script(pid_file)` writes a pid into `pid_file`, and
/// waits for that pid.
fn spawn_run(
    server: &RedisServer,
    key: &str,
    options: &[&str],
    script: impl Fn(&str) -> String,
) -> Running {
    let scratch = Scratch::new(key);
    let pid_file = scratch.file("command.pid");
    let script = script(&pid_file.display().to_string());
    let mut args = vec!["run", "--key", key];
    args.extend_from_slice(options);
    args.extend(["--", "sh", "-c", &script]);
    let run = distlock(&on(server), &args)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn");
    let distlock = KillOnDrop(run.id().to_string());
    let pid = read_pid(&pid_file);
    Running {
        run,
        _kill: [distlock, KillOnDrop(pid.clone())],
        pid,
        _scratch: scratch,
    }
}

/// The arguments of `distlock run --key <key> -- sh -c <script>`.
fn sh_job<'a>(key: &'a str, script: &'a str) -> [&'a str; 7] {
    ["run", "--key", key, "--", "sh", "-c", script]
}

/// A shell script that starts `sleep 60` in the background, writes its
/// pid into `pid_file` and waits for it.
fn background_sleep(pid_file: &str) -> String {
    format!("sleep 60 & echo $! > '{pid_file}'; wait")
}

/// Asserts that nobody holds `name` on `server`; `what` says what a holder
/// would mean.
fn assert_unheld(server: &RedisServer, name: &str, what: &str) {
    let key = format!("lock:{{{name}}}");
    let exists = lock_testkit::peek::int(server, &["EXISTS", &key]);
    assert_eq!(exists, 0, "{name}: {what}");
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("an exit code")
}

#[test]
fn run_passes_the_exit_code_and_the_fencing_token() {
    let server = RedisServer::start().expect("start");
    let script = "echo token=$DISTLOCK_FENCING_TOKEN key=$DISTLOCK_KEY; exit 3";
    let out = output(distlock(&on(&server), &sh_job("job", script)));
    assert_code(&out, 3);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("token=1 key=job"), "{stdout}");
    let out = output(distlock(
        &on(&server),
        &["run", "--key", "job", "--", "true"],
    ));
    assert_eq!(code(&out), 0);
    assert_free_with_token(&server, "job", "2", "job");
}

/// With `DISTLOCK_FENCING=false` a plain lock has no fencing token:
/// `acquire` prints none and writes no counter; the lock is still taken,
/// renewed and released. A plain `run` is the name's read-write write,
/// which keeps its token (as fair mode and the reentrant strategy do).
#[test]
fn fencing_off_gives_a_plain_lock_no_token() {
    let server = RedisServer::start().expect("start");
    for client in clients() {
        let name = format!("unfenced-{client}");
        let written = format!("written-{client}");
        let out = output(
            distlock_on(
                &server,
                client,
                &sh_job(
                    &written,
                    "echo token=[${DISTLOCK_FENCING_TOKEN-unset}] key=$DISTLOCK_KEY",
                ),
            )
            .env("DISTLOCK_FENCING", "false"),
        );
        assert_eq!(code(&out), 0, "{client}: {out:?}");
        assert!(
            stdout(&out).contains(&format!("token=[1] key={written}")),
            "{client}: {out:?}"
        );
        let out = output(
            distlock_on(&server, client, &["acquire", "--key", &name, "--wait", "0"])
                .env("DISTLOCK_FENCING", "false"),
        );
        assert_eq!(code(&out), 0, "{client}: {out:?}");
        assert!(
            !stdout(&out).contains("DISTLOCK_FENCING_TOKEN"),
            "{client}: {out:?}"
        );
        let owner = owner_of(&out);
        for verb in ["extend", "release"] {
            let out = output(
                distlock_on(&server, client, &[verb, "--key", &name])
                    .env("DISTLOCK_FENCING", "false")
                    .env("DISTLOCK_OWNER", &owner),
            );
            assert_eq!(code(&out), 0, "{client} {verb}: {out:?}");
        }
        assert_free_with_token(
            &server,
            &name,
            "null",
            &format!("{client}: no counter was written"),
        );
    }
}

#[test]
fn try_once_skips_a_held_lock() {
    let server = RedisServer::start().expect("start");
    let mut holder = distlock(&on(&server), &["run", "--key", "cron", "--", "sleep", "5"])
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn the holder");
    wait_until_held(&server, "cron");
    let started = Instant::now();
    let out = output(distlock(
        &on(&server),
        &["run", "--key", "cron", "--wait", "0", "--", "echo", "ran"],
    ));
    assert_code(&out, 75);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("ran"),
        "the command must not run"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "try-once returns at once"
    );
    let _ = holder.kill();
    let _ = holder.wait();
}

#[test]
fn a_lost_lock_terminates_the_command() {
    let server = RedisServer::start().expect("start");
    let script = |pid_file: &str| format!("echo $$ > '{pid_file}'; exec sleep 30");
    let mut running = spawn_run(&server, "long", &["--grace", "1s"], script);
    server
        .admin(&["DEL", "lock:{long}"])
        .expect("delete the lock behind its back");
    let status = wait_for_exit(
        &mut running.run,
        "distlock did not stop after losing the lock",
    );
    assert_eq!(status.code(), Some(76));
    assert!(
        has_ended(&running.pid),
        "the command (pid {}) still runs",
        running.pid
    );
}

#[test]
fn status_and_forced_release() {
    let server = RedisServer::start().expect("start");
    server
        .admin(&["SET", "lock:{stuck}", "dead-holder", "PX", "60000"])
        .expect("SET");
    let out = output(distlock(&on(&server), &["status", "stuck"]));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("stuck: held"),
        "{out:?}"
    );
    let out = output(distlock(&on(&server), &["release", "stuck"]));
    assert_eq!(code(&out), 78, "release without --force is refused");
    let out = output(distlock(
        &on(&server),
        &["release", "--force", "stuck", "--json"],
    ));
    assert_eq!(code(&out), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"released\":true"));
    assert!(status_json(&server, "stuck").contains("\"held\":false"));
}

#[test]
fn bad_config_and_unreachable_servers_have_their_codes() {
    let server = RedisServer::start().expect("start");
    let out = output(
        distlock(&on(&server), &["run", "--key", "k", "--", "true"])
            .env("DISTLOCK_NODES", "http://nowhere"),
    );
    assert_code(&out, 78);
    assert!(stderr(&out).contains("nodes[0]"));
    let out = output(distlock(&on(&server), &["run", "--key", "", "--", "true"]));
    assert_eq!(code(&out), 78, "an empty key");
    let port = lock_testkit::free_port().expect("port");
    let started = Instant::now();
    let out = output(
        distlock(&on(&server), &["status", "k"])
            .env("DISTLOCK_NODES", format!("redis://127.0.0.1:{port}")),
    );
    assert_code(&out, 69);
    assert!(started.elapsed() < Duration::from_secs(5));
    let out = output(distlock(
        &on(&server),
        &["run", "--key", "k", "--", "/no/such/program"],
    ));
    assert_eq!(code(&out), 127);
}

#[test]
fn interrupting_distlock_stops_the_command_and_releases_the_lock() {
    let server = RedisServer::start().expect("start");
    let mut run = distlock(
        &on(&server),
        &["run", "--key", "interrupted", "--", "sleep", "30"],
    )
    .stdin(Stdio::null())
    .spawn()
    .expect("spawn");
    wait_until_held(&server, "interrupted");
    let pid = run.id().to_string();
    Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill -INT");
    let status = wait_for_exit(&mut run, "distlock ignored Ctrl-C");
    assert_eq!(status.code(), Some(130));
    assert!(
        status_json(&server, "interrupted").contains("\"held\":false"),
        "the lock was released"
    );
}

#[test]
fn the_log_filter_and_the_job_variables_are_not_config() {
    let server = RedisServer::start().expect("start");
    // The job inherits DISTLOCK_LOG, DISTLOCK_KEY and DISTLOCK_FENCING_TOKEN.
    let nested = format!("'{DISTLOCK}' status nested");
    let out =
        output(distlock(&on(&server), &sh_job("nested", &nested)).env("DISTLOCK_LOG", "debug"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 0, "stderr: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // A plain `run` is the write of the name's read-write lock.
    assert!(
        stdout.contains("nested: read-write lock, 1 writer(s)"),
        "the nested call sees the lock: {stdout}"
    );
    assert!(
        stderr.contains("DEBUG"),
        "DISTLOCK_LOG=debug logs: {stderr}"
    );
    assert!(!stderr.contains("WARN"), "nothing to warn about: {stderr}");
}

#[test]
fn a_misspelt_variable_is_named_in_a_warning_and_ignored() {
    let server = RedisServer::start().expect("start");
    let out = output(distlock(&on(&server), &["status", "k"]).env("DISTLOCK_TLL", "1s"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 0, "stderr: {stderr}");
    assert!(
        stderr.contains("DISTLOCK_TLL") && stderr.contains("DISTLOCK_TTL"),
        "the warning names the variable and the field: {stderr}"
    );
}

#[test]
fn a_variable_that_is_not_unicode_breaks_nothing() {
    use std::os::unix::ffi::OsStrExt;
    let server = RedisServer::start().expect("start");
    let out = output(
        distlock(&on(&server), &["status", "k"])
            .env("SOME_OTHER_TOOL", std::ffi::OsStr::from_bytes(b"caf\xe9")),
    );
    assert_code(&out, 0);
}

#[test]
fn a_lost_lock_stops_the_whole_process_group() {
    let server = RedisServer::start().expect("start");
    let mut running = spawn_run(&server, "group", &["--grace", "2s"], background_sleep);
    // Another owner takes the key: the next renewal finds it gone.
    server
        .admin(&["SET", "lock:{group}", "someone-else", "PX", "60000"])
        .expect("take the lock behind its back");
    let status = wait_for_exit(
        &mut running.run,
        "distlock did not stop after losing the lock",
    );
    assert_eq!(status.code(), Some(76));
    assert_ends(&running.pid, "the command's background process");
    let holder = server.admin(&["GET", "lock:{group}"]).expect("GET");
    assert_eq!(
        holder.as_text(),
        Some("someone-else"),
        "the release after a loss is ownership-checked"
    );
}

/// Runs `distlock run -- sh -c <script>`, where `script` writes a pid into
/// the file it is given, kills distlock with SIGKILL, and asserts that the
/// process with that pid ends too; `what` names it in the failure.
fn a_killed_distlock_ends(name: &str, script: impl Fn(&str) -> String, what: &str) {
    let server = RedisServer::start().expect("start");
    let mut running = spawn_run(&server, name, &[], script);
    running.run.kill().expect("kill -9 distlock");
    let _ = wait_for_exit(&mut running.run, "distlock survived SIGKILL");
    assert_ends(&running.pid, what);
}

#[test]
fn a_killed_distlock_takes_its_command_with_it() {
    a_killed_distlock_ends(
        "pdeathsig",
        |pid_file| format!("echo $$ > '{pid_file}'; exec sleep 60"),
        "the command of a distlock killed with SIGKILL",
    );
}

#[test]
fn a_killed_distlock_takes_the_whole_group_with_it() {
    a_killed_distlock_ends(
        "pdeathsig-group",
        background_sleep,
        "the background process of a distlock killed with SIGKILL",
    );
}

#[test]
fn a_command_killed_by_a_signal_exits_with_128_plus_its_number() {
    let server = RedisServer::start().expect("start");
    let out = output(distlock(
        &on(&server),
        &sh_job("signalled", "kill -USR1 $$"),
    ));
    assert_eq!(
        code(&out),
        128 + 10,
        "SIGUSR1 is 10; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_signal_to_the_group_is_for_the_command_to_answer() {
    let server = RedisServer::start().expect("start");
    let script =
        |pid_file: &str| format!("trap 'exit 7' TERM; echo $$ > '{pid_file}'; sleep 60 & wait");
    let mut running = spawn_run(&server, "trapped", &[], script);
    let command = running.pid.clone();
    let group = group_of(&command);
    assert_ne!(
        group,
        group_of(&std::process::id().to_string()),
        "the command runs in a group of its own"
    );
    Command::new("kill")
        .args(["-TERM", "--", &format!("-{group}")])
        .status()
        .expect("kill -TERM the group");
    let status = wait_for_exit(&mut running.run, "distlock did not end with its command");
    assert_eq!(
        status.code(),
        Some(7),
        "the command's trap decides the exit code: {status:?}"
    );
    assert_unheld(&server, "trapped", "the lock was not released");
}

#[test]
fn sighup_stops_the_command_and_releases_the_lock() {
    let server = RedisServer::start().expect("start");
    let mut running = spawn_run(&server, "hup", &["--grace", "3s"], background_sleep);
    Command::new("kill")
        .args(["-HUP", &running.run.id().to_string()])
        .status()
        .expect("kill -HUP");
    let status = wait_for_exit(&mut running.run, "distlock ignored SIGHUP");
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert_ends(&running.pid, "the command's background process");
    assert_unheld(&server, "hup", "the lock was not released");
}

/// A least-privilege Redis user (the lock prefix's keys, no pub/sub
/// channels) runs jobs: the release succeeds although its publish is refused,
/// a waiting `distlock run` gets the lock soon after, and nothing reports a
/// failed release. A plain `run` is a read-write lock's write, whose
/// scripts keep a sorted set and a list and read the server's clock.
#[test]
fn a_least_privilege_user_runs_jobs() {
    let server = RedisServer::start().expect("start");
    let mut rules = vec!["ACL", "SETUSER", "lock-user"];
    rules.extend(lock_testkit::safety::LOCK_USER_ACL);
    rules.extend(["+@sortedset", "+@list", "+time"]);
    server.admin(&rules).expect("ACL SETUSER");
    let url = format!("redis://lock-user:lock-user-pw@127.0.0.1:{}", server.port());
    let as_user = |args: &[&str]| {
        let mut command = distlock(&on(&server), args);
        command.env("DISTLOCK_NODES", &url);
        command
    };
    let mut first = as_user(&sh_job("acl", "sleep 0.5"))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the first job");
    wait_until_held(&server, "acl");
    let started = Instant::now();
    let second = output(as_user(&[
        "run", "--key", "acl", "--wait", "5s", "--", "true",
    ]));
    let waited = started.elapsed();
    let first_status = wait_for_exit(&mut first, "the first job never ended");
    let mut first_stderr = String::new();
    std::io::Read::read_to_string(first.stderr.as_mut().expect("stderr"), &mut first_stderr)
        .expect("read stderr");
    assert!(
        first_status.success(),
        "first job: {first_status:?} {first_stderr}"
    );
    assert_eq!(
        code(&second),
        0,
        "second job: {}",
        String::from_utf8_lossy(&second.stderr)
    );
    let second_stderr = String::from_utf8_lossy(&second.stderr);
    for stderr in [first_stderr.as_str(), &second_stderr] {
        assert!(!stderr.contains("release failed"), "{stderr}");
        assert!(!stderr.contains("NOPERM"), "{stderr}");
    }
    assert!(
        waited < Duration::from_millis(1500),
        "the waiter took {waited:?}; the holder's TTL is 2 s"
    );
    assert_unheld(&server, "acl", "the lock was not released");
}

/// `distlock` with the given client.
fn distlock_on(server: &RedisServer, client: &str, args: &[&str]) -> Command {
    let mut command = distlock(&on(server), args);
    command.env("DISTLOCK_CLIENT", client);
    command
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A multi-step shell script, as users write it: `acquire` into the
/// environment, work, `extend`, work, `release`; the token never on a
/// command line.
#[test]
fn a_script_acquires_extends_and_releases_across_commands() {
    let server = RedisServer::start().expect("start");
    for client in clients() {
        let name = format!("deploy-{client}");
        let script = format!(
            r#"out=$("$DISTLOCK_BIN" acquire --key {name} --ttl 2s --wait 0) || exit $?
eval "$out"
test -n "$DISTLOCK_FENCING_TOKEN" || exit 90
sh -c 'sleep 0.1 & wait'
"$DISTLOCK_BIN" status {name} --json | grep -q '"held":true' || exit 91
"$DISTLOCK_BIN" extend --key {name} --ttl 5s || exit $?
"$DISTLOCK_BIN" status {name} --json | grep -q '"remaining_ms":[34]' || exit 92
"$DISTLOCK_BIN" release --key {name} || exit $?
"$DISTLOCK_BIN" status {name} --json | grep -q '"held":false' || exit 93
"$DISTLOCK_BIN" release --key {name}"#
        );
        let mut command = distlock_on(&server, client, &[]);
        command
            .env("DISTLOCK_BIN", DISTLOCK)
            .env_remove("DISTLOCK_TTL")
            .arg("--help");
        let out = output(
            Command::new("sh")
                .arg("-c")
                .arg(&script)
                .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?)))),
        );
        // The last release finds the lock gone: 76, and it says so.
        assert_eq!(code(&out), 76, "{client}: {out:?}");
        assert!(stderr(&out).contains("is not held"), "{client}: {out:?}");
    }
}

#[test]
fn acquire_refuses_a_held_lock_and_prints_json() {
    let server = RedisServer::start().expect("start");
    for client in clients() {
        let name = format!("json-{client}");
        let out = output(distlock_on(
            &server,
            client,
            &["acquire", "--key", &name, "--wait", "0", "--json"],
        ));
        assert_eq!(code(&out), 0, "{out:?}");
        let printed = stdout(&out);
        for field in [
            "\"owner\":\"dl1.lock.1.2000.",
            "\"fencing_token\":1",
            "\"ttl_ms\":2000",
        ] {
            assert!(printed.contains(field), "{client}: {field} in {printed}");
        }
        let out = output(distlock_on(
            &server,
            client,
            &["acquire", "--key", &name, "--wait", "100ms"],
        ));
        assert_eq!(code(&out), 75, "{client}: held by the first: {out:?}");
        assert!(stdout(&out).is_empty(), "no token printed: {out:?}");
    }
}

/// A wrong token changes nothing (76, lock still held); a malformed one,
/// or none, is a usage error (78); the token may come from a file.
#[test]
fn release_and_extend_act_only_for_the_owner() {
    let server = RedisServer::start().expect("start");
    let scratch = Scratch::new("owner-verbs");
    for client in clients() {
        let (name, other) = (format!("owned-{client}"), format!("other-{client}"));
        let mine = owner_of(&output(distlock_on(
            &server,
            client,
            &["acquire", "--key", &name, "--wait", "0"],
        )));
        let theirs = owner_of(&output(distlock_on(
            &server,
            client,
            &["acquire", "--key", &other, "--wait", "0"],
        )));
        for verb in ["release", "extend"] {
            let out = output(
                distlock_on(&server, client, &[verb, "--key", &name])
                    .env("DISTLOCK_OWNER", &theirs),
            );
            assert_eq!(
                code(&out),
                76,
                "{client} {verb} with another's token: {out:?}"
            );
            assert!(stderr(&out).contains("not held by this owner"), "{out:?}");
            assert!(
                !stderr(&out).contains(&theirs),
                "the token is never printed back: {out:?}"
            );
        }
        let status = status_json(&server, &name);
        assert!(status.contains("\"held\":true"), "untouched: {status}");
        for bad in [
            &["release", "--key", &name, "--owner", "garbage"][..],
            &["extend", "--key", &name, "--owner", "dl1.1.zz.owner"],
            &["release", "--key", &name],
            &["extend", "--key", &name],
            &["release", &name, "--key", &name, "--force"],
        ] {
            let out = output(distlock_on(&server, client, bad));
            assert_eq!(code(&out), 78, "{client} {bad:?}: {out:?}");
        }
        // A token where the name goes is refused, and not echoed.
        let out = output(distlock_on(&server, client, &["status", &mine]));
        assert_eq!(code(&out), 78, "{out:?}");
        assert!(!stderr(&out).contains(&mine), "{out:?}");
        let file = scratch.file(&format!("owner-{client}"));
        std::fs::write(&file, format!("{mine}\n")).expect("write the token");
        let out = output(distlock_on(
            &server,
            client,
            &[
                "release",
                "--key",
                &name,
                "--owner-file",
                file.to_str().expect("utf-8"),
                "--json",
            ],
        ));
        assert_eq!(code(&out), 0, "{client}: {out:?}");
        assert!(stdout(&out).contains("\"released\":true"), "{out:?}");
        let out = output(distlock_on(
            &server,
            client,
            &["release", "--key", &other, "--owner", &theirs],
        ));
        assert_eq!(code(&out), 0, "{client}: the flag works too: {out:?}");
    }
}

/// With `holder_info`, `status` shows who holds the lock (host, pid, label,
/// since when), in text and JSON, with each client, and never the owner
/// token; without it, `holder` is null.
#[test]
fn status_shows_the_holder_but_never_the_owner() {
    let server = RedisServer::start().expect("start");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the host name")
        .trim()
        .to_owned();
    for client in distlock::ClientKind::compiled() {
        let client = client.to_string();
        let with_holder = |args: &[&str]| {
            let mut command = distlock(&on(&server), args);
            command
                .env("DISTLOCK_CLIENT", &client)
                .env("DISTLOCK_HOLDER_INFO", "true")
                .env("DISTLOCK_HOLDER_LABEL", "nightly report");
            command
        };
        // A plain lock, which stores holder information (a plain `run` is
        // a read-write lock's write, which stores none).
        let run = with_holder(&["acquire", "--key", "report", "--ttl", "10s"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the holder");
        let pid = run.id();
        let acquired = run.wait_with_output().expect("acquire");
        assert_eq!(code(&acquired), 0, "{client}: {acquired:?}");
        let value = server
            .admin(&["GET", "lock:{report}"])
            .expect("GET")
            .as_text()
            .expect("the hold's value")
            .to_owned();
        let (owner, _nonce) = value.split_once(':').expect("<owner>:<nonce>");
        let json = output(with_holder(&["status", "report", "--json"]));
        let json = String::from_utf8_lossy(&json.stdout).into_owned();
        let status: serde_json::Value = serde_json::from_str(&json).expect(&json);
        let holder = &status["holder"];
        assert_eq!(holder["host"], host.as_str(), "{client}: {json}");
        assert_eq!(holder["pid"], pid, "{client}: {json}");
        assert_eq!(holder["label"], "nightly report", "{client}: {json}");
        assert!(
            holder["acquired_at"]
                .as_str()
                .is_some_and(|at| at.ends_with('Z')),
            "{client}: {json}"
        );
        let text = output(with_holder(&["status", "report"]));
        let text = String::from_utf8_lossy(&text.stdout).into_owned();
        assert!(
            text.contains(&format!("pid {pid} on {host}")) && text.contains("nightly report"),
            "{client}: {text}"
        );
        for shown in [&json, &text] {
            assert!(
                !shown.contains(owner),
                "{client}: the owner token is shown: {shown}"
            );
        }
        let out = output(distlock(&on(&server), &["release", "--force", "report"]));
        assert_eq!(code(&out), 0);
        let json = output(distlock(&on(&server), &["status", "report", "--json"]));
        let status: serde_json::Value = serde_json::from_slice(&json.stdout).expect("status JSON");
        assert!(status["holder"].is_null(), "{client}: {status}");
    }
}

/// The hand-over verbs on bad input: a server that is down (69, quickly),
/// an empty or oversized lock name and a huge token (78), each with a
/// message and no panic.
#[test]
fn hand_over_verbs_on_bad_input() {
    let server = RedisServer::start().expect("start");
    let token = acquired(&server, "bad-input");
    let port = lock_testkit::free_port().expect("port");
    let down = format!("redis://127.0.0.1:{port}");
    for args in [
        &["acquire", "--key", "k", "--wait", "0"][..],
        &["extend", "--key", "k"],
        &["release", "--key", "k"],
        &["list"],
    ] {
        let started = Instant::now();
        let out = output(
            distlock(&on(&server), args)
                .env("DISTLOCK_NODES", &down)
                .env("DISTLOCK_OWNER", &token),
        );
        assert_eq!(code(&out), 69, "{args:?}: {out:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "{args:?} hung");
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
    let long_name = "n".repeat(100_000);
    let huge_token = format!("dl1.lock.1.2000.0123456789abcdef.{}", "o".repeat(100_000));
    for (args, owner) in [
        (vec!["acquire", "--key", ""], token.as_str()),
        (vec!["acquire", "--key", long_name.as_str()], token.as_str()),
        (vec!["extend", "--key", ""], token.as_str()),
        (vec!["release", "--key", long_name.as_str()], token.as_str()),
        (vec!["extend", "--key", "bad-input"], huge_token.as_str()),
        (vec!["release", "--key", "bad-input"], ""),
    ] {
        let out = output(distlock(&on(&server), &args).env("DISTLOCK_OWNER", owner));
        assert_eq!(code(&out), 78, "{:?}: {out:?}", &args[..2]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("distlock: "), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let status = status_json(&server, "bad-input");
    assert!(
        status.contains("\"held\":true"),
        "nothing was changed: {status}"
    );
}

/// Holder information is written by anyone who may write the lock's keys:
/// a time past the year 9999 (a foreign or corrupted holder hash) is shown
/// as the number it is, one that is no number is left out with the rest of
/// the holder information, and `status`, `status --json` and `list` show
/// the lock held, without a panic or an error.
#[test]
fn a_holder_time_past_the_year_9999_is_shown_raw() {
    let server = RedisServer::start().expect("start");
    let far = "300000000000000000000";
    let micros = "18446744073709551615";
    // Bound to the lock's value, as a grant binds what it writes: holder
    // information bound to no hold is nobody's, and not shown.
    let bound = server
        .admin(&["EVAL", "return redis.sha1hex(ARGV[1])", "0", "someone:1"])
        .expect("SHA-1")
        .as_text()
        .expect("hex")
        .to_owned();
    for (at, shown) in [(far, None), (micros, Some(micros))] {
        server
            .admin(&["SET", "lock:{foreign}", "someone:1", "PX", "60000"])
            .expect("SET");
        server
            .admin(&[
                "HSET",
                "lock:{foreign}:holder",
                "host",
                "elsewhere",
                "pid",
                "7",
                "acquired_at_us",
                at,
                "hold",
                &bound,
            ])
            .expect("HSET");
        for client in clients() {
            for args in [
                &["status", "foreign"][..],
                &["status", "foreign", "--json"],
                &["list"],
                &["list", "--json"],
            ] {
                let out = output(distlock_on(&server, client, args));
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(!stderr.contains("panicked"), "{client} {args:?}: {stderr}");
                assert_eq!(code(&out), 0, "{client} {args:?}: {stderr}");
                let text = stdout(&out);
                assert!(
                    text.contains("held") || text.contains("foreign"),
                    "{client} {args:?}: the lock is shown: {text}"
                );
                assert!(
                    !text.contains("error\":\"") && !text.contains("unexpected"),
                    "{client} {args:?}: {text}"
                );
                if let Some(shown) = shown {
                    assert!(
                        text.contains(&format!("{shown} µs after 1970")),
                        "{client} {args:?}: {text}"
                    );
                }
            }
        }
    }
}

/// Every duration flag is bounded when it is parsed: a `--grace` that no
/// clock can add is refused with 78 before anything runs (it used to panic
/// when the command had to be stopped).
#[test]
fn absurd_durations_are_refused_when_parsed() {
    let server = RedisServer::start().expect("start");
    let absurd = "300000000000years";
    let runs = ["--grace", "--wait", "--ttl"]
        .map(|flag| vec!["run", "--key", "g", flag, absurd, "--", "true"]);
    let hand_over = ["acquire", "extend"].map(|verb| vec![verb, "--key", "g", "--ttl", absurd]);
    for args in runs.iter().chain(&hand_over) {
        let out = output(distlock(&on(&server), args).env("DISTLOCK_OWNER", "x"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 78, "{args:?}: {stderr}");
        assert!(stderr.contains("100 years"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    assert!(
        stdout(&output(distlock(&on(&server), &["status", "g"]))).contains("free"),
        "nothing took the lock"
    );
}

/// `distlock acquire` with a strategy that cannot hand a lease over
/// (reentrant) refuses before it takes the lock: it used to take it, fail
/// to hand it off (78), and exit with the lock held by nobody for its TTL.
#[test]
fn acquire_refuses_before_taking_what_it_cannot_hand_off() {
    let server = RedisServer::start().expect("start");
    for client in clients() {
        let out = output(
            distlock_on(
                &server,
                client,
                &["acquire", "--key", "nested", "--wait", "0"],
            )
            .env("DISTLOCK_STRATEGY", "reentrant")
            .env("DISTLOCK_TTL", "60s"),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 78, "{client}: {stderr}");
        assert!(stderr.contains("hand off"), "{client}: {stderr}");
        assert_unheld(&server, "nested", &format!("{client}: the lock was taken"));
    }
}

/// A TCP forwarder to `upstream` that, once armed, forwards the next chunk
/// the client sends with `EVAL` or `MULTI` in it (an acquire script or
/// transaction), then cuts that
/// connection before the reply comes back: the grant ran, its reply is lost.
/// Connections after that are carried whole.
fn cutting_proxy(upstream: u16) -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let armed = Arc::new(AtomicBool::new(true));
    let arm = Arc::clone(&armed);
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                continue;
            };
            let (mut from_client, mut to_server) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            let (mut from_server, mut to_client) = (server, client);
            let armed = Arc::clone(&arm);
            // Set before the cut chunk goes out: no reply passes after it.
            let cutting = Arc::new(AtomicBool::new(false));
            let cut = Arc::clone(&cutting);
            std::thread::spawn(move || {
                let mut buffer = vec![0u8; 64 * 1024];
                while let Ok(read) = from_client.read(&mut buffer) {
                    if read == 0 {
                        break;
                    }
                    let chunk = &buffer[..read];
                    let acquire = chunk.windows(4).any(|w| w == b"EVAL")
                        || chunk.windows(5).any(|w| w == b"MULTI");
                    let cut_now = acquire && armed.swap(false, Ordering::SeqCst);
                    if cut_now {
                        cut.store(true, Ordering::SeqCst);
                    }
                    if to_server.write_all(&buffer[..read]).is_err() {
                        break;
                    }
                    if cut_now {
                        // Let the server run it, then cut both ways.
                        std::thread::sleep(Duration::from_millis(100));
                        let _ = from_client.shutdown(Shutdown::Both);
                        let _ = to_server.shutdown(Shutdown::Both);
                        break;
                    }
                }
            });
            std::thread::spawn(move || {
                let mut buffer = vec![0u8; 64 * 1024];
                while let Ok(read) = from_server.read(&mut buffer) {
                    if read == 0
                        || cutting.load(Ordering::SeqCst)
                        || to_client.write_all(&buffer[..read]).is_err()
                    {
                        break;
                    }
                }
                let _ = to_client.shutdown(Shutdown::Both);
            });
        }
    });
    (port, armed)
}

/// A grant whose reply is lost (the connection cut after the server ran
/// the acquire): `distlock acquire` exits 69, and the lock it may hold is
/// released before the process exits, not left for its TTL.
#[test]
fn a_lost_acquire_reply_leaves_no_lock_behind() {
    use std::sync::atomic::Ordering;
    let server = RedisServer::start().expect("start");
    // The scripts in the server's cache: the cut EVALSHA then runs.
    let warm = acquired(&server, "warm");
    let out =
        output(distlock(&on(&server), &["release", "--key", "warm"]).env("DISTLOCK_OWNER", &warm));
    assert_eq!(code(&out), 0, "{out:?}");
    let (port, armed) = cutting_proxy(server.port());
    for client in clients() {
        armed.store(true, Ordering::SeqCst);
        let out = output(
            distlock_on(&server, client, &["acquire", "--key", "cut", "--wait", "0"])
                .env("DISTLOCK_NODES", format!("redis://127.0.0.1:{port}"))
                .env("DISTLOCK_TTL", "60s"),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 69, "{client}: {stderr}");
        assert!(
            !armed.load(Ordering::SeqCst),
            "{client}: the grant's reply was cut"
        );
        let what = format!("{client}: the lock whose reply was lost is still held: {stderr}");
        assert_unheld(&server, "cut", &what);
    }
}

/// A server frozen (SIGSTOP) under `distlock run`: the job is stopped when
/// the lease runs out, and distlock exits 76 at most a second later
/// (`LOST_RELEASE_WITHIN`), on both clients. It used to wait for the
/// release's own timeouts and then for the background release, 13 s more.
#[test]
fn a_frozen_server_stops_the_job_and_distlock_exits_soon_after() {
    for client in clients() {
        let mut server = RedisServer::start().expect("start");
        let name = format!("frozen-{client}");
        let mut run = distlock_on(
            &server,
            client,
            &["run", "--grace", "1s", &name, "--", "sleep", "30"],
        )
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn distlock");
        let _cleanup = KillOnDrop(run.id().to_string());
        wait_until_held(&server, &name);
        server.pause().expect("SIGSTOP the server");
        let paused = Instant::now();
        let status = wait_for_exit(&mut run, "distlock hangs after the server froze");
        let took = paused.elapsed();
        let mut stderr = String::new();
        if let Some(mut pipe) = run.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
        }
        assert_eq!(status.code(), Some(76), "{client}: {stderr}");
        // The lease runs out at most its TTL (2 s) after the freeze, `sleep`
        // ends at SIGTERM, and the release may hold the exit 1 s: 3 s, with
        // 2 s to spare for a loaded machine.
        assert!(
            took < Duration::from_secs(5),
            "{client}: distlock exited {took:?} after the freeze: {stderr}"
        );
    }
}
