//! A line of waiters and the attempts they offer, as `shared/queue.lua`
//! keeps them for a fair lock, a fair semaphore and a read-write lock's
//! writers: a queue of owners, each place's deadline, and one offer an
//! owner at most, which a release may grant on the server.

/// Whose offer it is, as `shared/queue.lua` tags it: a release grants only
/// offers of its own kind (a fair lock's hand-off a lock's, a read-write
/// lock's a write's, a fair semaphore's permits), and a waiter of another
/// kind at the head takes its own turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tag {
    /// A fair lock's waiter (`''`).
    Lock,
    /// A waiting writer (`'w'`).
    Write,
    /// A fair semaphore's waiter, for permits of this weight (`'p'`).
    Permits(u8),
}

impl Tag {
    /// Whether two tags are of one kind (permits of any weight are).
    fn same_kind(self, other: Tag) -> bool {
        std::mem::discriminant(&self) == std::mem::discriminant(&other)
    }

    /// The weight an offer of this tag asks for.
    fn weight(self) -> u8 {
        match self {
            Tag::Permits(weight) => weight,
            Tag::Lock | Tag::Write => 1,
        }
    }
}

/// An offer a waiter left: its attempt, the weight it asks for, how long a
/// grant to it runs, and the place's deadline it was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Offer {
    /// The waiter.
    pub client: u8,
    /// The attempt offered.
    pub attempt: u8,
    /// Whose offer it is.
    pub tag: Tag,
    /// The weight it asks for (1 but for a semaphore's permits).
    pub weight: u8,
    /// How long a grant to it runs: the waiter lease, or the TTL if
    /// shorter.
    pub runs: u64,
    /// The deadline its place got with it.
    pub place: u64,
}

/// The line's keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Line {
    /// The waiters in line, each with its place's deadline (a dead place
    /// stays until a script drops it from the head, or its waiter joins
    /// again at the back).
    pub places: Vec<(u8, u64)>,
    /// One offer a waiter at most, sorted.
    pub offers: Vec<Offer>,
}

impl Line {
    /// `line_take`: `client` out of the line, with its offer.
    pub fn take(&mut self, client: u8) {
        self.places.retain(|&(waiter, _)| waiter != client);
        self.withdraw(client);
    }

    /// `HDEL` of `client`'s offer.
    pub fn withdraw(&mut self, client: u8) {
        self.offers.retain(|offer| offer.client != client);
    }

    /// `line_head`: drops the dead places from the head of the line (with
    /// their offers), and returns the first live one and its deadline.
    pub fn head(&mut self, now: u64) -> Option<(u8, u64)> {
        while let Some(&(waiter, place)) = self.places.first() {
            if place > now {
                return Some((waiter, place));
            }
            self.take(waiter);
        }
        None
    }

    /// `line_join`: keeps `client`'s live place, or puts it at the back
    /// (again, if its place had run out), until `now` plus `lease`.
    pub fn join(&mut self, client: u8, now: u64, lease: u64) {
        let deadline = now + lease;
        match self.places.iter().position(|&(waiter, _)| waiter == client) {
            Some(at) if self.places[at].1 > now => self.places[at].1 = deadline,
            Some(at) => {
                self.places.remove(at);
                self.places.push((client, deadline));
            }
            None => self.places.push((client, deadline)),
        }
    }

    /// A waiter that must wait: `client`'s `attempt`, an offer of `tag`
    /// (its weight with it), offers itself (`line_keep_offer`, a grant
    /// running for `lease` or the TTL if shorter) and keeps its place
    /// (`line_join`).
    pub fn wait(&mut self, client: u8, attempt: u8, tag: Tag, now: u64, lease: u64, ttl: u64) {
        self.withdraw(client);
        self.offers.push(Offer {
            client,
            attempt,
            tag,
            weight: tag.weight(),
            runs: lease.min(ttl),
            place: now + lease,
        });
        self.offers.sort_unstable();
        self.join(client, now, lease);
    }

    /// `line_void_offer`: drops `client`'s offer of `tag`'s kind if it
    /// names `attempt` (an attempt whose reply was lost, released before
    /// the waiter's next).
    pub fn void(&mut self, client: u8, attempt: u8, tag: Tag) {
        let named = |offer: &Offer| {
            (offer.client, offer.attempt) == (client, attempt) && offer.tag.same_kind(tag)
        };
        self.offers.retain(|offer| !named(offer));
    }

    /// `line_offer`: the offer of `tag`'s kind that `head` made with its
    /// place's current deadline `place`, if any.
    pub fn offer_of(&self, head: u8, place: u64, tag: Tag) -> Option<Offer> {
        let made = |offer: &&Offer| {
            offer.client == head && offer.place == place && offer.tag.same_kind(tag)
        };
        self.offers.iter().find(made).copied()
    }

    /// The waiters whose places are live at `now`, in order.
    pub fn live(&self, now: u64) -> Vec<u8> {
        let live = self.places.iter().filter(|&&(_, until)| until > now);
        live.map(|&(waiter, _)| waiter).collect()
    }
}
