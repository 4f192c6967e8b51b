//! Checks that no sequence of public calls yields two valid holders of one
//! lock: the holes a demanding user found (deadlines trusted past the key's
//! TTL, stale guards releasing newer holds, cleanups of lost replies racing
//! the retry, acquire scripts that write before they fail). They run in the
//! contract suite, on every strategy and client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::{LockBackend, LockError, LockGuard, LockManager, LockState, OwnerToken};

use crate::contract::{
    fast_config, held_by_another, taken, taken_as, waiting_up_to, BackendFactory, Deployment,
};
use crate::faulty::{Fault, Faulty};

/// Asserts that `guard` trusts its lease no longer than the key lives: the
/// key's remaining TTL is read first, then the guard's, so a correct guard can
/// only come out shorter.
async fn assert_deadline_within_key(locks: &LockManager, guard: &LockGuard, context: &str) {
    let state = lock_core::LockState::from(locks.inspect(guard.key()).await.expect("inspect"));
    let trusted = guard.remaining();
    match state {
        LockState::Held {
            remaining: Some(key_left),
            ..
        } => assert!(
            trusted <= key_left + Duration::from_millis(2),
            "{context}: the guard trusts {trusted:?} but the key expires in {key_left:?}"
        ),
        LockState::Held {
            remaining: None, ..
        } => {
            panic!("{context}: the key lost its expiry")
        }
        _ => assert!(
            trusted.is_zero(),
            "{context}: the key is free but the guard trusts {trusted:?}"
        ),
    }
}

/// `extend` with a shorter TTL moves the guard's deadline earlier (or, where
/// the strategy never shortens a hold, leaves the key as long as the guard
/// believes), and the watchdog renews with the TTL the holder last asked for.
/// A re-entry never shortens the outer hold.
pub async fn deadline_follows_the_last_ttl_set(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(20)));
    // Without renewals the shortened key runs out, and another owner gets in.
    let mut unrenewed = fast_config(Duration::from_secs(20));
    unrenewed.watchdog.enabled = false;
    let unrenewed = deployment.manager(unrenewed);
    let guard = taken(&unrenewed, "shortened").await;
    guard
        .extend(Duration::from_millis(300))
        .await
        .expect("extend");
    assert_deadline_within_key(&locks, &guard, "after extend(300ms)").await;
    let started = Instant::now();
    loop {
        if let Some(other) = locks.try_acquire("shortened").await.expect("try_acquire") {
            assert!(
                !guard.is_valid(),
                "two valid holders: the shortened guard still trusts {:?}",
                guard.remaining()
            );
            other.release().await.expect("release");
            break;
        }
        if factory.capabilities().reentrant {
            // The reentrant strategy never shortens a hold that others share.
            assert_deadline_within_key(&locks, &guard, "reentrant, not shortened").await;
        }
        if started.elapsed() > Duration::from_millis(1500) {
            assert!(
                factory.capabilities().reentrant,
                "a key extended to 300 ms was still held after 1.5 s"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(guard);

    // The watchdog (every 100 ms) renews with the 5 s the holder last asked
    // for, not the configured 300 ms.
    let short = deployment.manager(fast_config(Duration::from_millis(300)));
    let guard = taken(&short, "lengthened").await;
    guard.extend(Duration::from_secs(5)).await.expect("extend");
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(guard.is_valid(), "the watchdog keeps the lease");
    assert_deadline_within_key(&short, &guard, "after watchdog renewals").await;
    match lock_core::LockState::from(short.inspect("lengthened").await.expect("inspect")) {
        LockState::Held {
            remaining: Some(left),
            ..
        } => assert!(
            left > Duration::from_secs(3),
            "renewals must keep the 5 s asked for, the key has {left:?}"
        ),
        other => panic!("the lengthened lease is gone: {other:?}"),
    }
    guard.release().await.expect("release");

    if factory.capabilities().reentrant {
        let outer = taken(&locks, "nested").await;
        let inner = taken_as(&short, "nested", outer.owner()).await;
        assert_deadline_within_key(&locks, &outer, "outer, after a short re-entry").await;
        inner
            .extend(Duration::from_millis(300))
            .await
            .expect("extend");
        assert_deadline_within_key(&locks, &outer, "outer, after the inner extend").await;
        inner.release().await.expect("release the inner hold");
        outer.release().await.expect("release the outer hold");
    }
}

/// An extend whose reply was lost may still reach Redis after a renewal sent
/// later (a request stuck behind a slow link while the later one went by
/// another connection): if it asked for a shorter TTL, it ends the key
/// early. A guard never trusts its lease past that: every later renewal's
/// deadline counts with the shortest TTL an unanswered extend asked for, and
/// the watchdog renews at that pace, so the lease is kept.
pub async fn a_stray_shorter_extend_bounds_later_deadlines(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    // The reentrant strategy never shortens a key that others share.
    let shortens = !factory.capabilities().reentrant;
    for watchdog in [false, true] {
        let mut config = fast_config(Duration::from_secs(10));
        config.watchdog.enabled = watchdog;
        let stray = Duration::from_millis(300);
        let faulty = Faulty::new(
            &deployment.backend,
            Fault::Pass,
            Fault::Stray(stray),
            Fault::Pass,
        );
        let locks = crate::contract::manager_over(faulty as Arc<dyn LockBackend>, config);
        let name = format!("stray-{watchdog}");
        let context = |what: &str| format!("{what}, watchdog {watchdog}");
        let guard = taken(&locks, &name).await;
        let lost = guard.extend(Duration::from_millis(700)).await;
        assert!(lost.is_err(), "the extend's reply was lost: {lost:?}");
        guard
            .extend(Duration::from_secs(10))
            .await
            .expect("extend(10s)");
        assert_deadline_within_key(&locks, &guard, &context("before the stray lands")).await;
        if shortens {
            // It lands at about 300 ms and sets 700 ms.
            let landed = async {
                loop {
                    let state = LockState::from(locks.inspect(&name).await.expect("inspect"));
                    if let LockState::Held {
                        remaining: Some(left),
                        ..
                    } = state
                    {
                        if left <= Duration::from_millis(700) {
                            return;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            };
            tokio::time::timeout(Duration::from_secs(3), landed)
                .await
                .expect("the stray extend lands");
        }
        assert_deadline_within_key(&locks, &guard, &context("after the stray landed")).await;
        if watchdog {
            // Renewed at the pace of 700 ms, the lease outlives the stray's
            // TTL and stays within the key.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            assert!(
                guard.is_valid(),
                "{}",
                context("the watchdog kept the lease")
            );
        } else {
            guard
                .extend(Duration::from_secs(10))
                .await
                .expect("extend(10s) again");
        }
        assert_deadline_within_key(&locks, &guard, &context("renewed after the stray")).await;
        guard.release().await.expect("release");
    }
}

/// An extend that shortens the lease takes effect on the server as soon as
/// it runs, before its reply comes back: from when it is sent, the guard
/// trusts its lease no longer than the extend would set.
pub async fn a_shortening_extend_in_flight_bounds_the_deadline(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let mut unrenewed = fast_config(Duration::from_secs(10));
    unrenewed.watchdog.enabled = false;
    // The extend runs at once; its reply takes 600 ms to come back.
    let faulty = Faulty::new(
        &deployment.backend,
        Fault::Pass,
        Fault::Slow(Duration::ZERO, Duration::from_millis(600)),
        Fault::Pass,
    );
    let locks = crate::contract::manager_over(faulty as Arc<dyn LockBackend>, unrenewed);
    let guard = taken(&locks, "shortened in flight").await;
    let check = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_deadline_within_key(&locks, &guard, "while extend(300ms) is answered").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_deadline_within_key(&locks, &guard, "past the 300 ms it set").await;
    };
    let (extended, ()) = tokio::join!(guard.extend(Duration::from_millis(300)), check);
    if !factory.capabilities().reentrant {
        // Answered after the deadline it set: the lease ended with the key.
        assert!(
            extended.is_err(),
            "answered past its own deadline: {extended:?}"
        );
    }
    drop(guard);
}

/// A guard whose hold ended (here: cleared by an operator) never releases or
/// extends a newer hold taken by the same caller-chosen owner, whether it is
/// released, extended or dropped.
pub async fn stale_guard_spares_a_newer_hold(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(10)));
    let owner = OwnerToken::from_string("worker-7").expect("owner");
    let key = locks.key("reused").expect("key");
    for ending in ["release", "extend", "drop"] {
        let stale = taken_as(&locks, "reused", &owner).await;
        locks
            .backend()
            .force_release(&key)
            .await
            .expect("force_release");
        let fresh = taken_as(&locks, "reused", &owner).await;
        match ending {
            "release" => assert!(
                matches!(stale.release().await, Err(LockError::LeaseLost { .. })),
                "{ending}: the stale release must report its own hold lost"
            ),
            "extend" => {
                assert!(
                    matches!(
                        stale.extend(Duration::from_secs(10)).await,
                        Err(LockError::LeaseLost { .. })
                    ),
                    "{ending}: the stale guard must not extend the newer hold"
                );
                assert!(!stale.is_valid(), "{ending}: the stale guard is not valid");
                drop(stale);
            }
            _ => drop(stale),
        }
        // A background release, if any were sent, has landed by now.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            locks.inspect("reused").await.expect("inspect").is_held(),
            "{ending}: the stale guard freed the newer hold"
        );
        assert!(
            held_by_another(&locks, "reused").await,
            "{ending}: another owner got in while the newer hold is valid"
        );
        assert!(fresh.is_valid(), "{ending}: the newer hold is valid");
        fresh.release().await.expect("release the newer hold");
    }
}

/// Polls until `name` is free, failing after `within`.
async fn until_free(locks: &LockManager, name: &str, within: Duration, context: &str) {
    let started = Instant::now();
    while locks.inspect(name).await.expect("inspect").is_held() {
        assert!(
            started.elapsed() < within,
            "{context}: the key was still held {within:?} later"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The cleanup of an attempt whose reply was lost never frees the grant of a
/// later attempt of the same wait, and a wait whose lost attempt did land does
/// not sit out its own grant's TTL.
pub async fn lost_reply_cleanup_spares_the_retry(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let ttl = Duration::from_secs(10);
    let plain = deployment.manager(fast_config(ttl));
    let caller_owner = OwnerToken::generate().expect("rng");
    for (case, as_caller) in [("fresh owner", false), ("caller's owner", true)] {
        let name = format!("late-cleanup-{as_caller}");
        let faulty = Faulty::new(
            &deployment.backend,
            Fault::Lost { lands: false },
            Fault::Pass,
            Fault::Late(Duration::from_millis(300)),
        );
        let locks = crate::contract::manager_over(faulty, fast_config(ttl));
        let guard = if as_caller {
            locks
                .acquire_with(
                    &name,
                    &lock_core::AcquireOptions::new().with_owner(caller_owner.clone()),
                )
                .await
        } else {
            locks.acquire(&name).await
        }
        .expect("the retry acquires");
        // Let the late cleanup land.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(guard.is_valid(), "{case}: the guard is valid");
        assert!(
            held_by_another(&plain, &name).await,
            "{case}: two valid holders: the late cleanup freed the retry's grant"
        );
        guard.release().await.expect("release");
    }

    let faulty = Faulty::new(
        &deployment.backend,
        Fault::Lost { lands: true },
        Fault::Pass,
        Fault::Lost { lands: false },
    );
    let locks = crate::contract::manager_over(faulty, fast_config(ttl));
    let started = Instant::now();
    let guard = locks
        .acquire_with("landed", &waiting_up_to(Duration::from_secs(5)))
        .await
        .expect("the wait does not sit out its own lost grant");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?} to get past its own lost grant",
        started.elapsed()
    );
    guard.release().await.expect("release");
    assert!(
        !plain.inspect("landed").await.expect("inspect").is_held(),
        "the lost grant was left behind after the release"
    );
}

/// A fencing counter holding foreign data (not a number, at its maximum, or
/// of another type) makes an acquire fail with `Corrupted` before the script
/// writes anything: the lock key stays absent. A strategy that issues no
/// tokens never reads the counter: it takes the lock with no token and
/// leaves the counter as it was, while its fair mode, which issues tokens,
/// still refuses.
pub async fn foreign_counter_writes_nothing(factory: &dyn BackendFactory) {
    let fencing = factory.capabilities().fencing;
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(10)));
    let mut fair_config = fast_config(Duration::from_secs(10));
    fair_config.fair = true;
    let fair = deployment
        .backend
        .capabilities()
        .has(lock_core::Capability::FairQueue)
        .then(|| deployment.manager(fair_config));
    let key = locks.key("counted").expect("key");
    let set_counter: [&[&str]; 4] = [
        &["SET", key.fence_key(), "not-a-number"],
        &["SET", key.fence_key(), "9223372036854775807"],
        // `INCR` takes it: a grant that raised it must take it back.
        &["SET", key.fence_key(), "-5"],
        &["RPUSH", key.fence_key(), "a-list"],
    ];
    for setup in set_counter {
        deployment.admin_all(&["DEL", key.fence_key()]);
        deployment.admin_all(setup);
        if !fencing {
            let guard = locks
                .try_acquire("counted")
                .await
                .unwrap_or_else(|err| panic!("{setup:?}: {err}"))
                .unwrap_or_else(|| panic!("{setup:?}: the lock was held"));
            assert_eq!(guard.fencing_token(), None, "{setup:?}");
            guard.release().await.expect("release");
            for reply in deployment.admin_each(&["TYPE", key.fence_key()]) {
                let kind = if setup[0] == "RPUSH" {
                    "list"
                } else {
                    "string"
                };
                assert_eq!(
                    reply.as_text(),
                    Some(kind),
                    "{setup:?}: the counter was left as it was"
                );
            }
        }
        let refusing = [
            ("plain", Some(&locks).filter(|_| fencing)),
            ("fair", fair.as_ref()),
        ];
        for (mode, manager) in refusing {
            let Some(manager) = manager else { continue };
            let result = manager.try_acquire("counted").await;
            assert!(
                matches!(result, Err(LockError::Corrupted { .. })),
                "{mode} {setup:?}: {result:?}"
            );
            for reply in deployment.admin_each(&["EXISTS", key.redis_key()]) {
                let exists = reply.as_int();
                assert_eq!(
                    exists,
                    Some(0),
                    "{mode} {setup:?}: the script wrote the key"
                );
            }
            if setup[0] == "SET" {
                for reply in deployment.admin_each(&["GET", key.fence_key()]) {
                    assert_eq!(
                        reply.as_text(),
                        Some(setup[2]),
                        "{mode} {setup:?}: the counter was changed"
                    );
                }
            }
        }
    }
    if !fencing {
        return;
    }
    deployment.admin_all(&["DEL", key.fence_key()]);
    deployment.admin_all(&["SET", key.fence_key(), "41"]);
    let guard = taken(&locks, "counted").await;
    assert_eq!(guard.fencing_token().map(|token| token.get()), Some(42));
    guard.release().await.expect("release");
}

/// The ACL rules of a least-privilege lock user, as the README gives them:
/// the lock prefix's keys, the commands the strategies run, and no pub/sub
/// channels (Redis 7's default for new users, `acl-pubsub-default
/// resetchannels`).
pub const LOCK_USER_ACL: [&str; 10] = [
    "on",
    ">lock-user-pw",
    "~lock:*",
    "resetchannels",
    "-@all",
    "+@connection",
    "+@scripting",
    "+@string",
    "+@hash",
    "+@keyspace",
];

/// A user limited to the lock prefix's keys, with no pub/sub channels, takes,
/// extends and releases locks (the release's publish is refused, the delete
/// stands), and its waiters still get the lock, on their timers.
pub async fn least_privilege_user_locks(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let mut rules = vec!["ACL", "SETUSER", "lock-user"];
    rules.extend(LOCK_USER_ACL);
    // Fair mode also keeps a list and a sorted set under the lock's tag.
    rules.extend(["+@list", "+@sortedset"]);
    deployment.admin_all(&rules);
    let urls: Vec<lock_core::NodeUrl> = deployment
        .servers
        .iter()
        .map(|server| {
            lock_core::NodeUrl::new(format!(
                "redis://lock-user:lock-user-pw@127.0.0.1:{}",
                server.port()
            ))
        })
        .collect();
    let backend = factory
        .connect(&urls, crate::contract::fast_options())
        .await
        .expect("the lock user connects");
    // Counted, to see the waiter below turn to its wait.
    let counted = Faulty::passing(&backend);
    let locks = crate::contract::manager_over(
        Arc::clone(&counted) as Arc<dyn LockBackend>,
        fast_config(Duration::from_secs(5)),
    );
    let guard = taken(&locks, "acl").await;
    guard
        .extend(Duration::from_secs(5))
        .await
        .expect("the lock user extends");
    guard.release().await.expect("the lock user releases");
    assert!(
        !locks.inspect("acl").await.expect("inspect").is_held(),
        "the release deleted the key"
    );

    let holder = taken(&locks, "acl").await;
    let watched = counted.watches();
    let waiter = {
        let locks = locks.clone();
        tokio::spawn(async move {
            locks
                .acquire_with("acl", &waiting_up_to(Duration::from_secs(5)))
                .await
        })
    };
    // The waiter found the lock held and asked to watch for its release
    // (refused: the user has no channels), so it waits on its timer.
    crate::eventually(Duration::from_secs(5), "the waiter waiting", || {
        let watches = counted.watches();
        async move { (watches > watched).then_some(()) }
    })
    .await;
    let released_at = Instant::now();
    holder.release().await.expect("release");
    let guard = waiter
        .await
        .expect("waiter task")
        .expect("the waiter gets the lock without notifications");
    assert!(
        released_at.elapsed() < Duration::from_secs(1),
        "the waiter took {:?} after the release (it must not wait for the holder's TTL)",
        released_at.elapsed()
    );
    guard.release().await.expect("release");
    assert_eq!(
        locks
            .backend()
            .force_release(&locks.key("acl").expect("key"))
            .await
            .expect("the lock user force-releases"),
        0
    );
}

/// Commands abandoned or answered out of order never leave two holders or
/// an orphaned key: a wait dropped while it settles a lost acquire still
/// releases it; a dropped `release()` still releases; a lease that expired
/// after renewals ran unanswered still releases its own hold; and an extend
/// never overtakes a renewal in flight.
pub async fn abandoned_commands_leave_nothing_behind(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let ttl = Duration::from_secs(10);
    let plain = deployment.manager(fast_config(ttl));
    let manager = |faulty: Arc<Faulty>, config| {
        crate::contract::manager_over(faulty as Arc<dyn LockBackend>, config)
    };

    // The lost acquire landed; the wait is dropped while its cleanup is slow.
    let locks = manager(
        Faulty::new(
            &deployment.backend,
            Fault::Lost { lands: true },
            Fault::Pass,
            Fault::Late(Duration::from_secs(3)),
        ),
        fast_config(ttl),
    );
    let dropped = tokio::time::timeout(Duration::from_millis(300), locks.acquire("settling")).await;
    assert!(dropped.is_err(), "the wait was cut short: {dropped:?}");
    until_free(
        &plain,
        "settling",
        Duration::from_secs(2),
        "dropped while settling",
    )
    .await;

    // `release()` dropped before its reply is sent again in the background
    // where a release names one attempt's grant; a reentrant one (which takes
    // one off a shared count) is left to the TTL, as the next check shows why.
    let resent = deployment.backend.capabilities().releases_only_its_attempt;
    let locks = manager(
        Faulty::new(
            &deployment.backend,
            Fault::Pass,
            Fault::Pass,
            Fault::Late(Duration::from_secs(3)),
        ),
        fast_config(ttl),
    );
    let guard = taken(&locks, "releasing").await;
    let cut = tokio::time::timeout(Duration::from_millis(100), guard.release()).await;
    assert!(cut.is_err(), "the release was cut short: {cut:?}");
    if resent {
        until_free(
            &plain,
            "releasing",
            Duration::from_secs(2),
            "dropped release",
        )
        .await;
    } else {
        deployment.admin_all(&["DEL", plain.key("releasing").expect("key").redis_key()]);
    }

    // A nested reentrant release that ran but was dropped before its reply
    // is not sent again: a second one would end the outer guard's hold.
    if factory.capabilities().reentrant {
        let locks = manager(
            Faulty::new(
                &deployment.backend,
                Fault::Pass,
                Fault::Pass,
                Fault::Slow(Duration::ZERO, Duration::from_millis(300)),
            ),
            fast_config(ttl),
        );
        let outer = taken(&locks, "nested-release").await;
        let inner = taken_as(&locks, "nested-release", outer.owner()).await;
        let cut = tokio::time::timeout(Duration::from_millis(100), inner.release()).await;
        assert!(cut.is_err(), "the inner release was cut short: {cut:?}");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(outer.is_valid(), "the outer guard is valid");
        assert!(
            held_by_another(&plain, "nested-release").await,
            "two holders: the dropped inner release was sent twice"
        );
        outer.release().await.expect("release the outer hold");
    }

    // A renewal ran but its reply was lost; the guard's deadline passes.
    let mut unrenewed = fast_config(Duration::from_millis(400));
    unrenewed.watchdog.enabled = false;
    let locks = manager(
        Faulty::new(
            &deployment.backend,
            Fault::Pass,
            Fault::Lost { lands: true },
            Fault::Pass,
        ),
        unrenewed,
    );
    let guard = taken(&locks, "expired").await;
    let extended = guard.extend(ttl).await;
    assert!(
        extended.is_err(),
        "the extend's reply was lost: {extended:?}"
    );
    assert!(
        guard.remaining() <= Duration::from_millis(400),
        "an unanswered extend never lengthens the deadline"
    );
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("the deadline passes");
    drop(guard);
    until_free(
        &plain,
        "expired",
        Duration::from_secs(2),
        "expired guard dropped",
    )
    .await;

    // The watchdog's renewal (2 s TTL) reaches Redis late and is answered
    // late, still before the deadline; the caller's extend(20s) is sent
    // meanwhile. It must not overtake the renewal, or the key ends at 2 s
    // while the guard trusts 20 s.
    let locks = manager(
        Faulty::new(
            &deployment.backend,
            Fault::Pass,
            Fault::Slow(Duration::from_millis(400), Duration::from_millis(600)),
            Fault::Pass,
        ),
        fast_config(Duration::from_secs(2)),
    );
    let guard = taken(&locks, "reordered").await;
    // The first renewal starts at about 667 ms, reaches Redis at 1067 ms and
    // is answered at 1667 ms; the deadline is at 1978 ms.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let check = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_deadline_within_key(&locks, &guard, "after a late renewal and an extend").await;
    };
    let (extended, ()) = tokio::join!(guard.extend(Duration::from_secs(20)), check);
    extended.expect("extend");
    assert_deadline_within_key(&locks, &guard, "after both were answered").await;
    guard.release().await.expect("release");
}
