//! The handles users take holds through, each over the manager's one
//! claim: a lock, a semaphore, a read-write lock, a multi-key lock and an
//! election, with what each adds to a lease (a permit's slot, a read's
//! epoch, a leader's term and value), a barrier's parties; and the latch,
//! which holds no lease.

pub(crate) mod barrier;
pub(crate) mod election;
pub(crate) mod latch;
pub(crate) mod lock;
pub(crate) mod multi;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod watch;
