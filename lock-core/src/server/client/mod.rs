//! The one place that knows which Redis client library is in use.
//!
//! Everything above this module talks to a node through [`NodeClient`], a small
//! trait that sends one command and returns a [`Reply`]. Each client library
//! has one file here, compiled when its cargo feature is on; both can be on at
//! once, and the choice is made per connection by [`ClientKind`].

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

use crate::error::LockError;
use crate::server::topology::{Endpoint, Topology};
use crate::server::url::NodeUrl;

/// `Debug` for this module's connection types: the address each talks to,
/// and nothing of the client inside.
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(unused_macros))]
macro_rules! debug_shows_address {
    ($($name:ident),+) => {$(
        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("address", &self.address)
                    .finish_non_exhaustive()
            }
        }
    )+};
}

#[cfg(feature = "fred")]
mod fred;
#[cfg(feature = "redis")]
mod redis;
#[cfg(any(feature = "redis", feature = "fred"))]
mod sentinel;
#[cfg(feature = "tls")]
mod tls;

#[cfg(feature = "fred")]
pub use self::fred::FredNode;
#[cfg(feature = "redis")]
pub use self::redis::RedisNode;

/// Which Redis client library talks to the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ClientKind {
    /// The `redis` crate (redis-rs), through its reconnecting `ConnectionManager`.
    Redis,
    /// The `fred` crate, with its reconnect policy.
    Fred,
}

impl ClientKind {
    /// Every kind, compiled in or not. A slice, not an array, so that a new
    /// client does not change its type.
    pub const ALL: &[ClientKind] = &[ClientKind::Redis, ClientKind::Fred];

    /// The name used in config files and as the cargo feature.
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::Redis => "redis",
            ClientKind::Fred => "fred",
        }
    }

    /// Whether this client's cargo feature is enabled in this build.
    pub fn is_compiled(self) -> bool {
        match self {
            ClientKind::Redis => cfg!(feature = "redis"),
            ClientKind::Fred => cfg!(feature = "fred"),
        }
    }

    /// The kinds compiled into this build, `redis` first.
    pub fn compiled() -> Vec<ClientKind> {
        Self::ALL
            .iter()
            .copied()
            .filter(|kind| kind.is_compiled())
            .collect()
    }
}

impl Default for ClientKind {
    /// `redis` when compiled in, otherwise `fred`.
    fn default() -> Self {
        if ClientKind::Redis.is_compiled() || !ClientKind::Fred.is_compiled() {
            ClientKind::Redis
        } else {
            ClientKind::Fred
        }
    }
}

impl fmt::Display for ClientKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ClientKind {
    type Err = LockError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|kind| kind.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                LockError::config("client", format!("`{text}` is not one of `redis`, `fred`"))
            })
    }
}

/// Time limits for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectOptions {
    /// The limit on connecting and authenticating.
    pub connect_timeout: Duration,
    /// The limit on waiting for one reply.
    pub command_timeout: Duration,
}

impl ConnectOptions {
    /// Options with the given limits.
    pub fn new(connect_timeout: Duration, command_timeout: Duration) -> Self {
        ConnectOptions {
            connect_timeout,
            command_timeout,
        }
    }
}

/// The default `connect_timeout`.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The default `command_timeout`.
pub(crate) const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions::new(DEFAULT_CONNECT_TIMEOUT, DEFAULT_COMMAND_TIMEOUT)
    }
}

/// A reply from Redis, independent of the client library that read it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// `nil`.
    Nil,
    /// An integer.
    Int(i64),
    /// A bulk string.
    Data(Vec<u8>),
    /// A simple status such as `OK`.
    Status(String),
    /// An array (RESP3 maps and sets arrive flattened into arrays).
    Array(Vec<Reply>),
}

impl Reply {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(value) => Some(*value),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The text of a bulk string or status, if it is UTF-8.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Reply::Data(bytes) => std::str::from_utf8(bytes).ok(),
            Reply::Status(text) => Some(text),
            _ => None,
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Nil => f.write_str("nil"),
            Reply::Int(value) => write!(f, "{value}"),
            Reply::Data(bytes) => write!(f, "{:?}", String::from_utf8_lossy(bytes)),
            Reply::Status(text) => f.write_str(text),
            Reply::Array(items) => {
                f.write_str("[")?;
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// One connection to one Redis node, whatever library holds it.
///
/// Implementations reconnect on their own after a broken connection, bound
/// every command by the command timeout, and map their errors onto
/// [`LockError`]: `Timeout`, `Connection`, `Authentication`, `PermissionDenied`
/// (a `NOPERM` reply) or `Server` (whose
/// message starts with the server's error code, such as `NOSCRIPT`).
#[async_trait]
pub trait NodeClient: Send + Sync + fmt::Debug {
    /// The node's `host:port`, for errors and logs.
    fn address(&self) -> &str;

    /// Whether this connection reaches a Redis Cluster, where keys of
    /// different hash slots may live on different nodes and one script's
    /// keys must share a slot. The default is `false`.
    fn is_cluster(&self) -> bool {
        false
    }

    /// Whether releases through this connection publish on sharded pub/sub
    /// (`SPUBLISH`, Redis 7): on a cluster whose servers have it, where a
    /// classic `PUBLISH` is sent to every node. Waiters then subscribe with
    /// `SSUBSCRIBE` on the master of the lock's slot. The default is `false`.
    fn publishes_sharded(&self) -> bool {
        false
    }

    /// Sends `name args...` and returns the reply.
    async fn command(&self, name: &'static str, args: &[&[u8]]) -> Result<Reply, LockError>;

    /// Sends `name args...` on the connection that serves `key`: on a
    /// cluster, to the master of its hash slot, for keyless commands that
    /// must follow a write there (`WAIT`). Elsewhere the same as
    /// [`command`](Self::command).
    async fn command_on_key(
        &self,
        key: &[u8],
        name: &'static str,
        args: &[&[u8]],
    ) -> Result<Reply, LockError> {
        let _ = key;
        self.command(name, args).await
    }

    /// Sends `commands` as one pipeline on the connection that serves `key`
    /// (on a cluster, the master of its slot) and returns each reply, in
    /// order; the outer error is for the pipeline as a whole. One connection
    /// matters for `WAIT`, which counts the replicas that have the writes of
    /// the connection it runs on. The default sends them one by one; both
    /// built-in clients override it.
    async fn pipeline_on_key(
        &self,
        key: &[u8],
        commands: &[(&'static str, &[&[u8]])],
    ) -> Result<Vec<Result<Reply, LockError>>, LockError> {
        let mut replies = Vec::with_capacity(commands.len());
        for (name, args) in commands {
            replies.push(self.command_on_key(key, name, args).await);
        }
        Ok(replies)
    }

    /// On a Redis Cluster, the addresses (`host:port`, as `CLUSTER SLOTS`
    /// names them) of the masters that hold its keys, for commands that read
    /// one node's keyspace (`SCAN`), sent with
    /// [`command_on_node`](Self::command_on_node). `None` (the default) when
    /// the connection reaches one server, a standalone one or the master a
    /// sentinel group names, whose keyspace [`command`](Self::command) reads.
    async fn cluster_masters(&self) -> Result<Option<Vec<String>>, LockError> {
        Ok(None)
    }

    /// Sends `name args...` to the cluster node at `address` (one of
    /// [`cluster_masters`](Self::cluster_masters)). Elsewhere (and by
    /// default) the same as [`command`](Self::command).
    async fn command_on_node(
        &self,
        address: &str,
        name: &'static str,
        args: &[&[u8]],
    ) -> Result<Reply, LockError> {
        let _ = address;
        self.command(name, args).await
    }
}

/// The masters of a `CLUSTER SLOTS` reply from the cluster at `address`, or
/// the error for a reply of another shape.
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) fn cluster_masters_of(address: &str, reply: &Reply) -> Result<Vec<String>, LockError> {
    masters_in_cluster_slots(reply).ok_or_else(|| LockError::UnexpectedReply {
        node: address.to_owned(),
        script: "CLUSTER SLOTS",
        reply: reply.to_string(),
    })
}

/// The masters' addresses (`host:port`, sorted, each once) in a reply to
/// `CLUSTER SLOTS`: one entry per slot range, `[start, end, [host, port,
/// id, ...], replicas...]`. `None` for a reply of another shape.
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) fn masters_in_cluster_slots(reply: &Reply) -> Option<Vec<String>> {
    let mut masters = Vec::new();
    for range in reply.as_array()? {
        let master = range.as_array()?.get(2)?.as_array()?;
        let host = master.first()?.as_text()?;
        let port = master.get(1)?.as_int()?;
        if host.is_empty() {
            return None;
        }
        masters.push(format!("{host}:{port}"));
    }
    masters.sort();
    masters.dedup();
    Some(masters)
}

/// Whether `node`, a cluster connection, reaches servers with sharded
/// pub/sub: `COMMAND INFO SPUBLISH` names the command (Redis 7 and later)
/// instead of answering nil. Any error (an ACL without `COMMAND`) keeps
/// classic pub/sub, which every version has.
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) async fn has_sharded_pubsub(node: &dyn NodeClient) -> bool {
    match node.command("COMMAND", &[b"INFO", b"SPUBLISH"]).await {
        Ok(reply) => reply
            .as_array()
            .and_then(|commands| commands.first())
            .is_some_and(|command| command.as_array().is_some()),
        Err(err) => {
            tracing::debug!(node = node.address(), error = %err, "COMMAND INFO failed; classic pub/sub");
            false
        }
    }
}

/// `host:port` as a host and a port; the host may hold colons (IPv6).
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) fn split_node_address(address: &str) -> Option<(&str, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host, port.parse().ok()?))
}

/// The host and port of the cluster node at `address`, for
/// [`NodeClient::command_on_node`]; an address of another form is a config
/// error naming it.
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) fn cluster_node_address(address: &str) -> Result<(&str, u16), LockError> {
    split_node_address(address).ok_or_else(|| {
        LockError::config(
            "nodes",
            format!("`{address}` is not a cluster node's host:port"),
        )
    })
}

/// A connection that receives published messages, whatever library holds it.
///
/// `subscribe` and `unsubscribe` return once the server confirmed them, so a
/// message published after `subscribe` returned is delivered. Received
/// messages arrive, as channel names and payloads, on the receiver that
/// [`connect_subscriber`] returned with this connection; that receiver closes
/// when the connection is lost.
#[async_trait]
pub(crate) trait SubscriberClient: Send + Sync + fmt::Debug {
    /// The node's `host:port`, for errors and logs.
    fn address(&self) -> &str;

    /// Subscribes to `channel`.
    async fn subscribe(&self, channel: &str) -> Result<(), LockError>;

    /// Unsubscribes from `channel`.
    async fn unsubscribe(&self, channel: &str) -> Result<(), LockError>;

    /// Subscribes to `channel` again, after a [`Delivery::Dropped`] or
    /// [`Delivery::Lost`]: a sharded subscription moves to the slot's
    /// master of now.
    async fn resubscribe(&self, channel: &str) -> Result<(), LockError> {
        self.subscribe(channel).await
    }
}

/// What a subscriber connection receives, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) enum Delivery {
    /// A message: its channel and payload (empty if not text).
    Message(String, String),
    /// The server ended a subscription unasked: the sharded channel's slot
    /// moved to another master, which now publishes it. Subscribing again
    /// reaches that master. (fred does not pass the server's notice on.)
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    Dropped(String),
    /// A connection of a sharded subscriber broke; the client connects
    /// again, but messages meanwhile are lost and any channel may be
    /// unsubscribed. (fred subscribes again by itself.)
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    Lost,
}

/// The received [`Delivery`]s, in arrival order.
pub(crate) type MessageReceiver = tokio::sync::mpsc::UnboundedReceiver<Delivery>;

/// Opens a dedicated subscriber connection to `endpoint` (a [`NodeUrl`] for
/// a standalone server) with the chosen client, within
/// `options.connect_timeout`.
///
/// On a cluster with `sharded` pub/sub it is a cluster connection: each
/// channel is subscribed with `SSUBSCRIBE` on the master of its slot, and
/// again wherever the slot moves; and, beside it, a classic one on a seed
/// node, for releases of processes that publish classically (a client of
/// their own, an ACL without `COMMAND`, an earlier build). On a cluster
/// without it, it subscribes on
/// the first seed node that answers: a classic message published on any
/// node of a cluster reaches subscribers on every node. On a sentinel group
/// it subscribes on the current master. `sharded` is ignored off a cluster.
pub(crate) async fn connect_subscriber(
    kind: ClientKind,
    endpoint: impl Into<Endpoint>,
    options: ConnectOptions,
    sharded: bool,
) -> Result<(Arc<dyn SubscriberClient>, MessageReceiver), LockError> {
    let endpoint = endpoint.into();
    endpoint.validate()?;
    let address = endpoint.address();
    let sharded = sharded && endpoint.topology == Topology::Cluster;
    let connecting = async {
        if sharded {
            let (classic, sharded) = futures::try_join!(
                connect_one_subscriber(kind, &endpoint, options, false),
                connect_one_subscriber(kind, &endpoint, options, true),
            )?;
            return Ok(BothSubscribers::start(classic, sharded));
        }
        connect_one_subscriber(kind, &endpoint, options, false).await
    };
    tokio::time::timeout(options.connect_timeout, connecting)
        .await
        .map_err(|_| LockError::Timeout {
            node: address,
            after: options.connect_timeout,
        })?
}

async fn connect_one_subscriber(
    kind: ClientKind,
    endpoint: &Endpoint,
    options: ConnectOptions,
    sharded: bool,
) -> Result<(Arc<dyn SubscriberClient>, MessageReceiver), LockError> {
    {
        match kind {
            #[cfg(feature = "redis")]
            ClientKind::Redis => self::redis::connect_subscriber(endpoint, options, sharded).await,
            #[cfg(feature = "fred")]
            ClientKind::Fred => self::fred::connect_subscriber(endpoint, options, sharded).await,
            #[allow(unreachable_patterns)]
            other => {
                let _ = (endpoint, options, sharded);
                Err(LockError::ClientNotCompiled {
                    client: other.name(),
                })
            }
        }
    }
}

/// A classic and a sharded subscriber as one: each channel is subscribed
/// on both, and their deliveries are merged. A release publishes once, in
/// one form, so no message comes twice. When either connection is lost the
/// merged receiver closes, as a single subscriber's does.
#[derive(Debug)]
struct BothSubscribers {
    classic: Arc<dyn SubscriberClient>,
    sharded: Arc<dyn SubscriberClient>,
}

impl BothSubscribers {
    fn start(
        (classic, mut classic_messages): (Arc<dyn SubscriberClient>, MessageReceiver),
        (sharded, mut sharded_messages): (Arc<dyn SubscriberClient>, MessageReceiver),
    ) -> (Arc<dyn SubscriberClient>, MessageReceiver) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let delivery = tokio::select! {
                    delivery = classic_messages.recv() => delivery,
                    delivery = sharded_messages.recv() => delivery,
                    () = sender.closed() => break,
                };
                let Some(delivery) = delivery else {
                    break;
                };
                if sender.send(delivery).is_err() {
                    break;
                }
            }
        });
        (Arc::new(BothSubscribers { classic, sharded }), receiver)
    }
}

#[async_trait]
impl SubscriberClient for BothSubscribers {
    fn address(&self) -> &str {
        self.sharded.address()
    }

    async fn subscribe(&self, channel: &str) -> Result<(), LockError> {
        let subscribed = futures::future::join(
            self.classic.subscribe(channel),
            self.sharded.subscribe(channel),
        )
        .await;
        match subscribed {
            (Ok(()), Ok(())) => Ok(()),
            (Err(err), _) | (_, Err(err)) => {
                // The caller takes the channel as not subscribed, and
                // never unsubscribes it: undo the half that took.
                let _ = self.unsubscribe(channel).await;
                Err(err)
            }
        }
    }

    async fn unsubscribe(&self, channel: &str) -> Result<(), LockError> {
        let (classic, sharded) = futures::future::join(
            self.classic.unsubscribe(channel),
            self.sharded.unsubscribe(channel),
        )
        .await;
        classic.and(sharded)
    }

    async fn resubscribe(&self, channel: &str) -> Result<(), LockError> {
        self.sharded.subscribe(channel).await
    }
}

/// Connects to `endpoint` (a [`NodeUrl`](crate::NodeUrl) for a standalone
/// server, or an [`Endpoint`] for a cluster or a sentinel group) with the
/// chosen client and checks the connection with a `PING`, all within
/// `options.connect_timeout` (plus one command timeout for the `PING`).
///
/// A cluster connection sends each script to the master of its keys' hash
/// slot and follows `MOVED` and `ASK`; a sentinel connection asks the
/// sentinels for the master and asks again after it fails over.
///
/// Errors: [`LockError::InvalidConfig`] for a malformed URL or endpoint
/// (naming the field), [`LockError::ClientNotCompiled`] when the client's
/// feature is off, [`LockError::Authentication`] for refused credentials, and
/// [`LockError::Connection`] or [`LockError::Timeout`] when the node cannot be reached.
pub async fn connect(
    kind: ClientKind,
    endpoint: impl Into<Endpoint>,
    options: ConnectOptions,
) -> Result<Arc<dyn NodeClient>, LockError> {
    let endpoint = endpoint.into();
    endpoint.validate()?;
    endpoint.replicas.validate(options.command_timeout)?;
    let address = endpoint.address();
    let connecting = async {
        match kind {
            #[cfg(feature = "redis")]
            ClientKind::Redis => self::redis::connect(&endpoint, options).await,
            #[cfg(feature = "fred")]
            ClientKind::Fred => self::fred::connect(&endpoint, options).await,
            #[allow(unreachable_patterns)]
            other => Err(LockError::ClientNotCompiled {
                client: other.name(),
            }),
        }
    };
    let node: Arc<dyn NodeClient> = tokio::time::timeout(options.connect_timeout, connecting)
        .await
        .map_err(|_| LockError::Timeout {
            node: address.clone(),
            after: options.connect_timeout,
        })?
        .map_err(|err| explain_topology_mismatch(&endpoint, err))?;
    let pong = node.command("PING", &[]).await?;
    if pong.as_text() != Some("PONG") {
        return Err(LockError::UnexpectedReply {
            node: address,
            script: "PING",
            reply: pong.to_string(),
        });
    }
    Ok(node)
}

/// A cluster config pointed at a server without cluster support fails deep
/// in the client; say what is wrong and which field to change.
fn explain_topology_mismatch(endpoint: &Endpoint, err: LockError) -> LockError {
    let text = err.to_string();
    if endpoint.topology == crate::server::topology::Topology::Cluster
        && text.contains("cluster support disabled")
    {
        return LockError::config(
            "topology",
            format!(
                "`cluster`, but {} is not a cluster node (the server says: cluster support \
                 disabled); use topology `standalone` or `sentinel` for it",
                endpoint.address()
            ),
        );
    }
    if endpoint.topology == crate::server::topology::Topology::Sentinel
        && (text.contains("MasterNameNotFound") || text.contains("Missing primary address"))
    {
        let addresses: Vec<String> = endpoint.nodes.iter().map(NodeUrl::address).collect();
        return LockError::config(
            "sentinel_service",
            format!(
                "no sentinel of {} monitors a master named `{}`",
                addresses.join(","),
                endpoint.sentinel_service.as_deref().unwrap_or_default()
            ),
        );
    }
    err
}

/// How many times a cluster command (or pipeline) whose reply proves it did
/// not run is sent again (with 5, 10, 15, ... ms between tries: under a
/// second in all).
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) const CLUSTER_REDIRECTS: u32 = 16;

/// The error codes of replies that prove a cluster command did not run: a
/// slot that moved or is moving, or a cluster without a quorum.
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) const NOT_RUN: [&str; 4] = ["MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"];

/// The error codes of a server that is no longer (or not yet) the master:
/// the sentinels must be asked again.
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) const LOST_MASTER: [&str; 3] = ["READONLY", "MASTERDOWN", "LOADING"];

/// A reply that is not the Redis protocol (an HTTP or SSH server, a TLS
/// port reached with `redis://`), as the connection error a user can act on.
/// `detail` is the client's parse error; its first line is kept.
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) fn not_redis(node: &str, detail: &str) -> LockError {
    LockError::Connection {
        node: node.to_owned(),
        source: crate::error::source_error(format!(
            "the server did not answer as Redis does: is this a Redis port (a TLS port needs \
             `rediss://`)? The reply could not be parsed ({})",
            detail.lines().next().unwrap_or_default().trim()
        )),
    }
}

/// Maps a server error line (`CODE message`) to the right [`LockError`].
#[cfg_attr(not(any(feature = "redis", feature = "fred")), allow(dead_code))]
pub(crate) fn server_error(node: &str, message: String) -> LockError {
    let code = message.split_whitespace().next().unwrap_or("");
    if code == "NOPERM" {
        // An ACL refusal, not bad credentials: the user is known, and may not
        // run this command or touch these keys or channels.
        LockError::PermissionDenied {
            node: node.to_owned(),
            needs: crate::error::AclNeed::from_message(&message),
            message,
        }
    } else if matches!(code, "WRONGPASS" | "NOAUTH") || message.contains("invalid password") {
        LockError::Authentication {
            node: node.to_owned(),
            message,
        }
    } else {
        LockError::Server {
            node: node.to_owned(),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: &str) -> Reply {
        Reply::Data(value.as_bytes().to_vec())
    }

    #[test]
    fn cluster_slots_name_each_master_once() {
        let node = |host: &str, port: i64| {
            Reply::Array(vec![
                text(host),
                Reply::Int(port),
                text("id"),
                Reply::Array(vec![]),
            ])
        };
        let reply = Reply::Array(vec![
            Reply::Array(vec![
                Reply::Int(0),
                Reply::Int(5460),
                node("127.0.0.1", 7001),
                node("127.0.0.1", 7004),
            ]),
            Reply::Array(vec![Reply::Int(5461), Reply::Int(10922), node("::1", 7002)]),
            Reply::Array(vec![
                Reply::Int(10923),
                Reply::Int(16383),
                node("127.0.0.1", 7001),
            ]),
        ]);
        assert_eq!(
            masters_in_cluster_slots(&reply),
            Some(vec!["127.0.0.1:7001".to_owned(), "::1:7002".to_owned()])
        );
        assert_eq!(masters_in_cluster_slots(&Reply::Nil), None);
        assert_eq!(
            masters_in_cluster_slots(&Reply::Array(vec![Reply::Array(vec![Reply::Int(0)])])),
            None
        );
        assert_eq!(split_node_address("::1:7002"), Some(("::1", 7002)));
        assert_eq!(split_node_address("[::1]:7002"), Some(("::1", 7002)));
        assert_eq!(split_node_address("h:x"), None);
    }
}
