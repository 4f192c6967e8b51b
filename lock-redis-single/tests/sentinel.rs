//! A master behind Sentinel, on both clients: locks follow the master
//! through `SENTINEL FAILOVER` (the old master keeps answering as a master
//! for seconds afterwards, so only the sentinels can tell a client it moved)
//! and through a master killed with kill -9, and waiters resume; a grant
//! or renewal whose reply comes back after a failover is acknowledged only
//! by the replicas of the master that took it.
//!
//! These start sentinel groups, so they run in the build with both clients
//! (and TLS), which `cargo xtask test` runs.

#![cfg(all(feature = "redis", feature = "fred", feature = "tls"))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::strategy::KeyNames as _;
use lock_core::{
    ClientKind, ConnectOptions, Endpoint, LockError, LockManager, ReplicasConfig, RetryPolicy,
};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::fast_config;
use lock_testkit::peek::{has_key, subscribers};
use lock_testkit::{AdminReply, RedisServer, SentinelGroup, SentinelStandIn};

/// How soon after a failover every new grant must land on the new master.
const FOLLOW_WITHIN: Duration = Duration::from_secs(3);

async fn manager(kind: ClientKind, group: &SentinelGroup) -> LockManager {
    let endpoint = Endpoint::sentinel(group.sentinel_urls(), group.service_name());
    let backend = SingleNodeBackend::connect(
        kind,
        endpoint,
        ConnectOptions::new(Duration::from_secs(2), Duration::from_millis(500)),
    )
    .await
    .expect("connect through the sentinels");
    LockManager::new(
        Arc::new(backend),
        fast_config(Duration::from_secs(2)).with_retry(RetryPolicy::new(
            Duration::from_millis(5),
            Duration::from_millis(50),
        )),
    )
    .expect("config")
}

async fn start_group() -> SentinelGroup {
    tokio::task::spawn_blocking(|| SentinelGroup::start("locks", 1, 3))
        .await
        .expect("task")
        .expect("sentinel group")
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
                let on_new_master = has_key(master, key.redis_key());
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
            // Semaphores follow too: a permit's keys are on the new master.
            let pool = locks.semaphore("pool", 2).expect("semaphore");
            let permit = pool.acquire().await.expect("a permit after the failover");
            let key = locks.key("pool").expect("key");
            assert!(
                has_key(master, key.redis_key()),
                "{kind}: the permit missed the new master"
            );
            assert!(
                has_key(master, &key.limit_key()),
                "{kind}: no limit on the new master"
            );
            permit.release().await.expect("release");
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
            // The waiters' process listens for the lock's releases, on
            // whichever node it subscribed: they are waiting.
            let key = locks.key("contended").expect("key");
            lock_testkit::eventually(Duration::from_secs(10), "the waiters watching", || {
                let servers = group.servers();
                let listening: i64 = servers.iter().map(|node| subscribers(node, &key)).sum();
                async move { (listening >= 1).then_some(()) }
            })
            .await;
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

/// A grant and a renewal sent to the master just before a failover, whose
/// replies come back after it (the master paused their writes with `CLIENT
/// PAUSE` until the failover was over): the old master took them, but none
/// of its replicas has them (its replica is now the new master, the other
/// follows that one), so both are refused. A `WAIT` sent on a connection to
/// the new master instead would count the new master's replica, which has
/// none of those writes, and report a grant that a second client can take
/// again on the new master.
#[test]
fn a_reply_after_a_failover_counts_the_old_masters_replicas() {
    lock_testkit::run(async {
        for kind in ClientKind::compiled() {
            let group = tokio::task::spawn_blocking(|| SentinelGroup::start("acked", 2, 3))
                .await
                .expect("task")
                .expect("sentinel group");
            let locks = acknowledging_manager(kind, &group).await;
            let renewed = patient_acquire(&locks, "renewed").await;
            // The scripts are in the master's cache: under `CLIENT PAUSE
            // WRITE` an unknown one's EVALSHA would come back NOSCRIPT at once,
            // and its source be sent after the failover, to the new master.
            renewed
                .extend(Duration::from_secs(30))
                .await
                .expect("extend with the replicas in sync");
            let old = group.master().expect("master");
            let old_port = old.port();
            match old.admin(&["CLIENT", "PAUSE", "30000", "WRITE"]) {
                Ok(AdminReply::Status(ok)) if ok == "OK" => {}
                other => panic!("CLIENT PAUSE: {other:?}"),
            }
            let granting = tokio::spawn({
                let locks = Arc::clone(&locks);
                async move { locks.try_acquire("granted").await }
            });
            let renewing = tokio::spawn(async move {
                let extended = renewed.extend(Duration::from_secs(60)).await;
                (extended, renewed)
            });
            // Both commands reach the paused master before the failover.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let new = tokio::task::block_in_place(|| {
                group
                    .failover(Duration::from_secs(20))
                    .map(|master| master.port())
            })
            .expect("failover");
            let new = group
                .servers()
                .iter()
                .find(|server| server.port() == new)
                .expect("the new master");
            tokio::task::block_in_place(|| wait_for_sync(new));
            let old = group
                .servers()
                .iter()
                .find(|server| server.port() == old_port)
                .expect("the old master");
            assert!(
                is_master(old),
                "{kind}: the old master still calls itself master"
            );
            old.admin(&["CLIENT", "UNPAUSE"]).expect("CLIENT UNPAUSE");
            let granted = granting.await.expect("task");
            let second = acknowledging_manager(kind, &group)
                .await
                .try_acquire("granted")
                .await;
            assert!(
                !(matches!(granted, Ok(Some(_))) && matches!(second, Ok(Some(_)))),
                "{kind}: two holders, one on each master"
            );
            assert!(
                matches!(&granted, Err(err) if refused_or_cut(err)),
                "{kind}: a grant none of its master's replicas has: {granted:?}"
            );
            let (extended, renewed) = renewing.await.expect("task");
            assert!(
                matches!(&extended, Err(err) if refused_or_cut(err)),
                "{kind}: a renewal none of its master's replicas has: {extended:?}"
            );
            assert!(
                renewed.remaining() <= Duration::from_secs(30),
                "{kind}: the deadline moved on another master's acknowledgement: {:?}",
                renewed.remaining()
            );
            drop(renewed);
        }
    });
}

/// Sentinels that accept connections and never answer (all of them
/// frozen with SIGSTOP) hold up the one command that asks them, for up to a
/// command timeout, and no other: the others go on with the master known.
#[test]
fn silent_sentinels_hold_up_only_the_command_that_asks() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    lock_testkit::run(async {
        for kind in ClientKind::compiled() {
            let mut group = start_group().await;
            let endpoint = Endpoint::sentinel(group.sentinel_urls(), group.service_name());
            let backend = SingleNodeBackend::connect(
                kind,
                endpoint,
                ConnectOptions::new(Duration::from_secs(2), TIMEOUT),
            )
            .await
            .expect("connect through the sentinels");
            let config = fast_config(Duration::from_secs(2))
                .with_retry(RetryPolicy::new(
                    Duration::from_millis(5),
                    Duration::from_millis(50),
                ))
                .with_timeouts(Duration::from_secs(2), TIMEOUT);
            let locks = Arc::new(LockManager::new(Arc::new(backend), config).expect("config"));
            locks.inspect("quiet").await.expect("inspect");
            for sentinel in group.sentinels_mut() {
                sentinel.pause().expect("SIGSTOP a sentinel");
            }
            // The sentinels' last answer is stale: the next command asks.
            tokio::time::sleep(Duration::from_millis(700)).await;
            let asker = tokio::spawn({
                let locks = Arc::clone(&locks);
                async move { locks.inspect("quiet").await }
            });
            // Its question goes to stopped sentinels, where nothing can be
            // read to show it was sent: a moment stands in for that fact.
            tokio::time::sleep(Duration::from_millis(100)).await;
            for _ in 0..5 {
                let started = Instant::now();
                locks.inspect("quiet").await.expect("inspect");
                let took = started.elapsed();
                assert!(
                    took < Duration::from_millis(500),
                    "{kind}: a command waited {took:?} behind the sentinels' silence"
                );
            }
            let asked = asker.await.expect("task");
            assert!(
                asked.is_ok(),
                "{kind}: the asker keeps the known master: {asked:?}"
            );
            for sentinel in group.sentinels_mut() {
                sentinel.resume().expect("SIGCONT a sentinel");
            }
        }
    });
}

/// A master demoted between the client's last look at the sentinels and
/// its next write refuses the write inside the pipeline that carries its
/// `WAIT` (`READONLY` as one of the replies): the very next command must
/// ask the sentinels again and reach the new master, not keep writing to
/// the demoted one until the next periodic look.
#[test]
fn a_readonly_reply_in_a_pipeline_finds_the_new_master() {
    lock_testkit::run(async {
        let new = RedisServer::start().expect("new master");
        let _replica = RedisServer::builder()
            .replica_of(new.port())
            .start()
            .expect("the new master's replica");
        tokio::task::block_in_place(|| wait_for_sync(&new));
        // The demoted master replicates from nowhere: READONLY at once, and
        // no full sync loading the new master while the test times it.
        let nowhere = lock_testkit::free_port().expect("port").to_string();
        for kind in ClientKind::compiled() {
            // The client must make both acquires within its 500 ms of trust
            // in the last answer, or the periodic look would find the new
            // master anyway: a slow round (a loaded machine) is run again.
            let mut rounds = 0;
            loop {
                rounds += 1;
                let old = RedisServer::start().expect("old master");
                let standin = SentinelStandIn::start("moved", old.port())
                    .await
                    .expect("sentinel stand-in");
                let endpoint = Endpoint::sentinel(vec![standin.url()], "moved")
                    .with_replicas(ReplicasConfig::new(1, Duration::from_millis(300)));
                let backend = SingleNodeBackend::connect(
                    kind,
                    endpoint,
                    ConnectOptions::new(Duration::from_secs(2), Duration::from_secs(1)),
                )
                .await
                .expect("connect through the stand-in");
                let looked = Instant::now();
                let config = fast_config(Duration::from_secs(2))
                    .with_wait_timeout(Duration::ZERO)
                    .with_timeouts(Duration::from_secs(2), Duration::from_secs(1));
                let locks = LockManager::new(Arc::new(backend), config).expect("config");
                // Just after the client's look: the sentinels name the new
                // master, and the old one is demoted.
                standin.set_master(new.port());
                match old.admin(&["REPLICAOF", "127.0.0.1", &nowhere]) {
                    Ok(AdminReply::Status(ok)) if ok == "OK" => {}
                    other => panic!("REPLICAOF: {other:?}"),
                }
                let refused = locks.try_acquire("moved").await;
                assert!(
                    matches!(&refused, Err(err) if err.to_string().contains("READONLY")),
                    "{kind}: the demoted master refuses: {refused:?}"
                );
                let sent = looked.elapsed();
                let taken = locks.try_acquire("moved").await;
                if sent >= Duration::from_millis(400) && rounds < 5 {
                    continue;
                }
                assert!(
                    sent < Duration::from_millis(400),
                    "{kind}: every round too slow to tell ({sent:?})"
                );
                match taken {
                    Ok(Some(guard)) => {
                        let key = locks.key("moved").expect("key");
                        assert!(has_key(&new, key.redis_key()), "{kind}: on the new master");
                        guard.release().await.expect("release");
                    }
                    // The new master answered; its replica was slow.
                    Err(LockError::ReplicasNotAcknowledged { .. }) => {}
                    other => panic!("{kind}: the next acquire reaches the new master: {other:?}"),
                }
                break;
            }
        }
    });
}

/// What a write that no replica of its master has may end in: refused, or
/// cut off with its connection (by the client following the sentinels to
/// the new master while its `WAIT` was still running).
fn refused_or_cut(err: &LockError) -> bool {
    matches!(
        err,
        LockError::ReplicasNotAcknowledged {
            acknowledged: 0,
            ..
        } | LockError::Connection { .. }
    )
}

/// A manager through `group`'s sentinels that waits for one replica, with
/// room for a reply that waits out a failover.
async fn acknowledging_manager(kind: ClientKind, group: &SentinelGroup) -> Arc<LockManager> {
    let endpoint = Endpoint::sentinel(group.sentinel_urls(), group.service_name())
        .with_replicas(ReplicasConfig::new(1, Duration::from_millis(200)));
    let options = ConnectOptions::new(Duration::from_secs(2), Duration::from_secs(15));
    let mut config = fast_config(Duration::from_secs(30))
        .with_wait_timeout(Duration::ZERO)
        .with_timeouts(Duration::from_secs(2), Duration::from_secs(15));
    // Renewals only when the test asks: a watchdog's renewal sent first
    // would hold the caller's back until after the failover.
    config.watchdog.enabled = false;
    let backend = SingleNodeBackend::connect(kind, endpoint, options)
        .await
        .expect("connect through the sentinels");
    Arc::new(LockManager::new(Arc::new(backend), config).expect("config"))
}

/// `acquire` until it succeeds: a freshly synced replica can miss its
/// first acknowledgements.
async fn patient_acquire(locks: &LockManager, name: &str) -> lock_core::LockGuard {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match locks.try_acquire(name).await {
            Ok(Some(guard)) => return guard,
            Ok(None) => panic!("`{name}` is held"),
            Err(err) if err.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => panic!("acquire `{name}`: {err}"),
        }
    }
}

fn is_master(server: &RedisServer) -> bool {
    server
        .info("replication")
        .is_ok_and(|info| info.contains("role:master"))
}

/// Waits until `master` has a replica that acknowledges its writes.
fn wait_for_sync(master: &RedisServer) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let replies = master.admin_session(&[&["SET", "warm-up", "1"], &["WAIT", "1", "100"]]);
        if matches!(replies.as_deref(), Ok([_, AdminReply::Int(1)])) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the new master's replica never synced"
        );
    }
}

fn panic_on(err: LockError) {
    panic!("a waiter failed: {err}");
}
