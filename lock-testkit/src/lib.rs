//! Test tools for lock strategies, on real Redis servers: no mocks.
//!
//! - [`RedisServer`] starts `redis-server` (from `$REDIS_SERVER` or `PATH`) on a
//!   free loopback port without persistence, pauses, resumes, kills and
//!   restarts it, and kills it when dropped; optionally with TLS
//!   ([`TlsFiles`]: a CA and certificates made at test time), as a replica,
//!   or in cluster mode.
//! - [`RedisCluster`] starts a Redis Cluster (masters and replicas, made with
//!   `redis-cli --cluster create`), kills a slot's master and waits for the
//!   failover, and moves slots between masters, in one step or two.
//! - [`SentinelGroup`] starts a master, its replicas and the sentinels that
//!   watch them, and fails the master over on request or after a kill -9.
//!   [`SentinelStandIn`] answers as a sentinel with a master the test
//!   switches at the instant it chooses.
//! - [`contract`] holds the checks every strategy must pass, and
//!   [`contract_suite!`] turns them into tests for one strategy and client.
//! - [`safety`] holds the checks that no sequence of calls (stale guards,
//!   lost or reordered replies, cancelled futures, least-privilege users)
//!   yields two valid holders or an orphaned key; [`contract_suite!`] runs
//!   them too.
//! - [`model`] runs random operation sequences against a reference model.
//! - [`semaphore_model`] does the same for a strategy's semaphores.
//! - [`rw_model`] does the same for a strategy's read-write locks.
//! - [`latch_model`] does the same for a strategy's count-down latches.
//! - [`barrier_model`] does the same for a strategy's barriers.
//! - [`DelayProxy`] puts a fixed delay between a client and a server: a slow
//!   node rather than a dead one; or, partitioned, a node that accepts and
//!   never answers.
//! - [`env`](mod@env) writes the `DISTLOCK_*` variables of a config over started
//!   servers, for the front door's and the command's tests.
//! - [`faulty::Faulty`] wraps a backend to delay or lose a call's reply.
//! - [`peek`] reads what a server holds beside the client under test, and
//!   [`waiters`] runs waiters and waits for them to get into position;
//!   [`client_tests!`] turns a strategy's own checks into one test per
//!   client.

// docs.rs builds with `--cfg docsrs` (see Cargo.toml) on nightly, where this
// marks each item that needs a cargo feature with that feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod barrier_model;
pub mod bench;
mod cluster;
pub mod contract;
pub mod env;
pub mod faulty;
pub mod latch_model;
pub mod model;
pub mod peek;
pub mod primitives;
mod proxy;
pub mod rw_model;
pub mod safety;
pub mod semaphore_model;
mod sentinel;
mod server;
mod standin;
mod support;
mod tls;
pub mod waiters;

pub use cluster::{RedisCluster, RedisClusterBuilder, SlotMigration, CLUSTER_SLOTS};
pub use contract::{BackendFactory, Capabilities, Deployment, OnSite, Site};
/// The boxed future a [`BackendFactory`] returns.
pub use futures::future::BoxFuture;
pub use proxy::DelayProxy;
pub use sentinel::{Sentinel, SentinelGroup, SentinelGroupBuilder};
pub use server::{
    find_redis_cli, find_redis_server, free_port, AdminReply, LoggedScript, RedisServer,
    RedisServerBuilder, REDIS_CLI_ENV, REDIS_SERVER_ENV,
};
pub use standin::SentinelStandIn;
pub use tls::TlsFiles;

use std::future::Future;
use std::time::Duration;

use lock_core::ClientKind;

/// The longest any single check may run before it is failed.
pub const CHECK_TIME_LIMIT: Duration = Duration::from_secs(60);

/// Runs an async check on a fresh two-thread runtime, failing it if it runs
/// past [`CHECK_TIME_LIMIT`]. Logs go to the test output when `RUST_LOG` is set.
pub fn run<F: Future<Output = ()>>(check: F) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        if tokio::time::timeout(CHECK_TIME_LIMIT, check).await.is_err() {
            panic!("the check ran past {CHECK_TIME_LIMIT:?}");
        }
    });
}

/// Runs `check` once per client compiled in, on one `redis-server` started
/// for them, through [`run`]: a check that runs the same steps on each
/// client, each with its own names on the server.
pub fn on_every_client(check: impl AsyncFn(&RedisServer, ClientKind)) {
    run(async {
        let server = RedisServer::start().expect("start redis-server");
        for kind in ClientKind::compiled() {
            check(&server, kind).await;
        }
    });
}

/// Waits for a fact, not a time: calls `probe` every 10 ms until it returns
/// `Some`, and returns that value. Panics naming `what` once `timeout` has
/// passed without it, so a check that waits for a waiter to get in line (a
/// queue's length, a subscriber count) fails with what it waited for.
///
/// ```no_run
/// # async fn check(server: &lock_testkit::RedisServer) {
/// use std::time::Duration;
///
/// let queued = lock_testkit::eventually(Duration::from_secs(2), "a waiter in line", || async {
///     let length = server.admin(&["LLEN", "lock:{job}:queue"]).ok()?.as_int()?;
///     (length == 1).then_some(length)
/// })
/// .await;
/// # }
/// ```
pub async fn eventually<T, P, F>(timeout: Duration, what: &str, mut probe: P) -> T
where
    P: FnMut() -> F,
    F: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Expands to one `#[test]` per contract check, each calling the check with
/// the factory expression (evaluated afresh per test).
///
/// `contract_suite!(@on_sites Make)`, where `Make(ClientKind)` builds a
/// factory, runs the checks that leave their servers running over TLS, on
/// a cluster and behind a sentinel, with each client, in modules of their own.
///
/// ```text
/// mod single_on_redis {
///     lock_testkit::contract_suite!(MyFactory::new(ClientKind::Redis));
/// }
/// ```
///
/// # One list
///
/// The checks are listed once, in this macro's `@list` arm, by the module
/// that holds them ([`contract`], [`safety`], [`primitives`]); every test
/// it makes is generated from that list. A check on the list that does not
/// exist fails the build of every suite. A check that exists and is not on
/// the list fails lock-testkit's own test `every_check_is_in_the_suite`,
/// which reads the crate's sources and asserts that every
/// `async fn name(factory: &dyn BackendFactory)` in them, public or not, in
/// any module, is listed exactly once: a check is that signature, so no
/// check can be written and never run.
#[macro_export]
macro_rules! contract_suite {
    ($factory:expr) => {
        $crate::contract_suite!(@list @all ($factory));
    };
    // The checks that leave their servers running, on every site.
    (@every_site $factory:expr) => {
        $crate::contract_suite!(@list @every_site_only ($factory));
    };
    (@on_sites $make:path) => {
        $crate::contract_suite!(@on_site $make;
            tls_on_redis Redis Tls,
            tls_on_fred Fred Tls,
            cluster_on_redis Redis Cluster,
            cluster_on_fred Fred Cluster,
            sentinel_on_redis Redis Sentinel,
            sentinel_on_fred Fred Sentinel,
        );
    };
    (@on_site $make:path; $($module:ident $client:ident $site:ident),+ $(,)?) => {
        $(
            mod $module {
                use super::*;
                $crate::contract_suite!(@every_site $crate::OnSite::new(
                    $make(lock_core::ClientKind::$client),
                    $crate::Site::$site
                ));
            }
        )+
    };
    // The one list of checks, handed to the arm `$then` after `$args`:
    // `module { check, ... }` per module of the crate that holds checks.
    (@list @$then:ident $args:tt) => {
        $crate::contract_suite! {@$then $args;
            every_site {
                contract {
                    mutual_exclusion,
                    only_owner_can_release_or_extend,
                    expiry_frees_the_key,
                    extend_keeps_the_key,
                    fencing_tokens_increase,
                    watchdog_keeps_the_lease,
                    watchdog_reports_a_deleted_key,
                    watchdog_reports_an_overwritten_key,
                    loss_at_deadline_without_watchdog,
                    recovers_after_script_flush,
                    dropped_guard_releases,
                    with_lock_reports_loss,
                    inspect_reports_state,
                    list_finds_held_locks,
                    force_release_frees_the_key,
                    reentry_follows_capability,
                    waiters_wake_on_release,
                    waiters_of_a_crashed_holder_acquire_after_its_ttl,
                    polling_mode_hands_over,
                }
                safety {
                    deadline_follows_the_last_ttl_set,
                    a_stray_shorter_extend_bounds_later_deadlines,
                    a_shortening_extend_in_flight_bounds_the_deadline,
                    stale_guard_spares_a_newer_hold,
                    foreign_counter_writes_nothing,
                }
                primitives {
                    semaphore_never_exceeds_its_limit,
                    semaphore_weight_returns_after_a_crash,
                    rw_lock_excludes_writers_and_frees_dead_readers,
                    multi_lock_is_all_or_nothing,
                    election_has_one_leader_at_a_time,
                    latch_opens_exactly_at_zero,
                    barrier_opens_with_every_party_in,
                }
            }
            // Checks of the client, config and hand-off paths, which no
            // site changes (and some that stop their server): once, on a
            // standalone server.
            standalone_only {
                contract {
                    capabilities_are_declared,
                    abandoned_acquire_leaves_no_holder,
                    bad_input_is_rejected,
                    server_down_is_a_clear_error,
                    reconnects_after_restart,
                    bad_credentials_and_urls_are_rejected,
                    handed_off_lease_resumes_elsewhere,
                    resume_spends_the_token,
                    resume_refuses_what_it_does_not_hold,
                    max_hold_ends_renewal,
                }
                safety {
                    lost_reply_cleanup_spares_the_retry,
                    least_privilege_user_locks,
                    abandoned_commands_leave_nothing_behind,
                }
            }
        }
    };
    (@all ($factory:expr); every_site { $($every:tt)* } standalone_only { $($once:tt)* }) => {
        $crate::contract_suite!(@tests $factory; $($every)*);
        $crate::contract_suite!(@tests $factory; $($once)*);
    };
    (@every_site_only ($factory:expr); every_site { $($every:tt)* } standalone_only { $($once:tt)* }) => {
        $crate::contract_suite!(@tests $factory; $($every)*);
    };
    // Every check listed, as `(module, check)`: for the test that asserts
    // the list is complete.
    (@names (); every_site { $($every:tt)* } standalone_only { $($once:tt)* }) => {
        $crate::contract_suite!(@pairs $($every)* $($once)*)
    };
    (@pairs $($module:ident { $($check:ident),* $(,)? })*) => {
        [$($((stringify!($module), stringify!($check)),)*)*]
    };
    (@tests $factory:expr; $($module:ident { $($check:ident),* $(,)? })*) => {
        $($(
            #[test]
            fn $check() {
                let factory = $factory;
                $crate::run(async move { $crate::$module::$check(&factory).await });
            }
        )*)*
    };
}

/// Expands to one `#[test]` per check and client: `mod on_redis` and
/// `mod on_fred`, each under the calling crate's cargo feature of that
/// name, with a test per check that runs `check(ClientKind::…)` (an async
/// fn of the module the macro stands in) through [`run`].
///
/// ```text
/// async fn a_waiter_is_served(kind: ClientKind) { ... }
/// async fn bad_input_is_refused(kind: ClientKind) { ... }
///
/// lock_testkit::client_tests!(a_waiter_is_served, bad_input_is_refused);
/// ```
///
/// The checks are the calling module's private functions, so one written
/// and left off the list is dead code: the build warns, and the clippy gate
/// (`-D warnings`) fails.
#[macro_export]
macro_rules! client_tests {
    (@client $client:ident; $($check:ident),+) => {
        $(
            #[test]
            fn $check() {
                $crate::run(super::$check(lock_core::ClientKind::$client));
            }
        )+
    };
    ($($check:ident),+ $(,)?) => {
        #[cfg(feature = "redis")]
        mod on_redis {
            $crate::client_tests!(@client Redis; $($check),+);
        }
        #[cfg(feature = "fred")]
        mod on_fred {
            $crate::client_tests!(@client Fred; $($check),+);
        }
    };
}

#[cfg(test)]
mod eventually_tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    fn eventually_returns_the_first_value_the_probe_gives() {
        super::run(async {
            let calls = AtomicU32::new(0);
            let started = Instant::now();
            let value = super::eventually(Duration::from_secs(2), "the third call", || async {
                let call = calls.fetch_add(1, Ordering::SeqCst) + 1;
                (call == 3).then_some(call * 10)
            })
            .await;
            assert_eq!(value, 30);
            assert_eq!(calls.load(Ordering::SeqCst), 3, "probed after its value");
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{:?}",
                started.elapsed()
            );
        });
    }
}

#[cfg(test)]
mod suite_tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    /// The names of the checks in `source`: every `async fn` (of any
    /// visibility) whose one parameter is a `BackendFactory` and which
    /// returns nothing, however rustfmt wrapped its signature.
    fn checks_in(source: &str) -> Vec<String> {
        let mut checks = Vec::new();
        let mut rest = source;
        while let Some(at) = rest.find("async fn ") {
            let line_start = rest[..at].rfind('\n').map_or(0, |newline| newline + 1);
            let before = rest[line_start..at].trim();
            let signature = &rest[at + "async fn ".len()..];
            rest = signature;
            // A comment or a string that mentions one is not a definition.
            if !matches!(before, "" | "pub" | "pub(crate)" | "pub(super)") {
                continue;
            }
            let (Some(open), Some(close)) = (signature.find('('), signature.find(')')) else {
                continue;
            };
            // Its name, generics and parameters; then up to its body.
            let head = &signature[..close];
            let tail = signature[close + 1..]
                .find('{')
                .map_or("", |brace| &signature[close + 1..close + 1 + brace]);
            let name_end = head.find(['<', '(']).unwrap_or(open);
            let parameters = head[open + 1..].trim().trim_end_matches(',');
            let takes_a_factory =
                head.contains("BackendFactory") || tail.contains("BackendFactory");
            if takes_a_factory && !parameters.contains(',') && !tail.contains("->") {
                checks.push(head[..name_end].trim().to_owned());
            }
        }
        checks
    }

    /// Every `.rs` file under `dir`, with its module name (its file stem).
    fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let module = path
                    .file_stem()
                    .and_then(|stem| stem.to_str())
                    .expect("a file name")
                    .to_owned();
                let text = std::fs::read_to_string(&path).expect("read a source file");
                out.push((module, text));
            }
        }
    }

    #[test]
    fn the_scan_finds_checks_however_they_are_written() {
        // Spelt with a stand-in, or the scan of this file would find them.
        let source = "\
/// A doc line: ASYNC in_a_comment(factory: &dyn BackendFactory) {}
pub ASYNC plain(factory: &dyn BackendFactory) {
pub(crate) ASYNC wrapped(
    factory: &dyn BackendFactory,
) {
ASYNC private(factory: &dyn crate::BackendFactory) {
pub ASYNC generic<F: BackendFactory>(factory: &F) {
pub ASYNC helper(factory: &dyn BackendFactory, cases: u32) {
pub ASYNC start(factory: &dyn BackendFactory) -> Self {
pub ASYNC other(locks: &LockManager) {
"
        .replace("ASYNC", "async fn");
        assert_eq!(
            checks_in(&source),
            ["plain", "wrapped", "private", "generic"]
        );
    }

    /// A check written but not listed in `contract_suite!` would never run:
    /// every check in the crate's sources is listed, once, under the module
    /// that holds it, and nothing else is.
    #[test]
    fn every_check_is_in_the_suite() {
        let listed: Vec<(&str, &str)> = crate::contract_suite!(@list @names ()).to_vec();
        let listed_set: BTreeSet<(String, String)> = listed
            .iter()
            .map(|&(module, check)| (module.to_owned(), check.to_owned()))
            .collect();
        assert_eq!(listed_set.len(), listed.len(), "a check listed twice");
        let mut files = Vec::new();
        sources(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let found: BTreeSet<(String, String)> = files
            .iter()
            .flat_map(|(module, text)| {
                checks_in(text)
                    .into_iter()
                    .map(move |check| (module.clone(), check))
            })
            .collect();
        let unlisted: Vec<_> = found.difference(&listed_set).collect();
        let missing: Vec<_> = listed_set.difference(&found).collect();
        assert!(
            unlisted.is_empty(),
            "checks not in contract_suite!'s list, so never run: {unlisted:?}"
        );
        assert!(
            missing.is_empty(),
            "listed in contract_suite! but not found as checks: {missing:?}"
        );
    }
}
