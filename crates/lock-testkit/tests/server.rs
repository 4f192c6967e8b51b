//! The testkit's own server handling: start, pause, resume, kill -9, restart.

use std::time::{Duration, Instant};

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
