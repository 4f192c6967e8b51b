//! One round of a Redlock operation: the same command sent to many nodes at
//! once, replies collected as they arrive, and one deadline for the whole round
//! (every node got its command at the same moment, so a per-node timeout is a
//! deadline for all of them).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use lock_core::client::NodeClient;
use lock_core::LockError;
use tokio::time::Sleep;

use crate::node::Node;

/// Replies of one round, tagged with the node's index.
pub(crate) struct Round<T> {
    pending: FuturesUnordered<BoxFuture<'static, (usize, Result<T, LockError>)>>,
    nodes: Vec<(usize, Arc<Node>)>,
    answered: Vec<usize>,
    /// One timer for the whole round, not one per reply awaited.
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
}

impl<T: Send + 'static> Round<T> {
    /// Starts `operation` on each of `nodes` (index, node). A node without a
    /// connection answers at once with its last connection error.
    pub(crate) fn start<F, Fut>(
        nodes: Vec<(usize, Arc<Node>)>,
        timeout: Duration,
        operation: F,
    ) -> Self
    where
        F: Fn(Arc<dyn NodeClient>) -> Fut,
        Fut: Future<Output = Result<T, LockError>> + Send + 'static,
    {
        let pending = nodes
            .iter()
            .map(|(index, node)| {
                let index = *index;
                match node.client() {
                    Ok(client) => operation(client).map(move |result| (index, result)).boxed(),
                    Err(err) => futures::future::ready((index, Err(err))).boxed(),
                }
            })
            .collect();
        Round {
            pending,
            nodes,
            answered: Vec::new(),
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
        }
    }

    /// The next reply; after the deadline, a `Timeout` for each node that has
    /// not answered. `None` once every node is accounted for.
    pub(crate) async fn next(&mut self) -> Option<(usize, Result<T, LockError>)> {
        if self.answered.len() == self.nodes.len() {
            return None;
        }
        let reply = tokio::select! {
            biased;
            reply = self.pending.next() => Some(reply),
            () = &mut self.deadline => None,
        };
        match reply {
            Some(Some((index, result))) => {
                self.answered.push(index);
                Some((index, result))
            }
            Some(None) => None,
            None => {
                let (index, node) = self
                    .nodes
                    .iter()
                    .find(|(index, _)| !self.answered.contains(index))?;
                self.answered.push(*index);
                Some((
                    *index,
                    Err(LockError::Timeout {
                        node: node.address().to_owned(),
                        after: self.timeout,
                    }),
                ))
            }
        }
    }

    /// Lets the commands still in flight finish in a background task instead
    /// of dropping them: a dropped command future may not have reached its
    /// connection yet, and a release must reach every node it can.
    pub(crate) fn finish_in_background(self) {
        let mut pending = self.pending;
        if pending.is_empty() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { while pending.next().await.is_some() {} });
        }
    }
}
