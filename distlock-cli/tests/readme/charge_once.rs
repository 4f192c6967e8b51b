use distlock::{Config, FencingToken, LockError, LockManager};

/// One manager per process, shared by every request (clones are cheap).
async fn connect() -> Result<LockManager, LockError> {
    // DISTLOCK_NODES=redis://127.0.0.1:6379 gives a single-node lock;
    // DISTLOCK_STRATEGY=redlock with 3 or 5 nodes gives Redlock, same code.
    distlock::connect(&Config::from_env()?).await
}

/// Charges the order once however many duplicate requests for it arrive,
/// on however many pods: true for the request that charged it.
async fn charge_once(
    locks: &LockManager,
    payments: &impl Payments,
    order_id: u64,
) -> Result<bool, LockError> {
    // Waits up to `wait_timeout` (10 s by default), renews while the closure runs,
    // and returns LeaseLost instead of the output if the lease was lost meanwhile.
    locks
        .with_lock(&format!("order:{order_id}"), |lease| async move {
            // The lock lets duplicates in one at a time; each must still
            // check, under it, whether an earlier one already charged.
            if payments.is_charged(order_id).await {
                return false;
            }
            payments.charge(order_id, lease.fencing_token()).await;
            true
        })
        .await
}

trait Payments {
    /// Whether this order was charged: a record in the payment store,
    /// written with the charge, that outlives the lock.
    async fn is_charged(&self, order_id: u64) -> bool;
    /// Charges the card and records the order as charged. The store keeps
    /// the highest token it has seen for this order and refuses writes that
    /// carry a lower one: a holder paused past its lease cannot charge.
    async fn charge(&self, order_id: u64, token: Option<FencingToken>);
}
