/* statistics.interval.ms through the C ABI, against a real broker: 10 records to partition 0 of
 * a new topic, consumed by a manually assigned consumer with statistics.interval.ms=200 and a
 * statistics callback; then 2 s of polls (100 ms each). The callback runs on the polling thread
 * only, a bounded number of times in those 2 s (never closer than the interval apart: at most
 * 11), and its JSON carries partition 0's position 10 and high watermark 10.
 * Usage: test_statistics TOPIC (TOPIC must not exist yet) */
#include "common.h"

#include <pthread.h>

struct stats {
    pthread_t poller;
    int calls;
    int off_thread;
    double last_s;
    double min_gap_s;
    char *last_json;
};

static void on_statistics(void *opaque, const char *json, size_t json_len) {
    struct stats *s = opaque;
    double t = now_s();
    if (!pthread_equal(pthread_self(), s->poller)) s->off_thread++;
    if (s->calls > 0 && t - s->last_s < s->min_gap_s) s->min_gap_s = t - s->last_s;
    s->last_s = t;
    s->calls++;
    CHECK(strlen(json) == json_len);
    free(s->last_json);
    s->last_json = malloc(json_len + 1);
    CHECK(s->last_json != NULL);
    memcpy(s->last_json, json, json_len + 1);
}

int main(int argc, char **argv) {
    const char *bootstrap = test_bootstrap();
    const char *topic;
    const char *pc[] = {"bootstrap.servers", NULL, "linger.ms", "0", NULL};
    const char *cc[] = {"bootstrap.servers", NULL, "auto.offset.reset", "earliest",
                        "statistics.interval.ms", "200", NULL};
    struct stats s;
    lagless_producer *p;
    lagless_consumer *c;
    lagless_tplist *parts;
    int got = 0, calls_before, i;
    double deadline, window_start, window;

    if (argc != 2) {
        fprintf(stderr, "usage: test_statistics TOPIC\n");
        return 2;
    }
    topic = argv[1];
    CHECK_OK(lagless_admin_create_topic(bootstrap, topic, 1, 1));
    pc[1] = bootstrap;
    p = new_producer(pc);
    for (i = 0; i < 10; i++) {
        CHECK_OK(lagless_producer_send(p, topic, 0, NULL, 0, (const uint8_t *)"abc", 3, NULL,
                                       NULL));
    }
    CHECK_OK(lagless_producer_flush(p, 30000));
    CHECK_OK(lagless_producer_close(p, 5000));
    lagless_producer_destroy(p);

    memset(&s, 0, sizeof s);
    s.poller = pthread_self();
    s.min_gap_s = 1e9;
    cc[1] = bootstrap;
    c = new_consumer(cc);
    CHECK_OK(lagless_consumer_set_statistics_callback(c, on_statistics, &s));
    parts = lagless_tplist_new();
    CHECK_OK(lagless_tplist_add(parts, topic, 0));
    CHECK_OK(lagless_consumer_assign(c, parts));
    lagless_tplist_destroy(parts);

    deadline = now_s() + 60;
    while (got < 10) {
        lagless_message *m = NULL;
        CHECK(now_s() < deadline);
        CHECK_OK(lagless_consumer_poll(c, 100, &m));
        if (m != NULL) {
            got++;
            lagless_message_destroy(m);
        }
    }

    /* Nothing more to read: 2 s of polls, each returning empty after up to 100 ms. */
    calls_before = s.calls;
    window_start = now_s();
    while (now_s() - window_start < 2.0) {
        lagless_message *m = NULL;
        CHECK_OK(lagless_consumer_poll(c, 100, &m));
        CHECK(m == NULL);
    }
    window = now_s() - window_start;
    printf("test_statistics: %d calls in %.2f s of polls (%d before), closest %.3f s apart\n",
           s.calls - calls_before, window, calls_before, s.min_gap_s);
    CHECK(s.off_thread == 0);
    /* 200 ms apart at the least: at most 11 in 2 s (plus what the last poll's overrun allows);
     * at least 4 even when polls come late on a loaded machine. */
    CHECK(s.calls - calls_before >= 4);
    CHECK(s.calls - calls_before <= 1 + (int)(window / 0.2));
    /* The core decides on its clock before taking the snapshot; the callback reads the time
     * after: a few ms of jitter either way. */
    CHECK(s.min_gap_s >= 0.19);
    CHECK(s.last_json != NULL);
    if (strstr(s.last_json, "\"hi_offset\":10,") == NULL ||
        strstr(s.last_json, "\"partition\":0,\"position\":10,") == NULL) {
        fprintf(stderr, "statistics JSON lacks partition 0 at 10: %s\n", s.last_json);
        return 1;
    }

    /* Removed: no more calls. */
    CHECK_OK(lagless_consumer_set_statistics_callback(c, NULL, NULL));
    calls_before = s.calls;
    for (i = 0; i < 4; i++) {
        lagless_message *m = NULL;
        CHECK_OK(lagless_consumer_poll(c, 100, &m));
        CHECK(m == NULL);
    }
    CHECK(s.calls == calls_before);

    CHECK_OK(lagless_consumer_close(c, 10000));
    EXPECT_ERR(lagless_consumer_set_statistics_callback(c, on_statistics, &s),
               LAGLESS_ERR_CLOSED);
    lagless_consumer_destroy(c);
    free(s.last_json);
    printf("test_statistics: ok\n");
    return 0;
}
