//! A Redis Sentinel group of real processes: a master, its replicas, and the
//! sentinels that watch them.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lock_core::NodeUrl;
use tempfile::TempDir;

use crate::server::{
    admin_command, context, find_redis_server, free_port, send_signal, AdminReply, RedisServer,
};
use crate::support::{info_field, wait_until};

/// How long the group may take, once started, until every sentinel knows
/// the master, its replicas and the other sentinels.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// One `redis-server --sentinel` on `127.0.0.1`, with a config file of its
/// own (which it rewrites) in a temporary directory removed on drop. It has
/// no password. Killed when dropped.
#[derive(Debug)]
pub struct Sentinel {
    binary: PathBuf,
    port: u16,
    dir: TempDir,
    child: Option<Child>,
}

impl Sentinel {
    /// Writes the config file and starts the sentinel on a free port.
    fn start(binary: PathBuf, monitor: &str) -> io::Result<Sentinel> {
        let dir = crate::support::temp_dir("sentinel")?;
        let mut sentinel = Sentinel {
            binary,
            port: 0,
            dir,
            child: None,
        };
        let mut last_error = None;
        // As for servers: a few tries make a lost race for the port harmless.
        for _ in 0..5 {
            sentinel.port = free_port()?;
            let config = format!(
                "port {port}\nbind 127.0.0.1\ndaemonize no\ndir \"{dir}\"\nlogfile \"{log}\"\n{monitor}",
                port = sentinel.port,
                dir = sentinel.dir.path().display(),
                log = sentinel.log_file().display(),
            );
            std::fs::write(sentinel.config_file(), config).map_err(|err| {
                context(
                    err,
                    format!("could not write {}", sentinel.config_file().display()),
                )
            })?;
            match sentinel.spawn() {
                Ok(()) => return Ok(sentinel),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("the sentinel did not start")))
    }

    /// The port the sentinel listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> NodeUrl {
        NodeUrl::new(format!("redis://127.0.0.1:{}", self.port))
    }

    /// The config file, which the sentinel rewrites with what it learns.
    pub fn config_file(&self) -> PathBuf {
        self.dir.path().join("sentinel.conf")
    }

    /// The sentinel's log file.
    pub fn log_file(&self) -> PathBuf {
        self.dir.path().join("sentinel.log")
    }

    /// The sentinel's directory, removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Whether the process is running (not killed; it may be paused).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Sends one command on a fresh plain connection and returns the reply
    /// (`SENTINEL MASTER <name>`, `SENTINEL FAILOVER <name>`, ...).
    pub fn admin(&self, args: &[&str]) -> io::Result<AdminReply> {
        admin_command(self.port, None, args)
    }

    /// Freezes the sentinel with SIGSTOP.
    pub fn pause(&mut self) -> io::Result<()> {
        self.running_child()
            .and_then(|child| send_signal(child, "STOP"))
    }

    /// Thaws a paused sentinel with SIGCONT.
    pub fn resume(&mut self) -> io::Result<()> {
        self.running_child()
            .and_then(|child| send_signal(child, "CONT"))
    }

    /// Kills the sentinel with SIGKILL.
    pub fn kill(&mut self) -> io::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// Starts the sentinel again on the same port, from the config file as
    /// it last rewrote it.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill()?;
        self.spawn()
    }

    fn running_child(&self) -> io::Result<&Child> {
        self.child
            .as_ref()
            .ok_or_else(|| io::Error::other("the sentinel is not running"))
    }

    fn spawn(&mut self) -> io::Result<()> {
        let child = Command::new(&self.binary)
            .arg(self.config_file())
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| context(err, format!("could not run {}", self.binary.display())))?;
        self.child = Some(child);
        let (port, log) = (self.port, self.log_file());
        let what = format!("the sentinel on port {port}");
        let info = || admin_command(port, None, &["INFO", "server"]);
        let exited = |status| {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            format!(
                "{what} exited at start ({status}); its log ends: {}",
                tail(&log, 5)
            )
        };
        crate::server::until_ours(&mut self.child, &what, info, exited)
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// Options for [`SentinelGroup`].
#[derive(Debug, Clone)]
pub struct SentinelGroupBuilder {
    service_name: String,
    replicas: usize,
    sentinels: usize,
    quorum: Option<usize>,
    password: Option<String>,
    down_after: Duration,
    failover_timeout: Duration,
}

impl SentinelGroupBuilder {
    /// How many replicas the master has (1 unless set).
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas;
        self
    }

    /// How many sentinels watch the master (3 unless set).
    pub fn sentinels(mut self, sentinels: usize) -> Self {
        self.sentinels = sentinels;
        self
    }

    /// How many sentinels must agree that the master is down before a
    /// failover (a majority of the sentinels unless set).
    pub fn quorum(mut self, quorum: usize) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// Requires clients to authenticate to the master and replicas with
    /// `password` (`--requirepass`; replicas use it as `--masterauth`, and
    /// sentinels as `sentinel auth-pass`). Sentinels themselves have none.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// `sentinel down-after-milliseconds` (1 s unless set): how long the
    /// master may be silent before a sentinel thinks it down.
    pub fn down_after(mut self, down_after: Duration) -> Self {
        self.down_after = down_after;
        self
    }

    /// `sentinel failover-timeout` (5 s unless set): a failover that has
    /// not finished in this time is given up, and another attempt on the
    /// same master waits twice this time. A finished failover does not hold
    /// the next one back.
    pub fn failover_timeout(mut self, failover_timeout: Duration) -> Self {
        self.failover_timeout = failover_timeout;
        self
    }

    /// Starts the master and its replicas (and waits until they are in
    /// sync), then the sentinels, and waits until every sentinel knows the
    /// master, every replica and every other sentinel (bounded: 30 s).
    pub fn start(self) -> io::Result<SentinelGroup> {
        let quorum = self.quorum.unwrap_or(self.sentinels / 2 + 1);
        let name_is_plain = !self.service_name.is_empty()
            && self
                .service_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        let problem = if !name_is_plain {
            Some("the service name must be non-empty letters, digits, '-', '_' or '.'".to_owned())
        } else if self.sentinels == 0 {
            Some("a group needs at least one sentinel".to_owned())
        } else if quorum == 0 || quorum > self.sentinels {
            Some(format!(
                "the quorum must be 1 to {} (the number of sentinels), not {quorum}",
                self.sentinels
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, problem));
        }
        let binary = find_redis_server()?;

        let server = |replica_of: Option<u16>| {
            let mut builder = RedisServer::builder();
            if let Some(password) = &self.password {
                builder = builder.password(password.clone());
            }
            if let Some(port) = replica_of {
                builder = builder.replica_of(port);
            }
            builder.start()
        };
        let master = server(None)?;
        let master_port = master.port();
        let mut servers = vec![master];
        for _ in 0..self.replicas {
            servers.push(server(Some(master_port))?);
        }
        wait_until(SETTLE_TIMEOUT, "replicas in sync with the master", || {
            for replica in &servers[1..] {
                let info = replica.info("replication").map_err(|err| err.to_string())?;
                let link = info_field(&info, "master_link_status").unwrap_or("?");
                if link != "up" {
                    return Err(format!(
                        "replica on port {}: master_link_status:{link}",
                        replica.port()
                    ));
                }
            }
            Ok(())
        })?;

        let name = &self.service_name;
        let mut monitor = format!(
            "sentinel monitor {name} 127.0.0.1 {master_port} {quorum}\n\
             sentinel down-after-milliseconds {name} {}\n\
             sentinel failover-timeout {name} {}\n\
             sentinel parallel-syncs {name} 1\n",
            self.down_after.as_millis(),
            self.failover_timeout.as_millis(),
        );
        if let Some(password) = &self.password {
            monitor.push_str(&format!("sentinel auth-pass {name} \"{password}\"\n"));
        }
        let sentinels = (0..self.sentinels)
            .map(|_| Sentinel::start(binary.clone(), &monitor))
            .collect::<io::Result<Vec<_>>>()?;
        let group = SentinelGroup {
            service_name: self.service_name,
            quorum,
            servers,
            sentinels,
        };
        group.wait_until_settled(SETTLE_TIMEOUT)?;
        Ok(group)
    }
}

/// A master, its replicas (`--replicaof`), and sentinels watching them
/// under one service name (`sentinel monitor <name> 127.0.0.1 <port>
/// <quorum>`, down after 1 s, failover timeout 5 s, one replica resynced at
/// a time), all on free loopback ports; every process is killed and every
/// file removed on drop.
#[derive(Debug)]
pub struct SentinelGroup {
    service_name: String,
    quorum: usize,
    servers: Vec<RedisServer>,
    sentinels: Vec<Sentinel>,
}

impl SentinelGroup {
    /// Starts a group with default options: `replicas` replicas and
    /// `sentinels` sentinels (quorum: a majority of them) watching
    /// `service_name`.
    pub fn start(
        service_name: &str,
        replicas: usize,
        sentinels: usize,
    ) -> io::Result<SentinelGroup> {
        Self::builder(service_name)
            .replicas(replicas)
            .sentinels(sentinels)
            .start()
    }

    /// Options for a group watching `service_name`.
    pub fn builder(service_name: &str) -> SentinelGroupBuilder {
        SentinelGroupBuilder {
            service_name: service_name.to_owned(),
            replicas: 1,
            sentinels: 3,
            quorum: None,
            password: None,
            down_after: Duration::from_secs(1),
            failover_timeout: Duration::from_secs(5),
        }
    }

    /// The name the sentinels know the master by.
    pub fn service_name(&self) -> &str {
        &self.service_name
    }

    /// How many sentinels must agree that the master is down.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// The `redis://` URL of every sentinel, running or not.
    pub fn sentinel_urls(&self) -> Vec<NodeUrl> {
        self.sentinels.iter().map(Sentinel::url).collect()
    }

    /// The sentinels.
    pub fn sentinels(&self) -> &[Sentinel] {
        &self.sentinels
    }

    /// The sentinels, to pause, kill or restart one.
    pub fn sentinels_mut(&mut self) -> &mut [Sentinel] {
        &mut self.sentinels
    }

    /// The master as started, then its replicas; which one is the master
    /// now is [`master`](Self::master).
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// The servers, to pause, kill or restart one. A restarted server comes
    /// back as it was started (the first as a master, the others as
    /// replicas of the first) and the sentinels reconfigure it.
    pub fn servers_mut(&mut self) -> &mut [RedisServer] {
        &mut self.servers
    }

    /// The master's address, as the first running sentinel that answers
    /// gives it (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
    pub fn master_address(&self) -> io::Result<SocketAddr> {
        let mut last_error = io::Error::other("no sentinel is running");
        for sentinel in self.sentinels.iter().filter(|s| s.is_running()) {
            match self.address_from(sentinel) {
                Ok(address) => return Ok(address),
                Err(err) => last_error = io::Error::other(err),
            }
        }
        Err(last_error)
    }

    /// The server at [`master_address`](Self::master_address).
    pub fn master(&self) -> io::Result<&RedisServer> {
        let address = self.master_address()?;
        self.servers
            .iter()
            .find(|server| server.port() == address.port())
            .ok_or_else(|| {
                io::Error::other(format!(
                    "the sentinels name {address}, not a server of the group"
                ))
            })
    }

    /// Asks one sentinel for a failover (`SENTINEL FAILOVER <name>`, which
    /// needs no agreement), then waits (bounded by `timeout`) until every
    /// running sentinel names another master, with the failover finished
    /// (see [`wait_for_new_master`](Self::wait_for_new_master)); returns it
    /// (1 to 2 s). The old master is turned into a replica only about 10 s
    /// later (see [`wait_until_settled`](Self::wait_until_settled)): until
    /// then it still calls itself master and takes writes.
    pub fn failover(&self, timeout: Duration) -> io::Result<&RedisServer> {
        let old = self.master_address()?;
        let sentinel = self
            .sentinels
            .iter()
            .find(|sentinel| sentinel.is_running())
            .ok_or_else(|| io::Error::other("no sentinel is running"))?;
        match sentinel.admin(&["SENTINEL", "FAILOVER", &self.service_name])? {
            AdminReply::Status(status) if status == "OK" => {}
            other => {
                return Err(io::Error::other(format!(
                    "SENTINEL FAILOVER {} on port {} answered {other:?}",
                    self.service_name,
                    sentinel.port()
                )))
            }
        }
        self.wait_for_new_master(old, timeout)
    }

    /// Kills (`kill -9`) the current master and returns its address. The
    /// sentinels notice after `down-after` and fail over; see
    /// [`wait_for_new_master`](Self::wait_for_new_master).
    pub fn kill_master(&mut self) -> io::Result<SocketAddr> {
        let address = self.master_address()?;
        let server = self
            .servers
            .iter_mut()
            .find(|server| server.port() == address.port())
            .ok_or_else(|| {
                io::Error::other(format!(
                    "the sentinels name {address}, not a server of the group"
                ))
            })?;
        server.kill()?;
        Ok(address)
    }

    /// Waits until every running sentinel names the same master, not `old`,
    /// with no failover in progress (the other replicas have been pointed
    /// at it, so another failover may start at once), and that server is
    /// running and answers as a master; returns it.
    pub fn wait_for_new_master(
        &self,
        old: SocketAddr,
        timeout: Duration,
    ) -> io::Result<&RedisServer> {
        let index = wait_until(timeout, &format!("a new master in place of {old}"), || {
            let address = self.agreed_address()?;
            if address == old {
                return Err(format!("the sentinels still name {old}"));
            }
            let index = self.index_of(address)?;
            let role = self.role_of(&self.servers[index])?;
            if role != "master" {
                return Err(format!("{address} is named, but is a {role}"));
            }
            for sentinel in self.sentinels.iter().filter(|s| s.is_running()) {
                let flags = self.master_flags(sentinel)?;
                if flags.split(',').any(|flag| flag.starts_with("failover")) {
                    return Err(format!(
                        "sentinel on port {} sees the master as {flags}",
                        sentinel.port()
                    ));
                }
            }
            Ok(index)
        })?;
        Ok(&self.servers[index])
    }

    /// Waits until every running sentinel names the same running master,
    /// which answers as a master; every other running server replicates
    /// from it and is in sync; and every running sentinel sees the master up
    /// with no failover in progress, knows every other sentinel and is
    /// linked to every running one, and sees every running replica as a
    /// replica.
    ///
    /// After a failover this takes about 10 s: a sentinel turns a server that
    /// still calls itself master (the old master, alive or restarted) into a
    /// replica only 8 s after that server last changed role, and it polls a
    /// server's role every 10 s (every second during a failover).
    pub fn wait_until_settled(&self, timeout: Duration) -> io::Result<()> {
        wait_until(timeout, "a settled sentinel group", || self.check_settled())
    }

    /// The master's flags as `sentinel` sees them (`master`,
    /// `master,failover_in_progress`, `master,s_down`, ...).
    fn master_flags(&self, sentinel: &Sentinel) -> Result<String, String> {
        let reply = sentinel
            .admin(&["SENTINEL", "MASTER", &self.service_name])
            .map_err(|err| format!("sentinel on port {}: {err}", sentinel.port()))?;
        pairs(&reply)
            .into_iter()
            .find(|(key, _)| key == "flags")
            .map(|(_, flags)| flags)
            .ok_or_else(|| {
                format!(
                    "sentinel on port {}: SENTINEL MASTER answered {reply:?}",
                    sentinel.port()
                )
            })
    }

    fn address_from(&self, sentinel: &Sentinel) -> Result<SocketAddr, String> {
        let reply = sentinel
            .admin(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &self.service_name])
            .map_err(|err| format!("sentinel on port {}: {err}", sentinel.port()))?;
        let parsed = match &reply {
            AdminReply::Array(Some(items)) if items.len() == 2 => items[0]
                .as_text()
                .and_then(|ip| ip.parse::<IpAddr>().ok())
                .zip(items[1].as_text().and_then(|port| port.parse::<u16>().ok()))
                .map(|(ip, port)| SocketAddr::new(ip, port)),
            _ => None,
        };
        parsed.ok_or_else(|| {
            format!(
                "sentinel on port {}: GET-MASTER-ADDR-BY-NAME answered {reply:?}",
                sentinel.port()
            )
        })
    }

    /// The master address every running sentinel gives, if they agree.
    fn agreed_address(&self) -> Result<SocketAddr, String> {
        let mut agreed = None;
        for sentinel in self.sentinels.iter().filter(|s| s.is_running()) {
            let address = self.address_from(sentinel)?;
            match agreed {
                None => agreed = Some(address),
                Some(first) if first != address => {
                    return Err(format!("the sentinels name both {first} and {address}"))
                }
                Some(_) => {}
            }
        }
        agreed.ok_or_else(|| "no sentinel is running".to_owned())
    }

    fn index_of(&self, address: SocketAddr) -> Result<usize, String> {
        self.servers
            .iter()
            .position(|server| server.port() == address.port() && server.is_running())
            .ok_or_else(|| format!("{address} is not a running server of the group"))
    }

    fn role_of(&self, server: &RedisServer) -> Result<String, String> {
        let info = server
            .info("replication")
            .map_err(|err| format!("port {}: {err}", server.port()))?;
        Ok(info_field(&info, "role").unwrap_or("?").to_owned())
    }

    fn check_settled(&self) -> Result<(), String> {
        let address = self.agreed_address()?;
        let master = self.index_of(address)?;
        let role = self.role_of(&self.servers[master])?;
        if role != "master" {
            return Err(format!("{address} is named, but is a {role}"));
        }
        let replicas: Vec<&RedisServer> = self
            .servers
            .iter()
            .enumerate()
            .filter(|&(index, server)| index != master && server.is_running())
            .map(|(_, server)| server)
            .collect();
        for replica in &replicas {
            let info = replica
                .info("replication")
                .map_err(|err| format!("port {}: {err}", replica.port()))?;
            let fields = ["role", "master_port", "master_link_status"]
                .map(|field| info_field(&info, field).unwrap_or("?"));
            if fields != ["slave", &address.port().to_string(), "up"] {
                return Err(format!(
                    "port {}: role, master_port, master_link_status are {fields:?}",
                    replica.port()
                ));
            }
        }
        for sentinel in self.sentinels.iter().filter(|s| s.is_running()) {
            let port = sentinel.port();
            let reply = sentinel
                .admin(&["SENTINEL", "MASTER", &self.service_name])
                .map_err(|err| format!("sentinel on port {port}: {err}"))?;
            let fields = pairs(&reply);
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(key, _)| key == name)
                    .map_or("?", |(_, value)| value.as_str())
            };
            if field("flags") != "master" {
                return Err(format!(
                    "sentinel on port {port} sees the master as {}",
                    field("flags")
                ));
            }
            let others = (self.sentinels.len() - 1).to_string();
            if field("num-other-sentinels") != others {
                return Err(format!(
                    "sentinel on port {port} knows {} other sentinels, not {others}",
                    field("num-other-sentinels")
                ));
            }
            // Sentinels count each other by hello messages, but vote over
            // links of their own: those must be up too.
            let peers = match sentinel.admin(&["SENTINEL", "SENTINELS", &self.service_name]) {
                Ok(AdminReply::Array(Some(items))) => items.iter().map(pairs).collect::<Vec<_>>(),
                other => {
                    return Err(format!(
                        "sentinel on port {port}: SENTINEL SENTINELS answered {other:?}"
                    ))
                }
            };
            for other in self
                .sentinels
                .iter()
                .filter(|s| s.is_running() && s.port() != port)
            {
                let flags = peers
                    .iter()
                    .find(|fields| {
                        fields
                            .iter()
                            .any(|(key, value)| key == "port" && *value == other.port().to_string())
                    })
                    .and_then(|fields| fields.iter().find(|(key, _)| key == "flags"))
                    .map_or("unknown", |(_, flags)| flags.as_str());
                if flags != "sentinel" {
                    return Err(format!(
                        "sentinel on port {port} sees the sentinel on port {} as {flags}",
                        other.port()
                    ));
                }
            }
            let known = match sentinel.admin(&["SENTINEL", "REPLICAS", &self.service_name]) {
                Ok(AdminReply::Array(Some(items))) => items.iter().map(pairs).collect::<Vec<_>>(),
                other => {
                    return Err(format!(
                        "sentinel on port {port}: SENTINEL REPLICAS answered {other:?}"
                    ))
                }
            };
            for replica in &replicas {
                let seen = known.iter().find(|fields| {
                    fields
                        .iter()
                        .any(|(key, value)| key == "port" && *value == replica.port().to_string())
                });
                let Some(seen) = seen else {
                    return Err(format!(
                        "sentinel on port {port} does not know the replica on port {}",
                        replica.port()
                    ));
                };
                let field = |name: &str| {
                    seen.iter()
                        .find(|(key, _)| key == name)
                        .map_or("?", |(_, value)| value.as_str())
                };
                // Only the flags: a sentinel refreshes a replica's link
                // status from INFO every 10 s, and the replica's own word on
                // its link was checked above.
                if field("flags") != "slave" {
                    return Err(format!(
                        "sentinel on port {port} sees the replica on port {} as {}",
                        replica.port(),
                        field("flags")
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A flat `[key, value, key, value, ...]` reply as pairs of text.
fn pairs(reply: &AdminReply) -> Vec<(String, String)> {
    match reply {
        AdminReply::Array(Some(items)) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [key, value] => Some((key.as_text()?.to_owned(), value.as_text()?.to_owned())),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The last `lines` lines of `text`, joined with " | ".
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}
