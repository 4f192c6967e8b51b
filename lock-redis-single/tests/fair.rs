//! Fair mode on the single-node strategy: arrival order, waiters that give up
//! or die leave the queue, and try-once callers do not jump it.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_core::strategy::KeyNames as _;
use lock_core::{
    Claim, ClientKind, FairPlace, HandoffToken, HoldKind, HoldToken, LockBackend, LockGuard,
    LockKey, LockManager, ReleaseOutcome, RetryPolicy, WaitMode, FAIR_WAITER_LEASE,
};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::held_by_another;
use lock_testkit::contract::taken;
use lock_testkit::contract::{fast_config, fast_options, manager_over};
use lock_testkit::faulty::{Fault, Faulty};
use lock_testkit::peek::{int, queue_length};
use lock_testkit::waiters::{
    garble_offer, grants_nothing, hand_over, new_hold, refuses_foreign_offers, take_up_by_hand,
    until_queued,
};
use lock_testkit::RedisServer;

struct Fair {
    server: RedisServer,
    backend: Arc<SingleNodeBackend>,
    locks: LockManager,
}

async fn fair(kind: ClientKind) -> Fair {
    let server = RedisServer::start().expect("start");
    let (backend, locks) = process(kind, &server, WaitMode::Notify).await;
    Fair {
        server,
        backend,
        locks,
    }
}

/// A backend and manager of their own, as another process would have: its
/// own connections and its own subscriber.
async fn process(
    kind: ClientKind,
    server: &RedisServer,
    wait_mode: WaitMode,
) -> (Arc<SingleNodeBackend>, LockManager) {
    let backend = Arc::new(
        SingleNodeBackend::connect(kind, &server.url(), fast_options())
            .await
            .expect("connect"),
    );
    let mut config = fast_config(Duration::from_secs(10));
    config.fair = true;
    config.wait_timeout = Duration::from_secs(20);
    config.wait_mode = wait_mode;
    if wait_mode == WaitMode::Poll {
        // Backoff far above the waiter lease: a waiter that slept that long
        // between attempts would drop out of the line.
        config.retry = RetryPolicy::new(Duration::from_secs(3), Duration::from_secs(8));
    }
    let locks =
        LockManager::new(Arc::clone(&backend) as Arc<dyn LockBackend>, config).expect("config");
    (backend, locks)
}

/// The length of `name`'s line.
fn queued(fair: &Fair, name: &str) -> i64 {
    queue_length(&fair.server, &fair.key(name))
}

impl Fair {
    fn key(&self, name: &str) -> LockKey {
        self.locks.key(name).expect("key")
    }

    /// Releases `holder`: `waiter`'s offer (`which`) is not granted, and
    /// it keeps its place.
    async fn grants_nothing(
        &self,
        key: &LockKey,
        holder: LockGuard,
        waiter: &HoldToken,
        which: &str,
    ) {
        let granted = |_: &HoldToken| stored(self, key).is_some();
        grants_nothing(&self.server, key, holder, waiter, granted, which).await;
    }

    /// Waits until `name`'s line is `length` long.
    async fn until_queued(&self, name: &str, length: i64) {
        until_queued(&self.server, &self.key(name), length).await;
    }
}

/// Waiters in different processes (each with its own connections and
/// subscriber) get the lock in the order they arrived.
async fn arrival_order_holds(kind: ClientKind) {
    served_in_arrival_order(kind, WaitMode::Notify, Duration::ZERO).await;
}

/// Polling waiters keep their place too, however long their backoff: they
/// try again well within the waiter lease, while the holder keeps the lock
/// for longer than that lease.
async fn arrival_order_holds_when_polling(kind: ClientKind) {
    served_in_arrival_order(kind, WaitMode::Poll, FAIR_WAITER_LEASE * 3 / 2).await;
}

async fn served_in_arrival_order(kind: ClientKind, wait_mode: WaitMode, hold_for: Duration) {
    let fair = fair(kind).await;
    let holder = taken(&fair.locks, "ordered").await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for index in 0..5 {
        let (_, locks) = process(kind, &fair.server, wait_mode).await;
        let order = Arc::clone(&order);
        waiters.push(tokio::spawn(async move {
            let guard = locks.acquire("ordered").await.expect("acquire in turn");
            order.lock().expect("order").push(index);
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.release().await.expect("release");
        }));
        fair.until_queued("ordered", index + 1).await;
    }
    tokio::time::sleep(hold_for).await;
    holder.release().await.expect("release");
    for waiter in waiters {
        waiter.await.expect("waiter");
    }
    assert_eq!(
        *order.lock().expect("order"),
        vec![0, 1, 2, 3, 4],
        "served out of arrival order"
    );
    assert_eq!(queued(&fair, "ordered"), 0, "the queue is empty at the end");
}

/// A waiter that gives up (its future is dropped) leaves the queue at once and
/// does not stall the waiter behind it.
async fn abandoned_waiter_leaves_the_queue(kind: ClientKind) {
    let fair = fair(kind).await;
    let holder = taken(&fair.locks, "abandoned").await;
    let quitter = {
        let locks = fair.locks.clone();
        tokio::spawn(async move { locks.acquire("abandoned").await.map(|_| ()) })
    };
    fair.until_queued("abandoned", 1).await;
    let patient = {
        let locks = fair.locks.clone();
        tokio::spawn(async move { locks.acquire("abandoned").await })
    };
    fair.until_queued("abandoned", 2).await;
    quitter.abort();
    fair.until_queued("abandoned", 1).await;
    let released_at = Instant::now();
    holder.release().await.expect("release");
    let guard = patient
        .await
        .expect("task")
        .expect("the patient waiter acquires");
    assert!(
        released_at.elapsed() < FAIR_WAITER_LEASE / 2,
        "took {:?}",
        released_at.elapsed()
    );
    guard.release().await.expect("release");
}

/// The claim of a waiter in line.
fn in_line() -> Claim {
    Claim::Lock {
        fair: Some(FairPlace::new(FAIR_WAITER_LEASE, true)),
    }
}

/// A waiter queued by hand through the backend, as a waiter whose process
/// then died would be: its hold is its offer.
async fn queue_by_hand(fair: &Fair, key: &LockKey) -> HoldToken {
    let hold = new_hold(HoldKind::Lock).in_line();
    lock_testkit::waiters::queue_by_hand(fair.backend.as_ref(), key, &hold, &in_line()).await;
    hold
}

/// A waiter whose place ran out while others were ahead of it joins at the
/// back when it returns: whoever joined meanwhile stays ahead of it.
async fn an_expired_place_rejoins_at_the_back(kind: ClientKind) {
    let fair = fair(kind).await;
    let key = fair.key("rejoin");
    let holder = taken(&fair.locks, "rejoin").await;
    lock_testkit::waiters::an_expired_place_rejoins_at_the_back(
        &fair.server,
        fair.backend.as_ref(),
        &key,
        HoldKind::Lock,
        &in_line(),
    )
    .await;
    holder.release().await.expect("release");
}

fn stored(fair: &Fair, key: &LockKey) -> Option<String> {
    fair.server
        .admin(&["GET", key.redis_key()])
        .expect("GET")
        .as_text()
        .map(str::to_owned)
}

fn pttl(fair: &Fair, key: &LockKey) -> i64 {
    int(&fair.server, &["PTTL", key.redis_key()])
}

/// A release grants the lock to the first waiter's offer in its own step:
/// the lock is the waiter's, with the next token and for the waiter lease
/// only, before the release returns. The waiter's next attempt (a grant
/// message it missed) finds the grant and writes nothing.
async fn release_hands_over_on_the_server(kind: ClientKind) {
    let fair = fair(kind).await;
    let key = fair.key("handover");
    let holder = fair.locks.acquire("handover").await.expect("holder");
    let first = holder.fencing_token().expect("a token").get();
    let waiter = queue_by_hand(&fair, &key).await;
    holder.release().await.expect("release");
    let granted = format!("{}#{}", waiter.attempt_value(), first + 1);
    assert_eq!(stored(&fair, &key), Some(granted.clone()));
    let left = pttl(&fair, &key);
    assert!(
        left > 0 && left <= FAIR_WAITER_LEASE.as_millis() as i64,
        "granted for {left} ms"
    );
    assert_eq!(queued(&fair, "handover"), 0, "the waiter left the line");
    let next = HoldToken::new(waiter.owner().clone())
        .expect("rng")
        .in_line();
    let backend = fair.backend.as_ref();
    let grant = take_up_by_hand(backend, &key, &next, &in_line(), &waiter).await;
    assert_eq!(
        grant.fencing_token.map(|token| token.get()),
        Some(first + 1)
    );
    assert_eq!(stored(&fair, &key), Some(granted), "the grant stands");
    assert!(
        pttl(&fair, &key) > FAIR_WAITER_LEASE.as_millis() as i64,
        "taken up for the TTL"
    );
    assert_eq!(queued(&fair, "handover"), 0, "the attempt did not queue");
}

/// A waiter in another process learns from the release's message that it
/// holds the lock, with the next token, and extends the grant (made for
/// the waiter lease) to its TTL at once. Without the message it would find
/// the grant with its next attempt, up to a quarter of the waiter lease
/// later: each of five hand-offs takes well under that.
async fn waiter_takes_up_a_grant_and_extends_it(kind: ClientKind) {
    let fair = fair(kind).await;
    fair.server.log_every_command().expect("the slow log");
    let key = fair.key("taken-up");
    let (_backend, other) = process(kind, &fair.server, WaitMode::Notify).await;
    for _ in 0..5 {
        let holder = fair.locks.acquire("taken-up").await.expect("holder");
        let first = holder.fencing_token().expect("a token").get();
        let theirs = other.clone();
        let waiter = async move { theirs.acquire("taken-up").await };
        let guard = hand_over(&fair.server, &key, holder, waiter).await;
        assert_eq!(
            guard.fencing_token().map(|token| token.get()),
            Some(first + 1)
        );
        let left = pttl(&fair, &key);
        assert!(
            left > FAIR_WAITER_LEASE.as_millis() as i64,
            "the grant extended to {left} ms on the server"
        );
        guard.release().await.expect("release");
    }
}

/// A waiter that died in the line gets the lock from a release, and blocks
/// the others until its place would have run out, counted from its last
/// attempt, not from the release.
async fn dead_waiter_is_dropped_within_its_lease(kind: ClientKind) {
    let fair = fair(kind).await;
    let key = fair.key("dead");
    let holder = taken(&fair.locks, "dead").await;
    let dead = queue_by_hand(&fair, &key).await;
    let died_at = Instant::now();
    tokio::time::sleep(FAIR_WAITER_LEASE / 2).await;
    holder.release().await.expect("release");
    assert!(
        stored(&fair, &key).is_some_and(|value| value.starts_with(dead.attempt_value())),
        "the release granted the dead waiter's offer"
    );
    let left = pttl(&fair, &key);
    assert!(
        left <= (FAIR_WAITER_LEASE / 2).as_millis() as i64 + 50,
        "granted for {left} ms, past the dead waiter's place"
    );
    let guard = fair
        .locks
        .acquire("dead")
        .await
        .expect("acquire after the dead waiter's place ran out");
    let waited = died_at.elapsed();
    assert!(
        waited < FAIR_WAITER_LEASE + Duration::from_millis(700),
        "blocked {waited:?} after the waiter died"
    );
    guard.release().await.expect("release");
}

/// A waiter that gives up gives back a grant a release made to its offer,
/// which goes to the next in line at once.
async fn leaving_gives_back_a_grant(kind: ClientKind) {
    let fair = fair(kind).await;
    let key = fair.key("given-back");
    let holder = fair.locks.acquire("given-back").await.expect("holder");
    let first = holder.fencing_token().expect("a token").get();
    let leaving = queue_by_hand(&fair, &key).await;
    let next = queue_by_hand(&fair, &key).await;
    holder.release().await.expect("release");
    assert!(stored(&fair, &key).is_some_and(|value| value.starts_with(leaving.attempt_value())));
    fair.backend
        .leave_queue(&key, leaving.owner(), Some(std::slice::from_ref(&leaving)))
        .await
        .expect("leave");
    assert_eq!(
        stored(&fair, &key),
        Some(format!("{}#{}", next.attempt_value(), first + 2)),
        "handed on to the next waiter"
    );
    assert_eq!(queued(&fair, "given-back"), 0);
}

/// An offer is granted only with the place renewal that made it: a waiter
/// whose place a process without hand-offs (`holder_info`) renewed since
/// takes its own turn, and its stale offer is never granted.
async fn a_stale_offer_is_never_granted(kind: ClientKind) {
    let fair = fair(kind).await;
    let key = fair.key("stale");
    let holder = fair.locks.acquire("stale").await.expect("holder");
    let waiter = queue_by_hand(&fair, &key).await;
    let later = fair
        .server
        .admin(&["ZINCRBY", &key.waiters_key(), "1", waiter.expose_owner()])
        .expect("ZINCRBY");
    assert!(later.as_text().is_some(), "{later:?}");
    fair.grants_nothing(&key, holder, &waiter, "a stale offer")
        .await;
    // Free, but a live waiter is first: a try-once caller does not jump it,
    // nor join the line.
    assert!(
        held_by_another(&fair.locks, "stale").await,
        "jumped the line"
    );
    assert_eq!(queued(&fair, "stale"), 1);
}

/// The release of an attempt whose reply was lost (sent before the
/// waiter's next attempt) drops that attempt's offer: no release grants
/// the lock to a hold nobody will take up, and the waiter keeps its place.
async fn no_grant_to_a_lost_attempt(kind: ClientKind) {
    let fair = fair(kind).await;
    let key = fair.key("lost");
    let holder = fair.locks.acquire("lost").await.expect("holder");
    let lost = queue_by_hand(&fair, &key).await;
    let outcome = fair.backend.release(&key, &lost).await.expect("release");
    assert!(matches!(outcome, ReleaseOutcome::NotHeld), "{outcome:?}");
    fair.grants_nothing(&key, holder, &lost, "the lost attempt")
        .await;
}

/// Foreign data where the waiters' offers live: a fair acquire refuses it
/// with a typed error and writes nothing; a malformed offer is never
/// granted (the release frees the lock and the waiter takes its turn).
async fn foreign_offers_are_refused(kind: ClientKind) {
    let fair = fair(kind).await;
    let key = fair.key("foreign");
    let attempt = fair.locks.try_acquire("foreign");
    let (_, detail) = refuses_foreign_offers(&fair.server, &key, attempt).await;
    assert!(detail.contains("offers"), "{detail}");
    let holder = fair.locks.acquire("foreign").await.expect("holder");
    let waiter = queue_by_hand(&fair, &key).await;
    garble_offer(&fair.server, &key, &waiter);
    fair.grants_nothing(&key, holder, &waiter, "a malformed offer")
        .await;
}

/// A waiter whose future is dropped after a release granted its offer
/// (it polls, so no message told it) gives the grant back at once: the lock
/// is not blocked for the waiter lease. A round in which the waiter's own
/// next attempt took the grant up first proves nothing and is run again.
async fn dropped_waiter_gives_back_its_grant(kind: ClientKind) {
    let fair = fair(kind).await;
    let key = fair.key("dropped");
    let (_backend, other) = process(kind, &fair.server, WaitMode::Poll).await;
    for _ in 0..5 {
        let holder = fair.locks.acquire("dropped").await.expect("holder");
        let waiter = {
            let other = other.clone();
            tokio::spawn(async move { other.acquire("dropped").await })
        };
        fair.until_queued("dropped", 1).await;
        holder.release().await.expect("release");
        assert!(stored(&fair, &key).is_some(), "granted to the waiter");
        if waiter.is_finished() {
            let guard = waiter.await.expect("task").expect("acquired");
            guard.release().await.expect("release");
            continue;
        }
        waiter.abort();
        let Err(ended) = waiter.await else {
            // It finished between the look and the abort.
            continue;
        };
        assert!(ended.is_cancelled(), "{ended}");
        let dropped_at = Instant::now();
        while stored(&fair, &key).is_some() {
            assert!(
                dropped_at.elapsed() < Duration::from_millis(500),
                "the dropped waiter's grant still blocks the lock"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        return;
    }
    panic!("the waiter took its grant up before every abort");
}

/// A fair hold handed over to another process (`resume`), or released by
/// its hand-off token (`distlock release`), is still in line: its release
/// grants the lock to the first waiter's offer on the server.
async fn a_resumed_hold_hands_over_on_the_server(kind: ClientKind) {
    let fair = fair(kind).await;
    let (_, resumer) = process(kind, &fair.server, WaitMode::Notify).await;
    let key = fair.key("resumed");
    let holder = fair.locks.acquire("resumed").await.expect("holder");
    let first = holder.fencing_token().expect("a token").get();
    // Sent to the other process as text, as `distlock` passes it.
    let token = HandoffToken::parse(holder.hand_off().expect("hand off").expose()).expect("parse");
    let resumed = resumer.resume("resumed", &token).await.expect("resume");
    let waiter = queue_by_hand(&fair, &key).await;
    resumed.release().await.expect("release");
    let granted = format!("{}#{}", waiter.attempt_value(), first + 1);
    assert_eq!(stored(&fair, &key), Some(granted), "not handed over");
    fair.backend
        .release(&key, &waiter)
        .await
        .expect("release the grant");
    let holder = fair.locks.acquire("resumed").await.expect("holder");
    let token = HandoffToken::parse(holder.hand_off().expect("hand off").expose()).expect("parse");
    let waiter = queue_by_hand(&fair, &key).await;
    resumer
        .release_by_token("resumed", &token)
        .await
        .expect("release by token");
    assert_eq!(
        stored(&fair, &key).map(|value| value.starts_with(waiter.attempt_value())),
        Some(true),
        "not handed over by token"
    );
}

/// A waiter's attempt names the attempt it offered, and takes up a grant a
/// release made to that one for the acquire's TTL: an attempt whose reply
/// was lost is a renewal of the grant that may still run. Here it lands
/// after the waiter took the grant up with its next attempt and extended
/// the lease to 10 s, and sets the key back to 2 s: no extend is trusted
/// past the TTL such an attempt asked for.
async fn a_stray_take_up_bounds_later_deadlines(kind: ClientKind) {
    let fair = fair(kind).await;
    let name = "stray-take-up";
    let key = fair.key(name);
    let faulty = Faulty::passing(&(Arc::clone(&fair.backend) as Arc<dyn LockBackend>));
    let mut config = fast_config(Duration::from_secs(2));
    config.fair = true;
    config.watchdog.enabled = false;
    config.wait_timeout = Duration::from_secs(20);
    // Polling, so the waiter takes the grant up with an attempt.
    config.wait_mode = WaitMode::Poll;
    // Backoff wide enough for the holder's release to land between the
    // stray attempt and the next one, within the fair cap on sleeps.
    config.retry = RetryPolicy::new(Duration::from_millis(400), Duration::from_millis(450));
    let waiters = manager_over(Arc::clone(&faulty) as Arc<dyn LockBackend>, config);
    let holder = fair.locks.acquire(name).await.expect("holder");
    let waiter = tokio::spawn(async move { waiters.acquire(name).await });
    // The first attempt queued the waiter and offered itself; the next one
    // carries that offer, is given up on, and lands 1.5 s later.
    fair.until_queued(name, 1).await;
    faulty.next_acquire(Fault::Stray(Duration::from_millis(1500)));
    let strayed = async {
        while faulty.acquire_fault_pending() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), strayed)
        .await
        .expect("the waiter's next attempt strays");
    holder.release().await.expect("release");
    let guard = waiter.await.expect("task").expect("the waiter's grant");
    guard
        .extend(Duration::from_secs(10))
        .await
        .expect("extend(10s)");
    let landed = async {
        while pttl(&fair, &key) > 2_000 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), landed)
        .await
        .expect("the stray attempt lands and sets the acquire's TTL");
    let (trusted, left) = (guard.remaining(), pttl(&fair, &key));
    assert!(
        trusted.as_millis() as i64 <= left + 2,
        "the guard trusts {trusted:?} but the key expires in {left} ms"
    );
    guard.release().await.expect("release");
}

lock_testkit::client_tests!(
    a_stray_take_up_bounds_later_deadlines,
    arrival_order_holds,
    arrival_order_holds_when_polling,
    abandoned_waiter_leaves_the_queue,
    release_hands_over_on_the_server,
    no_grant_to_a_lost_attempt,
    a_resumed_hold_hands_over_on_the_server,
    waiter_takes_up_a_grant_and_extends_it,
    leaving_gives_back_a_grant,
    a_stale_offer_is_never_granted,
    foreign_offers_are_refused,
    dropped_waiter_gives_back_its_grant,
    an_expired_place_rejoins_at_the_back,
    dead_waiter_is_dropped_within_its_lease,
);
