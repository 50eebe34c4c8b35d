//! Rebalance events as values: the four callbacks of [`RebalanceListener`] as one enum, and a
//! listener made of one function of the event. A binding (the C ABI, the Python package) writes
//! its forwarding of callbacks once, as that function, instead of once per callback.
use crate::consumer::{Consumer, RebalanceListener};
use crate::error::Result;
use crate::types::TopicPartition;

/// What a rebalance tells the application about a set of partitions. Not `non_exhaustive` on
/// purpose: a new event breaks the build of every layer that forwards events until it forwards
/// the new one too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RebalanceEvent {
    /// Given up; committing their offsets is still safe
    /// ([`RebalanceListener::on_partitions_revoked`]).
    Revoked,
    /// Newly given to this member ([`RebalanceListener::on_partitions_assigned`]).
    Assigned,
    /// Possibly owned by another member already; committing is no longer possible
    /// ([`RebalanceListener::on_partitions_lost`]).
    Lost,
    /// Learner assignments to warm up before owning them
    /// ([`RebalanceListener::on_partitions_learning`]).
    Learning,
}

impl RebalanceEvent {
    /// Every event, in declaration order.
    pub const ALL: [RebalanceEvent; 4] = [
        RebalanceEvent::Revoked,
        RebalanceEvent::Assigned,
        RebalanceEvent::Lost,
        RebalanceEvent::Learning,
    ];

    /// The name of the [`RebalanceListener`] method of the event ("on_partitions_revoked"); the
    /// Python listener's methods have the same names.
    pub fn method_name(self) -> &'static str {
        match self {
            RebalanceEvent::Revoked => "on_partitions_revoked",
            RebalanceEvent::Assigned => "on_partitions_assigned",
            RebalanceEvent::Lost => "on_partitions_lost",
            RebalanceEvent::Learning => "on_partitions_learning",
        }
    }
}

/// A [`RebalanceListener`] that hands every callback to one function of the event. Lost
/// partitions come as [`RebalanceEvent::Lost`]: the function decides whether they go where
/// revoked ones go (the default of [`RebalanceListener::on_partitions_lost`]).
pub struct RebalanceEventListener<F>(pub F);

impl<F> RebalanceListener for RebalanceEventListener<F>
where
    F: FnMut(&Consumer, RebalanceEvent, &[TopicPartition]) -> Result<()> + Send,
{
    fn on_partitions_revoked(&mut self, c: &Consumer, p: &[TopicPartition]) -> Result<()> {
        (self.0)(c, RebalanceEvent::Revoked, p)
    }
    fn on_partitions_assigned(&mut self, c: &Consumer, p: &[TopicPartition]) -> Result<()> {
        (self.0)(c, RebalanceEvent::Assigned, p)
    }
    fn on_partitions_learning(&mut self, c: &Consumer, p: &[TopicPartition]) -> Result<()> {
        (self.0)(c, RebalanceEvent::Learning, p)
    }
    fn on_partitions_lost(&mut self, c: &Consumer, p: &[TopicPartition]) -> Result<()> {
        (self.0)(c, RebalanceEvent::Lost, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Error};

    #[test]
    fn each_callback_reaches_the_function_as_its_own_event_with_its_partitions() {
        let mut config = Config::new();
        config.set("bootstrap.servers", "127.0.0.1:1").unwrap();
        let consumer = Consumer::from_config(&config).unwrap();
        let mut seen = Vec::new();
        let mut listener = RebalanceEventListener(|_: &Consumer, event, p: &[TopicPartition]| {
            seen.push((event, p.to_vec()));
            match event {
                RebalanceEvent::Learning => Err(Error::Callback("not ready".into())),
                _ => Ok(()),
            }
        });
        let parts = |n| vec![TopicPartition::new("t", n)];
        let l: &mut dyn RebalanceListener = &mut listener;
        assert!(l.on_partitions_revoked(&consumer, &parts(0)).is_ok());
        assert!(l.on_partitions_assigned(&consumer, &parts(1)).is_ok());
        assert!(l.on_partitions_lost(&consumer, &parts(2)).is_ok());
        assert_eq!(
            l.on_partitions_learning(&consumer, &parts(3)),
            Err(Error::Callback("not ready".into()))
        );
        let events: Vec<_> = seen.iter().map(|(e, _)| *e).collect();
        assert_eq!(events, RebalanceEvent::ALL);
        let partitions: Vec<i32> = seen.iter().map(|(_, p)| p[0].partition).collect();
        assert_eq!(partitions, [0, 1, 2, 3]);
    }

    #[test]
    fn method_names_are_the_listener_methods() {
        let names: Vec<_> = RebalanceEvent::ALL
            .map(RebalanceEvent::method_name)
            .to_vec();
        assert_eq!(
            names,
            [
                "on_partitions_revoked",
                "on_partitions_assigned",
                "on_partitions_lost",
                "on_partitions_learning"
            ]
        );
    }
}
