//! Production topologies, the way users misconfigure them: a cluster config
//! pointed at a standalone server, TLS against a plain port, a CA file that
//! is missing, malformed or the wrong one, a cluster seed that is down while
//! another is up. Each is a clear error naming the field or node, or the
//! documented success, on both clients.
//!
//! These start TLS servers and clusters, so they run in the build with both
//! clients and TLS (`cargo xtask test` runs it).

#![cfg(all(feature = "redis", feature = "fred", feature = "tls"))]

use std::sync::Arc;
use std::time::Duration;

use lock_core::{ClientKind, ConnectOptions, Endpoint, LockError, NodeUrl, TlsConfig};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::waiting_up_to;
use lock_testkit::{free_port, RedisCluster, RedisServer, TlsFiles};

fn options() -> ConnectOptions {
    ConnectOptions::new(Duration::from_secs(2), Duration::from_millis(500))
}

async fn connect(kind: ClientKind, endpoint: &Endpoint) -> Result<SingleNodeBackend, LockError> {
    SingleNodeBackend::connect(kind, endpoint, options()).await
}

/// Connects and takes one lock, to show the connection really works.
async fn lock_once(kind: ClientKind, endpoint: &Endpoint) -> Result<(), LockError> {
    let backend = connect(kind, endpoint).await?;
    let mut config = lock_core::LockConfig::default();
    config.ttl = Duration::from_secs(5);
    let manager = lock_core::LockManager::new(Arc::new(backend), config)?;
    let guard = manager
        .try_acquire("topology-check")
        .await?
        .expect("a free lock is granted");
    guard.release().await
}

/// A cluster of three masters without replicas, started off the runtime's
/// threads.
async fn three_masters() -> RedisCluster {
    tokio::task::spawn_blocking(|| RedisCluster::start(3, 0))
        .await
        .expect("task")
        .expect("cluster")
}

/// Asserts that `err` is what a server we cannot talk to gives: a
/// connection error or a timeout, not a config error.
fn assert_cannot_connect(kind: ClientKind, err: &LockError) {
    assert!(
        matches!(
            err,
            LockError::Connection { .. } | LockError::Timeout { .. }
        ),
        "{kind}: {err}"
    );
}

/// A server that also serves TLS with `files`' certificate, and requires
/// clients to present one signed by their CA (Redis's default).
fn tls_server(files: Arc<TlsFiles>) -> RedisServer {
    RedisServer::builder()
        .tls(files)
        .tls_auth_clients(true)
        .start()
        .expect("TLS redis-server")
}

fn tls_config(files: &TlsFiles) -> TlsConfig {
    TlsConfig::default()
        .with_ca_file(files.ca_file())
        .with_client_cert(files.cert_file(), files.key_file())
}

#[test]
fn cluster_config_on_a_standalone_server_is_a_clear_error() {
    lock_testkit::on_every_client(async |server, kind| {
        let endpoint = Endpoint::cluster([server.url()]);
        match connect(kind, &endpoint).await {
            Err(LockError::InvalidConfig { field, reason }) => {
                assert_eq!(field, "topology", "{kind}: {reason}");
                assert!(
                    reason.contains(&format!("127.0.0.1:{}", server.port())),
                    "{kind}: the error names the node: {reason}"
                );
            }
            other => panic!("{kind}: a standalone server is no cluster: {other:?}"),
        }
    });
}

#[test]
fn a_down_seed_is_skipped_when_another_answers() {
    lock_testkit::run(async {
        let cluster = three_masters().await;
        let dead = NodeUrl::new(format!("redis://127.0.0.1:{}", free_port().expect("port")));
        let mut seeds = vec![dead];
        seeds.extend(cluster.seed_urls());
        for kind in ClientKind::compiled() {
            lock_once(kind, &Endpoint::cluster(seeds.clone()))
                .await
                .unwrap_or_else(|err| panic!("{kind}: one dead seed of four: {err}"));
        }
    });
}

#[test]
fn tls_against_a_plain_port_fails_fast_and_clearly() {
    lock_testkit::run(async {
        let server = RedisServer::start().expect("redis-server");
        let files = TlsFiles::generate().expect("certificates");
        let url = NodeUrl::new(format!("rediss://127.0.0.1:{}", server.port()));
        for kind in ClientKind::compiled() {
            let endpoint = Endpoint::standalone(url.clone()).with_tls(tls_config(&files));
            let started = std::time::Instant::now();
            let err = connect(kind, &endpoint)
                .await
                .expect_err("a plain server does not speak TLS");
            assert_cannot_connect(kind, &err);
            assert!(
                err.to_string().contains(&server.port().to_string()),
                "{kind}: the error names the node: {err}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{kind}: bounded"
            );
        }
    });
}

#[test]
fn bad_ca_files_name_the_field() {
    lock_testkit::run(async {
        let files = TlsFiles::generate().expect("certificates");
        let server = tls_server(Arc::new(TlsFiles::generate().expect("certificates")));
        let url = server.tls_url().expect("TLS URL");
        let garbage = files.dir().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate").expect("write");
        let cases = [
            (
                "missing",
                TlsConfig::default().with_ca_file(files.dir().join("absent.pem")),
                "tls.ca_file",
            ),
            (
                "not PEM",
                TlsConfig::default().with_ca_file(&garbage),
                "tls.ca_file",
            ),
            (
                "a key that is no key",
                TlsConfig::default().with_client_cert(files.cert_file(), &garbage),
                "tls.key_file",
            ),
        ];
        for kind in ClientKind::compiled() {
            for (case, tls, field) in &cases {
                let endpoint = Endpoint::standalone(url.clone()).with_tls(tls.clone());
                match connect(kind, &endpoint).await {
                    Err(LockError::InvalidConfig { field: named, .. }) => {
                        assert_eq!(&named, field, "{kind}, {case}")
                    }
                    other => panic!("{kind}, {case}: {other:?}"),
                }
            }
            // A well-formed CA that did not sign the server's certificate.
            let wrong_ca = Endpoint::standalone(url.clone()).with_tls(tls_config(&files));
            let err = connect(kind, &wrong_ca)
                .await
                .expect_err("the server's certificate is not signed by this CA");
            assert_cannot_connect(kind, &err);
        }
    });
}

#[test]
fn verified_clients_need_their_certificate() {
    lock_testkit::run(async {
        let files = Arc::new(TlsFiles::generate().expect("certificates"));
        let server = tls_server(Arc::clone(&files));
        let url = server.tls_url().expect("TLS URL");
        for kind in ClientKind::compiled() {
            let without = Endpoint::standalone(url.clone())
                .with_tls(TlsConfig::default().with_ca_file(files.ca_file()));
            assert!(
                lock_once(kind, &without).await.is_err(),
                "{kind}: the server requires a client certificate"
            );
            lock_once(
                kind,
                &Endpoint::standalone(url.clone()).with_tls(tls_config(&files)),
            )
            .await
            .unwrap_or_else(|err| panic!("{kind}: with the client certificate: {err}"));
        }
    });
}

/// A semaphore of 2: two permits in slots 0 and 1, a third refused, and a
/// waiter for both woken by the releases.
async fn semaphore_round(kind: ClientKind, endpoint: &Endpoint) {
    let backend = connect(kind, endpoint).await.expect("connect");
    let mut config = lock_core::LockConfig::default();
    config.ttl = Duration::from_secs(10);
    let locks = lock_core::LockManager::new(Arc::new(backend), config).expect("config");
    let pool = locks.semaphore("pool", 2).expect("semaphore");
    let first = pool.try_acquire().await.expect("try").expect("room");
    let second = pool.try_acquire().await.expect("try").expect("room");
    assert_eq!((first.slot(), second.slot()), (0, 1));
    assert!(
        pool.try_acquire().await.expect("try").is_none(),
        "{kind}: 3 of 2"
    );
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let wait = waiting_up_to(Duration::from_secs(8));
            pool.acquire_many_with(2, &wait).await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released = std::time::Instant::now();
    first.release().await.expect("release");
    second.release().await.expect("release");
    let both = waiter.await.expect("task").expect("both permits");
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "{kind}: the waiter was woken by a timer"
    );
    assert_eq!(pool.state().await.expect("state").used, 2);
    both.release().await.expect("release");
}

/// Semaphores on a cluster (every key of one under its hash tag, so each
/// script runs on one master, and releases reach waiters through the
/// cluster's pub/sub) and over TLS.
#[test]
fn semaphores_on_a_cluster_and_over_tls() {
    lock_testkit::run(async {
        let cluster = three_masters().await;
        let files = Arc::new(TlsFiles::generate().expect("certificates"));
        let tls = tls_server(Arc::clone(&files));
        let tls_url = tls.tls_url().expect("TLS URL");
        for kind in ClientKind::compiled() {
            semaphore_round(kind, &Endpoint::cluster(cluster.seed_urls())).await;
            let endpoint = Endpoint::standalone(tls_url.clone()).with_tls(tls_config(&files));
            semaphore_round(kind, &endpoint).await;
        }
    });
}

/// Fair mode on a cluster: the queue keys share the lock's hash tag, so the
/// fair scripts run on one master; waiters that arrive one after another get
/// the lock in that order, woken by releases published on the cluster.
#[test]
fn fair_mode_keeps_arrival_order_on_a_cluster() {
    const WAITERS: usize = 4;
    lock_testkit::run(async {
        let cluster = three_masters().await;
        for kind in ClientKind::compiled() {
            let backend = connect(kind, &Endpoint::cluster(cluster.seed_urls()))
                .await
                .expect("connect");
            let mut config = lock_core::LockConfig::default();
            config.ttl = Duration::from_secs(10);
            config.wait_timeout = Duration::from_secs(20);
            config.fair = true;
            let locks = lock_core::LockManager::new(Arc::new(backend), config).expect("config");
            let holder = locks.acquire("queue").await.expect("acquire");
            let order = Arc::new(std::sync::Mutex::new(Vec::new()));
            let mut waiters = Vec::new();
            for index in 0..WAITERS {
                let (locks, order) = (locks.clone(), Arc::clone(&order));
                waiters.push(tokio::spawn(async move {
                    let guard = locks.acquire("queue").await.expect("a waiter's turn");
                    order.lock().expect("order").push(index);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    guard.release().await.expect("release");
                }));
                // Arrive one after another.
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            let released = std::time::Instant::now();
            holder.release().await.expect("release");
            for waiter in waiters {
                waiter.await.expect("waiter");
            }
            assert_eq!(
                *order.lock().expect("order"),
                (0..WAITERS).collect::<Vec<_>>(),
                "{kind}: arrival order"
            );
            assert!(
                released.elapsed() < Duration::from_secs(5),
                "{kind}: waiters were woken by releases, not by timers"
            );
        }
    });
}
