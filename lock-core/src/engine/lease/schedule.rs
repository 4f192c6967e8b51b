//! Watchdogs that cost no task while renewals succeed.
//!
//! Most holds end long before their first renewal: work done under a lock
//! usually takes a small part of its TTL. A watchdog task spawned at every
//! acquire (an allocation, a schedule, a poll, a timer, and an abort at the
//! release) cost as much client time as a fencing-off acquire itself, so a
//! new lease's watchdog is only *planned*: an entry in its manager's queue,
//! ordered by when the watchdog first has something to do (the first
//! renewal, or, with renewal off, the deadline). Giving the lease back takes
//! the entry out again: a lock and a B-tree removal, no task and no wake-up.
//!
//! One pump task per manager and runtime sleeps until a little before the
//! earliest entry of that runtime's leases is due (at most 20 ms), then
//! sends the renewals of the leases due by then through the renewal driver
//! ([`crate::engine::lease::watchdog::renew_unattended`]), each lease waiting in
//! the queue at its deadline until the reply plans its next renewal: a task
//! per held lease costs a wake-up, a select and a lock per renewal. A
//! watchdog task
//! ([`crate::engine::lease::watchdog::keep`]) takes over where a lease needs more
//! than that: a failed renewal (the task retries until the deadline), no
//! reply by the deadline (the task waits for it, or marks the lease
//! expired), a caller's `extend` (which may bring the deadline forward),
//! `watchdog.max_hold`, or renewal off (the task marks the lease expired at
//! its deadline). Without `max_hold`, the task gives the lease back to the
//! queue at its first renewal that succeeds. A renewal sent early only renews sooner. The pump runs no
//! code but its own (no log event, no metric; a renewal's are made on the
//! driver's task, at its reply), so nothing a subscriber or recorder does
//! can stop it halfway. Planning a lease wakes the pump only when the new
//! entry is due before the pump's next look. With one TTL per manager that
//! is rare: an entry falls due one renewal interval after its request left,
//! and the slack covers replies that come back out of the order their
//! requests left in, so the pump wakes about once per renewal interval
//! however many leases come and go.
//!
//! A lease's loss signal depends on the pump of the runtime it was taken
//! on, as a watchdog task's does on its runtime: a runtime that is not
//! driven runs neither. A pump ends with its runtime (or when the manager
//! and every lease it planned are gone), starting the watchdog tasks of
//! what its queue held; a lease planned on that runtime later starts a new
//! one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::runtime::{self, Handle};
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use crate::engine::lease::renewal::RenewalDriver;
use crate::engine::lease::status::LeaseStatus;
use crate::engine::lease::timing::{
    clock_drift, default_renew_interval, max_renew_interval, validity,
};
use crate::engine::lease::watchdog::{self, Renewed};
use crate::engine::lease::{LeaseShared, Slot, WatchdogQueue, WatchdogState};
use crate::engine::settings::Settings;

/// The most a pump starts a watchdog before it is due (see
/// [`WatchdogSchedule::early`]).
const MAX_EARLY: Duration = Duration::from_millis(20);

/// How many times in a row a pump looks at an empty queue, one idle interval
/// apart, before it sleeps until woken: a process that takes one short hold
/// after another empties the queue at every release, and should not have to
/// wake the pump at every acquire.
const IDLE_LOOKS: u8 = 2;

/// What every watchdog of one manager is started with.
#[derive(Debug)]
struct WatchdogSettings {
    /// `watchdog.enabled`.
    enabled: bool,
    /// `watchdog.interval`; `None`: a third of each lease's TTL.
    interval: Option<Duration>,
    drift_factor: f64,
    /// `watchdog.max_hold`.
    max_hold: Option<Duration>,
    renewals: Arc<RenewalDriver>,
}

impl WatchdogSettings {
    /// How often a lease that asked for `ttl` is renewed: the configured
    /// interval (never more than two attempts' room before its deadline
    /// allows), or a third of its TTL; `None` with renewal off.
    fn renew_every(&self, ttl: Duration) -> Option<Duration> {
        self.enabled.then(|| match self.interval {
            Some(interval) => interval.min(max_renew_interval(ttl, self.drift_factor)),
            None => default_renew_interval(ttl, self.drift_factor),
        })
    }
}

/// The planned watchdogs of one manager's leases, a queue per runtime the
/// leases were taken on, each with a pump on that runtime that starts them
/// when they fall due.
pub(crate) struct WatchdogSchedule {
    settings: WatchdogSettings,
    /// How long after an acquire a watchdog first falls due with the
    /// configured TTL: how long a pump naps when its queue is empty.
    idle_nap: Duration,
    /// How long before it is due a pump may start a watchdog (an eighth of
    /// `idle_nap`, at most [`MAX_EARLY`]): it sleeps until that long before
    /// the earliest entry. Replies come back out of the order their
    /// requests left in, so a new lease is often due a little before the
    /// earliest planned one; without this slack, an acquire whose reply
    /// came back later than the earliest planned one's woke the pump (most
    /// acquires, with 32 in flight and replies 20 ms apart; none on
    /// loopback, where they come back within a millisecond). A watchdog
    /// started early only waits longer.
    early: Duration,
    /// One per runtime, found by a linear search: a process drives one
    /// runtime, or a few, and hashing a runtime's id at every acquire and
    /// release cost more than comparing it.
    queues: Mutex<Vec<Queue>>,
    /// Numbers the entries of every queue, so that an entry of a queue that
    /// ended never matches one of a newer queue of the same runtime.
    next_id: AtomicU64,
}

/// The planned watchdogs of the leases taken on one runtime.
struct Queue {
    /// `runtime`'s id.
    id: runtime::Id,
    runtime: Handle,
    planned: BTreeMap<Slot, Arc<LeaseShared>>,
    pump: Pump,
    /// Wakes the pump for an entry due before its next look, or to let it
    /// end once the manager and all its leases are gone.
    wake: Arc<Notify>,
    idle_looks: u8,
}

impl Queue {
    /// Puts `lease` in at `slot`, and wakes the pump if it would sleep past
    /// it; returns the pump's wake-up if the pump must be started.
    fn insert(&mut self, slot: Slot, lease: &Arc<LeaseShared>) -> Option<Arc<Notify>> {
        self.planned.insert(slot, Arc::clone(lease));
        match self.pump {
            Pump::Stopped => {
                self.pump = Pump::Awake;
                Some(Arc::clone(&self.wake))
            }
            Pump::Asleep(next_look) if next_look.is_none_or(|at| slot.0 < at) => {
                self.wake.notify_one();
                self.pump = Pump::Awake;
                None
            }
            Pump::Awake | Pump::Asleep(_) => None,
        }
    }
}

/// What a queue's pump is doing, as far as planning a lease needs to know.
#[derive(Debug, Clone, Copy)]
enum Pump {
    /// No pump task (none yet, or it ended).
    Stopped,
    /// It will look at the queue before it sleeps again.
    Awake,
    /// It sleeps until then (or until woken, with `None`).
    Asleep(Option<Instant>),
}

impl WatchdogSchedule {
    /// The watchdogs of the leases of a manager with `config`, whose
    /// renewals `renewals` sends.
    pub(crate) fn new(config: &Settings, renewals: RenewalDriver) -> Self {
        let settings = WatchdogSettings {
            enabled: config.watchdog.enabled,
            interval: config.watchdog.interval,
            drift_factor: config.clock_drift_factor,
            max_hold: config.watchdog.max_hold,
            renewals: Arc::new(renewals),
        };
        // A watchdog first falls due a renewal interval after its acquire,
        // or with renewal off at the deadline.
        let drift = clock_drift(config.ttl, config.clock_drift_factor);
        let idle_nap = settings
            .renew_every(config.ttl)
            .unwrap_or_else(|| validity(config.ttl, Duration::ZERO, drift));
        WatchdogSchedule {
            settings,
            idle_nap,
            early: (idle_nap / 8).min(MAX_EARLY),
            queues: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
        }
    }

    /// Plans the watchdog of `lease`, newly granted: it starts at its first
    /// renewal (or, with renewal off, at the deadline), unless the lease ends
    /// first. Must run inside a Tokio runtime; the watchdog runs on it.
    pub(crate) fn plan(self: &Arc<Self>, lease: &Arc<LeaseShared>) {
        let LeaseStatus::Held { valid_until } = lease.status() else {
            return;
        };
        let due = match self.settings.renew_every(lease.pace_ttl()) {
            Some(interval) => valid_until.min(lease.acquired_at + interval),
            None => valid_until,
        };
        let runtime = Handle::current();
        let id = runtime.id();
        let start_pump = {
            // Under the lease's lock, so the pump cannot take the entry
            // before the lease says where it is.
            let mut watchdog = lease.lock_watchdog();
            let mut queues = self.lock_queues();
            let index = match queues.iter().position(|queue| queue.id == id) {
                Some(index) => index,
                None => {
                    queues.push(Queue {
                        id,
                        runtime,
                        planned: BTreeMap::new(),
                        pump: Pump::Stopped,
                        wake: Arc::new(Notify::new()),
                        idle_looks: 0,
                    });
                    queues.len() - 1
                }
            };
            let queue = &mut queues[index];
            let slot = self.slot(due);
            *watchdog = WatchdogState::Planned {
                schedule: Arc::clone(self) as Arc<dyn WatchdogQueue>,
                runtime: id,
                slot,
            };
            queue.insert(slot, lease)
        };
        if let Some(wake) = start_pump {
            self.start_pump(id, wake);
        }
    }

    /// A new slot at `at`.
    fn slot(&self, at: Instant) -> Slot {
        (at, self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Starts the pump of the queue of runtime `id`, which wakes on `wake`,
    /// on the current runtime.
    fn start_pump(self: &Arc<Self>, id: runtime::Id, wake: Arc<Notify>) {
        // Spawned with no lock held: on a runtime that is shutting down,
        // the task is dropped at once, and `ended` (dropped with it, run
        // or not) takes the locks to hand its queue on.
        let ended = PumpEnded {
            schedule: Arc::downgrade(self),
            runtime: id,
        };
        let schedule = Arc::downgrade(self);
        tokio::spawn(async move {
            let _ended = ended;
            pump(schedule, id, wake).await;
        });
    }

    /// Takes a plan out of its queue (if the queue has not ended).
    fn take_plan(&self, runtime: runtime::Id, slot: Slot) {
        if let Some(queue) = queue_of(&mut self.lock_queues(), runtime) {
            queue.planned.remove(&slot);
        }
    }

    /// Takes a plan out of its queue to start it now: the queue's runtime,
    /// or `None` if the queue has ended (its pump is starting the plan).
    fn unplan_to_start(&self, runtime: runtime::Id, slot: Slot) -> Option<Handle> {
        let mut queues = self.lock_queues();
        let queue = queue_of(&mut queues, runtime)?;
        queue.planned.remove(&slot);
        Some(queue.runtime.clone())
    }

    /// Starts the watchdog task of `lease` on its runtime, now, to renew
    /// first at `first_renewal`.
    fn spawn(
        self: &Arc<Self>,
        lease: &Arc<LeaseShared>,
        runtime: &Handle,
        first_renewal: Instant,
    ) -> AbortHandle {
        let (schedule, id) = (Arc::clone(self), runtime.id());
        runtime
            .spawn(watchdog::keep(
                Arc::clone(lease),
                self.settings.renew_every(lease.pace_ttl()),
                first_renewal,
                self.settings.max_hold,
                Arc::clone(&self.settings.renewals),
                Box::new(move |lease, due| schedule.take_back(lease, id, due)),
            ))
            .abort_handle()
    }

    /// Takes `lease` back from the watchdog task calling this, to renew it
    /// next at `due` (or sooner, at the pace of a shorter TTL asked for
    /// since) without a task, in the queue of runtime `id`; `false` if the
    /// lease's watchdog is not that task, or the queue ended.
    fn take_back(
        self: &Arc<Self>,
        lease: &Arc<LeaseShared>,
        id: runtime::Id,
        due: Instant,
    ) -> bool {
        let Some(task) = tokio::task::try_id() else {
            return false;
        };
        let mut watchdog = lease.lock_watchdog();
        if !matches!(&*watchdog, WatchdogState::Running(running) if running.id() == task) {
            return false;
        }
        let LeaseStatus::Held { valid_until } = lease.status() else {
            return false;
        };
        // A caller's extend asks for its TTL before it looks at the
        // watchdog under this lock: either the TTL is read here, or that
        // extend finds the lease planned and starts a task.
        let Some(interval) = self.settings.renew_every(lease.pace_ttl()) else {
            return false;
        };
        let due = due.min(Instant::now() + interval).min(valid_until);
        self.plan_again(&mut watchdog, lease, id, due, None)
    }

    /// Plans `lease`, whose `watchdog` is locked, in the queue of runtime
    /// `id` at `due`, taking out its entry at `leaving` if it has one;
    /// `false` (and nothing changed) if that queue ended.
    fn plan_again(
        self: &Arc<Self>,
        watchdog: &mut WatchdogState,
        lease: &Arc<LeaseShared>,
        id: runtime::Id,
        due: Instant,
        leaving: Option<Slot>,
    ) -> bool {
        let mut queues = self.lock_queues();
        let Some(queue) = queue_of(&mut queues, id) else {
            return false;
        };
        if let Some(leaving) = leaving {
            queue.planned.remove(&leaving);
        }
        let slot = self.slot(due);
        *watchdog = WatchdogState::Planned {
            schedule: Arc::clone(self) as Arc<dyn WatchdogQueue>,
            runtime: id,
            slot,
        };
        queue_again(queue, slot, lease);
        true
    }

    /// Renews the leases of `runtime`'s queue that are due, or starts their
    /// watchdog tasks; returns when its pump should look again (`None`:
    /// when woken).
    fn start_due(self: &Arc<Self>, runtime: runtime::Id) -> Option<Instant> {
        // The clock the pump sleeps by: under paused Tokio time (tests), a
        // look after a sleep must find what the sleep waited for.
        let now = tokio::time::Instant::now().into_std();
        let mut due = Vec::new();
        let (next_look, handle) = {
            let mut queues = self.lock_queues();
            let queue = queue_of(&mut queues, runtime)?;
            let horizon = now.checked_add(self.early).unwrap_or(now);
            while let Some(entry) = queue.planned.first_entry() {
                if entry.key().0 > horizon {
                    break;
                }
                due.push(entry.remove_entry());
            }
            let earliest = queue.planned.first_key_value().map(|(slot, _)| slot.0);
            let next_look = match earliest {
                Some(at) => {
                    queue.idle_looks = 0;
                    // After `now`: `at` is past the horizon.
                    Some(at.checked_sub(self.early).unwrap_or(at))
                }
                None if queue.idle_looks < IDLE_LOOKS => {
                    queue.idle_looks += 1;
                    Some(now + self.idle_nap)
                }
                None => None,
            };
            queue.pump = Pump::Asleep(next_look);
            let handle = (!due.is_empty()).then(|| queue.runtime.clone());
            (next_look, handle)
        };
        if let Some(handle) = handle {
            for (slot, lease) in due {
                self.take_due(&lease, runtime, slot, &handle);
            }
        }
        next_look
    }

    /// Acts on a lease whose entry at `slot` fell due: sends its renewal
    /// without a task if it can, else starts its watchdog task; starts the
    /// task of a lease whose renewal got no reply by the deadline. Nothing
    /// if the lease was given back, or moved on, since.
    fn take_due(
        self: &Arc<Self>,
        lease: &Arc<LeaseShared>,
        id: runtime::Id,
        slot: Slot,
        runtime: &Handle,
    ) {
        let mut watchdog = lease.lock_watchdog();
        let renewal_due = match *watchdog {
            WatchdogState::Planned { slot: planned, .. } if planned == slot => true,
            // No reply by (a little before) the deadline: a task waits for
            // it, or marks the lease expired.
            WatchdogState::Renewing { slot: renewing, .. } if renewing == slot => false,
            // Given back, or moved on to another entry or a task.
            _ => return,
        };
        if renewal_due && self.renew_without_task(lease, id, &mut watchdog) {
            return;
        }
        let first_renewal = if renewal_due { slot.0 } else { Instant::now() };
        *watchdog = WatchdogState::Running(self.spawn(lease, runtime, first_renewal));
    }

    /// Sends the renewal of `lease`, planned on runtime `id`, with no task,
    /// and waits in the queue at its deadline in case no reply comes
    /// (`watchdog` becomes [`WatchdogState::Renewing`]); `false` if it
    /// cannot (renewal off, `watchdog.max_hold`, an extend in flight, the
    /// queue ended), and then a task must.
    fn renew_without_task(
        self: &Arc<Self>,
        lease: &Arc<LeaseShared>,
        id: runtime::Id,
        watchdog: &mut WatchdogState,
    ) -> bool {
        let Some(interval) = self.settings.renew_every(lease.pace_ttl()) else {
            return false;
        };
        if self.settings.max_hold.is_some() {
            return false;
        }
        let LeaseStatus::Held { valid_until } = lease.status() else {
            return false;
        };
        let slot = self.slot(valid_until);
        {
            let mut queues = self.lock_queues();
            let Some(queue) = queue_of(&mut queues, id) else {
                return false;
            };
            queue_again(queue, slot, lease);
        }
        let schedule = Arc::clone(self);
        let sent = watchdog::renew_unattended(
            lease,
            interval,
            &self.settings.renewals,
            move |lease, renewed| schedule.renewed(lease, id, slot, renewed),
        );
        if sent {
            *watchdog = WatchdogState::Renewing {
                schedule: Arc::clone(self) as Arc<dyn WatchdogQueue>,
                runtime: id,
                slot,
            };
        } else {
            self.take_plan(id, slot);
        }
        sent
    }

    /// What the renewal `lease` waits for at `slot` (on runtime `id`'s
    /// queue) found: plans the next one, stops the watchdog, or starts a
    /// task to retry. Nothing if the lease moved on meanwhile (given back,
    /// or a task took over), or if its queue ended (whose pump starts its
    /// task).
    fn renewed(
        self: &Arc<Self>,
        lease: &Arc<LeaseShared>,
        id: runtime::Id,
        slot: Slot,
        renewed: Renewed,
    ) {
        let mut watchdog = lease.lock_watchdog();
        if !matches!(*watchdog, WatchdogState::Renewing { slot: renewing, .. } if renewing == slot)
        {
            return;
        }
        match renewed {
            Renewed::Ended => watchdog.stop(),
            Renewed::NextAt(due) => {
                self.plan_again(&mut watchdog, lease, id, due, Some(slot));
            }
            Renewed::RetryAt(at) => {
                if let Some(runtime) = self.unplan_to_start(id, slot) {
                    *watchdog = WatchdogState::Running(self.spawn(lease, &runtime, at));
                }
            }
        }
    }

    /// Starts the watchdog task of a lease taken out of an ended queue,
    /// unless the lease was given back (or its watchdog started) since.
    fn start_planned(self: &Arc<Self>, lease: &Arc<LeaseShared>, runtime: &Handle) {
        let mut watchdog = lease.lock_watchdog();
        let first_renewal = match *watchdog {
            WatchdogState::Planned { slot, .. } => slot.0,
            WatchdogState::Renewing { .. } => Instant::now(),
            WatchdogState::Running(_) | WatchdogState::Stopped => return,
        };
        *watchdog = WatchdogState::Running(self.spawn(lease, runtime, first_renewal));
    }

    fn lock_queues(&self) -> MutexGuard<'_, Vec<Queue>> {
        // Plain data, valid whatever a panicking holder did.
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl WatchdogQueue for WatchdogSchedule {
    fn unplan(&self, runtime: runtime::Id, slot: Slot) {
        self.take_plan(runtime, slot);
    }

    fn start(
        self: Arc<Self>,
        runtime: runtime::Id,
        slot: Slot,
        lease: &Arc<LeaseShared>,
        first_renewal: Instant,
    ) -> Option<AbortHandle> {
        let handle = self.unplan_to_start(runtime, slot)?;
        Some(self.spawn(lease, &handle, first_renewal))
    }
}

impl std::fmt::Debug for WatchdogSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the queues: their leases would print the schedule in turn.
        f.debug_struct("WatchdogSchedule")
            .field("settings", &self.settings)
            .field("idle_nap", &self.idle_nap)
            .field("early", &self.early)
            .finish_non_exhaustive()
    }
}

impl Drop for WatchdogSchedule {
    fn drop(&mut self) {
        // A pump may sleep until woken: let each see that it is done.
        let queues = self
            .queues
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for queue in queues.iter() {
            queue.wake.notify_one();
        }
    }
}

/// Puts `lease` back in `queue`, whose pump runs (a queue whose pump is
/// not started yet exists only inside `plan`), at `slot`.
fn queue_again(queue: &mut Queue, slot: Slot, lease: &Arc<LeaseShared>) {
    let start_pump = queue.insert(slot, lease);
    debug_assert!(start_pump.is_none(), "a queue with no pump");
}

/// The queue of `runtime`, if it has one.
fn queue_of(queues: &mut [Queue], runtime: runtime::Id) -> Option<&mut Queue> {
    queues.iter_mut().find(|queue| queue.id == runtime)
}

/// A pump: starts the watchdogs planned on its runtime when they fall due.
/// Runs until the manager and every lease it planned are gone, or its
/// runtime shuts down.
async fn pump(schedule: Weak<WatchdogSchedule>, runtime: runtime::Id, wake: Arc<Notify>) {
    loop {
        let Some(next_look) = schedule
            .upgrade()
            .map(|schedule| schedule.start_due(runtime))
        else {
            return;
        };
        match next_look {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

/// Dropped with a pump's task, whether it ran or not. The queue goes with
/// it: its leases' watchdogs are started on their runtime as they are (each
/// still waits for its first renewal; on a runtime that shut down they go
/// with it, as watchdog tasks always did), and the next lease planned there
/// starts a new pump.
struct PumpEnded {
    schedule: Weak<WatchdogSchedule>,
    runtime: runtime::Id,
}

impl Drop for PumpEnded {
    fn drop(&mut self) {
        let Some(schedule) = self.schedule.upgrade() else {
            return;
        };
        let queue = {
            let mut queues = schedule.lock_queues();
            let Some(index) = queues.iter().position(|queue| queue.id == self.runtime) else {
                return;
            };
            queues.swap_remove(index)
        };
        for lease in queue.planned.into_values() {
            schedule.start_planned(&lease, &queue.runtime);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::backend::{
        AcquireOutcome, Claim, ExtendOutcome, LockBackend, ReleaseOutcome,
    };
    use crate::engine::state::NameState;
    use crate::engine::telemetry::Labels;
    use crate::error::{LockError, LossReason};
    use crate::hold::HoldToken;
    use crate::key::{LockKey, OwnerToken};

    /// Only there to build leases: these tests look at the bookkeeping of
    /// planned watchdogs, which never talks to a server, and fail if
    /// anything does but the watchdog's batched renewals, which get no
    /// reply (a test sees them in flight).
    #[derive(Debug)]
    struct NoServer;

    #[async_trait::async_trait]
    impl LockBackend for NoServer {
        fn strategy(&self) -> &'static str {
            "none"
        }
        async fn try_acquire(
            &self,
            _: &LockKey,
            _: &HoldToken,
            _: Duration,
            _: &Claim,
            _: Option<&HoldToken>,
        ) -> Result<AcquireOutcome, LockError> {
            unreachable!("no server in these tests")
        }
        async fn extend(
            &self,
            _: &LockKey,
            _: &HoldToken,
            _: Duration,
        ) -> Result<ExtendOutcome, LockError> {
            unreachable!("no server in these tests")
        }
        async fn release(&self, _: &LockKey, _: &HoldToken) -> Result<ReleaseOutcome, LockError> {
            unreachable!("no server in these tests")
        }
        async fn inspect(&self, _: &LockKey) -> Result<NameState, LockError> {
            unreachable!("no server in these tests")
        }
        async fn force_release(&self, _: &LockKey) -> Result<usize, LockError> {
            unreachable!("no server in these tests")
        }
        async fn extend_many(
            &self,
            _: &[crate::engine::backend::Renewal<'_>],
        ) -> Vec<Result<ExtendOutcome, LockError>> {
            std::future::pending().await
        }
    }

    fn schedule() -> Arc<WatchdogSchedule> {
        let renewals = RenewalDriver::new(Arc::new(NoServer));
        let config = crate::LockConfig::default();
        Arc::new(WatchdogSchedule::new(&Settings::from(&config), renewals))
    }

    fn lease() -> Arc<LeaseShared> {
        lease_sent_at(Instant::now())
    }

    /// A lease whose acquire left at `sent_at`.
    fn lease_sent_at(sent_at: Instant) -> Arc<LeaseShared> {
        let owner = OwnerToken::generate().expect("os rng");
        Arc::new(LeaseShared::new(
            Arc::new(NoServer),
            LockKey::new("lock:", "planned").expect("key"),
            HoldToken::new(owner).expect("os rng"),
            Duration::from_secs(30),
            0.01,
            sent_at,
            Labels::new("none", None),
        ))
    }

    /// What the pump of the (only) queue is doing.
    fn pump_state(schedule: &WatchdogSchedule) -> Option<Pump> {
        schedule.lock_queues().first().map(|queue| queue.pump)
    }

    fn planned(schedule: &WatchdogSchedule) -> usize {
        schedule
            .lock_queues()
            .iter()
            .map(|queue| queue.planned.len())
            .sum()
    }

    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// A release takes its plan out again: the queue does not grow with the
    /// holds a process has taken and given back.
    #[test]
    fn a_stopped_watchdog_leaves_nothing_planned() {
        current_thread().block_on(async {
            let (schedule, leases) = (schedule(), [lease(), lease(), lease()]);
            for lease in &leases {
                schedule.plan(lease);
            }
            assert_eq!(planned(&schedule), 3);
            for lease in &leases {
                lease.lock_watchdog().stop();
                assert!(matches!(*lease.lock_watchdog(), WatchdogState::Stopped));
            }
            assert_eq!(planned(&schedule), 0);
        });
    }

    /// Replies come back out of the order their requests left in: a lease
    /// whose request left a little before the earliest planned one's is due
    /// a little before it. Planning it must not wake the pump (with 32
    /// acquires in flight and replies tens of milliseconds apart, most
    /// acquires did), and its watchdog must still start before it is due.
    #[test]
    fn a_lease_due_just_before_the_earliest_does_not_wake_the_pump() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let schedule = schedule();
            assert_eq!(schedule.early, MAX_EARLY, "the default TTL's slack");
            let first = lease();
            schedule.plan(&first);
            // The pump starts, looks, and sleeps until its next look.
            tokio::task::yield_now().await;
            let Some(Pump::Asleep(Some(next_look))) = pump_state(&schedule) else {
                unreachable!(
                    "the pump sleeps until its next look: {:?}",
                    pump_state(&schedule)
                );
            };
            let sooner = lease_sent_at(first.acquired_at - MAX_EARLY / 2);
            schedule.plan(&sooner);
            assert!(
                matches!(pump_state(&schedule), Some(Pump::Asleep(Some(at))) if at == next_look),
                "planning a lease due just before the earliest woke the pump: {:?}",
                pump_state(&schedule)
            );
            // Both leases' renewals leave at the pump's next look, with no
            // task: each lease holds its right to extend until the reply,
            // and waits in the queue at its deadline in case none comes.
            tokio::time::sleep_until((next_look + Duration::from_millis(1)).into()).await;
            for lease in [&first, &sooner] {
                let LeaseStatus::Held { valid_until } = lease.status() else {
                    unreachable!("the lease ended: {:?}", lease.status());
                };
                let watchdog = lease.lock_watchdog();
                let WatchdogState::Renewing { slot, .. } = &*watchdog else {
                    unreachable!("no renewal sent at the pump's look: {:?}", *watchdog);
                };
                assert_eq!(slot.0, valid_until, "waits at its deadline");
                assert!(lease.try_extending().is_none(), "the renewal is in flight");
            }
            assert_eq!(planned(&schedule), 2);
            // A lease due before the pump's next look does wake it.
            let due_sooner = lease_sent_at(Instant::now() - Duration::from_secs(5));
            let Some(Pump::Asleep(Some(_))) = pump_state(&schedule) else {
                unreachable!(
                    "the pump sleeps until its next look: {:?}",
                    pump_state(&schedule)
                );
            };
            schedule.plan(&due_sooner);
            assert!(matches!(pump_state(&schedule), Some(Pump::Awake)));
            for lease in [&first, &sooner, &due_sooner] {
                lease.lock_watchdog().stop();
            }
        });
    }

    /// A renewal sent without a task that gets no reply (a server that
    /// stopped answering) still ends the lease at its deadline: the lease
    /// waits in the queue there, and the watchdog task started then marks
    /// it expired, with the renewal still in flight.
    #[test]
    fn a_renewal_without_a_reply_ends_the_lease_at_its_deadline() {
        current_thread().block_on(async {
            let schedule = schedule();
            // Granted 30 s ago less 400 ms: its first renewal is long due,
            // its deadline (30 s less drift) a few hundred ms away.
            let lease = lease_sent_at(Instant::now() - Duration::from_millis(29_600));
            let LeaseStatus::Held { valid_until } = lease.status() else {
                unreachable!("granted");
            };
            schedule.plan(&lease);
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(
                matches!(*lease.lock_watchdog(), WatchdogState::Renewing { .. }),
                "{:?}",
                *lease.lock_watchdog()
            );
            let mut changes = lease.status.changes();
            let ended = tokio::time::timeout(
                Duration::from_secs(2),
                changes.wait_for(|status| !matches!(status, LeaseStatus::Held { .. })),
            )
            .await
            .expect("no loss reported at the deadline")
            .map(|status| *status);
            assert!(
                matches!(
                    ended,
                    Ok(LeaseStatus::Lost {
                        reason: LossReason::Expired,
                        ..
                    })
                ),
                "{ended:?}"
            );
            assert!(Instant::now() >= valid_until, "lost before its deadline");
            assert!(
                matches!(*lease.lock_watchdog(), WatchdogState::Running(_)),
                "a task took over at the deadline"
            );
            lease.lock_watchdog().stop();
        });
    }

    /// A runtime that shuts down takes its queue (and the handle that keeps
    /// the runtime's parts alive) with it, even when its pump never ran: no
    /// queue per dead runtime piles up, and no lease stays planned in a
    /// queue nobody pumps.
    #[test]
    fn a_queue_ends_with_its_runtime() {
        let (schedule, lease) = (schedule(), lease());
        let runtime = current_thread();
        // The pump is spawned here and never polled: the runtime is not
        // driven again.
        runtime.block_on(async { schedule.plan(&lease) });
        assert_eq!(schedule.lock_queues().len(), 1);
        drop(runtime);
        assert_eq!(schedule.lock_queues().len(), 0);
        assert!(
            !matches!(*lease.lock_watchdog(), WatchdogState::Planned { .. }),
            "the lease is still planned in a queue that ended"
        );
        // A lease planned on a new runtime gets a queue and a pump there.
        let (other, runtime) = (self::lease(), current_thread());
        runtime.block_on(async { schedule.plan(&other) });
        assert_eq!(planned(&schedule), 1);
        other.lock_watchdog().stop();
    }
}
