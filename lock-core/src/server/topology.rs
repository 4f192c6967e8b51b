//! Which Redis deployment the nodes form, and how to reach it: a standalone
//! server, a Redis Cluster, or a master found through Sentinel, each over
//! plain TCP or TLS.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::LockError;
use crate::server::url::NodeUrl;

/// How the configured nodes form a Redis deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Topology {
    /// Each node is a server of its own. Single-node strategies use the first;
    /// Redlock uses each as an independent node.
    #[default]
    Standalone,
    /// The nodes are seed nodes of one Redis Cluster (any one that answers is
    /// enough); commands go to the master of the lock's hash slot.
    Cluster,
    /// The nodes are sentinels watching one master, named by
    /// `sentinel_service`; commands go to whichever server they report as the
    /// master, and follow it through failovers.
    Sentinel,
}

impl Topology {
    /// The name used in config files.
    pub fn name(self) -> &'static str {
        match self {
            Topology::Standalone => "standalone",
            Topology::Cluster => "cluster",
            Topology::Sentinel => "sentinel",
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Certificates for `rediss://` nodes. Without a CA file the system's root
/// certificates are trusted; a client certificate is sent only when both
/// `cert_file` and `key_file` are given (for servers with
/// `tls-auth-clients yes`). Files are PEM and are read when connecting.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct TlsConfig {
    /// The CA certificate(s) to trust instead of the system roots.
    pub ca_file: Option<PathBuf>,
    /// This client's certificate (chain).
    pub cert_file: Option<PathBuf>,
    /// This client's private key.
    pub key_file: Option<PathBuf>,
}

impl TlsConfig {
    /// Trusts the CA certificate(s) in `ca_file` instead of the system roots.
    pub fn with_ca_file(mut self, ca_file: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(ca_file.into());
        self
    }

    /// Presents the client certificate in `cert_file` with the key in
    /// `key_file`, for servers that verify clients.
    pub fn with_client_cert(
        mut self,
        cert_file: impl Into<PathBuf>,
        key_file: impl Into<PathBuf>,
    ) -> Self {
        self.cert_file = Some(cert_file.into());
        self.key_file = Some(key_file.into());
        self
    }

    /// Checks that a client certificate and key come together; errors name
    /// `tls.<field>`.
    pub fn validate(&self) -> Result<(), LockError> {
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => Err(LockError::config(
                "tls.key_file",
                "a client certificate (tls.cert_file) needs its private key",
            )),
            (None, Some(_)) => Err(LockError::config(
                "tls.cert_file",
                "a private key (tls.key_file) needs its client certificate",
            )),
            _ => Ok(()),
        }
    }

    /// Whether any file is configured.
    pub fn is_set(&self) -> bool {
        self.ca_file.is_some() || self.cert_file.is_some() || self.key_file.is_some()
    }
}

/// Waiting for replicas: after every acquire and extend, `WAIT count
/// timeout` on the same connection. An acquire that fewer than `count`
/// replicas acknowledged in time is released and fails with
/// [`LockError::ReplicasNotAcknowledged`] (retryable); an extend that fewer
/// acknowledged fails the same way, so the lease's deadline does not move.
///
/// What it buys: a grant the caller was told about is on `count` replicas,
/// so a failover to one of them keeps it. What it does not: `WAIT` makes no
/// write linearizable, a replica can still be promoted without it if fewer
/// than all replicas acknowledged, and a failed-over master's unacknowledged
/// write can still be lost. Off (`count = 0`) by default.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ReplicasConfig {
    /// How many replicas must acknowledge each grant and renewal; 0 for none.
    pub count: u32,
    /// How long to wait for them. At most half the command timeout (the
    /// `WAIT` shares the command's time with the script), and below the TTL.
    /// Default: 50 ms.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
}

impl Default for ReplicasConfig {
    fn default() -> Self {
        ReplicasConfig {
            count: 0,
            timeout: Duration::from_millis(50),
        }
    }
}

impl ReplicasConfig {
    /// Waits for `count` replicas for at most `timeout` after each write.
    pub fn new(count: u32, timeout: Duration) -> Self {
        ReplicasConfig { count, timeout }
    }

    /// Whether any replica acknowledgement is asked for.
    pub fn is_on(&self) -> bool {
        self.count > 0
    }

    /// Checks the values against the command timeout; errors name
    /// `replicas.<field>`.
    pub fn validate(&self, command_timeout: Duration) -> Result<(), LockError> {
        if !self.is_on() {
            return Ok(());
        }
        if self.count > 64 {
            return Err(LockError::config(
                "replicas.count",
                format!("{} is more replicas than any deployment has", self.count),
            ));
        }
        // WAIT with 0 ms blocks forever.
        if self.timeout < Duration::from_millis(1) {
            return Err(LockError::config(
                "replicas.timeout",
                "must be at least 1 ms (WAIT with 0 waits forever)",
            ));
        }
        if self.timeout > command_timeout / 2 {
            return Err(LockError::config(
                "replicas.timeout",
                "must be at most half of command_timeout: the WAIT and the script share one \
                 command's time, and a WAIT that runs it out is reported as a dead node",
            ));
        }
        Ok(())
    }
}

/// A secret (a sentinel password) that `Debug` never shows.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Self {
        Secret(secret.into())
    }

    /// The secret itself. Keep it out of logs.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Credentials for the sentinels themselves, when they require them
/// (`requirepass` in sentinel.conf). The node URLs' credentials are the
/// master's.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SentinelAuth {
    /// The ACL user on the sentinels, if not `default`.
    pub username: Option<String>,
    /// The sentinels' password.
    pub password: Option<Secret>,
}

impl SentinelAuth {
    /// Authenticates to the sentinels with `password`, as `username` if given.
    pub fn new(username: Option<String>, password: impl Into<String>) -> Self {
        SentinelAuth {
            username,
            password: Some(Secret::new(password)),
        }
    }
}

/// One logical Redis as a client sees it: a standalone server, a cluster
/// behind its seed nodes, or the master behind a group of sentinels, with the
/// TLS settings for `rediss://` nodes.
///
/// Single-node strategies connect to one endpoint; Redlock to one per node.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Endpoint {
    /// What the nodes are.
    pub topology: Topology,
    /// The server (standalone), the seed nodes (cluster) or the sentinels.
    pub nodes: Vec<NodeUrl>,
    /// The master's name in the sentinels' config (sentinel only).
    pub sentinel_service: Option<String>,
    /// Credentials for the sentinels themselves (sentinel only).
    pub sentinel_auth: SentinelAuth,
    /// Certificates for `rediss://` nodes.
    pub tls: TlsConfig,
    /// How many replicas must acknowledge each grant and renewal.
    pub replicas: ReplicasConfig,
}

impl Endpoint {
    /// One standalone server at `url`, with the system roots for TLS.
    pub fn standalone(url: NodeUrl) -> Self {
        Endpoint {
            topology: Topology::Standalone,
            nodes: vec![url],
            sentinel_service: None,
            sentinel_auth: SentinelAuth::default(),
            tls: TlsConfig::default(),
            replicas: ReplicasConfig::default(),
        }
    }

    /// A Redis Cluster reached through `seeds`.
    pub fn cluster<I: IntoIterator<Item = NodeUrl>>(seeds: I) -> Self {
        Endpoint {
            topology: Topology::Cluster,
            nodes: seeds.into_iter().collect(),
            sentinel_service: None,
            sentinel_auth: SentinelAuth::default(),
            tls: TlsConfig::default(),
            replicas: ReplicasConfig::default(),
        }
    }

    /// The master named `service` behind `sentinels`. The URLs' credentials
    /// and database are used on the master.
    pub fn sentinel<I: IntoIterator<Item = NodeUrl>>(
        sentinels: I,
        service: impl Into<String>,
    ) -> Self {
        Endpoint {
            topology: Topology::Sentinel,
            nodes: sentinels.into_iter().collect(),
            sentinel_service: Some(service.into()),
            sentinel_auth: SentinelAuth::default(),
            tls: TlsConfig::default(),
            replicas: ReplicasConfig::default(),
        }
    }

    /// The same endpoint with `tls` for its `rediss://` nodes.
    pub fn with_tls(mut self, tls: TlsConfig) -> Self {
        self.tls = tls;
        self
    }

    /// The same endpoint, waiting for `replicas` after each acquire and extend.
    pub fn with_replicas(mut self, replicas: ReplicasConfig) -> Self {
        self.replicas = replicas;
        self
    }

    /// The same endpoint, authenticating to the sentinels with `auth`.
    pub fn with_sentinel_auth(mut self, auth: SentinelAuth) -> Self {
        self.sentinel_auth = auth;
        self
    }

    /// For errors and logs: `host:port` of a standalone server,
    /// `cluster(host:port,...)` or `sentinel(service@host:port,...)`.
    pub fn address(&self) -> String {
        let addresses: Vec<String> = self.nodes.iter().map(NodeUrl::address).collect();
        match self.topology {
            Topology::Standalone => addresses.join(","),
            Topology::Cluster => format!("cluster({})", addresses.join(",")),
            Topology::Sentinel => format!(
                "sentinel({}@{})",
                self.sentinel_service.as_deref().unwrap_or(""),
                addresses.join(",")
            ),
        }
    }

    /// Whether the nodes are reached over TLS (`rediss://`).
    pub fn uses_tls(&self) -> bool {
        self.nodes.first().is_some_and(NodeUrl::is_tls)
    }

    /// Checks the endpoint: at least one well-formed URL, one server for
    /// standalone, a service name for sentinel, all nodes with the same
    /// scheme, and a client certificate with its key. Errors name the field.
    pub fn validate(&self) -> Result<(), LockError> {
        let Some(first) = self.nodes.first() else {
            return Err(LockError::config(
                "nodes",
                "at least one node URL is needed",
            ));
        };
        for (index, node) in self.nodes.iter().enumerate() {
            let parsed = node
                .parse()
                .map_err(|reason| LockError::config(format!("nodes[{index}]"), reason))?;
            if self.topology == Topology::Cluster && parsed.db != 0 {
                return Err(LockError::config(
                    format!("nodes[{index}]"),
                    "a Redis Cluster has only database 0",
                ));
            }
            if node.is_tls() != first.is_tls() {
                return Err(LockError::config(
                    format!("nodes[{index}]"),
                    "mixes `redis://` and `rediss://` in one deployment; use one scheme",
                ));
            }
        }
        match self.topology {
            Topology::Standalone if self.nodes.len() > 1 => {
                return Err(LockError::config(
                    "nodes",
                    "a standalone endpoint is one server",
                ))
            }
            Topology::Sentinel => match self.sentinel_service.as_deref() {
                None | Some("") => {
                    return Err(LockError::config(
                        "sentinel_service",
                        "topology `sentinel` needs the name of the master the sentinels \
                         monitor (`sentinel monitor <name> ...` in sentinel.conf)",
                    ))
                }
                Some(_) => {}
            },
            _ => {}
        }
        if self.topology != Topology::Sentinel {
            if self.sentinel_service.is_some() {
                return Err(LockError::config(
                    "sentinel_service",
                    format!(
                        "is only used with topology `sentinel`, not `{}`",
                        self.topology
                    ),
                ));
            }
            if self.sentinel_auth != SentinelAuth::default() {
                return Err(LockError::config(
                    "sentinel_auth",
                    format!(
                        "is only used with topology `sentinel`, not `{}`",
                        self.topology
                    ),
                ));
            }
        }
        // The command timeout is checked with the rest of a LockConfig.
        self.replicas.validate(Duration::MAX)?;
        self.tls.validate()?;
        if self.tls.is_set() && !first.is_tls() {
            return Err(LockError::config(
                "tls",
                "certificates are given but no node uses `rediss://`",
            ));
        }
        if first.is_tls() && !cfg!(feature = "tls") {
            return Err(LockError::config(
                "nodes",
                "`rediss://` needs TLS support: enable the cargo feature `tls`",
            ));
        }
        Ok(())
    }
}

impl From<&NodeUrl> for Endpoint {
    fn from(url: &NodeUrl) -> Self {
        Endpoint::standalone(url.clone())
    }
}

impl From<&Endpoint> for Endpoint {
    fn from(endpoint: &Endpoint) -> Self {
        endpoint.clone()
    }
}

impl From<NodeUrl> for Endpoint {
    fn from(url: NodeUrl) -> Self {
        Endpoint::standalone(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(result: Result<(), LockError>) -> String {
        match result {
            Err(LockError::InvalidConfig { field, .. }) => field,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn sentinel_needs_a_service_and_only_sentinel_takes_one() {
        let mut endpoint = Endpoint::sentinel([NodeUrl::new("redis://127.0.0.1:26379")], "");
        assert_eq!(field_of(endpoint.validate()), "sentinel_service");
        endpoint.sentinel_service = Some("mymaster".into());
        endpoint.validate().expect("a sentinel endpoint");
        let mut cluster = Endpoint::cluster([NodeUrl::new("redis://127.0.0.1:7000")]);
        cluster.sentinel_service = Some("mymaster".into());
        assert_eq!(field_of(cluster.validate()), "sentinel_service");
    }

    #[test]
    fn one_scheme_per_deployment_and_keys_with_certificates() {
        let mixed = Endpoint::cluster([
            NodeUrl::new("rediss://127.0.0.1:7000"),
            NodeUrl::new("redis://127.0.0.1:7001"),
        ]);
        assert_eq!(field_of(mixed.validate()), "nodes[1]");
        let half =
            Endpoint::standalone(NodeUrl::new("rediss://127.0.0.1:6380")).with_tls(TlsConfig {
                cert_file: Some("client.pem".into()),
                ..TlsConfig::default()
            });
        assert_eq!(field_of(half.validate()), "tls.key_file");
        let unused =
            Endpoint::standalone(NodeUrl::new("redis://127.0.0.1:6380")).with_tls(TlsConfig {
                ca_file: Some("ca.pem".into()),
                ..TlsConfig::default()
            });
        assert_eq!(field_of(unused.validate()), "tls");
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let auth = SentinelAuth {
            username: None,
            password: Some(Secret::new("hunter2")),
        };
        assert!(!format!("{auth:?}").contains("hunter2"));
    }
}
