/* librdkafka's group member for the rebalance figure of bench/run (the C twin of
 * core/examples/bench_member.rs and bench/java/BenchMember.java):
 *   bench-rdkafka-member <bootstrap> <topic> <group> <strategy> <seconds> [<warm-up ms>]
 * strategy: range, cooperative-sticky (a list: the first that names one of them), or "consumer"
 * (group.protocol=consumer, KIP-848: the broker assigns). Prints "D <partition> <unix ms>" for
 * every partition of a poll's records, at most once per partition and millisecond (librdkafka
 * hands out one record per poll, the others a batch). With a warm-up it sleeps that long in the
 * rebalance callback before taking newly assigned partitions (preparing for them, as an
 * application loading state would). Once BENCH_BUSY_FILE exists it spends BENCH_BUSY_MS
 * processing (sleeping) after every poll, as BenchMember does; once BENCH_LEAVE_FILE exists it
 * prints "L <unix ms>" and leaves (closes) at once. */
#include <librdkafka/rdkafka.h>

#include "bench_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_PARTITIONS 1024

static long warm_up_ms = 0;

static long long unix_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int exists(const char *path) {
    struct stat st;
    return path != NULL && stat(path, &st) == 0;
}

/* Takes and gives back partitions as the group's rebalance protocol wants: incrementally under
 * cooperative-sticky and the consumer protocol, all at once under an eager assignor. */
static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque) {
    (void)opaque;
    int incremental = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    rd_kafka_error_t *error = NULL;
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        if (warm_up_ms > 0 && parts->cnt > 0) sleep_ms(warm_up_ms);
        if (incremental) error = rd_kafka_incremental_assign(rk, parts);
        else e = rd_kafka_assign(rk, parts);
    } else {
        if (incremental) error = rd_kafka_incremental_unassign(rk, parts);
        else e = rd_kafka_assign(rk, NULL);
    }
    if (error) {
        fprintf(stderr, "rebalance: %s\n", rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    } else if (e) {
        fprintf(stderr, "rebalance: %s\n", rd_kafka_err2str(e));
    }
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: bench-rdkafka-member <bootstrap> <topic> <group> <strategy> <seconds> "
                        "[<warm-up ms>]\n");
        return 2;
    }
    const char *strategy = argv[4];
    double seconds = atof(argv[5]);
    warm_up_ms = argc > 6 ? atol(argv[6]) : 0;
    const char *busy_file = getenv("BENCH_BUSY_FILE");
    const char *leave_file = getenv("BENCH_LEAVE_FILE");
    long busy_ms = getenv("BENCH_BUSY_MS") ? atol(getenv("BENCH_BUSY_MS")) : 0;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    int bad = set(conf, "bootstrap.servers", argv[1]) || set(conf, "client.id", "bench-member") ||
              set(conf, "group.id", argv[3]) || set(conf, "auto.offset.reset", "latest") ||
              set(conf, "enable.auto.commit", "true") || set(conf, "fetch.wait.max.ms", "500") ||
              set(conf, "fetch.queue.backoff.ms", "10");
    if (strcmp(strategy, "consumer") == 0) {
        bad = bad || set(conf, "group.protocol", "consumer");
    } else {
        bad = bad || set(conf, "partition.assignment.strategy",
                         strncmp(strategy, "range", 5) == 0 ? "range" : "cooperative-sticky");
    }
    if (bad) return 2;
    rd_kafka_conf_set_rebalance_cb(conf, on_rebalance);
    char errstr[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return 1;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, argv[2], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t err = rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err) {
        fprintf(stderr, "subscribe: %s\n", rd_kafka_err2str(err));
        return 1;
    }
    static long long printed_at[MAX_PARTITIONS];
    double end = now_s() + seconds;
    while (now_s() < end) {
        if (exists(leave_file)) {
            printf("L %lld\n", unix_ms());
            fflush(stdout);
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (exists(busy_file)) sleep_ms(busy_ms);
        if (!m) continue;
        int p = m->partition, got = !m->err;
        if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            fprintf(stderr, "poll: %s\n", rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        if (!got) continue;
        long long ms = unix_ms();
        if (p >= 0 && p < MAX_PARTITIONS && printed_at[p] != ms) {
            printed_at[p] = ms;
            printf("D %d %lld\n", p, ms);
            fflush(stdout);
        }
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}
