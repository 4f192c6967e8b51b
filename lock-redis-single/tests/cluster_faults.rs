//! Faults of a Redis Cluster under held and contended locks, on both
//! clients: a master killed and its replica promoted without the lock's key,
//! and the lock's slot migrated to another master while it is held and
//! contended.
//!
//! These start clusters, so they run in the build with both clients (and
//! TLS), which `cargo xtask test` runs.

#![cfg(all(feature = "redis", feature = "fred", feature = "tls"))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::strategy::NodeClient;
use lock_core::{ClientKind, ConnectOptions, Endpoint, LockGuard, LockManager, RetryPolicy};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::fast_config;
use lock_testkit::contract::taken;
use lock_testkit::{AdminReply, RedisCluster, RedisServer};

async fn manager(kind: ClientKind, cluster: &RedisCluster, ttl: Duration) -> LockManager {
    manager_over(cluster_backend(kind, cluster).await, ttl)
}

/// A manager over `backend` with leases of `ttl`, polling every few
/// milliseconds.
fn manager_over(backend: SingleNodeBackend, ttl: Duration) -> LockManager {
    LockManager::new(
        Arc::new(backend),
        fast_config(ttl).with_retry(RetryPolicy::new(
            Duration::from_millis(5),
            Duration::from_millis(50),
        )),
    )
    .expect("config")
}

async fn start_cluster(replicas: usize) -> RedisCluster {
    tokio::task::spawn_blocking(move || RedisCluster::start(3, replicas))
        .await
        .expect("task")
        .expect("cluster")
}

/// Runs `check` once per client compiled in, each on a fresh cluster of
/// three masters without replicas, through [`lock_testkit::run`].
fn on_fresh_clusters(check: impl AsyncFn(&RedisCluster, ClientKind)) {
    lock_testkit::run(async {
        for kind in ClientKind::compiled() {
            check(&start_cluster(0).await, kind).await;
        }
    });
}

/// A master of `cluster` other than the one that serves `slot`.
fn another_master(cluster: &RedisCluster, slot: u16) -> &RedisServer {
    let source = cluster
        .master_of_slot(slot)
        .expect("the slot's master")
        .port();
    cluster
        .masters()
        .expect("masters")
        .into_iter()
        .find(|master| master.port() != source)
        .expect("another master")
}

/// A backend connected to `cluster` through its seeds.
async fn cluster_backend(kind: ClientKind, cluster: &RedisCluster) -> SingleNodeBackend {
    SingleNodeBackend::connect(kind, Endpoint::cluster(cluster.seed_urls()), options())
        .await
        .expect("connect to the cluster")
}

/// A backend over a client of `cluster` that does not say it is one (see
/// [`UnawareOfCluster`]).
async fn unaware_backend(kind: ClientKind, cluster: &RedisCluster) -> SingleNodeBackend {
    let client =
        lock_core::strategy::connect(kind, Endpoint::cluster(cluster.seed_urls()), options())
            .await
            .expect("connect");
    SingleNodeBackend::from_node(Arc::new(UnawareOfCluster(client)))
}

/// The connect and command timeouts of every client here.
fn options() -> ConnectOptions {
    ConnectOptions::new(Duration::from_secs(2), Duration::from_millis(500))
}

/// The node of `cluster` on `port`.
fn node_on_port(cluster: &RedisCluster, port: u16) -> &RedisServer {
    cluster
        .nodes()
        .iter()
        .find(|node| node.port() == port)
        .expect("a node on that port")
}

/// The index in `cluster.nodes()` of the replica of the master on `port`.
fn replica_of(cluster: &RedisCluster, port: u16) -> usize {
    cluster
        .nodes()
        .iter()
        .position(|node| {
            node.is_running()
                && matches!(node.admin(&["ROLE"]), Ok(AdminReply::Array(Some(role)))
                    if role.first().and_then(AdminReply::as_text) == Some("slave")
                        && role.get(2).and_then(AdminReply::as_int) == Some(i64::from(port)))
        })
        .expect("every master has a replica")
}

/// The master of the lock's slot dies before its replica saw the grant (the
/// replica is paused and its link dropped while the lock is taken), and the
/// replica takes over without the key. The holder must hear that its lease is lost, and the
/// lock must work for new holders after the failover.
#[test]
fn failover_that_loses_the_key_is_reported_and_the_lock_works_after() {
    lock_testkit::run(async {
        for kind in ClientKind::compiled() {
            let mut cluster = start_cluster(1).await;
            let holder = manager(kind, &cluster, Duration::from_secs(4)).await;
            let key = holder.key("failover").expect("key");
            let slot = cluster.key_slot(key.redis_key()).expect("slot");
            let master_port = cluster.master_of_slot(slot).expect("master").port();
            let replica = replica_of(&cluster, master_port);
            // Paused alone, the replica would still read the grant from its
            // socket on waking; with its link dropped it never gets it.
            cluster.nodes_mut()[replica]
                .pause()
                .expect("pause the replica");
            cluster
                .master_of_slot(slot)
                .expect("master")
                .admin(&["CLIENT", "KILL", "TYPE", "replica"])
                .expect("drop the replication link");
            let guard = taken(&holder, "failover").await;
            cluster.kill_master_of_slot(slot).expect("kill the master");
            cluster.nodes_mut()[replica]
                .resume()
                .expect("resume the replica");
            let (promoted, key_survived) = {
                let cluster = &cluster;
                tokio::task::block_in_place(|| {
                    cluster
                        .wait_for_failover(slot, Duration::from_secs(20))
                        .map(|node| {
                            let exists = node.admin(&["EXISTS", key.redis_key()]);
                            (node.port(), exists.ok().and_then(|reply| reply.as_int()))
                        })
                })
                .expect("the replica takes over")
            };
            assert_ne!(promoted, master_port);
            assert_eq!(key_survived, Some(0), "{kind}: the failover lost the key");
            let reason = tokio::time::timeout(Duration::from_secs(15), guard.lost())
                .await
                .unwrap_or_else(|_| panic!("{kind}: the lost lease is reported"));
            assert!(reason.is_some(), "{kind}: lost, not released");
            assert!(!guard.is_valid(), "{kind}: the guard knows");
            let newcomer = manager(kind, &cluster, Duration::from_secs(4)).await;
            let guard = newcomer
                .acquire("failover")
                .await
                .unwrap_or_else(|err| panic!("{kind}: the lock works after the failover: {err}"));
            guard.release().await.expect("release");
        }
    });
}

/// The lock's slot moves to another master (keys migrated one batch at a
/// time, `ASK` and `MOVED` in between) while tasks hold and contend for the
/// lock: never two holders at once, and every holder keeps its lease.
#[test]
fn slot_migration_under_contention_keeps_one_holder() {
    const TASKS: usize = 4;
    on_fresh_clusters(async |cluster, kind| {
        let locks = Arc::new(manager(kind, cluster, Duration::from_secs(2)).await);
        let key = locks.key("migrating").expect("key");
        let slot = cluster.key_slot(key.redis_key()).expect("slot");
        let target = another_master(cluster, slot).port();
        let inside = Arc::new(AtomicUsize::new(0));
        let entries = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_secs(4);
        let workers: Vec<_> = (0..TASKS)
            .map(|_| {
                let locks = Arc::clone(&locks);
                let inside = Arc::clone(&inside);
                let entries = Arc::clone(&entries);
                tokio::spawn(async move {
                    while Instant::now() < deadline {
                        let guard = match locks.acquire("migrating").await {
                            Ok(guard) => guard,
                            // A wait can end in TRYAGAIN or a redirect
                            // mid-migration; try again.
                            Err(err) if err.is_retryable() => continue,
                            Err(err) => panic!("acquire: {err}"),
                        };
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        entries.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        assert!(guard.is_valid(), "a holder lost its lease");
                        inside.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.expect("release");
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        tokio::task::block_in_place(|| {
            let target = node_on_port(cluster, target);
            let migration = cluster
                .begin_slot_migration(slot, target)
                .expect("begin the migration");
            std::thread::sleep(Duration::from_millis(300));
            migration.move_keys().expect("move the keys");
            std::thread::sleep(Duration::from_millis(300));
            migration.finish().expect("finish the migration");
        });
        for worker in workers {
            worker.await.unwrap_or_else(|err| panic!("{kind}: {err}"));
        }
        assert_eq!(
            cluster.master_of_slot(slot).expect("owner").port(),
            target,
            "the slot moved"
        );
        assert!(
            entries.load(Ordering::SeqCst) >= TASKS,
            "{kind}: the lock was used"
        );
    });
}

/// Renewals are batched per hash slot on a cluster, so a master that stops
/// answering (paused for 1.2 s, under the cluster's node timeout, so no
/// failover) holds up only the renewals of its own slots: every lease on
/// the other masters is renewed on schedule (every 500 ms, at a 1.5 s TTL)
/// throughout, and none of them is lost.
#[test]
fn a_stalled_master_does_not_delay_renewals_on_the_others() {
    const LEASES: usize = 60;
    lock_testkit::run(async {
        for kind in ClientKind::compiled() {
            let mut cluster = tokio::task::spawn_blocking(|| {
                RedisCluster::builder(3, 0)
                    .node_timeout(Duration::from_secs(10))
                    .start()
            })
            .await
            .expect("task")
            .expect("cluster");
            let locks = manager(kind, &cluster, Duration::from_millis(1500)).await;
            let mut guards = Vec::with_capacity(LEASES);
            for index in 0..LEASES {
                let guard = taken(&locks, &format!("stall-{index}")).await;
                let port = cluster
                    .master_of_key(&format!("lock:{{stall-{index}}}"))
                    .expect("master")
                    .port();
                guards.push((guard, port));
            }
            let stalled_port = guards[0].1;
            let stalled = cluster
                .nodes()
                .iter()
                .position(|node| node.port() == stalled_port)
                .expect("node");
            let others: Vec<&LockGuard> = guards
                .iter()
                .filter(|(_, port)| *port != stalled_port)
                .map(|(guard, _)| guard)
                .collect();
            assert!(others.len() >= 10, "{kind}: the names missed two masters");
            cluster.nodes_mut()[stalled].pause().expect("pause");
            // The longest a lease on another master went without a renewal.
            let started = Instant::now();
            let mut last_renewed = vec![started; others.len()];
            let mut deadlines: Vec<Option<Instant>> =
                others.iter().map(|guard| guard.valid_until()).collect();
            let mut longest_gap = Duration::ZERO;
            while started.elapsed() < Duration::from_millis(1200) {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let now = Instant::now();
                for (index, guard) in others.iter().enumerate() {
                    assert!(guard.is_valid(), "{kind}: {} was lost", guard.key());
                    let deadline = guard.valid_until();
                    if deadline != deadlines[index] {
                        deadlines[index] = deadline;
                        last_renewed[index] = now;
                    }
                    longest_gap = longest_gap.max(now - last_renewed[index]);
                }
            }
            cluster.nodes_mut()[stalled].resume().expect("resume");
            assert!(
                longest_gap <= Duration::from_millis(800),
                "{kind}: a lease on a master that answers went {longest_gap:?} without renewal \
                 while another master stalled"
            );
            for (guard, _) in guards {
                // Those on the stalled master may have run out meanwhile.
                let _ = guard.release().await;
            }
        }
    });
}

/// A cluster connection that does not say it is one (a third party's
/// `NodeClient` keeping the default `is_cluster`): the single-node backend
/// then puts leases of many slots in one renewal script, the cluster answers
/// `CROSSSLOT`, and the backend renews each lease on its own instead. Every
/// lease is kept.
#[derive(Debug)]
struct UnawareOfCluster(Arc<dyn NodeClient>);

#[async_trait::async_trait]
impl NodeClient for UnawareOfCluster {
    fn address(&self) -> &str {
        self.0.address()
    }

    async fn command(
        &self,
        name: &'static str,
        args: &[&[u8]],
    ) -> Result<lock_core::strategy::Reply, lock_core::LockError> {
        self.0.command(name, args).await
    }
}

#[test]
fn renewals_spanning_slots_fall_back_to_one_script_each() {
    const LEASES: usize = 30;
    on_fresh_clusters(async |cluster, kind| {
        let backend = unaware_backend(kind, cluster).await;
        let locks = manager_over(backend, Duration::from_millis(900));
        let mut guards = Vec::with_capacity(LEASES);
        for index in 0..LEASES {
            guards.push(taken(&locks, &format!("spanning-{index}")).await);
        }
        // Three renewal intervals (300 ms each).
        tokio::time::sleep(Duration::from_millis(1000)).await;
        for guard in &guards {
            assert!(guard.is_valid(), "{kind}: {} was lost", guard.key());
        }
        for guard in guards {
            guard.release().await.expect("release");
        }
    });
}

/// A lock whose slot is mid-migration and whose key is not on the source
/// (free locks never are): the source answers `ASK`. The acquire may fail
/// (retryably), but the client must stay usable: fred, whose commands have
/// one attempt, gave up its whole connection task on an `ASK` it could not
/// follow, and every later command timed out.
#[test]
fn an_ask_leaves_the_client_usable() {
    lock_testkit::run(async {
        let cluster = start_cluster(0).await;
        for kind in ClientKind::compiled() {
            let locks = manager(kind, &cluster, Duration::from_secs(5)).await;
            let name = format!("asked-{kind}");
            let key = locks.key(&name).expect("key");
            let slot = cluster.key_slot(key.redis_key()).expect("slot");
            let target = another_master(&cluster, slot);
            let migration =
                tokio::task::block_in_place(|| cluster.begin_slot_migration(slot, target))
                    .expect("begin the migration");
            let asked = locks.try_acquire(&name).await;
            assert!(
                match &asked {
                    Ok(_) => true,
                    Err(err) => err.is_retryable(),
                },
                "{kind}: an acquire met by ASK: {asked:?}"
            );
            if let Ok(Some(guard)) = asked {
                guard.release().await.expect("release");
            }
            tokio::task::block_in_place(|| migration.finish()).expect("finish the migration");
            // Every slot, the migrated one included, answers again.
            for index in 0..8 {
                let other = format!("after-{kind}-{index}");
                let started = Instant::now();
                let guard = locks
                    .acquire(&other)
                    .await
                    .unwrap_or_else(|err| panic!("{kind}: {other} after an ASK: {err}"));
                assert!(
                    started.elapsed() < Duration::from_secs(2),
                    "{kind}: {other} took {:?}",
                    started.elapsed()
                );
                guard.release().await.expect("release");
            }
            let guard = locks.acquire(&name).await.expect("the moved lock");
            guard.release().await.expect("release");
        }
    });
}

/// A release that is the first command to its slot after the slot moved
/// frees the key: the client follows the redirect (fred counts that as a
/// second write, which its one write per command refuses, and the release
/// is sent again), and the next holder need not wait out the TTL.
#[test]
fn a_release_after_a_slot_move_frees_the_key() {
    const TTL: Duration = Duration::from_secs(10);
    lock_testkit::run(async {
        let cluster = start_cluster(0).await;
        for kind in ClientKind::compiled() {
            let backend = cluster_backend(kind, &cluster).await;
            let mut config = fast_config(TTL);
            // No renewal meets the redirect first.
            config.watchdog.enabled = false;
            let locks = LockManager::new(Arc::new(backend), config).expect("config");
            let name = format!("moved-release-{kind}");
            let key = locks.key(&name).expect("key");
            let slot = cluster.key_slot(key.redis_key()).expect("slot");
            let target = another_master(&cluster, slot).port();
            let guard = taken(&locks, &name).await;
            move_slot(&cluster, slot, target);
            let released = guard.release().await;
            assert!(
                released.is_ok(),
                "{kind}: the release after the move: {released:?}"
            );
            let next = locks.try_acquire(&name).await.expect("try_acquire");
            assert!(next.is_some(), "{kind}: the released key is still held");
            if let Some(next) = next {
                next.release().await.expect("release");
            }
        }
    });
}

/// Classic messages sent over the cluster bus, summed over every node: a
/// classic `PUBLISH` is forwarded to every other node, a sharded one only
/// to the replicas of its slot's master (none here).
fn classic_bus_messages(cluster: &RedisCluster) -> i64 {
    cluster
        .nodes()
        .iter()
        .map(|node| match node.admin(&["CLUSTER", "INFO"]) {
            Ok(AdminReply::Bulk(Some(info))) => String::from_utf8_lossy(&info)
                .lines()
                .find_map(|line| line.strip_prefix("cluster_stats_messages_publish_sent:"))
                .and_then(|count| count.trim().parse::<i64>().ok())
                .unwrap_or(0),
            other => panic!("CLUSTER INFO: {other:?}"),
        })
        .sum()
}

/// A task waiting for a lock that another holds.
struct Waiter {
    kind: ClientKind,
    taken: tokio::sync::oneshot::Receiver<(Instant, LockGuard)>,
    task: tokio::task::JoinHandle<()>,
}

impl Waiter {
    /// Starts waiting for `name`, and gives the wait 300 ms to subscribe.
    async fn behind(locks: &Arc<LockManager>, name: &'static str, kind: ClientKind) -> Self {
        let (acquired, taken) = tokio::sync::oneshot::channel();
        let locks = Arc::clone(locks);
        let task = tokio::spawn(async move {
            let guard = locks.acquire(name).await.expect("acquire after a release");
            let _ = acquired.send((Instant::now(), guard));
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        Self { kind, taken, task }
    }

    /// Releases `holder` and asserts that this waiter took the lock within
    /// `prompt`; returns the waiter's guard.
    async fn hand_over(self, holder: LockGuard, prompt: Duration, phase: &str) -> LockGuard {
        let kind = self.kind;
        let released = Instant::now();
        if let Err(err) = holder.release().await {
            panic!("{kind}: release {phase}: {err}");
        }
        let (at, guard) = self.taken.await.expect("the waiter took the lock");
        self.task.await.expect("waiter");
        let took = at.saturating_duration_since(released);
        assert!(
            at > released && took < prompt,
            "{kind}: handover {phase} took {took:?}"
        );
        guard
    }
}

/// Moves `slot` to the master on `port`, from a blocking thread.
fn move_slot(cluster: &RedisCluster, slot: u16, port: u16) {
    tokio::task::block_in_place(|| {
        cluster
            .migrate_slot(slot, node_on_port(cluster, port))
            .expect("move the slot");
    });
}

/// On a Redis 7 cluster releases go out on sharded pub/sub: a release
/// wakes the waiter without a classic message over the cluster bus, and
/// waiters follow the lock's slot when it moves to another master. With
/// the `redis` crate the server's end of the subscription is heard and the
/// waiter subscribes again at once; fred does not pass that on, so its
/// waiter subscribes again when its timer wakes it with no release seen,
/// and is woken by every release after that.
///
/// Leases are not renewed here, so a waiter's timer fires only when the
/// holder's TTL (4 s) runs out: a handover within half a second of a
/// release, more than a second before that, was a release notice.
#[test]
fn sharded_release_notices_follow_the_slot() {
    const TTL: Duration = Duration::from_secs(4);
    const PROMPT: Duration = Duration::from_millis(500);
    on_fresh_clusters(async |cluster, kind| {
        let backend = cluster_backend(kind, cluster).await;
        let mut config = fast_config(TTL);
        config.watchdog.enabled = false;
        let config = config
            .with_retry(RetryPolicy::new(
                Duration::from_secs(10),
                Duration::from_secs(10),
            ))
            .with_wait_timeout(Duration::from_secs(20));
        let locks = Arc::new(LockManager::new(Arc::new(backend), config.clone()).expect("config"));
        let key = locks.key("sharded").expect("key");
        let slot = cluster.key_slot(key.redis_key()).expect("slot");
        let target = another_master(cluster, slot).port();
        // A release is heard, and crosses no node but its own.
        let first = taken(&locks, "sharded").await;
        let waiter = Waiter::behind(&locks, "sharded", kind).await;
        let bus_before = classic_bus_messages(cluster);
        let second = waiter.hand_over(first, PROMPT, "before the move").await;
        assert_eq!(
            classic_bus_messages(cluster) - bus_before,
            0,
            "{kind}: the release was broadcast over the cluster bus"
        );

        // The slot moves under a waiter. `redis` hears it and follows
        // at once. fred follows when its timer fires (at the TTL, the
        // holder having extended its lease meanwhile), and the release
        // comes half a second after that.
        let waiter = Waiter::behind(&locks, "sharded", kind).await;
        let moved = Instant::now();
        move_slot(cluster, slot, target);
        if kind == ClientKind::Fred {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            // fred refuses the first command after a `MOVED` (it counts
            // the redirect as a second write; see the issue on fred's
            // redirects), so the holder tries again, as its watchdog would.
            let mut tries = 0;
            while let Err(err) = second.extend(TTL).await {
                tries += 1;
                assert!(
                    err.is_retryable() && tries < 3,
                    "extend on the new master: {err}"
                );
            }
            tokio::time::sleep_until((moved + TTL).into()).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let third = waiter.hand_over(second, PROMPT, "after the move").await;

        // A waiter that subscribes after the move reaches the new master.
        let waiter = Waiter::behind(&locks, "sharded", kind).await;
        let fourth = waiter.hand_over(third, PROMPT, "on the new master").await;
        fourth.release().await.expect("release");

        // A process that publishes classically (its own client, which
        // does not say it publishes sharded) still wakes these waiters.
        let classic = LockManager::new(Arc::new(unaware_backend(kind, cluster).await), config)
            .expect("config");
        let held = taken(&classic, "sharded").await;
        let waiter = Waiter::behind(&locks, "sharded", kind).await;
        let bus_before = classic_bus_messages(cluster);
        let fifth = waiter
            .hand_over(held, PROMPT, "from a classic publisher")
            .await;
        assert!(
            classic_bus_messages(cluster) > bus_before,
            "{kind}: the release was not classic"
        );
        fifth.release().await.expect("release");
    });
}
