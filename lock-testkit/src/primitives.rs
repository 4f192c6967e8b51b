//! The contract of the primitives beside the plain lock, semaphores,
//! read-write locks, elections and latches, for every strategy on every
//! site: where
//! the backend declares them
//! ([`LockBackend::capabilities`](lock_core::LockBackend::capabilities),
//! which [`capabilities_are_declared`](crate::contract::capabilities_are_declared)
//! holds to what the strategy's tests expect), never more than the limit's
//! weight live, one slot per live permit with growing tokens, a crashed
//! holder's weight back after its TTL and not before, a writer never beside
//! another holder with growing write tokens and reads that carry the last
//! one, a dead reader's share freed at its own deadline among renewing
//! readers, multi-key holds all or nothing, one leader at a time in growing
//! terms, a latch that opens at zero and not before, a barrier's parties
//! going on together only with every one in; where it has none, a clear
//! refusal.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_core::{Capability, LeaseGuard, LockError};

use crate::contract::{
    at_once, fast_config, held_by_another, taken, waiting_up_to, BackendFactory, Deployment,
};

/// The refusal of a strategy without the primitive, when its handle is
/// made: [`LockError::Unsupported`] naming it (or a config error on
/// `fencing`, for an election without tokens), never a panic or a guess.
fn assert_refused<T: std::fmt::Debug>(
    what: &str,
    capability: Capability,
    result: Result<T, LockError>,
) {
    match result {
        Err(LockError::Unsupported {
            strategy,
            capability: named,
        }) => {
            assert_eq!(named, capability, "{what}: another capability named");
            assert!(!strategy.is_empty(), "{what}: no strategy named");
        }
        Err(LockError::InvalidConfig { field, reason }) if field == "fencing" => {
            assert!(!reason.is_empty(), "{what}: an empty reason");
        }
        other => panic!("{what}: a strategy without it answered {other:?}"),
    }
}

/// The handle `made`, where the backend declares the primitive (`has`);
/// where it does not, `None`, once `made` is seen refused as
/// [`assert_refused`] says.
fn supported<T: std::fmt::Debug>(
    has: bool,
    what: &str,
    capability: Capability,
    made: Result<T, LockError>,
) -> Option<T> {
    if has {
        return Some(made.unwrap_or_else(|err| panic!("{what}: {err}")));
    }
    assert_refused(what, capability, made);
    None
}

/// Whether the backend under test declares `capability`: what a check
/// adapts to, never the strategy's expectations, which only
/// [`capabilities_are_declared`](crate::contract::capabilities_are_declared)
/// reads.
fn declares(deployment: &Deployment, capability: Capability) -> bool {
    deployment.backend.capabilities().has(capability)
}

/// Six tasks taking permits of weight 1 and 2 of a semaphore of 3 never
/// hold more than 3 weight at once, by their own count and by the
/// server's, never share a slot while live, and each slot's tokens grow
/// with every holder.
pub async fn semaphore_never_exceeds_its_limit(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(5)));
    let has = declares(&deployment, Capability::Semaphores);
    let made = locks.semaphore("contract-pool", 3);
    let Some(semaphore) = supported(has, "a semaphore", Capability::Semaphores, made) else {
        return;
    };
    // Live weight, live slots, and the last token seen per slot.
    type Books = (u32, BTreeMap<u32, u64>, BTreeMap<u32, u64>);
    let books: Arc<Mutex<Books>> = Arc::default();
    let tasks = (0..6u32).map(|task| {
        let (semaphore, books) = (semaphore.clone(), Arc::clone(&books));
        tokio::spawn(async move {
            for round in 0..5u32 {
                let weight = 1 + (task + round) % 2;
                let options = waiting_up_to(Duration::from_secs(10));
                let permit = semaphore
                    .acquire_many_with(weight, &options)
                    .await
                    .expect("a permit");
                let slot = permit.slot();
                let token = permit.fencing_token().expect("a token").get();
                {
                    let mut books = books.lock().expect("books");
                    books.0 += weight;
                    assert!(books.0 <= 3, "{} weight live of 3", books.0);
                    assert!(slot < 3, "slot {slot} of 3");
                    assert!(books.1.insert(slot, token).is_none(), "slot {slot} twice");
                    let last = books.2.insert(slot, token).unwrap_or(0);
                    assert!(token > last, "slot {slot}: token {token} after {last}");
                }
                let used = semaphore.state().await.expect("state").used;
                assert!(used <= 3, "the server counts {used} weight live of 3");
                tokio::time::sleep(Duration::from_millis(3)).await;
                {
                    let mut books = books.lock().expect("books");
                    books.0 -= weight;
                    books.1.remove(&slot);
                }
                permit.release().await.expect("release");
            }
        })
    });
    for task in futures::future::join_all(tasks).await {
        task.expect("a task panicked");
    }
    assert_eq!(semaphore.state().await.expect("state").used, 0);
}

/// A holder that stops renewing keeps its weight until its TTL has run
/// out, then it is back; the ended permit's extend does not revive it,
/// and its release credits nothing.
pub async fn semaphore_weight_returns_after_a_crash(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let ttl = Duration::from_millis(500);
    let mut unrenewed = fast_config(ttl);
    unrenewed.watchdog.enabled = false;
    let crashed = deployment.manager(unrenewed);
    let locks = deployment.manager(fast_config(Duration::from_secs(5)));
    let has = declares(&deployment, Capability::Semaphores);
    let made = locks.semaphore("contract-crash", 2);
    let Some(ours) = supported(has, "a semaphore", Capability::Semaphores, made) else {
        return;
    };
    let theirs = crashed.semaphore("contract-crash", 2).expect("semaphore");
    let taken = Instant::now();
    let gone = at_once(theirs.try_acquire_many(2)).await;
    let permit = loop {
        let before = taken.elapsed();
        if let Some(permit) = ours.try_acquire().await.expect("try") {
            assert!(
                before + Duration::from_millis(25) >= ttl,
                "free after {before:?} of a {ttl:?} lease"
            );
            break permit;
        }
        assert!(
            taken.elapsed() < Duration::from_secs(5),
            "the weight never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Held by the live one now: a revived ended permit would make 3 of 2.
    assert!(
        gone.extend(ttl).await.is_err(),
        "an ended permit was renewed"
    );
    assert_eq!(ours.state().await.expect("state").used, 1, "revived");
    assert!(
        gone.release().await.is_err(),
        "an ended permit was released"
    );
    assert_eq!(ours.state().await.expect("state").used, 1, "credited twice");
    permit.release().await.expect("release");
}

/// Live readers, live writers, and the last write's token, by the holders'
/// own count.
type RwBooks = Mutex<(u32, u32, u64)>;

/// Holds `guard`, a write if `writing` and a read if not, for a moment:
/// a write beside no other hold with a token above every earlier write's,
/// a read beside no write with the last write's token as its epoch.
async fn hold_briefly(guard: impl LeaseGuard, books: &RwBooks, writing: bool) {
    let token = guard.fencing_token().expect("a token").get();
    {
        let mut books = books.lock().expect("books");
        if writing {
            assert_eq!((books.0, books.1), (0, 0), "a writer beside others");
            assert!(token > books.2, "write token {token} after {}", books.2);
            books.1 += 1;
            books.2 = token;
        } else {
            assert_eq!(books.1, 0, "a reader beside a writer");
            assert_eq!(token, books.2, "a read's epoch");
            books.0 += 1;
        }
    }
    tokio::time::sleep(Duration::from_millis(3)).await;
    {
        let mut books = books.lock().expect("books");
        if writing {
            books.1 -= 1;
        } else {
            books.0 -= 1;
        }
    }
    guard.release().await.expect("release");
}

/// Readers and writers over and over never put a writer beside another
/// holder; write tokens grow, each read's epoch is the last write's token,
/// and the lock's epoch is the last write's once all are done. Then a
/// reader that stops renewing leaves at its own deadline while another
/// renews through several of its TTLs; the dead one's late extend and
/// release act on nothing, and the writer gets in once the live one is
/// done.
pub async fn rw_lock_excludes_writers_and_frees_dead_readers(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(5)));
    let has = declares(&deployment, Capability::RwLocks);
    let made = locks.rw_lock("contract-rw");
    let Some(lock) = supported(has, "a read-write lock", Capability::RwLocks, made) else {
        return;
    };
    let books: Arc<RwBooks> = Arc::default();
    let wait = waiting_up_to(Duration::from_secs(20));
    let tasks = (0..5u32).map(|task| {
        let (lock, books, wait) = (lock.clone(), Arc::clone(&books), wait.clone());
        tokio::spawn(async move {
            for round in 0..5u32 {
                let writing = (task + round) % 3 == 0;
                match writing {
                    true => {
                        let write = lock.write_with(&wait).await.expect("a write");
                        hold_briefly(write, &books, true).await;
                    }
                    false => {
                        let read = lock.read_with(&wait).await.expect("a read");
                        hold_briefly(read, &books, false).await;
                    }
                }
            }
        })
    });
    for task in futures::future::join_all(tasks).await {
        task.expect("a task panicked");
    }
    let state = lock.state().await.expect("state");
    assert!(!state.is_held(), "{state:?}");
    let last_write = books.lock().expect("books").2;
    assert_eq!(
        state.epoch.get(),
        last_write,
        "the epoch after the last write"
    );
    let ttl = Duration::from_millis(500);
    let mut unrenewed = fast_config(ttl);
    unrenewed.watchdog.enabled = false;
    let crashed = deployment.manager(unrenewed);
    let renewing = deployment.manager(fast_config(Duration::from_millis(300)));
    let taken = Instant::now();
    let dead = at_once(crashed.rw_lock("contract-rw").expect("rw lock").try_read()).await;
    let ours = renewing.rw_lock("contract-rw").expect("rw lock");
    let live = ours.try_read().await.expect("try").expect("readers share");
    let readers = || async { ours.state().await.expect("state").readers().count() };
    assert_eq!(readers().await, 2);
    loop {
        let before = taken.elapsed();
        if readers().await == 1 {
            assert!(
                before + Duration::from_millis(25) >= ttl,
                "a reader gone after {before:?} of a {ttl:?} lease"
            );
            break;
        }
        assert!(
            taken.elapsed() < Duration::from_secs(5),
            "the dead reader never left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(dead.extend(ttl).await.is_err(), "an ended read was renewed");
    assert!(dead.release().await.is_err(), "an ended read was released");
    assert_eq!(readers().await, 1, "the dead reader's late calls");
    // The live reader renews through several of its TTLs.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        live.is_valid(),
        "the renewing reader lost: {:?}",
        live.status()
    );
    assert!(ours.try_write().await.expect("try").is_none());
    live.release().await.expect("release");
    let write = ours.try_write().await.expect("try").expect("free");
    write.release().await.expect("release");
}

/// A multi-key hold is all or nothing against a plain lock of a member,
/// holds every member once taken, has a token above every member's
/// earlier ones, and requests in opposite orders all finish with one
/// holder at a time, with names of one hash tag and names apart.
pub async fn multi_lock_is_all_or_nothing(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(5)));
    // One hash tag, the text before the `}`: one slot on a cluster.
    let names = ["contract-multi}a", "contract-multi}b"];
    let fencing = factory.capabilities().fencing;
    let made = locks.multi_lock(names);
    let has = declares(&deployment, Capability::MultiKeys);
    let Some(pair) = supported(has, "a multi-key lock", Capability::MultiKeys, made) else {
        return;
    };
    let plain = taken(&locks, names[1]).await;
    let earlier = plain.fencing_token().map_or(0, |token| token.get());
    assert!(
        pair.try_acquire().await.expect("try").is_none(),
        "one member is held"
    );
    assert!(
        !locks.inspect(names[0]).await.expect("inspect").is_held(),
        "a refused multi-key acquire took a member"
    );
    plain.release().await.expect("release");
    let held = pair.try_acquire().await.expect("try").expect("free");
    if fencing {
        let token = held.fencing_token().expect("a token").get();
        assert!(token > earlier, "{token} after {earlier}");
    }
    for name in names {
        assert!(held_by_another(&locks, name).await, "{name} free");
    }
    held.release().await.expect("release");
    let holding = Arc::new(Mutex::new(0u32));
    let tasks = (0..4u32).map(|task| {
        let order = if task % 2 == 0 {
            names
        } else {
            [names[1], names[0]]
        };
        let lock = locks.multi_lock(order).expect("multi lock");
        let holding = Arc::clone(&holding);
        tokio::spawn(async move {
            for _ in 0..10 {
                let wait = waiting_up_to(Duration::from_secs(20));
                let guard = lock.acquire_with(&wait).await.expect("acquire");
                {
                    let mut holding = holding.lock().expect("count");
                    *holding += 1;
                    assert_eq!(*holding, 1, "two holders at once");
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
                *holding.lock().expect("count") -= 1;
                guard.release().await.expect("release");
            }
        })
    });
    for task in futures::future::join_all(tasks).await {
        task.expect("a task panicked");
    }
    // Names in several slots (on a cluster: slot by slot): still all or
    // none against a plain lock of one, with a token above each one's.
    let apart = ["contract-apart-1", "contract-apart-2", "contract-apart-3"];
    let spread = locks.multi_lock(apart).expect("multi lock");
    // The name taken last held: on a cluster, the slots before it are
    // taken, then given back.
    let order: Vec<String> = spread.names().map(str::to_owned).collect();
    let (last, before) = order.split_last().expect("three names");
    // The last name's counter ahead of the others': on a cluster, the
    // slots taken first are raised to its token.
    for _ in 0..3 {
        let plain = taken(&locks, last).await;
        plain.release().await.expect("release");
    }
    let plain = taken(&locks, last).await;
    let earlier = plain.fencing_token().map_or(0, |token| token.get());
    assert!(
        spread.try_acquire().await.expect("try").is_none(),
        "one member is held"
    );
    for name in before {
        assert!(
            !locks.inspect(name).await.expect("inspect").is_held(),
            "{name} was kept by a refused multi-key acquire"
        );
    }
    if fencing {
        // A waiter sleeps until the held member's lease would end: it is
        // not woken by the slots it takes and gives back (on a cluster).
        let wait = waiting_up_to(Duration::from_millis(800));
        match spread.acquire_with(&wait).await {
            Err(LockError::NotAcquired { attempts, .. }) => assert!(
                attempts <= 10,
                "{attempts} attempts in 800 ms beside a held member"
            ),
            other => panic!("a wait beside a held member: {other:?}"),
        }
    }
    plain.release().await.expect("release");
    let held = spread.try_acquire().await.expect("try").expect("free");
    if fencing {
        let token = held.fencing_token().expect("a token").get();
        assert!(token > earlier, "{token} after {earlier}");
        for name in &order {
            let state = lock_core::LockState::from(locks.inspect(name).await.expect("inspect"));
            assert!(
                matches!(state, lock_core::LockState::Held { token: Some(t), .. } if t.get() == token),
                "{name}: {state:?}, not the hold's one token {token}"
            );
        }
    }
    held.release().await.expect("release");
}

/// Three campaigners lead one at a time, in growing terms, each seen by
/// `leader()` with its value while it leads.
pub async fn election_has_one_leader_at_a_time(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(5)));
    // The engine refuses an election's handle on a backend built without
    // fencing tokens (a term is one), by what the backend declares.
    let declared = deployment.backend.capabilities();
    let has = declared.has(Capability::Elections) && declared.fencing != Some(false);
    let made = locks.election("contract-election");
    let Some(election) = supported(has, "an election", Capability::Elections, made) else {
        return;
    };
    let leading: Arc<Mutex<(u32, Vec<u64>)>> = Arc::default();
    let campaigners = ["a", "b", "c"].map(|value| {
        let (election, leading) = (election.clone(), Arc::clone(&leading));
        tokio::spawn(async move {
            let options = waiting_up_to(Duration::from_secs(10));
            let leadership = election
                .campaign_with(value, &options)
                .await
                .expect("elected");
            {
                let mut leading = leading.lock().expect("leading");
                leading.0 += 1;
                assert_eq!(leading.0, 1, "two leaders at once");
                leading.1.push(leadership.term().get());
            }
            let read = election.leader().await.expect("leader").expect("a leader");
            assert_eq!((read.term, read.value.as_str()), (leadership.term(), value));
            tokio::time::sleep(Duration::from_millis(30)).await;
            leading.lock().expect("leading").0 -= 1;
            leadership.resign().await.expect("resign");
        })
    });
    for campaigner in campaigners {
        campaigner.await.expect("a campaigner panicked");
    }
    let terms = leading.lock().expect("leading").1.clone();
    assert_eq!(terms.len(), 3);
    assert!(
        terms.windows(2).all(|pair| pair[0] < pair[1]),
        "terms {terms:?}"
    );
    assert_eq!(election.leader().await.expect("leader"), None);
}

/// A latch of three, counted down by three parties with ids (one of them
/// twice, as a retry), lets its waiter go on at the third id and not
/// before, on every site (its keys share the name's slot on a cluster).
pub async fn latch_opens_exactly_at_zero(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(5)));
    let declared = deployment.backend.capabilities();
    let made = locks.latch("contract-latch");
    let Some(latch) = supported(
        declared.has(Capability::Latches),
        "a latch",
        Capability::Latches,
        made,
    ) else {
        return;
    };
    assert!(latch.set_count(3).await.expect("set"));
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait().await })
    };
    for (id, left) in [("a", 2), ("a", 2), ("b", 1)] {
        assert_eq!(latch.count_down_as(id).await.expect("count down"), left);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "the latch opened above zero");
    assert_eq!(latch.count_down_as("c").await.expect("count down"), 0);
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter went on")
        .expect("the waiter's task")
        .expect("wait");
    assert!(latch.delete().await.expect("delete"));
}

/// A barrier of three lets its parties go on only once all three are in,
/// refuses a fourth while the round is under way, and lets them leave
/// together, on every site (its keys share the name's slot on a cluster).
pub async fn barrier_opens_with_every_party_in(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(5)));
    let declared = deployment.backend.capabilities();
    let made = locks.barrier("contract-barrier", 3);
    let Some(barrier) = supported(
        declared.has(Capability::Barriers),
        "a barrier",
        Capability::Barriers,
        made,
    ) else {
        return;
    };
    let early: Vec<_> = (0..2)
        .map(|_| {
            let barrier = barrier.clone();
            tokio::spawn(async move { barrier.enter().await })
        })
        .collect();
    crate::eventually(Duration::from_secs(5), "two parties in", || async {
        (barrier.state().await.ok()?.entered == 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        early.iter().all(|party| !party.is_finished()),
        "a party went on with two of three in"
    );
    let last = barrier.enter().await.expect("the last party");
    let mut parties = vec![last];
    for party in early {
        let party = tokio::time::timeout(Duration::from_secs(5), party)
            .await
            .expect("the round opened for every party")
            .expect("a party's task");
        parties.push(party.expect("entered"));
    }
    match barrier.enter().await {
        Err(LockError::BarrierFull { entered: 3, .. }) => {}
        other => panic!("a fourth party: {:?}", other.map(drop)),
    }
    let leaves = parties.into_iter().map(|party| party.leave());
    for left in futures::future::join_all(leaves).await {
        left.expect("leave");
    }
    assert_eq!(barrier.state().await.expect("state").entered, 0);
}
