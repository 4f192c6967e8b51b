//! `distlock list`: the held locks, as a table or one JSON array.

use std::time::Duration;

use distlock::state::{
    BarrierState, HolderInfo, LatchState, Leader, ListOptions, ListedLock, LockListing,
    RwLockState, SemaphoreState,
};
use distlock::state::{LockState, NameState};
use distlock::LockManager;

use crate::{fail, holder_json, holder_text, whole_millis, EXIT_UNAVAILABLE};

/// Lists the held locks whose names start with `prefix`, examining at most
/// `limit` keys. Exit code: 0; 69 when a node could not be scanned (what the
/// others hold is printed first); the codes of [`fail`] when the listing
/// could not start.
pub(crate) async fn list(locks: &LockManager, prefix: &str, limit: u64, json: bool) -> u8 {
    let options = ListOptions::with_name_prefix(prefix).with_scan_limit(limit);
    let listing = match locks.list(&options).await {
        Ok(listing) => listing,
        Err(err) => return fail(&err),
    };
    if json {
        print_json(&listing);
    } else {
        print_table(&listing);
    }
    if listing.truncated {
        let note = format!(
            "the scan stopped after examining {} keys (--limit {limit}); more locks may be held",
            listing.examined
        );
        // The JSON on stdout stays one array; the note goes to stderr.
        if json {
            eprintln!("distlock: {note}");
        } else {
            println!("({note})");
        }
    }
    for failure in &listing.failures {
        eprintln!("distlock: a node could not be scanned, its locks are missing: {failure}");
    }
    if listing.failures.is_empty() {
        0
    } else {
        EXIT_UNAVAILABLE
    }
}

/// One row's fields: remaining TTL, token, holds, holder, or the error that
/// kept the lock from being read, and what the name is beside a lock.
struct Row<'a> {
    name: &'a str,
    remaining: Option<Duration>,
    token: Option<u64>,
    holds: Option<u64>,
    queued: Option<u64>,
    holder: Option<&'a HolderInfo>,
    error: Option<String>,
    semaphore: Option<&'a SemaphoreState>,
    leader: Option<&'a Leader>,
    rw_lock: Option<&'a RwLockState>,
    latch: Option<&'a LatchState>,
    barrier: Option<&'a BarrierState>,
}

/// The HOLDS cell of a semaphore: the weight in use of its limit.
fn permits_cell(semaphore: &SemaphoreState) -> String {
    let limit = semaphore
        .limit
        .map_or("?".to_owned(), |limit| limit.to_string());
    format!("{}/{limit} permits", semaphore.used)
}

/// The HOLDS cell of a latch: what is left of its count.
fn latch_cell(latch: &LatchState) -> String {
    if latch.is_open() {
        format!("latch open (0/{})", latch.initial)
    } else {
        format!("latch {}/{} left", latch.count, latch.initial)
    }
}

/// The HOLDS cell of a barrier: its parties in, and its round.
fn barrier_cell(barrier: &BarrierState) -> String {
    let round = if barrier.open { "open" } else { "filling" };
    format!("{}/{} parties, {round}", barrier.entered, barrier.parties)
}

/// The HOLDS cell of a read-write lock: its writers and readers.
fn rw_cell(state: &RwLockState) -> String {
    match (state.writers().count(), state.readers().count()) {
        (0, readers) => format!("{readers} read"),
        (writers, 0) => format!("{writers} write"),
        (writers, readers) => format!("{writers} write, {readers} read"),
    }
}

/// The HOLDER cell of an election: its leader's value.
fn leader_cell(leader: &Leader) -> String {
    format!("leader {:?}, term {}", leader.value, leader.term)
}

fn row(lock: &ListedLock) -> Row<'_> {
    let mut row = Row {
        name: &lock.name,
        remaining: None,
        token: None,
        holds: None,
        queued: lock.queued,
        holder: None,
        error: None,
        semaphore: None,
        leader: None,
        rw_lock: None,
        latch: None,
        barrier: None,
    };
    let state = match &lock.state {
        Ok(state) => state,
        Err(err) => {
            row.error = Some(err.to_string());
            return row;
        }
    };
    let lock_state = match state {
        NameState::Lock(lock) => lock,
        NameState::Election { lock, leader } => {
            row.leader = Some(leader);
            lock
        }
        NameState::Semaphore(semaphore) => {
            row.semaphore = Some(semaphore);
            row.remaining = semaphore
                .permits
                .iter()
                .map(|permit| permit.remaining)
                .max();
            return row;
        }
        NameState::RwLock(rw_lock) => {
            row.rw_lock = Some(rw_lock);
            row.remaining = rw_lock.holds.iter().map(|hold| hold.remaining).max();
            row.token = Some(rw_lock.epoch.get()).filter(|epoch| *epoch > 0);
            return row;
        }
        NameState::Latch(latch) => {
            row.latch = Some(latch);
            row.remaining = latch.remaining;
            return row;
        }
        NameState::Barrier(barrier) => {
            row.barrier = Some(barrier);
            row.remaining = barrier.remaining;
            return row;
        }
        _ => return row,
    };
    if let LockState::Held {
        remaining,
        token,
        hold_count,
        holder,
        ..
    } = lock_state
    {
        row.remaining = *remaining;
        row.token = token.map(|token| token.get());
        row.holds = *hold_count;
        row.holder = holder.as_ref();
    }
    row
}

fn print_json(listing: &LockListing) {
    let rows: Vec<serde_json::Value> = listing
        .locks
        .iter()
        .map(|lock| {
            let row = row(lock);
            serde_json::json!({
                "key": row.name,
                "remaining_ms": row.remaining.map(whole_millis),
                "fencing_token": row.token,
                "hold_count": row.holds,
                "queued": row.queued,
                "holder": row.holder.map(holder_json),
                "error": row.error,
                "semaphore": row.semaphore.map(|semaphore| serde_json::json!({
                    "limit": semaphore.limit,
                    "used": semaphore.used,
                    "permits": semaphore.permits.len(),
                })),
                "leader": row.leader.map(|leader| serde_json::json!({
                    "value": leader.value,
                    "term": leader.term.get(),
                })),
                "rw_lock": row.rw_lock.map(|state| serde_json::json!({
                    "epoch": state.epoch.get(),
                    "writers": state.writers().count(),
                    "readers": state.readers().count(),
                    "waiting_writers": state.waiting_writers,
                })),
                "barrier": row.barrier.map(|barrier| serde_json::json!({
                    "parties": barrier.parties,
                    "entered": barrier.entered,
                    "open": barrier.open,
                })),
                "latch": row.latch.map(|latch| serde_json::json!({
                    "count": latch.count,
                    "initial": latch.initial,
                })),
            })
        })
        .collect();
    println!("{}", serde_json::Value::Array(rows));
}

fn print_table(listing: &LockListing) {
    if listing.locks.is_empty() {
        println!("no held locks found");
        return;
    }
    let header = ["NAME", "TTL", "TOKEN", "HOLDS", "QUEUED", "HOLDER"];
    let rows: Vec<[String; 6]> = listing
        .locks
        .iter()
        .map(|lock| {
            let row = row(lock);
            let dash = || "-".to_owned();
            let holder = match (&row.error, row.holder) {
                (Some(error), _) => format!("error: {error}"),
                (None, Some(holder)) => holder_text(holder),
                (None, None) => row.leader.map_or_else(dash, leader_cell),
            };
            [
                printable(row.name),
                row.remaining.map_or_else(
                    || {
                        if row.error.is_some() {
                            dash()
                        } else {
                            "no expiry".to_owned()
                        }
                    },
                    |left| humantime::format_duration(round_to_millis(left)).to_string(),
                ),
                row.token.map_or_else(dash, |token| token.to_string()),
                row.semaphore
                    .map(permits_cell)
                    .or_else(|| row.rw_lock.map(rw_cell))
                    .or_else(|| row.latch.map(latch_cell))
                    .or_else(|| row.barrier.map(barrier_cell))
                    .or_else(|| row.holds.map(|holds| holds.to_string()))
                    .unwrap_or_else(dash),
                row.queued.map_or_else(dash, |queued| queued.to_string()),
                holder,
            ]
        })
        .collect();
    let mut widths = header.map(|title| title.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut text = String::new();
        for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if index + 1 == cells.len() {
                text.push_str(cell);
            } else {
                text.push_str(cell);
                text.push_str(&" ".repeat(width - cell.chars().count() + 2));
            }
        }
        text.trim_end().to_owned()
    };
    println!("{}", line(&header.map(str::to_owned)));
    for row in &rows {
        println!("{}", line(row));
    }
}

/// `name` with control characters escaped, so one name is one table cell
/// and cannot drive the operator's terminal (`status` prints names so too).
pub(crate) fn printable(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn round_to_millis(duration: Duration) -> Duration {
    Duration::from_millis(whole_millis(duration))
}
