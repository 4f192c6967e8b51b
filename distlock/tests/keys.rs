//! What locks leave behind in Redis, through the front door, on both
//! clients, with and without holder information: with `fencing_counter_ttl`
//! off, only each name's fencing counter (without a TTL); with it on, only
//! keys whose TTL is no longer than it.
//! Tokens keep growing across a counter that expired, a counter never expires
//! under a lease that outlives it, and the arithmetic stays exact near and
//! above 2^53.

#![cfg(any(feature = "redis", feature = "fred"))]

use std::time::{Duration, Instant};

use distlock::state::LockState;
use distlock::{ClientKind, Config, LockError, LockManager};
use lock_testkit::contract::taken;
use lock_testkit::contract::taken_as;
use lock_testkit::{AdminReply, RedisServer};

mod common;

/// The ways a lock is taken that issue fencing tokens.
const MODES: [&str; 3] = ["single", "reentrant", "fair"];

async fn connect(config: &Config) -> LockManager {
    distlock::connect(config).await.expect("connect")
}

/// Every key on `server` with its `PTTL`, sorted by key.
fn keys_and_ttls(server: &RedisServer) -> Vec<(String, i64)> {
    lock_testkit::peek::keys_with(server, "redis.call('pttl', key)")
        .into_iter()
        .map(|(key, ttl)| (key, ttl.as_int().expect("a TTL")))
        .collect()
}

fn flush(server: &RedisServer) {
    server.admin(&["FLUSHALL"]).expect("FLUSHALL");
}

/// Takes and gives back `count` distinct names, one after another.
async fn lock_names(locks: &LockManager, count: usize) {
    for index in 0..count {
        let name = format!("order:{index}");
        let guard = taken(locks, &name).await;
        guard.release().await.expect("release");
    }
}

const NAMES: usize = 1000;

#[test]
fn without_a_counter_ttl_a_name_leaves_only_its_counter() {
    lock_testkit::on_every_client(async |server, client| {
        for (mode, holder_info) in MODES
            .iter()
            .flat_map(|mode| [(*mode, "false"), (*mode, "true")])
        {
            flush(server);
            let holder = [("DISTLOCK_HOLDER_INFO", holder_info)];
            let locks = connect(&common::config(mode, [server], client, &holder)).await;
            lock_names(&locks, NAMES).await;
            let keys = keys_and_ttls(server);
            assert_eq!(
                keys.len(),
                NAMES,
                "{client} {mode} {holder_info}: {:?}",
                &keys[..5]
            );
            for (key, ttl) in &keys {
                assert!(
                    key.starts_with("lock:{order:") && key.ends_with("}:fence"),
                    "{client} {mode}: {key} is not a fencing counter"
                );
                assert_eq!(*ttl, -1, "{client} {mode}: {key} expires");
            }
            // The tokens are what they always were: 1, 2, 3, ...
            let token = |locks: &LockManager| {
                let locks = locks.clone();
                async move {
                    let guard = taken(&locks, "order:0").await;
                    let token = guard.fencing_token().map(|token| token.get());
                    guard.release().await.expect("release");
                    token
                }
            };
            assert_eq!(token(&locks).await, Some(2), "{client} {mode}");
            assert_eq!(token(&locks).await, Some(3), "{client} {mode}");
        }
    });
}

#[test]
fn with_a_counter_ttl_every_key_expires() {
    lock_testkit::run(async {
        let server = RedisServer::start().expect("start");
        let ten_minutes = 600_000;
        for client in ClientKind::compiled() {
            for mode in MODES {
                flush(&server);
                let on = [
                    ("DISTLOCK_FENCING_COUNTER_TTL", "10m"),
                    ("DISTLOCK_HOLDER_INFO", "true"),
                ];
                let locks = connect(&common::config(mode, [&server], client, &on)).await;
                let before = server_micros(&server);
                let guard = taken(&locks, "held").await;
                let token = guard.fencing_token().expect("a token").get();
                assert!(
                    token >= before && token < 1 << 53,
                    "{client} {mode}: the first token {token} is the server's time in µs ({before})"
                );
                let held = keys_and_ttls(&server);
                assert!(
                    held.iter().any(|(key, _)| key.ends_with(":holder")),
                    "{client} {mode}: {held:?}"
                );
                for (key, ttl) in held {
                    assert!(
                        ttl > 0 && ttl <= ten_minutes,
                        "{client} {mode}: {key} has TTL {ttl} while held"
                    );
                }
                guard.release().await.expect("release");
                lock_names(&locks, NAMES).await;
                let keys = keys_and_ttls(&server);
                assert_eq!(
                    keys.len(),
                    NAMES + 1,
                    "{client} {mode}: the fencing counters"
                );
                for (key, ttl) in &keys {
                    assert!(key.ends_with("}:fence"), "{client} {mode}: {key} is left");
                    assert!(
                        *ttl > ten_minutes - 60_000 && *ttl <= ten_minutes,
                        "{client} {mode}: {key} has TTL {ttl}"
                    );
                }
            }
        }
    });
}

/// The server's clock in µs since the epoch.
fn server_micros(server: &RedisServer) -> u64 {
    let AdminReply::Array(Some(parts)) = server.admin(&["TIME"]).expect("TIME") else {
        panic!("TIME");
    };
    let seconds: u64 = parts[0].as_text().expect("s").parse().expect("s");
    let micros: u64 = parts[1].as_text().expect("µs").parse().expect("µs");
    seconds * 1_000_000 + micros
}

async fn token_of(locks: &LockManager, name: &str) -> u64 {
    let guard = taken(locks, name).await;
    let token = guard.fencing_token().expect("a token").get();
    guard.release().await.expect("release");
    token
}

fn counter_ttl(server: &RedisServer, name: &str) -> i64 {
    server
        .admin(&["PTTL", &format!("lock:{{{name}}}:fence")])
        .expect("PTTL")
        .as_int()
        .expect("a TTL")
}

/// Waits up to 3 s for `name`'s counter to expire.
async fn until_expired(server: &RedisServer, name: &str) {
    let started = Instant::now();
    while counter_ttl(server, name) != -2 {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the counter of {name} never expired"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn tokens_grow_across_an_expired_counter() {
    lock_testkit::on_every_client(async |server, client| {
        for mode in MODES {
            flush(server);
            let short = [
                ("DISTLOCK_TTL", "50ms"),
                ("DISTLOCK_NODE_TIMEOUT", "10ms"),
                ("DISTLOCK_FENCING_COUNTER_TTL", "500ms"),
            ];
            let off = connect(&common::config(mode, [server], client, &short[..2])).await;
            let on = connect(&common::config(mode, [server], client, &short)).await;
            // Off: 1, 2; turned on, the next token is the server's time.
            assert_eq!(token_of(&off, "job").await, 1, "{client} {mode}");
            assert_eq!(token_of(&off, "job").await, 2, "{client} {mode}");
            let mut last = token_of(&on, "job").await;
            assert!(last > 1_000_000_000_000_000, "{client} {mode}: {last}");
            // While the counter lives, tokens count up from it.
            let next = token_of(&on, "job").await;
            assert!(next > last, "{client} {mode}: {next} after {last}");
            last = next;
            let ttl = counter_ttl(server, "job");
            assert!(ttl > 0 && ttl <= 500, "{client} {mode}: counter TTL {ttl}");
            // Expired, the counter starts again at the server's time.
            until_expired(server, "job").await;
            let next = token_of(&on, "job").await;
            assert!(
                next > last,
                "{client} {mode}: {next} after {last}, across expiry"
            );
            last = next;
            // Turned off while the counter lives: it counts on, and no
            // longer expires.
            assert_eq!(token_of(&off, "job").await, last + 1, "{client} {mode}");
            assert_eq!(counter_ttl(server, "job"), -1, "{client} {mode}");
        }
    });
}

/// A lease renewed for longer than `fencing_counter_ttl` keeps its counter:
/// status shows its token, renewals and (reentrant) re-entries keep working,
/// and the next holder's token is larger.
///
/// Rather than wait out ten leases, the test brings the counter's end close
/// by hand (`PEXPIRE` to just past the lease's own), the state a counter is
/// in after ten leases of renewals; a lease of 1 s then survives a loaded
/// host's stalls, where a 150 ms one renewed every 50 ms did not.
#[test]
fn a_counter_outlives_the_lease_it_fences() {
    lock_testkit::on_every_client(async |server, client| {
        for mode in MODES {
            flush(server);
            let settings = [
                ("DISTLOCK_TTL", "1s"),
                ("DISTLOCK_FENCING_COUNTER_TTL", "10s"),
            ];
            let locks = connect(&common::config(mode, [server], client, &settings)).await;
            let guard = taken(&locks, "long").await;
            let token = guard.fencing_token();
            let lease_left = server
                .admin(&["PTTL", "lock:{long}"])
                .expect("PTTL")
                .as_int()
                .expect("a TTL");
            assert!(
                lease_left > 0,
                "{client} {mode}: the lease's PTTL {lease_left}"
            );
            let counter_left = (lease_left + 50).to_string();
            server
                .admin(&["PEXPIRE", "lock:{long}:fence", &counter_left])
                .expect("PEXPIRE");
            // Renewed every third of a second, well past the counter's
            // old end.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            assert!(
                counter_ttl(server, "long") > 0,
                "{client} {mode}: the counter expired under its lease"
            );
            assert!(guard.is_valid(), "{client} {mode}: the lease was lost");
            match LockState::from(locks.inspect("long").await.expect("inspect")) {
                LockState::Held { token: held, .. } => {
                    assert_eq!(held, token, "{client} {mode}: the holder's token")
                }
                other => panic!("{client} {mode}: {other:?}"),
            }
            if mode == "reentrant" {
                let inner = taken_as(&locks, "long", guard.owner()).await;
                assert_eq!(inner.fencing_token(), token, "{client} {mode}");
                inner.release().await.expect("release the inner hold");
            }
            guard.release().await.expect("release");
            let next = token_of(&locks, "long").await;
            assert!(
                Some(next) > token.map(|token| token.get()),
                "{client} {mode}: {next} after {token:?}"
            );
        }
    });
}

/// Near and above 2^53 tokens are exact (Lua numbers are doubles), with or
/// without a counter TTL, and a counter INCR would refuse is still refused
/// before anything is written.
#[test]
fn large_counters_stay_exact() {
    lock_testkit::on_every_client(async |server, client| {
        for (mode, counter_ttl) in MODES
            .iter()
            .flat_map(|mode| [(*mode, None), (*mode, Some("10m"))])
        {
            let on = [(
                "DISTLOCK_FENCING_COUNTER_TTL",
                counter_ttl.unwrap_or_default(),
            )];
            let vars = if counter_ttl.is_some() { &on[..] } else { &[] };
            let locks = connect(&common::config(mode, [server], client, vars)).await;
            for (counter, next) in [
                ("9007199254740990", 9_007_199_254_740_991_u64),
                ("9007199254740991", 9_007_199_254_740_992),
                ("9007199254740992", 9_007_199_254_740_993),
                ("9007199254740993", 9_007_199_254_740_994),
                ("9223372036854775806", 9_223_372_036_854_775_807),
            ] {
                flush(server);
                server
                    .admin(&["SET", "lock:{big}:fence", counter])
                    .expect("SET");
                let context = format!("{client} {mode} {counter_ttl:?} after {counter}");
                assert_eq!(token_of(&locks, "big").await, next, "{context}");
                let stored = server.admin(&["GET", "lock:{big}:fence"]).expect("GET");
                assert_eq!(
                    stored.as_text(),
                    Some(next.to_string().as_str()),
                    "{context}"
                );
                // Ahead of any time in µs: with a counter TTL it would
                // expire, and the time would then issue a lower token.
                // It is kept without one, whatever the option.
                let ttl = self::counter_ttl(server, "big");
                assert_eq!(ttl, -1, "{context}");
            }
            for foreign in ["9223372036854775807", "not-a-number", "-5", "1.5"] {
                flush(server);
                server
                    .admin(&["SET", "lock:{big}:fence", foreign])
                    .expect("SET");
                let result = locks.try_acquire("big").await;
                assert!(
                    matches!(result, Err(LockError::Corrupted { .. })),
                    "{client} {mode} {counter_ttl:?} {foreign}: {:?}",
                    result.map(|guard| guard.map(|guard| guard.fencing_token()))
                );
                assert_eq!(
                    keys_and_ttls(server),
                    vec![("lock:{big}:fence".to_owned(), -1)],
                    "{client} {mode} {foreign}: nothing was written"
                );
            }
        }
    });
}

#[test]
fn a_counter_ttl_must_cover_ten_leases() {
    let valid = |vars: &[(&str, &str)]| {
        Config::from_vars(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
    };
    for (ttl, counter_ttl, ok) in [
        ("30s", "5m", true),
        ("30s", "4m 59s", false),
        ("60ms", "600ms", true),
        ("60ms", "599ms", false),
        ("1s", "0s", false),
        ("1s", "3651days", false),
        ("1s", "1h", true),
    ] {
        let result = valid(&[
            ("DISTLOCK_TTL", ttl),
            ("DISTLOCK_NODE_TIMEOUT", "10ms"),
            ("DISTLOCK_FENCING_COUNTER_TTL", counter_ttl),
        ]);
        match (ok, result) {
            (true, Ok(config)) => assert!(
                format!("{config:?}").contains("fencing_counter_ttl: Some"),
                "{ttl} {counter_ttl}: {config:?}"
            ),
            (false, Err(LockError::InvalidConfig { field, reason })) => {
                assert_eq!(
                    field, "fencing_counter_ttl",
                    "{ttl} {counter_ttl}: {reason}"
                )
            }
            (_, other) => panic!("ttl {ttl}, counter {counter_ttl}: {other:?}"),
        }
    }
    let result = valid(&[("DISTLOCK_FENCING_COUNTER_TTL", "soon")]);
    assert!(
        matches!(&result, Err(LockError::InvalidConfig { field, .. }) if field == "DISTLOCK_FENCING_COUNTER_TTL"),
        "{result:?}"
    );
}

/// A counter ahead of the server's clock (seeded, or left by a clock set
/// back) is never given a TTL: after it expired, the next token, the time,
/// would be lower than the last. A later grant that finds the clock past it
/// gives it the TTL again.
#[test]
fn a_counter_ahead_of_the_clock_never_expires() {
    lock_testkit::on_every_client(async |server, client| {
        flush(server);
        let ahead = "5000000000000000"; // the year 2128, in µs
        server
            .admin(&["SET", "lock:{ahead}:fence", ahead])
            .expect("SET");
        let config = Config::from_vars([
            (
                "DISTLOCK_NODES".to_owned(),
                server.url().expose().to_owned(),
            ),
            ("DISTLOCK_CLIENT".to_owned(), client.to_string()),
            ("DISTLOCK_TTL".to_owned(), "1s".to_owned()),
            ("DISTLOCK_FENCING_COUNTER_TTL".to_owned(), "10s".to_owned()),
        ])
        .expect("config");
        let locks = distlock::connect(&config).await.expect("connect");
        let guard = taken(&locks, "ahead").await;
        assert_eq!(
            guard.fencing_token().map(|token| token.get()),
            Some(5_000_000_000_000_001),
            "{client}"
        );
        guard.release().await.expect("release");
        assert_eq!(
            counter_ttl(server, "ahead"),
            -1,
            "{client}: kept without a TTL"
        );
    });
}

/// A user whose ACL refuses `TIME` gets a permission error naming `+time`
/// from a grant that needs the server's clock (`holder_info`,
/// `fencing_counter_ttl`), and nothing is written: the clock is read before
/// the lock is.
#[test]
fn a_refused_clock_writes_nothing() {
    lock_testkit::run(async {
        let server = RedisServer::start().expect("start");
        server
            .admin(&[
                "ACL",
                "SETUSER",
                "notime",
                "on",
                ">pw",
                "~lock:*",
                "&lock:*",
                "-@all",
                "+@connection",
                "+@scripting",
                "+@string",
                "+@hash",
                "+@keyspace",
            ])
            .expect("ACL SETUSER");
        let url = format!("redis://notime:pw@127.0.0.1:{}", server.port());
        for client in ClientKind::compiled() {
            for strategy in ["single", "reentrant"] {
                for option in [
                    ("DISTLOCK_HOLDER_INFO", "true"),
                    ("DISTLOCK_FENCING_COUNTER_TTL", "10m"),
                ] {
                    flush(&server);
                    let config = Config::from_vars([
                        ("DISTLOCK_NODES".to_owned(), url.clone()),
                        ("DISTLOCK_CLIENT".to_owned(), client.to_string()),
                        ("DISTLOCK_STRATEGY".to_owned(), strategy.to_owned()),
                        ("DISTLOCK_TTL".to_owned(), "5s".to_owned()),
                        (option.0.to_owned(), option.1.to_owned()),
                    ])
                    .expect("config");
                    let locks = distlock::connect(&config).await.expect("connect");
                    let context = format!("{client} {strategy} {}", option.0);
                    // Named as the ACL rule to add, not as the script line
                    // Redis names (`@user_script:77`).
                    match locks.try_acquire("clockless").await {
                        Err(distlock::LockError::PermissionDenied { needs, .. }) => assert_eq!(
                            needs,
                            distlock::error::AclNeed::Command("time".to_owned()),
                            "{context}"
                        ),
                        other => panic!("{context}: TIME is refused, got {other:?}"),
                    }
                    let exists = server
                        .admin(&["EXISTS", "lock:{clockless}"])
                        .expect("EXISTS")
                        .as_int();
                    assert_eq!(exists, Some(0), "{context}: the lock was written");
                }
            }
        }
    });
}
