//! Redlock under faults, with real servers: nodes down from the start, killed
//! while locks are held and contended, a majority down, a node frozen past the
//! per-node timeout, a node slow but alive, wrong passwords, and config errors.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::ConnectOptions;
use lock_core::{ClientKind, LockConfig, LockError, LockManager, NodeUrl};
use lock_redlock::{RedlockBackend, RedlockOptions};
use lock_testkit::contract::alone_inside;
use lock_testkit::contract::taken;
use lock_testkit::contract::waiting_up_to;
use lock_testkit::contract::{fast_config, fast_options};
use lock_testkit::{DelayProxy, RedisServer};

const NODE_TIMEOUT: Duration = Duration::from_millis(50);

fn servers(count: usize) -> Vec<RedisServer> {
    RedisServer::start_many(count).expect("start redis-server")
}

fn urls(servers: &[RedisServer]) -> Vec<NodeUrl> {
    servers.iter().map(RedisServer::url).collect()
}

async fn redlock(kind: ClientKind, urls: &[NodeUrl]) -> Result<RedlockBackend, LockError> {
    RedlockBackend::connect(
        kind,
        urls,
        fast_options(),
        RedlockOptions::new(NODE_TIMEOUT, 0.01),
    )
    .await
}

fn manager(backend: RedlockBackend, ttl: Duration) -> LockManager {
    LockManager::new(Arc::new(backend), fast_config(ttl)).expect("config")
}

/// One acquire and release, so every node has its scripts loaded and its
/// connection in use before a fault is injected.
async fn warm_up(locks: &LockManager) {
    let guard = taken(locks, "warm-up").await;
    guard.release().await.expect("release");
}

fn key_exists(server: &RedisServer, name: &str) -> bool {
    lock_testkit::peek::int(server, &["EXISTS", &format!("lock:{{{name}}}")]) == 1
}

/// Waits up to 5 s, polling, until `done` says so; `what` names what a
/// timeout missed.
async fn until_within_5s(what: &str, done: impl Fn() -> bool) {
    lock_testkit::eventually(Duration::from_secs(5), what, || async {
        done().then_some(())
    })
    .await
}

/// Waits until every node of `nodes` holds `name`: the grants a quorum
/// did not wait for have landed.
async fn until_granted_everywhere(nodes: &[RedisServer], name: &str) {
    lock_testkit::eventually(Duration::from_secs(2), "a grant on every node", || async {
        nodes
            .iter()
            .all(|node| key_exists(node, name))
            .then_some(())
    })
    .await;
}

/// One node of three is down when the backend is built: it still works.
async fn one_node_down_from_the_start(kind: ClientKind) {
    let mut nodes = servers(3);
    nodes[2].kill().expect("kill");
    let backend = redlock(kind, &urls(&nodes))
        .await
        .expect("2 of 3 nodes are a quorum");
    let locks = manager(backend, Duration::from_secs(5));
    for round in 0..5 {
        let guard = locks.try_acquire("one-down").await.expect("try_acquire");
        let guard = guard.unwrap_or_else(|| panic!("round {round}: not acquired"));
        assert!(key_exists(&nodes[0], "one-down") && key_exists(&nodes[1], "one-down"));
        guard.release().await.expect("release");
    }
}

/// Two of five nodes are killed (kill -9) while locks are held and contended:
/// there are never two holders at once, and acquisitions go on.
async fn two_of_five_killed_under_contention(kind: ClientKind) {
    const TASKS: usize = 6;
    const ROUNDS: usize = 12;
    let mut nodes = servers(5);
    let backend = redlock(kind, &urls(&nodes)).await.expect("connect");
    let mut config = fast_config(Duration::from_secs(2));
    config.wait_timeout = Duration::from_secs(20);
    let locks = LockManager::new(Arc::new(backend), config).expect("config");
    let inside = Arc::new(AtomicUsize::new(0));
    let entries = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (locks, inside, entries) = (locks.clone(), Arc::clone(&inside), Arc::clone(&entries));
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let guard = locks
                    .acquire("contended")
                    .await
                    .expect("acquire during the faults");
                alone_inside(&inside, Duration::from_millis(2)).await;
                entries.fetch_add(1, Ordering::SeqCst);
                // A release may find a killed node; the lease itself was valid.
                let _ = guard.release().await;
            }
        }));
    }
    // Let contention build, then kill two nodes while a holder is inside.
    while entries.load(Ordering::SeqCst) < TASKS {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    nodes[0].kill().expect("kill -9");
    nodes[3].kill().expect("kill -9");
    let killed_at = entries.load(Ordering::SeqCst);
    for task in tasks {
        task.await.expect("a task panicked");
    }
    let total = entries.load(Ordering::SeqCst);
    assert_eq!(total, TASKS * ROUNDS, "every acquisition completed");
    assert!(total > killed_at, "acquisitions continued after the kill");
}

/// Three of five nodes down: `QuorumNotReached { needed: 3, .. }` within the
/// configured bounds, no hang.
async fn majority_down_is_quorum_not_reached(kind: ClientKind) {
    let mut nodes = servers(5);
    let backend = redlock(kind, &urls(&nodes)).await.expect("connect");
    let locks = manager(backend, Duration::from_secs(5));
    for index in [0, 2, 4] {
        nodes[index].kill().expect("kill -9");
    }
    let started = Instant::now();
    let result = locks.try_acquire("majority-down").await;
    let elapsed = started.elapsed();
    match result {
        Err(LockError::QuorumNotReached {
            got,
            needed,
            failures,
        }) => {
            // The attempt stops once three failures make a majority impossible,
            // so the live nodes may or may not have answered by then.
            assert_eq!(needed, 3);
            assert!(got <= 2, "got {got}");
            assert_eq!(failures.len(), 3, "one failure per dead node: {failures:?}");
        }
        other => panic!("expected QuorumNotReached, got {other:?}"),
    }
    assert!(
        elapsed < NODE_TIMEOUT * 2 + Duration::from_millis(500),
        "took {elapsed:?}"
    );
    let started = Instant::now();
    let waited = locks
        .acquire_with("majority-down", &waiting_up_to(Duration::from_millis(300)))
        .await;
    assert!(waited.is_err(), "no lock without a majority");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the wait is bounded: {:?}",
        started.elapsed()
    );
    // A majority error also builds no backend.
    let result = redlock(kind, &urls(&nodes)).await;
    assert!(
        matches!(
            result,
            Err(LockError::QuorumNotReached {
                got: 2,
                needed: 3,
                ..
            })
        ),
        "{result:?}"
    );
}

/// A node frozen (SIGSTOP) past the per-node timeout: the acquire succeeds on
/// the others, and the frozen node's late grant is released once it thaws.
async fn paused_node_late_grant_is_released(kind: ClientKind) {
    let mut nodes = servers(3);
    let backend = redlock(kind, &urls(&nodes)).await.expect("connect");
    let locks = manager(backend, Duration::from_secs(30));
    warm_up(&locks).await;
    nodes[2].pause().expect("SIGSTOP");
    let guard = taken(&locks, "frozen-node").await;
    assert!(guard.is_valid());
    tokio::time::sleep(NODE_TIMEOUT * 2).await;
    let released = guard.release().await;
    assert!(
        released.is_ok(),
        "release with a majority confirming: {released:?}"
    );
    nodes[2].resume().expect("SIGCONT");
    until_within_5s("the late grant's removal", || {
        !key_exists(&nodes[2], "frozen-node")
    })
    .await;
    // And a failed acquire releases the late grants of frozen nodes too.
    nodes[1].pause().expect("SIGSTOP");
    nodes[2].pause().expect("SIGSTOP");
    let result = locks.try_acquire("two-frozen").await;
    assert!(
        matches!(
            result,
            Err(LockError::QuorumNotReached {
                got: 1,
                needed: 2,
                ..
            })
        ),
        "{result:?}"
    );
    assert!(
        !key_exists(&nodes[0], "two-frozen"),
        "the lone grant was released before returning"
    );
    nodes[1].resume().expect("SIGCONT");
    nodes[2].resume().expect("SIGCONT");
    until_within_5s("the removal of a failed acquire's late grants", || {
        !(key_exists(&nodes[1], "two-frozen") || key_exists(&nodes[2], "two-frozen"))
    })
    .await;
}

/// A node slow but alive, within the node timeout: acquire, extend and release
/// decide with the two fast nodes and never wait for it, while its grant and
/// its release still land there.
async fn slow_node_is_not_waited_for(kind: ClientKind) {
    const DELAY: Duration = Duration::from_millis(150);
    let nodes = servers(3);
    let proxy = DelayProxy::start(nodes[2].port(), DELAY)
        .await
        .expect("start the delay proxy");
    let urls = vec![nodes[0].url(), nodes[1].url(), proxy.url()];
    let backend = RedlockBackend::connect(
        kind,
        &urls,
        ConnectOptions::new(Duration::from_secs(5), Duration::from_secs(2)),
        RedlockOptions::new(Duration::from_secs(1), 0.01),
    )
    .await
    .expect("connect");
    let locks = manager(backend, Duration::from_secs(30));
    warm_up(&locks).await;

    // A round trip to the slow node takes at least twice DELAY.
    let started = Instant::now();
    let guard = taken(&locks, "slow-node").await;
    let took = started.elapsed();
    assert!(
        took < DELAY * 2,
        "the acquire waited for the slow node: {took:?}"
    );
    let started = Instant::now();
    guard
        .extend(Duration::from_secs(30))
        .await
        .expect("extend with the fast nodes");
    let took = started.elapsed();
    assert!(
        took < DELAY * 2,
        "the extend waited for the slow node: {took:?}"
    );
    until_within_5s("the slow node's grant", || {
        key_exists(&nodes[2], "slow-node")
    })
    .await;

    let started = Instant::now();
    guard.release().await.expect("release");
    let took = started.elapsed();
    assert!(
        took < DELAY * 2,
        "the release waited for the slow node: {took:?}"
    );
    assert!(!key_exists(&nodes[0], "slow-node") && !key_exists(&nodes[1], "slow-node"));
    until_within_5s("the release on the slow node", || {
        !key_exists(&nodes[2], "slow-node")
    })
    .await;
}

/// A node with a wrong password counts as failed, and the error names it.
async fn wrong_password_node_counts_as_failed(kind: ClientKind) {
    let nodes: Vec<RedisServer> = (0..3)
        .map(|_| {
            RedisServer::builder()
                .password("right")
                .start()
                .expect("start")
        })
        .collect();
    let mut urls: Vec<NodeUrl> = nodes.iter().map(RedisServer::url).collect();
    urls[1] = nodes[1].url_with_password("wrong");
    let backend = redlock(kind, &urls)
        .await
        .expect("2 of 3 nodes authenticate");
    let locks = manager(backend, Duration::from_secs(5));
    let guard = taken(&locks, "auth").await;
    guard.release().await.expect("release");

    urls[2] = nodes[2].url_with_password("wrong");
    match redlock(kind, &urls).await {
        Err(LockError::QuorumNotReached {
            got: 1,
            needed: 2,
            failures,
        }) => {
            let named: Vec<String> = failures
                .iter()
                .map(|failure| match failure {
                    LockError::Authentication { node, .. } => node.clone(),
                    other => panic!("expected an authentication failure, got {other:?}"),
                })
                .collect();
            assert_eq!(
                named,
                vec![nodes[1].url().address(), nodes[2].url().address()]
            );
        }
        other => panic!("expected QuorumNotReached, got {other:?}"),
    }
}

/// Bad configs get a clear error naming the field.
async fn config_errors_name_the_field(kind: ClientKind) {
    let nodes = servers(1);
    let url = nodes[0].url();
    let options = RedlockOptions::new(NODE_TIMEOUT, 0.01);
    let field_of = |result: Result<RedlockBackend, LockError>| match result {
        Err(LockError::InvalidConfig { field, .. }) => field,
        other => panic!("expected InvalidConfig, got {other:?}"),
    };
    assert_eq!(
        field_of(RedlockBackend::connect(kind, &[], fast_options(), options).await),
        "nodes"
    );
    assert_eq!(
        field_of(
            RedlockBackend::connect(kind, &[url.clone(), url.clone()], fast_options(), options)
                .await
        ),
        "nodes[1]"
    );
    // Two databases of one server are one node: one failure takes both.
    let db = |index: u32| NodeUrl::new(format!("{}/{index}", url.expose()));
    assert_eq!(
        field_of(RedlockBackend::connect(kind, &[db(0), db(1)], fast_options(), options).await),
        "nodes[1]",
        "databases 0 and 1 of one server are one node"
    );
    // Refused before any connection: a majority of two is both.
    let closed = |port: u16| NodeUrl::new(format!("redis://127.0.0.1:{port}"));
    assert_eq!(
        field_of(
            RedlockBackend::connect(kind, &[closed(1), closed(2)], fast_options(), options).await
        ),
        "nodes",
        "two nodes survive no failure"
    );
    for factor in [-0.1, 0.5, f64::NAN] {
        let options = RedlockOptions::new(NODE_TIMEOUT, factor);
        assert_eq!(
            field_of(
                RedlockBackend::connect(kind, std::slice::from_ref(&url), fast_options(), options)
                    .await
            ),
            "clock_drift_factor"
        );
    }
    let mut config = LockConfig::with_nodes([url.expose().to_owned()]);
    config.client = kind;
    config.ttl = Duration::from_millis(40);
    match LockManager::connect::<lock_redlock::RedlockBackend>(&config).await {
        // The TTL, which the user set, not the node timeout, which they may
        // never have heard of.
        Err(LockError::InvalidConfig { field, .. }) => assert_eq!(field, "ttl"),
        other => panic!("a node timeout above the TTL: {other:?}"),
    }
    let backend = redlock(kind, std::slice::from_ref(&url))
        .await
        .expect("connect");
    let key = lock_core::LockKey::new("lock:", "k").expect("key");
    let result = lock_core::LockBackend::try_acquire(
        &backend,
        &key,
        &hold(),
        Duration::from_millis(20),
        &lock_core::Claim::LOCK,
        None,
    )
    .await;
    assert!(
        matches!(result, Err(LockError::InvalidTtl { .. })),
        "a TTL below the node timeout: {result:?}"
    );
}

/// A hold of a fresh owner, for the backend called directly.
fn hold() -> lock_core::HoldToken {
    lock_core::HoldToken::new(lock_core::OwnerToken::generate().expect("rng")).expect("rng")
}

/// Three fresh nodes, and a backend over them that has taken `key` for
/// `holder` on every node (the grants still in flight landed too).
async fn taken_on_three_nodes(
    kind: ClientKind,
    key: &lock_core::LockKey,
    holder: &lock_core::HoldToken,
    ttl: Duration,
) -> (Vec<RedisServer>, RedlockBackend) {
    use lock_core::LockBackend;
    let nodes = servers(3);
    let backend = redlock(kind, &urls(&nodes)).await.expect("connect");
    warm_up(&manager(backend.clone(), Duration::from_secs(5))).await;
    assert!(matches!(
        backend
            .try_acquire(key, holder, ttl, &lock_core::Claim::LOCK, None)
            .await,
        Ok(lock_core::AcquireOutcome::Acquired(_))
    ));
    until_granted_everywhere(&nodes, key.name()).await;
    (nodes, backend)
}

/// Extend says `NotHeld` (a permanent loss) only when enough nodes answered
/// "not held" that no majority can hold the key; one such answer next to an
/// error and a silent node is a transient failure. A release succeeds only
/// when a majority confirmed.
async fn undecided_nodes_are_not_a_loss(kind: ClientKind) {
    use lock_core::{ExtendOutcome, LockBackend, LockKey, ReleaseOutcome};
    let key = LockKey::new("lock:", "undecided").expect("key");
    let ttl = Duration::from_secs(10);
    let holder = hold();
    let (mut nodes, backend) = taken_on_three_nodes(kind, &key, &holder, ttl).await;
    nodes[0].admin(&["DEL", key.redis_key()]).expect("DEL");
    nodes[1].kill().expect("kill -9");
    nodes[2].pause().expect("SIGSTOP");
    let outcome = backend.extend(&key, &holder, ttl).await;
    assert!(
        matches!(&outcome, Err(err) if err.is_retryable()),
        "one 'not held', one error and one silent node must be a transient failure: {outcome:?}"
    );
    nodes[2].resume().expect("SIGCONT");

    let holder = hold();
    let (nodes, backend) = taken_on_three_nodes(kind, &key, &holder, ttl).await;
    for node in &nodes[..2] {
        node.admin(&["DEL", key.redis_key()]).expect("DEL");
    }
    assert_eq!(
        backend.release(&key, &holder).await.expect("release"),
        ReleaseOutcome::NotHeld,
        "one delete of three is not a release: the lock was already gone"
    );
    assert!(matches!(
        backend.extend(&key, &holder, ttl).await,
        Ok(ExtendOutcome::NotHeld)
    ));
}

/// Many tasks acquire and release their own keys at once, as a busy service
/// does: once every release has returned and its last deletes have landed, no
/// node keeps a grant. A grant sent after its own release (a command left to
/// finish in the background that reaches its connection after a later one)
/// would keep its key on that node for the whole TTL: the lock released by
/// its holder but still counted against every later acquire there.
async fn a_release_leaves_no_grant_behind(kind: ClientKind) {
    leaves_no_grant_behind(kind, false).await;
}

/// The same with multi-key holds: every node takes both members in one
/// script, and a late grant is deleted whole.
async fn a_multi_key_release_leaves_no_grant_behind(kind: ClientKind) {
    leaves_no_grant_behind(kind, true).await;
}

async fn leaves_no_grant_behind(kind: ClientKind, multi: bool) {
    const TASKS: usize = 64;
    // Multi-key cycles cost a script per node: fewer of them still leave
    // late grants to delete.
    let cycles = if multi { 30 } else { 80 };
    let nodes = servers(5);
    // 64 tasks on 2 cores: a node may take longer than NODE_TIMEOUT to
    // answer, and a release that misses its quorum would fail the check
    // for a reason it does not test. Late grants arise all the same.
    let backend = RedlockBackend::connect(
        kind,
        &urls(&nodes),
        fast_options(),
        RedlockOptions::new(Duration::from_secs(1), 0.01),
    )
    .await
    .expect("connect");
    // A TTL far longer than the check: a grant left behind stays to be seen.
    let locks = manager(backend.clone(), Duration::from_secs(60));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let locks = locks.clone();
            tokio::spawn(async move {
                let pair = locks
                    .multi_lock([format!("busy-{task}"), format!("busy-{task}-too")])
                    .expect("multi lock");
                for cycle in 0..cycles {
                    let taken = match multi {
                        true => pair.try_acquire().await,
                        false => locks.try_acquire(&format!("busy-{task}")).await,
                    };
                    let guard = taken
                        .expect("try_acquire")
                        .unwrap_or_else(|| panic!("task {task} cycle {cycle}: its own key held"));
                    guard.release().await.expect("release");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    // Grants and deletes past the majority finish in the background: give
    // them up to two seconds (a busy machine), far less than the TTL a grant
    // left behind would keep. First every grant answers (and the backend
    // forgets it), then the keys are looked at.
    let settled_by = Instant::now() + Duration::from_secs(2);
    while !format!("{backend:?}").contains("holds_in_flight: 0") {
        assert!(
            Instant::now() < settled_by,
            "grants still in flight after two seconds: {backend:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    loop {
        let left: Vec<String> = nodes
            .iter()
            .enumerate()
            .flat_map(|(index, node)| {
                (0..TASKS)
                    .flat_map(|task| [format!("busy-{task}"), format!("busy-{task}-too")])
                    .filter(|name| key_exists(node, name))
                    .map(move |name| format!("{name} on node {index}"))
            })
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < settled_by,
            "grants left behind after their release: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

lock_testkit::client_tests!(
    a_release_leaves_no_grant_behind,
    a_multi_key_release_leaves_no_grant_behind,
    undecided_nodes_are_not_a_loss,
    one_node_down_from_the_start,
    two_of_five_killed_under_contention,
    majority_down_is_quorum_not_reached,
    paused_node_late_grant_is_released,
    slow_node_is_not_waited_for,
    wrong_password_node_counts_as_failed,
    config_errors_name_the_field,
);
