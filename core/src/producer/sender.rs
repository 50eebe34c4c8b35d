//! The sender: the task that drains ready batches, groups them by leader into Produce requests
//! and completes each record's delivery from the broker's answer.
use super::*;

/// One Produce request being assembled.
pub(super) struct RequestPlan {
    pub(super) leader: i32,
    pub(super) permit: OwnedSemaphorePermit,
    pub(super) bytes: usize,
    pub(super) batches: Vec<Sealed>,
}

pub(super) async fn sender_loop(shared: Arc<Shared>) {
    let mut permits: HashMap<i32, Arc<Semaphore>> = HashMap::new();
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
        let drained = {
            let mut acc = lock(&shared.acc);
            acc.drain(
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
            )
        };
        for d in drained.expired {
            let mut pending = match d {
                Drained::Open(b) => b.pending,
                Drained::Sealed(s) => s.pending,
            };
            let e = Error::Timeout(format!(
                "{} records for {}-{} were not delivered within delivery.timeout.ms ({} ms)",
                pending.entries.len(),
                pending.topic,
                pending.partition,
                shared.config.delivery_timeout.as_millis()
            ));
            pending.fail(e);
        }
        for (_, slot, d) in drained.batches {
            let sealed = match d {
                Drained::Sealed(s) => Some(s),
                Drained::Open(b) => {
                    let OpenBatch {
                        builder,
                        mut pending,
                        created,
                        ..
                    } = b;
                    match builder.finish() {
                        Ok(data) => Some(Sealed {
                            data,
                            pending,
                            created,
                            retry: Retry::new(shared.cluster.backoff()),
                        }),
                        Err(e) => {
                            let (t, p) = (pending.topic.clone(), pending.partition);
                            pending.fail(e);
                            lock(&shared.acc).done(&t, p);
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
            tokio::spawn(produce(shared.clone(), plan));
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
        tokio::select! {
            _ = shared.wake.notified() => {}
            _ = tokio::time::sleep_until(wake_at.into()) => {}
        }
    }
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

/// Sends one Produce request and settles each of its batches.
pub(super) async fn produce(shared: Arc<Shared>, plan: RequestPlan) {
    let RequestPlan {
        leader,
        permit,
        batches,
        ..
    } = plan;
    let acks = shared.config.acks;
    let timeout_ms = shared
        .config
        .common
        .request_timeout
        .as_millis()
        .min(i32::MAX as u128) as i32;
    let req = crate::protocol::produce::produce(
        acks,
        timeout_ms,
        batches
            .iter()
            .map(|b| (&*b.pending.topic, b.pending.partition, &b.data)),
    );
    let result = async {
        let conn = shared
            .cluster
            .broker(
                leader,
                Deadline::after(shared.config.common.request_timeout),
            )
            .await?;
        if acks == 0 {
            conn.send_no_response(&req)?;
            return Ok(None);
        }
        conn.call(&req).await.map(Some)
    }
    .await;
    let outcomes: Vec<Outcome> = match result {
        // Connection trouble is retried (after a metadata refresh: the leader may have moved);
        // a broker too old for lagless or an undecodable answer is not.
        Err(e) => batches
            .iter()
            .map(|b| {
                if e.is_retriable() {
                    Outcome::Retry {
                        error: e.clone(),
                        refresh: true,
                    }
                } else {
                    Outcome::Fail(match &e {
                        Error::Kafka { code, context, .. } => Error::kafka_partition(
                            *code,
                            context.clone(),
                            &b.pending.topic,
                            b.pending.partition,
                        ),
                        other => other.clone(),
                    })
                }
            })
            .collect(),
        Ok(None) => batches
            .iter()
            .map(|_| Outcome::Done {
                base_offset: -1,
                append_time: -1,
            })
            .collect(),
        Ok(Some(resp)) => batches
            .iter()
            .map(|b| {
                let (topic, p) = (&*b.pending.topic, b.pending.partition);
                let pr = resp
                    .responses
                    .iter()
                    .filter(|t| t.name.0.as_str() == topic)
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|r| r.index == p);
                let Some(pr) = pr else {
                    return Outcome::Retry {
                        error: Error::Corrupt(format!(
                            "the Produce response of broker {leader} has no answer for {topic}-{p}"
                        )),
                        refresh: false,
                    };
                };
                if pr.error_code == codes::NONE {
                    return Outcome::Done {
                        base_offset: pr.base_offset,
                        append_time: pr.log_append_time_ms,
                    };
                }
                let mut context = format!("producing to broker {leader}");
                if let Some(m) = &pr.error_message {
                    context.push_str(": ");
                    context.push_str(m.as_str());
                }
                let error = Error::kafka_partition(pr.error_code, context, topic, p);
                match kafka_error_action(pr.error_code) {
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
            })
            .collect(),
    };
    // Settle under the lock (in-flight flags, retries), complete outside it: callbacks may send.
    let mut finished: Vec<(Pending, BatchOutcome)> = Vec::new();
    let mut refresh = false;
    {
        let now = Instant::now();
        let mut acc = lock(&shared.acc);
        for (mut b, outcome) in batches.into_iter().zip(outcomes) {
            let (topic, p) = (b.pending.topic.clone(), b.pending.partition);
            acc.done(&topic, p);
            let result = match outcome {
                Outcome::Done {
                    base_offset,
                    append_time,
                } => Ok((base_offset, append_time)),
                Outcome::Fail(e) => Err(e),
                Outcome::Retry { error, refresh: r } => {
                    refresh |= r;
                    if now < b.created + shared.config.delivery_timeout
                        && !shared.closed.load(Ordering::Acquire)
                    {
                        tracing::debug!(error = %error, "produce to {topic}-{p} failed; retrying");
                        let wait = b.retry.failed();
                        let at = (now + wait).min(b.created + shared.config.delivery_timeout);
                        acc.requeue(b, at);
                        continue;
                    }
                    Err(Error::Timeout(format!(
                        "{} records for {topic}-{p} were not delivered within delivery.timeout.ms ({} ms); last error: {error}",
                        b.pending.entries.len(),
                        shared.config.delivery_timeout.as_millis()
                    )))
                }
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
        pending.complete(result);
    }
}
