//! The safety harness behind `cargo xtask chaos`.
//!
//! Lock workers run as separate OS processes (`chaos-worker`), each looping:
//! acquire, hold for a random short time, commit one write to a *fenced
//! resource* carrying the fencing token, release. Every acquisition is logged
//! with its `CLOCK_MONOTONIC` start and end, which are comparable across
//! processes on one host, so overlapping intervals are real overlaps. The
//! orchestrator (`chaos`) starts the Redis servers, the workers and a fault
//! schedule (seeded and printed, so a run can be replayed), then the
//! [`check`] module reads every log and the resource's own log and counts what
//! went wrong.
//!
//! The fenced resource is a redis-server that no fault touches, running
//! [`FENCED_WRITE`]: a write is accepted only if its token is greater than
//! every token accepted before (a write without a token, from Redlock, is
//! always accepted), and every write is appended to the resource's log in the
//! order the resource saw it.
//!
//! A latch's workers write no resource: they count down rounds of a latch
//! and wait for each, and [`latch`] checks that no wait went on before every
//! party had counted down. A barrier's workers neither: they are its
//! parties, and [`barrier`] checks how many went on in each round.
//!
//! Other libraries run the same scenarios through [`peers`]: workers in
//! their own languages that log what ours log, judged by the same checker.
//!
//! The faults that reach into processes (a starved worker, a paused or killed
//! `distlock run`) find them and set their scheduling through [`procs`], which
//! reads `/proc`: the binaries run on Linux only.

pub mod barrier;
pub mod check;
pub mod latch;
pub mod peers;
#[cfg(target_os = "linux")]
pub mod procs;
mod record;

pub use record::{monotonic_ns, Acquisition, Outcome, Write};

use lock_core::strategy::Script;

/// The fenced resource's write: `lua/fenced_write.lua`.
pub static FENCED_WRITE: Script = Script::new("fenced_write", include_str!("fenced_write.lua"));

/// The Redis key of the fenced resource (a hash of counters) and of its log.
pub const RESOURCE_KEY: &str = "chaos:resource";

/// The fenced resource of a semaphore's `slot`: each slot fences its own
/// tokens, so each has its own resource and log (`<key>:log`).
pub fn slot_resource_key(slot: u32) -> String {
    format!("{RESOURCE_KEY}:slot:{slot}")
}
