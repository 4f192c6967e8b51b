//! `distlock list` end to end, against a standalone server, a Redis Cluster
//! and Redlock nodes, with each client: the held locks with their TTL, token,
//! holds, queue and holder; `--prefix`, `--json`, `--limit` and its note;
//! names with `}`, spaces and non-ASCII letters; exit codes.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::process::Output;

use distlock::{ClientKind, Config, LockGuard, LockManager, OwnerToken};
use lock_testkit::contract::taken_as;
use lock_testkit::{RedisCluster, RedisServer};

mod common;

/// `distlock args...` with only `PATH` and `vars` in its environment, run
/// to its end.
fn distlock(vars: &[(&str, &str)], args: &[&str]) -> Output {
    common::output(common::distlock(vars, args))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `distlock list --json` with `extra` arguments, parsed; it must succeed.
fn list_json(vars: &[(&str, &str)], extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["list", "--json"];
    args.extend_from_slice(extra);
    let out = distlock(vars, &args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|err| panic!("{args:?}: not JSON ({err}): {}", stdout(&out)));
    value.as_array().expect("one JSON array").clone()
}

fn names(rows: &[serde_json::Value]) -> Vec<String> {
    let mut names: Vec<String> = rows
        .iter()
        .map(|row| row["key"].as_str().expect("a name").to_owned())
        .collect();
    names.sort();
    names
}

/// Names with a `}` first (the `{~}` form of their key), a `}` inside, spaces
/// and letters outside ASCII.
const ODD: [&str; 3] = ["}odd name", "a}b c", "ключ 🔒"];

/// A manager with the config `vars` say, as the command reads them.
async fn connect(vars: &[(&str, &str)]) -> LockManager {
    let config = Config::from_vars(lock_testkit::env::vars(vars)).expect("a valid config");
    distlock::connect(&config).await.expect("connect")
}

async fn take(locks: &LockManager, names: &[&str]) -> Vec<LockGuard> {
    let mut guards = Vec::new();
    for name in names {
        guards.push(
            locks
                .try_acquire(name)
                .await
                .expect("try_acquire")
                .unwrap_or_else(|| panic!("{name} is free")),
        );
    }
    guards
}

async fn release(guards: Vec<LockGuard>) {
    for guard in guards {
        guard.release().await.expect("release");
    }
}

/// Checks what every deployment's listing must show: the names, and
/// `--prefix` (including the `}` and non-ASCII forms).
fn lists_the_names(vars: &[(&str, &str)], held: &[String], context: &str) {
    let rows = list_json(vars, &[]);
    let mut expected = held.to_vec();
    expected.sort();
    assert_eq!(names(&rows), expected, "{context}");
    for row in &rows {
        let left = row["remaining_ms"].as_u64().expect("a remaining TTL");
        assert!(left > 0 && left <= 30_000, "{context}: {row}");
        assert!(row["error"].is_null(), "{context}: {row}");
    }
    for (prefix, count) in [
        ("order:", 30),
        ("}", 1),
        ("a}", 1),
        ("ключ", 1),
        ("none", 0),
    ] {
        let rows = list_json(vars, &["--prefix", prefix]);
        assert_eq!(rows.len(), count, "{context} --prefix {prefix}: {rows:?}");
        assert!(
            names(&rows).iter().all(|name| name.starts_with(prefix)),
            "{context} --prefix {prefix}: {rows:?}"
        );
    }
}

/// `--limit` cuts the scan short, and both outputs say so: a note after
/// the table, and on stderr beside the JSON (whose stdout stays one array).
fn the_limit_is_reported(vars: &[(&str, &str)], context: &str) {
    let out = distlock(vars, &["list", "--limit", "5"]);
    assert_eq!(out.status.code(), Some(0), "{context}: {}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("the scan stopped after examining 5 keys (--limit 5)"),
        "{context}: {text}"
    );
    let out = distlock(vars, &["list", "--json", "--limit", "5"]);
    assert_eq!(out.status.code(), Some(0), "{context}: {}", stderr(&out));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        rows.as_array().is_some_and(|rows| rows.len() < 33),
        "{context}: {rows}"
    );
    common::assert_stderr_says(&out, "the scan stopped", context);
    let out = distlock(vars, &["list", "--limit", "0"]);
    assert_eq!(out.status.code(), Some(78), "{context}: {}", stderr(&out));
}

/// A standalone server, and its URL.
fn standalone() -> (RedisServer, String) {
    let server = RedisServer::start().expect("start");
    let url = server.url().expose().to_owned();
    (server, url)
}

/// The clients compiled into the library, by the names
/// `DISTLOCK_CLIENT` takes.
fn client_names() -> impl Iterator<Item = String> {
    ClientKind::compiled()
        .into_iter()
        .map(|client| client.to_string())
}

/// The variables that take `client` to `nodes` with `setting` (a strategy
/// or a topology) and a 30 s TTL.
fn deployment<'a>(
    setting: (&'a str, &'a str),
    nodes: &'a str,
    client: &'a str,
) -> [(&'a str, &'a str); 4] {
    [
        setting,
        ("DISTLOCK_NODES", nodes),
        ("DISTLOCK_CLIENT", client),
        ("DISTLOCK_TTL", "30s"),
    ]
}

fn held_names() -> Vec<String> {
    let mut names: Vec<String> = (0..30).map(|index| format!("order:{index}")).collect();
    names.extend(ODD.iter().map(|name| (*name).to_owned()));
    names
}

#[test]
fn lists_held_locks_on_a_standalone_server() {
    lock_testkit::run(async {
        let (server, url) = standalone();
        for client in client_names() {
            let vars = [
                ("DISTLOCK_NODES", url.as_str()),
                ("DISTLOCK_CLIENT", client.as_str()),
                ("DISTLOCK_TTL", "30s"),
                ("DISTLOCK_HOLDER_INFO", "true"),
                ("DISTLOCK_HOLDER_LABEL", "list test"),
            ];
            let locks = connect(&vars).await;
            let held = held_names();
            let held_refs: Vec<&str> = held.iter().map(String::as_str).collect();
            let guards = take(&locks, &held_refs).await;
            // Released: only its fencing counter is left, and it is not listed.
            take(&locks, &["released"])
                .await
                .pop()
                .expect("a guard")
                .release()
                .await
                .expect("release");
            server
                .admin(&["RPUSH", "lock:{order:7}:queue", "a-waiter", "another"])
                .expect("RPUSH");
            lists_the_names(&vars, &held, &client);

            let rows = list_json(&vars, &["--prefix", "order:7"]);
            assert_eq!(rows.len(), 1, "{client}: {rows:?}");
            let row = &rows[0];
            assert_eq!(row["key"], "order:7", "{client}");
            assert_eq!(row["queued"], 2, "{client}: {row}");
            assert!(
                row["fencing_token"]
                    .as_u64()
                    .is_some_and(|token| token >= 1),
                "{client}: {row}"
            );
            assert!(row["hold_count"].is_null(), "{client}: {row}");
            assert_eq!(row["holder"]["pid"], std::process::id(), "{client}: {row}");
            assert_eq!(row["holder"]["label"], "list test", "{client}: {row}");

            let out = distlock(&vars, &["list"]);
            assert_eq!(out.status.code(), Some(0), "{client}: {}", stderr(&out));
            let table = stdout(&out);
            let mut lines = table.lines();
            let header = lines.next().expect("a header");
            for column in ["NAME", "TTL", "TOKEN", "HOLDS", "QUEUED", "HOLDER"] {
                assert!(header.contains(column), "{client}: {header}");
            }
            for name in &held {
                assert!(
                    table
                        .lines()
                        .any(|line| line.starts_with(&format!("{name}  "))),
                    "{client}: {name} is not a row of\n{table}"
                );
            }
            assert!(!table.contains("released"), "{client}: {table}");
            assert!(
                table.contains(&format!("pid {}", std::process::id())),
                "{client}: {table}"
            );
            the_limit_is_reported(&vars, &client);

            release(guards).await;
            let out = distlock(&vars, &["list"]);
            assert_eq!(stdout(&out).trim(), "no held locks found", "{client}");
            assert_eq!(
                list_json(&vars, &[]),
                Vec::<serde_json::Value>::new(),
                "{client}"
            );
            server.admin(&["FLUSHALL"]).expect("FLUSHALL");
        }
    });
}

#[test]
fn lists_holds_of_the_reentrant_strategy() {
    lock_testkit::run(async {
        let (_server, url) = standalone();
        for client in client_names() {
            let vars = deployment(("DISTLOCK_STRATEGY", "reentrant"), &url, &client);
            let locks = connect(&vars).await;
            let owner = OwnerToken::generate().expect("owner");
            let outer = taken_as(&locks, "nested", &owner).await;
            let inner = taken_as(&locks, "nested", &owner).await;
            let rows = list_json(&vars, &[]);
            assert_eq!(names(&rows), ["nested"], "{client}");
            assert_eq!(rows[0]["hold_count"], 2, "{client}: {:?}", rows[0]);
            assert_eq!(
                rows[0]["fencing_token"],
                outer
                    .fencing_token()
                    .map(|token| token.get())
                    .expect("a token"),
                "{client}"
            );
            assert!(
                rows[0]["holder"].is_null() && rows[0]["queued"].is_null(),
                "{client}: {:?}",
                rows[0]
            );
            inner.release().await.expect("release");
            outer.release().await.expect("release");
            assert!(list_json(&vars, &[]).is_empty(), "{client}");
        }
    });
}

#[test]
fn lists_held_locks_on_every_master_of_a_cluster() {
    lock_testkit::run(async {
        let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 0))
            .await
            .expect("task")
            .expect("start a cluster");
        let seeds = lock_testkit::env::url_list(cluster.seed_urls());
        let held = held_names();
        // The names land on every master.
        let mut masters = std::collections::BTreeSet::new();
        for name in &held {
            let key = distlock::backend::LockKey::new("lock:", name).expect("a valid name");
            let slot = cluster.key_slot(key.redis_key()).expect("a slot");
            masters.insert(cluster.master_of_slot(slot).expect("a master").port());
        }
        assert_eq!(masters.len(), 3, "the names cover every master");
        for client in client_names() {
            let vars = deployment(("DISTLOCK_TOPOLOGY", "cluster"), &seeds, &client);
            let locks = connect(&vars).await;
            let held_refs: Vec<&str> = held.iter().map(String::as_str).collect();
            let guards = take(&locks, &held_refs).await;
            let context = format!("cluster, {client}");
            lists_the_names(&vars, &held, &context);
            the_limit_is_reported(&vars, &context);
            release(guards).await;
            assert!(list_json(&vars, &[]).is_empty(), "{context}");
        }
    });
}

#[test]
fn lists_locks_a_redlock_majority_holds() {
    lock_testkit::run(async {
        let servers = RedisServer::start_many(3).expect("start");
        let nodes = lock_testkit::env::node_list(&servers);
        for client in client_names() {
            let vars = deployment(("DISTLOCK_STRATEGY", "redlock"), &nodes, &client);
            let locks = connect(&vars).await;
            let guards = take(&locks, &["report", "}odd name"]).await;
            // On one node only: no majority holds it.
            servers[0]
                .admin(&["SET", "lock:{minority}", "x", "PX", "30000"])
                .expect("SET");
            let rows = list_json(&vars, &[]);
            assert_eq!(names(&rows), ["report", "}odd name"], "{client}: {rows:?}");
            assert!(
                rows.iter().all(|row| row["fencing_token"].is_null()),
                "{client}"
            );
            release(guards).await;
            servers[0].admin(&["DEL", "lock:{minority}"]).expect("DEL");
        }
    });
}

#[test]
fn list_exit_codes() {
    let (_server, url) = standalone();
    let out = distlock(&[("DISTLOCK_NODES", "http://nowhere")], &["list"]);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let out = distlock(&[("DISTLOCK_NODES", &url)], &["list", "--limit", "many"]);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let port = lock_testkit::free_port().expect("port");
    let nowhere = format!("redis://127.0.0.1:{port}");
    let out = distlock(&[("DISTLOCK_NODES", &nowhere)], &["list"]);
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    let out = distlock(&[], &["list", "--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("--prefix"), "{}", stdout(&out));
}
