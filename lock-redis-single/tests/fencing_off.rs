//! `fencing = false`: a single-node acquire is one plain `SET NX PX`, with
//! no script and no fencing token, and processes with and without fencing
//! share a prefix. Each test runs with every compiled client.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::time::Duration;

use lock_core::strategy::KeyNames as _;
use lock_core::{ClientKind, LockConfig, LockError, LockManager, LockState};
use lock_testkit::contract::fast_config;
use lock_testkit::contract::held_by_another;
use lock_testkit::contract::taken;
use lock_testkit::contract::waiting_up_to;
use lock_testkit::waiters::until_subscribed;
use lock_testkit::RedisServer;

/// A config for `server` through `kind`, with fencing on or off.
fn config(server: &RedisServer, kind: ClientKind, fencing: bool) -> LockConfig {
    let mut config = fast_config(Duration::from_secs(10))
        .with_client(kind)
        .with_fencing(fencing);
    config.nodes = vec![server.url()];
    config
}

async fn manager(config: LockConfig) -> LockManager {
    LockManager::connect::<lock_redis_single::SingleNodeBackend>(&config)
        .await
        .expect("connect")
}

/// How many times the server ran `command` since the last `CONFIG RESETSTAT`
/// (`INFO commandstats`).
fn calls(server: &RedisServer, command: &str) -> u64 {
    let info = server.info("commandstats").expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:");
    info.lines()
        .find_map(|line| {
            line.strip_prefix(&prefix)?
                .split(',')
                .find_map(|field| field.strip_prefix("calls="))?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn reset_stats(server: &RedisServer) {
    server
        .admin(&["CONFIG", "RESETSTAT"])
        .expect("CONFIG RESETSTAT");
}

fn exists(server: &RedisServer, key: &str) -> bool {
    lock_testkit::peek::int(server, &["EXISTS", key]) == 1
}

/// The acquire is one `SET` (no `EVALSHA`, no `EVAL`), the guard has no
/// token, and no fencing counter is written; a held lock reports its
/// holder's remaining TTL (a `PTTL` after the refused `SET`).
#[test]
fn a_fencing_off_acquire_is_one_plain_set() {
    lock_testkit::on_every_client(async |server, kind| {
        let locks = manager(config(server, kind, false)).await;
        let name = format!("plain-{kind}");
        let key = locks.key(&name).expect("key");
        reset_stats(server);
        let guard = taken(&locks, &name).await;
        assert_eq!(
            guard.fencing_token(),
            None,
            "{kind}: a token without fencing"
        );
        assert_eq!(
            (
                calls(server, "set"),
                calls(server, "evalsha"),
                calls(server, "eval")
            ),
            (1, 0, 0),
            "{kind}: the acquire is one SET and no script"
        );
        assert!(
            !exists(server, key.fence_key()),
            "{kind}: no fencing counter is written"
        );
        let other = manager(config(server, kind, false)).await;
        assert!(
            held_by_another(&other, &name).await,
            "{kind}: a held lock is held"
        );
        let started = std::time::Instant::now();
        let waited = other
            .acquire_with(&name, &waiting_up_to(Duration::from_millis(300)))
            .await;
        assert!(
            matches!(waited, Err(LockError::NotAcquired { .. })),
            "{kind}: {waited:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{kind}: the wait ended at its limit"
        );
        match lock_core::LockState::from(locks.inspect(&name).await.expect("inspect")) {
            LockState::Held {
                remaining: Some(left),
                token: None,
                ..
            } => assert!(left <= Duration::from_secs(10), "{kind}: {left:?}"),
            other => panic!("{kind}: inspect of a fencing-off hold: {other:?}"),
        }
        guard.release().await.expect("release");
        assert!(!exists(server, key.redis_key()), "{kind}: released");
    });
}

/// A waiter behind a fencing-off holder that never releases wakes when the
/// holder's TTL runs out, not at its backoff: the refused `SET` is followed
/// by the holder's `PTTL`.
#[test]
fn a_fencing_off_waiter_sleeps_until_the_holder_expires() {
    lock_testkit::on_every_client(async |server, kind| {
        let mut crashed = config(server, kind, false);
        crashed.ttl = Duration::from_millis(600);
        crashed.watchdog.enabled = false;
        let crashed = manager(crashed).await;
        let name = format!("crashed-{kind}");
        let held = taken(&crashed, &name).await;
        let started = std::time::Instant::now();
        // A holder that stops renewing and never releases.
        let _abandoned = held.hand_off().expect("hand off");
        let mut waiting = config(server, kind, false);
        // Backoff that would be far too slow: only the TTL can wake it.
        waiting.retry =
            lock_core::RetryPolicy::new(Duration::from_secs(10), Duration::from_secs(10));
        waiting.wait_mode = lock_core::WaitMode::Poll;
        let waiting = manager(waiting).await;
        let guard = waiting.acquire(&name).await.expect("acquire after the TTL");
        let waited = started.elapsed();
        assert!(
            waited < Duration::from_millis(2000),
            "{kind}: acquired {waited:?} after a 600 ms TTL"
        );
        guard.release().await.expect("release");
    });
}

/// Fenced and fencing-off processes on one prefix: each finds the other's
/// hold held and acquires after its release; a fencing-off grant leaves the
/// counter as it was, so the next fenced token follows the last one; a
/// fenced hold handed off resumes in a fencing-off process with its token,
/// and a fencing-off hold resumes where fencing is off (a fenced process,
/// as ever, takes a token without a fencing token for no hold of its own).
#[test]
fn fenced_and_fencing_off_processes_share_a_prefix() {
    lock_testkit::on_every_client(async |server, kind| {
        let fenced = manager(config(server, kind, true)).await;
        let plain = manager(config(server, kind, false)).await;
        let name = format!("shared-{kind}");
        let first = taken(&fenced, &name).await;
        let token = first.fencing_token().expect("a fenced grant has a token");
        assert!(
            held_by_another(&plain, &name).await,
            "{kind}: a fenced hold keeps fencing-off processes out"
        );
        // Handed to a fencing-off process, the hold keeps its token.
        let handoff = first.hand_off().expect("hand off");
        let resumed = plain.resume(&name, &handoff).await.expect("resume");
        assert_eq!(resumed.fencing_token(), Some(token), "{kind}");
        resumed.release().await.expect("release");

        let counter = || {
            server
                .admin(&["GET", &format!("lock:{{{name}}}:fence")])
                .expect("GET")
                .as_text()
                .and_then(|text| text.parse::<u64>().ok())
        };
        let issued = counter();
        let second = taken(&plain, &name).await;
        assert_eq!(second.fencing_token(), None, "{kind}");
        assert_eq!(
            counter(),
            issued,
            "{kind}: the fencing-off grant took no token"
        );
        assert!(
            held_by_another(&fenced, &name).await,
            "{kind}: a fencing-off hold keeps fenced processes out"
        );
        match lock_core::LockState::from(fenced.inspect(&name).await.expect("inspect")) {
            // The counter shows the last token issued: the fenced
            // attempt that found the lock held may have used one up.
            LockState::Held { token: seen, .. } => assert!(
                seen.is_some_and(|seen| seen >= token),
                "{kind}: the counter still shows the last token issued: {seen:?}, {token}"
            ),
            other => panic!("{kind}: {other:?}"),
        }
        second
            .extend(Duration::from_secs(20))
            .await
            .expect("a fencing-off hold renews");
        let handoff = second.hand_off().expect("hand off");
        match fenced.resume(&name, &handoff).await {
            Err(LockError::NotOwner { .. } | LockError::NotHeld { .. }) => {}
            other => panic!("{kind}: a fenced resume of a token without one: {other:?}"),
        }
        let resumed = plain.resume(&name, &handoff).await.expect("resume");
        assert_eq!(resumed.fencing_token(), None, "{kind}");
        let waiter = {
            let fenced = fenced.clone();
            let name = name.clone();
            tokio::spawn(async move { fenced.acquire(&name).await })
        };
        let key = fenced.key(&name).expect("key");
        until_subscribed(server, &key, 1).await;
        resumed.release().await.expect("release");
        let third = tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("the fenced waiter is woken by the fencing-off release")
            .expect("task")
            .expect("acquire");
        // Each fenced attempt that found the lock held used a token up.
        let next = third.fencing_token().expect("a fenced grant has a token");
        assert_eq!(Some(next.get()), counter(), "{kind}: the last token issued");
        assert!(next > token, "{kind}: {next} after {token}");
        third.release().await.expect("release");
    });
}

/// With `holder_info`, the acquire script runs in its mode without a token:
/// the holder is stored, no token is issued, and the counter is neither
/// read (a foreign one does not block it) nor written.
#[test]
fn holder_info_without_fencing_stores_the_holder_and_no_token() {
    lock_testkit::on_every_client(async |server, kind| {
        let mut config = config(server, kind, false);
        config.holder_info = true;
        config.holder_label = Some("nightly".to_owned());
        let locks = manager(config).await;
        let name = format!("labelled-{kind}");
        let key = locks.key(&name).expect("key");
        server
            .admin(&["SET", key.fence_key(), "not-a-number"])
            .expect("SET");
        reset_stats(server);
        let guard = taken(&locks, &name).await;
        assert_eq!(guard.fencing_token(), None, "{kind}");
        // Commands a script runs count in `INFO commandstats` too.
        assert_eq!(
            [
                calls(server, "evalsha"),
                calls(server, "type"),
                calls(server, "get"),
                calls(server, "incr"),
            ],
            [1, 1, 0, 0],
            "{kind}: the script ran, checked the holder key and read no counter"
        );
        assert_eq!(
            server
                .admin(&["GET", key.fence_key()])
                .expect("GET")
                .as_text(),
            Some("not-a-number"),
            "{kind}: the counter was left as it was"
        );
        // Inspect reads the counter as a token: give it none.
        server.admin(&["DEL", key.fence_key()]).expect("DEL");
        match lock_core::LockState::from(locks.inspect(&name).await.expect("inspect")) {
            LockState::Held {
                token: None,
                holder: Some(holder),
                ..
            } => {
                assert_eq!(holder.pid, std::process::id(), "{kind}");
                assert_eq!(holder.label.as_deref(), Some("nightly"), "{kind}");
            }
            other => panic!("{kind}: {other:?}"),
        }
        guard.release().await.expect("release");
        assert!(
            !exists(server, &key.holder_key()),
            "{kind}: the release deleted the holder information"
        );
        assert!(!exists(server, key.fence_key()), "{kind}: no counter");
    });
}

/// Fair mode keeps its script and its tokens with fencing off.
#[test]
fn fair_mode_keeps_its_tokens() {
    lock_testkit::on_every_client(async |server, kind| {
        let mut config = config(server, kind, false);
        config.fair = true;
        let locks = manager(config).await;
        let guard = taken(&locks, &format!("fair-{kind}")).await;
        assert!(guard.fencing_token().is_some(), "{kind}");
        guard.release().await.expect("release");
    });
}

/// A hand-off token's fencing claim is bound exactly: every fenced grant
/// stores its token behind its value, so a token edited to claim another
/// (above the counter, an earlier holder's, or none), with or without the
/// counter, is refused with `NotOwner`, and the hold stays with its owner.
/// Fencing-off holds claim none.
#[test]
fn a_hand_off_token_cannot_claim_another_fencing_token() {
    lock_testkit::on_every_client(async |server, kind| {
        let fenced = manager(config(server, kind, true)).await;
        let plain = manager(config(server, kind, false)).await;
        let name = format!("claimed-{kind}");
        let edit = |handoff: &lock_core::HandoffToken, claim: &str| {
            let text = handoff.expose();
            let mut fields = text.splitn(4, '.');
            let (format, kind, _claim, rest) = (
                fields.next().expect("format"),
                fields.next().expect("kind"),
                fields.next().expect("claim"),
                fields.next().expect("rest"),
            );
            lock_core::HandoffToken::parse(&format!("{format}.{kind}.{claim}.{rest}"))
                .expect("an edited token still parses")
        };
        // An earlier holder had token `issued`.
        let earlier = taken(&fenced, &name).await;
        let issued = earlier.fencing_token().expect("a token");
        earlier.release().await.expect("release");

        // A fencing-off hold, its token edited to claim `issued`.
        let plain_hold = taken(&plain, &name).await;
        let forged = edit(
            &plain_hold.hand_off().expect("hand off"),
            &issued.to_string(),
        );
        for locks in [&fenced, &plain] {
            match locks.resume(&name, &forged).await {
                Err(LockError::NotOwner { .. }) => {}
                other => panic!("{kind}: a claim of {issued} for a hold with none: {other:?}"),
            }
        }
        assert!(
            fenced.inspect(&name).await.expect("inspect").is_held(),
            "{kind}: the hold is still there"
        );
        server
            .admin(&["DEL", &format!("lock:{{{name}}}")])
            .expect("DEL");

        // A fenced hold, its token edited to 99999 (above the counter)
        // or to none, with the counter deleted and then back.
        let fenced_hold = taken(&fenced, &name).await;
        let token = fenced_hold.fencing_token().expect("a token");
        let handoff = fenced_hold.hand_off().expect("hand off");
        let fence = format!("lock:{{{name}}}:fence");
        server.admin(&["DEL", &fence]).expect("DEL the counter");
        let lower = (token.get() - 1).to_string();
        for claim in ["99999", "-", lower.as_str()] {
            match fenced.resume(&name, &edit(&handoff, claim)).await {
                Err(LockError::NotOwner { .. }) => {}
                other => panic!("{kind}: a claim of {claim}, no counter: {other:?}"),
            }
        }
        server
            .admin(&["SET", &fence, &token.to_string()])
            .expect("SET the counter back");
        for claim in ["99999", "-", lower.as_str()] {
            match fenced.resume(&name, &edit(&handoff, claim)).await {
                Err(LockError::NotOwner { .. }) => {}
                other => panic!("{kind}: a claim of {claim} for token {token}: {other:?}"),
            }
        }
        // A value that only starts with the hold's is another hold's
        // (an owner may contain `#`): extending by the hold's token
        // must not reach it.
        let value = server
            .admin(&["GET", &format!("lock:{{{name}}}")])
            .expect("GET")
            .as_text()
            .expect("the hold's value")
            .to_owned();
        server
            .admin(&[
                "SET",
                &format!("lock:{{{name}}}"),
                &format!("{value}#x:0#1"),
                "PX",
                "10000",
            ])
            .expect("SET");
        match fenced
            .extend_by_token(&name, &handoff, Duration::from_secs(10))
            .await
        {
            Err(LockError::NotOwner { .. }) => {}
            other => panic!("{kind}: extended a longer value: {other:?}"),
        }
        server
            .admin(&["SET", &format!("lock:{{{name}}}"), &value, "PX", "10000"])
            .expect("SET");
        // The true claim still resumes, with its own token.
        let resumed = fenced.resume(&name, &handoff).await.expect("resume");
        assert_eq!(resumed.fencing_token(), Some(token), "{kind}");
        // Taken over, the hold stores its token: a claim is bound to
        // it even with the counter deleted.
        let handoff = resumed.hand_off().expect("hand off");
        server
            .admin(&["DEL", &format!("lock:{{{name}}}:fence")])
            .expect("DEL the counter");
        let lower = (token.get() - 1).to_string();
        for claim in ["99999", lower.as_str()] {
            match fenced.resume(&name, &edit(&handoff, claim)).await {
                Err(LockError::NotOwner { .. }) => {}
                other => panic!("{kind}: a claim of {claim} for token {token}: {other:?}"),
            }
        }
        let resumed = fenced.resume(&name, &handoff).await.expect("resume");
        assert_eq!(resumed.fencing_token(), Some(token), "{kind}");
        resumed.release().await.expect("release");
        assert!(
            !exists(server, &format!("lock:{{{name}}}")),
            "{kind}: released"
        );
    });
}

/// A backend built by hand and a config that asks for what the backend was
/// not built to do (`fencing = false`, `holder_info = true`): the manager
/// refuses it, naming the field, instead of silently doing what the backend
/// does. The same config through the one constructor is taken as written.
#[test]
fn a_config_the_backend_would_ignore_is_refused() {
    lock_testkit::on_every_client(async |server, kind| {
        let backend = std::sync::Arc::new(
            lock_redis_single::SingleNodeBackend::connect(
                kind,
                server.url(),
                lock_core::ConnectOptions::default(),
            )
            .await
            .expect("connect"),
        );
        let mut holder_info = config(server, kind, true);
        holder_info.holder_info = true;
        for (field, config) in [
            ("fencing", config(server, kind, false)),
            ("holder_info", holder_info.clone()),
        ] {
            match LockManager::new(backend.clone(), config) {
                Err(LockError::InvalidConfig {
                    field: named,
                    reason,
                }) => {
                    assert_eq!(named, field, "{kind}: {reason}");
                    assert!(reason.contains("built"), "{kind}: {reason}");
                }
                other => panic!("{kind}: {field} ignored: {:?}", other.map(|_| ())),
            }
        }
        assert!(
            LockManager::new(backend, config(server, kind, true)).is_ok(),
            "{kind}: the config the backend was built for"
        );
        let locks = manager(holder_info).await;
        let guard = taken(&locks, "built-from-config").await;
        let LockState::Held { holder, .. } =
            LockState::from(locks.inspect("built-from-config").await.expect("inspect"))
        else {
            panic!("{kind}: held");
        };
        assert!(holder.is_some(), "{kind}: holder_info as configured");
        guard.release().await.expect("release");
    });
}

/// The default fenced acquire is one short script on both clients, which
/// stores `<hold>#<token>` and needs no transaction rights: a Redis user
/// without `+@transaction` acquires with a token, and so does one refused
/// `EXEC` alone. Nothing is left behind after the release.
#[test]
fn the_default_grant_needs_no_transaction_rights() {
    lock_testkit::run(async {
        let server = RedisServer::start().expect("start redis-server");
        let rules = [
            "on",
            "~lock:*",
            "resetchannels",
            "-@all",
            "+@connection",
            "+@scripting",
            "+@string",
            "+@keyspace",
        ];
        let users: [(&str, &[&str]); 2] =
            [("scripted", &[]), ("no-exec", &["+@transaction", "-exec"])];
        for (user, extra) in users {
            let mut acl = vec!["ACL", "SETUSER", user, ">pw"];
            acl.extend(rules);
            acl.extend(extra);
            server.admin(&acl).expect("ACL SETUSER");
        }
        for kind in ClientKind::compiled() {
            for (user, _) in users {
                let mut config = config(&server, kind, true);
                config.nodes = vec![lock_core::NodeUrl::new(format!(
                    "redis://{user}:pw@127.0.0.1:{}",
                    server.port()
                ))];
                let locks = manager(config).await;
                let name = format!("rights-{kind}-{user}");
                let key = format!("lock:{{{name}}}");
                for round in 0..2 {
                    let guard = locks
                        .try_acquire(&name)
                        .await
                        .unwrap_or_else(|err| panic!("{kind} {user} {round}: {err}"))
                        .expect("free");
                    let token = guard.fencing_token().expect("a token");
                    let stored = server
                        .admin(&["GET", &key])
                        .expect("GET")
                        .as_text()
                        .expect("the hold's value")
                        .to_owned();
                    let suffix = format!("#{token}");
                    assert!(
                        stored.ends_with(&suffix),
                        "{kind} {user} {round}: {stored} for token {token}"
                    );
                    guard.extend(Duration::from_secs(10)).await.expect("extend");
                    guard.release().await.expect("release");
                    assert!(!exists(&server, &key), "{kind} {user} {round}: released");
                }
            }
        }
    });
}
