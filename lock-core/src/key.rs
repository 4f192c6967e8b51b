//! Lock names, owner tokens and fencing tokens: the values a lock is made of.

use std::fmt;

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
/// store and compare (see [`HoldToken`](crate::HoldToken)), and the field of a reentrant hold.
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

    /// A token of text already checked: a hold's owner part, which was an
    /// owner token before.
    pub(crate) fn from_valid(token: String) -> Self {
        OwnerToken(token)
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
pub(crate) fn write_hex(digits: &mut [u8], bytes: &[u8]) {
    for (pair, &byte) in digits.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX_DIGITS[usize::from(byte >> 4)];
        pair[1] = HEX_DIGITS[usize::from(byte & 0x0f)];
    }
}

/// Appends `bytes` to `text` as lower-case hex ([`write_hex`]), through a
/// stack buffer: a `char` at a time checks the capacity and encodes UTF-8
/// per digit, and this runs on every acquire.
pub(crate) fn push_hex(text: &mut String, bytes: &[u8]) {
    let mut buffer = [0u8; 64];
    for chunk in bytes.chunks(buffer.len() / 2) {
        let digits = &mut buffer[..2 * chunk.len()];
        write_hex(digits, chunk);
        // Only ASCII digits were written.
        text.push_str(std::str::from_utf8(digits).unwrap_or_default());
    }
}

/// Fills `bytes` from the OS generator, as a typed error if it fails.
pub(crate) fn os_random(bytes: &mut [u8]) -> Result<(), LockError> {
    getrandom::fill(bytes).map_err(|err| LockError::InvalidOwner {
        reason: format!("the OS random generator failed: {err}"),
    })
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
    use crate::server::keys::KeyNames;

    #[test]
    fn hex_is_what_format_writes() {
        let bytes: Vec<u8> = (0..=255).collect();
        let mut hex = String::new();
        push_hex(&mut hex, &bytes);
        let expected: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(hex, expected);
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

    fn all_keys(key: &LockKey) -> [String; 14] {
        [
            key.redis_key().to_owned(),
            key.fence_key().to_owned(),
            key.queue_key(),
            key.waiters_key(),
            key.holder_key(),
            key.release_channel(),
            key.held_key(),
            key.slots_key(),
            key.limit_key(),
            key.slot_fences_key(),
            key.leader_key(),
            key.latch_downs_key(),
            key.barrier_key(),
            key.barrier_left_key(),
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
    fn caller_tokens_are_bounded() {
        assert!(OwnerToken::from_string("").is_err());
        assert!(OwnerToken::from_string("x".repeat(MAX_OWNER_LEN + 1)).is_err());
        assert!(OwnerToken::from_string("worker-7").is_ok());
    }
}
