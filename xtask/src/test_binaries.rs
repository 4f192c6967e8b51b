//! The workspace's test binaries, built by one `cargo test --no-run` and run a
//! few at a time.
//!
//! `cargo test` runs its binaries one after another, and ours mostly wait:
//! on TTLs, failovers and proxies, with a fraction of a core busy. Run side by
//! side, three at a time (one contract suite at a time among them), they take
//! about a third of the time; each binary still runs its own tests with the
//! thread count it always had.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

/// How many test binaries run at once.
pub(crate) const LANES: usize = 3;

/// One test binary, as cargo built it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TestBinary {
    /// The executable.
    pub(crate) path: PathBuf,
    /// The folder of its package's manifest: cargo runs tests from there.
    pub(crate) package_dir: PathBuf,
    /// Its source, relative to the workspace (`lock-redlock/tests/contract.rs`).
    pub(crate) source: String,
    /// `--test-threads`, when it differs from the default.
    pub(crate) threads: Option<u32>,
}

/// Builds every test binary of the workspace (libraries, binaries, examples
/// and integration tests) with `features`, and returns them; those whose
/// file stem is `wide` get `wide_threads` threads each.
pub(crate) fn build(
    features: &str,
    wide: &str,
    wide_threads: u32,
) -> Result<Vec<TestBinary>, String> {
    let args = [
        "test",
        "--workspace",
        "--features",
        features,
        "--lib",
        "--bins",
        "--examples",
        "--tests",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ];
    println!("xtask: cargo {}", args.join(" "));
    // Diagnostics and progress go to stderr as usual; stdout is the JSON.
    let output = Command::new(crate::cargo_bin())
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|err| format!("could not run cargo: {err}"))?;
    if !output.status.success() {
        return Err("building the tests with both clients failed".to_owned());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let root = crate::publish::workspace_root();
    let mut binaries: Vec<TestBinary> = stdout
        .lines()
        .filter_map(|line| test_binary(line, &root))
        .collect();
    if binaries.is_empty() {
        return Err("cargo built no test binary".to_owned());
    }
    for binary in &mut binaries {
        if Path::new(&binary.source).file_stem() == Some(wide.as_ref()) {
            binary.threads = Some(wide_threads);
        }
    }
    Ok(binaries)
}

/// The test binary a line of cargo's JSON output announces, if it does.
fn test_binary(line: &str, root: &Path) -> Option<TestBinary> {
    if string_field(line, "reason")? != "compiler-artifact" {
        return None;
    }
    // The profile of a test build says `"test":true`; the `distlock` binary
    // the CLI tests run is built beside them without it.
    let profile = &line[line.find("\"profile\":{")?..];
    if !profile[..profile.find('}')?].contains("\"test\":true") {
        return None;
    }
    let path = PathBuf::from(string_field(line, "executable")?);
    let manifest = PathBuf::from(string_field(line, "manifest_path")?);
    let source = PathBuf::from(string_field(line, "src_path")?);
    let source = source
        .strip_prefix(root)
        .unwrap_or(&source)
        .display()
        .to_string();
    Some(TestBinary {
        path,
        package_dir: manifest.parent()?.to_path_buf(),
        source,
        threads: None,
    })
}

/// The string value of the first `"key":"..."` in a line of JSON, unescaped;
/// `None` when it is missing or not a string (`"executable":null`).
fn string_field(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!("\"{key}\":\""))? + key.len() + 4;
    let mut value = String::new();
    let mut chars = line[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\\' => match chars.next()? {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    value.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

/// What one binary did.
struct Outcome {
    binary: TestBinary,
    took: Duration,
    passed: bool,
    output: String,
}

/// The binaries not yet started. At most one with more threads than the
/// default runs at a time: three contract suites side by side would run
/// eighteen checks at once on two cores.
struct Queue {
    wide: VecDeque<TestBinary>,
    narrow: VecDeque<TestBinary>,
    wide_running: bool,
}

impl Queue {
    /// The next binary to run, and whether it is wide; `None` when nothing
    /// is left that this lane may take.
    fn next(&mut self) -> Option<(TestBinary, bool)> {
        if !self.wide_running {
            if let Some(binary) = self.wide.pop_front() {
                self.wide_running = true;
                return Some((binary, true));
            }
        }
        self.narrow.pop_front().map(|binary| (binary, false))
    }
}

fn lock(queue: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    // Plain data, valid whatever a panicking lane did.
    queue
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn take(queue: &Mutex<Queue>) -> Option<(TestBinary, bool)> {
    lock(queue).next()
}

/// Runs `binaries`, [`LANES`] at a time, with `REDIS_SERVER` set. Prints one
/// line per binary as it ends, and the whole output of each that failed;
/// fails after all have run if any failed.
pub(crate) fn run(binaries: Vec<TestBinary>, redis_server: &Path) -> Result<(), String> {
    let started = Instant::now();
    let count = binaries.len();
    let (wide, narrow) = binaries
        .into_iter()
        .partition(|binary| binary.threads.is_some());
    let queue = Mutex::new(Queue {
        wide,
        narrow,
        wide_running: false,
    });
    let logs = std::env::temp_dir().join(format!("xtask-tests-{}", std::process::id()));
    std::fs::create_dir_all(&logs)
        .map_err(|err| format!("cannot create {}: {err}", logs.display()))?;
    let (sender, outcomes) = mpsc::channel();
    let mut failed = Vec::new();
    std::thread::scope(|scope| {
        for lane in 0..LANES.min(count) {
            let sender = sender.clone();
            let (queue, logs) = (&queue, &logs);
            scope.spawn(move || {
                // The queue's lock is taken and dropped inside `take`: held
                // across a run, it would make the lanes take turns.
                while let Some((binary, wide)) = take(queue) {
                    let log = logs.join(format!("lane-{lane}.log"));
                    let outcome = run_one(binary, redis_server, &log);
                    if wide {
                        lock(queue).wide_running = false;
                    }
                    if sender.send(outcome).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        for outcome in outcomes {
            let summary = summary(&outcome.output);
            let verdict = if outcome.passed { "ok" } else { "FAILED" };
            println!(
                "xtask: {verdict:6} {:5.1} s  {}{}",
                outcome.took.as_secs_f64(),
                outcome.binary.source,
                summary.map_or_else(String::new, |line| format!(" ({line})")),
            );
            if !outcome.passed {
                println!("{}", outcome.output);
                failed.push(outcome.binary.source);
            }
        }
    });
    let _ = std::fs::remove_dir_all(&logs);
    println!(
        "xtask: {count} test binaries in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "tests with both clients failed: {}",
            failed.join(", ")
        ))
    }
}

/// Runs one binary with its output in `log`: a file, not a pipe, so that a
/// process a failed test left behind (holding the pipe open) cannot keep
/// the lane waiting after the binary exited.
fn run_one(binary: TestBinary, redis_server: &Path, log: &Path) -> Outcome {
    let started = Instant::now();
    let mut command = Command::new(&binary.path);
    command
        .current_dir(&binary.package_dir)
        .env("CARGO_MANIFEST_DIR", &binary.package_dir)
        .env("REDIS_SERVER", redis_server)
        .stdin(std::process::Stdio::null());
    if let Some(threads) = binary.threads {
        command.arg(format!("--test-threads={threads}"));
    }
    let ran = std::fs::File::create(log)
        .and_then(|file| {
            command.stdout(file.try_clone()?).stderr(file);
            command.spawn()
        })
        .and_then(|mut child| child.wait());
    let (passed, output) = match ran {
        Ok(status) => (
            status.success(),
            std::fs::read(log)
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default(),
        ),
        Err(err) => (
            false,
            format!("could not run {}: {err}", binary.path.display()),
        ),
    };
    Outcome {
        took: started.elapsed(),
        binary,
        passed,
        output,
    }
}

/// `212 passed; 0 failed` from the binary's `test result:` line.
fn summary(output: &str) -> Option<String> {
    let line = output
        .lines()
        .rev()
        .find(|line| line.starts_with("test result:"))?;
    let counts = line.split_once(". ")?.1;
    let passed = counts.split(';').next()?.trim();
    Some(passed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_ARTIFACT: &str = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/lock-redlock#0.1.0","manifest_path":"/w/lock-redlock/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"contract","src_path":"/w/lock-redlock/tests/contract.rs","edition":"2021","doc":false,"doctest":false,"test":true},"profile":{"opt_level":"0","debuginfo":2,"debug_assertions":true,"overflow_checks":true,"test":true},"features":["fred","redis"],"filenames":["/w/target/debug/deps/contract-1c5f"],"executable":"/w/target/debug/deps/contract-1c5f","fresh":true}"#;

    #[test]
    fn a_test_artifact_is_a_binary_to_run() {
        let binary = test_binary(TEST_ARTIFACT, Path::new("/w")).expect("a test binary");
        assert_eq!(binary.path, Path::new("/w/target/debug/deps/contract-1c5f"));
        assert_eq!(binary.package_dir, Path::new("/w/lock-redlock"));
        assert_eq!(binary.source, "lock-redlock/tests/contract.rs");
    }

    #[test]
    fn other_artifacts_are_not() {
        let library = TEST_ARTIFACT
            .replace(r#""test":true}"#, r#""test":false}"#)
            .replace(
                r#""executable":"/w/target/debug/deps/contract-1c5f""#,
                r#""executable":null"#,
            );
        assert_eq!(test_binary(&library, Path::new("/w")), None);
        let built_for_tests = TEST_ARTIFACT.replace(
            r#""overflow_checks":true,"test":true}"#,
            r#""overflow_checks":true,"test":false}"#,
        );
        assert_eq!(test_binary(&built_for_tests, Path::new("/w")), None);
        assert_eq!(
            test_binary(
                r#"{"reason":"build-finished","success":true}"#,
                Path::new("/w")
            ),
            None
        );
    }

    #[test]
    fn strings_are_unescaped() {
        let line = r#"{"a":"x\"y\\z\u00e9","b":null}"#;
        assert_eq!(string_field(line, "a").as_deref(), Some("x\"y\\zé"));
        assert_eq!(string_field(line, "b"), None);
        assert_eq!(string_field(r#"{"a":"cut"#, "a"), None);
    }

    #[test]
    fn one_wide_binary_runs_at_a_time() {
        let binary = |name: &str, threads| TestBinary {
            path: name.into(),
            package_dir: "/w".into(),
            source: name.to_owned(),
            threads,
        };
        let mut queue = Queue {
            wide: [binary("a", Some(6)), binary("b", Some(6))].into(),
            narrow: [binary("c", None)].into(),
            wide_running: false,
        };
        let mut next = || queue.next().map(|(binary, wide)| (binary.source, wide));
        assert_eq!(next(), Some(("a".to_owned(), true)));
        assert_eq!(next(), Some(("c".to_owned(), false)));
        assert_eq!(next(), None, "b waits for a");
        queue.wide_running = false;
        assert_eq!(
            queue.next().map(|(binary, wide)| (binary.source, wide)),
            Some(("b".to_owned(), true))
        );
    }

    #[test]
    fn the_summary_is_the_last_result_line() {
        let output = "running 3 tests\n...\ntest result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s\n";
        assert_eq!(summary(output).as_deref(), Some("3 passed"));
        assert_eq!(summary("error: no such file"), None);
    }
}
