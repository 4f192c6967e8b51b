//! The cleanup a future owes if it is dropped part-way.

/// Runs its cleanup when dropped, unless [`disarm`](Self::disarm)ed first
/// (as tokio-util's `DropGuard`): what a future owes the server or the lease
/// if it is cancelled after sending a command and before its reply was read.
pub(crate) struct DropGuard<F: FnOnce()> {
    cleanup: Option<F>,
}

impl<F: FnOnce()> DropGuard<F> {
    /// A guard that runs `cleanup` when dropped.
    pub(crate) fn new(cleanup: F) -> Self {
        DropGuard {
            cleanup: Some(cleanup),
        }
    }

    /// Drops the guard without running its cleanup: the reply arrived.
    pub(crate) fn disarm(mut self) {
        self.cleanup = None;
    }
}

impl<F: FnOnce()> Drop for DropGuard<F> {
    fn drop(&mut self) {
        if let Some(cleanup) = self.cleanup.take() {
            cleanup();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn a_dropped_guard_cleans_up_and_a_disarmed_one_does_not() {
        let runs = Cell::new(0);
        drop(DropGuard::new(|| runs.set(runs.get() + 1)));
        assert_eq!(runs.get(), 1);
        DropGuard::new(|| runs.set(runs.get() + 1)).disarm();
        assert_eq!(runs.get(), 1);
    }
}
