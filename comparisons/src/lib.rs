//! What the comparison benchmarks (`benches/`) share: the manager they
//! measure and how they print a handoff row. See `docs/BENCHMARKS.md`.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{ClientKind, ConnectOptions, LockConfig, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::RedisServer;

/// A single-node manager on `server` through `kind`, with leases of `ttl`.
pub async fn single_node_manager(
    kind: ClientKind,
    server: &RedisServer,
    ttl: Duration,
) -> LockManager {
    manager_with(kind, server, ttl, false).await
}

/// As [`single_node_manager`], in fair mode.
pub async fn fair_single_node_manager(
    kind: ClientKind,
    server: &RedisServer,
    ttl: Duration,
) -> LockManager {
    manager_with(kind, server, ttl, true).await
}

async fn manager_with(
    kind: ClientKind,
    server: &RedisServer,
    ttl: Duration,
    fair: bool,
) -> LockManager {
    let backend = SingleNodeBackend::connect(kind, &server.url(), ConnectOptions::default())
        .await
        .expect("connect");
    let config = LockConfig::with_nodes([server.url().expose().to_owned()])
        .with_ttl(ttl)
        .with_client(kind)
        .with_fair(fair);
    LockManager::new(Arc::new(backend), config).expect("config")
}

/// One row of a handoff table: `label`, the p50 and p99 of `gaps` (ms)
/// and how many there were.
pub fn print_gaps(label: &str, mut gaps: Vec<f64>) {
    if gaps.is_empty() {
        println!("| {label} | - | - | 0 |");
        return;
    }
    gaps.sort_by(f64::total_cmp);
    let at = |fraction: f64| gaps[((gaps.len() - 1) as f64 * fraction).round() as usize];
    println!(
        "| {label} | {:.2} | {:.2} | {} |",
        at(0.5),
        at(0.99),
        gaps.len()
    );
}
