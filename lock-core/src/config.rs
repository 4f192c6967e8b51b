//! Configuration as data: serde-deserialisable, with documented defaults and a
//! `validate` that names the field at fault.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::client::ClientKind;
use crate::error::LockError;
use crate::grant::validate_holder_label;
use crate::key::validate_prefix;
use crate::timing::{validate_ttl, MIN_TTL};
use crate::topology::{Endpoint, ReplicasConfig, SentinelAuth, TlsConfig, Topology};

/// How a lock is taken, kept and waited for. Durations are written for humans in
/// config files: `"30s"`, `"250ms"`, `"1m 30s"`.
///
/// ```
/// let config: lock_core::LockConfig = toml::from_str(r#"
///     nodes = ["redis://:secret@127.0.0.1:6379/0"]
///     ttl = "10s"
///     [retry]
///     max_delay = "200ms"
/// "#).unwrap();
/// config.validate().unwrap();
/// assert!(!format!("{config:?}").contains("secret"));
/// ```
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
    /// Redis. A waiter that gives up leaves the queue at once; one that dies
    /// leaves it within [`crate::FAIR_WAITER_LEASE`]. Supported by the single-node
    /// strategy. Default: false.
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
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(2),
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
        if self.node_timeout >= self.ttl {
            return Err(LockError::config(
                "node_timeout",
                "must be below the TTL, or one slow node can use up the whole lease",
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
        self.watchdog.interval.unwrap_or_else(|| {
            crate::timing::default_renew_interval(self.ttl, self.clock_drift_factor)
        })
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

/// How a waiting acquire learns that the lock may be free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum WaitMode {
    /// Subscribe to the lock's release channel and try again when a release is
    /// published, or when the holder's TTL runs out, whichever comes first.
    #[default]
    Notify,
    /// Try again after a backoff delay ([`RetryPolicy`]), for deployments that
    /// forbid pub/sub.
    Poll,
}

/// Exponential backoff with full jitter between acquire attempts: attempt `n`
/// sleeps a uniformly random time in `[0, min(max_delay, initial_delay × multiplier^n)]`,
/// so contenders that failed together do not retry together. A wait never sleeps
/// past the moment the holder's TTL runs out.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// The cap of the first delay. Default: 10 ms.
    #[serde(with = "humantime_serde")]
    pub initial_delay: Duration,
    /// The largest cap any delay reaches. Default: 200 ms.
    #[serde(with = "humantime_serde")]
    pub max_delay: Duration,
    /// How much the cap grows per attempt; at least 1. Default: 2.
    pub multiplier: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(200),
            multiplier: 2.0,
        }
    }
}

impl RetryPolicy {
    /// A policy with the given bounds and a multiplier of 2.
    pub fn new(initial_delay: Duration, max_delay: Duration) -> Self {
        RetryPolicy {
            initial_delay,
            max_delay,
            multiplier: 2.0,
        }
    }

    /// Checks the policy; errors name `retry.<field>`.
    pub fn validate(&self) -> Result<(), LockError> {
        if self.initial_delay < MIN_TTL {
            return Err(LockError::config(
                "retry.initial_delay",
                "must be at least 1 ms",
            ));
        }
        if self.max_delay < self.initial_delay {
            return Err(LockError::config(
                "retry.max_delay",
                "must not be below retry.initial_delay",
            ));
        }
        if self.max_delay > Duration::from_secs(60) {
            return Err(LockError::config("retry.max_delay", "must be at most 60 s"));
        }
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return Err(LockError::config(
                "retry.multiplier",
                "must be a finite number of at least 1",
            ));
        }
        Ok(())
    }

    /// The upper bound of the delay before attempt `attempt` (0 for the first retry).
    pub fn delay_cap(&self, attempt: u32) -> Duration {
        let exponent = i32::try_from(attempt).unwrap_or(i32::MAX);
        let factor = self.multiplier.max(1.0).powi(exponent);
        Duration::try_from_secs_f64(self.initial_delay.as_secs_f64() * factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// A random delay in `[0, delay_cap(attempt)]` (full jitter).
    pub fn jittered_delay(&self, attempt: u32) -> Duration {
        use rand::Rng;
        let cap = self.delay_cap(attempt);
        let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }
}

/// Automatic renewal of held leases.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct WatchdogConfig {
    /// Whether held leases are renewed in the background until released.
    /// Default: true.
    pub enabled: bool,
    /// How often to renew. At most `(ttl - clock drift) / 2`, so a second
    /// attempt fits before the deadline if one fails. Default: a third of the
    /// TTL.
    #[serde(with = "humantime_serde")]
    pub interval: Option<Duration>,
    /// Stop renewing a lease this long after it was acquired (or resumed),
    /// so no holder keeps a lock forever: the last renewal asks only for
    /// what is left, the key runs out at about the cap (a reentrant hold,
    /// which never shortens, up to a TTL later), and `lost()` reports
    /// [`LossReason::MaxHoldReached`](crate::LossReason::MaxHoldReached). A
    /// holder's own `extend` still runs, but the next renewal brings the key
    /// back to the cap. Default: none (renew until released).
    #[serde(with = "humantime_serde")]
    pub max_hold: Option<Duration>,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        WatchdogConfig {
            enabled: true,
            interval: None,
            max_hold: None,
        }
    }
}

impl WatchdogConfig {
    fn validate(&self, ttl: Duration, drift_factor: f64) -> Result<(), LockError> {
        if self.max_hold.is_some_and(|max_hold| max_hold < MIN_TTL) {
            return Err(LockError::config(
                "watchdog.max_hold",
                "must be at least 1 ms (leave it out to renew until released)",
            ));
        }
        if let Some(interval) = self.interval {
            if interval < MIN_TTL {
                return Err(LockError::config(
                    "watchdog.interval",
                    "must be at least 1 ms",
                ));
            }
            // Two renewal attempts must fit before the deadline, or one lost
            // reply loses the lease.
            let largest = crate::timing::max_renew_interval(ttl, drift_factor);
            if interval > largest {
                return Err(LockError::config(
                    "watchdog.interval",
                    format!(
                        "{} leaves no room for a second renewal attempt before a {} lease \
                         runs out; the largest allowed is {} ((ttl - clock drift) / 2)",
                        humantime::format_duration(interval),
                        humantime::format_duration(ttl),
                        humantime::format_duration(largest),
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The URL of one Redis node: `redis://[user[:password]@]host[:port][/db]`.
///
/// It is checked by [`LockConfig::validate`] and when a client connects.
/// `Debug` and `Display` hide the password.
#[derive(Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(transparent)]
pub struct NodeUrl(String);

/// The parts of a [`NodeUrl`].
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ParsedUrl {
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: u32,
    /// `rediss://`: the connection is TLS.
    pub tls: bool,
}

impl NodeUrl {
    /// Wraps a URL; it is checked when validated or used.
    pub fn new(url: impl Into<String>) -> Self {
        NodeUrl(url.into())
    }

    /// The URL as given, password included. Keep it out of logs.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `host:port`, for messages and logs; the raw text if the URL is malformed.
    pub fn address(&self) -> String {
        match self.parse() {
            Ok(parsed) => format_address(&parsed.host, parsed.port),
            Err(_) => "<malformed node url>".to_owned(),
        }
    }

    /// Checks the URL; errors with [`LockError::InvalidConfig`] on field `nodes`.
    pub fn validate(&self) -> Result<(), LockError> {
        self.parse()
            .map(|_| ())
            .map_err(|reason| LockError::config("nodes", reason))
    }

    /// Splits the URL into its parts.
    ///
    /// Errors name the part at fault and quote no text of the URL: a password
    /// with an unencoded `/` or `#` moves the split points, so what looks like a
    /// port or a database may be a piece of the password.
    pub(crate) fn parse(&self) -> Result<ParsedUrl, String> {
        let (rest, tls) = if let Some(rest) = self.0.strip_prefix("redis://") {
            (rest, false)
        } else if let Some(rest) = self.0.strip_prefix("rediss://") {
            (rest, true)
        } else {
            return Err(
                "a node URL must start with `redis://` (or `rediss://` for TLS)".to_owned(),
            );
        };
        // The user info runs to the last `@`, even past a `/`: a host, port or
        // database never holds an `@`, so whatever precedes it is credentials.
        let (userinfo, location) = match rest.rsplit_once('@') {
            Some((userinfo, location)) => (Some(userinfo), location),
            None => (None, rest),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => split_userinfo(info)?,
        };
        let (hostport, path) = location.split_once('/').unwrap_or((location, ""));
        let (host, port) = split_host_port(hostport)?;
        let db = match path.trim_end_matches('/') {
            "" => 0,
            db => db
                .parse::<u32>()
                .map_err(|_| "the database (after the host's `/`) is not a number".to_owned())?,
        };
        Ok(ParsedUrl {
            host,
            port,
            username,
            password,
            db,
            tls,
        })
    }

    /// Whether the URL asks for TLS (`rediss://`).
    pub fn is_tls(&self) -> bool {
        self.0.starts_with("rediss://")
    }
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

/// `user:password`, either part optional. A `/`, `?` or `#` must be
/// percent-encoded there, or every client would end the host at it.
fn split_userinfo(info: &str) -> Result<(Option<String>, Option<String>), String> {
    let (user, password) = match info.split_once(':') {
        Some((user, password)) => (user, Some(password)),
        None => (info, None),
    };
    for (part, text) in [("user name", user), ("password", password.unwrap_or(""))] {
        if let Some(bad) = text.chars().find(|c| matches!(c, '/' | '?' | '#')) {
            return Err(format!(
                "the {part} holds a `{bad}`, which must be percent-encoded as `%{:02X}`",
                u32::from(bad)
            ));
        }
    }
    Ok((non_empty(user), password.and_then(non_empty)))
}

fn split_host_port(hostport: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| "an IPv6 host is missing its closing `]`".to_owned())?;
        let port =
            match after {
                "" => None,
                after => Some(after.strip_prefix(':').ok_or_else(|| {
                    "only `:port` may follow an IPv6 host's closing `]`".to_owned()
                })?),
            };
        (host, port)
    } else {
        match hostport.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err("the URL has no host".to_owned());
    }
    if host.contains(char::is_whitespace) {
        return Err("the host contains whitespace".to_owned());
    }
    let port = match port {
        None => 6379,
        Some(port) => match port.parse::<u16>() {
            Ok(0) | Err(_) => return Err("the port is not a number in 1..=65535".to_owned()),
            Ok(port) => port,
        },
    };
    Ok((host.to_owned(), port))
}

fn format_address(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl fmt::Debug for NodeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeUrl({self})")
    }
}

impl fmt::Display for NodeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parse() {
            Ok(url) => {
                f.write_str(if url.tls { "rediss://" } else { "redis://" })?;
                match (&url.username, &url.password) {
                    (Some(user), Some(_)) => write!(f, "{user}:***@")?,
                    (None, Some(_)) => f.write_str(":***@")?,
                    (Some(user), None) => write!(f, "{user}@")?,
                    (None, None) => {}
                }
                write!(f, "{}/{}", format_address(&url.host, url.port), url.db)
            }
            Err(_) => f.write_str("<malformed node url>"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        config.node_timeout = Duration::from_millis(1);
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
        config.ttl = crate::timing::MAX_TTL;
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
                LockConfig {
                    node_timeout: Duration::from_secs(30),
                    ..base.clone()
                },
                "node_timeout",
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
    fn urls_parse_and_hide_passwords() {
        let url = NodeUrl::new("redis://user:pa55@localhost:6380/2");
        let parsed = url.parse().expect("valid");
        assert_eq!(parsed.host, "localhost");
        assert_eq!(parsed.port, 6380);
        assert_eq!(parsed.username.as_deref(), Some("user"));
        assert_eq!(parsed.password.as_deref(), Some("pa55"));
        assert_eq!(parsed.db, 2);
        assert_eq!(url.to_string(), "redis://user:***@localhost:6380/2");
        assert!(!format!("{url:?}").contains("pa55"));
        assert_eq!(NodeUrl::new("redis://[::1]").address(), "[::1]:6379");
        let tls = NodeUrl::new("rediss://user:pa55@example.com:6380");
        assert!(tls.is_tls() && tls.parse().expect("a TLS URL").tls);
        assert_eq!(tls.to_string(), "rediss://user:***@example.com:6380/0");
        for bad in [
            "",
            "redis://",
            "redis://:6379",
            "redis://h:99999",
            "redis://h:x",
            "redis://h/db",
            "tcp://h",
            "rediss://",
            "redis://[::1",
        ] {
            assert!(
                NodeUrl::new(bad).parse().is_err(),
                "{bad} should be rejected"
            );
        }
    }

    /// Malformed URLs whose user info is `us3r` and `password`, one per way a
    /// URL can be wrong.
    fn malformed_urls_with(password: &str) -> Vec<String> {
        [
            "redis://us3r:{pw}@",
            "redis://:{pw}@",
            "redis://us3r:{pw}@:6379",
            "redis://us3r:{pw}@/0",
            "redis://us3r:{pw}@host:x",
            "redis://us3r:{pw}@host:0",
            "redis://us3r:{pw}@host:99999",
            "redis://us3r:{pw}@host:",
            "redis://us3r:{pw}@host/db",
            "redis://us3r:{pw}@host:6379/-1",
            "redis://us3r:{pw}@host/0?x",
            "redis://us3r:{pw}@[::1",
            "redis://us3r:{pw}@[::1]x",
            "redis://us3r:{pw}@ho st",
            "redis://us3r:{pw}",
            "redis://us3r:{pw}/0",
            "redis://us3r:{pw}@host/s3cr3t",
            "rediss://us3r:{pw}@host:x",
            "http://us3r:{pw}@host",
            "us3r:{pw}@host",
            "redis//us3r:{pw}@host",
        ]
        .iter()
        .map(|template| template.replace("{pw}", password))
        .collect()
    }

    #[test]
    fn url_errors_never_repeat_the_user_info() {
        let passwords = [
            "s3cr3t",
            "s3cr3t/h1dd3n",
            "s3cr3t#h1dd3n",
            "s3cr3t?h1dd3n",
            "s3cr3t@h1dd3n",
            "s3cr3t:h1dd3n",
            "s3cr3t/h1dd3n@",
            "/s3cr3t",
            "s3cr3t%2Fh1dd3n",
        ];
        let mut rejected = 0;
        for password in passwords {
            for url in malformed_urls_with(password) {
                let node = NodeUrl::new(url.as_str());
                let Err(err) = node.validate() else {
                    continue;
                };
                rejected += 1;
                let config_err = LockConfig::with_nodes([url.as_str()])
                    .validate()
                    .expect_err("the same URL fails in a config");
                for text in [
                    err.to_string(),
                    format!("{err:?}"),
                    config_err.to_string(),
                    format!("{config_err:?}"),
                    node.to_string(),
                    format!("{node:?}"),
                    node.address(),
                ] {
                    for secret in ["s3cr3t", "h1dd3n", "us3r"] {
                        assert!(
                            !text.contains(secret),
                            "the error for a URL with password `{password}` repeats `{secret}`: {text}"
                        );
                    }
                }
            }
        }
        assert!(
            rejected >= passwords.len() * 18,
            "most of these URLs are malformed, but only {rejected} were rejected"
        );
    }

    #[test]
    fn url_errors_name_the_part_at_fault() {
        let reason = |url: &str| match NodeUrl::new(url).validate() {
            Err(LockError::InvalidConfig { reason, .. }) => reason,
            other => panic!("{url}: expected InvalidConfig, got {other:?}"),
        };
        for (url, part) in [
            ("redis://user:s3cr3t/pw@host", "password"),
            ("redis://user:s3cr3t/pw@host", "%2F"),
            ("redis://:a#b@host", "%23"),
            ("redis://:a?b@host", "%3F"),
            ("redis://us/er:pw@host", "user name"),
            ("redis://user:pw@", "host"),
            ("redis://user:pw@host:x", "port"),
            ("redis://user:pw@host/x", "database"),
            ("redis://user:pw@[::1]x", "`]`"),
            ("redis://user:pw@ho st", "host"),
        ] {
            let reason = reason(url);
            assert!(
                reason.contains(part),
                "{url}: `{reason}` should name {part}"
            );
        }
    }

    #[test]
    fn valid_urls_with_user_info_still_parse() {
        for (url, host, port, user, password, db) in [
            ("redis://:pw@h:6379/0", "h", 6379, None, Some("pw"), 0),
            ("redis://user:pw@h", "h", 6379, Some("user"), Some("pw"), 0),
            ("redis://user@h:1/", "h", 1, Some("user"), None, 0),
            ("redis://[::1]", "::1", 6379, None, None, 0),
            ("redis://:pw@[::1]:6380/2", "::1", 6380, None, Some("pw"), 2),
            ("redis://:p@ss@h/3", "h", 6379, None, Some("p@ss"), 3),
            ("redis://:p%2Fss@h", "h", 6379, None, Some("p%2Fss"), 0),
            ("redis://u:p:w@h", "h", 6379, Some("u"), Some("p:w"), 0),
        ] {
            let parsed = NodeUrl::new(url).parse().expect(url);
            assert_eq!(parsed.host, host, "{url}");
            assert_eq!(parsed.port, port, "{url}");
            assert_eq!(parsed.username.as_deref(), user, "{url}");
            assert_eq!(parsed.password.as_deref(), password, "{url}");
            assert_eq!(parsed.db, db, "{url}");
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

    #[test]
    fn backoff_caps_grow_and_saturate() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay_cap(0), Duration::from_millis(10));
        assert_eq!(policy.delay_cap(1), Duration::from_millis(20));
        assert_eq!(policy.delay_cap(100), Duration::from_millis(200));
        assert_eq!(policy.delay_cap(u32::MAX), Duration::from_millis(200));
        for attempt in 0..20 {
            assert!(policy.jittered_delay(attempt) <= policy.delay_cap(attempt));
        }
    }
}
