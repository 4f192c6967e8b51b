//! A limited resource shared across hosts: at most 3 database connections'
//! worth of work at once, whatever the number of workers, with a bulk job
//! that counts for 2. Each permit's slot picks the connection it uses, and
//! the "database" keeps the highest fencing token per slot, so a worker
//! that paused past its lease is refused once its slot moved on.
//!
//! Finds Redis through `DISTLOCK_NODES`, or starts its own (see `common`).
//! `cargo run -p distlock --example connection_pool`

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use distlock::{AcquireOptions, FencingToken};

const CONNECTIONS: u32 = 3;

/// The protected resource: one fencing counter per slot.
#[derive(Default)]
struct Database {
    highest: Vec<u64>,
    in_use: u32,
    most_in_use: u32,
}

impl Database {
    fn open(&mut self, slot: u32, weight: u32, token: FencingToken) -> Result<(), String> {
        let slot = usize::try_from(slot).map_err(|_| "a slot past usize".to_owned())?;
        if self.highest.len() <= slot {
            self.highest.resize(slot + 1, 0);
        }
        if token.get() < self.highest[slot] {
            return Err(format!("stale token {token} for slot {slot}"));
        }
        self.highest[slot] = token.get();
        self.in_use += weight;
        self.most_in_use = self.most_in_use.max(self.in_use);
        Ok(())
    }

    fn close(&mut self, weight: u32) {
        self.in_use -= weight;
    }
}

#[tokio::main]
async fn main() -> Result<(), distlock::LockError> {
    let (config, _server) = common::config_or_local_server();
    let locks = distlock::connect(&config).await?;
    let pool = locks.semaphore("db-connections", CONNECTIONS)?;
    let database = Arc::new(Mutex::new(Database::default()));
    let mut workers = Vec::new();
    for worker in 0..10u32 {
        let (pool, database) = (pool.clone(), Arc::clone(&database));
        workers.push(tokio::spawn(async move {
            // Worker 0 runs a bulk job that counts for two connections.
            let weight = if worker == 0 { 2 } else { 1 };
            let options = AcquireOptions::new().with_wait(Duration::from_secs(30));
            let permit = pool.acquire_many_with(weight, &options).await?;
            let slot = permit.slot();
            let token = permit.fencing_token().expect("a permit has a token");
            let opened = database.lock().expect("db").open(slot, weight, token);
            if let Err(refused) = opened {
                println!("worker {worker}: refused: {refused}");
            } else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                database.lock().expect("db").close(weight);
            }
            permit.release().await?;
            Ok::<_, distlock::LockError>(())
        }));
    }
    for worker in workers {
        worker.await.expect("worker task")?;
    }
    let database = database.lock().expect("db");
    println!(
        "10 workers, at most {} of {CONNECTIONS} connections in use at once; last token per slot {:?}",
        database.most_in_use, database.highest
    );
    assert!(database.most_in_use <= CONNECTIONS);
    Ok(())
}
