//! Watchdogs that cost nothing until they are due.
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
//! One pump task per manager sleeps until the earliest entry is due, then
//! starts that lease's watchdog task ([`crate::watchdog::keep`]) on the
//! runtime the lease was taken on; from then on the lease is kept exactly as
//! before. Planning a lease wakes the pump only when the new entry is due
//! before the pump's next look, which, with one TTL per manager, does not
//! happen while the pump runs: it wakes about once per renewal interval
//! however many leases come and go. A caller's `extend` starts the watchdog
//! at once, since it may bring the deadline forward.
//!
//! Until its watchdog starts, a lease's loss signal depends on the pump,
//! which runs on the runtime of the first lease it planned. If that runtime
//! shuts down, the pump starts every planned watchdog on its own lease's
//! runtime as it goes (each still waits for its first renewal), and the next
//! lease planned starts a new pump.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use crate::guard::{LeaseShared, LeaseStatus};
use crate::renewal::RenewalDriver;
use crate::watchdog;

/// How many times in a row the pump looks at an empty queue, one idle
/// interval apart, before it sleeps until woken: a process that takes one
/// short hold after another empties the queue at every release, and should
/// not have to wake the pump at every acquire.
const IDLE_LOOKS: u8 = 2;

/// What every watchdog of one manager is started with.
#[derive(Debug)]
pub(crate) struct KeeperPlan {
    /// The configured renewal interval; `None` with renewal off.
    pub(crate) renew_every: Option<Duration>,
    /// `watchdog.max_hold`.
    pub(crate) max_hold: Option<Duration>,
    pub(crate) renewals: Arc<RenewalDriver>,
}

/// The planned watchdogs of one manager's leases, and the pump that starts
/// them when they fall due.
pub(crate) struct Keepers {
    plan: KeeperPlan,
    /// How long after an acquire a watchdog first falls due with the
    /// configured TTL: how long the pump naps when the queue is empty.
    idle_nap: Duration,
    queue: Mutex<Queue>,
    /// Wakes the pump for an entry due before its next look, or to let it
    /// stop once the manager and all its leases are gone.
    wake: Arc<Notify>,
}

/// Where a lease's watchdog is; behind the lease's own lock.
#[derive(Debug, Default)]
pub(crate) enum Keeper {
    /// Not started: waits in `keepers`' queue at `slot`.
    Planned { keepers: Arc<Keepers>, slot: Slot },
    /// The watchdog task.
    Running(AbortHandle),
    /// Released, handed off, or never planned.
    #[default]
    Stopped,
}

/// When a watchdog is due, and a number that makes the entry unique.
type Slot = (Instant, u64);

#[derive(Default)]
struct Queue {
    planned: BTreeMap<Slot, Planned>,
    next_id: u64,
    pump: Pump,
    idle_looks: u8,
}

/// What the pump is doing, as far as planning a lease needs to know.
#[derive(Debug, Default, Clone, Copy)]
enum Pump {
    /// No pump task (none yet, or its runtime shut down).
    #[default]
    Stopped,
    /// It will look at the queue before it sleeps again.
    Awake,
    /// It sleeps until then (or until woken, with `None`).
    Asleep(Option<Instant>),
}

/// A lease whose watchdog waits to be started, and where to start it.
struct Planned {
    lease: Arc<LeaseShared>,
    runtime: Handle,
}

impl Keepers {
    /// The watchdogs of one manager; `idle_nap` is how long after an acquire
    /// a watchdog first falls due with the configured TTL.
    pub(crate) fn new(plan: KeeperPlan, idle_nap: Duration) -> Self {
        Keepers {
            plan,
            idle_nap,
            queue: Mutex::new(Queue::default()),
            wake: Arc::new(Notify::new()),
        }
    }

    /// Plans the watchdog of `lease`, newly granted: it starts at its first
    /// renewal (or, with renewal off, at the deadline), unless the lease ends
    /// first. Must run inside a Tokio runtime; the watchdog runs on it.
    pub(crate) fn plan(self: &Arc<Self>, lease: &Arc<LeaseShared>) {
        let LeaseStatus::Held { valid_until } = lease.status() else {
            return;
        };
        let due = match self.plan.renew_every {
            Some(interval) => valid_until.min(lease.acquired_at + interval),
            None => valid_until,
        };
        // Under the lease's lock, so the pump cannot take the entry before
        // the lease says where it is.
        let mut keeper = lease.lock_keeper();
        let mut queue = self.lock_queue();
        let slot = (due, queue.next_id);
        queue.next_id = queue.next_id.wrapping_add(1);
        queue.planned.insert(
            slot,
            Planned {
                lease: Arc::clone(lease),
                runtime: Handle::current(),
            },
        );
        match queue.pump {
            Pump::Stopped => {
                tokio::spawn(pump(Arc::downgrade(self), Arc::clone(&self.wake)));
                queue.pump = Pump::Awake;
            }
            Pump::Asleep(next_look) if next_look.is_none_or(|at| due < at) => {
                self.wake.notify_one();
                queue.pump = Pump::Awake;
            }
            Pump::Awake | Pump::Asleep(_) => {}
        }
        *keeper = Keeper::Planned {
            keepers: Arc::clone(self),
            slot,
        };
    }

    fn unplan(&self, slot: Slot) {
        self.lock_queue().planned.remove(&slot);
    }

    /// Starts the watchdog of `lease` (planned at `slot`) on the current
    /// runtime; the caller holds the lease's lock and updates its state.
    fn start_now(&self, lease: &Arc<LeaseShared>, slot: Slot) -> AbortHandle {
        self.unplan(slot);
        self.spawn(lease, &Handle::current())
    }

    fn spawn(&self, lease: &Arc<LeaseShared>, runtime: &Handle) -> AbortHandle {
        let first_renewal = self
            .plan
            .renew_every
            .map(|interval| lease.acquired_at + interval);
        runtime
            .spawn(watchdog::keep(
                Arc::clone(lease),
                first_renewal,
                self.plan.renew_every,
                self.plan.max_hold,
                Arc::clone(&self.plan.renewals),
            ))
            .abort_handle()
    }

    /// Starts the watchdogs that are due; returns when the pump should
    /// look again (`None`: when woken).
    fn start_due(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut due = Vec::new();
        let next_look = {
            let mut queue = self.lock_queue();
            while let Some(entry) = queue.planned.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                due.push(entry.remove());
            }
            let earliest = queue.planned.first_key_value().map(|(slot, _)| slot.0);
            let next_look = match earliest {
                Some(at) => {
                    queue.idle_looks = 0;
                    Some(at)
                }
                None if queue.idle_looks < IDLE_LOOKS => {
                    queue.idle_looks += 1;
                    Some(now + self.idle_nap)
                }
                None => None,
            };
            queue.pump = Pump::Asleep(next_look);
            next_look
        };
        for planned in due {
            self.start_planned(planned);
        }
        next_look
    }

    /// Starts a watchdog taken out of the queue, unless its lease was given
    /// back (or its watchdog started) since.
    fn start_planned(&self, planned: Planned) {
        let mut keeper = planned.lease.lock_keeper();
        if let Keeper::Planned { .. } = *keeper {
            *keeper = Keeper::Running(self.spawn(&planned.lease, &planned.runtime));
        }
    }

    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        // Plain data, valid whatever a panicking holder did.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Keepers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the queue: its leases would print their keepers in turn.
        f.debug_struct("Keepers")
            .field("plan", &self.plan)
            .field("idle_nap", &self.idle_nap)
            .finish_non_exhaustive()
    }
}

impl Drop for Keepers {
    fn drop(&mut self) {
        // The pump may sleep until woken: let it see that it is done.
        self.wake.notify_one();
    }
}

impl Keeper {
    /// Stops the watchdog, started or not.
    pub(crate) fn stop(&mut self) {
        match std::mem::take(self) {
            Keeper::Planned { keepers, slot } => keepers.unplan(slot),
            Keeper::Running(task) => task.abort(),
            Keeper::Stopped => {}
        }
    }

    /// Starts the watchdog of `lease` now (on the current runtime) if it is
    /// only planned.
    pub(crate) fn start_now(&mut self, lease: &Arc<LeaseShared>) {
        if let Keeper::Planned { keepers, slot } = self {
            let task = keepers.start_now(lease, *slot);
            *self = Keeper::Running(task);
        }
    }
}

/// The pump: starts each planned watchdog when it falls due. Runs until the
/// manager and every lease it planned are gone.
async fn pump(keepers: Weak<Keepers>, wake: Arc<Notify>) {
    let _restart = RestartOnShutdown(keepers.clone());
    loop {
        let Some(next_look) = keepers.upgrade().map(|keepers| keepers.start_due()) else {
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

/// Dropped with the pump. If the manager lives on (the pump's runtime shut
/// down), starts every planned watchdog on its lease's own runtime, each
/// still waiting for its first renewal, and lets the next lease planned start
/// a new pump.
struct RestartOnShutdown(Weak<Keepers>);

impl Drop for RestartOnShutdown {
    fn drop(&mut self) {
        let Some(keepers) = self.0.upgrade() else {
            return;
        };
        let planned = {
            let mut queue = keepers.lock_queue();
            queue.pump = Pump::Stopped;
            std::mem::take(&mut queue.planned)
        };
        for planned in planned.into_values() {
            keepers.start_planned(planned);
        }
    }
}
