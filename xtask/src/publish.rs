//! The checks that keep the crates publishable: an honest `rust-version`, one
//! major version of each client, every name of lock-core's root reachable
//! from distlock's, docs without warnings, a build error (not a run-time
//! one) without a client feature, and the packaged `.crate` files used the
//! way a stranger would use them.

use std::collections::BTreeSet;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{cargo_bin, target_dir};

/// The workspace root (where the root `Cargo.toml` is).
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// A `key = "value"` of the root manifest's `[workspace.package]` table.
fn workspace_package_field(key: &str) -> Result<String, String> {
    let manifest = workspace_root().join("Cargo.toml");
    let text = fs::read_to_string(&manifest)
        .map_err(|err| format!("cannot read {}: {err}", manifest.display()))?;
    let mut in_table = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_table = line == "[workspace.package]";
            continue;
        }
        if !in_table {
            continue;
        }
        if let Some((name, value)) = line.split_once('=') {
            if name.trim() == key {
                return Ok(value.trim().trim_matches('"').to_owned());
            }
        }
    }
    Err(format!(
        "{} has no `{key}` in [workspace.package]",
        manifest.display()
    ))
}

/// `major.minor` of a version such as `1.95.0` or `1.95`.
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The declared `rust-version` must be the toolchain these checks run on:
/// an older one would be a promise nobody tested (no other toolchain can be
/// installed here), a newer one would not build.
pub(crate) fn check_rust_version() -> Result<(), String> {
    let declared = workspace_package_field("rust-version")?;
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let output = Command::new(&rustc)
        .arg("--version")
        .output()
        .map_err(|err| format!("could not run {rustc}: {err}"))?;
    let printed = String::from_utf8_lossy(&output.stdout);
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let toolchain = printed
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| format!("unexpected `rustc --version` output: {printed}"))?;
    let (Some(want), Some(have)) = (major_minor(&declared), major_minor(toolchain)) else {
        return Err(format!(
            "cannot compare rust-version `{declared}` with rustc `{toolchain}`"
        ));
    };
    if want != have {
        return Err(format!(
            "Cargo.toml declares rust-version = \"{declared}\", but these checks run rustc \
             {toolchain}: declare the version that was verified (rust-version = \"{}.{}\")",
            have.0, have.1
        ));
    }
    println!("xtask: rust-version {declared} is the toolchain the checks run on");
    Ok(())
}

/// Every name lock-core re-exports at its root is re-exported by distlock,
/// at its root or in one of its modules, so a type one of distlock's public
/// signatures names can be named by its users (`MultiLock` could not); and
/// the root holds at most [`MAX_ROOT_NAMES`].
pub(crate) fn check_reexports() -> Result<(), String> {
    let root = workspace_root();
    let read = |path: &str| {
        fs::read_to_string(root.join(path)).map_err(|err| format!("reading {path}: {err}"))
    };
    let core = reexported(&read("lock-core/src/lib.rs")?);
    let front_source = read("distlock/src/lib.rs")?;
    // The root and its modules; `config` is a file of its own.
    let mut front = reexported(&front_source);
    front.extend(reexported(&read("distlock/src/config.rs")?));
    let missing: Vec<&str> = core.difference(&front).map(String::as_str).collect();
    let root = root_names(&front_source);
    if root.len() > MAX_ROOT_NAMES {
        return Err(format!(
            "distlock's root has {} names (at most {MAX_ROOT_NAMES}: what users of the locks \
             need; the rest goes in a module): {}",
            root.len(),
            root.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    if missing.is_empty() {
        println!(
            "xtask: distlock re-exports all {} names of lock-core's root, {} at its own root",
            core.len(),
            root.len()
        );
        Ok(())
    } else {
        Err(format!(
            "distlock's root does not re-export lock-core's {}",
            missing.join(", ")
        ))
    }
}

/// How many names distlock's root may have: what users of the locks need.
const MAX_ROOT_NAMES: usize = 35;

/// The names at the root of a `lib.rs`: what its `pub use`s outside inline
/// `pub mod name { .. }` bodies name, and the modules, functions, types and
/// constants it declares `pub` itself.
fn root_names(source: &str) -> BTreeSet<String> {
    let mut outside = String::new();
    let mut depth = 0usize;
    let mut names = BTreeSet::new();
    for line in source.lines() {
        let trimmed = line.trim_start();
        if depth == 0 {
            for item in [
                "pub mod ",
                "pub fn ",
                "pub async fn ",
                "pub struct ",
                "pub enum ",
                "pub const ",
                "pub type ",
            ] {
                if let Some(rest) = trimmed.strip_prefix(item) {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    names.insert(name);
                }
            }
        }
        let opens = line.matches('{').count();
        let closes = line.matches('}').count();
        if depth == 0 && trimmed.starts_with("pub mod ") && opens > closes {
            depth = opens - closes;
            continue;
        }
        if depth > 0 {
            depth = (depth + opens).saturating_sub(closes);
            continue;
        }
        outside.push_str(line);
        outside.push('\n');
    }
    names.extend(reexported(&outside));
    names
}

/// The names a `lib.rs` re-exports with `pub use` outside comments: each
/// path's last segment, or the name after `as`.
fn reexported(source: &str) -> BTreeSet<String> {
    let code: String = source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut names = BTreeSet::new();
    for item in code.split("pub use ").skip(1) {
        let Some((path, _)) = item.split_once(';') else {
            continue;
        };
        let list = match (path.find('{'), path.rfind('}')) {
            (Some(open), Some(close)) => &path[open + 1..close],
            _ => path,
        };
        for name in list.split(',') {
            let name = name.split(" as ").last().unwrap_or("").trim();
            let name = name.rsplit("::").next().unwrap_or("").trim();
            if !name.is_empty() && name != "self" {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// No crate in `names` appears in two major versions (`0.x` counts `x` as
/// the major) anywhere in the workspace's dependency tree, and each appears.
pub(crate) fn check_one_major_of_each(names: &[&str]) -> Result<(), String> {
    let output = Command::new(cargo_bin())
        .args([
            "tree",
            "--workspace",
            "--all-features",
            "--edges",
            "normal,build,dev",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|err| format!("could not run cargo tree: {err}"))?;
    if !output.status.success() {
        return Err("cargo tree failed".to_owned());
    }
    let tree = String::from_utf8_lossy(&output.stdout);
    for name in names {
        let mut versions: Vec<&str> = tree
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some(*name)).then(|| words.next())?
            })
            .map(|version| version.trim_start_matches('v'))
            .collect();
        versions.sort_unstable();
        versions.dedup();
        if versions.is_empty() {
            return Err(format!(
                "cargo tree shows no `{name}`: the duplicate check would prove nothing"
            ));
        }
        let mut majors: Vec<String> = versions
            .iter()
            .filter_map(|version| {
                let (major, minor) = major_minor(version)?;
                Some(if major == 0 {
                    format!("0.{minor}")
                } else {
                    major.to_string()
                })
            })
            .collect();
        majors.dedup();
        if majors.len() > 1 {
            return Err(format!(
                "`{name}` is in the build in more than one major version: {}",
                versions.join(", ")
            ));
        }
    }
    println!("xtask: one major version each of {}", names.join(", "));
    Ok(())
}

/// Building a strategy crate without any client feature must fail at
/// compile time with a message that names the features.
pub(crate) fn check_no_client_is_a_build_error(crates: &[&str]) -> Result<(), String> {
    let mut args = vec!["check", "--no-default-features", "--keep-going"];
    for krate in crates {
        args.extend(["-p", krate]);
    }
    println!("xtask: cargo {} (must fail)", args.join(" "));
    let output = Command::new(cargo_bin())
        .args(&args)
        .output()
        .map_err(|err| format!("could not run cargo: {err}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        return Err(format!(
            "{} built without a client feature; they must refuse at compile time",
            crates.join(", ")
        ));
    }
    for krate in crates {
        let message = format!("{krate} needs a Redis client");
        if !stderr.contains(&message) {
            return Err(format!(
                "building {krate} without a client failed, but not with \"{message}\":\n{stderr}"
            ));
        }
    }
    Ok(())
}

/// `cargo doc` of the workspace with every feature, warnings denied (broken
/// intra-doc links, missing docs, bad code block attributes).
pub(crate) fn doc() -> Result<(), String> {
    // rustdoc links to another crate's items only if that crate's folder
    // exists when it starts (otherwise `[`HoldToken`]` renders as text,
    // without a warning). cargo documents a crate without waiting for its
    // dependencies' docs, and empties a crate's folder as it starts on it.
    // So every folder is made (empty) first, and the crates are rendered one
    // at a time: none is ever missing while another is being rendered.
    for folder in crate::rendered_docs::DOC_FOLDERS {
        let pages = target_dir().join("doc").join(folder);
        if pages.exists() {
            fs::remove_dir_all(&pages)
                .map_err(|err| format!("cannot clear {}: {err}", pages.display()))?;
        }
        fs::create_dir_all(&pages)
            .map_err(|err| format!("cannot create {}: {err}", pages.display()))?;
    }
    let args = [
        "doc",
        "--no-deps",
        "--workspace",
        "--all-features",
        // The libraries: the pages users read. (The binaries' docs are
        // for maintainers, and clippy holds them to `missing_docs`.)
        "--lib",
        "--jobs",
        "1",
    ];
    println!("xtask: cargo {} (warnings denied)", args.join(" "));
    let status = Command::new(cargo_bin())
        .args(args)
        .env("RUSTDOCFLAGS", "-D warnings")
        .status()
        .map_err(|err| format!("could not run cargo doc: {err}"))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| "cargo doc failed (warnings are errors)".to_owned())
}

/// Packages `crates` together (no upload), unpacks the `.crate` files, and
/// uses them as a stranger would, on a real redis-server: a scratch crate
/// that depends on `distlock` by version with its default features, with the
/// README's examples verbatim and the testkit as a dev-dependency, compiles
/// against the libraries, brings in none of the command's crates, and runs a
/// program that takes a lock; and `cli`, the package of the `distlock`
/// command, installs with `cargo install` (default features, no
/// dev-dependencies) and runs a command under a lock.
pub(crate) fn package_and_use(
    crates: &[&str],
    cli: &str,
    redis_server: &Path,
) -> Result<(), String> {
    let cargo_command = || Command::new(cargo_bin());
    let version = workspace_package_field("version")?;
    let mut args = vec!["package", "--no-verify", "--allow-dirty", "--quiet"];
    for krate in crates {
        args.extend(["-p", krate]);
    }
    println!("xtask: cargo {}", args.join(" "));
    let status = cargo_command()
        .args(&args)
        .status()
        .map_err(|err| format!("could not run cargo: {err}"))?;
    if !status.success() {
        return Err("cargo package failed".to_owned());
    }

    let target = target_dir();
    let check = target.join("package-check");
    if check.exists() {
        fs::remove_dir_all(&check)
            .map_err(|err| format!("cannot clear {}: {err}", check.display()))?;
    }
    let unpacked = check.join("crates");
    fs::create_dir_all(&unpacked)
        .map_err(|err| format!("cannot create {}: {err}", unpacked.display()))?;
    for krate in crates {
        let file = target
            .join("package")
            .join(format!("{krate}-{version}.crate"));
        // `-m`: the files get the time of unpacking. Cargo packs every file
        // with one fixed old time, and the build directory is shared: with
        // those times, cargo would take the packages of an earlier run, built
        // from other sources at the same paths, as up to date.
        let status = Command::new("tar")
            .arg("-xzmf")
            .arg(&file)
            .arg("-C")
            .arg(&unpacked)
            .status()
            .map_err(|err| format!("could not run tar: {err}"))?;
        if !status.success() {
            return Err(format!("cannot unpack {}", file.display()));
        }
    }
    // What a stranger depends on; the command is installed, not depended on.
    let libraries: Vec<&str> = crates
        .iter()
        .copied()
        .filter(|krate| *krate != cli)
        .collect();
    write_scratch(&check, &libraries, &version)?;
    // The dependencies, as a stranger's build resolves them: registry
    // versions, here patched to the unpacked packages.
    let patches: Vec<String> = libraries
        .iter()
        .map(|krate| {
            format!(
                "patch.crates-io.{krate}.path=\"{}\"",
                unpacked.join(format!("{krate}-{version}")).display()
            )
        })
        .collect();
    let in_scratch = |args: &[&str], env: &[(&str, &str)], what: &str| -> Result<(), String> {
        println!("xtask: {what}");
        let status = cargo_command()
            .args(args)
            .current_dir(&check)
            // Share the build directory: the dependencies are the same crates.
            .env("CARGO_TARGET_DIR", &target)
            .envs(env.iter().copied())
            .status()
            .map_err(|err| format!("could not run cargo: {err}"))?;
        status
            .success()
            .then_some(())
            .ok_or_else(|| format!("{what}: failed"))
    };
    // The tests are checked, not built: the testkit is there to see that its
    // package compiles for a stranger's tests.
    in_scratch(
        &["check", "--quiet", "--tests"],
        &[],
        "the README's examples and the packaged lock-testkit, against the packaged crates",
    )?;
    builds_no_command_crate(&check)?;
    let server = start_server(redis_server)?;
    let nodes = format!("redis://127.0.0.1:{}", server.port);
    in_scratch(
        &[
            "run",
            "--quiet",
            // A build to see that it builds: no debug information to write.
            "--config",
            "profile.dev.debug=false",
            "--bin",
            "scratch",
        ],
        &[("DISTLOCK_NODES", &nodes)],
        &format!("a program on the packaged distlock, on {nodes}"),
    )?;
    // What `cargo install distlock-cli` will do: the packaged crate alone,
    // its dev-dependencies ignored, default features.
    let root = check.join("install");
    let package = unpacked.join(format!("{cli}-{version}"));
    let mut install = vec![
        "install".to_owned(),
        "--quiet".to_owned(),
        "--debug".to_owned(),
        // A build to see that it builds: no debug information to write.
        "--config".to_owned(),
        "profile.dev.debug=false".to_owned(),
        "--path".to_owned(),
        package.display().to_string(),
        "--root".to_owned(),
        root.display().to_string(),
    ];
    for patch in &patches {
        install.extend(["--config".to_owned(), patch.clone()]);
    }
    let install: Vec<&str> = install.iter().map(String::as_str).collect();
    in_scratch(
        &install,
        &[],
        &format!("cargo install of the packaged {cli}"),
    )?;
    run_packaged_cli(&root.join("bin").join("distlock"), &nodes)
}

/// What the command needs and a library user must not build: the argument
/// parser, signals, JSON output and the log subscriber.
const COMMAND_ONLY: [&str; 4] = ["clap", "nix", "serde_json", "tracing-subscriber"];

/// The scratch crate's own build (not its tests'), with `distlock`'s default
/// features, has none of [`COMMAND_ONLY`]: they are `distlock-cli`'s.
fn builds_no_command_crate(check: &Path) -> Result<(), String> {
    let output = Command::new(cargo_bin())
        .args([
            "tree", "--edges", "normal", "--prefix", "none", "--format", "{p}",
        ])
        .current_dir(check)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|err| format!("could not run cargo tree: {err}"))?;
    if !output.status.success() {
        return Err("cargo tree of the scratch crate failed".to_owned());
    }
    let tree = String::from_utf8_lossy(&output.stdout);
    let mut found: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| COMMAND_ONLY.contains(name))
        .collect();
    found.sort_unstable();
    found.dedup();
    if !found.is_empty() {
        return Err(format!(
            "`distlock` with its default features brings the command's {}",
            found.join(", ")
        ));
    }
    println!(
        "xtask: `distlock` with its default features brings none of {}",
        COMMAND_ONLY.join(", ")
    );
    Ok(())
}

/// The scratch workspace: a crate whose library is the README's Rust
/// examples, verbatim, and whose binary takes and releases a lock on
/// `DISTLOCK_NODES`, with `distlock` (and `tokio`) as its dependencies and
/// the testkit as a dev-dependency, each registry dependency on one of ours
/// patched to its unpacked package.
fn write_scratch(check: &Path, crates: &[&str], version: &str) -> Result<(), String> {
    let readme = workspace_root().join("README.md");
    let readme = fs::read_to_string(&readme)
        .map_err(|err| format!("cannot read {}: {err}", readme.display()))?;
    let examples = rust_blocks(&readme);
    if examples.is_empty() {
        return Err("the README has no Rust examples to build".to_owned());
    }
    let mut lib = String::from(
        "//! The README's Rust examples, verbatim, each in a module of its own.\n\
         #![allow(dead_code)]\n",
    );
    for (index, example) in examples.iter().enumerate() {
        lib.push_str(&format!(
            "\npub mod readme_example_{index} {{\n{example}}}\n"
        ));
    }

    let mut patches = String::new();
    for krate in crates {
        patches.push_str(&format!(
            "{krate} = {{ path = \"crates/{krate}-{version}\" }}\n"
        ));
    }
    let root_manifest = format!(
        "# Made by `cargo xtask test`: the packaged crates, used from outside the workspace.\n\
         [workspace]\nresolver = \"2\"\nmembers = [\"scratch\"]\n\
         # The unpacked packages stand alone, as they do in the registry.\n\
         exclude = [\"crates\"]\n\n[patch.crates-io]\n{patches}"
    );
    let scratch_manifest = format!(
        "[package]\nname = \"scratch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\ndistlock = \"{version}\"\n\
         tokio = {{ version = \"1\", features = [\"macros\", \"rt-multi-thread\"] }}\n\n\
         [dev-dependencies]\nlock-testkit = \"{version}\"\n"
    );
    let write = |path: PathBuf, text: &str| {
        fs::write(&path, text).map_err(|err| format!("cannot write {}: {err}", path.display()))
    };
    fs::create_dir_all(check.join("scratch/src"))
        .map_err(|err| format!("cannot create the scratch crate: {err}"))?;
    write(check.join("Cargo.toml"), &root_manifest)?;
    write(check.join("scratch/Cargo.toml"), &scratch_manifest)?;
    write(check.join("scratch/src/lib.rs"), &lib)?;
    write(check.join("scratch/src/main.rs"), SCRATCH_MAIN)?;
    // The workspace's own lock file, so the scratch build uses the versions
    // the tests ran with; cargo adds what it lacks.
    fs::copy(
        workspace_root().join("Cargo.lock"),
        check.join("Cargo.lock"),
    )
    .map_err(|err| format!("cannot copy Cargo.lock: {err}"))?;
    Ok(())
}

/// A stranger's first program on `distlock`: a lock taken and released, with
/// a fencing token, on the node the environment names.
const SCRATCH_MAIN: &str = r#"//! A lock taken and released on `DISTLOCK_NODES`.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = distlock::connect(&distlock::Config::from_env()?).await?;
    let lease = locks.acquire("package-check-library").await?;
    let token = lease.fencing_token().ok_or("the lease has no fencing token")?;
    println!("package-check-library held under fencing token {}", token.get());
    lease.release().await?;
    Ok(())
}
"#;

/// The bodies of the ```` ```rust ```` blocks of a markdown text.
fn rust_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match current.as_mut() {
            None if line.starts_with("```rust") => current = Some(String::new()),
            None => {}
            Some(_) if line.starts_with("```") => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}

/// A redis-server on a free loopback port, stopped when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(redis_server: &Path) -> Result<Server, String> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|err| format!("no free port: {err}"))?
        .port();
    let child = Command::new(redis_server)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|err| format!("could not start {}: {err}", redis_server.display()))?;
    let server = Server { child, port };
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "redis-server did not listen on port {port} within 10 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(server)
}

/// The packaged `distlock` runs a shell command with a child of its own
/// under a lock on `nodes`, hands it the fencing token, and reports the lock
/// free afterwards with that one grant counted.
fn run_packaged_cli(distlock: &Path, nodes: &str) -> Result<(), String> {
    println!("xtask: the packaged distlock command, on {nodes}");
    let run = Command::new(distlock)
        .args(["run", "--key", "package-check", "--wait", "5s", "--"])
        .args([
            "sh",
            "-c",
            "sleep 0.1 & wait; test -n \"$DISTLOCK_FENCING_TOKEN\"",
        ])
        .env("DISTLOCK_NODES", nodes)
        .status()
        .map_err(|err| format!("could not run {}: {err}", distlock.display()))?;
    if !run.success() {
        return Err(format!("the packaged `distlock run` failed: {run}"));
    }
    let status = Command::new(distlock)
        .args(["status", "package-check", "--json"])
        .env("DISTLOCK_NODES", nodes)
        .output()
        .map_err(|err| format!("could not run {}: {err}", distlock.display()))?;
    let printed = String::from_utf8_lossy(&status.stdout);
    // One grant so far: the lock is free again and its last token is 1.
    if !status.status.success()
        || !printed.contains("\"held\":false")
        || !printed.contains("\"fencing_token\":1")
    {
        return Err(format!(
            "the packaged `distlock status` did not report the lock free, after one grant, \
             following `run`: {printed}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod reexport_tests {
    use super::{check_reexports, reexported, root_names};

    #[test]
    fn distlock_reexports_every_name_of_lock_core() {
        if let Err(missing) = check_reexports() {
            panic!("{missing}");
        }
    }

    #[test]
    fn a_root_counts_its_own_names_not_its_modules_contents() {
        let source = "pub use a::{B, C};\n\
            pub mod state {\n    //! Docs.\n    pub use a::{D, E};\n}\n\
            pub fn connect() {}\n";
        let names: Vec<String> = root_names(source).into_iter().collect();
        assert_eq!(names, ["B", "C", "connect", "state"]);
    }

    #[test]
    fn reexported_names_are_read_from_every_form() {
        let source = "//! pub use not::This;\n\
            pub use a::{B, c::D,\n    E as F};\n\
            #[cfg(feature = \"x\")]\n\
            pub use g::H;\n\
            pub use i;\n";
        let names: Vec<String> = reexported(source).into_iter().collect();
        assert_eq!(names, ["B", "D", "F", "H", "i"]);
    }
}
