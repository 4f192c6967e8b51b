//! Many readers or one writer over a shared config: eight readers read it
//! side by side while two reloaders rewrite it, each alone. The store keeps
//! the highest token it has seen: it accepts a write whose token is at
//! least that, and tells a reader whether what it read is still current
//! (its epoch, the last write token when it started, equals the store's).
//!
//! Finds Redis through `DISTLOCK_NODES`, or starts its own (see `common`).
//! `cargo run -p distlock --example config_reload`

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use distlock::{AcquireOptions, FencingToken};

/// The protected resource: a versioned value and the highest token seen.
#[derive(Default)]
struct Store {
    value: u64,
    highest: u64,
    readers: u32,
    most_readers: u32,
    writing: bool,
}

impl Store {
    fn write(&mut self, token: FencingToken) -> Result<(), String> {
        if token.get() < self.highest {
            return Err(format!("stale write token {token}"));
        }
        assert_eq!(self.readers, 0, "a write beside a read");
        self.highest = token.get();
        self.value += 1;
        Ok(())
    }

    /// Whether a read of `epoch` saw the latest write.
    fn is_current(&self, epoch: FencingToken) -> bool {
        epoch.get() == self.highest
    }
}

#[tokio::main]
async fn main() -> Result<(), distlock::LockError> {
    let (config, _server) = common::config_or_local_server();
    let locks = distlock::connect(&config).await?;
    let lock = locks.rw_lock("app-config")?;
    let store = Arc::new(Mutex::new(Store::default()));
    let wait = AcquireOptions::new().with_wait(Duration::from_secs(30));
    let mut tasks = Vec::new();
    for reader in 0..8u32 {
        let (lock, store, wait) = (lock.clone(), Arc::clone(&store), wait.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let read = lock.read_with(&wait).await?;
                let epoch = read.fencing_token().expect("a read has the write epoch");
                {
                    let mut store = store.lock().expect("store");
                    assert!(!store.writing, "reader {reader} beside a writer");
                    assert!(store.is_current(epoch), "a read under a lock is current");
                    store.readers += 1;
                    store.most_readers = store.most_readers.max(store.readers);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                store.lock().expect("store").readers -= 1;
                read.release().await?;
            }
            Ok::<_, distlock::LockError>(())
        }));
    }
    for _reloader in 0..2u32 {
        let (lock, store, wait) = (lock.clone(), Arc::clone(&store), wait.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..3 {
                let write = lock.write_with(&wait).await?;
                let token = write.fencing_token().expect("a write has a token");
                {
                    let mut store = store.lock().expect("store");
                    store.writing = true;
                    store.write(token).expect("a current token is accepted");
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
                store.lock().expect("store").writing = false;
                write.release().await?;
            }
            Ok::<_, distlock::LockError>(())
        }));
    }
    for task in tasks {
        task.await.expect("task")?;
    }
    let store = store.lock().expect("store");
    println!(
        "8 readers, 2 reloaders: {} writes, each alone; up to {} readers at once; last token {}",
        store.value, store.most_readers, store.highest
    );
    Ok(())
}
