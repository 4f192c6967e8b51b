//! What the `distlock` command's tests share: the command itself with a
//! clean environment, and the clients compiled in (a config for each way a
//! lock is taken is `lock_testkit::env::config_vars`). Each test file uses
//! part of it.
#![allow(dead_code)]

/// The `distlock` command cargo built for these tests.
pub const DISTLOCK: &str = env!("CARGO_BIN_EXE_distlock");

/// `distlock args...` with nothing in its environment but `PATH`, a 2 s
/// connect timeout and `vars` (which may set it otherwise), and no stdin.
pub fn distlock<V: AsRef<std::ffi::OsStr>>(
    vars: &[(&str, V)],
    args: &[&str],
) -> std::process::Command {
    let mut command = std::process::Command::new(DISTLOCK);
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DISTLOCK_CONNECT_TIMEOUT", "2s")
        .stdin(std::process::Stdio::null());
    for (name, value) in vars {
        command.env(name, value);
    }
    command
}

/// Runs `command` to its end.
pub fn output(
    mut command: impl std::borrow::BorrowMut<std::process::Command>,
) -> std::process::Output {
    command.borrow_mut().output().expect("run distlock")
}

/// The clients compiled in, by the names `DISTLOCK_CLIENT` takes.
pub fn clients() -> Vec<&'static str> {
    let mut clients = Vec::new();
    if cfg!(feature = "redis") {
        clients.push("redis");
    }
    if cfg!(feature = "fred") {
        clients.push("fred");
    }
    clients
}

/// Asserts that `out`'s standard output says `text`; `context` leads the
/// failure.
pub fn assert_stdout_says(out: &std::process::Output, text: &str, context: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(text),
        "{context}: stdout lacks {text:?}: {stdout}"
    );
}

/// Asserts that `out`'s standard error says `text`; `context` leads the
/// failure.
pub fn assert_stderr_says(out: &std::process::Output, text: &str, context: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(text),
        "{context}: stderr lacks {text:?}: {stderr}"
    );
}

/// The hand-off token in `acquire`'s output: its `export DISTLOCK_OWNER=`
/// line.
pub fn owner_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("export DISTLOCK_OWNER='"))
        .and_then(|rest| rest.strip_suffix('\''))
        .unwrap_or_else(|| panic!("no DISTLOCK_OWNER in {out:?}"))
        .to_owned()
}
