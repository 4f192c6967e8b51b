//! Fair mode on the single-node strategy: arrival order, waiters that give up
//! or die leave the queue, and try-once callers do not jump it.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_core::{
    AcquireOutcome, ClientKind, HoldToken, LockBackend, LockKey, LockManager, OwnerToken,
    RetryPolicy, WaitMode, FAIR_WAITER_LEASE,
};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::{fast_config, fast_options};
use lock_testkit::RedisServer;

struct Fair {
    server: RedisServer,
    backend: Arc<SingleNodeBackend>,
    locks: LockManager,
}

async fn fair(kind: ClientKind) -> Fair {
    let server = RedisServer::start().expect("start");
    let (backend, locks) = process(kind, &server, WaitMode::Notify).await;
    Fair {
        server,
        backend,
        locks,
    }
}

/// A backend and manager of their own, as another process would have: its
/// own connections and its own subscriber.
async fn process(
    kind: ClientKind,
    server: &RedisServer,
    wait_mode: WaitMode,
) -> (Arc<SingleNodeBackend>, LockManager) {
    let backend = Arc::new(
        SingleNodeBackend::connect(kind, &server.url(), fast_options())
            .await
            .expect("connect"),
    );
    let mut config = fast_config(Duration::from_secs(10));
    config.fair = true;
    config.wait_timeout = Duration::from_secs(20);
    config.wait_mode = wait_mode;
    if wait_mode == WaitMode::Poll {
        // Backoff far above the waiter lease: a waiter that slept that long
        // between attempts would drop out of the line.
        config.retry = RetryPolicy::new(Duration::from_secs(3), Duration::from_secs(8));
    }
    let locks =
        LockManager::new(Arc::clone(&backend) as Arc<dyn LockBackend>, config).expect("config");
    (backend, locks)
}

fn queued(fair: &Fair, name: &str) -> i64 {
    let key = LockKey::new("lock:", name).expect("key");
    fair.server
        .admin(&["LLEN", &key.queue_key()])
        .expect("LLEN")
        .as_int()
        .expect("a length")
}

async fn until_queued(fair: &Fair, name: &str, length: i64) {
    let started = Instant::now();
    while queued(fair, name) != length {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the queue never reached {length}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waiters in different processes (each with its own connections and
/// subscriber) get the lock in the order they arrived.
async fn arrival_order_holds(kind: ClientKind) {
    served_in_arrival_order(kind, WaitMode::Notify, Duration::ZERO).await;
}

/// Polling waiters keep their place too, however long their backoff: they
/// try again well within the waiter lease, while the holder keeps the lock
/// for longer than that lease.
async fn arrival_order_holds_when_polling(kind: ClientKind) {
    served_in_arrival_order(kind, WaitMode::Poll, FAIR_WAITER_LEASE * 3 / 2).await;
}

async fn served_in_arrival_order(kind: ClientKind, wait_mode: WaitMode, hold_for: Duration) {
    let fair = fair(kind).await;
    let holder = fair
        .locks
        .try_acquire("ordered")
        .await
        .expect("try")
        .expect("free");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for index in 0..5 {
        let (_, locks) = process(kind, &fair.server, wait_mode).await;
        let order = Arc::clone(&order);
        waiters.push(tokio::spawn(async move {
            let guard = locks.acquire("ordered").await.expect("acquire in turn");
            order.lock().expect("order").push(index);
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.release().await.expect("release");
        }));
        until_queued(&fair, "ordered", index + 1).await;
    }
    tokio::time::sleep(hold_for).await;
    holder.release().await.expect("release");
    for waiter in waiters {
        waiter.await.expect("waiter");
    }
    assert_eq!(
        *order.lock().expect("order"),
        vec![0, 1, 2, 3, 4],
        "served out of arrival order"
    );
    assert_eq!(queued(&fair, "ordered"), 0, "the queue is empty at the end");
}

/// A waiter that gives up (its future is dropped) leaves the queue at once and
/// does not stall the waiter behind it.
async fn abandoned_waiter_leaves_the_queue(kind: ClientKind) {
    let fair = fair(kind).await;
    let holder = fair
        .locks
        .try_acquire("abandoned")
        .await
        .expect("try")
        .expect("free");
    let quitter = {
        let locks = fair.locks.clone();
        tokio::spawn(async move { locks.acquire("abandoned").await.map(|_| ()) })
    };
    until_queued(&fair, "abandoned", 1).await;
    let patient = {
        let locks = fair.locks.clone();
        tokio::spawn(async move { locks.acquire("abandoned").await })
    };
    until_queued(&fair, "abandoned", 2).await;
    quitter.abort();
    until_queued(&fair, "abandoned", 1).await;
    let released_at = Instant::now();
    holder.release().await.expect("release");
    let guard = patient
        .await
        .expect("task")
        .expect("the patient waiter acquires");
    assert!(
        released_at.elapsed() < FAIR_WAITER_LEASE / 2,
        "took {:?}",
        released_at.elapsed()
    );
    guard.release().await.expect("release");
}

/// A waiter that died in the queue stops blocking the others within the
/// waiter lease, and a try-once caller never jumps the queue.
async fn dead_waiter_is_dropped_within_its_lease(kind: ClientKind) {
    let fair = fair(kind).await;
    let key = LockKey::new("lock:", "dead").expect("key");
    let dead = HoldToken::new(OwnerToken::generate().expect("rng")).expect("rng");
    let holder = fair
        .locks
        .try_acquire("dead")
        .await
        .expect("try")
        .expect("free");
    let outcome = fair
        .backend
        .try_acquire_fair(
            &key,
            &dead,
            Duration::from_secs(10),
            FAIR_WAITER_LEASE,
            true,
        )
        .await
        .expect("queue the soon-dead waiter");
    assert!(matches!(outcome, AcquireOutcome::Held { .. }));
    holder.release().await.expect("release");
    // Free, but the dead waiter is first: a try-once caller must not jump it.
    assert!(
        fair.locks.try_acquire("dead").await.expect("try").is_none(),
        "jumped the queue"
    );
    assert_eq!(
        queued(&fair, "dead"),
        1,
        "a try-once caller does not join the queue"
    );
    let started = Instant::now();
    let guard = fair
        .locks
        .acquire("dead")
        .await
        .expect("acquire after the dead waiter's lease");
    let waited = started.elapsed();
    assert!(
        waited < FAIR_WAITER_LEASE + Duration::from_millis(1500),
        "waited {waited:?}"
    );
    guard.release().await.expect("release");
}

macro_rules! fair_tests {
    ($module:ident, $kind:expr) => {
        mod $module {
            use super::*;

            #[test]
            fn arrival_order_holds() {
                lock_testkit::run(super::arrival_order_holds($kind));
            }

            #[test]
            fn arrival_order_holds_when_polling() {
                lock_testkit::run(super::arrival_order_holds_when_polling($kind));
            }

            #[test]
            fn abandoned_waiter_leaves_the_queue() {
                lock_testkit::run(super::abandoned_waiter_leaves_the_queue($kind));
            }

            #[test]
            fn dead_waiter_is_dropped_within_its_lease() {
                lock_testkit::run(super::dead_waiter_is_dropped_within_its_lease($kind));
            }
        }
    };
}

#[cfg(feature = "redis")]
fair_tests!(on_redis, ClientKind::Redis);
#[cfg(feature = "fred")]
fair_tests!(on_fred, ClientKind::Fred);
