//! Barriers under lost replies and races, on both clients: the party whose
//! entry completes the count goes on with the others, whatever its wait,
//! a lost reply or a failed clean-up; an attempt that lands after its
//! party withdrew, or after its enter was dropped, enters nothing; a leave
//! ends once its round is over even when another kind takes the name at
//! once.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{AcquireOptions, ClientKind, LockBackend, LockManager, WaitMode};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::{fast_config, fast_options};
use lock_testkit::faulty::{Fault, Faulty};
use lock_testkit::RedisServer;

use super::manager;

/// A zero wait (`distlock barrier -n`): the party whose entry completes the
/// count opens the round, then is told NotAcquired and leaves, while the
/// party already waiting goes through alone.
async fn zero_wait_opener_is_refused_and_the_other_goes_alone(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let barrier = locks.barrier("zero", 2).expect("barrier");
    let first = tokio::spawn({
        let barrier = barrier.clone();
        async move { barrier.enter().await }
    });
    lock_testkit::eventually(Duration::from_secs(5), "a party in", || async {
        (barrier.state().await.ok()?.entered == 1).then_some(())
    })
    .await;
    let second = barrier
        .enter_with(&AcquireOptions::new().with_wait(Duration::ZERO))
        .await;
    let first = tokio::time::timeout(Duration::from_secs(3), first).await;
    let first_ok = matches!(first, Ok(Ok(Ok(_))));
    let second_desc = format!("{:?}", second.as_ref().map(|_| ()));
    // The promise: both go on, or neither does.
    assert!(
        second.is_ok() || !first_ok,
        "the completing party got {second_desc}, the other went through: {first_ok}"
    );
}

/// A manager whose backend loses the reply of its first entry, after it
/// ran; with `failed_release`, the reply of its first release too, which
/// does not run.
async fn losing(kind: ClientKind, server: &RedisServer, failed_release: bool) -> LockManager {
    let inner: Arc<dyn LockBackend> = Arc::new(
        SingleNodeBackend::connect(kind, &server.url(), fast_options())
            .await
            .expect("connect"),
    );
    let release = if failed_release {
        Fault::Lost { lands: false }
    } else {
        Fault::Pass
    };
    let backend: Arc<dyn LockBackend> =
        Faulty::new(&inner, Fault::Lost { lands: true }, Fault::Pass, release);
    LockManager::new(backend, fast_config(Duration::from_secs(30))).expect("config")
}

/// The opening party's enter reply is lost: the engine leaves its attempt
/// (the record stays `:open`), the waiting party goes through with one of
/// two, and the opener's retry is BarrierFull.
async fn lost_reply_of_the_opener(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lossy = losing(kind, &server, false).await;
    let barrier = locks.barrier("lost", 2).expect("barrier");
    let first = tokio::spawn({
        let barrier = barrier.clone();
        async move { barrier.enter().await }
    });
    lock_testkit::eventually(Duration::from_secs(5), "a party in", || async {
        (barrier.state().await.ok()?.entered == 1).then_some(())
    })
    .await;
    let second = lossy.barrier("lost", 2).expect("barrier").enter().await;
    let first = tokio::time::timeout(Duration::from_secs(3), first).await;
    let first_ok = matches!(first, Ok(Ok(Ok(_))));
    let second_desc = format!("{:?}", second.as_ref().map(|_| ()));
    let state = barrier.state().await.expect("state");
    assert!(
        second.is_ok() || !first_ok,
        "opener got {second_desc}; the other went through: {first_ok}; state {state:?}"
    );
}

/// A lost enter whose cleanup fails: the ghost party stays counted, and the
/// same process's next attempt completes a barrier of two alone.
async fn ghost_party_completes_the_count(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let lossy = losing(kind, &server, true).await;
    let barrier = lossy.barrier("ghost", 2).expect("barrier");
    let alone = tokio::time::timeout(Duration::from_secs(3), barrier.enter()).await;
    let state = barrier.state().await.expect("state");
    assert!(
        !matches!(alone, Ok(Ok(_))),
        "one process went through a barrier of two: {state:?}"
    );
}

/// Every party has left, and a lock takes the name at once: the last
/// leaver's wait reads WrongKind and its leave fails, though its round is
/// over.
async fn leave_fails_when_another_kind_takes_the_name(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let mut polling = fast_config(Duration::from_secs(30));
    polling.wait_mode = WaitMode::Poll;
    let poller = manager(kind, &server, polling).await;
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let (a, b) = (
        poller.barrier("handover", 2).expect("barrier"),
        locks.barrier("handover", 2).expect("barrier"),
    );
    let (a, b) = tokio::join!(a.enter(), b.enter());
    let (a, b) = (a.expect("a"), b.expect("b"));
    let leaving = tokio::spawn(a.leave());
    tokio::time::sleep(Duration::from_millis(200)).await;
    b.leave().await.expect("b leaves");
    let lock = locks
        .try_acquire("handover")
        .await
        .expect("try")
        .expect("free");
    let left = tokio::time::timeout(Duration::from_secs(3), leaving).await;
    drop(lock);
    match left {
        Ok(Ok(Ok(()))) => {}
        other => panic!("a leave after the round was over: {other:?}"),
    }
}

async fn faulty(kind: ClientKind, server: &RedisServer, acquire: Fault) -> LockManager {
    let inner: Arc<dyn LockBackend> = Arc::new(
        SingleNodeBackend::connect(kind, &server.url(), fast_options())
            .await
            .expect("connect"),
    );
    let backend: Arc<dyn LockBackend> = Faulty::new(&inner, acquire, Fault::Pass, Fault::Pass);
    LockManager::new(backend, fast_config(Duration::from_secs(30))).expect("config")
}

/// A first attempt that lands late (after the retry entered, the wait ran
/// out and the party withdrew): it enters as a fresh party nobody renews
/// or owns, and the same process's next enter completes a barrier of two
/// alone.
async fn stray_lands_after_withdraw(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = faulty(kind, &server, Fault::Stray(Duration::from_millis(800))).await;
    let barrier = locks.barrier("stray", 2).expect("barrier");
    let first = barrier
        .enter_with(&AcquireOptions::new().with_wait(Duration::from_millis(300)))
        .await;
    assert!(first.is_err(), "alone through a barrier of two");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let state = barrier.state().await.expect("state");
    let again = barrier
        .enter_with(&AcquireOptions::new().with_wait(Duration::from_secs(2)))
        .await;
    assert!(
        again.is_err(),
        "one process went through a barrier of two (state after the stray: {state:?})"
    );
}

/// `timeout(enter())` dropped while take_place sleeps after an attempt
/// that ran but whose reply was lost: nobody releases the party, and the
/// same process's next enter completes a barrier of two alone.
async fn dropped_enter_after_lost_reply(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = faulty(kind, &server, Fault::Lost { lands: true }).await;
    let barrier = locks.barrier("dropped", 2).expect("barrier");
    let first = tokio::time::timeout(Duration::from_millis(20), barrier.enter()).await;
    assert!(first.is_err(), "the enter was not cut short");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let state = barrier.state().await.expect("state");
    let again = barrier
        .enter_with(&AcquireOptions::new().with_wait(Duration::from_secs(2)))
        .await;
    assert!(
        again.is_err(),
        "one process went through a barrier of two (state after the drop: {state:?})"
    );
}

lock_testkit::client_tests!(
    zero_wait_opener_is_refused_and_the_other_goes_alone,
    lost_reply_of_the_opener,
    ghost_party_completes_the_count,
    leave_fails_when_another_kind_takes_the_name,
    stray_lands_after_withdraw,
    dropped_enter_after_lost_reply,
);
