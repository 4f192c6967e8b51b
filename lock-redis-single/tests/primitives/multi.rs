//! Multi-key locks on the single-node strategy, through the engine, on both
//! clients, beyond the contract's check
//! (`lock_testkit::primitives::multi_lock_is_all_or_nothing`, which also
//! runs requests in opposite orders): nothing written by a refused
//! acquire, one token above every member's, one member lost losing the
//! hold, a waiter woken by any member's release, a replayed attempt, and
//! bad input refused with typed errors.

use std::time::{Duration, Instant};

use lock_core::{ClientKind, LockError, MAX_MULTI_KEYS};
use lock_testkit::contract::fast_config;
use lock_testkit::contract::held_by_another;
use lock_testkit::contract::taken;
use lock_testkit::peek::keys;
use lock_testkit::waiters::{served_promptly, spawn_timed, until_subscribed};
use lock_testkit::RedisServer;

use super::{manager, waiting};

/// A held member keeps the hold from being taken, and nothing of it is
/// written; once free, every member is held, against plain locks too, and
/// released together.
async fn all_or_nothing(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let plain = taken(&locks, "stock-2").await;
    let before = keys(&server);
    let order = locks
        .multi_lock(["stock-1", "stock-2", "stock-3"])
        .expect("multi lock");
    assert!(
        order.try_acquire().await.expect("try").is_none(),
        "one member is held"
    );
    assert_eq!(
        keys(&server),
        before,
        "a refused multi-key acquire wrote something"
    );
    plain.release().await.expect("release");
    let held = order.try_acquire().await.expect("try").expect("all free");
    for name in ["stock-1", "stock-2", "stock-3"] {
        assert!(
            held_by_another(&locks, name).await,
            "{name} is not held by the multi-key hold"
        );
    }
    held.release().await.expect("release");
    for name in ["stock-1", "stock-2", "stock-3"] {
        let again = taken(&locks, name).await;
        again.release().await.expect("release");
    }
}

/// The hold's one token is above every earlier token of each member, and
/// each member's next token is above it.
async fn one_token_above_every_members(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let mut last = 0;
    for name in ["left", "right", "right", "right"] {
        let guard = taken(&locks, name).await;
        last = guard.fencing_token().expect("a token").get();
        guard.release().await.expect("release");
    }
    let both = locks.multi_lock(["left", "right"]).expect("multi lock");
    let held = both.try_acquire().await.expect("try").expect("free");
    let token = held.fencing_token().expect("a token").get();
    assert!(token > last, "{token} after {last}");
    held.release().await.expect("release");
    for name in ["left", "right"] {
        let guard = taken(&locks, name).await;
        assert!(
            guard.fencing_token().expect("a token").get() > token,
            "{name}"
        );
        guard.release().await.expect("release");
    }
}

/// A member deleted behind the holder's back loses the whole hold at the
/// next renewal; the other member is free by its TTL.
async fn losing_one_member_loses_the_hold(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_millis(300))).await;
    let pair = locks.multi_lock(["kept", "taken"]).expect("multi lock");
    let held = pair.try_acquire().await.expect("try").expect("free");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(held.is_valid(), "renewed: {:?}", held.status());
    server.admin(&["DEL", "lock:{taken}"]).expect("DEL");
    let reason = tokio::time::timeout(Duration::from_secs(2), held.lost())
        .await
        .expect("never lost");
    assert!(reason.is_some(), "{reason:?}");
    let started = Instant::now();
    loop {
        if let Some(guard) = locks.try_acquire("kept").await.expect("try") {
            guard.release().await.expect("release");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the other member stayed held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A waiter for two names is woken by the release of the one taken second
/// (not only the lease's own key's), not by a timer.
async fn a_waiter_is_woken_by_any_members_release(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let pair = locks.multi_lock(["first", "second"]).expect("multi lock");
    let taken_second = pair.names().nth(1).expect("two names").to_owned();
    let second = taken(&locks, &taken_second).await;
    let waiter = {
        let pair = pair.clone();
        spawn_timed(async move { pair.acquire_with(&waiting(20)).await })
    };
    let key = locks.key(&taken_second).expect("key");
    until_subscribed(&server, &key, 1).await;
    assert!(!waiter.is_finished(), "taken beside a held member");
    second.release().await.expect("release");
    let released = Instant::now();
    let held = served_promptly(waiter, released, "the waiter").await;
    held.expect("acquire").release().await.expect("release");
}

/// No names, too many, a weight and a hand-off are typed errors; the same
/// name twice is one member.
async fn bad_input_is_refused(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let none: [&str; 0] = [];
    assert!(matches!(
        locks.multi_lock(none),
        Err(LockError::InvalidKey { .. })
    ));
    let many: Vec<String> = (0..=MAX_MULTI_KEYS).map(|n| format!("key-{n}")).collect();
    assert!(matches!(
        locks.multi_lock(&many),
        Err(LockError::InvalidKey { .. })
    ));
    assert!(locks.multi_lock(&many[..MAX_MULTI_KEYS]).is_ok());
    assert!(matches!(
        locks.multi_lock(["ok", ""]),
        Err(LockError::InvalidKey { .. })
    ));
    let twice = locks.multi_lock(["b", "a", "b"]).expect("multi lock");
    assert_eq!(twice.names().collect::<Vec<_>>().len(), 2);
    assert!(keys(&server).is_empty(), "{:?}", keys(&server));
    let held = twice.try_acquire().await.expect("try").expect("free");
    assert!(matches!(
        held.hand_off(),
        Err(LockError::HandOffUnsupported { .. })
    ));
    // The server down: a typed error within the command timeout.
    drop(server);
    let down = tokio::time::timeout(Duration::from_secs(5), twice.try_acquire())
        .await
        .expect("an acquire on a server that is down hung");
    assert!(
        matches!(
            down,
            Err(LockError::Connection { .. } | LockError::Timeout { .. })
        ),
        "{down:?}"
    );
}

/// An attempt sent again (the same hold) takes its keys again; one whose
/// member was deleted meanwhile takes every member afresh, with a token
/// above the deleted member's counter as it is now, and leaves none behind.
async fn a_replayed_attempt_takes_every_member(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let pair = locks
        .multi_lock(["again-1", "again-2"])
        .expect("multi lock");
    let keys: Vec<lock_core::LockKey> = pair
        .names()
        .map(|name| lock_core::LockKey::new("lock:", name).expect("key"))
        .collect();
    let members: std::sync::Arc<[lock_core::LockKey]> = keys.clone().into();
    let hold = lock_core::HoldToken::new(lock_core::OwnerToken::generate().expect("owner"))
        .expect("hold")
        .with_kind(lock_core::HoldKind::Multi(members.clone()));
    let claim = lock_core::Claim::Multi(members);
    let ttl = Duration::from_secs(30);
    let token = |outcome| match outcome {
        Ok(lock_core::AcquireOutcome::Acquired(lock_core::Acquired {
            fencing_token: Some(token),
            ..
        })) => token.get(),
        other => panic!("not granted: {other:?}"),
    };
    let first = token(
        locks
            .backend()
            .try_acquire(&keys[0], &hold, ttl, &claim, None)
            .await,
    );
    let same = token(
        locks
            .backend()
            .try_acquire(&keys[0], &hold, ttl, &claim, None)
            .await,
    );
    assert_eq!(same, first, "a retried attempt keeps its token");
    // The second member deleted, and taken and released by someone else.
    server.admin(&["DEL", keys[1].redis_key()]).expect("DEL");
    let other = taken(&locks, keys[1].name()).await;
    let between = other.fencing_token().expect("a token").get();
    other.release().await.expect("release");
    let afresh = token(
        locks
            .backend()
            .try_acquire(&keys[0], &hold, ttl, &claim, None)
            .await,
    );
    assert!(afresh > between, "{afresh} after {between}");
    for name in pair.names() {
        assert!(held_by_another(&locks, name).await, "{name} free");
    }
    let released = locks
        .backend()
        .release(
            &keys[0],
            &hold.granted(Some(lock_core::FencingToken::new(afresh))),
        )
        .await;
    assert!(
        matches!(released, Ok(lock_core::ReleaseOutcome::Released)),
        "{released:?}"
    );
}

/// The last step of a hold taken slot by slot on a cluster,
/// `multi/raise.lua`, over a member that another kind took meanwhile (the
/// member expired between its slot and the raise): not held, so the
/// attempt gives back what it took and waits, not corrupted data; a key of
/// a type no kind uses is still foreign data.
#[test]
fn a_raise_over_another_kinds_hold_finds_it_not_held() {
    let server = RedisServer::start().expect("start");
    let raise = lock_core::strategy::scripts::multi::RAISE.source();
    let value = "owner:0123456789abcdef";
    for (kind, make) in [
        ("zset", ["ZADD", "lock:{raised}", "1", "a"]),
        ("hash", ["HSET", "lock:{raised}", "a", "1"]),
        ("list", ["RPUSH", "lock:{raised}", "a", "b"]),
    ] {
        server.admin(&["DEL", "lock:{raised}"]).expect("DEL");
        server.admin(&make).expect(kind);
        let held = format!("{value}#5");
        let reply = server
            .admin(&[
                "EVAL",
                raise,
                "2",
                "lock:{raised}",
                "lock:{raised}:fence",
                &held,
                value,
                "7",
            ])
            .expect("EVAL");
        match (kind, &reply) {
            ("list", lock_testkit::AdminReply::Error(error)) if error.contains("WRONGTYPE") => {}
            ("zset" | "hash", lock_testkit::AdminReply::Int(0)) => {}
            _ => panic!("{kind}: {reply:?}"),
        }
    }
}

lock_testkit::client_tests!(
    all_or_nothing,
    one_token_above_every_members,
    losing_one_member_loses_the_hold,
    a_waiter_is_woken_by_any_members_release,
    a_replayed_attempt_takes_every_member,
    bad_input_is_refused,
);
