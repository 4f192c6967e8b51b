//! Transfers between three accounts in every direction at once, each
//! holding both of its accounts as one hold: no deadlock whatever the
//! order, and the books always balance. Each account keeps the highest
//! fencing token it has accepted, and the hold's one token is above every
//! earlier token of each account, so no write is ever refused here.
//!
//! Finds Redis through `DISTLOCK_NODES`, or starts its own (see `common`).
//! `cargo run -p distlock --example transfer`

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use distlock::AcquireOptions;

/// The balances, and the highest token each account has seen.
#[derive(Default)]
struct Bank {
    balance: HashMap<u32, i64>,
    highest: HashMap<u32, u64>,
}

impl Bank {
    fn transfer(&mut self, from: u32, to: u32, amount: i64, token: u64) -> Result<(), String> {
        for account in [from, to] {
            if token < *self.highest.get(&account).unwrap_or(&0) {
                return Err(format!("stale token {token} for account {account}"));
            }
        }
        for account in [from, to] {
            self.highest.insert(account, token);
        }
        *self.balance.entry(from).or_default() -= amount;
        *self.balance.entry(to).or_default() += amount;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), distlock::LockError> {
    let (config, _server) = common::config_or_local_server();
    let locks = distlock::connect(&config).await?;
    let bank = Arc::new(Mutex::new(Bank::default()));
    let mut tasks = Vec::new();
    for (from, to) in [(1, 2), (2, 1), (2, 3), (3, 2), (3, 1), (1, 3)] {
        let accounts = locks.multi_lock([format!("acct-{from}"), format!("acct-{to}")])?;
        let bank = Arc::clone(&bank);
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let wait = AcquireOptions::new().with_wait(Duration::from_secs(30));
                let held = accounts.acquire_with(&wait).await?;
                let token = held.fencing_token().expect("a multi-key hold has a token");
                bank.lock()
                    .expect("bank")
                    .transfer(from, to, 10, token.get())
                    .expect("the hold's token is current for both accounts");
                tokio::time::sleep(Duration::from_millis(5)).await;
                held.release().await?;
            }
            Ok::<_, distlock::LockError>(())
        }));
    }
    for task in tasks {
        task.await.expect("task")?;
    }
    let bank = bank.lock().expect("bank");
    let total: i64 = bank.balance.values().sum();
    println!(
        "30 transfers in six directions, none stuck; balances {:?}, total {total}",
        {
            let mut balances: Vec<_> = bank.balance.iter().collect();
            balances.sort();
            balances
        }
    );
    assert_eq!(total, 0);
    Ok(())
}
