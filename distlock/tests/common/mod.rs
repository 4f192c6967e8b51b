//! What the `distlock` tests share: a config for each way a lock is taken,
//! read from `DISTLOCK_*` variables as the command reads them.

use distlock::{ClientKind, Config};
use lock_testkit::RedisServer;

/// A config for `mode` (`single`, `reentrant`, `redlock`, or `fair`: single
/// node in fair mode) on `servers` through `client`, with a 5 s TTL; `extra`
/// variables come last and win.
pub fn config<'a>(
    mode: &str,
    servers: impl IntoIterator<Item = &'a RedisServer>,
    client: ClientKind,
    extra: &[(&str, &str)],
) -> Config {
    let strategy = if mode == "fair" { "single" } else { mode };
    let nodes: Vec<String> = servers
        .into_iter()
        .map(|server| server.url().expose().to_owned())
        .collect();
    let mut vars = vec![
        ("DISTLOCK_STRATEGY".to_owned(), strategy.to_owned()),
        ("DISTLOCK_NODES".to_owned(), nodes.join(",")),
        ("DISTLOCK_CLIENT".to_owned(), client.to_string()),
        ("DISTLOCK_TTL".to_owned(), "5s".to_owned()),
        ("DISTLOCK_FAIR".to_owned(), (mode == "fair").to_string()),
    ];
    for (name, value) in extra {
        vars.push(((*name).to_owned(), (*value).to_owned()));
    }
    Config::from_vars(vars).expect("a valid config")
}
