//! The workspace's test binaries, built by one `cargo test --no-run` and run a
//! few at a time.
//!
//! `cargo test` runs its binaries one after another, and ours mostly wait:
//! on TTLs, failovers and proxies, with a fraction of a core busy. Run side by
//! side, three at a time, they take about a third of the time; each binary
//! still runs its own tests with the thread count it always had.

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
/// and integration tests) with `features`, and returns them, those whose file
/// stem is `wide` first and with `wide_threads` threads each: the longest
/// binaries start first, so none is left running alone at the end.
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
    // Stable: cargo's order otherwise.
    binaries.sort_by_key(|binary| binary.threads.is_none());
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

/// Runs `binaries`, [`LANES`] at a time, with `REDIS_SERVER` set. Prints one
/// line per binary as it ends, and the whole output of each that failed;
/// fails after all have run if any failed.
pub(crate) fn run(binaries: Vec<TestBinary>, redis_server: &Path) -> Result<(), String> {
    let started = Instant::now();
    let count = binaries.len();
    let queue = Mutex::new(VecDeque::from(binaries));
    let (sender, outcomes) = mpsc::channel();
    let mut failed = Vec::new();
    std::thread::scope(|scope| {
        for _ in 0..LANES.min(count) {
            let sender = sender.clone();
            let queue = &queue;
            scope.spawn(move || {
                while let Some(binary) = queue.lock().ok().and_then(|mut queue| queue.pop_front()) {
                    if sender.send(run_one(binary, redis_server)).is_err() {
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

fn run_one(binary: TestBinary, redis_server: &Path) -> Outcome {
    let started = Instant::now();
    let mut command = Command::new(&binary.path);
    command
        .current_dir(&binary.package_dir)
        .env("CARGO_MANIFEST_DIR", &binary.package_dir)
        .env("REDIS_SERVER", redis_server);
    if let Some(threads) = binary.threads {
        command.arg(format!("--test-threads={threads}"));
    }
    let (passed, output) = match command.output() {
        Ok(output) => (
            output.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
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
    fn the_summary_is_the_last_result_line() {
        let output = "running 3 tests\n...\ntest result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s\n";
        assert_eq!(summary(output).as_deref(), Some("3 passed"));
        assert_eq!(summary("error: no such file"), None);
    }
}
