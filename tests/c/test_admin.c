/* The admin client through the C ABI, against a real broker: topics created and described
 * (a second create fails for that topic alone), the cluster, the log start and end after a
 * known number of records, a consumer group's listing, description and committed offsets while
 * its member runs, offsets altered once it has left, and topics deleted; each answer compared
 * with the exact JSON text it must be.
 * Usage: test_admin TOPIC GROUP (neither may exist yet) */
#include "common.h"

static const char *bootstrap;
static lagless_admin *admin;

/* Fails unless `json` contains `want`; frees nothing. */
#define EXPECT_HAS(json, want)                                                            \
    do {                                                                                  \
        if (strstr((json), (want)) == NULL) {                                             \
            fprintf(stderr, "%s:%d: expected\n  %s\nin\n  %s\n", __FILE__, __LINE__,      \
                    (want), (json));                                                      \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define EXPECT_EQ(json, want)                                                             \
    do {                                                                                  \
        if (strcmp((json), (want)) != 0) {                                                \
            fprintf(stderr, "%s:%d: expected\n  %s\ngot\n  %s\n", __FILE__, __LINE__,     \
                    (want), (json));                                                      \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* Fails unless `json` starts with `want`. */
#define EXPECT_PREFIX(json, want)                                                         \
    do {                                                                                  \
        if (strncmp((json), (want), strlen(want)) != 0) {                                 \
            fprintf(stderr, "%s:%d: expected a start of\n  %s\nin\n  %s\n", __FILE__,      \
                    __LINE__, (want), (json));                                            \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static size_t count(const char *json, const char *what) {
    size_t n = 0;
    const char *p = json;
    while ((p = strstr(p, what)) != NULL) {
        n++;
        p += strlen(what);
    }
    return n;
}

static lagless_tplist *partitions(const char *topic, int n) {
    lagless_tplist *l = lagless_tplist_new();
    int i;
    for (i = 0; i < n; i++) {
        CHECK_OK(lagless_tplist_add(l, topic, i));
    }
    return l;
}

/* Appends `n` records to `partition` of `topic` and waits until they are written. */
static void produce(const char *topic, int32_t partition, int n) {
    const char *pc[] = {"bootstrap.servers", NULL, "linger.ms", "0", NULL};
    lagless_producer *p;
    int i;
    pc[1] = bootstrap;
    p = new_producer(pc);
    for (i = 0; i < n; i++) {
        CHECK_OK(lagless_producer_send_sync(p, topic, partition, NULL, 0, (const uint8_t *)"v", 1,
                                            NULL, NULL));
    }
    CHECK_OK(lagless_producer_close(p, 5000));
    lagless_producer_destroy(p);
}

/* The topic's description once every one of its partitions has a leader (a new topic reaches
 * the broker's metadata a little after CreateTopics returns). */
static char *described(const char *topic, const char *last_partition) {
    double deadline = now_s() + 20;
    for (;;) {
        char *json = NULL;
        CHECK_OK(lagless_admin_describe_topics(admin, &topic, 1, 5000, &json));
        if (strstr(json, "\"error\":null") != NULL && strstr(json, last_partition) != NULL &&
            strstr(json, "\"leader\":-1") == NULL) {
            return json;
        }
        if (now_s() > deadline) {
            fprintf(stderr, "topic %s never described with its leaders: %s\n", topic, json);
            exit(1);
        }
        lagless_string_destroy(json);
    }
}

int main(int argc, char **argv) {
    const char *topic, *group;
    char topic_b[256], missing[256], want[2048], host[128];
    const char *colon;
    int port, node = -1;
    char *json = NULL;
    lagless_config *cfg;

    if (argc != 3) {
        fprintf(stderr, "usage: %s TOPIC GROUP\n", argv[0]);
        return 2;
    }
    topic = argv[1];
    group = argv[2];
    bootstrap = test_bootstrap();
    snprintf(topic_b, sizeof topic_b, "%s-b", topic);
    snprintf(missing, sizeof missing, "%s-missing", topic);
    colon = strrchr(bootstrap, ':');
    CHECK(colon != NULL && (size_t)(colon - bootstrap) < sizeof host);
    memcpy(host, bootstrap, (size_t)(colon - bootstrap));
    host[colon - bootstrap] = '\0';
    port = atoi(colon + 1);

    {
        const char *pairs[] = {"bootstrap.servers", NULL, NULL};
        pairs[1] = bootstrap;
        cfg = make_config(pairs);
        CHECK_OK(lagless_admin_new(cfg, &admin));
        lagless_config_destroy(cfg);
    }

    /* The cluster: the one broker the test was bootstrapped from. */
    CHECK_OK(lagless_admin_describe_cluster(admin, 10000, &json));
    CHECK(sscanf(strstr(json, "\"brokers\":[{\"id\":") + strlen("\"brokers\":[{\"id\":"), "%d",
                 &node) == 1);
    snprintf(want, sizeof want,
             "\"brokers\":[{\"id\":%d,\"host\":\"%s\",\"port\":%d,\"rack\":null}]}", node, host,
             port);
    EXPECT_HAS(json, want);
    EXPECT_HAS(json, "{\"cluster_id\":\"");
    lagless_string_destroy(json);
    printf("cluster: broker %d at %s:%d\n", node, host, port);

    /* Two topics in one call, one of them compacted. */
    {
        const char *names[] = {"cleanup.policy"};
        const char *values[] = {"compact"};
        lagless_new_topic topics[2];
        topics[0].name = topic;
        topics[0].num_partitions = 3;
        topics[0].replication_factor = 1;
        topics[0].config_names = NULL;
        topics[0].config_values = NULL;
        topics[0].config_count = 0;
        topics[1] = topics[0];
        topics[1].name = topic_b;
        topics[1].num_partitions = 1;
        topics[1].config_names = names;
        topics[1].config_values = values;
        topics[1].config_count = 1;
        CHECK_OK(lagless_admin_create_topics(admin, topics, 2, 15000, &json));
        snprintf(want, sizeof want,
                 "[{\"topic\":\"%s\",\"error\":null},{\"topic\":\"%s\",\"error\":null}]", topic,
                 topic_b);
        EXPECT_EQ(json, want);
        lagless_string_destroy(json);

        /* Again: the existing topic fails alone, the new one is made. */
        topics[1].name = missing;
        topics[1].config_count = 0;
        CHECK_OK(lagless_admin_create_topics(admin, topics, 2, 15000, &json));
        snprintf(want, sizeof want,
                 "[{\"topic\":\"%s\",\"error\":{\"code\":3,\"name\":\"TOPIC_ALREADY_EXISTS\","
                 "\"kafka_code\":36,\"message\":\"",
                 topic);
        EXPECT_PREFIX(json, want);
        snprintf(want, sizeof want, "},{\"topic\":\"%s\",\"error\":null}]", missing);
        CHECK(strlen(json) > strlen(want) && strcmp(json + strlen(json) - strlen(want), want) == 0);
        lagless_string_destroy(json);
    }

    /* Described with its three partitions, each led by the one broker. */
    json = described(topic, "{\"partition\":2,");
    snprintf(want, sizeof want, "[{\"topic\":\"%s\",\"error\":null,\"topic_id\":\"", topic);
    EXPECT_PREFIX(json, want);
    {
        int p;
        size_t len = (size_t)sprintf(want, "\"is_internal\":false,\"partitions\":[");
        for (p = 0; p < 3; p++) {
            len += (size_t)sprintf(want + len,
                                   "%s{\"partition\":%d,\"leader\":%d,\"leader_epoch\":0,"
                                   "\"replicas\":[%d],\"isr\":[%d],\"offline_replicas\":[]}",
                                   p == 0 ? "" : ",", p, node, node, node);
        }
        strcpy(want + len, "]}]");
    }
    EXPECT_HAS(json, want);
    lagless_string_destroy(json);
    {
        const char *names[2];
        names[0] = topic_b;
        names[1] = "lagless-c-admin-no-such-topic";
        CHECK_OK(lagless_admin_describe_topics(admin, names, 2, 10000, &json));
        EXPECT_HAS(json, "{\"topic\":\"lagless-c-admin-no-such-topic\",\"error\":{\"code\":7,"
                         "\"name\":\"UNKNOWN_TOPIC\"");
        lagless_string_destroy(json);
    }

    CHECK_OK(lagless_admin_list_topics(admin, false, 10000, &json));
    snprintf(want, sizeof want, "\"%s\"", topic);
    EXPECT_HAS(json, want);
    CHECK(strstr(json, "\"__consumer_offsets\"") == NULL);
    CHECK(json[0] == '[');
    lagless_string_destroy(json);
    printf("topics: created, described, listed; a second create failed alone\n");

    /* The log start and end after 5, 2 and 0 records. */
    produce(topic, 0, 5);
    produce(topic, 1, 2);
    {
        lagless_tplist *all = partitions(topic, 3);
        CHECK_OK(lagless_admin_list_offsets(admin, all, LAGLESS_OFFSET_SPEC_LATEST, 10000, &json));
        snprintf(want, sizeof want,
                 "[{\"topic\":\"%s\",\"partition\":0,\"error\":null,\"offset\":5,\"timestamp\":-1},"
                 "{\"topic\":\"%s\",\"partition\":1,\"error\":null,\"offset\":2,\"timestamp\":-1},"
                 "{\"topic\":\"%s\",\"partition\":2,\"error\":null,\"offset\":0,\"timestamp\":-1}]",
                 topic, topic, topic);
        EXPECT_EQ(json, want);
        lagless_string_destroy(json);
        CHECK_OK(
            lagless_admin_list_offsets(admin, all, LAGLESS_OFFSET_SPEC_EARLIEST, 10000, &json));
        CHECK(count(json, "\"error\":null,\"offset\":0,\"timestamp\":-1}") == 3);
        lagless_string_destroy(json);
        lagless_tplist_destroy(all);
    }
    printf("offsets: log ends 5, 2, 0; starts 0\n");

    /* A member consumes the 7 records and commits 4 and 1. */
    {
        const char *cc[] = {"bootstrap.servers", NULL,       "group.id",
                            NULL,                "client.id", "admin-c-test",
                            "auto.offset.reset", "earliest", "enable.auto.commit",
                            "false",             NULL};
        lagless_consumer *c;
        lagless_tplist *commit = partitions(topic, 2);
        lagless_tplist *asked;
        int got = 0;
        double deadline = now_s() + 60;
        cc[1] = bootstrap;
        cc[3] = group;
        c = new_consumer(cc);
        CHECK_OK(lagless_consumer_subscribe(c, &topic, 1, NULL));
        while (got < 7) {
            lagless_message *m = NULL;
            CHECK(now_s() < deadline);
            CHECK_OK(lagless_consumer_poll(c, 200, &m));
            if (m != NULL) {
                got++;
                lagless_message_destroy(m);
            }
        }
        CHECK_OK(lagless_tplist_set_offset(commit, 0, 4));
        CHECK_OK(lagless_tplist_set_offset(commit, 1, 1));
        CHECK_OK(lagless_consumer_commit_sync(c, commit, 10000));
        lagless_tplist_destroy(commit);

        CHECK_OK(lagless_admin_list_consumer_groups(admin, 10000, &json));
        snprintf(want, sizeof want,
                 "{\"group_id\":\"%s\",\"protocol_type\":\"consumer\",\"state\":\"Stable\","
                 "\"group_type\":\"classic\"}",
                 group);
        EXPECT_HAS(json, want);
        lagless_string_destroy(json);

        CHECK_OK(lagless_admin_describe_consumer_groups(admin, &group, 1, 10000, &json));
        snprintf(want, sizeof want,
                 "[{\"group_id\":\"%s\",\"error\":null,\"group_type\":\"classic\","
                 "\"state\":\"Stable\",\"protocol_type\":\"consumer\",\"partition_assignor\":\"",
                 group);
        EXPECT_PREFIX(json, want);
        CHECK(count(json, "\"member_id\":") == 1);
        EXPECT_HAS(json, "\"group_instance_id\":null,\"client_id\":\"admin-c-test\",\"host\":\"");
        snprintf(want, sizeof want,
                 "\"assignment\":[{\"topic\":\"%s\",\"partition\":0},"
                 "{\"topic\":\"%s\",\"partition\":1},{\"topic\":\"%s\",\"partition\":2}]}]}]",
                 topic, topic, topic);
        EXPECT_HAS(json, want);
        lagless_string_destroy(json);

        CHECK_OK(lagless_admin_list_consumer_group_offsets(admin, group, NULL, 10000, &json));
        snprintf(want, sizeof want,
                 "[{\"topic\":\"%s\",\"partition\":0,\"error\":null,\"offset\":4,"
                 "\"metadata\":\"\"},"
                 "{\"topic\":\"%s\",\"partition\":1,\"error\":null,\"offset\":1,"
                 "\"metadata\":\"\"}]",
                 topic, topic);
        EXPECT_EQ(json, want);
        lagless_string_destroy(json);

        /* Offsets from outside are refused while the member runs. */
        asked = partitions(topic, 1);
        CHECK_OK(lagless_tplist_set_offset(asked, 0, 0));
        CHECK_OK(lagless_admin_alter_consumer_group_offsets(admin, group, asked, 10000, &json));
        snprintf(want, sizeof want, "[{\"topic\":\"%s\",\"partition\":0,\"error\":{\"code\":",
                 topic);
        EXPECT_PREFIX(json, want);
        lagless_string_destroy(json);
        lagless_tplist_destroy(asked);

        CHECK_OK(lagless_consumer_close(c, 10000));
        lagless_consumer_destroy(c);
    }
    printf("group: listed, described with its member, committed offsets 4 and 1\n");

    /* With the member gone, the offsets can be moved, and read back. */
    {
        lagless_tplist *moved = lagless_tplist_new();
        lagless_tplist *all = partitions(topic, 3);
        CHECK_OK(lagless_tplist_add(moved, topic, 0));
        CHECK_OK(lagless_tplist_add(moved, topic, 2));
        CHECK_OK(lagless_tplist_set_offset(moved, 0, 2));
        CHECK_OK(lagless_tplist_set_offset(moved, 1, 0));
        CHECK_OK(lagless_admin_alter_consumer_group_offsets(admin, group, moved, 10000, &json));
        snprintf(want, sizeof want,
                 "[{\"topic\":\"%s\",\"partition\":0,\"error\":null},"
                 "{\"topic\":\"%s\",\"partition\":2,\"error\":null}]",
                 topic, topic);
        EXPECT_EQ(json, want);
        lagless_string_destroy(json);
        CHECK_OK(lagless_admin_list_consumer_group_offsets(admin, group, all, 10000, &json));
        snprintf(want, sizeof want,
                 "[{\"topic\":\"%s\",\"partition\":0,\"error\":null,\"offset\":2,"
                 "\"metadata\":\"\"},"
                 "{\"topic\":\"%s\",\"partition\":1,\"error\":null,\"offset\":1,\"metadata\":\"\"},"
                 "{\"topic\":\"%s\",\"partition\":2,\"error\":null,\"offset\":0,"
                 "\"metadata\":\"\"}]",
                 topic, topic, topic);
        EXPECT_EQ(json, want);
        lagless_string_destroy(json);

        CHECK_OK(lagless_admin_describe_consumer_groups(admin, &group, 1, 10000, &json));
        EXPECT_HAS(json, "\"state\":\"Empty\"");
        EXPECT_HAS(json, "\"members\":[]}]");
        lagless_string_destroy(json);
        lagless_tplist_destroy(moved);
        lagless_tplist_destroy(all);
    }
    printf("group offsets: altered to 2 and 0 and read back\n");

    /* Topic configs: the compacted topic says so; retention.ms set, read back, unknown key. */
    {
        const char *names[1];
        lagless_alter_config_op ops[2];
        names[0] = topic_b;
        CHECK_OK(lagless_admin_describe_configs(admin, LAGLESS_RESOURCE_TOPIC, names, 1, 10000,
                                                &json));
        snprintf(want, sizeof want,
                 "[{\"resource_type\":2,\"name\":\"%s\",\"error\":null,\"configs\":[", topic_b);
        EXPECT_PREFIX(json, want);
        EXPECT_HAS(json, "{\"name\":\"cleanup.policy\",\"value\":\"compact\",\"read_only\":false,"
                         "\"is_default\":false,\"is_sensitive\":false}");
        lagless_string_destroy(json);
        ops[0].name = "retention.ms";
        ops[0].value = "123456";
        ops[0].op = LAGLESS_ALTER_CONFIG_SET;
        CHECK_OK(lagless_admin_incremental_alter_configs(admin, LAGLESS_RESOURCE_TOPIC, topic_b,
                                                         ops, 1, 10000, &json));
        snprintf(want, sizeof want, "[{\"resource_type\":2,\"name\":\"%s\",\"error\":null}]",
                 topic_b);
        EXPECT_EQ(json, want);
        lagless_string_destroy(json);
        CHECK_OK(lagless_admin_describe_configs(admin, LAGLESS_RESOURCE_TOPIC, names, 1, 10000,
                                                &json));
        EXPECT_HAS(json, "{\"name\":\"retention.ms\",\"value\":\"123456\",\"read_only\":false,"
                         "\"is_default\":false,\"is_sensitive\":false}");
        lagless_string_destroy(json);
        ops[1].name = "no.such.config";
        ops[1].value = "1";
        ops[1].op = LAGLESS_ALTER_CONFIG_SET;
        CHECK_OK(lagless_admin_incremental_alter_configs(admin, LAGLESS_RESOURCE_TOPIC, topic_b,
                                                         ops, 2, 10000, &json));
        snprintf(want, sizeof want,
                 "[{\"resource_type\":2,\"name\":\"%s\",\"error\":{\"code\":3,", topic_b);
        EXPECT_PREFIX(json, want);
        EXPECT_HAS(json, "no.such.config");
        lagless_string_destroy(json);
    }
    printf("configs: cleanup.policy compact; retention.ms set and read back; unknown key refused\n");

    /* Deleting a topic twice in one call: the second time it is unknown. */
    {
        const char *names[2];
        names[0] = missing;
        names[1] = topic_b;
        CHECK_OK(lagless_admin_delete_topics(admin, names, 2, 15000, &json));
        snprintf(want, sizeof want,
                 "[{\"topic\":\"%s\",\"error\":null},{\"topic\":\"%s\",\"error\":null}]", missing,
                 topic_b);
        EXPECT_EQ(json, want);
        lagless_string_destroy(json);
        CHECK_OK(lagless_admin_delete_topics(admin, names, 1, 15000, &json));
        snprintf(want, sizeof want, "[{\"topic\":\"%s\",\"error\":{\"code\":", missing);
        EXPECT_PREFIX(json, want);
        EXPECT_HAS(json, "\"kafka_code\":3,");
        lagless_string_destroy(json);
    }
    printf("topics: deleted; deleting again fails with kafka_code 3\n");

    EXPECT_ERR(lagless_admin_create_partitions(admin, NULL, 0, 1000, &json),
               LAGLESS_ERR_INVALID_ARGUMENT);
    lagless_admin_destroy(admin);
    printf("admin: all checks passed\n");
    return 0;
}
