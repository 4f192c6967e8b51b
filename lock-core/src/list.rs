//! Listing the held locks: a bounded `SCAN` of every node that holds the
//! backend's keys, and each lock found read with the backend's own
//! `inspect`.

use std::collections::BTreeSet;

use futures::StreamExt;

use crate::backend::LockState;
use crate::client::{NodeClient, Reply};
use crate::error::LockError;
use crate::key::LockKey;
use crate::manager::LockManager;

/// What [`LockManager::list`] looks for, and how much work it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListOptions {
    /// Only locks whose name starts with this (under the configured
    /// `key_prefix`). Default: every lock.
    pub name_prefix: String,
    /// How many keys the scan may examine in all, over every node: the sum
    /// of the `COUNT` of the `SCAN` calls sent (Redis takes it as a hint, so
    /// this is approximate). The listing says when it stopped at this limit.
    /// Default: 100,000.
    pub scan_limit: u64,
    /// The `COUNT` of one `SCAN` call. Default: 1,000.
    pub batch: u32,
}

impl Default for ListOptions {
    fn default() -> Self {
        ListOptions {
            name_prefix: String::new(),
            scan_limit: 100_000,
            batch: 1_000,
        }
    }
}

impl ListOptions {
    /// Every lock whose name starts with `prefix`, with the default limits.
    pub fn with_name_prefix(prefix: impl Into<String>) -> Self {
        ListOptions {
            name_prefix: prefix.into(),
            ..ListOptions::default()
        }
    }

    /// These options with a limit on the keys examined.
    pub fn with_scan_limit(mut self, limit: u64) -> Self {
        self.scan_limit = limit;
        self
    }
}

/// The held locks a scan found; see [`LockManager::list`].
#[derive(Debug)]
#[non_exhaustive]
pub struct LockListing {
    /// The locks found held, by name.
    pub locks: Vec<ListedLock>,
    /// How many keys the scan examined (the `COUNT` hints it sent).
    pub examined: u64,
    /// Whether the scan stopped at [`ListOptions::scan_limit`] before it had
    /// covered every node: more locks may be held.
    pub truncated: bool,
    /// The nodes that could not be scanned, each error naming its node.
    /// Their locks are missing from `locks`.
    pub failures: Vec<LockError>,
}

/// One lock in a [`LockListing`].
#[derive(Debug)]
#[non_exhaustive]
pub struct ListedLock {
    /// The lock's name, as given to `acquire`.
    pub name: String,
    /// What `inspect` read: always [`LockState::Held`] (a lock found free by
    /// then is left out of the listing), or the error that kept it from being
    /// read (a key holding foreign data, a node that failed meanwhile).
    pub state: Result<LockState, LockError>,
    /// How many fair-mode waiters are queued for it; `None` for strategies
    /// without a fair mode, and when the queue could not be read.
    pub queued: Option<u64>,
}

/// How many locks are inspected at once.
const INSPECT_CONCURRENCY: usize = 16;

impl LockManager {
    /// Lists the held locks: a `SCAN` of the lock keys on every node that
    /// holds the backend's keys (every standalone server, every master of a
    /// cluster, the master of a sentinel group; every Redlock node), bounded
    /// by `options.scan_limit`, then each name found read with
    /// [`inspect`](Self::inspect), so every strategy reports its locks as it
    /// sees them (Redlock: held by a majority). Free locks (fencing counters
    /// without a lock) are not listed. Fair-mode queues are measured with
    /// `LLEN`.
    ///
    /// It reads what is there while locks come and go: a lock taken during
    /// the scan may be missing, and one released may be listed as held.
    ///
    /// Errors: [`LockError::InvalidConfig`] for a backend that cannot list
    /// (one that names no nodes, [`LockBackend::scan_nodes`]) or a zero
    /// `batch`. A node that fails is reported in
    /// [`LockListing::failures`], not as an error, so the other nodes' locks
    /// are still listed.
    ///
    /// [`LockBackend::scan_nodes`]: crate::LockBackend::scan_nodes
    pub async fn list(&self, options: &ListOptions) -> Result<LockListing, LockError> {
        if options.batch == 0 {
            return Err(LockError::config("batch", "must be at least 1"));
        }
        let nodes = self.backend().scan_nodes();
        if nodes.is_empty() {
            return Err(LockError::config(
                "strategy",
                format!(
                    "the {} strategy does not say which nodes hold its keys, so its locks \
                     cannot be listed",
                    self.backend().strategy()
                ),
            ));
        }
        let prefix = &self.config().key_prefix;
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
        let queue_node = self
            .backend()
            .supports_fair_queue()
            .then(|| self.backend().scan_nodes().into_iter().next())
            .flatten()
            .and_then(Result::ok);
        let locks = futures::stream::iter(names)
            .map(|name| {
                let queue_node = queue_node.clone();
                async move {
                    let state = self.inspect(&name).await;
                    let queued = match (&state, queue_node) {
                        (Ok(LockState::Held { .. }), Some(node)) => {
                            self.queue_length(node.as_ref(), &name).await
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
            .filter(|lock| std::future::ready(!matches!(lock.state, Ok(LockState::Free { .. }))))
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
    async fn queue_length(&self, node: &dyn NodeClient, name: &str) -> Option<u64> {
        let key = self.key(name).ok()?;
        let queue = key.queue_key();
        match node.command("LLEN", &[queue.as_bytes()]).await {
            Ok(Reply::Int(length)) => u64::try_from(length).ok(),
            _ => None,
        }
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
/// start with `}` (see [`LockKey`]). Every other key of a lock ends in
/// `:fence`, `:holder`, `:queue` or `:waiters`, so the pattern leaves them
/// out.
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
