/* Helpers shared by the C tests of the lagless C ABI. */
#ifndef LAGLESS_TEST_COMMON_H
#define LAGLESS_TEST_COMMON_H

#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lagless.h>

/* Fails the test when `expr` (a lagless call) returns an error. */
#define CHECK_OK(expr)                                                                    \
    do {                                                                                  \
        lagless_error *check_err_ = (expr);                                               \
        if (check_err_ != NULL) {                                                         \
            fprintf(stderr, "%s:%d: %s failed: %s (%s, code %d)\n", __FILE__, __LINE__,   \
                    #expr, lagless_error_message(check_err_),                             \
                    lagless_error_name(check_err_), (int)lagless_error_code(check_err_)); \
            lagless_error_destroy(check_err_);                                            \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* Checks that `expr` fails with `code`, and frees the error. */
#define EXPECT_ERR(expr, code)                                                            \
    do {                                                                                  \
        lagless_error *e_ = (expr);                                                       \
        if (e_ == NULL || lagless_error_code(e_) != (code)) {                             \
            fprintf(stderr, "%s:%d: %s: expected error %d, got %d (%s)\n", __FILE__,      \
                    __LINE__, #expr, (int)(code), (int)lagless_error_code(e_),            \
                    lagless_error_message(e_));                                           \
            exit(1);                                                                      \
        }                                                                                 \
        lagless_error_destroy(e_);                                                        \
    } while (0)

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static inline const char *test_bootstrap(void) {
    const char *b = getenv("LAGLESS_BOOTSTRAP");
    if (b == NULL || b[0] == '\0') {
        fprintf(stderr, "LAGLESS_BOOTSTRAP is not set (host:port of a live Kafka broker)\n");
        exit(2);
    }
    return b;
}

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A config from NULL-terminated key, value pairs. */
static inline lagless_config *make_config(const char *const *pairs) {
    lagless_config *c = lagless_config_new();
    size_t i;
    CHECK(c != NULL);
    for (i = 0; pairs[i] != NULL; i += 2) {
        CHECK_OK(lagless_config_set(c, pairs[i], pairs[i + 1]));
    }
    return c;
}

/* A consumer from NULL-terminated key, value pairs; the test fails if it cannot be made. */
static inline lagless_consumer *new_consumer(const char *const *pairs) {
    lagless_config *cfg = make_config(pairs);
    lagless_consumer *c = NULL;
    CHECK_OK(lagless_consumer_new(cfg, &c));
    lagless_config_destroy(cfg);
    return c;
}

/* A producer from NULL-terminated key, value pairs; the test fails if it cannot be made. */
static inline lagless_producer *new_producer(const char *const *pairs) {
    lagless_config *cfg = make_config(pairs);
    lagless_producer *p = NULL;
    CHECK_OK(lagless_producer_new(cfg, &p));
    lagless_config_destroy(cfg);
    return p;
}

#endif
