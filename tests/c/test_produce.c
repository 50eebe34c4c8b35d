/* Produces through the C ABI: blocking sends, asynchronous sends whose delivery reports run in
 * lagless_producer_poll on this thread, flush, close; then reads the records back with a manually
 * assigned consumer. Usage: test_produce TOPIC */
#include "common.h"

#include <pthread.h>

#define N_SYNC 20
#define N_ASYNC 200

struct reports {
    int ok;
    int failed;
    int64_t last_offset;
};

static void on_delivery(void *opaque, const lagless_error *err, int32_t partition, int64_t offset) {
    struct reports *r = (struct reports *)opaque;
    (void)partition;
    if (err != NULL) {
        fprintf(stderr, "delivery failed: %s\n", lagless_error_message(err));
        r->failed++;
    } else {
        r->ok++;
        r->last_offset = offset;
    }
}

/* The log callback may run on any lagless thread: guard what it touches. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int retries_warnings;

static void on_log(void *opaque, int32_t level, const char *target, const char *message) {
    (void)opaque;
    pthread_mutex_lock(&log_lock);
    if (level == LAGLESS_LOG_WARN && strncmp(target, "lagless", 7) == 0 &&
        strstr(message, "retries") != NULL) {
        retries_warnings++;
    }
    pthread_mutex_unlock(&log_lock);
}

struct commit_state {
    pthread_t poller;
    int calls;
    int failed;
    int other_thread;
};

static void on_commit(void *opaque, const lagless_error *err) {
    struct commit_state *s = (struct commit_state *)opaque;
    s->calls++;
    if (err != NULL) s->failed++;
    if (!pthread_equal(pthread_self(), s->poller)) s->other_thread++;
}

int main(int argc, char **argv) {
    const char *bootstrap = test_bootstrap();
    const char *topic;
    const char *pcfg[] = {"bootstrap.servers", NULL, "linger.ms", "5", NULL};
    const char *ccfg[] = {"bootstrap.servers", NULL, "auto.offset.reset", "earliest",
                          "group.id", NULL, NULL};
    struct commit_state cs;
    lagless_message *one = NULL;
    int64_t pos = -1;
    lagless_config *cfg;
    lagless_producer *p = NULL;
    lagless_consumer *c = NULL;
    lagless_tplist *tps;
    struct reports rep = {0, 0, -1};
    int i, seen = 0;
    double deadline;
    char value[64];

    CHECK(argc == 2);
    topic = argv[1];
    /* The header's version and the library's agree. */
    CHECK(strcmp(LAGLESS_VERSION, lagless_version()) == 0);
#ifdef EXPECTED_VERSION
    CHECK(strcmp(LAGLESS_VERSION, EXPECTED_VERSION) == 0);
#endif
    /* The integer version packs the same three numbers, as rd_kafka_version() does. */
    CHECK(lagless_version_int() == (((uint32_t)LAGLESS_VERSION_MAJOR << 24) |
                                    ((uint32_t)LAGLESS_VERSION_MINOR << 16) |
                                    ((uint32_t)LAGLESS_VERSION_PATCH << 8) | 0xffu));
    CHECK_OK(lagless_admin_create_topic(bootstrap, topic, 1, 1));

    /* The log callback sees the deprecation warning `retries` gives (logged on this thread). */
    CHECK_OK(lagless_set_log_callback(LAGLESS_LOG_WARN, on_log, NULL));
    pcfg[1] = bootstrap;
    cfg = make_config(pcfg);
    CHECK_OK(lagless_config_set(cfg, "retries", "3"));
    pthread_mutex_lock(&log_lock);
    CHECK(retries_warnings == 1);
    pthread_mutex_unlock(&log_lock);
    CHECK_OK(lagless_set_log_callback(LAGLESS_LOG_WARN, NULL, NULL));
    CHECK_OK(lagless_producer_new(cfg, &p));
    lagless_config_destroy(cfg);

    for (i = 0; i < N_SYNC; i++) {
        int32_t part = -2;
        int64_t off = -2;
        int n = sprintf(value, "sync-%d", i);
        CHECK_OK(lagless_producer_send_sync(p, topic, -1, (const uint8_t *)"k", 1,
                                            (const uint8_t *)value, (size_t)n, &part, &off));
        CHECK(part == 0);
        CHECK(off == i);
    }
    for (i = 0; i < N_ASYNC; i++) {
        int n = sprintf(value, "async-%d", i);
        CHECK_OK(lagless_producer_send(p, topic, 0, NULL, 0, (const uint8_t *)value, (size_t)n,
                                       on_delivery, &rep));
    }
    /* Reports run only inside poll/flush, on this thread. */
    CHECK(rep.ok == 0);
    deadline = now_s() + 30;
    while (rep.ok + rep.failed < N_ASYNC && now_s() < deadline) {
        size_t served = 0;
        CHECK_OK(lagless_producer_poll(p, 100, &served));
    }
    CHECK(rep.failed == 0);
    CHECK(rep.ok == N_ASYNC);
    if (rep.last_offset != N_SYNC + N_ASYNC - 1) {
        /* Says which way it went: higher means a batch was written twice, lower a report out of order. */
        fprintf(stderr, "last delivery report at offset %lld, expected %d\n",
                (long long)rep.last_offset, N_SYNC + N_ASYNC - 1);
    }
    CHECK(rep.last_offset == N_SYNC + N_ASYNC - 1);
    CHECK_OK(lagless_producer_flush(p, 10000));
    CHECK_OK(lagless_producer_close(p, 10000));
    lagless_producer_destroy(p);

    /* Read everything back, in order, with a manual assignment. */
    ccfg[1] = bootstrap;
    ccfg[5] = topic; /* a group id for commits; the consumer is assigned by hand */
    c = new_consumer(ccfg);
    tps = lagless_tplist_new();
    CHECK_OK(lagless_tplist_add(tps, topic, 0));
    CHECK_OK(lagless_consumer_assign(c, tps));
    lagless_tplist_destroy(tps);
    deadline = now_s() + 30;
    while (seen < N_SYNC + N_ASYNC && now_s() < deadline) {
        lagless_message *msgs[64];
        size_t n = 0, j;
        CHECK_OK(lagless_consumer_poll_batch(c, 200, msgs, 64, &n));
        for (j = 0; j < n; j++) {
            size_t klen = 99, vlen = 0;
            const uint8_t *k = lagless_message_key(msgs[j], &klen);
            const uint8_t *v = lagless_message_value(msgs[j], &vlen);
            CHECK(lagless_message_offset(msgs[j]) == seen);
            CHECK(strcmp(lagless_message_topic(msgs[j]), topic) == 0);
            CHECK(lagless_message_partition(msgs[j]) == 0);
            CHECK(lagless_message_timestamp(msgs[j]) > 0);
            CHECK(lagless_message_header_count(msgs[j]) == 0);
            CHECK(!lagless_message_from_recovery(msgs[j]));
            if (seen < N_SYNC) {
                CHECK(k != NULL && klen == 1 && k[0] == 'k');
                sprintf(value, "sync-%d", seen);
            } else {
                CHECK(k == NULL && klen == 0);
                sprintf(value, "async-%d", seen - N_SYNC);
            }
            CHECK(v != NULL && vlen == strlen(value) && memcmp(v, value, vlen) == 0);
            lagless_message_destroy(msgs[j]);
            seen++;
        }
    }
    CHECK(seen == N_SYNC + N_ASYNC);

    /* position, an asynchronous commit whose callback runs in a later poll on this thread, and
     * committed. */
    CHECK_OK(lagless_consumer_position(c, topic, 0, 5000, &pos));
    CHECK(pos == seen);
    memset(&cs, 0, sizeof cs);
    cs.poller = pthread_self();
    CHECK_OK(lagless_consumer_commit_async(c, NULL, on_commit, &cs));
    deadline = now_s() + 20;
    while (cs.calls == 0 && now_s() < deadline) {
        CHECK_OK(lagless_consumer_poll(c, 100, &one));
        CHECK(one == NULL);
    }
    CHECK(cs.calls == 1 && cs.failed == 0 && cs.other_thread == 0);
    tps = lagless_tplist_new();
    CHECK_OK(lagless_tplist_add(tps, topic, 0));
    CHECK_OK(lagless_consumer_committed(c, tps, 5000));
    CHECK_OK(lagless_tplist_get(tps, 0, NULL, NULL, &pos));
    CHECK(pos == seen);

    /* seek back; pause holds records back; resume releases them. */
    CHECK_OK(lagless_consumer_seek(c, topic, 0, 5));
    CHECK_OK(lagless_consumer_pause(c, tps));
    CHECK_OK(lagless_consumer_poll(c, 500, &one));
    CHECK(one == NULL);
    CHECK_OK(lagless_consumer_resume(c, tps));
    deadline = now_s() + 20;
    while (one == NULL && now_s() < deadline) CHECK_OK(lagless_consumer_poll(c, 200, &one));
    CHECK(one != NULL && lagless_message_offset(one) == 5);
    lagless_message_destroy(one);
    lagless_tplist_destroy(tps);
    CHECK_OK(lagless_consumer_close(c, 5000));
    lagless_consumer_destroy(c);
    printf("test_produce: ok (%d records)\n", seen);
    return 0;
}
