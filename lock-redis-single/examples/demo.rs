//! The source documents' scenarios on a local redis-server that this demo
//! starts and stops: duplicate order prevention, stock deduction under
//! contention, a cron job on several hosts, a pool of limited resources,
//! transfers between two accounts, each run without a lock (or semaphore)
//! and then with one; and a holder paused past its lease, whose late write
//! only the fencing token refuses.
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
/// How long the nightly report job runs on the host that runs it.
const JOB_LENGTH: Duration = Duration::from_millis(30);
/// Connections the database accepts at once, and workers that each want one.
const POOL: u32 = 3;
const WORKERS: usize = 12;
/// Transfers of 1 from one account to another, both opened with this balance.
const TRANSFERS: usize = 40;
const BALANCE: i64 = 100;
/// The lease of the paused holder's lock, and how long it is paused.
const SHORT_LEASE: Duration = Duration::from_millis(300);
const PAUSE: Duration = Duration::from_millis(600);

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
        cron_job(None).await,
        cron_job(Some(&pods)).await,
        limited_resources(None).await,
        limited_resources(Some(&pods)).await,
        transfers(None).await,
        transfers(Some(&pods)).await,
        paused_holder(&server, false).await,
        paused_holder(&server, true).await,
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
    let refused = finished(tasks, "submission")
        .await
        .into_iter()
        .filter(|created| !created)
        .count();
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
    let bought = finished(tasks, "buyer").await;
    let sold = bought.iter().filter(|bought| **bought).count() as u32;
    let refused = bought.len() as u32 - sold;
    let failed = BUYERS - bought.len();
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

/// Every host's cron fires the nightly report at the same minute. With a lock,
/// the host that takes it runs the job and the others skip this run; the
/// lock is held until every host has fired, as a run's lock is held for the
/// whole minute.
async fn cron_job(pods: Option<&[LockManager]>) -> Row {
    let runs = Arc::new(Mutex::new(0u32));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for host in 0..PODS {
        let runs = Arc::clone(&runs);
        let locks = pods.map(|pods| pods[host].clone());
        tasks.push(tokio::spawn(async move {
            let guard = match &locks {
                None => None,
                Some(locks) => match locks.try_acquire("cron:nightly-report").await? {
                    Some(guard) => Some(guard),
                    // Another host runs it this minute.
                    None => return Ok(None),
                },
            };
            tokio::time::sleep(JOB_LENGTH).await;
            *runs.lock().expect("runs") += 1;
            Ok::<_, LockError>(guard)
        }));
    }
    for guard in finished(tasks, "host").await.into_iter().flatten() {
        if let Err(err) = guard.release().await {
            eprintln!("release failed: {err}");
        }
    }
    let runs = *runs.lock().expect("runs");
    Row {
        scenario: "cron job on every host",
        guard: if pods.is_some() {
            "single-node lock"
        } else {
            "none"
        },
        tasks: PODS,
        outcome: format!("the nightly report ran {runs}x on {PODS} hosts"),
        elapsed: started.elapsed(),
    }
}

/// Every worker takes a database connection, works a few calls and gives it
/// back. A semaphore of the pool's size keeps the connections in use at
/// most that many, across pods.
async fn limited_resources(pods: Option<&[LockManager]>) -> Row {
    let in_use = Arc::new(Mutex::new((0u32, 0u32)));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..WORKERS {
        let in_use = Arc::clone(&in_use);
        let pool = match pods {
            None => None,
            Some(pods) => match pods[worker % pods.len()].semaphore("db:connections", POOL) {
                Ok(pool) => Some(pool),
                Err(err) => return failed_row("limited resources", err),
            },
        };
        tasks.push(tokio::spawn(async move {
            let permit = match &pool {
                None => None,
                Some(pool) => Some(pool.acquire().await?),
            };
            {
                let mut counts = in_use.lock().expect("pool");
                counts.0 += 1;
                counts.1 = counts.1.max(counts.0);
            }
            tokio::time::sleep(DB_LATENCY * 5).await;
            in_use.lock().expect("pool").0 -= 1;
            if let Some(permit) = permit {
                permit.release().await?;
            }
            Ok::<(), LockError>(())
        }));
    }
    finished(tasks, "worker").await;
    let most = in_use.lock().expect("pool").1;
    let verdict = if most > POOL {
        format!("OVER the limit by {}", most - POOL)
    } else {
        "within the limit".to_owned()
    };
    Row {
        scenario: "limited resources",
        guard: if pods.is_some() { "semaphore" } else { "none" },
        tasks: WORKERS,
        outcome: format!("at most {most} of {POOL} connections in use at once: {verdict}"),
        elapsed: started.elapsed(),
    }
}

/// Every transfer debits one account and credits the other, each a read
/// and a write. A multi-key lock over the two accounts makes each transfer
/// whole: no update is lost, and the total stays.
async fn transfers(pods: Option<&[LockManager]>) -> Row {
    let accounts = Arc::new(Mutex::new([BALANCE, BALANCE]));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for transfer in 0..TRANSFERS {
        let accounts = Arc::clone(&accounts);
        let (from, to) = (0, 1);
        let both = match pods {
            None => None,
            Some(pods) => {
                match pods[transfer % pods.len()].multi_lock(["account:a", "account:b"]) {
                    Ok(both) => Some(both),
                    Err(err) => return failed_row("transfers between accounts", err),
                }
            }
        };
        tasks.push(tokio::spawn(async move {
            let guard = match &both {
                None => None,
                Some(both) => Some(both.acquire().await?),
            };
            // Debit, then credit: each a read and a write of one account.
            for (account, change) in [(from, -1), (to, 1)] {
                tokio::time::sleep(DB_LATENCY).await;
                let balance = accounts.lock().expect("accounts")[account];
                tokio::time::sleep(DB_LATENCY).await;
                accounts.lock().expect("accounts")[account] = balance + change;
            }
            if let Some(guard) = guard {
                guard.release().await?;
            }
            Ok::<(), LockError>(())
        }));
    }
    finished(tasks, "transfer").await;
    let [a, b] = *accounts.lock().expect("accounts");
    let sent = TRANSFERS as i64;
    let (debits_lost, credits_lost) = (a - (BALANCE - sent), BALANCE + sent - b);
    let verdict = if debits_lost == 0 && credits_lost == 0 {
        "every transfer whole".to_owned()
    } else {
        format!("{debits_lost} debits and {credits_lost} credits LOST")
    };
    Row {
        scenario: "transfers between accounts",
        guard: if pods.is_some() {
            "multi-key lock"
        } else {
            "none"
        },
        tasks: TRANSFERS,
        outcome: format!("a {a}, b {b} after {sent} transfers from a to b: {verdict}"),
        elapsed: started.elapsed(),
    }
}

/// A holder pauses (a stop-the-world pause, a slow disk) past its lease,
/// with no watchdog to renew it; another pod takes the lock and writes the
/// stock; then the paused holder wakes and writes what it read before. The
/// lock alone cannot stop that late write; its fencing token, checked by the
/// database, does.
async fn paused_holder(server: &RedisServer, fenced: bool) -> Row {
    let mut config = LockConfig::with_nodes([server.url().expose().to_owned()]);
    config.ttl = SHORT_LEASE;
    config.watchdog.enabled = false;
    let pods = match (
        LockManager::connect::<lock_redis_single::SingleNodeBackend>(&config).await,
        LockManager::connect::<lock_redis_single::SingleNodeBackend>(&config).await,
    ) {
        (Ok(paused), Ok(next)) => [paused, next],
        (Err(err), _) | (_, Err(err)) => return failed_row("a holder paused", err),
    };
    let db = Database::default();
    *db.stock.lock().expect("table") = STOCK;
    let name = if fenced {
        "stock:fenced"
    } else {
        "stock:unfenced"
    };
    let started = Instant::now();
    let token = |guard: &lock_core::LockGuard| guard.fencing_token().filter(|_| fenced);
    let outcome = async {
        let paused = pods[0].acquire(name).await?;
        let level = db.read_stock().await;
        tokio::time::sleep(PAUSE).await;
        // The lease ran out during the pause: the next pod takes the lock
        // and sells one.
        let next = pods[1].acquire(name).await?;
        let now = db.read_stock().await;
        db.write_stock(now - 1, token(&next))
            .await
            .map_err(LockErrorOrWrite::Write)?;
        next.release().await?;
        let late = db.write_stock(level - 1, token(&paused)).await;
        let left = *db.stock.lock().expect("table");
        Ok::<_, LockErrorOrWrite>(match late {
            Ok(()) => format!("late write accepted: stock {left}, one sale lost"),
            Err(refused) => format!("late write refused ({refused}): stock {left}"),
        })
    };
    let outcome = match outcome.await {
        Ok(outcome) => outcome,
        Err(err) => format!("failed: {err:?}"),
    };
    Row {
        scenario: "a holder paused past lease",
        guard: if fenced {
            "lock + token"
        } else {
            "lock, no token"
        },
        tasks: 2,
        outcome,
        elapsed: started.elapsed(),
    }
}

/// Waits for every task: the values of those that succeeded, each failure
/// reported as `what`'s.
async fn finished<T, E: std::fmt::Debug>(
    tasks: Vec<tokio::task::JoinHandle<Result<T, E>>>,
    what: &str,
) -> Vec<T> {
    let mut values = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(value)) => values.push(value),
            Ok(Err(err)) => eprintln!("{what} failed: {err:?}"),
            Err(err) => eprintln!("task failed: {err}"),
        }
    }
    values
}

/// The row of a scenario that could not start.
fn failed_row(scenario: &'static str, err: LockError) -> Row {
    Row {
        scenario,
        guard: "-",
        tasks: 0,
        outcome: format!("could not start: {err}"),
        elapsed: Duration::ZERO,
    }
}

#[derive(Debug)]
#[allow(dead_code)] // The fields are read through Debug in the report.
enum LockErrorOrWrite {
    Lock(LockError),
    Write(String),
}

impl From<LockError> for LockErrorOrWrite {
    fn from(err: LockError) -> Self {
        LockErrorOrWrite::Lock(err)
    }
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
