//! The sender: the task that drains ready batches, groups them by leader into Produce requests
//! and completes each record's delivery from the broker's answer.
use super::*;

use tokio::sync::mpsc;

use crate::protocol::wire::ALL_VERSIONS;

/// One Produce request being assembled.
pub(super) struct RequestPlan {
    pub(super) leader: i32,
    pub(super) permit: OwnedSemaphorePermit,
    pub(super) bytes: usize,
    pub(super) batches: Vec<Sealed>,
}

pub(super) async fn sender_loop(shared: Arc<Shared>) {
    let mut permits: HashMap<i32, Arc<Semaphore>> = HashMap::new();
    // One dispatcher per leader writes its requests in the order they were planned: the
    // batches of one partition must reach the broker in sequence order.
    let mut dispatchers: HashMap<i32, mpsc::UnboundedSender<RequestPlan>> = HashMap::new();
    let max_in_flight = shared.config.max_in_flight_requests_per_connection;
    let max_request = shared.config.max_request_size;
    loop {
        let closing = shared.closed.load(Ordering::Acquire);
        let force = closing || shared.flushing.load(Ordering::Acquire) > 0;
        let meta = shared.cluster.metadata();
        let now = Instant::now();
        let mut plans: Vec<RequestPlan> = Vec::new();
        // leader -> index in `plans` of its request still taking batches
        let mut open_plan: HashMap<i32, usize> = HashMap::new();
        let (drained, init_error) = {
            let mut acc = lock(&shared.acc);
            let drained = acc.drain(
                now,
                force,
                shared.config.delivery_timeout,
                |t, p| {
                    meta.partition(t, p)
                        .map(|i| i.leader)
                        .filter(|l| *l >= 0 && meta.brokers.contains_key(l))
                },
                |leader, size| {
                    if let Some(&i) = open_plan.get(&leader) {
                        if plans[i].bytes + size <= max_request {
                            plans[i].bytes += size;
                            return Some(i);
                        }
                    }
                    let sem = permits
                        .entry(leader)
                        .or_insert_with(|| Arc::new(Semaphore::new(max_in_flight)));
                    let permit = sem.clone().try_acquire_owned().ok()?;
                    plans.push(RequestPlan {
                        leader,
                        permit,
                        bytes: size,
                        batches: Vec::new(),
                    });
                    open_plan.insert(leader, plans.len() - 1);
                    Some(plans.len() - 1)
                },
            );
            let init_error = acc.idem.as_ref().and_then(|i| i.init_error.clone());
            (drained, init_error)
        };
        for d in drained.expired {
            let mut pending = match d {
                Drained::Open(b, _) => b.pending,
                Drained::Sealed(s) => s.pending,
            };
            let mut e = format!(
                "{} records for {}-{} were not delivered within delivery.timeout.ms ({} ms)",
                pending.entries.len(),
                pending.topic,
                pending.partition,
                shared.config.delivery_timeout.as_millis()
            );
            if let Some(why) = &init_error {
                e.push_str(&format!("; the producer got no producer id: {why}"));
            }
            let e = Error::Timeout(e);
            batch_failed(&shared, &e);
            pending.fail(e);
        }
        for (d, e) in drained.fatal {
            let mut pending = match d {
                Drained::Open(b, _) => b.pending,
                Drained::Sealed(s) => s.pending,
            };
            batch_failed(&shared, &e);
            pending.fail(e);
        }
        for (_, slot, d) in drained.batches {
            let sealed = match d {
                Drained::Sealed(s) => Some(s),
                Drained::Open(b, seq) => {
                    let OpenBatch {
                        builder,
                        mut pending,
                        created,
                        ..
                    } = b;
                    let data = builder.finish().and_then(|data| match &seq {
                        Some(s) if shared.txn.is_some() => {
                            set_transactional_state(&data, s.pid.id, s.pid.epoch, s.base)
                        }
                        Some(s) => set_producer_state(&data, s.pid.id, s.pid.epoch, s.base),
                        None => Ok(data),
                    });
                    match data {
                        Ok(data) => Some(Sealed {
                            data,
                            pending,
                            created,
                            retry: Retry::new(shared.cluster.backoff()),
                            seq,
                            retry_at: None,
                        }),
                        Err(e) => {
                            let (t, p) = (pending.topic.clone(), pending.partition);
                            pending.fail(e);
                            let mut acc = lock(&shared.acc);
                            acc.done(&t, p);
                            // Its sequences are lost: the partition restarts after it.
                            if let (Some(s), Some(q)) = (&seq, acc.partition_mut(&t, p)) {
                                q.seq.failed(s);
                            }
                            None
                        }
                    }
                }
            };
            if let Some(s) = sealed {
                plans[slot].batches.push(s);
            }
        }
        for plan in plans {
            if plan.batches.is_empty() {
                continue;
            }
            let leader = plan.leader;
            let tx = dispatchers
                .entry(leader)
                .or_insert_with(|| dispatcher(shared.clone(), leader));
            if let Err(mpsc::error::SendError(plan)) = tx.send(plan) {
                // The runtime is stopping; settle here (dropping the plan fails its records).
                drop(plan);
            }
        }
        // A transactional producer gets its id from init_transactions.
        if drained.need_producer_id && !closing && shared.txn.is_none() {
            init_producer_id(&shared);
        }
        if !drained.need_add.is_empty() && !closing {
            add_partitions(&shared, drained.need_add);
        }
        if drained.need_metadata {
            shared.refresh_wanted.store(true, Ordering::Release);
        }
        let age = meta
            .fetched_at
            .map(|t| now.saturating_duration_since(t))
            .unwrap_or(Duration::ZERO);
        if age >= shared.config.common.metadata_max_age && meta.fetched_at.is_some() {
            shared.refresh_wanted.store(true, Ordering::Release);
        }
        maybe_refresh(&shared);
        let mut wake_at = now + Duration::from_secs(1);
        if let Some(t) = drained.next_wake {
            wake_at = wake_at.min(t.max(now + Duration::from_millis(1)));
        }
        if drained.need_metadata {
            // Poll for the new leader no more often than retry.backoff.ms.
            wake_at = wake_at.min(now + shared.config.common.retry_backoff);
        }
        if drained.again {
            wake_at = now;
        }
        tokio::select! {
            _ = shared.wake.notified() => {}
            _ = tokio::time::sleep_until(wake_at.into()) => {}
        }
    }
}

/// The task that writes the requests for broker `leader`, one after the other in the order it
/// gets them, and hands each answer to a task of its own.
fn dispatcher(shared: Arc<Shared>, leader: i32) -> mpsc::UnboundedSender<RequestPlan> {
    let (tx, mut rx) = mpsc::unbounded_channel::<RequestPlan>();
    tokio::spawn(async move {
        while let Some(plan) = rx.recv().await {
            let acks = shared.config.acks;
            let timeout_ms = shared
                .config
                .common
                .request_timeout
                .as_millis()
                .min(i32::MAX as u128) as i32;
            let req = crate::protocol::produce::produce(
                shared.config.transactional_id.as_deref(),
                acks,
                timeout_ms,
                plan.batches
                    .iter()
                    .map(|b| (&*b.pending.topic, b.pending.partition, &b.data)),
            );
            // A transactional Produce's version says whether it adds its partitions to the
            // transaction (KIP-890): the producer's transaction protocol chooses.
            let versions = shared
                .txn
                .as_ref()
                .map_or(ALL_VERSIONS, |t| lock(t).protocol.produce());
            let conn = shared
                .cluster
                .broker(
                    leader,
                    Deadline::after(shared.config.common.request_timeout),
                )
                .await;
            let sent = conn.and_then(|conn| {
                if acks == 0 {
                    conn.send_no_response(&req, versions)?;
                    return Ok(None);
                }
                conn.send_now(&req, versions).map(Some)
            });
            let shared = shared.clone();
            match sent {
                Ok(Some(answer)) => {
                    tokio::spawn(async move { settle(shared, plan, answer.await.map(Some)).await });
                }
                Ok(None) => settle(shared, plan, Ok(None)).await,
                Err(e) => settle(shared, plan, Err(e)).await,
            }
        }
    });
    tx
}

/// Asks for a producer id (InitProducerId) in the background, unless that is under way: with
/// the one backoff until `delivery.timeout.ms`. A refusal that is not retriable (not
/// authorized, a broker without idempotence) is the producer's fatal error.
pub(super) fn init_producer_id(shared: &Arc<Shared>) {
    if shared.initializing.swap(true, Ordering::AcqRel) {
        return;
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        let deadline = Deadline::after(shared.config.delivery_timeout);
        let request_timeout = shared.config.common.request_timeout;
        let cluster = shared.cluster.clone();
        let r = crate::backoff::retry_until(cluster.backoff(), deadline, "InitProducerId", || {
            let cluster = cluster.clone();
            async move {
                let conn = cluster
                    .any_broker(Deadline::after(request_timeout.min(deadline.remaining())))
                    .await?;
                let resp = conn
                    .call_before(&crate::protocol::produce::init_producer_id(), deadline)
                    .await?;
                if resp.error_code != codes::NONE {
                    return Err(init_producer_id_error(resp.error_code));
                }
                Ok(ProducerIdEpoch {
                    id: resp.producer_id.0,
                    epoch: resp.producer_epoch,
                })
            }
        })
        .await;
        {
            let mut acc = lock(&shared.acc);
            if let Some(idem) = &mut acc.idem {
                match r {
                    Ok(pid) => {
                        tracing::debug!(
                            producer_id = pid.id,
                            epoch = pid.epoch,
                            "idempotent producer initialised"
                        );
                        idem.pid = Some(pid);
                        idem.init_error = None;
                    }
                    Err(e) if e.is_retriable() => {
                        tracing::debug!(error = %e, "InitProducerId failed; will ask again");
                        idem.init_error = Some(e);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the idempotent producer can not go on");
                        idem.fatal = Some(e);
                    }
                }
            }
        }
        shared.initializing.store(false, Ordering::Release);
        shared.wake.notify_one();
    });
}

/// The error of an InitProducerId refused with `code`.
fn init_producer_id_error(code: i16) -> Error {
    let why = if code == produce_codes::CLUSTER_AUTHORIZATION_FAILED {
        ": the producer is not authorized to do idempotent sends (it needs IDEMPOTENT_WRITE on \
         the cluster, or WRITE on a topic); set enable.idempotence=false to produce without it"
    } else {
        ""
    };
    Error::kafka(
        code,
        format!("InitProducerId of the idempotent producer (enable.idempotence=true){why}"),
    )
}

/// Starts a metadata refresh in the background when one was asked for and none is running.
pub(super) fn maybe_refresh(shared: &Arc<Shared>) {
    if !shared.refresh_wanted.load(Ordering::Acquire) {
        return;
    }
    if shared.refreshing.swap(true, Ordering::AcqRel) {
        return;
    }
    shared.refresh_wanted.store(false, Ordering::Release);
    let shared = shared.clone();
    tokio::spawn(async move {
        let deadline = Deadline::after(shared.config.common.request_timeout);
        if let Err(e) = shared.cluster.refresh(&[], deadline).await {
            tracing::debug!(error = %e, "producer metadata refresh failed");
        }
        // Do not hammer the cluster when leaders are missing for a while.
        tokio::time::sleep(shared.config.common.retry_backoff).await;
        shared.refreshing.store(false, Ordering::Release);
        shared.wake.notify_one();
    });
}

pub(super) enum Outcome {
    Done { base_offset: i64, append_time: i64 },
    Retry { error: Error, refresh: bool },
    Fail(Error),
}

/// One batch's part of a Produce answer, before the decision.
struct BatchAnswer {
    answer: Answer,
    /// The error the answer means (for a code other than NONE, or no answer).
    error: Option<Error>,
    base_offset: i64,
    append_time: i64,
    log_start_offset: i64,
}

/// Settles each batch of a Produce request from its answer (`None` with acks=0).
pub(super) async fn settle(
    shared: Arc<Shared>,
    plan: RequestPlan,
    result: Result<Option<crate::protocol::msg::ProduceResponse>>,
) {
    let RequestPlan {
        leader,
        permit,
        batches,
        ..
    } = plan;
    let answers: Vec<BatchAnswer> = batches
        .iter()
        .map(|b| batch_answer(leader, b, &result))
        .collect();
    // Settle under the lock (in-flight counts, sequences, retries), complete outside it:
    // callbacks may send.
    let mut finished: Vec<(Pending, BatchOutcome)> = Vec::new();
    let mut refresh = false;
    {
        let now = Instant::now();
        let closed = shared.closed.load(Ordering::Acquire);
        let delivery_timeout = shared.config.delivery_timeout;
        let mut acc = lock(&shared.acc);
        for (mut b, a) in batches.into_iter().zip(answers) {
            let (topic, p) = (b.pending.topic.clone(), b.pending.partition);
            acc.done(&topic, p);
            let timed_out = closed || now >= b.created + delivery_timeout;
            let timeout_error = |error: &Error| {
                Error::Timeout(format!(
                    "{} records for {topic}-{p} were not delivered within delivery.timeout.ms ({} ms); last error: {error}",
                    b.pending.entries.len(),
                    delivery_timeout.as_millis()
                ))
            };
            let result = match b.seq {
                Some(seq) => {
                    let Some(q) = acc.partition_mut(&topic, p) else {
                        continue;
                    };
                    let verdict = on_answer(AnswerView {
                        answer: a.answer,
                        batch: seq,
                        is_next: q.seq.is_next(seq.base),
                        unresolved: q.seq.unresolved,
                        log_start_offset: a.log_start_offset,
                        timed_out,
                    });
                    let code = a.answer_code();
                    let error = a
                        .error
                        .unwrap_or_else(|| Error::kafka_partition(code, "producing", &topic, p));
                    match verdict {
                        Verdict::Done { duplicate } => {
                            q.seq.acknowledged(&seq);
                            if duplicate {
                                Ok((-1, -1))
                            } else {
                                Ok((a.base_offset, a.append_time))
                            }
                        }
                        // A transaction can not restart a partition's sequences under a
                        // new epoch of its own: the batch fails, the transaction must be
                        // aborted, and the abort bumps the epoch at the coordinator.
                        Verdict::Retry { bump: true, .. } if shared.txn.is_some() => {
                            q.seq.failed(&seq);
                            Err(Error::TransactionAbortable(format!(
                                "producing to {topic}-{p}: {error}"
                            )))
                        }
                        Verdict::Retry { bump, refresh: r } => {
                            refresh |= r;
                            if bump {
                                tracing::info!(error = %error, "sequences of {topic}-{p} restart under a new epoch");
                                q.seq.rewrite = true;
                            }
                            tracing::debug!(error = %error, "produce to {topic}-{p} failed; retrying");
                            let wait = b.retry.failed();
                            let at = (now + wait).min(b.created + delivery_timeout);
                            acc.requeue(b, at);
                            continue;
                        }
                        Verdict::Fail => {
                            q.seq.failed(&seq);
                            Err(
                                if timed_out
                                    && !matches!(a.answer, Answer::Lost { retriable: false })
                                {
                                    timeout_error(&error)
                                } else {
                                    error
                                },
                            )
                        }
                        Verdict::Fatal => {
                            q.seq.unfinished.remove(&seq.base);
                            if let Some(idem) = &mut acc.idem {
                                idem.fatal.get_or_insert_with(|| error.clone());
                            }
                            Err(error)
                        }
                    }
                }
                None => match plain_outcome(a) {
                    Outcome::Done {
                        base_offset,
                        append_time,
                    } => Ok((base_offset, append_time)),
                    Outcome::Fail(e) => Err(e),
                    Outcome::Retry { error, refresh: r } => {
                        refresh |= r;
                        if !timed_out {
                            tracing::debug!(error = %error, "produce to {topic}-{p} failed; retrying");
                            let wait = b.retry.failed();
                            let at = (now + wait).min(b.created + delivery_timeout);
                            acc.requeue(b, at);
                            continue;
                        }
                        Err(timeout_error(&error))
                    }
                },
            };
            let pending = std::mem::replace(
                &mut b.pending,
                Pending::new(shared.counters.clone(), topic, p),
            );
            finished.push((pending, result));
        }
    }
    drop(permit);
    if refresh {
        shared.refresh_wanted.store(true, Ordering::Release);
    }
    shared.wake.notify_one();
    for (mut pending, result) in finished {
        if let Err(e) = &result {
            batch_failed(&shared, e);
        }
        pending.complete(result);
    }
}

impl BatchAnswer {
    fn answer_code(&self) -> i16 {
        match self.answer {
            Answer::Code(c) => c,
            Answer::Lost { .. } => -1,
        }
    }
}

/// What the answer (or its absence) says about batch `b`.
fn batch_answer(
    leader: i32,
    b: &Sealed,
    result: &Result<Option<crate::protocol::msg::ProduceResponse>>,
) -> BatchAnswer {
    let (topic, p) = (&*b.pending.topic, b.pending.partition);
    let lost = |retriable: bool, error: Error| BatchAnswer {
        answer: Answer::Lost { retriable },
        error: Some(error),
        base_offset: -1,
        append_time: -1,
        log_start_offset: -1,
    };
    match result {
        // Connection trouble is retried (after a metadata refresh: the leader may have moved);
        // a broker too old for lagless or an undecodable answer is not.
        Err(e) => {
            let e = match e {
                Error::Kafka { code, context, .. } => {
                    Error::kafka_partition(*code, context.clone(), topic, p)
                }
                other => other.clone(),
            };
            lost(e.is_retriable(), e)
        }
        Ok(None) => BatchAnswer {
            answer: Answer::Code(codes::NONE),
            error: None,
            base_offset: -1,
            append_time: -1,
            log_start_offset: -1,
        },
        Ok(Some(resp)) => {
            let pr = resp
                .responses
                .iter()
                .filter(|t| t.name.0.as_str() == topic)
                .flat_map(|t| t.partition_responses.iter())
                .find(|r| r.index == p);
            let Some(pr) = pr else {
                return lost(
                    true,
                    Error::Corrupt(format!(
                        "the Produce response of broker {leader} has no answer for {topic}-{p}"
                    )),
                );
            };
            let error = (pr.error_code != codes::NONE).then(|| {
                let mut context = format!("producing to broker {leader}");
                if let Some(m) = &pr.error_message {
                    context.push_str(": ");
                    context.push_str(m.as_str());
                }
                Error::kafka_partition(pr.error_code, context, topic, p)
            });
            BatchAnswer {
                answer: Answer::Code(pr.error_code),
                error,
                base_offset: pr.base_offset,
                append_time: pr.log_append_time_ms,
                log_start_offset: pr.log_start_offset,
            }
        }
    }
}

/// A plain (not idempotent) producer's outcome of one batch.
fn plain_outcome(a: BatchAnswer) -> Outcome {
    match (a.answer, a.error) {
        (Answer::Code(codes::NONE), _) => Outcome::Done {
            base_offset: a.base_offset,
            append_time: a.append_time,
        },
        (Answer::Lost { retriable: true }, Some(error)) => Outcome::Retry {
            error,
            refresh: true,
        },
        // A missing partition answer (the only Lost without refresh in the past) is retried too.
        (Answer::Lost { .. }, Some(error)) => Outcome::Fail(error),
        (Answer::Code(code), error) => {
            let error = error.unwrap_or_else(|| Error::kafka(code, "producing"));
            match kafka_error_action(code) {
                Action::Retry => Outcome::Retry {
                    error,
                    refresh: false,
                },
                Action::RefreshMetadata => Outcome::Retry {
                    error,
                    refresh: true,
                },
                _ => Outcome::Fail(error),
            }
        }
        (Answer::Lost { .. }, None) => Outcome::Fail(Error::Transport("no answer".into())),
    }
}
