//! The source documents' scenario on a local redis-server that this demo
//! starts and stops: duplicate order prevention, then stock deduction under
//! contention, each run without a lock and then with one.
//!
//! Run it with `cargo xtask demo` (or `cargo run -p lock-redis-single --example
//! demo --features redis`, with redis-server on PATH or in $REDIS_SERVER).
//!
//! The "database" is an in-process table with a few milliseconds of latency per
//! call, standing in for the SQL database of the source documents; the lock
//! lives in the real Redis server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_core::{FencingToken, LockConfig, LockError, LockManager};
use lock_testkit::RedisServer;

/// Application servers ("pods"), each with its own connection to Redis.
const PODS: usize = 4;
/// Concurrent submissions of the same order.
const ORDER_SUBMISSIONS: usize = 40;
/// Items in stock, and buyers who each want one.
const STOCK: u32 = 50;
const BUYERS: usize = 120;
/// Latency of one database call.
const DB_LATENCY: Duration = Duration::from_millis(2);

/// A database table that takes time to answer and that refuses writes fenced
/// with a token older than one it has already accepted.
#[derive(Default)]
struct Database {
    orders: Mutex<HashMap<String, u32>>,
    stock: Mutex<u32>,
    highest_token: Mutex<u64>,
}

impl Database {
    async fn order_exists(&self, id: &str) -> bool {
        tokio::time::sleep(DB_LATENCY).await;
        self.orders.lock().expect("table").contains_key(id)
    }

    async fn insert_order(&self, id: &str) {
        tokio::time::sleep(DB_LATENCY).await;
        *self
            .orders
            .lock()
            .expect("table")
            .entry(id.to_owned())
            .or_insert(0) += 1;
    }

    async fn read_stock(&self) -> u32 {
        tokio::time::sleep(DB_LATENCY).await;
        *self.stock.lock().expect("table")
    }

    /// Writes the stock level; with a token, refuses it if a newer token wrote first.
    async fn write_stock(&self, level: u32, token: Option<FencingToken>) -> Result<(), String> {
        tokio::time::sleep(DB_LATENCY).await;
        if let Some(token) = token {
            let mut highest = self.highest_token.lock().expect("table");
            if token.get() < *highest {
                return Err(format!("stale fencing token {token}"));
            }
            *highest = token.get();
        }
        *self.stock.lock().expect("table") = level;
        Ok(())
    }
}

struct Row {
    scenario: &'static str,
    guard: &'static str,
    tasks: usize,
    outcome: String,
    elapsed: Duration,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = RedisServer::start()?;
    println!("started redis-server on 127.0.0.1:{}", server.port());
    let mut config = LockConfig::with_nodes([server.url().expose().to_owned()]);
    config.ttl = Duration::from_secs(5);
    config.wait_timeout = Duration::from_secs(30);
    let mut pods = Vec::new();
    for _ in 0..PODS {
        pods.push(LockManager::connect::<lock_redis_single::SingleNodeBackend>(&config).await?);
    }

    let rows = vec![
        duplicate_orders(None).await,
        duplicate_orders(Some(&pods)).await,
        stock_deduction(None).await,
        stock_deduction(Some(&pods)).await,
    ];
    print_table(&rows);
    drop(pods);
    drop(server);
    println!("stopped redis-server");
    Ok(())
}

/// Every submission checks whether the order exists and creates it if not. A
/// lock per order makes check-then-create atomic across pods.
async fn duplicate_orders(pods: Option<&[LockManager]>) -> Row {
    let db = Arc::new(Database::default());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for submission in 0..ORDER_SUBMISSIONS {
        let db = Arc::clone(&db);
        let locks = pods.map(|pods| pods[submission % pods.len()].clone());
        tasks.push(tokio::spawn(async move {
            let create = || async {
                if db.order_exists("1001").await {
                    false
                } else {
                    db.insert_order("1001").await;
                    true
                }
            };
            match locks {
                None => Ok(create().await),
                Some(locks) => locks.with_lock("order:1001", |_lease| create()).await,
            }
        }));
    }
    let mut refused = 0;
    for task in tasks {
        match task.await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => refused += 1,
            Ok(Err(err)) => eprintln!("submission failed: {err}"),
            Err(err) => eprintln!("task failed: {err}"),
        }
    }
    let created = db
        .orders
        .lock()
        .expect("table")
        .get("1001")
        .copied()
        .unwrap_or(0);
    Row {
        scenario: "duplicate order prevention",
        guard: if pods.is_some() {
            "single-node lock"
        } else {
            "none"
        },
        tasks: ORDER_SUBMISSIONS,
        outcome: format!("order 1001 created {created}x, {refused} duplicates refused"),
        elapsed: started.elapsed(),
    }
}

/// Every buyer reads the stock and writes it back one lower if positive. With
/// the lock, writes are also fenced with the lease's token.
async fn stock_deduction(pods: Option<&[LockManager]>) -> Row {
    let db = Arc::new(Database::default());
    *db.stock.lock().expect("table") = STOCK;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for buyer in 0..BUYERS {
        let db = Arc::clone(&db);
        let locks = pods.map(|pods| pods[buyer % pods.len()].clone());
        tasks.push(tokio::spawn(async move {
            let buy = |token: Option<FencingToken>| async move {
                let level = db.read_stock().await;
                if level == 0 {
                    return Ok::<bool, String>(false);
                }
                db.write_stock(level - 1, token).await?;
                Ok(true)
            };
            match locks {
                None => buy(None).await.map_err(LockErrorOrWrite::Write),
                Some(locks) => match locks
                    .with_lock("stock:sku-42", |lease| buy(lease.fencing_token()))
                    .await
                {
                    Ok(result) => result.map_err(LockErrorOrWrite::Write),
                    Err(err) => Err(LockErrorOrWrite::Lock(err)),
                },
            }
        }));
    }
    let (mut sold, mut refused, mut failed) = (0u32, 0u32, 0u32);
    for task in tasks {
        match task.await {
            Ok(Ok(true)) => sold += 1,
            Ok(Ok(false)) => refused += 1,
            Ok(Err(err)) => {
                failed += 1;
                eprintln!("buyer failed: {err:?}");
            }
            Err(err) => {
                failed += 1;
                eprintln!("task failed: {err}");
            }
        }
    }
    let left = *db.stock.lock().expect("table");
    let verdict = if sold > STOCK {
        format!("OVERSOLD by {}", sold - STOCK)
    } else {
        "no overselling".to_owned()
    };
    Row {
        scenario: "stock deduction",
        guard: if pods.is_some() {
            "single-node lock"
        } else {
            "none"
        },
        tasks: BUYERS,
        outcome: format!(
            "sold {sold} of {STOCK}, {refused} refused, {failed} failed, {left} left: {verdict}"
        ),
        elapsed: started.elapsed(),
    }
}

#[derive(Debug)]
#[allow(dead_code)] // The fields are read through Debug in the report.
enum LockErrorOrWrite {
    Lock(LockError),
    Write(String),
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "{:<28} {:<17} {:>5} {:>9}  outcome",
        "scenario", "lock", "tasks", "time"
    );
    println!("{}", "-".repeat(110));
    for row in rows {
        println!(
            "{:<28} {:<17} {:>5} {:>7}ms  {}",
            row.scenario,
            row.guard,
            row.tasks,
            row.elapsed.as_millis(),
            row.outcome
        );
    }
    println!();
}
