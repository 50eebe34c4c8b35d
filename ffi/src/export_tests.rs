//! The exports' argument handling, through the exports themselves and without a broker: a NULL
//! handle or out-parameter gives `LAGLESS_ERR_INVALID_ARGUMENT` naming the parameter, a closed
//! consumer `LAGLESS_ERR_CLOSED`, an accessor of NULL its documented value, a `_destroy` of NULL
//! nothing; out-parameters are written only on success.
use std::ffi::{c_char, CStr};
use std::ptr::{null, null_mut, NonNull};

use crate::*;

/// The code and message of `e`, which is then freed; (0, "") for success.
fn outcome(e: *mut lagless_error) -> (i32, String) {
    // SAFETY: NULL or an error lagless returned, not yet destroyed.
    let msg = unsafe { CStr::from_ptr(lagless_error_message(e)) }
        .to_string_lossy()
        .into_owned();
    let code = lagless_error_code(e);
    lagless_error_destroy(e);
    (code, msg)
}

fn ok(e: *mut lagless_error) {
    assert_eq!(outcome(e), (0, String::new()));
}

/// A consumer of a cluster nobody listens at: nothing here needs a connection.
fn consumer(extra: &[(&CStr, &CStr)]) -> *mut lagless_consumer {
    let config = lagless_config_new();
    ok(lagless_config_set(
        config,
        c"bootstrap.servers".as_ptr(),
        c"127.0.0.1:9".as_ptr(),
    ));
    for (k, v) in extra {
        ok(lagless_config_set(config, k.as_ptr(), v.as_ptr()));
    }
    let mut c = null_mut();
    ok(lagless_consumer_new(config, &mut c));
    lagless_config_destroy(config);
    assert!(!c.is_null());
    c
}

/// A pointer no export may write: outputs are written only on success.
fn untouched<T>() -> *mut T {
    NonNull::dangling().as_ptr()
}

#[test]
fn the_poll_exports_name_a_null_argument_and_a_zero_capacity() {
    let c = consumer(&[]);
    let mut m = untouched();
    let mut slots = [untouched(); 4];
    let mut n = 99usize;
    let mut b = untouched();
    let s = slots.as_mut_ptr();
    let mut cases = vec![
        (
            lagless_consumer_poll(null_mut(), 0, &mut m),
            "`consumer` is NULL",
        ),
        (
            lagless_consumer_poll(c, 0, null_mut()),
            "`out_message` is NULL",
        ),
    ];
    // `_poll_batch` and `_recovery_poll` take the same arguments and check them the same way.
    type PollInto = extern "C" fn(
        *mut lagless_consumer,
        i32,
        *mut *mut lagless_message,
        usize,
        *mut usize,
    ) -> *mut lagless_error;
    for poll_into in [
        lagless_consumer_poll_batch as PollInto,
        lagless_consumer_recovery_poll,
    ] {
        cases.extend([
            (poll_into(null_mut(), 0, s, 4, &mut n), "`consumer` is NULL"),
            (
                poll_into(c, 0, null_mut(), 4, &mut n),
                "`out_messages` is NULL",
            ),
            (poll_into(c, 0, s, 4, null_mut()), "`out_count` is NULL"),
            (poll_into(c, 0, s, 0, &mut n), "`capacity` is 0"),
        ]);
    }
    cases.extend([
        (
            lagless_consumer_consume_batch(null_mut(), 4, 0, &mut b),
            "`consumer` is NULL",
        ),
        (
            lagless_consumer_consume_batch(c, 4, 0, null_mut()),
            "`out_batch` is NULL",
        ),
        (
            lagless_consumer_consume_batch(c, 0, 0, &mut b),
            "`max` is 0",
        ),
    ]);
    for (i, (e, want)) in cases.into_iter().enumerate() {
        let (code, msg) = outcome(e);
        assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT, "case {i}: {msg}");
        assert!(
            msg.contains(want),
            "case {i}: {msg:?} does not say {want:?}"
        );
    }
    assert_eq!((m, n, b), (untouched(), 99, untouched()));
    assert!(slots.iter().all(|p| *p == untouched()));
    lagless_consumer_destroy(c);
}

#[test]
fn the_poll_exports_of_a_closed_consumer_give_closed_and_write_nothing() {
    let c = consumer(&[]);
    ok(lagless_consumer_close(c, 0));
    ok(lagless_consumer_close(c, 0));
    let mut m = untouched();
    let mut slots = [untouched(); 2];
    let mut n = 99usize;
    let mut b = untouched();
    let s = slots.as_mut_ptr();
    for (i, e) in [
        lagless_consumer_poll(c, 0, &mut m),
        lagless_consumer_poll_batch(c, 0, s, 2, &mut n),
        lagless_consumer_recovery_poll(c, 0, s, 2, &mut n),
        lagless_consumer_consume_batch(c, 2, 0, &mut b),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(outcome(e).0, LAGLESS_ERR_CLOSED, "case {i}");
    }
    assert_eq!((m, n, b), (untouched(), 99, untouched()));
    assert!(slots.iter().all(|p| *p == untouched()));
    lagless_consumer_destroy(c);
}

#[test]
fn a_poll_that_times_out_hands_out_nothing_in_each_shape() {
    let c = consumer(&[]);
    let mut m = untouched();
    ok(lagless_consumer_poll(c, 0, &mut m));
    assert!(m.is_null());
    let mut slots = [untouched(); 2];
    let mut n = 99usize;
    ok(lagless_consumer_poll_batch(
        c,
        0,
        slots.as_mut_ptr(),
        2,
        &mut n,
    ));
    assert_eq!(n, 0);
    let mut b = null_mut();
    ok(lagless_consumer_consume_batch(c, 2, 0, &mut b));
    assert!(!b.is_null());
    assert_eq!(lagless_batch_count(b), 0);
    lagless_batch_destroy(b);
    lagless_consumer_destroy(c);
}

#[test]
fn recovery_poll_needs_its_setting_and_otherwise_times_out_empty() {
    let c = consumer(&[]);
    let mut slots = [untouched(); 2];
    let mut n = 99usize;
    let (code, msg) = outcome(lagless_consumer_recovery_poll(
        c,
        0,
        slots.as_mut_ptr(),
        2,
        &mut n,
    ));
    assert_eq!(code, LAGLESS_ERR_ILLEGAL_STATE, "{msg}");
    assert_eq!(n, 99);
    lagless_consumer_destroy(c);

    let c = consumer(&[
        (c"enable.parallel.rebalance", c"true"),
        (c"parallel.rebalance.recovery.poll", c"true"),
    ]);
    ok(lagless_consumer_recovery_poll(
        c,
        0,
        slots.as_mut_ptr(),
        2,
        &mut n,
    ));
    assert_eq!(n, 0);
    lagless_consumer_destroy(c);
}

/// Every fallible export that takes a handle names it when it is NULL, before touching anything
/// else.
#[test]
fn every_fallible_export_names_a_null_handle() {
    let mut p = untouched();
    let mut producer_out = untouched();
    let mut i32_out = 7i32;
    let mut i64_out = 7i64;
    let mut usize_out = 7usize;
    let mut bool_out = true;
    let mut list = untouched();
    let mut s = untouched::<c_char>();
    let mut cs = null::<c_char>();
    let mut bs = null::<u8>();
    let t = c"t".as_ptr();
    let consumer = null_mut::<lagless_consumer>();
    let producer = null_mut::<lagless_producer>();
    let mut gm = untouched();
    let cases = [
        (lagless_config_set(null_mut(), t, t), "config"),
        (lagless_config_get(null(), t, &mut s), "config"),
        (lagless_config_dump(null(), &mut s), "config"),
        (
            lagless_config_set_oauthbearer_token_cb(null_mut(), None, null_mut()),
            "config",
        ),
        (lagless_consumer_new(null(), &mut p), "config"),
        (lagless_producer_new(null(), &mut producer_out), "config"),
        (
            lagless_consumer_subscribe(consumer, &t, 1, null()),
            "consumer",
        ),
        (
            lagless_consumer_subscribe_pattern(consumer, t, null()),
            "consumer",
        ),
        (
            lagless_consumer_subscribe_regex(consumer, t, null()),
            "consumer",
        ),
        (
            lagless_consumer_subscription(consumer, &mut list),
            "consumer",
        ),
        (
            lagless_consumer_group_metadata(consumer, &mut i32_out, &mut s),
            "consumer",
        ),
        (
            lagless_consumer_enforce_rebalance(consumer, null()),
            "consumer",
        ),
        (
            lagless_consumer_set_learning_callback(consumer, None, null_mut()),
            "consumer",
        ),
        (lagless_consumer_assign(consumer, null()), "consumer"),
        (lagless_consumer_assignment(consumer, &mut list), "consumer"),
        (lagless_consumer_unsubscribe(consumer), "consumer"),
        (
            lagless_consumer_commit_sync(consumer, null(), 0),
            "consumer",
        ),
        (
            lagless_consumer_commit_async(consumer, null(), None, null_mut()),
            "consumer",
        ),
        (
            lagless_consumer_committed(consumer, null_mut(), 0),
            "consumer",
        ),
        (
            lagless_consumer_position(consumer, t, 0, 0, &mut i64_out),
            "consumer",
        ),
        (
            lagless_consumer_recovery_active(consumer, t, 0, &mut bool_out),
            "consumer",
        ),
        (lagless_consumer_seek(consumer, t, 0, 0), "consumer"),
        (
            lagless_consumer_seek_to_beginning(consumer, null()),
            "consumer",
        ),
        (lagless_consumer_seek_to_end(consumer, null()), "consumer"),
        (
            lagless_consumer_offsets_for_times(consumer, null_mut(), 0),
            "consumer",
        ),
        (
            lagless_consumer_watermarks(consumer, t, 0, 0, &mut i64_out, &mut i64_out),
            "consumer",
        ),
        (
            lagless_consumer_partitions_for(consumer, t, 0, &mut list),
            "consumer",
        ),
        (lagless_consumer_paused(consumer, &mut list), "consumer"),
        (lagless_consumer_pause(consumer, null()), "consumer"),
        (lagless_consumer_resume(consumer, null()), "consumer"),
        (
            lagless_consumer_learner_ready(consumer, null(), &mut usize_out),
            "consumer",
        ),
        (
            lagless_consumer_prepare_to_leave(consumer, &mut bool_out),
            "consumer",
        ),
        (lagless_consumer_wakeup(consumer), "consumer"),
        (lagless_consumer_close(consumer, 0), "consumer"),
        (
            lagless_producer_send_sync(
                producer,
                t,
                -1,
                null(),
                0,
                null(),
                0,
                null_mut(),
                null_mut(),
            ),
            "producer",
        ),
        (
            lagless_producer_send(producer, t, -1, null(), 0, null(), 0, None, null_mut()),
            "producer",
        ),
        (
            lagless_producer_send_with_headers(
                producer,
                t,
                -1,
                null(),
                0,
                null(),
                0,
                null(),
                0,
                -1,
                None,
                null_mut(),
            ),
            "producer",
        ),
        (
            lagless_producer_poll(producer, 0, &mut usize_out),
            "producer",
        ),
        (lagless_producer_flush(producer, 0), "producer"),
        (lagless_producer_close(producer, 0), "producer"),
        (lagless_producer_init_transactions(producer, 0), "producer"),
        (lagless_producer_begin_transaction(producer), "producer"),
        (lagless_producer_commit_transaction(producer, 0), "producer"),
        (lagless_producer_abort_transaction(producer, 0), "producer"),
        (
            lagless_producer_send_offsets_to_transaction(producer, null(), null(), 0),
            "producer",
        ),
        (
            lagless_consumer_group_metadata_handle(consumer, &mut gm),
            "consumer",
        ),
        (lagless_tplist_add(null_mut(), t, 0), "list"),
        (
            lagless_tplist_get(null(), 0, &mut cs, &mut i32_out, &mut i64_out),
            "list",
        ),
        (lagless_tplist_set_offset(null_mut(), 0, 0), "list"),
        (lagless_tplist_set_metadata(null_mut(), 0, t), "list"),
        (lagless_tplist_get_metadata(null(), 0, &mut cs), "list"),
        (
            lagless_message_header_get(null(), 0, &mut cs, &mut usize_out, &mut bs, &mut usize_out),
            "message",
        ),
    ];
    for (i, (e, name)) in cases.into_iter().enumerate() {
        let (code, msg) = outcome(e);
        assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT, "case {i}: {msg}");
        assert!(
            msg.contains(&format!("`{name}` is NULL")),
            "case {i}: {msg:?} does not name `{name}`"
        );
    }
    assert_eq!((i32_out, i64_out, usize_out, bool_out), (7, 7, 7, true));
    assert_eq!(
        (p, producer_out, list, s),
        (untouched(), untouched(), untouched(), untouched())
    );
    assert_eq!(gm, untouched());
    assert!(cs.is_null() && bs.is_null());
}

#[test]
fn accessors_of_null_give_their_documented_values() {
    let m = null::<lagless_message>();
    assert!(lagless_message_topic(m).is_null());
    assert_eq!(lagless_message_partition(m), -1);
    assert_eq!(lagless_message_offset(m), -1);
    assert_eq!(lagless_message_timestamp(m), -1);
    assert_eq!(lagless_message_header_count(m), 0);
    assert!(!lagless_message_from_recovery(m));
    let mut len = 7usize;
    assert!(lagless_message_key(m, &mut len).is_null());
    assert_eq!(len, 0);
    len = 7;
    assert!(lagless_message_value(m, &mut len).is_null());
    assert_eq!(len, 0);
    assert!(lagless_message_key(m, null_mut()).is_null());

    // A NULL error is success: its accessors say "no error".
    let e = null::<lagless_error>();
    assert_eq!(lagless_error_code(e), 0);
    assert_eq!(lagless_error_kafka_code(e), 0);
    assert_eq!(lagless_error_partition(e), -1);
    assert!(!lagless_error_retriable(e) && !lagless_error_fatal(e));
    assert!(lagless_error_topic(e).is_null());
    // SAFETY: static strings.
    let (name, msg) = unsafe {
        (
            CStr::from_ptr(lagless_error_name(e)),
            CStr::from_ptr(lagless_error_message(e)),
        )
    };
    assert_eq!((name, msg), (c"NONE", c""));

    assert_eq!(lagless_batch_count(null()), 0);
    assert!(lagless_batch_message(null(), 0).is_null());
    assert_eq!(lagless_tplist_count(null()), 0);
    assert!(!lagless_consumer_child_consumer_is_alive(null_mut()));
}

#[test]
fn every_destroy_ignores_null() {
    lagless_config_destroy(null_mut());
    lagless_string_destroy(null_mut());
    lagless_consumer_destroy(null_mut());
    lagless_producer_destroy(null_mut());
    lagless_tplist_destroy(null_mut());
    lagless_message_destroy(null_mut());
    lagless_batch_destroy(null_mut());
    lagless_group_metadata_destroy(null_mut());
    lagless_admin_destroy(null_mut());
    lagless_error_destroy(null_mut());
}

#[test]
fn a_closed_consumer_answers_closed_but_keeps_its_accessors() {
    let c = consumer(&[]);
    ok(lagless_consumer_close(c, 0));
    let mut list = untouched();
    let mut active = true;
    let t = c"t".as_ptr();
    for (i, e) in [
        lagless_consumer_assignment(c, &mut list),
        lagless_consumer_subscribe(c, &t, 1, null()),
        lagless_consumer_commit_sync(c, null(), 0),
        lagless_consumer_recovery_active(c, t, 0, &mut active),
        lagless_consumer_wakeup(c),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(outcome(e).0, LAGLESS_ERR_CLOSED, "case {i}");
    }
    assert_eq!((list, active), (untouched(), true));
    assert!(!lagless_consumer_child_consumer_is_alive(c));
    lagless_consumer_destroy(c);
}

#[test]
fn a_commit_list_entry_without_an_offset_is_refused_before_anything_is_sent() {
    let c = consumer(&[(c"group.id", c"g")]);
    let list = lagless_tplist_new();
    ok(lagless_tplist_add(list, c"orders".as_ptr(), 0));
    let (code, msg) = outcome(lagless_consumer_commit_sync(c, list, 0));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT);
    assert!(msg.contains("no offset set for orders-0"), "{msg}");
    let (code, _) = outcome(lagless_consumer_commit_async(c, list, None, null_mut()));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT);
    lagless_tplist_destroy(list);
    lagless_consumer_destroy(c);
}

#[test]
fn the_lists_handed_out_are_owned_by_the_caller() {
    let c = consumer(&[]);
    let list = lagless_tplist_new();
    ok(lagless_tplist_add(list, c"orders".as_ptr(), 3));
    ok(lagless_consumer_assign(c, list));
    let mut got = null_mut();
    ok(lagless_consumer_assignment(c, &mut got));
    assert_eq!(lagless_tplist_count(got), 1);
    let mut topic = null();
    let mut partition = -1;
    ok(lagless_tplist_get(
        got,
        0,
        &mut topic,
        &mut partition,
        null_mut(),
    ));
    // SAFETY: borrowed from `got`, which lives.
    assert_eq!(unsafe { CStr::from_ptr(topic) }, c"orders");
    assert_eq!(partition, 3);
    ok(lagless_consumer_pause(c, list));
    let mut paused = null_mut();
    ok(lagless_consumer_paused(c, &mut paused));
    assert_eq!(lagless_tplist_count(paused), 1);
    lagless_tplist_destroy(paused);
    lagless_tplist_destroy(got);
    lagless_tplist_destroy(list);
    ok(lagless_consumer_close(c, 0));
    lagless_consumer_destroy(c);
}

/// A producer of a cluster nobody listens at, with `extra` settings.
fn producer(extra: &[(&CStr, &CStr)]) -> *mut lagless_producer {
    let config = lagless_config_new();
    ok(lagless_config_set(
        config,
        c"bootstrap.servers".as_ptr(),
        c"127.0.0.1:9".as_ptr(),
    ));
    for (k, v) in extra {
        ok(lagless_config_set(config, k.as_ptr(), v.as_ptr()));
    }
    let mut p = null_mut();
    ok(lagless_producer_new(config, &mut p));
    lagless_config_destroy(config);
    assert!(!p.is_null());
    p
}

#[test]
fn the_transaction_calls_check_their_state_and_arguments_before_sending_anything() {
    // Without transactional.id every transaction call is refused.
    let plain = producer(&[]);
    for (i, e) in [
        lagless_producer_init_transactions(plain, 0),
        lagless_producer_begin_transaction(plain),
        lagless_producer_commit_transaction(plain, 0),
        lagless_producer_abort_transaction(plain, 0),
    ]
    .into_iter()
    .enumerate()
    {
        let (code, msg) = outcome(e);
        assert_eq!(code, LAGLESS_ERR_ILLEGAL_STATE, "case {i}: {msg}");
        assert!(msg.contains("transactional.id"), "case {i}: {msg}");
    }
    lagless_producer_destroy(plain);

    let p = producer(&[(c"transactional.id", c"t-1")]);
    // Before init_transactions.
    assert_eq!(
        outcome(lagless_producer_begin_transaction(p)).0,
        LAGLESS_ERR_ILLEGAL_STATE
    );
    let list = lagless_tplist_new();
    let (code, msg) = outcome(lagless_producer_send_offsets_to_transaction(
        p,
        null(),
        null(),
        0,
    ));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT, "{msg}");
    assert!(msg.contains("`offsets` is NULL"), "{msg}");
    let (code, msg) = outcome(lagless_producer_send_offsets_to_transaction(
        p,
        list,
        null(),
        0,
    ));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT, "{msg}");
    assert!(msg.contains("`group_metadata` is NULL"), "{msg}");
    lagless_tplist_destroy(list);
    ok(lagless_producer_close(p, 0));
    assert_eq!(
        outcome(lagless_producer_begin_transaction(p)).0,
        LAGLESS_ERR_CLOSED
    );
    lagless_producer_destroy(p);

    // Group metadata needs a subscription; nothing is written on failure.
    let c = consumer(&[(c"group.id", c"g")]);
    let mut gm = untouched();
    assert_eq!(
        outcome(lagless_consumer_group_metadata_handle(c, &mut gm)).0,
        LAGLESS_ERR_ILLEGAL_STATE
    );
    assert_eq!(gm, untouched());
    lagless_consumer_destroy(c);
}

#[test]
fn the_metrics_json_is_the_callers_string_with_unknown_values_null() {
    let c = consumer(&[]);
    let list = lagless_tplist_new();
    ok(lagless_tplist_add(list, c"orders".as_ptr(), 3));
    ok(lagless_consumer_assign(c, list));
    lagless_tplist_destroy(list);
    let mut json: *mut c_char = null_mut();
    ok(lagless_consumer_metrics_json(c, &mut json));
    assert!(!json.is_null());
    // SAFETY: a string lagless returned, freed below.
    let text = unsafe { CStr::from_ptr(json) }
        .to_str()
        .unwrap()
        .to_string();
    lagless_string_destroy(json);
    // (The JSON's rendering is tested in the core; here what comes through the export.)
    assert!(text.contains(r#""assigned_partitions":1"#), "{text}");
    assert!(text.contains(r#""group":null"#), "{text}");
    assert!(text.contains(r#""topic":"orders""#), "{text}");
    // Nobody listens at the bootstrap address: nothing of the partition is known.
    for key in [
        "position",
        "committed_offset",
        "hi_offset",
        "ls_offset",
        "consumer_lag",
    ] {
        assert!(
            text.contains(&format!(r#""{key}":null"#)),
            "{key} in {text}"
        );
    }
    assert!(text.contains(r#""records_consumed":0"#), "{text}");

    let (code, msg) = outcome(lagless_consumer_metrics_json(null_mut(), &mut json));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT);
    assert!(msg.contains("consumer"), "{msg}");
    let (code, msg) = outcome(lagless_consumer_metrics_json(c, null_mut()));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT);
    assert!(msg.contains("out_json"), "{msg}");
    ok(lagless_consumer_close(c, 0));
    json = null_mut();
    let (code, _) = outcome(lagless_consumer_metrics_json(c, &mut json));
    assert_eq!(code, LAGLESS_ERR_CLOSED);
    assert!(json.is_null(), "written only on success");
    lagless_consumer_destroy(c);
}

#[test]
fn the_producer_metrics_json_is_the_callers_string() {
    let p = producer(&[(c"client.id", c"billing-out")]);
    let mut json: *mut c_char = null_mut();
    ok(lagless_producer_metrics_json(p, &mut json));
    // SAFETY: a string lagless returned, freed below.
    let text = unsafe { CStr::from_ptr(json) }
        .to_str()
        .unwrap()
        .to_string();
    lagless_string_destroy(json);
    assert!(text.contains(r#""type":"producer""#), "{text}");
    assert!(text.contains(r#""client_id":"billing-out""#), "{text}");
    assert!(text.contains(r#""records_sent_total":0"#), "{text}");
    assert!(text.contains(r#""produce_latency":null"#), "{text}");
    let (code, msg) = outcome(lagless_producer_metrics_json(null_mut(), &mut json));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT);
    assert!(msg.contains("producer"), "{msg}");
    let (code, msg) = outcome(lagless_producer_metrics_json(p, null_mut()));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT);
    assert!(msg.contains("out_json"), "{msg}");
    ok(lagless_producer_close(p, 0));
    json = null_mut();
    let (code, _) = outcome(lagless_producer_metrics_json(p, &mut json));
    assert_eq!(code, LAGLESS_ERR_CLOSED);
    assert!(json.is_null(), "written only on success");
    lagless_producer_destroy(p);
}

#[test]
fn the_producer_prometheus_text_and_callbacks_check_their_arguments() {
    let p = producer(&[(c"client.id", c"billing-out")]);
    let mut text: *mut c_char = null_mut();
    ok(lagless_producer_metrics_prometheus(p, &mut text));
    // SAFETY: a string lagless returned, freed below.
    let got = unsafe { CStr::from_ptr(text) }
        .to_str()
        .unwrap()
        .to_string();
    lagless_string_destroy(text);
    assert!(
        got.contains("\nlagless_producer_records_sent_total{client_id=\"billing-out\"} 0\n"),
        "{got}"
    );
    text = null_mut();
    for (r, names) in [
        (
            lagless_producer_metrics_prometheus(null_mut(), &mut text),
            "producer",
        ),
        (
            lagless_producer_metrics_prometheus(p, null_mut()),
            "out_text",
        ),
        (
            lagless_producer_set_statistics_callback(null_mut(), None, null_mut()),
            "producer",
        ),
        (
            lagless_producer_set_error_callback(null_mut(), None, null_mut()),
            "producer",
        ),
    ] {
        let (code, msg) = outcome(r);
        assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT, "{msg}");
        assert!(msg.contains(names), "{msg}");
    }
    assert!(text.is_null(), "written only on success");
    ok(lagless_producer_close(p, 0));
    let (code, _) = outcome(lagless_producer_metrics_prometheus(p, &mut text));
    assert_eq!(code, LAGLESS_ERR_CLOSED);
    assert!(text.is_null(), "written only on success");
    lagless_producer_destroy(p);
}

#[test]
fn the_metrics_prometheus_text_is_the_callers_string_without_unknown_values() {
    let c = consumer(&[(c"client.id", c"app-1")]);
    let list = lagless_tplist_new();
    ok(lagless_tplist_add(list, c"orders".as_ptr(), 3));
    ok(lagless_consumer_assign(c, list));
    lagless_tplist_destroy(list);
    let mut text: *mut c_char = null_mut();
    ok(lagless_consumer_metrics_prometheus(c, &mut text));
    assert!(!text.is_null());
    // SAFETY: a string lagless returned, freed below.
    let got = unsafe { CStr::from_ptr(text) }
        .to_str()
        .unwrap()
        .to_string();
    lagless_string_destroy(text);
    // (The rendering is tested in the core; here what comes through the export.)
    let lines: Vec<&str> = got.lines().collect();
    for line in [
        "# TYPE lagless_consumer_records_consumed_total counter",
        r#"lagless_consumer_records_consumed_total{client_id="app-1"} 0"#,
        r#"lagless_consumer_assigned_partitions{client_id="app-1"} 1"#,
        r#"lagless_consumer_partition_records_consumed_total{client_id="app-1",topic="orders",partition="3"} 0"#,
    ] {
        assert!(lines.contains(&line), "{line} in {got}");
    }
    // Nobody listens at the bootstrap address: no offset of the partition is known, so none
    // has a sample; and no group.
    for absent in [
        "lagless_consumer_position",
        "lagless_consumer_records_lag",
        "group_id=",
        "lagless_consumer_group_",
    ] {
        assert!(!got.contains(absent), "{absent} in {got}");
    }

    let (code, msg) = outcome(lagless_consumer_metrics_prometheus(null_mut(), &mut text));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT);
    assert!(msg.contains("consumer"), "{msg}");
    let (code, msg) = outcome(lagless_consumer_metrics_prometheus(c, null_mut()));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT);
    assert!(msg.contains("out_text"), "{msg}");
    ok(lagless_consumer_close(c, 0));
    text = null_mut();
    let (code, _) = outcome(lagless_consumer_metrics_prometheus(c, &mut text));
    assert_eq!(code, LAGLESS_ERR_CLOSED);
    assert!(text.is_null(), "written only on success");
    lagless_consumer_destroy(c);
}

/// Counts the statistics callback's calls and checks each JSON is the snapshot's object.
unsafe extern "C" fn count_statistics(
    opaque: *mut std::ffi::c_void,
    json: *const c_char,
    len: usize,
) {
    // SAFETY: the test's counter and the callback's borrowed, NUL-terminated string.
    let (n, text) = unsafe {
        (
            &mut *opaque.cast::<usize>(),
            CStr::from_ptr(json).to_str().unwrap(),
        )
    };
    assert_eq!(text.len(), len);
    assert!(
        text.starts_with(r#"{"type":"consumer","client_id":"#),
        "{text}"
    );
    assert!(text.contains(r#","assigned_partitions":0,"#), "{text}");
    *n += 1;
}

#[test]
fn the_statistics_callback_gets_the_json_inside_poll() {
    let c = consumer(&[(c"statistics.interval.ms", c"50")]);
    let mut calls = 0usize;
    let opaque = (&mut calls as *mut usize).cast();
    ok(lagless_consumer_set_statistics_callback(
        c,
        Some(count_statistics),
        opaque,
    ));
    let mut m = null_mut();
    ok(lagless_consumer_poll(c, 400, &mut m));
    assert!(m.is_null());
    // 400 ms of polling at 50 ms: at most 8 calls (never closer than the interval), some even
    // on a loaded machine.
    assert!((2..=8).contains(&calls), "{calls} calls");
    let before = calls;
    ok(lagless_consumer_set_statistics_callback(
        c,
        None,
        null_mut(),
    ));
    ok(lagless_consumer_poll(c, 200, &mut m));
    assert_eq!(calls, before, "removed: not called");

    let (code, msg) = outcome(lagless_consumer_set_statistics_callback(
        null_mut(),
        None,
        null_mut(),
    ));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT);
    assert!(msg.contains("consumer"), "{msg}");
    ok(lagless_consumer_close(c, 0));
    let (code, _) = outcome(lagless_consumer_set_statistics_callback(
        c,
        Some(count_statistics),
        opaque,
    ));
    assert_eq!(code, LAGLESS_ERR_CLOSED);
    lagless_consumer_destroy(c);
}

/// A server-side regex subscription: refused under the classic protocol and when empty, taken
/// under the consumer protocol (the coordinator judges the regex itself).
#[test]
fn a_regex_subscription_needs_the_consumer_protocol_and_a_regex() {
    let classic = consumer(&[(c"group.id", c"g")]);
    let (code, msg) = outcome(lagless_consumer_subscribe_regex(
        classic,
        c"orders-.*".as_ptr(),
        null(),
    ));
    assert_eq!(code, LAGLESS_ERR_ILLEGAL_STATE, "{msg}");
    assert!(msg.contains("group.protocol=consumer"), "{msg}");
    lagless_consumer_destroy(classic);
    let c = consumer(&[(c"group.id", c"g"), (c"group.protocol", c"consumer")]);
    let (code, msg) = outcome(lagless_consumer_subscribe_regex(c, c"".as_ptr(), null()));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT, "{msg}");
    ok(lagless_consumer_subscribe_regex(c, c"[".as_ptr(), null()));
    lagless_consumer_destroy(c);
}

/// Records each error the error callback hears: its code and message.
unsafe extern "C" fn record_error(opaque: *mut std::ffi::c_void, error: *const lagless_error) {
    // SAFETY: the test's list and the callback's borrowed error.
    let (heard, code, message) = unsafe {
        (
            &mut *opaque.cast::<Vec<(i32, String)>>(),
            lagless_error_code(error),
            CStr::from_ptr(lagless_error_message(error))
                .to_string_lossy()
                .into_owned(),
        )
    };
    heard.push((code, message));
}

#[test]
fn the_error_callback_hears_all_brokers_down_once_inside_poll() {
    let c = consumer(&[
        (c"reconnect.backoff.ms", c"50"),
        (c"reconnect.backoff.max.ms", c"100"),
    ]);
    let mut heard: Vec<(i32, String)> = Vec::new();
    let opaque = (&mut heard as *mut Vec<(i32, String)>).cast();
    ok(lagless_consumer_set_error_callback(
        c,
        Some(record_error),
        opaque,
    ));
    let list = lagless_tplist_new();
    ok(lagless_tplist_add(list, c"orders".as_ptr(), 0));
    ok(lagless_consumer_assign(c, list));
    lagless_tplist_destroy(list);
    let mut m = null_mut();
    // 127.0.0.1:9 refuses at once; attempts every 100 ms at most, the condition heard once.
    for _ in 0..10 {
        ok(lagless_consumer_poll(c, 200, &mut m));
        assert!(m.is_null());
    }
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0].0, LAGLESS_ERR_TRANSPORT, "{heard:?}");
    assert!(heard[0].1.contains("all brokers are down"), "{heard:?}");
    assert!(heard[0].1.contains("127.0.0.1:9"), "{heard:?}");
    ok(lagless_consumer_set_error_callback(c, None, null_mut()));
    let (code, msg) = outcome(lagless_consumer_set_error_callback(
        null_mut(),
        None,
        null_mut(),
    ));
    assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT);
    assert!(msg.contains("consumer"), "{msg}");
    ok(lagless_consumer_close(c, 0));
    lagless_consumer_destroy(c);
}

/// An admin client of a cluster nobody listens at: argument checks come before any request.
fn admin() -> *mut lagless_admin {
    let config = lagless_config_new();
    ok(lagless_config_set(
        config,
        c"bootstrap.servers".as_ptr(),
        c"127.0.0.1:9".as_ptr(),
    ));
    let mut a = null_mut();
    ok(lagless_admin_new(config, &mut a));
    lagless_config_destroy(config);
    assert!(!a.is_null());
    a
}

#[test]
fn every_admin_export_names_a_null_argument_and_writes_nothing() {
    let mut out = untouched::<c_char>();
    let mut a_out = untouched();
    let a = null_mut::<lagless_admin>();
    let t = c"t".as_ptr();
    let list = lagless_tplist_new();
    ok(lagless_tplist_add(list, t, 0));
    let cases = [
        (lagless_admin_new(null(), &mut a_out), "config"),
        (
            lagless_admin_create_topics(a, null(), 0, 0, &mut out),
            "admin",
        ),
        (lagless_admin_delete_topics(a, &t, 1, 0, &mut out), "admin"),
        (
            lagless_admin_create_partitions(a, null(), 0, 0, &mut out),
            "admin",
        ),
        (lagless_admin_describe_cluster(a, 0, &mut out), "admin"),
        (lagless_admin_list_topics(a, false, 0, &mut out), "admin"),
        (
            lagless_admin_describe_topics(a, &t, 1, 0, &mut out),
            "admin",
        ),
        (
            lagless_admin_list_offsets(a, list, LAGLESS_OFFSET_SPEC_LATEST, 0, &mut out),
            "admin",
        ),
        (lagless_admin_list_consumer_groups(a, 0, &mut out), "admin"),
        (
            lagless_admin_describe_consumer_groups(a, &t, 1, 0, &mut out),
            "admin",
        ),
        (
            lagless_admin_list_consumer_group_offsets(a, t, null(), 0, &mut out),
            "admin",
        ),
        (
            lagless_admin_alter_consumer_group_offsets(a, t, list, 0, &mut out),
            "admin",
        ),
        (
            lagless_admin_delete_consumer_group_offsets(a, t, list, 0, &mut out),
            "admin",
        ),
        (
            lagless_admin_describe_configs(a, LAGLESS_RESOURCE_TOPIC, &t, 1, 0, &mut out),
            "admin",
        ),
        (
            lagless_admin_incremental_alter_configs(
                a,
                LAGLESS_RESOURCE_TOPIC,
                t,
                null(),
                0,
                0,
                &mut out,
            ),
            "admin",
        ),
    ];
    for (i, (e, name)) in cases.into_iter().enumerate() {
        let (code, msg) = outcome(e);
        assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT, "case {i}: {msg}");
        assert!(
            msg.contains(&format!("`{name}` is NULL")),
            "case {i}: {msg}"
        );
    }
    let a = admin();
    let cases = [
        (
            lagless_admin_describe_cluster(a, 0, null_mut()),
            "`out_json` is NULL",
        ),
        (
            lagless_admin_delete_topics(a, null(), 1, 0, &mut out),
            "`topics` is NULL",
        ),
        (
            lagless_admin_list_offsets(a, null(), -1, 0, &mut out),
            "`partitions` is NULL",
        ),
        (
            lagless_admin_alter_consumer_group_offsets(a, t, null(), 0, &mut out),
            "`offsets` is NULL",
        ),
        (
            lagless_admin_list_consumer_group_offsets(a, null(), null(), 0, &mut out),
            "`group` is NULL",
        ),
    ];
    for (i, (e, says)) in cases.into_iter().enumerate() {
        let (code, msg) = outcome(e);
        assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT, "case {i}: {msg}");
        assert!(msg.contains(says), "case {i}: {msg}");
    }
    assert_eq!((out, a_out), (untouched(), untouched()));
    lagless_admin_destroy(a);
    lagless_tplist_destroy(list);
}

#[test]
fn admin_arguments_are_checked_before_anything_is_sent() {
    let a = admin();
    let mut out = untouched::<c_char>();
    let t = c"t".as_ptr();
    let empty = c"".as_ptr();
    let twice = [t, t];
    let topic = |name: *const c_char, n: i32, rf: i16| lagless_new_topic {
        name,
        num_partitions: n,
        replication_factor: rf,
        config_names: null(),
        config_values: null(),
        config_count: 0,
    };
    let zero_partitions = [topic(t, 0, 1)];
    let zero_replicas = [topic(t, 1, 0)];
    let unnamed = [topic(empty, 1, 1)];
    let same = [topic(t, 1, 1), topic(t, 2, 1)];
    let configs_missing = [lagless_new_topic {
        config_count: 1,
        ..topic(t, 1, 1)
    }];
    let shrink_to_zero = [lagless_new_partitions {
        topic: t,
        total_count: 0,
    }];
    let no_offset = lagless_tplist_new();
    ok(lagless_tplist_add(no_offset, t, 0));
    let doubled = lagless_tplist_new();
    ok(lagless_tplist_add(doubled, t, 1));
    ok(lagless_tplist_add(doubled, t, 1));
    let nothing = lagless_tplist_new();
    let no_value = [lagless_alter_config_op {
        name: c"retention.ms".as_ptr(),
        value: null(),
        op: LAGLESS_ALTER_CONFIG_SET,
    }];
    let bad_op = [lagless_alter_config_op {
        name: c"retention.ms".as_ptr(),
        value: t,
        op: 9,
    }];
    let cases = [
        (
            lagless_admin_create_topics(a, zero_partitions.as_ptr(), 1, 0, &mut out),
            "num_partitions (0)",
        ),
        (
            lagless_admin_create_topics(a, zero_replicas.as_ptr(), 1, 0, &mut out),
            "replication_factor (0)",
        ),
        (
            lagless_admin_create_topics(a, unnamed.as_ptr(), 1, 0, &mut out),
            "a topic name is empty",
        ),
        (
            lagless_admin_create_topics(a, same.as_ptr(), 2, 0, &mut out),
            "topic `t` is given twice",
        ),
        (
            lagless_admin_create_topics(a, configs_missing.as_ptr(), 1, 0, &mut out),
            "`topics[0].config_names` is NULL",
        ),
        (
            lagless_admin_create_topics(a, null(), 0, 0, &mut out),
            "no topic given",
        ),
        (
            lagless_admin_create_partitions(a, shrink_to_zero.as_ptr(), 1, 0, &mut out),
            "total_count must be >= 1",
        ),
        (
            lagless_admin_delete_topics(a, twice.as_ptr(), 2, 0, &mut out),
            "topic `t` is given twice",
        ),
        (
            lagless_admin_describe_consumer_groups(a, &empty, 1, 0, &mut out),
            "a group name is empty",
        ),
        (
            lagless_admin_list_offsets(a, no_offset, -3, 0, &mut out),
            "`spec` must be",
        ),
        (
            lagless_admin_list_offsets(a, nothing, -1, 0, &mut out),
            "`partitions` is empty",
        ),
        (
            lagless_admin_list_offsets(a, doubled, -1, 0, &mut out),
            "holds t-1 twice",
        ),
        (
            lagless_admin_alter_consumer_group_offsets(a, t, no_offset, 0, &mut out),
            "no offset set for t-0",
        ),
        (
            lagless_admin_list_consumer_group_offsets(a, empty, null(), 0, &mut out),
            "`group` is empty",
        ),
        (
            lagless_admin_describe_configs(a, 3, &t, 1, 0, &mut out),
            "`resource_type` must be",
        ),
        (
            lagless_admin_describe_configs(a, LAGLESS_RESOURCE_BROKER, &t, 1, 0, &mut out),
            "node id, got `t`",
        ),
        (
            lagless_admin_incremental_alter_configs(
                a,
                LAGLESS_RESOURCE_TOPIC,
                t,
                no_value.as_ptr(),
                1,
                0,
                &mut out,
            ),
            "`ops[0].value` is NULL",
        ),
        (
            lagless_admin_incremental_alter_configs(
                a,
                LAGLESS_RESOURCE_TOPIC,
                t,
                bad_op.as_ptr(),
                1,
                0,
                &mut out,
            ),
            "`ops[0].op` must be",
        ),
        (
            lagless_admin_incremental_alter_configs(
                a,
                LAGLESS_RESOURCE_TOPIC,
                t,
                null(),
                0,
                0,
                &mut out,
            ),
            "no config change given",
        ),
    ];
    for (i, (e, says)) in cases.into_iter().enumerate() {
        let (code, msg) = outcome(e);
        assert_eq!(code, LAGLESS_ERR_INVALID_ARGUMENT, "case {i}: {msg}");
        assert!(
            msg.contains(says),
            "case {i}: {msg:?} does not say {says:?}"
        );
    }
    assert_eq!(out, untouched());
    for l in [no_offset, doubled, nothing] {
        lagless_tplist_destroy(l);
    }
    lagless_admin_destroy(a);
}

#[test]
fn an_admin_call_to_a_cluster_nobody_listens_at_fails_within_its_timeout() {
    let a = admin();
    let mut out = untouched::<c_char>();
    let started = std::time::Instant::now();
    let (code, msg) = outcome(lagless_admin_list_topics(a, false, 300, &mut out));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        code == LAGLESS_ERR_TIMEOUT || code == LAGLESS_ERR_TRANSPORT,
        "{code}: {msg}"
    );
    assert!(msg.contains("127.0.0.1:9"), "{msg}");
    assert_eq!(out, untouched());
    lagless_admin_destroy(a);
}
