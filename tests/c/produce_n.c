/* Test helper: produces COUNT records spread round-robin over PARTITIONS partitions of TOPIC,
 * creating the topic first when CREATE is 1. Usage: produce_n TOPIC PARTITIONS COUNT CREATE */
#include "common.h"

static void on_delivery(void *opaque, const lagless_error *err, int32_t partition, int64_t offset) {
    int *failed = (int *)opaque;
    (void)partition;
    (void)offset;
    if (err != NULL) {
        fprintf(stderr, "delivery failed: %s\n", lagless_error_message(err));
        (*failed)++;
    }
}

int main(int argc, char **argv) {
    const char *pc[] = {"bootstrap.servers", NULL, NULL};
    lagless_producer *p = NULL;
    int partitions, count, i, failed = 0;
    char value[32];

    CHECK(argc == 5);
    pc[1] = test_bootstrap();
    partitions = atoi(argv[2]);
    count = atoi(argv[3]);
    if (atoi(argv[4]) == 1) CHECK_OK(lagless_admin_create_topic(pc[1], argv[1], partitions, 1));
    p = new_producer(pc);
    for (i = 0; i < count; i++) {
        int n = sprintf(value, "v%d", i);
        CHECK_OK(lagless_producer_send(p, argv[1], i % partitions, NULL, 0, (const uint8_t *)value,
                                       (size_t)n, on_delivery, &failed));
    }
    CHECK_OK(lagless_producer_flush(p, 30000));
    CHECK_OK(lagless_producer_close(p, 5000));
    lagless_producer_destroy(p);
    CHECK(failed == 0);
    return 0;
}
