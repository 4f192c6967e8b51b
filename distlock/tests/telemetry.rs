//! Metrics (feature `metrics`) and tracing spans, checked against a scripted
//! sequence on real servers, for every strategy on both clients.

#![cfg(all(feature = "metrics", feature = "redis", feature = "fred"))]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use distlock::{ClientKind, LockError, LossReason};
use lock_testkit::contract::held_by_another;
use lock_testkit::contract::taken;
use lock_testkit::contract::waiting_up_to;
use lock_testkit::RedisServer;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

mod common;

/// A TTL short enough to renew within the test, and one lock name as a label.
const FAST_AND_LABELLED: [(&str, &str); 2] = [
    ("DISTLOCK_TTL", "300ms"),
    ("DISTLOCK_METRICS_LOCK_NAMES", "1"),
];

/// The process's one metrics recorder (a recorder is installed once).
/// Held by each test for its whole run: the metrics recorder is the
/// process's, and one test's acquires must not land in the other's counts.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
}

fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        snapshotter
    })
}

/// A metric's labels, as (key, value) pairs.
type LabelPairs = Vec<(String, String)>;

/// One snapshot (which resets every value): kind, name, labels and value.
struct Snapshot(Vec<(MetricKind, String, LabelPairs, DebugValue)>);

impl Snapshot {
    fn take() -> Self {
        Snapshot(
            snapshotter()
                .snapshot()
                .into_vec()
                .into_iter()
                .map(|(key, _, _, value)| {
                    let (kind, key) = key.into_parts();
                    let labels = key
                        .labels()
                        .map(|label| (label.key().to_owned(), label.value().to_owned()))
                        .collect();
                    (kind, key.name().to_owned(), labels, value)
                })
                .collect(),
        )
    }

    /// The values of `name` whose labels include every pair of `labels`.
    fn values<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a DebugValue> + 'a {
        self.0.iter().filter_map(move |(_, metric, have, value)| {
            let matches = metric == name
                && labels
                    .iter()
                    .all(|(k, v)| have.iter().any(|(hk, hv)| hk == k && hv == v));
            matches.then_some(value)
        })
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.values(name, labels)
            .map(|value| match value {
                DebugValue::Counter(count) => *count,
                other => panic!("{name} is not a counter: {other:?}"),
            })
            .sum()
    }

    fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.values(name, labels)
            .map(|value| match value {
                DebugValue::Gauge(level) => level.into_inner(),
                other => panic!("{name} is not a gauge: {other:?}"),
            })
            .sum()
    }

    fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.values(name, labels)
            .flat_map(|value| match value {
                DebugValue::Histogram(values) => {
                    values.iter().map(|v| v.into_inner()).collect::<Vec<_>>()
                }
                other => panic!("{name} is not a histogram: {other:?}"),
            })
            .collect()
    }
}

/// Acquired, busy and timed-out calls; renewals; a release; a name past the
/// label limit; a lease lost to a deleted key: each counted where the docs
/// say, with the strategy and (within the limit) the lock name as labels.
async fn scripted_sequence(strategy: &str, servers: &[RedisServer], client: ClientKind) {
    let locks = distlock::connect(&common::config(
        strategy,
        servers,
        client,
        &FAST_AND_LABELLED,
    ))
    .await
    .expect("connect");
    let _ = Snapshot::take();
    let on = |extra: &[(&'static str, &'static str)]| {
        let mut labels = vec![("strategy", strategy)];
        labels.extend_from_slice(extra);
        labels
    };

    let first = taken(&locks, "first").await;
    assert!(held_by_another(&locks, "first").await);
    assert!(matches!(
        locks
            .acquire_with("first", &waiting_up_to(Duration::from_millis(60)))
            .await,
        Err(LockError::NotAcquired { .. })
    ));
    let calls = Snapshot::take();
    let first_label = [("lock", "first")];
    assert_eq!(
        calls.counter(
            "distlock_acquisitions_total",
            &on(&[("outcome", "acquired"), first_label[0]])
        ),
        1
    );
    assert_eq!(
        calls.counter("distlock_acquisitions_total", &on(&[("outcome", "busy")])),
        1
    );
    assert_eq!(
        calls.counter(
            "distlock_acquisitions_total",
            &on(&[("outcome", "timeout")])
        ),
        1
    );
    let attempts = calls.histogram("distlock_acquire_attempts", &on(&[]));
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    assert!(
        attempts.iter().any(|&n| n > 1.0),
        "the wait tried again: {attempts:?}"
    );
    let waits = calls.histogram("distlock_acquire_wait_seconds", &on(&[]));
    assert!(
        waits.iter().any(|&s| s >= 0.05),
        "the wait lasted its 60 ms: {waits:?}"
    );
    assert_eq!(calls.gauge("distlock_leases_held", &on(&first_label)), 1.0);

    // A TTL of 300 ms renews every 100 ms.
    tokio::time::sleep(Duration::from_millis(450)).await;
    let renewals = Snapshot::take();
    let renewed = renewals.counter(
        "distlock_renewals_total",
        &on(&[("outcome", "renewed"), first_label[0]]),
    );
    assert!(renewed >= 3, "{renewed} renewals in 450 ms");

    first.release().await.expect("release");
    // Past the one-name limit: labelled `other`.
    let second = taken(&locks, "second").await;
    let key = locks.key("second").expect("key");
    for server in servers {
        server.admin(&["DEL", key.redis_key()]).expect("DEL");
    }
    let reason = tokio::time::timeout(Duration::from_secs(2), second.lost())
        .await
        .expect("the loss is reported");
    assert_eq!(reason, Some(LossReason::NotHeld));
    let end = Snapshot::take();
    let other = [("lock", "other")];
    assert_eq!(
        end.counter(
            "distlock_acquisitions_total",
            &on(&[("outcome", "acquired"), other[0]])
        ),
        1
    );
    assert_eq!(
        end.counter("distlock_acquisitions_total", &on(&[("lock", "second")])),
        0
    );
    assert_eq!(
        end.counter(
            "distlock_renewals_total",
            &on(&[("outcome", "not_held"), other[0]])
        ),
        1
    );
    assert_eq!(
        end.counter(
            "distlock_leases_lost_total",
            &on(&[("reason", "not_held"), other[0]])
        ),
        1
    );
    // Since the last snapshot: `first` ended, `second` began and ended.
    assert_eq!(end.gauge("distlock_leases_held", &on(&first_label)), -1.0);
    assert_eq!(end.gauge("distlock_leases_held", &on(&other)), 0.0);
    let held = end.histogram("distlock_hold_seconds", &on(&[]));
    assert_eq!(held.len(), 2, "{held:?}");
    assert!(
        held.iter().any(|&s| s >= 0.45),
        "first was held 450 ms: {held:?}"
    );
    drop(second);
}

#[test]
fn metrics_follow_a_scripted_sequence_on_every_strategy_and_client() {
    let _alone = one_at_a_time();
    lock_testkit::run(async {
        let single = [RedisServer::start().expect("start")];
        let three: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start().expect("start"))
            .collect();
        for client in [ClientKind::Redis, ClientKind::Fred] {
            scripted_sequence("single", &single, client).await;
            scripted_sequence("reentrant", &single, client).await;
            scripted_sequence("redlock", &three, client).await;
        }
    });
}

/// A span's fields, as text.
type SpanFields = HashMap<String, String>;

/// The spans seen, by name, with their fields.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<(String, SpanFields)>>>);

struct FieldsOf<'a>(&'a mut HashMap<String, String>);

impl Visit for FieldsOf<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// Where in `Spans` each live span is.
struct SpanIndex(usize);

impl<S> Layer<S> for Spans
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        attrs.record(&mut FieldsOf(&mut fields));
        let mut spans = self.0.lock().expect("not poisoned");
        spans.push((attrs.metadata().name().to_owned(), fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanIndex(spans.len() - 1));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let extensions = span.extensions();
        let Some(SpanIndex(index)) = extensions.get::<SpanIndex>() else {
            return;
        };
        let mut spans = self.0.lock().expect("not poisoned");
        values.record(&mut FieldsOf(&mut spans[*index].1));
    }
}

/// Acquire, extend (the watchdog's renewals) and release each have a span
/// with the key, strategy, outcome, fencing token and timings, and no span
/// carries the owner token.
#[test]
fn spans_carry_the_outcome_and_never_the_owner() {
    let _alone = one_at_a_time();
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let server = RedisServer::start().expect("start");
    let mut owners = Vec::new();
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            for client in [ClientKind::Redis, ClientKind::Fred] {
                let mut config = common::config("single", [&server], client, &FAST_AND_LABELLED);
                config.lock.metrics_lock_names = 0;
                let locks = distlock::connect(&config).await.expect("connect");
                let guard = locks.acquire("spanned").await.expect("acquire");
                owners.push(guard.owner().expose().to_owned());
                tokio::time::sleep(Duration::from_millis(250)).await;
                guard.release().await.expect("release");
            }
        });
    });
    let spans = spans.0.lock().expect("not poisoned");
    let named = |name: &str| -> Vec<&HashMap<String, String>> {
        spans
            .iter()
            .filter(|(span, _)| span == name)
            .map(|(_, fields)| fields)
            .collect()
    };
    let acquires = named("acquire");
    assert_eq!(acquires.len(), 2, "one per acquire call: {acquires:?}");
    for fields in &acquires {
        assert_eq!(fields.get("key").map(String::as_str), Some("spanned"));
        assert_eq!(fields.get("strategy").map(String::as_str), Some("single"));
        assert_eq!(fields.get("outcome").map(String::as_str), Some("acquired"));
        assert_eq!(fields.get("attempts").map(String::as_str), Some("1"));
        assert!(
            fields.contains_key("fencing_token") && fields.contains_key("waited_us"),
            "{fields:?}"
        );
    }
    let extends = named("extend");
    assert!(
        extends.len() >= 4,
        "the watchdog renewed twice per lease: {extends:?}"
    );
    assert!(
        extends
            .iter()
            .all(|fields| fields.get("outcome").map(String::as_str) == Some("extended")),
        "{extends:?}"
    );
    let releases = named("release");
    assert_eq!(releases.len(), 2, "{releases:?}");
    assert!(
        releases
            .iter()
            .all(|fields| fields.get("outcome").map(String::as_str) == Some("released")),
        "{releases:?}"
    );
    for (name, fields) in spans.iter() {
        for value in fields.values() {
            for owner in &owners {
                assert!(
                    !value.contains(owner.as_str()),
                    "span {name} carries the owner token"
                );
            }
        }
    }
}
