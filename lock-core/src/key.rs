//! Lock names, owner tokens and fencing tokens: the values a lock is made of.

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use crate::error::LockError;

/// The longest lock name accepted, in bytes. Redis accepts far longer keys, but a
/// lock name is an identifier, and a bound keeps a mistaken payload out of Redis.
pub const MAX_KEY_LEN: usize = 512;

/// The longest key prefix accepted, in bytes.
pub const MAX_PREFIX_LEN: usize = 128;

/// The longest caller-chosen owner token accepted, in bytes.
pub const MAX_OWNER_LEN: usize = 256;

/// A validated lock name and the Redis keys derived from it.
///
/// The lock key is `<prefix>{<name>}` and the fencing counter is
/// `<prefix>{<name>}:fence`: both carry the hash tag `{<name>}`, so in Redis Cluster
/// they live in one slot and one script can touch both. So do the fair-mode
/// queue (`:queue`), its deadlines (`:waiters`) and the release channel
/// (`:released`).
///
/// A name that starts with `}` would leave the tag empty, and Redis would
/// hash each key whole, into different slots. Such names use the tag `~`
/// instead: the lock key is `<prefix>{~}<name>~`. That key ends in `~`, which
/// no key of the plain layout does (they end in `}` or a `:suffix`), so no two
/// names share a key.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LockKey {
    /// `<lock key>:fence`: the counter's key, whose start is the lock's key,
    /// which holds the name. One string, so that making or cloning a key
    /// (on every acquire) is one allocation, not three.
    fence_key: String,
    /// Where the lock's key ends in `fence_key`.
    redis_key_len: usize,
    /// Where the name is in `fence_key`.
    name: std::ops::Range<usize>,
}

impl LockKey {
    /// Validates `name` and derives the keys under `prefix`.
    ///
    /// Errors with [`LockError::InvalidKey`] when the name is empty or longer than
    /// [`MAX_KEY_LEN`] bytes, or when the prefix is longer than [`MAX_PREFIX_LEN`]
    /// or contains `{` or `}` (which would move the hash tag).
    pub fn new(prefix: &str, name: &str) -> Result<Self, LockError> {
        validate_name(name)?;
        validate_prefix(prefix).map_err(|reason| LockError::InvalidKey { reason })?;
        Ok(Self::derive(prefix, name))
    }

    /// [`LockKey::new`] under a prefix already validated: a manager's,
    /// checked with its config (this runs on every acquire).
    pub(crate) fn under_valid_prefix(prefix: &str, name: &str) -> Result<Self, LockError> {
        validate_name(name)?;
        Ok(Self::derive(prefix, name))
    }

    /// The keys of a valid `name` under a valid `prefix`.
    fn derive(prefix: &str, name: &str) -> Self {
        let (opening, closing) = if name.starts_with('}') {
            ("{~}", "~")
        } else {
            ("{", "}")
        };
        const FENCE: &str = ":fence";
        let mut fence_key = String::with_capacity(
            prefix.len() + opening.len() + name.len() + closing.len() + FENCE.len(),
        );
        fence_key.push_str(prefix);
        fence_key.push_str(opening);
        let name_starts = fence_key.len();
        fence_key.push_str(name);
        let name = name_starts..fence_key.len();
        fence_key.push_str(closing);
        let redis_key_len = fence_key.len();
        fence_key.push_str(FENCE);
        LockKey {
            fence_key,
            redis_key_len,
            name,
        }
    }

    /// The name the caller chose.
    pub fn name(&self) -> &str {
        &self.fence_key[self.name.clone()]
    }

    /// The Redis key that holds the lock.
    pub fn redis_key(&self) -> &str {
        &self.fence_key[..self.redis_key_len]
    }

    /// The Redis key that holds the fencing counter.
    pub fn fence_key(&self) -> &str {
        &self.fence_key
    }

    /// The Redis Cluster hash slot of the lock's keys (all of them share
    /// the `{<name>}` hash tag): which renewals may share one script.
    pub fn hash_slot(&self) -> u16 {
        hash_slot(self.redis_key().as_bytes())
    }

    /// The hash of holder information (`holder_info = true`):
    /// `<prefix>{<name>}:holder`.
    pub fn holder_key(&self) -> String {
        format!("{}:holder", self.redis_key())
    }

    /// The list that queues waiters in fair mode: `<prefix>{<name>}:queue`.
    pub fn queue_key(&self) -> String {
        format!("{}:queue", self.redis_key())
    }

    /// The zset of fair-mode waiters' deadlines: `<prefix>{<name>}:waiters`.
    pub fn waiters_key(&self) -> String {
        format!("{}:waiters", self.redis_key())
    }

    /// The hash of waiters' offers (owner to `<grant ms> <place deadline>
    /// <owner>:<nonce>`, `w` in front for a writer's, `p<weight> ` for a
    /// fair semaphore's), the holds a release may grant on the server:
    /// `<prefix>{<name>}:offers` (see `lua/queue.lua`).
    pub fn offers_key(&self) -> String {
        format!("{}:offers", self.redis_key())
    }

    /// The pub/sub channel on which releases of this lock are published:
    /// `<prefix>{<name>}:released`.
    pub fn release_channel(&self) -> String {
        format!("{}:released", self.redis_key())
    }

    /// A semaphore's hash of live permits (permit id to
    /// `<weight>:<slot>:<token>`): `<prefix>{<name>}:held`. Its sorted set of
    /// the permits' deadlines is [`redis_key`](Self::redis_key).
    pub fn permits_held_key(&self) -> String {
        format!("{}:held", self.redis_key())
    }

    /// A semaphore's stored limit: `<prefix>{<name>}:limit`.
    pub fn limit_key(&self) -> String {
        format!("{}:limit", self.redis_key())
    }

    /// A semaphore's fencing counters, one per slot:
    /// `<prefix>{<name>}:slot-fences`.
    pub fn slot_fences_key(&self) -> String {
        format!("{}:slot-fences", self.redis_key())
    }

    /// A read-write lock's hash of live holds (hold id to `r:<epoch>` or
    /// `w:<token>`): `<prefix>{<name>}:modes`. Its sorted set of the holds'
    /// deadlines is [`redis_key`](Self::redis_key), its write counter
    /// [`fence_key`](Self::fence_key), its waiting writers the fair queue's
    /// [`queue_key`](Self::queue_key) and [`waiters_key`](Self::waiters_key).
    pub fn modes_key(&self) -> String {
        format!("{}:modes", self.redis_key())
    }

    /// An election's leader record (`<term>:<value>`):
    /// `<prefix>{<name>}:leader`.
    pub fn leader_key(&self) -> String {
        format!("{}:leader", self.redis_key())
    }
}

impl fmt::Debug for LockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LockKey").field(&self.redis_key()).finish()
    }
}

impl fmt::Display for LockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Checks a lock name: not empty, at most [`MAX_KEY_LEN`] bytes.
fn validate_name(name: &str) -> Result<(), LockError> {
    let reason = if name.is_empty() {
        "the lock name is empty".to_owned()
    } else if name.len() > MAX_KEY_LEN {
        format!(
            "the lock name is {} bytes long; the maximum is {MAX_KEY_LEN}",
            name.len()
        )
    } else {
        return Ok(());
    };
    Err(LockError::InvalidKey { reason })
}

/// Checks a key prefix; returns the reason it is unusable.
pub(crate) fn validate_prefix(prefix: &str) -> Result<(), String> {
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(format!(
            "the key prefix is {} bytes long; the maximum is {MAX_PREFIX_LEN}",
            prefix.len()
        ));
    }
    if prefix.contains(['{', '}']) {
        return Err(
            "the key prefix must not contain `{` or `}`: the lock name is the hash tag".into(),
        );
    }
    Ok(())
}

/// The secret that names who holds a lock: part of the value the scripts
/// store and compare (see [`HoldToken`]), and the field of a reentrant hold.
///
/// Generated tokens are 128 bits from the operating system's random generator,
/// hex-encoded. `Debug` never prints the token, and neither does any log event:
/// whoever knows it can release the lock.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct OwnerToken(String);

impl OwnerToken {
    /// A fresh token: 16 bytes from the OS generator as 32 hex digits.
    ///
    /// Errors with [`LockError::InvalidOwner`] only
    /// if the OS generator fails, which on supported platforms it does not.
    pub fn generate() -> Result<Self, LockError> {
        let mut bytes = [0u8; 16];
        os_random(&mut bytes)?;
        let mut hex = String::with_capacity(32);
        push_hex(&mut hex, &bytes);
        Ok(OwnerToken(hex))
    }

    /// A caller-chosen token, for owners that must be recognised across
    /// processes (re-entry by a known identity). Errors with
    /// [`LockError::InvalidOwner`] when it is empty or over [`MAX_OWNER_LEN`] bytes.
    pub fn from_string(token: impl Into<String>) -> Result<Self, LockError> {
        let token = token.into();
        if token.is_empty() {
            return Err(LockError::InvalidOwner {
                reason: "the owner token is empty".into(),
            });
        }
        if token.len() > MAX_OWNER_LEN {
            return Err(LockError::InvalidOwner {
                reason: format!(
                    "the owner token is {} bytes long; the maximum is {MAX_OWNER_LEN}",
                    token.len()
                ),
            });
        }
        Ok(OwnerToken(token))
    }

    /// The token's text. Keep it out of logs.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// The lower-case hex digits.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Writes `bytes` into `digits` as lower-case hex, two digits a byte (what
/// `format!("{byte:02x}")` writes); `digits` is twice as long as `bytes`.
fn write_hex(digits: &mut [u8], bytes: &[u8]) {
    for (pair, &byte) in digits.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX_DIGITS[usize::from(byte >> 4)];
        pair[1] = HEX_DIGITS[usize::from(byte & 0x0f)];
    }
}

/// Appends `bytes` to `text` as lower-case hex ([`write_hex`]), through a
/// stack buffer: a `char` at a time checks the capacity and encodes UTF-8
/// per digit, and this runs on every acquire.
fn push_hex(text: &mut String, bytes: &[u8]) {
    let mut buffer = [0u8; 64];
    for chunk in bytes.chunks(buffer.len() / 2) {
        let digits = &mut buffer[..2 * chunk.len()];
        write_hex(digits, chunk);
        // Only ASCII digits were written.
        text.push_str(std::str::from_utf8(digits).unwrap_or_default());
    }
}

/// Room for `#<fencing token>` (a `u64` in decimal) behind a hold's value,
/// so a grant appends it without moving the string.
const TOKEN_ROOM: usize = 21;

/// Fills `bytes` from the OS generator, as a typed error if it fails.
fn os_random(bytes: &mut [u8]) -> Result<(), LockError> {
    getrandom::fill(bytes).map_err(|err| LockError::InvalidOwner {
        reason: format!("the OS random generator failed: {err}"),
    })
}

/// One hold of a lock as a backend sees it: the owner, a nonce unique to the
/// acquire attempt that took it, and, once granted, its fencing token.
///
/// An owner may hold a lock many times over its life (a worker with a fixed
/// name, a retry after a lost reply). A release or extend must act only on the
/// hold it was granted for, never on a later hold of the same owner, so each
/// acquire attempt gets its own `HoldToken`:
///
/// - strategies that store one value per key (single node, Redlock) store
///   [`HoldToken::value`], `<owner>:<nonce>`, with `#<fencing token>` behind
///   it once granted with one, and compare it whole: the key itself says
///   which token its hold was granted (or that it had none), so a hand-off
///   token cannot claim another;
/// - the reentrant strategy keys its hash by [`HoldToken::owner`] (re-entry is
///   by owner) and tells holds apart by the fencing token, which only an
///   outermost acquire changes.
///
/// `Debug` never prints the owner or the value.
#[derive(Clone)]
pub struct HoldToken {
    /// `<owner>:<nonce>`, then `#<fencing token>` once granted with one.
    value: String,
    /// How many bytes of `value` are the owner.
    owner_len: usize,
    /// How many bytes of `value` are `<owner>:<nonce>`.
    attempt_len: usize,
    /// The owner as a token of its own, made the first time it is asked
    /// for: the single-value strategies never ask, and an acquire that
    /// makes one string instead of two is measurably cheaper.
    owner: OnceLock<OwnerToken>,
    fencing_token: Option<FencingToken>,
    /// A semaphore permit's weight and slot; `None` for a lock's hold.
    permit: Option<Permit>,
    /// A read-write lock's hold: shared or exclusive; `None` otherwise.
    access: Option<Access>,
    /// A multi-key hold's members, in the order they are taken (the first
    /// is the lease's key); `None` for a hold of one key.
    members: Option<std::sync::Arc<[LockKey]>>,
    /// A fair-mode lock's hold or permit: its release hands what it frees
    /// to the next waiters in line ([`in_line`](Self::in_line)).
    in_line: bool,
}

/// What a hold of a read-write lock takes: a shared (read) hold, beside
/// other shared ones, or the exclusive (write) hold, beside none (see
/// [`RwLock`](crate::RwLock)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// A read hold: any number at once, and no writer.
    Shared,
    /// A write hold: no other owner holds anything.
    Exclusive,
}

impl Access {
    /// `"shared"` or `"exclusive"`, as `distlock status` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Shared => "shared",
            Access::Exclusive => "exclusive",
        }
    }

    /// `r` or `w`: the mode as the read-write scripts store it (and
    /// hand-off tokens carry it).
    pub fn letter(self) -> &'static str {
        match self {
            Access::Shared => "r",
            Access::Exclusive => "w",
        }
    }
}

/// What a hold of a semaphore takes: its weight and, once granted, its
/// slot (see [`LeaseGuard::permit_slot`](crate::LeaseGuard::permit_slot)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Permit {
    weight: u32,
    slot: Option<u32>,
}

impl Permit {
    /// How many of the semaphore's permits this one counts for.
    pub fn weight(&self) -> u32 {
        self.weight
    }

    /// The slot the grant gave it, in `0..limit`; `None` before the grant.
    pub fn slot(&self) -> Option<u32> {
        self.slot
    }
}

// The owner is the start of the value, so the value and its split say it all.
impl PartialEq for HoldToken {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
            && self.owner_len == other.owner_len
            && self.attempt_len == other.attempt_len
            && self.fencing_token == other.fencing_token
            && self.permit == other.permit
            && self.access == other.access
            && self.members == other.members
    }
}

impl Eq for HoldToken {}

impl std::hash::Hash for HoldToken {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.value.hash(state);
        self.owner_len.hash(state);
        self.fencing_token.hash(state);
        self.permit.hash(state);
        self.access.hash(state);
        self.members.hash(state);
    }
}

impl HoldToken {
    /// The hold of a new acquire attempt by `owner`: 64 bits of nonce from
    /// the OS generator. Errors with [`LockError::InvalidOwner`] only if the
    /// generator fails.
    pub fn new(owner: OwnerToken) -> Result<Self, LockError> {
        let mut nonce = [0u8; 8];
        os_random(&mut nonce)?;
        Ok(Self::with_nonce(owner, &nonce))
    }

    /// The hold of an attempt by an owner made for it alone: the owner's
    /// 128 bits and the nonce's 64 come from one call to the OS generator
    /// (this runs on every acquire).
    pub(crate) fn fresh() -> Result<Self, LockError> {
        let mut bytes = [0u8; 24];
        os_random(&mut bytes)?;
        let (owner, nonce) = bytes.split_at(16);
        // `<owner>:<nonce>` in hex, written in place.
        let mut text = [b':'; 2 * 24 + 1];
        let (owner_digits, nonce_digits) = text.split_at_mut(2 * owner.len());
        write_hex(owner_digits, owner);
        write_hex(&mut nonce_digits[1..], nonce);
        let digits = std::str::from_utf8(&text).map_err(|_| LockError::InvalidOwner {
            reason: "a hold's hex digits were not text".to_owned(),
        })?;
        let mut value = String::with_capacity(digits.len() + TOKEN_ROOM);
        value.push_str(digits);
        Ok(HoldToken {
            attempt_len: value.len(),
            value,
            owner_len: 2 * owner.len(),
            owner: OnceLock::new(),
            fencing_token: None,
            permit: None,
            access: None,
            members: None,
            in_line: false,
        })
    }

    fn with_nonce(owner: OwnerToken, nonce: &[u8]) -> Self {
        let mut value = String::with_capacity(owner.0.len() + 1 + 2 * nonce.len() + TOKEN_ROOM);
        value.push_str(&owner.0);
        value.push(':');
        push_hex(&mut value, nonce);
        HoldToken {
            attempt_len: value.len(),
            value,
            owner_len: owner.0.len(),
            owner: OnceLock::from(owner),
            fencing_token: None,
            permit: None,
            access: None,
            members: None,
            in_line: false,
        }
    }

    /// The owner that asked for the hold.
    pub fn owner(&self) -> &OwnerToken {
        self.owner
            .get_or_init(|| OwnerToken(self.expose_owner().to_owned()))
    }

    /// The owner's text ([`OwnerToken::expose`] of [`HoldToken::owner`]),
    /// without making a token of it. Keep it out of logs.
    pub fn expose_owner(&self) -> &str {
        &self.value[..self.owner_len]
    }

    /// The nonce that tells this hold from the owner's others: the part of
    /// [`HoldToken::value`] after the owner and its `:`.
    fn nonce(&self) -> &str {
        &self.value[self.owner_len + 1..self.attempt_len]
    }

    /// `<owner>:<nonce>`, then `#<fencing token>` once granted with one:
    /// the value a single-value strategy stores in the lock key and
    /// compares on release and extend. A secret, like the owner.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// `<owner>:<nonce>` alone: what the attempt sent before it knew its
    /// token, and all a release of an attempt whose reply was lost can name.
    pub fn attempt_value(&self) -> &str {
        &self.value[..self.attempt_len]
    }

    /// The fencing token the acquire returned, once granted; `None` before,
    /// and for strategies that issue none.
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.fencing_token
    }

    /// The hold that takes this one over when a hand-off is resumed: the same
    /// owner and fencing token, a new nonce. Errors only if the OS generator
    /// fails.
    pub(crate) fn successor(&self) -> Result<Self, LockError> {
        let mut next = HoldToken::new(self.owner().clone())?;
        next.members = self.members.clone();
        next.in_line = self.in_line;
        if let Some(access) = self.access {
            let next = next.for_access(access);
            return Ok(match self.fencing_token {
                Some(token) => next.granted_access(token),
                None => next,
            });
        }
        Ok(match (self.permit, self.fencing_token) {
            (Some(permit), Some(token)) => match permit.slot {
                Some(slot) => next.for_permit(permit.weight).granted_permit(slot, token),
                None => next.for_permit(permit.weight),
            },
            (Some(permit), None) => next.for_permit(permit.weight),
            (None, token) => next.granted(token),
        })
    }

    /// The semaphore permit this hold takes, if it is one: its weight and,
    /// once granted, its slot. A backend renews and releases a permit with
    /// the semaphore's scripts, naming it by
    /// [`attempt_value`](Self::attempt_value), its id.
    pub fn permit(&self) -> Option<Permit> {
        self.permit
    }

    /// This hold as an attempt to take a semaphore permit of `weight`: what
    /// the engine passes to
    /// [`LockBackend::try_acquire_permit`](crate::LockBackend::try_acquire_permit),
    /// and what a backend's own tests pass to it.
    pub fn for_permit(mut self, weight: u32) -> Self {
        self.permit = Some(Permit { weight, slot: None });
        self
    }

    /// This permit as granted in `slot` with that slot's `token`. Its
    /// [`value`](Self::value) stays the permit's id: a semaphore stores the
    /// token beside it, not in it.
    pub(crate) fn granted_permit(mut self, slot: u32, token: FencingToken) -> Self {
        self.value.truncate(self.attempt_len);
        self.fencing_token = Some(token);
        if let Some(permit) = self.permit.as_mut() {
            permit.slot = Some(slot);
        }
        self
    }

    /// A multi-key hold's member keys, the first being the lease's key;
    /// `None` for a hold of one key. A backend takes, renews and releases
    /// them together.
    pub fn members(&self) -> Option<&[LockKey]> {
        self.members.as_deref()
    }

    /// This hold as an attempt to take every key of `members` as one
    /// hold: what the engine passes to
    /// [`LockBackend::try_acquire_multi`](crate::LockBackend::try_acquire_multi).
    pub fn for_members(mut self, members: std::sync::Arc<[LockKey]>) -> Self {
        self.members = Some(members);
        self
    }

    /// The read-write lock hold this is, if it is one: shared or
    /// exclusive. A backend renews and releases it with the read-write
    /// scripts, naming it by [`attempt_value`](Self::attempt_value), its id.
    pub fn access(&self) -> Option<Access> {
        self.access
    }

    /// This hold as an attempt to take a read-write lock for `access`:
    /// what the engine passes to
    /// [`LockBackend::try_acquire_access`](crate::LockBackend::try_acquire_access).
    pub fn for_access(mut self, access: Access) -> Self {
        self.access = Some(access);
        self
    }

    /// This read-write hold as granted with `token` (a write's token, a
    /// read's epoch). Its [`value`](Self::value) stays its id: the lock
    /// stores the token beside it.
    pub(crate) fn granted_access(mut self, token: FencingToken) -> Self {
        self.value.truncate(self.attempt_len);
        self.fencing_token = Some(token);
        self
    }

    /// This hold as granted with `token` (and for a permit, `slot`) by a
    /// release on the server (a waiter's offer): a lock's hold, a
    /// read-write lock's write, or a permit. `None` for a permit without a
    /// slot, which no grant gives.
    pub(crate) fn granted_by_release(self, token: FencingToken, slot: Option<u32>) -> Option<Self> {
        if self.permit.is_some() {
            return slot.map(|slot| self.granted_permit(slot, token));
        }
        Some(match self.access {
            Some(_) => self.granted_access(token),
            None => self.granted(Some(token)),
        })
    }

    /// This hold as a fair-mode lock's or permit's: its release hands what
    /// it frees to the next waiters in line, on the server where the
    /// backend can ([`is_in_line`](Self::is_in_line)). A hold outside fair
    /// mode is not: its release sends no queue keys, which costs the
    /// server less, and waiters in line (of another process's fair mode)
    /// take their turn from its message.
    pub fn in_line(mut self) -> Self {
        self.in_line = true;
        self
    }

    /// Whether this is a fair-mode lock's hold or permit
    /// ([`in_line`](Self::in_line)).
    pub fn is_in_line(&self) -> bool {
        self.in_line
    }

    /// This hold as granted with `token`: its [`value`](Self::value) gets
    /// `#<token>` behind it, as the grant scripts store it.
    pub fn granted(mut self, token: Option<FencingToken>) -> Self {
        use std::fmt::Write as _;
        self.value.truncate(self.attempt_len);
        if let Some(token) = token {
            let _ = write!(self.value, "#{}", token.get());
        }
        self.fencing_token = token;
        self
    }
}

/// Everything another process needs to take over a held lease: the hold's
/// owner, its nonce, its fencing token and the TTL it was renewed with, as
/// one line of text.
///
/// [`LeaseGuard::hand_off`](crate::LeaseGuard::hand_off) stops renewing a lease
/// without releasing it and returns one; [`LockManager::resume`](crate::LockManager::resume)
/// in another process (or the `distlock extend` and `distlock release`
/// commands) acts on the lease again, and only while that hold still has it.
///
/// The text is a secret, like the owner token inside it: whoever has it can
/// extend or release the lock. Pass it through the environment or a file
/// readable only by its user, not on the command line of a long-lived process
/// (where `ps` shows it to everyone). `Debug` never prints it.
///
#[cfg_attr(not(doctest), doc = include_str!("doc/handoff_token.md"))]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HandoffToken {
    text: String,
    hold: HoldToken,
    ttl: Option<Duration>,
}

/// The first field of a [`HandoffToken`]'s text: its format's version.
/// `dl2` added the TTL; `dl1` tokens, which have none, still parse. A
/// semaphore permit's token is `dl3`, with its weight and slot; a
/// read-write lock hold's is `dl4`, with its mode.
const HANDOFF_FORMAT: &str = "dl2";
const HANDOFF_PERMIT_FORMAT: &str = "dl3";
const HANDOFF_ACCESS_FORMAT: &str = "dl4";

impl HandoffToken {
    /// The token for a granted `hold` whose holder last asked for `ttl`.
    pub(crate) fn new(hold: HoldToken, ttl: Duration) -> Self {
        // `<format>.<fencing token or ->.<ttl ms>.<nonce>.<owner>`: the owner,
        // which a caller may choose freely, goes last, so it may contain
        // anything.
        let fence = hold
            .fencing_token
            .map_or_else(|| "-".to_owned(), |token| token.get().to_string());
        // A permit's: `dl3.<token>.<ttl ms>.<weight>:<slot>.<nonce>.<owner>`;
        // a read-write hold's: `dl4.<token>.<ttl ms>.<r or w>.<nonce>.<owner>`.
        let permit = hold
            .permit
            .and_then(|permit| Some((permit.weight, permit.slot?)));
        let text = match (permit, hold.access) {
            (_, Some(access)) => format!(
                "{HANDOFF_ACCESS_FORMAT}.{fence}.{}.{}.{}.{}",
                ttl.as_millis(),
                access.letter(),
                hold.nonce(),
                hold.expose_owner()
            ),
            (Some((weight, slot)), None) => format!(
                "{HANDOFF_PERMIT_FORMAT}.{fence}.{}.{weight}:{slot}.{}.{}",
                ttl.as_millis(),
                hold.nonce(),
                hold.expose_owner()
            ),
            (None, None) => format!(
                "{HANDOFF_FORMAT}.{fence}.{}.{}.{}",
                ttl.as_millis(),
                hold.nonce(),
                hold.expose_owner()
            ),
        };
        HandoffToken {
            text,
            hold,
            ttl: Some(ttl),
        }
    }

    /// Reads a token from its text ([`HandoffToken::expose`]); a trailing
    /// line end (from a file) is ignored.
    ///
    /// Errors with [`LockError::InvalidOwner`] when the text is not a token;
    /// the error quotes none of it.
    pub fn parse(text: &str) -> Result<Self, LockError> {
        let malformed = |what: &str| LockError::InvalidOwner {
            reason: format!("not a hand-off token: {what}"),
        };
        let text = text.trim_end_matches(['\n', '\r']);
        let (format, rest) = text
            .split_once('.')
            .ok_or_else(|| malformed("expected dot-separated fields"))?;
        let (fence, ttl, permit, rest) =
            match format {
                "dl3" | "dl4" => {
                    let mut fields = rest.splitn(4, '.');
                    match (fields.next(), fields.next(), fields.next(), fields.next()) {
                        (Some(fence), Some(ttl), Some(permit), Some(rest)) => {
                            (fence, Some(ttl), Some(permit), rest)
                        }
                        _ => return Err(malformed("expected six dot-separated fields")),
                    }
                }
                "dl2" => {
                    let mut fields = rest.splitn(3, '.');
                    match (fields.next(), fields.next(), fields.next()) {
                        (Some(fence), Some(ttl), Some(rest)) => (fence, Some(ttl), None, rest),
                        _ => return Err(malformed("expected five dot-separated fields")),
                    }
                }
                "dl1" => match rest.split_once('.') {
                    Some((fence, rest)) => (fence, None, None, rest),
                    None => return Err(malformed("expected four dot-separated fields")),
                },
                _ => return Err(malformed(
                    "unknown format (expected it to start with `dl4.`, `dl3.`, `dl2.` or `dl1.`)",
                )),
            };
        let access = match (format, permit) {
            ("dl4", Some("r")) => Some(Access::Shared),
            ("dl4", Some("w")) => Some(Access::Exclusive),
            ("dl4", _) => return Err(malformed("the mode is not r or w")),
            _ => None,
        };
        let permit = match permit.filter(|_| access.is_none()) {
            None => None,
            Some(field) => {
                let (weight, slot) = field
                    .split_once(':')
                    .filter(|(weight, slot)| is_number(weight) && is_number(slot))
                    .ok_or_else(|| malformed("the permit is not <weight>:<slot>"))?;
                let weight = weight
                    .parse::<u32>()
                    .ok()
                    .filter(|weight| *weight >= 1)
                    .ok_or_else(|| malformed("the permit's weight is out of range"))?;
                let slot = slot
                    .parse::<u32>()
                    .map_err(|_| malformed("the permit's slot is out of range"))?;
                Some(Permit {
                    weight,
                    slot: Some(slot),
                })
            }
        };
        let Some((nonce, owner)) = rest.split_once('.') else {
            return Err(malformed("expected a nonce and an owner"));
        };
        let fencing_token = match fence {
            "-" => None,
            digits if is_number(digits) => Some(FencingToken::new(
                digits
                    .parse()
                    .map_err(|_| malformed("the fencing token is too large"))?,
            )),
            _ => return Err(malformed("the fencing token is not a number")),
        };
        let ttl = match ttl {
            None => None,
            Some(digits) if is_number(digits) => {
                let ttl = digits
                    .parse::<u64>()
                    .ok()
                    .map(Duration::from_millis)
                    .filter(|ttl| crate::engine::timing::validate_ttl(*ttl).is_ok())
                    .ok_or_else(|| malformed("the TTL is out of range"))?;
                Some(ttl)
            }
            Some(_) => return Err(malformed("the TTL is not a number")),
        };
        if nonce.len() != 16 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(malformed("the nonce is not 16 hex digits"));
        }
        let owner = OwnerToken::from_string(owner)?;
        let value = format!("{}:{nonce}", owner.0);
        let hold = HoldToken {
            attempt_len: value.len(),
            value,
            owner_len: owner.0.len(),
            owner: OnceLock::from(owner),
            fencing_token: None,
            permit,
            access,
            members: None,
            in_line: false,
        };
        let hold = match (access, fencing_token) {
            (Some(_), Some(token)) => hold.granted_access(token),
            (Some(_), None) => {
                return Err(malformed("a read-write hold's token has no fencing token"))
            }
            (None, _) => hold,
        };
        let hold = match (permit, fencing_token) {
            _ if access.is_some() => hold,
            (
                Some(Permit {
                    slot: Some(slot), ..
                }),
                Some(token),
            ) => hold.granted_permit(slot, token),
            (Some(_), _) => return Err(malformed("a permit's token has no fencing token")),
            (None, token) => hold.granted(token),
        };
        Ok(HandoffToken {
            text: text.to_owned(),
            hold,
            ttl,
        })
    }

    /// The token's text, to hand to the process that takes over. Keep it out
    /// of logs and command lines.
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// The hold it names, for a backend's `extend` or `release`.
    pub fn hold(&self) -> &HoldToken {
        &self.hold
    }

    /// The fencing token of the hold, if its strategy issues them.
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.hold.fencing_token
    }

    /// The TTL the lease was renewed with when it was handed off (the one it
    /// was acquired with, unless an `extend` asked for another): what
    /// [`LockManager::resume`](crate::LockManager::resume) and `distlock
    /// extend` renew it to. `None` for a token of the `dl1` format, which
    /// did not carry it.
    pub fn ttl(&self) -> Option<Duration> {
        self.ttl
    }
}

/// Whether `text` is one or more ASCII digits.
fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

impl std::str::FromStr for HandoffToken {
    type Err = LockError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        HandoffToken::parse(text)
    }
}

impl fmt::Debug for HandoffToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandoffToken")
            .field("fencing_token", &self.hold.fencing_token)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for HoldToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HoldToken")
            .field("owner", &format_args!("OwnerToken(<redacted>)"))
            .field("fencing_token", &self.fencing_token)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnerToken(<redacted>)")
    }
}

/// A number that grows with every outermost acquisition of a lock.
///
/// # What it guarantees
///
/// Every successful outermost acquire of a key on a node returns a token greater
/// than every token returned earlier for that key by that node. It is produced in
/// the same atomic script as the acquire, so no two holders ever see the same
/// token. A resource that remembers the highest token it has accepted and
/// refuses writes carrying a lower one stays safe even when a paused holder
/// wakes up after its lease expired and writes late (Kleppmann's fencing).
///
/// # What it does not
///
/// The counter lives in Redis. If the node loses data (a restart without
/// persistence, a failover to a replica that had not received the last
/// increment, a `FLUSHALL`), the counter starts again and tokens go backwards.
/// Run Redis with AOF `fsync always` where that matters, or have the resource
/// also reject tokens it has already seen from an older epoch.
///
/// # Using it
///
/// The resource keeps the highest token it has accepted and checks it in the
/// same atomic step as the write. In Redis, a script (the lock and the
/// resource may share a server or not):
///
#[cfg_attr(not(doctest), doc = include_str!("doc/fencing_token.md"))]
///
/// In SQL, a column beside the data and a condition on the update; a write
/// that changed no row came from a stale holder. With `<`, each hold writes
/// once (a second charge under the same token is refused too); a hold that
/// writes several times compares with `<=`:
///
#[doc = include_str!("doc/fencing_token_sql.md")]
///
/// (Both examples run in distlock's tests, the second against SQLite.)
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct FencingToken(u64);

impl FencingToken {
    /// Wraps a raw counter value.
    pub const fn new(value: u64) -> Self {
        FencingToken(value)
    }

    /// The raw counter value.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag
/// (the bytes between the first `{` and the next `}`, when not empty) or of
/// the whole key, modulo 16384.
pub(crate) fn hash_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&byte| byte == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&byte| byte == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16_xmodem(tagged) % 16384
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), the checksum of
/// Redis Cluster's key slots.
fn crc16_xmodem(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_what_format_writes() {
        let bytes: Vec<u8> = (0..=255).collect();
        let mut hex = String::new();
        push_hex(&mut hex, &bytes);
        let expected: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(hex, expected);
    }

    #[test]
    fn handoff_tokens_round_trip_any_owner() {
        for owner in [
            "plain",
            "with.dots.and:colons",
            "ünïcode owner",
            "-",
            " padded ",
        ] {
            for fence in [
                None,
                Some(FencingToken::new(1)),
                Some(FencingToken::new(u64::MAX)),
            ] {
                let owner = OwnerToken::from_string(owner).expect("valid owner");
                let hold = HoldToken::new(owner).expect("os rng").granted(fence);
                let ttl = Duration::from_secs(300);
                let token = HandoffToken::new(hold.clone(), ttl);
                let parsed = HandoffToken::parse(&format!("{}\n", token.expose()))
                    .expect("a token's own text parses");
                assert_eq!(parsed.hold(), &hold, "same owner, value and fencing token");
                assert_eq!(parsed.expose(), token.expose());
                assert_eq!(parsed.fencing_token(), fence);
                assert_eq!(parsed.ttl(), Some(ttl));
            }
        }
    }

    #[test]
    fn a_dl1_token_parses_without_a_ttl() {
        let nonce = "0123456789abcdef";
        let parsed = HandoffToken::parse(&format!("dl1.7.{nonce}.with.dots")).expect("dl1");
        assert_eq!(parsed.ttl(), None);
        assert_eq!(parsed.fencing_token(), Some(FencingToken::new(7)));
        assert_eq!(parsed.hold().attempt_value(), format!("with.dots:{nonce}"));
    }

    #[test]
    fn a_permits_token_keeps_its_weight_slot_and_id() {
        let hold = HoldToken::new(OwnerToken::from_string("svc").expect("owner"))
            .expect("rng")
            .for_permit(3)
            .granted_permit(2, FencingToken::new(9));
        let id = hold.attempt_value().to_owned();
        let token = HandoffToken::new(hold, Duration::from_secs(5));
        assert!(
            token.expose().starts_with("dl3.9.5000.3:2."),
            "{:?}",
            token.ttl()
        );
        let parsed = HandoffToken::parse(token.expose()).expect("dl3");
        let permit = parsed.hold().permit().expect("a permit");
        assert_eq!((permit.weight(), permit.slot()), (3, Some(2)));
        assert_eq!(parsed.fencing_token(), Some(FencingToken::new(9)));
        // A permit's id carries no `#<token>`: the semaphore keeps it apart.
        assert_eq!(parsed.hold().value(), id);
        let next = parsed.hold().successor().expect("successor");
        assert_eq!(next.permit(), parsed.hold().permit());
        assert_ne!(next.attempt_value(), id);
    }

    #[test]
    fn a_read_write_token_keeps_its_mode_token_and_id() {
        for (access, letter) in [(Access::Shared, 'r'), (Access::Exclusive, 'w')] {
            let hold = HoldToken::new(OwnerToken::from_string("svc").expect("owner"))
                .expect("rng")
                .for_access(access)
                .granted_access(FencingToken::new(0));
            let id = hold.attempt_value().to_owned();
            let token = HandoffToken::new(hold, Duration::from_secs(5));
            assert!(
                token.expose().starts_with(&format!("dl4.0.5000.{letter}.")),
                "{access:?}"
            );
            let parsed = HandoffToken::parse(token.expose()).expect("dl4");
            assert_eq!(parsed.hold().access(), Some(access));
            assert_eq!(parsed.hold().permit(), None);
            assert_eq!(parsed.fencing_token(), Some(FencingToken::new(0)));
            assert_eq!(parsed.hold().value(), id);
            let next = parsed.hold().successor().expect("successor");
            assert_eq!(next.access(), Some(access));
            assert_eq!(next.fencing_token(), parsed.fencing_token());
            assert_ne!(next.attempt_value(), id);
        }
        let nonce = "0123456789abcdef";
        for text in [
            format!("dl4.1.5000.x.{nonce}.owner"),
            format!("dl4.-.5000.r.{nonce}.owner"),
            format!("dl4.1.5000.{nonce}.owner"),
        ] {
            assert!(
                matches!(
                    HandoffToken::parse(&text),
                    Err(LockError::InvalidOwner { .. })
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_handoff_tokens_are_typed_errors_that_quote_nothing() {
        let nonce = "0123456789abcdef";
        for text in [
            String::new(),
            "secret-garbage".to_owned(),
            format!("dl3.1.5000.2.{nonce}.owner"),
            format!("dl3.1.5000.0:1.{nonce}.owner"),
            format!("dl3.-.5000.1:1.{nonce}.owner"),
            format!("dl3.1.5000.1:x.{nonce}.owner"),
            format!("dl3.1.5000.{nonce}.owner"),
            format!("dl2.1.{nonce}.owner"),
            format!("dl2.1.0.{nonce}.owner"),
            format!("dl2.1.x.{nonce}.owner"),
            format!("dl2.1.99999999999999999999.{nonce}.owner"),
            format!("dl2.1.{}.{nonce}.owner", u64::MAX),
            format!("dl1.x.{nonce}.owner"),
            format!("dl1.-1.{nonce}.owner"),
            format!("dl1.99999999999999999999999.{nonce}.owner"),
            "dl1.1.0123.owner".to_owned(),
            "dl1.1.0123456789abcdeg.owner".to_owned(),
            format!("dl1.1.{nonce}."),
            format!("dl1.1.{nonce}.{}", "o".repeat(MAX_OWNER_LEN + 1)),
        ] {
            match HandoffToken::parse(&text) {
                Err(LockError::InvalidOwner { reason }) => {
                    assert!(
                        !reason.contains("secret") && !reason.contains("owner."),
                        "{reason}"
                    );
                }
                other => panic!("{text:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn handoff_token_debug_hides_the_secret() {
        let owner = OwnerToken::from_string("top-secret-owner").expect("valid owner");
        let hold = HoldToken::new(owner)
            .expect("os rng")
            .granted(Some(FencingToken::new(7)));
        let printed = format!("{:?}", HandoffToken::new(hold, Duration::from_secs(1)));
        assert!(!printed.contains("top-secret-owner"), "{printed}");
        assert!(printed.contains('7'), "{printed}");
    }

    #[test]
    fn keys_share_the_hash_tag() {
        let key = LockKey::new("lock:", "order:42").expect("valid key");
        assert_eq!(key.name(), "order:42");
        assert_eq!(key.redis_key(), "lock:{order:42}");
        assert_eq!(key.fence_key(), "lock:{order:42}:fence");
        let key = LockKey::new("lock:", "}x").expect("valid key");
        assert_eq!(key.name(), "}x");
        assert_eq!(key.redis_key(), "lock:{~}}x~");
        assert_eq!(key.fence_key(), "lock:{~}}x~:fence");
    }

    proptest::proptest! {
        /// The one string a key is kept in gives back the name and the
        /// layout's keys, for any name and prefix.
        #[test]
        fn one_string_gives_back_every_part(
            prefix in "[^{}]{0,12}",
            name in "\\PC{1,40}",
        ) {
            let key = LockKey::new(&prefix, &name).expect("valid key");
            let lock_key = if name.starts_with('}') {
                format!("{prefix}{{~}}{name}~")
            } else {
                format!("{prefix}{{{name}}}")
            };
            proptest::prop_assert_eq!(key.name(), name.as_str());
            proptest::prop_assert_eq!(key.redis_key(), lock_key.as_str());
            proptest::prop_assert_eq!(key.fence_key(), format!("{lock_key}:fence"));
            proptest::prop_assert_eq!(key.to_string(), name);
        }
    }

    fn cluster_slot(key: &str) -> u16 {
        hash_slot(key.as_bytes())
    }

    fn all_keys(key: &LockKey) -> [String; 11] {
        [
            key.redis_key().to_owned(),
            key.fence_key().to_owned(),
            key.queue_key(),
            key.waiters_key(),
            key.holder_key(),
            key.release_channel(),
            key.permits_held_key(),
            key.limit_key(),
            key.slot_fences_key(),
            key.leader_key(),
            key.modes_key(),
        ]
    }

    #[test]
    fn the_slot_function_matches_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16_xmodem(b"123456789"), 0x31C3);
        assert_eq!(cluster_slot("bar"), 5061);
        assert_eq!(
            cluster_slot("foo{}{bar}"),
            crc16_xmodem(b"foo{}{bar}") % 16384
        );
        assert_eq!(cluster_slot("foo{{bar}}zap"), cluster_slot("{bar"));
        assert_eq!(cluster_slot("foo{bar}{zap}"), cluster_slot("bar"));
        let key = LockKey::new("lock:", "order:42").expect("key");
        assert_eq!(key.hash_slot(), cluster_slot("order:42"));
        assert_eq!(cluster_slot("123456789"), 0x31C3);
        assert_eq!(cluster_slot("foo"), 12182);
        assert_eq!(
            cluster_slot("{user1000}.following"),
            cluster_slot("user1000")
        );
        assert_ne!(cluster_slot("a{}:x"), cluster_slot("a{}:y"));
    }

    #[test]
    fn every_name_keeps_its_keys_in_one_slot() {
        let names = [
            "}",
            "}}",
            "}abc",
            "}{",
            "a}b",
            "{",
            "{}",
            "a{b}c",
            "}order:1",
            "{x}",
            "~}a",
            "ключ}",
            "}ключ",
        ];
        for name in names {
            let key = LockKey::new("lock:", name).expect("valid key");
            let slots: Vec<u16> = all_keys(&key).iter().map(|k| cluster_slot(k)).collect();
            assert!(
                slots.windows(2).all(|pair| pair[0] == pair[1]),
                "{name:?}: keys {:?} in slots {slots:?}",
                all_keys(&key)
            );
        }
    }

    #[test]
    fn no_two_names_share_a_key() {
        let names = ["}a", "~}a", "}a~", "{~}}a~", "~", "}", "}~", "~}"];
        let mut seen = std::collections::HashMap::new();
        for name in names {
            let key = LockKey::new("lock:", name).expect("valid key");
            for derived in all_keys(&key) {
                if let Some(other) = seen.insert(derived.clone(), name) {
                    panic!("{name:?} and {other:?} share the key {derived:?}");
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_name_keeps_one_slot(name in "[}{~a:]{1,8}") {
            let key = LockKey::new("lock:", &name).expect("valid key");
            let slot = cluster_slot(key.redis_key());
            for derived in all_keys(&key) {
                proptest::prop_assert_eq!(cluster_slot(&derived), slot, "{:?}: {:?}", name, derived);
            }
        }
    }

    #[test]
    fn empty_and_oversized_names_are_rejected() {
        assert!(matches!(
            LockKey::new("lock:", ""),
            Err(LockError::InvalidKey { .. })
        ));
        let long = "x".repeat(MAX_KEY_LEN + 1);
        assert!(matches!(
            LockKey::new("lock:", &long),
            Err(LockError::InvalidKey { .. })
        ));
        assert!(LockKey::new("lock:", &"x".repeat(MAX_KEY_LEN)).is_ok());
        assert!(matches!(
            LockKey::new("a{b", "k"),
            Err(LockError::InvalidKey { .. })
        ));
    }

    #[test]
    fn generated_tokens_are_distinct_and_hidden_in_debug() {
        let a = OwnerToken::generate().expect("os rng");
        let b = OwnerToken::generate().expect("os rng");
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), 32);
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn holds_of_one_owner_are_distinct_and_hidden_in_debug() {
        let owner = OwnerToken::from_string("worker-7").expect("owner");
        let first = HoldToken::new(owner.clone()).expect("os rng");
        let second = HoldToken::new(owner.clone()).expect("os rng");
        assert_ne!(first.value(), second.value());
        assert_eq!(first.owner(), &owner);
        assert!(first.value().starts_with("worker-7:"));
        assert_eq!(first.value().len(), "worker-7:".len() + 16);
        let debug = format!("{first:?}");
        assert!(!debug.contains("worker-7"), "{debug}");
    }

    #[test]
    fn a_fresh_hold_makes_its_owner_on_demand() {
        let hold = HoldToken::fresh().expect("os rng");
        let (owner, nonce) = hold.value().split_once(':').expect("owner:nonce");
        assert_eq!((owner.len(), nonce.len()), (32, 16));
        let lower_hex = |digit: u8| digit.is_ascii_digit() || (b'a'..=b'f').contains(&digit);
        assert!(
            owner.bytes().chain(nonce.bytes()).all(lower_hex),
            "{owner}:{nonce}"
        );
        let again = HoldToken::fresh().expect("os rng");
        assert_ne!(again.value(), hold.value());
        assert_ne!(again.expose_owner(), hold.expose_owner());
        assert_eq!(hold.expose_owner(), owner);
        // Equal before and after the owner token is made, and hashed alike.
        let untouched = hold.clone();
        assert_eq!(hold.owner().expose(), owner);
        assert_eq!(hold, untouched);
        use std::hash::BuildHasher;
        let state = std::hash::RandomState::new();
        assert_eq!(state.hash_one(&hold), state.hash_one(&untouched));
        assert!(!format!("{hold:?}").contains(owner));
        // The same owner, made into a token of its own: another nonce, so
        // another hold, with an equal owner.
        let other = HoldToken::new(OwnerToken::from_string(owner).expect("owner")).expect("os rng");
        assert_ne!(other, hold);
        assert_eq!(other.owner(), hold.owner());
    }

    #[test]
    fn an_owner_with_a_colon_keeps_its_split() {
        let owner = OwnerToken::from_string("team:worker:7").expect("owner");
        let hold = HoldToken::new(owner.clone()).expect("os rng");
        assert_eq!(hold.expose_owner(), "team:worker:7");
        assert_eq!(hold.owner(), &owner);
        let handoff = HandoffToken::new(
            hold.clone().granted(Some(FencingToken::new(3))),
            Duration::from_secs(1),
        );
        let parsed = HandoffToken::parse(handoff.expose()).expect("parse");
        assert_eq!(parsed.hold().expose_owner(), "team:worker:7");
        assert_eq!(parsed.hold().attempt_value(), hold.value());
        // The claimed token is part of the value the key is compared with.
        assert_eq!(parsed.hold().value(), format!("{}#3", hold.value()));
        assert_eq!(parsed.hold().clone().granted(None).value(), hold.value());
    }

    #[test]
    fn caller_tokens_are_bounded() {
        assert!(OwnerToken::from_string("").is_err());
        assert!(OwnerToken::from_string("x".repeat(MAX_OWNER_LEN + 1)).is_err());
        assert!(OwnerToken::from_string("worker-7").is_ok());
    }
}
