//! Read-write locks on the single-node strategy, through the engine, on
//! both clients, beyond the contract's check
//! (`lock_testkit::primitives::rw_lock_excludes_writers_and_frees_dead_readers`:
//! a writer never beside another holder, a dead reader's share freed at its
//! own deadline): waiting writers that keep new readers out (or not,
//! preferring readers), wake-ups by the releases that let waiters in,
//! re-entry, downgrade and a refused upgrade, hand-off, writes handed over
//! on the server, and bad input refused with nothing written.

use std::time::{Duration, Instant};

use lock_core::strategy::KeyNames as _;
use lock_core::{
    Access, AccessRequest, AcquireOptions, ClientKind, HandoffToken, HoldKind, HoldToken,
    LockError, LockKey, LockManager, ReadGuard, RwLock, WriteGuard, FAIR_WAITER_LEASE,
};
use lock_testkit::contract::at_once;
use lock_testkit::contract::fast_config;
use lock_testkit::contract::held_by_another;
use lock_testkit::contract::taken;
use lock_testkit::peek::{entry, keys, queue_length};
use lock_testkit::waiters::{
    garble_offer, grants_nothing, hand_over, new_hold, queue_by_hand, refuses_foreign_offers,
    served_promptly, served_within, spawn_timed, take_up_by_hand, until_attempts, until_subscribed,
    Timed,
};
use lock_testkit::{LoggedScript, RedisServer};

use super::{manager, waiting, with_counter_ttl};

/// A writer of `lock` that waits up to 20 s, on a task of its own.
fn spawn_writer(lock: &RwLock) -> Timed<Result<WriteGuard, LockError>> {
    let lock = lock.clone();
    spawn_timed(async move { lock.write_with(&waiting(20)).await })
}

/// A reader of `lock` that waits up to 20 s, on a task of its own.
fn spawn_reader(lock: &RwLock) -> Timed<Result<ReadGuard, LockError>> {
    let lock = lock.clone();
    spawn_timed(async move { lock.read_with(&waiting(20)).await })
}

/// Whether a logged script is a read attempt: an acquire sends the id,
/// then the mode; a release sends no mode.
fn is_read(script: &LoggedScript) -> bool {
    script.args.get(1).is_some_and(|mode| mode == "r")
}

/// Whether a logged script is an attempt of either mode.
fn is_attempt(script: &LoggedScript) -> bool {
    matches!(script.args.get(1).map(String::as_str), Some("r" | "w"))
}

/// Readers share; a waiting writer keeps new readers out, is served when
/// the last reader lets go (woken, not by a timer), and readers then carry
/// its token as their epoch.
async fn a_waiting_writer_keeps_new_readers_out(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    // Long TTLs: a waiter left to its timer would wait for one to run out.
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks.rw_lock("doc").expect("rw lock");
    let key = locks.key("doc").expect("key");
    let first = lock.try_read().await.expect("try").expect("free");
    let second = lock.try_read().await.expect("try").expect("readers share");
    assert_eq!(
        first.fencing_token().map(|t| t.get()),
        Some(0),
        "no write yet"
    );
    assert!(lock.try_write().await.expect("try").is_none());
    assert_eq!(
        lock.state().await.expect("state").waiting_writers,
        0,
        "a one-shot try queued"
    );
    let writer = spawn_writer(&lock);
    until_subscribed(&server, &key, 1).await;
    assert_eq!(lock.state().await.expect("state").waiting_writers, 1);
    assert!(
        lock.try_read().await.expect("try").is_none(),
        "a reader passed a waiting writer"
    );
    first.release().await.expect("release");
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!writer.is_finished(), "served beside a reader");
    second.release().await.expect("release");
    let released = Instant::now();
    let write = served_promptly(writer, released, "the writer after the last read")
        .await
        .expect("write");
    let token = write.fencing_token().expect("a token");
    assert_eq!(token.get(), 1);
    assert!(
        lock.try_read().await.expect("try").is_none(),
        "a read beside a write"
    );
    write.release().await.expect("release");
    let after = lock.try_read().await.expect("try").expect("free again");
    assert_eq!(
        after.fencing_token(),
        Some(token),
        "the epoch is the last write"
    );
    after.release().await.expect("release");
}

/// Preferring readers, a read starts beside other reads while a writer
/// waits; the writer is served once the reads are over.
async fn preferring_readers_lets_reads_pass_a_waiting_writer(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks
        .rw_lock("cache")
        .expect("rw lock")
        .preferring_readers();
    let key = locks.key("cache").expect("key");
    let read = lock.try_read().await.expect("try").expect("free");
    let writer = spawn_writer(&lock);
    until_subscribed(&server, &key, 1).await;
    let passing = lock.try_read().await.expect("try").expect("a read passes");
    read.release().await.expect("release");
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!writer.is_finished(), "served beside a reader");
    passing.release().await.expect("release");
    let released = Instant::now();
    let write = served_promptly(writer, released, "the writer after the reads")
        .await
        .expect("write");
    write.release().await.expect("release");
}

/// A writer that gives up waiting leaves the queue at once, and readers
/// behind it start (woken by its departure); one whose process is gone
/// (it queued and never tried again) holds them back for its waiter lease
/// at most.
async fn a_writer_that_gives_up_holds_readers_back_briefly(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    server.log_every_command().expect("the slow log");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks.rw_lock("gate").expect("rw lock");
    let key = locks.key("gate").expect("key");
    let read = lock.try_read().await.expect("try").expect("free");
    let writer = spawn_writer(&lock);
    until_subscribed(&server, &key, 1).await;
    assert!(
        lock.try_read().await.expect("try").is_none(),
        "passed the writer"
    );
    server.admin(&["SLOWLOG", "RESET"]).expect("SLOWLOG RESET");
    let reader = spawn_reader(&lock);
    until_attempts(&server, 2, "the reader asleep", is_read).await;
    writer.abort();
    let aborted = Instant::now();
    let second = served_promptly(reader, aborted, "the reader after the writer left").await;
    second.expect("read").release().await.expect("release");
    // A writer that queued once and was never heard of again.
    let queued = Instant::now();
    queue_writer(&locks, &key).await;
    let later = lock.read_with(&waiting(20)).await.expect("read");
    let held_back = queued.elapsed();
    assert!(
        held_back <= FAIR_WAITER_LEASE + Duration::from_millis(500),
        "held back {held_back:?} by a gone writer"
    );
    later.release().await.expect("release");
    read.release().await.expect("release");
}

/// Readers waiting on a writer all start at its release, woken by it.
async fn a_writers_release_wakes_every_reader(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    server.log_every_command().expect("the slow log");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks.rw_lock("board").expect("rw lock");
    let write = lock.try_write().await.expect("try").expect("free");
    server.admin(&["SLOWLOG", "RESET"]).expect("SLOWLOG RESET");
    let readers: Vec<_> = (0..3).map(|_| spawn_reader(&lock)).collect();
    until_attempts(&server, 6, "three readers asleep", is_read).await;
    write.release().await.expect("release");
    let released = Instant::now();
    let mut reads = Vec::new();
    for reader in readers {
        let read = served_promptly(reader, released, "a reader after the write").await;
        reads.push(read.expect("read"));
    }
    assert_eq!(lock.state().await.expect("state").readers().count(), 3);
    for read in reads {
        read.release().await.expect("release");
    }
}

/// A write handed to the next writer wakes that writer alone: readers
/// waiting on the write would find the next one in their way. They start
/// at once when that one is released.
async fn a_write_handed_on_wakes_no_reader(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    server.log_every_command().expect("the slow log");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks.rw_lock("relay").expect("rw lock");
    let first = lock.try_write().await.expect("try").expect("free");
    server.admin(&["SLOWLOG", "RESET"]).expect("SLOWLOG RESET");
    let writer = spawn_writer(&lock);
    let is_write = |script: &LoggedScript| is_attempt(script) && !is_read(script);
    until_attempts(&server, 2, "the writer asleep", is_write).await;
    let readers: Vec<_> = (0..3).map(|_| spawn_reader(&lock)).collect();
    until_attempts(&server, 6, "three readers asleep", is_read).await;
    server.admin(&["SLOWLOG", "RESET"]).expect("SLOWLOG RESET");
    first.release().await.expect("release");
    let released = Instant::now();
    let write = served_promptly(writer, released, "the next writer")
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let logged = server.scripts_logged().expect("the slow log");
    let reads = logged.iter().filter(|script| is_read(script)).count();
    assert_eq!(reads, 0, "a write handed on woke {reads} readers");
    write.release().await.expect("release");
    let released = Instant::now();
    for reader in readers {
        let read = served_promptly(reader, released, "a reader after the writes").await;
        read.expect("read").release().await.expect("release");
    }
}

/// An owner re-enters: a write again with its token, a read while writing
/// (a downgrade, kept when the write is released); an owner with only
/// reads is refused the write, with a typed error, waiting or not.
async fn reentry_downgrade_and_a_refused_upgrade(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks.rw_lock("ledger").expect("rw lock");
    let write = lock.write().await.expect("write");
    let token = write.fencing_token();
    let me = AcquireOptions::new()
        .with_owner(write.owner().clone())
        .no_wait();
    let again = lock.write_with(&me).await.expect("a re-entered write");
    assert_eq!(again.fencing_token(), token, "a re-entry keeps the token");
    let read = lock.read_with(&me).await.expect("a read while writing");
    assert_eq!(read.fencing_token(), token, "the epoch is this write");
    assert!(
        lock.try_read().await.expect("try").is_none(),
        "another reader beside a write"
    );
    again.release().await.expect("release");
    write.release().await.expect("release");
    // Downgraded: others may read, nobody may write.
    let other = lock.try_read().await.expect("try").expect("readers share");
    assert!(lock.try_write().await.expect("try").is_none());
    for options in [me.clone(), me.clone().with_wait(Duration::from_secs(5))] {
        match lock.write_with(&options).await {
            Err(LockError::UpgradeRefused { key }) => assert_eq!(key, "ledger"),
            other => panic!("an upgrade: {other:?}"),
        }
    }
    // Refused at once, not after the wait.
    let state = lock.state().await.expect("state");
    assert_eq!((state.readers().count(), state.writers().count()), (2, 0));
    assert_eq!(state.waiting_writers, 0, "a refused upgrade queued");
    read.release().await.expect("release");
    other.release().await.expect("release");
}

/// Shared and exclusive holds hand off and resume with their mode and
/// token; a token whose mode was edited resumes nothing.
async fn holds_hand_off_and_resume(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let other = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let lock = locks.rw_lock("handed").expect("rw lock");
    for access in [Access::Exclusive, Access::Shared] {
        let (token, handed) = match access {
            Access::Exclusive => {
                let write = lock.write().await.expect("write");
                (write.fencing_token(), write.hand_off())
            }
            Access::Shared => {
                let read = lock.read().await.expect("read");
                (read.fencing_token(), read.hand_off())
            }
        };
        let text = handed.expect("hand off").expose().to_owned();
        let (from, to) = match access {
            Access::Exclusive => ("dl1.write.", "dl1.read."),
            Access::Shared => ("dl1.read.", "dl1.write."),
        };
        assert!(text.starts_with(from), "the token format: {access:?}");
        let forged = HandoffToken::parse(&text.replacen(from, to, 1)).expect("parse");
        assert!(
            other.resume("handed", &forged).await.is_err(),
            "a forged mode resumed"
        );
        let parsed = HandoffToken::parse(&text).expect("parse");
        let resumed = other.resume("handed", &parsed).await.expect("resume");
        assert_eq!(resumed.fencing_token(), token);
        let state = lock.state().await.expect("state");
        assert_eq!(state.holds.len(), 1, "counted once: {state:?}");
        assert!(matches!(
            other.resume("handed", &parsed).await,
            Err(LockError::NotOwner { .. })
        ));
        // Resumed in its mode.
        match access {
            Access::Exclusive => {
                WriteGuard::try_from(resumed)
                    .expect("a write")
                    .release()
                    .await
            }
            Access::Shared => {
                ReadGuard::try_from(resumed)
                    .expect("a read")
                    .release()
                    .await
            }
        }
        .expect("release");
        assert!(!lock.state().await.expect("state").is_held());
    }
}

/// A bad name is refused before anything is sent; a semaphore's name is
/// held for a read-write lock, and a read-write lock's for a semaphore,
/// with nothing written (their state is another kind's: `Corrupted`).
async fn bad_input_is_refused(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    assert!(locks.rw_lock("").is_err(), "an empty name");
    assert!(keys(&server).is_empty(), "{:?}", keys(&server));
    let permits = locks.semaphore("counted", 2).expect("semaphore");
    let permit = permits.try_acquire().await.expect("try").expect("room");
    let before = keys(&server);
    let lock = locks.rw_lock("counted").expect("rw lock");
    let read = lock.try_read().await;
    assert!(matches!(read, Ok(None)), "{read:?}");
    let write = lock.try_write().await;
    assert!(matches!(write, Ok(None)), "{write:?}");
    assert!(matches!(
        lock.state().await,
        Err(LockError::Corrupted { .. })
    ));
    assert_eq!(keys(&server), before, "something was written");
    let read = at_once(locks.rw_lock("read").expect("rw lock").try_read()).await;
    let before = keys(&server);
    assert!(matches!(
        locks
            .semaphore("read", 2)
            .expect("semaphore")
            .try_acquire()
            .await,
        Ok(None)
    ));
    assert_eq!(keys(&server), before, "something was written");
    permit.release().await.expect("release");
    read.release().await.expect("release");
    // The server down: a typed error within the command timeout, never a
    // hang or a panic, for both modes and for the state.
    let lock = locks.rw_lock("gone").expect("rw lock");
    drop(server);
    let down = tokio::time::timeout(Duration::from_secs(5), async {
        (
            lock.try_read().await,
            lock.try_write().await,
            lock.state().await,
        )
    })
    .await
    .expect("a call on a server that is down hung");
    let unreachable = |err: &LockError| {
        matches!(
            err,
            LockError::Connection { .. } | LockError::Timeout { .. }
        )
    };
    assert!(down.0.as_ref().is_err_and(unreachable), "{:?}", down.0);
    assert!(down.1.as_ref().is_err_and(unreachable), "{:?}", down.1);
    assert!(down.2.as_ref().is_err_and(unreachable), "{:?}", down.2);
}

/// A plain lock of the same name excludes both kinds of hold, and they
/// exclude it (as `flock -x` does `flock -s`); write tokens and plain
/// tokens come from one counter, so a read's epoch covers both.
async fn a_plain_lock_of_the_name_is_exclusive(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks.rw_lock("mixed").expect("rw lock");
    let key = locks.key("mixed").expect("key");
    let plain = taken(&locks, "mixed").await;
    let before = keys(&server);
    assert!(
        lock.try_read().await.expect("try").is_none(),
        "a read beside a lock"
    );
    assert!(
        lock.try_write().await.expect("try").is_none(),
        "a write beside a lock"
    );
    assert_eq!(keys(&server), before, "something was written");
    let reader = spawn_reader(&lock);
    until_subscribed(&server, &key, 1).await;
    let plain_token = plain.fencing_token().expect("a token");
    plain.release().await.expect("release");
    let released = Instant::now();
    let read = served_promptly(reader, released, "the reader after the lock")
        .await
        .expect("read");
    assert_eq!(read.fencing_token(), Some(plain_token), "the epoch");
    assert!(
        held_by_another(&locks, "mixed").await,
        "a lock beside a read"
    );
    read.release().await.expect("release");
    let write = lock.try_write().await.expect("try").expect("free");
    assert!(write.fencing_token().expect("a token") > plain_token);
    write.release().await.expect("release");
}

/// Write tokens keep growing where a counter expires: beside a plain lock
/// whose grants give it a TTL, and under this manager's own
/// `fencing_counter_ttl`; and a write renewed past the counter's TTL keeps
/// the counter, so a read it takes still carries its token.
async fn write_tokens_grow_where_counters_expire(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let counter_ttl = Duration::from_secs(1);
    let expiring = with_counter_ttl(kind, &server, Duration::from_millis(100), counter_ttl).await;
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let lock = locks.rw_lock("versions").expect("rw lock");
    let plain = taken(&expiring, "versions").await;
    let first = plain.fencing_token().expect("a token");
    plain.release().await.expect("release");
    let write = lock.try_write().await.expect("try").expect("free");
    let second = write.fencing_token().expect("a token");
    assert!(second > first, "{second} after {first}");
    write.release().await.expect("release");
    tokio::time::sleep(counter_ttl + Duration::from_millis(300)).await;
    let write = lock.try_write().await.expect("try").expect("free");
    let third = write.fencing_token().expect("a token");
    assert!(
        third > second,
        "{third} after {second}: the counter expired"
    );
    write.release().await.expect("release");
    // This manager's own counter TTL, and a write that outlives it.
    let lock = expiring.rw_lock("own").expect("rw lock");
    let long = AcquireOptions::new().with_ttl(Duration::from_millis(1500));
    let write = lock.write_with(&long).await.expect("write");
    let token = write.fencing_token().expect("a token");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(write.is_valid(), "lost: {:?}", write.status());
    let me = long.clone().with_owner(write.owner().clone());
    let read = lock.read_with(&me).await.expect("a read while writing");
    assert_eq!(
        read.fencing_token(),
        Some(token),
        "the counter expired under its write"
    );
    read.release().await.expect("release");
    write.release().await.expect("release");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let later = lock.try_write().await.expect("try").expect("free");
    assert!(later.fencing_token().expect("a token") > token);
    later.release().await.expect("release");
}

/// A counter that `INCR` would refuse is foreign data before anything is
/// written; an id live in one mode is not granted in the other; and a
/// writer waiting on a plain lock keeps its place past its waiter lease.
async fn foreign_counters_modes_and_places(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    server
        .admin(&["SET", "lock:{odd}:fence", "0123"])
        .expect("SET");
    let odd = locks.rw_lock("odd").expect("rw lock");
    let before = keys(&server);
    let read = odd.try_read().await;
    assert!(matches!(read, Err(LockError::Corrupted { .. })), "{read:?}");
    let write = odd.try_write().await;
    assert!(
        matches!(write, Err(LockError::Corrupted { .. })),
        "{write:?}"
    );
    assert_eq!(keys(&server), before, "something was written");
    // One id in both modes.
    let key = LockKey::new("lock:", "modes").expect("key");
    let hold = new_hold(HoldKind::Lock);
    let ask = |access| {
        let (backend, key, hold) = (
            locks.backend(),
            &key,
            hold.clone().with_kind(lock_core::HoldKind::Access(access)),
        );
        async move {
            backend
                .try_acquire(
                    key,
                    &hold,
                    Duration::from_secs(30),
                    &lock_core::Claim::Access(AccessRequest::new(access, FAIR_WAITER_LEASE, false)),
                    None,
                )
                .await
        }
    };
    assert!(matches!(
        ask(Access::Shared).await,
        Ok(lock_core::AcquireOutcome::Acquired(_))
    ));
    let twice = ask(Access::Exclusive).await;
    assert!(
        matches!(twice, Err(LockError::Corrupted { .. })),
        "{twice:?}"
    );
    // A writer behind a plain lock for longer than its waiter lease.
    let plain = taken(&locks, "behind").await;
    let lock = locks.rw_lock("behind").expect("rw lock");
    let writer = spawn_writer(&lock);
    tokio::time::sleep(FAIR_WAITER_LEASE + Duration::from_millis(700)).await;
    let waiting_writers = lock.state().await;
    // The plain lock's key is a string: the state reads as foreign data, so
    // count the place by hand.
    assert!(waiting_writers.is_err(), "{waiting_writers:?}");
    let queued = server
        .admin(&["ZCOUNT", "lock:{behind}:waiters", "-inf", "+inf"])
        .expect("ZCOUNT");
    assert_eq!(queued.as_int(), Some(1), "the writer lost its place");
    plain.release().await.expect("release");
    let released = Instant::now();
    let write = served_promptly(writer, released, "the writer after the lock")
        .await
        .expect("write");
    write.release().await.expect("release");
}

/// A write attempt of a new owner sent by hand through the backend, for
/// `ttl`: its hold and what it found.
async fn write_by_hand(
    locks: &LockManager,
    key: &LockKey,
    ttl: Duration,
    request: AccessRequest,
) -> (HoldToken, lock_core::AcquireOutcome) {
    let hold = new_hold(HoldKind::Access(Access::Exclusive));
    let outcome = locks
        .backend()
        .try_acquire(key, &hold, ttl, &lock_core::Claim::Access(request), None)
        .await
        .expect("a write attempt");
    (hold, outcome)
}

/// A writer queued by hand, `request` saying how, as a waiting writer
/// whose process then died would be: its hold is its offer (if it makes
/// one).
async fn queue_writer_with(
    locks: &LockManager,
    key: &LockKey,
    request: AccessRequest,
) -> HoldToken {
    let hold = new_hold(HoldKind::Access(Access::Exclusive));
    let claim = lock_core::Claim::Access(request);
    queue_by_hand(locks.backend().as_ref(), key, &hold, &claim).await;
    hold
}

/// The claim of a writer that waits in line, preferring writers.
fn in_line() -> lock_core::Claim {
    lock_core::Claim::Access(AccessRequest::new(
        Access::Exclusive,
        FAIR_WAITER_LEASE,
        true,
    ))
}

/// A writer queued by hand, preferring writers.
async fn queue_writer(locks: &LockManager, key: &LockKey) -> HoldToken {
    let hold = new_hold(HoldKind::Access(Access::Exclusive));
    queue_by_hand(locks.backend().as_ref(), key, &hold, &in_line()).await;
    hold
}

/// The mode entry and milliseconds left of `hold` on `key`, by the
/// server's clock; `None` when it has no live entry.
fn write_entry(server: &RedisServer, key: &LockKey, hold: &HoldToken) -> Option<(String, i64)> {
    entry(server, key, &key.held_key(), hold)
}

/// Foreign data where the writers' offers live: a write refuses it with a
/// typed error naming the key and writes nothing; a malformed offer is
/// never granted (the release frees the lock and the writer takes its
/// turn).
async fn foreign_offers_are_refused(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks.rw_lock("foreign").expect("rw lock");
    let key = LockKey::new("lock:", "foreign").expect("key");
    let (named, _) = refuses_foreign_offers(&server, &key, lock.try_write()).await;
    assert_eq!(named, key.offers_key());
    let reader = lock.read().await.expect("read");
    let writer = queue_writer(&locks, &key).await;
    garble_offer(&server, &key, &writer);
    let granted = |hold: &HoldToken| write_entry(&server, &key, hold).is_some();
    grants_nothing(&server, &key, reader, &writer, granted, "a malformed offer").await;
}

/// The release that frees a read-write lock (a write's, or the last
/// read's) grants the write to the first waiting writer's offer in its
/// own step: the next token, for the waiter lease only, the writer out of
/// the line. The writer's next attempt (a grant message it missed) takes
/// the grant up for its TTL and writes nothing else.
async fn a_release_hands_the_write_over_on_the_server(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks.rw_lock("relay").expect("rw lock");
    let key = LockKey::new("lock:", "relay").expect("key");
    let lease = FAIR_WAITER_LEASE.as_millis() as i64;
    let write = lock.write().await.expect("write");
    let first = write.fencing_token().expect("a token").get();
    let waiter = queue_writer(&locks, &key).await;
    write.release().await.expect("release");
    let (entry, left) = write_entry(&server, &key, &waiter).expect("granted to the offer");
    assert_eq!(entry, format!("w:{}", first + 1));
    assert!(left > 0 && left <= lease, "granted for {left} ms");
    assert_eq!(queue_length(&server, &key), 0, "the writer left the line");
    let next = HoldToken::new(waiter.owner().clone())
        .expect("hold")
        .with_kind(HoldKind::Access(Access::Exclusive));
    let backend = locks.backend();
    let grant = take_up_by_hand(backend.as_ref(), &key, &next, &in_line(), &waiter).await;
    assert_eq!(
        grant.fencing_token.map(|token| token.get()),
        Some(first + 1)
    );
    let (_, left) = write_entry(&server, &key, &waiter).expect("the grant stands");
    assert!(left > lease, "taken up for the TTL: {left} ms");
    assert_eq!(write_entry(&server, &key, &next), None, "a second hold");
    assert_eq!(queue_length(&server, &key), 0, "the attempt queued");
    // The last reader's release hands over too; one with readers left
    // does not.
    locks
        .backend()
        .release(&key, &waiter)
        .await
        .expect("release");
    let reads = [
        lock.read().await.expect("read"),
        lock.read().await.expect("read"),
    ];
    let behind = queue_writer(&locks, &key).await;
    let [one, two] = reads;
    one.release().await.expect("release");
    assert_eq!(write_entry(&server, &key, &behind), None, "beside a reader");
    two.release().await.expect("release");
    let (entry, _) = write_entry(&server, &key, &behind).expect("granted at the last read");
    assert_eq!(entry, format!("w:{}", first + 2));
}

/// A writer in another process learns from the release's message that it
/// holds the write, with the next token, and extends the grant (made for
/// the waiter lease) to its TTL at once: it sends no acquire after the
/// release (the server's slow log, set to log every command, says so).
/// A round may show one, an attempt its timer sent as the release ran; no
/// more than one of five.
async fn a_waiting_writer_takes_up_a_grant_and_extends_it(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    server.log_every_command().expect("the slow log");
    let mut acquired_by_attempt = 0;
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let other = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks.rw_lock("baton").expect("rw lock");
    let key = locks.key("baton").expect("key");
    for round in 0..5 {
        let theirs = other.rw_lock("baton").expect("rw lock");
        let waiter = async move { theirs.write_with(&waiting(20)).await };
        let epoch = || async { lock.state().await.expect("state").epoch.get() };
        // Freed by a write's release, then by the last read's.
        let (last, write) = if round % 2 == 0 {
            let holder = lock.write().await.expect("write");
            (
                epoch().await,
                hand_over(&server, &key, holder, waiter).await,
            )
        } else {
            let holder = lock.read().await.expect("read");
            (
                epoch().await,
                hand_over(&server, &key, holder, waiter).await,
            )
        };
        let logged = server.scripts_logged().expect("the slow log");
        if logged.iter().any(is_attempt) {
            acquired_by_attempt += 1;
        }
        assert_eq!(
            write.fencing_token().map(|token| token.get()),
            Some(last + 1)
        );
        let state = lock.state().await.expect("state");
        assert_eq!(state.writers().count(), 1, "{state:?}");
        assert!(
            state
                .writers()
                .all(|hold| hold.remaining > FAIR_WAITER_LEASE),
            "{state:?}"
        );
        write.release().await.expect("release");
    }
    assert!(
        acquired_by_attempt <= 1,
        "{acquired_by_attempt} of 5 writers sent an acquire after the release"
    );
}

/// A writer that gives up gives back a grant a release made to its offer,
/// which goes to the next writer in line at once; one that died in the
/// line blocks the lock no longer than its place would have lasted.
async fn a_leaving_writer_gives_its_grant_back(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let lock = locks.rw_lock("returned").expect("rw lock");
    let key = LockKey::new("lock:", "returned").expect("key");
    let write = lock.write().await.expect("write");
    let first = write.fencing_token().expect("a token").get();
    let leaving = queue_writer(&locks, &key).await;
    let dead = queue_writer(&locks, &key).await;
    let died_at = Instant::now();
    write.release().await.expect("release");
    assert!(write_entry(&server, &key, &leaving).is_some());
    locks
        .backend()
        .leave_queue(&key, leaving.owner(), Some(std::slice::from_ref(&leaving)))
        .await
        .expect("leave");
    assert_eq!(write_entry(&server, &key, &leaving), None, "not given back");
    let (entry, left) = write_entry(&server, &key, &dead).expect("handed on");
    assert_eq!(entry, format!("w:{}", first + 2));
    assert!(
        left <= FAIR_WAITER_LEASE.as_millis() as i64,
        "granted for {left} ms, past the dead writer's place"
    );
    assert_eq!(queue_length(&server, &key), 0);
    let read = lock.read_with(&waiting(20)).await.expect("read");
    let blocked = died_at.elapsed();
    assert!(
        blocked < FAIR_WAITER_LEASE + Duration::from_millis(700),
        "blocked {blocked:?} after the writer died"
    );
    assert_eq!(
        read.fencing_token().map(|token| token.get()),
        Some(first + 2)
    );
    read.release().await.expect("release");
}

/// A write granted to a writer that died in the line ends with its
/// place; readers that waited on the released write are woken by the
/// grant (it lets them in no sooner, but the write they waited on is
/// gone) and served when the grant runs out, not at that write's TTL.
async fn readers_wait_no_longer_than_a_dead_writers_grant(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    for (name, prefer_readers) in [("orphan", false), ("orphan-readers", true)] {
        let mut lock = locks.rw_lock(name).expect("rw lock");
        if prefer_readers {
            lock = lock.preferring_readers();
        }
        let key = LockKey::new("lock:", name).expect("key");
        let write = lock.write().await.expect("write");
        let reader = spawn_reader(&lock);
        until_subscribed(&server, &key, 1).await;
        let dead = queue_writer(&locks, &key).await;
        write.release().await.expect("release");
        let released = Instant::now();
        assert!(
            write_entry(&server, &key, &dead).is_some(),
            "granted to the dead writer"
        );
        let what = format!("the reader (prefer readers: {prefer_readers})");
        let within = FAIR_WAITER_LEASE + Duration::from_millis(700);
        let read = served_within(reader, released, within, &what).await;
        read.expect("read").release().await.expect("release");
    }
}

/// The release of an attempt whose reply was lost (sent before the
/// writer's next attempt) never grants that attempt the write, though its
/// offer still stands: nobody would take the grant up. And writers that
/// prefer readers make no offers, so a release leaves the lock free for
/// the readers to race them, as they prefer.
async fn no_grant_to_a_lost_attempt_or_past_preferred_readers(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let key = LockKey::new("lock:", "lost").expect("key");
    // A write whose holder stopped: it runs out unreleased.
    let request = AccessRequest::new(Access::Exclusive, FAIR_WAITER_LEASE, false);
    let (_, outcome) = write_by_hand(&locks, &key, Duration::from_millis(300), request).await;
    assert!(
        matches!(outcome, lock_core::AcquireOutcome::Acquired(_)),
        "{outcome:?}"
    );
    let lost = queue_writer(&locks, &key).await;
    // The keys outlive their last hold by a moment at most (each script
    // gives them that hold's expiry); here, for good.
    for persisted in [key.redis_key(), &key.held_key()] {
        server.admin(&["PERSIST", persisted]).expect("PERSIST");
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let outcome = locks.backend().release(&key, &lost).await.expect("release");
    assert!(
        matches!(outcome, lock_core::ReleaseOutcome::NotHeld),
        "{outcome:?}"
    );
    assert_eq!(
        write_entry(&server, &key, &lost),
        None,
        "granted to the lost attempt"
    );
    let offers = server
        .admin(&["HLEN", &key.offers_key()])
        .expect("HLEN")
        .as_int();
    assert_eq!(offers, Some(0), "its offer stands");
    // Preferring readers.
    let key = LockKey::new("lock:", "readers-first").expect("key");
    let lock = locks
        .rw_lock("readers-first")
        .expect("rw lock")
        .preferring_readers();
    let write = lock.write().await.expect("write");
    let request =
        AccessRequest::new(Access::Exclusive, FAIR_WAITER_LEASE, true).preferring_readers(true);
    let hold = queue_writer_with(&locks, &key, request).await;
    write.release().await.expect("release");
    assert_eq!(
        write_entry(&server, &key, &hold),
        None,
        "granted past the readers"
    );
    let read = at_once(lock.try_read()).await;
    read.release().await.expect("release");
}

lock_testkit::client_tests!(
    a_waiting_writer_keeps_new_readers_out,
    preferring_readers_lets_reads_pass_a_waiting_writer,
    a_writer_that_gives_up_holds_readers_back_briefly,
    a_writers_release_wakes_every_reader,
    a_write_handed_on_wakes_no_reader,
    reentry_downgrade_and_a_refused_upgrade,
    holds_hand_off_and_resume,
    a_plain_lock_of_the_name_is_exclusive,
    write_tokens_grow_where_counters_expire,
    foreign_counters_modes_and_places,
    foreign_offers_are_refused,
    a_release_hands_the_write_over_on_the_server,
    a_waiting_writer_takes_up_a_grant_and_extends_it,
    a_leaving_writer_gives_its_grant_back,
    readers_wait_no_longer_than_a_dead_writers_grant,
    no_grant_to_a_lost_attempt_or_past_preferred_readers,
    bad_input_is_refused,
);
