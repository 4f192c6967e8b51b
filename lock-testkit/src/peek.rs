//! What a server holds, read by hand beside the client under test: every
//! key with its type, a lock's fair line, how many connections listen for
//! its releases, and a hold's entry with the time it has left by the
//! server's clock.
//!
//! Each read panics naming the command that failed: these are for checks,
//! where a server that does not answer is a failed check.

use lock_core::strategy::KeyNames as _;
use lock_core::{HoldToken, LockKey};

use crate::server::{AdminReply, RedisServer};

/// Every key the server has, each with what the Lua expression `of_key`
/// says of it (`key` is the key's name: `"redis.call('pttl', key)"`), read
/// in one step and sorted by key.
pub fn keys_with(server: &RedisServer, of_key: &str) -> Vec<(String, AdminReply)> {
    let script = format!(
        "local out = {{}} \
         for _, key in ipairs(redis.call('keys', '*')) do \
           out[#out + 1] = key; out[#out + 1] = {of_key} \
         end \
         return out"
    );
    let reply = server.admin(&["EVAL", &script, "0"]).expect("EVAL");
    let AdminReply::Array(Some(items)) = reply else {
        panic!("the keys: {reply:?}");
    };
    let mut keys: Vec<(String, AdminReply)> = items
        .chunks(2)
        .map(|pair| {
            (
                pair[0].as_text().expect("a key").to_owned(),
                pair[1].clone(),
            )
        })
        .collect();
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    keys
}

/// Every key the server has, each with its type (`"lock:{a} string"`),
/// sorted: a check compares them before and after a call that must write
/// nothing.
pub fn keys(server: &RedisServer) -> Vec<String> {
    keys_with(server, "redis.call('type', key)['ok']")
        .into_iter()
        .map(|(key, kind)| format!("{key} {}", kind.as_text().expect("a type")))
        .collect()
}

/// An integer reply to `args`, such as a length or a TTL.
pub fn int(server: &RedisServer, args: &[&str]) -> i64 {
    let reply = server.admin(args).expect(args[0]);
    reply
        .as_int()
        .unwrap_or_else(|| panic!("{args:?}: {reply:?}"))
}

/// Whether `server` says it has the key `key`; `false` when it does not
/// answer (killed, paused, or failed over mid-check).
pub fn has_key(server: &RedisServer, key: &str) -> bool {
    let reply = server.admin(&["EXISTS", key]);
    reply.ok().and_then(|reply| reply.as_int()) == Some(1)
}

/// The length of `key`'s fair line: its waiters in fair mode, a
/// read-write lock's waiting writers.
pub fn queue_length(server: &RedisServer, key: &LockKey) -> i64 {
    int(server, &["LLEN", &key.queue_key()])
}

/// The owners in `key`'s fair line, first first.
pub fn line(server: &RedisServer, key: &LockKey) -> Vec<String> {
    let reply = server
        .admin(&["LRANGE", &key.queue_key(), "0", "-1"])
        .expect("LRANGE");
    reply
        .as_texts()
        .unwrap_or_else(|| panic!("the line: {reply:?}"))
}

/// How many connections are subscribed to `key`'s releases: one per
/// process that has a waiter watching them, however many waiters it has.
pub fn subscribers(server: &RedisServer, key: &LockKey) -> i64 {
    let channel = key.release_channel();
    match server
        .admin(&["PUBSUB", "NUMSUB", &channel])
        .expect("PUBSUB NUMSUB")
    {
        AdminReply::Array(Some(reply)) => {
            reply.get(1).and_then(AdminReply::as_int).expect("a count")
        }
        other => panic!("PUBSUB NUMSUB {channel}: {other:?}"),
    }
}

/// The entry of `hold` in `key`'s hash `entries` (a semaphore's
/// `<weight>:<slot>:<token>`, a read-write lock's `r:<epoch>` or
/// `w:<token>`) and the milliseconds its deadline in `key` has left by the
/// server's clock, read in one step; `None` when it has no deadline there.
pub fn entry(
    server: &RedisServer,
    key: &LockKey,
    entries: &str,
    hold: &HoldToken,
) -> Option<(String, i64)> {
    let script = "local score = redis.call('zscore', KEYS[1], ARGV[1]) \
        if not score then return false end \
        local time = redis.call('time') \
        local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) \
        return {redis.call('hget', KEYS[2], ARGV[1]), tonumber(score) - now}";
    let reply = server
        .admin(&[
            "EVAL",
            script,
            "2",
            key.redis_key(),
            entries,
            hold.attempt_value(),
        ])
        .expect("EVAL");
    match reply {
        AdminReply::Array(Some(items)) => Some((
            items[0].as_text().expect("an entry").to_owned(),
            items[1].as_int().expect("ms left"),
        )),
        _ => None,
    }
}
