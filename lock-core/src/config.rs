//! Configuration as data: serde-deserialisable, with documented defaults and a
//! `validate` that names the field at fault; and the one place that reads a
//! config into both layers: the engine's settings, the client's connection
//! options and the grant scripts' options.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::engine::backend::LockBackend;
use crate::engine::manager::LockManager;
use crate::engine::settings::{renew_interval, RetryPolicy, Settings, WaitMode, WatchdogConfig};
use crate::error::LockError;
use crate::key::validate_prefix;
use crate::server::client::{
    ClientKind, ConnectOptions, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT,
};
use crate::server::grant::{validate_holder_label, GrantOptions};
use crate::server::scripted::ScriptedNode;
use crate::server::topology::{Endpoint, ReplicasConfig, SentinelAuth, TlsConfig, Topology};
use crate::server::url::NodeUrl;
use crate::ttl::validate_ttl;

/// How a lock is taken, kept and waited for. Durations are written for humans in
/// config files: `"30s"`, `"250ms"`, `"1m 30s"`.
///
#[cfg_attr(not(doctest), doc = include_str!("doc/lock_config.md"))]
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct LockConfig {
    /// The Redis nodes, as `redis://[user[:password]@]host[:port][/db]` URLs
    /// (`rediss://` for TLS). What they are depends on `topology`: standalone
    /// servers (single-node strategies use the first, Redlock each), the seed
    /// nodes of one cluster, or the sentinels of one master. Default:
    /// `["redis://127.0.0.1:6379"]`.
    pub nodes: Vec<NodeUrl>,
    /// What the nodes form: `standalone`, `cluster` or `sentinel`. Default:
    /// `standalone`.
    pub topology: Topology,
    /// With topology `sentinel`: the name the sentinels monitor the master by.
    pub sentinel_service: Option<String>,
    /// With topology `sentinel`: credentials for the sentinels themselves.
    /// The node URLs' credentials and database are the master's.
    pub sentinel_auth: SentinelAuth,
    /// Certificates for `rediss://` nodes; the system roots when no CA file
    /// is given.
    pub tls: TlsConfig,
    /// Replica acknowledgements after each acquire and extend (`WAIT`):
    /// `count` replicas within `timeout`. Off by default. Not with Redlock.
    pub replicas: ReplicasConfig,
    /// The Redis client library to talk through. Default: `redis` when that cargo
    /// feature is enabled, otherwise `fred`.
    pub client: ClientKind,
    /// How long a lease lasts unless renewed. Default: 30 s.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// Prepended to every lock name to form the Redis key. Must not contain `{` or
    /// `}`. Default: `"lock:"`.
    pub key_prefix: String,
    /// How long `acquire` waits for a held lock before giving up. Zero means one
    /// attempt. Default: 10 s.
    #[serde(with = "humantime_serde")]
    pub wait_timeout: Duration,
    /// How a waiting `acquire` learns that the lock may be free. Default:
    /// `notify`.
    pub wait_mode: WaitMode,
    /// Fair mode: waiters get the lock in arrival order, through a queue in
    /// Redis. A release grants the lock to the first waiter on the server,
    /// which learns it from the release's message without an acquire of
    /// its own (not with `holder_info`, `fencing_counter_ttl` or
    /// `replicas`). A waiter that gives up leaves the queue at once, giving
    /// back a grant it never took up; one that dies leaves it, or blocks a
    /// grant made to it, within [`crate::FAIR_WAITER_LEASE`]. Every process
    /// of a name should use it: a release outside fair mode only wakes the
    /// waiters. Supported by the single-node strategy. Default: false.
    pub fair: bool,
    /// The delays between acquire attempts while waiting (in `poll` mode, and
    /// after errors).
    pub retry: RetryPolicy,
    /// Automatic renewal of held leases.
    pub watchdog: WatchdogConfig,
    /// How long to wait for a connection (and authentication) to a node.
    /// Default: 5 s.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// How long to wait for the reply to one command. Default: 2 s.
    #[serde(with = "humantime_serde")]
    pub command_timeout: Duration,
    /// Multi-node strategies (Redlock): how long one attempt waits for one
    /// node before counting it as failed. Must be well below the TTL, so a
    /// slow node cannot eat the lease. Default: 50 ms.
    #[serde(with = "humantime_serde")]
    pub node_timeout: Duration,
    /// The fraction of the TTL given up for clocks running at different rates;
    /// the lease is trusted for `ttl - (ttl × factor + 2 ms)` after the request was
    /// sent. Must be in `[0, 0.5)`. Default: 0.01.
    pub clock_drift_factor: f64,
    /// With the `metrics` feature: label metrics with the lock name, for the
    /// first this many distinct names the process sees (later ones share the
    /// label `other`), so a service locking `order:{id}` cannot grow its
    /// metrics without bound. At most 10,000. Default: 0, no name label.
    pub metrics_lock_names: u32,
    /// Whether single-node acquires issue fencing tokens. Default: true.
    ///
    /// With `false`, a single-node acquire is one plain
    /// `SET <key> <hold> NX PX <ttl>` (followed by `WAIT` in the same pipeline
    /// with `replicas`) instead of the acquire script, which costs the server
    /// several times as much (`docs/BENCHMARKS.md`). What is lost: the guard
    /// has no fencing token (`fencing_token()` is `None`, and a hand-off token
    /// carries none), and `distlock run` and `distlock acquire` set no
    /// `DISTLOCK_FENCING_TOKEN`, so nothing stops a holder that was paused past
    /// its lease from writing to the resource. Such a grant also writes no
    /// fencing counter, so a resource cannot tell its writes from those of
    /// the fenced holder before it: every process that relies on tokens for a
    /// `key_prefix` must keep fencing on. Otherwise processes with and without
    /// it share a prefix safely: the stored value, renewal, release, hand-off
    /// and inspection are the same (`inspect` shows the counter, the last
    /// token issued, which a fencing-off hold does not have).
    ///
    /// With `holder_info`, the acquire script still runs, in a mode that reads
    /// and writes no counter. Fair mode (`fair = true`) and the reentrant
    /// strategy keep their scripts and keep issuing tokens whatever this says;
    /// Redlock issues none either way.
    pub fencing: bool,
    /// How long a lock name's fencing counter lives after its last grant.
    /// Off by default (`None`): the counter never expires, and every name
    /// ever locked keeps one small key. When set, grants issue
    /// `max(counter + 1, the server's time in µs)`, so tokens keep growing
    /// after the counter expired, unless the server's clock is set back by
    /// more than the time since the last grant. At least 10 × `ttl`, at most
    /// 3650 days. Single-node and reentrant strategies, wherever they issue
    /// tokens (not single-node grants with `fencing = false` outside fair
    /// mode; Redlock keeps no counter).
    #[serde(with = "humantime_serde")]
    pub fencing_counter_ttl: Option<Duration>,
    /// Store holder information beside each held lock, in the grant's own
    /// script: this process's host name and id, the server's time and
    /// `holder_label`, in `<prefix>{<name>}:holder` with the lock's TTL
    /// (never the owner token). `inspect`, `distlock status` and `distlock
    /// list` show it. Single-node and reentrant strategies; Redlock refuses
    /// it. Default: false.
    pub holder_info: bool,
    /// A label stored with the holder information (`holder_info = true`):
    /// the job or service, printable, at most 128 bytes. Default: none.
    pub holder_label: Option<String>,
}

/// The most lock names `metrics_lock_names` may label: every name is a
/// series in the application's metrics backend.
pub const MAX_METRICS_LOCK_NAMES: u32 = 10_000;

impl Default for LockConfig {
    fn default() -> Self {
        LockConfig {
            nodes: vec![NodeUrl::new("redis://127.0.0.1:6379")],
            topology: Topology::default(),
            sentinel_service: None,
            sentinel_auth: SentinelAuth::default(),
            tls: TlsConfig::default(),
            replicas: ReplicasConfig::default(),
            client: ClientKind::default(),
            ttl: Duration::from_secs(30),
            key_prefix: "lock:".to_owned(),
            wait_timeout: Duration::from_secs(10),
            wait_mode: WaitMode::default(),
            fair: false,
            retry: RetryPolicy::default(),
            watchdog: WatchdogConfig::default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            node_timeout: Duration::from_millis(50),
            clock_drift_factor: 0.01,
            metrics_lock_names: 0,
            fencing: true,
            fencing_counter_ttl: None,
            holder_info: false,
            holder_label: None,
        }
    }
}

impl LockConfig {
    /// A default config pointing at the given nodes.
    pub fn with_nodes<I, S>(nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        LockConfig {
            nodes: nodes.into_iter().map(NodeUrl::new).collect(),
            ..LockConfig::default()
        }
    }

    /// This config with `ttl`, the lease of every lock until it is
    /// extended.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// This config with `key_prefix`, the prefix of every key.
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// This config with `wait_timeout`, how long `acquire` waits.
    pub fn with_wait_timeout(mut self, wait: Duration) -> Self {
        self.wait_timeout = wait;
        self
    }

    /// This config with the client that connects.
    pub fn with_client(mut self, client: ClientKind) -> Self {
        self.client = client;
        self
    }

    /// This config with `topology`: what the nodes form.
    pub fn with_topology(mut self, topology: Topology) -> Self {
        self.topology = topology;
        self
    }

    /// This config with waiters queued in arrival order (`fair`), or not.
    pub fn with_fair(mut self, fair: bool) -> Self {
        self.fair = fair;
        self
    }

    /// This config with fencing tokens issued (`fencing`), or not.
    pub fn with_fencing(mut self, fencing: bool) -> Self {
        self.fencing = fencing;
        self
    }

    /// This config with holder information stored beside each held lock
    /// (`holder_info`), under `label` if one is given (`holder_label`).
    pub fn with_holder_info(mut self, label: Option<String>) -> Self {
        self.holder_info = true;
        self.holder_label = label;
        self
    }

    /// This config with `retry`, the back-off between polling attempts.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// This config with `watchdog`, the renewal of held leases.
    pub fn with_watchdog(mut self, watchdog: WatchdogConfig) -> Self {
        self.watchdog = watchdog;
        self
    }

    /// This config with `tls`, the certificates of `rediss://` nodes.
    pub fn with_tls(mut self, tls: TlsConfig) -> Self {
        self.tls = tls;
        self
    }

    /// This config with `replicas`: how many replicas must acknowledge a
    /// grant.
    pub fn with_replicas(mut self, replicas: ReplicasConfig) -> Self {
        self.replicas = replicas;
        self
    }

    /// This config with `connect_timeout` and `command_timeout`.
    pub fn with_timeouts(mut self, connect: Duration, command: Duration) -> Self {
        self.connect_timeout = connect;
        self.command_timeout = command;
        self
    }

    /// Checks every field and returns the first problem as
    /// [`LockError::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<(), LockError> {
        if self.metrics_lock_names > MAX_METRICS_LOCK_NAMES {
            return Err(LockError::config(
                "metrics_lock_names",
                format!(
                    "{} distinct lock names would each be a metrics series; the most \
                     allowed is {MAX_METRICS_LOCK_NAMES} (names past the limit share the \
                     label `other`)",
                    self.metrics_lock_names
                ),
            ));
        }
        if self.nodes.is_empty() {
            return Err(LockError::config(
                "nodes",
                "at least one node URL is needed",
            ));
        }
        let mut seen = Vec::with_capacity(self.nodes.len());
        for (index, node) in self.nodes.iter().enumerate() {
            let parsed = node
                .parse()
                .map_err(|reason| LockError::config(format!("nodes[{index}]"), reason))?;
            // A node is a server: two databases of one server fail together,
            // so Redlock must not count them as two.
            let identity = (parsed.host.to_ascii_lowercase(), parsed.port);
            if let Some(first) = seen.iter().position(|other| *other == identity) {
                // The address, not the URL: an error never repeats a user name.
                return Err(LockError::config(
                    format!("nodes[{index}]"),
                    format!(
                        "{} is the same server as nodes[{first}] (whatever the database)",
                        node.address(),
                    ),
                ));
            }
            seen.push(identity);
        }
        for endpoint in self.endpoints() {
            endpoint.validate()?;
        }
        if self.tls.is_set() && !self.nodes.iter().any(NodeUrl::is_tls) {
            return Err(LockError::config(
                "tls",
                "certificates are given but no node uses `rediss://`",
            ));
        }
        validate_ttl(self.ttl).map_err(|err| match err {
            LockError::InvalidTtl { reason, .. } => LockError::config("ttl", reason),
            other => other,
        })?;
        validate_prefix(&self.key_prefix)
            .map_err(|reason| LockError::config("key_prefix", reason))?;
        if let Some(counter_ttl) = self.fencing_counter_ttl {
            validate_fencing_counter_ttl(counter_ttl, self.ttl)?;
        }
        if let Some(label) = &self.holder_label {
            if !self.holder_info {
                return Err(LockError::config(
                    "holder_label",
                    "is set but holder_info is false, so it would be stored nowhere; set \
                     holder_info = true",
                ));
            }
            validate_holder_label(label)?;
        }
        self.retry.validate()?;
        self.watchdog.validate(self.ttl, self.clock_drift_factor)?;
        validate_timeout("connect_timeout", self.connect_timeout)?;
        validate_timeout("command_timeout", self.command_timeout)?;
        validate_timeout("node_timeout", self.node_timeout)?;
        self.replicas.validate(self.command_timeout)?;
        if self.replicas.is_on() && self.replicas.timeout >= self.ttl {
            return Err(LockError::config(
                "replicas.timeout",
                "must be below the TTL, or a grant can expire while replicas are awaited",
            ));
        }
        if !(0.0..0.5).contains(&self.clock_drift_factor) {
            return Err(LockError::config(
                "clock_drift_factor",
                format!("{} is outside [0, 0.5)", self.clock_drift_factor),
            ));
        }
        Ok(())
    }

    /// The deployments the nodes form: with topology `standalone` one
    /// endpoint per node (each with the TLS settings if it is `rediss://`);
    /// otherwise one endpoint of all the nodes.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        match self.topology {
            Topology::Standalone => self
                .nodes
                .iter()
                .map(|node| {
                    let endpoint = Endpoint::standalone(node.clone()).with_replicas(self.replicas);
                    if node.is_tls() {
                        endpoint.with_tls(self.tls.clone())
                    } else {
                        endpoint
                    }
                })
                .collect(),
            Topology::Cluster | Topology::Sentinel => vec![Endpoint {
                topology: self.topology,
                nodes: self.nodes.clone(),
                sentinel_service: self.sentinel_service.clone(),
                sentinel_auth: self.sentinel_auth.clone(),
                tls: self.tls.clone(),
                replicas: self.replicas,
            }],
        }
    }

    /// The deployment single-node strategies use: the first node when
    /// standalone, otherwise the cluster or sentinel group of all the nodes.
    ///
    /// Errors: [`LockError::InvalidConfig`] on `nodes` when there is none.
    pub fn endpoint(&self) -> Result<Endpoint, LockError> {
        self.endpoints()
            .into_iter()
            .next()
            .ok_or_else(|| LockError::config("nodes", "at least one node URL is needed"))
    }

    /// The renewal interval in force: the configured one, or a third of the TTL.
    pub fn renew_interval(&self) -> Duration {
        renew_interval(&self.watchdog, self.ttl, self.clock_drift_factor)
    }
}

impl From<&LockConfig> for Settings {
    fn from(config: &LockConfig) -> Self {
        Settings {
            ttl: config.ttl,
            key_prefix: config.key_prefix.clone(),
            wait_timeout: config.wait_timeout,
            wait_mode: config.wait_mode,
            fair: config.fair,
            retry: config.retry.clone(),
            watchdog: config.watchdog.clone(),
            clock_drift_factor: config.clock_drift_factor,
            metrics_lock_names: config.metrics_lock_names,
        }
    }
}

impl From<&LockConfig> for ConnectOptions {
    fn from(config: &LockConfig) -> Self {
        ConnectOptions::new(config.connect_timeout, config.command_timeout)
    }
}

impl GrantOptions {
    /// The options `config` asks for; with `holder_info`, this process's host
    /// name and id are read once, here. Errors with
    /// [`LockError::InvalidConfig`] naming the field when `config` does not
    /// validate.
    pub fn from_config(config: &LockConfig) -> Result<Self, LockError> {
        config.validate()?;
        let options = GrantOptions::default()
            .with_fencing(config.fencing)
            .with_fencing_counter_ttl(config.fencing_counter_ttl);
        if config.holder_info {
            options.with_holder_info(config.holder_label.clone())
        } else {
            Ok(options)
        }
    }
}

/// A strategy's backend, built from a config alone: the one path from a
/// [`LockConfig`] to a [`LockManager`] ([`LockManager::connect`]), so the
/// backend's options and the manager's config come from the same fields.
///
/// Implemented by each strategy's backend (`SingleNodeBackend`,
/// `ReentrantBackend`, `RedlockBackend`).
pub trait FromConfig: LockBackend + Sized + 'static {
    /// Connects to the nodes `config` names with its client, reading every
    /// field the backend uses.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidConfig`] naming the field, and the connection
    /// errors of the strategy.
    fn from_config(config: &LockConfig) -> impl Future<Output = Result<Self, LockError>> + Send;
}

impl ScriptedNode {
    /// Connects to the deployment a single-node strategy uses (the first
    /// node, or the cluster or sentinel group of all of them) as `config`
    /// says, and reads the grant options it asks for: what a single-node
    /// strategy's [`FromConfig`] needs.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidConfig`] naming the field (checked before
    /// connecting), and the errors of [`ScriptedNode::connect`].
    pub async fn from_config(config: &LockConfig) -> Result<(Self, GrantOptions), LockError> {
        let grant = GrantOptions::from_config(config)?;
        let node = ScriptedNode::connect(
            config.client,
            config.endpoint()?,
            ConnectOptions::from(config),
        )
        .await?;
        Ok((node, grant))
    }
}

impl LockManager {
    /// Connects strategy `S` as `config` says and returns a manager over it.
    ///
    /// `S` is a strategy's backend, for example `SingleNodeBackend`:
    ///
    #[cfg_attr(not(doctest), doc = include_str!("doc/connect.md"))]
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidConfig`] naming the field, and the connection
    /// errors of `S::from_config`.
    pub async fn connect<S: FromConfig>(config: &LockConfig) -> Result<Self, LockError> {
        config.validate()?;
        let backend = S::from_config(config).await?;
        LockManager::new(Arc::new(backend), config.clone())
    }

    /// A manager over a backend built by hand (an application's own client,
    /// a strategy of its own). [`LockManager::connect`] builds both from the
    /// config instead.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidConfig`] naming the field if the config does not
    /// validate, or asks for what the backend was not built to do
    /// ([`LockBackend::capabilities`]: `fencing`, `holder_info`), or for
    /// fair mode on a strategy without it.
    pub fn new(backend: Arc<dyn LockBackend>, config: LockConfig) -> Result<Self, LockError> {
        config.validate()?;
        let built = backend.capabilities();
        let disagreements = [
            ("fencing", built.fencing, config.fencing),
            ("holder_info", built.holder_info, config.holder_info),
        ];
        for (field, built, asked) in disagreements {
            if let Some(built) = built.filter(|built| *built != asked) {
                return Err(LockError::config(
                    field,
                    format!(
                        "is {asked} but the {} backend was built with {field} = {built}; \
                         build it from this config (LockManager::connect) or with the \
                         same options",
                        backend.strategy()
                    ),
                ));
            }
        }
        LockManager::with_settings(backend, Settings::from(&config))
    }
}

/// The longest `fencing_counter_ttl`: ten years is as good as forever.
pub(crate) const MAX_FENCING_COUNTER_TTL: Duration = Duration::from_secs(3650 * 24 * 60 * 60);

/// How many leases a fencing counter must outlast when it expires at all.
pub(crate) const FENCING_COUNTER_TTL_LEASES: u32 = 10;

/// `fencing_counter_ttl` must cover [`FENCING_COUNTER_TTL_LEASES`] leases.
///
/// Why: after a counter expires, the next token is the server's time, which
/// is above the earlier tokens unless the server's clock was set back by
/// more than the time since the last grant, which is at least this TTL. A
/// lease already relies on that clock over one TTL (Redis expires keys by
/// it: a clock stepped forward by a TTL frees a held lock early), so ten
/// TTLs make the tokens an order of magnitude more tolerant of clock steps
/// than the lock itself, and keep a name locked about once per lease from
/// losing its counter between two locks.
fn validate_fencing_counter_ttl(counter_ttl: Duration, ttl: Duration) -> Result<(), LockError> {
    let least = ttl.saturating_mul(FENCING_COUNTER_TTL_LEASES);
    if counter_ttl < least {
        return Err(LockError::config(
            "fencing_counter_ttl",
            format!(
                "{} is below {FENCING_COUNTER_TTL_LEASES} × ttl ({}): the counter must \
                 outlast many leases, since after it expires tokens follow the server's clock",
                humantime::format_duration(counter_ttl),
                humantime::format_duration(least),
            ),
        ));
    }
    if counter_ttl > MAX_FENCING_COUNTER_TTL {
        return Err(LockError::config(
            "fencing_counter_ttl",
            format!(
                "must be at most {} (leave it unset for a counter that never expires)",
                humantime::format_duration(MAX_FENCING_COUNTER_TTL)
            ),
        ));
    }
    Ok(())
}

fn validate_timeout(field: &str, value: Duration) -> Result<(), LockError> {
    if value.is_zero() {
        return Err(LockError::config(field, "must be greater than zero"));
    }
    if value > Duration::from_secs(600) {
        return Err(LockError::config(field, "must be at most 10 minutes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ttl::MIN_TTL;

    #[test]
    fn defaults_validate() {
        LockConfig::default()
            .validate()
            .expect("defaults are valid");
    }

    #[test]
    fn renewal_interval_leaves_room_for_two_attempts() {
        let mut config = LockConfig {
            ttl: Duration::from_secs(1),
            ..LockConfig::default()
        };
        config.watchdog.interval = Some(Duration::from_millis(995));
        match config.validate() {
            Err(LockError::InvalidConfig { field, reason }) => {
                assert_eq!(field, "watchdog.interval");
                // (1 s - (10 ms + 2 ms)) / 2
                assert!(
                    reason.contains("494ms"),
                    "names the largest allowed: {reason}"
                );
            }
            other => panic!("an interval that cannot renew in time validated: {other:?}"),
        }
        config.watchdog.interval = Some(Duration::from_millis(494));
        config.validate().expect("the largest allowed interval");
        config.watchdog.interval = None;
        assert!(config.renew_interval() <= Duration::from_millis(494));
        config.ttl = Duration::from_millis(3);
        config
            .validate()
            .expect("a tiny TTL with the default interval");
        assert_eq!(config.renew_interval(), MIN_TTL);
    }

    #[test]
    fn a_fencing_counter_ttl_covers_ten_leases() {
        let mut config = LockConfig {
            fencing_counter_ttl: Some(Duration::from_secs(300)),
            ..LockConfig::default()
        };
        config.validate().expect("ten 30 s leases");
        config.ttl = Duration::from_secs(31);
        assert_eq!(field_of(&config), "fencing_counter_ttl");
        config.ttl = crate::ttl::MAX_TTL;
        config.fencing_counter_ttl = Some(MAX_FENCING_COUNTER_TTL);
        config.validate().expect("the longest TTL and counter");
    }

    #[test]
    fn durations_are_human_readable() {
        let config: LockConfig = toml::from_str(
            r#"
            ttl = "250ms"
            wait_timeout = "1m 30s"
            [watchdog]
            interval = "50ms"
            "#,
        )
        .expect("parses");
        assert_eq!(config.ttl, Duration::from_millis(250));
        assert_eq!(config.wait_timeout, Duration::from_secs(90));
        assert_eq!(config.renew_interval(), Duration::from_millis(50));
        config.validate().expect("valid");
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = toml::from_str::<LockConfig>("tll = \"1s\"").expect_err("typo must fail");
        assert!(err.to_string().contains("tll"), "{err}");
    }

    fn field_of(config: &LockConfig) -> String {
        match config.validate() {
            Err(LockError::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    #[test]
    fn each_bad_field_is_named() {
        let base = LockConfig::default();
        let cases: Vec<(LockConfig, &str)> = vec![
            (
                LockConfig {
                    nodes: vec![],
                    ..base.clone()
                },
                "nodes",
            ),
            (LockConfig::with_nodes(["http://x"]), "nodes[0]"),
            (
                LockConfig::with_nodes(["redis://127.0.0.1:6379", "redis://:0"]),
                "nodes[1]",
            ),
            (
                LockConfig {
                    ttl: Duration::ZERO,
                    ..base.clone()
                },
                "ttl",
            ),
            (
                LockConfig {
                    ttl: Duration::from_micros(10),
                    ..base.clone()
                },
                "ttl",
            ),
            (
                LockConfig {
                    ttl: Duration::from_secs(u64::MAX),
                    ..base.clone()
                },
                "ttl",
            ),
            (
                LockConfig {
                    key_prefix: "a{".into(),
                    ..base.clone()
                },
                "key_prefix",
            ),
            (
                LockConfig {
                    retry: RetryPolicy::new(Duration::ZERO, Duration::ZERO),
                    ..base.clone()
                },
                "retry.initial_delay",
            ),
            (
                LockConfig {
                    retry: RetryPolicy::new(Duration::from_secs(1), Duration::from_millis(1)),
                    ..base.clone()
                },
                "retry.max_delay",
            ),
            (
                LockConfig {
                    retry: RetryPolicy {
                        multiplier: f64::NAN,
                        ..RetryPolicy::default()
                    },
                    ..base.clone()
                },
                "retry.multiplier",
            ),
            (
                LockConfig {
                    watchdog: WatchdogConfig {
                        enabled: true,
                        interval: Some(Duration::from_secs(30)),
                        max_hold: None,
                    },
                    ..base.clone()
                },
                "watchdog.interval",
            ),
            (
                LockConfig {
                    watchdog: WatchdogConfig {
                        max_hold: Some(Duration::ZERO),
                        ..WatchdogConfig::default()
                    },
                    ..base.clone()
                },
                "watchdog.max_hold",
            ),
            (
                LockConfig {
                    connect_timeout: Duration::ZERO,
                    ..base.clone()
                },
                "connect_timeout",
            ),
            (
                LockConfig {
                    command_timeout: Duration::from_secs(3600),
                    ..base.clone()
                },
                "command_timeout",
            ),
            (
                LockConfig {
                    clock_drift_factor: 0.5,
                    ..base.clone()
                },
                "clock_drift_factor",
            ),
            (
                LockConfig::with_nodes([
                    "redis://127.0.0.1:6379",
                    "redis://LOCALHOST:6380",
                    "redis://:pw@127.0.0.1/0",
                ]),
                "nodes[2]",
            ),
            (
                LockConfig {
                    clock_drift_factor: -0.1,
                    ..base.clone()
                },
                "clock_drift_factor",
            ),
            (
                LockConfig {
                    fencing_counter_ttl: Some(Duration::from_secs(299)),
                    ..base.clone()
                },
                "fencing_counter_ttl",
            ),
            (
                LockConfig {
                    fencing_counter_ttl: Some(Duration::from_secs(3651 * 24 * 3600)),
                    ..base.clone()
                },
                "fencing_counter_ttl",
            ),
            (
                LockConfig {
                    holder_label: Some("nightly".into()),
                    ..base.clone()
                },
                "holder_label",
            ),
            (
                LockConfig {
                    holder_info: true,
                    holder_label: Some("two\nlines".into()),
                    ..base.clone()
                },
                "holder_label",
            ),
        ];
        for (config, field) in cases {
            assert_eq!(field_of(&config), field, "{config:?}");
        }
    }

    #[test]
    fn two_databases_of_one_server_are_one_node() {
        let err = LockConfig::with_nodes(["redis://h:1/0", "redis://h:1/1", "redis://g:1"])
            .validate()
            .expect_err("one server twice");
        assert!(
            matches!(&err, LockError::InvalidConfig { field, .. } if field == "nodes[1]"),
            "{err}"
        );
    }

    #[test]
    fn a_duplicate_node_error_hides_the_user_name() {
        let err = LockConfig::with_nodes(["redis://us3r:pw@h:1/0", "redis://us3r:pw@h:1"])
            .validate()
            .expect_err("the same node twice");
        assert!(
            !err.to_string().contains("us3r"),
            "the user name leaks: {err}"
        );
        assert!(err.to_string().contains("h:1"), "{err}");
    }
}
