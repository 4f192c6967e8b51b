//! Redis Cluster on real processes: start, serve keys from the right
//! master, fail a master over, and move a slot (in one step or two).

use std::time::{Duration, Instant};

use lock_testkit::{AdminReply, RedisCluster, RedisServer};

fn text(reply: AdminReply) -> String {
    match reply {
        AdminReply::Status(text) | AdminReply::Error(text) => text,
        AdminReply::Bulk(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        other => format!("{other:?}"),
    }
}

fn get(node: &RedisServer, key: &str) -> String {
    text(node.admin(&["GET", key]).expect("GET"))
}

#[test]
fn a_cluster_starts_healthy_and_serves_each_key_from_its_master() {
    let started = Instant::now();
    let cluster = RedisCluster::start(3, 1).expect("start a 3+3 cluster");
    eprintln!(
        "3 masters + 3 replicas healthy after {:?}",
        started.elapsed()
    );
    assert_eq!(cluster.nodes().len(), 6);
    assert_eq!(cluster.seed_urls().len(), 6);
    assert!(cluster.tls_seed_urls().is_empty());
    assert_eq!(cluster.masters().expect("masters").len(), 3);

    let key = "lock:{order-42}";
    let slot = cluster.key_slot(key).expect("slot");
    assert_eq!(
        cluster.key_slot("lock:{order-42}:fence").expect("slot"),
        slot
    );
    let master = cluster.master_of_key(key).expect("master");
    assert_eq!(
        master.port(),
        cluster.master_of_slot(slot).expect("master").port()
    );
    assert_eq!(text(master.admin(&["SET", key, "v"]).expect("SET")), "OK");
    assert_eq!(get(master, key), "v");
    for other in cluster.masters().expect("masters") {
        if other.port() != master.port() {
            assert_eq!(
                get(other, key),
                format!("MOVED {slot} 127.0.0.1:{}", master.port()),
                "other masters redirect to the announced 127.0.0.1 address"
            );
        }
    }

    let ports: Vec<u16> = cluster.nodes().iter().map(RedisServer::port).collect();
    let dirs: Vec<_> = cluster
        .nodes()
        .iter()
        .map(|node| node.dir().to_owned())
        .collect();
    drop(cluster);
    for (port, dir) in ports.iter().zip(&dirs) {
        let address = ([127, 0, 0, 1], *port).into();
        assert!(
            std::net::TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_err(),
            "nothing listens on {port} after drop"
        );
        assert!(!dir.exists(), "{} is removed", dir.display());
    }
}

#[test]
fn a_killed_master_is_replaced_by_its_replica() {
    let mut cluster = RedisCluster::start(3, 1).expect("start a 3+3 cluster");
    let key = "lock:{failover}";
    let slot = cluster.key_slot(key).expect("slot");
    let old = cluster.master_of_slot(slot).expect("master");
    // WAIT, on the connection that wrote: the write reached the replica
    // before the master dies.
    let replies = old
        .admin_session(&[&["SET", key, "kept"], &["WAIT", "1", "2000"]])
        .expect("SET and WAIT");
    assert_eq!(text(replies[0].clone()), "OK");
    assert_eq!(replies[1].as_int(), Some(1));

    let killed = cluster
        .kill_master_of_slot(slot)
        .expect("kill -9 the master");
    let started = Instant::now();
    let new = cluster
        .wait_for_failover(slot, Duration::from_secs(30))
        .expect("a replica takes over");
    eprintln!("failover took {:?}", started.elapsed());
    assert_ne!(new.port(), killed);
    assert_eq!(get(new, key), "kept", "the replica had the key");
    let new = new.port();

    let index = cluster
        .nodes()
        .iter()
        .position(|node| node.port() == killed)
        .expect("the killed node");
    cluster.nodes_mut()[index].restart().expect("restart");
    let started = Instant::now();
    cluster
        .wait_until_ok(Duration::from_secs(30))
        .expect("the old master rejoins as a replica");
    eprintln!("the old master rejoined after {:?}", started.elapsed());
    assert_eq!(
        cluster.master_of_slot(slot).expect("master").port(),
        new,
        "the restarted node does not take its slots back"
    );
    let replication = cluster.nodes()[index].info("replication").expect("INFO");
    assert!(
        replication.contains("role:slave") && replication.contains(&format!("master_port:{new}")),
        "the restarted node replicates from the new master: {replication}"
    );
}

#[test]
fn a_slot_moves_with_its_keys_in_two_steps() {
    let cluster = RedisCluster::start(3, 0).expect("start a 3-master cluster");
    let (kept, added) = ("lock:{moving}", "lock:{moving}:fence");
    let slot = cluster.key_slot(kept).expect("slot");
    let source = cluster.master_of_slot(slot).expect("master");
    assert_eq!(text(source.admin(&["SET", kept, "v"]).expect("SET")), "OK");
    let target = cluster
        .masters()
        .expect("masters")
        .into_iter()
        .find(|node| node.port() != source.port())
        .expect("another master");

    let migration = cluster
        .begin_slot_migration(slot, target)
        .expect("begin the migration");
    assert_eq!(migration.slot(), slot);
    assert_eq!(migration.source().port(), source.port());
    assert_eq!(
        get(source, kept),
        "v",
        "the source serves the keys it still has"
    );
    let ask = format!("ASK {slot} 127.0.0.1:{}", target.port());
    assert_eq!(
        get(source, added),
        ask,
        "and sends the others to the target"
    );
    assert_eq!(migration.move_keys().expect("MIGRATE"), 1);
    assert_eq!(
        get(source, kept),
        ask,
        "a moved key is asked for at the target"
    );
    let started = Instant::now();
    migration.finish().expect("finish the migration");
    eprintln!("SETSLOT NODE agreed after {:?}", started.elapsed());

    assert_eq!(
        cluster.master_of_slot(slot).expect("master").port(),
        target.port()
    );
    assert_eq!(get(target, kept), "v");
    assert_eq!(
        get(source, kept),
        format!("MOVED {slot} 127.0.0.1:{}", target.port())
    );
    cluster
        .wait_until_ok(Duration::from_secs(10))
        .expect("healthy after the move");

    // And back in one step.
    cluster.migrate_slot(slot, source).expect("move it back");
    assert_eq!(get(source, kept), "v");
    assert!(
        cluster.migrate_slot(slot, source).is_err(),
        "a slot cannot move to its own master"
    );
}

#[test]
fn fewer_than_three_masters_is_a_clear_error() {
    let err = RedisCluster::start(2, 1).expect_err("two masters");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("at least 3 masters"), "{err}");
}

#[test]
fn a_tls_cluster_tells_tls_clients_its_tls_ports() {
    let files = std::sync::Arc::new(lock_testkit::TlsFiles::generate().expect("certificates"));
    let cluster = RedisCluster::builder(3, 1)
        .tls(files.clone())
        .tls_auth_clients(false)
        .start()
        .expect("start a TLS cluster");
    assert_eq!(cluster.tls_seed_urls().len(), 6);
    let key = "lock:{tls}";
    let slot = cluster.key_slot(key).expect("slot");
    let master = cluster.master_of_slot(slot).expect("master");
    let other = cluster
        .masters()
        .expect("masters")
        .into_iter()
        .find(|node| node.port() != master.port())
        .expect("another master");
    let output = std::process::Command::new(lock_testkit::find_redis_cli().expect("redis-cli"))
        .args(["--tls", "-h", "127.0.0.1"])
        .args(["-p", &other.tls_port().expect("TLS port").to_string()])
        .arg("--cacert")
        .arg(files.ca_file())
        .args(["GET", key])
        .output()
        .expect("redis-cli");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(&format!(
            "MOVED {slot} 127.0.0.1:{}",
            master.tls_port().expect("TLS port")
        )),
        "a TLS client is sent to the TLS port: {output:?}"
    );
    assert_eq!(
        get(other, key),
        format!("MOVED {slot} 127.0.0.1:{}", master.port()),
        "a plain client to the plain port"
    );
    assert_eq!(text(master.admin(&["SET", key, "v"]).expect("SET")), "OK");
    let migrated = cluster.migrate_slot(slot, other);
    assert!(migrated.is_ok(), "MIGRATE over TLS: {migrated:?}");
    assert_eq!(get(other, key), "v");
}
