//! The Redis keys of a name beside its lock key and counter: the holder
//! information, the fair queue, the release channel, a semaphore's and a
//! read-write lock's companions, an election's leader record, a latch's
//! counted-down ids. The Redis
//! layer's, not the name's: [`LockKey`] names the lock key and counter only.

use crate::key::LockKey;

/// The Redis keys and channel of every primitive on a name, all under the
/// name's hash tag `{<name>}` (so one script on a Redis Cluster can touch
/// them all). Implemented for [`LockKey`]; import it where a strategy
/// builds a script's keys.
pub trait KeyNames {
    /// The hash of holder information (`holder_info = true`):
    /// `<prefix>{<name>}:holder`.
    fn holder_key(&self) -> String;

    /// The list that queues waiters in fair mode: `<prefix>{<name>}:queue`.
    fn queue_key(&self) -> String;

    /// The zset of fair-mode waiters' deadlines: `<prefix>{<name>}:waiters`.
    fn waiters_key(&self) -> String;

    /// The hash of waiters' offers (owner to `<grant ms> <place deadline>
    /// <owner>:<nonce>`, `w` in front for a writer's, `p<weight> ` for a
    /// fair semaphore's), the holds a release may grant on the server:
    /// `<prefix>{<name>}:offers` (see `lua/shared/queue.lua`).
    fn offers_key(&self) -> String;

    /// The pub/sub channel on which releases of this lock are published:
    /// `<prefix>{<name>}:released`.
    fn release_channel(&self) -> String;

    /// The hash of a lease set's holds (a semaphore's permits, a read-write
    /// lock's reads and writes): hold id to its entry (`<weight>:<slot>:<token>`,
    /// `r:<epoch>` or `w:<token>`) and the tallies a grant reads instead of
    /// the holds: `<prefix>{<name>}:held` (see `lua/lease_set/common.lua`).
    /// Its sorted set of the holds' deadlines is
    /// [`redis_key`](LockKey::redis_key).
    fn held_key(&self) -> String;

    /// A lease set's sorted set of the free semaphore slots below the
    /// highest in use: `<prefix>{<name>}:slots`.
    fn slots_key(&self) -> String;

    /// A semaphore's stored limit: `<prefix>{<name>}:limit`.
    fn limit_key(&self) -> String;

    /// A semaphore's fencing counters, one per slot:
    /// `<prefix>{<name>}:slot-fences`.
    fn slot_fences_key(&self) -> String;

    /// An election's leader record (`<term>:<value>`):
    /// `<prefix>{<name>}:leader`.
    fn leader_key(&self) -> String;

    /// The ids that counted a latch down, each once (a hash of id to `1`,
    /// with the latch's TTL): `<prefix>{<name>}:downs`.
    fn latch_downs_key(&self) -> String;

    /// A barrier's record of its round (`<parties>:<round>[:open]`, expiring
    /// with its last party): `<prefix>{<name>}:barrier`.
    fn barrier_key(&self) -> String;

    /// The parties that left a barrier, each kept out for twice its TTL (a
    /// sorted set of id to the server's ms until then):
    /// `<prefix>{<name>}:left`.
    fn barrier_left_key(&self) -> String;
}

impl KeyNames for LockKey {
    fn holder_key(&self) -> String {
        format!("{}:holder", self.redis_key())
    }

    fn queue_key(&self) -> String {
        format!("{}:queue", self.redis_key())
    }

    fn waiters_key(&self) -> String {
        format!("{}:waiters", self.redis_key())
    }

    fn offers_key(&self) -> String {
        format!("{}:offers", self.redis_key())
    }

    fn release_channel(&self) -> String {
        format!("{}:released", self.redis_key())
    }

    fn held_key(&self) -> String {
        format!("{}:held", self.redis_key())
    }

    fn slots_key(&self) -> String {
        format!("{}:slots", self.redis_key())
    }

    fn limit_key(&self) -> String {
        format!("{}:limit", self.redis_key())
    }

    fn slot_fences_key(&self) -> String {
        format!("{}:slot-fences", self.redis_key())
    }

    fn leader_key(&self) -> String {
        format!("{}:leader", self.redis_key())
    }

    fn latch_downs_key(&self) -> String {
        format!("{}:downs", self.redis_key())
    }

    fn barrier_key(&self) -> String {
        format!("{}:barrier", self.redis_key())
    }

    fn barrier_left_key(&self) -> String {
        format!("{}:left", self.redis_key())
    }
}
