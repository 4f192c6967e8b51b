//! Double barriers on the single-node strategy, on both clients: parties
//! of three processes go on together once the last has entered and leave
//! together; a round under way refuses a newcomer, and another party count;
//! a dead party is never counted as present, nor waited for to leave once
//! its lease has ended; a barrier holds its name against other kinds; bad
//! input is refused.

use std::time::{Duration, Instant};

use lock_core::strategy::KeyNames as _;
use lock_core::{
    settle_background_releases, AcquireOutcome, Claim, ClientKind, HoldKind, HoldToken, LeaseGuard,
    LockError, NameState, OwnerToken, PartyRequest, MAX_BARRIER_PARTIES,
};
use lock_testkit::contract::{fast_config, waiting_up_to};
use lock_testkit::waiters::{served_within, spawn_timed, until_subscribed};
use lock_testkit::RedisServer;

use super::{manager, unrenewed};

/// How soon a waiting party goes on once the round opens, or once the last
/// party has left: woken by the barrier's message, well before the 1 s
/// between a party's reads without one.
const WOKEN: Duration = Duration::from_millis(300);

/// Three parties, each its own process, go on together once the last has
/// entered (the first two still waiting after their timers' reads), and
/// leave together: each leave returns once the last party has left. The
/// barrier is then ready for another round.
async fn parties_enter_and_leave_together(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let config = fast_config(Duration::from_secs(30));
    let mut managers = Vec::new();
    for _ in 0..3 {
        managers.push(manager(kind, &server, config.clone()).await);
    }
    let key = managers[0].key("migration").expect("key");
    for round in 0..2 {
        let early: Vec<_> = managers[..2]
            .iter()
            .map(|locks| {
                let barrier = locks.barrier("migration", 3).expect("barrier");
                spawn_timed(async move { barrier.enter().await })
            })
            .collect();
        until_subscribed(&server, &key, 2).await;
        if round == 0 {
            tokio::time::sleep(Duration::from_millis(1_200)).await;
        }
        assert!(
            early.iter().all(|party| !party.is_finished()),
            "round {round}: a party went on with two of three in"
        );
        let state = managers[0]
            .barrier("migration", 3)
            .expect("barrier")
            .state()
            .await;
        let state = state.expect("state");
        assert_eq!((state.entered, state.open), (2, false), "round {round}");
        let last = managers[2].barrier("migration", 3).expect("barrier");
        let opened = Instant::now();
        let third = last.enter().await.expect("the last party");
        let mut parties = vec![third];
        for party in early {
            parties.push(
                served_within(party, opened, WOKEN, "a waiting party")
                    .await
                    .expect("entered"),
            );
        }
        let state = last.state().await.expect("state");
        assert_eq!((state.entered, state.open), (3, true), "round {round}");
        // Two leave and wait; the third's leave lets them all go.
        let third = parties.remove(0);
        let leaving: Vec<_> = parties
            .into_iter()
            .map(|party| spawn_timed(async move { party.leave().await }))
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            leaving.iter().all(|party| !party.is_finished()),
            "round {round}: a leave returned before every party had left"
        );
        let left = Instant::now();
        third.leave().await.expect("the last leave");
        for party in leaving {
            served_within(party, left, WOKEN, "a leaving party")
                .await
                .expect("left");
        }
        let state = last.state().await.expect("state");
        assert_eq!((state.entered, state.open), (0, false), "round {round}");
    }
}

/// While a round is under way, full or open until its last party has
/// left, a newcomer is refused with `BarrierFull`; another party count is
/// `CountMismatch` while the barrier has live parties. Once the round is
/// over, a newcomer starts the next.
async fn a_round_under_way_refuses_a_newcomer(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let barrier = locks.barrier("pair", 2).expect("barrier");
    let (first, second) = tokio::join!(barrier.enter(), barrier.enter());
    let (first, second) = (first.expect("first"), second.expect("second"));
    match barrier.enter().await {
        Err(LockError::BarrierFull {
            key,
            entered: 2,
            parties: 2,
        }) => assert_eq!(key, "pair"),
        other => panic!("a third party of two: {:?}", other.map(drop)),
    }
    let leaving = tokio::spawn(first.leave());
    tokio::time::sleep(Duration::from_millis(100)).await;
    match barrier.enter().await {
        Err(LockError::BarrierFull { entered: 1, .. }) => {}
        other => panic!("a party while the round is open: {:?}", other.map(drop)),
    }
    match locks.barrier("pair", 3).expect("barrier").enter().await {
        Err(LockError::CountMismatch {
            what: "barrier parties",
            stored: 2,
            requested: 3,
            ..
        }) => {}
        other => panic!("another party count: {:?}", other.map(drop)),
    }
    second.leave().await.expect("leave");
    leaving.await.expect("task").expect("leave");
    // The round is over: a barrier of three may start on the name now.
    let next = locks.barrier("pair", 3).expect("barrier");
    let waiting = tokio::time::timeout(Duration::from_millis(300), next.enter()).await;
    assert!(waiting.is_err(), "a party of three went on alone");
    // The party dropped with the wait leaves in the background.
    assert!(settle_background_releases(Duration::from_secs(5)).await);
    assert_eq!(
        next.state().await.expect("state").entered,
        0,
        "the party left when dropped"
    );
}

/// A party of a process that stopped renewing is counted only until its
/// lease ends: the round does not open with it gone, and opens once enough
/// live parties are in. A party whose own lease ends while it waits gets
/// `LeaseLost`.
async fn a_dead_party_is_never_counted(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    // A process that entered and died: its party, and no one renewing it.
    let key = locks.key("gate").expect("key");
    let dead = HoldToken::new(OwnerToken::generate().expect("os rng"))
        .expect("os rng")
        .with_kind(HoldKind::Party);
    let claim = Claim::Party(PartyRequest::new(2));
    let outcome = locks
        .backend()
        .try_acquire(&key, &dead, Duration::from_millis(300), &claim, None)
        .await
        .expect("the dead party's entry");
    assert!(
        matches!(outcome, AcquireOutcome::Acquired(_)),
        "{outcome:?}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let barrier = locks.barrier("gate", 2).expect("barrier");
    let waiting = spawn_timed({
        let barrier = barrier.clone();
        async move { barrier.enter().await }
    });
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(!waiting.is_finished(), "the round opened with a dead party");
    let opened = Instant::now();
    let last = barrier.enter().await.expect("the second live party");
    let first = served_within(waiting, opened, WOKEN, "the first live party")
        .await
        .expect("entered");
    let (a, b) = tokio::join!(first.leave(), last.leave());
    a.expect("leave");
    b.expect("leave");

    // A party whose process stops renewing learns it while it waits.
    let stalled = unrenewed(kind, &server, Duration::from_millis(300)).await;
    let alone = stalled.barrier("alone", 2).expect("barrier");
    match tokio::time::timeout(Duration::from_secs(3), alone.enter()).await {
        Ok(Err(LockError::LeaseLost { .. })) => {}
        other => panic!(
            "a party whose lease ran out: {:?}",
            other.map(|r| r.map(drop))
        ),
    }
}

/// A party that dies after the round opened is not waited for past its
/// lease: the others' leaves return once it has ended.
async fn a_dead_party_does_not_hold_the_leave(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let stalled = unrenewed(kind, &server, Duration::from_millis(600)).await;
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let (dying, live) = (
        stalled.barrier("rollout", 2).expect("barrier"),
        locks.barrier("rollout", 2).expect("barrier"),
    );
    let (dying, live) = tokio::join!(dying.enter(), live.enter());
    let (dying, live) = (dying.expect("entered"), live.expect("entered"));
    let ends = Instant::now() + Duration::from_millis(600);
    // Its process is gone: no leave, no release, no renewal.
    std::mem::forget(dying);
    live.leave().await.expect("leave");
    let late = Instant::now().saturating_duration_since(ends);
    assert!(
        late < Duration::from_millis(1_500),
        "a leave waited {late:?} past the dead party's lease"
    );
}

/// A barrier holds its name: a lock and a semaphore wait beside its
/// parties, `inspect` reads it, and a latch on it is refused; a barrier on
/// a semaphore's name waits.
async fn a_barrier_holds_its_name_against_other_kinds(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let barrier = locks.barrier("shared-name", 2).expect("barrier");
    let waiting = tokio::spawn({
        let barrier = barrier.clone();
        async move { barrier.enter().await }
    });
    lock_testkit::eventually(Duration::from_secs(5), "a party in", || async {
        (barrier.state().await.ok()?.entered == 1).then_some(())
    })
    .await;
    assert!(locks
        .try_acquire("shared-name")
        .await
        .expect("try")
        .is_none());
    let semaphore = locks.semaphore("shared-name", 3).expect("semaphore");
    assert!(semaphore.try_acquire().await.expect("try").is_none());
    let rw = locks.rw_lock("shared-name").expect("rw");
    assert!(rw.try_read().await.expect("try").is_none());
    match locks.inspect("shared-name").await.expect("inspect") {
        NameState::Barrier(state) => assert_eq!((state.parties, state.entered), (2, 1)),
        other => panic!("a barrier inspected: {other:?}"),
    }
    match locks
        .latch("shared-name")
        .expect("latch")
        .set_count(1)
        .await
    {
        Err(LockError::WrongKind { .. }) => {}
        other => panic!("a latch on a barrier's name: {other:?}"),
    }
    waiting.abort();
    let _ = waiting.await;

    let permits = locks.semaphore("permits", 2).expect("semaphore");
    let permit = permits.acquire().await.expect("a permit");
    let beside = locks.barrier("permits", 1).expect("barrier");
    match beside
        .enter_with(&waiting_up_to(Duration::from_millis(300)))
        .await
    {
        Err(LockError::NotAcquired { .. }) => {}
        other => panic!("a barrier beside a permit: {:?}", other.map(drop)),
    }
    permit.release().await.expect("release");
    let alone = beside
        .enter()
        .await
        .expect("a barrier of one opens at once");
    alone.leave().await.expect("leave");
}

/// Bad input gets a typed error before anything is sent; a party cannot
/// be handed off.
async fn bad_input_is_refused(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    for parties in [0, MAX_BARRIER_PARTIES + 1] {
        match locks.barrier("input", parties) {
            Err(LockError::InvalidConfig { field, .. }) => assert_eq!(field, "parties"),
            other => panic!("{parties} parties: {:?}", other.map(drop)),
        }
    }
    assert!(matches!(
        locks.barrier("", 2),
        Err(LockError::InvalidKey { .. })
    ));
    let one = locks.barrier("input", 1).expect("barrier");
    let party = one.enter().await.expect("a barrier of one");
    match party.hand_off() {
        Err(LockError::HandOffUnsupported { .. }) => {}
        other => panic!("a party handed off: {other:?}"),
    }
    assert!(settle_background_releases(Duration::from_secs(5)).await);
    let key = locks.key("input").expect("key");
    let left = server
        .admin(&["EXISTS", key.redis_key(), &key.barrier_key()])
        .expect("exists")
        .as_int();
    assert_eq!(left, Some(0), "a refused hand-off leaves the barrier");
}

lock_testkit::client_tests!(
    parties_enter_and_leave_together,
    a_round_under_way_refuses_a_newcomer,
    a_dead_party_is_never_counted,
    a_dead_party_does_not_hold_the_leave,
    a_barrier_holds_its_name_against_other_kinds,
    bad_input_is_refused,
);
