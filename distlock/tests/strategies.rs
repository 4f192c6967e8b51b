//! The same test body under the three strategies, changing only config.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::time::Duration;

use distlock::{ClientKind, Config, LockError, Strategy};
use lock_testkit::RedisServer;

mod common;

/// Takes, contends and releases a lock through the front door: nothing here
/// knows which strategy is behind it.
async fn body(config: Config) {
    let locks = distlock::connect(&config).await.expect("connect");
    let guard = locks
        .try_acquire("front-door")
        .await
        .expect("try_acquire")
        .expect("free");
    assert!(
        locks
            .try_acquire("front-door")
            .await
            .expect("try_acquire")
            .is_none(),
        "exclusive"
    );
    let waited = locks
        .acquire_with(
            "front-door",
            &distlock::AcquireOptions::new().with_wait(Duration::from_millis(100)),
        )
        .await;
    assert!(
        matches!(waited, Err(LockError::NotAcquired { .. })),
        "{waited:?}"
    );
    assert!(locks
        .inspect("front-door")
        .await
        .expect("inspect")
        .is_held());
    guard.release().await.expect("release");
    let value = locks
        .with_lock("front-door", |lease| async move { lease.key().to_owned() })
        .await
        .expect("with_lock");
    assert_eq!(value, "front-door");
    assert!(!locks
        .inspect("front-door")
        .await
        .expect("inspect")
        .is_held());
}

#[test]
fn fair_mode_is_refused_where_it_does_not_exist() {
    lock_testkit::run(async {
        let three: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start().expect("start"))
            .collect();
        for (strategy, servers) in [("reentrant", &three[..1]), ("redlock", &three[..])] {
            let mut config = common::config(strategy, servers, ClientKind::default(), &[]);
            config.lock.fair = true;
            match distlock::connect(&config).await {
                Err(LockError::InvalidConfig { field, .. }) => {
                    assert_eq!(field, "fair", "{strategy}")
                }
                other => panic!("{strategy} with fair = true: {:?}", other.map(|_| ())),
            }
        }
        let single = [RedisServer::start().expect("start")];
        let mut config = common::config("single", &single, ClientKind::default(), &[]);
        config.lock.fair = true;
        body(config).await;
    });
}

#[test]
fn the_same_body_runs_under_every_strategy() {
    lock_testkit::run(async {
        let single = [RedisServer::start().expect("start")];
        let three: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start().expect("start"))
            .collect();
        for client in ClientKind::compiled() {
            body(common::config("single", &single, client, &[])).await;
            body(common::config("reentrant", &single, client, &[])).await;
            let redlock = common::config("redlock", &three, client, &[]);
            assert_eq!(redlock.strategy(), Strategy::Redlock);
            body(redlock).await;
        }
    });
}
