//! [`NodeClient`] over the `fred` crate, with its reconnect policy.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fred::prelude::{
    Builder, Client, ClientLike, Config, ErrorKind, ReconnectPolicy, ServerConfig, Value,
};
use fred::types::config::{ClusterDiscoveryPolicy, Server};
use fred::types::{ClusterHash, CustomCommand};

use fred::clients::SubscriberClient as FredSubscriberClient;
use fred::prelude::{EventInterface, PubsubInterface};

use super::sentinel::{follow, Follow, SENTINEL_RECHECK};
use super::{
    not_redis, server_error, ConnectOptions, Delivery, MessageReceiver, NodeClient, Reply,
    SubscriberClient,
};
use super::{CLUSTER_REDIRECTS, LOST_MASTER, NOT_RUN};
use crate::error::LockError;
use crate::server::topology::{Endpoint, Topology};

/// A node reached through the `fred` crate.
pub struct FredNode {
    client: Client,
    address: String,
    command_timeout: Duration,
    owned: bool,
    /// On a sentinel topology: asks the sentinels where the master is.
    sentinel: Option<SentinelWatch>,
    /// The task that routes a client we created (`None` for the caller's
    /// own). It ends on errors fred cannot recover from with one attempt
    /// per command (an `ASK` during a slot migration needs a second write
    /// of its command, which fred then refuses by ending the task); it is
    /// started again before the next command.
    router: std::sync::Mutex<Option<fred::types::ConnectHandle>>,
    /// Releases publish with `SPUBLISH`: a cluster of servers that have it.
    sharded_pubsub: bool,
}

debug_shows_address!(FredNode);

impl FredNode {
    /// Wraps a client the caller built and initialised. `address` is used in
    /// errors and logs.
    pub fn from_client(
        client: Client,
        address: impl Into<String>,
        command_timeout: Duration,
    ) -> Self {
        FredNode {
            client,
            address: address.into(),
            command_timeout,
            owned: false,
            sentinel: None,
            router: std::sync::Mutex::new(None),
            sharded_pubsub: false,
        }
    }
}

impl Drop for FredNode {
    fn drop(&mut self) {
        // fred keeps a routing task (and its reconnect loop) alive until `quit`.
        // A client we created is closed here, without waiting, so dropping never
        // blocks; a client the caller handed in stays theirs to close.
        if !self.owned {
            return;
        }
        let client = self.client.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = client.quit().await;
            });
        }
    }
}

/// The fred config for `endpoint`: credentials and database from the first
/// URL (fred decodes them), the servers by topology, and our TLS settings.
fn config(endpoint: &Endpoint) -> Result<Config, LockError> {
    let first = endpoint
        .nodes
        .first()
        .ok_or_else(|| LockError::config("nodes", "at least one node URL is needed"))?;
    let mut config = Config::from_url(first.expose()).map_err(|err| LockError::InvalidConfig {
        field: "nodes".into(),
        reason: err.details().to_owned(),
    })?;
    let servers = || -> Result<Vec<Server>, LockError> {
        endpoint
            .nodes
            .iter()
            .enumerate()
            .map(|(index, node)| {
                node.parse()
                    .map(|parsed| Server::new(parsed.host, parsed.port))
                    .map_err(|reason| LockError::config(format!("nodes[{index}]"), reason))
            })
            .collect()
    };
    match endpoint.topology {
        Topology::Standalone => {}
        Topology::Cluster => {
            config.database = None;
            config.server = ServerConfig::Clustered {
                hosts: servers()?,
                // After a failover the routing table, not just the seeds,
                // says where to reconnect.
                policy: ClusterDiscoveryPolicy::UseCache,
            };
        }
        Topology::Sentinel => {
            config.server = ServerConfig::Sentinel {
                hosts: servers()?,
                service_name: endpoint.sentinel_service.clone().unwrap_or_default(),
                username: endpoint.sentinel_auth.username.clone(),
                password: endpoint
                    .sentinel_auth
                    .password
                    .as_ref()
                    .map(|password| password.expose().to_owned()),
            };
        }
    }
    #[cfg(feature = "tls")]
    if endpoint.uses_tls() {
        let material = super::tls::TlsMaterial::load(&endpoint.tls)?;
        config.tls =
            Some(fred::types::config::TlsConnector::from(material.rustls_config()?).into());
    }
    Ok(config)
}

/// A fred builder for `config` with our limits: connect and command timeouts,
/// exponential reconnects, and no replay of commands after a reconnect (a
/// replayed acquire could take the lock for a caller that already gave up; our
/// layers retry explicitly).
fn builder(config: Config, options: ConnectOptions) -> Builder {
    let connect_millis = u32::try_from(options.connect_timeout.as_millis()).unwrap_or(u32::MAX);
    let mut builder = Builder::from_config(config);
    builder
        .with_connection_config(|connection| {
            connection.connection_timeout = options.connect_timeout;
            connection.internal_command_timeout = options.connect_timeout;
            connection.max_command_attempts = 1;
        })
        .with_performance_config(|performance| {
            performance.default_command_timeout = options.command_timeout;
        })
        .set_policy(ReconnectPolicy::new_exponential(
            0,
            10,
            connect_millis.clamp(10, 2_000),
            2,
        ));
    builder
}

pub(super) async fn connect(
    endpoint: &Endpoint,
    options: ConnectOptions,
) -> Result<Arc<dyn NodeClient>, LockError> {
    let address = endpoint.address();
    let client = builder(config(endpoint)?, options)
        .build()
        .map_err(|err| map_error(&address, options.command_timeout, err))?;
    let router = client
        .init()
        .await
        .map_err(|err| map_error(&address, options.command_timeout, err))?;
    let sentinel = match endpoint.topology {
        Topology::Sentinel => Some(SentinelWatch::new(endpoint, options)?),
        Topology::Standalone | Topology::Cluster => None,
    };
    let mut node = FredNode {
        client,
        address,
        command_timeout: options.command_timeout,
        owned: true,
        sentinel,
        router: std::sync::Mutex::new(Some(router)),
        sharded_pubsub: false,
    };
    if endpoint.topology == Topology::Cluster {
        node.sharded_pubsub = super::has_sharded_pubsub(&node).await;
    }
    Ok(Arc::new(node))
}

/// Where a cluster sends `name args...`: scripts to the master of their first
/// key's slot (our scripts' keys share one hash tag), keyless commands
/// anywhere, other commands by their first argument.
fn routing(name: &str, args: &[&[u8]]) -> ClusterHash {
    match name {
        "EVALSHA" | "EVAL" | "EVALSHA_RO" | "EVAL_RO" | "FCALL" => {
            let key_count = args
                .get(1)
                .and_then(|count| std::str::from_utf8(count).ok())
                .and_then(|count| count.parse::<usize>().ok())
                .unwrap_or(0);
            match args.get(2) {
                Some(key) if key_count > 0 => ClusterHash::Custom(fred::util::redis_keyslot(key)),
                _ => ClusterHash::Random,
            }
        }
        "PING" | "SCRIPT" | "PUBLISH" | "COMMAND" | "INFO" | "TIME" | "ROLE" | "CLUSTER"
        | "SCAN" => ClusterHash::Random,
        _ => match args.first() {
            Some(key) => ClusterHash::Custom(fred::util::redis_keyslot(key)),
            None => ClusterHash::Random,
        },
    }
}

/// Asks the sentinels where the master is, at most every
/// [`SENTINEL_RECHECK`], and makes fred reconnect when it moved: after
/// `SENTINEL FAILOVER` the old master keeps answering as a master for
/// seconds, so fred, which follows the sentinels only after a broken
/// connection, would keep writing to it.
struct SentinelWatch {
    sentinels: Vec<Endpoint>,
    service: String,
    options: ConnectOptions,
    connection: tokio::sync::Mutex<Option<Client>>,
    checked: std::sync::Mutex<Option<std::time::Instant>>,
}

impl SentinelWatch {
    fn new(endpoint: &Endpoint, options: ConnectOptions) -> Result<Self, LockError> {
        Ok(SentinelWatch {
            sentinels: endpoint
                .nodes
                .iter()
                .map(|node| Endpoint::standalone(node.clone()).with_tls(endpoint.tls.clone()))
                .collect(),
            service: endpoint.sentinel_service.clone().unwrap_or_default(),
            options,
            connection: tokio::sync::Mutex::new(None),
            checked: std::sync::Mutex::new(Some(std::time::Instant::now())),
        }
        .with_auth(endpoint))
    }

    /// Connects to the sentinels with their own credentials, not the
    /// master's that the URLs carry.
    fn with_auth(mut self, endpoint: &Endpoint) -> Self {
        let auth = &endpoint.sentinel_auth;
        for sentinel in &mut self.sentinels {
            // The URL's credentials are the master's: strip them, and use the
            // sentinels' own.
            if let Ok(parsed) = sentinel.nodes[0].parse() {
                let scheme = if parsed.tls { "rediss" } else { "redis" };
                // Percent-encoded: fred decodes the URL, and a `/`, `#`,
                // `?` or `%` in a password would otherwise move its parts.
                let userinfo = match (&auth.username, &auth.password) {
                    (Some(user), Some(password)) => format!(
                        "{}:{}@",
                        percent_encode(user),
                        percent_encode(password.expose())
                    ),
                    (None, Some(password)) => format!(":{}@", percent_encode(password.expose())),
                    _ => String::new(),
                };
                sentinel.nodes[0] = crate::server::url::NodeUrl::new(format!(
                    "{scheme}://{userinfo}{}",
                    sentinel.nodes[0].address()
                ));
            }
        }
        self
    }

    /// Whether the last answer is older than [`SENTINEL_RECHECK`]; if so,
    /// marks it fresh so only one caller asks.
    fn due(&self) -> bool {
        let Ok(mut checked) = self.checked.lock() else {
            return false;
        };
        match *checked {
            Some(at) if at.elapsed() < SENTINEL_RECHECK => false,
            _ => {
                *checked = Some(std::time::Instant::now());
                true
            }
        }
    }

    /// Makes the next command ask the sentinels: the server refused a write
    /// as no master (`READONLY`: demoted by a failover).
    fn recheck_soon(&self) {
        if let Ok(mut checked) = self.checked.lock() {
            *checked = None;
        }
    }

    /// Makes `client` reconnect if the sentinels name another master than
    /// the one it is connected to. Failures only log: the next check retries.
    async fn follow(&self, client: &Client) {
        if !self.due() {
            return;
        }
        let named = self.master_address().await.map(|address| (address, ()));
        let connected: Vec<String> = client
            .active_connections()
            .iter()
            .map(|server| format!("{}:{}", server.host, server.port))
            .collect();
        match follow(&connected, named) {
            Ok(Follow::Keep { unanswered: None }) => {}
            Ok(Follow::Keep {
                unanswered: Some(err),
            }) => {
                tracing::warn!(service = %self.service, error = %err, "no sentinel answered; keeping the known master");
            }
            Err(err) => {
                tracing::warn!(service = %self.service, error = %err, "no master from the sentinels and none connected");
            }
            Ok(Follow::Switch { address, .. }) => {
                tracing::info!(service = %self.service, to = %address, "the sentinels name a new master; reconnecting");
                if let Err(err) = client.force_reconnection().await {
                    tracing::warn!(service = %self.service, error = %err, "reconnecting to the new master failed");
                }
            }
        }
    }

    /// `host:port` of the master, from the first sentinel that answers.
    async fn master_address(&self) -> Result<String, LockError> {
        let mut connection = self.connection.lock().await;
        for _ in 0..2 {
            if connection.is_none() {
                *connection = Some(self.connect().await?);
            }
            let Some(sentinel) = connection.as_ref() else {
                continue;
            };
            let command = CustomCommand::new_static("SENTINEL", ClusterHash::Random, false);
            let asked: Result<Value, _> = sentinel
                .custom(
                    command,
                    vec![
                        Value::from("GET-MASTER-ADDR-BY-NAME"),
                        Value::from(self.service.as_str()),
                    ],
                )
                .await;
            match asked {
                Ok(Value::Array(parts)) if parts.len() == 2 => {
                    let host = parts[0].as_string().unwrap_or_default();
                    let port = parts[1].as_string().unwrap_or_default();
                    return Ok(format!("{host}:{port}"));
                }
                Ok(other) => {
                    return Err(LockError::UnexpectedReply {
                        node: self.service.clone(),
                        script: "SENTINEL GET-MASTER-ADDR-BY-NAME",
                        reply: format!("{other:?}"),
                    })
                }
                // A dead sentinel: connect to the next one that answers.
                Err(_) => {
                    if let Some(dead) = connection.take() {
                        let _ = dead.quit().await;
                    }
                }
            }
        }
        Err(LockError::Connection {
            node: self.service.clone(),
            source: crate::error::source_error("no sentinel answered"),
        })
    }

    async fn connect(&self) -> Result<Client, LockError> {
        let mut last_error = None;
        for sentinel in &self.sentinels {
            let client = builder(config(sentinel)?, self.options)
                .build()
                .map_err(|err| map_error(&sentinel.address(), self.options.command_timeout, err))?;
            match client.init().await {
                Ok(_) => return Ok(client),
                Err(err) => {
                    let _ = client.quit().await;
                    last_error = Some(map_error(
                        &sentinel.address(),
                        self.options.command_timeout,
                        err,
                    ));
                }
            }
        }
        Err(last_error
            .unwrap_or_else(|| LockError::config("nodes", "at least one node URL is needed")))
    }
}

/// `text` with every byte but the URL's unreserved characters as `%XX`.
fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

impl Drop for SentinelWatch {
    fn drop(&mut self) {
        let Some(client) = self.connection.get_mut().take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = client.quit().await;
            });
        }
    }
}

impl FredNode {
    /// Starts the routing task again if it ended (see `router`); commands
    /// sent meanwhile wait for its connection, as after a reconnect.
    fn revive(&self) {
        let Ok(mut router) = self.router.lock() else {
            return;
        };
        if router.as_ref().is_some_and(|task| task.is_finished()) {
            tracing::warn!(node = %self.address, "fred's connection task ended; starting it again");
            *router = Some(self.client.connect());
        }
    }

    /// Sends `name args...` where `hash` routes it on a cluster.
    async fn send(
        &self,
        name: &'static str,
        hash: ClusterHash,
        args: &[&[u8]],
    ) -> Result<Reply, LockError> {
        self.revive();
        if let Some(sentinel) = &self.sentinel {
            sentinel.follow(&self.client).await;
        }
        let command = CustomCommand::new_static(name, hash, false);
        let args: Vec<Value> = args
            .iter()
            .map(|arg| Value::Bytes(arg.to_vec().into()))
            .collect();
        let sent: Result<Value, _> = self.client.custom(command, args).await;
        if let (Some(sentinel), Err(err)) = (&self.sentinel, &sent) {
            if lost_master(err) {
                sentinel.recheck_soon();
            }
        }
        let value = sent.map_err(|err| map_error(&self.address, self.command_timeout, err))?;
        convert(&self.address, value)
    }
}

/// Whether the server refused a command as no master (demoted, or not yet
/// one): the sentinels must be asked again.
fn lost_master(err: &fred::error::Error) -> bool {
    let code = err.details().split_whitespace().next().unwrap_or("");
    LOST_MASTER.contains(&code)
}

#[async_trait]
impl NodeClient for FredNode {
    fn address(&self) -> &str {
        &self.address
    }

    fn is_cluster(&self) -> bool {
        self.client.is_clustered()
    }

    fn publishes_sharded(&self) -> bool {
        self.sharded_pubsub
    }

    async fn command(&self, name: &'static str, args: &[&[u8]]) -> Result<Reply, LockError> {
        self.send(name, routing(name, args), args).await
    }

    async fn command_on_key(
        &self,
        key: &[u8],
        name: &'static str,
        args: &[&[u8]],
    ) -> Result<Reply, LockError> {
        self.send(
            name,
            ClusterHash::Custom(fred::util::redis_keyslot(key)),
            args,
        )
        .await
    }

    /// One fred pipeline: the router writes its commands one after another
    /// to one connection, and runs no reconnection (ours after the sentinels
    /// named a new master, or its own after a broken link) between them;
    /// a command that finds its connection gone fails instead of being
    /// written to the next one.
    ///
    /// `max_attempts = 1` is what keeps a `WAIT` with its write: fred would
    /// follow a `MOVED` or `ASK` by writing the command again, to the slot's
    /// new master, after the `WAIT` behind it ran on the old one; with no
    /// attempt left it fails instead, and the pipeline with it (one error
    /// for all, a connection error: the caller retries, and undoes what the
    /// attempt may have granted). A first reply that proves its command did
    /// not run (`TRYAGAIN`, `CLUSTERDOWN`, a redirection fred gave up on)
    /// sends the whole pipeline again, as the redis client does. Never raise
    /// the attempts here.
    async fn pipeline_on_key(
        &self,
        key: &[u8],
        commands: &[(&'static str, &[&[u8]])],
    ) -> Result<Vec<Result<Reply, LockError>>, LockError> {
        self.revive();
        if let Some(sentinel) = &self.sentinel {
            sentinel.follow(&self.client).await;
        }
        let options = fred::types::config::Options {
            max_attempts: Some(1),
            ..Default::default()
        };
        let slot = fred::util::redis_keyslot(key);
        let mut redirects = 0;
        loop {
            let pipeline = self.client.pipeline().with_options(&options);
            for (name, args) in commands {
                let command = CustomCommand::new_static(name, ClusterHash::Custom(slot), false);
                let args: Vec<Value> = args
                    .iter()
                    .map(|arg| Value::Bytes(arg.to_vec().into()))
                    .collect();
                // Queued in memory: nothing is sent until `try_all`.
                let _: Value = pipeline
                    .custom(command, args)
                    .await
                    .map_err(|err| map_error(&self.address, self.command_timeout, err))?;
            }
            let values = pipeline.try_all::<Value>().await;
            if values.len() != commands.len() {
                // One error for the whole pipeline: it was not sent, or no
                // reply came back in time.
                return Err(match values.into_iter().next() {
                    Some(Err(err)) => map_error(&self.address, self.command_timeout, err),
                    _ => LockError::UnexpectedReply {
                        node: self.address.clone(),
                        script: "pipeline",
                        reply: format!("a pipeline of {} commands", commands.len()),
                    },
                });
            }
            if let Some(sentinel) = &self.sentinel {
                if values
                    .iter()
                    .any(|value| matches!(value, Err(err) if lost_master(err)))
                {
                    sentinel.recheck_soon();
                }
            }
            let redirected = matches!(values.first(), Some(Err(err)) if was_redirected(err));
            if redirected && redirects < CLUSTER_REDIRECTS {
                // fred refreshed its slot map on the `MOVED`; `ASK` and
                // `TRYAGAIN` end when the migration does.
                redirects += 1;
                tokio::time::sleep(Duration::from_millis(5 * u64::from(redirects))).await;
                continue;
            }
            return Ok(values
                .into_iter()
                .map(|value| {
                    value
                        .map_err(|err| map_error(&self.address, self.command_timeout, err))
                        .and_then(|value| convert(&self.address, value))
                })
                .collect());
        }
    }

    async fn cluster_masters(&self) -> Result<Option<Vec<String>>, LockError> {
        if !self.client.is_clustered() {
            return Ok(None);
        }
        let reply = self
            .send("CLUSTER", ClusterHash::Random, &[b"SLOTS"])
            .await?;
        super::cluster_masters_of(&self.address, &reply).map(Some)
    }

    async fn command_on_node(
        &self,
        address: &str,
        name: &'static str,
        args: &[&[u8]],
    ) -> Result<Reply, LockError> {
        if !self.client.is_clustered() {
            return self.command(name, args).await;
        }
        let (host, port) = super::cluster_node_address(address)?;
        self.revive();
        let command = CustomCommand::new_static(name, ClusterHash::Random, false);
        let args: Vec<Value> = args
            .iter()
            .map(|arg| Value::Bytes(arg.to_vec().into()))
            .collect();
        let value: Value = self
            .client
            .with_cluster_node(Server::new(host, port))
            .custom(command, args)
            .await
            .map_err(|err| map_error(address, self.command_timeout, err))?;
        convert(address, value)
    }
}

/// Whether `err` says the server did not run the command: a redirection
/// fred gave up following (`MOVED` or `ASK`), or a slot in the middle of a
/// migration or a cluster without a quorum.
fn was_redirected(err: &fred::error::Error) -> bool {
    if *err.kind() == ErrorKind::Routing && err.details().contains("Too many redirections") {
        return true;
    }
    let code = err.details().split_whitespace().next().unwrap_or("");
    NOT_RUN.contains(&code)
}

fn convert(address: &str, value: Value) -> Result<Reply, LockError> {
    Ok(match value {
        Value::Null => Reply::Nil,
        Value::Integer(value) => Reply::Int(value),
        Value::Boolean(flag) => Reply::Int(i64::from(flag)),
        Value::Bytes(bytes) => Reply::Data(bytes.to_vec()),
        Value::String(text) => Reply::Data(text.as_bytes().to_vec()),
        Value::Array(items) => Reply::Array(
            items
                .into_iter()
                .map(|item| convert(address, item))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(map) => {
            let mut items = Vec::new();
            for (key, value) in map.inner() {
                items.push(Reply::Data(key.as_bytes().to_vec()));
                items.push(convert(address, value)?);
            }
            Reply::Array(items)
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

fn map_error(address: &str, command_timeout: Duration, err: fred::error::Error) -> LockError {
    let node = address.to_owned();
    match err.kind() {
        ErrorKind::Protocol if err.details().starts_with("Decode Error") => {
            not_redis(address, err.details())
        }
        ErrorKind::Auth => LockError::Authentication {
            node,
            message: err.details().to_owned(),
        },
        ErrorKind::Timeout => LockError::Timeout {
            node,
            after: command_timeout,
        },
        ErrorKind::IO | ErrorKind::Canceled | ErrorKind::Routing => LockError::Connection {
            node,
            source: std::sync::Arc::new(err),
        },
        ErrorKind::Config | ErrorKind::Url => LockError::InvalidConfig {
            field: "nodes".into(),
            reason: err.details().to_owned(),
        },
        // fred reports server error lines and some client-side failures (such as
        // "Failed to route command." while disconnected) with the same kinds; a
        // server error line starts with its upper-case code.
        _ if starts_with_error_code(err.details()) => {
            server_error(address, err.details().to_owned())
        }
        _ => LockError::Connection {
            node,
            source: std::sync::Arc::new(err),
        },
    }
}

fn starts_with_error_code(details: &str) -> bool {
    let code = details.split_whitespace().next().unwrap_or("");
    code.len() >= 2 && code.bytes().all(|byte| byte.is_ascii_uppercase())
}

mod subscriber;
pub(super) use subscriber::connect_subscriber;

#[cfg(test)]
mod tests {
    use super::percent_encode;

    #[test]
    fn sentinel_passwords_survive_the_url() {
        assert_eq!(percent_encode("a/b#c?d%e f"), "a%2Fb%23c%3Fd%25e%20f");
        assert_eq!(percent_encode("plain-Pass_1.~"), "plain-Pass_1.~");
    }
}
