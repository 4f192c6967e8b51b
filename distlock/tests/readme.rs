//! The README run as a reader copies it, against real servers: its first
//! example with concurrent duplicate requests, and (with the command) its
//! ACL rule with every verb and primitive of `distlock`. Each reads its text
//! from README.md, so the README and what is tested cannot drift apart.

#![cfg(any(feature = "redis", feature = "fred"))]

mod common;

/// The README, read when a test runs (as the packaged crate would have it).
fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    std::fs::read_to_string(path).expect("the workspace README")
}

/// The section of `markdown` under the heading `heading` (a whole line),
/// up to the next heading of the same level or higher.
fn section<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let start = markdown
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("the README has no `{heading}` section"))
        + heading.len()
        + 2;
    let rest = &markdown[start..];
    let end = rest
        .match_indices("\n#")
        .find(|(at, _)| {
            let hashes = rest[at + 1..].chars().take_while(|c| *c == '#').count();
            hashes <= level && rest[at + 1 + hashes..].starts_with(' ')
        })
        .map_or(rest.len(), |(at, _)| at + 1);
    &rest[..end]
}

/// The body of the first fenced block in `text` whose info string starts
/// with `info` (```` ```rust ```` matches ```` ```rust,no_run ````).
fn first_block<'a>(text: &'a str, info: &str) -> &'a str {
    let open = format!("```{info}");
    let start = text
        .lines()
        .scan(0, |offset, line| {
            let at = *offset;
            *offset += line.len() + 1;
            Some((at, line))
        })
        .find(|(_, line)| line.starts_with(&open))
        .map(|(at, line)| at + line.len() + 1)
        .unwrap_or_else(|| panic!("no ```{info} block"));
    let body = &text[start..];
    let end = body
        .find("\n```")
        .map(|at| at + 1)
        .unwrap_or_else(|| panic!("an unclosed ```{info} block"));
    &body[..end]
}

/// The README's first example, `charge_once`: the code below is the
/// README's block, word for word (`usage_example_is_the_tested_file`
/// checks), and runs against a real server with duplicate requests.
// `connect` reads the process environment; the test connects on its own.
#[allow(dead_code)]
mod usage {
    include!("readme/charge_once.rs");

    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use distlock::ClientKind;
    use lock_testkit::RedisServer;

    /// A payment store that counts the charges it takes and keeps the
    /// charged orders as its idempotency record.
    #[derive(Default)]
    struct Ledger {
        charges: AtomicUsize,
        charged: Mutex<HashSet<u64>>,
    }

    impl Payments for Ledger {
        async fn is_charged(&self, order_id: u64) -> bool {
            self.charged.lock().expect("ledger").contains(&order_id)
        }

        async fn charge(&self, order_id: u64, _token: Option<FencingToken>) {
            // The card network's round trip: long enough for every duplicate
            // to be waiting or checking meanwhile.
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.charges.fetch_add(1, Ordering::SeqCst);
            self.charged.lock().expect("ledger").insert(order_id);
        }
    }

    /// How many duplicates of one order arrive at once, each on a pod (a
    /// lock manager with connections) of its own.
    const DUPLICATES: usize = 6;

    /// `DUPLICATES` requests for one order through `client` charge it once.
    async fn duplicates_charge_once(client: ClientKind) {
        let server = RedisServer::start().expect("start redis-server");
        let ledger = Arc::new(Ledger::default());
        let mut pods = Vec::new();
        for _ in 0..DUPLICATES {
            let config = crate::common::config("single", [&server], client, &[]);
            pods.push(distlock::connect(&config).await.expect("connect"));
        }
        // Every request is connected before any starts, so they overlap.
        let start = Arc::new(tokio::sync::Barrier::new(DUPLICATES));
        let requests: Vec<_> = pods
            .into_iter()
            .map(|locks| {
                let (ledger, start) = (Arc::clone(&ledger), Arc::clone(&start));
                tokio::spawn(async move {
                    start.wait().await;
                    charge_once(&locks, &*ledger, 1001).await
                })
            })
            .collect();
        let mut charged_here = 0;
        for request in requests {
            let charged = request
                .await
                .expect("the request task")
                .expect("a duplicate is answered, not failed");
            charged_here += usize::from(charged);
        }
        assert_eq!(
            ledger.charges.load(Ordering::SeqCst),
            1,
            "{DUPLICATES} duplicate requests of one order through {client}: \
             the README's example must charge the card once"
        );
        assert_eq!(charged_here, 1, "one request says it charged");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn duplicate_requests_charge_once() {
        for client in crate::common::clients() {
            duplicates_charge_once(client.parse().expect("a client name")).await;
        }
    }
}

/// The code `usage` runs is the README's first Rust block under "Usage".
#[test]
fn usage_example_is_the_tested_file() {
    let readme = readme();
    let block = first_block(section(&readme, "## Usage"), "rust");
    assert_eq!(
        block,
        include_str!("readme/charge_once.rs"),
        "the README's first example and distlock/tests/readme/charge_once.rs \
         must be the same text: edit both"
    );
}
