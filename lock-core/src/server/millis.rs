//! A TTL as Redis takes it (`PX`, `PEXPIRE`) and reads it back (`PTTL`).

use std::time::Duration;

use crate::ttl::ttl_millis;

/// A count of milliseconds as decimal text, kept inline: the `PX` or
/// `PEXPIRE` argument of every acquire and renewal, made without allocating
/// (an acquire is a few microseconds of client work, and a `String` per
/// call is a measurable part of it).
///
/// ```
/// use std::time::Duration;
/// use lock_core::strategy::MillisText;
///
/// assert_eq!(MillisText::of_ttl(Duration::from_millis(30_000)).as_str(), "30000");
/// assert_eq!(MillisText::new(u64::MAX).as_str(), "18446744073709551615");
/// ```
#[derive(Clone, Copy)]
pub struct MillisText {
    digits: [u8; 20],
    start: u8,
}

impl MillisText {
    /// `millis` in decimal.
    pub const fn new(millis: u64) -> Self {
        // u64::MAX has 20 digits; the digits are written from the right.
        let mut digits = [b'0'; 20];
        let mut start = digits.len();
        let mut rest = millis;
        loop {
            start -= 1;
            digits[start] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        MillisText {
            digits,
            start: start as u8,
        }
    }

    /// A TTL in whole milliseconds ([`ttl_millis`]), in decimal.
    pub fn of_ttl(ttl: Duration) -> Self {
        Self::new(ttl_millis(ttl))
    }

    /// The digits as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits are ever written. Were that ever broken, an
        // empty argument makes Redis refuse the command, where "0" would
        // expire the key at once.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    /// The digits as bytes, as sent to Redis.
    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[usize::from(self.start)..]
    }
}

impl std::fmt::Debug for MillisText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for MillisText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `PTTL` reply as a remaining TTL: `None` for a key without expiry (-1)
/// and, defensively, for any other negative value.
pub fn remaining_from_pttl(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn millis_text_is_the_decimal_number(millis in prop_oneof![0u64..100_000, any::<u64>()]) {
            let (text, expected) = (MillisText::new(millis), millis.to_string());
            prop_assert_eq!(text.as_str(), expected.as_str());
            prop_assert_eq!(text.as_bytes(), expected.as_bytes());
        }
    }

    #[test]
    fn millis_text_of_the_edges() {
        assert_eq!(MillisText::new(0).as_str(), "0");
        assert_eq!(MillisText::new(9).as_str(), "9");
        assert_eq!(MillisText::new(10).as_str(), "10");
        assert_eq!(
            MillisText::of_ttl(Duration::from_micros(1_999)).as_str(),
            "1"
        );
        assert_eq!(
            MillisText::of_ttl(Duration::MAX).as_str(),
            u64::MAX.to_string()
        );
    }
}
