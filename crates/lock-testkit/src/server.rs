//! Real `redis-server` processes on free loopback ports.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_core::NodeUrl;

/// The environment variable that names the `redis-server` binary to use.
pub const REDIS_SERVER_ENV: &str = "REDIS_SERVER";

/// How long a server may take to answer its first PING.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// A `redis-server` on `127.0.0.1`, with no persistence (`--save "" --appendonly
/// no`), killed when dropped.
#[derive(Debug)]
pub struct RedisServer {
    binary: PathBuf,
    port: u16,
    password: Option<String>,
    cluster_enabled: bool,
    persistent: bool,
    child: Option<Child>,
    paused: bool,
}

/// Options for [`RedisServer`].
#[derive(Debug, Default, Clone)]
pub struct RedisServerBuilder {
    password: Option<String>,
    cluster_enabled: bool,
    persistent: bool,
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

    /// Starts the server in cluster mode (`--cluster-enabled yes`), with its
    /// nodes file in the temporary directory (removed on drop). It owns no
    /// slots, so it serves no keys, but answers `CLUSTER KEYSLOT`.
    pub fn cluster_enabled(mut self) -> Self {
        self.cluster_enabled = true;
        self
    }

    /// Starts the server on a free port and waits until it answers PING.
    pub fn start(self) -> io::Result<RedisServer> {
        let binary = find_redis_server()?;
        let mut last_error = None;
        // A free port can be taken between our probe and the server's bind;
        // a few tries make that race harmless.
        for _ in 0..5 {
            let port = free_port()?;
            let mut server = RedisServer {
                binary: binary.clone(),
                port,
                password: self.password.clone(),
                cluster_enabled: self.cluster_enabled,
                persistent: self.persistent,
                child: None,
                paused: false,
            };
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

    /// Options for a server.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`, with the password if one is set.
    pub fn url(&self) -> NodeUrl {
        match &self.password {
            Some(password) => self.url_with_password(password),
            None => NodeUrl::new(format!("redis://127.0.0.1:{}", self.port)),
        }
    }

    /// The URL with `password` in it, right or wrong.
    pub fn url_with_password(&self, password: &str) -> NodeUrl {
        NodeUrl::new(format!("redis://:{password}@127.0.0.1:{}", self.port))
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
        let mut stream = self.connect_admin()?;
        if let Some(password) = &self.password {
            write_command(&mut stream, &["AUTH", password])?;
        }
        write_command(&mut stream, args)?;
        let mut reader = BufReader::new(stream);
        if self.password.is_some() {
            read_reply(&mut reader)?;
        }
        read_reply(&mut reader)
    }

    fn connect_admin(&self) -> io::Result<TcpStream> {
        let address = ([127, 0, 0, 1], self.port).into();
        let stream = TcpStream::connect_timeout(&address, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        stream.set_write_timeout(Some(Duration::from_secs(5)))?;
        Ok(stream)
    }

    fn spawn(&mut self) -> io::Result<()> {
        let mut command = Command::new(&self.binary);
        command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--daemonize", "no"])
            .args(["--protected-mode", "yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(password) = &self.password {
            command.args(["--requirepass", password]);
        }
        if self.persistent {
            let dir = self.data_dir();
            std::fs::create_dir_all(&dir)?;
            command
                .args(["--appendonly", "yes", "--appendfsync", "always"])
                .arg("--dir")
                .arg(dir);
        } else {
            command.args(["--appendonly", "no"]);
        }
        if self.cluster_enabled {
            command
                .args(["--cluster-enabled", "yes"])
                .arg("--cluster-config-file")
                .arg(self.nodes_file());
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
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    self.child = None;
                    return Err(io::Error::other(format!(
                        "redis-server on port {} exited at start: {status}",
                        self.port
                    )));
                }
            }
            let answered = match self.admin(&["PING"]) {
                Ok(AdminReply::Status(status)) => status == "PONG",
                _ => false,
            };
            if answered {
                return Ok(());
            }
            if started.elapsed() > STARTUP_TIMEOUT {
                let _ = self.kill();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "redis-server on port {} did not answer PING within {STARTUP_TIMEOUT:?}",
                        self.port
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Where a persistent server keeps its append-only file.
    fn data_dir(&self) -> PathBuf {
        std::env::temp_dir().join(format!("lock-testkit-data-{}", self.port))
    }

    /// Where a cluster-enabled server keeps its nodes file.
    fn nodes_file(&self) -> PathBuf {
        std::env::temp_dir().join(format!("lock-testkit-nodes-{}.conf", self.port))
    }

    fn signal(&self, signal: &str) -> io::Result<()> {
        let Some(child) = &self.child else {
            return Err(io::Error::other("the server is not running"));
        };
        let status = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("kill -{signal} failed: {status}")))
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL works on a stopped process too, so no resume is needed first.
        let _ = self.kill();
        if self.cluster_enabled {
            let _ = std::fs::remove_file(self.nodes_file());
        }
        if self.persistent {
            let _ = std::fs::remove_dir_all(self.data_dir());
        }
    }
}

/// Finds `redis-server`: `$REDIS_SERVER` if set, otherwise the first on `PATH`.
pub fn find_redis_server() -> io::Result<PathBuf> {
    if let Some(path) = std::env::var_os(REDIS_SERVER_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "${REDIS_SERVER_ENV} names {}, which is not a file",
                    path.display()
                ),
            ))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "redis-server was not found on PATH; install it (Debian: `apt-get install redis-server`) \
                 or set $REDIS_SERVER to its path; `cargo xtask test` installs it on Debian when run as root",
            )
        })
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A reply read by [`RedisServer::admin`].
#[derive(Debug, Clone, PartialEq, Eq)]
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
