//! How the examples find their Redis: `DISTLOCK_NODES` (and the other
//! `DISTLOCK_*` variables) if set; otherwise a redis-server of their own, from
//! `$REDIS_SERVER` or `PATH`, on a free port, stopped when the example ends.

use distlock::Config;
use lock_testkit::RedisServer;

/// The config to use, and the server started for it (keep it alive).
pub fn config_or_local_server() -> (Config, Option<RedisServer>) {
    if std::env::var_os("DISTLOCK_NODES").is_some() {
        let config = Config::from_env().expect("valid DISTLOCK_* variables");
        println!(
            "using {} node(s) from DISTLOCK_NODES",
            config.lock.nodes.len()
        );
        return (config, None);
    }
    let server =
        RedisServer::start().expect("start a local redis-server (set DISTLOCK_NODES to use yours)");
    println!(
        "started a local redis-server on 127.0.0.1:{}",
        server.port()
    );
    let config =
        Config::from_vars([("DISTLOCK_NODES", server.url().expose())]).expect("valid config");
    (config, Some(server))
}
