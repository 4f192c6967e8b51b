//! Following the master behind a group of sentinels, one policy for both
//! clients: ask the sentinels at most every [`SENTINEL_RECHECK`] (at once
//! after a sign that the master moved), keep the master in use when no
//! sentinel answers, and switch when they name another. Each adapter brings
//! the two things that differ by client: how to ask, and how to switch.

use std::time::Duration;

/// How long a sentinel's answer is trusted before the next command asks
/// again. After `SENTINEL FAILOVER` the old master keeps answering as a
/// master (until the sentinels demote it, seconds later), so only the
/// sentinels can tell a client that the master moved.
pub(super) const SENTINEL_RECHECK: Duration = Duration::from_millis(500);

/// What to do after asking the sentinels.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Follow<T, E> {
    /// Go on with the master in use: the sentinels named it, or none
    /// answered (`unanswered` says why).
    Keep {
        /// The question's error when no sentinel answered.
        unanswered: Option<E>,
    },
    /// The sentinels name a master not in use: switch to `T` (what the
    /// adapter's question returned with the address).
    Switch {
        /// `host:port`, as the sentinels gave it.
        address: String,
        /// What the adapter needs to switch.
        to: T,
    },
}

/// Decides from `named` (the sentinels' answer: the master's address and
/// whatever the adapter asked with it) and `in_use` (the addresses of the
/// master connections in use). With no master in use and no answer, the
/// answer's error.
pub(super) fn follow<T, E>(
    in_use: &[String],
    named: Result<(String, T), E>,
) -> Result<Follow<T, E>, E> {
    match named {
        Ok((address, _)) if in_use.contains(&address) => Ok(Follow::Keep { unanswered: None }),
        Ok((address, to)) => Ok(Follow::Switch { address, to }),
        // No sentinel answered: a master that stopped answering shows up
        // in the commands' own errors, which make the next command ask.
        Err(err) if !in_use.is_empty() => Ok(Follow::Keep {
            unanswered: Some(err),
        }),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_use(addresses: &[&str]) -> Vec<String> {
        addresses
            .iter()
            .map(|address| (*address).to_owned())
            .collect()
    }

    #[test]
    fn the_master_in_use_is_kept_while_the_sentinels_name_it() {
        let named: Result<_, ()> = Ok(("10.0.0.1:6379".to_owned(), ()));
        assert_eq!(
            follow(&in_use(&["10.0.0.1:6379"]), named),
            Ok(Follow::Keep { unanswered: None })
        );
    }

    #[test]
    fn another_master_named_is_switched_to() {
        let named: Result<_, ()> = Ok(("10.0.0.2:6379".to_owned(), 7));
        assert_eq!(
            follow(&in_use(&["10.0.0.1:6379"]), named),
            Ok(Follow::Switch {
                address: "10.0.0.2:6379".to_owned(),
                to: 7
            })
        );
        let first: Result<_, ()> = Ok(("10.0.0.2:6379".to_owned(), 7));
        assert!(matches!(follow(&[], first), Ok(Follow::Switch { .. })));
    }

    #[test]
    fn silent_sentinels_keep_a_known_master_and_fail_without_one() {
        let silent: Result<(String, ()), &str> = Err("no sentinel answered");
        assert_eq!(
            follow(&in_use(&["10.0.0.1:6379"]), silent),
            Ok(Follow::Keep {
                unanswered: Some("no sentinel answered")
            })
        );
        let silent: Result<(String, ()), &str> = Err("no sentinel answered");
        assert_eq!(follow(&[], silent), Err("no sentinel answered"));
    }
}
