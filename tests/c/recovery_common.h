/* The takeover set-up shared by the C tests of KIP-333 recovery streams (test_recovery,
 * test_recovery_thread): a one-partition topic, a member that commits an offset and leaves, a
 * backlog behind it, and group members with or without enable.parallel.rebalance. */
#ifndef LAGLESS_TEST_RECOVERY_COMMON_H
#define LAGLESS_TEST_RECOVERY_COMMON_H

#include "common.h"

/* Appends `n` records (values "v0", "v1", ...) to partition 0 of `topic`. */
static inline void recovery_produce(const char *bootstrap, const char *topic, int n) {
    const char *pc[] = {"bootstrap.servers", NULL, "linger.ms", "5", NULL};
    lagless_config *cfg;
    lagless_producer *p = NULL;
    char value[32];
    int i;

    pc[1] = bootstrap;
    cfg = make_config(pc);
    CHECK_OK(lagless_producer_new(cfg, &p));
    lagless_config_destroy(cfg);
    for (i = 0; i < n; i++) {
        int len = sprintf(value, "v%d", i);
        CHECK_OK(lagless_producer_send(p, topic, 0, NULL, 0, (const uint8_t *)value, (size_t)len,
                                       NULL, NULL));
    }
    CHECK_OK(lagless_producer_flush(p, 30000));
    CHECK_OK(lagless_producer_close(p, 5000));
    lagless_producer_destroy(p);
}

/* A group member with manual commits; with `recovery`, parallel rebalance on (min.lag 10).
 * `extra`: more key, value pairs (NULL-terminated, at most 11 pairs), or NULL; they are set
 * before the parallel-rebalance ones. */
static inline lagless_consumer *recovery_member(const char *bootstrap, const char *group,
                                                int recovery, const char *const *extra) {
    const char *cc[40] = {"bootstrap.servers", NULL, "group.id", NULL, "auto.offset.reset",
                          "earliest", "enable.auto.commit", "false", "session.timeout.ms", "6000",
                          "heartbeat.interval.ms", "500", NULL};
    size_t k = 12, i;
    lagless_config *cfg;
    lagless_consumer *c = NULL;

    cc[1] = bootstrap;
    cc[3] = group;
    for (i = 0; extra != NULL && extra[i] != NULL; i += 2) {
        CHECK(k + 2 + 4 < 40); /* room for the pair, the parallel-rebalance ones and NULL */
        cc[k++] = extra[i];
        cc[k++] = extra[i + 1];
    }
    if (recovery) {
        cc[k++] = "enable.parallel.rebalance";
        cc[k++] = "true";
        cc[k++] = "parallel.rebalance.min.lag";
        cc[k++] = "10";
    }
    cc[k] = NULL;
    cfg = make_config(cc);
    CHECK_OK(lagless_consumer_new(cfg, &c));
    lagless_config_destroy(cfg);
    return c;
}

/* The group's committed offset of partition 0 of `topic`. */
static inline int64_t recovery_committed(lagless_consumer *c, const char *topic) {
    lagless_tplist *l = lagless_tplist_new();
    int64_t off = -1;
    CHECK_OK(lagless_tplist_add(l, topic, 0));
    CHECK_OK(lagless_consumer_committed(c, l, 10000));
    CHECK_OK(lagless_tplist_get(l, 0, NULL, NULL, &off));
    lagless_tplist_destroy(l);
    return off;
}

/* Commits `offset` for partition 0 as a member of `group` (without parallel rebalance; `extra`
 * as for recovery_member) that then leaves: the group's state when the partition's previous
 * owner is gone. */
static inline void commit_as_departed_member(const char *bootstrap, const char *topic,
                                             const char *group, int64_t offset,
                                             const char *const *extra) {
    lagless_consumer *c = recovery_member(bootstrap, group, 0, extra);
    lagless_tplist *l = lagless_tplist_new();
    const char *topics[1];
    double deadline = now_s() + 60;

    topics[0] = topic;
    CHECK_OK(lagless_consumer_subscribe(c, topics, 1, NULL));
    for (;;) {
        lagless_tplist *a = NULL;
        lagless_message *m = NULL;
        size_t n;
        CHECK_OK(lagless_consumer_poll(c, 100, &m));
        lagless_message_destroy(m);
        CHECK_OK(lagless_consumer_assignment(c, &a));
        n = lagless_tplist_count(a);
        lagless_tplist_destroy(a);
        if (n > 0) break;
        CHECK(now_s() < deadline);
    }
    CHECK_OK(lagless_tplist_add(l, topic, 0));
    CHECK_OK(lagless_tplist_set_offset(l, 0, offset));
    CHECK_OK(lagless_consumer_commit_sync(c, l, 10000));
    lagless_tplist_destroy(l);
    CHECK_OK(lagless_consumer_close(c, 10000));
    lagless_consumer_destroy(c);
}

/* The takeover's starting point: creates `topic` (one partition), produces `committed` records,
 * commits offset `committed` as a member of `group` (config `extra`, as for recovery_member)
 * that leaves, then grows the log to `log_end`. */
static inline void recovery_backlog(const char *bootstrap, const char *topic,
                                    const char *group, int committed, int log_end,
                                    const char *const *extra) {
    CHECK_OK(lagless_admin_create_topic(bootstrap, topic, 1, 1));
    recovery_produce(bootstrap, topic, committed);
    commit_as_departed_member(bootstrap, topic, group, committed, extra);
    recovery_produce(bootstrap, topic, log_end - committed);
}

#endif
