//! Listing the held locks: a bounded `SCAN` of every node that holds the
//! backend's keys, and each lock found read with the backend's own
//! `inspect`.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;

use crate::engine::backend::LockBackend;
use crate::engine::state::{ListOptions, ListedLock, LockListing};
use crate::error::{Capability, LockError};
use crate::key::{validate_prefix, LockKey};
use crate::server::client::{NodeClient, Reply};
use crate::server::keys::KeyNames;

/// How many locks are inspected at once.
const INSPECT_CONCURRENCY: usize = 16;

/// Lists the locks `backend` holds under `prefix` on `nodes` (one per
/// deployment: a standalone server, a cluster, a sentinel group; each
/// Redlock node; or the error of one that is down): a `SCAN` of every master,
/// bounded by `options.scan_limit`, then each name found read with
/// `backend.inspect`, and fair-mode queues measured with `LLEN` on the first
/// node. This is what a strategy's [`ListBackend::list`](crate::ListBackend::list) calls.
///
/// Errors: [`LockError::InvalidConfig`] on a zero `batch`, an invalid
/// `prefix` or no nodes. A node that fails
/// is reported in [`LockListing::failures`], not as an error.
pub async fn list_held(
    backend: &dyn LockBackend,
    nodes: Vec<Result<Arc<dyn NodeClient>, LockError>>,
    prefix: &str,
    options: &ListOptions,
) -> Result<LockListing, LockError> {
    if options.batch == 0 {
        return Err(LockError::config("batch", "must be at least 1"));
    }
    validate_prefix(prefix).map_err(|reason| LockError::config("key_prefix", reason))?;
    if nodes.is_empty() {
        return Err(LockError::config(
            "strategy",
            format!(
                "the {} strategy names no nodes that hold its keys, so its locks cannot be \
                 listed",
                backend.strategy()
            ),
        ));
    }
    let queue_node = backend
        .capabilities()
        .has(Capability::FairQueue)
        .then(|| nodes.first().cloned())
        .flatten()
        .and_then(Result::ok);
    let pattern = scan_pattern(prefix, &options.name_prefix);
    let mut scan = Scan {
        budget: options.scan_limit,
        batch: u64::from(options.batch),
        examined: 0,
        truncated: false,
    };
    let mut names = BTreeSet::new();
    let mut failures = Vec::new();
    for node in nodes {
        let node = match node {
            Ok(node) => node,
            Err(err) => {
                failures.push(err);
                continue;
            }
        };
        let keys = match scan.node(node.as_ref(), &pattern).await {
            Ok((keys, failed)) => {
                failures.extend(failed);
                keys
            }
            Err(err) => {
                failures.push(err);
                continue;
            }
        };
        names.extend(
            keys.iter()
                .filter_map(|key| name_of(key, prefix))
                .filter(|name| name.starts_with(&options.name_prefix)),
        );
    }
    let locks = futures::stream::iter(names)
        .map(|name| {
            let queue_node = queue_node.clone();
            async move {
                let key = LockKey::under_valid_prefix(prefix, &name);
                let state = match &key {
                    Ok(key) => backend.inspect(key).await,
                    Err(err) => Err(err.clone()),
                };
                let queued = match (&state, queue_node) {
                    (Ok(state), Some(node)) if state.is_held() => {
                        queue_length(node.as_ref(), prefix, &name).await
                    }
                    _ => None,
                };
                ListedLock {
                    name,
                    state,
                    queued,
                }
            }
        })
        .buffered(INSPECT_CONCURRENCY)
        .filter(|lock| {
            std::future::ready(lock.state.as_ref().map_or(true, |state| state.is_held()))
        })
        .collect()
        .await;
    Ok(LockListing {
        locks,
        examined: scan.examined,
        truncated: scan.truncated,
        failures,
    })
}

/// The length of `name`'s fair-mode queue; `None` if it cannot be read.
async fn queue_length(node: &dyn NodeClient, prefix: &str, name: &str) -> Option<u64> {
    let key = LockKey::under_valid_prefix(prefix, name).ok()?;
    let queue = key.queue_key();
    match node.command("LLEN", &[queue.as_bytes()]).await {
        Ok(Reply::Int(length)) => u64::try_from(length).ok(),
        _ => None,
    }
}

/// The state of one listing's scan: its budget of keys to examine.
struct Scan {
    budget: u64,
    batch: u64,
    examined: u64,
    truncated: bool,
}

impl Scan {
    /// The keys matching `pattern` on every master `node` reaches, until
    /// the budget runs out, and the error of each master that failed: one
    /// failed master of a cluster hides nothing the others hold.
    async fn node(
        &mut self,
        node: &dyn NodeClient,
        pattern: &str,
    ) -> Result<(Vec<String>, Vec<LockError>), LockError> {
        let targets: Vec<Option<String>> = match node.cluster_masters().await? {
            None => vec![None],
            Some(masters) => masters.into_iter().map(Some).collect(),
        };
        let mut keys = Vec::new();
        let mut failures = Vec::new();
        for target in targets {
            if let Err(err) = self.master(node, target, pattern, &mut keys).await {
                failures.push(err);
            }
            if self.truncated {
                break;
            }
        }
        Ok((keys, failures))
    }

    /// The keys matching `pattern` on one master (`None`: the node itself),
    /// added to `keys`, until the budget runs out.
    async fn master(
        &mut self,
        node: &dyn NodeClient,
        target: Option<String>,
        pattern: &str,
        keys: &mut Vec<String>,
    ) -> Result<(), LockError> {
        let mut cursor = "0".to_owned();
        loop {
            if self.budget == 0 {
                self.truncated = true;
                return Ok(());
            }
            let count = self.batch.min(self.budget);
            self.budget -= count;
            self.examined += count;
            let count = count.to_string();
            let args: [&[u8]; 5] = [
                cursor.as_bytes(),
                b"MATCH",
                pattern.as_bytes(),
                b"COUNT",
                count.as_bytes(),
            ];
            let reply = match &target {
                None => node.command("SCAN", &args).await?,
                Some(address) => node.command_on_node(address, "SCAN", &args).await?,
            };
            let (next, found) = scan_page(&reply).ok_or_else(|| LockError::UnexpectedReply {
                node: target.clone().unwrap_or_else(|| node.address().to_owned()),
                script: "SCAN",
                reply: reply.to_string(),
            })?;
            // Keys that are not UTF-8 name no lock: names are strings.
            keys.extend(
                found
                    .iter()
                    .filter_map(|key| key.as_text().map(str::to_owned)),
            );
            if next == "0" {
                return Ok(());
            }
            cursor = next;
        }
    }
}

/// A `SCAN` reply: the next cursor and the keys of this page.
fn scan_page(reply: &Reply) -> Option<(String, &[Reply])> {
    match reply.as_array()? {
        [cursor, Reply::Array(keys)] => Some((cursor.as_text()?.to_owned(), keys)),
        _ => None,
    }
}

/// The `SCAN MATCH` pattern of the lock keys whose names start with
/// `name_prefix`: `<prefix>{<name>}`, or `<prefix>{~}<name>~` for names that
/// start with `}` (see [`LockKey`]). Every other key of a name ends in a
/// suffix after its braces (`:fence`, `:queue`, `:held`, ...), so the
/// pattern leaves them out.
fn scan_pattern(key_prefix: &str, name_prefix: &str) -> String {
    let key_prefix = glob_escape(key_prefix);
    if name_prefix.starts_with('}') {
        format!("{key_prefix}{{~}}{}*~", glob_escape(name_prefix))
    } else if name_prefix.is_empty() {
        format!("{key_prefix}{{*[}}~]")
    } else {
        format!("{key_prefix}{{{}*}}", glob_escape(name_prefix))
    }
}

/// `text` with the glob characters of `SCAN MATCH` escaped.
fn glob_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// The lock name whose lock key is `key`, if it is one under `key_prefix`:
/// the name between the braces whose [`LockKey`] gives back exactly `key`.
fn name_of(key: &str, key_prefix: &str) -> Option<String> {
    let rest = key.strip_prefix(key_prefix)?;
    let plain = rest
        .strip_prefix('{')
        .and_then(|rest| rest.strip_suffix('}'));
    let tilde = rest
        .strip_prefix("{~}")
        .and_then(|rest| rest.strip_suffix('~'));
    [plain, tilde].into_iter().flatten().find_map(|name| {
        let derived = LockKey::new(key_prefix, name).ok()?;
        (derived.redis_key() == key).then(|| name.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_back_from_their_keys_only() {
        for name in [
            "order:42",
            "}odd name ключ",
            "a}b c",
            "~}a",
            "}a~",
            "{x}",
            "ключ 🔒",
            "*?[]\\",
        ] {
            let key = LockKey::new("lock:", name).expect("a valid name");
            assert_eq!(name_of(key.redis_key(), "lock:").as_deref(), Some(name));
            for other in [
                key.fence_key().to_owned(),
                key.queue_key(),
                key.waiters_key(),
                key.holder_key(),
            ] {
                assert_eq!(name_of(&other, "lock:"), None, "{other}");
            }
            assert_eq!(name_of(key.redis_key(), "other:"), None);
        }
        assert_eq!(name_of("lock:plain", "lock:"), None);
        assert_eq!(name_of("lock:{}", "lock:"), None);
    }

    /// Redis's glob matching, enough for these patterns: `*`, `[set]` and
    /// `\\` escapes.
    fn glob(pattern: &[char], text: &[char]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some(('*', rest)) => (0..=text.len()).any(|skip| glob(rest, &text[skip..])),
            Some(('[', rest)) => {
                let end = rest.iter().position(|&c| c == ']').expect("a closed set");
                !text.is_empty()
                    && rest[..end].contains(&text[0])
                    && glob(&rest[end + 1..], &text[1..])
            }
            Some(('\\', rest)) => {
                !text.is_empty() && rest.first() == Some(&text[0]) && glob(&rest[1..], &text[1..])
            }
            Some((c, rest)) => !text.is_empty() && text[0] == *c && glob(rest, &text[1..]),
        }
    }

    fn matches(pattern: &str, key: &str) -> bool {
        let pattern: Vec<char> = pattern.chars().collect();
        let key: Vec<char> = key.chars().collect();
        glob(&pattern, &key)
    }

    #[test]
    fn the_pattern_finds_lock_keys_and_nothing_else() {
        let names = [
            "order:1", "order:2", "}odd", "}order", "a}b c", "ключ", "*x?",
        ];
        for prefix in ["", "order", "}o", "}", "ключ", "*x", "a}"] {
            let pattern = scan_pattern("lock:", prefix);
            for name in names {
                let key = LockKey::new("lock:", name).expect("a valid name");
                assert_eq!(
                    matches(&pattern, key.redis_key()),
                    name.starts_with(prefix),
                    "{pattern} on {}",
                    key.redis_key()
                );
                for other in [
                    key.fence_key().to_owned(),
                    key.holder_key(),
                    key.queue_key(),
                ] {
                    assert!(!matches(&pattern, &other), "{pattern} on {other}");
                }
            }
        }
        assert!(matches(&scan_pattern("l*k:", ""), "l*k:{a}"));
        assert!(!matches(&scan_pattern("l*k:", ""), "lock:{a}"));
    }
}
