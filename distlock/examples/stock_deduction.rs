//! Stock deduction with a fenced write: buyers take items under the lock, and
//! the stock store refuses any write whose fencing token is older than one it
//! has seen, so a holder that paused past its lease cannot oversell.
//!
//! Finds Redis through `DISTLOCK_NODES`, or starts its own (see `common`).
//! `cargo run -p distlock --example stock_deduction --features redis`

mod common;

use std::sync::{Arc, Mutex};

use distlock::FencingToken;

/// The protected resource: it checks tokens itself.
struct StockStore {
    level: u32,
    highest_token: u64,
}

impl StockStore {
    fn write(&mut self, level: u32, token: Option<FencingToken>) -> Result<(), String> {
        let token = token.ok_or("this store requires a fencing token (use single or reentrant)")?;
        if token.get() < self.highest_token {
            return Err(format!("stale token {token} < {}", self.highest_token));
        }
        self.highest_token = token.get();
        self.level = level;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), distlock::LockError> {
    let (config, _server) = common::config_or_local_server();
    let locks = distlock::connect(&config).await?;
    let store = Arc::new(Mutex::new(StockStore {
        level: 10,
        highest_token: 0,
    }));
    let mut buyers = Vec::new();
    for buyer in 0..25 {
        let (locks, store) = (locks.clone(), Arc::clone(&store));
        buyers.push(tokio::spawn(async move {
            locks
                .with_lock("stock:sku-42", |lease| async move {
                    let mut store = store.lock().expect("store");
                    if store.level == 0 {
                        return Ok(false);
                    }
                    let level = store.level - 1;
                    store.write(level, lease.fencing_token()).map(|()| true)
                })
                .await
                .map(|sold| (buyer, sold))
        }));
    }
    let mut sold = 0;
    for buyer in buyers {
        match buyer.await.expect("buyer task")? {
            (_, Ok(true)) => sold += 1,
            (_, Ok(false)) => {}
            (buyer, Err(refused)) => println!("buyer {buyer}: write refused: {refused}"),
        }
    }
    let store = store.lock().expect("store");
    println!(
        "sold {sold} of 10; stock left {}; last token {}",
        store.level, store.highest_token
    );
    assert_eq!(sold, 10);
    Ok(())
}
