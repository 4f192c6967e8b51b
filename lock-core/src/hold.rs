//! Holds: one acquire attempt's claim on a name as a backend sees it
//! ([`HoldToken`], whose [`HoldKind`] says what it takes), and the text that
//! hands a held lease to another process ([`HandoffToken`]).

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::error::LockError;
use crate::key::{os_random, push_hex, write_hex, FencingToken, LockKey, OwnerToken};

/// Room for `#<fencing token>` (a `u64` in decimal) behind a hold's value,
/// so a grant appends it without moving the string.
const TOKEN_ROOM: usize = 21;

/// One hold of a name as a backend sees it: the owner, a nonce unique to the
/// acquire attempt that took it, what it takes ([`HoldKind`]) and, once
/// granted, its fencing token.
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
/// - the primitives with many holders (permits, read-write holds) name a
///   hold by [`attempt_value`](HoldToken::attempt_value), its id, and keep
///   its token beside it;
/// - the reentrant strategy keys its hash by [`HoldToken::owner`] (re-entry is
///   by owner) and tells holds apart by the fencing token, which only an
///   outermost acquire changes.
///
/// `Debug` never prints the owner or the value.
#[derive(Clone)]
pub struct HoldToken {
    /// `<owner>:<nonce>`, then `#<fencing token>` once a lock's hold is
    /// granted with one.
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
    kind: HoldKind,
    /// A fair-mode lock's hold or permit: its release hands what it frees
    /// to the next waiters in line ([`in_line`](Self::in_line)).
    in_line: bool,
}

/// What a hold takes of its name: the lock, a semaphore's permit, a
/// read-write lock's shared or exclusive hold, or several names at once.
/// A backend renews, releases and takes over a hold by one `match` on it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HoldKind {
    /// The lock of one name (a plain, fair or reentrant lock, an election's
    /// term).
    Lock,
    /// A semaphore's permit: its weight and, once granted, its slot.
    Permit(Permit),
    /// A read-write lock's hold.
    Access(Access),
    /// A multi-key lock's hold: its member keys in the order they are
    /// taken, the first being the lease's key.
    Multi(Arc<[LockKey]>),
    /// A barrier's party.
    Party,
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

    /// `r` or `w`: the mode as the read-write scripts store it.
    pub fn letter(self) -> &'static str {
        match self {
            Access::Shared => "r",
            Access::Exclusive => "w",
        }
    }
}

/// What a hold of a semaphore takes: its weight and, once granted, its
/// slot (see [`PermitGuard::slot`](crate::PermitGuard::slot)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Permit {
    weight: u32,
    slot: Option<u32>,
}

impl Permit {
    /// A permit of `weight`, not yet granted a slot.
    pub fn new(weight: u32) -> Self {
        Permit { weight, slot: None }
    }

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
            && self.kind == other.kind
    }
}

impl Eq for HoldToken {}

impl std::hash::Hash for HoldToken {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.value.hash(state);
        self.owner_len.hash(state);
        self.fencing_token.hash(state);
        self.kind.hash(state);
    }
}

impl HoldToken {
    /// The hold of a new acquire attempt by `owner` on a lock: 64 bits of
    /// nonce from the OS generator. Errors with [`LockError::InvalidOwner`]
    /// only if the generator fails.
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
            kind: HoldKind::Lock,
            in_line: false,
        })
    }

    fn with_nonce(owner: OwnerToken, nonce: &[u8]) -> Self {
        let text = owner.expose();
        let mut value = String::with_capacity(text.len() + 1 + 2 * nonce.len() + TOKEN_ROOM);
        value.push_str(text);
        value.push(':');
        push_hex(&mut value, nonce);
        HoldToken {
            attempt_len: value.len(),
            value,
            owner_len: text.len(),
            owner: OnceLock::from(owner),
            fencing_token: None,
            kind: HoldKind::Lock,
            in_line: false,
        }
    }

    /// The owner that asked for the hold.
    pub fn owner(&self) -> &OwnerToken {
        self.owner
            .get_or_init(|| OwnerToken::from_valid(self.expose_owner().to_owned()))
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

    /// `<owner>:<nonce>`, then `#<fencing token>` once a lock's hold is
    /// granted with one: the value a single-value strategy stores in the
    /// lock key and compares on release and extend. A secret, like the
    /// owner.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// `<owner>:<nonce>` alone: what the attempt sent before it knew its
    /// token, all a release of an attempt whose reply was lost can name,
    /// and the id of a permit or a read-write hold.
    pub fn attempt_value(&self) -> &str {
        &self.value[..self.attempt_len]
    }

    /// The fencing token the acquire returned, once granted; `None` before,
    /// and for strategies that issue none.
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.fencing_token
    }

    /// What this hold takes of its name.
    pub fn kind(&self) -> &HoldKind {
        &self.kind
    }

    /// This hold as an attempt to take `kind`: what the engine passes to
    /// [`LockBackend::try_acquire`](crate::LockBackend::try_acquire) with a
    /// claim of the same kind ([`Claim::hold_kind`](crate::Claim::hold_kind)),
    /// and what a backend's own tests pass to it.
    pub fn with_kind(mut self, kind: HoldKind) -> Self {
        self.kind = kind;
        self
    }

    /// The hold that takes this one over when a hand-off is resumed: the
    /// same kind and fencing token (and slot), under an owner of its own.
    /// The owner is not kept: a read-write lock's owner re-enters its own
    /// holds, so the process that handed the hold off would otherwise enter
    /// beside the process that resumed it. Errors only if the OS generator
    /// fails.
    pub(crate) fn successor(&self) -> Result<Self, LockError> {
        let mut next = HoldToken::fresh()?.with_kind(self.kind.clone());
        next.in_line = self.in_line;
        Ok(next.granted(self.fencing_token))
    }

    /// This hold as granted with `token`. A lock's (or a multi-key hold's)
    /// [`value`](Self::value) gets `#<token>` behind it, as the grant
    /// scripts store it; a permit's or a read-write hold's stays its id,
    /// since those primitives keep the token beside it.
    pub fn granted(mut self, token: Option<FencingToken>) -> Self {
        use std::fmt::Write as _;
        self.value.truncate(self.attempt_len);
        if let (Some(token), HoldKind::Lock | HoldKind::Multi(_)) = (token, &self.kind) {
            let _ = write!(self.value, "#{}", token.get());
        }
        self.fencing_token = token;
        self
    }

    /// This permit as granted `slot`, as a backend's grant gives it; no
    /// change to a hold of another kind. What a backend's own tests use to
    /// act on a permit they were granted.
    pub fn in_slot(mut self, slot: u32) -> Self {
        if let HoldKind::Permit(permit) = &mut self.kind {
            permit.slot = Some(slot);
        }
        self
    }

    /// This hold as a fair-mode lock's or permit's: its release hands what
    /// it frees to the next waiters in line, on the server where the
    /// backend can ([`is_in_line`](Self::is_in_line)). A hold outside fair
    /// mode is not: its release sends no queue keys, which costs the
    /// server less, and waiters in line (of another process's fair mode)
    /// take their turn from its message. A read-write or a multi-key hold
    /// is never in line: writers queue by their own keys.
    pub fn in_line(mut self) -> Self {
        self.in_line = matches!(self.kind, HoldKind::Lock | HoldKind::Permit(_));
        self
    }

    /// Whether this is a fair-mode lock's hold or permit
    /// ([`in_line`](Self::in_line)).
    pub fn is_in_line(&self) -> bool {
        self.in_line
    }
}

impl fmt::Debug for HoldToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HoldToken")
            .field("owner", &format_args!("OwnerToken(<redacted>)"))
            .field("kind", &self.kind)
            .field("fencing_token", &self.fencing_token)
            .finish_non_exhaustive()
    }
}

/// Everything another process needs to take over a held lease: the hold's
/// kind, owner, nonce, fencing token and the TTL it was renewed with, as
/// one line of text.
///
/// [`LockGuard::hand_off`](crate::LockGuard::hand_off) stops renewing a lease
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
    ttl: Duration,
}

/// The first field of a [`HandoffToken`]'s text: its format's version.
const HANDOFF_FORMAT: &str = "dl1";

impl HandoffToken {
    /// The token for a granted `hold` whose holder last asked for `ttl`.
    /// `None` for a multi-key hold, whose members one token cannot name, and
    /// for a barrier's party, which is one process's place.
    pub(crate) fn new(hold: HoldToken, ttl: Duration) -> Option<Self> {
        // `dl1.<kind>.<fencing token or ->.<ttl ms>.<nonce>.<owner>`: the
        // owner, which a caller may choose freely, goes last, so it may
        // contain anything. The kind is `lock`, `read`, `write` or
        // `permit-<weight>-<slot>`.
        let kind = match hold.kind() {
            HoldKind::Lock => "lock".to_owned(),
            HoldKind::Access(Access::Shared) => "read".to_owned(),
            HoldKind::Access(Access::Exclusive) => "write".to_owned(),
            HoldKind::Permit(permit) => format!("permit-{}-{}", permit.weight, permit.slot?),
            HoldKind::Multi(_) | HoldKind::Party => return None,
        };
        let fence = hold
            .fencing_token
            .map_or_else(|| "-".to_owned(), |token| token.get().to_string());
        let text = format!(
            "{HANDOFF_FORMAT}.{kind}.{fence}.{}.{}.{}",
            ttl.as_millis(),
            hold.nonce(),
            hold.expose_owner()
        );
        Some(HandoffToken { text, hold, ttl })
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
        let mut fields = text.splitn(6, '.');
        let mut field = || fields.next();
        let (Some(format), Some(kind), Some(fence), Some(ttl), Some(nonce), Some(owner)) =
            (field(), field(), field(), field(), field(), field())
        else {
            return Err(malformed("expected six dot-separated fields"));
        };
        if format != HANDOFF_FORMAT {
            return Err(malformed(
                "unknown format (expected it to start with `dl1.`)",
            ));
        }
        let fencing_token = match fence {
            "-" => None,
            digits => {
                Some(FencingToken::new(number(digits).ok_or_else(|| {
                    malformed("the fencing token is not a number")
                })?))
            }
        };
        let kind = match kind {
            "lock" => HoldKind::Lock,
            "read" => HoldKind::Access(Access::Shared),
            "write" => HoldKind::Access(Access::Exclusive),
            permit => {
                let (weight, slot) = permit
                    .strip_prefix("permit-")
                    .and_then(|rest| rest.split_once('-'))
                    .ok_or_else(|| malformed("the kind is not lock, read, write or a permit"))?;
                let weight = number(weight)
                    .and_then(|weight| u32::try_from(weight).ok())
                    .filter(|weight| *weight >= 1)
                    .ok_or_else(|| malformed("the permit's weight is out of range"))?;
                let slot = number(slot)
                    .and_then(|slot| u32::try_from(slot).ok())
                    .ok_or_else(|| malformed("the permit's slot is out of range"))?;
                HoldKind::Permit(Permit {
                    weight,
                    slot: Some(slot),
                })
            }
        };
        if fencing_token.is_none() && kind != HoldKind::Lock {
            return Err(malformed(
                "a permit's or read-write hold's token has no fencing token",
            ));
        }
        let ttl = number(ttl)
            .map(Duration::from_millis)
            .filter(|ttl| crate::ttl::validate_ttl(*ttl).is_ok())
            .ok_or_else(|| malformed("the TTL is out of range"))?;
        if nonce.len() != 16 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(malformed("the nonce is not 16 hex digits"));
        }
        let owner = OwnerToken::from_string(owner)?;
        let value = format!("{}:{nonce}", owner.expose());
        let hold = HoldToken {
            attempt_len: value.len(),
            value,
            owner_len: owner.expose().len(),
            owner: OnceLock::from(owner),
            fencing_token: None,
            kind,
            in_line: false,
        }
        .granted(fencing_token);
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
    /// extend` renew it to.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

/// `text` as a `u64` when it is one or more ASCII digits (no sign).
fn number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
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
            .field("kind", &self.hold.kind)
            .field("fencing_token", &self.hold.fencing_token)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::MAX_OWNER_LEN;

    fn hold_of(owner: &str) -> HoldToken {
        HoldToken::new(OwnerToken::from_string(owner).expect("owner")).expect("os rng")
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
                let hold = hold_of(owner).granted(fence);
                let ttl = Duration::from_secs(300);
                let token = HandoffToken::new(hold.clone(), ttl).expect("a lock's");
                let parsed = HandoffToken::parse(&format!("{}\n", token.expose()))
                    .expect("a token's own text parses");
                assert_eq!(parsed.hold(), &hold, "same owner, value and fencing token");
                assert_eq!(parsed.expose(), token.expose());
                assert_eq!(parsed.fencing_token(), fence);
                assert_eq!(parsed.ttl(), ttl);
            }
        }
    }

    #[test]
    fn every_kind_of_hold_has_one_token_format() {
        let kinds = [
            (HoldKind::Lock, None, "dl1.lock.9.5000."),
            (
                HoldKind::Permit(Permit::new(3)),
                Some(2),
                "dl1.permit-3-2.9.5000.",
            ),
            (HoldKind::Access(Access::Shared), None, "dl1.read.9.5000."),
            (
                HoldKind::Access(Access::Exclusive),
                None,
                "dl1.write.9.5000.",
            ),
        ];
        for (kind, slot, start) in kinds {
            let mut hold = hold_of("svc")
                .with_kind(kind.clone())
                .granted(Some(FencingToken::new(9)));
            if let Some(slot) = slot {
                hold = hold.in_slot(slot);
            }
            let token = HandoffToken::new(hold.clone(), Duration::from_secs(5)).expect("token");
            assert!(token.expose().starts_with(start), "{kind:?}");
            let parsed = HandoffToken::parse(token.expose()).expect("parses");
            assert_eq!(parsed.hold(), &hold, "{kind:?}");
            // A permit's and a read-write hold's id carries no `#<token>`:
            // those primitives keep the token beside it.
            let bare = !matches!(kind, HoldKind::Lock);
            assert_eq!(parsed.hold().value() == hold.attempt_value(), bare);
            let next = parsed.hold().successor().expect("successor");
            assert_eq!(next.kind(), parsed.hold().kind());
            assert_eq!(next.fencing_token(), parsed.fencing_token());
            assert_ne!(next.attempt_value(), hold.attempt_value());
            assert_ne!(next.owner(), hold.owner(), "{kind:?}: the owner was kept");
        }
        let members: Arc<[LockKey]> = Arc::from(vec![LockKey::new("", "a").expect("key")]);
        let multi = hold_of("svc")
            .with_kind(HoldKind::Multi(members))
            .granted(Some(FencingToken::new(1)));
        assert!(HandoffToken::new(multi, Duration::from_secs(5)).is_none());
    }

    #[test]
    fn malformed_handoff_tokens_are_typed_errors_that_quote_nothing() {
        let nonce = "0123456789abcdef";
        for text in [
            String::new(),
            "secret-garbage".to_owned(),
            format!("dl2.lock.1.5000.{nonce}.owner"),
            format!("dl1.mutex.1.5000.{nonce}.owner"),
            format!("dl1.permit-2.1.5000.{nonce}.owner"),
            format!("dl1.permit-0-1.1.5000.{nonce}.owner"),
            format!("dl1.permit-1-x.1.5000.{nonce}.owner"),
            format!("dl1.permit-1-1.-.5000.{nonce}.owner"),
            format!("dl1.read.-.5000.{nonce}.owner"),
            format!("dl1.lock.1.{nonce}.owner"),
            format!("dl1.lock.1.0.{nonce}.owner"),
            format!("dl1.lock.1.x.{nonce}.owner"),
            format!("dl1.lock.1.99999999999999999999.{nonce}.owner"),
            format!("dl1.lock.1.{}.{nonce}.owner", u64::MAX),
            format!("dl1.lock.x.5000.{nonce}.owner"),
            format!("dl1.lock.-1.5000.{nonce}.owner"),
            format!("dl1.lock.99999999999999999999999.5000.{nonce}.owner"),
            "dl1.lock.1.5000.0123.owner".to_owned(),
            "dl1.lock.1.5000.0123456789abcdeg.owner".to_owned(),
            format!("dl1.lock.1.5000.{nonce}."),
            format!("dl1.lock.1.5000.{nonce}.{}", "o".repeat(MAX_OWNER_LEN + 1)),
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
        let hold = hold_of("top-secret-owner").granted(Some(FencingToken::new(7)));
        let token = HandoffToken::new(hold, Duration::from_secs(1)).expect("token");
        let printed = format!("{token:?}");
        assert!(!printed.contains("top-secret-owner"), "{printed}");
        assert!(printed.contains('7'), "{printed}");
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
        let hold = hold_of("team:worker:7");
        assert_eq!(hold.expose_owner(), "team:worker:7");
        let handoff = HandoffToken::new(
            hold.clone().granted(Some(FencingToken::new(3))),
            Duration::from_secs(1),
        )
        .expect("token");
        let parsed = HandoffToken::parse(handoff.expose()).expect("parse");
        assert_eq!(parsed.hold().expose_owner(), "team:worker:7");
        assert_eq!(parsed.hold().attempt_value(), hold.value());
        // The claimed token is part of the value the key is compared with.
        assert_eq!(parsed.hold().value(), format!("{}#3", hold.value()));
        assert_eq!(parsed.hold().clone().granted(None).value(), hold.value());
    }

    #[test]
    fn only_locks_and_permits_queue_in_line() {
        assert!(hold_of("a").in_line().is_in_line());
        assert!(hold_of("a")
            .with_kind(HoldKind::Permit(Permit::new(1)))
            .in_line()
            .is_in_line());
        assert!(!hold_of("a")
            .with_kind(HoldKind::Access(Access::Exclusive))
            .in_line()
            .is_in_line());
    }
}
