//! The same test body under the three strategies, changing only config.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::time::Duration;

use distlock::config::Strategy;
use distlock::error::Capability;
use distlock::{ClientKind, Config, LockError};
use lock_testkit::contract::held_by_another;
use lock_testkit::contract::taken;
use lock_testkit::contract::waiting_up_to;
use lock_testkit::RedisServer;

mod common;

/// Takes, contends and releases a lock through the front door: nothing here
/// knows which strategy is behind it.
async fn body(config: Config) {
    let locks = distlock::connect(&config).await.expect("connect");
    let guard = taken(&locks, "front-door").await;
    assert!(held_by_another(&locks, "front-door").await, "exclusive");
    let waited = locks
        .acquire_with("front-door", &waiting_up_to(Duration::from_millis(100)))
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

/// Every primitive's handle on every strategy, on every client: made where
/// the strategy has the primitive, refused with `Unsupported` naming the
/// strategy and the primitive where it has not, before anything is sent
/// (the servers see no command of it).
#[test]
fn a_primitive_a_strategy_lacks_is_refused_when_its_handle_is_made() {
    lock_testkit::run(async {
        let three: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start().expect("start"))
            .collect();
        for client in ClientKind::compiled() {
            for (strategy, servers, has) in [
                ("single", &three[..1], Capability::ALL),
                ("reentrant", &three[..1], &[][..]),
                ("redlock", &three[..], &[Capability::MultiKeys][..]),
            ] {
                let config = common::config(strategy, servers, client, &[]);
                let locks = distlock::connect(&config).await.expect("connect");
                let made: [(Capability, Result<(), LockError>); 6] = [
                    (Capability::Semaphores, locks.semaphore("p", 2).map(drop)),
                    (Capability::RwLocks, locks.rw_lock("p").map(drop)),
                    (
                        Capability::MultiKeys,
                        locks.multi_lock(["p", "q"]).map(drop),
                    ),
                    (Capability::Elections, locks.election("p").map(drop)),
                    (Capability::Latches, locks.latch("p").map(drop)),
                    (Capability::Barriers, locks.barrier("p", 2).map(drop)),
                ];
                for (capability, result) in made {
                    let what = format!("{client} {strategy}: {capability}");
                    match result {
                        Ok(()) => assert!(has.contains(&capability), "{what}: made"),
                        Err(LockError::Unsupported {
                            strategy: named,
                            capability: lacking,
                        }) => {
                            assert!(!has.contains(&capability), "{what}: refused");
                            assert_eq!((named, lacking), (strategy, capability), "{what}");
                        }
                        Err(err) => panic!("{what}: {err}"),
                    }
                }
                let state = locks.semaphore_state("p").await.map(drop);
                assert_eq!(
                    state.is_ok(),
                    has.contains(&Capability::Semaphores),
                    "{client} {strategy}: semaphore_state {state:?}"
                );
                let state = locks.rw_lock_state("p").await.map(drop);
                assert_eq!(
                    state.is_ok(),
                    has.contains(&Capability::RwLocks),
                    "{client} {strategy}: rw_lock_state {state:?}"
                );
            }
        }
        for server in &three {
            let keys = server.admin(&["DBSIZE"]).expect("DBSIZE");
            assert_eq!(keys.as_int(), Some(0), "something was written");
        }
    });
}
