//! The admin client against a real broker: topics created, described, reconfigured and
//! deleted; a group's offsets altered, listed, deleted and reset from outside the group; offsets
//! listed by timestamp. Every check is on exact offsets and counts.
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lagless::admin::{
    AdminClient, AlterConfigOp, ConfigResource, GroupType, NewTopic, OffsetSpec, ResetTarget,
};
use lagless::{Config, OffsetAndMetadata, ProducerRecord, TopicPartition};
use support::*;

const T: Duration = Duration::from_secs(30);

fn admin(bootstrap: &str) -> AdminClient {
    AdminClient::new(&Config::from_pairs([("bootstrap.servers", bootstrap)]).unwrap()).unwrap()
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn topics_are_created_described_reconfigured_and_deleted() {
    let bootstrap = bootstrap();
    let admin = admin(&bootstrap);
    let (a, b) = (unique_name("admin-a"), unique_name("admin-b"));
    let mut with_config = NewTopic::new(&b, 2, 1);
    with_config
        .configs
        .push(("retention.ms".into(), "3600000".into()));
    let created = admin
        .create_topics(&[NewTopic::new(&a, 3, 1), with_config], T)
        .unwrap();
    assert_eq!(created.len(), 2);
    for (name, r) in &created {
        r.as_ref()
            .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    }
    // Creating it again is the broker's TOPIC_ALREADY_EXISTS, for that topic alone.
    let again = admin.create_topics(&[NewTopic::new(&a, 3, 1)], T).unwrap();
    assert_eq!(again[0].1.as_ref().unwrap_err().kafka_code(), Some(36));

    let cluster = admin.describe_cluster(T).unwrap();
    assert!(!cluster.brokers.is_empty(), "{cluster:?}");
    assert!(!cluster.cluster_id.is_empty());
    let broker_ids: Vec<i32> = cluster.brokers.iter().map(|b| b.id).collect();

    // Leaders are elected a moment after creation: wait for them, bounded.
    let deadline = Instant::now() + T;
    let described = loop {
        let d = admin.describe_topics(&[&a, &b], T).unwrap();
        let ready = d.iter().all(|(_, r)| {
            r.as_ref()
                .is_ok_and(|t| t.partitions.iter().all(|p| p.leader >= 0))
        });
        if ready || Instant::now() > deadline {
            break d;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let counts: Vec<usize> = described
        .iter()
        .map(|(_, r)| r.as_ref().unwrap().partitions.len())
        .collect();
    assert_eq!(counts, vec![3, 2]);
    for (_, r) in &described {
        for p in &r.as_ref().unwrap().partitions {
            assert!(broker_ids.contains(&p.leader), "{p:?}");
            assert_eq!(p.replicas, vec![p.leader]);
            assert_eq!(p.isr, vec![p.leader]);
        }
    }
    let listed = admin.list_topics(false, T).unwrap();
    assert!(listed.contains(&a) && listed.contains(&b));

    let grown = admin.create_partitions(&[(&a, 5)], T).unwrap();
    grown[0].1.as_ref().unwrap();

    let retention = |admin: &AdminClient| -> Option<String> {
        let r = admin
            .describe_configs(&[ConfigResource::Topic(b.clone())], T)
            .unwrap();
        let entries = r[0].1.as_ref().unwrap();
        entries
            .iter()
            .find(|e| e.name == "retention.ms")
            .and_then(|e| e.value.clone())
    };
    assert_eq!(retention(&admin).as_deref(), Some("3600000"));
    let altered = admin
        .incremental_alter_configs(
            &[(
                ConfigResource::Topic(b.clone()),
                vec![AlterConfigOp::Set("retention.ms".into(), "7200000".into())],
            )],
            T,
        )
        .unwrap();
    altered[0].1.as_ref().unwrap();
    // The controller takes the change; the broker that answers DescribeConfigs has it once its
    // metadata caught up (a moment; one run in two saw the old value at once).
    let deadline = Instant::now() + T;
    while retention(&admin).as_deref() != Some("7200000") {
        assert!(
            Instant::now() < deadline,
            "retention.ms never became 7200000"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let deleted = admin.delete_topics(&[&a, &b], T).unwrap();
    assert_eq!(deleted.len(), 2);
    for (name, r) in &deleted {
        r.as_ref()
            .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    }
    let deadline = Instant::now() + T;
    loop {
        let listed = admin.list_topics(false, T).unwrap();
        if !listed.contains(&a) && !listed.contains(&b) {
            break;
        }
        assert!(Instant::now() < deadline, "deleted topics still listed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let gone = admin.describe_topics(&[&a], T).unwrap();
    assert!(matches!(gone[0].1, Err(lagless::Error::UnknownTopic(_))));
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn group_offsets_are_altered_listed_lagged_deleted_and_reset() {
    let bootstrap = bootstrap();
    let admin = admin(&bootstrap);
    let topic = new_topic(&bootstrap, "admin-offsets", 3);
    let written = produce(&bootstrap, &topic, 3, 10);
    assert_eq!(written.values().map(|o| o.len()).sum::<usize>(), 30);
    let group = unique_name("admin-group");
    let tp = |p| TopicPartition::new(&topic, p);
    let offsets: Vec<(TopicPartition, OffsetAndMetadata)> = (0..3)
        .map(|p| {
            (
                tp(p),
                OffsetAndMetadata {
                    offset: i64::from(p) + 2,
                    metadata: "admin".into(),
                },
            )
        })
        .collect();
    let altered = admin
        .alter_consumer_group_offsets(&group, &offsets, T)
        .unwrap();
    assert_eq!(altered.len(), 3);
    for (tp, r) in &altered {
        r.as_ref().unwrap_or_else(|e| panic!("{tp}: {e}"));
    }
    let listed: BTreeMap<TopicPartition, i64> = admin
        .list_consumer_group_offsets(&group, None, T)
        .unwrap()
        .into_iter()
        .map(|(tp, r)| (tp, r.unwrap().unwrap().offset))
        .collect();
    assert_eq!(listed, BTreeMap::from([(tp(0), 2), (tp(1), 3), (tp(2), 4)]));

    let groups = admin.list_groups(T).unwrap();
    assert!(groups.iter().any(|g| g.group_id == group), "{groups:?}");
    let described = admin.describe_groups(&[&group], T).unwrap();
    let d = described[0].1.as_ref().unwrap();
    assert_eq!((d.state.as_str(), d.members.len()), ("Empty", 0), "{d:?}");

    type Row = (i32, Option<i64>, Option<i64>, Option<i64>);
    let lag: Vec<Row> = admin
        .group_lag(&group, T)
        .unwrap()
        .into_iter()
        .map(|l| (l.partition.partition, l.committed, l.end, l.lag))
        .collect();
    assert_eq!(
        lag,
        vec![
            (0, Some(2), Some(10), Some(8)),
            (1, Some(3), Some(10), Some(7)),
            (2, Some(4), Some(10), Some(6)),
        ]
    );

    // A reset plan changes nothing until it is carried out.
    let plan = admin
        .plan_offset_reset(&group, &[&topic], ResetTarget::Earliest, T)
        .unwrap();
    let targets: Vec<(i32, Option<i64>, i64)> = plan
        .iter()
        .map(|p| (p.partition.partition, p.current, p.target))
        .collect();
    assert_eq!(
        targets,
        vec![(0, Some(2), 0), (1, Some(3), 0), (2, Some(4), 0)]
    );
    let unchanged = admin.list_consumer_group_offsets(&group, None, T).unwrap();
    assert_eq!(unchanged[0].1.as_ref().unwrap().as_ref().unwrap().offset, 2);
    for (_, r) in admin
        .reset_consumer_group_offsets(&group, &plan, T)
        .unwrap()
    {
        r.unwrap();
    }
    let reset: Vec<i64> = admin
        .list_consumer_group_offsets(&group, Some(&[tp(0), tp(1), tp(2)]), T)
        .unwrap()
        .into_iter()
        .map(|(_, r)| r.unwrap().unwrap().offset)
        .collect();
    assert_eq!(reset, vec![0, 0, 0]);

    let deleted = admin
        .delete_consumer_group_offsets(&group, &[tp(0)], T)
        .unwrap();
    deleted[0].1.as_ref().unwrap();
    let after = admin
        .list_consumer_group_offsets(&group, Some(&[tp(0), tp(1)]), T)
        .unwrap();
    assert_eq!(after[0].1.as_ref().unwrap(), &None);
    assert_eq!(after[1].1.as_ref().unwrap().as_ref().unwrap().offset, 0);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn offsets_are_listed_by_timestamp() {
    let bootstrap = bootstrap();
    let admin = admin(&bootstrap);
    let topic = new_topic(&bootstrap, "admin-timestamps", 1);
    let t0 = now_ms() - 60_000;
    let p = producer(&bootstrap, &[]);
    let deliveries: Vec<_> = (0..5)
        .map(|i| {
            p.send(
                ProducerRecord::new(&topic, format!("v{i}"))
                    .with_partition(0)
                    .with_timestamp(t0 + i * 1_000),
            )
            .unwrap()
        })
        .collect();
    for d in deliveries {
        d.wait().unwrap();
    }
    p.close(Duration::from_secs(5)).unwrap();
    let tp = TopicPartition::new(&topic, 0);
    let specs = [
        OffsetSpec::Earliest,
        OffsetSpec::Latest,
        OffsetSpec::Timestamp(t0 + 2_000),
        OffsetSpec::Timestamp(t0 + 2_500),
        OffsetSpec::Timestamp(t0 + 10_000),
    ];
    let got: Vec<i64> = specs
        .iter()
        .map(|s| {
            let r = admin.list_offsets(&[(tp.clone(), *s)], T).unwrap();
            r[0].1.as_ref().unwrap().offset
        })
        .collect();
    assert_eq!(got, vec![0, 5, 2, 3, -1]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn groups_of_both_protocols_are_described_with_their_members() {
    let bootstrap = bootstrap();
    let admin = admin(&bootstrap);
    let topic = new_topic(&bootstrap, "admin-describe", 2);
    let (classic, modern) = (unique_name("admin-classic"), unique_name("admin-consumer"));
    let a = group_member(&bootstrap, &classic, &[]);
    let b = consumer(
        &bootstrap,
        &[
            ("group.id", modern.as_str()),
            ("group.protocol", "consumer"),
        ],
    );
    for c in [&a, &b] {
        c.subscribe(&[&topic], None).unwrap();
        // Nothing was produced: a poll while waiting returns nothing.
        assert!(wait_assigned(c, T).is_empty());
    }
    let described = admin.describe_groups(&[&classic, &modern], T).unwrap();
    for ((id, r), want) in described
        .iter()
        .zip([GroupType::Classic, GroupType::Consumer])
    {
        let d = r.as_ref().unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(d.group_type, want, "{d:?}");
        assert_eq!(d.members.len(), 1, "{d:?}");
        let mut owned = d.members[0].assignment.clone();
        owned.sort();
        assert_eq!(
            owned,
            vec![
                TopicPartition::new(&topic, 0),
                TopicPartition::new(&topic, 1)
            ],
            "{d:?}"
        );
    }
    // A group with members may not be reset from outside.
    let refused = admin
        .plan_offset_reset(&modern, &[&topic], ResetTarget::Earliest, T)
        .unwrap_err();
    assert!(refused.to_string().contains("inactive"), "{refused}");
    a.close(Some(T)).unwrap();
    b.close(Some(T)).unwrap();
}
