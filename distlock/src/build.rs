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
    Ok(match config.strategy() {
        Strategy::Single => Arc::new(SingleNodeBackend::from_config(lock).await?),
        Strategy::Reentrant => Arc::new(ReentrantBackend::from_config(lock).await?),
        Strategy::Redlock => Arc::new(RedlockBackend::from_config(lock).await?),
    })
}

/// Connects the configured strategy and returns a [`LockManager`] over it.
///
/// Errors: those of [`backend`].
pub async fn connect(config: &Config) -> Result<LockManager, LockError> {
    config.validate()?;
    let lock = &config.lock;
    match config.strategy() {
        Strategy::Single => LockManager::connect::<SingleNodeBackend>(lock).await,
        Strategy::Reentrant => LockManager::connect::<ReentrantBackend>(lock).await,
        Strategy::Redlock => LockManager::connect::<RedlockBackend>(lock).await,
    }
}
