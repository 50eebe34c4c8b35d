//! The group member's driver task: one task on the consumer's runtime that runs everything the
//! member does away from the application's thread. It drives, as sub-futures of one loop:
//! - the background heartbeat (KIP-62, [`GroupDriver::heartbeat_loop`]);
//! - the join the member asked for ([`GroupDriver::join`]), whose answer it hands to the member
//!   ([`Event::JoinFinished`]) as soon as it comes;
//! - the group steps that need no callback, taken while the application is away from `poll()`
//!   (see [`taken_in_background`](crate::group::step::taken_in_background)), when woken and at
//!   least every [`BACKGROUND_IDLE`].
//!
//! It owns the member ([`GroupMember`](crate::group::group_member::GroupMember)) and the
//! group coordinator it talks to, held in a [`MemberOwner`]: nothing else holds them, so no
//! lock guards them. Everyone else changes or asks
//! it by a call on the driver's mailbox ([`GroupDriver::with_member`]): the application's
//! steps in `poll()`, commits, and the join and heartbeat sub-futures of this very task (which
//! wait for the answer while the loop below runs their call). After every call the task
//! publishes the member's [`MemberView`](crate::group::group_member::MemberView), which readers
//! that need no answer read instead.
//!
//! The application's side drives the task through [`Command`]s on a second channel: start a
//! join, drop the join in flight (leaving), wake the background steps, stop. Listener callbacks
//! never run here: they stay on the thread that called `poll()` (`consumer/group.rs`).
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

pub(crate) use super::group_local::Command;
use super::group_local::{GroupLocal, MAX_STEPS_PER_POLL};
use crate::error::Result;
use crate::fetch::Shared;
use crate::group::coordinator::{GroupDriver, MemberOwner};
use crate::group::group_member::{Effect, Event};
use crate::group::step::JoinOutcome;
use crate::sync::Unpoisoned;

/// How long the task waits when nothing wakes it: a failed join is tried again after its
/// backoff, and the task notices within this that the consumer went away.
const BACKGROUND_IDLE: Duration = Duration::from_secs(1);

/// What the driver task decides about a command while a join may be in flight (`joining`): the
/// pure half of [`run`], tested from literal inputs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Start the join (replacing none: the member asks for one only when none runs).
    Start,
    /// Drop the join in flight and tell the member (`dropped`: one was in flight).
    Drop { dropped: bool },
    /// Take the background steps.
    Steps,
    /// End the task.
    End,
}

/// What a command does, given whether a join is in flight.
pub(crate) fn turn(command: &Command, joining: bool) -> Turn {
    match command {
        Command::StartJoin(_) => Turn::Start,
        Command::DropJoin(_) => Turn::Drop { dropped: joining },
        Command::Wake => Turn::Steps,
        Command::Stop => Turn::End,
    }
}

type JoinFuture = Caught<Pin<Box<dyn Future<Output = Result<JoinOutcome>> + Send>>>;

/// A sub-future whose panic ends it (`Err`) rather than the task that drives it: a defect in
/// the join must not take the heartbeat with it (as when each ran in a task of its own).
pub(crate) struct Caught<F>(F);

impl<F: Future + Unpin> Future for Caught<F> {
    type Output = std::thread::Result<F::Output>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let inner = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    }
}

/// The sending half the application's side keeps, and the task it serves: the task is spawned
/// on `runtime` and runs until [`Command::Stop`], the member closes, or the consumer goes away.
pub(super) fn spawn(
    runtime: &tokio::runtime::Handle,
    driver: Arc<GroupDriver>,
    member: MemberOwner,
    group: Weak<Mutex<Option<GroupLocal>>>,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedReceiver<Command>,
    sender: mpsc::UnboundedSender<Command>,
) {
    runtime.spawn(run(driver, member, group, shared, commands, sender));
}

/// The owner of a simple committer's member (a consumer with `assign()` and a `group.id`,
/// which never joins): it serves the calls of the commits (the coordinator found or lost, a
/// commit error judged) until the driver, and with it the calls' sender, is gone.
pub(super) fn serve(
    runtime: &tokio::runtime::Handle,
    driver: Weak<GroupDriver>,
    mut owner: MemberOwner,
) {
    runtime.spawn(async move {
        while let Some(call) = owner.calls.recv().await {
            let Some(driver) = driver.upgrade() else {
                return;
            };
            owner.serve(&driver, call);
        }
    });
}

/// The task's loop (see the module's words). `me` is the channel the task serves, to tell a
/// consumer that subscribed again (a newer task) from this one.
async fn run(
    driver: Arc<GroupDriver>,
    mut member: MemberOwner,
    group: Weak<Mutex<Option<GroupLocal>>>,
    shared: Arc<Shared>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    me: mpsc::UnboundedSender<Command>,
) {
    let mut heartbeats = Caught(Box::pin(driver.clone().heartbeat_loop()));
    let mut heartbeating = true;
    let mut join: Option<JoinFuture> = None;
    loop {
        let steps = tokio::select! {
            ended = &mut heartbeats, if heartbeating => {
                if ended.is_ok() {
                    // The heartbeat loop ends only when the member closes: so does the task.
                    return;
                }
                tracing::error!(group = %driver.group_id, "the heartbeat loop panicked; no more heartbeats are sent");
                heartbeating = false;
                false
            }
            command = commands.recv() => {
                let Some(command) = command else { return };
                match turn(&command, join.is_some()) {
                    Turn::Start => {
                        if let Command::StartJoin(input) = command {
                            join = Some(Caught(Box::pin(driver.clone().join(input))));
                        }
                        false
                    }
                    Turn::Drop { dropped } => {
                        join = None;
                        if dropped {
                            member.run(&driver, |m| m.handle(Event::JoinDropped, Instant::now()));
                        }
                        if let Command::DropJoin(answer) = command {
                            let _ = answer.send(dropped);
                        }
                        false
                    }
                    Turn::Steps => true,
                    Turn::End => return,
                }
            }
            outcome = async { join.as_mut().expect("guarded").await }, if join.is_some() => {
                join = None;
                let event = match outcome {
                    Ok(answer) => Event::JoinFinished(answer),
                    Err(_) => {
                        tracing::error!(group = %driver.group_id, "the join panicked; the member joins again");
                        Event::JoinDropped
                    }
                };
                member.run(&driver, |m| m.handle(event, Instant::now()));
                shared.data_ready.notify_all();
                true
            }
            // A call from the application's side, a commit, or the join or heartbeat above.
            // The driver holds a sender as long as the task runs: never None here.
            Some(call) = member.calls.recv() => {
                member.serve(&driver, call);
                false
            }
            () = tokio::time::sleep(BACKGROUND_IDLE) => true,
        };
        if steps && !background_steps(&group, &mut member, &shared, &me) {
            return;
        }
    }
}

/// The group steps that need no callback, taken while the application is away from `poll()`.
/// Returns false when the task has no more group to serve (the consumer went away, or
/// unsubscribed and subscribed again: a newer task serves that group).
fn background_steps(
    group: &Weak<Mutex<Option<GroupLocal>>>,
    member: &mut MemberOwner,
    shared: &Arc<Shared>,
    me: &mpsc::UnboundedSender<Command>,
) -> bool {
    let Some(group) = group.upgrade() else {
        return false;
    };
    for _ in 0..MAX_STEPS_PER_POLL {
        let mut g = group.lock().unpoisoned();
        let Some(local) = g.as_mut() else {
            return false;
        };
        if !local.commands.same_channel(me) {
            return false;
        }
        if local.driver.is_closed() {
            break;
        }
        if local.caller_steps > 0 {
            // The application's steps are under way: their end wakes this task again.
            local.background_due = true;
            break;
        }
        let driver = local.driver.clone();
        let meta = shared.cluster.metadata();
        let effect = member.run(&driver, |m| {
            m.handle(
                Event::Step {
                    meta: &meta,
                    background: true,
                },
                Instant::now(),
            )
            .pop()
            .unwrap_or(Effect::Wait)
        });
        match effect {
            Effect::StartJoin(input) => {
                if local.commands.send(Command::StartJoin(input)).is_err() {
                    // The task's own channel, closed: the consumer went away.
                    member.run(&driver, |m| m.handle(Event::JoinDropped, Instant::now()));
                }
            }
            Effect::Again => {}
            // Wait; a fatal join error is never taken here (`taken_in_background`): poll()
            // reports it.
            _ => break,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot;

    use super::*;
    use crate::group::step::JoinInput;

    fn input() -> JoinInput {
        JoinInput {
            topics: vec!["t".into()],
            regex: None,
            owned: Default::default(),
            ready: Default::default(),
            reason: "the consumer subscribed".into(),
        }
    }

    #[test]
    fn a_sub_future_that_panics_ends_alone() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let fine = rt.block_on(Caught(Box::pin(async { 7 })));
        assert_eq!(fine.ok(), Some(7));
        let panicked = rt.block_on(Caught(Box::pin(async {
            if fine_or_not() {
                panic!("a defect in the join");
            }
            7
        })));
        assert!(
            panicked.is_err(),
            "the panic ends the sub-future, not the caller"
        );
    }

    fn fine_or_not() -> bool {
        true
    }

    #[test]
    fn each_command_has_one_turn() {
        let (tx, _rx) = oneshot::channel();
        let cases: Vec<(Command, bool, Turn)> = vec![
            (Command::StartJoin(input()), false, Turn::Start),
            (Command::DropJoin(tx), true, Turn::Drop { dropped: true }),
            (Command::Wake, true, Turn::Steps),
            (Command::Wake, false, Turn::Steps),
            (Command::Stop, true, Turn::End),
        ];
        for (command, joining, expected) in cases {
            assert_eq!(turn(&command, joining), expected, "{command:?}");
        }
        let (tx, _rx) = oneshot::channel();
        assert_eq!(
            turn(&Command::DropJoin(tx), false),
            Turn::Drop { dropped: false },
            "no join in flight: the member is told nothing"
        );
    }
}
