//! The contract suite for Redlock over 3 and 5 nodes, once per compiled client.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::Arc;
use std::time::Duration;

use lock_core::{Capability, ClientKind, ConnectOptions, Endpoint, LockBackend, LockError};
use lock_redlock::{RedlockBackend, RedlockOptions};
use lock_testkit::{BackendFactory, BoxFuture, Capabilities};

/// Redlock over `nodes` servers through one client.
struct Redlock {
    kind: ClientKind,
    nodes: usize,
}

impl BackendFactory for Redlock {
    fn node_count(&self) -> usize {
        self.nodes
    }

    fn capabilities(&self) -> Capabilities {
        // Each node takes every key of a multi-key lock; no hand-off, since
        // a hold cannot be replaced on every node in one step.
        Capabilities::new(false, false).with([Capability::MultiKeys, Capability::Listing])
    }

    fn connect_endpoints<'a>(
        &'a self,
        endpoints: &'a [Endpoint],
        options: ConnectOptions,
    ) -> BoxFuture<'a, Result<Arc<dyn LockBackend>, LockError>> {
        Box::pin(async move {
            // TLS handshakes and records on a busy 2-core machine take longer
            // than a plain round trip; the node timeout must cover them.
            let tls = endpoints.iter().any(Endpoint::uses_tls);
            let node_timeout = Duration::from_millis(if tls { 250 } else { 50 });
            let redlock = RedlockOptions::new(node_timeout, 0.01);
            let backend =
                RedlockBackend::connect_endpoints(self.kind, endpoints, options, redlock).await?;
            Ok(Arc::new(backend) as Arc<dyn LockBackend>)
        })
    }
}

/// Redlock over three TLS nodes that verify clients, with each client: takes,
/// renews and releases locks, and refuses a second holder. (The whole suite
/// runs for the single-node strategies over TLS; Redlock's 50 ms node
/// timeout is too tight for TLS on a busy 2-core machine, so this check uses
/// 250 ms.) It starts TLS servers, so it runs in the build with both clients
/// and TLS, which `cargo xtask test` runs.
#[cfg(all(feature = "redis", feature = "fred", feature = "tls"))]
#[test]
fn locks_over_tls_nodes() {
    use lock_testkit::contract::{fast_config, held_by_another, Deployment};
    use lock_testkit::{OnSite, Site};
    lock_testkit::run(async {
        for kind in ClientKind::compiled() {
            let factory = OnSite::new(Redlock { kind, nodes: 3 }, Site::Tls);
            let deployment = Deployment::start(&factory).await;
            let mut config = fast_config(Duration::from_secs(2));
            config.node_timeout = Duration::from_millis(250);
            config.wait_timeout = Duration::ZERO;
            let locks = deployment.manager(config);
            for round in 0..5 {
                let guard = locks
                    .try_acquire("over-tls")
                    .await
                    .unwrap_or_else(|err| panic!("{kind} round {round}: {err}"))
                    .unwrap_or_else(|| panic!("{kind} round {round}: a free lock"));
                assert!(
                    held_by_another(&locks, "over-tls").await,
                    "{kind}: a second holder over TLS"
                );
                guard.extend(Duration::from_secs(2)).await.expect("extend");
                guard.release().await.expect("release");
            }
        }
    });
}

/// The contract suite in a module per client and node count.
macro_rules! redlock_suites {
    ($($module:ident $client:ident $feature:literal $nodes:literal),+ $(,)?) => {
        $(
            #[cfg(feature = $feature)]
            mod $module {
                use super::*;
                lock_testkit::contract_suite!(Redlock {
                    kind: ClientKind::$client,
                    nodes: $nodes
                });
            }
        )+
    };
}

redlock_suites!(
    three_nodes_on_redis Redis "redis" 3,
    five_nodes_on_redis Redis "redis" 5,
    three_nodes_on_fred Fred "fred" 3,
    five_nodes_on_fred Fred "fred" 5,
);
