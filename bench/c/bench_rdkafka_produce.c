/* librdkafka's producer side of bench/eos's producer rows:
 *   bench-rdkafka-produce <bootstrap> <topic> <records> <value bytes>
 * Sends unkeyed records of <value bytes> to an existing topic with the settings of
 * core/examples/bench_produce.rs (batch.size 64 KiB, linger 20 ms, no compression), overridden by
 * BENCH_CONFIG (one key=value a line: acks, enable.idempotence), flushes, and prints
 * RESULT <records> <bytes> <seconds> (first produce to the last delivery report). */
#include <librdkafka/rdkafka.h>

#include "bench_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long failed = 0;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) failed++;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: bench-rdkafka-produce <bootstrap> <topic> <records> <value bytes>\n");
        return 2;
    }
    const char *topic = argv[2];
    long long n = atoll(argv[3]);
    size_t size = (size_t)atol(argv[4]);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[][2] = {
        {"bootstrap.servers", argv[1]}, {"client.id", "bench-rdkafka-produce"},
        {"acks", "1"}, {"linger.ms", "20"}, {"batch.size", "65536"},
        {"compression.type", "none"}, {"queue.buffering.max.kbytes", "65536"},
        {"message.max.bytes", "1048576"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (set(conf, kv[i][0], kv[i][1])) return 1;
    if (bench_config(set_any, conf)) return 1;
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    char errstr[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return 1;
    }
    /* Text-like values, as the lagless producer's (the content matters only to codecs). */
    const char *words = "order user id amount status shipped pending eu-west 421337 item price EUR ";
    size_t pool_len = 1 << 16, wl = strlen(words);
    char *pool = malloc(pool_len);
    for (size_t i = 0; i < pool_len; i++) pool[i] = words[i % wl];
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    if (rd_kafka_metadata(rk, 0, t, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) rd_kafka_metadata_destroy(md);
    double t0 = now_s();
    size_t off = 0;
    for (long long i = 0; i < n; i++) {
        off = (off + 7919) % (pool_len - size);
        for (;;) {
            rd_kafka_resp_err_t err = rd_kafka_producev(
                rk, RD_KAFKA_V_RKT(t), RD_KAFKA_V_VALUE(pool + off, size),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                rd_kafka_poll(rk, 10); /* the queue drains as deliveries are reported */
                continue;
            }
            if (err) {
                fprintf(stderr, "produce: %s\n", rd_kafka_err2str(err));
                return 1;
            }
            break;
        }
        if ((i & 1023) == 0) rd_kafka_poll(rk, 0);
    }
    if (rd_kafka_flush(rk, 600000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "flush timed out\n");
        return 1;
    }
    double secs = now_s() - t0;
    printf("RESULT %lld %lld %.6f\n", n, n * (long long)size, secs);
    fflush(stdout);
    rd_kafka_topic_destroy(t);
    rd_kafka_destroy(rk);
    free(pool);
    if (failed) {
        fprintf(stderr, "%lld records failed\n", failed);
        return 1;
    }
    return 0;
}
