//! What the primitives that keep their holds in a sorted set of id to
//! deadline (by the server's clock, in ms) share on the real side: the
//! semaphore's permits, the read-write lock's holds.

use super::{Real, MARK};

/// The server's time in ms.
pub(super) fn now(real: &Real) -> i64 {
    let time = real.admin(&["TIME"]).as_texts().expect("TIME");
    let (seconds, micros): (i64, i64) = (
        time[0].parse().expect("seconds"),
        time[1].parse().expect("microseconds"),
    );
    seconds * 1000 + micros / 1000
}

/// The live holds' ids and how long each has left, in ms: none while the
/// name's key is another kind's (a lock's string).
pub(super) fn live(real: &Real) -> Vec<(String, i64)> {
    let kind = real.admin(&["TYPE", real.key.redis_key()]);
    if kind.as_text() != Some("zset") {
        return Vec::new();
    }
    let now = now(real);
    let from = format!("({now}");
    let found = real
        .admin(&[
            "ZRANGEBYSCORE",
            real.key.redis_key(),
            &from,
            "+inf",
            "WITHSCORES",
        ])
        .as_texts()
        .expect("holds");
    found
        .chunks(2)
        .map(|pair| {
            let deadline: f64 = pair[1].parse().expect("a deadline");
            (pair[0].clone(), deadline as i64 - now)
        })
        .collect()
}

/// Lowers every live hold's deadline to [`MARK`] from now; only lowers: a
/// deadline raised past the keys' own TTL is one no script set.
pub(super) fn mark(real: &Real) {
    let deadline = (now(real) + MARK).to_string();
    for (id, left) in live(real) {
        if left > MARK {
            real.admin(&["ZADD", real.key.redis_key(), "XX", &deadline, &id]);
        }
    }
}

/// Each live hold, as the walk's client and attempt, and its ms left.
pub(super) fn left(real: &Real) -> Vec<(u8, u8, i64)> {
    let mut left: Vec<(u8, u8, i64)> = live(real)
        .into_iter()
        .map(|(id, left)| {
            let (client, attempt) = real.who(&id);
            (client, attempt, left)
        })
        .collect();
    left.sort_unstable();
    left
}

/// `sem_keep`: the sorted set and `companion`, the hash of the holds'
/// entries, live as long as the last live hold, or holds still live are
/// forgotten.
pub(super) fn keys_outlive_holds(real: &Real, companion: &str) -> Result<(), String> {
    // The keys' TTLs first: the holds' time left, read after, can only be
    // less, however slow the reads between (a ms for rounding).
    let keys = [real.key.redis_key(), companion];
    let pttls = keys.map(|key| real.admin(&["PTTL", key]).as_int().expect("PTTL"));
    let Some(last) = live(real).into_iter().map(|(_, left)| left).max() else {
        return Ok(());
    };
    for (key, pttl) in keys.into_iter().zip(pttls) {
        if pttl != -1 && pttl < last - 1 {
            return Err(format!(
                "{key} expires in {pttl} ms, before a hold that has {last} ms left"
            ));
        }
    }
    Ok(())
}

/// Whether a hold is live now that was not among `before` (`live`'s
/// reading before a script): a release or a give-up granted a waiter.
pub(super) fn granted_since(real: &Real, before: &[(String, i64)]) -> bool {
    let after = live(real);
    after
        .iter()
        .any(|(id, _)| !before.iter().any(|(was, _)| was == id))
}

/// Makes `holds` expire now: a hold is live while its deadline is after
/// the server's time, whatever the keys' own TTL.
pub(super) fn expire(real: &Real, holds: &[(u8, u8)]) {
    for hold in holds {
        let id = real.holds[hold].attempt_value().to_owned();
        real.admin(&["ZADD", real.key.redis_key(), "XX", "1", &id]);
    }
}
