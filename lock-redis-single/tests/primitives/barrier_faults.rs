//! Barriers under lost replies and races, on both clients: the party whose
//! entry completes the count goes on with the others, whatever its wait,
//! a lost reply or a failed clean-up; an attempt that lands after its
//! party withdrew, or after its enter was dropped, enters nothing; a leave
//! ends once its round is over even when another kind takes the name at
//! once.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{
    AcquireOptions, Barrier, ClientKind, LockBackend, LockError, LockManager, PartyGuard, WaitMode,
};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::{fast_config, fast_options};
use lock_testkit::faulty::{Fault, Faulty};
use lock_testkit::RedisServer;
use tokio::task::JoinHandle;

use super::manager;

/// A zero wait (`distlock barrier -n`) whose entry completes the count:
/// that party goes on with the one already waiting, or neither does.
async fn a_zero_wait_that_completes_the_count_goes_on(kind: ClientKind) {
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

/// A manager whose backend's first entry suffers `acquire` and first
/// release `release` ([`Faulty`]).
async fn faulty(
    kind: ClientKind,
    server: &RedisServer,
    acquire: Fault,
    release: Fault,
) -> LockManager {
    let inner: Arc<dyn LockBackend> = Arc::new(
        SingleNodeBackend::connect(kind, &server.url(), fast_options())
            .await
            .expect("connect"),
    );
    let backend: Arc<dyn LockBackend> = Faulty::new(&inner, acquire, Fault::Pass, release);
    LockManager::new(backend, fast_config(Duration::from_secs(30))).expect("config")
}

/// A party of `barrier` entering on a task of its own, once it is in.
async fn first_party_in(barrier: &Barrier) -> JoinHandle<Result<PartyGuard, LockError>> {
    let first = tokio::spawn({
        let barrier = barrier.clone();
        async move { barrier.enter().await }
    });
    lock_testkit::eventually(Duration::from_secs(5), "a party in", || async {
        (barrier.state().await.ok()?.entered == 1).then_some(())
    })
    .await;
    first
}

/// The opening party's enter reply is lost after it ran: its retry is the
/// same party, and both go on (or neither).
async fn an_opener_whose_reply_was_lost_goes_on(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lossy = faulty(kind, &server, Fault::Lost { lands: true }, Fault::Pass).await;
    let barrier = locks.barrier("lost", 2).expect("barrier");
    let first = first_party_in(&barrier).await;
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

/// An entry whose reply was lost, with a release that would fail: the
/// process still has one party, and never goes through a barrier of two
/// alone.
async fn a_lost_entry_leaves_no_second_party(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let lossy = faulty(
        kind,
        &server,
        Fault::Lost { lands: true },
        Fault::Lost { lands: false },
    )
    .await;
    let barrier = lossy.barrier("ghost", 2).expect("barrier");
    let alone = tokio::time::timeout(Duration::from_secs(3), barrier.enter()).await;
    let state = barrier.state().await.expect("state");
    assert!(
        !matches!(alone, Ok(Ok(_))),
        "one process went through a barrier of two: {state:?}"
    );
}

/// Every party has left, and a lock takes the name at once: a leaver still
/// waiting (reading by its timer) reads another kind, and its leave ends
/// well, its round being over.
async fn a_leave_ends_when_another_kind_takes_the_name(kind: ClientKind) {
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

/// A first attempt that lands late, after the retry entered, the wait ran
/// out and the party withdrew, enters nothing: the same process's next
/// enter does not complete a barrier of two alone.
async fn a_late_entry_after_a_withdraw_enters_nothing(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = faulty(
        kind,
        &server,
        Fault::Stray(Duration::from_millis(800)),
        Fault::Pass,
    )
    .await;
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

/// `timeout(enter())` dropped while it sleeps after an attempt that ran but
/// whose reply was lost: the party is taken out in the background, and the
/// same process's next enter does not complete a barrier of two alone.
async fn a_dropped_enter_leaves_no_party(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = faulty(kind, &server, Fault::Lost { lands: true }, Fault::Pass).await;
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
    a_zero_wait_that_completes_the_count_goes_on,
    an_opener_whose_reply_was_lost_goes_on,
    a_lost_entry_leaves_no_second_party,
    a_leave_ends_when_another_kind_takes_the_name,
    a_late_entry_after_a_withdraw_enters_nothing,
    a_dropped_enter_leaves_no_party,
);
