//! Waiters in checks: a waiter on a task of its own that notes when it was
//! served, waits for the fact that a waiter is in position (in a fair line,
//! subscribed to its lock's releases) rather than for a time, and waiters
//! queued by hand, as ones whose process then died would be.
//!
//! A check that releases a lock and asserts that a waiter was served at
//! once proves a wake-up only if the waiter was asleep by then; one that
//! sleeps a while first to let it get there fails on a slow host and wastes
//! the time on a fast one. So: [`until_queued`] and [`until_subscribed`].

use std::future::Future;
use std::time::{Duration, Instant};

use lock_core::strategy::KeyNames as _;
use lock_core::{
    AcquireOutcome, Acquired, Claim, HoldKind, HoldToken, LeaseGuard, LockBackend, LockError,
    LockKey, OwnerToken, FAIR_WAITER_LEASE,
};
use tokio::task::JoinHandle;

use crate::peek::{keys, line, queue_length, subscribers};
use crate::server::{LoggedScript, RedisServer};

/// A waiter on a task of its own: when it was served, and what it got.
pub type Timed<T> = JoinHandle<(Instant, T)>;

/// How soon after the release that lets it in a woken waiter is served: a
/// few milliseconds, with room for a loaded host; a waiter left to its
/// timer (the holder's TTL, 30 s in these checks) is far later.
pub const PROMPTLY: Duration = Duration::from_millis(500);

/// How long a waiter may take to get into position, or to be served at
/// all, before the check fails.
const PATIENCE: Duration = Duration::from_secs(10);

/// Runs `wait` on a task of its own, noting when it finished.
pub fn spawn_timed<T, F>(wait: F) -> Timed<T>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    tokio::spawn(async move {
        let value = wait.await;
        (Instant::now(), value)
    })
}

/// What `waiter` got, once served: it must be served within `within` of
/// `since` (woken by what happened then, not by a timer); `what` names it
/// in the failure.
pub async fn served_within<T>(waiter: Timed<T>, since: Instant, within: Duration, what: &str) -> T {
    let (served, value) = tokio::time::timeout(PATIENCE, waiter)
        .await
        .unwrap_or_else(|_| panic!("{what} was never served"))
        .expect("the waiter's task");
    let gap = served.saturating_duration_since(since);
    assert!(gap < within, "{what} was served {gap:?} after it could be");
    value
}

/// What `waiter` got: served [`PROMPTLY`] after `since`.
pub async fn served_promptly<T>(waiter: Timed<T>, since: Instant, what: &str) -> T {
    served_within(waiter, since, PROMPTLY, what).await
}

/// Waits until `key`'s fair line is `length` long.
pub async fn until_queued(server: &RedisServer, key: &LockKey, length: i64) {
    let what = format!("a line of {length} for {}", key.name());
    crate::eventually(PATIENCE, &what, || async {
        (queue_length(server, key) == length).then_some(())
    })
    .await;
}

/// Waits until `count` connections listen for `key`'s releases: a waiter
/// subscribes before its last attempt, so once its process is counted it
/// is asleep, or about to find the lock free.
pub async fn until_subscribed(server: &RedisServer, key: &LockKey, count: i64) {
    let what = format!("{count} subscribers to {}", key.release_channel());
    crate::eventually(PATIENCE, &what, || async {
        (subscribers(server, key) == count).then_some(())
    })
    .await;
}

/// Waits until the slow log holds `count` scripts that `is_attempt` picks:
/// the attempts of waiters of one process, which share one subscription.
/// A waiter makes an attempt, subscribes (or joins its process's
/// subscription) and makes another before it sleeps, so two attempts of
/// each say they are asleep, or about to find the lock free. The server
/// must log every command ([`RedisServer::log_every_command`]), and the
/// log be reset before the waiters start.
pub async fn until_attempts(
    server: &RedisServer,
    count: usize,
    what: &str,
    is_attempt: impl Fn(&LoggedScript) -> bool,
) {
    crate::eventually(PATIENCE, what, || async {
        let logged = server.scripts_logged().expect("the slow log");
        (logged.iter().filter(|script| is_attempt(script)).count() >= count).then_some(())
    })
    .await;
}

/// A hold of a new owner, taking `kind` of its name.
pub fn new_hold(kind: HoldKind) -> HoldToken {
    HoldToken::new(OwnerToken::generate().expect("an owner"))
        .expect("a hold")
        .with_kind(kind)
}

/// One attempt of `hold` for `claim` sent by hand through `backend`, for a
/// TTL of 30 s, which must find `key` held: a waiter in line that makes no
/// further attempt, as one whose process died would be. Its hold is its
/// offer, if the claim makes one.
pub async fn queue_by_hand(
    backend: &dyn LockBackend,
    key: &LockKey,
    hold: &HoldToken,
    claim: &Claim,
) {
    let outcome = backend
        .try_acquire(key, hold, Duration::from_secs(30), claim, None)
        .await
        .expect("queue the waiter");
    assert!(
        matches!(outcome, AcquireOutcome::Held { .. }),
        "{outcome:?}"
    );
}

/// Hands `holder`'s lock over to `waiter`, a waiter of another process that
/// waits in `key`'s fair line, and returns the waiter's guard: once it is
/// asleep in line (it queued, subscribed and tried again), releases the
/// holder, and asserts the waiter was served within an eighth of the
/// waiter lease (by the release's message: its next attempt could be a
/// quarter of the lease later) and that its grant, made for the waiter
/// lease, was extended to its TTL within a second. The server must log
/// every command ([`RedisServer::log_every_command`]); the log is reset as
/// the release is sent, so the scripts it holds after are those sent since.
pub async fn hand_over<G, F>(
    server: &RedisServer,
    key: &LockKey,
    holder: impl LeaseGuard,
    waiter: F,
) -> G
where
    G: LeaseGuard + 'static,
    F: Future<Output = Result<G, LockError>> + Send + 'static,
{
    // The last waiter's process gives its subscription up in the
    // background: counted from none, the new one's is the one counted.
    until_subscribed(server, key, 0).await;
    server.admin(&["SLOWLOG", "RESET"]).expect("SLOWLOG RESET");
    let waiter = spawn_timed(waiter);
    // Its attempts name the line; nothing else sent meanwhile does.
    let queue = key.queue_key();
    let in_line = |script: &LoggedScript| script.keys.contains(&queue);
    until_attempts(server, 2, "the waiter asleep in line", in_line).await;
    until_queued(server, key, 1).await;
    until_subscribed(server, key, 1).await;
    server.admin(&["SLOWLOG", "RESET"]).expect("SLOWLOG RESET");
    let released = Instant::now();
    holder.release().await.expect("release");
    let guard = served_within(
        waiter,
        released,
        FAIR_WAITER_LEASE / 8,
        "the waiter in line",
    )
    .await
    .expect("the waiter acquires");
    crate::eventually(
        Duration::from_secs(1),
        "the grant extended to the TTL",
        || async { (guard.remaining() > FAIR_WAITER_LEASE).then_some(()) },
    )
    .await;
    guard
}

/// The next attempt of the waiter whose last attempt was `earlier` (queued
/// by hand), as `next`, for `claim`: it must take up the grant a release
/// made to `earlier`'s offer, for its TTL of 30 s. Returns the grant.
pub async fn take_up_by_hand(
    backend: &dyn LockBackend,
    key: &LockKey,
    next: &HoldToken,
    claim: &Claim,
    earlier: &HoldToken,
) -> Acquired {
    let ttl = Duration::from_secs(30);
    let outcome = backend
        .try_acquire(key, next, ttl, claim, Some(earlier))
        .await
        .expect("the next attempt");
    match outcome {
        AcquireOutcome::Acquired(acquired) if acquired.earlier => {
            assert_eq!(acquired.ttl, ttl, "taken up for another TTL");
            acquired
        }
        other => panic!("expected the earlier grant, got {other:?}"),
    }
}

/// A waiter whose place ran out while others were ahead of it joins at
/// the back when it returns: whoever joined meanwhile stays ahead of it.
/// Waiters of `kind` are queued by hand for `claim` behind a holder of
/// `key`, which the caller keeps.
pub async fn an_expired_place_rejoins_at_the_back(
    server: &RedisServer,
    backend: &dyn LockBackend,
    key: &LockKey,
    kind: HoldKind,
    claim: &Claim,
) {
    let queued = || async {
        let hold = new_hold(kind.clone()).in_line();
        queue_by_hand(backend, key, &hold, claim).await;
        hold
    };
    let head = queued().await;
    let lapsed = queued().await;
    // Its place runs out (a deadline in the past by the server's clock).
    server
        .admin(&["ZADD", &key.waiters_key(), "1", lapsed.expose_owner()])
        .expect("ZADD");
    let later = queued().await;
    queue_by_hand(backend, key, &lapsed, claim).await;
    assert_eq!(
        line(server, key),
        [
            head.expose_owner(),
            later.expose_owner(),
            lapsed.expose_owner()
        ],
        "the lapsed waiter took its old place back"
    );
}

/// Foreign data where `key`'s waiters' offers live: `attempt`, a fair
/// acquire of the name (created beforehand: it runs when awaited), must
/// refuse it with [`LockError::Corrupted`] and write nothing. Returns the
/// key and detail the error names, and leaves the offers deleted.
pub async fn refuses_foreign_offers<T: std::fmt::Debug>(
    server: &RedisServer,
    key: &LockKey,
    attempt: impl Future<Output = Result<T, LockError>>,
) -> (String, String) {
    let offers = key.offers_key();
    server.admin(&["SET", &offers, "not a hash"]).expect("SET");
    let before = keys(server);
    let named = match attempt.await {
        Err(LockError::Corrupted { key, detail }) => (key, detail),
        other => panic!("foreign offers: expected Corrupted, got {other:?}"),
    };
    assert_eq!(keys(server), before, "an attempt over foreign offers wrote");
    server.admin(&["DEL", &offers]).expect("DEL");
    named
}

/// Makes `hold`'s offer on `key` malformed: a release must never grant it.
pub fn garble_offer(server: &RedisServer, key: &LockKey, hold: &HoldToken) {
    server
        .admin(&["HSET", &key.offers_key(), hold.expose_owner(), "garbage"])
        .expect("HSET");
}

/// Releases `holder`, behind which `waiter` waits in `key`'s line with an
/// offer no release may grant (`which` names it: "a malformed offer", "the
/// lost attempt"): the offer is not granted (`granted` says whether a hold
/// has the name) and the waiter keeps its place.
pub async fn grants_nothing(
    server: &RedisServer,
    key: &LockKey,
    holder: impl LeaseGuard,
    waiter: &HoldToken,
    granted: impl Fn(&HoldToken) -> bool,
    which: &str,
) {
    holder.release().await.expect("release");
    assert!(!granted(waiter), "granted {which}");
    assert_eq!(queue_length(server, key), 1, "the waiter keeps its place");
}
