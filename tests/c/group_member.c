/* One member of a consumer group, for the two-process rebalance test run by run.sh.
 *
 * Usage: group_member TOPIC GROUP NAME DIR
 * Subscribes with a rebalance listener and polls until DIR/stop exists, then closes. Writes
 * every record it consumes to DIR/NAME.records ("partition offset" lines) and every listener
 * call to DIR/NAME.events. Auto-commit is off: the only commits are the ones on_revoked makes
 * (the consumed positions of the revoked partitions), so a member that takes partitions over
 * re-reads nothing exactly when committing inside on_revoked works. Callbacks must run on the
 * polling thread; any that does not fails the test. */
#include "common.h"

#include <pthread.h>
#include <unistd.h>

struct member {
    lagless_consumer *consumer;
    FILE *events;
    pthread_t poller;
    int bad_thread;
    int assigned_calls;
    int revoked_calls;
};

static void log_partitions(struct member *m, const char *what, const lagless_tplist *parts) {
    size_t i, n = lagless_tplist_count(parts);
    fprintf(m->events, "%s %zu", what, n);
    for (i = 0; i < n; i++) {
        const char *topic = NULL;
        int32_t p = -1;
        CHECK_OK(lagless_tplist_get(parts, i, &topic, &p, NULL));
        fprintf(m->events, " %s:%d", topic, (int)p);
    }
    fprintf(m->events, "\n");
    fflush(m->events);
}

static int on_assigned(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    struct member *m = (struct member *)opaque;
    if (!pthread_equal(pthread_self(), m->poller)) m->bad_thread = 1;
    CHECK(c == m->consumer);
    m->assigned_calls++;
    log_partitions(m, "assigned", parts);
    return 0;
}

static int on_revoked(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    struct member *m = (struct member *)opaque;
    size_t i, n = lagless_tplist_count(parts);
    lagless_tplist *offsets = lagless_tplist_new();
    lagless_error *err;
    if (!pthread_equal(pthread_self(), m->poller)) m->bad_thread = 1;
    m->revoked_calls++;
    log_partitions(m, "revoked", parts);
    /* Commit what was consumed of the partitions given up, before the next owner starts. */
    for (i = 0; i < n; i++) {
        const char *topic = NULL;
        int32_t p = -1;
        int64_t pos = -1;
        CHECK_OK(lagless_tplist_get(parts, i, &topic, &p, NULL));
        CHECK_OK(lagless_consumer_position(c, topic, p, 5000, &pos));
        CHECK_OK(lagless_tplist_add(offsets, topic, p));
        CHECK_OK(lagless_tplist_set_offset(offsets, lagless_tplist_count(offsets) - 1, pos));
        fprintf(m->events, "position %s:%d %lld\n", topic, (int)p, (long long)pos);
    }
    err = n > 0 ? lagless_consumer_commit_sync(c, offsets, 10000) : NULL;
    lagless_tplist_destroy(offsets);
    if (err != NULL) {
        fprintf(m->events, "commit-in-revoked failed: %s\n", lagless_error_message(err));
        fflush(m->events);
        lagless_error_destroy(err);
        return 1;
    }
    fprintf(m->events, "committed-in-revoked %zu\n", n);
    fflush(m->events);
    return 0;
}

static int on_lost(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    struct member *m = (struct member *)opaque;
    (void)c;
    log_partitions(m, "lost", parts);
    return 0;
}

int main(int argc, char **argv) {
    /* LAGLESS_GROUP_PROTOCOL=consumer runs the member with KIP-848's protocol, where the
     * session and heartbeat are the broker's (group.consumer.* of the test broker) and these two
     * keys are refused: the last four entries are replaced then. */
    const char *cfgv[] = {"bootstrap.servers", NULL, "group.id", NULL,
                          "enable.auto.commit", "false", "auto.offset.reset", "earliest",
                          "session.timeout.ms", "6000", "heartbeat.interval.ms", "500", NULL};
    const char *protocol = getenv("LAGLESS_GROUP_PROTOCOL");
    char path[4096];
    struct member m;
    lagless_rebalance_listener listener;
    const char *topics[1];
    FILE *records;
    long consumed = 0;
    lagless_error *err;

    CHECK(argc == 5);
    memset(&m, 0, sizeof m);
    m.poller = pthread_self();
    cfgv[1] = test_bootstrap();
    cfgv[3] = argv[2];
    if (protocol != NULL && strcmp(protocol, "consumer") == 0) {
        cfgv[8] = "group.protocol";
        cfgv[9] = "consumer";
        cfgv[10] = NULL;
    }
    topics[0] = argv[1];
    snprintf(path, sizeof path, "%s/%s.records", argv[4], argv[3]);
    records = fopen(path, "w");
    snprintf(path, sizeof path, "%s/%s.events", argv[4], argv[3]);
    m.events = fopen(path, "w");
    CHECK(records != NULL && m.events != NULL);

    m.consumer = new_consumer(cfgv);
    listener.opaque = &m;
    listener.on_assigned = on_assigned;
    listener.on_revoked = on_revoked;
    listener.on_lost = on_lost;
    CHECK_OK(lagless_consumer_subscribe(m.consumer, topics, 1, &listener));

    snprintf(path, sizeof path, "%s/stop", argv[4]);
    for (;;) {
        lagless_message *msgs[100];
        size_t n = 0, i;
        if (access(path, F_OK) == 0) break;
        err = lagless_consumer_poll_batch(m.consumer, 100, msgs, 100, &n);
        if (err != NULL) {
            fprintf(stderr, "%s: poll failed: %s\n", argv[3], lagless_error_message(err));
            lagless_error_destroy(err);
            return 1;
        }
        for (i = 0; i < n; i++) {
            fprintf(records, "%d %lld\n", (int)lagless_message_partition(msgs[i]),
                    (long long)lagless_message_offset(msgs[i]));
            lagless_message_destroy(msgs[i]);
        }
        consumed += (long)n;
        if (n > 0) fflush(records);
    }
    {
        /* The member id says which protocol the member spoke: the broker makes a classic one
         * (client.id, '-', a UUID); a KIP-848 member makes its own (a 22-character UUID). */
        int32_t generation = -1;
        char *member_id = NULL;
        CHECK_OK(lagless_consumer_group_metadata(m.consumer, &generation, &member_id));
        fprintf(m.events, "member %d %s\n", (int)generation, member_id);
        lagless_string_destroy(member_id);
    }
    /* close runs on_revoked (which commits) on this thread, then leaves the group. */
    CHECK_OK(lagless_consumer_close(m.consumer, 15000));
    fprintf(m.events, "closed\n");
    err = lagless_consumer_poll(m.consumer, 0, NULL);
    CHECK(lagless_error_code(err) == LAGLESS_ERR_INVALID_ARGUMENT); /* NULL out-parameter */
    lagless_error_destroy(err);
    {
        lagless_message *msg = NULL;
        err = lagless_consumer_poll(m.consumer, 0, &msg);
        CHECK(lagless_error_code(err) == LAGLESS_ERR_CLOSED);
        CHECK(msg == NULL);
        lagless_error_destroy(err);
    }
    lagless_consumer_destroy(m.consumer);
    fclose(records);
    fclose(m.events);
    CHECK(!m.bad_thread);
    CHECK(m.assigned_calls >= 1);
    printf("%s: consumed %ld records, %d assigned and %d revoked calls\n", argv[3], consumed,
           m.assigned_calls, m.revoked_calls);
    return 0;
}
