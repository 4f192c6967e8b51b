//! What the benchmarks share: the floor a lock is measured against (from
//! `lock_testkit::bench`), our scripts sent raw, and the managers measured.

use std::sync::Arc;

use lock_core::strategy::scripts::single::ACQUIRE;
use lock_core::strategy::{NodeClient, Script};
use lock_core::{ClientKind, ConnectOptions, GrantOptions, LockConfig, LockManager, NodeUrl};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::bench::{cycles_per_second, release_floor, task_keys, Span, FLOOR_VALUE};
use lock_testkit::RedisServer;

pub use lock_testkit::bench::lock_floor as floor;

/// Two single-node managers on `url` through `kind`, each with its own
/// connections: fenced, and with fencing off.
pub async fn managers(
    kind: ClientKind,
    url: &NodeUrl,
    options: ConnectOptions,
) -> (LockManager, LockManager) {
    let config = LockConfig::with_nodes([url.expose().to_owned()]);
    let manager = |fencing: bool| {
        let config = config.clone();
        async move {
            let backend = SingleNodeBackend::connect(kind, url, options)
                .await
                .expect("connect ours")
                .with_grant_options(GrantOptions::default().with_fencing(fencing));
            LockManager::new(Arc::new(backend), config.with_fencing(fencing)).expect("config")
        }
    };
    (manager(true).await, manager(false).await)
}

/// One uncontended grant of `key` by `script` (`lock/acquire.lua` with the
/// default options, its holder key and five grant arguments included, or
/// `lock/acquire_token.lua`), raw, storing [`FLOOR_VALUE`].
pub async fn grant_by_script(node: &dyn NodeClient, script: &Script, key: &str) {
    let (fence, holder) = (format!("{key}:fence"), format!("{key}:holder"));
    let mut args: Vec<&[u8]> = vec![FLOOR_VALUE, b"30000"];
    let grant = GrantOptions::default().script_args();
    let mut keys = vec![key, fence.as_str()];
    if script.name() == ACQUIRE.name() {
        args.extend(grant.iter().map(String::as_bytes));
        keys.push(&holder);
    }
    let acquired = script
        .run(node, &keys, &args)
        .await
        .expect("EVALSHA acquire");
    assert_eq!(
        acquired.as_array().and_then(|reply| reply[0].as_int()),
        Some(1),
        "uncontended acquire"
    );
}

/// Our acquire and release scripts, raw through the same connection, per
/// second: the commands the lock sends with the default options (the
/// holder key and the five grant arguments included), without the lock's
/// client-side work.
pub async fn scripts(node: Arc<dyn NodeClient>, tasks: usize, span: Span) -> f64 {
    let keys = task_keys("evals", tasks);
    cycles_per_second(tasks, span, move |task| {
        let (node, keys) = (Arc::clone(&node), Arc::clone(&keys));
        async move {
            let key = &keys[task];
            grant_by_script(node.as_ref(), &ACQUIRE, key).await;
            release_floor(node.as_ref(), key).await;
        }
    })
    .await
}

/// An admin command's reply as text (empty when it is not text).
pub fn admin(server: &RedisServer, args: &[&str]) -> String {
    server
        .admin(args)
        .expect("admin command")
        .as_text()
        .unwrap_or_default()
        .to_owned()
}

/// The main thread's CPU time so far, in seconds.
pub fn main_thread_cpu(server: &RedisServer) -> f64 {
    let info = admin(server, &["INFO", "cpu"]);
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("INFO cpu without {name} (Redis 6.2 or later)"))
    };
    field("used_cpu_user_main_thread") + field("used_cpu_sys_main_thread")
}
