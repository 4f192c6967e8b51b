//! The contract suite for Redlock over 3 and 5 nodes, once per compiled client.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::Arc;
use std::time::Duration;

use lock_core::{ClientKind, ConnectOptions, LockBackend, LockError, NodeUrl};
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
        Capabilities::new(false, false)
    }

    fn connect<'a>(
        &'a self,
        urls: &'a [NodeUrl],
        options: ConnectOptions,
    ) -> BoxFuture<'a, Result<Arc<dyn LockBackend>, LockError>> {
        Box::pin(async move {
            let redlock = RedlockOptions::new(Duration::from_millis(50), 0.01);
            let backend = RedlockBackend::connect(self.kind, urls, options, redlock).await?;
            Ok(Arc::new(backend) as Arc<dyn LockBackend>)
        })
    }
}

#[cfg(feature = "redis")]
mod three_nodes_on_redis {
    use super::*;
    lock_testkit::contract_suite!(Redlock {
        kind: ClientKind::Redis,
        nodes: 3
    });
}

#[cfg(feature = "redis")]
mod five_nodes_on_redis {
    use super::*;
    lock_testkit::contract_suite!(Redlock {
        kind: ClientKind::Redis,
        nodes: 5
    });
}

#[cfg(feature = "fred")]
mod three_nodes_on_fred {
    use super::*;
    lock_testkit::contract_suite!(Redlock {
        kind: ClientKind::Fred,
        nodes: 3
    });
}

#[cfg(feature = "fred")]
mod five_nodes_on_fred {
    use super::*;
    lock_testkit::contract_suite!(Redlock {
        kind: ClientKind::Fred,
        nodes: 5
    });
}
