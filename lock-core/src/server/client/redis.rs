//! [`NodeClient`] over the `redis` crate: its reconnecting `ConnectionManager`
//! for a standalone server, its cluster client for a Redis Cluster, and its
//! sentinel client for a master behind sentinels.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{AsyncConnectionConfig, ConnectionAddr};

use futures::StreamExt;
use tokio::sync::Mutex;

use super::sentinel::{follow, Follow, SENTINEL_RECHECK};
use super::{
    not_redis, server_error, ConnectOptions, Delivery, MessageReceiver, NodeClient, Reply,
    SubscriberClient,
};
use super::{CLUSTER_REDIRECTS, LOST_MASTER, NOT_RUN};
use crate::error::LockError;
use crate::server::topology::{Endpoint, Topology};
use crate::server::url::{NodeUrl, ParsedUrl};

/// A node reached through the `redis` crate.
#[derive(Clone)]
pub struct RedisNode {
    link: Link,
    address: String,
    command_timeout: Duration,
    /// Releases publish with `SPUBLISH`: a cluster of servers that have it.
    sharded_pubsub: bool,
}

/// The connection behind a [`RedisNode`], by topology.
#[derive(Clone)]
enum Link {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Arc<SentinelLink>),
}

debug_shows_address!(RedisNode);

impl RedisNode {
    /// Wraps a connection manager the caller built, for applications that
    /// already hold one. `address` is used in errors and logs.
    pub fn from_manager(
        manager: ConnectionManager,
        address: impl Into<String>,
        command_timeout: Duration,
    ) -> Self {
        RedisNode {
            link: Link::Standalone(manager),
            address: address.into(),
            command_timeout,
            sharded_pubsub: false,
        }
    }

    /// Wraps a cluster connection the caller built. `address` is used in
    /// errors and logs.
    pub fn from_cluster(
        connection: ClusterConnection,
        address: impl Into<String>,
        command_timeout: Duration,
    ) -> Self {
        RedisNode {
            link: Link::Cluster(connection),
            address: address.into(),
            command_timeout,
            sharded_pubsub: false,
        }
    }
}

fn invalid(field: &str, err: redis::RedisError) -> LockError {
    LockError::InvalidConfig {
        field: field.to_owned(),
        reason: err.to_string(),
    }
}

/// The certificates for `endpoint`'s `rediss://` nodes, if any files are set.
#[cfg(feature = "tls")]
fn certificates(endpoint: &Endpoint) -> Result<Option<redis::TlsCertificates>, LockError> {
    if !endpoint.uses_tls() {
        return Ok(None);
    }
    super::tls::ensure_crypto_provider();
    if !endpoint.tls.is_set() {
        return Ok(None);
    }
    let material = super::tls::TlsMaterial::load(&endpoint.tls)?;
    Ok(Some(redis::TlsCertificates {
        client_tls: material
            .client
            .map(|(client_cert, client_key)| redis::ClientTlsConfig {
                client_cert,
                client_key,
            }),
        root_cert: material.ca_pem,
    }))
}

/// A client for one server of `endpoint` at `url`, with its certificates.
fn standalone_client(endpoint: &Endpoint, url: &NodeUrl) -> Result<redis::Client, LockError> {
    #[cfg(feature = "tls")]
    if let Some(certificates) = certificates(endpoint)? {
        return redis::Client::build_with_tls(url.expose(), certificates)
            .map_err(|err| invalid("tls", err));
    }
    #[cfg(not(feature = "tls"))]
    let _ = endpoint;
    redis::Client::open(url.expose()).map_err(|err| invalid("nodes", err))
}

pub(super) async fn connect(
    endpoint: &Endpoint,
    options: ConnectOptions,
) -> Result<Arc<dyn NodeClient>, LockError> {
    let address = endpoint.address();
    let link = match endpoint.topology {
        Topology::Standalone => {
            let client = standalone_client(endpoint, &endpoint.nodes[0])?;
            // A short retry budget: the caller's connect timeout bounds the
            // whole attempt, and a dead node must be reported, not retried
            // for minutes.
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(options.connect_timeout))
                .set_response_timeout(Some(options.command_timeout))
                .set_number_of_retries(1)
                .set_min_delay(Duration::from_millis(10))
                .set_max_delay(Duration::from_millis(500));
            let manager = ConnectionManager::new_with_config(client, config)
                .await
                .map_err(|err| map_error(&address, options.command_timeout, err))?;
            Link::Standalone(manager)
        }
        Topology::Cluster => {
            // No retries inside the client: it would send a command again
            // after a connection broke under it, and a script that ran
            // twice (a reentrant release, an acquire) breaks the lock.
            // Replies that prove a command did not run (MOVED, ASK,
            // TRYAGAIN, CLUSTERDOWN) are retried in `command` instead.
            let builder = cluster_builder(endpoint, options)?.retries(0);
            Link::Cluster(cluster_connection(builder, &address, options.command_timeout).await?)
        }
        Topology::Sentinel => {
            let link = SentinelLink::new(endpoint, options)?;
            link.connection(&address).await?;
            Link::Sentinel(Arc::new(link))
        }
    };
    let mut node = RedisNode {
        link,
        address,
        command_timeout: options.command_timeout,
        sharded_pubsub: false,
    };
    if node.is_cluster() {
        node.sharded_pubsub = super::has_sharded_pubsub(&node).await;
    }
    Ok(Arc::new(node))
}

/// A cluster client for `endpoint`'s seeds, with its time-outs and
/// certificates.
fn cluster_builder(
    endpoint: &Endpoint,
    options: ConnectOptions,
) -> Result<redis::cluster::ClusterClientBuilder, LockError> {
    let seeds: Vec<&str> = endpoint.nodes.iter().map(NodeUrl::expose).collect();
    #[allow(unused_mut)]
    let mut builder = redis::cluster::ClusterClientBuilder::new(seeds)
        .connection_timeout(options.connect_timeout)
        .response_timeout(options.command_timeout);
    #[cfg(feature = "tls")]
    if let Some(certificates) = certificates(endpoint)? {
        builder = builder.certs(certificates);
    }
    Ok(builder)
}

/// Builds the cluster client `builder` describes and connects it; errors
/// name `address`.
async fn cluster_connection(
    builder: redis::cluster::ClusterClientBuilder,
    address: &str,
    command_timeout: Duration,
) -> Result<ClusterConnection, LockError> {
    let client = builder.build().map_err(|err| invalid("nodes", err))?;
    client
        .get_async_connection()
        .await
        .map_err(|err| map_error(address, command_timeout, err))
}

/// The master behind a group of sentinels: a connection to the server they
/// name, asked for again every [`SENTINEL_RECHECK`], and at once after a
/// connection error or a `READONLY` reply (the server was demoted).
struct SentinelLink {
    sentinels: Mutex<SentinelClient>,
    current: std::sync::Mutex<Option<MasterConnection>>,
    options: ConnectOptions,
}

#[derive(Clone)]
struct MasterConnection {
    connection: MultiplexedConnection,
    /// The master's address as the sentinels gave it.
    address: String,
    /// When the sentinels last confirmed it.
    confirmed: std::time::Instant,
}

impl SentinelLink {
    fn new(endpoint: &Endpoint, options: ConnectOptions) -> Result<Self, LockError> {
        let mut addresses = Vec::with_capacity(endpoint.nodes.len());
        let mut master: Option<ParsedUrl> = None;
        for (index, node) in endpoint.nodes.iter().enumerate() {
            let parsed = node
                .parse()
                .map_err(|reason| LockError::config(format!("nodes[{index}]"), reason))?;
            addresses.push(if parsed.tls {
                ConnectionAddr::TcpTls {
                    host: parsed.host.clone(),
                    port: parsed.port,
                    insecure: false,
                    tls_params: None,
                }
            } else {
                ConnectionAddr::Tcp(parsed.host.clone(), parsed.port)
            });
            master.get_or_insert(parsed);
        }
        let Some(master) = master else {
            return Err(LockError::config(
                "nodes",
                "at least one node URL is needed",
            ));
        };
        let service = endpoint.sentinel_service.as_deref().unwrap_or_default();
        let mut builder =
            SentinelClientBuilder::new(addresses, service, SentinelServerType::Master)
                .map_err(|err| invalid("nodes", err))?
                .set_client_to_redis_db(i64::from(master.db));
        if let Some(username) = &master.username {
            builder = builder.set_client_to_redis_username(username);
        }
        if let Some(password) = &master.password {
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some(username) = &endpoint.sentinel_auth.username {
            builder = builder.set_client_to_sentinel_username(username);
        }
        if let Some(password) = &endpoint.sentinel_auth.password {
            builder = builder.set_client_to_sentinel_password(password.expose());
        }
        if master.tls {
            builder = builder.set_client_to_redis_tls_mode(redis::TlsMode::Secure);
            #[cfg(feature = "tls")]
            if let Some(certificates) = certificates(endpoint)? {
                builder = builder
                    .set_client_to_redis_certificates(certificates.clone())
                    .set_client_to_sentinel_certificates(certificates);
            }
        }
        let sentinels = builder
            .build()
            .map_err(|err| invalid("sentinel_service", err))?;
        Ok(SentinelLink {
            sentinels: Mutex::new(sentinels),
            current: std::sync::Mutex::new(None),
            options,
        })
    }

    /// The connection to the master, asking the sentinels for it if there is
    /// none or their last answer is older than [`SENTINEL_RECHECK`].
    async fn connection(&self, address: &str) -> Result<MultiplexedConnection, LockError> {
        if let Some(current) = self.current() {
            if current.confirmed.elapsed() < SENTINEL_RECHECK {
                return Ok(current.connection);
            }
        }
        // One task asks. The others go on with the master known until then
        // (a sentinel that accepts connections and never answers must not
        // hold every command up for a command timeout); with none known,
        // they wait for the answer.
        // Only a master confirmed lately: one whose confirmation is older
        // than an interval and a command timeout is no longer known.
        let known_for = SENTINEL_RECHECK.saturating_add(self.options.command_timeout);
        let mut sentinels = match self.sentinels.try_lock() {
            Ok(sentinels) => sentinels,
            Err(_) => match self.current() {
                Some(current) if current.confirmed.elapsed() < known_for => {
                    return Ok(current.connection)
                }
                _ => self.sentinels.lock().await,
            },
        };
        let current = self.current();
        if let Some(current) = &current {
            if current.confirmed.elapsed() < SENTINEL_RECHECK {
                return Ok(current.connection.clone());
            }
        }
        let timeout = self.options.command_timeout;
        // Bounded: sentinels that accept connections and never answer must
        // not hold every command up.
        let asked = tokio::time::timeout(timeout, sentinels.async_get_client())
            .await
            .unwrap_or_else(|_| {
                Err(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "no sentinel answered within the command timeout",
                )))
            });
        // The master in use: the one known before asking, unless a command
        // found it gone meanwhile and forgot it.
        let known_before = current.as_ref().map(|known| known.address.clone());
        let current = current.filter(|known| {
            self.current()
                .is_some_and(|now| now.confirmed == known.confirmed)
        });
        let in_use: Vec<String> = current.iter().map(|known| known.address.clone()).collect();
        let named = asked.map(|client| (client.get_connection_info().addr().to_string(), client));
        match (follow(&in_use, named), current) {
            (Err(err), _) => Err(map_error(address, timeout, err)),
            (Ok(Follow::Keep { unanswered }), Some(current)) => {
                if let Some(err) = unanswered {
                    tracing::warn!(node = address, error = %err, "no sentinel answered; keeping the known master");
                }
                let connection = current.connection.clone();
                // Confirmed only if no command forgot it since the check
                // above; this command goes on with it either way, and after a
                // forget the next one asks again.
                self.confirm_if_unchanged(current);
                Ok(connection)
            }
            // `follow` keeps only a master in use.
            (Ok(Follow::Keep { .. }), None) => Err(map_error(
                address,
                timeout,
                redis::RedisError::from((redis::ErrorKind::Io, "no master known")),
            )),
            (
                Ok(Follow::Switch {
                    address: master_address,
                    to: client,
                }),
                current,
            ) => {
                if let Some(before) = known_before.filter(|before| *before != master_address) {
                    tracing::info!(node = address, from = %before, to = %master_address, "the sentinels name a new master");
                }
                if current.is_some() {
                    // From now on no command goes to the old master: the
                    // others wait for the new connection.
                    self.forget();
                }
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(self.options.connect_timeout))
                    .set_response_timeout(Some(timeout));
                let connection = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map_err(|err| map_error(address, timeout, err))?;
                self.store(Some(MasterConnection {
                    connection: connection.clone(),
                    address: master_address,
                    confirmed: std::time::Instant::now(),
                }));
                Ok(connection)
            }
        }
    }

    fn current(&self) -> Option<MasterConnection> {
        self.current.lock().ok().and_then(|current| current.clone())
    }

    fn store(&self, connection: Option<MasterConnection>) {
        if let Ok(mut current) = self.current.lock() {
            *current = connection;
        }
    }

    /// Marks `known` confirmed now, if it is still the connection in use (a
    /// command may have forgotten it meanwhile); under one lock, so a forget
    /// is never overwritten.
    fn confirm_if_unchanged(&self, mut known: MasterConnection) {
        if let Ok(mut current) = self.current.lock() {
            if current
                .as_ref()
                .is_some_and(|now| now.confirmed == known.confirmed)
            {
                known.confirmed = std::time::Instant::now();
                *current = Some(known);
            }
        }
    }

    /// Forgets the connection, so the next command asks the sentinels again.
    fn forget(&self) {
        self.store(None);
    }
}

/// Whether the server refused `err`'s command without running it: a slot
/// that moved or is moving, or a cluster without a quorum.
fn did_not_run(err: &redis::RedisError) -> bool {
    err.code().is_some_and(|code| NOT_RUN.contains(&code))
}

/// Whether `err` means the server we talk to may no longer be the master.
fn lost_master(err: &LockError) -> bool {
    match err {
        LockError::Connection { .. } | LockError::Timeout { .. } => true,
        LockError::Server { message, .. } => {
            let code = message.split_whitespace().next().unwrap_or("");
            LOST_MASTER.contains(&code)
        }
        _ => false,
    }
}

impl RedisNode {
    /// Sends `commands` as one pipeline on the connection that serves `key`
    /// (on a cluster, the master of its slot) and returns every reply as it
    /// came, errors included. On a cluster, a reply to the first command
    /// that proves it did not run (the slot moved) sends the whole pipeline
    /// again.
    async fn send_pipeline(
        &self,
        key: &[u8],
        commands: &[(&'static str, &[&[u8]])],
    ) -> Result<Vec<redis::Value>, LockError> {
        let mut pipeline = redis::pipe();
        // Each reply on its own, errors included, instead of the first error.
        pipeline.ignore_errors();
        for (name, args) in commands {
            let command = pipeline.cmd(name);
            for arg in args.iter().copied() {
                command.arg(arg);
            }
        }
        let sent: Result<Vec<redis::Value>, redis::RedisError> = match &self.link {
            Link::Standalone(manager) => pipeline.query_async(&mut manager.clone()).await,
            Link::Sentinel(link) => {
                let mut connection = link.connection(&self.address).await?;
                let sent: Result<Vec<redis::Value>, redis::RedisError> =
                    pipeline.query_async(&mut connection).await;
                // A demoted master refuses the write inside the pipeline
                // (`READONLY` as one of its replies), not the pipeline.
                let demoted = match &sent {
                    Ok(values) => values.iter().any(|value| {
                        matches!(value, redis::Value::ServerError(error)
                            if LOST_MASTER.contains(&error.code()))
                    }),
                    Err(err) => {
                        lost_master(&map_error(&self.address, self.command_timeout, err.clone()))
                    }
                };
                if demoted {
                    link.forget();
                }
                sent
            }
            Link::Cluster(connection) => {
                use redis::cluster_routing::{Route, SingleNodeRoutingInfo, Slot, SlotAddr};
                let mut redirects = 0;
                loop {
                    let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
                    let sent = connection
                        .clone()
                        .route_pipeline(
                            pipeline.clone(),
                            0,
                            commands.len(),
                            SingleNodeRoutingInfo::SpecificNode(route),
                        )
                        .await;
                    // A first command the server refused without running it
                    // (the slot moved) is sent again, the whole pipeline
                    // with it.
                    let refused = match &sent {
                        Ok(values) => {
                            matches!(values.first(), Some(redis::Value::ServerError(error))
                            if NOT_RUN.contains(&error.code()))
                        }
                        Err(err) => did_not_run(err),
                    };
                    if refused && redirects < CLUSTER_REDIRECTS {
                        redirects += 1;
                        tokio::time::sleep(Duration::from_millis(5 * u64::from(redirects))).await;
                        continue;
                    }
                    break sent;
                }
            }
        };
        let values = sent.map_err(|err| map_error(&self.address, self.command_timeout, err))?;
        if values.len() != commands.len() {
            return Err(LockError::UnexpectedReply {
                node: self.address.clone(),
                script: "pipeline",
                reply: format!("{} replies to {} commands", values.len(), commands.len()),
            });
        }
        Ok(values)
    }
}

#[async_trait]
impl NodeClient for RedisNode {
    fn address(&self) -> &str {
        &self.address
    }

    fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster(_))
    }

    fn publishes_sharded(&self) -> bool {
        self.sharded_pubsub
    }

    async fn command(&self, name: &'static str, args: &[&[u8]]) -> Result<Reply, LockError> {
        let mut command = redis::cmd(name);
        for arg in args.iter().copied() {
            command.arg(arg);
        }
        let sent: Result<redis::Value, redis::RedisError> = match &self.link {
            Link::Standalone(manager) => command.query_async(&mut manager.clone()).await,
            Link::Cluster(connection) => {
                let mut redirects = 0;
                loop {
                    let sent = command.query_async(&mut connection.clone()).await;
                    match sent {
                        Err(err) if redirects < CLUSTER_REDIRECTS && did_not_run(&err) => {
                            // The client refreshes its slot map on MOVED; ASK
                            // and TRYAGAIN end when the migration does.
                            redirects += 1;
                            tokio::time::sleep(Duration::from_millis(5 * u64::from(redirects)))
                                .await;
                        }
                        other => break other,
                    }
                }
            }
            Link::Sentinel(link) => {
                let mut connection = link.connection(&self.address).await?;
                let sent = command.query_async(&mut connection).await;
                let reply = sent
                    .map_err(|err| map_error(&self.address, self.command_timeout, err))
                    .and_then(|value| convert(&self.address, value));
                if let Err(err) = &reply {
                    if lost_master(err) {
                        link.forget();
                    }
                }
                return reply;
            }
        };
        let value = sent.map_err(|err| map_error(&self.address, self.command_timeout, err))?;
        convert(&self.address, value)
    }

    async fn pipeline_on_key(
        &self,
        key: &[u8],
        commands: &[(&'static str, &[&[u8]])],
    ) -> Result<Vec<Result<Reply, LockError>>, LockError> {
        let values = self.send_pipeline(key, commands).await?;
        Ok(values
            .into_iter()
            .map(|value| convert(&self.address, value))
            .collect())
    }

    async fn cluster_masters(&self) -> Result<Option<Vec<String>>, LockError> {
        let Link::Cluster(connection) = &self.link else {
            return Ok(None);
        };
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let value = connection
            .clone()
            .route_command(
                redis::cmd("CLUSTER").arg("SLOTS").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
            .await
            .map_err(|err| map_error(&self.address, self.command_timeout, err))?;
        let reply = convert(&self.address, value)?;
        super::cluster_masters_of(&self.address, &reply).map(Some)
    }

    async fn command_on_node(
        &self,
        address: &str,
        name: &'static str,
        args: &[&[u8]],
    ) -> Result<Reply, LockError> {
        let Link::Cluster(connection) = &self.link else {
            return self.command(name, args).await;
        };
        let (host, port) = super::cluster_node_address(address)?;
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let mut command = redis::cmd(name);
        for arg in args.iter().copied() {
            command.arg(arg);
        }
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
            host: host.to_owned(),
            port,
        });
        let value = connection
            .clone()
            .route_command(command, routing)
            .await
            .map_err(|err| map_error(address, self.command_timeout, err))?;
        convert(address, value)
    }

    async fn command_on_key(
        &self,
        key: &[u8],
        name: &'static str,
        args: &[&[u8]],
    ) -> Result<Reply, LockError> {
        let Link::Cluster(connection) = &self.link else {
            return self.command(name, args).await;
        };
        use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
        let mut command = redis::cmd(name);
        for arg in args.iter().copied() {
            command.arg(arg);
        }
        let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
        let value = connection
            .clone()
            .route_command(
                command,
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
            )
            .await
            .map_err(|err| map_error(&self.address, self.command_timeout, err))?;
        convert(&self.address, value)
    }
}

fn convert(address: &str, value: redis::Value) -> Result<Reply, LockError> {
    use redis::Value;
    Ok(match value {
        Value::Nil => Reply::Nil,
        Value::Int(value) => Reply::Int(value),
        Value::BulkString(bytes) => Reply::Data(bytes),
        Value::SimpleString(text) => Reply::Status(text),
        Value::Okay => Reply::Status("OK".to_owned()),
        Value::Boolean(flag) => Reply::Int(i64::from(flag)),
        Value::Array(items) | Value::Set(items) => Reply::Array(
            items
                .into_iter()
                .map(|item| convert(address, item))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(pairs) => {
            let mut items = Vec::with_capacity(pairs.len() * 2);
            for (key, value) in pairs {
                items.push(convert(address, key)?);
                items.push(convert(address, value)?);
            }
            Reply::Array(items)
        }
        Value::VerbatimString { text, .. } => Reply::Data(text.into_bytes()),
        Value::ServerError(error) => {
            let message = match error.details() {
                Some(details) => format!("{} {details}", error.code()),
                None => error.code().to_owned(),
            };
            return Err(server_error(address, message));
        }
        other => {
            return Err(LockError::UnexpectedReply {
                node: address.to_owned(),
                script: "command",
                reply: format!("{other:?}"),
            })
        }
    })
}

fn map_error(address: &str, command_timeout: Duration, err: redis::RedisError) -> LockError {
    let node = address.to_owned();
    if err.code() == Some("NOPERM") {
        return server_error(
            address,
            format!("NOPERM {}", err.detail().unwrap_or_default()),
        );
    }
    // The protocol parser's own error (`Parse error at 1, Unexpected ...`),
    // not a reply the crate could not convert.
    let text = err.to_string();
    if err.kind() == redis::ErrorKind::Parse && text.contains("Parse error at") {
        return not_redis(address, &text);
    }
    if err.kind() == redis::ErrorKind::AuthenticationFailed {
        return LockError::Authentication {
            node,
            message: err.to_string(),
        };
    }
    if err.is_timeout() {
        return LockError::Timeout {
            node,
            after: command_timeout,
        };
    }
    if let Some(code) = err.code() {
        let message = match err.detail() {
            Some(detail) => format!("{code} {detail}"),
            None => code.to_owned(),
        };
        return server_error(address, message);
    }
    LockError::Connection {
        node,
        source: std::sync::Arc::new(err),
    }
}

mod subscriber;
pub(super) use subscriber::connect_subscriber;
