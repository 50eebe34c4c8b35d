//! The transactional producer's state machine, as the Java producer's `TransactionManager` keeps
//! it: which call is legal in which state, where a call or a failure moves the producer, and
//! which broker errors abort the transaction, end the producer, or are tried again. Pure: the
//! producer (`producer::transactional`) carries the decisions out.
use std::time::Duration;

use crate::backoff::Backoff;
use crate::error::{codes, Error};
use crate::protocol::wire::Versions;

/// Where a transactional producer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnState {
    /// `init_transactions` has not completed yet.
    Uninitialized,
    /// Initialised, no transaction open: `begin_transaction` may start one.
    Ready,
    /// A transaction is open: sends and `send_offsets_to_transaction` join it.
    InTransaction,
    /// `commit_transaction` is flushing the transaction's records or ending it (EndTxn).
    Committing,
    /// `abort_transaction` is waiting for records on the wire or ending the transaction.
    Aborting,
    /// Something of the open transaction failed: only `abort_transaction` goes on.
    AbortableError,
    /// The producer can not go on (fenced, not authorized): every call fails.
    FatalError,
}

/// A call of the transactional API (sends included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnCall {
    Init,
    Begin,
    Send,
    SendOffsets,
    Commit,
    Abort,
}

/// What a call may do in a state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Go on, moving to `to` first (the same state for a call that does not move it).
    Go { to: TxnState },
    /// The call was cut short by its timeout before and is called again: finish that one
    /// (Java keeps the pending result of a timed-out `commitTransaction` the same way).
    Resume,
    /// Refused; the state stays.
    Refuse(Error),
}

/// What `call` may do in `state`; `last_error` is the error that put the producer in
/// AbortableError or FatalError (its message goes into the refusal).
pub(crate) fn admit(state: TxnState, call: TxnCall, last_error: Option<&Error>) -> Admit {
    use TxnCall as C;
    use TxnState as S;
    let illegal = |what: &str| {
        Admit::Refuse(Error::IllegalState(format!(
            "{what} is not allowed while the transactional producer is {}",
            describe(state)
        )))
    };
    match (state, call) {
        (S::FatalError, _) => Admit::Refuse(last_error.cloned().unwrap_or_else(|| {
            Error::IllegalState("the transactional producer failed fatally".into())
        })),
        (S::Uninitialized, C::Init) => Admit::Go {
            to: S::Uninitialized,
        },
        (S::Uninitialized, _) => Admit::Refuse(Error::IllegalState(
            "call init_transactions() first: the transactional producer has no producer id yet"
                .into(),
        )),
        (_, C::Init) => illegal("init_transactions()"),
        (S::Ready, C::Begin) => Admit::Go {
            to: S::InTransaction,
        },
        (_, C::Begin) => illegal("begin_transaction()"),
        (S::InTransaction, C::Send | C::SendOffsets) => Admit::Go {
            to: S::InTransaction,
        },
        (S::AbortableError, C::Send | C::SendOffsets | C::Commit) => {
            Admit::Refuse(Error::TransactionAbortable(
                last_error
                    .map(|e| match e {
                        Error::TransactionAbortable(m) => m.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_else(|| "a request of the transaction failed".into()),
            ))
        }
        (S::Ready, C::Send | C::SendOffsets) => Admit::Refuse(Error::IllegalState(
            "no transaction is open: call begin_transaction() first".into(),
        )),
        (_, C::Send) => illegal("send"),
        (_, C::SendOffsets) => illegal("send_offsets_to_transaction()"),
        (S::InTransaction, C::Commit) => Admit::Go { to: S::Committing },
        (S::Committing, C::Commit) => Admit::Resume,
        (_, C::Commit) => illegal("commit_transaction()"),
        (S::InTransaction | S::AbortableError, C::Abort) => Admit::Go { to: S::Aborting },
        (S::Aborting, C::Abort) => Admit::Resume,
        (_, C::Abort) => illegal("abort_transaction()"),
    }
}

fn describe(state: TxnState) -> &'static str {
    match state {
        TxnState::Uninitialized => "not initialised (init_transactions)",
        TxnState::Ready => "ready, with no transaction open",
        TxnState::InTransaction => "in a transaction",
        TxnState::Committing => "committing a transaction",
        TxnState::Aborting => "aborting a transaction",
        TxnState::AbortableError => "in a transaction that must be aborted",
        TxnState::FatalError => "failed fatally",
    }
}

/// What a transactional request's (or a batch's) broker error means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnErrorClass {
    /// Try again after the backoff; `rediscover`: the transaction (or group) coordinator moved,
    /// find it again first.
    Retry { rediscover: bool },
    /// The transaction must be aborted; the producer goes on after that.
    Abortable,
    /// The producer can not go on.
    Fatal,
}

/// The class of broker error `code` answered to a transactional request (InitProducerId,
/// AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) or to a batch of a
/// transaction, as the Java producer's `TransactionManager` handlers decide.
pub(crate) fn classify(code: i16) -> TxnErrorClass {
    use TxnErrorClass::*;
    match code {
        // Fenced by a newer producer of the same transactional.id (INVALID_PRODUCER_EPOCH is how
        // older coordinators and the partition leaders say it), or never allowed.
        codes::PRODUCER_FENCED
        | codes::INVALID_PRODUCER_EPOCH
        | codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        | codes::CLUSTER_AUTHORIZATION_FAILED
        | codes::TRANSACTION_COORDINATOR_FENCED
        | codes::INVALID_TXN_STATE
        | codes::INVALID_TRANSACTION_TIMEOUT
        | codes::UNSUPPORTED_VERSION => Fatal,
        codes::NOT_COORDINATOR | codes::COORDINATOR_NOT_AVAILABLE => Retry { rediscover: true },
        // The previous transaction is still being completed; the coordinator is loading; the
        // partitions of an AddPartitionsToTxn whose other partitions failed were not tried.
        codes::CONCURRENT_TRANSACTIONS
        | codes::COORDINATOR_LOAD_IN_PROGRESS
        | codes::REQUEST_TIMED_OUT
        | codes::OPERATION_NOT_ATTEMPTED
        | codes::UNKNOWN_TOPIC_OR_PARTITION => Retry { rediscover: false },
        _ => Abortable,
    }
}

/// The transaction protocol a transactional producer speaks (KIP-890), chosen once, at
/// `init_transactions`, from what its transaction coordinator says of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnProtocol {
    /// Transaction version 1, the classic protocol: AddPartitionsToTxn before a partition's
    /// first batch, AddOffsetsToTxn before TxnOffsetCommit, one producer epoch for every
    /// transaction until an abortable error makes the producer bump it (InitProducerId).
    V1,
    /// Transaction version 2 (Kafka 4.0+): the first Produce (v12+) of a partition adds it to
    /// the transaction, TxnOffsetCommit v5 adds the group, and EndTxn v5 bumps the epoch at the
    /// end of every transaction and says the new one: a late write of an ended transaction (a
    /// zombie's, or a retry that arrives after the commit) is refused instead of joining the next
    /// one, and an abort needs no InitProducerId.
    V2,
}

impl TxnProtocol {
    /// The protocol for a coordinator whose cluster has `transaction.version` finalized at
    /// `finalized` (none: not finalized) and which speaks EndTxn up to `end_txn_max`. A cluster
    /// finalizes a level only once every broker supports it, so the partition leaders speak
    /// Produce v12 too.
    pub(crate) fn choose(finalized: Option<i16>, end_txn_max: i16) -> TxnProtocol {
        match finalized {
            Some(level) if level >= 2 && end_txn_max >= 5 => TxnProtocol::V2,
            _ => TxnProtocol::V1,
        }
    }

    /// The Produce versions of a transactional producer: v12 means "add the partition".
    pub(crate) fn produce(self) -> Versions {
        match self {
            TxnProtocol::V1 => (i16::MIN, 11),
            TxnProtocol::V2 => (12, i16::MAX),
        }
    }

    /// The EndTxn versions: v5 bumps the epoch and answers with it.
    pub(crate) fn end_txn(self) -> Versions {
        match self {
            TxnProtocol::V1 => (i16::MIN, 4),
            TxnProtocol::V2 => (5, i16::MAX),
        }
    }

    /// The TxnOffsetCommit versions: v5 adds the group to the transaction. v4 only tells the
    /// coordinator that the client knows TRANSACTION_ABORTABLE, which lagless does.
    pub(crate) fn txn_offset_commit(self) -> Versions {
        match self {
            TxnProtocol::V1 => (i16::MIN, 4),
            TxnProtocol::V2 => (5, i16::MAX),
        }
    }

    /// Whether partitions and groups join the transaction by requests of their own
    /// (AddPartitionsToTxn, AddOffsetsToTxn) before their writes.
    pub(crate) fn adds_explicitly(self) -> bool {
        self == TxnProtocol::V1
    }

    /// Whether the producer itself bumps the epoch (InitProducerId) after an abortable error,
    /// so that every partition can restart its sequences: under V2 the abort's EndTxn does.
    pub(crate) fn client_bumps_epoch(self) -> bool {
        self == TxnProtocol::V1
    }
}

/// The first wait before AddPartitionsToTxn is sent again (with `retry.backoff.ms` if that is
/// shorter). Its usual retry is CONCURRENT_TRANSACTIONS: the coordinator is still writing the
/// previous transaction's markers, a matter of milliseconds, so a wait of `retry.backoff.ms`
/// (100 ms by default) would be added to nearly every transaction that follows a commit. The
/// Java client retries it after 20 ms too.
pub(crate) const ADD_PARTITIONS_RETRY_BACKOFF: Duration = Duration::from_millis(20);

/// The backoff of AddPartitionsToTxn: from [`ADD_PARTITIONS_RETRY_BACKOFF`] (or `retry_backoff`,
/// if shorter) doubling up to `retry_backoff_max`.
pub(crate) fn add_partitions_backoff(
    retry_backoff: Duration,
    retry_backoff_max: Duration,
) -> Backoff {
    Backoff::new(
        retry_backoff.min(ADD_PARTITIONS_RETRY_BACKOFF),
        retry_backoff_max,
    )
}

/// The error the caller gets for broker error `code` of a transactional request `what`:
/// fencing is always `PRODUCER_FENCED` (so [`Error::is_producer_fenced`] tells it), an
/// abortable code is [`Error::TransactionAbortable`].
pub(crate) fn txn_error(code: i16, what: &str) -> Error {
    match classify(code) {
        TxnErrorClass::Fatal if code == codes::INVALID_PRODUCER_EPOCH => Error::kafka(
            codes::PRODUCER_FENCED,
            format!(
                "{what}: INVALID_PRODUCER_EPOCH: a newer producer with the same transactional.id \
                 fenced this one"
            ),
        ),
        TxnErrorClass::Fatal if code == codes::PRODUCER_FENCED => Error::kafka(
            code,
            format!("{what}: a newer producer with the same transactional.id fenced this one"),
        ),
        TxnErrorClass::Abortable => {
            Error::TransactionAbortable(format!("{what}: {}", Error::kafka(code, "")))
        }
        _ => Error::kafka(code, what.to_string()),
    }
}

/// Where a failure `e` of the open transaction (a batch, a transactional request) moves a
/// producer in `state`: fatal errors end it; anything else makes an open or committing
/// transaction abortable. `None`: the state stays (a failure after the transaction ended, or
/// one of an abort under way, which aborts anyway).
pub(crate) fn on_failure(state: TxnState, e: &Error) -> Option<TxnState> {
    let fatal = e.is_fatal() || e.kafka_code().map(classify) == Some(TxnErrorClass::Fatal);
    match state {
        TxnState::FatalError => None,
        _ if fatal => Some(TxnState::FatalError),
        TxnState::InTransaction | TxnState::Committing => Some(TxnState::AbortableError),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::Retry;
    use TxnCall as C;
    use TxnState as S;

    /// After a commit, the next transaction's AddPartitionsToTxn is answered
    /// CONCURRENT_TRANSACTIONS until the markers are written: it is tried again after about
    /// 20 ms, not retry.backoff.ms, and still backs off from there.
    #[test]
    fn the_transaction_protocol_follows_the_clusters_transaction_version() {
        use TxnProtocol::*;
        // (finalized transaction.version, the coordinator's highest EndTxn) -> protocol
        let table = [
            (None, 5, V1),
            (Some(0), 5, V1),
            (Some(1), 5, V1),
            (Some(2), 5, V2),
            (Some(3), 6, V2),
            // A coordinator that can not end a version 2 transaction.
            (Some(2), 4, V1),
        ];
        for (finalized, end_txn_max, want) in table {
            assert_eq!(
                TxnProtocol::choose(finalized, end_txn_max),
                want,
                "{finalized:?} {end_txn_max}"
            );
        }
    }

    #[test]
    fn each_transaction_protocol_keeps_to_the_versions_that_mean_it() {
        use TxnProtocol::*;
        // Produce v12, TxnOffsetCommit v5 and EndTxn v5 mean version 2 to the broker (implicit
        // adds, an epoch per transaction): version 1 stays below them, version 2 at or above.
        assert_eq!((V1.produce().1, V2.produce().0), (11, 12));
        assert_eq!((V1.txn_offset_commit().1, V2.txn_offset_commit().0), (4, 5));
        assert_eq!((V1.end_txn().1, V2.end_txn().0), (4, 5));
        assert!(V1.adds_explicitly() && V1.client_bumps_epoch());
        assert!(!V2.adds_explicitly() && !V2.client_bumps_epoch());
    }

    #[test]
    fn add_partitions_is_retried_sooner_than_retry_backoff() {
        let ms = Duration::from_millis;
        let mut retry = Retry::new(add_partitions_backoff(ms(100), ms(1000)));
        let first = retry.failed();
        assert!(
            first >= ms(16) && first <= ms(24),
            "20 ms less or more jitter: {first:?}"
        );
        let later: Vec<Duration> = (0..6).map(|_| retry.failed()).collect();
        assert!(
            later.last().unwrap() > &ms(200),
            "it still backs off: {later:?}"
        );
        // A shorter retry.backoff.ms is kept.
        let mut retry = Retry::new(add_partitions_backoff(ms(5), ms(1000)));
        assert!(retry.failed() <= ms(6));
    }

    fn verdict(a: Admit) -> String {
        match a {
            Admit::Go { to } => format!("go {to:?}"),
            Admit::Resume => "resume".into(),
            Admit::Refuse(e) => format!("refuse {}", e.kind().name()),
        }
    }

    /// Java's `TransactionManager` rules, state by state: (state, call, verdict).
    #[test]
    fn calls_are_admitted_as_the_java_producer_admits_them() {
        let table: &[(TxnState, TxnCall, &str)] = &[
            (S::Uninitialized, C::Init, "go Uninitialized"),
            (S::Uninitialized, C::Begin, "refuse ILLEGAL_STATE"),
            (S::Uninitialized, C::Send, "refuse ILLEGAL_STATE"),
            (S::Uninitialized, C::Commit, "refuse ILLEGAL_STATE"),
            (S::Ready, C::Init, "refuse ILLEGAL_STATE"),
            (S::Ready, C::Begin, "go InTransaction"),
            (S::Ready, C::Send, "refuse ILLEGAL_STATE"),
            (S::Ready, C::SendOffsets, "refuse ILLEGAL_STATE"),
            (S::Ready, C::Commit, "refuse ILLEGAL_STATE"),
            (S::Ready, C::Abort, "refuse ILLEGAL_STATE"),
            (S::InTransaction, C::Begin, "refuse ILLEGAL_STATE"),
            (S::InTransaction, C::Send, "go InTransaction"),
            (S::InTransaction, C::SendOffsets, "go InTransaction"),
            (S::InTransaction, C::Commit, "go Committing"),
            (S::InTransaction, C::Abort, "go Aborting"),
            (S::Committing, C::Commit, "resume"),
            (S::Committing, C::Abort, "refuse ILLEGAL_STATE"),
            (S::Committing, C::Send, "refuse ILLEGAL_STATE"),
            (S::Aborting, C::Abort, "resume"),
            (S::Aborting, C::Commit, "refuse ILLEGAL_STATE"),
            (S::Aborting, C::Begin, "refuse ILLEGAL_STATE"),
            (S::AbortableError, C::Send, "refuse TRANSACTION_ABORTABLE"),
            (
                S::AbortableError,
                C::SendOffsets,
                "refuse TRANSACTION_ABORTABLE",
            ),
            (S::AbortableError, C::Commit, "refuse TRANSACTION_ABORTABLE"),
            (S::AbortableError, C::Begin, "refuse ILLEGAL_STATE"),
            (S::AbortableError, C::Abort, "go Aborting"),
            (S::FatalError, C::Abort, "refuse KAFKA"),
            (S::FatalError, C::Send, "refuse KAFKA"),
            (S::FatalError, C::Init, "refuse KAFKA"),
        ];
        let fenced = txn_error(codes::PRODUCER_FENCED, "EndTxn");
        for (state, call, want) in table {
            let got = verdict(admit(*state, *call, Some(&fenced)));
            assert_eq!(got, *want, "{state:?} {call:?}");
        }
        // A fatal state refuses with the error that ended the producer.
        match admit(S::FatalError, C::Commit, Some(&fenced)) {
            Admit::Refuse(e) => assert!(e.is_producer_fenced() && e.is_fatal(), "{e}"),
            other => panic!("{other:?}"),
        }
        // An abortable state says why, and that abort is needed.
        let cause = txn_error(codes::TOPIC_AUTHORIZATION_FAILED, "AddPartitionsToTxn");
        match admit(S::AbortableError, C::Commit, Some(&cause)) {
            Admit::Refuse(e) => {
                let m = e.to_string();
                assert!(m.contains("abort_transaction") && m.contains("TOPIC_AUTHORIZATION"));
            }
            other => panic!("{other:?}"),
        }
    }

    /// The broker errors of the brief's table: fencing and authorization fatal, coordinator
    /// trouble retried, the rest abortable.
    #[test]
    fn broker_errors_are_fatal_abortable_or_retried() {
        let table: &[(i16, TxnErrorClass)] = &[
            (codes::PRODUCER_FENCED, TxnErrorClass::Fatal),
            (codes::INVALID_PRODUCER_EPOCH, TxnErrorClass::Fatal),
            (
                codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                TxnErrorClass::Fatal,
            ),
            (codes::CLUSTER_AUTHORIZATION_FAILED, TxnErrorClass::Fatal),
            (codes::INVALID_TXN_STATE, TxnErrorClass::Fatal),
            (
                codes::CONCURRENT_TRANSACTIONS,
                TxnErrorClass::Retry { rediscover: false },
            ),
            (
                codes::COORDINATOR_LOAD_IN_PROGRESS,
                TxnErrorClass::Retry { rediscover: false },
            ),
            (
                codes::NOT_COORDINATOR,
                TxnErrorClass::Retry { rediscover: true },
            ),
            (
                codes::COORDINATOR_NOT_AVAILABLE,
                TxnErrorClass::Retry { rediscover: true },
            ),
            (codes::TOPIC_AUTHORIZATION_FAILED, TxnErrorClass::Abortable),
            (codes::GROUP_AUTHORIZATION_FAILED, TxnErrorClass::Abortable),
            (codes::UNKNOWN_PRODUCER_ID, TxnErrorClass::Abortable),
            (codes::INVALID_PRODUCER_ID_MAPPING, TxnErrorClass::Abortable),
            (codes::TRANSACTION_ABORTABLE, TxnErrorClass::Abortable),
            (codes::ILLEGAL_GENERATION, TxnErrorClass::Abortable),
            (codes::UNKNOWN_MEMBER_ID, TxnErrorClass::Abortable),
            (codes::FENCED_INSTANCE_ID, TxnErrorClass::Abortable),
        ];
        for (code, want) in table {
            assert_eq!(classify(*code), *want, "{code}");
        }
        // Every code that ends the producer says so to the caller (Error::is_fatal, the C and
        // Python `fatal`), not only fencing.
        for code in 0..=130 {
            if classify(code) == TxnErrorClass::Fatal {
                let e = txn_error(code, "EndTxn");
                assert!(e.is_fatal() && !e.is_retriable(), "{code}: {e}");
            }
        }
        // INVALID_PRODUCER_EPOCH reaches the caller as PRODUCER_FENCED; abortable codes as
        // TransactionAbortable naming the code.
        let e = txn_error(codes::INVALID_PRODUCER_EPOCH, "Produce");
        assert!(e.is_producer_fenced() && e.is_fatal(), "{e}");
        let e = txn_error(codes::UNKNOWN_MEMBER_ID, "TxnOffsetCommit");
        assert!(matches!(&e, Error::TransactionAbortable(m) if m.contains("UNKNOWN_MEMBER_ID")));
        assert!(!e.is_fatal() && !e.is_retriable());
    }

    #[test]
    fn failures_make_the_transaction_abortable_or_end_the_producer() {
        let abortable = Error::Timeout("records expired".into());
        let fenced = txn_error(codes::PRODUCER_FENCED, "Produce");
        let epoch = Error::kafka(codes::INVALID_PRODUCER_EPOCH, "Produce");
        let table: &[(TxnState, &Error, Option<TxnState>)] = &[
            (S::InTransaction, &abortable, Some(S::AbortableError)),
            (S::Committing, &abortable, Some(S::AbortableError)),
            (S::Aborting, &abortable, None),
            (S::Ready, &abortable, None),
            (S::AbortableError, &abortable, None),
            (S::InTransaction, &fenced, Some(S::FatalError)),
            (S::Aborting, &fenced, Some(S::FatalError)),
            (S::AbortableError, &epoch, Some(S::FatalError)),
            (S::FatalError, &fenced, None),
        ];
        for (state, e, want) in table {
            assert_eq!(on_failure(*state, e), *want, "{state:?} {e}");
        }
    }
}
