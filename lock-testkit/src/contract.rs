//! The contract suite: plain async checks that every lock strategy passes, on
//! every client. [`crate::contract_suite!`] turns them into one test each.
//!
//! Each check starts its own servers, so checks are independent and can run in
//! parallel. Every check is bounded: small counts, short TTLs, and
//! [`crate::run`] aborts any check that runs past its time limit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use lock_core::{
    AcquireOptions, AcquireOutcome, Capability, ConnectOptions, Endpoint, ExtendOutcome,
    HandoffToken, HoldToken, LeaseStatus, ListOptions, LockBackend, LockConfig, LockError,
    LockGuard, LockKey, LockManager, LockState, LossReason, NameState, NodeUrl, OwnerToken,
    ReleaseOutcome, RetryPolicy, TlsConfig, MAX_KEY_LEN, MAX_TTL,
};

use crate::cluster::RedisCluster;
use crate::faulty::Faulty;
use crate::sentinel::SentinelGroup;
use crate::server::{free_port, AdminReply, RedisServer};
use crate::tls::TlsFiles;

/// Where a check's servers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Site {
    /// Standalone servers over plain TCP, one per node.
    #[default]
    Standalone,
    /// Standalone servers reached only over TLS (`rediss://`, with a CA and
    /// a client certificate made for the check; the servers verify clients).
    Tls,
    /// A Redis Cluster of three masters without replicas, reached through
    /// its seed nodes.
    Cluster,
    /// A master without replicas watched by one sentinel, reached through
    /// the sentinel.
    Sentinel,
}

impl Site {
    /// The name used in test output.
    pub fn name(self) -> &'static str {
        match self {
            Site::Standalone => "standalone",
            Site::Tls => "tls",
            Site::Cluster => "cluster",
            Site::Sentinel => "sentinel",
        }
    }
}

/// A factory that runs on `site` instead of standalone servers: the
/// contract on TLS or on a cluster, with the same checks.
pub struct OnSite<F> {
    factory: F,
    site: Site,
}

impl<F: BackendFactory> OnSite<F> {
    /// `factory`'s backends, on `site`.
    pub fn new(factory: F, site: Site) -> Self {
        OnSite { factory, site }
    }
}

impl<F: BackendFactory> BackendFactory for OnSite<F> {
    fn node_count(&self) -> usize {
        self.factory.node_count()
    }

    fn capabilities(&self) -> Capabilities {
        self.factory.capabilities()
    }

    fn site(&self) -> Site {
        self.site
    }

    fn connect_endpoints<'a>(
        &'a self,
        endpoints: &'a [Endpoint],
        options: ConnectOptions,
    ) -> BoxFuture<'a, Result<Arc<dyn LockBackend>, LockError>> {
        self.factory.connect_endpoints(endpoints, options)
    }
}

/// What a strategy's tests expect of its backend: an expectation, asserted,
/// never a switch that decides which checks run.
///
/// What a backend has beyond the plain lock (a [`Capability`] each) the
/// checks read from the backend itself ([`LockBackend::capabilities`]) and
/// adapt to: a semaphore check on a backend without semaphores asserts
/// that the handle is refused. So that such a refusal cannot hide a
/// capability the strategy lost, [`capabilities_are_declared`] asserts that
/// the backend declares exactly [`has`](Self::has) here, and its grant
/// fields as [`fencing`](Self::fencing) says.
///
/// Two behaviours are not (fully) declared by a backend, so they are stated
/// here, and every check that meets one asserts it both ways rather than
/// skipping: `fencing` (a backend may leave it to its strategy, as Redlock
/// and the reentrant strategy do) and `reentrant`, which is no
/// [`Capability`] at all ([`reentry_follows_capability`] asserts both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Whether grants carry fencing tokens.
    pub fencing: bool,
    /// Whether the owner that holds a lock can enter it again.
    pub reentrant: bool,
    /// The [`Capability`]s the backend must declare, one bit each by its
    /// place in [`Capability::ALL`].
    has: u16,
}

impl Capabilities {
    /// A strategy that issues fencing tokens (or not) and is reentrant (or
    /// not), expected to declare no [`Capability`].
    pub fn new(fencing: bool, reentrant: bool) -> Self {
        Capabilities {
            fencing,
            reentrant,
            has: 0,
        }
    }

    /// These expectations with `capabilities` declared too.
    pub fn with(mut self, capabilities: impl IntoIterator<Item = Capability>) -> Self {
        for capability in capabilities {
            self.has |= bit(capability);
        }
        self
    }

    /// Whether the backend is expected to declare `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        self.has & bit(capability) != 0
    }
}

/// `capability`'s bit in [`Capabilities`]: its place in [`Capability::ALL`].
fn bit(capability: Capability) -> u16 {
    let place = Capability::ALL
        .iter()
        .position(|&known| known == capability)
        .expect("every capability is in Capability::ALL");
    1 << place
}

/// Builds the backend under test over servers the check started.
pub trait BackendFactory: Send + Sync {
    /// How many servers the strategy needs.
    fn node_count(&self) -> usize {
        1
    }

    /// What the strategy's tests expect of the backend: asserted by
    /// [`capabilities_are_declared`], never read to skip a check.
    fn capabilities(&self) -> Capabilities;

    /// Where the checks start their servers. Default: standalone.
    fn site(&self) -> Site {
        Site::Standalone
    }

    /// Connects a backend to `endpoints`: one per node, or one cluster,
    /// each with its TLS settings.
    fn connect_endpoints<'a>(
        &'a self,
        endpoints: &'a [Endpoint],
        options: ConnectOptions,
    ) -> BoxFuture<'a, Result<Arc<dyn LockBackend>, LockError>>;

    /// Connects a backend to the standalone nodes at `urls` (one per
    /// server), through [`connect_endpoints`](Self::connect_endpoints).
    fn connect<'a>(
        &'a self,
        urls: &'a [NodeUrl],
        options: ConnectOptions,
    ) -> BoxFuture<'a, Result<Arc<dyn LockBackend>, LockError>> {
        Box::pin(async move {
            let endpoints: Vec<Endpoint> = urls.iter().map(Endpoint::from).collect();
            self.connect_endpoints(&endpoints, options).await
        })
    }
}

/// A manager over `backend` with `config`, whose grant fields (`fencing`,
/// `holder_info`) are first set to what the backend was built with
/// ([`LockBackend::capabilities`]), as an application that builds its
/// backend by hand must: the checks run one config over many backends.
pub fn manager_over(backend: Arc<dyn LockBackend>, mut config: LockConfig) -> LockManager {
    let built = backend.capabilities();
    if let Some(fencing) = built.fencing {
        config.fencing = fencing;
    }
    if let Some(holder_info) = built.holder_info {
        config.holder_info = holder_info;
        if !holder_info {
            config.holder_label = None;
        }
    }
    LockManager::new(backend, config).expect("valid test config")
}

/// Servers and a backend connected to them.
pub struct Deployment {
    /// The standalone servers (plain or TLS), killed when the deployment is
    /// dropped; empty on a cluster.
    pub servers: Vec<RedisServer>,
    /// The cluster, on [`Site::Cluster`].
    pub cluster: Option<RedisCluster>,
    /// The master and its sentinel, on [`Site::Sentinel`].
    pub sentinels: Option<SentinelGroup>,
    /// The certificates of a [`Site::Tls`] deployment.
    pub tls: Option<Arc<TlsFiles>>,
    /// The backend under test.
    pub backend: Arc<dyn LockBackend>,
}

impl Deployment {
    /// Starts the factory's servers on its site and connects its backend.
    pub async fn start(factory: &dyn BackendFactory) -> Self {
        let mut servers = Vec::new();
        let mut cluster = None;
        let mut sentinels = None;
        let mut tls_files = None;
        let endpoints: Vec<Endpoint> = match factory.site() {
            Site::Standalone => {
                servers = (0..factory.node_count())
                    .map(|_| RedisServer::start().expect("start redis-server"))
                    .collect();
                servers
                    .iter()
                    .map(|server| Endpoint::standalone(server.url()))
                    .collect()
            }
            Site::Tls => {
                let files = Arc::new(TlsFiles::generate().expect("make certificates"));
                servers = (0..factory.node_count())
                    .map(|_| {
                        RedisServer::builder()
                            .tls(Arc::clone(&files))
                            .tls_auth_clients(true)
                            .start()
                            .expect("start a TLS redis-server")
                    })
                    .collect();
                let tls = TlsConfig::default()
                    .with_ca_file(files.ca_file())
                    .with_client_cert(files.cert_file(), files.key_file());
                let endpoints = servers
                    .iter()
                    .map(|server| {
                        Endpoint::standalone(server.tls_url().expect("a TLS URL"))
                            .with_tls(tls.clone())
                    })
                    .collect();
                tls_files = Some(files);
                endpoints
            }
            Site::Cluster => {
                let started = tokio::task::spawn_blocking(|| RedisCluster::start(3, 0))
                    .await
                    .expect("cluster start task")
                    .expect("start a Redis Cluster");
                let endpoint = Endpoint::cluster(started.seed_urls());
                cluster = Some(started);
                vec![endpoint]
            }
            Site::Sentinel => {
                let group = tokio::task::spawn_blocking(|| SentinelGroup::start("contract", 0, 1))
                    .await
                    .expect("sentinel start task")
                    .expect("start a sentinel group");
                let endpoint = Endpoint::sentinel(group.sentinel_urls(), group.service_name());
                sentinels = Some(group);
                vec![endpoint]
            }
        };
        let backend = factory
            .connect_endpoints(&endpoints, fast_options())
            .await
            .expect("connect the backend under test");
        Deployment {
            servers,
            cluster,
            sentinels,
            tls: tls_files,
            backend,
        }
    }

    /// A manager over the backend with `config`; see [`manager_over`].
    pub fn manager(&self, config: LockConfig) -> LockManager {
        manager_over(Arc::clone(&self.backend), config)
    }

    /// Runs an admin command on every server (fault injection). On a
    /// cluster, a command on a key goes to the master of its slot and any
    /// other (`SCRIPT FLUSH`) to every master.
    pub fn admin_all(&self, args: &[&str]) {
        self.admin_each(args);
    }

    /// Like [`admin_all`](Self::admin_all), returning each server's reply.
    pub fn admin_each(&self, args: &[&str]) -> Vec<AdminReply> {
        if let Some(group) = &self.sentinels {
            let master = group.master().expect("the master");
            return vec![master.admin(args).expect("admin command")];
        }
        let Some(cluster) = &self.cluster else {
            return self
                .servers
                .iter()
                .map(|server| server.admin(args).expect("admin command"))
                .collect();
        };
        let keyed = matches!(
            args.first()
                .map(|name| name.to_ascii_uppercase())
                .as_deref(),
            Some("DEL" | "SET" | "RPUSH" | "HSET" | "GET" | "EXISTS" | "PTTL" | "PEXPIRE" | "TYPE")
        );
        if keyed {
            let key = args.get(1).expect("a keyed command names its key");
            let master = cluster.master_of_key(key).expect("the key's master");
            vec![master.admin(args).expect("admin command")]
        } else {
            cluster
                .masters()
                .expect("the masters")
                .into_iter()
                .map(|master| master.admin(args).expect("admin command"))
                .collect()
        }
    }
}

/// Connection limits for tests: short, so failures show quickly.
pub fn fast_options() -> ConnectOptions {
    ConnectOptions::new(Duration::from_secs(2), Duration::from_millis(500))
}

/// The config tests start from: the given TTL, waits up to 10 s with a
/// short backoff, and the timeouts of [`fast_options`]. Tests change the
/// rest with `LockConfig`'s `with_*` builders.
pub fn fast_config(ttl: Duration) -> LockConfig {
    LockConfig::default()
        .with_ttl(ttl)
        .with_wait_timeout(Duration::from_secs(10))
        .with_retry(RetryPolicy::new(
            Duration::from_millis(1),
            Duration::from_millis(20),
        ))
        .with_timeouts(Duration::from_secs(2), Duration::from_millis(500))
}

/// What a one-shot attempt (`try_acquire`, `try_read`, ...) took: it must
/// take its claim at once.
pub async fn at_once<G>(
    attempt: impl std::future::Future<Output = Result<Option<G>, LockError>>,
) -> G {
    match attempt.await {
        Ok(Some(guard)) => guard,
        Ok(None) => panic!("a one-shot attempt found its claim held"),
        Err(err) => panic!("a one-shot attempt: {err}"),
    }
}

/// A moment inside a lock: nobody else may be inside (`inside` counts
/// who is) while this holder sleeps `hold`.
pub async fn alone_inside(inside: &AtomicUsize, hold: Duration) {
    let others = inside.fetch_add(1, Ordering::SeqCst);
    assert_eq!(others, 0, "two holders at once");
    tokio::time::sleep(hold).await;
    inside.fetch_sub(1, Ordering::SeqCst);
}

/// Options for an acquire that waits up to `wait`.
pub fn waiting_up_to(wait: Duration) -> AcquireOptions {
    AcquireOptions::new().with_wait(wait)
}

/// Whether one attempt at `name` finds it held by another (the attempt
/// must not fail); a lock it takes is released again.
pub async fn held_by_another(locks: &LockManager, name: &str) -> bool {
    match locks.try_acquire(name).await {
        Ok(None) => true,
        Ok(Some(guard)) => {
            guard.release().await.expect("release");
            false
        }
        Err(err) => panic!("try_acquire {name}: {err}"),
    }
}

/// Takes the lock `name` at once as `owner`: it must be free, or held by
/// `owner` on a strategy that re-enters.
pub async fn taken_as(locks: &LockManager, name: &str, owner: &OwnerToken) -> LockGuard {
    let options = AcquireOptions::new().with_owner(owner.clone()).no_wait();
    match locks.acquire_with(name, &options).await {
        Ok(guard) => guard,
        Err(err) => panic!("acquire {name} as its owner: {err}"),
    }
}

/// Takes the lock `name`, which must be free, at once.
pub async fn taken(locks: &LockManager, name: &str) -> LockGuard {
    match locks.try_acquire(name).await {
        Ok(Some(guard)) => guard,
        Ok(None) => panic!("{name} is held"),
        Err(err) => panic!("try_acquire {name}: {err}"),
    }
}

/// Whether `err` says the node (or, for multi-node strategies, too many nodes)
/// could not be reached or did not answer in time.
pub fn is_unreachable(err: &LockError) -> bool {
    match err {
        LockError::Connection { .. } | LockError::Timeout { .. } => true,
        LockError::QuorumNotReached { failures, .. } => {
            !failures.is_empty() && failures.iter().all(is_unreachable)
        }
        _ => false,
    }
}

/// Whether `err` says the node (or, for multi-node strategies, every failed
/// node) refused the credentials.
pub fn is_authentication_failure(err: &LockError) -> bool {
    match err {
        LockError::Authentication { .. } => true,
        LockError::QuorumNotReached { failures, .. } => {
            !failures.is_empty() && failures.iter().all(is_authentication_failure)
        }
        _ => false,
    }
}

fn key(name: &str) -> LockKey {
    LockKey::new("lock:", name).expect("valid key")
}

/// The hold of one acquire attempt by a fresh owner.
fn owner() -> HoldToken {
    HoldToken::new(OwnerToken::generate().expect("os rng")).expect("os rng")
}

async fn acquire(
    backend: &dyn LockBackend,
    key: &LockKey,
    owner: &HoldToken,
    ttl: Duration,
) -> AcquireOutcome {
    backend
        .try_acquire(key, owner, ttl, &lock_core::Claim::LOCK, None)
        .await
        .expect("try_acquire")
}

fn acquired(outcome: AcquireOutcome) -> bool {
    matches!(outcome, AcquireOutcome::Acquired(_))
}

/// Many tasks contend for one lock; at most one is ever inside, and every one
/// gets in.
pub async fn mutual_exclusion(factory: &dyn BackendFactory) {
    const TASKS: usize = 12;
    const ROUNDS: usize = 8;
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(5)));
    let inside = Arc::new(AtomicUsize::new(0));
    let entries = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (locks, inside, entries) = (locks.clone(), Arc::clone(&inside), Arc::clone(&entries));
        tasks.push(tokio::spawn(async move {
            let mut tokens = Vec::new();
            for _ in 0..ROUNDS {
                let guard = locks
                    .acquire("contended")
                    .await
                    .expect("acquire within the wait");
                let before = inside.fetch_add(1, Ordering::SeqCst);
                assert_eq!(before, 0, "another holder was inside the critical section");
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_micros(200)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                entries.fetch_add(1, Ordering::SeqCst);
                tokens.push(guard.fencing_token());
                guard.release().await.expect("release a held lease");
            }
            tokens
        }));
    }
    let mut tokens = Vec::new();
    for task in tasks {
        tokens.extend(task.await.expect("task"));
    }
    assert_eq!(
        entries.load(Ordering::SeqCst),
        TASKS * ROUNDS,
        "every task got in every round"
    );
    if factory.capabilities().fencing {
        let mut values: Vec<u64> = tokens
            .iter()
            .map(|token| token.expect("token").get())
            .collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(
            values.len(),
            TASKS * ROUNDS,
            "two holders shared a fencing token"
        );
    } else {
        assert!(
            tokens.iter().all(Option::is_none),
            "a strategy without fencing returned a token"
        );
    }
}

/// Another owner can neither release nor extend a held lock, and cannot take it.
pub async fn only_owner_can_release_or_extend(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let (key, holder, intruder) = (key("owned"), owner(), owner());
    let ttl = Duration::from_secs(10);
    assert!(
        acquired(acquire(backend, &key, &holder, ttl).await),
        "a free key is acquired"
    );
    assert!(
        matches!(
            acquire(backend, &key, &intruder, ttl).await,
            AcquireOutcome::Held { remaining } if remaining.is_none_or(|left| left <= ttl)
        ),
        "a held key is reported held, with a remaining TTL no longer than the TTL if known"
    );
    assert_eq!(
        backend.release(&key, &intruder).await.expect("release"),
        ReleaseOutcome::NotHeld
    );
    assert_eq!(
        backend.extend(&key, &intruder, ttl).await.expect("extend"),
        ExtendOutcome::NotHeld
    );
    assert!(
        backend.inspect(&key).await.expect("inspect").is_held(),
        "the intruder changed nothing"
    );
    assert!(matches!(
        backend.extend(&key, &holder, ttl).await.expect("extend"),
        ExtendOutcome::Extended { .. }
    ));
    assert_eq!(
        backend.release(&key, &holder).await.expect("release"),
        ReleaseOutcome::Released
    );
    assert_eq!(
        backend.release(&key, &holder).await.expect("release"),
        ReleaseOutcome::NotHeld,
        "a second release finds nothing"
    );
    assert!(!backend.inspect(&key).await.expect("inspect").is_held());
}

/// A lease nobody renews frees the key after its TTL.
pub async fn expiry_frees_the_key(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let (key, first, second) = (key("expiring"), owner(), owner());
    let ttl = Duration::from_millis(150);
    assert!(acquired(acquire(backend, &key, &first, ttl).await));
    assert!(
        !acquired(acquire(backend, &key, &second, ttl).await),
        "held before the TTL"
    );
    tokio::time::sleep(ttl + Duration::from_millis(50)).await;
    assert!(
        acquired(acquire(backend, &key, &second, ttl).await),
        "free after the TTL"
    );
    assert_eq!(
        backend.extend(&key, &first, ttl).await.expect("extend"),
        ExtendOutcome::NotHeld,
        "the expired owner cannot extend"
    );
}

/// Extending keeps a lease alive past its original TTL.
pub async fn extend_keeps_the_key(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let (key, holder, other) = (key("extended"), owner(), owner());
    let ttl = Duration::from_millis(200);
    assert!(acquired(acquire(backend, &key, &holder, ttl).await));
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(matches!(
            backend.extend(&key, &holder, ttl).await.expect("extend"),
            ExtendOutcome::Extended { .. }
        ));
    }
    assert!(
        !acquired(acquire(backend, &key, &other, ttl).await),
        "held 400 ms into a 200 ms TTL"
    );
}

/// Fencing tokens grow with every acquisition, across owners and expiry; a
/// strategy without tokens returns none.
pub async fn fencing_tokens_increase(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    // What the backend declares (and a manager's config must match) is
    // what its grants do.
    if let Some(declared) = backend.capabilities().fencing {
        assert_eq!(
            declared,
            factory.capabilities().fencing,
            "the backend declares fencing = {declared}"
        );
    }
    let key = key("fenced");
    let mut last = None;
    for round in 0..6 {
        let holder = owner();
        let ttl = Duration::from_millis(if round % 2 == 0 { 10_000 } else { 30 });
        let token = match acquire(backend, &key, &holder, ttl).await {
            AcquireOutcome::Acquired(lock_core::Acquired { fencing_token, .. }) => fencing_token,
            other => panic!("round {round}: expected to acquire, got {other:?}"),
        };
        if !factory.capabilities().fencing {
            assert_eq!(token, None, "a strategy without fencing returned a token");
            return;
        }
        let token = token.expect("a fencing strategy returns a token");
        assert!(
            last.is_none_or(|last| token > last),
            "round {round}: token {token} is not above {last:?}"
        );
        match lock_core::LockState::from(backend.inspect(&key).await.expect("inspect")) {
            LockState::Held {
                token: Some(seen), ..
            } => assert_eq!(seen, token, "inspect shows the current token"),
            other => panic!("inspect of a held key: {other:?}"),
        }
        last = Some(token);
        if round % 2 == 0 {
            backend.release(&key, &holder).await.expect("release");
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(
        matches!(lock_core::LockState::from(backend.inspect(&key).await.expect("inspect")), LockState::Free { last_token } if last_token == last),
        "a free key reports the last token issued"
    );
}

/// The watchdog keeps a lease across several TTLs and the loss signal stays quiet.
pub async fn watchdog_keeps_the_lease(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let ttl = Duration::from_millis(300);
    let locks = deployment.manager(fast_config(ttl));
    let guard = taken(&locks, "kept").await;
    let until = Instant::now() + ttl * 4;
    while Instant::now() < until {
        assert!(guard.is_valid(), "the lease lapsed while the watchdog ran");
        assert!(
            held_by_another(&locks, "kept").await,
            "another owner got in"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(1), guard.lost())
            .await
            .is_err(),
        "the loss signal fired for a kept lease"
    );
    guard.release().await.expect("release a kept lease");
}

async fn assert_loss_reported(deployment: &Deployment, name: &str, sabotage: &[&str]) {
    let ttl = Duration::from_millis(300);
    let locks = deployment.manager(fast_config(ttl));
    let guard = taken(&locks, name).await;
    let lost_key = locks.key(name).expect("key");
    let args: Vec<&str> = sabotage
        .iter()
        .map(|arg| {
            if *arg == "KEY" {
                lost_key.redis_key()
            } else {
                arg
            }
        })
        .collect();
    deployment.admin_all(&args);
    let reason = tokio::time::timeout(ttl * 2, guard.lost())
        .await
        .expect("the loss is reported within two TTLs");
    assert_eq!(reason, Some(LossReason::NotHeld));
    assert!(!guard.is_valid());
    assert!(
        matches!(guard.release().await, Err(LockError::LeaseLost { .. })),
        "release reports the loss"
    );
}

/// The watchdog reports a loss when the key is deleted behind its back.
pub async fn watchdog_reports_a_deleted_key(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    assert_loss_reported(&deployment, "deleted", &["DEL", "KEY"]).await;
}

/// The watchdog reports a loss when the key is overwritten by someone else.
pub async fn watchdog_reports_an_overwritten_key(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    assert_loss_reported(
        &deployment,
        "overwritten",
        &["SET", "KEY", "intruder", "PX", "60000"],
    )
    .await;
}

/// Without a watchdog, the loss signal fires at the deadline.
pub async fn loss_at_deadline_without_watchdog(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let mut config = fast_config(Duration::from_millis(100));
    config.watchdog.enabled = false;
    let locks = deployment.manager(config);
    let guard = taken(&locks, "unwatched").await;
    let started = Instant::now();
    let reason = tokio::time::timeout(Duration::from_secs(1), guard.lost())
        .await
        .expect("loss reported");
    assert_eq!(reason, Some(LossReason::Expired));
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "reported at the deadline, not later"
    );
    assert!(matches!(
        guard.release().await,
        Err(LockError::LeaseLost {
            reason: LossReason::Expired,
            ..
        })
    ));
}

/// After `SCRIPT FLUSH` every operation still works (scripts are reloaded).
pub async fn recovers_after_script_flush(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let (key, holder) = (key("flushed"), owner());
    let ttl = Duration::from_secs(5);
    deployment.admin_all(&["SCRIPT", "FLUSH"]);
    assert!(acquired(acquire(backend, &key, &holder, ttl).await));
    deployment.admin_all(&["SCRIPT", "FLUSH"]);
    assert!(matches!(
        backend.extend(&key, &holder, ttl).await.expect("extend"),
        ExtendOutcome::Extended { .. }
    ));
    deployment.admin_all(&["SCRIPT", "FLUSH"]);
    assert!(backend.inspect(&key).await.expect("inspect").is_held());
    deployment.admin_all(&["SCRIPT", "FLUSH"]);
    assert_eq!(
        backend.release(&key, &holder).await.expect("release"),
        ReleaseOutcome::Released
    );
}

/// A dropped guard releases in the background, long before the TTL.
pub async fn dropped_guard_releases(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_secs(30)));
    let guard = taken(&locks, "dropped").await;
    let handle = guard.handle();
    drop(guard);
    assert_eq!(
        handle.lost().await,
        None,
        "a dropped guard counts as released, not lost"
    );
    let started = Instant::now();
    while locks.inspect("dropped").await.expect("inspect").is_held() {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the dropped guard was not released"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An acquire whose reply never arrives (the server froze past the command
/// timeout) leaves no key held by a token nobody owns: the background release
/// removes it once the server answers again, well before the TTL.
pub async fn abandoned_acquire_leaves_no_holder(factory: &dyn BackendFactory) {
    let mut deployment = Deployment::start(factory).await;
    let ttl = Duration::from_secs(20);
    let locks = deployment.manager(fast_config(ttl));
    // Load the scripts first: otherwise the frozen EVALSHA would answer
    // NOSCRIPT on resume and the check would pass without testing anything.
    let warm_up = taken(&locks, "warm-up").await;
    warm_up.release().await.expect("release");
    for server in &mut deployment.servers {
        server.pause().expect("SIGSTOP");
    }
    let attempt = tokio::time::timeout(Duration::from_secs(5), locks.try_acquire("frozen")).await;
    assert!(
        matches!(&attempt, Ok(Err(err)) if is_unreachable(err)),
        "an acquire against a frozen server fails with a timeout, got {attempt:?}"
    );
    for server in &mut deployment.servers {
        server.resume().expect("SIGCONT");
    }
    let started = Instant::now();
    loop {
        match locks.inspect("frozen").await {
            Ok(state) if !state.is_held() => break,
            _ => {}
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the unowned acquire still holds the key 5 s after the server came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let guard = locks.try_acquire("frozen").await.expect("try_acquire");
    assert!(guard.is_some(), "the key is free for the next owner");
}

/// `with_lock` returns the work's output when the lease held, and
/// `LeaseLost` when it was lost while the work ran.
pub async fn with_lock_reports_loss(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let locks = deployment.manager(fast_config(Duration::from_millis(300)));
    let output = locks
        .with_lock("work", |lease| async move {
            lease.fencing_token().map_or(0, |token| token.get()) + 1
        })
        .await
        .expect("work under a held lease");
    assert!(output >= 1);
    let redis_key = locks.key("work").expect("key").redis_key().to_owned();
    let result = locks
        .with_lock("work", |lease| {
            let deployment = &deployment;
            async move {
                deployment.admin_all(&["DEL", &redis_key]);
                lease.lost().await
            }
        })
        .await;
    assert!(
        matches!(
            result,
            Err(LockError::LeaseLost {
                reason: LossReason::NotHeld,
                ..
            })
        ),
        "with_lock must report the loss, got {result:?}"
    );
}

/// A forced release frees a held key for the next owner and keeps the
/// fencing counter, so the next token is still higher.
pub async fn force_release_frees_the_key(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let (key, stuck, next) = (key("stuck"), owner(), owner());
    let ttl = Duration::from_secs(30);
    let first = match acquire(backend, &key, &stuck, ttl).await {
        AcquireOutcome::Acquired(lock_core::Acquired { fencing_token, .. }) => fencing_token,
        other => panic!("expected to acquire, got {other:?}"),
    };
    // A multi-node acquire returns once a majority granted; the other grants
    // may land later, so count a majority, not every node.
    let majority = factory.node_count() / 2 + 1;
    let held_on = backend.force_release(&key).await.expect("force_release");
    assert!(
        (majority..=factory.node_count()).contains(&held_on),
        "the key was held on {held_on} nodes; a majority of {} held it",
        factory.node_count()
    );
    let left = backend.force_release(&key).await.expect("force_release");
    assert!(
        left < majority,
        "a majority still held the key after a forced release"
    );
    match acquire(backend, &key, &next, ttl).await {
        AcquireOutcome::Acquired(lock_core::Acquired { fencing_token, .. })
            if factory.capabilities().fencing =>
        {
            assert!(
                first.is_some() && fencing_token > first,
                "the token after a forced release ({fencing_token:?}) must exceed {first:?}"
            )
        }
        AcquireOutcome::Acquired(lock_core::Acquired { fencing_token, .. }) => assert_eq!(
            (first, fencing_token),
            (None, None),
            "a strategy without fencing returned a token"
        ),
        other => panic!("the key was not free after a forced release: {other:?}"),
    }
}

/// `LockManager::list` finds every held lock on every node (every master
/// of a cluster), names with `}`, spaces and non-ASCII letters included,
/// leaves free locks out, filters by name prefix, and says when its scan
/// limit cut it short.
pub async fn list_finds_held_locks(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let ttl = Duration::from_secs(10);
    let locks = deployment.manager(fast_config(ttl));
    let names = [
        "order:1",
        "order:2",
        "order:3",
        "order:4",
        "}odd name",
        "a}b c",
        "ключ 🔒",
    ];
    let mut guards = Vec::new();
    for name in names {
        guards.push(taken(&locks, name).await);
    }
    let released = taken(&locks, "released").await;
    released.release().await.expect("release");
    let listing = locks.list(&ListOptions::default()).await.expect("list");
    assert!(
        !listing.truncated && listing.failures.is_empty(),
        "{listing:?}"
    );
    let mut found: Vec<&str> = listing
        .locks
        .iter()
        .map(|lock| lock.name.as_str())
        .collect();
    found.sort_unstable();
    let mut expected = names.to_vec();
    expected.sort_unstable();
    assert_eq!(found, expected, "every held lock, and only those");
    for lock in &listing.locks {
        match &lock.state {
            Ok(NameState::Lock(LockState::Held {
                remaining: Some(left),
                token,
                ..
            })) => {
                assert!(*left <= ttl, "{}: {left:?}", lock.name);
                assert_eq!(
                    token.is_some(),
                    factory.capabilities().fencing,
                    "{}: {token:?}",
                    lock.name
                );
            }
            other => panic!("{}: {other:?}", lock.name),
        }
    }
    for (prefix, count) in [("order:", 4), ("}", 1), ("a}", 1), ("ключ", 1), ("none", 0)] {
        let listing = locks
            .list(&ListOptions::with_name_prefix(prefix))
            .await
            .expect("list");
        assert_eq!(listing.locks.len(), count, "--prefix {prefix}: {listing:?}");
    }
    let cut = locks
        .list(&ListOptions::default().with_scan_limit(1))
        .await
        .expect("list");
    assert!(cut.truncated && cut.examined == 1, "{cut:?}");
    for guard in guards {
        guard.release().await.expect("release");
    }
    let listing = locks.list(&ListOptions::default()).await.expect("list");
    assert!(listing.locks.is_empty(), "{listing:?}");
}

/// The backend declares ([`LockBackend::capabilities`]) exactly what the
/// strategy's tests expect of it ([`BackendFactory::capabilities`]), and,
/// where it declares whether its grants fence, what they expect of that.
///
/// Every other check adapts to the declaration (a primitive's check on a
/// backend without the primitive asserts that its handle is refused, as
/// the engine refuses it by the declaration), so this is the check that
/// fails when a backend stops declaring a capability it has, or declares
/// one it should not.
pub async fn capabilities_are_declared(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let declared = deployment.backend.capabilities();
    let expected = factory.capabilities();
    let wrong: Vec<String> = Capability::ALL
        .iter()
        .filter(|&&capability| declared.has(capability) != expected.has(capability))
        .map(|&capability| {
            format!(
                "{capability}: declared {}, expected {}",
                declared.has(capability),
                expected.has(capability)
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
    if let Some(fencing) = declared.fencing {
        assert_eq!(
            fencing, expected.fencing,
            "the backend declares fencing = {fencing}"
        );
    }
}

/// Inspect reports free and held keys with their TTL.
pub async fn inspect_reports_state(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let key = key("inspected");
    assert!(matches!(
        lock_core::LockState::from(backend.inspect(&key).await.expect("inspect")),
        LockState::Free { last_token: None }
    ));
    let ttl = Duration::from_secs(10);
    assert!(acquired(acquire(backend, &key, &owner(), ttl).await));
    match lock_core::LockState::from(backend.inspect(&key).await.expect("inspect")) {
        LockState::Held {
            remaining: Some(left),
            holder,
            ..
        } => {
            assert!(
                left <= ttl && left > ttl / 2,
                "remaining {left:?} for a {ttl:?} TTL"
            );
            // What the backend declares (and a manager's config must
            // match) is what its grants store.
            if let Some(declared) = backend.capabilities().holder_info {
                assert_eq!(
                    holder.is_some(),
                    declared,
                    "the backend declares holder_info = {declared}: {holder:?}"
                );
            }
        }
        other => panic!("expected a held key, got {other:?}"),
    }
}

/// A lease handed off keeps the lock without renewal. Where the strategy can
/// take a hold over in one step (single node), a second manager (another
/// process, as far as the lease can tell) resumes it from the token's text:
/// same fencing token, renewed by its own watchdog, released by it. Where it
/// cannot (Redlock), `resume` says so and the token still extends and
/// releases the lease. The reentrant strategy refuses to hand off at all.
pub async fn handed_off_lease_resumes_elsewhere(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let ttl = Duration::from_millis(600);
    let locks = deployment.manager(fast_config(ttl));
    let elsewhere = deployment.manager(fast_config(ttl));
    let guard = taken(&locks, "handed").await;
    let token = guard.fencing_token();
    assert_eq!(
        token.is_some(),
        factory.capabilities().fencing,
        "a token exactly where the strategy fences: {token:?}"
    );
    let handle = guard.handle();
    if !deployment.backend.capabilities().releases_only_its_attempt {
        match guard.hand_off() {
            Err(LockError::HandOffUnsupported { .. }) => {}
            other => panic!("hand_off of a shared hold: {other:?}"),
        }
        assert_eq!(
            handle.status(),
            LeaseStatus::Released,
            "released as if dropped"
        );
        return;
    }
    let text = guard
        .hand_off()
        .expect("a held lease hands off")
        .expose()
        .to_owned();
    assert_eq!(
        handle.status(),
        LeaseStatus::Released,
        "the old guard lets go"
    );
    assert!(
        held_by_another(&locks, "handed").await,
        "handing off releases nothing"
    );
    let handoff = HandoffToken::parse(&text).expect("the token's text parses");
    assert_eq!(handoff.fencing_token(), token);
    let resumes = deployment.backend.capabilities().has(Capability::HandOff);
    match (resumes, elsewhere.resume("handed", &handoff).await) {
        (true, Ok(resumed)) => {
            assert_eq!(
                resumed.fencing_token(),
                token,
                "the hold keeps its fencing token"
            );
            // Three TTLs: only the new watchdog can have kept it.
            tokio::time::sleep(ttl * 3).await;
            assert!(resumed.is_valid(), "the resumed lease is renewed");
            assert!(
                held_by_another(&locks, "handed").await,
                "still held by the resumed lease"
            );
            resumed.release().await.expect("the resumed lease releases");
        }
        (false, Err(LockError::HandOffUnsupported { .. })) => {
            // Kept across steps by token alone, as `distlock extend` does.
            tokio::time::sleep(ttl / 2).await;
            let set = elsewhere
                .extend_by_token("handed", &handoff, ttl * 2)
                .await
                .expect("extend by token");
            assert!(set >= ttl * 2, "{set:?}");
            tokio::time::sleep(ttl).await;
            assert!(
                held_by_another(&locks, "handed").await,
                "kept by the extend past its first TTL"
            );
            elsewhere
                .release_by_token("handed", &handoff)
                .await
                .expect("release by token");
        }
        (resumes, other) => panic!("resume, hand-off declared: {resumes}: {other:?}"),
    }
    match elsewhere.release_by_token("handed", &handoff).await {
        Err(LockError::NotHeld { key }) => assert_eq!(key, "handed"),
        other => panic!("release by token after the release: {other:?}"),
    }
    let next = taken(&locks, "handed").await;
    next.release().await.expect("release");
}

/// A resumed token is spent: a second resume, an extend or release by the
/// same token, and an extend of the old hold still on its way all find the
/// lock no longer theirs, while the resumed lease keeps it. A token that
/// lies about its fencing token resumes nothing.
pub async fn resume_spends_the_token(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let ttl = Duration::from_secs(5);
    let locks = deployment.manager(fast_config(ttl));
    if !deployment.backend.capabilities().releases_only_its_attempt {
        return; // no hand-off (see handed_off_lease_resumes_elsewhere)
    }
    let guard = taken(&locks, "spent").await;
    let handoff = guard.hand_off().expect("hand off");
    let resumes = deployment.backend.capabilities().has(Capability::HandOff);
    let resumed = match (resumes, locks.resume("spent", &handoff).await) {
        (true, Ok(resumed)) => resumed,
        // Without hand-off, the refusal is all there is to spend.
        (false, Err(LockError::HandOffUnsupported { .. })) => return,
        (resumes, other) => panic!("resume, hand-off declared: {resumes}: {other:?}"),
    };
    match locks.resume("spent", &handoff).await {
        Err(LockError::NotOwner { key }) => assert_eq!(key, "spent"),
        other => panic!("a second resume: {other:?}"),
    }
    // What the old process's watchdog would still send.
    let key = locks.key("spent").expect("key");
    assert_eq!(
        deployment
            .backend
            .extend(&key, handoff.hold(), Duration::from_millis(50))
            .await
            .expect("extend"),
        ExtendOutcome::NotHeld,
        "the old hold's extend shortens nothing"
    );
    for result in [
        locks
            .extend_by_token("spent", &handoff, ttl)
            .await
            .map(|_| ()),
        locks.release_by_token("spent", &handoff).await,
    ] {
        assert!(
            matches!(result, Err(LockError::NotOwner { .. })),
            "{result:?}"
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(resumed.is_valid(), "the resumed lease keeps the lock");
    assert!(locks.inspect("spent").await.expect("inspect").is_held());
    // A token of the current hold that claims a fencing token the counter
    // does not show: a later one, or, for a hold without a token (a
    // strategy that does not fence), one beside the counter a fencing
    // process left on the same name.
    let current = resumed.hand_off().expect("hand off again");
    let claimed = match current.fencing_token() {
        Some(token) => token.get() + 1,
        None => {
            assert!(
                !factory.capabilities().fencing,
                "a fencing strategy's hold has a token"
            );
            deployment.admin_all(&["SET", key.fence_key(), "7"]);
            8
        }
    };
    // `dl1.lock.<fencing token>.<ttl>.<nonce>.<owner>`, with another token.
    let forged = format!(
        "dl1.lock.{claimed}.{}",
        current
            .expose()
            .splitn(4, '.')
            .nth(3)
            .expect("ttl, nonce and owner")
    );
    let forged = HandoffToken::parse(&forged).expect("well-formed");
    assert!(
        matches!(
            locks.resume("spent", &forged).await,
            Err(LockError::NotOwner { .. })
        ),
        "a token that lies about its fencing token"
    );
    let resumed = locks
        .resume("spent", &current)
        .await
        .expect("the genuine token");
    resumed.release().await.expect("release");
}

/// `resume` says why it cannot: another hold has the lock, nobody has it
/// (released, or expired after a hand-off nobody resumed), or the key holds
/// something else.
pub async fn resume_refuses_what_it_does_not_hold(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    if !deployment.backend.capabilities().releases_only_its_attempt {
        return; // no hand-off (see handed_off_lease_resumes_elsewhere)
    }
    let ttl = Duration::from_millis(300);
    let locks = deployment.manager(fast_config(ttl));
    let hand_off = |name: &'static str| {
        let locks = locks.clone();
        async move { taken(&locks, name).await.hand_off().expect("hand off") }
    };
    // Extend by token works wherever hand-off does; resume only where the
    // backend declares it can take a hold over.
    let resumes = deployment.backend.capabilities().has(Capability::HandOff);
    let probe = locks.resume("probe", &hand_off("probe").await).await;
    assert_eq!(
        !matches!(probe, Err(LockError::HandOffUnsupported { .. })),
        resumes,
        "resume, hand-off declared: {resumes}: {probe:?}"
    );
    drop(probe);
    let act = |name: &'static str, token: HandoffToken| {
        let locks = locks.clone();
        async move {
            if resumes {
                locks.resume(name, &token).await.map(|_| ())
            } else {
                locks
                    .extend_by_token(name, &token, Duration::from_secs(1))
                    .await
                    .map(|_| ())
            }
        }
    };
    // Another lock's token, on a lock someone else holds.
    let holder = taken(&locks, "claimed").await;
    match act("claimed", hand_off("elsewhere").await).await {
        Err(LockError::NotOwner { key }) => assert_eq!(key, "claimed"),
        other => panic!("another hold's token: {other:?}"),
    }
    assert!(holder.is_valid(), "the holder is untouched");
    // Nobody resumed the hand-off: it expires at its TTL.
    let abandoned = hand_off("abandoned").await;
    tokio::time::sleep(ttl * 2).await;
    match act("abandoned", abandoned).await {
        Err(LockError::NotHeld { key }) => assert_eq!(key, "abandoned"),
        other => panic!("after the TTL: {other:?}"),
    }
    // A key of another type.
    let typed = locks.key("typed").expect("key");
    deployment.admin_all(&["RPUSH", typed.redis_key(), "not a lock"]);
    match act("typed", hand_off("typed-token").await).await {
        Err(err) => assert!(is_corrupted(&err), "on a list: {err:?}"),
        Ok(()) => panic!("acting on a list succeeded"),
    }
    holder.release().await.expect("release");
}

/// Whether `err` says the key holds data that is not a lock (on every node
/// that failed, for multi-node strategies).
fn is_corrupted(err: &LockError) -> bool {
    match err {
        LockError::Corrupted { .. } => true,
        LockError::QuorumNotReached { failures, .. } => {
            !failures.is_empty() && failures.iter().all(is_corrupted)
        }
        _ => false,
    }
}

/// With `watchdog.max_hold`, renewals stop that long after the acquire: the
/// lease is valid until then, runs out at the cap, and is reported with its
/// own reason; the key is free for others right after.
pub async fn max_hold_ends_renewal(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let ttl = Duration::from_millis(300);
    let max_hold = Duration::from_millis(900);
    let mut config = fast_config(ttl);
    config.watchdog.max_hold = Some(max_hold);
    let locks = deployment.manager(config);
    let started = Instant::now();
    let guard = taken(&locks, "capped").await;
    let reason = tokio::time::timeout(max_hold + ttl * 2, guard.lost())
        .await
        .expect("the lease ends within a TTL of the cap");
    let held_for = started.elapsed();
    assert_eq!(reason, Some(LossReason::MaxHoldReached));
    assert!(
        held_for >= max_hold - ttl / 3 && held_for <= max_hold + ttl / 3,
        "held for {held_for:?} with max_hold {max_hold:?} and a {ttl:?} TTL"
    );
    let next = locks
        .acquire_with("capped", &waiting_up_to(ttl))
        .await
        .expect("free once the capped lease ran out");
    assert!(matches!(
        guard.release().await,
        Err(LockError::LeaseLost {
            reason: LossReason::MaxHoldReached,
            ..
        })
    ));
    next.release().await.expect("release");
}

/// Bad keys and TTLs get typed errors, at the backend and at the manager.
pub async fn bad_input_is_rejected(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let backend = deployment.backend.as_ref();
    let locks = deployment.manager(fast_config(Duration::from_secs(1)));
    let holder = owner();
    let valid = key("valid");
    for ttl in [
        Duration::ZERO,
        Duration::from_micros(500),
        MAX_TTL + Duration::from_secs(1),
        Duration::MAX,
    ] {
        assert!(
            matches!(
                backend
                    .try_acquire(&valid, &holder, ttl, &lock_core::Claim::LOCK, None)
                    .await,
                Err(LockError::InvalidTtl { .. })
            ),
            "try_acquire with TTL {ttl:?}"
        );
        assert!(
            matches!(
                backend.extend(&valid, &holder, ttl).await,
                Err(LockError::InvalidTtl { .. })
            ),
            "extend with TTL {ttl:?}"
        );
    }
    let long = "k".repeat(MAX_KEY_LEN + 1);
    for name in ["", long.as_str()] {
        assert!(
            matches!(
                locks.try_acquire(name).await,
                Err(LockError::InvalidKey { .. })
            ),
            "name of {} bytes",
            name.len()
        );
        assert!(matches!(
            locks.acquire(name).await,
            Err(LockError::InvalidKey { .. })
        ));
        assert!(matches!(
            locks.inspect(name).await,
            Err(LockError::InvalidKey { .. })
        ));
    }
    // A key of the wrong type is reported as corrupted, not misread, and left as it was.
    let wrong = key("wrongtype");
    deployment.admin_all(&["RPUSH", wrong.redis_key(), "x"]);
    let outcome = backend.release(&wrong, &holder).await;
    assert!(
        matches!(outcome, Err(LockError::Corrupted { ref key, .. }) if key == wrong.redis_key()),
        "release of a list key: {outcome:?}"
    );
    let outcome = backend
        .extend(&wrong, &holder, Duration::from_secs(1))
        .await;
    assert!(
        matches!(outcome, Err(LockError::Corrupted { .. })),
        "extend of a list key: {outcome:?}"
    );
    let outcome = backend
        .try_acquire(
            &wrong,
            &holder,
            Duration::from_secs(1),
            &lock_core::Claim::LOCK,
            None,
        )
        .await;
    assert!(
        !matches!(outcome, Ok(AcquireOutcome::Acquired(_))),
        "a list key is never taken over: {outcome:?}"
    );
    for server in &deployment.servers {
        let length = server.admin(&["LLEN", wrong.redis_key()]).expect("LLEN");
        assert_eq!(
            length.as_int(),
            Some(1),
            "the foreign key was left as it was"
        );
    }
}

/// A node that is down gives a clear error within the connect timeout, and a
/// node that dies later fails operations within the command timeout.
pub async fn server_down_is_a_clear_error(factory: &dyn BackendFactory) {
    let urls: Vec<NodeUrl> = (0..factory.node_count())
        .map(|_| NodeUrl::new(format!("redis://127.0.0.1:{}", free_port().expect("port"))))
        .collect();
    let options = fast_options();
    let started = Instant::now();
    let result =
        tokio::time::timeout(options.connect_timeout * 3, factory.connect(&urls, options)).await;
    let result = result.expect("connect must not hang when the server is down");
    assert!(
        matches!(&result, Err(err) if is_unreachable(err)),
        "connect to a closed port: {result:?}"
    );
    assert!(started.elapsed() <= options.connect_timeout + Duration::from_millis(500));

    let mut deployment = Deployment::start(factory).await;
    for server in &mut deployment.servers {
        server.kill().expect("kill -9");
    }
    let started = Instant::now();
    let outcome = deployment
        .backend
        .try_acquire(
            &key("dead"),
            &owner(),
            Duration::from_secs(1),
            &lock_core::Claim::LOCK,
            None,
        )
        .await;
    assert!(outcome.is_err(), "acquire on a dead server: {outcome:?}");
    assert!(
        outcome.as_ref().is_err_and(LockError::is_retryable),
        "a dead server is worth retrying: {outcome:?}"
    );
    assert!(
        started.elapsed() < options.connect_timeout + options.command_timeout * 2,
        "failed after {:?}",
        started.elapsed()
    );
}

/// After the server is killed and restarted (empty, on the same port), the
/// same backend reconnects by itself and locks work again; a lease held across
/// the restart is reported lost.
pub async fn reconnects_after_restart(factory: &dyn BackendFactory) {
    let mut deployment = Deployment::start(factory).await;
    let mut config = fast_config(Duration::from_millis(400));
    config.wait_timeout = Duration::from_secs(8);
    let locks = deployment.manager(config);
    let guard = taken(&locks, "restarted").await;
    for server in &mut deployment.servers {
        server.restart().expect("restart redis-server");
    }
    let reason = tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("the loss of a lease held across a restart is reported");
    assert!(
        reason.is_some(),
        "a restart without persistence loses the lease"
    );
    let again = locks
        .acquire("restarted")
        .await
        .expect("locks work again after the restart");
    again.release().await.expect("release after the restart");
}

/// The owner that holds a lock enters it again if the strategy is reentrant
/// (same fencing token, hold count up, released when the count reaches zero),
/// and finds it held otherwise.
pub async fn reentry_follows_capability(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let capabilities = factory.capabilities();
    let locks = deployment.manager(fast_config(Duration::from_secs(10)));
    let outer = taken(&locks, "nested").await;
    let again = lock_core::AcquireOptions::new()
        .with_owner(outer.owner().clone())
        .no_wait();
    let inner = locks.acquire_with("nested", &again).await;
    if !capabilities.reentrant {
        assert!(
            matches!(inner, Err(LockError::NotAcquired { attempts: 1, .. })),
            "a non-reentrant lock let its owner in twice: {:?}",
            inner.map(|guard| guard.fencing_token())
        );
        outer.release().await.expect("release");
        return;
    }
    let inner = inner.expect("the holder re-enters a reentrant lock");
    assert_eq!(
        inner.fencing_token(),
        outer.fencing_token(),
        "a re-entry keeps the fencing token"
    );
    let held_twice = lock_core::LockState::from(locks.inspect("nested").await.expect("inspect"));
    assert!(
        matches!(
            held_twice,
            LockState::Held {
                hold_count: Some(2),
                ..
            }
        ),
        "two holds: {held_twice:?}"
    );
    assert!(
        held_by_another(&locks, "nested").await,
        "another owner stays out while holds remain"
    );
    // Re-entry works from another task, because the owner is a value.
    let owner = outer.owner().clone();
    let nested = locks.clone();
    let third = tokio::spawn(async move {
        let again = lock_core::AcquireOptions::new().with_owner(owner).no_wait();
        nested.acquire_with("nested", &again).await
    })
    .await
    .expect("task")
    .expect("re-entry from another task");
    third.release().await.expect("release the third hold");
    inner.release().await.expect("release the inner hold");
    assert!(
        matches!(
            lock_core::LockState::from(locks.inspect("nested").await.expect("inspect")),
            LockState::Held {
                hold_count: Some(1),
                ..
            }
        ),
        "one hold left"
    );
    assert!(
        outer.is_valid(),
        "the outer lease survives the inner release"
    );
    outer.release().await.expect("release the outer hold");
    assert!(!locks.inspect("nested").await.expect("inspect").is_held());
}

/// A config whose polling would be hopelessly slow (every backoff delay is
/// drawn from 0 to 10 s), so a fast handover proves that waiters were woken
/// by the release itself.
fn slow_polling_config(ttl: Duration) -> LockConfig {
    let mut config = fast_config(ttl);
    config.retry = RetryPolicy::new(Duration::from_secs(10), Duration::from_secs(10));
    config.wait_timeout = Duration::from_secs(30);
    config
}

/// Waiters wake when the lock is released, not by polling: several waiters
/// queue behind a holder and each gets the lock in turn, quickly, with no
/// wake-up lost between a failed attempt and the wait.
pub async fn waiters_wake_on_release(factory: &dyn BackendFactory) {
    const WAITERS: usize = 6;
    let deployment = Deployment::start(factory).await;
    let counted = Faulty::passing(&deployment.backend);
    let config = slow_polling_config(Duration::from_secs(10));
    let locks = manager_over(Arc::clone(&counted) as Arc<dyn LockBackend>, config);
    let holder = taken(&locks, "handover").await;
    let inside = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for _ in 0..WAITERS {
        let (locks, inside) = (locks.clone(), Arc::clone(&inside));
        waiters.push(tokio::spawn(async move {
            let guard = locks
                .acquire("handover")
                .await
                .expect("acquire after a release");
            alone_inside(&inside, Duration::from_millis(5)).await;
            guard.release().await.expect("release");
        }));
    }
    // Every waiter failed once and watches for releases.
    crate::eventually(Duration::from_secs(10), "every waiter watching", || {
        let watching = counted.watches();
        async move { (watching >= WAITERS).then_some(()) }
    })
    .await;
    let released_at = Instant::now();
    holder.release().await.expect("release the first hold");
    for waiter in waiters {
        waiter.await.expect("a waiter panicked");
    }
    let handover = released_at.elapsed();
    assert!(
        handover < Duration::from_secs(3),
        "{WAITERS} handovers took {handover:?}: waiters were not woken by the releases"
    );
}

/// Waiters behind a holder that crashed (never releases) get the lock soon
/// after its TTL runs out, without waiting for a backoff delay.
pub async fn waiters_of_a_crashed_holder_acquire_after_its_ttl(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let ttl = Duration::from_millis(500);
    let locks = deployment.manager(slow_polling_config(ttl));
    let key = locks.key("crashed").expect("key");
    let crashed = owner();
    let started = Instant::now();
    assert!(acquired(
        acquire(deployment.backend.as_ref(), &key, &crashed, ttl).await
    ));
    let guard = locks
        .acquire("crashed")
        .await
        .expect("acquire after the TTL");
    let waited = started.elapsed();
    assert!(
        waited >= ttl - Duration::from_millis(50),
        "acquired after {waited:?}, before the TTL ran out"
    );
    assert!(
        waited < ttl + Duration::from_millis(1500),
        "acquired {waited:?} after a {ttl:?} TTL"
    );
    guard.release().await.expect("release");
}

/// Polling stays available, and hands the lock over too.
pub async fn polling_mode_hands_over(factory: &dyn BackendFactory) {
    let deployment = Deployment::start(factory).await;
    let mut config = fast_config(Duration::from_secs(10));
    config.wait_mode = lock_core::WaitMode::Poll;
    let counted = Faulty::passing(&deployment.backend);
    let locks = manager_over(Arc::clone(&counted) as Arc<dyn LockBackend>, config);
    let holder = taken(&locks, "polled").await;
    let sent = counted.acquires();
    let waiter = {
        let locks = locks.clone();
        tokio::spawn(async move { locks.acquire("polled").await })
    };
    // A second attempt sent: the first found the lock held, so it polls.
    crate::eventually(Duration::from_secs(10), "the poller polling", || {
        let attempts = counted.acquires() - sent;
        async move { (attempts >= 2).then_some(()) }
    })
    .await;
    holder.release().await.expect("release");
    let guard = waiter.await.expect("task").expect("the poller acquires");
    guard.release().await.expect("release");
}

/// A wrong password, or none, is an authentication error; a malformed URL is a
/// config error.
pub async fn bad_credentials_and_urls_are_rejected(factory: &dyn BackendFactory) {
    let servers: Vec<RedisServer> = (0..factory.node_count())
        .map(|_| {
            RedisServer::builder()
                .password("correct-horse")
                .start()
                .expect("start redis-server")
        })
        .collect();
    let options = fast_options();
    for (label, urls) in [
        (
            "wrong password",
            servers
                .iter()
                .map(|server| server.url_with_password("wrong"))
                .collect::<Vec<_>>(),
        ),
        (
            "no password",
            servers
                .iter()
                .map(|server| NodeUrl::new(format!("redis://127.0.0.1:{}", server.port())))
                .collect(),
        ),
    ] {
        let result =
            tokio::time::timeout(options.connect_timeout * 3, factory.connect(&urls, options))
                .await
                .expect("connect must not hang on bad credentials");
        assert!(
            matches!(&result, Err(err) if is_authentication_failure(err)),
            "{label}: {result:?}"
        );
    }
    let urls: Vec<NodeUrl> = servers.iter().map(RedisServer::url).collect();
    factory
        .connect(&urls, options)
        .await
        .expect("the right password connects");
    for bad in [
        "",
        "127.0.0.1:6379",
        "redis://",
        "redis://host:notaport",
        "http://127.0.0.1",
    ] {
        let urls = vec![NodeUrl::new(bad); factory.node_count()];
        let result = factory.connect(&urls, options).await;
        assert!(
            matches!(result, Err(LockError::InvalidConfig { .. })),
            "url {bad:?}: {result:?}"
        );
    }
}
