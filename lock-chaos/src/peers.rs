//! Other Redis lock libraries as workers of the harness (`chaos --peers`).
//!
//! Each peer has a worker in its own language under `lock-chaos/peers/`,
//! following the protocol in `lock-chaos/peers/README.md`: the log lines
//! of our own workers, the same fenced resource, no fencing token. The
//! harness installs them from their registries into a directory of the
//! target dir ([`install`]) and starts them ([`Peer::command`]); a peer
//! whose runtime is missing here is skipped, with the reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What a peer implements, which decides the scenarios it runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// A lock on one Redis server.
    Single,
    /// A counting semaphore on one Redis server.
    Semaphore,
    /// Redlock over independent servers.
    Redlock,
}

/// What a peer's worker runs on, and how it is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Runtime {
    /// A Rust binary built with `cargo` (`peers/rslock`).
    Cargo,
    /// A script for `node`, its packages installed with `npm ci`
    /// (`peers/node`).
    Node,
    /// A script for a venv of `python3`, its packages installed with `pip`
    /// (`peers/python`).
    Python,
}

impl Runtime {
    /// Every runtime, in the order they are installed.
    pub const ALL: [Runtime; 3] = [Runtime::Cargo, Runtime::Node, Runtime::Python];

    /// The name of the runtime's directory, under `peers/` and under the
    /// install directory.
    pub fn directory(self) -> &'static str {
        match self {
            Runtime::Cargo => "rslock",
            Runtime::Node => "node",
            Runtime::Python => "python",
        }
    }
}

/// One peer library, in the configuration its worker uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// rslock 0.10 (crates.io): Redlock, no renewal.
    Rslock,
    /// redlock 4.2 (npm): Redlock, no renewal.
    NodeRedlock,
    /// redis-semaphore 5.8 (npm): its `Mutex`, which refreshes itself.
    RedisSemaphoreMutex,
    /// redis-semaphore 5.8 (npm): its `MultiSemaphore`, which refreshes
    /// itself.
    RedisSemaphore,
    /// python-redis-lock 4.0 (PyPI): a lock renewed by a thread.
    PythonRedisLock,
    /// pottery 3.0 (PyPI): Redlock, no renewal.
    Pottery,
}

impl Peer {
    /// Every peer, in the order of the table.
    pub const ALL: [Peer; 6] = [
        Peer::RedisSemaphoreMutex,
        Peer::PythonRedisLock,
        Peer::RedisSemaphore,
        Peer::Rslock,
        Peer::NodeRedlock,
        Peer::Pottery,
    ];

    /// The name its worker takes with `--peer`.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Rslock => "rslock",
            Peer::NodeRedlock => "redlock",
            Peer::RedisSemaphoreMutex => "redis-semaphore-mutex",
            Peer::RedisSemaphore => "redis-semaphore-semaphore",
            Peer::PythonRedisLock => "python-redis-lock",
            Peer::Pottery => "pottery",
        }
    }

    /// The package, its version and what of it is used, for the table.
    /// `peers::tests` checks the versions against the lock files.
    pub fn package(self) -> &'static str {
        match self {
            Peer::Rslock => "rslock 0.10.0 (crates.io)",
            Peer::NodeRedlock => "redlock 4.2.0 (npm)",
            Peer::RedisSemaphoreMutex => "redis-semaphore 5.8.0 (npm), Mutex",
            Peer::RedisSemaphore => "redis-semaphore 5.8.0 (npm), MultiSemaphore",
            Peer::PythonRedisLock => "python-redis-lock 4.0.1 (PyPI)",
            Peer::Pottery => "pottery 3.0.1 (PyPI), Redlock",
        }
    }

    /// What it implements.
    pub fn algorithm(self) -> Algorithm {
        match self {
            Peer::Rslock | Peer::NodeRedlock | Peer::Pottery => Algorithm::Redlock,
            Peer::RedisSemaphoreMutex | Peer::PythonRedisLock => Algorithm::Single,
            Peer::RedisSemaphore => Algorithm::Semaphore,
        }
    }

    /// What its worker runs on.
    pub fn runtime(self) -> Runtime {
        match self {
            Peer::Rslock => Runtime::Cargo,
            Peer::NodeRedlock | Peer::RedisSemaphoreMutex | Peer::RedisSemaphore => Runtime::Node,
            Peer::PythonRedisLock | Peer::Pottery => Runtime::Python,
        }
    }

    /// Whether its worker knows when its lease ended: only a peer that does
    /// not renew does (the validity it was granted); the others log 0, so
    /// their overrun is not known.
    pub fn knows_lease_end(self) -> bool {
        self.algorithm() == Algorithm::Redlock
    }

    /// The lease it takes when asked for `ttl`: python-redis-lock's expiry
    /// is whole seconds, so its worker rounds up; the others take `ttl`.
    pub fn lease(self, ttl: std::time::Duration) -> std::time::Duration {
        match self {
            Peer::PythonRedisLock => {
                let whole = ttl.as_millis().div_ceil(1000).max(1);
                std::time::Duration::from_secs(u64::try_from(whole).unwrap_or(u64::MAX))
            }
            _ => ttl,
        }
    }

    /// The command that starts its worker, installed under `installed` by
    /// [`install`], with the protocol's flags still to add.
    pub fn command(self, installed: &Path) -> Command {
        let home = installed.join(self.runtime().directory());
        let sources = sources().join(self.runtime().directory());
        let mut command = match self.runtime() {
            Runtime::Cargo => Command::new(home.join("debug").join("chaos-peer-rslock")),
            Runtime::Node => {
                let mut command = Command::new("node");
                command.arg(sources.join("worker.js"));
                command
            }
            Runtime::Python => {
                let mut command = Command::new(home.join("bin").join("python3"));
                command.arg(sources.join("worker.py"));
                command
            }
        };
        // As the harness's own workers: nothing from this environment but
        // the path to the runtimes.
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        if self.runtime() == Runtime::Node {
            command.env("NODE_PATH", home.join("node_modules"));
        }
        command.args(["--peer", self.name()]);
        command
    }
}

/// `lock-chaos/peers`, where the workers' sources and manifests are.
pub fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peers")
}

/// Installs the workers of `runtime` under `into` (`<into>/<directory>`)
/// from the registries, unless what is there was installed from the same
/// lock file. `Err` says why it could not be: a missing runtime, or a
/// failed install.
pub fn install(runtime: Runtime, into: &Path) -> Result<(), String> {
    let sources = sources().join(runtime.directory());
    let home = into.join(runtime.directory());
    std::fs::create_dir_all(&home).map_err(|err| format!("{}: {err}", home.display()))?;
    match runtime {
        Runtime::Cargo => {
            require("cargo", &["--version"])?;
            // Cargo knows what is up to date.
            let manifest = sources.join("Cargo.toml");
            run(Command::new("cargo")
                .args(["build", "--quiet", "--locked", "--manifest-path"])
                .arg(&manifest)
                .arg("--target-dir")
                .arg(&home))
        }
        Runtime::Node => {
            require("node", &["--version"])?;
            require("npm", &["--version"])?;
            let lock = read(&sources.join("package-lock.json"))?;
            if read(&home.join("installed-package-lock.json")).ok() == Some(lock.clone()) {
                return Ok(());
            }
            for file in ["package.json", "package-lock.json"] {
                std::fs::copy(sources.join(file), home.join(file))
                    .map_err(|err| format!("copy {file}: {err}"))?;
            }
            run(Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&home))?;
            write(&home.join("installed-package-lock.json"), &lock)
        }
        Runtime::Python => {
            require("python3", &["-m", "venv", "--help"])?;
            let requirements = read(&sources.join("requirements.txt"))?;
            let marker = home.join("installed-requirements.txt");
            if read(&marker).ok() == Some(requirements.clone()) {
                return Ok(());
            }
            run(Command::new("python3").args(["-m", "venv"]).arg(&home))?;
            run(Command::new(home.join("bin").join("pip"))
                .args([
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--requirement",
                ])
                .arg(sources.join("requirements.txt")))?;
            write(&marker, &requirements)
        }
    }
}

/// `Ok` if `program` runs with `args` and succeeds.
fn require(program: &str, args: &[&str]) -> Result<(), String> {
    match Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("`{program} {}` failed: {status}", args.join(" "))),
        Err(err) => Err(format!("{program} is missing: {err}")),
    }
}

/// Runs `command`, its output on this process's stderr.
fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    // The harness's stdout is its table.
    match command.stdout(std::io::stderr()).status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("{shown} failed: {status}")),
        Err(err) => Err(format!("{shown}: {err}")),
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|err| format!("{}: {err}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|err| format!("{}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The versions the table names are the ones the lock files install.
    #[test]
    fn the_table_names_the_locked_versions() {
        let lock = |runtime: Runtime, file: &str| {
            read(&sources().join(runtime.directory()).join(file)).expect("a lock file")
        };
        let cargo = lock(Runtime::Cargo, "Cargo.lock");
        let npm = lock(Runtime::Node, "package-lock.json");
        let pip = lock(Runtime::Python, "requirements.txt");
        for peer in Peer::ALL {
            let mut words = peer.package().split(' ');
            let (Some(name), Some(version)) = (words.next(), words.next()) else {
                panic!("{peer:?}: no version in {:?}", peer.package());
            };
            let locked = match peer.runtime() {
                Runtime::Cargo => {
                    cargo.contains(&format!("name = \"{name}\"\nversion = \"{version}\""))
                }
                Runtime::Node => npm.contains(&format!(
                    "\"node_modules/{name}\": {{\n      \"version\": \"{version}\""
                )),
                Runtime::Python => pip.lines().any(|line| line == format!("{name}=={version}")),
            };
            assert!(locked, "{peer:?}: {name} {version} is not what is locked");
        }
    }

    #[test]
    fn python_redis_lock_rounds_its_lease_up_to_whole_seconds() {
        use std::time::Duration;
        let lease = |ms| Peer::PythonRedisLock.lease(Duration::from_millis(ms));
        assert_eq!(lease(600), Duration::from_secs(1));
        assert_eq!(lease(1000), Duration::from_secs(1));
        assert_eq!(lease(1001), Duration::from_secs(2));
        assert_eq!(
            Peer::Rslock.lease(Duration::from_millis(600)),
            Duration::from_millis(600)
        );
    }

    #[test]
    fn every_algorithm_has_a_peer_and_every_peer_a_worker() {
        for algorithm in [Algorithm::Single, Algorithm::Semaphore, Algorithm::Redlock] {
            assert!(Peer::ALL.iter().any(|peer| peer.algorithm() == algorithm));
        }
        for runtime in Runtime::ALL {
            let worker = match runtime {
                Runtime::Cargo => "src/main.rs",
                Runtime::Node => "worker.js",
                Runtime::Python => "worker.py",
            };
            let path = sources().join(runtime.directory()).join(worker);
            assert!(path.exists(), "{} is missing", path.display());
        }
    }
}
