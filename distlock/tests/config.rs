//! Config parsing, good and bad, for every field, from TOML and from the
//! environment.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use distlock::config::{ConfigWarning, Strategy};
use distlock::{ClientKind, Config, LockError};

fn field_of(result: Result<Config, LockError>) -> String {
    match result {
        Err(LockError::InvalidConfig { field, .. }) => field,
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

/// Asserts that each set of variables is refused as a bad config that
/// names the field beside it.
fn each_names_its_field(cases: &[(&[(&str, &str)], &str)]) {
    for (vars, field) in cases {
        assert_eq!(
            field_of(Config::from_vars(vars.iter().copied())),
            *field,
            "{vars:?}"
        );
    }
}

#[test]
fn every_field_parses_from_toml() {
    let config = Config::from_toml_str(
        r#"
        strategy = "redlock"
        nodes = ["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://:pw@127.0.0.1:7003/2"]
        client = "redis"
        ttl = "12s"
        key_prefix = "jobs:"
        wait_timeout = "3s"
        wait_mode = "poll"
        fair = true
        fencing = false
        connect_timeout = "1s"
        command_timeout = "500ms"
        node_timeout = "20ms"
        clock_drift_factor = 0.02
        [retry]
        initial_delay = "5ms"
        max_delay = "100ms"
        multiplier = 1.5
        [watchdog]
        enabled = false
        interval = "4s"
        "#,
    )
    .expect("valid config");
    assert_eq!(config.strategy(), Strategy::Redlock);
    let lock = &config.lock;
    assert_eq!(lock.nodes.len(), 3);
    assert_eq!(lock.client, ClientKind::Redis);
    assert_eq!(lock.ttl, Duration::from_secs(12));
    assert_eq!(lock.key_prefix, "jobs:");
    assert_eq!(lock.wait_timeout, Duration::from_secs(3));
    assert_eq!(lock.wait_mode, distlock::config::WaitMode::Poll);
    assert!(lock.fair);
    assert!(!lock.fencing);
    assert_eq!(lock.connect_timeout, Duration::from_secs(1));
    assert_eq!(lock.command_timeout, Duration::from_millis(500));
    assert_eq!(lock.node_timeout, Duration::from_millis(20));
    assert_eq!(lock.clock_drift_factor, 0.02);
    assert_eq!(lock.retry.initial_delay, Duration::from_millis(5));
    assert_eq!(lock.retry.max_delay, Duration::from_millis(100));
    assert_eq!(lock.retry.multiplier, 1.5);
    assert!(!lock.watchdog.enabled);
    assert_eq!(lock.watchdog.interval, Some(Duration::from_secs(4)));
    assert!(
        !format!("{config:?}").contains(":pw@"),
        "Debug hides passwords"
    );
}

#[test]
fn bad_toml_names_the_field() {
    let cases = [
        ("strategy = \"paxos\"", "strategy"),
        ("strategy = 3", "strategy"),
        ("nodes = [\"http://x\"]", "nodes[0]"),
        ("nodes = []", "nodes"),
        (
            "nodes = [\"redis://a\", \"redis://a\"]\nstrategy = \"redlock\"",
            "nodes[1]",
        ),
        (
            "nodes = [\"redis://a\", \"redis://b\"]\nstrategy = \"single\"",
            "nodes",
        ),
        ("client = \"hiredis\"", "client"),
        ("ttl = \"0s\"", "ttl"),
        ("ttl = \"soon\"", "ttl"),
        ("ttl = \"40days\"", "ttl"),
        ("key_prefix = \"{x}\"", "key_prefix"),
        ("wait_timeout = 5", "wait_timeout"),
        ("wait_mode = \"spin\"", "wait_mode"),
        ("fair = \"yes\"", "fair"),
        ("fencing = \"off\"", "fencing"),
        ("connect_timeout = \"0s\"", "connect_timeout"),
        ("command_timeout = \"1h\"", "command_timeout"),
        // Redlock's alone: the other strategies never wait on one node of many.
        (
            "strategy = \"redlock\"\nnodes = [\"redis://a\", \"redis://b\", \"redis://c\"]\nnode_timeout = \"1m\"",
            "node_timeout",
        ),
        (
            "strategy = \"redlock\"\nnodes = [\"redis://a\", \"redis://b\", \"redis://c\"]\nttl = \"20ms\"",
            "ttl",
        ),
        (
            "nodes = [\"redis://a\", \"redis://b\"]",
            "strategy",
        ),
        (
            "strategy = \"redlock\"\nnodes = [\"redis://a\", \"redis://b\"]",
            "nodes",
        ),
        ("clock_drift_factor = 0.7", "clock_drift_factor"),
        ("[retry]\ninitial_delay = \"0s\"", "retry.initial_delay"),
        ("[retry]\nmax_delay = \"1ms\"", "retry.max_delay"),
        ("[retry]\nmultiplier = 0.5", "retry.multiplier"),
        ("[watchdog]\ninterval = \"1m\"", "watchdog.interval"),
        ("[watchdog]\nenabled = \"yes\"", "watchdog.enabled"),
        ("tll = \"1s\"", "tll"),
    ];
    for (text, field) in cases {
        assert_eq!(
            field_of(Config::from_toml_str(text)),
            field,
            "config: {text}"
        );
    }
    assert_eq!(
        field_of(Config::from_toml_str("ttl = ")),
        "config",
        "malformed TOML"
    );
}

#[test]
fn one_node_from_the_environment_is_single_node() {
    let config = Config::from_vars([
        ("DISTLOCK_NODES", "redis://127.0.0.1:6379"),
        ("PATH", "/bin"),
    ])
    .expect("valid");
    assert_eq!(config.strategy(), Strategy::Single);
    assert_eq!(config.lock.nodes.len(), 1);
}

#[test]
fn every_field_parses_from_the_environment() {
    let config = Config::from_vars([
        (
            "DISTLOCK_NODES",
            "redis://127.0.0.1:6379, redis://127.0.0.1:6380,redis://127.0.0.1:6381",
        ),
        ("DISTLOCK_STRATEGY", "redlock"),
        ("DISTLOCK_CLIENT", "fred"),
        ("DISTLOCK_TTL", "9s"),
        ("DISTLOCK_KEY_PREFIX", "123"),
        ("DISTLOCK_WAIT_TIMEOUT", "2s"),
        ("DISTLOCK_WAIT_MODE", "poll"),
        ("DISTLOCK_FENCING", "false"),
        ("DISTLOCK_CONNECT_TIMEOUT", "1s"),
        ("DISTLOCK_COMMAND_TIMEOUT", "300ms"),
        ("DISTLOCK_NODE_TIMEOUT", "30ms"),
        ("DISTLOCK_CLOCK_DRIFT_FACTOR", "0.05"),
        ("DISTLOCK_RETRY__INITIAL_DELAY", "2ms"),
        ("DISTLOCK_RETRY__MAX_DELAY", "50ms"),
        ("DISTLOCK_RETRY__MULTIPLIER", "3"),
        ("DISTLOCK_WATCHDOG__ENABLED", "false"),
        ("DISTLOCK_WATCHDOG__INTERVAL", "3s"),
    ])
    .expect("valid");
    assert_eq!(config.strategy(), Strategy::Redlock);
    assert_eq!(config.lock.nodes.len(), 3);
    assert_eq!(config.lock.client, ClientKind::Fred);
    assert_eq!(config.lock.ttl, Duration::from_secs(9));
    assert_eq!(config.lock.key_prefix, "123");
    assert_eq!(config.lock.wait_mode, distlock::config::WaitMode::Poll);
    assert!(!config.lock.fencing);
    assert_eq!(config.lock.node_timeout, Duration::from_millis(30));
    assert_eq!(config.lock.clock_drift_factor, 0.05);
    assert_eq!(config.lock.retry.multiplier, 3.0);
    assert!(!config.lock.watchdog.enabled);
    assert_eq!(config.lock.watchdog.interval, Some(Duration::from_secs(3)));
}

#[test]
fn bad_environment_names_the_variable_or_field() {
    let cases: [(&[(&str, &str)], &str); 6] = [
        (&[("DISTLOCK_STRATEGY", "paxos")], "DISTLOCK_STRATEGY"),
        (&[("DISTLOCK_FENCING", "off")], "DISTLOCK_FENCING"),
        (
            &[("DISTLOCK_WATCHDOG__ENABLED", "maybe")],
            "DISTLOCK_WATCHDOG__ENABLED",
        ),
        (
            &[("DISTLOCK_CLOCK_DRIFT_FACTOR", "lots")],
            "DISTLOCK_CLOCK_DRIFT_FACTOR",
        ),
        (&[("DISTLOCK_NODES", "redis://h:0")], "nodes[0]"),
        (&[("DISTLOCK_TTL", "0ms")], "ttl"),
    ];
    each_names_its_field(&cases);
}

#[test]
fn secrets_in_node_urls_never_reach_an_error() {
    let urls = [
        "redis://us3r:s3cr3t/h1dd3n@host",
        "redis://us3r:s3cr3t#h1dd3n@host:6379/0",
        "redis://us3r:s3cr3t?h1dd3n@host",
        "redis://us3r:s3cr3t@h1dd3n@",
        "redis://us3r:s3cr3t@host:h1dd3n",
        "redis://us3r:s3cr3t@host/h1dd3n",
        "redis://us3r:s3cr3t",
    ];
    let mut errors = Vec::new();
    for url in urls {
        errors.push(Config::from_vars([("DISTLOCK_NODES", url)]).expect_err(url));
        errors.push(Config::from_toml_str(&format!("nodes = [{url:?}]")).expect_err(url));
        // A string where a list belongs: serde would quote the value.
        errors.push(Config::from_toml_str(&format!("nodes = {url:?}")).expect_err(url));
        // A URL pasted into the wrong field: no value is quoted back.
        for misplaced in [
            format!("[retry]\nmax_delay = {url:?}"),
            format!("client = {url:?}"),
            format!("strategy = {url:?}"),
            format!("wait_mode = {url:?}"),
            format!("[watchdog]\nenabled = {url:?}"),
        ] {
            errors.push(Config::from_toml_str(&misplaced).expect_err(&misplaced));
        }
        for name in [
            "DISTLOCK_STRATEGY",
            "DISTLOCK_CLIENT",
            "DISTLOCK_TTL",
            "DISTLOCK_FAIR",
            "DISTLOCK_CLOCK_DRIFT_FACTOR",
        ] {
            errors.push(Config::from_vars([(name, url)]).expect_err(name));
        }
    }
    for err in errors {
        for text in [err.to_string(), format!("{err:?}")] {
            for secret in ["us3r", "s3cr3t", "h1dd3n"] {
                assert!(!text.contains(secret), "`{secret}` leaks: {text}");
            }
        }
    }
}

/// Runs `read` with a tracing subscriber on this thread and returns what it
/// logged at `warn` and above.
fn warnings_of<T>(read: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("sink").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    use tracing_subscriber::util::SubscriberInitExt;
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let value = {
        let _default = subscriber.set_default();
        read()
    };
    let logged = String::from_utf8_lossy(&sink.0.lock().expect("sink")).into_owned();
    (value, logged)
}

#[test]
fn variables_of_the_command_and_its_jobs_are_not_config() {
    let (config, warnings) = warnings_of(|| {
        Config::from_vars([
            ("DISTLOCK_NODES", "redis://127.0.0.1:6379"),
            ("DISTLOCK_LOG", "debug"),
            ("DISTLOCK_KEY", "nightly"),
            ("DISTLOCK_FENCING_TOKEN", "42"),
            ("DISTLOCK_OWNER", "someone"),
            ("DISTLOCK_HOME", "/opt/distlock"),
        ])
    });
    let config = config.expect("variables that are not fields are ignored");
    assert_eq!(config.lock.nodes.len(), 1);
    assert_eq!(config.lock.ttl, Duration::from_secs(30));
    assert!(
        warnings.is_empty(),
        "nothing here looks misspelt: {warnings}"
    );
}

#[test]
fn a_misspelt_variable_is_ignored_with_a_warning() {
    let cases = [
        ("DISTLOCK_TLL", "1s", "DISTLOCK_TTL"),
        ("DISTLOCK_NODE", "redis://h", "DISTLOCK_NODES"),
        (
            "DISTLOCK_RETRY_MAX_DELAY",
            "1s",
            "DISTLOCK_RETRY__MAX_DELAY",
        ),
        (
            "DISTLOCK_WATCHDOG_INTERVAL",
            "1s",
            "DISTLOCK_WATCHDOG__INTERVAL",
        ),
        ("DISTLOCK_CONECT_TIMEOUT", "1s", "DISTLOCK_CONNECT_TIMEOUT"),
        ("DISTLOCK_WATCHDOG", "false", "DISTLOCK_WATCHDOG__ENABLED"),
        ("DISTLOCK_RETRY", "1s", "DISTLOCK_RETRY__"),
        ("DISTLOCK_STRATEGY__NAME", "single", "DISTLOCK_STRATEGY"),
    ];
    for (name, value, meant) in cases {
        let (config, warnings) = warnings_of(|| Config::from_vars([(name, value)]));
        let config = config.unwrap_or_else(|err| panic!("{name} must be ignored, not {err}"));
        assert_eq!(config.lock.ttl, Duration::from_secs(30), "{name}");
        assert!(
            warnings.contains("WARN") && warnings.contains(name) && warnings.contains(meant),
            "{name} should be named, with {meant}, in a warning: {warnings:?}"
        );
    }
}

#[test]
fn config_variables_are_read_in_any_case_but_only_with_the_prefix() {
    let config = Config::from_vars([
        ("DISTLOCK_TTL", "7s"),
        ("DISTLOCK_watchdog__Interval", "1s"),
        ("distlock_key_prefix", "ignored:"),
    ])
    .expect("valid");
    assert_eq!(config.lock.ttl, Duration::from_secs(7));
    assert_eq!(config.lock.watchdog.interval, Some(Duration::from_secs(1)));
    assert_eq!(config.lock.key_prefix, "lock:");
}

#[test]
#[cfg(feature = "tls")] // `rediss://` nodes need it
fn topology_fields_parse_from_toml_and_the_environment() {
    let from_toml = Config::from_toml_str(
        r#"
        topology = "sentinel"
        sentinel_service = "mymaster"
        nodes = ["rediss://locker:pw@10.0.0.1:26379", "rediss://locker:pw@10.0.0.2:26379"]
        sentinel_auth = { password = "sentinel-secret" }
        replicas = { count = 1, timeout = "40ms" }
        [tls]
        ca_file = "/etc/redis/ca.crt"
        cert_file = "/etc/redis/client.crt"
        key_file = "/etc/redis/client.key"
        "#,
    )
    .expect("valid config");
    let from_env = Config::from_vars([
        ("DISTLOCK_TOPOLOGY", "sentinel"),
        ("DISTLOCK_SENTINEL_SERVICE", "mymaster"),
        (
            "DISTLOCK_NODES",
            "rediss://locker:pw@10.0.0.1:26379,rediss://locker:pw@10.0.0.2:26379",
        ),
        ("DISTLOCK_SENTINEL_AUTH__PASSWORD", "sentinel-secret"),
        ("DISTLOCK_REPLICAS__COUNT", "1"),
        ("DISTLOCK_REPLICAS__TIMEOUT", "40ms"),
        ("DISTLOCK_TLS__CA_FILE", "/etc/redis/ca.crt"),
        ("DISTLOCK_TLS__CERT_FILE", "/etc/redis/client.crt"),
        ("DISTLOCK_TLS__KEY_FILE", "/etc/redis/client.key"),
    ])
    .expect("valid environment");
    for config in [from_toml, from_env] {
        let lock = &config.lock;
        assert_eq!(
            config.strategy(),
            Strategy::Single,
            "a sentinel group is one deployment"
        );
        assert_eq!(lock.topology, distlock::topology::Topology::Sentinel);
        assert_eq!(lock.sentinel_service.as_deref(), Some("mymaster"));
        assert_eq!(lock.replicas.count, 1);
        assert_eq!(lock.replicas.timeout, Duration::from_millis(40));
        assert_eq!(
            lock.tls.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/redis/ca.crt"))
        );
        let endpoint = lock.endpoint().expect("one endpoint");
        assert_eq!(endpoint.nodes.len(), 2);
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("sentinel-secret") && !shown.contains(":pw@"),
            "Debug hides secrets: {shown}"
        );
    }
    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[
                ("DISTLOCK_TOPOLOGY", "sentinel"),
                ("DISTLOCK_NODES", "redis://h:26379"),
            ],
            "sentinel_service",
        ),
        (&[("DISTLOCK_TOPOLOGY", "mesh")], "DISTLOCK_TOPOLOGY"),
        (
            &[("DISTLOCK_REPLICAS__COUNT", "one")],
            "DISTLOCK_REPLICAS__COUNT",
        ),
        (&[("DISTLOCK_TLS__CA_FILE", "/etc/ca.crt")], "tls"),
    ];
    each_names_its_field(&cases);
}

/// A library user without a tracing subscriber learns of a misspelt
/// variable too: `from_vars_with_warnings` returns what it ignored and
/// what was probably meant, and nothing for variables that are not config.
#[test]
fn a_misspelt_variable_is_returned_as_a_warning() {
    let (config, warnings) = Config::from_vars_with_warnings([
        ("DISTLOCK_NODES", "redis://127.0.0.1:6379"),
        ("DISTLOCK_TLL", "1s"),
        ("DISTLOCK_HOME", "/opt/distlock"),
        ("DISTLOCK_KEY", "nightly"),
    ])
    .expect("a misspelt variable is ignored");
    assert_eq!(config.lock.ttl, Duration::from_secs(30));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    match &warnings[0] {
        ConfigWarning::MisspeltVariable { variable, meant } => {
            assert_eq!(variable, "DISTLOCK_TLL");
            assert_eq!(meant, &["DISTLOCK_TTL".to_owned()]);
        }
        other => panic!("{other:?}"),
    }
    let said = warnings[0].to_string();
    assert!(
        said.contains("DISTLOCK_TLL") && said.contains("did you mean DISTLOCK_TTL?"),
        "{said}"
    );
    let (_, none) = Config::from_vars_with_warnings([("DISTLOCK_TTL", "5s")]).expect("valid");
    assert!(none.is_empty(), "{none:?}");
}

/// Redlock over one node is refused, as two nodes are, naming `nodes`: it
/// is a single-node lock without fencing tokens, paid for with Redlock's
/// rounds.
#[test]
fn redlock_over_one_node_is_refused() {
    let from_env = Config::from_vars([
        ("DISTLOCK_STRATEGY", "redlock"),
        ("DISTLOCK_NODES", "redis://127.0.0.1:6379"),
    ]);
    let from_toml =
        Config::from_toml_str("strategy = \"redlock\"\nnodes = [\"redis://127.0.0.1:6379\"]");
    for result in [from_env, from_toml] {
        match result {
            Err(LockError::InvalidConfig { field, reason }) => {
                assert_eq!(field, "nodes", "{reason}");
                assert!(reason.contains("single"), "{reason}");
            }
            other => panic!("Redlock over one node: {other:?}"),
        }
    }
}
