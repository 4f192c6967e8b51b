//! The `DISTLOCK_*` variables that the `distlock` front door
//! (`Config::from_vars`) and the `distlock` command read, for their tests:
//! the nodes of servers a test started, and a config for each way a lock
//! is taken.

use lock_core::{ClientKind, NodeUrl};

use crate::server::RedisServer;

/// `pairs` as owned variables, as `Config::from_vars` takes them.
pub fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// `urls`, comma-separated, as `DISTLOCK_NODES` takes them.
pub fn url_list(urls: impl IntoIterator<Item = NodeUrl>) -> String {
    let urls: Vec<String> = urls
        .into_iter()
        .map(|url| url.expose().to_owned())
        .collect();
    urls.join(",")
}

/// The URLs of `servers`, comma-separated, as `DISTLOCK_NODES` takes them.
pub fn node_list<'a>(servers: impl IntoIterator<Item = &'a RedisServer>) -> String {
    url_list(servers.into_iter().map(RedisServer::url))
}

/// The variables of a config for `mode` (`single`, `reentrant`, `redlock`,
/// or `fair`: single node in fair mode) on `servers` through `client`,
/// with a 5 s TTL; `extra` variables come last and win.
pub fn config_vars<'a>(
    mode: &str,
    servers: impl IntoIterator<Item = &'a RedisServer>,
    client: ClientKind,
    extra: &[(&str, &str)],
) -> Vec<(String, String)> {
    let strategy = if mode == "fair" { "single" } else { mode };
    let mut all = vars(&[
        ("DISTLOCK_STRATEGY", strategy),
        ("DISTLOCK_NODES", &node_list(servers)),
        ("DISTLOCK_CLIENT", &client.to_string()),
        ("DISTLOCK_TTL", "5s"),
        ("DISTLOCK_FAIR", &(mode == "fair").to_string()),
    ]);
    all.extend(vars(extra));
    all
}
