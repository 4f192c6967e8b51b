//! A sentinel stand-in: a TCP server on 127.0.0.1 that answers the
//! sentinel commands clients send (`SENTINEL MASTERS`, `SENTINEL MASTER`,
//! `SENTINEL GET-MASTER-ADDR-BY-NAME`, ...) with a master the test names
//! and can switch at any instant. Real sentinels switch only through a
//! failover, seconds long; the stand-in lets a test put a switch exactly
//! where it wants it (between a client's last look and its next command).

use std::io;
use std::sync::{Arc, Mutex};

use lock_core::NodeUrl;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// A sentinel stand-in for one service. It runs on the Tokio runtime it was
/// started on and stops, closing its connections, when dropped.
#[derive(Debug)]
pub struct SentinelStandIn {
    port: u16,
    master: Arc<Mutex<u16>>,
    acceptor: JoinHandle<()>,
}

impl SentinelStandIn {
    /// Listens on a free loopback port, naming `127.0.0.1:<master_port>` as
    /// the master of `service`.
    pub async fn start(service: &str, master_port: u16) -> io::Result<SentinelStandIn> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let master = Arc::new(Mutex::new(master_port));
        let acceptor = tokio::spawn(accept(listener, service.to_owned(), Arc::clone(&master)));
        Ok(SentinelStandIn {
            port,
            master,
            acceptor,
        })
    }

    /// Names `127.0.0.1:<master_port>` from now on.
    pub fn set_master(&self, master_port: u16) {
        *self
            .master
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = master_port;
    }

    /// The port the stand-in listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>` of the stand-in.
    pub fn url(&self) -> NodeUrl {
        NodeUrl::new(format!("redis://127.0.0.1:{}", self.port))
    }
}

impl Drop for SentinelStandIn {
    fn drop(&mut self) {
        // The acceptor owns the connections' tasks: aborting it drops them.
        self.acceptor.abort();
    }
}

async fn accept(listener: TcpListener, service: String, master: Arc<Mutex<u16>>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve(stream, service.clone(), Arc::clone(&master)));
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Answers one connection's commands until it closes or sends garbage.
async fn serve(stream: TcpStream, service: String, master: Arc<Mutex<u16>>) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    while let Ok(Some(command)) = read_command(&mut read).await {
        let port = *master.lock().unwrap_or_else(|poison| poison.into_inner());
        let reply = answer(&command, &service, port);
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// One command as RESP (an array of bulk strings) or an inline line;
/// `None` at the end of the stream.
async fn read_command(
    read: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> io::Result<Option<Vec<String>>> {
    let mut line = String::new();
    if read.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let line = line.trim_end();
    let Some(count) = line.strip_prefix('*') else {
        return Ok(Some(line.split_whitespace().map(str::to_owned).collect()));
    };
    let count: usize = count
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a bad array length"))?;
    let mut parts = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let mut header = String::new();
        read.read_line(&mut header).await?;
        let length: usize = header
            .trim_end()
            .strip_prefix('$')
            .and_then(|length| length.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not a bulk string"))?;
        let mut bytes = vec![0u8; length + 2];
        tokio::io::AsyncReadExt::read_exact(read, &mut bytes).await?;
        bytes.truncate(length);
        parts.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    Ok(Some(parts))
}

fn bulk(text: &str) -> String {
    format!("${}\r\n{text}\r\n", text.len())
}

fn array(items: &[String]) -> String {
    let mut reply = format!("*{}\r\n", items.len());
    for item in items {
        reply.push_str(item);
    }
    reply
}

/// The master's description, as `SENTINEL MASTER` gives it.
fn master_fields(service: &str, port: u16) -> String {
    let port = port.to_string();
    let fields = [
        "name",
        service,
        "ip",
        "127.0.0.1",
        "port",
        &port,
        "flags",
        "master",
        "num-slaves",
        "0",
        "quorum",
        "1",
    ];
    array(&fields.iter().map(|field| bulk(field)).collect::<Vec<_>>())
}

fn answer(command: &[String], service: &str, port: u16) -> String {
    let upper: Vec<String> = command
        .iter()
        .take(2)
        .map(|part| part.to_ascii_uppercase())
        .collect();
    let named = |name: Option<&String>| name.is_some_and(|name| name == service);
    match upper.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["PING", ..] => "+PONG\r\n".to_owned(),
        ["CLIENT", ..] | ["SELECT", ..] | ["AUTH", ..] => "+OK\r\n".to_owned(),
        ["SENTINEL", "MASTERS"] => array(&[master_fields(service, port)]),
        ["SENTINEL", "MASTER"] if named(command.get(2)) => master_fields(service, port),
        ["SENTINEL", "GET-MASTER-ADDR-BY-NAME"] if named(command.get(2)) => {
            array(&[bulk("127.0.0.1"), bulk(&port.to_string())])
        }
        ["SENTINEL", "GET-MASTER-ADDR-BY-NAME"] => "*-1\r\n".to_owned(),
        ["SENTINEL", "SLAVES" | "REPLICAS" | "SENTINELS"] => "*0\r\n".to_owned(),
        ["ROLE", ..] => array(&[bulk("sentinel"), array(&[bulk(service)])]),
        ["INFO", ..] => bulk("# Server\r\nredis_version:7.0.0\r\nredis_mode:sentinel\r\n"),
        _ => format!(
            "-ERR the sentinel stand-in does not answer {}\r\n",
            command.first().map_or("", String::as_str)
        ),
    }
}
