//! A master behind Sentinel, on both clients: locks follow the master
//! through `SENTINEL FAILOVER` (the old master keeps answering as a master
//! for seconds afterwards, so only the sentinels can tell a client it moved)
//! and through a master killed with kill -9, and waiters resume.
//!
//! These start sentinel groups, so they run in the build with both clients
//! (and TLS), which `cargo xtask test` runs.

#![cfg(all(feature = "redis", feature = "fred", feature = "tls"))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::{
    ClientKind, ConnectOptions, Endpoint, LockConfig, LockError, LockManager, RetryPolicy,
};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::{RedisServer, SentinelGroup};

/// How soon after a failover every new grant must land on the new master.
const FOLLOW_WITHIN: Duration = Duration::from_secs(3);

fn config() -> LockConfig {
    let mut config = LockConfig::default();
    config.ttl = Duration::from_secs(2);
    config.wait_timeout = Duration::from_secs(10);
    config.retry = RetryPolicy::new(Duration::from_millis(5), Duration::from_millis(50));
    config.command_timeout = Duration::from_millis(500);
    config
}

async fn manager(kind: ClientKind, group: &SentinelGroup) -> LockManager {
    let endpoint = Endpoint::sentinel(group.sentinel_urls(), group.service_name());
    let backend = SingleNodeBackend::connect(
        kind,
        endpoint,
        ConnectOptions::new(Duration::from_secs(2), Duration::from_millis(500)),
    )
    .await
    .expect("connect through the sentinels");
    LockManager::new(Arc::new(backend), config()).expect("config")
}

async fn start_group() -> SentinelGroup {
    tokio::task::spawn_blocking(|| SentinelGroup::start("locks", 1, 3))
        .await
        .expect("task")
        .expect("sentinel group")
}

fn exists(server: &RedisServer, key: &str) -> bool {
    server
        .admin(&["EXISTS", key])
        .ok()
        .and_then(|reply| reply.as_int())
        == Some(1)
}

/// Takes locks until one lands on `master` (or `FOLLOW_WITHIN` passes);
/// returns how long that took.
async fn follows(locks: &LockManager, master: &RedisServer, label: &str) -> Duration {
    let started = Instant::now();
    let mut round = 0;
    loop {
        round += 1;
        let name = format!("{label}-{round}");
        match locks.acquire(&name).await {
            Ok(guard) => {
                let key = locks.key(&name).expect("key");
                let on_new_master = exists(master, key.redis_key());
                guard.release().await.ok();
                if on_new_master {
                    return started.elapsed();
                }
            }
            Err(err) if err.is_retryable() => {}
            Err(err) => panic!("{label}: {err}"),
        }
        assert!(
            started.elapsed() < FOLLOW_WITHIN,
            "{label}: grants still miss the new master {:?} after the failover",
            FOLLOW_WITHIN
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn locks_follow_a_requested_failover() {
    lock_testkit::run(async {
        for kind in ClientKind::compiled() {
            // A group of its own: the old master becomes a replica only
            // seconds later, and until then no second failover can start.
            let group = start_group().await;
            let locks = manager(kind, &group).await;
            let guard = locks.acquire("before").await.expect("acquire");
            guard.release().await.expect("release");
            let master = tokio::task::block_in_place(|| {
                group
                    .failover(Duration::from_secs(20))
                    .map(|master| master.port())
            })
            .expect("failover");
            let master = group
                .servers()
                .iter()
                .find(|server| server.port() == master)
                .expect("the new master");
            let took = follows(&locks, master, &format!("{kind}-requested")).await;
            println!("{kind}: grants reach the new master {took:?} after SENTINEL FAILOVER");
        }
    });
}

#[test]
fn waiters_resume_after_the_master_is_killed() {
    const TASKS: usize = 4;
    lock_testkit::run(async {
        for kind in ClientKind::compiled() {
            let mut group = start_group().await;
            let locks = Arc::new(manager(kind, &group).await);
            let held = locks.acquire("contended").await.expect("acquire");
            let entries = Arc::new(AtomicUsize::new(0));
            let waiters: Vec<_> = (0..TASKS)
                .map(|_| {
                    let locks = Arc::clone(&locks);
                    let entries = Arc::clone(&entries);
                    tokio::spawn(async move {
                        let deadline = Instant::now() + Duration::from_secs(20);
                        loop {
                            match locks.acquire("contended").await {
                                Ok(guard) => {
                                    entries.fetch_add(1, Ordering::SeqCst);
                                    guard.release().await.ok();
                                    return;
                                }
                                Err(err) if err.is_retryable() && Instant::now() < deadline => {}
                                Err(err) => return panic_on(err),
                            }
                        }
                    })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(200)).await;
            let old = group.kill_master().expect("kill -9 the master");
            tokio::task::block_in_place(|| {
                group
                    .wait_for_new_master(old, Duration::from_secs(20))
                    .map(|_| ())
            })
            .expect("a replica takes over");
            // The holder's lease ends with the dead master (its key was on
            // the replica, which keeps it until the TTL ends, or lost it).
            drop(held);
            for waiter in waiters {
                waiter.await.unwrap_or_else(|err| panic!("{kind}: {err}"));
            }
            assert_eq!(
                entries.load(Ordering::SeqCst),
                TASKS,
                "{kind}: every waiter got in"
            );
        }
    });
}

fn panic_on(err: LockError) {
    panic!("a waiter failed: {err}");
}
