//! What the handles do beside acquiring, on both clients: `inspect` says
//! what holds a name, whichever primitive it is, in one round trip (the
//! strategies with locks alone answer a lock or nothing), and
//! `RwLock::downgrade` turns a write into a read with no writer in between.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::time::Duration;

use distlock::state::{LockState, NameState};
use distlock::{LockError, LockManager};

mod common;

/// A single-node manager on `server` through `client`, with `extra`
/// variables.
async fn single(
    server: &lock_testkit::RedisServer,
    client: distlock::ClientKind,
    extra: &[(&str, &str)],
) -> LockManager {
    let config = common::config("single", [server], client, extra);
    distlock::connect(&config).await.expect("connect")
}

/// `inspect` on `name`, counting the scripts it sent: one.
async fn inspect_once(
    locks: &LockManager,
    server: &lock_testkit::RedisServer,
    name: &str,
) -> NameState {
    server.admin(&["SLOWLOG", "RESET"]).expect("slowlog reset");
    let state = locks.inspect(name).await.expect("inspect");
    let scripts = server.scripts_logged().expect("the slow log");
    assert_eq!(scripts.len(), 1, "{name}: {scripts:?}");
    state
}

/// Free, a lock, an election, a semaphore and a read-write lock, each read
/// as what it is in one script, and free again once it is given back.
#[test]
fn inspect_says_what_holds_a_name_in_one_round_trip() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = single(server, client, &[]).await;
        // Loads every script the manager sends, so each read below is one.
        locks.inspect("warm-up").await.expect("inspect");
        server.log_every_command().expect("slowlog");

        let name = format!("free-{client}");
        assert_eq!(
            inspect_once(&locks, server, &name).await,
            NameState::Free { last_token: None },
            "{client}"
        );

        let name = format!("lock-{client}");
        let guard = locks.try_acquire(&name).await.expect("acquire");
        let guard = guard.expect("free");
        let token = guard.fencing_token();
        match inspect_once(&locks, server, &name).await {
            NameState::Lock(LockState::Held {
                token: shown,
                remaining: Some(left),
                ..
            }) => {
                assert_eq!(shown, token, "{client}: the holder's token");
                assert!(left <= Duration::from_secs(5), "{client}: {left:?}");
            }
            other => panic!("{client}: a lock read as {other:?}"),
        }
        guard.release().await.expect("release");
        assert_eq!(
            inspect_once(&locks, server, &name).await,
            NameState::Free { last_token: token },
            "{client}: a released lock"
        );

        let name = format!("election-{client}");
        let election = locks.election(&name).expect("election");
        let leadership = election.campaign("10.0.0.7:8080").await.expect("campaign");
        match inspect_once(&locks, server, &name).await {
            NameState::Election { lock, leader } => {
                assert_eq!(leader.value, "10.0.0.7:8080", "{client}");
                assert_eq!(leader.term, leadership.term(), "{client}");
                assert!(lock.is_held(), "{client}: {lock:?}");
            }
            other => panic!("{client}: an election read as {other:?}"),
        }
        leadership.resign().await.expect("resign");

        let name = format!("semaphore-{client}");
        let semaphore = locks.semaphore(&name, 3).expect("semaphore");
        let permit = semaphore.acquire_many(2).await.expect("two permits");
        match inspect_once(&locks, server, &name).await {
            NameState::Semaphore(state) => {
                assert_eq!((state.limit, state.used), (Some(3), 2), "{client}");
                assert_eq!(state.permits.len(), 1, "{client}: {state:?}");
                assert_eq!(state.permits[0].slot, permit.slot(), "{client}");
            }
            other => panic!("{client}: a semaphore read as {other:?}"),
        }
        permit.release().await.expect("release");
        // The limit stays: still a semaphore, with nothing held.
        let state = inspect_once(&locks, server, &name).await;
        assert!(
            matches!(&state, NameState::Semaphore(s) if s.used == 0 && s.limit == Some(3)),
            "{client}: {state:?}"
        );
        assert!(!state.is_held(), "{client}: {state:?}");

        let name = format!("rw-{client}");
        let rw = locks.rw_lock(&name).expect("rw lock");
        let write = rw.write().await.expect("write");
        let epoch = write.fencing_token();
        write.release().await.expect("release");
        let (first, second) = (
            rw.read().await.expect("read"),
            rw.read().await.expect("read"),
        );
        match inspect_once(&locks, server, &name).await {
            NameState::RwLock(state) => {
                assert_eq!(Some(state.epoch), epoch, "{client}: the last write's token");
                assert_eq!(state.readers().count(), 2, "{client}: {state:?}");
                assert_eq!(state.writers().count(), 0, "{client}: {state:?}");
            }
            other => panic!("{client}: a read-write lock read as {other:?}"),
        }
        first.release().await.expect("release");
        second.release().await.expect("release");
        assert_eq!(
            inspect_once(&locks, server, &name).await,
            NameState::Free { last_token: epoch },
            "{client}: a read-write lock with no holds"
        );
    });
}

/// A name whose key holds data none of the primitives writes is reported,
/// naming the key, not read as free or as some primitive's.
#[test]
fn inspect_reports_foreign_data() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = single(server, client, &[]).await;
        for (name, command) in [
            (format!("list-{client}"), "RPUSH"),
            (format!("set-{client}"), "SADD"),
        ] {
            let key = locks.key(&name).expect("key");
            server
                .admin(&[command, key.redis_key(), "x"])
                .expect("foreign data");
            match locks.inspect(&name).await {
                Err(LockError::Corrupted { key: named, .. }) => {
                    assert_eq!(named, key.redis_key(), "{client}")
                }
                other => panic!("{client}: a {command} key read as {other:?}"),
            }
        }
        // A leader record that is not a string.
        let name = format!("leader-{client}");
        let guard = locks.try_acquire(&name).await.expect("acquire");
        let key = locks.key(&name).expect("key");
        let record = format!("{}:leader", key.redis_key());
        server
            .admin(&["HSET", &record, "term", "1"])
            .expect("foreign record");
        assert!(
            matches!(locks.inspect(&name).await, Err(LockError::Corrupted { .. })),
            "{client}"
        );
        guard.expect("free").release().await.expect("release");
    });
}

/// The strategies with locks alone answer a lock or nothing: the reentrant
/// lock with its hold count, Redlock by its majority.
#[test]
fn lock_only_strategies_answer_a_lock_or_nothing() {
    lock_testkit::on_every_client(async |server, client| {
        let config = common::config("reentrant", [server], client, &[]);
        let locks = distlock::connect(&config).await.expect("connect");
        let name = format!("reentrant-{client}");
        let outer = locks.acquire(&name).await.expect("acquire");
        let owner = distlock::AcquireOptions::new().with_owner(outer.owner().clone());
        let inner = locks.acquire_with(&name, &owner).await.expect("re-enter");
        match locks.inspect(&name).await.expect("inspect") {
            NameState::Lock(LockState::Held { hold_count, .. }) => {
                assert_eq!(hold_count, Some(2), "{client}")
            }
            other => panic!("{client}: {other:?}"),
        }
        inner.release().await.expect("release");
        outer.release().await.expect("release");
        assert!(
            matches!(
                locks.inspect(&name).await.expect("inspect"),
                NameState::Free { .. }
            ),
            "{client}"
        );

        let others = lock_testkit::RedisServer::start_many(2).expect("two more servers");
        let nodes = [server, &others[0], &others[1]];
        let config = common::config("redlock", nodes, client, &[]);
        let locks = distlock::connect(&config).await.expect("connect");
        let name = format!("redlock-{client}");
        let guard = locks.acquire(&name).await.expect("acquire");
        assert!(
            matches!(
                locks.inspect(&name).await.expect("inspect"),
                NameState::Lock(LockState::Held { .. })
            ),
            "{client}"
        );
        guard.release().await.expect("release");
        assert!(
            !locks.inspect(&name).await.expect("inspect").is_held(),
            "{client}"
        );
    });
}

/// A downgraded write is a read with the write's token as its epoch: other
/// readers join it, no writer gets in between or beside it, and the write is
/// gone from the server.
#[test]
fn a_downgrade_reads_what_the_write_left_and_keeps_writers_out() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = single(server, client, &[]).await;
        let other = single(server, client, &[]).await;
        let name = format!("downgrade-{client}");
        let rw = locks.rw_lock(&name).expect("rw lock");
        let theirs = other.rw_lock(&name).expect("rw lock");

        let write = rw.write().await.expect("write");
        let token = write.fencing_token().expect("a write token");
        let read = rw.downgrade(write).await.expect("downgrade");
        assert_eq!(read.epoch(), token, "{client}: the write's token");
        assert!(read.is_valid(), "{client}");
        let state = rw.state().await.expect("state");
        assert_eq!(
            (state.writers().count(), state.readers().count()),
            (0, 1),
            "{client}: the write is gone, the read is there: {state:?}"
        );
        assert!(
            theirs.try_write().await.expect("try write").is_none(),
            "{client}: a writer beside the downgraded read"
        );
        let beside = theirs.try_read().await.expect("try read");
        let beside = beside.expect("another reader joins a downgraded read");
        assert_eq!(beside.epoch(), token, "{client}");
        beside.release().await.expect("release");
        read.release().await.expect("release");
        let next = theirs.try_write().await.expect("try write");
        let next = next.expect("a writer once the read is given back");
        assert!(next.fencing_token() > Some(token), "{client}");
        next.release().await.expect("release");

        // A write of another lock is refused, naming the guard.
        let elsewhere = locks.rw_lock(&format!("{name}-other")).expect("rw lock");
        let write = elsewhere.write().await.expect("write");
        match rw.downgrade(write).await {
            Err(LockError::InvalidConfig { field, .. }) => assert_eq!(field, "guard"),
            other => panic!("{client}: another lock's write downgraded: {other:?}"),
        }
    });
}

/// A downgrade waits for nothing: a writer queued behind the write is still
/// kept out, and is served once the read is given back.
#[test]
fn a_downgrade_goes_ahead_of_a_queued_writer() {
    lock_testkit::on_every_client(async |server, client| {
        let extra = [("DISTLOCK_WAIT_TIMEOUT", "5s")];
        let locks = single(server, client, &extra).await;
        let other = single(server, client, &extra).await;
        let name = format!("downgrade-queued-{client}");
        let rw = locks.rw_lock(&name).expect("rw lock");
        let theirs = other.rw_lock(&name).expect("rw lock");
        let key = locks.key(&name).expect("key");

        let write = rw.write().await.expect("write");
        let token = write.fencing_token().expect("a token");
        let waiting = tokio::spawn(async move { theirs.write().await });
        lock_testkit::eventually(Duration::from_secs(5), "the writer queued", || {
            let queued = lock_testkit::peek::queue_length(server, &key);
            std::future::ready((queued == 1).then_some(()))
        })
        .await;
        let read = tokio::time::timeout(Duration::from_secs(1), rw.downgrade(write))
            .await
            .expect("a downgrade does not wait")
            .expect("downgrade");
        assert_eq!(read.epoch(), token, "{client}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "{client}: a writer beside a read");
        read.release().await.expect("release");
        let next = waiting.await.expect("task").expect("the queued writer");
        assert!(next.fencing_token() > Some(token), "{client}");
        next.release().await.expect("release");
    });
}

/// A write whose lease ended while another writer came and went is not
/// downgraded: the read it would give carries a later write's epoch, so a
/// writer got in between. The downgrade says the lease was lost and keeps
/// no read.
#[test]
fn a_write_another_writer_followed_is_not_downgraded() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = single(server, client, &[]).await;
        let other = single(server, client, &[]).await;
        let name = format!("downgrade-late-{client}");
        let rw = locks.rw_lock(&name).expect("rw lock");
        let write = rw.write().await.expect("write");
        // An operator deletes the write's hold; another writer comes and goes.
        let key = locks.key(&name).expect("key");
        locks
            .backend()
            .force_release(&key)
            .await
            .expect("force release");
        let theirs = other.rw_lock(&name).expect("rw lock");
        let next = theirs.write().await.expect("another write");
        assert!(next.fencing_token() > write.fencing_token(), "{client}");
        next.release().await.expect("release");
        match rw.downgrade(write).await {
            Err(LockError::LeaseLost { .. }) => {}
            other => panic!("{client}: a write after another writer downgraded: {other:?}"),
        }
        assert!(
            !locks.inspect(&name).await.expect("inspect").is_held(),
            "{client}: the refused downgrade's read was kept"
        );
    });
}

/// A handed-off permit that ended is not held by anyone: releasing it by
/// its token says so, though the semaphore keeps its limit.
#[test]
fn an_ended_permit_is_not_held_though_its_limit_stays() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = single(server, client, &[]).await;
        let name = format!("ended-permit-{client}");
        let semaphore = locks.semaphore(&name, 2).expect("semaphore");
        let token = semaphore
            .acquire()
            .await
            .expect("permit")
            .hand_off()
            .expect("hand off");
        let key = locks.key(&name).expect("key");
        locks
            .backend()
            .force_release(&key)
            .await
            .expect("force release");
        match locks.release_by_token(&name, &token).await {
            Err(LockError::NotHeld { .. }) => {}
            other => panic!("{client}: an ended permit's release: {other:?}"),
        }
    });
}

/// A write resumed from a hand-off is no longer its old owner's: that
/// owner's later write and read wait as a stranger's, so the process that
/// handed it off cannot re-enter beside the process that resumed it.
#[test]
fn a_resumed_write_is_not_its_old_owners() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = single(server, client, &[]).await;
        let other = single(server, client, &[]).await;
        let name = format!("resumed-write-{client}");
        let owner = distlock::OwnerToken::from_string(format!("worker-{client}")).expect("owner");
        let as_owner = distlock::AcquireOptions::new()
            .with_owner(owner)
            .with_wait(Duration::ZERO);
        let rw = locks.rw_lock(&name).expect("rw lock");
        let write = rw.write_with(&as_owner).await.expect("write");
        let token = write.hand_off().expect("hand off");
        let resumed = other.resume(&name, &token).await.expect("resume");
        match rw.write_with(&as_owner).await {
            Err(LockError::NotAcquired { .. }) => {}
            Ok(_) => panic!("{client}: the old owner wrote beside the resumed write"),
            Err(err) => panic!("{client}: the old owner's write: {err}"),
        }
        match rw.read_with(&as_owner).await {
            Err(LockError::NotAcquired { .. }) => {}
            Ok(_) => panic!("{client}: the old owner read beside the resumed write"),
            Err(err) => panic!("{client}: the old owner's read: {err}"),
        }
        resumed.release().await.expect("release");
    });
}

/// A hold whose owner has another hold beside it, one of the two a write
/// (a write beside the owner's read or re-entered write, a read beside the
/// owner's write), is not taken over alone: the two would be two owners'
/// holds, a writer beside another hold. The resume is refused, and both
/// holds stay as they were.
#[test]
fn a_hold_beside_its_owners_other_hold_is_not_resumed() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = single(server, client, &[]).await;
        let other = single(server, client, &[]).await;
        for case in [
            "write beside a read",
            "write beside a write",
            "read beside a write",
        ] {
            let name = format!("split-owner-{client}-{}", case.replace(' ', "-"));
            let rw = locks.rw_lock(&name).expect("rw lock");
            let write = rw.write().await.expect("write");
            let as_owner = distlock::AcquireOptions::new()
                .with_owner(write.owner().clone())
                .with_wait(Duration::ZERO);
            let (beside, handed) = match case {
                "write beside a write" => {
                    let again = rw.write_with(&as_owner).await.expect("re-entered write");
                    (distlock::LockGuard::from(write), again.hand_off())
                }
                "read beside a write" => {
                    let read = rw.read_with(&as_owner).await.expect("the owner's read");
                    (distlock::LockGuard::from(write), read.hand_off())
                }
                _ => {
                    let read = rw.read_with(&as_owner).await.expect("the owner's read");
                    (distlock::LockGuard::from(read), write.hand_off())
                }
            };
            let token = handed.expect("hand off");
            match other.resume(&name, &token).await {
                Err(LockError::HandOffRefused { .. }) => {}
                Ok(_) => panic!("{client}: a {case} was resumed"),
                Err(err) => panic!("{client}: the resume of a {case}: {err}"),
            }
            assert!(
                beside.is_valid(),
                "{client}: {case}: the other hold was lost"
            );
            locks
                .release_by_token(&name, &token)
                .await
                .expect("the handed-off hold, released by its token");
            beside.release().await.expect("release");
            assert!(
                !locks.inspect(&name).await.expect("inspect").is_held(),
                "{client}: {case}"
            );
        }
    });
}
