//! The `tracing` spans a subscriber (an OpenTelemetry one, say) sees: each rebalance, commit and
//! fetch as one span with its fields, against a real broker. Its own test binary: it installs a
//! process-wide subscriber that records every span.
mod support;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use support::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span as recorded: its name and its fields as text, by span id.
type Spans = Mutex<BTreeMap<u64, (String, BTreeMap<String, String>)>>;
static SPANS: Spans = Mutex::new(BTreeMap::new());

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

/// Records every span of lagless and what is recorded into it later.
struct Recorder;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let name = attrs.metadata().name();
        if !name.starts_with("lagless.") {
            return;
        }
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        SPANS
            .lock()
            .unwrap()
            .insert(id.into_u64(), (name.to_string(), fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some((_, fields)) = SPANS.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
}

fn spans_named(name: &str) -> Vec<BTreeMap<String, String>> {
    SPANS
        .lock()
        .unwrap()
        .values()
        .filter(|(n, _)| n == name)
        .map(|(_, f)| f.clone())
        .collect()
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_rebalance_a_commit_and_the_fetches_are_spans_with_their_fields() {
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Recorder))
        .expect("the only subscriber of this test binary");
    let bs = bootstrap();
    let topic = new_topic(&bs, "spans", 3);
    produce(&bs, &topic, 3, 10);
    let group = unique_name("spans-g");
    let c = group_member(&bs, &group, &[("enable.auto.commit", "false")]);
    c.subscribe(&[topic.as_str()], None).unwrap();
    let mut consumed = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while consumed < 30 {
        assert!(
            Instant::now() < deadline,
            "consumed {consumed} of 30 within 30 s"
        );
        consumed += c.poll(Duration::from_millis(200)).unwrap().len();
    }
    c.commit_sync(None, None).unwrap();

    let rebalances = spans_named("lagless.rebalance");
    let joined: Vec<_> = rebalances
        .iter()
        .filter(|f| f.contains_key("generation"))
        .collect();
    assert_eq!(joined.len(), 1, "one join: {rebalances:?}");
    let r = joined[0];
    assert_eq!(r["group"], group);
    assert_eq!(r["group_protocol"], "classic");
    assert_eq!(r["assigned_partitions"], "3");
    assert!(r["generation"].parse::<i32>().unwrap() >= 1, "{r:?}");
    assert!(!r["reason"].is_empty(), "{r:?}");

    let commits = spans_named("lagless.commit");
    assert_eq!(commits.len(), 1, "{commits:?}");
    let commit = &commits[0];
    assert_eq!(commit["group"], group);
    assert_eq!(commit["partitions"], "3");
    assert_eq!(commit["failed_partitions"], "0");
    assert!(!commit.contains_key("error"), "{commit:?}");

    let fetches = spans_named("lagless.fetch");
    assert!(!fetches.is_empty());
    for f in &fetches {
        assert!(f["broker"].parse::<i32>().unwrap() >= 0, "{f:?}");
        assert!(f["partitions"].parse::<usize>().unwrap() >= 1, "{f:?}");
    }
    c.close(None).unwrap();
}
