//! A Redis Cluster of real `redis-server` processes on free loopback ports.

use std::io;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use lock_core::NodeUrl;

use crate::server::{find_redis_cli, AdminReply, RedisServer};
use crate::support::{info_field, run_with_timeout, wait_until};
use crate::tls::TlsFiles;

/// The number of hash slots in a Redis Cluster.
pub const CLUSTER_SLOTS: u16 = 16384;

/// How long `redis-cli --cluster create` and the settling after it may take.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the cluster may take to agree on a slot's new owner after
/// `CLUSTER SETSLOT ... NODE`.
const SETSLOT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one `MIGRATE` may take, in milliseconds (below the admin
/// channel's read timeout).
const MIGRATE_TIMEOUT_MS: &str = "1000";

/// A Redis Cluster: `masters` masters sharing the 16384 slots, each with
/// `replicas_per_master` replicas, every node a [`RedisServer`] with
/// `--cluster-enabled yes`, a short `--cluster-node-timeout` (1 s by
/// default, so a failover takes a few seconds) and `--cluster-announce-ip
/// 127.0.0.1`. Made with `redis-cli --cluster create`; every process is
/// killed and every file removed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    password: Option<String>,
    tls_cluster: bool,
}

/// Options for [`RedisCluster`].
#[derive(Debug, Clone)]
pub struct RedisClusterBuilder {
    masters: usize,
    replicas_per_master: usize,
    password: Option<String>,
    node_timeout: Duration,
    tls: Option<Arc<TlsFiles>>,
    tls_auth_clients: bool,
}

impl RedisClusterBuilder {
    /// Requires clients (and nodes, among themselves) to authenticate with
    /// `password` (`--requirepass` and `--masterauth` on every node).
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Sets `--cluster-node-timeout` (1 s unless set): how long a master may
    /// be unreachable before its replica takes over.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// Serves TLS on every node (see [`RedisServerBuilder::tls`]), with the
    /// cluster bus and replication over TLS too (`--tls-cluster yes
    /// --tls-replication yes`). TLS clients are told the nodes' TLS ports
    /// in redirections and `CLUSTER SLOTS`; plain clients the plain ports.
    /// Clients must present a certificate unless
    /// [`tls_auth_clients(false)`](Self::tls_auth_clients) is set.
    ///
    /// [`RedisServerBuilder::tls`]: crate::RedisServerBuilder::tls
    pub fn tls(mut self, files: Arc<TlsFiles>) -> Self {
        self.tls = Some(files);
        self
    }

    /// Whether TLS clients must present a certificate signed by the CA
    /// (`--tls-auth-clients yes|no`); `true` by default, as in Redis. No
    /// effect without [`tls`](Self::tls).
    pub fn tls_auth_clients(mut self, required: bool) -> Self {
        self.tls_auth_clients = required;
        self
    }

    /// Starts the nodes, joins them into a cluster with `redis-cli --cluster
    /// create`, and waits until every node reports `cluster_state:ok`, agrees
    /// on who owns every slot, and every replica is in sync. An error if
    /// there are fewer than 3 masters (`redis-cli` refuses them) or if the
    /// cluster does not settle within 30 s.
    pub fn start(self) -> io::Result<RedisCluster> {
        if self.masters < 3 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a cluster needs at least 3 masters (redis-cli --cluster create refuses fewer); {} asked",
                    self.masters
                ),
            ));
        }
        let cli = find_redis_cli()?;
        let count = self.masters * (1 + self.replicas_per_master);
        let nodes = (0..count)
            .map(|_| {
                let mut builder = RedisServer::builder()
                    .cluster_enabled()
                    .cluster_node_timeout(self.node_timeout);
                if let Some(password) = &self.password {
                    builder = builder.password(password.clone());
                }
                if let Some(files) = &self.tls {
                    builder = builder
                        .tls(files.clone())
                        .tls_auth_clients(self.tls_auth_clients)
                        .tls_cluster()
                        .tls_replication();
                }
                builder.start()
            })
            .collect::<io::Result<Vec<_>>>()?;
        let cluster = RedisCluster {
            nodes,
            password: self.password,
            tls_cluster: self.tls.is_some(),
        };

        // redis-cli talks to the plain ports; the nodes meet on their bus
        // ports (plain port + 10000), over TLS if `--tls-cluster yes`.
        let mut command = Command::new(&cli);
        command.args(["--cluster", "create"]);
        command.args(
            cluster
                .nodes
                .iter()
                .map(|node| format!("127.0.0.1:{}", node.port())),
        );
        command
            .args(["--cluster-replicas", &self.replicas_per_master.to_string()])
            .arg("--cluster-yes");
        if let Some(password) = &cluster.password {
            command.env("REDISCLI_AUTH", password);
        }
        let output = run_with_timeout(&mut command, CREATE_TIMEOUT)?;
        if !output.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed ({}): {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
            )));
        }
        cluster.wait_until_ok(CREATE_TIMEOUT)?;
        // A replica still in its first sync acknowledges no `WAIT`: tests
        // that ask for acknowledgements start once every replica is online.
        let replicas = self.replicas_per_master;
        wait_until(CREATE_TIMEOUT, "every replica online", || {
            cluster.check_replicas_online(replicas)
        })?;
        Ok(cluster)
    }
}

impl RedisCluster {
    /// Starts a cluster of `masters` masters (at least 3), each with
    /// `replicas_per_master` replicas, with default options.
    pub fn start(masters: usize, replicas_per_master: usize) -> io::Result<RedisCluster> {
        Self::builder(masters, replicas_per_master).start()
    }

    /// Options for a cluster of `masters` masters, each with
    /// `replicas_per_master` replicas.
    pub fn builder(masters: usize, replicas_per_master: usize) -> RedisClusterBuilder {
        RedisClusterBuilder {
            masters,
            replicas_per_master,
            password: None,
            node_timeout: Duration::from_secs(1),
            tls: None,
            tls_auth_clients: true,
        }
    }

    /// Every node, masters and replicas, running or killed, in the order
    /// they were started (which says nothing about their roles).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Every node, to pause, kill or restart one. A restarted node keeps its
    /// nodes file, so it rejoins the cluster (a killed master comes back as
    /// a replica of whoever took over its slots).
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// The URL of every running node: seeds for a cluster client.
    pub fn seed_urls(&self) -> Vec<NodeUrl> {
        self.running().map(RedisServer::url).collect()
    }

    /// The `rediss://` URL of every running node; empty unless the cluster
    /// was started with [`RedisClusterBuilder::tls`].
    pub fn tls_seed_urls(&self) -> Vec<NodeUrl> {
        self.running()
            .filter_map(|node| node.tls_url().ok())
            .collect()
    }

    /// The hash slot of `key`, as the cluster computes it (`CLUSTER KEYSLOT`).
    pub fn key_slot(&self, key: &str) -> io::Result<u16> {
        let node = self.any_running()?;
        let reply = node.admin(&["CLUSTER", "KEYSLOT", key])?;
        reply
            .as_int()
            .and_then(|slot| u16::try_from(slot).ok())
            .ok_or_else(|| io::Error::other(format!("CLUSTER KEYSLOT answered {reply:?}")))
    }

    /// The running master that serves `slot`: of the nodes that say they own
    /// it, the one with the highest config epoch. An error if no running
    /// node claims it (its master was killed and no replica took over yet).
    pub fn master_of_slot(&self, slot: u16) -> io::Result<&RedisServer> {
        let index = self.owner_index(slot).map_err(io::Error::other)?;
        Ok(&self.nodes[index])
    }

    /// The running master that serves `key`.
    pub fn master_of_key(&self, key: &str) -> io::Result<&RedisServer> {
        self.master_of_slot(self.key_slot(key)?)
    }

    /// The running nodes that are masters with at least one slot.
    pub fn masters(&self) -> io::Result<Vec<&RedisServer>> {
        let mut masters = Vec::new();
        for node in self.running() {
            let myself = own_line(node).map_err(io::Error::other)?;
            if myself.is_master() && !myself.slots.is_empty() {
                masters.push(node);
            }
        }
        Ok(masters)
    }

    /// Kills (`kill -9`) the master serving `slot`, and returns its port.
    /// Its replica takes over after the node timeout; see
    /// [`wait_for_failover`](Self::wait_for_failover).
    pub fn kill_master_of_slot(&mut self, slot: u16) -> io::Result<u16> {
        let index = self.owner_index(slot).map_err(io::Error::other)?;
        let node = &mut self.nodes[index];
        node.kill()?;
        Ok(node.port())
    }

    /// Waits until a running node serves `slot` and the cluster is healthy
    /// again (see [`wait_until_ok`](Self::wait_until_ok)), and returns the
    /// master. After [`kill_master_of_slot`](Self::kill_master_of_slot) this
    /// is the promoted replica: with a 1 s node timeout it takes 2 to 4 s.
    pub fn wait_for_failover(&self, slot: u16, timeout: Duration) -> io::Result<&RedisServer> {
        let index = wait_until(timeout, &format!("a failover of slot {slot}"), || {
            let index = self.owner_index(slot)?;
            self.check_ok()?;
            Ok(index)
        })?;
        Ok(&self.nodes[index])
    }

    /// Waits until every running node reports `cluster_state:ok`, knows
    /// every node, sees every running node as healthy, agrees with the
    /// others on the owner of every slot (with no slot mid-migration), and,
    /// if a replica, has finished syncing from its master.
    pub fn wait_until_ok(&self, timeout: Duration) -> io::Result<()> {
        wait_until(timeout, "a healthy cluster", || self.check_ok())
    }

    /// Moves `slot` with every key in it from its master to `target` (a
    /// master of this cluster): [`begin_slot_migration`] then
    /// [`SlotMigration::finish`].
    ///
    /// [`begin_slot_migration`]: Self::begin_slot_migration
    pub fn migrate_slot(&self, slot: u16, target: &RedisServer) -> io::Result<()> {
        self.begin_slot_migration(slot, target)?.finish()
    }

    /// Marks `slot` as migrating from its master to `target` (`CLUSTER
    /// SETSLOT <slot> IMPORTING` on the target, `MIGRATING` on the source)
    /// and moves no key yet. Until [`SlotMigration::finish`], the source
    /// serves the keys it still holds and answers `-ASK` for the others;
    /// a command on several keys of which only some have moved gets
    /// `-TRYAGAIN`. Dropping the migration leaves the slot in that state.
    pub fn begin_slot_migration(
        &self,
        slot: u16,
        target: &RedisServer,
    ) -> io::Result<SlotMigration<'_>> {
        if slot >= CLUSTER_SLOTS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "there is no slot {slot}; slots are 0 to {}",
                    CLUSTER_SLOTS - 1
                ),
            ));
        }
        let source = self.owner_index(slot).map_err(io::Error::other)?;
        let target = self
            .nodes
            .iter()
            .position(|node| node.port() == target.port())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "the server on port {} is not a node of this cluster",
                        target.port()
                    ),
                )
            })?;
        if source == target {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "slot {slot} is already served by port {}",
                    self.nodes[target].port()
                ),
            ));
        }
        let target_line = own_line(&self.nodes[target]).map_err(io::Error::other)?;
        if !target_line.is_master() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "port {} is a replica; only a master can take a slot",
                    self.nodes[target].port()
                ),
            ));
        }
        let source_id = own_line(&self.nodes[source]).map_err(io::Error::other)?.id;
        let migration = SlotMigration {
            cluster: self,
            slot,
            source,
            target,
            target_id: target_line.id,
        };
        let slot_text = slot.to_string();
        expect_ok(
            &self.nodes[target],
            &["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &source_id],
        )?;
        expect_ok(
            &self.nodes[source],
            &[
                "CLUSTER",
                "SETSLOT",
                &slot_text,
                "MIGRATING",
                &migration.target_id,
            ],
        )?;
        Ok(migration)
    }

    fn running(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|node| node.is_running())
    }

    fn any_running(&self) -> io::Result<&RedisServer> {
        self.running()
            .next()
            .ok_or_else(|| io::Error::other("no node of the cluster is running"))
    }

    /// The index of the running node that serves `slot`, by its own word.
    fn owner_index(&self, slot: u16) -> Result<usize, String> {
        let mut best: Option<(u64, usize)> = None;
        for (index, node) in self.nodes.iter().enumerate() {
            if !node.is_running() {
                continue;
            }
            let Ok(myself) = own_line(node) else { continue };
            if myself.is_master()
                && myself.owns(slot)
                && best.is_none_or(|(epoch, _)| myself.config_epoch > epoch)
            {
                best = Some((myself.config_epoch, index));
            }
        }
        best.map(|(_, index)| index)
            .ok_or_else(|| format!("no running node serves slot {slot}"))
    }

    /// Whether every master with slots has `replicas` replicas online.
    fn check_replicas_online(&self, replicas: usize) -> Result<(), String> {
        for node in self.masters().map_err(|err| err.to_string())? {
            let info = match node.admin(&["INFO", "replication"]) {
                Ok(AdminReply::Bulk(Some(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
                other => {
                    return Err(format!(
                        "port {}: INFO replication answered {other:?}",
                        node.port()
                    ))
                }
            };
            let online = info
                .lines()
                .filter(|line| line.starts_with("slave") && line.contains("state=online"))
                .count();
            if online < replicas {
                return Err(format!(
                    "port {}: {online} of {replicas} replicas online",
                    node.port()
                ));
            }
        }
        Ok(())
    }

    fn check_ok(&self) -> Result<(), String> {
        // The first node's slot map, (first slot, last slot, owner id), and its port.
        let mut agreed: Option<(u16, Vec<SlotRange>)> = None;
        for node in self.running() {
            let port = node.port();
            let info = match node.admin(&["CLUSTER", "INFO"]) {
                Ok(AdminReply::Bulk(Some(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
                other => return Err(format!("port {port}: CLUSTER INFO answered {other:?}")),
            };
            for (field, expected) in [
                ("cluster_state", "ok".to_owned()),
                ("cluster_slots_assigned", CLUSTER_SLOTS.to_string()),
                ("cluster_known_nodes", self.nodes.len().to_string()),
            ] {
                let value = info_field(&info, field).unwrap_or("?");
                if value != expected {
                    return Err(format!("port {port}: {field}:{value}, not {expected}"));
                }
            }
            let view = cluster_nodes(node)?;
            for other in self.running() {
                let line = view
                    .iter()
                    .find(|line| line.port == other.port() || Some(line.port) == other.tls_port())
                    .ok_or_else(|| format!("port {port} does not list port {}", other.port()))?;
                if let Some(flag) = line
                    .flags
                    .iter()
                    .find(|flag| matches!(flag.as_str(), "fail" | "fail?" | "handshake" | "noaddr"))
                {
                    return Err(format!("port {port} sees port {} as {flag}", other.port()));
                }
                if !line.connected {
                    return Err(format!("port {port} has no link to port {}", other.port()));
                }
            }
            if let Some(line) = view.iter().find(|line| line.migrating) {
                return Err(format!(
                    "port {port} sees a slot mid-migration at {}",
                    line.port
                ));
            }
            let mut owners: Vec<SlotRange> = view
                .iter()
                .filter(|line| line.is_master())
                .flat_map(|line| {
                    line.slots
                        .iter()
                        .map(|&(from, to)| (from, to, line.id.clone()))
                })
                .collect();
            owners.sort();
            match &agreed {
                None => agreed = Some((port, owners)),
                Some((first, expected)) if *expected != owners => {
                    return Err(format!(
                        "ports {first} and {port} disagree on the slots' owners"
                    ));
                }
                Some(_) => {}
            }
            let myself = view
                .iter()
                .find(|line| line.flags.iter().any(|flag| flag == "myself"))
                .ok_or_else(|| format!("port {port} does not list itself"))?;
            if myself.flags.iter().any(|flag| flag == "slave") {
                let replication = node
                    .info("replication")
                    .map_err(|err| format!("port {port}: {err}"))?;
                let link = info_field(&replication, "master_link_status").unwrap_or("?");
                let syncing = info_field(&replication, "master_sync_in_progress").unwrap_or("?");
                if link != "up" || syncing != "0" {
                    return Err(format!(
                        "replica on port {port}: master_link_status:{link}, master_sync_in_progress:{syncing}"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A slot marked as moving from one master to another, from
/// [`RedisCluster::begin_slot_migration`].
#[derive(Debug)]
pub struct SlotMigration<'a> {
    cluster: &'a RedisCluster,
    slot: u16,
    source: usize,
    target: usize,
    target_id: String,
}

impl SlotMigration<'_> {
    /// The slot being moved.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// The master the slot moves from.
    pub fn source(&self) -> &RedisServer {
        &self.cluster.nodes[self.source]
    }

    /// The master the slot moves to.
    pub fn target(&self) -> &RedisServer {
        &self.cluster.nodes[self.target]
    }

    /// Moves every key the source holds in the slot to the target (`CLUSTER
    /// GETKEYSINSLOT`, then `MIGRATE` in batches), and returns how many
    /// moved. The slot stays mid-migration.
    pub fn move_keys(&self) -> io::Result<usize> {
        let source = self.source();
        let target = self.target();
        let port = if self.cluster.tls_cluster {
            // With `--tls-cluster yes`, MIGRATE connects with TLS.
            target.tls_port().unwrap_or(target.port())
        } else {
            target.port()
        }
        .to_string();
        let slot = self.slot.to_string();
        let mut moved = 0;
        loop {
            let keys = match source.admin(&["CLUSTER", "GETKEYSINSLOT", &slot, "100"])? {
                AdminReply::Array(Some(keys)) => keys
                    .iter()
                    .map(|key| {
                        key.as_text().map(str::to_owned).ok_or_else(|| {
                            io::Error::other(format!(
                                "a key in slot {slot} is not UTF-8 text ({key:?}); the testkit cannot move it"
                            ))
                        })
                    })
                    .collect::<io::Result<Vec<String>>>()?,
                other => {
                    return Err(io::Error::other(format!(
                        "CLUSTER GETKEYSINSLOT on port {} answered {other:?}",
                        source.port()
                    )))
                }
            };
            if keys.is_empty() {
                return Ok(moved);
            }
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", MIGRATE_TIMEOUT_MS];
            if let Some(password) = &self.cluster.password {
                args.extend(["AUTH", password.as_str()]);
            }
            args.push("KEYS");
            args.extend(keys.iter().map(String::as_str));
            match source.admin(&args)? {
                AdminReply::Status(status) if status == "OK" || status == "NOKEY" => {}
                other => {
                    return Err(io::Error::other(format!(
                        "MIGRATE from port {} to port {port} answered {other:?}",
                        source.port()
                    )))
                }
            }
            moved += keys.len();
        }
    }

    /// Moves the remaining keys, gives the slot to the target (`CLUSTER
    /// SETSLOT <slot> NODE` on the target, the source, then every other
    /// master), and waits until every running node agrees.
    pub fn finish(self) -> io::Result<()> {
        self.move_keys()?;
        let slot = self.slot.to_string();
        let assign = [
            "CLUSTER",
            "SETSLOT",
            slot.as_str(),
            "NODE",
            self.target_id.as_str(),
        ];
        expect_ok(self.target(), &assign)?;
        expect_ok(self.source(), &assign)?;
        for node in self.cluster.masters()? {
            if node.port() != self.source().port() && node.port() != self.target().port() {
                expect_ok(node, &assign)?;
            }
        }
        wait_until(
            SETSLOT_TIMEOUT,
            &format!(
                "agreement that port {} serves slot {slot}",
                self.target().port()
            ),
            || {
                for node in self.cluster.running() {
                    let view = cluster_nodes(node)?;
                    let owner = view
                        .iter()
                        .find(|line| line.is_master() && line.owns(self.slot));
                    if owner.is_none_or(|line| line.id != self.target_id) {
                        return Err(format!("port {} sees another owner", node.port()));
                    }
                    if view.iter().any(|line| line.migrating) {
                        return Err(format!("port {} still sees a migration", node.port()));
                    }
                }
                Ok(())
            },
        )
    }
}

/// Slots `.0` to `.1` (inclusive), served by the node with ID `.2`.
type SlotRange = (u16, u16, String);

/// One line of `CLUSTER NODES`.
#[derive(Debug)]
struct NodeLine {
    id: String,
    port: u16,
    flags: Vec<String>,
    config_epoch: u64,
    connected: bool,
    /// Slot ranges served, inclusive.
    slots: Vec<(u16, u16)>,
    /// Whether a slot is being imported or migrated (`[slot->-id]`,
    /// `[slot-<-id]`).
    migrating: bool,
}

impl NodeLine {
    fn is_master(&self) -> bool {
        self.flags.iter().any(|flag| flag == "master")
    }

    fn owns(&self, slot: u16) -> bool {
        self.slots
            .iter()
            .any(|&(from, to)| (from..=to).contains(&slot))
    }

    /// Parses `<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent>
    /// <pong-recv> <config-epoch> <link-state> <slot>...`.
    fn parse(line: &str) -> Option<NodeLine> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            return None;
        }
        let address = fields[1].split(['@', ',']).next()?;
        let port = address.rsplit(':').next()?.parse().ok()?;
        let mut slots = Vec::new();
        let mut migrating = false;
        for token in &fields[8..] {
            if token.starts_with('[') {
                migrating = true;
            } else if let Some((from, to)) = token.split_once('-') {
                slots.push((from.parse().ok()?, to.parse().ok()?));
            } else {
                let slot = token.parse().ok()?;
                slots.push((slot, slot));
            }
        }
        Some(NodeLine {
            id: fields[0].to_owned(),
            port,
            flags: fields[2].split(',').map(str::to_owned).collect(),
            config_epoch: fields[6].parse().ok()?,
            connected: fields[7] == "connected",
            slots,
            migrating,
        })
    }
}

/// A node's view of the cluster (`CLUSTER NODES`).
fn cluster_nodes(node: &RedisServer) -> Result<Vec<NodeLine>, String> {
    let port = node.port();
    let text = match node.admin(&["CLUSTER", "NODES"]) {
        Ok(AdminReply::Bulk(Some(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
        other => return Err(format!("port {port}: CLUSTER NODES answered {other:?}")),
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            NodeLine::parse(line)
                .ok_or_else(|| format!("port {port}: CLUSTER NODES line {line:?} does not parse"))
        })
        .collect()
}

/// The node's line about itself in its own `CLUSTER NODES`.
fn own_line(node: &RedisServer) -> Result<NodeLine, String> {
    cluster_nodes(node)?
        .into_iter()
        .find(|line| line.flags.iter().any(|flag| flag == "myself"))
        .ok_or_else(|| format!("port {} does not list itself", node.port()))
}

fn expect_ok(node: &RedisServer, args: &[&str]) -> io::Result<()> {
    match node.admin(args)? {
        AdminReply::Status(status) if status == "OK" => Ok(()),
        other => Err(io::Error::other(format!(
            "{} on port {} answered {other:?}",
            args.join(" "),
            node.port()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::NodeLine;

    #[test]
    fn parses_cluster_nodes_lines() {
        let line = NodeLine::parse(
            "07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host slave \
             e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected",
        )
        .expect("a replica line");
        assert_eq!(line.port, 30004);
        assert!(!line.is_master() && line.slots.is_empty() && line.connected);

        let line = NodeLine::parse(
            "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 \
             connected 0-5460 5462 [5461->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]",
        )
        .expect("a master line");
        assert_eq!(line.slots, vec![(0, 5460), (5462, 5462)]);
        assert!(line.owns(5460) && !line.owns(5461) && line.owns(5462));
        assert!(line.migrating && line.is_master() && line.config_epoch == 1);
        assert!(NodeLine::parse("garbage").is_none());
    }
}
