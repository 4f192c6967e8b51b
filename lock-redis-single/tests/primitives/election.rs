//! Leader election on the single-node strategy, on both clients: campaign,
//! proclaim, resign and observe; terms that grow with each leader; a leader
//! that stops renewing (a pause, a partition) or whose server restarts
//! without persistence learns it through `lost()` and observers see it go;
//! `run_while_leader` campaigns again after a loss; bad input is refused.

use std::time::{Duration, Instant};

use lock_core::{
    ClientKind, Election, GrantOptions, Leader, LockError, LossReason, Observer,
    MAX_LEADER_VALUE_LEN,
};
use lock_testkit::contract::at_once;
use lock_testkit::contract::fast_config;
use lock_testkit::contract::waiting_up_to;
use lock_testkit::waiters::until_subscribed;
use lock_testkit::RedisServer;

use super::{manager, manager_with, unrenewed, with_counter_ttl};

/// The observer's next state, within `within`.
async fn next(observer: &mut Observer, within: Duration) -> Option<Leader> {
    tokio::time::timeout(within, observer.changed())
        .await
        .expect("no change seen in time")
        .expect("observe")
}

fn term_and_value(leader: &Option<Leader>) -> Option<(u64, String)> {
    leader
        .as_ref()
        .map(|leader| (leader.term.get(), leader.value.clone()))
}

/// A campaign wins a free election and proclaims; a new value is seen
/// without a new term; a waiting campaigner wins after a resignation, in
/// a greater term; observers see each state within milliseconds, woken by
/// the election's messages.
async fn campaign_proclaim_resign_observe(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let election = locks.election("scheduler").expect("election");
    let mut observer = election.observe().await.expect("observe");
    assert_eq!(next(&mut observer, Duration::from_secs(2)).await, None);
    let mut first = election.campaign("host-a").await.expect("campaign");
    assert_eq!(first.value(), "host-a");
    let term = first.term().get();
    let seen = next(&mut observer, Duration::from_millis(800)).await;
    assert_eq!(term_and_value(&seen), Some((term, "host-a".to_owned())));
    let read = election.leader().await.expect("leader").expect("a leader");
    assert_eq!((read.term.get(), read.value.as_str()), (term, "host-a"));
    assert!(read
        .remaining
        .is_some_and(|left| left > Duration::from_secs(20)));
    // A second campaigner, of another process, waits: asleep once its
    // process listens for the election's messages beside the observer's.
    let other = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let second = {
        let election = other.election("scheduler").expect("election");
        tokio::spawn(async move { election.campaign("host-b").await })
    };
    let key = locks.key("scheduler").expect("key");
    until_subscribed(&server, &key, 2).await;
    assert!(!second.is_finished(), "two leaders");
    first.proclaim("host-a:9090").await.expect("proclaim");
    let seen = next(&mut observer, Duration::from_millis(800)).await;
    assert_eq!(
        term_and_value(&seen),
        Some((term, "host-a:9090".to_owned()))
    );
    let resigned = Instant::now();
    first.resign().await.expect("resign");
    let second = second.await.expect("task").expect("elected");
    assert!(
        resigned.elapsed() < Duration::from_secs(1),
        "woken by a timer, not the resignation"
    );
    assert!(second.term().get() > term, "{} after {term}", second.term());
    // The observer sees no leader or, coalesced, the new one; never the old.
    let mut seen = next(&mut observer, Duration::from_millis(800)).await;
    if seen.is_none() {
        seen = next(&mut observer, Duration::from_millis(800)).await;
    }
    assert_eq!(
        term_and_value(&seen),
        Some((second.term().get(), "host-b".to_owned()))
    );
    second.resign().await.expect("resign");
    assert_eq!(next(&mut observer, Duration::from_millis(800)).await, None);
    assert_eq!(election.leader().await.expect("leader"), None);
}

/// A leader that stops renewing (as a paused or partitioned one does)
/// loses at its deadline, observers see no leader once its lease has run
/// out, and the next leader's term is greater.
async fn a_leader_that_stops_renewing_is_deposed(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let stopped = unrenewed(kind, &server, Duration::from_millis(400)).await;
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let election = locks.election("paused").expect("election");
    let mut observer = election.observe().await.expect("observe");
    assert_eq!(next(&mut observer, Duration::from_secs(2)).await, None);
    let old = stopped
        .election("paused")
        .expect("election")
        .campaign("stopped")
        .await
        .expect("campaign");
    let seen = next(&mut observer, Duration::from_secs(1)).await;
    assert_eq!(
        term_and_value(&seen).map(|(_, value)| value),
        Some("stopped".to_owned())
    );
    let reason = tokio::time::timeout(Duration::from_secs(2), old.lost())
        .await
        .expect("the leader never learnt it was deposed");
    assert_eq!(reason, Some(LossReason::Expired));
    assert!(!old.is_valid());
    // Expiry publishes nothing: the observer's timer finds it.
    assert_eq!(next(&mut observer, Duration::from_secs(2)).await, None);
    let new = election.campaign("next").await.expect("campaign");
    assert!(new.term() > old.term());
    new.resign().await.expect("resign");
}

/// A server restarted without persistence under a leader: the leader
/// learns it at its next renewal, observers see no leader, and the next
/// leader's term is still greater, from a counter with a TTL (tokens from
/// the server's clock).
async fn a_restart_without_persistence_deposes_the_leader(kind: ClientKind) {
    let mut server = RedisServer::start().expect("start");
    let counter_ttl = Duration::from_secs(60);
    let locks = with_counter_ttl(kind, &server, Duration::from_millis(600), counter_ttl).await;
    let election = locks.election("restart").expect("election");
    let leader = election.campaign("before").await.expect("campaign");
    let mut observer = election.observe().await.expect("observe");
    let seen = next(&mut observer, Duration::from_secs(2)).await;
    assert_eq!(
        term_and_value(&seen).map(|(_, value)| value),
        Some("before".to_owned())
    );
    tokio::task::block_in_place(|| server.restart()).expect("restart");
    let reason = tokio::time::timeout(Duration::from_secs(5), leader.lost())
        .await
        .expect("the leader kept believing it led");
    assert!(reason.is_some(), "resigned?");
    assert_eq!(next(&mut observer, Duration::from_secs(5)).await, None);
    let next_leader = election
        .campaign_with("after", &waiting_up_to(Duration::from_secs(5)))
        .await
        .expect("campaign after the restart");
    assert!(
        next_leader.term() > leader.term(),
        "{} after {}",
        next_leader.term(),
        leader.term()
    );
    next_leader.resign().await.expect("resign");
}

/// `run_while_leader` runs the work under each term it wins: when the
/// leadership is lost (its key deleted behind its back), the work is
/// dropped and the election campaigned again, in a greater term.
async fn run_while_leader_campaigns_again_after_a_loss(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_millis(300))).await;
    let election = locks.election("worker").expect("election");
    let (terms, mut started) = tokio::sync::mpsc::unbounded_channel();
    let runner = {
        let election = election.clone();
        tokio::spawn(async move {
            election
                .run_while_leader("me", move |lease| {
                    let terms = terms.clone();
                    async move {
                        let _ = terms.send(lease.fencing_token().expect("a term").get());
                        std::future::pending::<()>().await
                    }
                })
                .await
        })
    };
    let first = tokio::time::timeout(Duration::from_secs(3), started.recv())
        .await
        .expect("never led")
        .expect("a term");
    server.admin(&["DEL", "lock:{worker}"]).expect("DEL");
    let second = tokio::time::timeout(Duration::from_secs(3), started.recv())
        .await
        .expect("never led again")
        .expect("a term");
    assert!(second > first, "{second} after {first}");
    runner.abort();
}

/// A proclaim that finds another leader's lock ends this leadership at
/// once: `lost()` completes and `is_valid()` is false, not only at the
/// next renewal.
async fn a_refused_proclaim_ends_the_leadership(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(30))).await;
    let election = locks.election("usurped").expect("election");
    let mut old = election.campaign("old").await.expect("campaign");
    server.admin(&["DEL", "lock:{usurped}"]).expect("DEL");
    let new = election.campaign("new").await.expect("campaign");
    assert!(matches!(
        old.proclaim("still me").await,
        Err(LockError::LeaseLost { .. })
    ));
    assert!(
        !old.is_valid(),
        "a refused proclaim left the old leader valid"
    );
    let reason = tokio::time::timeout(Duration::from_millis(100), old.lost())
        .await
        .expect("lost() did not complete");
    assert_eq!(reason, Some(LossReason::NotHeld));
    let leader = election.leader().await.expect("leader").expect("a leader");
    assert_eq!((leader.term, leader.value.as_str()), (new.term(), "new"));
    new.resign().await.expect("resign");
}

/// An observer's stream ends after an error it cannot retry.
async fn an_observer_stream_ends_after_an_error(kind: ClientKind) {
    use futures::StreamExt as _;
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let permit = at_once(
        locks
            .semaphore("taken", 2)
            .expect("semaphore")
            .try_acquire(),
    )
    .await;
    let observer = locks
        .election("taken")
        .expect("election")
        .observe()
        .await
        .expect("observe");
    let mut stream = Box::pin(observer.into_stream());
    let first = tokio::time::timeout(Duration::from_secs(2), stream.next())
        .await
        .expect("an item");
    assert!(
        matches!(first, Some(Err(LockError::Corrupted { .. }))),
        "{first:?}"
    );
    let after = tokio::time::timeout(Duration::from_secs(2), stream.next())
        .await
        .expect("the end");
    assert!(after.is_none(), "{after:?}");
    permit.release().await.expect("release");
}

/// A value over the limit, an election without fencing tokens, and an
/// election over a semaphore's key are typed errors.
async fn bad_input_is_refused(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let locks = manager(kind, &server, fast_config(Duration::from_secs(5))).await;
    let election = locks.election("bad").expect("election");
    let long = "x".repeat(MAX_LEADER_VALUE_LEN + 1);
    assert!(matches!(
        election.campaign(&long).await,
        Err(LockError::InvalidConfig { field, .. }) if field == "value"
    ));
    assert!(locks.election("").is_err());
    let unfenced = manager_with(
        kind,
        &server,
        fast_config(Duration::from_secs(5)).with_fencing(false),
        GrantOptions::default().with_fencing(false),
    )
    .await;
    assert!(matches!(
        unfenced.election("bad"),
        Err(LockError::InvalidConfig { field, .. }) if field == "fencing"
    ));
    let permit = at_once(
        locks
            .semaphore("shared-name", 2)
            .expect("semaphore")
            .try_acquire(),
    )
    .await;
    let election = locks.election("shared-name").expect("election");
    assert!(matches!(
        election.leader().await,
        Err(LockError::Corrupted { .. })
    ));
    permit.release().await.expect("release");
}

/// Elections need a single-node backend: used through one, they work;
/// `Election` is `Send`, so a campaign can run in a task.
fn _election_is_send(election: Election) -> impl Send {
    election
}

lock_testkit::client_tests!(
    campaign_proclaim_resign_observe,
    a_leader_that_stops_renewing_is_deposed,
    a_restart_without_persistence_deposes_the_leader,
    run_while_leader_campaigns_again_after_a_loss,
    a_refused_proclaim_ends_the_leadership,
    an_observer_stream_ends_after_an_error,
    bad_input_is_refused,
);
