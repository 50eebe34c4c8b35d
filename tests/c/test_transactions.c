/* Transactions through the C ABI, against the broker at LAGLESS_BOOTSTRAP.
 *   1. A transactional producer writes 6 transactions of 10 records over 2 partitions, every
 *      third aborted after its records were written; then a second producer with the same
 *      transactional.id fences it while it holds an open transaction of 10 records (its commit
 *      fails: fatal, PRODUCER_FENCED) and commits 4 records of its own. A read_committed consumer
 *      reads exactly the 44 committed records, a read_uncommitted one all 74.
 *   2. Consume-transform-produce: 20 input records are read by a group member, written to an
 *      output topic in a transaction with their offsets (send_offsets_to_transaction); aborted,
 *      the group has no committed offsets; read again and committed, the group's offsets are
 *      10/10 and the output read_committed holds the 20 records once.
 * Every topic ends with one committed "end" record per partition, so a reader knows it read all.
 * Usage: test_transactions TOPIC_PREFIX GROUP */
#include "common.h"

#define PARTS 2

static const char *bootstrap;

static void on_delivery(void *opaque, const lagless_error *err, int32_t partition, int64_t offset) {
    int *failed = (int *)opaque;
    (void)partition;
    (void)offset;
    if (err != NULL) (*failed)++;
}

static lagless_producer *txn_producer(const char *tid) {
    const char *pc[] = {"bootstrap.servers", bootstrap, "transactional.id", tid, NULL};
    lagless_producer *p = new_producer(pc);
    CHECK_OK(lagless_producer_init_transactions(p, 30000));
    return p;
}

static void send(lagless_producer *p, const char *topic, int partition, const char *value,
                 int *failed) {
    CHECK_OK(lagless_producer_send(p, topic, partition, NULL, 0, (const uint8_t *)value,
                                   strlen(value), on_delivery, failed));
}

/* One committed transaction of an "end" record per partition. */
static void write_end(lagless_producer *p, const char *topic) {
    int failed = 0, i;
    CHECK_OK(lagless_producer_begin_transaction(p));
    for (i = 0; i < PARTS; i++) send(p, topic, i, "end", &failed);
    CHECK_OK(lagless_producer_commit_transaction(p, 30000));
    CHECK(failed == 0);
}

/* Reads `topic` from the beginning at `isolation` until the "end" record of every partition;
 * returns how many other records it read, and how many of them start with `bad`. */
static int read_all(const char *topic, const char *isolation, char bad, int *bad_seen) {
    const char *cc[] = {"bootstrap.servers", bootstrap, "isolation.level", isolation,
                        "auto.offset.reset", "earliest", NULL};
    lagless_consumer *c = new_consumer(cc);
    lagless_tplist *parts = lagless_tplist_new();
    int ends = 0, n = 0, i;
    int64_t next[PARTS] = {0};
    double deadline = now_s() + 60;
    for (i = 0; i < PARTS; i++) CHECK_OK(lagless_tplist_add(parts, topic, i));
    CHECK_OK(lagless_consumer_assign(c, parts));
    *bad_seen = 0;
    while (ends < PARTS) {
        lagless_message *m = NULL;
        size_t len = 0;
        const uint8_t *v;
        int32_t p;
        CHECK(now_s() < deadline);
        CHECK_OK(lagless_consumer_poll(c, 200, &m));
        if (m == NULL) continue;
        p = lagless_message_partition(m);
        CHECK(p >= 0 && p < PARTS);
        CHECK(lagless_message_offset(m) >= next[p]); /* in order, never twice */
        next[p] = lagless_message_offset(m) + 1;
        v = lagless_message_value(m, &len);
        if (len == 3 && memcmp(v, "end", 3) == 0) {
            ends++;
        } else {
            n++;
            if (len > 0 && v[0] == (uint8_t)bad) (*bad_seen)++;
        }
        lagless_message_destroy(m);
    }
    CHECK_OK(lagless_consumer_close(c, 5000));
    lagless_consumer_destroy(c);
    lagless_tplist_destroy(parts);
    return n;
}

static void committed_and_aborted(const char *topic, const char *tid) {
    lagless_producer *p1, *p2;
    lagless_error *err;
    int failed = 0, t, i, bad, n;
    char value[32];

    CHECK_OK(lagless_admin_create_topic(bootstrap, topic, PARTS, 1));
    p1 = txn_producer(tid);
    for (t = 0; t < 6; t++) {
        int aborted = t % 3 == 2;
        CHECK_OK(lagless_producer_begin_transaction(p1));
        for (i = 0; i < 10; i++) {
            sprintf(value, "%c%d-%d", aborted ? 'a' : 'c', t, i);
            send(p1, topic, i % PARTS, value, &failed);
        }
        if (aborted) {
            /* Written first, so that the readers meet the aborted records in the log. */
            CHECK_OK(lagless_producer_flush(p1, 30000));
            CHECK_OK(lagless_producer_abort_transaction(p1, 30000));
        } else {
            CHECK_OK(lagless_producer_commit_transaction(p1, 30000));
        }
    }
    CHECK(failed == 0);

    /* p1 opens a transaction and writes 10 records; p2 (same transactional.id) fences p1 and
     * aborts that transaction. */
    CHECK_OK(lagless_producer_begin_transaction(p1));
    for (i = 0; i < 10; i++) {
        sprintf(value, "f%d", i);
        send(p1, topic, i % PARTS, value, &failed);
    }
    CHECK_OK(lagless_producer_flush(p1, 30000));
    CHECK(failed == 0);
    p2 = txn_producer(tid);
    err = lagless_producer_commit_transaction(p1, 30000);
    CHECK(err != NULL);
    printf("fenced producer's commit: %s (kafka code %d, fatal %d)\n", lagless_error_message(err),
           (int)lagless_error_kafka_code(err), (int)lagless_error_fatal(err));
    CHECK(lagless_error_code(err) == LAGLESS_ERR_KAFKA);
    CHECK(lagless_error_kafka_code(err) == 90);
    CHECK(lagless_error_fatal(err));
    lagless_error_destroy(err);
    /* Fatal: every later transactional call fails the same way. */
    err = lagless_producer_begin_transaction(p1);
    CHECK(err != NULL && lagless_error_fatal(err));
    lagless_error_destroy(err);
    lagless_producer_close(p1, 1000); /* whatever it says: the producer is done */
    lagless_producer_destroy(p1);

    CHECK_OK(lagless_producer_begin_transaction(p2));
    for (i = 0; i < 4; i++) {
        sprintf(value, "n%d", i);
        send(p2, topic, i % PARTS, value, &failed);
    }
    CHECK_OK(lagless_producer_commit_transaction(p2, 30000));
    CHECK(failed == 0);
    write_end(p2, topic);
    CHECK_OK(lagless_producer_close(p2, 5000));
    lagless_producer_destroy(p2);

    n = read_all(topic, "read_committed", 'a', &bad);
    printf("read_committed: %d records, %d of aborted transactions\n", n, bad);
    CHECK(n == 44 && bad == 0);
    n = read_all(topic, "read_uncommitted", 'a', &bad);
    printf("read_uncommitted: %d records, %d of aborted transactions\n", n, bad);
    CHECK(n == 74 && bad == 20);
}

/* The group's committed offsets of `topic`'s partitions, into `out`. */
static void committed(lagless_consumer *c, const char *topic, int64_t *out) {
    lagless_tplist *l = lagless_tplist_new();
    size_t i;
    for (i = 0; i < PARTS; i++) CHECK_OK(lagless_tplist_add(l, topic, (int32_t)i));
    CHECK_OK(lagless_consumer_committed(c, l, 30000));
    for (i = 0; i < PARTS; i++) CHECK_OK(lagless_tplist_get(l, i, NULL, NULL, &out[i]));
    lagless_tplist_destroy(l);
}

/* Polls the 20 input records, writes each to `out_topic` in a transaction with their offsets,
 * then commits or aborts it. */
static void transform_round(lagless_consumer *c, lagless_producer *p, const char *in_topic,
                            const char *out_topic, int commit) {
    lagless_group_metadata *gm = NULL;
    lagless_tplist *offsets = lagless_tplist_new();
    int64_t next[PARTS] = {0, 0};
    int n = 0, failed = 0, i;
    double deadline = now_s() + 60;
    char value[64];

    CHECK_OK(lagless_producer_begin_transaction(p));
    while (n < 20) {
        lagless_message *m = NULL;
        size_t len = 0;
        const uint8_t *v;
        int32_t part;
        CHECK(now_s() < deadline);
        CHECK_OK(lagless_consumer_poll(c, 200, &m));
        if (m == NULL) continue;
        /* The group metadata taken with the records. */
        lagless_group_metadata_destroy(gm);
        CHECK_OK(lagless_consumer_group_metadata_handle(c, &gm));
        part = lagless_message_partition(m);
        CHECK(part >= 0 && part < PARTS);
        CHECK(lagless_message_offset(m) == next[part]);
        next[part]++;
        v = lagless_message_value(m, &len);
        CHECK(len < 40);
        sprintf(value, "%c:%.*s", commit ? 'c' : 'a', (int)len, (const char *)v);
        send(p, out_topic, part, value, &failed);
        n++;
        lagless_message_destroy(m);
    }
    for (i = 0; i < PARTS; i++) {
        CHECK_OK(lagless_tplist_add(offsets, in_topic, i));
        CHECK_OK(lagless_tplist_set_offset(offsets, (size_t)i, next[i]));
    }
    CHECK_OK(lagless_producer_send_offsets_to_transaction(p, offsets, gm, 30000));
    if (commit) {
        CHECK_OK(lagless_producer_commit_transaction(p, 30000));
    } else {
        CHECK_OK(lagless_producer_flush(p, 30000));
        CHECK_OK(lagless_producer_abort_transaction(p, 30000));
    }
    CHECK(failed == 0);
    lagless_group_metadata_destroy(gm);
    lagless_tplist_destroy(offsets);
}

static void consume_transform_produce(const char *in_topic, const char *out_topic,
                                      const char *group, const char *tid) {
    const char *cc[] = {"bootstrap.servers", bootstrap, "group.id", group, "isolation.level",
                        "read_committed", "auto.offset.reset", "earliest", "enable.auto.commit",
                        "false", NULL};
    const char *pc[] = {"bootstrap.servers", bootstrap, NULL};
    const char *topics[1];
    lagless_producer *plain, *p;
    lagless_consumer *c;
    lagless_error *err;
    int failed = 0, i, n, bad;
    int64_t got[PARTS];
    char value[32];

    CHECK_OK(lagless_admin_create_topic(bootstrap, in_topic, PARTS, 1));
    CHECK_OK(lagless_admin_create_topic(bootstrap, out_topic, PARTS, 1));
    plain = new_producer(pc);
    for (i = 0; i < 20; i++) {
        sprintf(value, "in%d", i);
        send(plain, in_topic, i % PARTS, value, &failed);
    }
    CHECK_OK(lagless_producer_flush(plain, 30000));
    CHECK(failed == 0);
    CHECK_OK(lagless_producer_close(plain, 5000));
    lagless_producer_destroy(plain);

    /* Group metadata needs a subscription. */
    c = new_consumer(cc);
    {
        lagless_group_metadata *gm = NULL;
        err = lagless_consumer_group_metadata_handle(c, &gm);
        CHECK(err != NULL && lagless_error_code(err) == LAGLESS_ERR_ILLEGAL_STATE && gm == NULL);
        lagless_error_destroy(err);
    }
    topics[0] = in_topic;
    CHECK_OK(lagless_consumer_subscribe(c, topics, 1, NULL));
    p = txn_producer(tid);

    transform_round(c, p, in_topic, out_topic, 0);
    committed(c, in_topic, got);
    printf("after the aborted round: committed %lld/%lld\n", (long long)got[0], (long long)got[1]);
    CHECK(got[0] == LAGLESS_OFFSET_INVALID && got[1] == LAGLESS_OFFSET_INVALID);

    /* Read the aborted round's records again. */
    for (i = 0; i < PARTS; i++) CHECK_OK(lagless_consumer_seek(c, in_topic, i, 0));
    transform_round(c, p, in_topic, out_topic, 1);
    committed(c, in_topic, got);
    printf("after the committed round: committed %lld/%lld\n", (long long)got[0],
           (long long)got[1]);
    CHECK(got[0] == 10 && got[1] == 10);

    write_end(p, out_topic);
    CHECK_OK(lagless_producer_close(p, 5000));
    lagless_producer_destroy(p);
    CHECK_OK(lagless_consumer_close(c, 5000));
    lagless_consumer_destroy(c);

    n = read_all(out_topic, "read_committed", 'a', &bad);
    printf("output read_committed: %d records, %d of the aborted round\n", n, bad);
    CHECK(n == 20 && bad == 0);
    n = read_all(out_topic, "read_uncommitted", 'a', &bad);
    printf("output read_uncommitted: %d records, %d of the aborted round\n", n, bad);
    CHECK(n == 40 && bad == 20);
}

int main(int argc, char **argv) {
    char a[256], b[256], d[256], tid[256], tid2[256];
    CHECK(argc == 3 && strlen(argv[1]) < 200);
    bootstrap = test_bootstrap();
    sprintf(a, "%s-txn", argv[1]);
    sprintf(tid, "%s-tid", argv[1]);
    committed_and_aborted(a, tid);
    sprintf(b, "%s-in", argv[1]);
    sprintf(d, "%s-out", argv[1]);
    sprintf(tid2, "%s-ctp", argv[1]);
    consume_transform_produce(b, d, argv[2], tid2);
    printf("transactions: ok\n");
    return 0;
}
