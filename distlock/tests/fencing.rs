//! The SQL resource of `FencingToken`'s docs, run as the docs show it: the
//! same `UPDATE`, in SQLite (the `sqlite3` command), with tokens from real
//! leases. (The docs' Redis example runs as a doc test.)

use std::path::{Path, PathBuf};
use std::process::Command;

use distlock::{Config, FencingToken, LockConfig};
use lock_testkit::RedisServer;

/// The docs' statement, fences and all.
const DOCUMENTED: &str = include_str!("../../lock-core/src/doc/fencing_token_sql.md");

/// The statement inside the docs' ```` ```sql ```` block.
fn documented_update() -> &'static str {
    DOCUMENTED
        .trim()
        .strip_prefix("```sql")
        .and_then(|rest| rest.strip_suffix("```"))
        .expect("fencing_token_sql.md is one ```sql block")
        .trim()
}

/// A database file of its own, removed on drop.
struct Database(PathBuf);

impl Database {
    fn create() -> Self {
        let path = std::env::temp_dir().join(format!(
            "distlock-fencing-{}-{:?}.db",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_file(&path);
        let database = Database(path);
        database.run(&[
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL, \
             fence INTEGER NOT NULL DEFAULT 0);"
                .to_owned(),
            "INSERT INTO orders (id, status) VALUES (1001, 'new');".to_owned(),
        ]);
        database
    }

    /// Runs `commands` in one `sqlite3` process; returns what it printed.
    fn run(&self, commands: &[String]) -> String {
        let output = Command::new("sqlite3")
            .arg(&self.0)
            .args(commands)
            .output()
            .expect(
                "run sqlite3 (Debian: `apt-get install sqlite3`; `cargo xtask test` installs it)",
            );
        assert!(
            output.status.success(),
            "sqlite3 failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// The documented `UPDATE` for order 1001 under `token`: the rows it changed.
    fn charge(&self, token: FencingToken) -> u64 {
        let changed = self.run(&[
            format!(".parameter set $1 {}", token.get()),
            ".parameter set $2 1001".to_owned(),
            documented_update().to_owned(),
            "SELECT changes();".to_owned(),
        ]);
        changed.parse().expect("changes() is a number")
    }

    fn fence(&self) -> u64 {
        self.run(&["SELECT fence FROM orders WHERE id = 1001;".to_owned()])
            .parse()
            .expect("the fence is a number")
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(Path::new(&self.0));
    }
}

#[tokio::test]
async fn the_documented_update_refuses_a_stale_holder() {
    let server = RedisServer::start().expect("start redis-server");
    let config = Config::new(LockConfig::with_nodes([server.url().expose()]));
    let locks = distlock::connect(&config).await.expect("connect");
    let orders = Database::create();

    let paused = locks.acquire("order:1001").await.expect("acquire");
    let late = paused.fencing_token().expect("the single strategy fences");
    // As if the holder stalled past its lease: the lock moves on.
    paused.release().await.expect("release");

    let next = locks.acquire("order:1001").await.expect("acquire");
    let fresh = next.fencing_token().expect("the single strategy fences");
    assert!(fresh > late);
    assert_eq!(orders.charge(fresh), 1, "the newest holder charges");
    assert_eq!(orders.charge(late), 0, "the stale holder wakes: refused");
    assert_eq!(
        orders.charge(fresh),
        0,
        "with `<`, one charge per hold: the same token is refused the second time"
    );
    assert_eq!(orders.fence(), fresh.get());
    next.release().await.expect("release");
}
