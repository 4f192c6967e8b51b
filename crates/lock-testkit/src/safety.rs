//! Checks that no sequence of public calls yields two valid holders of one
//! lock: the holes a demanding user found (deadlines trusted past the key's
//! TTL, stale guards releasing newer holds, cleanups of lost replies racing
//! the retry, acquire scripts that write before they fail). They run in the
//! contract suite, on every strategy and client.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::{
    AcquireOutcome, ExtendOutcome, HoldToken, LeaseGuard, LockBackend, LockError, LockKey,
    LockManager, LockState, OwnerToken, ReleaseOutcome, ReleaseWatch,
};

use crate::contract::{fast_config, BackendFactory, Deployment};

/// Asserts that `guard` trusts its lease no longer than the key lives: the
/// key's remaining TTL is read first, then the guard's, so a correct guard can
/// only come out shorter.
async fn assert_deadline_within_key(locks: &LockManager, guard: &LeaseGuard, context: &str) {
    let state = locks.inspect(guard.key()).await.expect("inspect");
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
    let guard = unrenewed
        .try_acquire("shortened")
        .await
        .expect("try_acquire")
        .expect("free key");
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
    let guard = short
        .try_acquire("lengthened")
        .await
        .expect("try_acquire")
        .expect("free key");
    guard.extend(Duration::from_secs(5)).await.expect("extend");
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(guard.is_valid(), "the watchdog keeps the lease");
    assert_deadline_within_key(&short, &guard, "after watchdog renewals").await;
    match short.inspect("lengthened").await.expect("inspect") {
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
        let outer = locks
            .try_acquire("nested")
            .await
            .expect("try_acquire")
            .expect("free key");
        let inner = short
            .try_acquire_as(outer.owner(), "nested")
            .await
            .expect("re-enter")
            .expect("the owner re-enters");
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

/// A guard whose hold ended (here: cleared by an operator) never releases or
/// extends a newer hold taken by the same caller-chosen owner, whether it is
/// released, extended or dropped.
pub async fn stale_guard_spares_a_newer_hold(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(10)));
    let owner = OwnerToken::from_string("worker-7").expect("owner");
    let key = locks.key("reused").expect("key");
    for ending in ["release", "extend", "drop"] {
        let stale = locks
            .try_acquire_as(&owner, "reused")
            .await
            .expect("try_acquire_as")
            .expect("free key");
        locks
            .backend()
            .force_release(&key)
            .await
            .expect("force_release");
        let fresh = locks
            .try_acquire_as(&owner, "reused")
            .await
            .expect("try_acquire_as")
            .expect("the key was cleared");
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
            locks
                .try_acquire("reused")
                .await
                .expect("try_acquire")
                .is_none(),
            "{ending}: another owner got in while the newer hold is valid"
        );
        assert!(fresh.is_valid(), "{ending}: the newer hold is valid");
        fresh.release().await.expect("release the newer hold");
    }
}

/// A backend over a real one that loses replies on purpose: the first acquire
/// either never reaches Redis or runs and its reply is lost, and the first
/// release (the cleanup of that acquire) fails or arrives late.
#[derive(Debug)]
struct LostFirstReply {
    inner: Arc<dyn LockBackend>,
    /// Whether the lost first acquire ran on Redis before its reply was lost.
    first_acquire_lands: bool,
    /// Whether the first release fails (else it is delayed by `late_by`).
    first_release_fails: bool,
    late_by: Duration,
    acquires: AtomicUsize,
    releases: AtomicUsize,
}

impl LostFirstReply {
    fn lost_reply() -> LockError {
        LockError::Timeout {
            node: "lost-reply".to_owned(),
            after: Duration::from_millis(1),
        }
    }
}

#[lock_core::async_trait]
impl LockBackend for LostFirstReply {
    fn strategy(&self) -> &'static str {
        self.inner.strategy()
    }

    async fn try_acquire(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<AcquireOutcome, LockError> {
        if self.acquires.fetch_add(1, Ordering::SeqCst) == 0 {
            if self.first_acquire_lands {
                self.inner.try_acquire(key, hold, ttl).await?;
            }
            return Err(Self::lost_reply());
        }
        self.inner.try_acquire(key, hold, ttl).await
    }

    async fn extend(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        self.inner.extend(key, hold, ttl).await
    }

    fn releases_only_its_attempt(&self) -> bool {
        self.inner.releases_only_its_attempt()
    }

    async fn release(&self, key: &LockKey, hold: &HoldToken) -> Result<ReleaseOutcome, LockError> {
        if self.releases.fetch_add(1, Ordering::SeqCst) == 0 {
            if self.first_release_fails {
                return Err(Self::lost_reply());
            }
            tokio::time::sleep(self.late_by).await;
        }
        self.inner.release(key, hold).await
    }

    async fn inspect(&self, key: &LockKey) -> Result<LockState, LockError> {
        self.inner.inspect(key).await
    }

    async fn force_release(&self, key: &LockKey) -> Result<usize, LockError> {
        self.inner.force_release(key).await
    }

    async fn watch_releases(&self, key: &LockKey) -> Result<Option<ReleaseWatch>, LockError> {
        self.inner.watch_releases(key).await
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
        let faulty = Arc::new(LostFirstReply {
            inner: Arc::clone(&deployment.backend),
            first_acquire_lands: false,
            first_release_fails: false,
            late_by: Duration::from_millis(300),
            acquires: AtomicUsize::new(0),
            releases: AtomicUsize::new(0),
        });
        let locks = LockManager::new(faulty, fast_config(ttl)).expect("config");
        let guard = if as_caller {
            locks.acquire_as(&caller_owner, &name).await
        } else {
            locks.acquire(&name).await
        }
        .expect("the retry acquires");
        // Let the late cleanup land.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(guard.is_valid(), "{case}: the guard is valid");
        assert!(
            plain
                .try_acquire(&name)
                .await
                .expect("try_acquire")
                .is_none(),
            "{case}: two valid holders: the late cleanup freed the retry's grant"
        );
        guard.release().await.expect("release");
    }

    let faulty = Arc::new(LostFirstReply {
        inner: Arc::clone(&deployment.backend),
        first_acquire_lands: true,
        first_release_fails: true,
        late_by: Duration::ZERO,
        acquires: AtomicUsize::new(0),
        releases: AtomicUsize::new(0),
    });
    let locks = LockManager::new(faulty, fast_config(ttl)).expect("config");
    let started = Instant::now();
    let guard = locks
        .acquire_within("landed", Duration::from_secs(5))
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
/// writes anything: the lock key stays absent.
pub async fn foreign_counter_writes_nothing(factory: &dyn BackendFactory) {
    if !factory.capabilities().fencing {
        return;
    }
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(10)));
    let mut fair_config = fast_config(Duration::from_secs(10));
    fair_config.fair = true;
    let fair = deployment
        .backend
        .supports_fair_queue()
        .then(|| deployment.manager(fair_config));
    let key = locks.key("counted").expect("key");
    let set_counter: [&[&str]; 3] = [
        &["SET", key.fence_key(), "not-a-number"],
        &["SET", key.fence_key(), "9223372036854775807"],
        &["RPUSH", key.fence_key(), "a-list"],
    ];
    for setup in set_counter {
        deployment.admin_all(&["DEL", key.fence_key()]);
        deployment.admin_all(setup);
        for (mode, manager) in [("plain", Some(&locks)), ("fair", fair.as_ref())] {
            let Some(manager) = manager else { continue };
            let result = manager.try_acquire("counted").await;
            assert!(
                matches!(result, Err(LockError::Corrupted { .. })),
                "{mode} {setup:?}: {result:?}"
            );
            for server in &deployment.servers {
                let exists = server
                    .admin(&["EXISTS", key.redis_key()])
                    .expect("EXISTS")
                    .as_int();
                assert_eq!(
                    exists,
                    Some(0),
                    "{mode} {setup:?}: the script wrote the key"
                );
            }
        }
    }
    deployment.admin_all(&["DEL", key.fence_key()]);
    deployment.admin_all(&["SET", key.fence_key(), "41"]);
    let guard = locks
        .try_acquire("counted")
        .await
        .expect("a sound counter")
        .expect("free");
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
    let locks = LockManager::new(backend, fast_config(Duration::from_secs(5))).expect("config");
    let guard = locks
        .try_acquire("acl")
        .await
        .expect("the lock user acquires")
        .expect("free key");
    guard
        .extend(Duration::from_secs(5))
        .await
        .expect("the lock user extends");
    guard.release().await.expect("the lock user releases");
    assert!(
        !locks.inspect("acl").await.expect("inspect").is_held(),
        "the release deleted the key"
    );

    // A short TTL: where the client cannot see the refused subscription
    // (fred drops the error), the waiter wakes at the holder's expiry.
    let short = LockManager::new(
        Arc::clone(locks.backend()),
        fast_config(Duration::from_millis(1500)),
    )
    .expect("config");
    let holder = short
        .try_acquire("acl")
        .await
        .expect("try_acquire")
        .expect("free key");
    let waiter = {
        let locks = locks.clone();
        tokio::spawn(async move { locks.acquire_within("acl", Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released_at = Instant::now();
    holder.release().await.expect("release");
    let guard = waiter
        .await
        .expect("waiter task")
        .expect("the waiter gets the lock without notifications");
    assert!(
        released_at.elapsed() < Duration::from_millis(1500),
        "the waiter took {:?} after the release",
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
