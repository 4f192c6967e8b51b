//! Dropping a backend closes its connections, the subscriber one included.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::{ClientKind, LockBackend, LockError, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::taken;
use lock_testkit::contract::waiting_up_to;
use lock_testkit::contract::{fast_config, fast_options};
use lock_testkit::{AdminReply, RedisServer};

fn connected_clients(server: &RedisServer) -> i64 {
    let Ok(AdminReply::Bulk(Some(info))) = server.admin(&["INFO", "clients"]) else {
        panic!("INFO clients failed");
    };
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|line| line.strip_prefix("connected_clients:")?.trim().parse().ok())
        .expect("connected_clients")
}

async fn connections_close_when_the_backend_is_dropped(kind: ClientKind) {
    let server = RedisServer::start().expect("start");
    let baseline = connected_clients(&server);
    {
        let backend = SingleNodeBackend::connect(kind, &server.url(), fast_options())
            .await
            .expect("connect");
        let locks = LockManager::new(
            Arc::new(backend) as Arc<dyn LockBackend>,
            fast_config(Duration::from_secs(5)),
        )
        .expect("config");
        let holder = taken(&locks, "k").await;
        // A waiter that gives up has subscribed to releases on the way.
        let waited = locks
            .acquire_with("k", &waiting_up_to(Duration::from_millis(100)))
            .await;
        assert!(
            matches!(waited, Err(LockError::NotAcquired { .. })),
            "{waited:?}"
        );
        assert!(
            connected_clients(&server) >= baseline + 2,
            "a command and a subscriber connection"
        );
        holder.release().await.expect("release");
    }
    let started = Instant::now();
    while connected_clients(&server) > baseline {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "connections still open after the backend was dropped: {} > {baseline}",
            connected_clients(&server)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(feature = "redis")]
#[test]
fn connections_close_on_redis() {
    lock_testkit::run(connections_close_when_the_backend_is_dropped(
        ClientKind::Redis,
    ));
}

#[cfg(feature = "fred")]
#[test]
fn connections_close_on_fred() {
    lock_testkit::run(connections_close_when_the_backend_is_dropped(
        ClientKind::Fred,
    ));
}
