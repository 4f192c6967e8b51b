//! Renewal at scale: the watchdog renews the leases of one manager in
//! batches (one script over many keys per round trip), each lease keeps the
//! deadline its batch's send time gives, and on a cluster a node that stalls
//! does not hold up the renewals of leases on the other nodes.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::strategy::clock_drift;
use lock_core::{
    AcquireOptions, ClientKind, ExtendOutcome, LeaseStatus, LockConfig, LockError, LockGuard,
    LockKey, LockManager, LossReason, Renewal,
};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::taken;
use lock_testkit::contract::{fast_config, fast_options};
use lock_testkit::{DelayProxy, RedisServer};

async fn manager(kind: ClientKind, server: &RedisServer, ttl: Duration) -> LockManager {
    let backend = SingleNodeBackend::connect(kind, &server.url(), fast_options())
        .await
        .expect("connect");
    LockManager::new(
        Arc::new(backend),
        fast_config(ttl).with_wait_timeout(Duration::ZERO),
    )
    .expect("config")
}

async fn acquire_many(locks: &LockManager, count: usize, prefix: &str) -> Vec<LockGuard> {
    let mut guards = Vec::with_capacity(count);
    for index in 0..count {
        let guard = taken(locks, &format!("{prefix}-{index}")).await;
        guards.push(guard);
    }
    guards
}

/// `PTTL` of `key` on `server`.
fn pttl(server: &RedisServer, key: &str) -> i64 {
    lock_testkit::peek::int(server, &["PTTL", key])
}

/// Releases every guard of `guards`.
async fn release_all(guards: Vec<LockGuard>) {
    for guard in guards {
        guard.release().await.expect("release");
    }
}

/// Asserts that `leases` leases cost few live tasks: `now` against
/// `before`, when `what` happened.
fn assert_few_tasks(kind: ClientKind, before: usize, now: usize, leases: usize, what: &str) {
    assert!(
        now < before + leases / 10,
        "{kind:?}: {leases} leases {what}: {} tasks ({before} before, {now} after)",
        now.saturating_sub(before)
    );
}

/// A thousand leases at a 1.5 s TTL are renewed every 500 ms: over 1.6 s
/// that is about 3,000 renewals, which reach the server in a few dozen
/// script calls, not one each; every lease is still held, and every key was
/// renewed within the last interval.
async fn renewals_of_many_leases_are_batched(kind: ClientKind) {
    const LEASES: usize = 1000;
    let ttl = Duration::from_millis(1500);
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, ttl).await;
    let guards = acquire_many(&locks, LEASES, "batched").await;
    server.admin(&["CONFIG", "RESETSTAT"]).expect("RESETSTAT");
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let calls = server
        .command_calls(&["evalsha", "eval"])
        .expect("commandstats");
    for guard in &guards {
        assert!(guard.is_valid(), "{kind:?}: {} was lost", guard.key());
    }
    for index in (0..LEASES).step_by(97) {
        let key = format!("lock:{{batched-{index}}}");
        let pttl = pttl(&server, &key);
        // Renewed within the last interval (500 ms), with room for a slow
        // machine: never renewed, it would be at most 1500 - 1600 < 0.
        assert!(pttl >= 700, "{kind:?}: {key} has {pttl} ms left");
    }
    // One call per lease per renewal would be about 3,000.
    assert!(
        calls <= 300,
        "{kind:?}: {calls} script calls renewed {LEASES} leases for 1.6 s"
    );
    release_all(guards).await;
}

/// A lease's deadline is its batch's send time plus its own TTL minus its
/// own drift: leases with different TTLs renewed in one batch share that
/// send time exactly, and it comes before the reply (here at least the
/// 60 ms a proxy adds each way), so a slow reply does not stretch it.
async fn a_batch_gives_each_lease_its_send_time(kind: ClientKind) {
    const LEASES: usize = 40;
    let server = RedisServer::start().expect("start");
    let proxy = DelayProxy::start(server.port(), Duration::from_millis(60))
        .await
        .expect("proxy");
    let config = fast_config(Duration::from_millis(1200))
        .with_wait_timeout(Duration::ZERO)
        .with_timeouts(Duration::from_secs(2), Duration::from_secs(2));
    let backend = SingleNodeBackend::connect(kind, &proxy.url(), fast_options())
        .await
        .expect("connect");
    let locks = LockManager::new(Arc::new(backend), config).expect("config");
    let names: Vec<String> = (0..LEASES).map(|index| format!("sent-{index}")).collect();
    let guards = futures::future::join_all(names.iter().map(|name| locks.try_acquire(name))).await;
    let guards: Vec<LockGuard> = guards
        .into_iter()
        .map(|guard| guard.expect("acquire").expect("free"))
        .collect();
    // Each lease its own TTL, which the watchdog renews with from now on.
    let ttls: Vec<Duration> = (0..LEASES)
        .map(|index| Duration::from_millis(1200 + 7 * index as u64))
        .collect();
    futures::future::join_all(
        guards
            .iter()
            .zip(&ttls)
            .map(|(guard, ttl)| guard.extend(*ttl)),
    )
    .await
    .into_iter()
    .for_each(|extended| extended.expect("extend"));
    // Watch one lease until the watchdog renews it, noting when the new
    // deadline is first seen: the reply came at most then.
    let watched = &guards[0];
    let before = watched.valid_until().expect("held");
    let seen_at = loop {
        tokio::time::sleep(Duration::from_millis(1)).await;
        if watched.valid_until().expect("held") != before {
            break Instant::now();
        }
    };
    let base = deadline_base(watched, ttls[0]);
    assert!(
        base + Duration::from_millis(110) <= seen_at,
        "{kind:?}: the deadline counts from {:?} before the reply was seen, \
         not from the send, 120 ms earlier",
        seen_at - base
    );
    // Let every lease be renewed at least once more, then compare.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let bases: Vec<Instant> = guards
        .iter()
        .zip(&ttls)
        .map(|(guard, ttl)| deadline_base(guard, *ttl))
        .collect();
    // Leases renewed in one batch share its send instant to the
    // nanosecond, which no two separate sends do. How many share one batch
    // depends on how the watchdogs were scheduled (a loaded machine splits
    // them into more batches): that is the benchmark's to measure
    // (`held_leases`); here some must share, or the check saw no batch.
    let shared = bases
        .iter()
        .map(|base| bases.iter().filter(|other| *other == base).count())
        .max()
        .unwrap_or(0);
    assert!(
        shared >= 2,
        "{kind:?}: no two of {LEASES} leases share a batch's send time"
    );
    release_all(guards).await;
}

/// `valid_until - (ttl - drift)`: when the command that set the deadline
/// was sent.
fn deadline_base(guard: &LockGuard, ttl: Duration) -> Instant {
    let valid_until = guard.valid_until().expect("held");
    valid_until - (ttl - clock_drift(ttl, LockConfig::default().clock_drift_factor))
}

/// A batch that the server refuses as a whole (here `READONLY`: the master
/// was demoted to a replica behind the client's back, and the keys are
/// still there, synced) is a retryable failure of every renewal in it, as
/// for a single `extend`: the leases stay held until their deadlines, and are
/// not reported as taken.
async fn a_refused_batch_is_a_failure_not_a_loss(kind: ClientKind) {
    const LEASES: usize = 20;
    let master = RedisServer::start().expect("master");
    let replica = RedisServer::builder()
        .replica_of(master.port())
        .start()
        .expect("replica");
    let locks = manager(kind, &master, Duration::from_secs(3)).await;
    let guards = acquire_many(&locks, LEASES, "demoted").await;
    let last = format!("lock:{{demoted-{}}}", LEASES - 1);
    let synced_by = Instant::now() + Duration::from_secs(10);
    while replica
        .admin(&["EXISTS", &last])
        .ok()
        .and_then(|reply| reply.as_int())
        != Some(1)
    {
        assert!(Instant::now() < synced_by, "the replica never synced");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    replica.admin(&["REPLICAOF", "NO", "ONE"]).expect("promote");
    master
        .admin(&["REPLICAOF", "127.0.0.1", &replica.port().to_string()])
        .expect("demote");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for guard in &guards {
        assert!(
            !matches!(
                guard.status(),
                LeaseStatus::Lost {
                    reason: LossReason::NotHeld,
                    ..
                }
            ),
            "{kind:?}: {} was reported taken while its key was still ours",
            guard.key()
        );
    }
    drop(guards);
}

/// In one batch, a lock key overwritten with another kind's hold (a hash)
/// or with foreign data (a list) fails that lease's renewal alone: each is
/// reported lost as not held, and the leases renewed beside them are kept.
/// Through the backend, the hash is not held and the list corrupted.
async fn foreign_data_fails_only_its_own_renewal(kind: ClientKind) {
    const LEASES: usize = 8;
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, Duration::from_millis(900)).await;
    let guards = acquire_many(&locks, LEASES, "foreign").await;
    server.admin(&["DEL", "lock:{foreign-3}"]).expect("DEL");
    server
        .admin(&["HSET", "lock:{foreign-3}", "field", "value"])
        .expect("HSET");
    // A type no kind of hold uses: foreign data, not another kind's hold.
    server.admin(&["DEL", "lock:{foreign-5}"]).expect("DEL");
    server
        .admin(&["RPUSH", "lock:{foreign-5}", "value"])
        .expect("RPUSH");
    // Two renewal intervals (300 ms each).
    tokio::time::sleep(Duration::from_millis(700)).await;
    for (index, guard) in guards.iter().enumerate() {
        if index == 3 || index == 5 {
            assert!(
                matches!(
                    guard.status(),
                    LeaseStatus::Lost {
                        reason: LossReason::NotHeld,
                        ..
                    }
                ),
                "{kind:?}: the overwritten lease is {:?}",
                guard.status()
            );
        } else {
            assert!(guard.is_valid(), "{kind:?}: {} was lost", guard.key());
        }
    }
    drop(guards);
    // The batch's replies themselves, one per renewal.
    let key = |name: &str| LockKey::new("lock:", name).expect("key");
    let owner = lock_core::OwnerToken::generate().expect("os rng");
    let hold = lock_core::HoldToken::new(owner).expect("os rng");
    let (hash, list, free) = (key("foreign-3"), key("foreign-5"), key("foreign-free"));
    let ttl = Duration::from_secs(5);
    let renewals = [
        Renewal::new(&hash, &hold, ttl),
        Renewal::new(&list, &hold, ttl),
        Renewal::new(&free, &hold, ttl),
    ];
    let outcomes = locks.backend().extend_many(&renewals).await;
    assert!(
        matches!(
            &outcomes[..],
            [
                Ok(ExtendOutcome::NotHeld),
                Err(LockError::Corrupted { .. }),
                Ok(ExtendOutcome::NotHeld)
            ]
        ),
        "{kind:?}: {outcomes:?}"
    );
}

/// Takes and gives back one lease: the first acquire may start the
/// manager's own background tasks, which a count of live tasks must not
/// take for a lease's.
async fn warm_up(locks: &LockManager) {
    taken(locks, "warm-up")
        .await
        .release()
        .await
        .expect("release");
}

/// The runtime's live tasks: the watchdogs of held leases are among them.
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// A held lease costs no task until its first renewal falls due: a process
/// that takes and gives back many short holds (the common case) spawns
/// nothing per hold. Two hundred leases at a 10 s TTL (first renewal after
/// about 3.3 s) leave the number of live tasks where it was; once their
/// first renewal is due they are kept like any other lease.
async fn held_leases_cost_no_task_until_due(kind: ClientKind) {
    const LEASES: usize = 200;
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, Duration::from_secs(10)).await;
    warm_up(&locks).await;
    let before = alive_tasks();
    let guards = acquire_many(&locks, LEASES, "idle").await;
    let held = alive_tasks();
    assert_few_tasks(kind, before, held, LEASES, "held");
    release_all(guards).await;
}

/// Nor once it is renewed: while its renewals succeed, a lease's watchdog
/// is an entry in its manager's schedule, not a task (a task per lease
/// cost about half the client's time with many leases held). Two hundred
/// leases at a 900 ms TTL, each renewed four or five times in 1.5 s, are
/// all still held with their keys renewed, and the live tasks stay where
/// they were; a key deleted behind its holder is still reported lost at
/// its next renewal, and its neighbours are kept.
async fn renewed_leases_cost_no_task(kind: ClientKind) {
    const LEASES: usize = 200;
    let ttl = Duration::from_millis(900);
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, ttl).await;
    warm_up(&locks).await;
    let before = alive_tasks();
    let mut guards = acquire_many(&locks, LEASES, "renewed").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let kept = alive_tasks();
    for guard in &guards {
        assert!(guard.is_valid(), "{kind:?}: {} was lost", guard.key());
    }
    for index in (0..LEASES).step_by(23) {
        let key = format!("lock:{{renewed-{index}}}");
        let pttl = pttl(&server, &key);
        // Never renewed, the key would be gone (900 - 1500 < 0).
        assert!(pttl >= 300, "{kind:?}: {key} has {pttl} ms left");
    }
    assert_few_tasks(kind, before, kept, LEASES, "renewed");
    let gone = guards.swap_remove(0);
    server.admin(&["DEL", "lock:{renewed-0}"]).expect("DEL");
    let reason = tokio::time::timeout(Duration::from_secs(2), gone.lost())
        .await
        .unwrap_or_else(|_| panic!("{kind:?}: a deleted key was not reported lost"));
    assert_eq!(reason, Some(LossReason::NotHeld), "{kind:?}");
    assert!(
        matches!(gone.release().await, Err(LockError::LeaseLost { .. })),
        "{kind:?}: the release of a lost lease"
    );
    for guard in guards {
        assert!(guard.is_valid(), "{kind:?}: {} was lost", guard.key());
        guard.release().await.expect("release");
    }
}

/// A failed renewal hands its lease to a watchdog task, which retries
/// until the deadline; once a renewal succeeds again the lease goes back to
/// the schedule, so an outage does not leave a task per lease behind. A
/// hundred leases at a 3 s TTL (renewed about every second) outlive a
/// server paused for 1.2 s across their first renewal, and afterwards the
/// live tasks are back where they were.
async fn leases_go_back_to_no_task_after_an_outage(kind: ClientKind) {
    const LEASES: usize = 100;
    let mut server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, Duration::from_secs(3)).await;
    warm_up(&locks).await;
    let before = alive_tasks();
    let guards = acquire_many(&locks, LEASES, "outage").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.pause().expect("pause");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let retrying = alive_tasks();
    server.resume().expect("resume");
    assert!(
        retrying >= before + LEASES,
        "{kind:?}: the failed renewals were not retried by tasks ({before} before, {retrying} during)"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = alive_tasks();
    for guard in &guards {
        assert!(
            guard.is_valid(),
            "{kind:?}: {} was lost: {:?}",
            guard.key(),
            guard.status()
        );
    }
    assert_few_tasks(kind, before, after, LEASES, "after the outage");
    release_all(guards).await;
}

/// Leases live on after the runtime that happened to start the manager's
/// background work has shut down: a lease taken on another runtime is still
/// renewed there, and without renewal its loss is still reported at the
/// deadline.
/// Runs `work` to its end on a single-thread runtime made for it, which
/// shuts down when `work` returns.
fn block_on_a_runtime_of_its_own(work: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(work);
}

async fn leases_outlive_a_runtime_that_shut_down(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let ttl = Duration::from_millis(600);
    let locks = Arc::new(manager(kind, &server, ttl).await);
    let mut unwatched = fast_config(ttl).with_wait_timeout(Duration::ZERO);
    unwatched.watchdog.enabled = false;
    let backend = SingleNodeBackend::connect(kind, &server.url(), fast_options())
        .await
        .expect("connect");
    let unwatched = Arc::new(LockManager::new(Arc::new(backend), unwatched).expect("config"));
    // A short-lived runtime takes (and drops) the first lease of each
    // manager, then shuts down.
    let (first, second) = (Arc::clone(&locks), Arc::clone(&unwatched));
    std::thread::spawn(move || {
        block_on_a_runtime_of_its_own(async {
            let mut guards = Vec::new();
            for (locks, name) in [(&first, "other-runtime-1"), (&second, "other-runtime-2")] {
                guards.push(taken(locks, name).await);
            }
            // The last step: nothing runs on this runtime after the drops
            // (the background tasks they start are never polled).
            drop(guards);
        });
    })
    .join()
    .expect("the other runtime");
    let kept = taken(&locks, "kept").await;
    let expiring = taken(&unwatched, "expiring").await;
    let reason = tokio::time::timeout(Duration::from_secs(2), expiring.lost())
        .await
        .unwrap_or_else(|_| panic!("{kind:?}: no loss reported for a lease without renewal"));
    assert_eq!(reason, Some(LossReason::Expired), "{kind:?}");
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(
        kept.is_valid(),
        "{kind:?}: the lease was not renewed: {:?}",
        kept.status()
    );
    let pttl = pttl(&server, "lock:{kept}");
    assert!(pttl > 0, "{kind:?}: the key has {pttl} ms left");
    kept.release().await.expect("release");
}

/// An `extend` to a much shorter TTL right after the acquire, before the
/// first renewal was due, sets the pace of the renewals from then on: the
/// lease is renewed before its new, nearer deadline, not lost at it. The
/// lease is taken on a runtime whose only thread is then held up, so the
/// watchdog that the extend starts there first runs after the extend was
/// answered: it must still find the new pace.
async fn an_early_extend_to_a_shorter_ttl_sets_the_pace(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = Arc::new(manager(kind, &server, Duration::from_secs(30)).await);
    let (sender, receiver) = std::sync::mpsc::channel();
    let held_up = Arc::new(std::sync::Barrier::new(2));
    let other = {
        let (locks, held_up) = (Arc::clone(&locks), Arc::clone(&held_up));
        std::thread::spawn(move || {
            block_on_a_runtime_of_its_own(async {
                let guard = taken(&locks, "shortened").await;
                sender.send(guard).expect("send the guard");
                // Nothing runs on this runtime until the extend is answered.
                held_up.wait();
                tokio::time::sleep(Duration::from_secs(2)).await;
            });
        })
    };
    let guard = tokio::task::spawn_blocking(move || receiver.recv().expect("the guard"))
        .await
        .expect("receive");
    guard
        .extend(Duration::from_millis(600))
        .await
        .expect("extend");
    let release_the_other = Arc::clone(&held_up);
    tokio::task::spawn_blocking(move || release_the_other.wait())
        .await
        .expect("barrier");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        guard.is_valid(),
        "{kind:?}: the lease was not renewed after its extend: {:?}",
        guard.status()
    );
    guard.release().await.expect("release");
    tokio::task::spawn_blocking(move || other.join().expect("the other runtime"))
        .await
        .expect("join");
}

/// One manager, two leases of their own TTLs: a 600 ms lease stays held
/// past several of its TTLs, renewed at its own pace rather than the config's
/// 30 s TTL's; a 5 min lease is set to 5 min. A bad TTL is refused, and with
/// no wait a held lock is one attempt.
async fn each_acquire_asks_for_its_own_ttl(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, Duration::from_secs(30)).await;
    let pttl = |key: &str| pttl(&server, key);
    let short = AcquireOptions::new().with_ttl(Duration::from_millis(600));
    let brief = locks.acquire_with("brief", &short).await.expect("acquire");
    assert!(pttl("lock:{brief}") <= 600, "{kind}: a 600 ms lease");
    let long = AcquireOptions::new().with_ttl(Duration::from_secs(300));
    let deploy = locks.acquire_with("deploy", &long).await.expect("acquire");
    assert!(pttl("lock:{deploy}") > 200_000, "{kind}: a 5 min lease");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        matches!(brief.status(), LeaseStatus::Held { .. }),
        "{kind}: the short lease is renewed at its own pace: {:?}",
        brief.status()
    );
    let left = pttl("lock:{brief}");
    assert!(
        (1..=600).contains(&left),
        "{kind}: renewed to 600 ms: {left}"
    );
    match locks
        .acquire_with("brief", &AcquireOptions::new().no_wait())
        .await
    {
        Err(LockError::NotAcquired { attempts: 1, .. }) => {}
        other => panic!("{kind}: a held lock, no wait: {:?}", other.map(|_| ())),
    }
    let zero = AcquireOptions::new().with_ttl(Duration::ZERO);
    match locks.acquire_with("zero", &zero).await {
        Err(LockError::InvalidTtl { .. }) => {}
        other => panic!("{kind}: a zero TTL: {:?}", other.map(|_| ())),
    }
    brief.release().await.expect("release");
    deploy.release().await.expect("release");
}

/// A holder whose thread stops past its deadline (a long GC pause, a
/// blocking call on the runtime's only thread) finds its lease reported
/// expired by `status()` as by `is_valid()`, before the watchdog has had a
/// chance to run: `Held` never outlives the deadline.
#[test]
fn status_agrees_with_is_valid_past_the_deadline() {
    // One thread, so nothing runs the watchdog while it sleeps.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        for kind in ClientKind::compiled() {
            let server = RedisServer::start().expect("start");
            // A wide drift allowance puts the deadline (about 600 ms) well
            // before the key's expiry (1 s): past the one, the key is
            // still there, and an extend would find it.
            let backend = SingleNodeBackend::connect(kind, &server.url(), fast_options())
                .await
                .expect("connect");
            let mut config = fast_config(Duration::from_secs(1)).with_wait_timeout(Duration::ZERO);
            config.clock_drift_factor = 0.4;
            let locks = LockManager::new(Arc::new(backend), config).expect("config");
            let guard = taken(&locks, "paused").await;
            assert!(matches!(guard.status(), LeaseStatus::Held { .. }));
            let valid_until = guard.valid_until().expect("a deadline");
            std::thread::sleep(Duration::from_millis(700));
            assert!(
                Instant::now() >= valid_until,
                "{kind}: slept past the deadline"
            );
            assert!(!guard.is_valid(), "{kind}: valid past its deadline");
            assert!(
                matches!(
                    guard.status(),
                    LeaseStatus::Lost {
                        reason: LossReason::Expired,
                        valid_until: reported,
                    } if reported == valid_until
                ),
                "{kind}: status past the deadline: {:?}",
                guard.status()
            );
            assert_eq!(guard.remaining(), Duration::ZERO, "{kind}");
            // And it stays lost: no extend brings it back, and `lost()`
            // has completed.
            let extended = guard.extend(Duration::from_secs(10)).await;
            assert!(
                matches!(extended, Err(lock_core::LockError::LeaseLost { .. })),
                "{kind}: an extend past the deadline: {extended:?}"
            );
            assert!(!guard.is_valid(), "{kind}: valid again after an extend");
            assert_eq!(
                tokio::time::timeout(Duration::from_millis(10), guard.lost()).await,
                Ok(Some(LossReason::Expired)),
                "{kind}"
            );
            drop(guard);
        }
    });
}

lock_testkit::client_tests!(
    renewals_of_many_leases_are_batched,
    a_batch_gives_each_lease_its_send_time,
    a_refused_batch_is_a_failure_not_a_loss,
    foreign_data_fails_only_its_own_renewal,
    held_leases_cost_no_task_until_due,
    renewed_leases_cost_no_task,
    leases_go_back_to_no_task_after_an_outage,
    leases_outlive_a_runtime_that_shut_down,
    an_early_extend_to_a_shorter_ttl_sets_the_pace,
    each_acquire_asks_for_its_own_ttl,
);
