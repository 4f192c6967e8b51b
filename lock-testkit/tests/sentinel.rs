//! Redis Sentinel on real processes: the sentinels know the master, fail it
//! over on request, and replace it after a kill -9.

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use lock_testkit::{AdminReply, RedisServer, SentinelGroup};

fn role(server: &RedisServer) -> String {
    let info = server.info("replication").expect("INFO replication");
    info.lines()
        .find_map(|line| line.strip_prefix("role:"))
        .unwrap_or("?")
        .trim()
        .to_owned()
}

#[test]
fn sentinels_know_the_master_and_fail_it_over_on_request() {
    let started = Instant::now();
    let group = SentinelGroup::start("mymaster", 2, 3).expect("start a sentinel group");
    eprintln!(
        "master + 2 replicas + 3 sentinels settled after {:?}",
        started.elapsed()
    );
    assert_eq!(group.service_name(), "mymaster");
    assert_eq!(group.quorum(), 2);
    assert_eq!(group.sentinel_urls().len(), 3);
    assert_eq!(group.servers().len(), 3);
    let old = group.master_address().expect("master address");
    assert_eq!(old, ([127, 0, 0, 1], group.servers()[0].port()).into());
    let master = group.master().expect("master");
    assert_eq!(role(master), "master");
    // WAIT on the connection that wrote, or it proves nothing.
    let replies = master
        .admin_session(&[&["SET", "k", "v"], &["WAIT", "2", "2000"]])
        .expect("SET and WAIT");
    assert_eq!(replies[0], AdminReply::Status("OK".into()));
    assert_eq!(replies[1].as_int(), Some(2));

    let started = Instant::now();
    let new = group.failover(Duration::from_secs(30)).expect("failover");
    eprintln!("SENTINEL FAILOVER took {:?}", started.elapsed());
    assert_ne!(new.port(), old.port());
    assert_eq!(group.master_address().expect("address").port(), new.port());
    assert_eq!(role(new), "master");
    assert_eq!(new.admin(&["GET", "k"]).expect("GET").as_text(), Some("v"));
    assert_eq!(
        group.servers()[0]
            .admin(&["SET", "k", "stale"])
            .expect("SET"),
        AdminReply::Status("OK".into()),
        "until a sentinel reconfigures it, the old master still takes writes"
    );

    let started = Instant::now();
    group
        .wait_until_settled(Duration::from_secs(30))
        .expect("the old master becomes a replica");
    eprintln!(
        "the old master was turned into a replica after {:?}",
        started.elapsed()
    );
    assert_eq!(role(&group.servers()[0]), "slave");

    let ports: Vec<u16> = group
        .sentinels()
        .iter()
        .map(|sentinel| sentinel.port())
        .chain(group.servers().iter().map(RedisServer::port))
        .collect();
    let dirs: Vec<_> = group
        .sentinels()
        .iter()
        .map(|sentinel| sentinel.dir().to_owned())
        .collect();
    assert!(dirs.iter().all(|dir| dir.join("sentinel.conf").is_file()));
    drop(group);
    for port in ports {
        let address = ([127, 0, 0, 1], port).into();
        assert!(
            std::net::TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_err(),
            "nothing listens on {port} after drop"
        );
    }
    assert!(
        dirs.iter().all(|dir| !dir.exists()),
        "sentinel directories are removed"
    );
}

#[test]
fn a_killed_master_is_replaced() {
    let mut group = SentinelGroup::start("mymaster", 1, 3).expect("start a sentinel group");
    let killed = group.kill_master().expect("kill -9 the master");
    let started = Instant::now();
    let new = group
        .wait_for_new_master(killed, Duration::from_secs(30))
        .expect("the sentinels promote the replica");
    eprintln!("failover after kill -9 took {:?}", started.elapsed());
    assert_eq!(new.port(), group.servers()[1].port());
    assert_eq!(role(new), "master");

    let index = group
        .servers()
        .iter()
        .position(|server| server.port() == killed.port())
        .expect("the killed server");
    group.servers_mut()[index]
        .restart()
        .expect("restart the old master");
    let started = Instant::now();
    group
        .wait_until_settled(Duration::from_secs(30))
        .expect("the old master comes back as a replica");
    eprintln!(
        "the restarted old master was reconfigured after {:?}",
        started.elapsed()
    );
    // On two busy cores the sentinels (1 s down-after) may fail over a
    // second time while the old master rejoins, and promote it again (seen
    // once in a full run). Either way it rejoined the group, settled: the
    // master if the sentinels name it, else a replica of the one they do.
    let named = group.master().expect("the settled group's master").port();
    let expected = if named == group.servers()[index].port() {
        eprintln!("a second failover made the old master the master again");
        "master"
    } else {
        "slave"
    };
    assert_eq!(role(&group.servers()[index]), expected);
}

#[test]
fn bad_groups_are_refused_with_a_reason() {
    for (builder, expected) in [
        (
            SentinelGroup::builder("mymaster").sentinels(0),
            "at least one sentinel",
        ),
        (SentinelGroup::builder("mymaster").quorum(4), "quorum"),
        (SentinelGroup::builder("my master"), "service name"),
    ] {
        let err = builder.start().expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains(expected), "{err}");
    }
}

#[test]
fn a_password_protected_group_settles_and_fails_over() {
    let group = SentinelGroup::builder("protected")
        .password("s3cret")
        .replicas(1)
        .sentinels(3)
        .start()
        .expect("start: replicas and sentinels authenticate");
    let master = group.master().expect("master");
    assert!(master.url().expose().contains("s3cret"));
    assert!(
        group
            .sentinel_urls()
            .iter()
            .all(|url| !url.expose().contains('@')),
        "sentinels have no password"
    );
    let old = master.port();
    let new = group.failover(Duration::from_secs(30)).expect("failover");
    assert_ne!(new.port(), old);
}
