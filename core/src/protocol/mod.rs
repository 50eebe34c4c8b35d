//! Everything wire-level: framing, version negotiation, record batches, the embedded consumer
//! protocol. The `kafka-protocol` crate is reached only through here.
//!
//! `msg`, `wire` and `records` are crate-private: they speak in `kafka-protocol` types or in
//! lagless' internal batch layout. The `unstable-fuzzing` feature makes them public for the fuzz
//! targets (fuzz/) and the integration tests' fake broker.
pub(crate) mod commit;
pub(crate) mod consumer_group;
pub(crate) mod consumer_protocol;
pub(crate) mod fetch;
pub(crate) mod group;
pub(crate) mod leader_epoch;
pub(crate) mod metadata;
pub(crate) mod offsets;
pub(crate) mod produce;
#[cfg(feature = "unstable-fuzzing")]
pub mod records;
#[cfg(not(feature = "unstable-fuzzing"))]
pub(crate) mod records;
pub(crate) mod txn;
#[cfg(feature = "unstable-fuzzing")]
pub mod wire;
#[cfg(not(feature = "unstable-fuzzing"))]
pub(crate) mod wire;

/// The `kafka-protocol` message types the request builders use. One import point, so that the
/// crate's frequent breaking releases touch one place.
#[cfg(feature = "unstable-fuzzing")]
pub mod msg {
    pub use kafka_protocol::messages::*;
    pub use kafka_protocol::protocol::StrBytes;
}
#[cfg(not(feature = "unstable-fuzzing"))]
pub(crate) mod msg {
    pub use kafka_protocol::messages::*;
    pub use kafka_protocol::protocol::StrBytes;
}

/// A topic's name as the request messages carry it.
pub(crate) fn topic_name(topic: &str) -> msg::TopicName {
    msg::TopicName(msg::StrBytes::from_string(topic.to_string()))
}

/// Groups `(topic, item)` pairs by topic, the shape of every request and embedded message that
/// lists partitions (Fetch, ListOffsets, OffsetFetch, OffsetCommit, the consumer protocol's
/// owned partitions): topics in the order they first appear, each topic's items in input order.
/// A topic listed twice in one request would be answered twice or refused, so pairs of one topic
/// always land in one group, even when the input interleaves topics.
pub(crate) fn group_by_topic<'a, T>(
    pairs: impl IntoIterator<Item = (&'a str, T)>,
) -> Vec<(&'a str, Vec<T>)> {
    let mut groups: Vec<(&'a str, Vec<T>)> = Vec::new();
    let mut index: std::collections::HashMap<&'a str, usize> = std::collections::HashMap::new();
    for (topic, item) in pairs {
        // Sorted input (the common case) always hits the last group: no lookup.
        match groups.last_mut() {
            Some((t, items)) if *t == topic => items.push(item),
            _ => match index.get(topic) {
                Some(&i) => groups[i].1.push(item),
                None => {
                    index.insert(topic, groups.len());
                    groups.push((topic, vec![item]));
                }
            },
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::group_by_topic;

    #[test]
    fn group_by_topic_keeps_first_appearance_and_input_order() {
        let pairs = [("b", 2), ("a", 0), ("b", 0), ("c", 7), ("a", 1), ("b", 1)];
        assert_eq!(
            group_by_topic(pairs),
            vec![("b", vec![2, 0, 1]), ("a", vec![0, 1]), ("c", vec![7])]
        );
        assert_eq!(group_by_topic(Vec::<(&str, i32)>::new()), vec![]);
        assert_eq!(
            group_by_topic([("t", 0), ("t", 1)]),
            vec![("t", vec![0, 1])]
        );
    }
}
