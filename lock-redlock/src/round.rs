//! One round of a Redlock operation: the same command sent to many nodes at
//! once, replies collected as they arrive, and one deadline for the whole round
//! (every node got its command at the same moment, so a per-node timeout is a
//! deadline for all of them).
//!
//! A round is on the hot path of every acquire and release, so it allocates
//! little: the node list is shared, not copied, and a round's arguments are
//! built once by the caller and shared by the nodes' commands.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::Either;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use lock_core::strategy::NodeClient;
use lock_core::LockError;
use tokio::time::Sleep;

use crate::node::Node;

/// The texts every node's command of a round sends (the key, the hold's
/// value, the TTL), joined in one shared string: one allocation per round,
/// and a clone for each node's command is a reference count.
#[derive(Clone)]
pub(crate) struct Texts<const N: usize> {
    joined: Arc<str>,
    ends: [usize; N],
}

impl<const N: usize> Texts<N> {
    pub(crate) fn new(parts: [&str; N]) -> Self {
        let mut ends = [0; N];
        let mut length = 0;
        for (end, part) in ends.iter_mut().zip(parts) {
            length += part.len();
            *end = length;
        }
        let joined: Arc<str> = Arc::from(parts.concat());
        Texts { joined, ends }
    }

    /// The text at `index` in the order given (none past the last).
    pub(crate) fn part(&self, index: usize) -> &str {
        let start = match index {
            0 => 0,
            _ => self
                .ends
                .get(index - 1)
                .copied()
                .unwrap_or(self.joined.len()),
        };
        let end = self.ends.get(index).copied().unwrap_or(start);
        self.joined.get(start..end).unwrap_or_default()
    }

    /// The texts, in the order given.
    pub(crate) fn parts(&self) -> [&str; N] {
        let mut start = 0;
        self.ends.map(|end| {
            let part = &self.joined[start..end];
            start = end;
            part
        })
    }
}

/// A set of node indices: one word for up to 64 nodes, so that keeping
/// track of a usual deployment's nodes allocates nothing.
#[derive(Default)]
pub(crate) struct NodeSet {
    first: u64,
    rest: Vec<u64>,
}

impl NodeSet {
    pub(crate) fn insert(&mut self, node: usize) {
        let (word, bit) = (node / 64, node % 64);
        if word == 0 {
            self.first |= 1 << bit;
        } else {
            if self.rest.len() < word {
                self.rest.resize(word, 0);
            }
            self.rest[word - 1] |= 1 << bit;
        }
    }

    /// Whether `node` is in the set.
    pub(crate) fn contains(&self, node: usize) -> bool {
        let (word, bit) = (node / 64, node % 64);
        let word = match word {
            0 => Some(&self.first),
            _ => self.rest.get(word - 1),
        };
        word.is_some_and(|word| word & (1 << bit) != 0)
    }

    /// Removes `node`; whether it was there.
    fn remove(&mut self, node: usize) -> bool {
        let (word, bit) = (node / 64, node % 64);
        let word = match word {
            0 => &mut self.first,
            _ => match self.rest.get_mut(word - 1) {
                Some(word) => word,
                None => return false,
            },
        };
        let was_there = *word & (1 << bit) != 0;
        *word &= !(1 << bit);
        was_there
    }

    /// The lowest node in the set.
    fn lowest(&self) -> Option<usize> {
        std::iter::once(&self.first)
            .chain(&self.rest)
            .enumerate()
            .find(|(_, word)| **word != 0)
            .map(|(index, word)| index * 64 + word.trailing_zeros() as usize)
    }

    fn len(&self) -> usize {
        std::iter::once(&self.first)
            .chain(&self.rest)
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    fn is_empty(&self) -> bool {
        self.first == 0 && self.rest.iter().all(|word| *word == 0)
    }
}

/// A node's reply, tagged with the node's index.
pub(crate) type Tagged<T> = (usize, Result<T, LockError>);

/// Replies of one round; `F` is one node's command, tagged with its index.
pub(crate) struct Round<F> {
    pending: FuturesUnordered<F>,
    nodes: Arc<[Arc<Node>]>,
    /// The nodes asked that have neither answered nor been reported as
    /// timed out.
    waiting: NodeSet,
    /// One timer for the whole round, not one per reply awaited.
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
}

/// Starts `operation` on each node of `nodes` whose index `asked` accepts,
/// handing every node's command its index and a clone of `args` (built once;
/// make it cheap to clone, an `Arc` or [`Texts`]). A node without a connection answers at once with its last
/// connection error.
pub(crate) fn start<A, T, Op, Fut>(
    nodes: &Arc<[Arc<Node>]>,
    asked: impl Fn(usize) -> bool,
    timeout: Duration,
    args: A,
    operation: Op,
) -> Round<impl Future<Output = Tagged<T>> + Send + 'static>
where
    T: Send + 'static,
    A: Clone,
    Op: Fn(usize, Arc<dyn NodeClient>, A) -> Fut,
    Fut: Future<Output = Result<T, LockError>> + Send + 'static,
{
    let mut waiting = NodeSet::default();
    let pending = FuturesUnordered::new();
    for (index, node) in nodes.iter().enumerate() {
        if !asked(index) {
            continue;
        }
        waiting.insert(index);
        let command = match node.client() {
            Ok(client) => Either::Left(operation(index, client, args.clone())),
            Err(err) => Either::Right(futures::future::ready(Err(err))),
        };
        pending.push(command.map(move |result| (index, result)));
    }
    Round {
        pending,
        nodes: Arc::clone(nodes),
        waiting,
        deadline: Box::pin(tokio::time::sleep(timeout)),
        timeout,
    }
}

impl<T, F> Round<F>
where
    F: Future<Output = Tagged<T>> + Send + 'static,
    T: Send + 'static,
{
    /// The next reply; after the deadline, a `Timeout` for each node that has
    /// not answered. `None` once every node asked is accounted for. A reply
    /// that arrives after its node was reported as timed out is not reported.
    pub(crate) async fn next(&mut self) -> Option<Tagged<T>> {
        loop {
            if self.waiting.is_empty() {
                return None;
            }
            tokio::select! {
                biased;
                reply = self.pending.next() => {
                    let (index, result) = reply?;
                    if self.waiting.remove(index) {
                        return Some((index, result));
                    }
                }
                () = &mut self.deadline => {
                    let index = self.waiting.lowest()?;
                    self.waiting.remove(index);
                    return Some((
                        index,
                        Err(LockError::Timeout {
                            node: self.nodes[index].address().to_owned(),
                            after: self.timeout,
                        }),
                    ));
                }
            }
        }
    }

    /// How many nodes asked have neither answered nor been reported as timed
    /// out.
    pub(crate) fn undecided(&self) -> usize {
        self.waiting.len()
    }

    /// Whether every command has answered, those reported as timed out
    /// included.
    pub(crate) fn is_settled(&self) -> bool {
        self.pending.is_empty()
    }

    /// Lets the commands still in flight finish in a background task instead
    /// of dropping them: a dropped command future may not have reached its
    /// connection yet, and a release must reach every node it can.
    pub(crate) fn finish_in_background(self) {
        self.settle_in_background(|_, _| {});
    }

    /// [`Round::finish_in_background`], calling `answered` with each node's
    /// index and answer as it comes. `answered` is dropped when the last
    /// one has come, or at once when there is no runtime to finish them on.
    pub(crate) fn settle_in_background(
        self,
        mut answered: impl FnMut(usize, &Result<T, LockError>) + Send + 'static,
    ) {
        let mut pending = self.pending;
        if pending.is_empty() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                while let Some((index, result)) = pending.next().await {
                    answered(index, &result);
                }
            });
        }
    }
}

#[cfg(all(test, any(feature = "redis", feature = "fred")))]
mod tests {
    use lock_core::{ClientKind, ConnectOptions};
    use lock_testkit::RedisServer;

    use super::*;

    const TIMEOUT: Duration = Duration::from_millis(150);

    async fn ping_round(kind: ClientKind) {
        let mut servers: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start().expect("start redis-server"))
            .collect();
        let mut nodes = Vec::new();
        for server in &servers {
            let node = Node::new(server.url(), kind, ConnectOptions::default());
            node.connect().await.expect("connect");
            nodes.push(Arc::new(node));
        }
        let nodes: Arc<[Arc<Node>]> = nodes.into();
        servers[1].pause().expect("pause");
        servers[2].pause().expect("pause");

        let mut round = start(
            &nodes,
            |_| true,
            TIMEOUT,
            (),
            |_, client, _| async move { client.command("PING", &[]).await },
        );
        let (index, reply) = round.next().await.expect("the live node answers");
        assert_eq!(index, 0);
        assert_eq!(reply.expect("PONG").as_text(), Some("PONG"));
        let (first_late, reply) = round.next().await.expect("a paused node times out");
        assert!(matches!(reply, Err(LockError::Timeout { .. })), "{reply:?}");

        // The node reported as timed out answers now; its reply must not be
        // reported again, and the other paused node still counts as timed out.
        servers[first_late].resume().expect("resume");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (second_late, reply) = round.next().await.expect("the other paused node");
        assert_ne!(second_late, first_late);
        assert!(matches!(reply, Err(LockError::Timeout { .. })), "{reply:?}");
        assert!(
            round.next().await.is_none(),
            "every node is accounted for once"
        );
        for server in &mut servers {
            server.resume().expect("resume");
        }
    }

    #[cfg(feature = "redis")]
    #[tokio::test]
    async fn a_late_reply_is_not_reported_twice_redis() {
        ping_round(ClientKind::Redis).await;
    }

    #[cfg(feature = "fred")]
    #[tokio::test]
    async fn a_late_reply_is_not_reported_twice_fred() {
        ping_round(ClientKind::Fred).await;
    }

    #[test]
    fn texts_give_back_their_parts() {
        let texts = Texts::new(["lock:{a}", "", "owner:0123", "30000"]);
        assert_eq!(texts.parts(), ["lock:{a}", "", "owner:0123", "30000"]);
        assert_eq!(
            (texts.part(0), texts.part(1), texts.part(3)),
            ("lock:{a}", "", "30000")
        );
        assert_eq!(Texts::new([]).parts(), [""; 0]);
        assert_eq!(Texts::new([]).part(0), "");
    }

    #[test]
    fn long_and_multibyte_texts_are_joined_too() {
        let long = "k".repeat(300);
        let texts = Texts::new([long.as_str(), "owner:0123", "é"]);
        assert_eq!(texts.parts(), [long.as_str(), "owner:0123", "é"]);
        let clone = texts.clone();
        assert_eq!(clone.parts()[2], "é");
        assert_eq!(
            [clone.part(0), clone.part(1), clone.part(2), clone.part(3)],
            [long.as_str(), "owner:0123", "é", ""]
        );
    }

    #[test]
    fn a_node_set_holds_indices_past_one_word() {
        let mut set = NodeSet::default();
        for node in [130, 0, 3, 63, 64] {
            set.insert(node);
        }
        assert_eq!(set.len(), 5);
        assert_eq!(set.lowest(), Some(0));
        assert!(set.contains(130) && set.contains(63) && !set.contains(1));
        assert!(!set.contains(1000), "past the last word");
        assert!(set.remove(0));
        assert!(!set.remove(0), "removed once");
        assert!(!set.contains(0));
        assert_eq!(set.lowest(), Some(3));
        assert!(set.remove(3) && set.remove(63) && set.remove(64));
        assert_eq!(set.lowest(), Some(130));
        assert!(!set.remove(200), "never inserted, past the last word");
        assert!(set.remove(130));
        assert!(set.is_empty());
        assert_eq!((set.len(), set.lowest()), (0, None));
    }

    #[tokio::test]
    async fn nodes_not_asked_are_not_waited_for() {
        let kind = ClientKind::default();
        let server = RedisServer::start().expect("start redis-server");
        let node = Node::new(server.url(), kind, ConnectOptions::default());
        node.connect().await.expect("connect");
        let nodes: Arc<[Arc<Node>]> = vec![Arc::new(node)].into();
        let mut round = start(
            &nodes,
            |_| false,
            TIMEOUT,
            (),
            |_, client, _| async move { client.command("PING", &[]).await },
        );
        assert!(round.next().await.is_none());
    }
}
