//! What the application hears of the group: the rebalance listener, and how the group steps call
//! it ([`Dispatch`]: the blocking listener, or the async front's). The member's place in its
//! group ([`GroupMetadata`]) is in `types.rs`.
use std::future::Future;
use std::pin::Pin;

use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::types::TopicPartition;
// Defined with the other plain values, where the producer's `send_offsets_to_transaction` reaches
// it without importing the consumer; the group steps name it here.
pub(crate) use crate::types::GroupMetadata;

/// Called when the consumer's assignment changes. Every method runs on the thread that called
/// `poll()`, `close()` or `unsubscribe()`. An error returned by a callback does not stop the
/// assignment change; it comes out of that `poll()` afterwards as [`Error::Callback`].
pub trait RebalanceListener: Send {
    /// Partitions this member gives up. Commit their offsets here if you commit by hand.
    fn on_partitions_revoked(
        &mut self,
        _consumer: &Consumer,
        _partitions: &[TopicPartition],
    ) -> Result<()> {
        Ok(())
    }
    /// Partitions newly given to this member (called once per rebalance, possibly empty).
    fn on_partitions_assigned(
        &mut self,
        _consumer: &Consumer,
        _partitions: &[TopicPartition],
    ) -> Result<()> {
        Ok(())
    }
    /// Learner assignments (`partition.assignment.strategy=learner-sticky`): partitions this
    /// member will own once it is ready, while their current owners keep consuming them. Warm
    /// up here (load state, caches, connections); returning `Ok` says this member is ready, and
    /// it rejoins so the group moves them to it. An error leaves it not ready (the owners keep
    /// the partitions) and comes out of `poll()`; a later `poll()` calls it again for them after
    /// a backoff (`retry.backoff.ms` growing to `retry.backoff.max.ms`). It runs inside `poll()`:
    /// keep it within `max.poll.interval.ms`. Without learner assignments it is never called.
    fn on_partitions_learning(
        &mut self,
        _consumer: &Consumer,
        _partitions: &[TopicPartition],
    ) -> Result<()> {
        Ok(())
    }
    /// Partitions that may already belong to another member (the generation was lost, e.g.
    /// after `max.poll.interval.ms`): committing them is no longer possible.
    fn on_partitions_lost(
        &mut self,
        consumer: &Consumer,
        partitions: &[TopicPartition],
    ) -> Result<()> {
        self.on_partitions_revoked(consumer, partitions)
    }
}

/// A rebalance listener callback, named for [`Dispatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Callback {
    Revoked,
    Assigned,
    Learning,
    Lost,
}

/// A boxed future that may move between threads: what the async listener's callbacks return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs the listener's callbacks for the group steps: the blocking listener, or the async
/// front's. Returns the callback's error, if any.
pub(crate) trait Dispatch: Send {
    fn call<'a>(
        &'a mut self,
        consumer: &'a Consumer,
        callback: Callback,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Option<Error>>;
}

/// The blocking API's listener, kept in the group state: its callbacks run inline.
pub(crate) struct BlockingListener;

impl Dispatch for BlockingListener {
    fn call<'a>(
        &'a mut self,
        consumer: &'a Consumer,
        callback: Callback,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Option<Error>> {
        let r = consumer.with_listener(|l, c| match callback {
            Callback::Revoked => l.on_partitions_revoked(c, partitions),
            Callback::Assigned => l.on_partitions_assigned(c, partitions),
            Callback::Learning => l.on_partitions_learning(c, partitions),
            Callback::Lost => l.on_partitions_lost(c, partitions),
        });
        Box::pin(std::future::ready(r))
    }
}
