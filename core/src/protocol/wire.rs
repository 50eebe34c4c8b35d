//! Framing and version negotiation: how a request becomes bytes on a socket and bytes become a
//! response. Every other module reaches the `kafka-protocol` message types through
//! [`crate::protocol::msg`], so an upgrade of that crate (it breaks every few months) is confined
//! to the `protocol` module's imports and the request builders.
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{
    encode_request_header_into_buffer, Decodable, Encodable, HeaderVersion, Message, StrBytes,
};

use crate::error::{Error, Result};

/// A request lagless sends: its api key and the type of its answer. The crate's own `Request`
/// trait is only compiled with its `broker` feature (request decoding, response encoding), which
/// a client does not need; this is the client half of it, for the requests lagless sends.
pub trait Api: Encodable + Message {
    /// The request's api key (Kafka's `ApiKeys` number: 1 for Fetch, 11 for JoinGroup).
    const KEY: i16;
    /// The message the broker answers the request with.
    type Response: Decodable + HeaderVersion;
}

macro_rules! apis {
    ($($key:ident: $request:ident => $response:ident,)*) => {
        $(
            impl Api for kafka_protocol::messages::$request {
                const KEY: i16 = ApiKey::$key as i16;
                type Response = kafka_protocol::messages::$response;
            }
        )*
    };
}

apis! {
    AddOffsetsToTxn: AddOffsetsToTxnRequest => AddOffsetsToTxnResponse,
    AddPartitionsToTxn: AddPartitionsToTxnRequest => AddPartitionsToTxnResponse,
    ApiVersions: ApiVersionsRequest => ApiVersionsResponse,
    ConsumerGroupHeartbeat: ConsumerGroupHeartbeatRequest => ConsumerGroupHeartbeatResponse,
    CreatePartitions: CreatePartitionsRequest => CreatePartitionsResponse,
    CreateTopics: CreateTopicsRequest => CreateTopicsResponse,
    DescribeConfigs: DescribeConfigsRequest => DescribeConfigsResponse,
    EndTxn: EndTxnRequest => EndTxnResponse,
    DeleteTopics: DeleteTopicsRequest => DeleteTopicsResponse,
    DescribeCluster: DescribeClusterRequest => DescribeClusterResponse,
    ListGroups: ListGroupsRequest => ListGroupsResponse,
    DescribeGroups: DescribeGroupsRequest => DescribeGroupsResponse,
    ConsumerGroupDescribe: ConsumerGroupDescribeRequest => ConsumerGroupDescribeResponse,
    OffsetDelete: OffsetDeleteRequest => OffsetDeleteResponse,
    IncrementalAlterConfigs: IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse,
    Fetch: FetchRequest => FetchResponse,
    GetTelemetrySubscriptions: GetTelemetrySubscriptionsRequest => GetTelemetrySubscriptionsResponse,
    PushTelemetry: PushTelemetryRequest => PushTelemetryResponse,
    FindCoordinator: FindCoordinatorRequest => FindCoordinatorResponse,
    Heartbeat: HeartbeatRequest => HeartbeatResponse,
    InitProducerId: InitProducerIdRequest => InitProducerIdResponse,
    JoinGroup: JoinGroupRequest => JoinGroupResponse,
    LeaveGroup: LeaveGroupRequest => LeaveGroupResponse,
    ListOffsets: ListOffsetsRequest => ListOffsetsResponse,
    Metadata: MetadataRequest => MetadataResponse,
    OffsetCommit: OffsetCommitRequest => OffsetCommitResponse,
    OffsetFetch: OffsetFetchRequest => OffsetFetchResponse,
    OffsetForLeaderEpoch: OffsetForLeaderEpochRequest => OffsetForLeaderEpochResponse,
    Produce: ProduceRequest => ProduceResponse,
    SaslAuthenticate: SaslAuthenticateRequest => SaslAuthenticateResponse,
    SaslHandshake: SaslHandshakeRequest => SaslHandshakeResponse,
    SyncGroup: SyncGroupRequest => SyncGroupResponse,
    TxnOffsetCommit: TxnOffsetCommitRequest => TxnOffsetCommitResponse,
}

/// The largest response frame lagless accepts. A frame length above it means a corrupt stream
/// (or a TLS/HTTP peer on a PLAINTEXT port), not a real response: refuse before allocating.
pub const MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;

/// The highest version lagless fills requests for, per API. The crate may encode newer versions,
/// but their shape differs (topic ids instead of names from Fetch v13, OffsetCommit/Fetch v10), and
/// a version is only offered once the request builders handle its fields.
pub fn lagless_max_version(key: ApiKey) -> i16 {
    match key {
        ApiKey::Fetch => 12,
        // v12 (KIP-890): a transactional Produce adds its partition to the transaction; a
        // transactional producer of the classic protocol stays at v11 (`TxnProtocol`).
        ApiKey::Produce => 12,
        ApiKey::ListOffsets => 9,
        ApiKey::Metadata => 12,
        ApiKey::OffsetCommit => 9,
        ApiKey::OffsetFetch => 7,
        // KIP-320's position validation; a consumer needs v3+ (see `protocol::leader_epoch`).
        ApiKey::OffsetForLeaderEpoch => 4,
        ApiKey::FindCoordinator => 4,
        ApiKey::JoinGroup => 9,
        ApiKey::SyncGroup => 5,
        ApiKey::Heartbeat => 4,
        ApiKey::LeaveGroup => 5,
        // KIP-848; v1 (KIP-1082): the member makes its own member id.
        ApiKey::ConsumerGroupHeartbeat => 1,
        ApiKey::ApiVersions => 3,
        ApiKey::CreateTopics => 7,
        ApiKey::DeleteTopics => 6,
        ApiKey::CreatePartitions => 3,
        ApiKey::DescribeConfigs => 4,
        // The admin client's (crate::admin).
        ApiKey::IncrementalAlterConfigs => 1,
        ApiKey::DescribeCluster => 1,
        ApiKey::ListGroups => 5,
        ApiKey::DescribeGroups => 5,
        ApiKey::ConsumerGroupDescribe => 1,
        ApiKey::OffsetDelete => 0,
        // v3+ carries the current producer id and epoch (KIP-360); v6 adds two-phase commit
        // (KIP-939), which an idempotent producer does not use.
        ApiKey::InitProducerId => 5,
        // v1: Kafka-framed authentication (KIP-152); SaslAuthenticate v1+ carries the session
        // lifetime of KIP-368.
        ApiKey::SaslHandshake => 1,
        ApiKey::SaslAuthenticate => 2,
        // Transactions. The classic protocol (transaction version 1) adds partitions with
        // AddPartitionsToTxn v3 (v4+ is the brokers' batched form) and the group with
        // AddOffsetsToTxn, and ends with EndTxn up to v4. Transaction version 2 (KIP-890) adds
        // both implicitly (Produce v12, TxnOffsetCommit v5) and ends with EndTxn v5, whose answer
        // carries the epoch bumped for the next transaction. `producer::transaction::TxnProtocol`
        // says which versions each protocol uses.
        ApiKey::AddPartitionsToTxn => 3,
        ApiKey::AddOffsetsToTxn => 3,
        ApiKey::EndTxn => 5,
        // v3+ carries the member's generation and id (KIP-447).
        ApiKey::TxnOffsetCommit => 5,
        // KIP-714 client telemetry (crate::telemetry).
        ApiKey::GetTelemetrySubscriptions => 0,
        ApiKey::PushTelemetry => 0,
        _ => -1,
    }
}

/// An inclusive range of request versions, (lowest, highest).
pub type Versions = (i16, i16);

/// Any version both sides speak.
pub const ALL_VERSIONS: Versions = (i16::MIN, i16::MAX);

/// The highest version in all three ranges (lagless' own for the request, the broker's, and
/// the caller's `wanted`), or `None` when they have none in common.
pub fn common_version(client: Versions, broker: Versions, wanted: Versions) -> Option<i16> {
    let lowest = client.0.max(broker.0).max(wanted.0);
    let highest = client.1.min(broker.1).min(wanted.1);
    (highest >= lowest).then_some(highest)
}

/// The versions lagless itself can use for request `R`: the crate's encodable range, capped by
/// [`lagless_max_version`].
pub fn client_versions<R: Api>() -> (i16, i16) {
    let key = ApiKey::try_from(R::KEY).expect("request types carry a known api key");
    let v = <R as Message>::VERSIONS;
    (v.min, v.max.min(lagless_max_version(key)))
}

/// Frames `req` with its request header. The frame includes the 4-byte size prefix.
pub fn encode_request<R: Api>(
    req: &R,
    version: i16,
    correlation_id: i32,
    client_id: &str,
) -> Result<Bytes> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i32(0);
    encode_request_header_into_buffer(&mut buf, &header).map_err(|e| {
        Error::InvalidArgument(format!("encoding request header of api {}: {e}", R::KEY))
    })?;
    req.encode(&mut buf, version).map_err(|e| {
        Error::InvalidArgument(format!(
            "encoding request of api {} v{version}: {e}",
            R::KEY
        ))
    })?;
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// Reads the correlation id of a response frame (without the size prefix). It is the first four
/// bytes of every response header version.
pub fn response_correlation_id(frame: &[u8]) -> Result<i32> {
    if frame.len() < 4 {
        return Err(Error::Corrupt(format!(
            "response frame of {} bytes has no correlation id",
            frame.len()
        )));
    }
    Ok(i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]))
}

/// Decodes a response frame (without the size prefix) for request type `R` at `version`.
/// Malformed bytes are an error, never a panic: the decoder runs behind `catch_unwind` because
/// the crate's decoders are not all hardened against hostile input. Nor an abort: the crate is
/// lagless-kafka-protocol (vendor/kafka-protocol/PATCHED.md), which bounds every reservation
/// sized by a length off the wire by the bytes left in the frame, so a hostile length fails the
/// decode instead.
pub fn decode_response<R: Api>(mut frame: Bytes, version: i16) -> Result<R::Response> {
    #[cfg(feature = "unstable-fuzzing")]
    capture::answer::<R>(&frame, version);
    let hv = <R::Response as HeaderVersion>::header_version(version);
    let decoded = std::panic::catch_unwind(move || -> anyhow::Result<R::Response> {
        ResponseHeader::decode(&mut frame, hv)?;
        <R::Response as Decodable>::decode(&mut frame, version)
    });
    match decoded {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(Error::Corrupt(format!(
            "response of api {} v{version}: {e}",
            R::KEY
        ))),
        Err(_) => Err(Error::Corrupt(format!(
            "response of api {} v{version} could not be decoded",
            R::KEY
        ))),
    }
}

/// The answers the `broker_answers` fuzz target decodes (fuzz/fuzz_targets/broker_answers.rs),
/// in the order of its first input byte.
#[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
const FUZZED_ANSWERS: [ApiKey; 5] = [
    ApiKey::Fetch,
    ApiKey::Metadata,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::OffsetFetch,
];

/// The two bytes the `broker_answers` fuzz target reads before a frame so that it decodes the
/// frame as the answer to request `key` at `version`: the answer's place in [`FUZZED_ANSWERS`],
/// then the version's distance from `lowest`, the lowest version lagless speaks. `None` for an
/// answer the target does not decode.
#[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
fn fuzz_selector(key: i16, version: i16, lowest: i16) -> Option<[u8; 2]> {
    let index = FUZZED_ANSWERS.iter().position(|k| *k as i16 == key)?;
    let offset = u8::try_from(version.checked_sub(lowest)?).ok()?;
    Some([index as u8, offset])
}

/// Fuzz seeds from a real broker: with `LAGLESS_CAPTURE_ANSWERS=<dir>` in the environment, every
/// answer the `broker_answers` target decodes is written to `<dir>` as a seed (its two selector
/// bytes, then the frame). Only built with `unstable-fuzzing` (the integration tests' build), so
/// a client pays nothing; fuzz/README.md says how to run it.
#[cfg(feature = "unstable-fuzzing")]
mod capture {
    use std::hash::{Hash, Hasher};
    use std::path::PathBuf;
    use std::sync::OnceLock;

    use super::{client_versions, fuzz_selector, Api};

    pub(super) fn answer<R: Api>(frame: &[u8], version: i16) {
        static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
        let dir =
            DIR.get_or_init(|| std::env::var_os("LAGLESS_CAPTURE_ANSWERS").map(PathBuf::from));
        let Some(dir) = dir else { return };
        let Some(selector) = fuzz_selector(R::KEY, version, client_versions::<R>().0) else {
            return;
        };
        let mut seed = selector.to_vec();
        seed.extend_from_slice(frame);
        // Named by content: an answer seen twice is one seed.
        let mut hash = std::collections::hash_map::DefaultHasher::new();
        seed.hash(&mut hash);
        let name = format!("api{}-v{version}-{:016x}", R::KEY, hash.finish());
        // A seed that cannot be written is a seed less, not a failed request.
        let _ = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(dir.join(name), &seed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{FetchRequest, JoinGroupRequest, MetadataRequest};

    #[test]
    fn fuzz_selectors_pick_the_answer_type_and_version_the_target_decodes() {
        // (api key, version, lowest version lagless speaks) -> selector bytes
        let table: [(ApiKey, i16, i16, Option<[u8; 2]>); 8] = [
            (ApiKey::Fetch, 12, 4, Some([0, 8])),
            (ApiKey::Metadata, 12, 0, Some([1, 12])),
            (ApiKey::JoinGroup, 9, 0, Some([2, 9])),
            (ApiKey::SyncGroup, 5, 0, Some([3, 5])),
            (ApiKey::OffsetFetch, 7, 1, Some([4, 6])),
            // Answers the target does not decode, and versions below the lowest, are not seeds.
            (ApiKey::Heartbeat, 4, 0, None),
            (ApiKey::ApiVersions, 3, 0, None),
            (ApiKey::Fetch, 3, 4, None),
        ];
        for (key, version, lowest, want) in table {
            assert_eq!(
                fuzz_selector(key as i16, version, lowest),
                want,
                "{key:?} v{version}"
            );
        }
    }

    #[test]
    fn the_common_version_is_the_highest_in_every_range() {
        // (lagless, broker, wanted) -> version
        let table: [(Versions, Versions, Versions, Option<i16>); 6] = [
            ((0, 12), (3, 13), ALL_VERSIONS, Some(12)),
            ((0, 12), (3, 10), ALL_VERSIONS, Some(10)),
            // A transactional Produce of the classic protocol: never v12, which adds partitions.
            ((0, 12), (3, 13), (i16::MIN, 11), Some(11)),
            // EndTxn of transaction version 2 against a broker that stops at v4: none.
            ((0, 5), (0, 4), (5, i16::MAX), None),
            ((0, 5), (0, 5), (5, i16::MAX), Some(5)),
            // The broker's range above lagless' own.
            ((0, 9), (10, 12), ALL_VERSIONS, None),
        ];
        for (client, broker, wanted, want) in table {
            assert_eq!(
                common_version(client, broker, wanted),
                want,
                "{client:?} {broker:?} {wanted:?}"
            );
        }
    }

    /// A response frame (without the size prefix): correlation id 7, the header's empty tagged
    /// fields when `flexible`, then `body`.
    fn frame(flexible: bool, body: &[u8]) -> Bytes {
        let mut f = BytesMut::new();
        f.put_i32(7);
        if flexible {
            f.put_u8(0);
        }
        f.put_slice(body);
        f.freeze()
    }

    fn assert_corrupt<R: Api>(version: i16, flexible: bool, body: &[u8]) {
        match decode_response::<R>(frame(flexible, body), version) {
            Err(Error::Corrupt(msg)) => {
                assert!(msg.contains(&format!("api {}", R::KEY)), "{msg}")
            }
            Err(e) => panic!("not Corrupt: {e}"),
            Ok(_) => panic!("decoded a frame that claims billions of elements"),
        }
    }

    #[test]
    fn a_huge_array_length_off_the_wire_is_a_clean_corrupt_error() {
        // Metadata v4: throttle time, then the brokers array claims i32::MAX entries (a
        // reservation of hundreds of gigabytes) in a frame of a few bytes.
        let mut body = BytesMut::new();
        body.put_i32(0);
        body.put_i32(i32::MAX);
        body.put_slice(&[0; 16]);
        assert_corrupt::<MetadataRequest>(4, false, &body);

        // Metadata v12 (flexible): a compact array of u32::MAX - 1 entries, as a varint.
        let mut body = BytesMut::new();
        body.put_i32(0);
        body.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        body.put_slice(&[0; 16]);
        assert_corrupt::<MetadataRequest>(12, true, &body);

        // Fetch v12: throttle time, error code, session id, then the topics.
        let mut body = BytesMut::new();
        body.put_i32(0);
        body.put_i16(0);
        body.put_i32(0);
        body.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_corrupt::<FetchRequest>(12, true, &body);

        // JoinGroup v5: throttle time, error code, generation, protocol name, leader, member id,
        // then the members.
        let mut body = BytesMut::new();
        body.put_i32(0);
        body.put_i16(0);
        body.put_i32(1);
        body.put_i16(0);
        body.put_i16(0);
        body.put_i16(0);
        body.put_i32(i32::MAX);
        assert_corrupt::<JoinGroupRequest>(5, false, &body);
    }
}
