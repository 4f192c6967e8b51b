//! A TCP forwarder on 127.0.0.1 that adds a fixed delay to everything it
//! carries, in both directions: a node that is slow but alive, which
//! `SIGSTOP` (a node that does not answer at all) cannot model.

use std::io;
use std::time::{Duration, Instant};

use lock_core::NodeUrl;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

/// Far enough ahead to stand for "never", small enough to add to any `Instant`.
const NEVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Forwards connections from its own port to `127.0.0.1:<upstream>`, delaying
/// each chunk of bytes by at least the same amount in each direction. Order is
/// kept, and chunks in flight are delayed side by side, not one after another.
///
/// The delay is a floor, not an exact figure: Tokio's timer fires on 1 ms ticks,
/// so each delay is rounded up, and on a busy machine a 1 ms delay adds about
/// 2 ms each way. Measure the round trip through the proxy when the figure
/// matters.
///
/// It runs on the Tokio runtime it was started on, and stops (closing every
/// connection it carries) when dropped.
#[derive(Debug)]
pub struct DelayProxy {
    port: u16,
    acceptor: JoinHandle<()>,
    blackhole: watch::Sender<bool>,
}

impl DelayProxy {
    /// Listens on a free loopback port and forwards to `upstream_port`.
    pub async fn start(upstream_port: u16, delay: Duration) -> io::Result<DelayProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let (blackhole, partitioned) = watch::channel(false);
        let acceptor = tokio::spawn(accept(listener, upstream_port, delay, partitioned));
        Ok(DelayProxy {
            port,
            acceptor,
            blackhole,
        })
    }

    /// Partitions the node (`true`) or heals it (`false`). While partitioned
    /// the proxy still accepts connections but forwards nothing, in either
    /// direction: clients see silence, not a refusal, as behind a dropped
    /// network link. Connections that were silenced are closed when it
    /// heals, as a partition's connections usually are; new ones then work.
    pub fn set_blackhole(&self, partitioned: bool) {
        self.blackhole.send_replace(partitioned);
    }

    /// The port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>` of the proxy.
    pub fn url(&self) -> NodeUrl {
        NodeUrl::new(format!("redis://127.0.0.1:{}", self.port))
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        // The acceptor owns the connections' tasks: aborting it drops them all.
        self.acceptor.abort();
    }
}

async fn accept(
    listener: TcpListener,
    upstream_port: u16,
    delay: Duration,
    partitioned: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    connections.spawn(carry(client, upstream_port, delay, partitioned.clone()));
                }
                // Out of file descriptors, say: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Waits out a partition; returns whether there was one (the connection
/// must then end).
async fn silenced(partitioned: &mut watch::Receiver<bool>) -> bool {
    if !*partitioned.borrow() {
        return false;
    }
    // A dropped proxy ends the wait too.
    let _ = partitioned.wait_for(|on| !on).await;
    true
}

async fn carry(
    client: TcpStream,
    upstream_port: u16,
    delay: Duration,
    mut partitioned: watch::Receiver<bool>,
) {
    if silenced(&mut partitioned).await {
        return;
    }
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Either direction ending (a close or an error) ends the connection.
    tokio::select! {
        () = one_way(client_read, server_write, delay, partitioned.clone()) => {}
        () = one_way(server_read, client_write, delay, partitioned) => {}
    }
}

/// Reads chunks as they come and writes each `delay` after it was read, or,
/// while partitioned, holds them and ends the connection when it heals.
async fn one_way(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    delay: Duration,
    mut partitioned: watch::Receiver<bool>,
) {
    let (chunks, mut due) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            match from.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(read) => {
                    // An absurd delay means "never": saturate instead of overflowing.
                    let at = Instant::now()
                        .checked_add(delay)
                        .unwrap_or_else(|| Instant::now() + NEVER);
                    if chunks.send((at, buffer[..read].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at.into()).await;
            if silenced(&mut partitioned).await {
                return;
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    // The reader finishing closes the channel; the writer then flushes what is
    // left and shuts its side down.
    let (_, ()) = tokio::join!(reader, writer);
}
