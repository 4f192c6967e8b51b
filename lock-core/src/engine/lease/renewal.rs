//! Batched renewal: one driver per manager sends the watchdog's renewals.
//!
//! Each guard's watchdog decides when its lease is due and what it means when a
//! renewal fails; the driver decides how the renewals reach the server. It
//! queues them per renewal group ([`LockBackend::renewal_group`]: the whole
//! server, or one cluster slot), and sends a group's queue as batches of at
//! most [`MAX_BATCH`] through [`LockBackend::extend_many`], earliest deadline
//! first, with at most [`MAX_IN_FLIGHT`] batches of a group on the wire.
//! A renewal waits up to [`LINGER`] (less when its lease has little time
//! left) for others to fall due, and what falls due while batches are out
//! goes in the next one, so the number of round trips follows the clock and
//! the server's speed, not the number of leases.
//!
//! Under overload that is what keeps the traffic bounded: renewals wait in
//! the queue (the most urgent first) instead of adding commands, and a group
//! whose batch failed (a timeout, a broken connection, `BUSY`) sends nothing
//! for a back-off that doubles with each failure in a row, up to
//! [`MAX_BACKOFF`]. A renewal whose watchdog gave up (its deadline passed, or
//! the lease was released) leaves the queue unsent.
//!
//! Each lease's deadline is counted from when its batch was sent, with its
//! own TTL and drift: the driver answers each renewal with that send instant.
//! A renewal that must not reach past an instant (`watchdog.max_hold`) has
//! its TTL cut to what is left of it when the batch leaves, not when it was
//! queued.
//!
//! The driver task runs on the runtime the manager was made on (normally
//! the one its connection was made on), or, for a manager made outside a
//! runtime, on the runtime of the first renewal; if that runtime shuts down,
//! the next renewal starts a new driver on its own.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot};

use crate::engine::backend::{ExtendOutcome, LockBackend, Renewal};
use crate::error::{source_error, LockError};
use crate::hold::HoldToken;
use crate::key::LockKey;
use crate::ttl::MIN_TTL;

/// The most renewals in one batch: one script over this many keys runs for
/// well under a millisecond on the server, so it holds up no other client
/// for long.
pub(crate) const MAX_BATCH: usize = 512;

/// The most batches of one group on the wire at once.
pub(crate) const MAX_IN_FLIGHT: usize = 2;

/// How long a renewal waits for others to join its batch: the renewals of
/// leases taken one after the other fall due one after the other, and a
/// batch per tick of this length carries them together. Small next to any
/// renewal interval worth having; shorter still for a lease with less than
/// eight times this left ([`send_by`]).
pub(crate) const LINGER: Duration = Duration::from_millis(10);

/// The back-off after the first failed batch of a group; it doubles with
/// each further failure in a row.
const FIRST_BACKOFF: Duration = Duration::from_millis(5);

/// The longest back-off: short next to any TTL worth renewing, so a server
/// that recovers has its leases renewed again soon.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_millis(250);

/// When a renewal's batch was sent, and what it found.
pub(crate) type RenewalReply = (Instant, Result<ExtendOutcome, LockError>);

/// Sends the watchdog renewals of one backend in batches.
#[derive(Debug)]
pub(crate) struct RenewalDriver {
    backend: Arc<dyn LockBackend>,
    /// The queue of the driver task, started on the first renewal (and again
    /// if the runtime it ran on has shut down).
    requests: Mutex<Option<mpsc::UnboundedSender<Box<Request>>>>,
}

/// What a renewal names: a lease's key and hold, which the queue shares
/// with the lease instead of copying them.
pub(crate) trait Renewable: Send + Sync {
    /// The lock.
    fn key(&self) -> &LockKey;
    /// The hold to renew.
    fn hold(&self) -> &HoldToken;
    /// Whether the lease is still held: a renewal nobody waits for
    /// ([`Answer::Unattended`]) leaves the queue unsent once it is not.
    fn still_held(&self) -> bool;
}

/// Who takes a renewal's reply.
pub(crate) enum Answer {
    /// A watchdog task waits for it; gone once the task stopped waiting.
    Waiter(oneshot::Sender<RenewalReply>),
    /// Nobody waits: the driver calls this with the reply, on its own task
    /// (a panic in it is caught there, and ends only this call). Dropped
    /// unsent if the lease is no longer held when its batch leaves.
    Unattended(Box<dyn FnOnce(RenewalReply) + Send>),
}

/// One renewal waiting for its batch. Boxed from when it is asked for to
/// when its batch leaves: the queue's heap then moves a pointer, not the
/// request, at each step of a push or a pop.
struct Request {
    /// The lease, whose key and hold the renewal names.
    lease: Arc<dyn Renewable>,
    ttl: Duration,
    /// The lease's deadline when the renewal was asked for: the earliest
    /// goes first.
    valid_until: Instant,
    /// The latest its batch should leave ([`send_by`]).
    send_by: Instant,
    /// The key must not outlive this instant: the TTL is cut to what is left
    /// of it when the batch leaves.
    ends_by: Option<Instant>,
    answer: Answer,
}

impl Request {
    /// Whether anyone still needs this renewal sent.
    fn wanted(&self) -> bool {
        match &self.answer {
            Answer::Waiter(reply) => !reply.is_closed(),
            Answer::Unattended(_) => self.lease.still_held(),
        }
    }

    /// Answers the renewal with when its batch was sent and what it found.
    fn answer(self, reply: RenewalReply) {
        match self.answer {
            // A watchdog that stopped waiting meanwhile needs no answer.
            Answer::Waiter(waiter) => {
                let _ = waiter.send(reply);
            }
            Answer::Unattended(take) => {
                // Whatever a metrics recorder or a log subscriber does in it
                // must not stop the driver, which sends every lease's renewals.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || take(reply)));
            }
        }
    }
}

impl RenewalDriver {
    /// A driver for `backend`, started at once when called inside a Tokio
    /// runtime, else on the first renewal.
    pub(crate) fn new(backend: Arc<dyn LockBackend>) -> Self {
        let driver = RenewalDriver {
            backend,
            requests: Mutex::new(None),
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (queue, received) = mpsc::unbounded_channel();
            runtime.spawn(drive(Arc::clone(&driver.backend), received));
            *driver.lock_requests() = Some(queue);
        }
        driver
    }

    fn lock_requests(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<mpsc::UnboundedSender<Box<Request>>>> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Renews `lease` to `ttl` in the next batch of its group, and
    /// returns when that batch was sent and what it found for this hold.
    /// `valid_until` is the lease's current deadline (its priority); with
    /// `ends_by`, the TTL sent is cut to what is left until then (at least
    /// [`MIN_TTL`]), and the outcome says which TTL was set.
    /// Dropping the future before the batch leaves takes the renewal out of
    /// it. Must run inside a Tokio runtime.
    pub(crate) async fn renew<L: Renewable + 'static>(
        &self,
        lease: &Arc<L>,
        ttl: Duration,
        valid_until: Instant,
        ends_by: Option<Instant>,
    ) -> RenewalReply {
        let (reply, answer) = oneshot::channel();
        self.submit(Box::new(Request {
            lease: Arc::clone(lease) as Arc<dyn Renewable>,
            ttl,
            valid_until,
            send_by: send_by(Instant::now(), valid_until),
            ends_by,
            answer: Answer::Waiter(reply),
        }));
        answer.await.unwrap_or_else(|_| {
            // Only when the runtime running the driver shut down.
            (
                Instant::now(),
                Err(LockError::Connection {
                    node: "renewal driver".to_owned(),
                    source: source_error("the renewal driver stopped"),
                }),
            )
        })
    }

    /// Renews `lease` to `ttl` in the next batch of its group, and calls
    /// `answer` with when that batch was sent and what it found; drops
    /// `answer` instead if the lease is no longer held when the batch leaves
    /// (or the driver's runtime shut down). `valid_until` is the lease's
    /// current deadline (its priority). Must run inside a Tokio runtime.
    pub(crate) fn renew_unattended(
        &self,
        lease: Arc<dyn Renewable>,
        ttl: Duration,
        valid_until: Instant,
        answer: Box<dyn FnOnce(RenewalReply) + Send>,
    ) {
        self.submit(Box::new(Request {
            lease,
            ttl,
            valid_until,
            send_by: send_by(Instant::now(), valid_until),
            ends_by: None,
            answer: Answer::Unattended(answer),
        }));
    }

    fn submit(&self, request: Box<Request>) {
        let mut requests = self.lock_requests();
        let request = match requests.as_ref() {
            Some(queue) => match queue.send(request) {
                Ok(()) => return,
                Err(mpsc::error::SendError(request)) => request,
            },
            None => request,
        };
        let (queue, received) = mpsc::unbounded_channel();
        tokio::spawn(drive(Arc::clone(&self.backend), received));
        // The receiver was made just now: the send cannot fail.
        let _ = queue.send(request);
        *requests = Some(queue);
    }
}

/// When a renewal asked for at `asked` should leave at the latest: after
/// [`LINGER`], or an eighth of what its lease has left if that is less.
fn send_by(asked: Instant, valid_until: Instant) -> Instant {
    let left = valid_until.saturating_duration_since(asked);
    asked + LINGER.min(left / 8)
}

/// `ttl`, or less: what is left at `now` until `ends_by`, in whole
/// milliseconds (what a TTL can be), and at least [`MIN_TTL`].
fn ttl_within(ttl: Duration, ends_by: Option<Instant>, now: Instant) -> Duration {
    let Some(ends_by) = ends_by else {
        return ttl;
    };
    let left = ends_by.saturating_duration_since(now);
    let left = Duration::from_millis(u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
    ttl.min(left).max(MIN_TTL)
}

/// A queued renewal, ordered so that a max-heap yields the earliest
/// deadline first (and, between equal deadlines, the first asked).
struct Queued {
    order: (Reverse<Instant>, Reverse<u64>),
    request: Box<Request>,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.order == other.order
    }
}

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order.cmp(&other.order)
    }
}

/// The renewals of one group and how its batches are going.
#[derive(Default)]
struct Group {
    queue: BinaryHeap<Queued>,
    in_flight: usize,
    /// Failed batches in a row.
    failures: u32,
    /// No batch leaves before this (the back-off after a failure).
    paused_until: Option<Instant>,
    /// The earliest `send_by` of the queue: the next batch leaves then, or
    /// as soon as the queue fills a batch.
    send_at: Option<Instant>,
}

impl Group {
    /// Nothing queued or in flight, and no failure to remember (the
    /// back-off keeps doubling across the watchdogs' retries).
    fn is_idle(&self) -> bool {
        self.queue.is_empty()
            && self.in_flight == 0
            && self.paused_until.is_none()
            && self.failures == 0
    }

    fn push(&mut self, request: Box<Request>, asked: u64) {
        self.send_at = Some(
            self.send_at
                .map_or(request.send_by, |at| at.min(request.send_by)),
        );
        self.queue.push(Queued {
            order: (Reverse(request.valid_until), Reverse(asked)),
            request,
        });
    }

    /// When this group's next batch may leave, if it has one: now (or in
    /// the past) once the queue fills a batch.
    fn ready_at(&self, now: Instant) -> Option<Instant> {
        if self.queue.is_empty() || self.in_flight >= MAX_IN_FLIGHT {
            return None;
        }
        let at = if self.queue.len() >= MAX_BATCH {
            now
        } else {
            self.send_at.unwrap_or(now)
        };
        Some(self.paused_until.map_or(at, |until| at.max(until)))
    }

    /// Up to [`MAX_BATCH`] queued renewals, most urgent first, without those
    /// nobody needs any more.
    fn next_batch(&mut self) -> Vec<Request> {
        let mut batch = Vec::with_capacity(self.queue.len().min(MAX_BATCH));
        while batch.len() < MAX_BATCH {
            let Some(Queued { request, .. }) = self.queue.pop() else {
                break;
            };
            if request.wanted() {
                batch.push(*request);
            }
        }
        // What is left was due with this batch or is a backlog: it goes as
        // soon as a batch may.
        self.send_at = (!self.queue.is_empty()).then(Instant::now);
        batch
    }
}

/// The back-off after `failures` failed batches in a row.
fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .saturating_mul(1 << doublings)
        .min(MAX_BACKOFF)
}

/// The driver task: runs until every sender is gone (the manager and all its
/// leases were dropped).
async fn drive(backend: Arc<dyn LockBackend>, mut requests: mpsc::UnboundedReceiver<Box<Request>>) {
    let mut groups: HashMap<u32, Group> = HashMap::new();
    let mut batches = FuturesUnordered::new();
    let mut asked: u64 = 0;
    loop {
        // Send what each group may send now; note the next end of a back-off.
        let now = Instant::now();
        let mut wake_at: Option<Instant> = None;
        for (&id, group) in &mut groups {
            if group.paused_until.is_some_and(|until| until <= now) {
                group.paused_until = None;
            }
            while let Some(at) = group.ready_at(now) {
                if at > now {
                    wake_at = Some(wake_at.map_or(at, |earliest| earliest.min(at)));
                    break;
                }
                let batch = group.next_batch();
                if batch.is_empty() {
                    break;
                }
                group.in_flight += 1;
                batches.push(send_batch(Arc::clone(&backend), id, batch));
            }
        }
        groups.retain(|_, group| !group.is_idle());
        tokio::select! {
            request = requests.recv() => {
                let Some(request) = request else {
                    // The manager and its leases are gone: nobody waits for
                    // what is still queued or in flight.
                    return;
                };
                let mut next = Some(request);
                while let Some(request) = next {
                    asked += 1;
                    let id = backend.renewal_group(request.lease.key());
                    groups.entry(id).or_default().push(request, asked);
                    next = requests.try_recv().ok();
                }
            }
            Some((id, failed)) = batches.next(), if !batches.is_empty() => {
                let group = groups.entry(id).or_default();
                group.in_flight = group.in_flight.saturating_sub(1);
                if failed {
                    group.failures = group.failures.saturating_add(1);
                    group.paused_until = Some(Instant::now() + backoff(group.failures));
                } else {
                    group.failures = 0;
                }
            }
            () = sleep_until(wake_at), if wake_at.is_some() => {}
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at.into()).await;
    }
}

/// Sends one batch of group `group` and answers each of its renewals with
/// the send instant and its outcome; returns the group and whether the
/// batch failed in a way worth backing off for (a timeout, a broken
/// connection, a busy or loading server).
async fn send_batch(backend: Arc<dyn LockBackend>, group: u32, batch: Vec<Request>) -> (u32, bool) {
    // Read before the batch's first command is written: every deadline
    // counted from it is at or before when the server ran the renewal.
    let sent_at = Instant::now();
    let renewals: Vec<Renewal<'_>> = batch
        .iter()
        .map(|request| {
            let ttl = ttl_within(request.ttl, request.ends_by, sent_at);
            Renewal::new(request.lease.key(), request.lease.hold(), ttl)
        })
        .collect();
    let mut outcomes = backend.extend_many(&renewals).await;
    drop(renewals);
    if outcomes.len() != batch.len() {
        let error = LockError::UnexpectedReply {
            node: backend.strategy().to_owned(),
            script: "extend_many",
            reply: format!("{} outcomes for {} renewals", outcomes.len(), batch.len()),
        };
        outcomes = vec![Err(error); batch.len()];
    }
    let failed = outcomes
        .iter()
        .any(|outcome| matches!(outcome, Err(error) if error.is_retryable()));
    for (request, outcome) in batch.into_iter().zip(outcomes) {
        request.answer((sent_at, outcome));
    }
    (group, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_is_cut_to_what_is_left_of_the_cap() {
        let now = Instant::now();
        let ttl = Duration::from_secs(3);
        assert_eq!(ttl_within(ttl, None, now), ttl);
        let soon = now + Duration::from_micros(1_500_900);
        assert_eq!(
            ttl_within(ttl, Some(soon), now),
            Duration::from_millis(1500)
        );
        assert_eq!(
            ttl_within(ttl, Some(now + Duration::from_secs(9)), now),
            ttl
        );
        assert_eq!(ttl_within(ttl, Some(now), now), MIN_TTL);
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff(1), FIRST_BACKOFF);
        assert_eq!(backoff(2), FIRST_BACKOFF * 2);
        assert_eq!(backoff(3), FIRST_BACKOFF * 4);
        assert_eq!(backoff(40), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
