//! The delay proxy: adds its delay to each direction, keeps order, and closes
//! its connections when dropped.

use std::time::{Duration, Instant};

use lock_testkit::{DelayProxy, RedisServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const DELAY: Duration = Duration::from_millis(30);

/// Sends `request` and reads until `reply` has arrived; returns the time taken.
async fn round_trip(stream: &mut TcpStream, request: &[u8], reply: &[u8]) -> Duration {
    let started = Instant::now();
    stream.write_all(request).await.expect("write");
    let mut received = Vec::new();
    let mut buffer = [0u8; 256];
    while received.len() < reply.len() {
        let read = stream.read(&mut buffer).await.expect("read");
        assert_ne!(read, 0, "the connection closed early");
        received.extend_from_slice(&buffer[..read]);
    }
    assert_eq!(received, reply);
    started.elapsed()
}

#[test]
fn a_round_trip_through_the_proxy_takes_twice_its_delay() {
    lock_testkit::run(async {
        let server = RedisServer::start().expect("start redis-server");
        let proxy = DelayProxy::start(server.port(), DELAY)
            .await
            .expect("start the proxy");
        assert_eq!(
            proxy.url().expose(),
            format!("redis://127.0.0.1:{}", proxy.port())
        );

        let mut direct = TcpStream::connect(("127.0.0.1", server.port()))
            .await
            .expect("connect directly");
        let fast = round_trip(&mut direct, b"PING\r\n", b"+PONG\r\n").await;

        let mut slow = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("connect through the proxy");
        let delayed = round_trip(&mut slow, b"PING\r\n", b"+PONG\r\n").await;
        assert!(delayed >= DELAY * 2, "{delayed:?} is below twice {DELAY:?}");
        assert!(delayed < DELAY * 2 + Duration::from_secs(2), "{delayed:?}");
        assert!(fast < delayed, "direct {fast:?}, delayed {delayed:?}");

        // Several requests in one write keep their order and cost one delay each way.
        let pipelined = round_trip(
            &mut slow,
            b"SET k 1\r\nINCR k\r\nINCR k\r\n",
            b"+OK\r\n:2\r\n:3\r\n",
        )
        .await;
        assert!(
            pipelined < DELAY * 4,
            "{pipelined:?}: chunks were delayed one after another"
        );

        drop(proxy);
        let mut buffer = [0u8; 16];
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            let _ = slow.write_all(b"PING\r\n").await;
            matches!(slow.read(&mut buffer).await, Ok(0) | Err(_))
        })
        .await
        .expect("a dropped proxy closes its connections promptly");
        assert!(closed, "a dropped proxy must not carry traffic");
    });
}

#[test]
fn a_proxy_to_a_dead_port_closes_its_connections() {
    lock_testkit::run(async {
        let mut server = RedisServer::start().expect("start redis-server");
        let port = server.port();
        server.kill().expect("kill -9");
        let proxy = DelayProxy::start(port, DELAY)
            .await
            .expect("start the proxy");
        let mut stream = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("the proxy itself accepts");
        let mut buffer = [0u8; 16];
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            let _ = stream.write_all(b"PING\r\n").await;
            matches!(stream.read(&mut buffer).await, Ok(0) | Err(_))
        })
        .await
        .expect("a dead upstream closes the connection promptly");
        assert!(closed, "nothing may answer for a dead server");
    });
}

#[test]
fn an_absurd_delay_holds_traffic_without_a_panic() {
    lock_testkit::run(async {
        let server = RedisServer::start().expect("start redis-server");
        let proxy = DelayProxy::start(server.port(), Duration::MAX)
            .await
            .expect("start the proxy");
        let mut stream = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("connect through the proxy");
        stream.write_all(b"PING\r\n").await.expect("write");
        let mut buffer = [0u8; 16];
        let waited =
            tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buffer)).await;
        assert!(
            waited.is_err(),
            "a reply came through an endless delay: {waited:?}"
        );
        // The proxy's tasks are still alive: a fresh connection is accepted.
        TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("the proxy survived the absurd delay");
    });
}

/// A partitioned proxy accepts but answers nothing; once healed, the
/// silenced connection is closed and a new one works.
#[test]
fn a_blackhole_is_silent_until_it_heals() {
    lock_testkit::run(async {
        let server = RedisServer::start().expect("start redis-server");
        let proxy = DelayProxy::start(server.port(), Duration::from_millis(1))
            .await
            .expect("start the proxy");
        let mut before = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("connect");
        round_trip(&mut before, b"PING\r\n", b"+PONG\r\n").await;
        proxy.set_blackhole(true);
        before.write_all(b"PING\r\n").await.expect("write");
        let mut during = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("a partitioned proxy still accepts");
        during.write_all(b"PING\r\n").await.expect("write");
        let mut buffer = [0u8; 16];
        for stream in [&mut before, &mut during] {
            let read =
                tokio::time::timeout(Duration::from_millis(300), stream.read(&mut buffer)).await;
            assert!(read.is_err(), "a partitioned node answered: {read:?}");
        }
        proxy.set_blackhole(false);
        for stream in [&mut before, &mut during] {
            let read = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buffer))
                .await
                .expect("the silenced connection is closed when the partition heals");
            assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        }
        let mut after = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("connect");
        round_trip(&mut after, b"PING\r\n", b"+PONG\r\n").await;
    });
}
