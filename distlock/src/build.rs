//! Building a backend and a manager from a [`Config`].

use std::sync::Arc;

use lock_core::{FromConfig, LockBackend, LockError, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_redlock::RedlockBackend;
use lock_reentrant::ReentrantBackend;

use crate::config::{Config, Strategy};

/// Connects the configured strategy through the configured client.
///
/// Errors: [`LockError::InvalidConfig`] naming the field, and the connection
/// errors of the strategy's `connect` (unreachable nodes, wrong passwords,
/// [`LockError::ClientNotCompiled`] for a client whose feature is off).
pub async fn backend(config: &Config) -> Result<Arc<dyn LockBackend>, LockError> {
    config.validate()?;
    let lock = &config.lock;
    // Boxed: one future type of three strategies' nested connects is too
    // deep for the compiler to lay out in a caller's async fn.
    Ok(match config.strategy() {
        Strategy::Single => Arc::new(Box::pin(SingleNodeBackend::from_config(lock)).await?),
        Strategy::Reentrant => Arc::new(Box::pin(ReentrantBackend::from_config(lock)).await?),
        Strategy::Redlock => Arc::new(Box::pin(RedlockBackend::from_config(lock)).await?),
    })
}

/// Connects the configured strategy and returns a [`LockManager`] over it.
///
/// Errors: those of [`backend`]; the backend is built from the same
/// config as the manager, as [`LockManager::connect`] does.
pub async fn connect(config: &Config) -> Result<LockManager, LockError> {
    LockManager::new(backend(config).await?, config.lock.clone())
}
