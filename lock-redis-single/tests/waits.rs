//! How long a wait takes at its edges: a zero wait is one attempt, a
//! subscription that cannot be made costs no more than the wait allows, and
//! a woken waiter that leaves before its attempt finished passes the
//! wake-up on.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::strategy::{ReleaseNotifier, ScriptedNode};
use lock_core::{ClientKind, LockBackend, LockError, LockManager, Wakeups as _};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::taken;
use lock_testkit::contract::waiting_up_to;
use lock_testkit::contract::{fast_config, fast_options};
use lock_testkit::faulty::{Fault, Faulty};
use lock_testkit::{AdminReply, RedisServer};

fn pubsub_clients(server: &RedisServer) -> usize {
    match server.admin(&["CLIENT", "LIST", "TYPE", "pubsub"]) {
        Ok(AdminReply::Bulk(Some(list))) => String::from_utf8_lossy(&list).lines().count(),
        other => panic!("CLIENT LIST failed: {other:?}"),
    }
}

/// A single-node backend on `server` through `kind`.
async fn single_node(kind: ClientKind, server: &RedisServer) -> Arc<dyn LockBackend> {
    let backend = SingleNodeBackend::connect(kind, &server.url(), fast_options())
        .await
        .expect("connect");
    Arc::new(backend)
}

/// `acquire_with` with no wait and `wait_timeout = 0` make exactly one attempt on a
/// held lock, and open no subscriber connection.
async fn a_zero_wait_is_one_attempt(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let backend = single_node(kind, &server).await;
    let locks = LockManager::new(Arc::clone(&backend), fast_config(Duration::from_secs(5)))
        .expect("config");
    let holder = taken(&locks, "busy").await;
    let waited = locks
        .acquire_with("busy", &waiting_up_to(Duration::ZERO))
        .await;
    assert!(
        matches!(waited, Err(LockError::NotAcquired { attempts: 1, .. })),
        "no wait: {waited:?}"
    );
    let mut config = fast_config(Duration::from_secs(5));
    config.wait_timeout = Duration::ZERO;
    let zero = LockManager::new(backend, config).expect("config");
    let waited = zero.acquire("busy").await;
    assert!(
        matches!(waited, Err(LockError::NotAcquired { attempts: 1, .. })),
        "wait_timeout = 0: {waited:?}"
    );
    assert_eq!(pubsub_clients(&server), 0, "a zero wait subscribed");
    holder.release().await.expect("release");
}

/// With release notifications unreachable (a listener that never answers),
/// A 100 ms wait returns within about 100 ms, not after the
/// connect or command time-out of the subscription.
async fn an_unreachable_subscription_is_bounded_by_the_wait(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    // Accepts connections (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent_url = lock_core::NodeUrl::new(format!(
        "redis://127.0.0.1:{}",
        silent.local_addr().expect("address").port()
    ));
    let options = fast_options();
    let client = lock_core::strategy::connect(kind, &server.url(), options)
        .await
        .expect("connect");
    let node = ScriptedNode::from_client(client)
        .with_notifier(Arc::new(ReleaseNotifier::new(kind, silent_url, options)));
    let backend: Arc<dyn LockBackend> = Arc::new(SingleNodeBackend::from_scripted(node));
    let locks = LockManager::new(backend, fast_config(Duration::from_secs(5))).expect("config");
    let holder = taken(&locks, "busy").await;
    let started = Instant::now();
    let waited = locks
        .acquire_with("busy", &waiting_up_to(Duration::from_millis(100)))
        .await;
    let took = started.elapsed();
    assert!(
        matches!(waited, Err(LockError::NotAcquired { .. })),
        "{waited:?}"
    );
    assert!(
        took < Duration::from_millis(300),
        "a 100 ms wait took {took:?} (connect time-out {:?}, command time-out {:?})",
        options.connect_timeout,
        options.command_timeout
    );
    holder.release().await.expect("release");
}

/// Two waiters in one process; a release wakes the first, whose future is
/// dropped before its attempt reached Redis (a caller's `timeout` or
/// `select!`). The second must take the lock at once, not when the old
/// holder's TTL (10 s) would have run out.
async fn a_dropped_waiter_passes_its_wake_up_on(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let inner = single_node(kind, &server).await;
    let backend = Faulty::passing(&inner);
    // Asleep: the first waiter attempts, watches for releases and attempts
    // again; the second, behind it, attempts and watches.
    let until_asleep = |watches: usize, attempts: usize, what: &'static str| {
        let backend = Arc::clone(&backend);
        lock_testkit::eventually(Duration::from_secs(5), what, move || {
            let asleep = backend.watches() >= watches && backend.acquires() >= attempts;
            async move { asleep.then_some(()) }
        })
    };
    let locks = Arc::new(
        LockManager::new(backend.clone(), fast_config(Duration::from_secs(10))).expect("config"),
    );
    let holder = taken(&locks, "handed").await;
    let waiter = |locks: &Arc<LockManager>| {
        let locks = Arc::clone(locks);
        tokio::spawn(async move { locks.acquire("handed").await })
    };
    // The holder's attempt, then the waiters'.
    let first = waiter(&locks);
    until_asleep(1, 3, "the first waiter asleep").await;
    let second = waiter(&locks);
    until_asleep(2, 4, "the second waiter asleep").await;
    // The next attempt, the woken first waiter's, dawdles; it is dropped
    // on its way.
    backend.next_acquire(Fault::Late(Duration::from_millis(500)));
    holder.release().await.expect("release");
    let released = Instant::now();
    lock_testkit::eventually(Duration::from_secs(5), "the woken waiter's attempt", || {
        let pending = backend.acquire_fault_pending();
        async move { (!pending).then_some(()) }
    })
    .await;
    first.abort();
    let took = tokio::time::timeout(Duration::from_secs(5), second)
        .await
        .expect("the second waiter slept while the lock was free")
        .expect("task")
        .expect("the second waiter acquires");
    let after = released.elapsed();
    assert!(
        after < Duration::from_millis(400),
        "{kind}: the second waiter took the lock {after:?} after its release"
    );
    took.release().await.expect("release");
}

/// A waiter woken by every release (an election's observer, a fair or a
/// semaphore's waiter) is no waiter "ahead" of a newcomer: a release it
/// was woken by may not have been taken, so the newcomer must try again
/// once subscribed. Behind a plain waiter, it need not.
async fn every_release_watchers_are_not_ahead(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let notifier = ReleaseNotifier::new(kind, server.url(), fast_options());
    let observer = notifier.watch("lock:{w}:released").await.expect("watch");
    observer.wake_on_every_release();
    let newcomer = notifier.watch("lock:{w}:released").await.expect("watch");
    assert!(
        !newcomer.joined_behind_others(),
        "behind an every-release watcher only"
    );
    let behind = notifier.watch("lock:{w}:released").await.expect("watch");
    assert!(behind.joined_behind_others(), "behind a plain waiter");
}

lock_testkit::client_tests!(
    every_release_watchers_are_not_ahead,
    a_zero_wait_is_one_attempt,
    a_dropped_waiter_passes_its_wake_up_on,
    an_unreachable_subscription_is_bounded_by_the_wait,
);
