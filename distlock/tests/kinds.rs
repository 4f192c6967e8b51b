//! Primitives of different kinds that meet on one name, on both clients: a
//! name held by one kind is held for every other kind, an attempt that finds
//! it held writes nothing (no fencing token used up, no place taken, no key
//! made), and the holder keeps its lease, its token and its release.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::time::{Duration, Instant};

use distlock::state::LockState;
use distlock::{ClientKind, LockError, LockGuard, LockManager};
use lock_testkit::{AdminReply, RedisServer};

mod common;

/// Every way a name can be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A plain single-node lock (the default fenced acquire).
    Lock,
    /// A single-node lock in fair mode.
    Fair,
    /// A reentrant lock.
    Reentrant,
    /// A read of the name's read-write lock.
    Read,
    /// A write of the name's read-write lock.
    Write,
    /// A permit of the name's semaphore.
    Permit,
    /// A multi-key lock of the name and another.
    Multi,
}

const KINDS: [Kind; 7] = [
    Kind::Lock,
    Kind::Fair,
    Kind::Reentrant,
    Kind::Read,
    Kind::Write,
    Kind::Permit,
    Kind::Multi,
];

/// One manager per way of taking a lock, on one server and client.
struct Managers {
    single: LockManager,
    fair: LockManager,
    reentrant: LockManager,
}

impl Managers {
    async fn connect(server: &RedisServer, client: ClientKind, extra: &[(&str, &str)]) -> Self {
        let connect = |mode: &'static str| {
            let config = common::config(mode, [server], client, extra);
            async move { distlock::connect(&config).await.expect("connect") }
        };
        Managers {
            single: connect("single").await,
            fair: connect("fair").await,
            reentrant: connect("reentrant").await,
        }
    }

    /// One attempt of `kind` on `name`, without waiting.
    async fn try_take(&self, kind: Kind, name: &str) -> Result<Option<LockGuard>, LockError> {
        match kind {
            Kind::Lock => self.single.try_acquire(name).await,
            Kind::Fair => self.fair.try_acquire(name).await,
            Kind::Reentrant => self.reentrant.try_acquire(name).await,
            Kind::Read => Ok(self.single.rw_lock(name)?.try_read().await?.map(Into::into)),
            Kind::Write => Ok(self
                .single
                .rw_lock(name)?
                .try_write()
                .await?
                .map(Into::into)),
            Kind::Permit => Ok(self
                .single
                .semaphore(name, 3)?
                .try_acquire()
                .await?
                .map(Into::into)),
            Kind::Multi => {
                self.single
                    .multi_lock([name.to_owned(), format!("{name}-other")])?
                    .try_acquire()
                    .await
            }
        }
    }

    /// `kind` on `name`, which must be free, at once.
    async fn taken(&self, kind: Kind, name: &str) -> LockGuard {
        match self.try_take(kind, name).await {
            Ok(Some(guard)) => guard,
            Ok(None) => panic!("{kind:?} on {name}: held"),
            Err(err) => panic!("{kind:?} on {name}: {err}"),
        }
    }

    /// `kind` on `name`, waiting up to the config's wait timeout.
    async fn take(&self, kind: Kind, name: &str) -> Result<LockGuard, LockError> {
        match kind {
            Kind::Lock => self.single.acquire(name).await,
            Kind::Fair => self.fair.acquire(name).await,
            Kind::Reentrant => self.reentrant.acquire(name).await,
            Kind::Read => Ok(self.single.rw_lock(name)?.read().await?.into()),
            Kind::Write => Ok(self.single.rw_lock(name)?.write().await?.into()),
            Kind::Permit => Ok(self.single.semaphore(name, 3)?.acquire().await?.into()),
            Kind::Multi => {
                self.single
                    .multi_lock([name.to_owned(), format!("{name}-other")])?
                    .acquire()
                    .await
            }
        }
    }
}

/// Every key on `server` with its type and serialized value, sorted: what
/// an attempt must leave as it found it.
fn snapshot(server: &RedisServer) -> Vec<(String, AdminReply)> {
    let type_and_digest =
        "redis.call('type', key)['ok'] .. ' ' .. redis.sha1hex(redis.call('dump', key))";
    lock_testkit::peek::keys_with(server, type_and_digest)
}

/// For every pair of kinds and every client: a name held by the first is
/// held for the second, whose attempt writes nothing; the holder then renews
/// and releases as if nothing happened, and the second gets the name.
#[test]
fn a_name_held_by_one_kind_is_held_for_every_other() {
    lock_testkit::on_every_client(async |server, client| {
        let managers = Managers::connect(server, client, &[]).await;
        for holder in KINDS {
            for attempt in KINDS {
                let pair = format!("{client}: {holder:?} then {attempt:?}");
                // Shared holds of one kind are no conflict.
                if holder == attempt && matches!(holder, Kind::Read | Kind::Permit) {
                    continue;
                }
                let name = format!("mix-{client}-{holder:?}-{attempt:?}");
                let held = managers.taken(holder, &name).await;
                let before = snapshot(server);
                match managers.try_take(attempt, &name).await {
                    Ok(None) => {}
                    Ok(Some(_)) => panic!("{pair}: two holders"),
                    Err(err) => panic!("{pair}: the attempt failed: {err}"),
                }
                assert_eq!(before, snapshot(server), "{pair}: the attempt wrote");
                held.extend(Duration::from_secs(5))
                    .await
                    .unwrap_or_else(|err| panic!("{pair}: the holder's renewal: {err}"));
                held.release()
                    .await
                    .unwrap_or_else(|err| panic!("{pair}: the holder's release: {err}"));
                // Free again after the release.
                let next = managers.taken(attempt, &name).await;
                next.release().await.expect("release");
            }
        }
    });
}

/// A latch holds its name for every kind, whose attempts write nothing;
/// and a latch's calls on a name any kind holds are refused as
/// `WrongKind`, writing nothing, the holder keeping its lease. On both
/// clients, through the front door.
#[test]
fn a_latch_and_every_kind_exclude_each_other() {
    lock_testkit::on_every_client(async |server, client| {
        let managers = Managers::connect(server, client, &[]).await;
        for kind in KINDS {
            let pair = format!("{client}: a latch, then {kind:?}");
            let name = format!("latch-{client}-{kind:?}");
            let latch = managers.single.latch(&name).expect("latch");
            latch.set_count(2).await.expect("set");
            let before = snapshot(server);
            match managers.try_take(kind, &name).await {
                Ok(None) => {}
                Ok(Some(_)) => panic!("{pair}: a hold beside the latch"),
                Err(err) => panic!("{pair}: the attempt failed: {err}"),
            }
            assert_eq!(before, snapshot(server), "{pair}: the attempt wrote");
            assert!(latch.delete().await.expect("delete"), "{pair}");

            let pair = format!("{client}: {kind:?}, then a latch");
            let held = managers.taken(kind, &name).await;
            let before = snapshot(server);
            for (call, result) in [
                ("set", latch.set_count(1).await.map(drop)),
                ("count down", latch.count_down_as("a").await.map(drop)),
                ("delete", latch.delete().await.map(drop)),
            ] {
                match result {
                    Err(LockError::WrongKind {
                        wanted: "latch", ..
                    }) => {}
                    other => panic!("{pair}: {call}: {other:?}"),
                }
            }
            assert_eq!(before, snapshot(server), "{pair}: the latch wrote");
            held.release()
                .await
                .unwrap_or_else(|err| panic!("{pair}: the holder's release: {err}"));
        }
    });
}

/// A waiter of one kind behind a holder of another gets the name once the
/// holder releases it (fair locks behind readers included), on both clients.
#[test]
fn a_waiter_of_one_kind_gets_a_name_another_kind_released() {
    lock_testkit::on_every_client(async |server, client| {
        let extra = [("DISTLOCK_WAIT_TIMEOUT", "5s")];
        let managers = Managers::connect(server, client, &extra).await;
        for (holder, waiter) in [
            (Kind::Read, Kind::Fair),
            (Kind::Write, Kind::Fair),
            (Kind::Fair, Kind::Write),
            (Kind::Lock, Kind::Write),
            (Kind::Read, Kind::Lock),
            (Kind::Permit, Kind::Read),
            (Kind::Read, Kind::Permit),
        ] {
            let pair = format!("{client}: {holder:?} then {waiter:?}");
            let name = format!("wait-{client}-{holder:?}-{waiter:?}");
            let held = managers.taken(holder, &name).await;
            let key = distlock::backend::LockKey::new("lock:", &name).expect("key");
            let started = Instant::now();
            let release = async {
                // The waiter asleep: subscribed to the name's releases.
                lock_testkit::waiters::until_subscribed(server, &key, 1).await;
                held.release().await.expect("the holder's release");
            };
            let (got, ()) = tokio::join!(managers.take(waiter, &name), release);
            let got = got.unwrap_or_else(|err| panic!("{pair}: the waiter: {err}"));
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{pair}: waited {:?}",
                started.elapsed()
            );
            got.release().await.expect("release");
        }
    });
}

/// The fencing token `status` shows for a held lock is its holder's, however
/// many attempts found it held; a read's epoch is the last write's token.
#[test]
fn failed_attempts_issue_no_tokens() {
    lock_testkit::on_every_client(async |server, client| {
        let managers = Managers::connect(server, client, &[]).await;
        let name = format!("tokens-{client}");
        let holder = managers.single.try_acquire(&name).await.expect("acquire");
        let holder = holder.expect("a free lock");
        let token = holder.fencing_token().expect("a token");
        for _ in 0..3 {
            let attempt = managers.single.try_acquire(&name).await.expect("attempt");
            assert!(attempt.is_none(), "{client}: two holders");
        }
        match LockState::from(managers.single.inspect(&name).await.expect("inspect")) {
            LockState::Held { token: shown, .. } => {
                assert_eq!(shown, Some(token), "{client}: status shows another token")
            }
            other => panic!("{client}: {other:?}"),
        }
        holder.release().await.expect("release");

        let rw = managers.single.rw_lock(&name).expect("rw lock");
        let write = rw.try_write().await.expect("write").expect("free");
        let written = write.fencing_token().expect("a write token");
        write.release().await.expect("release");
        let read = rw.try_read().await.expect("read").expect("free");
        for _ in 0..3 {
            let attempt = managers.single.try_acquire(&name).await.expect("attempt");
            assert!(attempt.is_none(), "{client}: a lock beside a read");
        }
        let second = rw.try_read().await.expect("read").expect("shared");
        assert_eq!(
            second.fencing_token(),
            Some(written),
            "{client}: a read's epoch is not the last write's token"
        );
        read.release().await.expect("release");
        second.release().await.expect("release");
    });
}

/// The length of `name`'s line of waiters (fair locks, fair semaphores and
/// writers share it), and how many places it has.
fn line(server: &RedisServer, name: &str) -> (i64, i64) {
    let count = |args: &[&str]| {
        server
            .admin(args)
            .expect("count")
            .as_int()
            .expect("a count")
    };
    (
        count(&["LLEN", &format!("lock:{{{name}}}:queue")]),
        count(&["ZCARD", &format!("lock:{{{name}}}:waiters")]),
    )
}

/// A waiter that gives up on a name another kind holds leaves the line at
/// once, so it holds back nobody (readers least of all) after it left.
#[test]
fn a_waiter_that_gives_up_on_another_kind_leaves_the_line() {
    lock_testkit::on_every_client(async |server, client| {
        let extra = [("DISTLOCK_WAIT_TIMEOUT", "300ms")];
        let managers = Managers::connect(server, client, &extra).await;
        for (holder, waiter) in [
            (Kind::Lock, Kind::Write),
            (Kind::Reentrant, Kind::Write),
            (Kind::Permit, Kind::Write),
            (Kind::Read, Kind::Fair),
            (Kind::Permit, Kind::Fair),
        ] {
            let pair = format!("{client}: {holder:?} then {waiter:?}");
            let name = format!("leave-{client}-{holder:?}-{waiter:?}");
            let held = managers.taken(holder, &name).await;
            match managers.take(waiter, &name).await {
                Err(LockError::NotAcquired { .. }) => {}
                other => panic!("{pair}: {other:?}"),
            }
            // It leaves in the background; a place that stays is kept
            // for twice the waiter lease (4 s).
            let left = format!("{pair}: the place left");
            lock_testkit::eventually(Duration::from_secs(1), &left, || async {
                (line(server, &name) == (0, 0)).then_some(())
            })
            .await;
            held.release().await.expect("release");
        }
    });
}

/// A fair semaphore's waiter behind another kind's hold keeps its place in
/// line, as a fair lock's waiter and a writer do: readers that come later
/// stay behind it, and it gets its permit once the name is free.
#[test]
fn a_fair_permit_waiter_keeps_its_place_behind_another_kind() {
    lock_testkit::on_every_client(async |server, client| {
        let extra = [("DISTLOCK_WAIT_TIMEOUT", "5s")];
        let managers = Managers::connect(server, client, &extra).await;
        let name = format!("fair-permit-{client}");
        let rw = managers.single.rw_lock(&name).expect("rw lock");
        let read = rw.try_read().await.expect("read").expect("free");
        let semaphore = managers.fair.semaphore(&name, 2).expect("semaphore");
        let waiter = tokio::spawn(async move { semaphore.acquire().await });
        let placed = format!("{client}: the waiter in line");
        lock_testkit::eventually(Duration::from_secs(2), &placed, || async {
            (line(server, &name) == (1, 1)).then_some(())
        })
        .await;
        let later = rw.try_read().await.expect("a later read");
        assert!(later.is_none(), "{client}: a later reader went ahead");
        read.release().await.expect("release");
        let permit = waiter.await.expect("join").expect("the waiter's permit");
        permit.release().await.expect("release");
    });
}

/// A kind's companion hash left behind (the name's sorted set deleted by
/// hand or by a forced release) names no hold of another kind that takes
/// the name: that name is held, not corrupted, both ways.
#[test]
fn a_leftover_companion_hash_is_no_hold() {
    lock_testkit::on_every_client(async |server, client| {
        let managers = Managers::connect(server, client, &[]).await;
        for (first, then, attempt) in [
            (Kind::Permit, Kind::Write, Kind::Permit),
            (Kind::Read, Kind::Permit, Kind::Write),
        ] {
            let pair = format!("{client}: {first:?}, {then:?}, then {attempt:?}");
            let name = format!("leftover-{client}-{first:?}");
            let gone = managers.taken(first, &name).await;
            server
                .admin(&["DEL", &format!("lock:{{{name}}}")])
                .expect("DEL");
            let held = managers.taken(then, &name).await;
            match managers.try_take(attempt, &name).await {
                Ok(None) => {}
                other => panic!("{pair}: {other:?}"),
            }
            held.release().await.expect("release");
            drop(gone);
        }
    });
}

/// A stale holder of one kind (its lease ran out unrenewed) whose name
/// another kind now holds renews and releases nothing, and writes nothing
/// of the other kind's holds, expired ones included.
#[test]
fn a_stale_holder_writes_nothing_of_another_kind() {
    lock_testkit::on_every_client(async |server, client| {
        let short = [
            ("DISTLOCK_TTL", "300ms"),
            ("DISTLOCK_WATCHDOG__ENABLED", "false"),
        ];
        let stale = Managers::connect(server, client, &short).await;
        let managers = Managers::connect(server, client, &[]).await;
        for (first, then) in [(Kind::Read, Kind::Permit), (Kind::Permit, Kind::Read)] {
            let pair = format!("{client}: {first:?}, then {then:?}");
            let name = format!("stale-{client}-{first:?}");
            let old = stale.taken(first, &name).await;
            tokio::time::sleep(Duration::from_millis(400)).await;
            // One of the new kind's holds expires unrenewed beside a
            // live one.
            let expiring = stale.try_take(then, &name).await.expect("next");
            let live = managers.try_take(then, &name).await.expect("next");
            tokio::time::sleep(Duration::from_millis(400)).await;
            let before = snapshot(server);
            assert!(old.extend(Duration::from_secs(5)).await.is_err(), "{pair}");
            assert_eq!(before, snapshot(server), "{pair}: a stale renewal wrote");
            assert!(old.release().await.is_err(), "{pair}");
            assert_eq!(before, snapshot(server), "{pair}: a stale release wrote");
            drop(expiring);
            live.expect("room")
                .release()
                .await
                .expect("the live hold's release");
        }
    });
}

/// A hand-off token whose lease ran out while another kind took the name
/// (`distlock extend` and `release` of a lease kept across a script's
/// steps) renews and releases nothing, and is told the name is another's:
/// the other kind's keys are a hold, not corrupted data.
#[test]
fn a_token_of_a_lost_lease_beside_another_kind_is_not_the_owners() {
    lock_testkit::on_every_client(async |server, client| {
        let short = [
            ("DISTLOCK_TTL", "300ms"),
            ("DISTLOCK_WATCHDOG__ENABLED", "false"),
        ];
        let stale = Managers::connect(server, client, &short).await;
        let managers = Managers::connect(server, client, &[]).await;
        // Every pair's stale token first, so that one sleep outlives them.
        let mut tokens = Vec::new();
        for first in KINDS {
            for then in KINDS.into_iter().filter(|&then| then != first) {
                let name = format!("token-{client}-{first:?}-{then:?}");
                match stale.taken(first, &name).await.hand_off() {
                    Ok(token) => tokens.push((first, then, name, token)),
                    Err(LockError::HandOffUnsupported { .. }) => {}
                    Err(err) => panic!("{client}: {first:?}'s hand-off: {err}"),
                }
            }
        }
        // Every kind hands off but the reentrant lock and the multi-key lock.
        for kind in [
            Kind::Lock,
            Kind::Fair,
            Kind::Read,
            Kind::Write,
            Kind::Permit,
        ] {
            let made = tokens.iter().any(|(first, ..)| *first == kind);
            assert!(made, "{client}: no {kind:?} token");
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        for (first, then, name, token) in tokens {
            let pair = format!("{client}: {first:?}, then {then:?}");
            let manager = match first {
                Kind::Fair => &managers.fair,
                Kind::Reentrant => &managers.reentrant,
                _ => &managers.single,
            };
            let new = managers.taken(then, &name).await;
            let before = snapshot(server);
            match manager
                .extend_by_token(&name, &token, Duration::from_secs(5))
                .await
            {
                Err(LockError::NotOwner { .. }) => {}
                other => panic!("{pair}: extend by token: {other:?}"),
            }
            match manager.release_by_token(&name, &token).await {
                Err(LockError::NotOwner { .. }) => {}
                other => panic!("{pair}: release by token: {other:?}"),
            }
            assert_eq!(before, snapshot(server), "{pair}: the token's calls wrote");
            new.release().await.expect("the new holder's release");
        }
    });
}

/// A fair semaphore's waiter that asks for another limit than the stored
/// one is told so at once, not after another kind's hold of the name ends.
#[test]
fn a_mismatched_limit_is_refused_behind_another_kind() {
    lock_testkit::on_every_client(async |server, client| {
        let extra = [("DISTLOCK_WAIT_TIMEOUT", "3s")];
        let managers = Managers::connect(server, client, &extra).await;
        let name = format!("limit-{client}");
        let sized = managers.fair.semaphore(&name, 2).expect("semaphore");
        let permit = sized.try_acquire().await.expect("try").expect("room");
        permit.release().await.expect("release");
        let rw = managers.single.rw_lock(&name).expect("rw lock");
        let read = rw.try_read().await.expect("read").expect("free");
        let other = managers.fair.semaphore(&name, 3).expect("semaphore");
        match other.acquire().await {
            Err(LockError::CountMismatch { stored: 2, .. }) => {}
            other => panic!("{client}: {other:?}"),
        }
        read.release().await.expect("release");
    });
}

/// A role comes back from a lease guard only for a hold of its kind (a
/// resumed lease is a plain `LockGuard`): a mismatched `try_from` hands the
/// lease back still held, and the matching one keeps it whole.
#[test]
fn a_role_guard_comes_back_only_for_its_kind() {
    lock_testkit::on_every_client(async |server, client| {
        let managers = Managers::connect(server, client, &[]).await;
        let locks = &managers.single;
        let name = format!("roles-{client}");
        let write: LockGuard = locks
            .rw_lock(&name)
            .expect("rw lock")
            .write()
            .await
            .expect("write")
            .into();
        let write = match distlock::PermitGuard::try_from(write) {
            Err(back) => back,
            Ok(_) => panic!("{client}: a write came back as a permit"),
        };
        let write = match distlock::ReadGuard::try_from(write) {
            Err(back) => back,
            Ok(_) => panic!("{client}: a write came back as a read"),
        };
        let write = distlock::WriteGuard::try_from(write).expect("a write's guard");
        assert!(write.is_valid(), "{client}: still held");
        let state = locks.rw_lock(&name).expect("rw lock").state().await;
        assert!(
            state.expect("state").is_held(),
            "{client}: held on the server"
        );
        write.release().await.expect("release");

        let lock = locks
            .lock(&name)
            .expect("lock")
            .acquire()
            .await
            .expect("lock");
        let lock = match distlock::PermitGuard::try_from(lock) {
            Err(back) => back,
            Ok(_) => panic!("{client}: a lock came back as a permit"),
        };
        assert!(lock.is_valid(), "{client}: the lock is still held");
        lock.release().await.expect("release");

        let permit = locks
            .semaphore(&format!("{name}-permits"), 2)
            .expect("semaphore")
            .acquire_many(2)
            .await
            .expect("permit");
        let slot = permit.slot();
        let back = distlock::PermitGuard::try_from(LockGuard::from(permit)).expect("a permit");
        assert_eq!((back.slot(), back.weight()), (slot, 2), "{client}");
        back.release().await.expect("release");

        // A leadership handed off would come back a plain lock that
        // cannot proclaim: refused, and resigned.
        let election = locks.election(&format!("{name}-leader")).expect("election");
        let leadership = election.campaign("me").await.expect("campaign");
        match distlock::LeaseGuard::hand_off(leadership) {
            Err(LockError::HandOffUnsupported { .. }) => {}
            other => panic!("{client}: a leadership handed off: {other:?}"),
        }
        lock_testkit::eventually(Duration::from_secs(5), "the leadership resigned", || {
            let election = election.clone();
            async move {
                election
                    .leader()
                    .await
                    .expect("leader")
                    .is_none()
                    .then_some(())
            }
        })
        .await;
    });
}
