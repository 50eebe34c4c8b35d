/* The consumer's metrics through the C ABI, against a real broker: 10 records to partition 0
 * and 5 to partition 1 of a new topic, all consumed by a manually assigned consumer, partition
 * 0 committed at 4 and partition 1 at its position; lagless_consumer_metrics_json then says so
 * per partition, and so does lagless_consumer_metrics_prometheus's text; the caller frees each
 * string with lagless_string_destroy.
 * Usage: test_metrics TOPIC GROUP (TOPIC must not exist yet) */
#include "common.h"

/* Fails the test unless `json` contains `fragment`. */
static void expect_in(const char *json, const char *fragment) {
    if (strstr(json, fragment) == NULL) {
        fprintf(stderr, "metrics JSON lacks %s: %s\n", fragment, json);
        exit(1);
    }
}

/* Fails the test unless `text` has the line `line` (a whole line). */
static void expect_line(const char *text, const char *line) {
    size_t n = strlen(line);
    const char *at = text;
    while ((at = strstr(at, line)) != NULL) {
        if ((at == text || at[-1] == '\n') && at[n] == '\n') {
            return;
        }
        at++;
    }
    fprintf(stderr, "Prometheus text lacks the line %s:\n%s\n", line, text);
    exit(1);
}

static char *metrics(lagless_consumer *c) {
    char *json = NULL;
    CHECK_OK(lagless_consumer_metrics_json(c, &json));
    CHECK(json != NULL);
    return json;
}

int main(int argc, char **argv) {
    const char *bootstrap = test_bootstrap();
    const char *topic, *group;
    const char *pc[] = {"bootstrap.servers", NULL, "linger.ms", "0", NULL};
    const char *cc[] = {"bootstrap.servers", NULL, "group.id", NULL, "enable.auto.commit", "false",
                        "auto.offset.reset", "earliest", "client.id", "c-metrics", NULL};
    lagless_producer *p;
    lagless_consumer *c;
    lagless_tplist *parts, *commit;
    char *json, *text;
    char line[512];
    int got[2] = {0, 0};
    double deadline;
    int i;

    if (argc != 3) {
        fprintf(stderr, "usage: test_metrics TOPIC GROUP\n");
        return 2;
    }
    topic = argv[1];
    group = argv[2];
    CHECK_OK(lagless_admin_create_topic(bootstrap, topic, 2, 1));
    pc[1] = bootstrap;
    p = new_producer(pc);
    for (i = 0; i < 15; i++) {
        CHECK_OK(lagless_producer_send(p, topic, i < 10 ? 0 : 1, NULL, 0, (const uint8_t *)"abc",
                                       3, NULL, NULL));
    }
    CHECK_OK(lagless_producer_flush(p, 30000));
    CHECK_OK(lagless_producer_close(p, 5000));
    lagless_producer_destroy(p);

    cc[1] = bootstrap;
    cc[3] = group;
    c = new_consumer(cc);
    parts = lagless_tplist_new();
    CHECK_OK(lagless_tplist_add(parts, topic, 0));
    CHECK_OK(lagless_tplist_add(parts, topic, 1));
    CHECK_OK(lagless_consumer_assign(c, parts));
    lagless_tplist_destroy(parts);

    /* Before anything is consumed: a JSON object, no group, nothing delivered. */
    json = metrics(c);
    CHECK(json[0] == '{');
    expect_in(json, "\"group\":null");
    expect_in(json, "\"records_consumed_total\":0");
    lagless_string_destroy(json);

    deadline = now_s() + 60;
    while (got[0] + got[1] < 15) {
        lagless_message *m = NULL;
        CHECK(now_s() < deadline);
        CHECK_OK(lagless_consumer_poll(c, 200, &m));
        if (m != NULL) {
            got[lagless_message_partition(m)]++;
            lagless_message_destroy(m);
        }
    }
    CHECK(got[0] == 10 && got[1] == 5);

    commit = lagless_tplist_new();
    CHECK_OK(lagless_tplist_add(commit, topic, 0));
    CHECK_OK(lagless_tplist_set_offset(commit, 0, 4));
    CHECK_OK(lagless_tplist_add(commit, topic, 1));
    CHECK_OK(lagless_tplist_set_offset(commit, 1, 5));
    CHECK_OK(lagless_consumer_commit_sync(c, commit, -1));
    lagless_tplist_destroy(commit);

    /* serde_json writes an object's fields in the order written (`preserve_order`), the order
     * README.md documents: each partition's fields come out as below. */
    json = metrics(c);
    printf("%s\n", json);
    expect_in(json, "\"assigned_partitions\":2");
    expect_in(json, "\"records_consumed_total\":15");
    expect_in(json, "\"bytes_consumed_total\":45");
    /* Partition 0: committed 4, consumed to its end at 10. */
    expect_in(json, "\"partition\":0,\"position\":10,\"committed_offset\":4,\"hi_offset\":10,");
    expect_in(json, "\"consumer_lag\":0,\"records_consumed\":10,\"bytes_consumed\":30,\"paused\":false,");
    /* Partition 1: committed at its position 5. */
    expect_in(json, "\"partition\":1,\"position\":5,\"committed_offset\":5,\"hi_offset\":5,");
    expect_in(json, "\"consumer_lag\":0,\"records_consumed\":5,\"bytes_consumed\":15,\"paused\":false,");
    lagless_string_destroy(json);

    /* The same snapshot in the Prometheus text format: assigned by hand, so no group_id label. */
    text = NULL;
    CHECK_OK(lagless_consumer_metrics_prometheus(c, &text));
    CHECK(text != NULL);
    printf("%s", text);
    expect_line(text, "# TYPE lagless_consumer_records_consumed_total counter");
    expect_line(text, "lagless_consumer_records_consumed_total{client_id=\"c-metrics\"} 15");
    expect_line(text, "lagless_consumer_bytes_consumed_total{client_id=\"c-metrics\"} 45");
    expect_line(text, "lagless_consumer_assigned_partitions{client_id=\"c-metrics\"} 2");
    snprintf(line, sizeof line,
             "lagless_consumer_committed_offset{client_id=\"c-metrics\",topic=\"%s\",partition=\"0\"} 4",
             topic);
    expect_line(text, line);
    snprintf(line, sizeof line,
             "lagless_consumer_position{client_id=\"c-metrics\",topic=\"%s\",partition=\"0\"} 10", topic);
    expect_line(text, line);
    snprintf(line, sizeof line,
             "lagless_consumer_records_lag{client_id=\"c-metrics\",topic=\"%s\",partition=\"1\"} 0", topic);
    expect_line(text, line);
    snprintf(line, sizeof line,
             "lagless_consumer_partition_records_consumed_total{client_id=\"c-metrics\",topic=\"%s\","
             "partition=\"1\"} 5",
             topic);
    expect_line(text, line);
    CHECK(strstr(text, "group_id=") == NULL);
    lagless_string_destroy(text);

    EXPECT_ERR(lagless_consumer_metrics_json(c, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_metrics_prometheus(c, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    CHECK_OK(lagless_consumer_close(c, 10000));
    json = NULL;
    EXPECT_ERR(lagless_consumer_metrics_json(c, &json), LAGLESS_ERR_CLOSED);
    CHECK(json == NULL);
    text = NULL;
    EXPECT_ERR(lagless_consumer_metrics_prometheus(c, &text), LAGLESS_ERR_CLOSED);
    CHECK(text == NULL);
    lagless_consumer_destroy(c);
    printf("test_metrics: ok\n");
    return 0;
}
