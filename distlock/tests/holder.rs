//! Holder information (`holder_info = true`), through the front door, on
//! both clients: stored by the grant beside the lock with the lock's TTL,
//! moved by renewals, kept by re-entries, deleted by releases and forced
//! releases, never holding the owner token, and absent when the option is
//! off. Redlock refuses the option.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::time::{Duration, SystemTime};

use distlock::state::LockState;
use distlock::{ClientKind, Config, LockError, LockManager, OwnerToken};
use lock_testkit::contract::taken;
use lock_testkit::contract::taken_as;
use lock_testkit::{AdminReply, RedisServer};

mod common;

/// The ways a lock is taken on one deployment.
const MODES: [&str; 3] = ["single", "reentrant", "fair"];

const SECRET_OWNER: &str = "owner-secret-4242";

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

const ON: [(&str, &str); 2] = [
    ("DISTLOCK_HOLDER_INFO", "true"),
    ("DISTLOCK_HOLDER_LABEL", "billing worker 7 ✓"),
];

/// The holder hash of `name`, as field → value.
fn holder_fields(server: &RedisServer, name: &str) -> Vec<(String, String)> {
    let reply = server
        .admin(&["HGETALL", &format!("lock:{{{name}}}:holder")])
        .expect("HGETALL");
    let AdminReply::Array(Some(items)) = reply else {
        panic!("HGETALL: {reply:?}");
    };
    let mut fields: Vec<(String, String)> = items
        .chunks(2)
        .map(|pair| {
            (
                pair[0].as_text().expect("a field").to_owned(),
                pair[1].as_text().expect("a value").to_owned(),
            )
        })
        .collect();
    fields.sort();
    fields
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(field, _)| field == name)
        .map(|(_, value)| value.as_str())
}

/// `PTTL` of two keys, read in one step (read one after the other, the
/// later one would be a millisecond lower).
fn pttls(server: &RedisServer, first: &str, second: &str) -> (i64, i64) {
    let reply = server
        .admin(&[
            "EVAL",
            "return {redis.call('pttl', KEYS[1]), redis.call('pttl', KEYS[2])}",
            "2",
            first,
            second,
        ])
        .expect("EVAL");
    let AdminReply::Array(Some(items)) = reply else {
        panic!("PTTLs: {reply:?}");
    };
    let ttl = |item: &AdminReply| item.as_int().expect("a TTL");
    (ttl(&items[0]), ttl(&items[1]))
}

/// `PTTL` of the lock key and of its holder key, read in one step.
fn ttls(server: &RedisServer, name: &str) -> (i64, i64) {
    let lock = format!("lock:{{{name}}}");
    pttls(server, &lock, &format!("{lock}:holder"))
}

fn assert_same_ttl(server: &RedisServer, name: &str, context: &str) {
    let (lock, holder) = ttls(server, name);
    assert!(lock > 0, "{context}: the lock has TTL {lock}");
    assert!(
        (lock - holder).abs() <= 2,
        "{context}: the lock has TTL {lock}, its holder information {holder}"
    );
}

fn server_seconds(server: &RedisServer) -> u64 {
    let AdminReply::Array(Some(parts)) = server.admin(&["TIME"]).expect("TIME") else {
        panic!("TIME");
    };
    parts[0].as_text().expect("s").parse().expect("s")
}

fn assert_no_holder(server: &RedisServer, name: &str, context: &str) {
    assert_eq!(
        server
            .admin(&["EXISTS", &format!("lock:{{{name}}}:holder")])
            .expect("EXISTS")
            .as_int(),
        Some(0),
        "{context}: holder information is left"
    );
}

async fn connect(config: &Config) -> LockManager {
    distlock::connect(config).await.expect("connect")
}

#[test]
fn holder_information_follows_the_lock() {
    lock_testkit::run(async {
        let server = RedisServer::start().expect("start");
        let owner = OwnerToken::from_string(SECRET_OWNER).expect("owner");
        for client in ClientKind::compiled() {
            for mode in MODES {
                let context = format!("{client} {mode}");
                let locks = connect(&common::config(mode, [&server], client, &ON)).await;
                let before = server_seconds(&server);
                let guard = taken_as(&locks, "invoice", &owner).await;
                let fields = holder_fields(&server, "invoice");
                assert_eq!(
                    field(&fields, "host"),
                    Some(host_name().as_str()),
                    "{context}"
                );
                let pid = std::process::id().to_string();
                assert_eq!(field(&fields, "pid"), Some(pid.as_str()), "{context}");
                assert_eq!(
                    field(&fields, "label"),
                    Some("billing worker 7 ✓"),
                    "{context}"
                );
                let acquired: u64 = field(&fields, "acquired_at_us")
                    .expect("acquired_at_us")
                    .parse()
                    .expect("µs");
                assert!(
                    acquired / 1_000_000 >= before && acquired / 1_000_000 <= before + 5,
                    "{context}: acquired at {acquired} µs, the server said {before} s"
                );
                for (field, value) in &fields {
                    assert!(
                        !value.contains(SECRET_OWNER) && !field.contains(SECRET_OWNER),
                        "{context}: the owner token is stored in the holder information"
                    );
                }
                assert_same_ttl(&server, "invoice", &format!("{context}, granted"));
                match LockState::from(locks.inspect("invoice").await.expect("inspect")) {
                    LockState::Held {
                        holder: Some(holder),
                        ..
                    } => {
                        assert_eq!(holder.host, host_name(), "{context}");
                        assert_eq!(holder.pid, std::process::id(), "{context}");
                        assert_eq!(
                            holder.label.as_deref(),
                            Some("billing worker 7 ✓"),
                            "{context}"
                        );
                        assert_eq!(
                            holder.acquired_at,
                            SystemTime::UNIX_EPOCH + Duration::from_micros(acquired),
                            "{context}"
                        );
                        assert!(!format!("{holder:?}").contains(SECRET_OWNER), "{context}");
                    }
                    other => panic!("{context}: {other:?}"),
                }
                guard.extend(Duration::from_secs(20)).await.expect("extend");
                assert_same_ttl(&server, "invoice", &format!("{context}, extended"));
                let (lock_ttl, _) = ttls(&server, "invoice");
                assert!(lock_ttl > 10_000, "{context}: {lock_ttl}");
                if mode == "reentrant" {
                    let inner = taken_as(&locks, "invoice", &owner).await;
                    assert_eq!(
                        holder_fields(&server, "invoice"),
                        fields,
                        "{context}: re-entry"
                    );
                    inner.release().await.expect("release the inner hold");
                    assert_eq!(
                        holder_fields(&server, "invoice"),
                        fields,
                        "{context}: inner release"
                    );
                    assert_same_ttl(&server, "invoice", &format!("{context}, re-entered"));
                }
                guard.release().await.expect("release");
                assert_no_holder(&server, "invoice", &format!("{context}, released"));

                let guard = taken(&locks, "invoice").await;
                assert!(!holder_fields(&server, "invoice").is_empty(), "{context}");
                let key = locks.key("invoice").expect("key");
                assert_eq!(locks.backend().force_release(&key).await.expect("force"), 1);
                assert_no_holder(&server, "invoice", &format!("{context}, forced"));
                drop(guard);

                let off = connect(&common::config(mode, [&server], client, &[])).await;
                let guard = taken(&off, "invoice").await;
                assert_no_holder(&server, "invoice", &format!("{context}, option off"));
                assert!(
                    matches!(
                        LockState::from(off.inspect("invoice").await.expect("inspect")),
                        LockState::Held { holder: None, .. }
                    ),
                    "{context}"
                );
                guard.release().await.expect("release");
            }
        }
    });
}

/// A holder key left behind by a lock deleted behind its holder's back is
/// replaced by the next grant that writes holder information; a grant with
/// the option off leaves it alone on a single node (it is bound to no hold,
/// and never shown) and removes it with the reentrant strategy. One that
/// holds foreign data makes a grant that reads it fail before it writes
/// anything.
#[test]
fn a_stale_holder_is_replaced_and_a_foreign_one_refused() {
    lock_testkit::on_every_client(async |server, client| {
        for mode in MODES {
            let context = format!("{client} {mode}");
            let on = connect(&common::config(mode, [server], client, &ON[..1])).await;
            let off = connect(&common::config(mode, [server], client, &[])).await;
            let guard = taken(&on, "stale").await;
            server.admin(&["DEL", "lock:{stale}"]).expect("DEL");
            drop(guard);
            server
                .admin(&["HSET", "lock:{stale}:holder", "label", "the old holder"])
                .expect("HSET");
            let guard = taken(&on, "stale").await;
            let fields = holder_fields(server, "stale");
            assert_eq!(field(&fields, "label"), None, "{context}: {fields:?}");
            assert!(field(&fields, "host").is_some(), "{context}: {fields:?}");
            guard.release().await.expect("release");
            // Whole holder information, bound to no hold.
            server
                .admin(&[
                    "HSET",
                    "lock:{stale}:holder",
                    "host",
                    "elsewhere",
                    "pid",
                    "7",
                    "acquired_at_us",
                    "1700000000000000",
                    "label",
                    "the old holder",
                ])
                .expect("HSET");
            let guard = taken(&off, "stale").await;
            if mode == "single" {
                match LockState::from(off.inspect("stale").await.expect("inspect")) {
                    LockState::Held { holder, .. } => {
                        assert_eq!(holder, None, "{context}: an unbound holder is shown")
                    }
                    other => panic!("{context}: {other:?}"),
                }
                assert!(
                    !holder_fields(server, "stale").is_empty(),
                    "{context}: a grant without the option deleted the holder key"
                );
            } else {
                assert_no_holder(server, "stale", &format!("{context}, option off"));
            }
            guard.release().await.expect("release");

            server
                .admin(&["SET", "lock:{stale}:holder", "foreign"])
                .expect("SET");
            // A single-node grant without the option reads no holder key.
            let readers = if mode == "single" {
                vec![&on]
            } else {
                vec![&on, &off]
            };
            for locks in readers {
                let result = locks.try_acquire("stale").await;
                assert!(
                    matches!(result, Err(LockError::Corrupted { .. })),
                    "{context}: {:?}",
                    result.map(|guard| guard.is_some())
                );
                assert_eq!(
                    server
                        .admin(&["EXISTS", "lock:{stale}"])
                        .expect("EXISTS")
                        .as_int(),
                    Some(0),
                    "{context}: the lock was written"
                );
            }
            server.admin(&["DEL", "lock:{stale}:holder"]).expect("DEL");
        }
    });
}

#[test]
fn redlock_refuses_holder_information() {
    lock_testkit::run(async {
        let servers: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start().expect("start"))
            .collect();
        let nodes: Vec<String> = servers
            .iter()
            .map(|server| server.url().expose().to_owned())
            .collect();
        let nodes = nodes.join(",");
        let result = Config::from_vars(vars(&[
            ("DISTLOCK_STRATEGY", "redlock"),
            ("DISTLOCK_NODES", &nodes),
            ("DISTLOCK_HOLDER_INFO", "true"),
        ]));
        match result {
            Err(LockError::InvalidConfig { field, reason }) => {
                assert_eq!(field, "holder_info", "{reason}");
                assert!(reason.contains("redlock"), "{reason}");
            }
            other => panic!("redlock with holder_info: {other:?}"),
        }
    });
}

#[test]
fn holder_labels_are_checked() {
    let long = "x".repeat(129);
    for (pairs, field) in [
        (
            vec![
                ("DISTLOCK_HOLDER_INFO", "true"),
                ("DISTLOCK_HOLDER_LABEL", long.as_str()),
            ],
            "holder_label",
        ),
        (
            vec![
                ("DISTLOCK_HOLDER_INFO", "true"),
                ("DISTLOCK_HOLDER_LABEL", "a\nb"),
            ],
            "holder_label",
        ),
        (
            vec![
                ("DISTLOCK_HOLDER_INFO", "true"),
                ("DISTLOCK_HOLDER_LABEL", ""),
            ],
            "holder_label",
        ),
        (vec![("DISTLOCK_HOLDER_LABEL", "nightly")], "holder_label"),
        (
            vec![("DISTLOCK_HOLDER_INFO", "maybe")],
            "DISTLOCK_HOLDER_INFO",
        ),
    ] {
        match Config::from_vars(vars(&pairs)) {
            Err(LockError::InvalidConfig { field: named, .. }) => {
                assert_eq!(named, field, "{pairs:?}")
            }
            other => panic!("{pairs:?}: {other:?}"),
        }
    }
    let label = "x".repeat(128);
    Config::from_vars(vars(&[
        ("DISTLOCK_HOLDER_INFO", "true"),
        ("DISTLOCK_HOLDER_LABEL", &label),
    ]))
    .expect("a 128-byte label");
}

/// This machine's host name, as the kernel has it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the host name")
        .trim()
        .to_owned()
}

/// A resume is a renewal: the holder information's TTL moves with the
/// lock's, and a counter with a TTL gets at least the lease's.
#[test]
fn a_resumed_lease_moves_the_holder_and_counter_expiry() {
    lock_testkit::on_every_client(async |server, client| {
        let name = format!("resumed-{client}");
        let mut extra = ON.to_vec();
        extra.push(("DISTLOCK_FENCING_COUNTER_TTL", "1200s"));
        let short = common::config("single", [server], client, &extra);
        let mut long = short.clone();
        long.lock.ttl = Duration::from_secs(120);
        // A counter TTL of 20 min covers 10 of these leases; what the
        // resume must do is keep it no shorter than the lease.
        let token = taken(&connect(&long).await, &name)
            .await
            .hand_off()
            .expect("hand off");
        // A counter close to its end, as after a long hold.
        server
            .admin(&["PEXPIRE", &format!("lock:{{{name}}}:fence"), "1000"])
            .expect("PEXPIRE");
        // The resumer's config says 5 s; the lease keeps its own 120 s.
        let resumed = connect(&short)
            .await
            .resume(&name, &token)
            .await
            .expect("resume");
        assert_same_ttl(server, &name, "after the resume");
        let lock_key = format!("lock:{{{name}}}");
        let (lock, counter) = pttls(server, &lock_key, &format!("{lock_key}:fence"));
        assert!(
            lock > 60_000,
            "{client}: renewed to the 120 s it was handed off with: {lock}"
        );
        assert!(
            counter >= lock,
            "{client}: counter {counter} ms, lease {lock} ms"
        );
        resumed.release().await.expect("release");
        assert_no_holder(server, &name, "after the release");
    });
}

/// No holder information outlives its hold, whoever releases or grants
/// next: a release by a process without `holder_info` leaves what another
/// process of the hold wrote (single node: it expires with the lease, and
/// no later hold shows it) or deletes it (reentrant), and a grant that
/// writes none (a fencing-off `SET`) never shows an earlier holder's, left
/// by a lock deleted behind its holder's back.
#[test]
fn no_stale_holder_information() {
    lock_testkit::run(async {
        let server = RedisServer::start().expect("start");
        let owner = OwnerToken::from_string(SECRET_OWNER).expect("owner");
        for client in ClientKind::compiled() {
            // Released by a process of the hold that writes none.
            for mode in ["single", "reentrant"] {
                let context = format!("{client} {mode}");
                let writer = connect(&common::config(mode, [&server], client, &ON)).await;
                let other = connect(&common::config(mode, [&server], client, &[])).await;
                let guard = taken_as(&writer, "handed", &owner).await;
                assert!(!holder_fields(&server, "handed").is_empty(), "{context}");
                if mode == "single" {
                    let token = guard.hand_off().expect("hand off");
                    other
                        .release_by_token("handed", &token)
                        .await
                        .expect("release");
                } else {
                    let inner = taken_as(&other, "handed", &owner).await;
                    guard.release().await.expect("release");
                    inner.release().await.expect("the last release");
                }
                if mode == "single" {
                    let (_, left) = ttls(&server, "handed");
                    assert!(
                        left > 0,
                        "{context}: the holder information lives {left} ms"
                    );
                    let next = taken(&other, "handed").await;
                    match LockState::from(other.inspect("handed").await.expect("inspect")) {
                        LockState::Held { holder, .. } => {
                            assert_eq!(holder, None, "{context}: an earlier holder is shown")
                        }
                        state => panic!("{context}: {state:?}"),
                    }
                    next.release().await.expect("release");
                    server.admin(&["DEL", "lock:{handed}:holder"]).expect("DEL");
                } else {
                    assert_no_holder(&server, "handed", &context);
                }
            }
            // Deleted behind its holder's back, then granted by a plain SET.
            let context = format!("{client} fencing off");
            let writer = connect(&common::config("single", [&server], client, &ON)).await;
            let plain = connect(&common::config(
                "single",
                [&server],
                client,
                &[("DISTLOCK_FENCING", "false")],
            ))
            .await;
            let lost = taken(&writer, "deleted").await;
            server.admin(&["DEL", "lock:{deleted}"]).expect("DEL");
            let taken = taken(&plain, "deleted").await;
            match LockState::from(plain.inspect("deleted").await.expect("inspect")) {
                LockState::Held { holder, .. } => {
                    assert_eq!(holder, None, "{context}: an earlier holder is shown")
                }
                other => panic!("{context}: {other:?}"),
            }
            // Handed to a process that writes holder information, the hold
            // does not take up the earlier holder's, still in its hash.
            let plain_writer = connect(&common::config(
                "single",
                [&server],
                client,
                &[ON[0], ON[1], ("DISTLOCK_FENCING", "false")],
            ))
            .await;
            let token = taken.hand_off().expect("hand off");
            let resumed = plain_writer
                .resume("deleted", &token)
                .await
                .expect("resume");
            match LockState::from(plain_writer.inspect("deleted").await.expect("inspect")) {
                LockState::Held { holder, .. } => assert_eq!(
                    holder, None,
                    "{context}: a resume took up an earlier holder's information"
                ),
                other => panic!("{context}: {other:?}"),
            }
            resumed.release().await.expect("release");
            assert_no_holder(&server, "deleted", &context);
            drop(lost);
        }
    });
}
