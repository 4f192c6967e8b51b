//! Semaphores on the single-node strategy, through the engine, on both
//! clients, beyond the contract's checks (`lock_testkit::primitives`:
//! never more than the limit's weight live, a slot of its own per live
//! permit, a crashed holder's weight back after its TTL and not before):
//! weights, slots and tokens, weighted waiters woken by the release that
//! lets them fit, the stored limit refusing another, hand-off, fair mode in
//! arrival order with permits handed over on the server, and bad input
//! refused with nothing written.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_core::strategy::KeyNames as _;
use lock_core::{
    AcquireOptions, Claim, ClientKind, FairPlace, HoldKind, HoldToken, LockError, LockKey,
    LockManager, Permit, PermitGuard, PermitRequest, ReleaseOutcome, Semaphore, FAIR_WAITER_LEASE,
    MAX_SEMAPHORE_LIMIT,
};
use lock_testkit::contract::at_once;
use lock_testkit::contract::fast_config;
use lock_testkit::contract::taken;
use lock_testkit::contract::waiting_up_to;
use lock_testkit::peek::{entry, keys, queue_length};
use lock_testkit::waiters::{
    an_expired_place_rejoins_at_the_back as rejoins_at_the_back, garble_offer, grants_nothing,
    hand_over, new_hold, queue_by_hand, refuses_foreign_offers, served_promptly, served_within,
    spawn_timed, take_up_by_hand, until_attempts, until_queued, until_subscribed, Timed,
};
use lock_testkit::{AdminReply, LoggedScript, RedisServer};

use super::{manager, waiting};

fn no_wait() -> AcquireOptions {
    AcquireOptions::new().no_wait()
}

async fn used(semaphore: &Semaphore) -> u64 {
    semaphore.state().await.expect("state").used
}

/// A waiter for `weight` of `semaphore` that waits up to 20 s, on a task
/// of its own.
fn spawn_waiter(semaphore: &Semaphore, weight: u32) -> Timed<Result<PermitGuard, LockError>> {
    let semaphore = semaphore.clone();
    spawn_timed(async move { semaphore.acquire_many_with(weight, &waiting(20)).await })
}

/// Whether a logged script is a semaphore's acquire: it sends at least
/// four arguments (id, weight, limit, TTL); a release one, a renewal two.
fn is_acquire(script: &LoggedScript) -> bool {
    script.args.len() >= 4
}

/// A weight fits beside the live permits or not at all; each permit gets
/// the lowest free slot and that slot's next token.
async fn weights_slots_and_tokens(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let semaphore = locks.semaphore("weights", 5).expect("semaphore");
    let three = at_once(semaphore.try_acquire_many(3)).await;
    assert_eq!(three.weight(), 3);
    assert_eq!(
        (three.slot(), three.fencing_token().map(|t| t.get())),
        (0, Some(1))
    );
    let refused = semaphore.acquire_many_with(3, &no_wait()).await;
    assert!(
        matches!(refused, Err(LockError::NotAcquired { .. })),
        "3 more of 5: {refused:?}"
    );
    let two = semaphore
        .acquire_many_with(2, &no_wait())
        .await
        .expect("2 more");
    assert_eq!(two.slot(), 1);
    assert!(semaphore.try_acquire().await.expect("try").is_none());
    let state = semaphore.state().await.expect("state");
    assert_eq!((state.limit, state.used), (Some(5), 5));
    let slots: Vec<(u32, u32)> = state.permits.iter().map(|p| (p.slot, p.weight)).collect();
    assert_eq!(slots, [(0, 3), (1, 2)]);
    three.release().await.expect("release");
    // Slot 0 again, with its own next token.
    let again = semaphore.try_acquire().await.expect("try").expect("room");
    assert_eq!(
        (again.slot(), again.fencing_token().map(|t| t.get())),
        (0, Some(2))
    );
    again.release().await.expect("release");
    two.release().await.expect("release");
    assert_eq!(used(&semaphore).await, 0);
}

/// The watchdog keeps a permit past many TTLs; released, its weight is
/// back at once.
async fn the_watchdog_keeps_a_permit(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_millis(500))).await;
    let semaphore = locks.semaphore("kept", 1).expect("semaphore");
    let permit = semaphore.acquire().await.expect("acquire");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(permit.is_valid(), "lost: {:?}", permit.status());
    assert!(semaphore.try_acquire().await.expect("try").is_none());
    permit.release().await.expect("release");
    assert!(semaphore.try_acquire().await.expect("try").is_some());
}

/// A waiter for 3 of 3 while single permits are released one by one gets
/// its permit right after the third release (woken by it, not by a timer),
/// and not before.
async fn a_heavy_waiter_is_woken_by_the_release_that_fits(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    // Long TTLs: a waiter left to its timer would wait for one to run out.
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let semaphore = locks.semaphore("heavy", 3).expect("semaphore");
    let key = locks.key("heavy").expect("key");
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(semaphore.try_acquire().await.expect("try").expect("room"));
    }
    let waiter = spawn_waiter(&semaphore, 3);
    until_subscribed(&server, &key, 1).await;
    for permit in held.drain(..2) {
        permit.release().await.expect("release");
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(!waiter.is_finished(), "served before its weight fitted");
    }
    let last = held.pop().expect("the third");
    last.release().await.expect("release");
    let released = Instant::now();
    let permit = served_promptly(waiter, released, "the heavy waiter")
        .await
        .expect("acquired");
    assert_eq!(permit.weight(), 3);
    permit.release().await.expect("release");
}

/// A release of 1 reaches a light waiter even when a heavier one of the
/// same process has waited longer and still does not fit.
async fn a_light_waiter_behind_a_heavy_one_is_woken(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    server.log_every_command().expect("the slow log");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let semaphore = locks.semaphore("mixed", 3).expect("semaphore");
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(semaphore.try_acquire().await.expect("try").expect("room"));
    }
    server.admin(&["SLOWLOG", "RESET"]).expect("SLOWLOG RESET");
    let heavy = spawn_waiter(&semaphore, 3);
    until_attempts(&server, 2, "the heavy waiter asleep", is_acquire).await;
    let light = spawn_waiter(&semaphore, 1);
    until_attempts(&server, 4, "the light waiter asleep", is_acquire).await;
    held.pop().expect("one").release().await.expect("release");
    let released = Instant::now();
    let permit = served_promptly(light, released, "the light waiter")
        .await
        .expect("acquired");
    assert!(!heavy.is_finished(), "3 of 3 with 3 held");
    heavy.abort();
    permit.release().await.expect("release");
    for permit in held {
        permit.release().await.expect("release");
    }
}

/// A release of one permit wakes one waiter for one, not every waiter of
/// the process: the others would each try, find the permit taken and
/// sleep again.
async fn a_release_wakes_only_the_waiters_that_fit(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    server.log_every_command().expect("the slow log");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let semaphore = locks.semaphore("herd", 2).expect("semaphore");
    let first = semaphore.try_acquire().await.expect("try").expect("room");
    let second = semaphore.try_acquire().await.expect("try").expect("room");
    server.admin(&["SLOWLOG", "RESET"]).expect("SLOWLOG RESET");
    let waiters: Vec<_> = (0..4).map(|_| spawn_waiter(&semaphore, 1)).collect();
    until_attempts(&server, 8, "four waiters asleep", is_acquire).await;
    server.admin(&["SLOWLOG", "RESET"]).expect("SLOWLOG RESET");
    first.release().await.expect("release");
    let released = Instant::now();
    lock_testkit::eventually(Duration::from_secs(5), "a waiter served", || async {
        waiters
            .iter()
            .any(|waiter| waiter.is_finished())
            .then_some(())
    })
    .await;
    assert!(
        released.elapsed() < Duration::from_secs(1),
        "served by a timer"
    );
    // Time for the attempts of any other waiter it woke.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let logged = server.scripts_logged().expect("the slow log");
    let attempts = logged.iter().filter(|script| is_acquire(script)).count();
    assert_eq!(attempts, 1, "one permit freed, {attempts} attempts");
    let served = waiters.iter().filter(|waiter| waiter.is_finished()).count();
    assert_eq!(served, 1);
    for waiter in waiters {
        if waiter.is_finished() {
            let permit = waiter.await.expect("task").1.expect("permit");
            permit.release().await.expect("release");
        } else {
            waiter.abort();
        }
    }
    second.release().await.expect("release");
}

/// The first acquire stores the limit; another limit is refused naming
/// both, until it is changed on purpose, which wakes and refuses in turn.
async fn the_stored_limit_refuses_another(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let five = locks.semaphore("limit", 5).expect("semaphore");
    let mut three = locks.semaphore("limit", 3).expect("semaphore");
    let permit = five.try_acquire().await.expect("try").expect("room");
    match three.try_acquire().await {
        Err(LockError::CountMismatch {
            key,
            what: "semaphore limit",
            stored: 5,
            requested: 3,
        }) => assert_eq!(key, "limit"),
        other => panic!("3 against a stored 5: {other:?}"),
    }
    let err = three.try_acquire().await.expect_err("mismatch").to_string();
    assert!(err.contains('5') && err.contains('3'), "{err}");
    assert_eq!(three.set_limit(3).await.expect("set"), Some(5));
    assert_eq!(three.limit(), 3);
    assert!(matches!(
        five.try_acquire().await,
        Err(LockError::CountMismatch {
            stored: 3,
            requested: 5,
            ..
        })
    ));
    let second = three.try_acquire().await.expect("try").expect("room");
    assert_eq!(three.state().await.expect("state").limit, Some(3));
    permit.release().await.expect("release");
    second.release().await.expect("release");
}

/// `set_limit` wakes the waits in progress: one asking for the old limit
/// learns of the change at once (a mismatch), not at its timer; a handle
/// asking for the new one gets in.
async fn a_changed_limit_wakes_waiters(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let mut semaphore = locks.semaphore("raise", 1).expect("semaphore");
    let key = locks.key("raise").expect("key");
    let held = semaphore.try_acquire().await.expect("try").expect("room");
    let waiter = spawn_waiter(&semaphore, 1);
    until_subscribed(&server, &key, 1).await;
    assert_eq!(semaphore.set_limit(2).await.expect("raise"), Some(1));
    let raised = Instant::now();
    // The waiter asks for 1 and is refused as a mismatch, at once.
    let outcome = served_promptly(waiter, raised, "the waiter after the change").await;
    assert!(
        matches!(
            outcome,
            Err(LockError::CountMismatch {
                stored: 2,
                requested: 1,
                ..
            })
        ),
        "{outcome:?}"
    );
    // A handle asking for 2 gets in beside the holder.
    let second = semaphore.try_acquire().await.expect("try").expect("room");
    held.release().await.expect("release");
    second.release().await.expect("release");
}

/// A permit handed off resumes elsewhere with its weight, slot and token;
/// the token is spent, the old guard's commands act on nothing, extend and
/// release by token work, and a token of an ended permit resumes nothing.
async fn a_permit_hands_off_and_resumes(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let other = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let semaphore = locks.semaphore("handed", 3).expect("semaphore");
    let first = at_once(semaphore.try_acquire_many(2)).await;
    let (slot, token) = (first.slot(), first.fencing_token());
    let handed = first.hand_off().expect("hand off");
    assert!(
        handed.expose().starts_with("dl1.permit-2-"),
        "a permit's token format"
    );
    let text = handed.expose().to_owned();
    // A token whose slot was edited claims another slot's counter (which
    // may be at the same number): it resumes nothing.
    let slot_number = slot;
    let forged = text.replacen(
        &format!(".permit-2-{slot_number}."),
        &format!(".permit-2-{}.", slot_number + 1),
        1,
    );
    assert_ne!(forged, text);
    let forged = lock_core::HandoffToken::parse(&forged).expect("parse");
    assert!(
        other.resume("handed", &forged).await.is_err(),
        "a forged slot resumed"
    );
    let parsed = lock_core::HandoffToken::parse(&text).expect("parse");
    let resumed = other.resume("handed", &parsed).await.expect("resume");
    let resumed = PermitGuard::try_from(resumed).expect("a permit resumed");
    assert_eq!(
        (resumed.slot(), resumed.fencing_token(), resumed.weight()),
        (slot, token, 2)
    );
    assert_eq!(
        semaphore.state().await.expect("state").used,
        2,
        "counted once"
    );
    // Spent: a second resume, and the handed-off hold's commands, act on
    // nothing.
    assert!(matches!(
        other.resume("handed", &parsed).await,
        Err(LockError::NotOwner { .. })
    ));
    assert!(other.release_by_token("handed", &parsed).await.is_err());
    assert_eq!(semaphore.state().await.expect("state").used, 2);
    // Handed off again, it is extended and released by token.
    let again = lock_core::HandoffToken::parse(resumed.hand_off().expect("hand off").expose())
        .expect("parse");
    other
        .extend_by_token("handed", &again, Duration::from_secs(5))
        .await
        .expect("extend by token");
    other
        .release_by_token("handed", &again)
        .await
        .expect("release by token");
    assert_eq!(semaphore.state().await.expect("state").used, 0);
    assert!(matches!(
        other.resume("handed", &again).await,
        Err(LockError::NotHeld { .. } | LockError::NotOwner { .. })
    ));
}

/// `watchdog.max_hold` ends a permit as it ends a lock's lease: renewed
/// until the cap, then let run out, its weight back, `lost()` saying why.
async fn max_hold_ends_a_permit(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let mut capped = fast_config(Duration::from_millis(300));
    capped.watchdog.max_hold = Some(Duration::from_millis(700));
    let locks = manager(kind, &server, capped).await;
    let semaphore = locks.semaphore("capped", 1).expect("semaphore");
    let permit = semaphore.acquire().await.expect("acquire");
    let reason = tokio::time::timeout(Duration::from_secs(3), permit.lost())
        .await
        .expect("never lost");
    assert_eq!(reason, Some(lock_core::LossReason::MaxHoldReached));
    let back = lock_testkit::eventually(Duration::from_secs(2), "the weight back", || async {
        semaphore.try_acquire().await.expect("try")
    })
    .await;
    back.release().await.expect("release");
}

/// Limits and weights out of range are typed errors before anything is
/// sent; a lock's key under a semaphore's name holds the name for the
/// semaphore (its state is another kind's: `Corrupted`), with nothing
/// written.
async fn bad_input_is_refused(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    for limit in [0, MAX_SEMAPHORE_LIMIT + 1, u32::MAX] {
        assert!(
            matches!(
                locks.semaphore("bad", limit),
                Err(LockError::InvalidPermits { .. })
            ),
            "limit {limit}"
        );
    }
    assert!(locks.semaphore("", 1).is_err(), "an empty name");
    let semaphore = locks.semaphore("bad", 2).expect("semaphore");
    for w in [0, 3, u32::MAX] {
        assert!(
            matches!(
                semaphore.acquire_many_with(w, &no_wait()).await,
                Err(LockError::InvalidPermits { .. })
            ),
            "weight {w}"
        );
    }
    assert!(keys(&server).is_empty(), "{:?}", keys(&server));
    // A lock of the same name.
    let lock = taken(&locks, "taken").await;
    let before = keys(&server);
    let semaphore = locks.semaphore("taken", 2).expect("semaphore");
    match semaphore.try_acquire().await {
        Ok(None) => {}
        other => panic!("a semaphore over a lock: {other:?}"),
    }
    assert!(matches!(
        semaphore.state().await,
        Err(LockError::Corrupted { .. })
    ));
    assert_eq!(keys(&server), before, "something was written");
    lock.release().await.expect("release");
    // The largest limit works.
    let large = locks
        .semaphore("large", MAX_SEMAPHORE_LIMIT)
        .expect("largest");
    let permit = large
        .acquire_many_with(MAX_SEMAPHORE_LIMIT, &no_wait())
        .await
        .expect("all of it");
    permit.release().await.expect("release");
}

/// In fair mode permits go in arrival order: a light waiter that would
/// fit waits behind a heavy one that came first, and a one-shot try does
/// not jump the queue; without fair mode the light one gets in at once.
async fn fair_mode_serves_in_arrival_order(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let fair = manager(
        kind,
        &server,
        fast_config(Duration::from_secs(30)).with_fair(true),
    )
    .await;
    let semaphore = fair.semaphore("line", 3).expect("semaphore");
    let key = fair.key("line").expect("key");
    let held = [
        semaphore.try_acquire().await.expect("try").expect("room"),
        semaphore.try_acquire().await.expect("try").expect("room"),
    ];
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiter = |w: u32| {
        let (semaphore, order) = (semaphore.clone(), Arc::clone(&order));
        tokio::spawn(async move {
            let options = waiting_up_to(Duration::from_secs(20));
            let permit = semaphore
                .acquire_many_with(w, &options)
                .await
                .expect("a turn");
            order.lock().expect("order").push(w);
            tokio::time::sleep(Duration::from_millis(100)).await;
            permit.release().await.expect("release");
        })
    };
    let heavy = waiter(3);
    until_queued(&server, &key, 1).await;
    let light = waiter(1);
    until_queued(&server, &key, 2).await;
    assert!(
        order.lock().expect("order").is_empty(),
        "the light one jumped the line"
    );
    assert!(
        semaphore.try_acquire().await.expect("try").is_none(),
        "a one-shot try jumped the line"
    );
    let started = Instant::now();
    for permit in held {
        permit.release().await.expect("release");
    }
    heavy.await.expect("heavy");
    light.await.expect("light");
    assert_eq!(*order.lock().expect("order"), [3, 1]);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "woken by timers: {:?}",
        started.elapsed()
    );
    // Without fair mode, the light one fits and gets in at once.
    let unfair = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let semaphore = unfair.semaphore("line", 3).expect("semaphore");
    let one = semaphore.try_acquire().await.expect("try").expect("room");
    let two = semaphore.try_acquire().await.expect("try").expect("room");
    let third = semaphore.try_acquire().await.expect("try");
    assert!(third.is_some(), "1 of 3 free");
    for permit in [Some(one), Some(two), third].into_iter().flatten() {
        permit.release().await.expect("release");
    }
}

/// A fair manager on `server`.
async fn fair_manager(kind: ClientKind, server: &RedisServer) -> LockManager {
    manager(
        kind,
        server,
        fast_config(Duration::from_secs(30)).with_fair(true),
    )
    .await
}

/// The claim of a fair waiter for `weight` of a semaphore of `limit`.
fn fair_claim(limit: u32, weight: u32) -> Claim {
    let mut request = PermitRequest::new(limit, weight);
    request.fair = Some(FairPlace::new(FAIR_WAITER_LEASE, true));
    Claim::Permit(request)
}

/// A fair waiter of `weight` queued by hand in the semaphore `key` of
/// `limit`, as a waiter whose process then died would be: its permit id
/// is its offer.
async fn queue_waiter(locks: &LockManager, key: &LockKey, limit: u32, weight: u32) -> HoldToken {
    let hold = new_hold(HoldKind::Permit(Permit::new(weight))).in_line();
    let claim = fair_claim(limit, weight);
    queue_by_hand(locks.backend().as_ref(), key, &hold, &claim).await;
    hold
}

/// A fair waiter whose place ran out while others were ahead of it joins
/// at the back when it returns: whoever joined meanwhile stays ahead.
async fn an_expired_place_rejoins_at_the_back(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = fair_manager(kind, &server).await;
    let semaphore = locks.semaphore("rejoin", 1).expect("semaphore");
    let key = locks.key("rejoin").expect("key");
    let held = semaphore.try_acquire().await.expect("try").expect("room");
    let backend = locks.backend();
    let waiter = HoldKind::Permit(Permit::new(1));
    rejoins_at_the_back(&server, backend.as_ref(), &key, waiter, &fair_claim(1, 1)).await;
    held.release().await.expect("release");
}

/// The entry (`<weight>:<slot>:<token>`) and milliseconds left of the
/// permit `hold` in `key`, by the server's clock; `None` when not live.
fn permit_entry(server: &RedisServer, key: &LockKey, hold: &HoldToken) -> Option<(String, i64)> {
    entry(server, key, &key.held_key(), hold)
}

/// In fair mode a release grants permits to the waiters at the head of
/// the line in its own step, in order while their weights fit: each gets
/// a free slot's next token, for the waiter lease only, and leaves the
/// line; a head that does not fit holds back those behind it. A waiter's
/// next attempt (a grant message it missed) takes its grant up for the
/// TTL.
async fn a_release_hands_permits_over_on_the_server(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = fair_manager(kind, &server).await;
    let semaphore = locks.semaphore("relay", 3).expect("semaphore");
    let key = LockKey::new("lock:", "relay").expect("key");
    let lease = FAIR_WAITER_LEASE.as_millis() as i64;
    let whole = semaphore.acquire_many(3).await.expect("all three");
    let two = queue_waiter(&locks, &key, 3, 2).await;
    let one = queue_waiter(&locks, &key, 3, 1).await;
    whole.release().await.expect("release");
    let (two_entry, left) = permit_entry(&server, &key, &two).expect("granted to the first");
    assert!(two_entry.starts_with("2:"), "{two_entry}");
    assert!(left > 0 && left <= lease, "granted for {left} ms");
    let (one_entry, _) = permit_entry(&server, &key, &one).expect("and to the second");
    assert!(one_entry.starts_with("1:"), "{one_entry}");
    let slot = |entry: &str| entry.split(':').nth(1).map(str::to_owned);
    assert_ne!(
        slot(&two_entry),
        slot(&one_entry),
        "two permits in one slot"
    );
    assert_eq!(queue_length(&server, &key), 0, "both left the line");
    let next = HoldToken::new(two.owner().clone())
        .expect("hold")
        .with_kind(HoldKind::Permit(Permit::new(2)));
    let backend = locks.backend();
    let grant = take_up_by_hand(backend.as_ref(), &key, &next, &fair_claim(3, 2), &two).await;
    let (slot, token) = (
        grant.slot.expect("a slot"),
        grant.fencing_token.expect("a token"),
    );
    assert_eq!(format!("2:{slot}:{}", token.get()), two_entry);
    let (_, left) = permit_entry(&server, &key, &two).expect("the grant stands");
    assert!(left > lease, "taken up for the TTL: {left} ms");
    assert_eq!(permit_entry(&server, &key, &next), None, "a second permit");
    // A head that does not fit holds back a light one behind it.
    for hold in [&two, &one] {
        locks.backend().release(&key, hold).await.expect("release");
    }
    let stays = semaphore.acquire_many(2).await.expect("two of three");
    let freed = semaphore.acquire().await.expect("the third");
    let heavy = queue_waiter(&locks, &key, 3, 3).await;
    let light = queue_waiter(&locks, &key, 3, 1).await;
    freed.release().await.expect("release");
    assert_eq!(
        permit_entry(&server, &key, &heavy),
        None,
        "more than the limit"
    );
    assert_eq!(permit_entry(&server, &key, &light), None, "jumped the line");
    assert_eq!(queue_length(&server, &key), 2);
    stays.release().await.expect("release");
    assert!(
        permit_entry(&server, &key, &heavy).is_some(),
        "granted when it fits"
    );
    assert_eq!(
        permit_entry(&server, &key, &light),
        None,
        "beside a full semaphore"
    );
}

/// A fair waiter in another process learns from the release's message
/// that it holds a permit, with its slot and token, and extends it (made
/// for the waiter lease) to its TTL at once: it sends no acquire after the
/// release (the server's slow log says so). A round may show one, an
/// attempt its timer sent as the release ran; no more than one of five.
async fn a_fair_waiter_takes_up_a_granted_permit(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    server.log_every_command().expect("the slow log");
    let locks = fair_manager(kind, &server).await;
    let other = fair_manager(kind, &server).await;
    let semaphore = locks.semaphore("baton", 1).expect("semaphore");
    let key = locks.key("baton").expect("key");
    let mut acquired_by_attempt = 0;
    for _ in 0..5 {
        let holder = semaphore.acquire().await.expect("holder");
        let theirs = other.semaphore("baton", 1).expect("semaphore");
        let waiter = async move { theirs.acquire_with(&waiting(20)).await };
        let permit = hand_over(&server, &key, holder, waiter).await;
        let logged = server.scripts_logged().expect("the slow log");
        if logged.iter().any(is_acquire) {
            acquired_by_attempt += 1;
        }
        assert_eq!(permit.slot(), 0);
        let state = semaphore.state().await.expect("state");
        assert_eq!(state.used, 1, "{state:?}");
        permit.release().await.expect("release");
    }
    assert!(
        acquired_by_attempt <= 1,
        "{acquired_by_attempt} of 5 waiters sent an acquire after the release"
    );
}

/// A live waiter at the head of the line whose offer is gone (its
/// attempt's reply was lost and that attempt released) is not granted a
/// permit, and the release wakes it to take its own turn, though the
/// waiters granted before it took more than the release freed: it is not
/// left sleeping until its timer.
async fn a_waiter_the_hand_off_passes_over_is_woken(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = fair_manager(kind, &server).await;
    let other = fair_manager(kind, &server).await;
    let semaphore = locks.semaphore("passed", 5).expect("semaphore");
    let key = LockKey::new("lock:", "passed").expect("key");
    let offers = key.offers_key();
    let two = semaphore.acquire_many(2).await.expect("two of five");
    let _one = semaphore.acquire().await.expect("a third");
    let first = queue_waiter(&locks, &key, 5, 3).await;
    let waiter = spawn_waiter(&other.semaphore("passed", 5).expect("semaphore"), 1);
    let offer_of_waiter = || {
        let AdminReply::Array(Some(fields)) = server.admin(&["HGETALL", &offers]).expect("HGETALL")
        else {
            return None;
        };
        let fields: Vec<&str> = fields.iter().filter_map(AdminReply::as_text).collect();
        fields
            .chunks(2)
            .find(|pair| pair[0] != first.expose_owner())
            .map(|pair| (pair[0].to_owned(), pair[1].to_owned()))
    };
    let (owner, offered) = lock_testkit::eventually(Duration::from_secs(5), "an offer", || async {
        offer_of_waiter()
    })
    .await;
    // Just after one of the waiter's attempts, so its timer is far off:
    // polled faster than `eventually` does.
    let started = Instant::now();
    while offer_of_waiter().is_some_and(|(_, offer)| offer == offered) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never tried again"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.admin(&["HDEL", &offers, &owner]).expect("HDEL");
    let released_at = Instant::now();
    two.release().await.expect("release");
    assert!(
        permit_entry(&server, &key, &first).is_some(),
        "the first in line was not granted"
    );
    let within = FAIR_WAITER_LEASE / 8;
    let permit = served_within(waiter, released_at, within, "the waiter passed over")
        .await
        .expect("the waiter acquires");
    assert_eq!(semaphore.state().await.expect("state").used, 5);
    permit.release().await.expect("release");
}

/// Foreign data where the waiters' offers live: a fair acquire refuses it
/// with a typed error naming the key and writes nothing; a malformed offer
/// is never granted (the release frees the permit and the waiter takes its
/// turn).
async fn foreign_offers_are_refused(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = fair_manager(kind, &server).await;
    let semaphore = locks.semaphore("foreign", 1).expect("semaphore");
    let key = LockKey::new("lock:", "foreign").expect("key");
    let (named, _) = refuses_foreign_offers(&server, &key, semaphore.try_acquire()).await;
    assert_eq!(named, key.offers_key());
    let holder = semaphore.acquire().await.expect("holder");
    let waiter = queue_waiter(&locks, &key, 1, 1).await;
    garble_offer(&server, &key, &waiter);
    let granted = |hold: &HoldToken| permit_entry(&server, &key, hold).is_some();
    grants_nothing(&server, &key, holder, &waiter, granted, "a malformed offer").await;
}

/// A waiter that gives up gives back a permit a release granted to its
/// offer, which goes to the next in line at once; the release of an
/// attempt whose reply was lost (sent before the waiter's next attempt)
/// drops that attempt's offer, so no release grants it.
async fn a_leaving_waiter_gives_its_permit_back(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = fair_manager(kind, &server).await;
    let semaphore = locks.semaphore("returned", 1).expect("semaphore");
    let key = LockKey::new("lock:", "returned").expect("key");
    let holder = semaphore.acquire().await.expect("holder");
    let leaving = queue_waiter(&locks, &key, 1, 1).await;
    let next = queue_waiter(&locks, &key, 1, 1).await;
    holder.release().await.expect("release");
    assert!(permit_entry(&server, &key, &leaving).is_some(), "granted");
    locks
        .backend()
        .leave_queue(&key, leaving.owner(), Some(std::slice::from_ref(&leaving)))
        .await
        .expect("leave");
    assert_eq!(
        permit_entry(&server, &key, &leaving),
        None,
        "not given back"
    );
    assert!(
        permit_entry(&server, &key, &next).is_some(),
        "not handed on"
    );
    assert_eq!(queue_length(&server, &key), 0);
    locks.backend().release(&key, &next).await.expect("release");
    // A lost attempt's release.
    let holder = semaphore.acquire().await.expect("holder");
    let lost = queue_waiter(&locks, &key, 1, 1).await;
    let outcome = locks.backend().release(&key, &lost).await.expect("release");
    assert!(matches!(outcome, ReleaseOutcome::NotHeld), "{outcome:?}");
    let granted = |hold: &HoldToken| permit_entry(&server, &key, hold).is_some();
    grants_nothing(&server, &key, holder, &lost, granted, "the lost attempt").await;
}

/// The semaphore's five keys, for scripts sent by hand.
fn raw_keys(key: &LockKey) -> Vec<String> {
    vec![
        key.redis_key().to_owned(),
        key.held_key(),
        key.slots_key(),
        key.limit_key(),
        key.slot_fences_key(),
    ]
}

/// A permit of another process, acquired by hand with `id`, for `weight`
/// of `limit` and `ttl_ms`.
fn raw_acquire(
    server: &RedisServer,
    keys: &[String],
    id: &str,
    weight: u32,
    limit: u32,
    ttl_ms: u64,
) {
    let (weight, limit, ttl) = (weight.to_string(), limit.to_string(), ttl_ms.to_string());
    let reply = server
        .eval(
            &lock_core::strategy::scripts::semaphore::ACQUIRE,
            keys,
            &[id, &weight, &limit, &ttl],
        )
        .expect("EVAL acquire");
    let AdminReply::Array(Some(items)) = &reply else {
        panic!("raw acquire {id}: {reply:?}");
    };
    assert_eq!(
        items.first().and_then(AdminReply::as_int),
        Some(1),
        "raw acquire {id}: {reply:?}"
    );
}

/// A release wakes, in this process, the heavy waiter at the head (its
/// weight fits beside the weight published) and not the light one behind
/// it; when another process takes part of the room first, the heavy waiter
/// finds no room, and passes its wake-up to the light one, which fits,
/// rather than leave it asleep until its timer (the permits' 30 s TTL).
async fn a_light_waiter_is_woken_when_the_heavy_one_loses(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    server.log_every_command().expect("the slow log");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let semaphore = locks.semaphore("gap", 3).expect("semaphore");
    let key = locks.key("gap").expect("key");
    let keys = raw_keys(&key);
    // Another process holds 1 and 2 of 3, for 30 s.
    raw_acquire(&server, &keys, "other-one:0000000000000001", 1, 3, 30_000);
    raw_acquire(&server, &keys, "other-two:0000000000000002", 2, 3, 30_000);
    server.admin(&["SLOWLOG", "RESET"]).expect("SLOWLOG RESET");
    let heavy = spawn_waiter(&semaphore, 2);
    until_attempts(&server, 2, "the heavy waiter asleep", is_acquire).await;
    let light = spawn_waiter(&semaphore, 1);
    until_attempts(&server, 4, "the light waiter asleep", is_acquire).await;
    // The weight of 2 released, and 1 of it taken by a third process
    // before this one's waiters try (here in one MULTI: the same order).
    let release = lock_core::strategy::scripts::semaphore::RELEASE.source();
    let acquire = lock_core::strategy::scripts::semaphore::ACQUIRE.source();
    let replies = server
        .admin_session(&[
            &["MULTI"],
            &[
                "EVAL",
                release,
                "3",
                &keys[0],
                &keys[1],
                &keys[2],
                "other-two:0000000000000002",
            ],
            &[
                "EVAL",
                acquire,
                "5",
                &keys[0],
                &keys[1],
                &keys[2],
                &keys[3],
                &keys[4],
                "third:0000000000000003",
                "1",
                "3",
                "30000",
            ],
            &["EXEC"],
        ])
        .expect("MULTI");
    let released = Instant::now();
    assert!(
        matches!(replies.last(), Some(AdminReply::Array(Some(items))) if items.len() == 2),
        "MULTI: {replies:?}"
    );
    // 2 of 3 in use: the light waiter fits.
    let permit = served_promptly(light, released, "the light waiter")
        .await
        .expect("acquired");
    assert!(!heavy.is_finished(), "2 more with 3 in use");
    heavy.abort();
    permit.release().await.expect("release");
}

/// A release that leaves more than one sweep's worth (64) of expired
/// permits unswept does not publish them as in use: a waiter that fits in
/// the empty semaphore is woken.
async fn expired_permits_unswept_are_not_in_use(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let semaphore = locks.semaphore("swept", 200).expect("semaphore");
    let key = locks.key("swept").expect("key");
    let keys = raw_keys(&key);
    // Another process holds all 200, for 30 s.
    for index in 0..200 {
        raw_acquire(
            &server,
            &keys,
            &format!("long:{index:016x}"),
            1,
            200,
            30_000,
        );
    }
    let heavy = spawn_waiter(&semaphore, 70);
    until_subscribed(&server, &key, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // 199 of them handed, one by one, to permits of another process for
    // 1 s (a burst that then crashed): no release lets the waiter in.
    let release = lock_core::strategy::scripts::semaphore::RELEASE.source();
    let acquire = lock_core::strategy::scripts::semaphore::ACQUIRE.source();
    let mut ids = Vec::new();
    for index in 1..200 {
        ids.push((format!("long:{index:016x}"), format!("short:{index:016x}")));
    }
    let mut commands: Vec<Vec<&str>> = Vec::new();
    for (long, short) in &ids {
        commands.push(vec![
            "EVAL", release, "3", &keys[0], &keys[1], &keys[2], long,
        ]);
        commands.push(vec![
            "EVAL", acquire, "5", &keys[0], &keys[1], &keys[2], &keys[3], &keys[4], short, "1",
            "200", "1000",
        ]);
    }
    let commands: Vec<&[&str]> = commands.iter().map(Vec::as_slice).collect();
    server.admin_session(&commands).expect("session");
    assert!(!heavy.is_finished(), "70 of 200 with 200 in use");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Every short permit has ended; the last long one is released.
    let reply = server
        .eval(
            &lock_core::strategy::scripts::semaphore::RELEASE,
            &keys[..3],
            &[&format!("long:{:016x}", 0)],
        )
        .expect("release");
    let released = Instant::now();
    assert_eq!(reply.as_int(), Some(1), "the last long permit released");
    let permit = served_promptly(heavy, released, "the heavy waiter")
        .await
        .expect("acquired");
    permit.release().await.expect("release");
}

lock_testkit::client_tests!(
    a_light_waiter_is_woken_when_the_heavy_one_loses,
    expired_permits_unswept_are_not_in_use,
    weights_slots_and_tokens,
    the_watchdog_keeps_a_permit,
    a_heavy_waiter_is_woken_by_the_release_that_fits,
    a_light_waiter_behind_a_heavy_one_is_woken,
    a_release_wakes_only_the_waiters_that_fit,
    the_stored_limit_refuses_another,
    a_changed_limit_wakes_waiters,
    a_permit_hands_off_and_resumes,
    an_expired_place_rejoins_at_the_back,
    max_hold_ends_a_permit,
    bad_input_is_refused,
    a_release_hands_permits_over_on_the_server,
    a_fair_waiter_takes_up_a_granted_permit,
    a_waiter_the_hand_off_passes_over_is_woken,
    foreign_offers_are_refused,
    a_leaving_waiter_gives_its_permit_back,
    fair_mode_serves_in_arrival_order,
);
