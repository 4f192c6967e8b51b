//! Grants still on their way when an acquire returns, and the release that
//! may reach a node before them.
//!
//! An acquire returns as soon as a majority granted; the `SET`s to the other
//! nodes go on in the background. A release sent right after can reach one
//! of those nodes before its `SET`, although it was sent after it: a client
//! may hand its commands to the connection in another order than they were
//! sent. The `redis` crate's connection queue holds 50 commands; when it is
//! full, the commands waiting for room are let in by whichever task runs
//! first, and the background task that owns a `SET` may run after the
//! caller's release (seen with 16 tasks on five local nodes: up to every key
//! left behind on a node). The `SET` then lands on a key already released and
//! holds it there for the whole TTL: a released lock still counted against
//! every later acquire on that node.
//!
//! Waiting for each `SET`'s reply before sending the release there would
//! hold every release of a node that is merely slow, and the next acquire
//! would find the old grant still there. So the release goes out at once,
//! and each node's two answers are matched: a release that found nothing
//! there, and a `SET` that granted (or whose answer is unknown), mean the
//! grant landed after the release. Whichever of the two answers second then
//! deletes that grant, by this hold's value, so nothing but this grant can be
//! deleted.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lock_core::kit::scripts::single;
use lock_core::kit::{NodeClient, Reply};
use lock_core::{HoldToken, LockKey};

use crate::node::Node;
use crate::round::{Round, Tagged, Texts};

/// This node's `SET` answered after the acquire returned (only the
/// background task that sees the late `SET`s through sets it, so a node that
/// answered in time is never matched).
const SET_ANSWERED: u8 = 1;
/// It granted, or its outcome is unknown (an error or a timeout: it may
/// still have run).
const MAY_HAVE_GRANTED: u8 = 1 << 1;
/// A release of this hold has answered on this node.
const RELEASE_ANSWERED: u8 = 1 << 2;
/// That release found nothing of this hold to delete.
const RELEASE_MISSED: u8 = 1 << 3;

/// How many maps the holds in flight are split into, so that tasks
/// acquiring and releasing at once seldom wait for each other.
const SHARDS: usize = 16;

/// The holds whose grants are still in flight on some node. A hold stays
/// here until every node that had not answered when its acquire returned
/// has answered, or its command timed out in the client: with one node
/// paused, as many holds as acquires in one command timeout (tens of
/// thousands), so each shard is a map. It is keyed by a number taken from
/// the hold's random nonce ([`tag`]), so tracking a hold allocates nothing
/// but its [`Landing`] while the map has room; a hold is for one acquire, but
/// a caller of the backend may still use one on several keys, so an entry is
/// found by hold and key within its tag.
pub(crate) struct Landings {
    shards: [Mutex<InFlight>; SHARDS],
    /// See [`tag`].
    seed: u64,
}

type InFlight = HashMap<u64, Entries, BuildHasherDefault<Premixed>>;

/// The landings under one tag: almost always one.
enum Entries {
    One(Arc<Landing>),
    Many(Vec<Arc<Landing>>),
}

impl Entries {
    /// Adds `landing`, in place of an earlier one of the same key and hold:
    /// an earlier acquire with this hold, which the `HoldToken` contract
    /// rules out.
    fn put(&mut self, landing: &Arc<Landing>) {
        let (key, hold) = (landing.key(), landing.hold());
        match self {
            Entries::One(earlier) if earlier.is_of(key, hold) => *earlier = Arc::clone(landing),
            Entries::One(other) => {
                *self = Entries::Many(vec![Arc::clone(other), Arc::clone(landing)]);
            }
            Entries::Many(landings) => {
                landings.retain(|earlier| !earlier.is_of(key, hold));
                landings.push(Arc::clone(landing));
            }
        }
    }

    fn as_slice(&self) -> &[Arc<Landing>] {
        match self {
            Entries::One(landing) => std::slice::from_ref(landing),
            Entries::Many(landings) => landings,
        }
    }
}

/// A number for `key` and `hold`, from the ends of their texts (the hold's
/// random nonce, the key's name) and a seed random per process, mixed so
/// that every bit of it is spread: it picks the shard and is the map's hash
/// as it is. The key and the seed keep holds that share a nonce (one hold on
/// many keys, or hand-off tokens a caller made up) from piling up under one
/// number.
fn tag(seed: u64, key: &str, hold: &str) -> u64 {
    fn tail(text: &str) -> &[u8] {
        let bytes = text.as_bytes();
        &bytes[bytes.len().saturating_sub(16)..]
    }
    // FNV-1a over the tails, then a multiply that carries the low bits up.
    let folded = tail(hold)
        .iter()
        .chain(&[0xff])
        .chain(tail(key))
        .fold(seed ^ 0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    folded.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The hasher of a key that is already a well-mixed number ([`tag`]).
#[derive(Default)]
struct Premixed(u64);

impl Hasher for Premixed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; any other input is folded in.
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

impl Default for Landings {
    fn default() -> Self {
        Landings {
            shards: std::array::from_fn(|_| Mutex::default()),
            seed: std::hash::RandomState::new().hash_one(SHARDS),
        }
    }
}

impl fmt::Debug for Landings {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let holds: usize = self
            .shards
            .iter()
            .map(|shard| {
                shard
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner())
                    .values()
                    .map(|entries| entries.as_slice().len())
                    .sum::<usize>()
            })
            .sum();
        formatter
            .debug_struct("Landings")
            .field("holds_in_flight", &holds)
            .finish()
    }
}

impl Landings {
    fn shard(&self, tag: u64) -> MutexGuard<'_, InFlight> {
        // Bits the map does not use for its buckets or control bytes.
        self.shards[(tag >> 32) as usize % SHARDS]
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// One hold's grants still in flight, and what each node's `SET` and
/// release answered.
pub(crate) struct Landing {
    /// The acquire's texts, shared with its round: the key, the hold's
    /// value and the TTL.
    texts: Texts<3>,
    nodes: Box<[AtomicU8]>,
}

impl Landing {
    fn new(texts: Texts<3>, nodes: usize) -> Self {
        Landing {
            texts,
            nodes: (0..nodes).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    fn key(&self) -> &str {
        self.texts.part(0)
    }

    fn hold(&self) -> &str {
        self.texts.part(1)
    }

    fn is_of(&self, key: &str, hold: &str) -> bool {
        let [own_key, own_hold, _] = self.texts.parts();
        own_hold == hold && own_key == key
    }

    /// Notes `node`'s `SET` answer; true if it granted (or may have) after
    /// a release there found nothing, so the grant must be deleted now.
    fn set_answered(&self, node: usize, may_have_granted: bool) -> bool {
        let answer = SET_ANSWERED
            | if may_have_granted {
                MAY_HAVE_GRANTED
            } else {
                0
            };
        let before = self.note(node, answer);
        may_have_granted
            && before & (RELEASE_ANSWERED | RELEASE_MISSED) == RELEASE_ANSWERED | RELEASE_MISSED
    }

    /// Notes a release's answer on `node`; true if it found nothing while
    /// this hold's `SET` there has granted (or may have), so the grant landed
    /// after it and must be deleted now.
    pub(crate) fn release_answered(&self, node: usize, deleted: bool) -> bool {
        let answer = RELEASE_ANSWERED | if deleted { 0 } else { RELEASE_MISSED };
        let before = self.note(node, answer);
        !deleted && before & (SET_ANSWERED | MAY_HAVE_GRANTED) == SET_ANSWERED | MAY_HAVE_GRANTED
    }

    /// Adds `answer` to `node`'s state and returns the state before (0 for
    /// a node out of range: nothing to match).
    fn note(&self, node: usize, answer: u8) -> u8 {
        self.nodes
            .get(node)
            .map_or(0, |state| state.fetch_or(answer, Ordering::AcqRel))
    }
}

/// Deletes this hold's grant on one node, in the background: a grant that
/// landed after its own release.
pub(crate) fn delete_late_grant(client: Arc<dyn NodeClient>, key: String, hold: String) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        match single::RELEASE
            .run(client.as_ref(), &[&key], &[hold.as_bytes()])
            .await
        {
            Ok(Reply::Int(deleted)) => tracing::debug!(
                node = client.address(),
                deleted,
                "redlock grant that landed after its release deleted"
            ),
            Ok(other) => tracing::warn!(
                node = client.address(),
                reply = %other,
                "unexpected reply deleting a redlock grant that landed after its release"
            ),
            Err(err) => tracing::warn!(
                node = client.address(),
                error = %err,
                "could not delete a redlock grant that landed after its release; it expires with its TTL"
            ),
        }
    });
}

impl Landings {
    /// Lets the grants of an acquire's `round` still in flight finish in the
    /// background and, until each has answered, makes [`Landings::of`] give
    /// the [`Landing`] of the key and hold in `texts` (the acquire's: key,
    /// hold value, TTL), so a release can tell a grant that landed after it.
    pub(crate) fn track<F>(
        self: &Arc<Self>,
        texts: &Texts<3>,
        nodes: &Arc<[Arc<Node>]>,
        round: Round<F>,
    ) where
        F: Future<Output = Tagged<bool>> + Send + 'static,
    {
        if round.is_settled() {
            return;
        }
        let landing = Arc::new(Landing::new(texts.clone(), nodes.len()));
        self.register(&landing);
        let registration = Registration {
            landings: Arc::clone(self),
            landing,
        };
        let nodes = Arc::clone(nodes);
        // The registration goes with the background task and leaves the map
        // once every grant has answered, or if the task is dropped.
        round.settle_in_background(move |node, result: &Result<bool, _>| {
            // Only a definite "held" means this SET wrote nothing.
            let may_have_granted = !matches!(result, Ok(false));
            let landing = &registration.landing;
            if landing.set_answered(node, may_have_granted) {
                if let Ok(client) = nodes[node].client() {
                    delete_late_grant(client, landing.key().to_owned(), landing.hold().to_owned());
                }
            }
        });
    }

    /// Files `landing` under its hold and key, in place of an earlier one
    /// of the same hold and key.
    fn register(&self, landing: &Arc<Landing>) {
        let tag = tag(self.seed, landing.key(), landing.hold());
        match self.shard(tag).entry(tag) {
            Entry::Vacant(slot) => {
                slot.insert(Entries::One(Arc::clone(landing)));
            }
            Entry::Occupied(mut slot) => slot.get_mut().put(landing),
        }
    }

    /// Takes `landing` out, and only it: a later acquire with the same hold
    /// and key may have replaced it since.
    fn unregister(&self, landing: &Arc<Landing>) {
        let tag = tag(self.seed, landing.key(), landing.hold());
        let mut shard = self.shard(tag);
        let emptied = match shard.get_mut(&tag) {
            Some(Entries::One(entry)) => Arc::ptr_eq(entry, landing),
            Some(Entries::Many(entries)) => {
                entries.retain(|entry| !Arc::ptr_eq(entry, landing));
                entries.is_empty()
            }
            None => false,
        };
        if emptied {
            shard.remove(&tag);
            // A paused node can fill a map with a command timeout's worth of
            // holds; give that room back once they are gone.
            if shard.capacity() > 1024 && shard.len() < shard.capacity() / 4 {
                let keep = shard.len() * 2;
                shard.shrink_to(keep);
            }
        }
    }

    /// The landing of `key` and `hold`'s grants, while some are in flight.
    pub(crate) fn of(&self, key: &LockKey, hold: &HoldToken) -> Option<Arc<Landing>> {
        self.find(key.redis_key(), hold.value())
    }

    fn find(&self, key: &str, hold: &str) -> Option<Arc<Landing>> {
        let tag = tag(self.seed, key, hold);
        self.shard(tag)
            .get(&tag)?
            .as_slice()
            .iter()
            .find(|landing| landing.is_of(key, hold))
            .cloned()
    }
}

/// A hold's entry in [`Landings`], removed when dropped.
struct Registration {
    landings: Arc<Landings>,
    landing: Arc<Landing>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.landings.unregister(&self.landing);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_after_a_missed_release_is_deleted_once() {
        // The release answers first, then the SET: the SET's side deletes.
        let landing = Landing::new(Texts::new(["k", "h", "1"]), 3);
        assert!(!landing.release_answered(1, false));
        assert!(landing.set_answered(1, true));
        // The SET answers first, then the release: the release's side does.
        assert!(!landing.set_answered(2, true));
        assert!(landing.release_answered(2, false));
    }

    #[test]
    fn nothing_to_delete_otherwise() {
        let landing = Landing::new(Texts::new(["k", "h", "1"]), 3);
        // The release deleted the grant: it had landed first.
        assert!(!landing.set_answered(0, true));
        assert!(!landing.release_answered(0, true));
        // The SET was refused (the key was held): it wrote nothing.
        assert!(!landing.release_answered(1, false));
        assert!(!landing.set_answered(1, false));
        // The SET had answered before the acquire returned: nothing to match.
        assert!(!landing.release_answered(2, false));
        // A node the round never had.
        assert!(!landing.release_answered(9, false));
        assert!(!landing.set_answered(9, true));
    }

    fn holds_in_flight(landings: &Landings) -> String {
        format!("{landings:?}")
    }

    #[test]
    fn landings_are_found_by_hold_and_key_and_leave_one_by_one() {
        let landings = Landings::default();
        let landing =
            |key: &str, hold: &str| Arc::new(Landing::new(Texts::new([key, hold, "1"]), 3));
        // One hold on two keys: the same tag, two entries.
        let (a, b) = (landing("a", "owner:00ff"), landing("b", "owner:00ff"));
        let other = landing("a", "owner:ff00");
        for entry in [&a, &b, &other] {
            landings.register(entry);
        }
        assert!(Arc::ptr_eq(
            &landings.find("a", "owner:00ff").expect("a"),
            &a
        ));
        assert!(Arc::ptr_eq(
            &landings.find("b", "owner:00ff").expect("b"),
            &b
        ));
        assert!(Arc::ptr_eq(
            &landings.find("a", "owner:ff00").expect("other"),
            &other
        ));
        assert!(landings.find("c", "owner:00ff").is_none());
        assert!(landings.find("a", "owner:0000").is_none());
        assert!(holds_in_flight(&landings).contains("holds_in_flight: 3"));

        // The same hold and key again replaces the earlier entry, whose own
        // unregistering then leaves the newer one in place.
        let again = landing("a", "owner:00ff");
        landings.register(&again);
        assert!(Arc::ptr_eq(
            &landings.find("a", "owner:00ff").expect("again"),
            &again
        ));
        landings.unregister(&a);
        assert!(Arc::ptr_eq(
            &landings.find("a", "owner:00ff").expect("kept"),
            &again
        ));

        for entry in [&again, &b, &other] {
            landings.unregister(entry);
        }
        assert!(landings.find("b", "owner:00ff").is_none());
        assert!(holds_in_flight(&landings).contains("holds_in_flight: 0"));
        assert!(landings
            .shards
            .iter()
            .all(|shard| shard.lock().expect("shard").is_empty()));
    }

    #[test]
    fn a_replaced_landing_leaves_without_its_replacement() {
        let landings = Landings::default();
        let (first, second) = (
            Arc::new(Landing::new(Texts::new(["k", "h", "1"]), 1)),
            Arc::new(Landing::new(Texts::new(["k", "h", "1"]), 1)),
        );
        // Alone under its number: the entry is held inline and replaced.
        landings.register(&first);
        landings.register(&second);
        landings.unregister(&first);
        let found = landings.find("k", "h").expect("the replacement stays");
        assert!(Arc::ptr_eq(&found, &second));
        landings.unregister(&second);
        assert!(landings.find("k", "h").is_none());
    }

    #[test]
    fn one_hold_on_many_keys_spreads_too() {
        let mut used = [0usize; SHARDS];
        for name in 0..1024u32 {
            let key = format!("lock:{{name-{name}}}");
            used[(tag(7, &key, "owner:0000000000000000") >> 32) as usize % SHARDS] += 1;
        }
        assert!(
            used.iter().all(|&count| (32..=96).contains(&count)),
            "{used:?}"
        );
        assert_ne!(tag(1, "k", "h"), tag(2, "k", "h"), "the seed counts");
    }

    #[test]
    fn tags_spread_holds_over_the_shards() {
        let mut used = [0usize; SHARDS];
        for nonce in 0..1024u32 {
            let hold = format!("owner:{nonce:016x}");
            used[(tag(7, "lock:{a}", &hold) >> 32) as usize % SHARDS] += 1;
        }
        // 64 per shard on average; a poor mix would leave some empty.
        assert!(
            used.iter().all(|&count| (32..=96).contains(&count)),
            "{used:?}"
        );
    }

    #[test]
    fn an_unknown_outcome_counts_as_a_grant() {
        let landing = Landing::new(Texts::new(["k", "h", "1"]), 1);
        assert!(!landing.release_answered(0, false));
        assert!(
            landing.set_answered(0, true),
            "a timed-out SET may have run"
        );
    }
}
