/* The producer's statistics and error callbacks through the C ABI. Against a real broker: 20
 * records sent with delivery callbacks and flushed by a producer with statistics.interval.ms=100;
 * the statistics callback runs inside lagless_producer_poll/_flush on the calling thread, and
 * the first call after the flush carries records_sent_total 20, the count the delivery reports
 * gave. Then, with nothing listening on 127.0.0.1:1: the error callback hears "all brokers are
 * down" (LAGLESS_ERR_TRANSPORT) once inside lagless_producer_poll, and not again in the second
 * of polls after it while each broker is retried every 50-100 ms.
 * Usage: test_producer_callbacks TOPIC (TOPIC must not exist yet) */
#include "common.h"

#include <pthread.h>

struct seen {
    pthread_t caller;
    int off_thread;
    int stats_calls;
    char *last_json;
    int errors;
    int32_t first_code;
    char first_message[512];
    int delivered;
    int failed;
};

static void on_statistics(void *opaque, const char *json, size_t json_len) {
    struct seen *s = opaque;
    if (!pthread_equal(pthread_self(), s->caller)) s->off_thread++;
    s->stats_calls++;
    CHECK(strlen(json) == json_len);
    free(s->last_json);
    s->last_json = malloc(json_len + 1);
    CHECK(s->last_json != NULL);
    memcpy(s->last_json, json, json_len + 1);
}

static void on_error(void *opaque, const lagless_error *error) {
    struct seen *s = opaque;
    if (!pthread_equal(pthread_self(), s->caller)) s->off_thread++;
    if (s->errors++ == 0) {
        s->first_code = lagless_error_code(error);
        snprintf(s->first_message, sizeof s->first_message, "%s", lagless_error_message(error));
    }
}

static void on_delivery(void *opaque, const lagless_error *err, int32_t partition,
                        int64_t offset) {
    struct seen *s = opaque;
    (void)partition;
    (void)offset;
    if (err == NULL) {
        s->delivered++;
    } else {
        s->failed++;
    }
}

static void statistics_carry_what_was_delivered(const char *bootstrap, const char *topic) {
    const char *pc[] = {"bootstrap.servers", NULL, "client.id", "c-producer-stats", "linger.ms",
                        "5", "statistics.interval.ms", "100", NULL};
    struct seen s;
    lagless_producer *p;
    int i, before;
    double deadline;
    char want[64];

    memset(&s, 0, sizeof s);
    s.caller = pthread_self();
    pc[1] = bootstrap;
    p = new_producer(pc);
    CHECK_OK(lagless_producer_set_statistics_callback(p, on_statistics, &s));
    CHECK_OK(lagless_producer_set_error_callback(p, on_error, &s));
    for (i = 0; i < 20; i++) {
        CHECK_OK(lagless_producer_send(p, topic, -1, NULL, 0, (const uint8_t *)"value", 5,
                                       on_delivery, &s));
    }
    CHECK_OK(lagless_producer_flush(p, 30000));
    CHECK(s.delivered == 20 && s.failed == 0);
    /* The next call after the flush: everything delivered is counted in it. */
    before = s.stats_calls;
    deadline = now_s() + 10;
    while (s.stats_calls == before && now_s() < deadline) {
        CHECK_OK(lagless_producer_poll(p, 100, NULL));
    }
    CHECK(s.stats_calls > before);
    CHECK(s.off_thread == 0);
    CHECK(s.errors == 0);
    printf("test_producer_callbacks: %d statistics calls; last: %s\n", s.stats_calls,
           s.last_json);
    snprintf(want, sizeof want, "\"records_sent_total\":%d,", s.delivered);
    CHECK(strstr(s.last_json, "{\"type\":\"producer\",\"client_id\":\"c-producer-stats\",") ==
          s.last_json);
    CHECK(strstr(s.last_json, want) != NULL);
    CHECK(strstr(s.last_json, "\"records_failed_total\":0,") != NULL);
    CHECK(strstr(s.last_json, "\"records_outstanding\":0,") != NULL);

    /* Removed: no more calls. */
    CHECK_OK(lagless_producer_set_statistics_callback(p, NULL, NULL));
    before = s.stats_calls;
    for (i = 0; i < 4; i++) CHECK_OK(lagless_producer_poll(p, 100, NULL));
    CHECK(s.stats_calls == before);

    CHECK_OK(lagless_producer_close(p, 5000));
    EXPECT_ERR(lagless_producer_set_statistics_callback(p, on_statistics, &s),
               LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_producer_set_error_callback(p, on_error, &s), LAGLESS_ERR_CLOSED);
    lagless_producer_destroy(p);
    free(s.last_json);
}

static void all_brokers_down_is_heard_once(void) {
    const char *pc[] = {"bootstrap.servers", "127.0.0.1:1", "reconnect.backoff.ms", "50",
                        "reconnect.backoff.max.ms", "100", "linger.ms", "0",
                        "request.timeout.ms", "1000", "delivery.timeout.ms", "1500", NULL};
    struct seen s;
    lagless_producer *p;
    lagless_error *err;
    double deadline;

    memset(&s, 0, sizeof s);
    s.caller = pthread_self();
    p = new_producer(pc);
    CHECK_OK(lagless_producer_set_error_callback(p, on_error, &s));
    /* The producer connects once it has a topic to look up: the send waits for its metadata
     * and fails when delivery.timeout.ms runs out. */
    err = lagless_producer_send(p, "t", -1, NULL, 0, (const uint8_t *)"v", 1, NULL, NULL);
    CHECK(err != NULL);
    lagless_error_destroy(err);
    deadline = now_s() + 10;
    while (s.errors == 0 && now_s() < deadline) {
        CHECK_OK(lagless_producer_poll(p, 100, NULL));
    }
    /* The brokers stay down and are retried meanwhile: still one report. */
    deadline = now_s() + 1;
    while (now_s() < deadline) CHECK_OK(lagless_producer_poll(p, 100, NULL));
    printf("test_producer_callbacks: %d error callback calls, first: %s\n", s.errors,
           s.first_message);
    CHECK(s.errors == 1);
    CHECK(s.off_thread == 0);
    CHECK(s.first_code == LAGLESS_ERR_TRANSPORT);
    CHECK(strstr(s.first_message, "all brokers are down") != NULL);
    CHECK(strstr(s.first_message, "127.0.0.1:1") != NULL);
    CHECK_OK(lagless_producer_close(p, 100));
    lagless_producer_destroy(p);
}

int main(int argc, char **argv) {
    const char *bootstrap = test_bootstrap();
    if (argc != 2) {
        fprintf(stderr, "usage: test_producer_callbacks TOPIC\n");
        return 2;
    }
    CHECK_OK(lagless_admin_create_topic(bootstrap, argv[1], 2, 1));
    statistics_carry_what_was_delivered(bootstrap, argv[1]);
    all_brokers_down_is_heard_once();
    printf("test_producer_callbacks: ok\n");
    return 0;
}
