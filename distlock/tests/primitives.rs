//! `distlock run --permits` and `distlock elect` with the real binary, in
//! one test binary (each binary links the whole stack, so fewer of them
//! keep the suite within its time).

#![cfg(all(feature = "cli", any(feature = "redis", feature = "fred")))]

mod common;

#[path = "primitives/elect.rs"]
mod elect;
#[path = "primitives/permits.rs"]
mod permits;
