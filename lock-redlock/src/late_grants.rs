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
//! caller's release. The `SET` then lands on a key already released and
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
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lock_core::strategy::scripts::{multi, single};
use lock_core::strategy::{NodeClient, Reply};
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

/// The holds whose grants are still in flight on some node. A hold stays
/// here until every node that had not answered when its acquire returned
/// has answered, or its command timed out in the client: with one node
/// paused, as many holds as acquires in one command timeout (tens of
/// thousands), so it is a map, keyed by a number of the hold and key
/// ([`LateGrants::tag`]); a hold is for one acquire, but a caller of the
/// backend may still use one on several keys, so an entry is found by hold
/// and key within its number.
pub(crate) struct LateGrants {
    in_flight: Mutex<HashMap<u64, Entries>>,
    /// Numbers a hold and key ([`LateGrants::tag`]), seeded per process so
    /// that holds a caller made up cannot pile up under one number.
    numbers: RandomState,
}

/// The landings under one tag: almost always one.
enum Entries {
    One(Arc<LateGrant>),
    Many(Vec<Arc<LateGrant>>),
}

impl Entries {
    /// Adds `landing`, in place of an earlier one of the same key and hold:
    /// an earlier acquire with this hold, which the `HoldToken` contract
    /// rules out.
    fn put(&mut self, grant: &Arc<LateGrant>) {
        let (key, hold) = (grant.key(), grant.hold());
        match self {
            Entries::One(earlier) if earlier.is_of(key, hold) => *earlier = Arc::clone(grant),
            Entries::One(other) => {
                *self = Entries::Many(vec![Arc::clone(other), Arc::clone(grant)]);
            }
            Entries::Many(late_grants) => {
                late_grants.retain(|earlier| !earlier.is_of(key, hold));
                late_grants.push(Arc::clone(grant));
            }
        }
    }

    fn as_slice(&self) -> &[Arc<LateGrant>] {
        match self {
            Entries::One(grant) => std::slice::from_ref(grant),
            Entries::Many(late_grants) => late_grants,
        }
    }
}

impl Default for LateGrants {
    fn default() -> Self {
        LateGrants {
            in_flight: Mutex::default(),
            numbers: RandomState::new(),
        }
    }
}

impl fmt::Debug for LateGrants {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let holds: usize = self
            .lock()
            .values()
            .map(|entries| entries.as_slice().len())
            .sum();
        formatter
            .debug_struct("LateGrants")
            .field("holds_in_flight", &holds)
            .finish()
    }
}

impl LateGrants {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Entries>> {
        self.in_flight
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The number `key` and `hold` are filed under; holds that share it
    /// are told apart by [`LateGrant::is_of`].
    fn tag(&self, key: &str, hold: &str) -> u64 {
        self.numbers.hash_one((key, hold))
    }
}

/// One hold's grants still in flight, and what each node's `SET` and
/// release answered.
pub(crate) struct LateGrant {
    /// The acquire's texts, shared with its round: the key, the hold's
    /// value and the TTL.
    texts: Texts<3>,
    /// A multi-key hold's member keys (the first is `texts`' key): a late
    /// grant of it set them all, and is deleted whole.
    members: Option<Arc<[String]>>,
    nodes: Box<[AtomicU8]>,
}

impl LateGrant {
    fn new(texts: Texts<3>, members: Option<Arc<[String]>>, nodes: usize) -> Self {
        LateGrant {
            texts,
            members,
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
pub(crate) fn delete_late_grant(
    client: Arc<dyn NodeClient>,
    key: String,
    members: Option<Arc<[String]>>,
    hold: String,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let deleted = match &members {
            Some(members) => {
                let keys: Vec<&str> = members.iter().map(String::as_str).collect();
                multi::RELEASE
                    .run(client.as_ref(), &keys, &[hold.as_bytes()])
                    .await
            }
            None => {
                single::RELEASE
                    .run(client.as_ref(), &[&key], &[hold.as_bytes()])
                    .await
            }
        };
        match deleted {
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

impl LateGrants {
    /// Lets the grants of an acquire's `round` still in flight finish in the
    /// background and, until each has answered, makes [`LateGrants::of`] give
    /// the [`LateGrant`] of the key and hold in `texts` (the acquire's: key,
    /// hold value, TTL), so a release can tell a grant that landed after it.
    pub(crate) fn track<F>(
        self: &Arc<Self>,
        texts: &Texts<3>,
        members: Option<Arc<[String]>>,
        nodes: &Arc<[Arc<Node>]>,
        round: Round<F>,
    ) where
        F: Future<Output = Tagged<bool>> + Send + 'static,
    {
        if round.is_settled() {
            return;
        }
        let grant = Arc::new(LateGrant::new(texts.clone(), members, nodes.len()));
        self.register(&grant);
        let registration = Registration {
            late_grants: Arc::clone(self),
            grant,
        };
        let nodes = Arc::clone(nodes);
        // The registration goes with the background task and leaves the map
        // once every grant has answered, or if the task is dropped.
        round.settle_in_background(move |node, result: &Result<bool, _>| {
            // Only a definite "held" means this SET wrote nothing.
            let may_have_granted = !matches!(result, Ok(false));
            let grant = &registration.grant;
            if grant.set_answered(node, may_have_granted) {
                if let Ok(client) = nodes[node].client() {
                    delete_late_grant(
                        client,
                        grant.key().to_owned(),
                        grant.members.clone(),
                        grant.hold().to_owned(),
                    );
                }
            }
        });
    }

    /// Files `landing` under its hold and key, in place of an earlier one
    /// of the same hold and key.
    fn register(&self, grant: &Arc<LateGrant>) {
        let tag = self.tag(grant.key(), grant.hold());
        match self.lock().entry(tag) {
            Entry::Vacant(slot) => {
                slot.insert(Entries::One(Arc::clone(grant)));
            }
            Entry::Occupied(mut slot) => slot.get_mut().put(grant),
        }
    }

    /// Takes `landing` out, and only it: a later acquire with the same hold
    /// and key may have replaced it since.
    fn unregister(&self, grant: &Arc<LateGrant>) {
        let tag = self.tag(grant.key(), grant.hold());
        let mut in_flight = self.lock();
        let emptied = match in_flight.get_mut(&tag) {
            Some(Entries::One(entry)) => Arc::ptr_eq(entry, grant),
            Some(Entries::Many(entries)) => {
                entries.retain(|entry| !Arc::ptr_eq(entry, grant));
                entries.is_empty()
            }
            None => false,
        };
        if emptied {
            in_flight.remove(&tag);
            // A paused node can fill the map with a command timeout's worth
            // of holds; give that room back once they are gone.
            if in_flight.capacity() > 1024 && in_flight.len() < in_flight.capacity() / 4 {
                let keep = in_flight.len() * 2;
                in_flight.shrink_to(keep);
            }
        }
    }

    /// The landing of `key` and `hold`'s grants, while some are in flight.
    pub(crate) fn of(&self, key: &LockKey, hold: &HoldToken) -> Option<Arc<LateGrant>> {
        self.find(key.redis_key(), hold.value())
    }

    fn find(&self, key: &str, hold: &str) -> Option<Arc<LateGrant>> {
        let tag = self.tag(key, hold);
        self.lock()
            .get(&tag)?
            .as_slice()
            .iter()
            .find(|grant| grant.is_of(key, hold))
            .cloned()
    }
}

/// A hold's entry in [`LateGrants`], removed when dropped.
struct Registration {
    late_grants: Arc<LateGrants>,
    grant: Arc<LateGrant>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.late_grants.unregister(&self.grant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_after_a_missed_release_is_deleted_once() {
        // The release answers first, then the SET: the SET's side deletes.
        let grant = LateGrant::new(Texts::new(["k", "h", "1"]), None, 3);
        assert!(!grant.release_answered(1, false));
        assert!(grant.set_answered(1, true));
        // The SET answers first, then the release: the release's side does.
        assert!(!grant.set_answered(2, true));
        assert!(grant.release_answered(2, false));
    }

    #[test]
    fn nothing_to_delete_otherwise() {
        let grant = LateGrant::new(Texts::new(["k", "h", "1"]), None, 3);
        // The release deleted the grant: it had landed first.
        assert!(!grant.set_answered(0, true));
        assert!(!grant.release_answered(0, true));
        // The SET was refused (the key was held): it wrote nothing.
        assert!(!grant.release_answered(1, false));
        assert!(!grant.set_answered(1, false));
        // The SET had answered before the acquire returned: nothing to match.
        assert!(!grant.release_answered(2, false));
        // A node the round never had.
        assert!(!grant.release_answered(9, false));
        assert!(!grant.set_answered(9, true));
    }

    fn holds_in_flight(late_grants: &LateGrants) -> String {
        format!("{late_grants:?}")
    }

    #[test]
    fn landings_are_found_by_hold_and_key_and_leave_one_by_one() {
        let late_grants = LateGrants::default();
        let grant =
            |key: &str, hold: &str| Arc::new(LateGrant::new(Texts::new([key, hold, "1"]), None, 3));
        // One hold on two keys: the same tag, two entries.
        let (a, b) = (grant("a", "owner:00ff"), grant("b", "owner:00ff"));
        let other = grant("a", "owner:ff00");
        for entry in [&a, &b, &other] {
            late_grants.register(entry);
        }
        assert!(Arc::ptr_eq(
            &late_grants.find("a", "owner:00ff").expect("a"),
            &a
        ));
        assert!(Arc::ptr_eq(
            &late_grants.find("b", "owner:00ff").expect("b"),
            &b
        ));
        assert!(Arc::ptr_eq(
            &late_grants.find("a", "owner:ff00").expect("other"),
            &other
        ));
        assert!(late_grants.find("c", "owner:00ff").is_none());
        assert!(late_grants.find("a", "owner:0000").is_none());
        assert!(holds_in_flight(&late_grants).contains("holds_in_flight: 3"));

        // The same hold and key again replaces the earlier entry, whose own
        // unregistering then leaves the newer one in place.
        let again = grant("a", "owner:00ff");
        late_grants.register(&again);
        assert!(Arc::ptr_eq(
            &late_grants.find("a", "owner:00ff").expect("again"),
            &again
        ));
        late_grants.unregister(&a);
        assert!(Arc::ptr_eq(
            &late_grants.find("a", "owner:00ff").expect("kept"),
            &again
        ));

        for entry in [&again, &b, &other] {
            late_grants.unregister(entry);
        }
        assert!(late_grants.find("b", "owner:00ff").is_none());
        assert!(holds_in_flight(&late_grants).contains("holds_in_flight: 0"));
        assert!(late_grants.lock().is_empty());
    }

    #[test]
    fn a_replaced_landing_leaves_without_its_replacement() {
        let late_grants = LateGrants::default();
        let (first, second) = (
            Arc::new(LateGrant::new(Texts::new(["k", "h", "1"]), None, 1)),
            Arc::new(LateGrant::new(Texts::new(["k", "h", "1"]), None, 1)),
        );
        // Alone under its number: the entry is held inline and replaced.
        late_grants.register(&first);
        late_grants.register(&second);
        late_grants.unregister(&first);
        let found = late_grants.find("k", "h").expect("the replacement stays");
        assert!(Arc::ptr_eq(&found, &second));
        late_grants.unregister(&second);
        assert!(late_grants.find("k", "h").is_none());
    }

    #[test]
    fn an_unknown_outcome_counts_as_a_grant() {
        let grant = LateGrant::new(Texts::new(["k", "h", "1"]), None, 1);
        assert!(!grant.release_answered(0, false));
        assert!(grant.set_answered(0, true), "a timed-out SET may have run");
    }
}
