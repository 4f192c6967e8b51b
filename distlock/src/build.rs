//! Building a backend and a manager from a [`Config`].

use std::sync::Arc;

use lock_core::{ConnectOptions, GrantOptions, LockBackend, LockError, LockManager};
use lock_redis_single::SingleNodeBackend;
use lock_redlock::{RedlockBackend, RedlockOptions};
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
    let options = ConnectOptions::from(lock);
    let grant = GrantOptions::from_config(lock)?;
    Ok(match config.strategy() {
        Strategy::Single => Arc::new(
            SingleNodeBackend::connect(lock.client, lock.endpoint()?, options)
                .await?
                .with_grant_options(grant),
        ),
        Strategy::Reentrant => Arc::new(
            ReentrantBackend::connect(lock.client, lock.endpoint()?, options)
                .await?
                .with_grant_options(grant),
        ),
        Strategy::Redlock => Arc::new(
            RedlockBackend::connect_endpoints(
                lock.client,
                &lock.endpoints(),
                options,
                RedlockOptions::from(lock),
            )
            .await?,
        ),
    })
}

/// Connects the configured strategy and returns a [`LockManager`] over it.
pub async fn connect(config: &Config) -> Result<LockManager, LockError> {
    LockManager::new(backend(config).await?, config.lock.clone())
}
