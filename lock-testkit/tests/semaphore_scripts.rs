//! The semaphore scripts (`lock_core::strategy::scripts::semaphore`) on a
//! real server, run as `EVAL` with their sources: never more weight live than
//! the limit, expired permits never counting and never revived, a second
//! release crediting nothing, a slot's tokens growing, the stored limit
//! refusing another, and foreign data refused with nothing written.

use std::time::Duration;

use lock_core::strategy::scripts::semaphore;
use lock_core::strategy::Script;
use lock_testkit::{AdminReply, RedisServer};

/// The five keys of semaphore `name`, under one hash tag.
fn keys(name: &str) -> [String; 5] {
    [
        format!("lock:{{{name}}}"),
        format!("lock:{{{name}}}:held"),
        format!("lock:{{{name}}}:slots"),
        format!("lock:{{{name}}}:limit"),
        format!("lock:{{{name}}}:slot-fences"),
    ]
}

fn eval(server: &RedisServer, script: &Script, keys: &[String], args: &[&str]) -> AdminReply {
    server.eval(script, keys, args).expect("EVAL")
}

/// The reply as integers (a text entry, such as a token, parsed).
fn ints(reply: &AdminReply) -> Vec<i64> {
    match reply {
        AdminReply::Array(Some(items)) => items
            .iter()
            .map(|item| {
                item.as_int()
                    .or_else(|| item.as_text().and_then(|text| text.parse().ok()))
                    .unwrap_or_else(|| panic!("not a number: {item:?} in {reply:?}"))
            })
            .collect(),
        AdminReply::Int(value) => vec![*value],
        other => panic!("unexpected reply {other:?}"),
    }
}

fn acquire(
    server: &RedisServer,
    name: &str,
    id: &str,
    weight: u32,
    limit: u32,
    ttl_ms: u64,
) -> Vec<i64> {
    let (weight, limit, ttl) = (weight.to_string(), limit.to_string(), ttl_ms.to_string());
    ints(&eval(
        server,
        &semaphore::ACQUIRE,
        &keys(name),
        &[id, &weight, &limit, &ttl],
    ))
}

fn renew(server: &RedisServer, name: &str, id: &str, ttl_ms: u64) -> i64 {
    ints(&eval(
        server,
        &semaphore::RENEW,
        &keys(name)[..3],
        &[id, &ttl_ms.to_string()],
    ))[0]
}

fn release(server: &RedisServer, name: &str, id: &str) -> i64 {
    ints(&eval(server, &semaphore::RELEASE, &keys(name)[..3], &[id]))[0]
}

/// Everything the semaphore's keys hold, to compare before and after.
fn snapshot(server: &RedisServer, name: &str) -> Vec<String> {
    keys(name)
        .iter()
        .map(|key| format!("{:?}", server.admin(&["DUMP", key]).expect("DUMP")))
        .collect()
}

#[test]
fn weight_never_exceeds_the_limit() {
    let server = RedisServer::start().expect("start");
    // Slots 0, 1, 2, each with its first token.
    for (index, id) in ["a", "b", "c"].iter().enumerate() {
        assert_eq!(
            acquire(&server, "pool", id, 1, 3, 30_000),
            vec![1, index as i64, 1]
        );
    }
    let full = acquire(&server, "pool", "d", 1, 3, 30_000);
    assert_eq!(full[..2], [0, 3], "{full:?}");
    assert!(
        (29_000..=30_000).contains(&full[2]),
        "waits for the first to end: {full:?}"
    );
    // A weight of 2 fits only once two are back.
    assert_eq!(release(&server, "pool", "a"), 1);
    assert_eq!(acquire(&server, "pool", "heavy", 2, 3, 30_000)[0], 0);
    assert_eq!(release(&server, "pool", "c"), 1);
    // The lowest free slot, and that slot's next token.
    assert_eq!(
        acquire(&server, "pool", "heavy", 2, 3, 30_000),
        vec![1, 0, 2]
    );
    assert_eq!(
        acquire(&server, "pool", "e", 1, 3, 30_000)[0],
        0,
        "b and heavy hold 3"
    );
    // A weight above the limit never fits, and is refused as such.
    assert_eq!(acquire(&server, "pool", "huge", 4, 3, 30_000), vec![-3, 3]);
}

#[test]
fn a_second_release_credits_nothing() {
    let server = RedisServer::start().expect("start");
    assert_eq!(acquire(&server, "twice", "a", 1, 2, 30_000)[0], 1);
    assert_eq!(acquire(&server, "twice", "b", 1, 2, 30_000)[0], 1);
    assert_eq!(release(&server, "twice", "a"), 1);
    assert_eq!(release(&server, "twice", "a"), 0, "the second release");
    assert_eq!(acquire(&server, "twice", "c", 1, 2, 30_000)[0], 1);
    assert_eq!(
        acquire(&server, "twice", "d", 1, 2, 30_000)[..2],
        [0, 2],
        "b and c hold both permits: the double release freed no third"
    );
    // A retried attempt of a live permit gets its own slot and token back.
    assert_eq!(acquire(&server, "twice", "c", 1, 2, 30_000), vec![1, 0, 2]);
}

#[test]
fn expired_permits_never_count_and_are_never_revived() {
    let server = RedisServer::start().expect("start");
    // A long permit beside it keeps the keys alive, so the scripts, not the
    // keys' own expiry, must tell the short one ended.
    assert_eq!(
        acquire(&server, "leases", "short", 1, 2, 100),
        vec![1, 0, 1]
    );
    assert_eq!(
        acquire(&server, "leases", "long", 1, 2, 30_000),
        vec![1, 1, 1]
    );
    assert_eq!(renew(&server, "leases", "short", 100), 1, "live: renewed");
    assert_eq!(acquire(&server, "leases", "other", 1, 2, 30_000)[0], 0);
    let deadline = |id: &str| -> f64 {
        server
            .admin(&["ZSCORE", &keys("leases")[0], id])
            .expect("ZSCORE")
            .as_text()
            .and_then(|text| text.parse().ok())
            .expect("a deadline")
    };
    let long_until = deadline("long");
    std::thread::sleep(Duration::from_millis(250));
    // A retried attempt of a live permit: its slot and token, and a deadline
    // counted from now, not from the first attempt.
    assert_eq!(
        acquire(&server, "leases", "long", 1, 2, 30_000),
        vec![1, 1, 1]
    );
    assert!(
        deadline("long") >= long_until + 200.0,
        "the retry renewed it"
    );
    assert_eq!(
        renew(&server, "leases", "short", 30_000),
        0,
        "ended: not revived"
    );
    assert_eq!(
        release(&server, "leases", "short"),
        0,
        "ended: nothing to give back"
    );
    // Its slot again, with a higher token than the one the stale holder has.
    assert_eq!(
        acquire(&server, "leases", "other", 1, 2, 30_000),
        vec![1, 0, 2]
    );
    assert_eq!(renew(&server, "leases", "short", 30_000), 0);
    assert_eq!(
        acquire(&server, "leases", "late", 1, 2, 30_000)[0],
        0,
        "long and other"
    );
    let pttl = server
        .admin(&["PTTL", &keys("leases")[0]])
        .expect("PTTL")
        .as_int()
        .expect("a TTL");
    assert!(
        (29_000..=30_000).contains(&pttl),
        "the keys end with the last permit: {pttl}"
    );
}

#[test]
fn the_stored_limit_refuses_another() {
    let server = RedisServer::start().expect("start");
    assert_eq!(acquire(&server, "sized", "a", 1, 3, 30_000)[0], 1);
    let before = snapshot(&server, "sized");
    assert_eq!(acquire(&server, "sized", "b", 1, 5, 30_000), vec![-1, 3]);
    assert_eq!(snapshot(&server, "sized"), before, "nothing written");
    // Kept when the semaphore is empty too: changing it is explicit.
    assert_eq!(release(&server, "sized", "a"), 1);
    assert_eq!(acquire(&server, "sized", "b", 1, 5, 30_000), vec![-1, 3]);
}

/// Foreign data is refused and another kind's hold is held, with nothing
/// written either way.
#[test]
fn foreign_data_is_refused_and_nothing_written() {
    let server = RedisServer::start().expect("start");
    let cases: [(&str, &[&[&str]]); 5] = [
        ("string", &[&["SET", "lock:{f1}", "a lock"]]),
        (
            "entry",
            &[
                &["ZADD", "lock:{f2}", "99999999999999", "x"],
                &["HSET", "lock:{f2}:held", "x", "garbage"],
            ],
        ),
        (
            "orphan",
            &[&["ZADD", "lock:{f3}", "99999999999999", "nobody"]],
        ),
        ("limit", &[&["SET", "lock:{f4}:limit", "three"]]),
        ("fence", &[&["HSET", "lock:{f5}:slot-fences", "0", "zz"]]),
    ];
    for (index, (what, setup)) in cases.iter().enumerate() {
        let name = format!("f{}", index + 1);
        for command in *setup {
            server.admin(command).expect("setup");
        }
        let before = snapshot(&server, &name);
        let reply = eval(
            &server,
            &semaphore::ACQUIRE,
            &keys(&name),
            &["id", "1", "3", "30000"],
        );
        // Another kind's hold (a lock's string) is held; foreign data (a
        // live hold with no entry of any kind that keeps a lease set) is
        // refused.
        let another_kind = matches!(*what, "string");
        let expected = if another_kind { 0 } else { -2 };
        assert_eq!(ints_head(&reply), expected, "{what}: {reply:?}");
        assert_eq!(snapshot(&server, &name), before, "{what}: nothing written");
        for (script, count) in [(&semaphore::RENEW, 3), (&semaphore::RELEASE, 3)] {
            let reply = eval(&server, script, &keys(&name)[..count], &["id", "30000"]);
            // Renew and release read their own permit's entry only, and
            // hold nothing of another kind's name.
            if another_kind {
                assert_eq!(ints_head(&reply), 0, "{what}, {}: {reply:?}", script.name());
            }
            assert_eq!(
                snapshot(&server, &name),
                before,
                "{what}, {}",
                script.name()
            );
        }
    }
}

#[test]
fn bad_arguments_are_errors_that_write_nothing() {
    let server = RedisServer::start().expect("start");
    assert_eq!(acquire(&server, "args", "a", 1, 3, 30_000)[0], 1);
    let before = snapshot(&server, "args");
    for (weight, limit, ttl) in [
        ("0", "3", "30000"),
        ("1", "0", "30000"),
        ("1", "3", "0"),
        ("x", "3", "30000"),
        ("1", "-3", "30000"),
        ("1", "3", "1e9"),
        ("1", "3", "1234567890123456"),
        ("100000000000000", "999999999999999", "30000"),
    ] {
        let reply = eval(
            &server,
            &semaphore::ACQUIRE,
            &keys("args"),
            &["b", weight, limit, ttl],
        );
        assert!(
            matches!(reply, AdminReply::Error(_)),
            "{weight} {limit} {ttl}: {reply:?}"
        );
        assert_eq!(snapshot(&server, "args"), before, "{weight} {limit} {ttl}");
    }
    let reply = eval(
        &server,
        &semaphore::RENEW,
        &keys("args")[..3],
        &["a", "soon"],
    );
    assert!(matches!(reply, AdminReply::Error(_)), "{reply:?}");
    // The token is text either way: for a new grant and for a retried one.
    let tokens: Vec<AdminReply> = (0..2)
        .map(|_| {
            eval(
                &server,
                &semaphore::ACQUIRE,
                &keys("args"),
                &["c", "1", "3", "30000"],
            )
        })
        .collect();
    for reply in &tokens {
        match reply {
            AdminReply::Array(Some(items)) => {
                assert_eq!(items[2].as_text(), Some("1"), "{reply:?}")
            }
            other => panic!("{other:?}"),
        }
    }
}

/// An expired permit whose entry is gone is dropped, not taken for foreign
/// data: only a live permit must have its entry.
#[test]
fn an_expired_permit_without_its_entry_is_dropped() {
    let server = RedisServer::start().expect("start");
    server
        .admin(&["ZADD", "lock:{ghost}", "1", "gone"])
        .expect("ZADD");
    assert_eq!(acquire(&server, "ghost", "a", 1, 1, 30_000), vec![1, 0, 1]);
    let score = server
        .admin(&["ZSCORE", "lock:{ghost}", "gone"])
        .expect("ZSCORE");
    assert_eq!(score.as_text(), None, "dropped: {score:?}");
}

/// The first item of a reply whose others may be text.
fn ints_head(reply: &AdminReply) -> i64 {
    match reply {
        AdminReply::Array(Some(items)) => items[0].as_int().expect("a code"),
        AdminReply::Int(value) => *value,
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Fair mode (seven keys): a permit that fits waits behind the queue's live
/// head, a dead head is dropped, the head is granted and leaves the queue,
/// and a queue key of another type is refused before anything is written.
#[test]
fn fair_mode_grants_the_head_only() {
    let server = RedisServer::start().expect("start");
    let mut fair = keys("line").to_vec();
    fair.extend([
        "lock:{line}:queue".to_owned(),
        "lock:{line}:waiters".to_owned(),
    ]);
    let attempt = |id: &str, owner: &str| {
        ints(&eval(
            &server,
            &semaphore::ACQUIRE,
            &fair,
            &[id, "1", "2", "30000", owner, "2000", "1"],
        ))
    };
    // An empty queue: granted.
    assert_eq!(attempt("first:1", "first")[0], 1);
    // A live waiter at the head keeps `late` out though 1 of 2 is free;
    // `late` queues behind it.
    server
        .admin(&["RPUSH", "lock:{line}:queue", "head"])
        .expect("RPUSH");
    server
        .admin(&["ZADD", "lock:{line}:waiters", "99999999999999", "head"])
        .expect("ZADD");
    let refused = attempt("late:1", "late");
    assert_eq!(refused[..2], [0, 1], "{refused:?}");
    let queue = |server: &RedisServer| match server
        .admin(&["LRANGE", "lock:{line}:queue", "0", "-1"])
        .expect("LRANGE")
    {
        AdminReply::Array(Some(items)) => items
            .iter()
            .map(|item| item.as_text().expect("an owner").to_owned())
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(queue(&server), ["head", "late"]);
    // The head dies (its lease in the past): dropped, and `late` is granted
    // and leaves the queue.
    server
        .admin(&["ZADD", "lock:{line}:waiters", "1", "head"])
        .expect("ZADD");
    assert_eq!(attempt("late:2", "late")[0], 1);
    assert!(queue(&server).is_empty(), "{:?}", queue(&server));
    // A queue key of another type: refused, nothing written.
    let mut other = keys("other").to_vec();
    other.extend([
        "lock:{other}:queue".to_owned(),
        "lock:{other}:waiters".to_owned(),
    ]);
    server
        .admin(&["SET", "lock:{other}:queue", "not a list"])
        .expect("SET");
    let before = snapshot(&server, "other");
    let reply = eval(
        &server,
        &semaphore::ACQUIRE,
        &other,
        &["x:1", "1", "2", "30000", "x", "2000", "1"],
    );
    assert_eq!(ints_head(&reply), -2, "{reply:?}");
    assert_eq!(snapshot(&server, "other"), before);
    assert_eq!(
        server
            .admin(&["EXISTS", "lock:{other}:waiters"])
            .expect("EXISTS")
            .as_int(),
        Some(0)
    );
}

/// A release whose permit's name another kind holds gives back nothing and
/// writes nothing of that kind, but still drops an offer naming its id (an
/// attempt whose reply was lost), so no later hand-off grants it.
#[test]
fn a_release_beside_another_kind_still_voids_its_offer() {
    let server = RedisServer::start().expect("start");
    let id = "owner:0123456789abcdef";
    server
        .admin(&["SET", "lock:{void}", "a lock", "PX", "30000"])
        .expect("SET");
    server
        .admin(&["RPUSH", "lock:{void}:queue", "owner"])
        .expect("RPUSH");
    server
        .admin(&[
            "HSET",
            "lock:{void}:offers",
            "owner",
            &format!("p1 2000 99999999999999 {id}"),
        ])
        .expect("HSET");
    let mut all: Vec<String> = keys("void").to_vec();
    all.extend(
        [
            "lock:{void}:queue",
            "lock:{void}:waiters",
            "lock:{void}:offers",
        ]
        .map(String::from),
    );
    let reply = eval(&server, &semaphore::RELEASE, &all, &[id]);
    assert_eq!(ints_head(&reply), 0, "{reply:?}");
    let offer = server
        .admin(&["HEXISTS", "lock:{void}:offers", "owner"])
        .expect("HEXISTS");
    assert_eq!(offer.as_int(), Some(0), "the offer stayed");
    let lock = server.admin(&["GET", "lock:{void}"]).expect("GET");
    assert_eq!(lock.as_text(), Some("a lock"), "the other kind's hold");
}
