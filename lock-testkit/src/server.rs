//! Real `redis-server` processes on free loopback ports.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::NodeUrl;
use tempfile::TempDir;

use crate::support::{kill_and_reap, temp_dir, timed_out};
use crate::tls::TlsFiles;

/// The environment variable that names the `redis-server` binary to use.
pub const REDIS_SERVER_ENV: &str = "REDIS_SERVER";

/// The environment variable that names the `redis-cli` binary to use.
pub const REDIS_CLI_ENV: &str = "REDIS_CLI";

/// How long a server or sentinel may take to answer its first PING.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// A `redis-server` on `127.0.0.1`, with no persistence (`--save "" --appendonly
/// no`), killed when dropped.
///
/// Its working directory (`--dir`) is a temporary directory of its own, kept
/// across restarts and removed on drop: whatever the server writes (a
/// replica's synchronisation file, a cluster's nodes file, an append-only
/// file) lands there.
#[derive(Debug)]
pub struct RedisServer {
    binary: PathBuf,
    port: u16,
    options: RedisServerBuilder,
    tls_port: Option<u16>,
    dir: TempDir,
    child: Option<Child>,
    paused: bool,
}

/// Options for [`RedisServer`].
#[derive(Debug, Default, Clone)]
pub struct RedisServerBuilder {
    password: Option<String>,
    cluster_enabled: bool,
    cluster_node_timeout: Option<Duration>,
    persistent: bool,
    replica_of: Option<u16>,
    tls: TlsOptions,
}

/// How a server serves TLS, if `files` is set.
#[derive(Debug, Default, Clone)]
struct TlsOptions {
    files: Option<Arc<TlsFiles>>,
    /// `--tls-auth-clients no`: the default is Redis's `yes`.
    client_certificates_optional: bool,
    replication: bool,
    cluster: bool,
}

impl RedisServerBuilder {
    /// Requires clients to authenticate with `password` (`--requirepass`).
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Keeps data across restarts with an append-only file fsynced on every
    /// write (`--appendonly yes --appendfsync always`), in a directory of its
    /// own under the temporary directory (removed on drop). Without it a
    /// restarted server starts empty.
    pub fn persistent(mut self) -> Self {
        self.persistent = true;
        self
    }

    /// Starts the server in cluster mode (`--cluster-enabled yes
    /// --cluster-announce-ip 127.0.0.1`), with its nodes file in its
    /// temporary directory. Alone it owns no slots, so it serves no keys, but
    /// answers `CLUSTER KEYSLOT`; [`RedisCluster`](crate::RedisCluster) joins
    /// several into a cluster.
    pub fn cluster_enabled(mut self) -> Self {
        self.cluster_enabled = true;
        self
    }

    /// Sets `--cluster-node-timeout`: how long a node may be unreachable
    /// before it is failed over (Redis's default is 15 s). Only with
    /// [`cluster_enabled`](Self::cluster_enabled).
    pub fn cluster_node_timeout(mut self, timeout: Duration) -> Self {
        self.cluster_node_timeout = Some(timeout);
        self
    }

    /// Starts the server as a replica of the server on `127.0.0.1:<port>`
    /// (`--replicaof`), authenticating to it with this server's password
    /// (`--masterauth`) if one is set. A restart comes back as a replica of
    /// the same port.
    pub fn replica_of(mut self, port: u16) -> Self {
        self.replica_of = Some(port);
        self
    }

    /// Serves TLS on a second free port (`--tls-port`) with the server
    /// certificate of `files`, trusting clients signed by its CA
    /// (`--tls-ca-cert-file`). The plain port stays open, so
    /// [`RedisServer::admin`] and [`RedisServer::url`] keep working;
    /// [`RedisServer::tls_url`] names the TLS port. Clients must present a
    /// certificate unless [`tls_auth_clients(false)`](Self::tls_auth_clients)
    /// is set.
    pub fn tls(mut self, files: Arc<TlsFiles>) -> Self {
        self.tls.files = Some(files);
        self
    }

    /// Whether TLS clients must present a certificate signed by the CA
    /// (`--tls-auth-clients yes|no`); `true` by default, as in Redis. No
    /// effect without [`tls`](Self::tls).
    pub fn tls_auth_clients(mut self, required: bool) -> Self {
        self.tls.client_certificates_optional = !required;
        self
    }

    /// Replicates over TLS (`--tls-replication yes`): a replica connects
    /// with TLS, so the port given to [`replica_of`](Self::replica_of) must
    /// be the master's [`tls_port`](RedisServer::tls_port) (in a cluster the
    /// nodes find it themselves). No effect without [`tls`](Self::tls).
    pub fn tls_replication(mut self) -> Self {
        self.tls.replication = true;
        self
    }

    /// Runs the cluster bus over TLS (`--tls-cluster yes`), and announces the
    /// TLS port to TLS clients (plain clients still see the plain port).
    /// No effect without [`tls`](Self::tls) and
    /// [`cluster_enabled`](Self::cluster_enabled).
    pub fn tls_cluster(mut self) -> Self {
        self.tls.cluster = true;
        self
    }

    /// Starts the server on a free port and waits until it answers PING.
    pub fn start(self) -> io::Result<RedisServer> {
        let binary = find_redis_server()?;
        let dir = temp_dir("server")?;
        let mut server = RedisServer {
            binary,
            port: 0,
            tls_port: None,
            options: self,
            dir,
            child: None,
            paused: false,
        };
        let mut last_error = None;
        // A free port can be taken between our probe and the server's bind;
        // a few tries make that race harmless.
        for _ in 0..5 {
            server.port = free_port()?;
            if server.options.tls.files.is_some() {
                let mut tls_port = free_port()?;
                while tls_port == server.port {
                    tls_port = free_port()?;
                }
                server.tls_port = Some(tls_port);
            }
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("redis-server did not start")))
    }
}

impl RedisServer {
    /// Starts a server with default options.
    pub fn start() -> io::Result<Self> {
        Self::builder().start()
    }

    /// Starts `count` servers with default options: the independent nodes
    /// of a Redlock, say.
    pub fn start_many(count: usize) -> io::Result<Vec<Self>> {
        (0..count).map(|_| Self::start()).collect()
    }

    /// Options for a server.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The TLS port, if the server was started with
    /// [`tls`](RedisServerBuilder::tls).
    pub fn tls_port(&self) -> Option<u16> {
        self.tls_port
    }

    /// The certificates the server was started with, if any.
    pub fn tls_files(&self) -> Option<&Arc<TlsFiles>> {
        self.options.tls.files.as_ref()
    }

    /// The password clients must give, if one is set.
    pub fn password(&self) -> Option<&str> {
        self.options.password.as_deref()
    }

    /// `redis://127.0.0.1:<port>`, with the password if one is set.
    pub fn url(&self) -> NodeUrl {
        match &self.options.password {
            Some(password) => self.url_with_password(password),
            None => NodeUrl::new(format!("redis://127.0.0.1:{}", self.port)),
        }
    }

    /// `rediss://127.0.0.1:<tls port>`, with the password if one is set; an
    /// error if the server does not serve TLS. The certificate names
    /// `127.0.0.1` (an IP address SAN) and `localhost`.
    pub fn tls_url(&self) -> io::Result<NodeUrl> {
        let port = self.tls_port.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the server on port {} was not started with TLS", self.port),
            )
        })?;
        Ok(NodeUrl::new(match &self.options.password {
            Some(password) => format!("rediss://:{password}@127.0.0.1:{port}"),
            None => format!("rediss://127.0.0.1:{port}"),
        }))
    }

    /// The server's working directory (`--dir`), removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The URL with `password` in it, right or wrong.
    pub fn url_with_password(&self, password: &str) -> NodeUrl {
        NodeUrl::new(format!("redis://:{password}@127.0.0.1:{}", self.port))
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is running (not killed; it may be paused).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Freezes the server with SIGSTOP: connections stay open, nothing answers.
    pub fn pause(&mut self) -> io::Result<()> {
        self.signal("STOP")?;
        self.paused = true;
        Ok(())
    }

    /// Thaws a paused server with SIGCONT.
    pub fn resume(&mut self) -> io::Result<()> {
        self.signal("CONT")?;
        self.paused = false;
        Ok(())
    }

    /// Kills the server with SIGKILL (`kill -9`): no shutdown, and with no
    /// persistence every key is gone.
    pub fn kill(&mut self) -> io::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        self.paused = false;
        Ok(())
    }

    /// Starts the server again on the same port, empty.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill()?;
        self.spawn()
    }

    /// Sends one command on a fresh connection, outside any client under test,
    /// and returns the reply. For fault injection: `DEL`, `SET`, `SCRIPT FLUSH`.
    pub fn admin(&self, args: &[&str]) -> io::Result<AdminReply> {
        admin_command(self.port, self.options.password.as_deref(), args)
    }

    /// Runs `script` by its source (`EVAL`) with `keys` and `args`, as
    /// [`admin`](Self::admin) sends a command: a script's reply on a real
    /// server, with no client in between.
    pub fn eval(
        &self,
        script: &lock_core::strategy::Script,
        keys: &[String],
        args: &[&str],
    ) -> io::Result<AdminReply> {
        let count = keys.len().to_string();
        let mut command = vec!["EVAL", script.source(), count.as_str()];
        command.extend(keys.iter().map(String::as_str));
        command.extend_from_slice(args);
        self.admin(&command)
    }

    /// Sets the slow log to keep every command (the last 1,000), and empties
    /// it: what a test then reads with [`scripts_logged`](Self::scripts_logged)
    /// is what the server ran since.
    pub fn log_every_command(&self) -> io::Result<()> {
        self.admin(&["CONFIG", "SET", "slowlog-log-slower-than", "0"])?;
        self.admin(&["CONFIG", "SET", "slowlog-max-len", "1000"])?;
        self.admin(&["SLOWLOG", "RESET"]).map(drop)
    }

    /// The scripts (`EVALSHA`) the slow log holds, oldest first, each as
    /// the keys and arguments it was sent (as the slow log keeps them: at
    /// most 32 of all, each cut to 128 bytes). With
    /// [`log_every_command`](Self::log_every_command), a test counts the
    /// round trips a client made; `SLOWLOG RESET` starts a new count.
    pub fn scripts_logged(&self) -> io::Result<Vec<LoggedScript>> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
        let AdminReply::Array(Some(entries)) = self.admin(&["SLOWLOG", "GET", "1000"])? else {
            return Err(invalid("SLOWLOG GET: not an array"));
        };
        let mut scripts = Vec::new();
        for entry in entries.iter().rev() {
            let AdminReply::Array(Some(fields)) = entry else {
                return Err(invalid("SLOWLOG GET: an entry is not an array"));
            };
            let Some(AdminReply::Array(Some(command))) = fields.get(3) else {
                return Err(invalid("SLOWLOG GET: an entry has no command"));
            };
            let words: Vec<&str> = command.iter().filter_map(AdminReply::as_text).collect();
            let [name, _sha, count, rest @ ..] = &words[..] else {
                continue;
            };
            let Some(count) = count.parse::<usize>().ok().filter(|n| *n <= rest.len()) else {
                continue;
            };
            if name.eq_ignore_ascii_case("evalsha") {
                let (keys, args) = rest.split_at(count);
                scripts.push(LoggedScript {
                    keys: keys.iter().map(|key| (*key).to_owned()).collect(),
                    args: args.iter().map(|arg| (*arg).to_owned()).collect(),
                });
            }
        }
        Ok(scripts)
    }

    /// Sends `commands` in order on one fresh connection and returns their
    /// replies. `WAIT` needs this: it counts the replicas that have the
    /// writes of its own connection, so a `WAIT` sent by [`admin`](Self::admin)
    /// after a write sent by another `admin` call proves nothing.
    pub fn admin_session(&self, commands: &[&[&str]]) -> io::Result<Vec<AdminReply>> {
        admin_session(self.port, self.options.password.as_deref(), commands)
    }

    /// `INFO <section>` as text, or an error if the server answers with one.
    pub fn info(&self, section: &str) -> io::Result<String> {
        match self.admin(&["INFO", section])? {
            AdminReply::Bulk(Some(bytes)) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            other => Err(io::Error::other(format!(
                "INFO {section} on port {} answered {other:?}",
                self.port
            ))),
        }
    }

    /// How many times the server ran the `commands` (lower case, as
    /// `INFO commandstats` names them: `"evalsha"`, `"pexpire"`), in total,
    /// since it started or since `CONFIG RESETSTAT`. Commands that scripts
    /// call count too.
    pub fn command_calls(&self, commands: &[&str]) -> io::Result<u64> {
        let stats = self.info("commandstats")?;
        Ok(stats
            .lines()
            .filter_map(|line| {
                let (name, fields) = line.trim().split_once(':')?;
                if !commands.contains(&name.strip_prefix("cmdstat_")?) {
                    return None;
                }
                fields
                    .split(',')
                    .find_map(|field| field.strip_prefix("calls="))
                    .and_then(|calls| calls.parse::<u64>().ok())
            })
            .sum())
    }

    fn spawn(&mut self) -> io::Result<()> {
        let mut command = Command::new(&self.binary);
        command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--daemonize", "no"])
            .args(["--protected-mode", "yes"])
            .arg("--dir")
            .arg(self.dir.path())
            // A master otherwise waits 5 s for more replicas before a full sync.
            .args(["--repl-diskless-sync-delay", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let options = &self.options;
        if let Some(password) = &options.password {
            command.args(["--requirepass", password]);
            if options.replica_of.is_some() || options.cluster_enabled {
                command.args(["--masterauth", password]);
            }
        }
        if options.persistent {
            command.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            command.args(["--appendonly", "no"]);
        }
        if options.cluster_enabled {
            command
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-announce-ip", "127.0.0.1"])
                .arg("--cluster-config-file")
                .arg(self.dir.path().join("nodes.conf"));
            if let Some(timeout) = options.cluster_node_timeout {
                command.args(["--cluster-node-timeout", &timeout.as_millis().to_string()]);
            }
        }
        if let Some(port) = options.replica_of {
            command.args(["--replicaof", "127.0.0.1", &port.to_string()]);
        }
        let tls = &options.tls;
        if let (Some(files), Some(tls_port)) = (&tls.files, self.tls_port) {
            let yes_no = |yes| if yes { "yes" } else { "no" };
            command
                .args(["--tls-port", &tls_port.to_string()])
                .arg("--tls-cert-file")
                .arg(files.server_cert_file())
                .arg("--tls-key-file")
                .arg(files.server_key_file())
                .arg("--tls-ca-cert-file")
                .arg(files.ca_file())
                .args([
                    "--tls-auth-clients",
                    yes_no(!tls.client_certificates_optional),
                ])
                .args(["--tls-replication", yes_no(tls.replication)])
                .args([
                    "--tls-cluster",
                    yes_no(tls.cluster && options.cluster_enabled),
                ]);
        }
        let child = command.spawn().map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("could not run {}: {err}", self.binary.display()),
            )
        })?;
        self.child = Some(child);
        self.wait_until_ready()
    }

    fn wait_until_ready(&mut self) -> io::Result<()> {
        let (port, password) = (self.port, self.options.password.clone());
        let what = format!("redis-server on port {port}");
        let info = || admin_command(port, password.as_deref(), &["INFO", "server"]);
        let exited = |status| format!("{what} exited at start: {status}");
        until_ours(&mut self.child, &what, info, exited)
    }

    fn signal(&self, signal: &str) -> io::Result<()> {
        let Some(child) = &self.child else {
            return Err(io::Error::other("the server is not running"));
        };
        send_signal(child, signal)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL works on a stopped process too, so no resume is needed first.
        // The temporary directory is removed after this, when `dir` drops.
        let _ = self.kill();
    }
}

/// Sends `signal` (a name such as `STOP`) to a child process with `kill`.
pub(crate) fn send_signal(child: &Child, signal: &str) -> io::Result<()> {
    let status = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("kill -{signal} failed: {status}")))
    }
}

/// Sends one command to `127.0.0.1:<port>` on a fresh plain connection,
/// authenticating first if `password` is given, and returns the reply.
/// Connecting, reading and writing are each bounded by a few seconds.
pub(crate) fn admin_command(
    port: u16,
    password: Option<&str>,
    args: &[&str],
) -> io::Result<AdminReply> {
    let mut replies = session(port, password, &[args], Duration::from_secs(2))?;
    Ok(replies.remove(0))
}

/// [`RedisServer::admin_session`] on `port`, with up to 10 s per reply (a
/// `WAIT` may block that long).
pub(crate) fn admin_session(
    port: u16,
    password: Option<&str>,
    commands: &[&[&str]],
) -> io::Result<Vec<AdminReply>> {
    session(port, password, commands, Duration::from_secs(10))
}

/// Sends `commands` on one fresh connection to `port` (after `AUTH` with
/// `password`, if any) and reads their replies, each within `per_reply`.
fn session(
    port: u16,
    password: Option<&str>,
    commands: &[&[&str]],
    per_reply: Duration,
) -> io::Result<Vec<AdminReply>> {
    let address = ([127, 0, 0, 1], port).into();
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(per_reply))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    if let Some(password) = password {
        write_command(&mut stream, &["AUTH", password])?;
    }
    for command in commands {
        write_command(&mut stream, command)?;
    }
    let mut reader = BufReader::new(stream);
    if password.is_some() {
        read_reply(&mut reader)?;
    }
    commands.iter().map(|_| read_reply(&mut reader)).collect()
}

/// Adds what we were doing to an error, keeping its kind.
pub(crate) fn context(err: io::Error, doing: impl std::fmt::Display) -> io::Error {
    io::Error::new(err.kind(), format!("{doing}: {err}"))
}

/// Waits until `child`, a server (`what`) just started, answers as itself:
/// `INFO` names its pid, so it is not another test's process that won the
/// race for the port. An error, and the child gone, if it exits first
/// (`exited` says how) or does not answer within the startup timeout (it
/// is killed).
pub(crate) fn until_ours(
    child: &mut Option<Child>,
    what: &str,
    info: impl Fn() -> io::Result<AdminReply>,
    exited: impl Fn(std::process::ExitStatus) -> String,
) -> io::Result<()> {
    let started = Instant::now();
    loop {
        if let Some(process) = child.as_mut() {
            if let Some(status) = process.try_wait()? {
                *child = None;
                return Err(io::Error::other(exited(status)));
            }
        }
        if is_child(info(), child.as_ref()) {
            return Ok(());
        }
        if started.elapsed() > STARTUP_TIMEOUT {
            if let Some(mut process) = child.take() {
                kill_and_reap(&mut process);
            }
            let late = format!("{what} did not answer PING within {STARTUP_TIMEOUT:?}");
            return Err(timed_out(late));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether an `INFO server` reply comes from `child`: another test's process
/// that won the race for a free port answers too, with its own pid.
pub(crate) fn is_child(info: io::Result<AdminReply>, child: Option<&Child>) -> bool {
    let (Ok(AdminReply::Bulk(Some(info))), Some(child)) = (info, child) else {
        return false;
    };
    let process_id = format!("process_id:{}", child.id());
    String::from_utf8_lossy(&info)
        .lines()
        .any(|line| line.trim_end() == process_id)
}

/// Finds `redis-server`: `$REDIS_SERVER` if set, otherwise the first on `PATH`.
pub fn find_redis_server() -> io::Result<PathBuf> {
    if let Some(path) = binary_from_env(REDIS_SERVER_ENV)? {
        return Ok(path);
    }
    on_path("redis-server").ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "redis-server was not found on PATH; install it (Debian: `apt-get install redis-server`) \
             or set $REDIS_SERVER to its path; `cargo xtask test` installs it on Debian when run as root",
        )
    })
}

/// The binary `$variable` names, if it is set; an error if it names no file.
fn binary_from_env(variable: &str) -> io::Result<Option<PathBuf>> {
    let Some(path) = std::env::var_os(variable) else {
        return Ok(None);
    };
    let path = PathBuf::from(path);
    if path.is_file() {
        Ok(Some(path))
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("${variable} names {}, which is not a file", path.display()),
        ))
    }
}

/// The first `name` in a directory of `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Finds `redis-cli`: `$REDIS_CLI` if set, otherwise the one next to
/// [`find_redis_server`]'s binary, otherwise the first on `PATH`.
pub fn find_redis_cli() -> io::Result<PathBuf> {
    if let Some(path) = binary_from_env(REDIS_CLI_ENV)? {
        return Ok(path);
    }
    let beside_server = find_redis_server()
        .ok()
        .and_then(|server| server.parent().map(|dir| dir.join("redis-cli")))
        .filter(|candidate| candidate.is_file());
    beside_server
        .or_else(|| on_path("redis-cli"))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "redis-cli was found neither next to redis-server nor on PATH; install it \
             (Debian: `apt-get install redis-tools`) or set $REDIS_CLI to its path",
            )
        })
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A script call the server's slow log kept
/// ([`RedisServer::scripts_logged`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedScript {
    /// The keys it was sent.
    pub keys: Vec<String>,
    /// The arguments after its keys.
    pub args: Vec<String>,
}

/// A reply read by [`RedisServer::admin`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminReply {
    /// `+OK` and other status lines.
    Status(String),
    /// `-ERR ...` lines.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n` bulk strings; `None` for nil.
    Bulk(Option<Vec<u8>>),
    /// `*n` arrays; `None` for a nil array.
    Array(Option<Vec<AdminReply>>),
}

impl AdminReply {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            AdminReply::Int(value) => Some(*value),
            _ => None,
        }
    }

    /// The text of a bulk string, if it is one and UTF-8.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            AdminReply::Bulk(Some(bytes)) => std::str::from_utf8(bytes).ok(),
            AdminReply::Status(text) => Some(text),
            _ => None,
        }
    }

    /// The texts of an array whose every item is text (`LRANGE`, `KEYS`,
    /// `HGETALL`), in order; `None` for anything else.
    pub fn as_texts(&self) -> Option<Vec<String>> {
        match self {
            AdminReply::Array(Some(items)) => items
                .iter()
                .map(|item| item.as_text().map(str::to_owned))
                .collect(),
            _ => None,
        }
    }
}

fn write_command(stream: &mut TcpStream, args: &[&str]) -> io::Result<()> {
    let mut buffer = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        buffer.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        buffer.extend_from_slice(arg.as_bytes());
        buffer.extend_from_slice(b"\r\n");
    }
    stream.write_all(&buffer)
}

fn read_reply(reader: &mut impl BufRead) -> io::Result<AdminReply> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at(line.len().min(1));
    let number = || {
        rest.parse::<i64>().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad RESP line {line:?}"),
            )
        })
    };
    Ok(match kind {
        "+" => AdminReply::Status(rest.to_owned()),
        "-" => AdminReply::Error(rest.to_owned()),
        ":" => AdminReply::Int(number()?),
        "$" => match usize::try_from(number()?) {
            Err(_) => AdminReply::Bulk(None),
            Ok(len) => {
                let mut data = vec![0; len + 2];
                reader.read_exact(&mut data)?;
                data.truncate(len);
                AdminReply::Bulk(Some(data))
            }
        },
        "*" => match usize::try_from(number()?) {
            Err(_) => AdminReply::Array(None),
            Ok(len) => AdminReply::Array(Some(
                (0..len)
                    .map(|_| read_reply(reader))
                    .collect::<io::Result<_>>()?,
            )),
        },
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad RESP line {line:?}"),
            ))
        }
    })
}
