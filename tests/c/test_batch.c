/* The batch hand-over of the C ABI (lagless_consumer_consume_batch), against a real broker:
 * a batch's messages equal what the per-message API gives for the same records (topic,
 * partition, offset, timestamp, key, value, headers); every offset is handed over exactly once;
 * an empty batch on timeout; NULL and out-of-range arguments; a batch outlives its consumer;
 * rebalance callbacks run inside the batch poll, on the calling thread.
 * Usage: test_batch TOPIC GROUP (TOPIC must not exist yet) */
#include "common.h"

#define PARTITIONS 3
#define PER_PARTITION 400
#define TOTAL (PARTITIONS * PER_PARTITION)

static const char *bootstrap;

/* What the test keeps of one record, copied out of the message. */
typedef struct {
    char topic[128];
    int32_t partition;
    int64_t offset, timestamp;
    int has_key, has_value;
    char key[32], value[64];
    size_t key_len, value_len;
    size_t headers;
    char header_key[16], header_value[32];
    size_t header_key_len, header_value_len;
    int seen;
} rec;

static rec by_poll[PARTITIONS][PER_PARTITION];
static rec by_batch[PARTITIONS][PER_PARTITION];

/* Record i of each partition: key "k<i>" (none for every 7th), value "value-<p>-<i>" (empty,
 * not null, for every 11th), header "i" = "<i>" (none for every 5th). No tombstones: valgrind
 * flags the producer's size estimate of a null value (the length half of a `None` slice read by
 * optimised code), which is not what this test is about. */
#define NO_KEY(i) ((i) % 7 == 0)
#define EMPTY_VALUE(i) ((i) % 11 == 0)
static void produce(const char *topic) {
    const char *pc[] = {"bootstrap.servers", NULL, "linger.ms", "5", NULL};
    lagless_producer *p = NULL;
    lagless_header h;
    char key[32], value[64], hv[32];
    int part, i;

    pc[1] = bootstrap;
    CHECK_OK(lagless_admin_create_topic(bootstrap, topic, PARTITIONS, 1));
    p = new_producer(pc);
    h.key = "i";
    h.value = (const uint8_t *)hv;
    for (part = 0; part < PARTITIONS; part++) {
        for (i = 0; i < PER_PARTITION; i++) {
            size_t kl = (size_t)sprintf(key, "k%d", i);
            size_t vl = (size_t)sprintf(value, "value-%d-%d", part, i);
            h.value_len = (size_t)sprintf(hv, "%d", i);
            CHECK_OK(lagless_producer_send_with_headers(
                p, topic, part, NO_KEY(i) ? NULL : (const uint8_t *)key, NO_KEY(i) ? 0 : kl,
                (const uint8_t *)value, EMPTY_VALUE(i) ? 0 : vl, &h,
                i % 5 == 0 ? 0 : 1, 1700000000000LL + i, NULL, NULL));
        }
    }
    CHECK_OK(lagless_producer_flush(p, 30000));
    CHECK_OK(lagless_producer_close(p, 5000));
    lagless_producer_destroy(p);
}

/* Copies a message into the table for its partition and offset; fails on an offset seen twice
 * or out of range. */
static void keep(rec table[PARTITIONS][PER_PARTITION], const lagless_message *m) {
    int32_t part = lagless_message_partition(m);
    int64_t off = lagless_message_offset(m);
    const uint8_t *b;
    rec *r;
    CHECK(part >= 0 && part < PARTITIONS && off >= 0 && off < PER_PARTITION);
    r = &table[part][off];
    CHECK(!r->seen); /* an offset handed over twice */
    r->seen = 1;
    CHECK(strlen(lagless_message_topic(m)) < sizeof r->topic);
    strcpy(r->topic, lagless_message_topic(m));
    r->partition = part;
    r->offset = off;
    r->timestamp = lagless_message_timestamp(m);
    b = lagless_message_key(m, &r->key_len);
    r->has_key = b != NULL;
    CHECK(r->key_len < sizeof r->key);
    if (b) memcpy(r->key, b, r->key_len);
    b = lagless_message_value(m, &r->value_len);
    r->has_value = b != NULL;
    CHECK(r->value_len < sizeof r->value);
    if (b) memcpy(r->value, b, r->value_len);
    r->headers = lagless_message_header_count(m);
    if (r->headers > 0) {
        const char *hk = NULL;
        const uint8_t *hv = NULL;
        CHECK_OK(lagless_message_header_get(m, 0, &hk, &r->header_key_len, &hv, &r->header_value_len));
        CHECK(r->header_key_len < sizeof r->header_key && r->header_value_len < sizeof r->header_value);
        memcpy(r->header_key, hk, r->header_key_len);
        memcpy(r->header_value, hv, r->header_value_len);
    }
}

static lagless_consumer *assigned_consumer(const char *topic) {
    const char *cc[] = {"bootstrap.servers", NULL, "auto.offset.reset", "earliest",
                        "enable.auto.commit", "false", "max.poll.records", "150", NULL};
    lagless_consumer *c = NULL;
    lagless_tplist *tps = lagless_tplist_new();
    int p;
    cc[1] = bootstrap;
    c = new_consumer(cc);
    for (p = 0; p < PARTITIONS; p++) CHECK_OK(lagless_tplist_add(tps, topic, p));
    CHECK_OK(lagless_consumer_assign(c, tps));
    lagless_tplist_destroy(tps);
    return c;
}

/* Every record once, through lagless_consumer_poll. */
static void read_per_message(const char *topic) {
    lagless_consumer *c = assigned_consumer(topic);
    double deadline = now_s() + 180;
    int n = 0;
    while (n < TOTAL) {
        lagless_message *m = NULL;
        CHECK_OK(lagless_consumer_poll(c, 200, &m));
        if (m) {
            keep(by_poll, m);
            lagless_message_destroy(m);
            n++;
        }
        CHECK(now_s() < deadline);
    }
    CHECK_OK(lagless_consumer_close(c, 5000));
    lagless_consumer_destroy(c);
}

/* Every record once, through batches; the last non-empty batch is kept past the consumer's
 * close and destroy, and read again then. */
static void read_batches(const char *topic) {
    lagless_consumer *c = assigned_consumer(topic);
    lagless_batch *last = NULL, *b = NULL;
    double deadline = now_s() + 180;
    size_t n = 0, batches = 0, i;
    while (n < TOTAL) {
        b = NULL;
        CHECK_OK(lagless_consumer_consume_batch(c, 100, 200, &b));
        CHECK(b != NULL);
        CHECK(lagless_batch_count(b) <= 100);
        for (i = 0; i < lagless_batch_count(b); i++) keep(by_batch, lagless_batch_message(b, i));
        CHECK(lagless_batch_message(b, lagless_batch_count(b)) == NULL);
        n += lagless_batch_count(b);
        if (lagless_batch_count(b) > 0) {
            batches++;
            /* A batch message is the batch's: destroying it does nothing (ASan and valgrind
             * would see a double free at lagless_batch_destroy). */
            lagless_message_destroy((lagless_message *)lagless_batch_message(b, 0));
            lagless_batch_destroy(last);
            last = b;
        } else {
            lagless_batch_destroy(b);
        }
        CHECK(now_s() < deadline);
    }
    CHECK(n == TOTAL);
    CHECK(batches >= TOTAL / 100); /* `max` was honoured */
    /* Everything is read: the next batch is empty (not NULL) once the timeout passes. */
    b = NULL;
    CHECK_OK(lagless_consumer_consume_batch(c, 100, 300, &b));
    CHECK(b != NULL && lagless_batch_count(b) == 0 && lagless_batch_message(b, 0) == NULL);
    lagless_batch_destroy(b);
    /* Bad arguments, each named. */
    b = NULL;
    EXPECT_ERR(lagless_consumer_consume_batch(c, 0, 0, &b), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_consume_batch(c, 10, 0, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_consume_batch(NULL, 10, 0, &b), LAGLESS_ERR_INVALID_ARGUMENT);
    CHECK(b == NULL); /* out-parameters are written only on success */
    CHECK_OK(lagless_consumer_close(c, 5000));
    EXPECT_ERR(lagless_consumer_consume_batch(c, 10, 0, &b), LAGLESS_ERR_CLOSED);
    lagless_consumer_destroy(c);
    /* The kept batch is still whole after its consumer is gone. */
    CHECK(last != NULL && lagless_batch_count(last) > 0);
    for (i = 0; i < lagless_batch_count(last); i++) {
        const lagless_message *m = lagless_batch_message(last, i);
        const rec *r = &by_batch[lagless_message_partition(m)][lagless_message_offset(m)];
        size_t vl = 0;
        const uint8_t *v = lagless_message_value(m, &vl);
        CHECK(strcmp(lagless_message_topic(m), topic) == 0);
        CHECK((v != NULL) == r->has_value && vl == r->value_len);
        CHECK(v == NULL || memcmp(v, r->value, vl) == 0);
    }
    lagless_batch_destroy(last);
    lagless_batch_destroy(NULL);
    CHECK(lagless_batch_count(NULL) == 0 && lagless_batch_message(NULL, 0) == NULL);
    printf("batches: %zu records in %zu batches\n", n, batches);
}

static void compare(const char *topic) {
    int p, i;
    for (p = 0; p < PARTITIONS; p++) {
        for (i = 0; i < PER_PARTITION; i++) {
            const rec *a = &by_poll[p][i], *b = &by_batch[p][i];
            char want[64];
            int wl = sprintf(want, "value-%d-%d", p, i);
            CHECK(a->seen && b->seen);
            CHECK(strcmp(a->topic, topic) == 0 && strcmp(b->topic, topic) == 0);
            CHECK(a->partition == b->partition && a->offset == b->offset);
            CHECK(a->timestamp == 1700000000000LL + i && b->timestamp == a->timestamp);
            CHECK(a->has_key == !NO_KEY(i) && b->has_key == a->has_key);
            CHECK(a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0);
            CHECK(a->has_value && b->has_value);
            CHECK(EMPTY_VALUE(i) ? a->value_len == 0
                                 : (a->value_len == (size_t)wl && memcmp(a->value, want, (size_t)wl) == 0));
            CHECK(a->value_len == b->value_len && memcmp(a->value, b->value, a->value_len) == 0);
            CHECK(a->headers == (i % 5 == 0 ? 0u : 1u) && b->headers == a->headers);
            CHECK(a->header_key_len == b->header_key_len && a->header_value_len == b->header_value_len);
            CHECK(memcmp(a->header_key, b->header_key, a->header_key_len) == 0);
            CHECK(memcmp(a->header_value, b->header_value, a->header_value_len) == 0);
        }
    }
    printf("per-message and batch: the same %d records, every offset once\n", TOTAL);
}

/* Rebalance callbacks inside the batch poll. */
static int in_batch_call = 0, assigned_calls = 0, revoked_calls = 0, outside_calls = 0;
static size_t assigned_partitions = 0;

static int on_assigned(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    (void)opaque;
    (void)c;
    if (!in_batch_call) outside_calls++;
    assigned_calls++;
    assigned_partitions += lagless_tplist_count(parts);
    return 0;
}

static int on_revoked(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    (void)opaque;
    (void)c;
    (void)parts;
    revoked_calls++;
    return 0;
}

static void group(const char *topic, const char *group_id) {
    const char *cc[] = {"bootstrap.servers", NULL, "group.id", NULL, "auto.offset.reset", "earliest",
                        "enable.auto.commit", "false", NULL};
    const char *topics[1];
    lagless_rebalance_listener l;
    lagless_consumer *c = NULL;
    double deadline = now_s() + 180;
    size_t n = 0;
    cc[1] = bootstrap;
    cc[3] = group_id;
    topics[0] = topic;
    c = new_consumer(cc);
    memset(&l, 0, sizeof l);
    l.on_assigned = on_assigned;
    l.on_revoked = on_revoked;
    CHECK_OK(lagless_consumer_subscribe(c, topics, 1, &l));
    while (n < TOTAL) {
        lagless_batch *b = NULL;
        in_batch_call = 1;
        CHECK_OK(lagless_consumer_consume_batch(c, 500, 200, &b));
        in_batch_call = 0;
        n += lagless_batch_count(b);
        lagless_batch_destroy(b);
        CHECK(now_s() < deadline);
    }
    CHECK(n == TOTAL);
    CHECK(assigned_calls == 1 && assigned_partitions == PARTITIONS && outside_calls == 0);
    CHECK_OK(lagless_consumer_close(c, 10000));
    CHECK(revoked_calls == 1);
    lagless_consumer_destroy(c);
    printf("group: on_assigned ran inside the batch poll (%zu partitions), %zu records\n",
           assigned_partitions, n);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_batch TOPIC GROUP\n");
        return 2;
    }
    bootstrap = test_bootstrap();
    produce(argv[1]);
    read_per_message(argv[1]);
    read_batches(argv[1]);
    compare(argv[1]);
    group(argv[1], argv[2]);
    printf("test_batch: ok\n");
    return 0;
}
