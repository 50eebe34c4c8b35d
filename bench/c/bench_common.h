/* What the C programs of bench/ share: a monotonic clock, BENCH_CONFIG (client settings, one
 * key=value a line, set after a program's own) and, for the librdkafka ones, setting a property
 * with its error printed. Static functions: each program is one translation unit. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Calls set(ctx, key, value) for every key=value line of BENCH_CONFIG (lines without '=' are
 * skipped); returns the first non-zero result of set, or 0. */
static inline int bench_config(int (*set)(void *ctx, const char *key, const char *value), void *ctx) {
    const char *extra = getenv("BENCH_CONFIG");
    if (extra == NULL) return 0;
    char *copy = strdup(extra), *save = NULL;
    int rc = 0;
    for (char *line = strtok_r(copy, "\n", &save); line != NULL && rc == 0;
         line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (eq == NULL) continue;
        *eq = '\0';
        rc = set(ctx, line, eq + 1);
    }
    free(copy);
    return rc;
}

#ifdef _RDKAFKA_H_
/* A librdkafka property; non-zero (with the error printed) when librdkafka refuses it. */
static inline int set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char errstr[512];
    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "%s: %s\n", k, errstr);
        return 1;
    }
    return 0;
}

/* `set` in the shape bench_config takes. */
static inline int set_any(void *conf, const char *k, const char *v) {
    return set((rd_kafka_conf_t *)conf, k, v);
}
#endif

#endif
