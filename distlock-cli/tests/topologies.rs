//! The `distlock` command, unchanged, against a Redis Cluster, a master
//! behind Sentinel and a TLS server that verifies clients, each configured
//! only through `DISTLOCK_*` variables, on both clients: a job runs under
//! the lock with its fencing token, and `status` sees the lock from outside.
//!
//! These start clusters and sentinel groups, so they run in the build with
//! both clients and TLS, which `cargo xtask test` runs.

#![cfg(all(feature = "redis", feature = "fred", feature = "tls"))]

use std::sync::Arc;

use lock_testkit::env::url_list;
use lock_testkit::{RedisCluster, RedisServer, SentinelGroup, TlsFiles};

mod common;

use common::distlock;

/// Runs a job under the lock (a shell whose child prints the token) and
/// checks `status` while it holds it, with each client.
fn runs_a_job(label: &str, vars: &[(&str, String)]) {
    for client in ["redis", "fred"] {
        let mut vars = vars.to_vec();
        vars.push(("DISTLOCK_CLIENT", client.to_owned()));
        vars.push(("DISTLOCK_TTL", "5s".to_owned()));
        let out = distlock(
            &vars,
            &[
                "run",
                "--key",
                "nightly",
                "--",
                "sh",
                "-c",
                "sh -c 'echo token=$DISTLOCK_FENCING_TOKEN'",
            ],
        )
        .output()
        .expect("run distlock");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("token="),
            "{label} on {client}: {:?}\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let token = stdout.trim().trim_start_matches("token=");
        assert!(
            token.parse::<u64>().is_ok_and(|token| token >= 1),
            "{label}: {stdout}"
        );
        let status = distlock(&vars, &["status", "nightly"])
            .output()
            .expect("status");
        assert!(
            status.status.success(),
            "{label} on {client}: status: {}",
            String::from_utf8_lossy(&status.stderr)
        );
    }
}

#[test]
fn the_command_runs_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    runs_a_job(
        "cluster",
        &[
            ("DISTLOCK_TOPOLOGY", "cluster".to_owned()),
            ("DISTLOCK_NODES", url_list(cluster.seed_urls())),
        ],
    );
}

#[test]
fn the_command_runs_behind_sentinel() {
    let group = SentinelGroup::start("jobs", 0, 1).expect("sentinel group");
    let sentinels = url_list(group.sentinel_urls());
    runs_a_job(
        "sentinel",
        &[
            ("DISTLOCK_TOPOLOGY", "sentinel".to_owned()),
            ("DISTLOCK_NODES", sentinels.clone()),
            ("DISTLOCK_SENTINEL_SERVICE", "jobs".to_owned()),
        ],
    );
    // A wrong service name names the field, on either client.
    for client in ["redis", "fred"] {
        let out = distlock(
            &[
                ("DISTLOCK_CLIENT", client.to_owned()),
                ("DISTLOCK_TOPOLOGY", "sentinel".to_owned()),
                ("DISTLOCK_NODES", sentinels.clone()),
                ("DISTLOCK_SENTINEL_SERVICE", "no-such-master".to_owned()),
            ],
            &["status", "nightly"],
        )
        .output()
        .expect("status");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{client}: an unknown service: {stderr}"
        );
        assert!(
            stderr.contains("`sentinel_service`") && stderr.contains("no-such-master"),
            "{client}: {stderr}"
        );
    }
}

#[test]
fn the_command_runs_over_tls() {
    let files = Arc::new(TlsFiles::generate().expect("certificates"));
    let server = RedisServer::builder()
        .tls(Arc::clone(&files))
        .tls_auth_clients(true)
        .start()
        .expect("TLS server");
    let path = |path: &std::path::Path| path.display().to_string();
    runs_a_job(
        "tls",
        &[
            (
                "DISTLOCK_NODES",
                server.tls_url().expect("url").expose().to_owned(),
            ),
            ("DISTLOCK_TLS__CA_FILE", path(files.ca_file())),
            ("DISTLOCK_TLS__CERT_FILE", path(files.cert_file())),
            ("DISTLOCK_TLS__KEY_FILE", path(files.key_file())),
        ],
    );
}
