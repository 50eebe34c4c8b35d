//! What the transactional calls of `Producer` take from Python: the consumer's group metadata
//! (an opaque object, as confluent-kafka's `ConsumerGroupMetadata` is) and the offsets sent to a
//! transaction, checked before anything is sent.
use std::collections::HashMap;
use std::time::Duration;

use lagless::{Error, GroupMetadata, OffsetAndMetadata, TopicPartition as CoreTp};
use pyo3::prelude::*;

use crate::wait::duration;

/// A consumer's place in its group when it was taken (group id, generation, member id,
/// `group.instance.id`): what `Producer.send_offsets_to_transaction` sends with the offsets, so
/// that the group coordinator refuses them once that member lost its partitions (KIP-447).
/// Made by `Consumer.consumer_group_metadata()`; immutable.
#[pyclass(module = "lagless._lagless", name = "ConsumerGroupMetadata", frozen)]
pub struct ConsumerGroupMetadata {
    pub inner: GroupMetadata,
}

#[pymethods]
impl ConsumerGroupMetadata {
    fn __repr__(&self) -> String {
        format!(
            "ConsumerGroupMetadata(group_id={:?}, generation_id={}, member_id={:?})",
            self.inner.group_id, self.inner.generation_id, self.inner.member_id
        )
    }
}

/// A partition's offset as `extract_tps` reads it from a `TopicPartition`: (partition, offset,
/// metadata).
pub type GivenOffset = (CoreTp, i64, Option<String>);

/// The offsets of `send_offsets_to_transaction` (each partition's next offset to read, with its
/// commit metadata) as the core takes them. An offset below 0 (unset) is refused, as is a
/// partition given twice with two different offsets: the group would commit only one of them.
pub fn transaction_offsets(
    tps: Vec<GivenOffset>,
) -> lagless::Result<HashMap<CoreTp, OffsetAndMetadata>> {
    let mut out: HashMap<CoreTp, OffsetAndMetadata> = HashMap::with_capacity(tps.len());
    for (tp, offset, metadata) in tps {
        if offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "no offset set for {tp} in the offsets sent to the transaction (got {offset})"
            )));
        }
        let om = OffsetAndMetadata {
            offset,
            metadata: metadata.unwrap_or_default(),
        };
        match out.get(&tp) {
            Some(seen) if *seen != om => {
                return Err(Error::InvalidArgument(format!(
                    "{tp} is given twice with different offsets ({} and {offset})",
                    seen.offset
                )))
            }
            _ => {
                out.insert(tp, om);
            }
        }
    }
    Ok(out)
}

/// A transactional call's timeout: seconds, or (None, negative) `delivery.timeout.ms`, as the C
/// calls' negative `timeout_ms`.
pub fn txn_timeout(timeout: Option<f64>, delivery_timeout: Duration) -> Duration {
    duration(timeout).unwrap_or(delivery_timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> CoreTp {
        CoreTp::new("in", p)
    }

    #[test]
    fn offsets_sent_to_a_transaction_need_an_offset_each_and_one_per_partition() {
        let ok = transaction_offsets(vec![
            (tp(0), 10, None),
            (tp(1), 0, Some("m".into())),
            (tp(0), 10, Some(String::new())),
        ])
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[&tp(0)].offset, 10);
        assert_eq!(ok[&tp(1)].metadata, "m");
        let cases: &[(Vec<GivenOffset>, &str)] = &[
            (vec![(tp(0), -1001, None)], "no offset set for in-0"),
            (vec![(tp(2), -1, None)], "no offset set for in-2"),
            (
                vec![(tp(0), 5, None), (tp(0), 6, None)],
                "given twice with different offsets (5 and 6)",
            ),
        ];
        for (input, want) in cases {
            match transaction_offsets(input.clone()) {
                Err(e @ Error::InvalidArgument(_)) => {
                    assert!(e.to_string().contains(want), "{e} lacks {want}")
                }
                other => panic!("{input:?}: {other:?}"),
            }
        }
        assert!(transaction_offsets(Vec::new()).unwrap().is_empty());
    }

    #[test]
    fn a_transactional_call_waits_delivery_timeout_without_a_timeout() {
        let d = Duration::from_secs(120);
        assert_eq!(txn_timeout(None, d), d);
        assert_eq!(txn_timeout(Some(-1.0), d), d);
        assert_eq!(txn_timeout(Some(2.5), d), Duration::from_millis(2500));
        assert_eq!(txn_timeout(Some(0.0), d), Duration::ZERO);
    }
}
