//! The contract suite, the reentrant model test, and the reentrant-specific
//! checks, once per compiled client.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::Arc;
use std::time::Duration;

use lock_core::{
    AcquireOutcome, Capability, ClientKind, ConnectOptions, Endpoint, ExtendOutcome, HoldToken,
    LockBackend, LockError, LockKey, LockState, OwnerToken, ReleaseOutcome,
};
use lock_reentrant::ReentrantBackend;
use lock_testkit::contract::held_by_another;
use lock_testkit::contract::taken;
use lock_testkit::contract::taken_as;
use lock_testkit::contract::{fast_config, Deployment};
use lock_testkit::{BackendFactory, BoxFuture, Capabilities};

/// Connects the reentrant backend to the first URL through one client.
struct Reentrant(ClientKind);

impl BackendFactory for Reentrant {
    fn capabilities(&self) -> Capabilities {
        Capabilities::new(true, true).with([Capability::Listing])
    }

    fn connect_endpoints<'a>(
        &'a self,
        endpoints: &'a [Endpoint],
        options: ConnectOptions,
    ) -> BoxFuture<'a, Result<Arc<dyn LockBackend>, LockError>> {
        Box::pin(async move {
            let backend = ReentrantBackend::connect(self.0, &endpoints[0], options).await?;
            Ok(Arc::new(backend) as Arc<dyn LockBackend>)
        })
    }
}

/// The contract over TLS, on a Redis Cluster and behind Sentinel, with each
/// client. These
/// start more servers, so they run in one build only: the one with both
/// clients (and TLS), which `cargo xtask test` runs.
#[cfg(all(feature = "redis", feature = "fred", feature = "tls"))]
mod sites {
    use super::*;

    lock_testkit::contract_suite!(@on_sites Reentrant);
}

fn key(name: &str) -> LockKey {
    LockKey::new("lock:", name).expect("valid key")
}

/// One hold of a fresh owner, used for all its acquires here: the
/// reentrant strategy re-enters by owner.
fn owner() -> HoldToken {
    HoldToken::new(OwnerToken::generate().expect("os rng")).expect("os rng")
}

const TTL: Duration = Duration::from_secs(10);

async fn holds(backend: &dyn LockBackend, key: &LockKey) -> Option<u64> {
    match lock_core::LockState::from(backend.inspect(key).await.expect("inspect")) {
        LockState::Held { hold_count, .. } => hold_count,
        _ => None,
    }
}

/// Nested acquires count up, releases count down, and the key is deleted at zero.
async fn nested_holds_count(factory: &Reentrant) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let (key, holder, other) = (key("nested"), owner(), owner());
    let mut tokens = Vec::new();
    for depth in 1..=4 {
        match backend
            .try_acquire(&key, &holder, TTL, &lock_core::Claim::LOCK, None)
            .await
            .expect("acquire")
        {
            AcquireOutcome::Acquired(lock_core::Acquired { fencing_token, .. }) => {
                tokens.push(fencing_token)
            }
            held => panic!("depth {depth}: the holder was refused: {held:?}"),
        }
        assert_eq!(
            holds(backend, &key).await,
            Some(depth),
            "hold count after {depth} acquires"
        );
    }
    assert!(
        tokens.windows(2).all(|pair| pair[0] == pair[1]),
        "re-entries keep the token: {tokens:?}"
    );
    for left in (0..4).rev() {
        assert!(
            matches!(
                backend
                    .try_acquire(&key, &other, TTL, &lock_core::Claim::LOCK, None)
                    .await
                    .expect("acquire"),
                AcquireOutcome::Held { .. }
            ),
            "another owner got in with {} holds left",
            left + 1
        );
        assert_eq!(
            backend.release(&key, &holder).await.expect("release"),
            ReleaseOutcome::Released
        );
        assert_eq!(holds(backend, &key).await, (left > 0).then_some(left));
    }
    // More releases than acquires: refused, and nothing changes.
    assert_eq!(
        backend.release(&key, &holder).await.expect("release"),
        ReleaseOutcome::NotHeld
    );
    for server in &deployment.servers {
        assert_eq!(
            server
                .admin(&["EXISTS", key.redis_key()])
                .expect("EXISTS")
                .as_int(),
            Some(0)
        );
    }
    match backend
        .try_acquire(&key, &other, TTL, &lock_core::Claim::LOCK, None)
        .await
        .expect("acquire")
    {
        AcquireOutcome::Acquired(lock_core::Acquired { fencing_token, .. }) => {
            assert!(
                fencing_token > tokens[0],
                "the next outermost acquire gets a new token"
            )
        }
        held => panic!("the key was not free after the last release: {held:?}"),
    }
}

/// A release or extend by another owner is refused and changes nothing.
async fn wrong_owner_is_refused(factory: &Reentrant) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let (key, holder, intruder) = (key("guarded"), owner(), owner());
    backend
        .try_acquire(&key, &holder, TTL, &lock_core::Claim::LOCK, None)
        .await
        .expect("acquire");
    backend
        .try_acquire(&key, &holder, TTL, &lock_core::Claim::LOCK, None)
        .await
        .expect("re-enter");
    assert_eq!(
        backend.release(&key, &intruder).await.expect("release"),
        ReleaseOutcome::NotHeld
    );
    assert_eq!(
        backend.extend(&key, &intruder, TTL).await.expect("extend"),
        lock_core::ExtendOutcome::NotHeld
    );
    assert_eq!(
        holds(backend, &key).await,
        Some(2),
        "the intruder changed nothing"
    );
}

/// Expiry frees the key even with holds outstanding.
async fn expiry_with_holds_frees_the_key(factory: &Reentrant) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let (key, holder, other) = (key("expiring"), owner(), owner());
    let short = Duration::from_millis(100);
    for _ in 0..3 {
        backend
            .try_acquire(&key, &holder, short, &lock_core::Claim::LOCK, None)
            .await
            .expect("acquire");
    }
    tokio::time::sleep(short + Duration::from_millis(50)).await;
    assert!(matches!(
        backend
            .try_acquire(&key, &other, short, &lock_core::Claim::LOCK, None)
            .await
            .expect("acquire"),
        AcquireOutcome::Acquired(_)
    ));
    assert_eq!(
        backend.release(&key, &holder).await.expect("release"),
        ReleaseOutcome::NotHeld
    );
}

/// The watchdog keeps a nested lock while any guard is alive.
async fn watchdog_renews_while_holds_remain(factory: &Reentrant) {
    let deployment = Deployment::start(factory).await;
    let ttl = Duration::from_millis(300);
    let locks = deployment.manager(fast_config(ttl));
    let outer = taken(&locks, "kept").await;
    let inner = taken_as(&locks, "kept", outer.owner()).await;
    outer.release().await.expect("release the outer hold first");
    tokio::time::sleep(ttl * 3).await;
    assert!(inner.is_valid(), "the remaining hold was renewed");
    assert!(held_by_another(&locks, "kept").await);
    inner.release().await.expect("release the last hold");
    assert!(!locks.inspect("kept").await.expect("inspect").is_held());
}

/// Data this library did not write is reported, never misread, and left as it was.
async fn corrupted_locks_are_reported(factory: &Reentrant) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let holder = HoldToken::new(OwnerToken::from_string("worker-1").expect("owner")).expect("rng");

    let bad_count = key("bad-count");
    deployment.admin_all(&["HSET", bad_count.redis_key(), "worker-1", "many"]);
    deployment.admin_all(&["SET", bad_count.fence_key(), "7"]);
    for outcome in [
        backend
            .try_acquire(&bad_count, &holder, TTL, &lock_core::Claim::LOCK, None)
            .await
            .map(|_| ()),
        backend.release(&bad_count, &holder).await.map(|_| ()),
    ] {
        assert!(
            matches!(outcome, Err(LockError::Corrupted { .. })),
            "non-integer count: {outcome:?}"
        );
    }
    for server in &deployment.servers {
        let value = server
            .admin(&["HGET", bad_count.redis_key(), "worker-1"])
            .expect("HGET");
        assert_eq!(
            value.as_text(),
            Some("many"),
            "the corrupted count was left as it was"
        );
    }

    // A re-entry reads the counter too: one Lua would misread (a float, a
    // number past 2^53) is refused before the count goes up.
    for counter in ["1e3", "9007199254740993", "-4", " 5"] {
        let odd_counter = key("odd-counter");
        deployment.admin_all(&["DEL", odd_counter.redis_key()]);
        deployment.admin_all(&["HSET", odd_counter.redis_key(), "worker-1", "1"]);
        deployment.admin_all(&["PEXPIRE", odd_counter.redis_key(), "10000"]);
        deployment.admin_all(&["SET", odd_counter.fence_key(), counter]);
        let outcome = backend
            .try_acquire(&odd_counter, &holder, TTL, &lock_core::Claim::LOCK, None)
            .await;
        match (counter, &outcome) {
            // Exact above 2^53 as text, so a re-entry may take it.
            (
                "9007199254740993",
                Ok(AcquireOutcome::Acquired(lock_core::Acquired { fencing_token, .. })),
            ) => assert_eq!(
                fencing_token.map(|token| token.get()),
                Some(9_007_199_254_740_993),
                "the token is the counter, not a rounded float"
            ),
            (_, Err(LockError::Corrupted { .. })) => {
                for server in &deployment.servers {
                    let count = server
                        .admin(&["HGET", odd_counter.redis_key(), "worker-1"])
                        .expect("HGET");
                    assert_eq!(count.as_text(), Some("1"), "{counter:?}: the count went up");
                }
            }
            _ => panic!("counter {counter:?}: {outcome:?}"),
        }
    }

    let string_key = key("plain-string");
    deployment.admin_all(&["SET", string_key.redis_key(), "not-a-hash"]);
    // A string is how a plain lock holds the name: held for a reentrant
    // acquire, as any other kind's hold is, and no hold of this one's to
    // renew or release; the reentrant inspect finds no hash.
    let outcome = backend
        .try_acquire(&string_key, &holder, TTL, &lock_core::Claim::LOCK, None)
        .await;
    assert!(
        matches!(outcome, Ok(AcquireOutcome::Held { .. })),
        "string where a hash belongs: {outcome:?}"
    );
    let outcome = backend.extend(&string_key, &holder, TTL).await;
    assert!(
        matches!(outcome, Ok(ExtendOutcome::NotHeld)),
        "extend of another kind's hold: {outcome:?}"
    );
    let outcome = backend.release(&string_key, &holder).await;
    assert!(
        matches!(outcome, Ok(ReleaseOutcome::NotHeld)),
        "release of another kind's hold: {outcome:?}"
    );
    let outcome = backend.inspect(&string_key).await;
    assert!(
        matches!(outcome, Err(LockError::Corrupted { .. })),
        "string where a hash belongs: {outcome:?}"
    );
    for server in &deployment.servers {
        let value = server.admin(&["GET", string_key.redis_key()]).expect("GET");
        assert_eq!(
            value.as_text(),
            Some("not-a-hash"),
            "the string was left as it was"
        );
    }

    // Empty and oversized owners are refused before anything is sent.
    assert!(matches!(
        OwnerToken::from_string(""),
        Err(LockError::InvalidOwner { .. })
    ));
    assert!(matches!(
        OwnerToken::from_string("o".repeat(lock_core::MAX_OWNER_LEN + 1)),
        Err(LockError::InvalidOwner { .. })
    ));
}

/// The contract suite, the reentrant model and `checks`, in a module per
/// client compiled in.
macro_rules! reentrant_tests {
    ($($check:ident),+ $(,)?) => {
        reentrant_tests!(@client on_redis Redis "redis"; $($check),+);
        reentrant_tests!(@client on_fred Fred "fred"; $($check),+);
    };
    (@client $module:ident $client:ident $feature:literal; $($check:ident),+) => {
        #[cfg(feature = $feature)]
        mod $module {
            use super::*;

            lock_testkit::contract_suite!(Reentrant(ClientKind::$client));

            #[test]
            fn matches_the_reentrant_model() {
                lock_testkit::model::check_against_model(&Reentrant(ClientKind::$client), 24);
            }

            $(
                #[test]
                fn $check() {
                    lock_testkit::run(super::$check(&Reentrant(ClientKind::$client)));
                }
            )+
        }
    };
}

reentrant_tests!(
    nested_holds_count,
    wrong_owner_is_refused,
    expiry_with_holds_frees_the_key,
    watchdog_renews_while_holds_remain,
    corrupted_locks_are_reported,
);
