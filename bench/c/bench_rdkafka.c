/* librdkafka's C API side of bench/run: bench-rdkafka-c <poll|batch> <bootstrap> <topic> <partitions> <records>.
 * poll:  rd_kafka_consumer_poll() per message;
 * batch: rd_kafka_consume_batch_queue() of up to 500 messages on the consumer queue.
 * With BENCH_GROUP=<group.id> in the environment it subscribes in that group instead of assigning.
 * Same settings and line protocol (START / PROGRESS / RESULT) as bench/c/bench_consume.c. Built by
 * bench/run against the librdkafka bundled in the confluent-kafka wheel (see bench/README.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "bench_common.h"

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

/* Counts one message; returns -1 (after printing it) when it carries an error. */
static int count(const rd_kafka_message_t *m, long long *n, long long *bytes) {
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) return 0;
    if (m->err) {
        fprintf(stderr, "consume: %s\n", rd_kafka_message_errstr(m));
        return -1;
    }
    *bytes += (long long)(m->key_len + m->len);
    *n += 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 6 || (strcmp(argv[1], "poll") != 0 && strcmp(argv[1], "batch") != 0)) {
        fprintf(stderr, "usage: bench-rdkafka-c <poll|batch> <bootstrap> <topic> <partitions> <records>\n");
        return 2;
    }
    int batch = strcmp(argv[1], "batch") == 0;
    const char *topic = argv[3];
    int partitions = atoi(argv[4]);
    long long want = atoll(argv[5]);
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[][2] = {
        {"bootstrap.servers", argv[2]}, {"client.id", "bench-rdkafka-c"},
        /* librdkafka needs a group id even for manual assignment; no group is joined. */
        {"group.id", getenv("BENCH_GROUP") && *getenv("BENCH_GROUP") ? getenv("BENCH_GROUP") : "bench-rdkafka-c"},
        {"auto.offset.reset", "earliest"}, {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"},
        {"fetch.max.bytes", "52428800"}, {"max.partition.fetch.bytes", "1048576"},
        {"fetch.wait.max.ms", "500"}, {"check.crcs", "true"},
        /* librdkafka's default (1000 ms) idles a reader faster than its fetch queue refills:
         * as bench/py/clients.py, a user tuning for throughput would lower it. */
        {"fetch.queue.backoff.ms", "10"},
        /* as bench/py/clients.py: room for a whole fetch.max.bytes answer */
        {"receive.message.max.bytes", "53477376"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
            fprintf(stderr, "%s: %s\n", kv[i][0], errstr);
            return 1;
        }
    }
    /* bench/run --tls: the security settings, one key=value a line. */
    if (bench_config(set_any, conf)) return 1;
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return 1;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(rk);
    rd_kafka_topic_partition_list_t *tps = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(tps, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;

    printf("START %lld\n", cpu_ticks());
    fflush(stdout);
    double t0 = now_s();
    const char *group = getenv("BENCH_GROUP");
    rd_kafka_resp_err_t err;
    if (group && *group) {
        rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(topics, topic, RD_KAFKA_PARTITION_UA);
        err = rd_kafka_subscribe(rk, topics);
        rd_kafka_topic_partition_list_destroy(topics);
    } else {
        err = rd_kafka_assign(rk, tps);
    }
    if (err) {
        fprintf(stderr, "%s: %s\n", group && *group ? "rd_kafka_subscribe" : "rd_kafka_assign", rd_kafka_err2str(err));
        return 1;
    }
    rd_kafka_topic_partition_list_destroy(tps);
    long long n = 0, bytes = 0;
    double last_data = now_s(), next_report = last_data + 1.0;
    rd_kafka_message_t *msgs[BATCH];
    while (n < want) {
        long long before = n;
        if (batch) {
            ssize_t got = rd_kafka_consume_batch_queue(q, 1000, msgs, BATCH);
            if (got < 0) {
                fprintf(stderr, "rd_kafka_consume_batch_queue: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
                return 1;
            }
            int bad = 0;
            for (ssize_t i = 0; i < got; i++) {
                bad |= count(msgs[i], &n, &bytes);
                rd_kafka_message_destroy(msgs[i]);
            }
            if (bad) return 1;
        } else {
            rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 1000);
            if (m) {
                int bad = count(m, &n, &bytes);
                rd_kafka_message_destroy(m);
                if (bad) return 1;
                /* Reading the clock per message would be a cost the batch loops do not pay. */
                if ((n & 4095) != 0) continue;
            }
        }
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
    rd_kafka_queue_destroy(q);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}
