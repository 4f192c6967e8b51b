//! The contract suite and the model test for the single-node strategy, once
//! per compiled client.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::Arc;

use lock_core::{ClientKind, ConnectOptions, Endpoint, LockBackend, LockError, NodeUrl};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::{BackendFactory, BoxFuture, Capabilities};

/// Connects the single-node backend to the first URL through one client.
struct SingleNode(ClientKind);

impl BackendFactory for SingleNode {
    fn capabilities(&self) -> Capabilities {
        Capabilities::new(true, false)
    }

    fn connect<'a>(
        &'a self,
        urls: &'a [NodeUrl],
        options: ConnectOptions,
    ) -> BoxFuture<'a, Result<Arc<dyn LockBackend>, LockError>> {
        Box::pin(async move {
            let backend = SingleNodeBackend::connect(self.0, &urls[0], options).await?;
            Ok(Arc::new(backend) as Arc<dyn LockBackend>)
        })
    }

    fn connect_endpoints<'a>(
        &'a self,
        endpoints: &'a [Endpoint],
        options: ConnectOptions,
    ) -> BoxFuture<'a, Result<Arc<dyn LockBackend>, LockError>> {
        Box::pin(async move {
            let backend = SingleNodeBackend::connect(self.0, &endpoints[0], options).await?;
            Ok(Arc::new(backend) as Arc<dyn LockBackend>)
        })
    }
}

/// The contract over TLS, on a Redis Cluster and behind Sentinel, with each
/// client. These
/// start more servers, so they run in one build only: the one with both
/// clients (and TLS), which `cargo xtask test` runs.
#[cfg(all(feature = "redis", feature = "fred", feature = "tls"))]
mod sites {
    use super::*;

    lock_testkit::contract_suite!(@on_sites SingleNode);
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;

    lock_testkit::contract_suite!(SingleNode(ClientKind::Redis));

    #[test]
    fn matches_the_model() {
        lock_testkit::model::check_against_model(&SingleNode(ClientKind::Redis), 24);
    }
}

#[cfg(feature = "fred")]
mod on_fred {
    use super::*;

    lock_testkit::contract_suite!(SingleNode(ClientKind::Fred));

    #[test]
    fn matches_the_model() {
        lock_testkit::model::check_against_model(&SingleNode(ClientKind::Fred), 24);
    }
}
