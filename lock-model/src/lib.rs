//! The lock protocol as a model that [stateright] checks exhaustively.
//!
//! The single-node lock is modelled as what its scripts do in one atomic
//! step each (`lock/acquire_token.lua`, `lock/extend.lua`,
//! `lock/release.lua`), beside what each client believes: the lease it was
//! granted and the deadline it computed by its own clock. The checker
//! explores every interleaving of several clients with time passing, keys
//! expiring, replies lost or delayed (a request that runs after its client
//! gave up on it), clients paused, crashing, and a server restart that loses
//! every key, and checks the properties the docs promise ([`LockModel`]'s
//! `properties`).
//!
//! The model is tied to the real scripts by the conformance test
//! (`tests/conformance.rs`): random walks through the model's actions run
//! side by side on a real `redis-server` through both clients, and any reply
//! or key that differs fails it. `cargo xtask model` runs the checker to the
//! bounds in [`Bounds`], and a counterexample prints as a trace of script
//! calls ([`trace`]).
//!
//! Nothing of the products depends on this crate.

mod lock;
mod trace;

pub use lock::{
    Action, Answer, Bounds, Call, Client, Defect, Faults, Hold, Lease, LockModel, Op, Server, State,
};
pub use trace::trace;
