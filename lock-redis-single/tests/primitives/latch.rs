//! Count-down latches on the single-node strategy, on both clients: a
//! latch opens exactly at zero, woken by its message; its count is set
//! once; a count-down counts once per id; it lives for its TTL; it holds
//! its name against every other kind; bad input is refused.

use std::time::{Duration, Instant};

use lock_core::strategy::KeyNames as _;
use lock_core::{
    ClientKind, ListOptions, LockError, NameState, WaitMode, MAX_LATCH_COUNT, MAX_OWNER_LEN,
};
use lock_testkit::contract::{fast_config, waiting_up_to};
use lock_testkit::waiters::{served_within, spawn_timed, until_subscribed};
use lock_testkit::RedisServer;

use super::manager;

/// How soon a waiter is served once the latch opens, woken by its message:
/// well under the 1 s between a waiter's reads without one.
const WOKEN: Duration = Duration::from_millis(300);

/// Waiters of two processes wait while the count is above zero (past their
/// timer's reads too), and both go on as the last count-down opens it,
/// woken by its message: in each of four rounds, well before their timer,
/// so a latch that did not publish would fail a round. A late waiter goes
/// on at once, and an open latch counts no further.
async fn a_latch_opens_exactly_at_zero(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let config = fast_config(Duration::from_secs(30));
    let (setter, other) = (
        manager(kind, &server, config.clone()).await,
        manager(kind, &server, config).await,
    );
    for round in 0..4 {
        let name = format!("drained-{round}");
        let latch = setter.latch(&name).expect("latch");
        assert!(latch.set_count(3).await.expect("set"), "round {round}");
        let waiters: Vec<_> = [&setter, &other]
            .into_iter()
            .map(|locks| {
                let latch = locks.latch(&name).expect("latch");
                spawn_timed(async move { latch.wait().await })
            })
            .collect();
        until_subscribed(&server, &setter.key(&name).expect("key"), 2).await;
        assert_eq!(latch.count_down().await.expect("down"), 2);
        assert_eq!(latch.count_down().await.expect("down"), 1);
        if round == 0 {
            // Past a read by the timer: still shut at 1.
            tokio::time::sleep(Duration::from_millis(1_200)).await;
        }
        assert!(
            waiters.iter().all(|waiter| !waiter.is_finished()),
            "round {round}: a waiter went on above zero"
        );
        let opened = Instant::now();
        assert_eq!(latch.count_down().await.expect("down"), 0);
        for waiter in waiters {
            served_within(waiter, opened, WOKEN, "a latch waiter")
                .await
                .expect("wait");
        }
    }
    let latch = other.latch("drained-0").expect("latch");
    tokio::time::timeout(Duration::from_millis(500), latch.wait())
        .await
        .expect("a late waiter waits on an open latch")
        .expect("wait");
    assert_eq!(latch.count_down().await.expect("down"), 0);
    let state = latch.state().await.expect("state").expect("a latch");
    assert_eq!((state.count, state.initial, state.is_open()), (0, 3, true));
    assert!(state
        .remaining
        .is_some_and(|left| left > Duration::from_secs(23 * 3600)));
}

/// A waiter that starts before the latch is set waits for it to be set and
/// counted down; a latch set with 0 opens at once.
async fn a_waiter_on_an_unset_latch_waits_for_it(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let early = {
        let latch = locks.latch("exports").expect("latch");
        spawn_timed(async move { latch.wait().await })
    };
    until_subscribed(&server, &locks.key("exports").expect("key"), 1).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(!early.is_finished(), "a waiter went on before any count");
    let latch = locks.latch("exports").expect("latch");
    assert!(latch.set_count(1).await.expect("set"));
    assert!(!early.is_finished(), "a waiter went on at the set");
    let opened = Instant::now();
    assert_eq!(latch.count_down().await.expect("down"), 0);
    served_within(early, opened, WOKEN, "an early waiter")
        .await
        .expect("wait");
    let empty = locks.latch("nothing-to-wait-for").expect("latch");
    let waiter = {
        let latch = empty.clone();
        spawn_timed(async move { latch.wait().await })
    };
    until_subscribed(&server, &locks.key("nothing-to-wait-for").expect("key"), 1).await;
    let opened = Instant::now();
    assert!(empty.set_count(0).await.expect("set 0"));
    served_within(waiter, opened, WOKEN, "a waiter on a latch of 0")
        .await
        .expect("wait");
    assert_eq!(empty.count().await.expect("count"), Some(0));
}

/// The count is set once: the same count again changes nothing, counted
/// down or not; another is `CountMismatch` naming both. After `delete`, a
/// new count may be set.
async fn the_count_is_set_once(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let latch = locks.latch("upstream").expect("latch");
    assert_eq!(latch.count().await.expect("count"), None);
    assert!(latch.set_count(3).await.expect("set"));
    assert!(!latch.set_count(3).await.expect("set again"));
    assert_eq!(latch.count_down().await.expect("down"), 2);
    assert!(!latch.set_count(3).await.expect("set after a count-down"));
    assert_eq!(latch.count().await.expect("count"), Some(2));
    match latch.set_count(4).await {
        Err(LockError::CountMismatch {
            key,
            what: "latch count",
            stored: 3,
            requested: 4,
        }) => assert_eq!(key, "upstream"),
        other => panic!("4 against a stored 3: {other:?}"),
    }
    assert_eq!(latch.count().await.expect("count"), Some(2));
    assert!(latch.delete().await.expect("delete"));
    assert!(!latch.delete().await.expect("delete again"));
    assert_eq!(latch.count().await.expect("count"), None);
    assert!(latch.set_count(4).await.expect("a new latch"));
    assert_eq!(latch.count().await.expect("count"), Some(4));
}

/// A count-down with an id counts once for it: a retry after a lost reply
/// changes nothing. The ids live no longer than the latch.
async fn a_count_down_counts_once_per_id(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let latch = locks
        .latch("shards")
        .expect("latch")
        .with_ttl(Duration::from_secs(60))
        .expect("ttl");
    latch.set_count(3).await.expect("set");
    assert_eq!(latch.count_down_as("shard-1").await.expect("down"), 2);
    assert_eq!(latch.count_down_as("shard-1").await.expect("retry"), 2);
    assert_eq!(latch.count_down_as("shard-2").await.expect("down"), 1);
    let key = locks.key("shards").expect("key");
    let pttl = |key: &str| {
        server
            .admin(&["PTTL", key])
            .expect("pttl")
            .as_int()
            .expect("an integer")
    };
    let (latch_ttl, ids_ttl) = (pttl(key.redis_key()), pttl(&key.latch_downs_key()));
    assert!(
        (1..=60_000).contains(&ids_ttl) && ids_ttl <= latch_ttl,
        "the ids live {ids_ttl} ms, the latch {latch_ttl} ms"
    );
    assert_eq!(latch.count_down().await.expect("down"), 0);
    assert_eq!(latch.count_down_as("shard-3").await.expect("open"), 0);
    assert_eq!(latch.count().await.expect("count"), Some(0));
}

/// A latch ends with its TTL, by the server's clock: its ids with it, and a
/// count-down after that is `LatchNotSet`, writing nothing.
async fn a_latch_lives_for_its_ttl(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let latch = locks
        .latch("short")
        .expect("latch")
        .with_ttl(Duration::from_millis(300))
        .expect("ttl");
    latch.set_count(2).await.expect("set");
    latch.count_down_as("a").await.expect("down");
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(latch.state().await.expect("state"), None);
    match latch.count_down_as("b").await {
        Err(LockError::LatchNotSet { key }) => assert_eq!(key, "short"),
        other => panic!("a count-down after the TTL: {other:?}"),
    }
    let key = locks.key("short").expect("key");
    let exists = server
        .admin(&["EXISTS", key.redis_key(), &key.latch_downs_key()])
        .expect("exists")
        .as_int();
    assert_eq!(exists, Some(0), "a key outlived the latch or was written");
}

/// A latch holds its name: a lock and a semaphore wait beside it, and
/// `inspect` reads it; a latch's calls on a name a lock holds are refused
/// without touching the lock.
async fn a_latch_holds_its_name_against_other_kinds(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let latch = locks.latch("shared-name").expect("latch");
    latch.set_count(2).await.expect("set");
    assert!(locks
        .try_acquire("shared-name")
        .await
        .expect("try")
        .is_none());
    let semaphore = locks.semaphore("shared-name", 3).expect("semaphore");
    assert!(semaphore.try_acquire().await.expect("try").is_none());
    match locks.inspect("shared-name").await.expect("inspect") {
        NameState::Latch(state) => {
            assert_eq!((state.count, state.initial), (2, 2));
        }
        other => panic!("a latch inspected: {other:?}"),
    }
    let listed = locks.list(&ListOptions::default()).await.expect("list");
    assert!(listed
        .locks
        .iter()
        .any(|listed| listed.name == "shared-name"));

    let guard = locks.acquire("held").await.expect("acquire");
    let on_lock = locks.latch("held").expect("latch");
    for (what, result) in [
        ("set", on_lock.set_count(1).await.map(drop)),
        ("count down", on_lock.count_down().await.map(drop)),
        ("read", on_lock.state().await.map(drop)),
        ("delete", on_lock.delete().await.map(drop)),
    ] {
        match result {
            Err(LockError::WrongKind {
                key,
                found: "lock",
                wanted: "latch",
            }) => assert_eq!(key, "held", "{what}"),
            other => panic!("{what} on a lock's name: {other:?}"),
        }
    }
    // A wait on a lock's name waits, for a latch set there once it is free.
    let waited = tokio::time::timeout(Duration::from_millis(1_500), on_lock.wait()).await;
    assert!(waited.is_err(), "a wait on a lock's name: {waited:?}");
    assert!(guard.is_valid());
    guard.release().await.expect("the lock is still held");
    let permit = semaphore.try_acquire().await.expect("try");
    assert!(permit.is_none(), "a permit beside the latch");
    let on_permits = locks.latch("permits").expect("latch");
    let pool = locks.semaphore("permits", 2).expect("semaphore");
    let held = pool.acquire().await.expect("a permit");
    match on_permits.set_count(1).await {
        Err(LockError::WrongKind { found, .. }) => {
            assert_eq!(found, "semaphore, read-write lock or barrier");
        }
        other => panic!("a latch on a semaphore's name: {other:?}"),
    }
    held.release().await.expect("release");
}

/// Deleting a latch frees its name at once for the other kinds' waiters:
/// a lock's and a semaphore's, each woken by the delete's message rather
/// than at the latch's TTL.
async fn a_deleted_latch_wakes_the_other_kinds_waiters(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    for (round, name) in ["gate-lock", "gate-permits"].into_iter().enumerate() {
        let latch = locks.latch(name).expect("latch");
        latch.set_count(1).await.expect("set");
        let waiter = {
            let locks = locks.clone();
            let name = name.to_owned();
            let wait = waiting_up_to(Duration::from_secs(8));
            spawn_timed(async move {
                if round == 0 {
                    locks.acquire_with(&name, &wait).await.map(drop)
                } else {
                    let pool = locks.semaphore(&name, 2).expect("semaphore");
                    pool.acquire_with(&wait).await.map(drop)
                }
            })
        };
        until_subscribed(&server, &locks.key(name).expect("key"), 1).await;
        let freed = Instant::now();
        assert!(latch.delete().await.expect("delete"));
        served_within(waiter, freed, WOKEN, name)
            .await
            .expect("served");
    }
}

/// Without a subscription (`wait_mode = "poll"`), a waiter reads once a
/// second and goes on at its next read.
async fn a_poll_waiter_goes_on_at_its_next_read(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let mut config = fast_config(Duration::from_secs(30));
    config.wait_mode = WaitMode::Poll;
    let locks = manager(kind, &server, config).await;
    let latch = locks.latch("polled").expect("latch");
    latch.set_count(1).await.expect("set");
    let waiter = {
        let latch = latch.clone();
        spawn_timed(async move { latch.wait().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let opened = Instant::now();
    latch.count_down().await.expect("down");
    served_within(
        waiter,
        opened,
        Duration::from_millis(1_500),
        "a polling waiter",
    )
    .await
    .expect("wait");
}

/// Bad input gets a typed error before anything is sent.
async fn bad_input_is_refused(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let latch = locks.latch("input").expect("latch");
    match latch.set_count(MAX_LATCH_COUNT + 1).await {
        Err(LockError::InvalidConfig { field, .. }) => assert_eq!(field, "count"),
        other => panic!("a count over the maximum: {other:?}"),
    }
    assert!(latch.set_count(MAX_LATCH_COUNT).await.expect("the maximum"));
    for id in [String::new(), "x".repeat(MAX_OWNER_LEN + 1)] {
        match latch.count_down_as(&id).await {
            Err(LockError::InvalidConfig { field, .. }) => assert_eq!(field, "id"),
            other => panic!("an id of {} bytes: {other:?}", id.len()),
        }
    }
    assert_eq!(
        latch
            .count_down_as(&"x".repeat(MAX_OWNER_LEN))
            .await
            .expect("the longest id"),
        MAX_LATCH_COUNT - 1
    );
    for ttl in [Duration::ZERO, Duration::from_micros(1500)] {
        match locks.latch("input").expect("latch").with_ttl(ttl) {
            Err(LockError::InvalidTtl { .. }) => {}
            other => panic!("a TTL of {ttl:?}: {other:?}"),
        }
    }
    assert!(matches!(locks.latch(""), Err(LockError::InvalidKey { .. })));
    match locks.latch("unset").expect("latch").count_down().await {
        Err(LockError::LatchNotSet { key }) => assert_eq!(key, "unset"),
        other => panic!("a count-down before the set: {other:?}"),
    }
}

lock_testkit::client_tests!(
    a_latch_opens_exactly_at_zero,
    a_waiter_on_an_unset_latch_waits_for_it,
    the_count_is_set_once,
    a_count_down_counts_once_per_id,
    a_latch_lives_for_its_ttl,
    a_latch_holds_its_name_against_other_kinds,
    a_deleted_latch_wakes_the_other_kinds_waiters,
    a_poll_waiter_goes_on_at_its_next_read,
    bad_input_is_refused,
);
