//! Finding redis-server, and installing it where that is safe to do unasked.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Returns the redis-server to test with: `$REDIS_SERVER`, else the first on
/// `PATH`. If there is none and we are root on Debian, installs Debian's
/// `redis-server` package and says so; otherwise explains how to get it.
pub fn ensure() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("REDIS_SERVER") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "$REDIS_SERVER names {}, which is not a file",
                path.display()
            ))
        };
    }
    if let Some(path) = find_on_path() {
        return Ok(path);
    }
    if !(is_root() && Path::new("/etc/debian_version").is_file()) {
        return Err(
            "redis-server was not found on PATH. Install it (Debian or Ubuntu: \
                    `sudo apt-get install redis-server`; macOS: `brew install redis`) \
                    or set REDIS_SERVER to its path, then run `cargo xtask test` again."
                .to_owned(),
        );
    }
    println!(
        "xtask: redis-server not found; installing Debian's redis-server package with apt-get"
    );
    run_apt(&["update"])?;
    run_apt(&["install", "-y", "--no-install-recommends", "redis-server"])?;
    find_on_path()
        .ok_or_else(|| "apt-get installed redis-server, but it is still not on PATH".to_owned())
}

fn find_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|output| {
        output.status.success() && String::from_utf8_lossy(&output.stdout).trim() == "0"
    })
}

fn run_apt(args: &[&str]) -> Result<(), String> {
    let status = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map_err(|err| format!("could not run apt-get: {err}"))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| format!("`apt-get {}` failed: {status}", args.join(" ")))
}
