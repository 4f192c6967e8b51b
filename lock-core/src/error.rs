//! The one error type of the lock API.

use std::fmt;
use std::time::Duration;

/// An error from a lower layer (a Redis client, an I/O call), shared so
/// that [`LockError`] is `Clone`: a renewal batch that fails as a whole
/// gives each of its leases the same error.
pub type SourceError = std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>;

/// A [`SourceError`] that says `message`.
pub(crate) fn source_error(message: impl Into<String>) -> SourceError {
    let boxed: Box<dyn std::error::Error + Send + Sync> = message.into().into();
    SourceError::from(boxed)
}

/// Why a lease stopped being valid before its holder released it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LossReason {
    /// A renewal found the key gone or held by another owner: someone deleted or
    /// overwrote it, or it expired before the renewal reached the server.
    NotHeld,
    /// The lease's deadline passed without a successful renewal (the server was
    /// unreachable, or renewal was turned off and nobody extended the lease).
    Expired,
    /// The watchdog stopped renewing at `watchdog.max_hold`, and the lease ran
    /// out at its TTL, as configured.
    MaxHoldReached,
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossReason::NotHeld => "the key is gone or held by another owner",
            LossReason::Expired => "the lease expired before it could be renewed",
            LossReason::MaxHoldReached => {
                "the lease ran out after watchdog.max_hold, when renewal stopped"
            }
        })
    }
}

/// What a Redis user's ACL must allow for an operation it refused
/// ([`LockError::PermissionDenied`]). The README's "Redis users and ACLs"
/// lists the whole rule a lock user needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AclNeed {
    /// A command, by its lower-case name (`time`): the rule `+time`.
    Command(String),
    /// The lock's keys: a key pattern of the `key_prefix` then `*` (`~lock:*`).
    Keys,
    /// The lock's release channels: a channel pattern of the `key_prefix`
    /// then `*` (`&lock:*`), or `wait_mode = "poll"`.
    Channels,
    /// The server did not say what it refused.
    Unknown,
}

impl AclNeed {
    /// What a refusal's message (`NOPERM ...`, or a script's `ERR The user
    /// executing the script can't ...`) says the ACL lacks. The command a
    /// script ran is not in its message; [`Script`](crate::server::script)
    /// finds it from the line the message names.
    pub(crate) fn from_message(message: &str) -> Self {
        let lower = message.to_ascii_lowercase();
        // `this user has no permissions to run the 'time' command` (7.0),
        // `User locker has no permissions to run the 'time' command` (7.2).
        if let Some((_, rest)) = lower.split_once("permissions to run the '") {
            if let Some((command, _)) = rest.split_once('\'') {
                return AclNeed::Command(command.replace(' ', "|"));
            }
        }
        // `... access one of the keys used as arguments` (7.0), `No
        // permissions to access a key` (7.2), and the same of channels.
        if lower.contains("channel") {
            AclNeed::Channels
        } else if lower.contains(" key") {
            AclNeed::Keys
        } else {
            AclNeed::Unknown
        }
    }
}

impl fmt::Display for AclNeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AclNeed::Command(command) => write!(f, "`+{command}`"),
            AclNeed::Keys => f.write_str(
                "the lock keys (a key pattern of the key_prefix then `*`: `~lock:*` by default)",
            ),
            AclNeed::Channels => f.write_str(
                "the lock channels (`&lock:*` for the default key_prefix), or wait_mode = \"poll\"",
            ),
            AclNeed::Unknown => f.write_str(
                "more than it allows (the README's \"Redis users and ACLs\" lists the rule)",
            ),
        }
    }
}

/// What a backend may have beyond the plain lock. A manager reads it from
/// [`LockBackend::capabilities`](crate::LockBackend::capabilities): a
/// primitive's handle is refused with [`LockError::Unsupported`] when it is
/// made on a strategy without it, and a config with `fair = true` with
/// [`LockError::InvalidConfig`] on `fair` when the manager is; never at the
/// first acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// Fair mode: locks and semaphores served in arrival order
    /// ([`Claim::Lock`](crate::Claim::Lock) with a place).
    FairQueue,
    /// Semaphores ([`LockManager::semaphore`](crate::LockManager::semaphore)).
    Semaphores,
    /// Read-write locks ([`LockManager::rw_lock`](crate::LockManager::rw_lock)).
    RwLocks,
    /// Several names as one hold
    /// ([`LockManager::multi_lock`](crate::LockManager::multi_lock)).
    MultiKeys,
    /// Leader elections ([`LockManager::election`](crate::LockManager::election)),
    /// whose terms are fencing tokens.
    Elections,
    /// Hand-off: a held lease resumed by another process
    /// ([`LockManager::resume`](crate::LockManager::resume)).
    HandOff,
    /// Listing the held locks ([`LockManager::list`](crate::LockManager::list)).
    Listing,
    /// Count-down latches ([`LockManager::latch`](crate::LockManager::latch)).
    Latches,
    /// Double barriers of leased parties
    /// ([`LockManager::barrier`](crate::LockManager::barrier)).
    Barriers,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: &'static [Capability] = &[
        Capability::FairQueue,
        Capability::Semaphores,
        Capability::RwLocks,
        Capability::MultiKeys,
        Capability::Elections,
        Capability::HandOff,
        Capability::Listing,
        Capability::Latches,
        Capability::Barriers,
    ];

    /// What it is called in messages: `"semaphores"`, `"read-write locks"`,
    /// ...
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::FairQueue => "fair mode",
            Capability::Semaphores => "semaphores",
            Capability::RwLocks => "read-write locks",
            Capability::MultiKeys => "multi-key locks",
            Capability::Elections => "elections",
            Capability::HandOff => "hand-off",
            Capability::Listing => "listing",
            Capability::Latches => "latches",
            Capability::Barriers => "barriers",
        }
    }

    pub(crate) fn bit(self) -> u16 {
        match self {
            Capability::FairQueue => 1,
            Capability::Semaphores => 2,
            Capability::RwLocks => 4,
            Capability::MultiKeys => 8,
            Capability::Elections => 16,
            Capability::HandOff => 32,
            Capability::Listing => 64,
            Capability::Latches => 128,
            Capability::Barriers => 256,
        }
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything that can go wrong when taking, keeping or giving back a lock.
///
/// Match on the variant to act; [`LockError::is_retryable`] says whether the same
/// call may succeed if tried again later.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock name is empty, too long, or otherwise unusable as a Redis key.
    #[error("invalid lock key: {reason}")]
    InvalidKey {
        /// What is wrong with the key.
        reason: String,
    },
    /// The TTL is zero, below one millisecond, or above [`crate::MAX_TTL`].
    #[error("invalid TTL {ttl:?}: {reason}")]
    InvalidTtl {
        /// The TTL that was rejected.
        ttl: Duration,
        /// Why it was rejected.
        reason: String,
    },
    /// An owner token supplied by the caller is empty or too long.
    #[error("invalid owner token: {reason}")]
    InvalidOwner {
        /// What is wrong with the token.
        reason: String,
    },
    /// The strategy has no such primitive: a semaphore, read-write lock,
    /// multi-key lock or election asked of a strategy without it, when its
    /// handle is made. (Fair mode on such a strategy is a config error on
    /// `fair`, when the manager is made.)
    #[error("the {strategy} strategy has no {capability}; use the single-node strategy")]
    Unsupported {
        /// The strategy's name.
        strategy: &'static str,
        /// What it lacks.
        capability: Capability,
    },
    /// A configuration field has a value that cannot work; `field` names it.
    #[error("invalid config field `{field}`: {reason}")]
    InvalidConfig {
        /// The dotted path of the field, for example `retry.max_delay`.
        field: String,
        /// Why the value was rejected.
        reason: String,
    },
    /// The lock was held by someone else for the whole wait.
    #[error("lock `{key}` is held by someone else: {}", describe_wait(*.waited, *.attempts))]
    NotAcquired {
        /// The lock name.
        key: String,
        /// How long the caller waited.
        waited: Duration,
        /// How many acquire attempts were made.
        attempts: u32,
    },
    /// The lease ended before its holder released it; whatever ran under it may
    /// have overlapped with another holder.
    #[error("lease on `{key}` was lost: {reason}")]
    LeaseLost {
        /// The lock name.
        key: String,
        /// How it was lost.
        reason: LossReason,
    },
    /// An extend or release was refused because this owner does not hold the lock.
    #[error("lock `{key}` is not held by this owner")]
    NotOwner {
        /// The lock name.
        key: String,
    },
    /// A lease to resume, extend or release by its hand-off token is not held
    /// at all: it was released, or it expired.
    #[error("lock `{key}` is not held (it was released or expired)")]
    NotHeld {
        /// The lock name.
        key: String,
    },
    /// The strategy cannot hand a lease over: `hand_off` on a strategy whose
    /// holds an owner's guards share (reentrant), or `resume` on one that
    /// cannot replace a hold on every node in one step (Redlock).
    #[error("the {strategy} strategy cannot {operation} a handed-off lease")]
    HandOffUnsupported {
        /// The strategy's name.
        strategy: &'static str,
        /// `hand off` or `resume`.
        operation: &'static str,
    },
    /// A read-write hold handed off is not resumed while its owner has
    /// another live hold beside it, one of the two a write (a re-entered
    /// write, the read of a downgrade, or an attempt of the same wait whose
    /// reply was lost and whose release has not landed): taken over alone,
    /// it would be another owner's hold beside that one, a writer beside
    /// another hold. The handed-off hold is left as it was: release the
    /// other hold first (a lost attempt's ends with its background release
    /// or its TTL), or the handed-off one by its token.
    #[error(
        "the hold handed off of `{key}` has another hold of its owner beside it, \
         so it cannot pass to another owner alone; release that hold first"
    )]
    HandOffRefused {
        /// The read-write lock's name.
        key: String,
    },
    /// No connection could be made to a node, or it broke.
    #[error("connection to {node} failed: {source}")]
    Connection {
        /// The node's address, without credentials.
        node: String,
        /// The underlying error.
        #[source]
        source: SourceError,
    },
    /// The node refused the credentials (wrong password or user, or none given).
    #[error("authentication failed on {node}: {message}")]
    Authentication {
        /// The node's address, without credentials.
        node: String,
        /// The server's or client's message.
        message: String,
    },
    /// The Redis user's ACL refused something the operation needs: a command
    /// (a `NOPERM` reply, or a command a script ran), the lock's keys or its
    /// channels. The server ran nothing of the refused command; `needs` says
    /// what to add to the user's ACL.
    #[error("permission denied on {node}: the Redis user's ACL needs {needs} (the server said: {message})")]
    PermissionDenied {
        /// The node's address, without credentials.
        node: String,
        /// What the ACL must allow.
        needs: AclNeed,
        /// The server's message, code first.
        message: String,
    },
    /// The node did not answer in time. The command may or may not have run.
    #[error("{node} did not answer within {after:?}")]
    Timeout {
        /// The node's address, without credentials.
        node: String,
        /// The timeout that ran out.
        after: Duration,
    },
    /// The node answered with an error (for example `WRONGTYPE`, `BUSY`, `LOADING`).
    #[error("{node} answered with an error: {message}")]
    Server {
        /// The node's address, without credentials.
        node: String,
        /// The error line the server sent, code first.
        message: String,
    },
    /// A script answered with a shape it is documented never to produce. The key
    /// may have been written by something other than this library.
    #[error("unexpected reply from {node} to `{script}`: {reply}")]
    UnexpectedReply {
        /// The node's address, without credentials.
        node: String,
        /// The script or command that was run.
        script: &'static str,
        /// The reply, rendered for humans.
        reply: String,
    },
    /// The Redis key holds data that is not a lock of this strategy: a value of
    /// the wrong type (`WRONGTYPE`), or a hold count that is not a positive
    /// integer. Something other than this library wrote it, or another strategy
    /// uses the same key prefix. The key was left as it was.
    #[error("the Redis key `{key}` does not hold a valid lock: {detail}")]
    Corrupted {
        /// The Redis key (prefix and hash tag included).
        key: String,
        /// What was found.
        detail: String,
    },
    /// Fewer than a majority of the nodes granted or confirmed the operation.
    /// `failures` holds one error per node that failed, each naming its node.
    #[error("quorum not reached: {got} of the {needed} nodes needed{}", describe_failures(.failures))]
    QuorumNotReached {
        /// How many nodes granted or confirmed.
        got: usize,
        /// How many were needed (a majority).
        needed: usize,
        /// The errors of the nodes that failed (unreachable, timed out, refused
        /// credentials); nodes that answered "held by another owner" are not here.
        failures: Vec<LockError>,
    },
    /// A majority granted the lock, but so late that nothing of the lease was
    /// left (`elapsed >= ttl - drift`); the grants were released again.
    #[error("lock `{key}` was granted too late: {elapsed:?} of a {ttl:?} TTL had passed")]
    GrantedTooLate {
        /// The lock name.
        key: String,
        /// How long the acquire took.
        elapsed: Duration,
        /// The TTL asked for.
        ttl: Duration,
    },
    /// Fewer replicas than `replicas.count` acknowledged a grant or renewal
    /// within `replicas.timeout`. A grant was released again; a renewal did
    /// not move the lease's deadline.
    #[error(
        "{node}: {acknowledged} of the {needed} replicas needed acknowledged within {timeout:?}"
    )]
    ReplicasNotAcknowledged {
        /// The master's address (or the deployment's), without credentials.
        node: String,
        /// How many replicas acknowledged.
        acknowledged: u32,
        /// How many were asked for.
        needed: u32,
        /// How long they were waited for.
        timeout: Duration,
    },
    /// A primitive is stored with another count than the one this process
    /// asked for: a semaphore's limit, a latch's count, a barrier's party
    /// count (while it has live parties). Every process must
    /// agree on it, as `consul lock -n` refuses a conflicting count. Nothing
    /// was written. A semaphore's limit is changed on purpose with
    /// [`Semaphore::set_limit`](crate::Semaphore::set_limit); a latch keeps
    /// its count until it is deleted or its TTL ends.
    #[error("`{key}` has a {what} of {stored}, not the {requested} asked for")]
    CountMismatch {
        /// The primitive's name.
        key: String,
        /// Which count: `"semaphore limit"`, `"latch count"` or
        /// `"barrier parties"`.
        what: &'static str,
        /// The count stored with it.
        stored: u32,
        /// The count this process asked for.
        requested: u32,
    },
    /// A primitive's call met another kind of primitive on its name: a
    /// latch's on a name a lock, semaphore, read-write lock or barrier
    /// holds, or a barrier's read of a name a lock holds. A name
    /// is one primitive at a time; nothing was written.
    #[error("`{key}` is held by a {found}, not a {wanted}: a name is one primitive at a time")]
    WrongKind {
        /// The name.
        key: String,
        /// What holds it: `"lock"`, `"semaphore, read-write lock or
        /// barrier"` (a latch's view) or `"semaphore or read-write lock"` (a
        /// barrier's).
        found: &'static str,
        /// What the call was for: `"latch"` or `"barrier"`.
        wanted: &'static str,
    },
    /// A party asked to enter a barrier whose round is under way: full, or
    /// open until every party of it has left. Nothing was written; enter
    /// again once the round is over.
    #[error(
        "barrier `{key}` is full ({entered} of {parties} parties in, or its round not over): \
         enter again once every party has left"
    )]
    BarrierFull {
        /// The barrier's name.
        key: String,
        /// How many live parties it has.
        entered: u32,
        /// Its party count.
        parties: u32,
    },
    /// A latch was counted down, or its state asked for, before any
    /// process set its count (or after its TTL ended): nothing was written.
    /// Set it first with [`Latch::set_count`](crate::Latch::set_count), or
    /// count down once it is set.
    #[error("latch `{key}` has no count set (set it first, or its TTL ended)")]
    LatchNotSet {
        /// The latch's name.
        key: String,
    },
    /// An owner that has only shared (read) holds of a read-write lock asked
    /// for its exclusive (write) hold: it would wait for its own reads, and
    /// two owners doing so would wait for each other. Release the reads
    /// first; an owner that has the write may take reads (a downgrade).
    #[error(
        "the owner has a shared hold of `{key}`, so its exclusive hold would wait on itself; \
         release the shared hold first (upgrades are refused: two would deadlock)"
    )]
    UpgradeRefused {
        /// The read-write lock's name.
        key: String,
    },
    /// A semaphore's limit or a permit's weight that cannot work: a limit of
    /// 0 or above [`MAX_SEMAPHORE_LIMIT`](crate::MAX_SEMAPHORE_LIMIT), a
    /// weight of 0 or above the limit.
    #[error("invalid permits: {reason}")]
    InvalidPermits {
        /// What is wrong.
        reason: String,
    },
    /// The config names a Redis client whose cargo feature is not enabled.
    #[error("the `{client}` client is not compiled in: enable the cargo feature `{client}`")]
    ClientNotCompiled {
        /// The client's name, which is also the feature's name.
        client: &'static str,
    },
}

/// `tried once, without waiting`, or `waited 302ms (3 attempts)`.
fn describe_wait(waited: Duration, attempts: u32) -> String {
    if waited.is_zero() || attempts <= 1 && waited < Duration::from_millis(1) {
        return "tried once, without waiting".to_owned();
    }
    // Whole milliseconds: the nanoseconds of a measured wait are noise.
    let shown = Duration::from_millis(u64::try_from(waited.as_millis()).unwrap_or(u64::MAX));
    let attempts = match attempts {
        1 => "1 attempt".to_owned(),
        n => format!("{n} attempts"),
    };
    format!("waited {} ({attempts})", humantime::format_duration(shown))
}

fn describe_failures(failures: &[LockError]) -> String {
    if failures.is_empty() {
        return String::new();
    }
    let described: Vec<String> = failures.iter().map(ToString::to_string).collect();
    format!("; failed: {}", described.join("; "))
}

impl LockError {
    /// Whether the same call may succeed if made again later without changing
    /// anything: true for contention, time-outs, broken connections and servers
    /// that are busy or loading; false for bad input, bad credentials, lost
    /// leases and replies that show the key was tampered with.
    pub fn is_retryable(&self) -> bool {
        match self {
            LockError::NotAcquired { .. }
            | LockError::QuorumNotReached { .. }
            | LockError::GrantedTooLate { .. }
            | LockError::ReplicasNotAcknowledged { .. }
            | LockError::Connection { .. }
            | LockError::Timeout { .. } => true,
            LockError::Server { message, .. } => {
                // READONLY: the server was demoted by a failover; the next
                // attempt reaches the new master. MOVED and ASK: a cluster
                // slot moved more often than the client followed in one call.
                const TRANSIENT: [&str; 8] = [
                    "BUSY",
                    "LOADING",
                    "TRYAGAIN",
                    "MASTERDOWN",
                    "CLUSTERDOWN",
                    "READONLY",
                    "MOVED",
                    "ASK",
                ];
                let code = message.split_whitespace().next().unwrap_or("");
                TRANSIENT.contains(&code)
            }
            LockError::InvalidKey { .. }
            | LockError::InvalidTtl { .. }
            | LockError::InvalidOwner { .. }
            | LockError::InvalidConfig { .. }
            | LockError::Unsupported { .. }
            | LockError::CountMismatch { .. }
            | LockError::LatchNotSet { .. }
            | LockError::WrongKind { .. }
            | LockError::BarrierFull { .. }
            | LockError::UpgradeRefused { .. }
            | LockError::InvalidPermits { .. }
            | LockError::LeaseLost { .. }
            | LockError::NotOwner { .. }
            | LockError::NotHeld { .. }
            | LockError::HandOffUnsupported { .. }
            | LockError::HandOffRefused { .. }
            | LockError::Authentication { .. }
            | LockError::PermissionDenied { .. }
            | LockError::UnexpectedReply { .. }
            | LockError::Corrupted { .. }
            | LockError::ClientNotCompiled { .. } => false,
        }
    }

    pub(crate) fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        LockError::InvalidConfig {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_server_errors_are_the_transient_codes() {
        let busy = LockError::Server {
            node: "n".into(),
            message: "BUSY Redis is busy running a script".into(),
        };
        let wrongtype = LockError::Server {
            node: "n".into(),
            message: "WRONGTYPE Operation against a key".into(),
        };
        assert!(busy.is_retryable());
        assert!(!wrongtype.is_retryable());
    }
}
