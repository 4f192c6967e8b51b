//! A fair waiter's offer: the hold a release may grant the lock to on the
//! server (the server-side hand-off), and the lease the waiter then has.
//!
//! A waiter offers the hold of each attempt that queues it; the server keeps
//! the last one. Only the hold of an attempt answered "held" is one the
//! waiter may take up: an attempt whose reply was lost is released before
//! the next one, so a grant to it is handed on, never trusted.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use crate::hold::HoldToken;

/// The hold an answered attempt offered, and when that attempt was sent: a
/// grant to it cannot predate that, so its lease counts from then.
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    pub(crate) hold: HoldToken,
    pub(crate) sent_at: Instant,
}

/// The waiter's offers, shared by its wait and the guard that takes it out
/// of the line (giving back a grant it never took up).
#[derive(Debug, Default)]
pub(crate) struct Offered(Mutex<Offers>);

#[derive(Debug, Default)]
struct Offers {
    /// The hold of the last attempt answered "held".
    answered: Option<Offer>,
    /// The holds of attempts sent since, unanswered (in flight, or their
    /// replies lost): the server may keep one of them as the offer, and a
    /// release may grant it. Only given back, never taken up.
    unanswered: Vec<HoldToken>,
}

/// How many unanswered holds an [`Offered`] remembers: each is released
/// before the next attempt anyway; these are for a wait that ends meanwhile.
const MAX_UNANSWERED: usize = 4;

impl Offered {
    fn offers(&self) -> std::sync::MutexGuard<'_, Offers> {
        // Plain values, valid whatever a panicking holder did.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An attempt with `hold` is about to be sent.
    pub(crate) fn sending(&self, hold: &HoldToken) {
        let mut offers = self.offers();
        if offers.unanswered.len() == MAX_UNANSWERED {
            offers.unanswered.remove(0);
        }
        offers.unanswered.push(hold.clone());
    }

    /// The attempt sent at `sent_at` with `hold` was answered "held": it is
    /// the offer now, in place of every earlier one.
    pub(crate) fn answered(&self, hold: HoldToken, sent_at: Instant) {
        let mut offers = self.offers();
        offers.unanswered.clear();
        offers.answered = Some(Offer { hold, sent_at });
    }

    /// The hold of the last attempt answered "held".
    pub(crate) fn hold(&self) -> Option<HoldToken> {
        self.offers()
            .answered
            .as_ref()
            .map(|offer| offer.hold.clone())
    }

    /// Every hold a release may have granted: for a waiter that leaves.
    pub(crate) fn holds(&self) -> Vec<HoldToken> {
        let offers = self.offers();
        let answered = offers.answered.iter().map(|offer| offer.hold.clone());
        answered.chain(offers.unanswered.iter().cloned()).collect()
    }

    /// Takes the answered offer up (a grant to it was found).
    pub(crate) fn take(&self) -> Option<Offer> {
        self.offers().answered.take()
    }

    /// Takes the answered offer up if its attempt's value is `attempt` (a
    /// grant message named it).
    pub(crate) fn take_if(&self, attempt: &str) -> Option<Offer> {
        self.offers()
            .answered
            .take_if(|offer| offer.hold.attempt_value() == attempt)
    }
}
