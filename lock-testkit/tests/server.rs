//! The testkit's own server handling: start, pause, resume, kill -9, restart.

use std::time::{Duration, Instant};

use lock_core::strategy::KeyNames as _;
use lock_testkit::{AdminReply, RedisServer};

fn ping(server: &RedisServer) -> bool {
    matches!(server.admin(&["PING"]), Ok(AdminReply::Status(status)) if status == "PONG")
}

#[test]
fn lifecycle_of_a_server() {
    let mut server = RedisServer::start().expect("start");
    assert!(ping(&server), "a started server answers");
    assert_eq!(
        server.admin(&["SET", "k", "v"]).expect("SET"),
        AdminReply::Status("OK".into())
    );

    server.pause().expect("SIGSTOP");
    let started = Instant::now();
    assert!(!ping(&server), "a paused server does not answer");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "admin calls are bounded"
    );
    server.resume().expect("SIGCONT");
    assert!(ping(&server), "a resumed server answers");

    let port = server.port();
    server.kill().expect("kill -9");
    assert!(!server.is_running());
    assert!(!ping(&server), "a killed server does not answer");
    server.restart().expect("restart");
    assert_eq!(server.port(), port, "restart keeps the port");
    assert!(ping(&server));
    assert_eq!(
        server.admin(&["GET", "k"]).expect("GET"),
        AdminReply::Bulk(None),
        "no persistence: the restart is empty"
    );
}

#[test]
fn password_protected_server() {
    let server = RedisServer::builder()
        .password("s3cret")
        .start()
        .expect("start");
    assert!(ping(&server), "the admin channel authenticates");
    assert!(server.url().expose().contains("s3cret"));
    assert!(
        !format!("{:?}", server.url()).contains("s3cret"),
        "Debug hides the password"
    );
}

#[test]
fn dropping_a_server_stops_it() {
    let server = RedisServer::start().expect("start");
    let port = server.port();
    drop(server);
    let address = ([127, 0, 0, 1], port).into();
    assert!(
        std::net::TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_err(),
        "nothing listens on the port after drop"
    );
}

/// Every key and the channel of a lock are in one cluster slot, whatever
/// the name, as a cluster-enabled redis-server computes it (`CLUSTER KEYSLOT`).
#[test]
fn every_lock_name_keeps_one_slot_on_a_real_cluster_node() {
    let server = RedisServer::builder()
        .cluster_enabled()
        .start()
        .expect("start a cluster-enabled server");
    let slot = |key: &str| {
        server
            .admin(&["CLUSTER", "KEYSLOT", key])
            .expect("CLUSTER KEYSLOT")
            .as_int()
            .expect("a slot")
    };
    for name in ["}", "}abc", "}{x}", "a}b", "{", "{}", "order:{42}", "}}"] {
        let key = lock_core::LockKey::new("lock:", name).expect("valid key");
        let keys = [
            key.redis_key().to_owned(),
            key.fence_key().to_owned(),
            key.queue_key(),
            key.waiters_key(),
            key.release_channel(),
        ];
        let slots: Vec<i64> = keys.iter().map(|key| slot(key)).collect();
        assert!(
            slots.windows(2).all(|pair| pair[0] == pair[1]),
            "{name:?}: {keys:?} are in slots {slots:?}"
        );
    }
}

/// A persistent server keeps its keys, and their expiry, across a kill -9
/// and restart; a plain one starts empty.
#[test]
fn a_persistent_server_keeps_its_data_across_a_restart() {
    let mut persistent = RedisServer::builder()
        .persistent()
        .start()
        .expect("start a persistent server");
    let mut plain = RedisServer::start().expect("start");
    for server in [&persistent, &plain] {
        server
            .admin(&["SET", "kept", "1", "PX", "60000"])
            .expect("SET");
    }
    persistent.restart().expect("restart");
    plain.restart().expect("restart");
    assert_eq!(
        persistent.admin(&["GET", "kept"]).expect("GET").as_text(),
        Some("1")
    );
    let ttl = persistent.admin(&["PTTL", "kept"]).expect("PTTL").as_int();
    assert!(
        ttl.is_some_and(|ttl| ttl > 0),
        "the expiry survives: {ttl:?}"
    );
    assert_eq!(
        plain.admin(&["EXISTS", "kept"]).expect("EXISTS").as_int(),
        Some(0)
    );
}
