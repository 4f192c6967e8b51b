//! The lease set (`lua/lease_set/common.lua`) under the semaphore and the
//! read-write lock scripts, on a real server: a grant and a release run the
//! same commands whatever the number of live holds beside them (the
//! server's own count of the commands a script ran, `INFO commandstats`),
//! and the tallies they keep instead of reading the holds stay exact
//! through expiry, a deleted sorted set and a lost hash.

use lock_core::strategy::scripts::{rw, semaphore};
use lock_core::strategy::Script;
use lock_testkit::{AdminReply, RedisServer};

fn eval(server: &RedisServer, script: &Script, keys: &[String], args: &[&str]) -> AdminReply {
    server.eval(script, keys, args).expect("EVAL")
}

/// The semaphore's keys of `name`: the lease set's, the limit and fences.
fn semaphore_keys(name: &str) -> Vec<String> {
    ["", ":held", ":slots", ":limit", ":slot-fences"]
        .iter()
        .map(|suffix| format!("lock:{{{name}}}{suffix}"))
        .collect()
}

/// The read-write lock's keys of `name`: the lease set's, the counter and
/// the writers' line.
fn rw_keys(name: &str) -> Vec<String> {
    ["", ":held", ":slots", ":fence", ":queue", ":waiters"]
        .iter()
        .map(|suffix| format!("lock:{{{name}}}{suffix}"))
        .collect()
}

fn id(owner: usize, nonce: usize) -> String {
    format!("owner{owner}:{nonce:016x}")
}

fn code(reply: &AdminReply) -> i64 {
    match reply {
        AdminReply::Array(Some(items)) => items[0].as_int().expect("a code"),
        AdminReply::Int(value) => *value,
        other => panic!("unexpected reply {other:?}"),
    }
}

fn permit(server: &RedisServer, name: &str, id: &str, ttl: &str) -> i64 {
    let reply = eval(
        server,
        &semaphore::ACQUIRE,
        &semaphore_keys(name),
        &[id, "1", "100", ttl],
    );
    code(&reply)
}

fn read(server: &RedisServer, name: &str, id: &str, ttl: &str) -> i64 {
    let reply = eval(
        server,
        &rw::ACQUIRE,
        &rw_keys(name),
        &[id, "r", ttl, "2000", "0", "w", "0"],
    );
    code(&reply)
}

/// Makes the hold `id` of lease set `name` expire: its deadline `at` ms
/// after the epoch, long past (a hold is live while its deadline is after
/// the server's time, whatever the keys' own TTL).
fn expire(server: &RedisServer, name: &str, id: &str, at: u64) {
    let key = format!("lock:{{{name}}}");
    server
        .admin(&["ZADD", &key, "XX", &at.to_string(), id])
        .expect("ZADD");
}

/// How many commands the server ran, not counting the `EVAL`s and the
/// `INFO` itself: with `CONFIG RESETSTAT` before, those the scripts ran.
fn commands_run(server: &RedisServer) -> u64 {
    let info = server.admin(&["INFO", "commandstats"]).expect("INFO");
    let text = info.as_text().expect("INFO text").to_owned();
    text.lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter(|line| !line.starts_with("eval") && !line.starts_with("info"))
        .filter_map(|line| {
            let calls = line.split_once("calls=")?.1;
            calls.split(',').next()?.parse::<u64>().ok()
        })
        .sum()
}

/// The commands `run` makes the server run.
fn cost(server: &RedisServer, run: impl FnOnce() -> i64) -> (u64, i64) {
    server.admin(&["CONFIG", "RESETSTAT"]).expect("RESETSTAT");
    let reply = run();
    (commands_run(server), reply)
}

/// `take` (a grant of an id on a name, for a TTL) and `release` (of an id
/// on a name) run the same commands beside one live hold of `what` and
/// beside sixty.
fn same_cost_beside_one_or_sixty(
    server: &RedisServer,
    what: &str,
    take: impl Fn(&str, &str, &str) -> i64,
    release: impl Fn(&str, &str) -> i64,
) {
    for (name, live) in [("one", 1), ("sixty", 60)] {
        for index in 0..live {
            assert_eq!(take(name, &id(index, index), "30000"), 1);
        }
    }
    // A TTL past every other's: both grants extend the keys' expiry,
    // whatever the ms they land in.
    let (one, granted) = cost(server, || take("one", &id(99, 99), "60000"));
    assert_eq!(granted, 1);
    let (sixty, granted) = cost(server, || take("sixty", &id(99, 99), "60000"));
    assert_eq!(granted, 1);
    assert_eq!(
        one, sixty,
        "a grant ran {one} commands beside one live {what}, {sixty} beside sixty"
    );
    let (one, released) = cost(server, || release("one", &id(0, 0)));
    assert_eq!(released, 1);
    let (sixty, released) = cost(server, || release("sixty", &id(0, 0)));
    assert_eq!(released, 1);
    assert_eq!(one, sixty, "a release: {one} and {sixty} commands");
}

#[test]
fn a_permit_costs_the_same_beside_one_live_permit_or_sixty() {
    let server = RedisServer::start().expect("start");
    same_cost_beside_one_or_sixty(
        &server,
        "permit",
        |name, id, ttl| permit(&server, name, id, ttl),
        |name, id| {
            code(&eval(
                &server,
                &semaphore::RELEASE,
                &semaphore_keys(name)[..3],
                &[id],
            ))
        },
    );
}

#[test]
fn a_read_costs_the_same_beside_one_live_read_or_sixty() {
    let server = RedisServer::start().expect("start");
    same_cost_beside_one_or_sixty(
        &server,
        "read",
        |name, id, ttl| read(&server, name, id, ttl),
        |name, id| code(&eval(&server, &rw::RELEASE, &rw_keys(name)[..3], &[id])),
    );
}

/// The tallies through what happens to the keys outside the scripts:
/// holds that expire unreleased, more than a sweep reads at once; a sorted
/// set deleted without its hash (an operator's `DEL`); a hash lost while
/// holds live (foreign data: refused, never over-granted).
#[test]
fn the_tallies_stay_exact_through_expiry_and_deletes() {
    let server = RedisServer::start().expect("start");
    let limit = |name: &str, id: &str, ttl: &str| {
        code(&eval(
            &server,
            &semaphore::ACQUIRE,
            &semaphore_keys(name),
            &[id, "1", "70", ttl],
        ))
    };
    // Seventy permits that expire at once, more than one sweep reads:
    // a full semaphore's refusal sweeps them all first, so the next grant
    // finds the whole limit free and takes the lowest slot.
    for index in 0..70 {
        assert_eq!(limit("swept", &id(index, index), "30000"), 1);
    }
    assert_eq!(limit("swept", &id(70, 70), "30000"), 0, "full");
    for index in 0..70 {
        expire(&server, "swept", &id(index, index), 1);
    }
    for index in 0..70 {
        let reply = eval(
            &server,
            &semaphore::ACQUIRE,
            &semaphore_keys("swept"),
            &[&id(100 + index, index), "1", "70", "30000"],
        );
        match reply {
            AdminReply::Array(Some(items)) => {
                assert_eq!(items[0].as_int(), Some(1), "grant {index}: {items:?}");
                assert_eq!(
                    items[1].as_int(),
                    Some(index as i64),
                    "slot of grant {index}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(limit("swept", &id(200, 200), "30000"), 0, "full again");
    // The sorted set deleted by hand: the name is free, whatever the hash
    // says.
    server.admin(&["DEL", "lock:{swept}"]).expect("DEL");
    assert_eq!(limit("swept", &id(201, 201), "30000"), 1);
    // The hash lost while permits live: refused as foreign data, never a
    // grant beside permits the tallies no longer count.
    server.admin(&["DEL", "lock:{swept}:held"]).expect("DEL");
    let reply = eval(
        &server,
        &semaphore::ACQUIRE,
        &semaphore_keys("swept"),
        &[&id(202, 202), "1", "70", "30000"],
    );
    assert_eq!(code(&reply), -2, "{reply:?}");
}

fn write(server: &RedisServer, name: &str, id: &str, ttl: &str) -> AdminReply {
    eval(
        server,
        &rw::ACQUIRE,
        &rw_keys(name),
        &[id, "w", ttl, "2000", "0", "w", "0"],
    )
}

/// An owner's holds that ended with the sorted set (its `held` outlives
/// it) count for nothing: no write of theirs is taken for a live one, so
/// its token is not reused and it is no write beside another's read.
#[test]
fn an_owners_ended_holds_count_for_nothing() {
    let server = RedisServer::start().expect("start");
    let token = |reply: &AdminReply| match reply {
        AdminReply::Array(Some(items)) => items[1].as_text().map(str::to_owned),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        token(&write(&server, "ended", &id(1, 1), "200")).as_deref(),
        Some("1")
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let again = write(&server, "ended", &id(1, 2), "30000");
    assert_eq!(code(&again), 1, "{again:?}");
    assert_eq!(token(&again).as_deref(), Some("2"), "a token of its own");
    assert_eq!(
        code(&eval(
            &server,
            &rw::RELEASE,
            &rw_keys("ended")[..3],
            &[&id(1, 2)]
        )),
        1
    );
    // Its write ended: a read of its own, then another owner's read, and
    // its write is an upgrade (refused), not a re-entry beside B.
    assert_eq!(code(&write(&server, "upgrade", &id(1, 1), "200")), 1);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(read(&server, "upgrade", &id(1, 2), "30000"), 1);
    assert_eq!(read(&server, "upgrade", &id(2, 1), "30000"), 1);
    let upgrade = write(&server, "upgrade", &id(1, 3), "30000");
    assert_eq!(code(&upgrade), -4, "{upgrade:?}");
}

/// A permit id retried after its lease ran out, while more expired
/// permits wait than a sweep reads, counts once, and keeps every live
/// permit in a slot of its own.
#[test]
fn a_retried_permit_beside_unswept_ones_counts_once() {
    let server = RedisServer::start().expect("start");
    let take = |id: &str, weight: &str, ttl: &str| {
        eval(
            &server,
            &semaphore::ACQUIRE,
            &semaphore_keys("retried"),
            &[id, weight, "100", ttl],
        )
    };
    for index in 0..65 {
        assert_eq!(code(&take(&id(index, index), "1", "100000")), 1);
    }
    assert_eq!(code(&take(&id(65, 65), "1", "100000")), 1);
    // Sixty-five expired, the retried one last: one sweep leaves it.
    for index in 0..65 {
        expire(&server, "retried", &id(index, index), 1 + index as u64);
    }
    assert_eq!(code(&take(&id(64, 64), "1", "100000")), 1, "retried");
    let count = |command: &[&str]| server.admin(command).expect("count");
    let tallied = count(&["HGET", "lock:{retried}:held", ":n"]);
    let held = count(&["ZCARD", "lock:{retried}"]);
    assert_eq!(
        tallied.as_text().and_then(|n| n.parse::<i64>().ok()),
        held.as_int(),
        "the tallies count the retried permit twice"
    );
    let heavy = take(&id(66, 66), "98", "100000");
    assert_eq!(code(&heavy), 1, "{heavy:?}");
    // Every live permit in a slot of its own.
    let state = eval(
        &server,
        &semaphore::INSPECT,
        &[
            "lock:{retried}".to_owned(),
            "lock:{retried}:held".to_owned(),
            "lock:{retried}:limit".to_owned(),
        ],
        &[],
    );
    let AdminReply::Array(Some(items)) = &state else {
        panic!("{state:?}");
    };
    let slots: Vec<i64> = items[1..]
        .chunks(4)
        .map(|permit| permit[0].as_int().expect("a slot"))
        .collect();
    let mut distinct = slots.clone();
    distinct.dedup();
    assert_eq!(slots.len(), 3, "{state:?}");
    assert_eq!(distinct, slots, "two permits in one slot: {state:?}");
}

/// A fair release that finds foreign data in the lease set (a live permit
/// without its entry) refuses it and writes nothing, rather than hand on
/// or delete what it could not count.
#[test]
fn a_release_that_finds_foreign_data_writes_nothing() {
    let server = RedisServer::start().expect("start");
    let mut fair = semaphore_keys("broken");
    fair.extend(
        [
            "lock:{broken}:queue",
            "lock:{broken}:waiters",
            "lock:{broken}:offers",
        ]
        .map(String::from),
    );
    let take = |id: &str, owner: &str, weight: &str| {
        code(&eval(
            &server,
            &semaphore::ACQUIRE,
            &fair,
            &[id, weight, "3", "30000", owner, "2000", "1", "-"],
        ))
    };
    assert_eq!(take(&id(1, 1), "owner1", "1"), 1);
    assert_eq!(take(&id(2, 2), "owner2", "1"), 1);
    assert_eq!(take(&id(3, 3), "owner3", "3"), 0, "queued");
    server
        .admin(&["HDEL", "lock:{broken}:held", &id(2, 2)])
        .expect("HDEL");
    server
        .admin(&["HINCRBY", "lock:{broken}:held", ":n", "1"])
        .expect("HINCRBY");
    let snapshot = || {
        fair.iter()
            .map(|key| format!("{:?}", server.admin(&["DUMP", key]).expect("DUMP")))
            .collect::<Vec<_>>()
    };
    let before = snapshot();
    let reply = eval(&server, &semaphore::RELEASE, &fair, &[&id(1, 1)]);
    assert_eq!(code(&reply), -2, "{reply:?}");
    assert_eq!(snapshot(), before, "nothing written");
}

/// A take-over of the only permit, for the same deadline, in the same ms
/// (one transaction): the sorted set the take-over empties and fills
/// again still expires with its hold, and never blocks the name for other
/// kinds after it.
#[test]
fn a_set_emptied_and_filled_in_one_script_keeps_its_expiry() {
    let server = RedisServer::start().expect("start");
    for round in 0..5 {
        let name = format!("taken{round}");
        let keys = semaphore_keys(&name);
        let count = keys.len().to_string();
        let (from, to) = (id(1, 1), id(2, 2));
        let acquire: Vec<&str> = ["EVAL", semaphore::ACQUIRE.source(), &count]
            .into_iter()
            .chain(keys.iter().map(String::as_str))
            .chain([from.as_str(), "1", "3", "2000"])
            .collect();
        let take_over: Vec<&str> = ["EVAL", semaphore::TAKE_OVER.source(), "3"]
            .into_iter()
            .chain(keys[..3].iter().map(String::as_str))
            .chain([from.as_str(), to.as_str(), "2000", "1:0:1"])
            .collect();
        let replies = server
            .admin_session(&[&["MULTI"], &acquire, &take_over, &["EXEC"]])
            .expect("session");
        let exec = format!("{:?}", replies.last());
        assert!(exec.contains("Int(1)"), "{exec}");
        let pttl = server.admin(&["PTTL", &keys[0]]).expect("PTTL").as_int();
        assert!(
            matches!(pttl, Some(1..=2000)),
            "round {round}: the set expires in {pttl:?} ms: {exec}"
        );
    }
}

/// A key of the lease set other than the name's own holding another type
/// is foreign data, not another kind's hold, and nothing is written.
#[test]
fn a_companion_of_another_type_is_foreign_data() {
    let server = RedisServer::start().expect("start");
    server
        .admin(&["SET", "lock:{companion}:held", "junk"])
        .expect("SET");
    let reply = eval(
        &server,
        &semaphore::ACQUIRE,
        &semaphore_keys("companion"),
        &[&id(1, 1), "1", "3", "30000"],
    );
    assert_eq!(code(&reply), -2, "{reply:?}");
    let reply = eval(
        &server,
        &rw::ACQUIRE,
        &rw_keys("companion"),
        &[&id(1, 1), "r", "30000", "2000", "0", "w", "0"],
    );
    assert_eq!(code(&reply), -2, "{reply:?}");
    // `slots` of another type: a release refuses it before it writes.
    assert_eq!(permit(&server, "slotted", &id(1, 1), "30000"), 1);
    assert_eq!(permit(&server, "slotted", &id(2, 2), "30000"), 1);
    server
        .admin(&["SET", "lock:{slotted}:slots", "junk"])
        .expect("SET");
    let before = server.admin(&["ZCARD", "lock:{slotted}"]).expect("ZCARD");
    let reply = eval(
        &server,
        &semaphore::RELEASE,
        &semaphore_keys("slotted")[..3],
        &[&id(1, 1)],
    );
    assert_eq!(code(&reply), -2, "{reply:?}");
    let after = server.admin(&["ZCARD", "lock:{slotted}"]).expect("ZCARD");
    assert_eq!(before.as_int(), after.as_int(), "the release wrote");
}

/// The next message on a raw `SUBSCRIBE` connection: its payload.
fn next_message(reader: &mut std::io::BufReader<std::net::TcpStream>) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    let mut lines = Vec::new();
    // `*3`, `$7 message`, `$<n> channel`, `$<n> payload`: seven lines.
    while lines.len() < 7 {
        line.clear();
        reader.read_line(&mut line).expect("a reply line");
        lines.push(line.trim_end().to_owned());
    }
    assert_eq!(lines[2], "message", "{lines:?}");
    lines[6].clone()
}

/// A subscriber to `channel`, once the server confirmed it.
fn subscriber(server: &RedisServer, channel: &str) -> std::io::BufReader<std::net::TcpStream> {
    use std::io::{BufRead, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port())).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("a read timeout");
    let command = format!(
        "*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{channel}\r\n",
        channel.len()
    );
    stream.write_all(command.as_bytes()).expect("SUBSCRIBE");
    let mut reader = std::io::BufReader::new(stream);
    // The confirmation: `*3`, `$9 subscribe`, `$<n> channel`, `:1`.
    let mut line = String::new();
    for _ in 0..6 {
        line.clear();
        reader.read_line(&mut line).expect("the confirmation");
    }
    reader
}

/// A semaphore's release publishes the weight left in use when its sweep
/// read every expired permit, also when there were exactly as many as one
/// sweep reads (64); with more left unread, the bare weight it freed (its
/// own and the 64 it swept), which wakes every waiter.
#[test]
fn a_release_publishes_the_weight_in_use_when_it_read_every_expired_permit() {
    let server = RedisServer::start().expect("start");
    let name = "published";
    let keys = semaphore_keys(name);
    let mut messages = subscriber(&server, "lock:{published}:released");
    for (expired, published) in [(64, "u1"), (65, "65")] {
        // All taken first: an acquire sweeps what has expired.
        for index in 0..expired {
            assert_eq!(permit(&server, name, &id(1, index), "100000"), 1);
        }
        assert_eq!(permit(&server, name, &id(2, 0), "100000"), 1);
        assert_eq!(permit(&server, name, &id(3, 0), "100000"), 1);
        for index in 0..expired {
            expire(&server, name, &id(1, index), 1 + index as u64);
        }
        let released = eval(&server, &semaphore::RELEASE, &keys[..3], &[&id(2, 0)]);
        assert_eq!(code(&released), 1);
        assert_eq!(
            next_message(&mut messages),
            published,
            "{expired} expired permits before the release"
        );
        for key in &keys {
            server.admin(&["DEL", key]).expect("DEL");
        }
    }
}
