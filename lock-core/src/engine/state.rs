//! What a backend reports of a resource: its state, who holds it, and the
//! listing of held locks ([`LockManager::list`](crate::LockManager::list),
//! which a backend's [`ListBackend::list`](crate::ListBackend::list) fills
//! in).

use std::time::{Duration, SystemTime};

use crate::error::LockError;
use crate::hold::Access;
use crate::key::FencingToken;

/// What [`LockManager::list`](crate::LockManager::list) looks for, and how much work it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListOptions {
    /// Only locks whose name starts with this (under the configured
    /// `key_prefix`). Default: every lock.
    pub name_prefix: String,
    /// How many keys the scan may examine in all, over every node: the sum
    /// of the `COUNT` of the `SCAN` calls sent (Redis takes it as a hint, so
    /// this is approximate). The listing says when it stopped at this limit.
    /// Default: 100,000.
    pub scan_limit: u64,
    /// The `COUNT` of one `SCAN` call. Default: 1,000.
    pub batch: u32,
}

impl Default for ListOptions {
    fn default() -> Self {
        ListOptions {
            name_prefix: String::new(),
            scan_limit: 100_000,
            batch: 1_000,
        }
    }
}

impl ListOptions {
    /// Every lock whose name starts with `prefix`, with the default limits.
    pub fn with_name_prefix(prefix: impl Into<String>) -> Self {
        ListOptions {
            name_prefix: prefix.into(),
            ..ListOptions::default()
        }
    }

    /// These options with a limit on the keys examined.
    pub fn with_scan_limit(mut self, limit: u64) -> Self {
        self.scan_limit = limit;
        self
    }
}

/// The held locks a scan found; see
/// [`LockManager::list`](crate::LockManager::list).
#[derive(Debug)]
#[non_exhaustive]
pub struct LockListing {
    /// The locks found held, by name.
    pub locks: Vec<ListedLock>,
    /// How many keys the scan examined (the `COUNT` hints it sent).
    pub examined: u64,
    /// Whether the scan stopped at [`ListOptions::scan_limit`] before it had
    /// covered every node: more locks may be held.
    pub truncated: bool,
    /// The nodes that could not be scanned, each error naming its node.
    /// Their locks are missing from `locks`.
    pub failures: Vec<LockError>,
}

/// One lock in a [`LockListing`].
#[derive(Debug)]
#[non_exhaustive]
pub struct ListedLock {
    /// The lock's name, as given to `acquire`.
    pub name: String,
    /// What [`inspect`](crate::LockManager::inspect) read: always held (a
    /// name found free by then is left out of the listing), or the error
    /// that kept it from being read (a key holding foreign data, a node that
    /// failed meanwhile).
    pub state: Result<NameState, LockError>,
    /// How many fair-mode waiters are queued for it; `None` for strategies
    /// without a fair mode, and when the queue could not be read.
    pub queued: Option<u64>,
}

/// What a name is now, whichever primitive holds it, as
/// [`LockManager::inspect`](crate::LockManager::inspect) reads it in one
/// round trip: what `distlock status` and `distlock list` show.
///
/// A name is held by one kind of primitive at a time (each one's acquire
/// answers `Held` while another kind holds the name), so one variant says
/// all there is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameState {
    /// Nothing holds the name: no lock, no live permit or read-write hold,
    /// and no semaphore limit stored.
    Free {
        /// The last fencing token issued for the name, if any (a read-write
        /// lock's write epoch).
        last_token: Option<FencingToken>,
    },
    /// A lock holds the name: a plain, fair or reentrant lock, a multi-key
    /// lock that has it among its keys, or an election's leader that has
    /// not proclaimed a value yet. Always [`LockState::Held`].
    Lock(LockState),
    /// An election whose leader has proclaimed a value for its term.
    Election {
        /// The leader's lock: always [`LockState::Held`], its token the
        /// leader's term.
        lock: LockState,
        /// The leader's term and value.
        leader: Leader,
    },
    /// A semaphore: its stored limit and its live permits, none when it is
    /// free (a semaphore keeps its limit after its last permit ends).
    Semaphore(SemaphoreState),
    /// A read-write lock with live holds.
    RwLock(RwLockState),
    /// A count-down latch, open or not, until its TTL ends.
    Latch(LatchState),
    /// A barrier with live parties.
    Barrier(BarrierState),
}

impl NameState {
    /// Whether anything holds the name: a lock, a live permit, a live read
    /// or write, a latch (until its TTL ends, open or not), a barrier's live
    /// party.
    pub fn is_held(&self) -> bool {
        match self {
            NameState::Free { .. } => false,
            NameState::Lock(lock) | NameState::Election { lock, .. } => lock.is_held(),
            NameState::Semaphore(semaphore) => !semaphore.permits.is_empty(),
            NameState::RwLock(rw_lock) => rw_lock.is_held(),
            // Every other primitive waits beside a latch until its TTL ends.
            NameState::Latch(_) => true,
            NameState::Barrier(barrier) => barrier.entered > 0,
        }
    }
}

/// A name that only locks hold: [`NameState::Lock`] while the lock is held,
/// [`NameState::Free`] when it is not. For a strategy with locks alone.
impl From<LockState> for NameState {
    fn from(state: LockState) -> Self {
        match state {
            LockState::Free { last_token } => NameState::Free { last_token },
            held => NameState::Lock(held),
        }
    }
}

/// The name as a lock sees it: a lock's or election's own state; a
/// semaphore's or read-write lock's holds as one hold that lasts as long as
/// the last of them, with no token (each has its own), and free when none
/// is live.
impl From<NameState> for LockState {
    fn from(state: NameState) -> Self {
        let remaining = match state {
            NameState::Free { last_token } => return LockState::Free { last_token },
            NameState::Lock(lock) | NameState::Election { lock, .. } => return lock,
            NameState::Semaphore(semaphore) => semaphore
                .permits
                .iter()
                .map(|permit| permit.remaining)
                .max(),
            NameState::RwLock(rw_lock) => rw_lock.holds.iter().map(|hold| hold.remaining).max(),
            NameState::Latch(latch) => {
                return LockState::Held {
                    remaining: latch.remaining,
                    token: None,
                    hold_count: None,
                    holder: None,
                }
            }
            NameState::Barrier(barrier) => barrier.remaining.filter(|_| barrier.entered > 0),
        };
        match remaining {
            Some(remaining) => LockState::Held {
                remaining: Some(remaining),
                token: None,
                hold_count: None,
                holder: None,
            },
            None => LockState::Free { last_token: None },
        }
    }
}

/// A snapshot of one lock, for operators and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockState {
    /// Nobody holds the lock.
    Free {
        /// The last fencing token issued for this key, if any.
        last_token: Option<FencingToken>,
    },
    /// Someone holds the lock.
    Held {
        /// The remaining TTL; `None` if the key has no expiry (written by
        /// something other than this library).
        remaining: Option<Duration>,
        /// The fencing token of the current hold, if the strategy issues
        /// tokens (for a fencing-off hold, the last token issued for the
        /// name, if any).
        token: Option<FencingToken>,
        /// How many times the holder has entered the lock, for reentrant
        /// strategies; `None` for the others.
        hold_count: Option<u64>,
        /// Who took the lock, when its holder stored that (`holder_info =
        /// true`); `None` otherwise, and always with Redlock.
        holder: Option<HolderInfo>,
    },
}

impl LockState {
    /// Whether someone holds the lock.
    pub fn is_held(&self) -> bool {
        matches!(self, LockState::Held { .. })
    }
}

/// Who holds a lock, as its grant stored it with `holder_info = true`: the
/// host and process that took it, when (by the server's clock, so hosts
/// need no synchronised clocks), and the label from the holder's config.
///
/// It never holds the owner token, which would let its reader release the
/// lock. Read it with [`LockManager::inspect`](crate::LockManager::inspect)
/// ([`LockState::Held`](crate::LockState::Held)'s `holder`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderInfo {
    /// The host name of the process that took the lock.
    pub host: String,
    /// Its process id (on that host).
    pub pid: u32,
    /// When the lock was granted, by the server's clock. A re-entry
    /// (reentrant strategy) keeps the first hold's.
    pub acquired_at: SystemTime,
    /// The holder's `holder_label`, if it set one.
    pub label: Option<String>,
}

/// A snapshot of one semaphore, for operators and tests; see
/// [`Semaphore::state`](crate::Semaphore::state).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreState {
    /// The limit stored with the semaphore; `None` when no permit of it was
    /// ever taken. The first acquire stores its limit, which stays, without
    /// a TTL, until [`Semaphore::set_limit`](crate::Semaphore::set_limit)
    /// changes it.
    pub limit: Option<u32>,
    /// The weight of the live permits.
    pub used: u64,
    /// The live permits, by slot. Their ids (secrets, like owner tokens)
    /// are not shown.
    pub permits: Vec<PermitState>,
}

/// A snapshot of one count-down latch; see
/// [`Latch::state`](crate::Latch::state).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatchState {
    /// What is left to count down: the latch is open at 0.
    pub count: u32,
    /// The count it was set with.
    pub initial: u32,
    /// How long until the server deletes it (its TTL, by the server's
    /// clock); `None` if its key has no expiry (written by something other
    /// than this library).
    pub remaining: Option<Duration>,
}

impl LatchState {
    /// A latch set with `initial` that has `count` left and lives for
    /// `remaining`. For a strategy's
    /// [`latch_state`](crate::LatchBackend::latch_state).
    pub fn new(count: u32, initial: u32, remaining: Option<Duration>) -> Self {
        LatchState {
            count,
            initial,
            remaining,
        }
    }

    /// Whether the latch is open: counted down to 0.
    pub fn is_open(&self) -> bool {
        self.count == 0
    }
}

/// A snapshot of one barrier; see [`Barrier::state`](crate::Barrier::state).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BarrierState {
    /// The party count its live parties entered with; 0 without one.
    pub parties: u32,
    /// Whether its round is open: every party entered, and not all have
    /// left yet.
    pub open: bool,
    /// How many live parties it has.
    pub entered: u32,
    /// Whether the party asked about is one of them
    /// ([`BarrierBackend::barrier_state`](crate::BarrierBackend::barrier_state)).
    pub is_party: bool,
    /// How long until the last live party's lease ends, by the server's
    /// clock; `None` without one.
    pub remaining: Option<Duration>,
    /// The round's id (the server's time in µs when its first party
    /// entered); empty without a live party.
    pub round: String,
}

impl BarrierState {
    /// A barrier of `parties` with `entered` live parties in the round
    /// `round`, open or not, for a strategy's
    /// [`barrier_state`](crate::BarrierBackend::barrier_state); `is_party`
    /// and `remaining` are as their fields say.
    pub fn new(parties: u32, open: bool, entered: u32, round: String) -> Self {
        BarrierState {
            parties,
            open,
            entered,
            is_party: false,
            remaining: None,
            round,
        }
    }

    /// This state, saying whether the party asked about is live.
    pub fn with_party(mut self, is_party: bool) -> Self {
        self.is_party = is_party;
        self
    }

    /// This state with the last party's lease ending in `remaining`.
    pub fn with_remaining(mut self, remaining: Option<Duration>) -> Self {
        self.remaining = remaining;
        self
    }
}

/// One live permit of a [`SemaphoreState`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitState {
    /// Its slot, in `0..limit`.
    pub slot: u32,
    /// How many permits it counts for.
    pub weight: u32,
    /// How long its lease has left, by the server's clock.
    pub remaining: Duration,
    /// Its fencing token: the last one issued for its slot.
    pub fencing_token: FencingToken,
}

impl SemaphoreState {
    /// The state of a semaphore stored with `limit` whose live permits are
    /// `permits` (sorted here by slot); `used` is their weight. For a
    /// strategy's [`semaphore_state`](crate::SemaphoreBackend::semaphore_state).
    pub fn new(limit: Option<u32>, mut permits: Vec<PermitState>) -> Self {
        permits.sort_by_key(|permit| permit.slot);
        SemaphoreState {
            limit,
            used: permits.iter().map(|permit| u64::from(permit.weight)).sum(),
            permits,
        }
    }
}

impl PermitState {
    /// A live permit in `slot` of `weight`, with `remaining` of its lease
    /// and its slot's `fencing_token`.
    pub fn new(slot: u32, weight: u32, remaining: Duration, fencing_token: FencingToken) -> Self {
        PermitState {
            slot,
            weight,
            remaining,
            fencing_token,
        }
    }
}

/// A snapshot of one read-write lock, for operators and tests; see
/// [`RwLock::state`](crate::RwLock::state).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwLockState {
    /// The write epoch: the last write token issued (0 before the first
    /// write), which every read started since carries as its token.
    pub epoch: FencingToken,
    /// How many writers wait with a live place in the queue.
    pub waiting_writers: u64,
    /// The live holds, the first to end first. Their ids (secrets, like
    /// owner tokens) are not shown.
    pub holds: Vec<RwHoldState>,
}

/// One live hold of a [`RwLockState`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwHoldState {
    /// Shared or exclusive.
    pub access: Access,
    /// How long its lease has left, by the server's clock.
    pub remaining: Duration,
    /// Its fencing token: a write's token, or the epoch a read started in.
    pub fencing_token: FencingToken,
}

impl RwLockState {
    /// The state of a read-write lock at `epoch` with `waiting_writers` and
    /// the live `holds` (sorted here by lease left). For a strategy's
    /// [`rw_lock_state`](crate::RwLockBackend::rw_lock_state).
    pub fn new(epoch: FencingToken, waiting_writers: u64, mut holds: Vec<RwHoldState>) -> Self {
        holds.sort_by_key(|hold| hold.remaining);
        RwLockState {
            epoch,
            waiting_writers,
            holds,
        }
    }

    /// The exclusive holds: at most one owner's (its re-entries, or a
    /// write being downgraded).
    pub fn writers(&self) -> impl Iterator<Item = &RwHoldState> {
        self.holds
            .iter()
            .filter(|hold| hold.access == Access::Exclusive)
    }

    /// The shared holds.
    pub fn readers(&self) -> impl Iterator<Item = &RwHoldState> {
        self.holds
            .iter()
            .filter(|hold| hold.access == Access::Shared)
    }

    /// Whether any hold is live.
    pub fn is_held(&self) -> bool {
        !self.holds.is_empty()
    }
}

impl RwHoldState {
    /// A live hold of `access` with `remaining` of its lease and its
    /// `fencing_token`.
    pub fn new(access: Access, remaining: Duration, fencing_token: FencingToken) -> Self {
        RwHoldState {
            access,
            remaining,
            fencing_token,
        }
    }
}

/// An election's leader, as [`Election::leader`](crate::Election::leader)
/// reads it: the holder of the election's lock, once it has proclaimed a
/// value for its term.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The leader's term: its lock's fencing token, greater for each new
    /// leader while the server keeps its data.
    pub term: FencingToken,
    /// What the leader proclaimed (an address, a host name).
    pub value: String,
    /// How long its lease has left unless renewed, by the server's clock.
    pub remaining: Option<Duration>,
}

impl Leader {
    /// The leader of `term` that proclaimed `value`, with `remaining` of
    /// its lease. For a strategy's
    /// [`read_leader`](crate::ElectionBackend::read_leader).
    pub fn new(term: FencingToken, value: String, remaining: Option<Duration>) -> Self {
        Leader {
            term,
            value,
            remaining,
        }
    }
}
