//! A backend over a real one that delays or loses the reply of a call on
//! purpose: a slow path, a script reload, a time-out whose command ran
//! anyway. A check arms a fault for the next call of one kind; every other
//! call passes through.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::{
    AcquireOutcome, Capability, Claim, ExtendOutcome, HoldToken, LockBackend, LockError, LockKey,
    NameState, OwnerToken, ReleaseOutcome, Wakeups,
};

/// What happens to the next call of one kind through [`Faulty`].
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Passed through.
    Pass,
    /// Its reply is lost (a time-out): it ran on Redis first if `lands`.
    Lost {
        /// Whether the call reached Redis and ran before its reply was
        /// lost.
        lands: bool,
    },
    /// Sent to Redis only after this delay (a slow path, or a script reload).
    Late(Duration),
    /// Sent late, and answered late too: `(before, after)`.
    Slow(Duration, Duration),
    /// Given up on at once (a time-out), and run on Redis only after this
    /// delay, in the background: a request stuck behind a slow link that
    /// lands after commands its caller sent later. For extends and
    /// acquires; a release armed with it is lost without landing.
    Stray(Duration),
}

const ACQUIRE: usize = 0;
const EXTEND: usize = 1;
const RELEASE: usize = 2;

/// A backend over a real one whose next acquire, extend and release each
/// suffer the fault armed for them, once. It passes on the plain lock's
/// calls only (in fair mode too, where the inner backend has it), and a
/// barrier's parties: none of the other primitives.
#[derive(Debug)]
pub struct Faulty {
    inner: Arc<dyn LockBackend>,
    /// Per kind of call: the fault its next call suffers.
    armed: [Mutex<Option<Fault>>; 3],
    acquires: AtomicUsize,
    watches: AtomicUsize,
}

impl Faulty {
    /// `inner`, whose first acquire, extend and release suffer `acquire`,
    /// `extend` and `release`.
    pub fn new(
        inner: &Arc<dyn LockBackend>,
        acquire: Fault,
        extend: Fault,
        release: Fault,
    ) -> Arc<Self> {
        Arc::new(Faulty {
            inner: Arc::clone(inner),
            armed: [acquire, extend, release].map(|fault| Mutex::new(Some(fault))),
            acquires: AtomicUsize::new(0),
            watches: AtomicUsize::new(0),
        })
    }

    /// `inner`, passing every call through until a fault is armed.
    pub fn passing(inner: &Arc<dyn LockBackend>) -> Arc<Self> {
        Self::new(inner, Fault::Pass, Fault::Pass, Fault::Pass)
    }

    /// Arms `fault` for the next acquire attempt, in place of one armed
    /// before and not yet suffered.
    pub fn next_acquire(&self, fault: Fault) {
        *self.slot(ACQUIRE) = Some(fault);
    }

    /// Whether the fault armed for the next acquire attempt is still to
    /// come: `false` once an attempt has taken it up.
    pub fn acquire_fault_pending(&self) -> bool {
        self.slot(ACQUIRE).is_some()
    }

    /// How many acquire attempts were sent through this backend.
    pub fn acquires(&self) -> usize {
        self.acquires.load(Ordering::SeqCst)
    }

    /// How many watches for releases were made through this backend,
    /// counted once made: a waiter makes one after its first attempt, and
    /// then (unless it is behind another waiter of its process) makes one
    /// more attempt before it sleeps.
    pub fn watches(&self) -> usize {
        self.watches.load(Ordering::SeqCst)
    }

    fn slot(&self, kind: usize) -> std::sync::MutexGuard<'_, Option<Fault>> {
        self.armed[kind]
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Runs `call` as the fault armed for call kind `kind` says.
    async fn apply<T>(
        &self,
        kind: usize,
        call: impl std::future::Future<Output = Result<T, LockError>>,
    ) -> Result<T, LockError> {
        let fault = self.slot(kind).take().unwrap_or(Fault::Pass);
        Self::suffer(fault, call).await
    }

    /// Runs `call` as `fault` says.
    async fn suffer<T>(
        fault: Fault,
        call: impl std::future::Future<Output = Result<T, LockError>>,
    ) -> Result<T, LockError> {
        match fault {
            Fault::Pass => call.await,
            Fault::Lost { lands } => {
                if lands {
                    call.await?;
                }
                Err(lost_reply())
            }
            Fault::Stray(_) => Err(lost_reply()),
            Fault::Late(delay) => {
                tokio::time::sleep(delay).await;
                call.await
            }
            Fault::Slow(before, after) => {
                tokio::time::sleep(before).await;
                let result = call.await;
                tokio::time::sleep(after).await;
                result
            }
        }
    }
}

#[lock_core::async_trait]
impl LockBackend for Faulty {
    fn strategy(&self) -> &'static str {
        self.inner.strategy()
    }

    /// The inner backend's grant fields and its fair queue; none of the
    /// primitives, whose methods this wrapper does not pass on.
    fn capabilities(&self) -> lock_core::Capabilities<'_> {
        let inner = self.inner.capabilities();
        let fair = inner.has(Capability::FairQueue);
        let mut passed = inner.plain_lock_only();
        if fair {
            passed = passed.with_fair_queue();
        }
        // A barrier's parties are acquired, renewed and released as holds
        // are, so the faults reach them; its own read passes untouched.
        if let Some(barriers) = inner.barriers() {
            passed = passed.with_barriers(barriers);
        }
        passed
    }

    async fn try_acquire(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
        claim: &Claim,
        earlier: Option<&HoldToken>,
    ) -> Result<AcquireOutcome, LockError> {
        self.acquires.fetch_add(1, Ordering::SeqCst);
        let fault = self.slot(ACQUIRE).take().unwrap_or(Fault::Pass);
        if let Fault::Stray(delay) = fault {
            let inner = Arc::clone(&self.inner);
            let (key, hold, claim) = (key.clone(), hold.clone(), claim.clone());
            let earlier = earlier.cloned();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                // Nobody reads the reply of a request given up on.
                let _ = inner
                    .try_acquire(&key, &hold, ttl, &claim, earlier.as_ref())
                    .await;
            });
        }
        let attempt = self.inner.try_acquire(key, hold, ttl, claim, earlier);
        Self::suffer(fault, attempt).await
    }

    async fn extend(
        &self,
        key: &LockKey,
        hold: &HoldToken,
        ttl: Duration,
    ) -> Result<ExtendOutcome, LockError> {
        let fault = self.slot(EXTEND).take().unwrap_or(Fault::Pass);
        if let Fault::Stray(delay) = fault {
            let (inner, key, hold) = (Arc::clone(&self.inner), key.clone(), hold.clone());
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                // Nobody reads the reply of a request given up on.
                let _ = inner.extend(&key, &hold, ttl).await;
            });
        }
        Self::suffer(fault, self.inner.extend(key, hold, ttl)).await
    }

    async fn release(&self, key: &LockKey, hold: &HoldToken) -> Result<ReleaseOutcome, LockError> {
        self.apply(RELEASE, self.inner.release(key, hold)).await
    }

    async fn inspect(&self, key: &LockKey) -> Result<NameState, LockError> {
        self.inner.inspect(key).await
    }

    async fn force_release(&self, key: &LockKey) -> Result<usize, LockError> {
        self.inner.force_release(key).await
    }

    async fn leave_queue(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        offered: Option<&[HoldToken]>,
    ) -> Result<(), LockError> {
        self.inner.leave_queue(key, owner, offered).await
    }

    async fn watch_releases(&self, key: &LockKey) -> Result<Option<Box<dyn Wakeups>>, LockError> {
        let watch = self.inner.watch_releases(key).await;
        self.watches.fetch_add(1, Ordering::SeqCst);
        watch
    }
}

/// The error of a call whose reply was lost.
fn lost_reply() -> LockError {
    LockError::Timeout {
        node: "lost-reply".to_owned(),
        after: Duration::from_millis(1),
    }
}
