//! How long a wait takes at its edges: a zero wait is one attempt, and a
//! subscription that cannot be made costs no more than the wait allows.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::kit::{ReleaseNotifier, ScriptedNode};
use lock_core::{ClientKind, LockBackend, LockError, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::{fast_config, fast_options};
use lock_testkit::{AdminReply, RedisServer};

fn pubsub_clients(server: &RedisServer) -> usize {
    match server.admin(&["CLIENT", "LIST", "TYPE", "pubsub"]) {
        Ok(AdminReply::Bulk(Some(list))) => String::from_utf8_lossy(&list).lines().count(),
        other => panic!("CLIENT LIST failed: {other:?}"),
    }
}

/// `acquire_within(0)` and `wait_timeout = 0` make exactly one attempt on a
/// held lock, and open no subscriber connection.
async fn a_zero_wait_is_one_attempt(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let backend: Arc<dyn LockBackend> = Arc::new(
        SingleNodeBackend::connect(kind, &server.url(), fast_options())
            .await
            .expect("connect"),
    );
    let locks = LockManager::new(Arc::clone(&backend), fast_config(Duration::from_secs(5)))
        .expect("config");
    let holder = locks.try_acquire("busy").await.expect("try").expect("free");
    let waited = locks.acquire_within("busy", Duration::ZERO).await;
    assert!(
        matches!(waited, Err(LockError::NotAcquired { attempts: 1, .. })),
        "acquire_within(0): {waited:?}"
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
/// `acquire_within(100ms)` returns within about 100 ms, not after the
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
    let client = lock_core::kit::connect(kind, &server.url(), options)
        .await
        .expect("connect");
    let node = ScriptedNode::from_client(client)
        .with_notifier(Arc::new(ReleaseNotifier::new(kind, silent_url, options)));
    let backend: Arc<dyn LockBackend> = Arc::new(SingleNodeBackend::from_scripted(node));
    let locks = LockManager::new(backend, fast_config(Duration::from_secs(5))).expect("config");
    let holder = locks.try_acquire("busy").await.expect("try").expect("free");
    let started = Instant::now();
    let waited = locks
        .acquire_within("busy", Duration::from_millis(100))
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

macro_rules! wait_tests {
    ($module:ident, $kind:expr) => {
        mod $module {
            use super::*;

            #[test]
            fn a_zero_wait_is_one_attempt() {
                lock_testkit::run(super::a_zero_wait_is_one_attempt($kind));
            }

            #[test]
            fn an_unreachable_subscription_is_bounded_by_the_wait() {
                lock_testkit::run(super::an_unreachable_subscription_is_bounded_by_the_wait(
                    $kind,
                ));
            }
        }
    };
}

#[cfg(feature = "redis")]
wait_tests!(on_redis, ClientKind::Redis);
#[cfg(feature = "fred")]
wait_tests!(on_fred, ClientKind::Fred);
