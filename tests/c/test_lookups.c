/* Lookups and group controls through the C ABI, against a real broker: pattern subscription
 * and the subscription list, partitions_for, watermarks, offsets_for_times, seek to the
 * beginning and the end, paused, commit metadata round trip, group metadata and an enforced
 * rebalance, records produced with headers and timestamps, and the error each gives for bad
 * input.
 * Usage: test_lookups TOPIC GROUP (TOPIC must not exist yet; it is matched by the pattern
 * "TOPIC(-x)?", so it must be a plain name without regex metacharacters other than '-') */
#include "common.h"

static const char *bootstrap;
/* Record timestamps (ms since the epoch): two stretches of the past hour, well within the
 * broker's retention (an older timestamp could have the log cleaned under the test). */
static int64_t T1, T2;

/* Appends `n` records to `partition` of `topic`, with timestamps `ts0`, `ts0 + 1`, ... and the
 * headers "n" = the record's index and "null" = a null value; waits until they are written. */
static void produce(const char *topic, int32_t partition, int n, int64_t ts0) {
    const char *pc[] = {"bootstrap.servers", NULL, "linger.ms", "0", NULL};
    lagless_producer *p = NULL;
    lagless_header headers[2];
    char index[16];
    int i;

    pc[1] = bootstrap;
    p = new_producer(pc);
    headers[0].key = "n";
    headers[0].value = (const uint8_t *)index;
    headers[1].key = "null";
    headers[1].value = NULL;
    headers[1].value_len = 0;
    for (i = 0; i < n; i++) {
        headers[0].value_len = (size_t)sprintf(index, "%d", i);
        CHECK_OK(lagless_producer_send_with_headers(p, topic, partition, NULL, 0,
                                                    (const uint8_t *)"v", 1, headers, 2, ts0 + i,
                                                    NULL, NULL));
    }
    headers[1].key = NULL;
    EXPECT_ERR(lagless_producer_send_with_headers(p, topic, partition, NULL, 0, NULL, 0, headers,
                                                  2, -1, NULL, NULL),
               LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_producer_send_with_headers(p, topic, partition, NULL, 0, NULL, 0, NULL, 1,
                                                  -1, NULL, NULL),
               LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_producer_send_with_headers(p, topic, partition, NULL, 0, NULL, 0, NULL, 0,
                                                  -7, NULL, NULL),
               LAGLESS_ERR_INVALID_ARGUMENT);
    CHECK_OK(lagless_producer_flush(p, 30000));
    CHECK_OK(lagless_producer_close(p, 5000));
    lagless_producer_destroy(p);
}

static lagless_tplist *one(const char *topic, int32_t partition) {
    lagless_tplist *l = lagless_tplist_new();
    CHECK_OK(lagless_tplist_add(l, topic, partition));
    return l;
}

static int assigned_count = 0;

static int on_assigned(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    (void)opaque;
    (void)c;
    (void)parts;
    assigned_count++;
    return 0;
}

/* Polls until `want` partitions are assigned (or fails after 60 s); returns records seen. */
static size_t poll_until_assigned(lagless_consumer *c, size_t want) {
    double deadline = now_s() + 60;
    size_t n = 0;
    for (;;) {
        lagless_tplist *a = NULL;
        lagless_message *m = NULL;
        size_t have;
        CHECK_OK(lagless_consumer_poll(c, 100, &m));
        if (m != NULL) {
            n++;
            lagless_message_destroy(m);
        }
        CHECK_OK(lagless_consumer_assignment(c, &a));
        have = lagless_tplist_count(a);
        lagless_tplist_destroy(a);
        if (have == want) {
            return n;
        }
        CHECK(now_s() < deadline);
    }
}

/* The first message polled from `partition` within 30 s; the caller destroys it. */
static lagless_message *first_of(lagless_consumer *c, int32_t partition) {
    double deadline = now_s() + 30;
    for (;;) {
        lagless_message *m = NULL;
        CHECK_OK(lagless_consumer_poll(c, 100, &m));
        if (m != NULL) {
            if (lagless_message_partition(m) == partition) {
                return m;
            }
            lagless_message_destroy(m);
        }
        CHECK(now_s() < deadline);
    }
}

int main(int argc, char **argv) {
    const char *topic, *group;
    char pattern[256], missing[300];
    const char *cc[] = {"bootstrap.servers", NULL, "group.id", NULL, "auto.offset.reset",
                        "earliest", "enable.auto.commit", "false", "session.timeout.ms", "6000",
                        "heartbeat.interval.ms", "500", NULL};
    lagless_consumer *c = NULL;
    lagless_rebalance_listener listener;
    lagless_tplist *l;
    int64_t lo = -2, hi = -2, off = -2, t_split;
    int32_t part = -2, generation = -2, generation_after = -2;
    const char *name = NULL, *md = NULL;
    char *member_id = NULL;
    int assigned_before;

    if (argc != 3) {
        fprintf(stderr, "usage: test_lookups TOPIC GROUP\n");
        return 2;
    }
    topic = argv[1];
    group = argv[2];
    bootstrap = test_bootstrap();
    CHECK(strlen(topic) < 200);
    sprintf(pattern, "%s(-x)?", topic);
    sprintf(missing, "%s-missing", topic);

    /* Partition 0: 10 records stamped T1.., then 10 stamped T2..; partition 1: 10 stamped T1.. */
    T1 = ((int64_t)time(NULL) - 3600) * 1000;
    T2 = T1 + 1800 * 1000;
    CHECK_OK(lagless_admin_create_topic(bootstrap, topic, 2, 1));
    produce(topic, 0, 10, T1);
    produce(topic, 1, 10, T1);
    produce(topic, 0, 10, T2);
    t_split = (T1 + T2) / 2;

    cc[1] = bootstrap;
    cc[3] = group;
    c = new_consumer(cc);

    /* partitions_for */
    CHECK_OK(lagless_consumer_partitions_for(c, topic, 30000, &l));
    CHECK(lagless_tplist_count(l) == 2);
    CHECK_OK(lagless_tplist_get(l, 1, &name, &part, &off));
    CHECK(strcmp(name, topic) == 0 && part == 1 && off == LAGLESS_OFFSET_INVALID);
    lagless_tplist_destroy(l);
    l = NULL;
    EXPECT_ERR(lagless_consumer_partitions_for(c, missing, 5000, &l), LAGLESS_ERR_UNKNOWN_TOPIC);
    CHECK(l == NULL);
    EXPECT_ERR(lagless_consumer_partitions_for(c, topic, 5000, NULL), LAGLESS_ERR_INVALID_ARGUMENT);

    /* watermarks */
    CHECK_OK(lagless_consumer_watermarks(c, topic, 0, 30000, &lo, &hi));
    CHECK(lo == 0 && hi == 20);
    CHECK_OK(lagless_consumer_watermarks(c, topic, 1, 30000, NULL, &hi));
    CHECK(hi == 10);
    EXPECT_ERR(lagless_consumer_watermarks(c, missing, 0, 5000, &lo, &hi),
               LAGLESS_ERR_UNKNOWN_TOPIC);

    /* offsets_for_times: the timestamp goes in, the offset comes out (partition 1 listed first:
     * answers follow the list, not the partition order) */
    l = lagless_tplist_new();
    CHECK_OK(lagless_tplist_add(l, topic, 1));
    CHECK_OK(lagless_tplist_add(l, topic, 0));
    CHECK_OK(lagless_tplist_set_offset(l, 0, t_split));
    CHECK_OK(lagless_tplist_set_offset(l, 1, t_split));
    CHECK_OK(lagless_consumer_offsets_for_times(c, l, 30000));
    CHECK_OK(lagless_tplist_get(l, 1, NULL, &part, &off));
    CHECK(part == 0 && off == 10); /* the first record written after t_split */
    CHECK_OK(lagless_tplist_get(l, 0, NULL, &part, &off));
    CHECK(part == 1 && off == LAGLESS_OFFSET_INVALID); /* nothing on partition 1 after t_split */
    CHECK_OK(lagless_tplist_set_offset(l, 0, 0));
    CHECK_OK(lagless_consumer_offsets_for_times(c, l, 30000));
    CHECK_OK(lagless_tplist_get(l, 0, NULL, NULL, &off));
    CHECK(off == 0);
    CHECK_OK(lagless_tplist_set_offset(l, 0, -5));
    EXPECT_ERR(lagless_consumer_offsets_for_times(c, l, 5000), LAGLESS_ERR_INVALID_ARGUMENT);
    lagless_tplist_destroy(l);

    /* group metadata needs a subscription */
    EXPECT_ERR(lagless_consumer_group_metadata(c, &generation, NULL), LAGLESS_ERR_ILLEGAL_STATE);
    EXPECT_ERR(lagless_consumer_enforce_rebalance(c, "x"), LAGLESS_ERR_ILLEGAL_STATE);

    /* pattern subscription */
    memset(&listener, 0, sizeof listener);
    listener.on_assigned = on_assigned;
    EXPECT_ERR(lagless_consumer_subscribe_pattern(c, "orders-(", &listener),
               LAGLESS_ERR_INVALID_ARGUMENT);
    CHECK_OK(lagless_consumer_subscribe_pattern(c, pattern, &listener));
    poll_until_assigned(c, 2);
    CHECK_OK(lagless_consumer_subscription(c, &l));
    CHECK(lagless_tplist_count(l) == 1);
    CHECK_OK(lagless_tplist_get(l, 0, &name, &part, NULL));
    CHECK(strcmp(name, topic) == 0 && part == -1);
    lagless_tplist_destroy(l);
    CHECK_OK(lagless_consumer_group_metadata(c, &generation, &member_id));
    CHECK(generation >= 1 && member_id != NULL && strlen(member_id) > 0);
    printf("member %s in generation %d\n", member_id, (int)generation);
    lagless_string_destroy(member_id);

    /* seek_to_end, then seek_to_beginning */
    l = one(topic, 0);
    CHECK_OK(lagless_consumer_seek_to_end(c, l));
    CHECK_OK(lagless_consumer_position(c, topic, 0, 30000, &off));
    CHECK(off == 20);
    CHECK_OK(lagless_consumer_seek_to_beginning(c, l));
    CHECK_OK(lagless_consumer_position(c, topic, 0, 30000, &off));
    CHECK(off == 0);
    {
        /* the first record, with its timestamp and headers as produced */
        lagless_message *m = first_of(c, 0);
        const char *hk = NULL;
        const uint8_t *hv = NULL;
        size_t hk_len = 0, hv_len = 9;
        CHECK(lagless_message_offset(m) == 0 && lagless_message_timestamp(m) == T1);
        CHECK(lagless_message_header_count(m) == 2);
        CHECK_OK(lagless_message_header_get(m, 0, &hk, &hk_len, &hv, &hv_len));
        CHECK(hk_len == 1 && hk[0] == 'n' && hv_len == 1 && hv[0] == '0');
        CHECK_OK(lagless_message_header_get(m, 1, &hk, &hk_len, &hv, &hv_len));
        CHECK(hk_len == 4 && memcmp(hk, "null", 4) == 0 && hv == NULL && hv_len == 0);
        lagless_message_destroy(m);
    }
    lagless_tplist_destroy(l);
    l = one(topic, 7);
    EXPECT_ERR(lagless_consumer_seek_to_end(c, l), LAGLESS_ERR_ILLEGAL_STATE);
    lagless_tplist_destroy(l);

    /* paused */
    l = one(topic, 1);
    CHECK_OK(lagless_consumer_pause(c, l));
    lagless_tplist_destroy(l);
    CHECK_OK(lagless_consumer_paused(c, &l));
    CHECK(lagless_tplist_count(l) == 1);
    CHECK_OK(lagless_tplist_get(l, 0, NULL, &part, NULL));
    CHECK(part == 1);
    CHECK_OK(lagless_consumer_resume(c, l));
    lagless_tplist_destroy(l);
    CHECK_OK(lagless_consumer_paused(c, &l));
    CHECK(lagless_tplist_count(l) == 0);
    lagless_tplist_destroy(l);

    /* commit metadata round trip */
    l = one(topic, 0);
    CHECK_OK(lagless_tplist_set_offset(l, 0, 5));
    CHECK_OK(lagless_tplist_set_metadata(l, 0, "checkpoint=42"));
    CHECK_OK(lagless_consumer_commit_sync(c, l, 30000));
    lagless_tplist_destroy(l);
    l = one(topic, 0);
    CHECK_OK(lagless_tplist_get_metadata(l, 0, &md));
    CHECK(strcmp(md, "") == 0);
    CHECK_OK(lagless_consumer_committed(c, l, 30000));
    CHECK_OK(lagless_tplist_get(l, 0, NULL, NULL, &off));
    CHECK_OK(lagless_tplist_get_metadata(l, 0, &md));
    CHECK(off == 5 && strcmp(md, "checkpoint=42") == 0);
    CHECK_OK(lagless_tplist_set_metadata(l, 0, NULL));
    CHECK_OK(lagless_tplist_get_metadata(l, 0, &md));
    CHECK(strcmp(md, "") == 0);
    EXPECT_ERR(lagless_tplist_get_metadata(l, 1, &md), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_tplist_set_metadata(l, 3, "x"), LAGLESS_ERR_INVALID_ARGUMENT);
    lagless_tplist_destroy(l);

    /* an enforced rebalance makes a new generation and assigns again */
    assigned_before = assigned_count;
    CHECK_OK(lagless_consumer_enforce_rebalance(c, "test asks for it"));
    {
        double deadline = now_s() + 60;
        while (assigned_count == assigned_before) {
            lagless_message *m = NULL;
            CHECK_OK(lagless_consumer_poll(c, 100, &m));
            lagless_message_destroy(m);
            CHECK(now_s() < deadline);
        }
    }
    CHECK_OK(lagless_consumer_group_metadata(c, &generation_after, NULL));
    CHECK(generation_after > generation);

    /* after close */
    CHECK_OK(lagless_consumer_close(c, 10000));
    EXPECT_ERR(lagless_consumer_watermarks(c, topic, 0, 1000, &lo, &hi), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_subscribe_pattern(c, pattern, NULL), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_paused(c, &l), LAGLESS_ERR_CLOSED);
    lagless_consumer_destroy(c);
    printf("lookups: all checks passed\n");
    return 0;
}
