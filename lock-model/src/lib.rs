//! The lock protocols as models that [stateright] checks exhaustively.
//!
//! Each primitive's scripts are modelled as what they do in one atomic step
//! each ([`Protocol`]: the single-node [`Lock`], the [`FairLock`] with its
//! server-side hand-off, the [`Semaphore`], the [`RwLock`], the
//! [`Election`], and [`Mixed`] kinds on one name), beside
//! what each client believes: the lease it was granted and the deadline it
//! computed by its own clock ([`LeaseModel`]). The checker explores every
//! interleaving of several clients with time passing, holds expiring,
//! replies lost or delayed (a request that runs after its client gave up on
//! it), clients paused, crashing, leases handed off and resumed by true or
//! forged tokens, and a server restart that loses every key, and checks the
//! properties the docs promise (each model's `properties`).
//!
//! The models are tied to the real scripts by the conformance test
//! (`tests/conformance/`): random walks through a model's actions run
//! side by side on a real `redis-server` through both clients, and any
//! reply, hold or counter that differs fails it. `cargo xtask model` runs
//! the checker to stated bounds, and a counterexample prints as a trace of
//! script calls ([`trace`]).
//!
//! Nothing of the products depends on this crate.

mod election;
mod fair;
mod line;
mod lock;
mod mixed;
mod model;
mod rwlock;
mod semaphore;
mod trace;

pub use election::{
    Defect as ElectionDefect, Election, ElectionKeys, CURRENT_TERM, OBSERVED, ONE_LEADER,
    PROCLAIMED,
};
pub use fair::{Defect as FairDefect, FairKeys, FairLock};
pub use line::{Line, Offer, Tag};
pub use lock::{Defect as LockDefect, Hold, Lock, LockKeys, MUTEX};
pub use mixed::{
    Defect as MixedDefect, Kind, Mixed, MixedKeys, KINDS_EXCLUDE, OTHER_NAME, PERMIT_SLOTS,
};
pub use model::{
    Action, Answer, Ask, Bounds, Call, Client, ClientDefect, Faults, Grant, HandOff, Lease,
    LeaseModel, Op, Protocol, Shown, State, AGREES, CLEANUP, EVERY, GIVEN_BACK, HANDED_OVER,
    RESUMED, TAKEN_UP, TOKENS,
};
pub use rwlock::{Defect as RwDefect, RwHold, RwKeys, RwLock, EPOCH, EXCLUSIVE, SHARED};
pub use semaphore::{
    Defect as SemaphoreDefect, Permit, Semaphore, SemaphoreKeys, OWN_SLOTS, SIDE_BY_SIDE,
    WITHIN_LIMIT,
};
pub use trace::trace;
