/* librdkafka's side of bench/idle: idle-rdkafka <bootstrap> <topic> <partitions>.
 * Assigns every partition of <topic> (from the log end), prints READY, then calls
 * rd_kafka_consume_batch_queue(timeout 1000 ms, up to 500 messages) on the consumer queue until
 * the runner ends it: what an application waiting for records does. The runner reads the
 * process' CPU from /proc (see bench/idle/run). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#define BATCH 500

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: idle-rdkafka <bootstrap> <topic> <partitions>\n");
        return 2;
    }
    const char *topic = argv[2];
    int partitions = atoi(argv[3]);
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[][2] = {
        {"bootstrap.servers", argv[1]}, {"client.id", "idle-rdkafka"},
        /* librdkafka needs a group id even for manual assignment; no group is joined. */
        {"group.id", "idle-rdkafka"}, {"enable.auto.commit", "false"},
        {"fetch.wait.max.ms", "500"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
            fprintf(stderr, "%s: %s\n", kv[i][0], errstr);
            return 1;
        }
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return 1;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(rk);
    rd_kafka_topic_partition_list_t *tps = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(tps, topic, p)->offset = RD_KAFKA_OFFSET_END;
    rd_kafka_resp_err_t err = rd_kafka_assign(rk, tps);
    if (err) {
        fprintf(stderr, "rd_kafka_assign: %s\n", rd_kafka_err2str(err));
        return 1;
    }
    rd_kafka_topic_partition_list_destroy(tps);
    printf("READY\n");
    fflush(stdout);
    rd_kafka_message_t *msgs[BATCH];
    for (;;) {
        ssize_t got = rd_kafka_consume_batch_queue(q, 1000, msgs, BATCH);
        for (ssize_t i = 0; i < got; i++) rd_kafka_message_destroy(msgs[i]);
    }
}
