//! The primitives built on the lease engine, on the single-node strategy:
//! semaphores and leader election, in one test binary (each binary links
//! the whole stack, so fewer of them keep the suite within its time).

#![cfg(any(feature = "redis", feature = "fred"))]

#[path = "primitives/election.rs"]
mod election;
#[path = "primitives/semaphore.rs"]
mod semaphore;
