//! The contract suite and the model test for the single-node strategy, once
//! per compiled client, with fencing tokens and with `fencing = false`.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::sync::Arc;

use lock_core::{
    Capability, ClientKind, ConnectOptions, Endpoint, GrantOptions, LockBackend, LockError,
};
use lock_redis_single::SingleNodeBackend;
use lock_testkit::{BackendFactory, BoxFuture, Capabilities};

/// Connects the single-node backend to the first URL through one client,
/// issuing fencing tokens or (`fencing = false`) acquiring with a plain
/// `SET NX PX`.
struct SingleNode {
    kind: ClientKind,
    fencing: bool,
}

impl SingleNode {
    fn fenced(kind: ClientKind) -> Self {
        SingleNode {
            kind,
            fencing: true,
        }
    }

    fn fencing_off(kind: ClientKind) -> Self {
        SingleNode {
            kind,
            fencing: false,
        }
    }

    async fn backend(
        &self,
        endpoint: impl Into<Endpoint>,
        options: ConnectOptions,
    ) -> Result<Arc<dyn LockBackend>, LockError> {
        let backend = SingleNodeBackend::connect(self.kind, endpoint, options)
            .await?
            .with_grant_options(GrantOptions::default().with_fencing(self.fencing));
        Ok(Arc::new(backend))
    }
}

impl BackendFactory for SingleNode {
    fn capabilities(&self) -> Capabilities {
        // Elections are declared whatever `fencing` says, so listing shows
        // leaders; the engine refuses an election's handle without fencing.
        Capabilities::new(self.fencing, false).with([
            Capability::FairQueue,
            Capability::Semaphores,
            Capability::RwLocks,
            Capability::MultiKeys,
            Capability::Elections,
            Capability::HandOff,
            Capability::Listing,
            Capability::Latches,
            Capability::Barriers,
        ])
    }

    fn connect_endpoints<'a>(
        &'a self,
        endpoints: &'a [Endpoint],
        options: ConnectOptions,
    ) -> BoxFuture<'a, Result<Arc<dyn LockBackend>, LockError>> {
        Box::pin(self.backend(&endpoints[0], options))
    }
}

/// The contract over TLS, on a Redis Cluster and behind Sentinel, with each
/// client. These
/// start more servers, so they run in one build only: the one with both
/// clients (and TLS), which `cargo xtask test` runs.
#[cfg(all(feature = "redis", feature = "fred", feature = "tls"))]
mod sites {
    use super::*;

    lock_testkit::contract_suite!(@on_sites SingleNode::fenced);

    // Fencing off changes how an acquire reaches a node (a plain SET, routed
    // by its key, and WAIT behind it), which matters on a cluster; TLS and
    // sentinels carry it as they carry a script.
    lock_testkit::contract_suite!(@on_site SingleNode::fencing_off;
        cluster_fencing_off_on_redis Redis Cluster,
        cluster_fencing_off_on_fred Fred Cluster,
    );
}

/// The contract and the reference models with one client: the fenced
/// strategy against every model, fencing off against the lock's.
macro_rules! on_client {
    ($client:ident, $fenced:ident, $fencing_off:ident) => {
        mod $fenced {
            use super::*;

            lock_testkit::contract_suite!(SingleNode::fenced(ClientKind::$client));

            #[test]
            fn matches_the_model() {
                lock_testkit::model::check_against_model(
                    &SingleNode::fenced(ClientKind::$client),
                    24,
                );
            }

            #[test]
            fn semaphore_matches_the_model() {
                lock_testkit::semaphore_model::check_semaphore_against_model(
                    &SingleNode::fenced(ClientKind::$client),
                    24,
                );
            }

            #[test]
            fn rw_lock_matches_the_model() {
                lock_testkit::rw_model::check_rw_lock_against_model(
                    &SingleNode::fenced(ClientKind::$client),
                    24,
                );
            }

            #[test]
            fn barrier_matches_the_model() {
                lock_testkit::barrier_model::check_barrier_against_model(
                    &SingleNode::fenced(ClientKind::$client),
                    64,
                );
            }

            #[test]
            fn latch_matches_the_model() {
                lock_testkit::latch_model::check_latch_against_model(
                    &SingleNode::fenced(ClientKind::$client),
                    64,
                );
            }
        }

        mod $fencing_off {
            use super::*;

            lock_testkit::contract_suite!(SingleNode::fencing_off(ClientKind::$client));

            #[test]
            fn matches_the_model() {
                let factory = SingleNode::fencing_off(ClientKind::$client);
                lock_testkit::model::check_against_model(&factory, 24);
            }
        }
    };
}

#[cfg(feature = "redis")]
on_client!(Redis, on_redis, fencing_off_on_redis);
#[cfg(feature = "fred")]
on_client!(Fred, on_fred, fencing_off_on_fred);
