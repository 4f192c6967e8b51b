//! The project's chores, run as `cargo xtask <task>`:
//!
//! - `test`: finds (or, as root on Debian, installs) redis-server and
//!   sqlite3, then runs `cargo fmt --check`; clippy with `-D warnings` with
//!   all features, with no client, with the `redis` client alone and with
//!   the `fred` client alone; the publishing checks (`publish.rs`); every
//!   test with both clients (`test_binaries.rs`: three binaries at a time);
//!   the packaged crates used from outside; the protocol models checked to
//!   the bounds of about a minute (`model --bounded`); `chaos --quick`; and
//!   the peers' workers on a baseline of 3 s, where their runtimes are here.
//! - `demo`: the source articles' scenarios, each without and with a lock,
//!   on a local redis-server that the demo starts and stops itself.
//! - `bench`: every benchmark (`BENCHES`, then the peer comparisons) on
//!   criterion, each figure a ratio against a floor measured beside it.
//! - `chaos`: the safety harness (`lock-chaos`): lock workers as
//!   processes under faults, a fenced resource, and a checker; `--quick` runs
//!   every scenario briefly, on one client each, and is part of `test`;
//!   `--peers` runs other libraries' locks under the same faults.
//! - `doc`: the API docs with warnings denied, and no intra-doc link left
//!   as literal text (`rendered_docs.rs`; part of `test`).
//! - `model`: the protocols' stateright models (`lock-model`) checked
//!   exhaustively to the bounds docs/SAFETY.md states, printing the states
//!   explored and the time (`--bounded`: about a minute, part of `test`;
//!   `--quick`: a few seconds; a `PRIMITIVE` such as `fair` picks the runs
//!   whose primitive's name contains it).
//! - `layers`: lock-core's engine names nothing of its Redis layer, and no
//!   modules import each other in a circle (`layers.rs`; part of `test`).
//! - `package`: packages the published crates (no upload) and uses them from
//!   outside the workspace (part of `test`).

mod layers;
mod programs;
mod publish;
mod rendered_docs;
mod test_binaries;

use std::os::unix::process::CommandExt as _;
use std::process::{Command, ExitCode};

const USAGE: &str =
    "usage: cargo xtask <test | demo | bench | chaos [ARGS] | model [--quick | --bounded] [PRIMITIVE] | package | doc | layers>

  test   fmt check, clippy -D warnings (all features, no client, each client alone),
         docs and publishing checks, every test with both clients, the packaged
         crates used from outside, the protocol models to bounds of about a minute,
         `chaos --quick`, and the peers' workers on a baseline
  demo   duplicate orders, stock deduction, a cron job on every host, a pool of
         limited resources and transfers, each without and with a lock, and a
         holder paused past its lease, on a local redis-server
  bench  every benchmark on criterion (each figure against a floor measured
         beside it; HTML reports in target/criterion/report): acquire+release
         against raw SET NX PX + EVALSHA, the server's cost, 100k held leases,
         topologies, reentrant, and the comparisons with peer crates
  chaos  the safety scenarios under faults, as a markdown table
         [--peers: other libraries beside ours, installed into target/peers]
         [--scenario NAME] [--seconds N] [--quick] [--seed N] [--client redis|fred] [--jobs N]
  model  the primitives' protocol models (lock, semaphore, each also fair, read-write lock,
         election, kinds mixed on one name) checked exhaustively to their bounds:
         every property the docs promise, the states explored and the time
         (minutes) [--quick: seconds | --bounded: about a minute] [PRIMITIVE: the
         runs whose primitive's name contains it, such as fair or mix]
  package  `cargo package` of the published crates (no upload), then a scratch crate
         with the README's examples and a program that takes a lock, built and run
         against them without the command's crates, and the packaged `distlock-cli`
         installed and its `distlock` command run (part of `test`)
  doc    the API docs, warnings denied, and no intra-doc link left as text (part of `test`)
  layers lock-core's lease engine names no Redis layer, and no modules import each
         other in a circle (part of `test`)";

fn main() -> ExitCode {
    let task = std::env::args().nth(1);
    let result = match task.as_deref() {
        Some("test") => test(),
        Some("demo") => demo(),
        Some("layers") => layers::check(&lock_core_src()),
        Some("doc") => {
            publish::doc().and_then(|()| rendered_docs::check(&target_dir().join("doc")))
        }
        Some("bench") => bench(),
        Some("chaos") => chaos(&std::env::args().skip(2).collect::<Vec<_>>()),
        Some("model") => model(&std::env::args().skip(2).collect::<Vec<_>>()),
        Some("package") => programs::redis_server()
            .and_then(|redis_server| publish::package_and_use(&PUBLISHED, CLI, &redis_server)),
        Some("help" | "--help" | "-h") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown task `{other}`\n\n{USAGE}")),
        None => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// lock-core's sources, whose layers `layers` checks.
fn lock_core_src() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../lock-core/src")
}

/// The crates whose tests and benchmarks take a client feature.
const STRATEGY_CRATES: [&str; 5] = [
    "lock-redis-single",
    "lock-reentrant",
    "lock-redlock",
    "distlock",
    "distlock-cli",
];

/// The strategy crates, which refuse to build without a client feature.
const NEEDS_A_CLIENT: [&str; 3] = ["lock-redis-single", "lock-reentrant", "lock-redlock"];

/// The crates published to the registry, in dependency order.
const PUBLISHED: [&str; 7] = [
    "lock-core",
    "lock-testkit",
    "lock-redis-single",
    "lock-reentrant",
    "lock-redlock",
    "distlock",
    CLI,
];

/// The published package of the `distlock` command: installed, not depended on.
const CLI: &str = "distlock-cli";

/// Crates that must not appear in two major versions in one build: two
/// copies of a client would mean two connection pools and types that do not
/// match across crates.
const ONE_MAJOR_ONLY: [&str; 4] = ["redis", "fred", "tokio", "rustls"];

/// `--features` for the given clients on every strategy crate, for example
/// `lock-redis-single/redis,lock-reentrant/redis,...`.
fn client_features(clients: &[&str]) -> String {
    let mut features = Vec::new();
    for krate in STRATEGY_CRATES {
        for client in clients {
            features.push(format!("{krate}/{client}"));
        }
    }
    features.join(",")
}

/// The clients every target is also linted with alone.
const SINGLE_CLIENTS: [&str; 2] = ["redis", "fred"];

/// The features of the full test pass: both clients, TLS (the CLI's tests
/// over TLS too), metrics, and the safety harness's binaries. `chaos` builds
/// with exactly these, so after `test` it reuses every artifact instead of
/// building the workspace again.
fn both_clients_features() -> String {
    format!(
        "{},distlock/tls,distlock/metrics,distlock-cli/tls,lock-chaos/redis,lock-chaos/fred",
        client_features(&["redis", "fred"])
    )
}

/// The benchmarks against peer crates, in the separate `comparisons` workspace.
const COMPARISONS: [&str; 5] = ["redlock", "handoff", "semaphore", "rwlock", "multi"];

/// The benchmark binaries, by crate.
const BENCHES: [(&str, &str); 6] = [
    ("lock-redis-single", "acquire_release"),
    ("lock-redis-single", "server_cost"),
    ("lock-redis-single", "held_leases"),
    ("lock-redis-single", "topologies"),
    ("lock-redis-single", "cluster_publish"),
    ("lock-reentrant", "reentrant_vs_single"),
];

fn test() -> Result<(), String> {
    let redis_server = programs::redis_server()?;
    programs::sqlite3()?;
    cargo(
        &["fmt", "--all", "--", "--check"],
        "formatting (cargo fmt --all to fix)",
    )?;
    layers::check(&lock_core_src())?;
    publish::check_rust_version()?;
    publish::check_one_major_of_each(&ONE_MAJOR_ONLY)?;
    publish::check_reexports()?;
    cargo(
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ],
        "clippy",
    )?;
    // The core, the testkit and the harness's checker build without a
    // client; the strategy crates refuse to, with a message.
    cargo(
        &[
            "clippy",
            "-p",
            "lock-core",
            "-p",
            "lock-testkit",
            "-p",
            "lock-chaos",
            "--all-targets",
            "--no-default-features",
            "--",
            "-D",
            "warnings",
        ],
        "clippy without client features",
    )?;
    publish::check_no_client_is_a_build_error(&NEEDS_A_CLIENT)?;
    publish::doc()?;
    rendered_docs::check(&target_dir().join("doc"))?;
    // Each client alone: every target builds and lints clean. Checked, not
    // tested: the integration tests run once, below, with both clients (the
    // contract suite runs every check on each client there), and a build of
    // every test binary per client set is what filled CI's disk and most of
    // its time.
    for client in SINGLE_CLIENTS {
        cargo(
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--no-default-features",
                "--features",
                &client_features(&[client]),
                "--",
                "-D",
                "warnings",
            ],
            &format!("clippy with the {client} client alone"),
        )?;
    }
    println!("xtask: every test with both clients (and the README's examples)");
    let features = both_clients_features();
    // The contract suites: hundreds of checks that mostly sleep through
    // TTLs, so six at a time in each. The other tests (clusters failing over,
    // sentinels, timing against proxies) keep the default of one per core.
    let binaries = test_binaries::build(&features, CONTRACT_TESTS, 6)?;
    test_binaries::run(binaries, &redis_server)?;
    // The peers' packages install (the rslock worker's build, mostly) at
    // the lowest priority beside the steps below, which leave a core idle
    // (the model checker runs on one thread; the chaos workers mostly wait).
    let installing = install_peers_in_background()?;
    cargo_with_redis(
        &["test", "--workspace", "--features", &features, "--doc"],
        &redis_server,
        "doc tests (and the README's examples) with both clients failed",
    )?;
    publish::package_and_use(&PUBLISHED, CLI, &redis_server)?;
    println!("xtask: the protocol models, to bounds of about a minute");
    model(&["--bounded".to_owned()])?;
    println!("xtask: the safety scenarios, briefly");
    // Each scenario has its own servers and workers, and they mostly wait
    // on TTLs and pauses: three side by side.
    chaos(&[
        "--quick".to_owned(),
        "--jobs".to_owned(),
        test_binaries::LANES.to_string(),
    ])?;
    installing.finish();
    // The peers' workers keep their protocol (lock-chaos/peers/README.md):
    // installed, run without faults, and judged by the checker, for every
    // peer whose runtime is here. Their faulted runs are `chaos --peers`.
    println!("xtask: the peers' workers, on a baseline");
    chaos(&[
        "--peers".to_owned(),
        "--scenario".to_owned(),
        "baseline".to_owned(),
        "--seconds".to_owned(),
        "3".to_owned(),
        // Two at a time, not three: a peer that does not renew overlaps if
        // its process stalls for its whole lease, and up to twelve
        // interpreters start at once at three.
        "--jobs".to_owned(),
        "2".to_owned(),
    ])?;
    println!("xtask: all checks passed");
    Ok(())
}

/// Runs the protocol models' checker (`lock-model`, optimised even in the
/// dev profile) with `args`: it fails on a broken property, a documented unsafe
/// case not found, or a search that did not finish.
fn model(args: &[String]) -> Result<(), String> {
    let mut command = vec!["run", "--quiet", "-p", "lock-model", "--"];
    command.extend(args.iter().map(String::as_str));
    cargo(&command, "the protocol models")
}

/// The integration test file every strategy crate has: the contract suite.
const CONTRACT_TESTS: &str = "contract";

/// `chaos --install-peers` at the lowest CPU priority, its output in
/// `target/peers/install.log`.
fn install_peers_in_background() -> Result<Background, String> {
    build_harness()?;
    let home = target_dir().join("peers");
    std::fs::create_dir_all(&home).map_err(|err| format!("{}: {err}", home.display()))?;
    let log_path = home.join("install.log");
    let log =
        std::fs::File::create(&log_path).map_err(|err| format!("{}: {err}", log_path.display()))?;
    let harness = target_dir().join("debug").join("chaos");
    let child = Command::new("nice")
        .args(["-n", "19"])
        // Its own process group, so that an early end of `test` stops the
        // builds and installs it started too (`Drop for Background`).
        .process_group(0)
        .arg(&harness)
        .arg("--install-peers")
        .stdout(
            log.try_clone()
                .map_err(|err| format!("{}: {err}", log_path.display()))?,
        )
        .stderr(log)
        .spawn()
        .map_err(|err| format!("could not start {}: {err}", harness.display()))?;
    println!(
        "xtask: installing the peers in the background (log: {})",
        log_path.display()
    );
    Ok(Background {
        child: Some(child),
        log_path,
    })
}

/// The peers' install started by [`install_peers_in_background`]: waited
/// for by `finish`, or stopped with its process group when dropped before.
struct Background {
    child: Option<std::process::Child>,
    log_path: std::path::PathBuf,
}

impl Background {
    /// Waits for it. Its failures are not this step's: the baseline after
    /// it installs again what is missing and says why it cannot.
    fn finish(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        match child.wait() {
            Ok(status) if status.success() => {}
            _ => println!(
                "xtask: the background install of the peers failed (see {})",
                self.log_path.display()
            ),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
            let _ = child.wait();
        }
    }
}

/// Builds the harness's two binaries and the `distlock` command (the
/// command-line scenario runs it, found next to the harness's own).
fn build_harness() -> Result<(), String> {
    // `--tests` makes cargo resolve features as `cargo test` does (with the
    // dev-dependencies), so the artifacts of the test pass are reused.
    cargo(
        &[
            "build",
            "--quiet",
            "--workspace",
            "--bins",
            "--tests",
            "--features",
            &both_clients_features(),
        ],
        "building the safety harness",
    )
}

/// Builds the harness ([`build_harness`]), then runs `chaos` with `args`.
fn chaos(args: &[String]) -> Result<(), String> {
    let redis_server = programs::redis_server()?;
    build_harness()?;
    let harness = target_dir().join("debug").join("chaos");
    println!("xtask: {} {}", harness.display(), args.join(" "));
    let status = Command::new(&harness)
        .args(args)
        .env("REDIS_SERVER", &redis_server)
        .status()
        .map_err(|err| format!("could not run {}: {err}", harness.display()))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| "a safety scenario that must be safe was not (see the table)".to_owned())
}

/// Where cargo puts what it builds: `$CARGO_TARGET_DIR`, or `target` at the
/// workspace root.
pub(crate) fn target_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .map_or_else(|| "target".into(), |root| root.join("target"))
        },
        std::path::PathBuf::from,
    )
}

fn demo() -> Result<(), String> {
    let redis_server = programs::redis_server()?;
    cargo_with_redis(
        &[
            "run",
            "--quiet",
            "-p",
            "lock-redis-single",
            "--example",
            "demo",
            "--features",
            "redis",
        ],
        &redis_server,
        "the demo failed",
    )
}

fn bench() -> Result<(), String> {
    let redis_server = programs::redis_server()?;
    for (krate, bench) in BENCHES {
        println!("xtask: benchmark {krate}/{bench}");
        let features = format!("{krate}/redis,{krate}/fred");
        cargo_with_redis(
            &[
                "bench",
                "-p",
                krate,
                "--bench",
                bench,
                "--features",
                &features,
            ],
            &redis_server,
            &format!("the benchmark {krate}/{bench} failed"),
        )?;
    }
    for bench in COMPARISONS {
        println!("xtask: comparison benchmark {bench}");
        cargo_with_redis(
            &[
                "bench",
                "--manifest-path",
                "comparisons/Cargo.toml",
                "--bench",
                bench,
            ],
            &redis_server,
            &format!("the comparison benchmark {bench} failed"),
        )?;
    }
    Ok(())
}

/// Runs cargo with `args` and `REDIS_SERVER` set to the server found or
/// installed; `failure` is the error if it fails.
pub(crate) fn cargo_with_redis(
    args: &[&str],
    redis_server: &std::path::Path,
    failure: &str,
) -> Result<(), String> {
    let status = Command::new(cargo_bin())
        .args(args)
        .env("REDIS_SERVER", redis_server)
        .status()
        .map_err(|err| format!("could not run cargo: {err}"))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| failure.to_owned())
}

pub(crate) fn cargo(args: &[&str], what: &str) -> Result<(), String> {
    println!("xtask: cargo {}", args.join(" "));
    let status = Command::new(cargo_bin())
        .args(args)
        .status()
        .map_err(|err| format!("could not run cargo: {err}"))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| format!("{what} failed"))
}

/// The cargo that runs this xtask, so a toolchain override stays in force.
pub(crate) fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}
