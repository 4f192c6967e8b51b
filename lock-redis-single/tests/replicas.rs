//! Waiting for replicas (`replicas.count`, `WAIT`), on both clients and both
//! single-node strategies' common path: a grant the caller is told about is
//! on the replicas; one they did not acknowledge in time is released again
//! and reported as a retryable error; a renewal they did not acknowledge
//! does not move the deadline; on a cluster the `WAIT` goes to the master of
//! the lock's slot. With fencing tokens, and with `fencing = false`, whose
//! acquire is a plain `SET` with the `WAIT` behind it; a semaphore's permit
//! waits for them the same way.
//!
//! They start replicas and a cluster, so they run in the build with both
//! clients (and TLS), which `cargo xtask test` runs.

#![cfg(all(feature = "redis", feature = "fred", feature = "tls"))]

use std::sync::Arc;
use std::time::Duration;

use lock_core::{
    ClientKind, ConnectOptions, Endpoint, GrantOptions, LockError, LockManager, ReplicasConfig,
};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::fast_config;
use lock_testkit::contract::taken;
use lock_testkit::peek::has_key;
use lock_testkit::{AdminReply, DelayProxy, RedisCluster, RedisServer};

fn options() -> ConnectOptions {
    ConnectOptions::new(Duration::from_secs(2), Duration::from_millis(500))
}

async fn manager(kind: ClientKind, endpoint: Endpoint, fencing: bool) -> LockManager {
    let backend = SingleNodeBackend::connect(kind, endpoint, options())
        .await
        .expect("connect")
        .with_grant_options(GrantOptions::default().with_fencing(fencing));
    LockManager::new(
        Arc::new(backend),
        fast_config(Duration::from_secs(5))
            .with_wait_timeout(Duration::ZERO)
            .with_fencing(fencing),
    )
    .expect("config")
}

/// Waits until `master`'s replica acknowledges writes: a fresh replica
/// reports its link up, and the master lists it online, before it first
/// acknowledges an offset.
fn wait_for_sync(master: &RedisServer) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        // On one connection: WAIT counts the replicas that have its own
        // connection's writes.
        let replies = master.admin_session(&[&["SET", "warm-up", "1"], &["WAIT", "1", "100"]]);
        if matches!(replies.as_deref(), Ok([_, AdminReply::Int(1)])) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "replica never synced");
    }
}

/// With a replica that is reachable only through a 50 ms link, how many of
/// the grants a caller was told about are not yet on the replica at that
/// moment (so a failover right then would lose them): all of them without
/// `WAIT`, none with it. The figures go to docs/TOPOLOGIES.md.
/// Each client compiled in, with fencing and without.
fn clients_fencing_or_not() -> impl Iterator<Item = (ClientKind, bool)> {
    ClientKind::compiled()
        .into_iter()
        .flat_map(|kind| [(kind, true), (kind, false)])
}

#[test]
fn acknowledged_grants_are_on_the_replica() {
    const ROUNDS: usize = 10;
    lock_testkit::run(async {
        let master = RedisServer::start().expect("master");
        let link = DelayProxy::start(master.port(), Duration::from_millis(50))
            .await
            .expect("proxy");
        let replica = RedisServer::builder()
            .replica_of(link.port())
            .start()
            .expect("replica");
        tokio::task::block_in_place(|| wait_for_sync(&master));
        for kind in ClientKind::compiled() {
            let acknowledged = ReplicasConfig::new(1, Duration::from_millis(200));
            for (mode, replicas, fencing) in [
                ("without WAIT", ReplicasConfig::default(), true),
                ("replicas.count = 1", acknowledged, true),
                ("replicas.count = 1, fencing off", acknowledged, false),
            ] {
                let locks = manager(
                    kind,
                    Endpoint::standalone(master.url()).with_replicas(replicas),
                    fencing,
                )
                .await;
                let mut missing = 0;
                for round in 0..ROUNDS {
                    let name = format!("{kind}-{}-{fencing}-{round}", replicas.count);
                    let guard = taken(&locks, &name).await;
                    let key = locks.key(&name).expect("key");
                    if !has_key(&replica, key.redis_key()) {
                        missing += 1;
                    }
                    guard.release().await.expect("release");
                }
                println!(
                    "{kind}, {mode}: {missing} of {ROUNDS} granted locks not yet on the replica"
                );
                if replicas.is_on() {
                    assert_eq!(
                        missing, 0,
                        "{kind}: every acknowledged grant is on the replica"
                    );
                } else {
                    assert!(missing > 0, "{kind}: the 50 ms link lags behind grants");
                }
            }
        }
    });
}

/// A replica that does not answer in time: the grant is refused with a
/// retryable error and released on the master; a renewal is refused and the
/// deadline stays; fewer replicas than asked for never grant.
#[test]
fn unacknowledged_grants_and_renewals_are_refused() {
    lock_testkit::run(async {
        let master = RedisServer::start().expect("master");
        let mut replica = RedisServer::builder()
            .replica_of(master.port())
            .start()
            .expect("replica");
        tokio::task::block_in_place(|| wait_for_sync(&master));
        let replicas = ReplicasConfig::new(1, Duration::from_millis(200));
        for (kind, fencing) in clients_fencing_or_not() {
            let locks = manager(
                kind,
                Endpoint::standalone(master.url()).with_replicas(replicas),
                fencing,
            )
            .await;
            // A lease shorter than the wait for replicas could run out
            // before they answered: refused before anything is sent.
            let short = lock_core::AcquireOptions::new().with_ttl(Duration::from_millis(150));
            match locks.acquire_with("short", &short).await {
                Err(LockError::InvalidTtl { reason, .. }) => {
                    assert!(reason.contains("replicas.timeout"), "{kind}: {reason}")
                }
                other => panic!(
                    "{kind}: a TTL below replicas.timeout: {:?}",
                    other.map(|_| ())
                ),
            }
            // A freshly synced replica can miss its first acknowledgements;
            // the refusal is retryable, and `acquire` retries it.
            let waiting =
                fast_config(Duration::from_secs(5)).with_wait_timeout(Duration::from_secs(5));
            let patient = LockManager::new(
                Arc::new(
                    SingleNodeBackend::connect(
                        kind,
                        Endpoint::standalone(master.url()).with_replicas(replicas),
                        options(),
                    )
                    .await
                    .expect("connect")
                    .with_grant_options(GrantOptions::default().with_fencing(fencing)),
                ),
                waiting.clone().with_fencing(fencing),
            )
            .expect("config");
            let held = patient.acquire("renewed").await.unwrap_or_else(|err| {
                panic!("{kind}, fencing {fencing}: acquire with a live replica: {err}")
            });
            replica.pause().expect("pause the replica");
            match locks.try_acquire("refused").await {
                Err(err @ LockError::ReplicasNotAcknowledged { .. }) => {
                    assert!(err.is_retryable(), "{kind}, fencing {fencing}: {err}");
                    let text = err.to_string();
                    assert!(
                        text.contains("0 of the 1"),
                        "{kind}, fencing {fencing}: {text}"
                    );
                }
                other => panic!("{kind}, fencing {fencing}: a grant no replica has: {other:?}"),
            }
            let key = locks.key("refused").expect("key");
            assert!(
                !has_key(&master, key.redis_key()),
                "{kind}, fencing {fencing}: the refused grant was released"
            );
            // A semaphore's permit waits for the replicas as a grant does,
            // and one they did not acknowledge is given back.
            let pool = locks
                .semaphore(&format!("pool-{fencing}"), 2)
                .expect("semaphore");
            let permit = pool.try_acquire().await;
            assert!(
                matches!(permit, Err(LockError::ReplicasNotAcknowledged { .. })),
                "{kind}, fencing {fencing}: a permit no replica has: {:?}",
                permit.map(|_| ())
            );
            assert_eq!(
                pool.state().await.expect("state").used,
                0,
                "{kind}, fencing {fencing}: the unacknowledged permit was given back"
            );
            let renewed = held.extend(Duration::from_secs(60)).await;
            assert!(
                matches!(renewed, Err(LockError::ReplicasNotAcknowledged { .. })),
                "{kind}, fencing {fencing}: a renewal no replica has: {renewed:?}"
            );
            assert!(
                held.remaining() <= Duration::from_secs(5),
                "{kind}, fencing {fencing}: the deadline did not move to the unacknowledged 60 s: {:?}",
                held.remaining()
            );
            replica.resume().expect("resume the replica");
            tokio::task::block_in_place(|| wait_for_sync(&master));
            held.release().await.expect("release");
            let two = manager(
                kind,
                Endpoint::standalone(master.url())
                    .with_replicas(ReplicasConfig::new(2, Duration::from_millis(200))),
                fencing,
            )
            .await;
            assert!(
                matches!(
                    two.try_acquire("two").await,
                    Err(LockError::ReplicasNotAcknowledged {
                        acknowledged: 1,
                        needed: 2,
                        ..
                    })
                ),
                "{kind}, fencing {fencing}: two replicas asked of one"
            );
        }
    });
}

/// On a cluster, `WAIT` must reach the master that took the grant: with the
/// replica of the lock's master paused, the grant is refused (a `WAIT` sent
/// anywhere else would see its own idle replica and pass).
#[test]
fn cluster_waits_on_the_slots_master() {
    lock_testkit::run(async {
        let mut cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 1))
            .await
            .expect("task")
            .expect("cluster");
        // 200 ms, not 50: a replica of a cluster just started on two busy
        // cores can take longer than 50 ms to acknowledge (seen in a full
        // `cargo xtask test` run). The refusal below still needs the pause.
        let replicas = ReplicasConfig::new(1, Duration::from_millis(200));
        for (kind, fencing) in clients_fencing_or_not() {
            let locks = manager(
                kind,
                Endpoint::cluster(cluster.seed_urls()).with_replicas(replicas),
                fencing,
            )
            .await;
            let guard = taken(&locks, "routed").await;
            guard.release().await.expect("release");
            let key = locks.key("routed").expect("key");
            let master = cluster
                .master_of_key(key.redis_key())
                .expect("master")
                .port();
            let replica = cluster
                .nodes()
                .iter()
                .position(|node| {
                    matches!(node.admin(&["ROLE"]), Ok(AdminReply::Array(Some(role)))
                        if role.get(2).and_then(AdminReply::as_int) == Some(i64::from(master)))
                })
                .expect("the master's replica");
            cluster.nodes_mut()[replica].pause().expect("pause");
            let refused = locks.try_acquire("routed").await;
            cluster.nodes_mut()[replica].resume().expect("resume");
            assert!(
                matches!(refused, Err(LockError::ReplicasNotAcknowledged { .. })),
                "{kind}, fencing {fencing}: WAIT reached the slot's master: {refused:?}"
            );
            // The slot moves to another master behind the client's back:
            // the pipeline reaches the old master first, whose `MOVED` sends
            // the script on. Its `WAIT` must follow it, or it counts the old
            // master's replica, which has none of the grant.
            let slot = cluster.key_slot(key.redis_key()).expect("slot");
            let target = cluster
                .masters()
                .expect("masters")
                .into_iter()
                .find(|node| node.port() != master)
                .expect("another master");
            tokio::task::block_in_place(|| cluster.migrate_slot(slot, target))
                .expect("migrate the slot");
            // fred may give up on the first try (a retryable error: it
            // re-sends nothing that may have run); no try may report a grant
            // whose WAIT ran anywhere but on the slot's new master.
            let deadline = std::time::Instant::now() + Duration::from_secs(2);
            let guard = loop {
                let waits_before = target.command_calls(&["wait"]).expect("commandstats");
                let moved = locks.try_acquire("routed").await;
                let waits_after = target.command_calls(&["wait"]).expect("commandstats");
                match moved {
                    Ok(Some(guard)) => {
                        assert!(
                            waits_after > waits_before,
                            "{kind}, fencing {fencing}: the grant's WAIT stayed on the slot's old master"
                        );
                        break guard;
                    }
                    Err(err) if err.is_retryable() && std::time::Instant::now() < deadline => {}
                    other => panic!("{kind}, fencing {fencing}: moved slot: {other:?}"),
                }
            };
            guard.release().await.expect("release");
        }
    });
}

/// A latch's set, count-down and delete wait for the replicas as a grant
/// does; a retry after a refusal, which finds its work done, is refused
/// again while the replicas still have not acknowledged it (it is not told
/// all is well).
#[test]
fn unacknowledged_latch_writes_are_refused_on_retry() {
    lock_testkit::run(async {
        // No replica at all: nothing is ever acknowledged.
        let master = RedisServer::start().expect("master");
        let replicas = ReplicasConfig::new(1, Duration::from_millis(100));
        for kind in [ClientKind::Redis, ClientKind::Fred] {
            let locks = manager(
                kind,
                Endpoint::standalone(master.url()).with_replicas(replicas),
                true,
            )
            .await;
            let latch = locks.latch(&format!("gate-{kind}")).expect("latch");
            for attempt in ["first", "retried"] {
                let set = latch.set_count(2).await;
                assert!(
                    matches!(set, Err(LockError::ReplicasNotAcknowledged { .. })),
                    "{kind}: the {attempt} set: {set:?}"
                );
            }
            for attempt in ["first", "retried"] {
                let down = latch.count_down_as("a").await;
                assert!(
                    matches!(down, Err(LockError::ReplicasNotAcknowledged { .. })),
                    "{kind}: the {attempt} count-down: {down:?}"
                );
            }
            assert_eq!(latch.count().await.expect("count"), Some(1), "{kind}");
            let deleted = latch.delete().await;
            assert!(
                matches!(deleted, Err(LockError::ReplicasNotAcknowledged { .. })),
                "{kind}: the delete: {deleted:?}"
            );
        }
    });
}

#[test]
fn replica_settings_are_checked() {
    let mut config = fast_config(Duration::from_secs(5))
        .with_wait_timeout(Duration::ZERO)
        .with_replicas(ReplicasConfig::new(1, Duration::from_millis(300)));
    match config.validate() {
        Err(LockError::InvalidConfig { field, .. }) => assert_eq!(field, "replicas.timeout"),
        other => panic!("a WAIT over half the command timeout: {other:?}"),
    }
    config.replicas = ReplicasConfig::new(1, Duration::ZERO);
    match config.validate() {
        Err(LockError::InvalidConfig { field, .. }) => assert_eq!(field, "replicas.timeout"),
        other => panic!("WAIT 0 blocks forever: {other:?}"),
    }
    config.replicas = ReplicasConfig::new(1, Duration::from_millis(50));
    config.validate().expect("a sound setting");
}
