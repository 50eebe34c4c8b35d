//! The embedded "consumer" protocol: the subscription a member puts in its JoinGroup metadata and
//! the assignment the leader hands out through SyncGroup.
//!
//! Both are `ConsumerProtocolSubscription` / `ConsumerProtocolAssignment` (versions 0-3,
//! non-flexible), each preceded by an `i16` version. The bytes must equal the Java client's, because
//! a group can mix clients and any member may become the leader.
//!
//! Encoding goes through `kafka-protocol`'s generated encoders, so the field layout comes straight
//! from Kafka's schemas. Decoding uses a small bounded reader instead: these bytes come from
//! *other* group members, and `kafka-protocol` 0.18 calls `Vec::with_capacity` with an array count
//! read off the wire, so a garbled count of 2^31-1 would abort the process on allocation rather
//! than return an error. Our reader checks every count against the bytes that remain first.
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignmentTopicPartition;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as SubscriptionTopicPartition;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use kafka_protocol::protocol::{Encodable, StrBytes};

use crate::error::{Error, Result};
use crate::protocol::{group_by_topic, topic_name};

/// The highest version of both messages we know. A newer version is read as this one: Kafka only
/// ever appends fields to these schemas, so the prefix we understand is still valid.
pub const HIGHEST_VERSION: i16 = 3;

/// The generation a member reports when it has none (`GenerationId` default, Java's
/// `DEFAULT_GENERATION`).
pub const UNKNOWN_GENERATION: i32 = -1;

/// Some partitions of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TopicPartitions {
    /// The topic's name.
    pub topic: String,
    /// Partition ids of the topic, in the order written.
    pub partitions: Vec<i32>,
}

impl TopicPartitions {
    /// The partitions `partitions` of `topic`.
    pub fn new(topic: impl Into<String>, partitions: Vec<i32>) -> TopicPartitions {
        TopicPartitions {
            topic: topic.into(),
            partitions,
        }
    }
}

/// What a member sends the leader when it joins: the topics it wants, what it owns now, and the
/// assignor's own data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// The topics the member is subscribed to.
    pub topics: Vec<String>,
    /// Opaque to the protocol; each assignor defines its own (see [`encode_cooperative_user_data`]).
    pub user_data: Option<Bytes>,
    /// Partitions the member owns (v1+, KIP-429).
    pub owned_partitions: Vec<TopicPartitions>,
    /// The generation in which the member got `owned_partitions` (v2+, KIP-792);
    /// [`UNKNOWN_GENERATION`] when unknown. `Default` gives 0, so set it explicitly.
    pub generation_id: i32,
    /// The member's rack (v3+, KIP-881).
    pub rack_id: Option<String>,
}

/// What the leader gives one member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// The partitions the member is to own, grouped by topic.
    pub partitions: Vec<TopicPartitions>,
    /// Opaque to the protocol; each assignor defines its own (see
    /// [`encode_learner_assignment_data`]).
    pub user_data: Option<Bytes>,
}

/// Encodes `s` with its version prefix, byte for byte as Java's
/// `ConsumerProtocol.serializeSubscription`: topics sorted, owned partitions sorted by topic then
/// partition and grouped per topic. A version above [`HIGHEST_VERSION`] is written as the highest
/// (as Java does); fields the version lacks are dropped (they are "ignorable" in the schema).
pub fn encode_subscription(s: &Subscription, version: i16) -> Result<Bytes> {
    let version = encode_version(version, "subscription")?;
    let mut topics = s.topics.clone();
    topics.sort();
    let mut owned: Vec<(&str, i32)> = s
        .owned_partitions
        .iter()
        .flat_map(|tp| tp.partitions.iter().map(move |p| (tp.topic.as_str(), *p)))
        .collect();
    owned.sort();
    let owned_partitions: Vec<SubscriptionTopicPartition> = group_by_topic(owned)
        .into_iter()
        .map(|(topic, partitions)| {
            SubscriptionTopicPartition::default()
                .with_topic(topic_name(topic))
                .with_partitions(partitions)
        })
        .collect();
    let msg = ConsumerProtocolSubscription::default()
        .with_topics(topics.into_iter().map(StrBytes::from_string).collect())
        .with_user_data(s.user_data.clone())
        .with_owned_partitions(owned_partitions)
        .with_generation_id(s.generation_id)
        .with_rack_id(s.rack_id.clone().map(StrBytes::from_string));
    with_prefix(&msg, version, "subscription")
}

/// Decodes a version-prefixed subscription from another member.
///
/// As in Java, an empty rack id is read as no rack, and bytes after the fields of the version are
/// ignored (a newer version appends fields we do not know).
pub fn decode_subscription(b: Bytes) -> Result<Subscription> {
    let mut r = Reader::new(b, "subscription");
    let version = r.version()?;
    let topics = r.array("topics", 2, |r| r.string("topic"))?;
    let user_data = r.nullable_bytes("user_data")?;
    let owned_partitions = if version >= 1 {
        // Smallest entry: an empty topic name (2) and an empty partition array (4).
        r.array("owned_partitions", 6, |r| {
            let topic = r.string("owned_partitions.topic")?;
            let partitions = r.array("owned_partitions.partitions", 4, |r| {
                r.i32("owned_partitions.partition")
            })?;
            Ok(TopicPartitions { topic, partitions })
        })?
    } else {
        Vec::new()
    };
    let generation_id = if version >= 2 {
        r.i32("generation_id")?
    } else {
        UNKNOWN_GENERATION
    };
    let rack_id = if version >= 3 {
        r.nullable_string("rack_id")?.filter(|s| !s.is_empty())
    } else {
        None
    };
    Ok(Subscription {
        topics,
        user_data,
        owned_partitions,
        generation_id,
        rack_id,
    })
}

/// Encodes `a` with its version prefix, as Java's `ConsumerProtocol.serializeAssignment`: topics
/// in the order given, with a repeated topic merged into its first entry (Java's assignment is a
/// map keyed by topic). The message body is the same in every version.
pub fn encode_assignment(a: &Assignment, version: i16) -> Result<Bytes> {
    let version = encode_version(version, "assignment")?;
    let mut assigned: Vec<AssignmentTopicPartition> = Vec::new();
    for tp in &a.partitions {
        match assigned.iter_mut().find(|x| x.topic.0.as_str() == tp.topic) {
            Some(x) => x.partitions.extend_from_slice(&tp.partitions),
            None => assigned.push(
                AssignmentTopicPartition::default()
                    .with_topic(topic_name(&tp.topic))
                    .with_partitions(tp.partitions.clone()),
            ),
        }
    }
    let msg = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(assigned)
        .with_user_data(a.user_data.clone());
    with_prefix(&msg, version, "assignment")
}

/// Decodes a version-prefixed assignment. An empty byte string is an empty assignment: the
/// coordinator sends that to members the leader gave nothing (or left out).
pub fn decode_assignment(b: Bytes) -> Result<Assignment> {
    if b.is_empty() {
        return Ok(Assignment::default());
    }
    let mut r = Reader::new(b, "assignment");
    r.version()?;
    let partitions = r.array("assigned_partitions", 6, |r| {
        let topic = r.string("assigned_partitions.topic")?;
        let partitions = r.array("assigned_partitions.partitions", 4, |r| {
            r.i32("assigned_partitions.partition")
        })?;
        Ok(TopicPartitions { topic, partitions })
    })?;
    let user_data = r.nullable_bytes("user_data")?;
    Ok(Assignment {
        partitions,
        user_data,
    })
}

/// The cooperative-sticky assignor's user data: one big-endian `int32` generation (Java's
/// `COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0`). Members still send it so that leaders reading an
/// older subscription version (without `GenerationId`) can find the generation.
pub fn encode_cooperative_user_data(generation: i32) -> Bytes {
    Bytes::copy_from_slice(&generation.to_be_bytes())
}

/// What a lagless leader puts in every cooperative-sticky assignment's user data when partitions
/// were left out of this generation to move (KIP-429's second round is coming). The assignor
/// itself defines no assignment user data: Java's `CooperativeStickyAssignor.onAssignment` and
/// librdkafka's sticky assignor read only the partitions, so other members ignore these bytes.
const COOPERATIVE_FOLLOW_UP: &[u8] = b"lagless.follow-up.v0";

/// The cooperative-sticky assignment user data: the follow-up marker, or none.
pub fn encode_cooperative_assignment_data(follow_up: bool) -> Option<Bytes> {
    follow_up.then(|| Bytes::from_static(COOPERATIVE_FOLLOW_UP))
}

/// Whether a cooperative-sticky assignment says a follow-up rebalance is coming. Anything but
/// the exact marker (no user data, another leader's bytes) says nothing: the member heartbeats
/// at `heartbeat.interval.ms` as before.
pub fn cooperative_follow_up(user_data: Option<&Bytes>) -> bool {
    user_data.is_some_and(|b| b.as_ref() == COOPERATIVE_FOLLOW_UP)
}

/// The generation in cooperative-sticky user data; `None` when there is no user data. Garbled
/// user data reads as [`UNKNOWN_GENERATION`], as in Java (`memberData` catches the parse error).
pub fn decode_cooperative_user_data(user_data: Option<&Bytes>) -> Option<i32> {
    let b = user_data?;
    if b.len() < 4 {
        return Some(UNKNOWN_GENERATION);
    }
    Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The generation in which a member got its owned partitions, for the sticky assignors:
/// `generation_id` when the subscription carries one (v2+), else the cooperative-sticky user data,
/// else `None`.
pub fn subscription_generation(s: &Subscription) -> Option<i32> {
    if s.generation_id >= 0 {
        return Some(s.generation_id);
    }
    decode_cooperative_user_data(s.user_data.as_ref())
}

/// What a learner-sticky member says about itself in its subscription's user data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LearnerSubscriptionData {
    /// The generation in which the member got its owned partitions.
    pub generation: i32,
    /// Partitions the member has learned and is ready to own.
    pub ready: Vec<TopicPartitions>,
    /// The member is leaving gracefully (scale-down): the leader hands its partitions to the
    /// members that keep them, as learned partitions first, and gives it nothing new.
    pub leaving: bool,
    /// At most this many partitions learning at once for this member (0: no limit).
    pub max_learning: u32,
}

/// Version of the extension written after the ready partitions.
const LEARNER_SUBSCRIPTION_EXTENSION: i16 = 1;

/// The learner-sticky assignor's subscription user data (a lagless format; only lagless members
/// offer that assignor): the member's generation as a big-endian `int32` first, exactly like
/// cooperative-sticky's (so [`subscription_generation`] reads it the same way), then the
/// partitions this member has learned and is ready to own, as `int32` topic count, then per topic
/// a `string` name, an `int32` partition count and the `int32` partitions. Then, only when the
/// member leaves or limits its learning, an extension: `int16` version (1), `int8` leaving,
/// `int32` max learning partitions. Writing the extension only when it says something keeps the
/// data of members that use neither readable by leaders that predate it (they refuse trailing
/// bytes), which matters during a rolling upgrade.
pub fn encode_learner_subscription_data(data: &LearnerSubscriptionData) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(data.generation);
    put_topic_partitions(&mut b, &data.ready);
    if data.leaving || data.max_learning > 0 {
        b.put_i16(LEARNER_SUBSCRIPTION_EXTENSION);
        b.put_i8(i8::from(data.leaving));
        b.put_i32(i32::try_from(data.max_learning).unwrap_or(i32::MAX));
    }
    b.freeze()
}

/// Reads learner-sticky subscription user data (see [`encode_learner_subscription_data`]). No
/// user data is nothing ready, not leaving, no limit; an extension of a later version is read
/// for the fields this version knows. Bytes that do not parse are [`Error::Corrupt`] naming the
/// field.
pub fn decode_learner_subscription_data(
    user_data: Option<&Bytes>,
) -> Result<LearnerSubscriptionData> {
    let Some(b) = user_data else {
        return Ok(LearnerSubscriptionData::default());
    };
    let mut r = Reader::new(b.clone(), "learner subscription user data");
    let generation = r.i32("generation")?;
    let ready = read_topic_partitions_list(&mut r, "ready")?;
    let mut data = LearnerSubscriptionData {
        generation,
        ready,
        ..LearnerSubscriptionData::default()
    };
    if !r.buf.has_remaining() {
        return Ok(data);
    }
    let version = r.i16("extension version")?;
    if version < LEARNER_SUBSCRIPTION_EXTENSION {
        return Err(r.corrupt(
            "extension version",
            format!("{version} is not a version any client writes"),
        ));
    }
    r.need("leaving", 1)?;
    data.leaving = r.buf.get_i8() != 0;
    let max = r.i32("max learning")?;
    if max < 0 {
        return Err(r.corrupt("max learning", format!("{max} is negative")));
    }
    data.max_learning = max as u32;
    if version == LEARNER_SUBSCRIPTION_EXTENSION && r.buf.has_remaining() {
        return Err(r.corrupt(
            "extension",
            format!("{} bytes after the end", r.buf.remaining()),
        ));
    }
    Ok(data)
}

/// What the learner-sticky leader tells one member besides its partitions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LearnerAssignmentData {
    /// Partitions this member learns (warms up for) while their current owners keep them.
    pub learning: Vec<TopicPartitions>,
    /// Partitions were left out of this generation to move (cooperatively): a follow-up
    /// rebalance is coming, so members should notice it sooner than `heartbeat.interval.ms`.
    pub follow_up: bool,
}

/// The learner-sticky assignor's assignment user data: `int16` version (0), `int8` follow-up
/// flag, then the learning partitions in the topic-partitions layout above.
pub fn encode_learner_assignment_data(data: &LearnerAssignmentData) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i8(i8::from(data.follow_up));
    put_topic_partitions(&mut b, &data.learning);
    b.freeze()
}

/// Reads learner-sticky assignment user data; no user data is nothing to learn, no follow-up.
pub fn decode_learner_assignment_data(user_data: Option<&Bytes>) -> Result<LearnerAssignmentData> {
    let Some(b) = user_data else {
        return Ok(LearnerAssignmentData::default());
    };
    let mut r = Reader::new(b.clone(), "learner assignment user data");
    let version = r.i16("version")?;
    if version != 0 {
        return Err(r.corrupt(
            "version",
            format!("{version} is not a version this client reads"),
        ));
    }
    r.need("follow_up", 1)?;
    let follow_up = r.buf.get_i8() != 0;
    let learning = read_topic_partitions(&mut r, "learning")?;
    Ok(LearnerAssignmentData {
        learning,
        follow_up,
    })
}

fn put_topic_partitions(b: &mut BytesMut, tps: &[TopicPartitions]) {
    b.put_i32(tps.len() as i32);
    for tp in tps {
        b.put_i16(tp.topic.len() as i16);
        b.put_slice(tp.topic.as_bytes());
        b.put_i32(tp.partitions.len() as i32);
        for p in &tp.partitions {
            b.put_i32(*p);
        }
    }
}

fn read_topic_partitions_list(r: &mut Reader, field: &str) -> Result<Vec<TopicPartitions>> {
    r.array(field, 6, |r| {
        let topic = r.string("topic")?;
        let partitions = r.array("partitions", 4, |r| r.i32("partition"))?;
        Ok(TopicPartitions { topic, partitions })
    })
}

/// The topic-partitions layout as the last field: bytes after it are corrupt.
fn read_topic_partitions(r: &mut Reader, field: &str) -> Result<Vec<TopicPartitions>> {
    let tps = read_topic_partitions_list(r, field)?;
    if r.buf.has_remaining() {
        return Err(r.corrupt(field, format!("{} bytes after the end", r.buf.remaining())));
    }
    Ok(tps)
}

/// Java clamps a version above the highest to the highest, and refuses a negative one.
fn encode_version(version: i16, what: &str) -> Result<i16> {
    if version < 0 {
        return Err(Error::InvalidArgument(format!(
            "consumer protocol {what} version {version} is negative"
        )));
    }
    Ok(version.min(HIGHEST_VERSION))
}

fn with_prefix<M: Encodable>(msg: &M, version: i16, what: &str) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    // The encoder only fails on values that cannot be represented (a topic longer than 32767
    // bytes, say), which is a bad argument on our side.
    msg.encode(&mut buf, version).map_err(|e| {
        Error::InvalidArgument(format!("cannot encode consumer protocol {what}: {e}"))
    })?;
    Ok(buf.freeze())
}

/// A reader that never trusts a length: every count is checked against the remaining bytes
/// before anything is allocated, and every error names the message and field.
struct Reader {
    buf: Bytes,
    what: &'static str,
}

impl Reader {
    fn new(buf: Bytes, what: &'static str) -> Reader {
        Reader { buf, what }
    }

    fn corrupt(&self, field: &str, problem: impl std::fmt::Display) -> Error {
        Error::Corrupt(format!(
            "consumer protocol {} {field}: {problem}",
            self.what
        ))
    }

    fn need(&self, field: &str, n: usize) -> Result<()> {
        if self.buf.remaining() < n {
            return Err(self.corrupt(
                field,
                format!("needs {n} bytes but only {} remain", self.buf.remaining()),
            ));
        }
        Ok(())
    }

    /// Reads the version prefix; a version above the highest is read as the highest.
    fn version(&mut self) -> Result<i16> {
        let v = self.i16("version")?;
        if v < 0 {
            return Err(self.corrupt("version", format!("{v} is negative")));
        }
        Ok(v.min(HIGHEST_VERSION))
    }

    fn i16(&mut self, field: &str) -> Result<i16> {
        self.need(field, 2)?;
        Ok(self.buf.get_i16())
    }

    fn i32(&mut self, field: &str) -> Result<i32> {
        self.need(field, 4)?;
        Ok(self.buf.get_i32())
    }

    fn nullable_string(&mut self, field: &str) -> Result<Option<String>> {
        let len = self.i16(field)?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 {
            return Err(self.corrupt(field, format!("string length {len} is negative")));
        }
        let len = len as usize;
        self.need(field, len)?;
        let raw = self.buf.split_to(len);
        match std::str::from_utf8(&raw) {
            Ok(s) => Ok(Some(s.to_string())),
            Err(e) => Err(self.corrupt(field, format!("not UTF-8: {e}"))),
        }
    }

    fn string(&mut self, field: &str) -> Result<String> {
        match self.nullable_string(field)? {
            Some(s) => Ok(s),
            None => Err(self.corrupt(field, "null in a non-nullable string")),
        }
    }

    fn nullable_bytes(&mut self, field: &str) -> Result<Option<Bytes>> {
        let len = self.i32(field)?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 {
            return Err(self.corrupt(field, format!("byte length {len} is negative")));
        }
        let len = len as usize;
        self.need(field, len)?;
        Ok(Some(self.buf.split_to(len)))
    }

    /// Reads a non-nullable array whose elements take at least `min_size` bytes each.
    fn array<T>(
        &mut self,
        field: &str,
        min_size: usize,
        mut element: impl FnMut(&mut Reader) -> Result<T>,
    ) -> Result<Vec<T>> {
        let n = self.i32(field)?;
        if n < 0 {
            return Err(self.corrupt(field, format!("array count {n} is negative")));
        }
        let n = n as usize;
        // The check that matters: a count the remaining bytes cannot hold is garbage, and must
        // not size an allocation.
        if n.saturating_mul(min_size) > self.buf.remaining() {
            return Err(self.corrupt(
                field,
                format!(
                    "array count {n} cannot fit in the {} bytes that remain",
                    self.buf.remaining()
                ),
            ));
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(element(self)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Decodable;

    // Builders for golden bytes, one per wire type of the schema.
    fn int16(b: &mut Vec<u8>, v: i16) {
        b.extend_from_slice(&v.to_be_bytes());
    }
    fn int32(b: &mut Vec<u8>, v: i32) {
        b.extend_from_slice(&v.to_be_bytes());
    }
    fn string(b: &mut Vec<u8>, s: &str) {
        int16(b, s.len() as i16);
        b.extend_from_slice(s.as_bytes());
    }
    fn nullable_bytes(b: &mut Vec<u8>, v: Option<&[u8]>) {
        match v {
            None => int32(b, -1),
            Some(v) => {
                int32(b, v.len() as i32);
                b.extend_from_slice(v);
            }
        }
    }

    fn sample_subscription() -> Subscription {
        Subscription {
            // Unsorted on purpose: the encoder sorts like Java.
            topics: vec!["t2".into(), "t1".into()],
            user_data: Some(Bytes::from_static(&[0, 0, 0, 7])),
            owned_partitions: vec![
                TopicPartitions::new("t2", vec![1]),
                TopicPartitions::new("t1", vec![3, 0]),
            ],
            generation_id: 7,
            rack_id: Some("rack-a".into()),
        }
    }

    /// The expected bytes for `sample_subscription` at `version`, field by field from
    /// ConsumerProtocolSubscription.json.
    fn golden_subscription(version: i16) -> Vec<u8> {
        let mut b = Vec::new();
        int16(&mut b, version);
        // Topics []string
        int32(&mut b, 2);
        string(&mut b, "t1");
        string(&mut b, "t2");
        // UserData nullable bytes
        nullable_bytes(&mut b, Some(&[0, 0, 0, 7]));
        if version >= 1 {
            // OwnedPartitions [] {Topic string, Partitions []int32}, sorted
            int32(&mut b, 2);
            string(&mut b, "t1");
            int32(&mut b, 2);
            int32(&mut b, 0);
            int32(&mut b, 3);
            string(&mut b, "t2");
            int32(&mut b, 1);
            int32(&mut b, 1);
        }
        if version >= 2 {
            int32(&mut b, 7); // GenerationId
        }
        if version >= 3 {
            string(&mut b, "rack-a"); // RackId nullable string
        }
        b
    }

    #[test]
    fn subscription_bytes_match_the_schema_for_every_version() {
        let s = sample_subscription();
        for v in 0..=3 {
            let got = encode_subscription(&s, v).unwrap();
            assert_eq!(&got[..], &golden_subscription(v)[..], "version {v}");
        }
    }

    #[test]
    fn subscription_v0_literal_bytes() {
        let s = Subscription {
            topics: vec!["ab".into()],
            user_data: None,
            generation_id: UNKNOWN_GENERATION,
            ..Default::default()
        };
        assert_eq!(
            &encode_subscription(&s, 0).unwrap()[..],
            &[0, 0, 0, 0, 0, 1, 0, 2, b'a', b'b', 0xff, 0xff, 0xff, 0xff][..]
        );
        // v3 with nothing owned: empty array, generation -1, null rack.
        assert_eq!(
            &encode_subscription(&s, 3).unwrap()[..],
            &[
                0, 3, 0, 0, 0, 1, 0, 2, b'a', b'b', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff,
                0xff, 0xff, 0xff, 0xff
            ][..]
        );
    }

    #[test]
    fn subscription_round_trips_and_matches_kafka_protocol_decoder() {
        let s = sample_subscription();
        for v in 0..=3i16 {
            let bytes = encode_subscription(&s, v).unwrap();
            let got = decode_subscription(bytes.clone()).unwrap();
            assert_eq!(got.topics, vec!["t1", "t2"]);
            assert_eq!(got.user_data, s.user_data);
            if v >= 1 {
                assert_eq!(
                    got.owned_partitions,
                    vec![
                        TopicPartitions::new("t1", vec![0, 3]),
                        TopicPartitions::new("t2", vec![1])
                    ]
                );
            } else {
                assert!(got.owned_partitions.is_empty());
            }
            assert_eq!(got.generation_id, if v >= 2 { 7 } else { -1 });
            assert_eq!(got.rack_id.as_deref(), (v >= 3).then_some("rack-a"));

            // The generated decoder must read our bytes the same way.
            let mut body = bytes.slice(2..);
            let theirs = ConsumerProtocolSubscription::decode(&mut body, v).unwrap();
            assert_eq!(theirs.topics.len(), got.topics.len());
            assert_eq!(theirs.generation_id, got.generation_id);
            assert_eq!(theirs.owned_partitions.len(), got.owned_partitions.len());
            assert!(body.is_empty());
        }
    }

    #[test]
    fn newer_subscription_version_is_read_as_v3_and_trailing_fields_ignored() {
        let mut b = golden_subscription(3);
        b[0..2].copy_from_slice(&9i16.to_be_bytes());
        int32(&mut b, 12345); // a field a future version appends
        let got = decode_subscription(Bytes::from(b)).unwrap();
        assert_eq!(got.generation_id, 7);
        assert_eq!(got.rack_id.as_deref(), Some("rack-a"));
        // Encoding above the highest version writes v3, as Java does.
        let s = sample_subscription();
        assert_eq!(
            &encode_subscription(&s, 9).unwrap()[..],
            &golden_subscription(3)[..]
        );
        assert!(matches!(
            encode_subscription(&s, -1),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn empty_rack_reads_as_none() {
        let mut b = Vec::new();
        int16(&mut b, 3);
        int32(&mut b, 0);
        nullable_bytes(&mut b, None);
        int32(&mut b, 0);
        int32(&mut b, 4);
        string(&mut b, "");
        let got = decode_subscription(Bytes::from(b)).unwrap();
        assert_eq!(got.rack_id, None);
        assert_eq!(got.generation_id, 4);
    }

    fn corrupt_message(r: Result<Subscription>) -> String {
        match r {
            Err(Error::Corrupt(m)) => m,
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn huge_topic_count_is_an_error_not_an_abort() {
        let mut b = Vec::new();
        int16(&mut b, 1);
        int32(&mut b, i32::MAX);
        string(&mut b, "t");
        let m = corrupt_message(decode_subscription(Bytes::from(b)));
        assert!(m.contains("topics"), "{m}");
        assert!(m.contains("2147483647"), "{m}");
    }

    #[test]
    fn huge_counts_in_nested_arrays_and_assignments_are_errors() {
        let mut b = Vec::new();
        int16(&mut b, 1);
        int32(&mut b, 0);
        nullable_bytes(&mut b, None);
        int32(&mut b, 1);
        string(&mut b, "t");
        int32(&mut b, i32::MAX);
        let m = corrupt_message(decode_subscription(Bytes::from(b)));
        assert!(m.contains("owned_partitions.partitions"), "{m}");

        let mut b = Vec::new();
        int16(&mut b, 0);
        int32(&mut b, i32::MAX);
        assert!(matches!(
            decode_assignment(Bytes::from(b)),
            Err(Error::Corrupt(_))
        ));
    }

    #[test]
    fn garbled_subscriptions_name_what_was_wrong() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "version"),
            (vec![0], "version"),
            (vec![0xff, 0xff, 0, 0, 0, 0], "negative"),
            (vec![0, 0, 0xff, 0xff, 0xff, 0xff], "topics"),
            (vec![0, 0, 0, 0, 0, 1, 0xff, 0xff], "null"),
            (vec![0, 0, 0, 0, 0, 1, 0, 9, b'a'], "topic"),
            (vec![0, 0, 0, 0, 0, 1, 0, 1, 0xff], "UTF-8"),
            (vec![0, 0, 0, 0, 0, 0], "user_data"),
            (vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 1], "user_data"),
            (vec![0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe], "negative"),
            // v2 without its generation
            (
                vec![0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0],
                "generation_id",
            ),
        ];
        for (bytes, needle) in cases {
            let m = corrupt_message(decode_subscription(Bytes::from(bytes.clone())));
            assert!(m.contains(needle), "{bytes:?}: {m}");
        }
    }

    #[test]
    fn assignment_bytes_match_the_schema() {
        let a = Assignment {
            partitions: vec![
                TopicPartitions::new("t1", vec![2, 0]),
                TopicPartitions::new("t0", vec![1]),
                // Merged into the first "t1" entry, as Java's topic-keyed collection does.
                TopicPartitions::new("t1", vec![5]),
            ],
            user_data: Some(Bytes::from_static(b"ud")),
        };
        for v in 0..=3 {
            let mut b = Vec::new();
            int16(&mut b, v);
            int32(&mut b, 2);
            string(&mut b, "t1");
            int32(&mut b, 3);
            int32(&mut b, 2);
            int32(&mut b, 0);
            int32(&mut b, 5);
            string(&mut b, "t0");
            int32(&mut b, 1);
            int32(&mut b, 1);
            nullable_bytes(&mut b, Some(b"ud"));
            let got = encode_assignment(&a, v).unwrap();
            assert_eq!(&got[..], &b[..], "version {v}");

            let back = decode_assignment(got.clone()).unwrap();
            assert_eq!(
                back.partitions,
                vec![
                    TopicPartitions::new("t1", vec![2, 0, 5]),
                    TopicPartitions::new("t0", vec![1])
                ]
            );
            assert_eq!(back.user_data, a.user_data);
            let mut body = got.slice(2..);
            let theirs = ConsumerProtocolAssignment::decode(&mut body, v).unwrap();
            assert_eq!(theirs.assigned_partitions.len(), 2);
        }
    }

    #[test]
    fn empty_assignment_bytes_are_an_empty_assignment() {
        assert_eq!(
            decode_assignment(Bytes::new()).unwrap(),
            Assignment::default()
        );
        // An encoded empty assignment: version, empty array, null user data.
        let e = encode_assignment(&Assignment::default(), 0).unwrap();
        assert_eq!(&e[..], &[0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff][..]);
        assert_eq!(decode_assignment(e).unwrap(), Assignment::default());
        // Truncated (not empty) is corrupt.
        assert!(matches!(
            decode_assignment(Bytes::from_static(&[0, 0, 0])),
            Err(Error::Corrupt(_))
        ));
    }

    #[test]
    fn only_the_exact_marker_says_a_cooperative_follow_up_is_coming() {
        assert!(cooperative_follow_up(
            encode_cooperative_assignment_data(true).as_ref()
        ));
        assert_eq!(encode_cooperative_assignment_data(false), None);
        assert!(!cooperative_follow_up(None));
        // Another leader's bytes, a truncated or a longer marker: nothing is coming.
        for other in [
            &b""[..],
            b"\x00\x00\x00\x07",
            b"lagless.follow-up",
            b"lagless.follow-up.v0x",
        ] {
            assert!(!cooperative_follow_up(Some(&Bytes::copy_from_slice(other))));
        }
    }

    #[test]
    fn cooperative_user_data_is_a_big_endian_generation() {
        assert_eq!(&encode_cooperative_user_data(258)[..], &[0, 0, 1, 2][..]);
        assert_eq!(
            decode_cooperative_user_data(Some(&encode_cooperative_user_data(-1))),
            Some(-1)
        );
        assert_eq!(decode_cooperative_user_data(None), None);
        assert_eq!(
            decode_cooperative_user_data(Some(&Bytes::from_static(&[1]))),
            Some(UNKNOWN_GENERATION)
        );

        // generation_id wins when present; user data is the fallback for v0/v1.
        let mut s = Subscription {
            user_data: Some(encode_cooperative_user_data(5)),
            generation_id: 9,
            ..Default::default()
        };
        assert_eq!(subscription_generation(&s), Some(9));
        s.generation_id = UNKNOWN_GENERATION;
        assert_eq!(subscription_generation(&s), Some(5));
        let v1 = decode_subscription(encode_subscription(&s, 1).unwrap()).unwrap();
        assert_eq!(subscription_generation(&v1), Some(5));
        s.user_data = None;
        assert_eq!(subscription_generation(&s), None);
    }

    #[test]
    fn learner_user_data_round_trips_and_rejects_garbage() {
        let ready = vec![
            TopicPartitions::new("orders", vec![0, 5]),
            TopicPartitions::new("t", vec![]),
        ];
        let sub = LearnerSubscriptionData {
            generation: 9,
            ready: ready.clone(),
            ..LearnerSubscriptionData::default()
        };
        let b = encode_learner_subscription_data(&sub);
        assert_eq!(decode_learner_subscription_data(Some(&b)).unwrap(), sub);
        // The generation sits where cooperative-sticky's does.
        assert_eq!(decode_cooperative_user_data(Some(&b)), Some(9));
        assert_eq!(
            decode_learner_subscription_data(None).unwrap(),
            LearnerSubscriptionData::default()
        );
        let data = LearnerAssignmentData {
            learning: ready.clone(),
            follow_up: true,
        };
        let a = encode_learner_assignment_data(&data);
        assert_eq!(decode_learner_assignment_data(Some(&a)).unwrap(), data);
        let e = decode_learner_assignment_data(Some(&Bytes::from_static(&[0, 1, 0]))).unwrap_err();
        assert!(e.to_string().contains("version"), "{e}");

        for bad in [
            &b[..b.len() - 1],                         // truncated
            &[0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff][..], // a topic count no bytes can hold
            &[0, 0, 0, 1][..],                         // no topic count
        ] {
            let e =
                decode_learner_subscription_data(Some(&Bytes::copy_from_slice(bad))).unwrap_err();
            assert!(
                matches!(&e, Error::Corrupt(m) if m.contains("learner subscription user data")),
                "{e}"
            );
        }
        let mut trailing = a.to_vec();
        trailing.push(0);
        let e = decode_learner_assignment_data(Some(&Bytes::from(trailing))).unwrap_err();
        assert!(e.to_string().contains("after the end"), "{e}");
    }

    #[test]
    fn learner_subscription_extension_is_written_only_when_it_says_something() {
        let ready = vec![TopicPartitions::new("orders", vec![3])];
        let plain = LearnerSubscriptionData {
            generation: 4,
            ready: ready.clone(),
            ..LearnerSubscriptionData::default()
        };
        // Without leaving or a budget: exactly the layout of the first version, which leaders
        // that predate the extension read.
        let mut expected = vec![0, 0, 0, 4, 0, 0, 0, 1, 0, 6];
        expected.extend_from_slice(b"orders");
        expected.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 3]);
        assert_eq!(encode_learner_subscription_data(&plain).to_vec(), expected);

        let leaving = LearnerSubscriptionData {
            leaving: true,
            max_learning: 2,
            ..plain.clone()
        };
        let b = encode_learner_subscription_data(&leaving);
        assert_eq!(&b[expected.len()..], &[0, 1, 1, 0, 0, 0, 2]);
        assert_eq!(decode_learner_subscription_data(Some(&b)).unwrap(), leaving);

        // A later version may add fields: this one reads the ones it knows.
        let mut later = b.to_vec();
        later[expected.len() + 1] = 2;
        later.extend_from_slice(&[9, 9]);
        assert_eq!(
            decode_learner_subscription_data(Some(&Bytes::from(later))).unwrap(),
            leaving
        );
        for (bad, field) in [
            (&[0, 1, 1][..], "max learning"),        // truncated extension
            (&[0, 0, 1, 0, 0, 0, 2][..], "version"), // version 0 never carries one
            (&[0, 1, 0, 0xff, 0xff, 0xff, 0xff][..], "negative"),
            (&[0, 1, 0, 0, 0, 0, 2, 7][..], "after the end"),
        ] {
            let mut data = expected.clone();
            data.extend_from_slice(bad);
            let e = decode_learner_subscription_data(Some(&Bytes::from(data))).unwrap_err();
            assert!(e.to_string().contains(field), "{field}: {e}");
        }
    }
}
