//! Finding the programs the tests run (redis-server, sqlite3), and installing
//! them where that is safe to do unasked.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Returns the redis-server to test with: `$REDIS_SERVER`, else the first on
/// `PATH`. If there is none and we are root on Debian, installs Debian's
/// `redis-server` package and says so; otherwise explains how to get it.
pub fn redis_server() -> Result<PathBuf, String> {
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
    if let Some(path) = find_on_path("redis-server") {
        return Ok(path);
    }
    install(
        "redis-server",
        "redis-server",
        "`brew install redis`, or set REDIS_SERVER to its path",
    )
}

/// Makes sure `sqlite3` is on `PATH` (the fencing docs' SQL example runs in
/// it), installing Debian's package where `redis_server` would.
pub fn sqlite3() -> Result<(), String> {
    if find_on_path("sqlite3").is_some() {
        return Ok(());
    }
    install("sqlite3", "sqlite3", "`brew install sqlite`").map(drop)
}

/// Installs Debian's `package` for `program` as root on Debian; otherwise
/// explains how to get it (`elsewhere`: how on macOS).
fn install(program: &str, package: &str, elsewhere: &str) -> Result<PathBuf, String> {
    if !(is_root() && Path::new("/etc/debian_version").is_file()) {
        return Err(format!(
            "{program} was not found on PATH. Install it (Debian or Ubuntu: \
             `sudo apt-get install {package}`; macOS: {elsewhere}) and run \
             `cargo xtask test` again."
        ));
    }
    println!("xtask: {program} not found; installing Debian's {package} package with apt-get");
    run_apt(&["update"])?;
    run_apt(&["install", "-y", "--no-install-recommends", package])?;
    find_on_path(program)
        .ok_or_else(|| format!("apt-get installed {package}, but {program} is still not on PATH"))
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(program))
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
