//! What the `distlock` tests share: a config for each way a lock is taken,
//! read from `DISTLOCK_*` variables as the command reads them.

use distlock::{ClientKind, Config};
use lock_testkit::RedisServer;

/// A config for `mode` (`single`, `reentrant`, `redlock`, or `fair`: single
/// node in fair mode) on `servers` through `client`, with a 5 s TTL; `extra`
/// variables come last and win ([`lock_testkit::env::config_vars`]).
pub fn config<'a>(
    mode: &str,
    servers: impl IntoIterator<Item = &'a RedisServer>,
    client: ClientKind,
    extra: &[(&str, &str)],
) -> Config {
    let vars = lock_testkit::env::config_vars(mode, servers, client, extra);
    Config::from_vars(vars).expect("a valid config")
}
