//! A release that fails in a way that may pass (its reply lost, a broken
//! connection) is sent again at once, since a release names one attempt's
//! hold and may run twice. When that second send finds the key gone, the
//! first may have run unanswered or the lease may have been lost before it:
//! the release reports the first error, neither a clean release nor a loss.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::Arc;
use std::time::Duration;

use lock_core::{ClientKind, ConnectOptions, LockError, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::contract::fast_config;
use lock_testkit::contract::taken;
use lock_testkit::{AdminReply, DelayProxy, RedisServer};

/// The release's command reaches the server and runs, and its reply is
/// lost: a partition starts while the reply is on its way back (the proxy
/// delays 200 ms each way) and, healing, ends the connection. The release
/// is sent again and finds the key gone: it reports the connection error
/// (it cannot tell its own first send from a loss), not `Ok` and not a lost
/// lease, and the key is gone.
#[test]
fn a_release_whose_reply_was_lost_reports_the_fault() {
    const TTL: Duration = Duration::from_secs(10);
    lock_testkit::run(async {
        for kind in ClientKind::compiled() {
            let server = RedisServer::start().expect("start");
            let proxy = DelayProxy::start(server.port(), Duration::from_millis(200))
                .await
                .expect("proxy");
            let options = ConnectOptions::new(Duration::from_secs(2), Duration::from_secs(3));
            let backend = SingleNodeBackend::connect(kind, &proxy.url(), options)
                .await
                .expect("connect");
            let mut config =
                fast_config(TTL).with_timeouts(Duration::from_secs(2), Duration::from_secs(3));
            // Nothing but the release on the connection.
            config.watchdog.enabled = false;
            let locks = LockManager::new(Arc::new(backend), config).expect("config");
            // The release script loaded first: its first call would meet
            // NOSCRIPT and take a second round trip.
            let warm = taken(&locks, "warm").await;
            warm.release().await.expect("release");
            let guard = taken(&locks, "lost-reply").await;
            let key = locks.key("lost-reply").expect("key").redis_key().to_owned();
            let release = tokio::spawn(guard.release());
            // The command reaches the server at about 200 ms, its reply the
            // client at about 400 ms: the partition swallows the reply.
            tokio::time::sleep(Duration::from_millis(300)).await;
            proxy.set_blackhole(true);
            tokio::time::sleep(Duration::from_millis(200)).await;
            proxy.set_blackhole(false);
            let released = release.await.expect("release task");
            assert!(
                matches!(released, Err(LockError::Connection { .. })),
                "{kind}: a release whose reply was lost: {released:?}"
            );
            let exists = server.admin(&["EXISTS", &key]).expect("EXISTS");
            assert!(
                matches!(exists, AdminReply::Int(0)),
                "{kind}: the key is still there: {exists:?}"
            );
        }
    });
}
