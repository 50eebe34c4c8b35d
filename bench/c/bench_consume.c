/* The lagless C API side of bench/run: bench-c <mode> <bootstrap> <topic> <partitions> <records>.
 * mode poll:  lagless_consumer_poll(), one message per call;
 *      array: lagless_consumer_poll_batch() into an array of 500 messages, each destroyed;
 *      batch: lagless_consumer_consume_batch(500), one batch handle whose messages are views.
 * With BENCH_GROUP=<group.id> in the environment the consumer subscribes in that group instead of
 * assigning the partitions (the per-poll group steps included in what is measured).
 * Same line protocol as core/examples/bench_consume.rs (START / PROGRESS / RESULT). Built by
 * bench/run against include/lagless.h and target/release/liblagless.so when they exist. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "lagless.h"

#define BATCH 500

static long long cpu_ticks(void) {
    char buf[4096];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    unsigned long long ut = 0, st = 0;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return 0;
    return (long long)(ut + st);
}

static void check(lagless_error *err, const char *what) {
    if (err) {
        fprintf(stderr, "%s: %s (%s)\n", what, lagless_error_message(err), lagless_error_name(err));
        lagless_error_destroy(err);
        exit(1);
    }
}

/* A lagless setting, in the shape bench_config takes (a refusal ends the program). */
static int set_lagless(void *conf, const char *k, const char *v) {
    check(lagless_config_set((lagless_config *)conf, k, v), k);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (argc < 6 || (strcmp(mode, "poll") != 0 && strcmp(mode, "array") != 0 && strcmp(mode, "batch") != 0)) {
        fprintf(stderr, "usage: bench-c <poll|array|batch> <bootstrap> <topic> <partitions> <records>\n");
        return 2;
    }
    argv++; /* the rest as before the mode argument */
    const char *topic = argv[2];
    int partitions = atoi(argv[3]);
    long long want = atoll(argv[4]);
    lagless_config *conf = lagless_config_new();
    const char *kv[][2] = {
        {"bootstrap.servers", argv[1]}, {"client.id", "bench-c"},
        {"auto.offset.reset", "earliest"}, {"enable.auto.commit", "false"},
        {"fetch.max.bytes", "52428800"}, {"max.partition.fetch.bytes", "1048576"},
        {"fetch.max.wait.ms", "500"}, {"check.crcs", "true"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) check(lagless_config_set(conf, kv[i][0], kv[i][1]), kv[i][0]);
    /* bench/eos: more settings (isolation.level), one key=value a line. */
    bench_config(set_lagless, conf);
    const char *group = getenv("BENCH_GROUP");
    if (group && *group) check(lagless_config_set(conf, "group.id", group), "group.id");
    lagless_consumer *c = NULL;
    check(lagless_consumer_new(conf, &c), "lagless_consumer_new");
    lagless_config_destroy(conf);
    lagless_tplist *tps = lagless_tplist_new();
    for (int p = 0; p < partitions; p++) check(lagless_tplist_add(tps, topic, p), "lagless_tplist_add");

    printf("START %lld\n", cpu_ticks());
    fflush(stdout);
    double t0 = now_s();
    if (group && *group) {
        const char *topics[] = {topic};
        check(lagless_consumer_subscribe(c, topics, 1, NULL), "lagless_consumer_subscribe");
    } else {
        check(lagless_consumer_assign(c, tps), "lagless_consumer_assign");
    }
    lagless_tplist_destroy(tps);
    long long n = 0, bytes = 0;
    double last_data = now_s(), next_report = last_data + 1.0;
    lagless_message *msgs[BATCH];
    while (n < want) {
        long long before = n;
        size_t got = 0;
        if (mode[0] == 'b') {
            lagless_batch *b = NULL;
            check(lagless_consumer_consume_batch(c, BATCH, 1000, &b), "lagless_consumer_consume_batch");
            got = lagless_batch_count(b);
            for (size_t i = 0; i < got; i++) {
                const lagless_message *m = lagless_batch_message(b, i);
                size_t klen = 0, vlen = 0;
                lagless_message_key(m, &klen);
                lagless_message_value(m, &vlen);
                bytes += (long long)(klen + vlen);
            }
            lagless_batch_destroy(b);
        } else if (mode[0] == 'a') {
            check(lagless_consumer_poll_batch(c, 1000, msgs, BATCH, &got), "lagless_consumer_poll_batch");
            for (size_t i = 0; i < got; i++) {
                size_t klen = 0, vlen = 0;
                lagless_message_key(msgs[i], &klen);
                lagless_message_value(msgs[i], &vlen);
                bytes += (long long)(klen + vlen);
                lagless_message_destroy(msgs[i]);
            }
        } else {
            lagless_message *m = NULL;
            check(lagless_consumer_poll(c, 1000, &m), "lagless_consumer_poll");
            if (m) {
                size_t klen = 0, vlen = 0;
                lagless_message_key(m, &klen);
                lagless_message_value(m, &vlen);
                bytes += (long long)(klen + vlen);
                lagless_message_destroy(m);
                n++;
                /* Reading the clock per message would be a cost the batch loops do not pay. */
                if ((n & 4095) != 0) continue;
            }
        }
        n += (long long)got;
        double t = now_s();
        if (n == before) {
            if (t - last_data > 60.0) {
                fprintf(stderr, "no records for 60 s after %lld of %lld\n", n, want);
                return 1;
            }
            continue;
        }
        last_data = t;
        if (t >= next_report) {
            printf("PROGRESS %lld\n", n);
            fflush(stdout);
            next_report = t + 1.0;
        }
    }
    double secs = now_s() - t0;
    printf("RESULT %lld %lld %.6f %lld\n", n, bytes, secs, cpu_ticks());
    fflush(stdout);
    check(lagless_consumer_close(c, 5000), "lagless_consumer_close");
    lagless_consumer_destroy(c);
    return 0;
}
