/* A complete lagless consumer in C: config, subscribe with a rebalance listener, a poll loop,
 * commits, close.
 *
 * Build: cmake -S examples/c -B build -DCMAKE_PREFIX_PATH=PREFIX && cmake --build build
 *    or: make -C examples/c   (or: cc -std=c99 consume.c $(pkg-config --cflags --libs lagless))
 * Run:   ./consume BOOTSTRAP TOPIC GROUP [MAX_MESSAGES]
 * Stops after MAX_MESSAGES messages (default: never) or 10 s without one. */
#include <stdio.h>
#include <stdlib.h>

#include <lagless.h>

/* Prints and frees an error; returns 1 if there was one. */
static int failed(const char *what, lagless_error *err) {
    if (err == NULL) return 0;
    fprintf(stderr, "%s: %s (%s)\n", what, lagless_error_message(err), lagless_error_name(err));
    lagless_error_destroy(err);
    return 1;
}

static void print_partitions(const char *what, const lagless_tplist *parts) {
    size_t i;
    printf("%s:", what);
    for (i = 0; i < lagless_tplist_count(parts); i++) {
        const char *topic;
        int32_t partition;
        if (lagless_tplist_get(parts, i, &topic, &partition, NULL) == NULL) {
            printf(" %s-%d", topic, (int)partition);
        }
    }
    printf("\n");
}

/* Listener callbacks run on the thread that polls, inside lagless_consumer_poll_batch/close. */
static int on_assigned(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    (void)opaque;
    (void)c;
    print_partitions("assigned", parts);
    return 0;
}

static int on_revoked(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    (void)opaque;
    print_partitions("revoked", parts);
    /* Commit what was processed before the partitions move to another member. */
    return failed("commit in on_revoked", lagless_consumer_commit_sync(c, NULL, 5000));
}

int main(int argc, char **argv) {
    lagless_config *config = lagless_config_new();
    lagless_consumer *consumer = NULL;
    lagless_rebalance_listener listener = {NULL, on_assigned, on_revoked, NULL};
    const char *topics[1];
    long max = argc > 4 ? atol(argv[4]) : -1, seen = 0, idle_ms = 0;

    if (argc < 4) {
        fprintf(stderr, "usage: %s BOOTSTRAP TOPIC GROUP [MAX_MESSAGES]\n", argv[0]);
        return 2;
    }
    printf("lagless %s\n", lagless_version());
    topics[0] = argv[2];
    if (failed("config", lagless_config_set(config, "bootstrap.servers", argv[1])) ||
        failed("config", lagless_config_set(config, "group.id", argv[3])) ||
        failed("config", lagless_config_set(config, "auto.offset.reset", "earliest")) ||
        failed("config", lagless_config_set(config, "enable.auto.commit", "false")) ||
        failed("consumer", lagless_consumer_new(config, &consumer))) {
        lagless_config_destroy(config);
        return 1;
    }
    lagless_config_destroy(config); /* the consumer keeps its own copy */
    if (failed("subscribe", lagless_consumer_subscribe(consumer, topics, 1, &listener))) {
        lagless_consumer_destroy(consumer);
        return 1;
    }
    while ((max < 0 || seen < max) && idle_ms < 10000) {
        lagless_message *batch[64];
        size_t n = 0, i;
        if (failed("poll", lagless_consumer_poll_batch(consumer, 500, batch, 64, &n))) break;
        idle_ms = n == 0 ? idle_ms + 500 : 0;
        for (i = 0; i < n; i++) {
            size_t len = 0;
            const uint8_t *value = lagless_message_value(batch[i], &len);
            printf("%s-%d@%lld: %.*s\n", lagless_message_topic(batch[i]),
                   (int)lagless_message_partition(batch[i]),
                   (long long)lagless_message_offset(batch[i]), (int)len,
                   value != NULL ? (const char *)value : "");
            lagless_message_destroy(batch[i]); /* value was borrowed from the message */
        }
        seen += (long)n;
        /* Commit the consumed positions after each batch; the callback (NULL here) would run
         * on this thread in a later poll. */
        if (n > 0) failed("commit", lagless_consumer_commit_async(consumer, NULL, NULL, NULL));
    }
    printf("consumed %ld messages\n", seen);
    failed("commit", lagless_consumer_commit_sync(consumer, NULL, 5000));
    failed("close", lagless_consumer_close(consumer, 10000)); /* runs on_revoked, leaves */
    lagless_consumer_destroy(consumer);
    return 0;
}
