//! TLS servers with certificates made at test time: the TLS port speaks only
//! TLS, trusts its own CA, and (by default) wants a client certificate.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use lock_testkit::{find_redis_cli, AdminReply, RedisServer, TlsFiles};

/// `redis-cli --tls ... PING` against the TLS port: its stdout and stderr.
fn cli_ping(port: u16, ca: &TlsFiles, client: Option<&TlsFiles>) -> String {
    let mut command = Command::new(find_redis_cli().expect("redis-cli"));
    command
        .args(["--tls", "-h", "127.0.0.1", "-p", &port.to_string()])
        .arg("--cacert")
        .arg(ca.ca_file());
    if let Some(client) = client {
        command
            .arg("--cert")
            .arg(client.cert_file())
            .arg("--key")
            .arg(client.key_file());
    }
    let output = command.arg("PING").output().expect("run redis-cli");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn tls_port_speaks_tls_only_and_trusts_its_ca() {
    let files = Arc::new(TlsFiles::generate().expect("certificates"));
    let wrong = TlsFiles::generate().expect("an unrelated CA");
    let server = RedisServer::builder()
        .tls(files.clone())
        .start()
        .expect("start a TLS server");
    let port = server.tls_port().expect("a TLS port");
    assert_ne!(port, server.port());
    assert_eq!(
        server.tls_url().expect("TLS URL").expose(),
        format!("rediss://127.0.0.1:{port}")
    );
    assert_eq!(
        server.admin(&["PING"]).expect("plain PING"),
        AdminReply::Status("PONG".into()),
        "the plain port stays open for admin commands"
    );

    // Plain RESP on the TLS port gets no answer: the handshake fails and the
    // server closes the connection.
    let mut stream =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))
            .expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    stream.write_all(b"*1\r\n$4\r\nPING\r\n").expect("write");
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    assert!(
        !String::from_utf8_lossy(&reply).contains("PONG"),
        "plain RESP was answered on the TLS port: {reply:?}"
    );

    let answer = cli_ping(port, &files, Some(&files));
    assert!(
        answer.contains("PONG"),
        "the right CA and client certificate: {answer}"
    );
    let answer = cli_ping(port, &wrong, Some(&files));
    assert!(
        !answer.contains("PONG"),
        "a client trusting another CA refuses the server: {answer}"
    );
    let answer = cli_ping(port, &files, Some(&wrong));
    assert!(
        !answer.contains("PONG"),
        "a client certificate from another CA is refused: {answer}"
    );
    let answer = cli_ping(port, &files, None);
    assert!(
        !answer.contains("PONG"),
        "a client certificate is required by default: {answer}"
    );
}

#[test]
fn tls_without_client_certificates_and_with_a_password() {
    let files = Arc::new(TlsFiles::generate().expect("certificates"));
    let server = RedisServer::builder()
        .password("s3cret")
        .tls(files.clone())
        .tls_auth_clients(false)
        .start()
        .expect("start a TLS server");
    let port = server.tls_port().expect("a TLS port");
    assert_eq!(
        server.tls_url().expect("TLS URL").expose(),
        format!("rediss://:s3cret@127.0.0.1:{port}")
    );
    let output = Command::new(find_redis_cli().expect("redis-cli"))
        .args([
            "--tls",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "--no-auth-warning",
        ])
        .args(["-a", "s3cret"])
        .arg("--cacert")
        .arg(files.ca_file())
        .arg("PING")
        .output()
        .expect("run redis-cli");
    let answer = String::from_utf8_lossy(&output.stdout);
    assert!(
        answer.contains("PONG"),
        "no client certificate needed: {output:?}"
    );
    assert!(
        RedisServer::start().expect("plain").tls_url().is_err(),
        "no TLS, no TLS URL"
    );
}

#[test]
fn dropping_tls_files_and_servers_cleans_up() {
    let files = Arc::new(TlsFiles::generate().expect("certificates"));
    let dir = files.dir().to_owned();
    let server = RedisServer::builder()
        .tls(files.clone())
        .start()
        .expect("start");
    let server_dir = server.dir().to_owned();
    assert!(files.ca_file().is_file() && files.key_file().is_file());
    drop(files);
    assert!(dir.is_dir(), "the server still holds the certificates");
    drop(server);
    assert!(
        !dir.exists(),
        "the certificates are removed with their last holder"
    );
    assert!(
        !server_dir.exists(),
        "the server's directory is removed on drop"
    );
}

#[test]
fn a_replica_syncs_over_tls() {
    let files = Arc::new(TlsFiles::generate().expect("certificates"));
    let master = RedisServer::builder()
        .tls(files.clone())
        .tls_replication()
        .start()
        .expect("start a TLS master");
    let replica = RedisServer::builder()
        .tls(files.clone())
        .tls_replication()
        .replica_of(master.tls_port().expect("TLS port"))
        .start()
        .expect("start a TLS replica");
    // WAIT on the connection that wrote, or it proves nothing.
    let replies = master
        .admin_session(&[&["SET", "k", "v"], &["WAIT", "1", "5000"]])
        .expect("SET and WAIT");
    assert_eq!(
        replies[1].as_int(),
        Some(1),
        "the replica acknowledges over TLS"
    );
    assert_eq!(
        replica.admin(&["GET", "k"]).expect("GET").as_text(),
        Some("v")
    );
}
