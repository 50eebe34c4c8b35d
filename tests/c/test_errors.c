/* Walks the error paths of the C ABI: NULL arguments, bad config keys and values, an unknown
 * topic, an unreachable broker, use after close, wakeup. Every failure must be an error object
 * with the right code, never a crash. Usage: test_errors TOPIC (an existing topic) */
#include "common.h"

static int message_contains(lagless_error *e, const char *needle) {
    return e != NULL && strstr(lagless_error_message(e), needle) != NULL;
}

static void ignore_log(void *opaque, int32_t level, const char *target, const char *message) {
    (void)opaque;
    (void)level;
    (void)target;
    (void)message;
}

static int not_called(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    (void)opaque;
    (void)c;
    (void)parts;
    fprintf(stderr, "a rebalance callback ran where none should\n");
    exit(1);
}

static void null_arguments(void) {
    lagless_config *cfg = lagless_config_new();
    lagless_consumer *c = NULL;
    lagless_producer *p = NULL;
    lagless_tplist *l = lagless_tplist_new();
    char *s = NULL;
    size_t n = 7;
    lagless_error *e;

    EXPECT_ERR(lagless_config_set(NULL, "group.id", "g"), LAGLESS_ERR_INVALID_ARGUMENT);
    e = lagless_config_set(cfg, NULL, "g");
    CHECK(message_contains(e, "key"));
    lagless_error_destroy(e);
    EXPECT_ERR(lagless_config_set(cfg, "group.id", NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_config_get(NULL, "group.id", &s), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_config_get(cfg, "group.id", NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_config_dump(NULL, &s), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_new(NULL, &c), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_new(cfg, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_producer_new(NULL, &p), LAGLESS_ERR_INVALID_ARGUMENT);
    CHECK(c == NULL && p == NULL); /* outputs are written only on success */
    EXPECT_ERR(lagless_consumer_subscribe(NULL, NULL, 0, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    e = lagless_consumer_set_learning_callback(NULL, not_called, NULL);
    CHECK(lagless_error_code(e) == LAGLESS_ERR_INVALID_ARGUMENT && message_contains(e, "consumer"));
    lagless_error_destroy(e);
    EXPECT_ERR(lagless_consumer_set_learning_callback(NULL, NULL, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_assign(NULL, l), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_poll(NULL, 0, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_poll_batch(NULL, 0, NULL, 1, &n), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_commit_sync(NULL, NULL, 0), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_commit_async(NULL, NULL, NULL, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_committed(NULL, l, 0), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_position(NULL, "t", 0, 0, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_recovery_active(NULL, "t", 0, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_seek(NULL, "t", 0, 0), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_pause(NULL, l), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_resume(NULL, l), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_wakeup(NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_learner_ready(NULL, l, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_prepare_to_leave(NULL, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_unsubscribe(NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_close(NULL, 0), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_consumer_assignment(NULL, &l), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_producer_send_sync(NULL, "t", -1, NULL, 0, NULL, 0, NULL, NULL),
               LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_producer_send(NULL, "t", -1, NULL, 0, NULL, 0, NULL, NULL),
               LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_producer_poll(NULL, 0, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_producer_flush(NULL, 0), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_producer_close(NULL, 0), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_tplist_add(NULL, "t", 0), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_tplist_add(l, NULL, 0), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_tplist_add(l, "t", -1), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_tplist_get(NULL, 0, NULL, NULL, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_tplist_get(l, 0, NULL, NULL, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_tplist_set_offset(l, 3, 0), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_admin_create_topic(NULL, "t", 1, 1), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_admin_create_topic("127.0.0.1:1", "t", 0, 1), LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_message_header_get(NULL, 0, NULL, NULL, NULL, NULL),
               LAGLESS_ERR_INVALID_ARGUMENT);
    EXPECT_ERR(lagless_set_log_callback(9, ignore_log, NULL), LAGLESS_ERR_INVALID_ARGUMENT);
    CHECK_OK(lagless_set_log_callback(LAGLESS_LOG_WARN, NULL, NULL)); /* NULL: logging off */
    /* Infallible accessors answer NULL arguments with neutral values. */
    CHECK(lagless_tplist_count(NULL) == 0);
    CHECK(lagless_message_topic(NULL) == NULL);
    CHECK(lagless_message_offset(NULL) == -1);
    CHECK(lagless_message_partition(NULL) == -1);
    CHECK(lagless_message_key(NULL, &n) == NULL && n == 0);
    CHECK(lagless_message_value(NULL, NULL) == NULL);
    CHECK(lagless_message_header_count(NULL) == 0);
    CHECK(!lagless_message_from_recovery(NULL));
    CHECK(!lagless_consumer_child_consumer_is_alive(NULL));
    CHECK(lagless_error_code(NULL) == 0);
    CHECK(strcmp(lagless_error_name(NULL), "NONE") == 0);
    CHECK(strcmp(lagless_error_message(NULL), "") == 0);
    CHECK(lagless_error_topic(NULL) == NULL);
    /* Every destroy ignores NULL. */
    lagless_config_destroy(NULL);
    lagless_consumer_destroy(NULL);
    lagless_producer_destroy(NULL);
    lagless_tplist_destroy(NULL);
    lagless_message_destroy(NULL);
    lagless_error_destroy(NULL);
    lagless_string_destroy(NULL);
    lagless_tplist_destroy(l);
    lagless_config_destroy(cfg);
}

static void bad_config(void) {
    lagless_config *cfg = lagless_config_new();
    lagless_consumer *c = NULL;
    lagless_producer *p = NULL;
    char *v = NULL;
    char *dump = NULL;
    lagless_error *e;

    e = lagless_config_set(cfg, "sesion.timeout.ms", "1000");
    CHECK(lagless_error_code(e) == LAGLESS_ERR_CONFIG);
    CHECK(strcmp(lagless_error_name(e), "CONFIG") == 0);
    CHECK(message_contains(e, "sesion.timeout.ms"));
    CHECK(message_contains(e, "session.timeout.ms")); /* the closest known key */
    CHECK(!lagless_error_retriable(e));
    lagless_error_destroy(e);

    e = lagless_config_set(cfg, "session.timeout.ms", "soon");
    CHECK(lagless_error_code(e) == LAGLESS_ERR_CONFIG);
    CHECK(message_contains(e, "session.timeout.ms"));
    lagless_error_destroy(e);

    e = lagless_config_set(cfg, "auto.offset.reset", "sideways");
    CHECK(lagless_error_code(e) == LAGLESS_ERR_CONFIG);
    CHECK(message_contains(e, "auto.offset.reset"));
    lagless_error_destroy(e);

    e = lagless_config_get(cfg, "no.such.key", &v);
    CHECK(lagless_error_code(e) == LAGLESS_ERR_CONFIG && v == NULL);
    lagless_error_destroy(e);

    CHECK_OK(lagless_config_get(cfg, "session.timeout.ms", &v));
    CHECK(v != NULL && strcmp(v, "10000") == 0); /* the default: the bad values were rejected */
    lagless_string_destroy(v);
    CHECK_OK(lagless_config_set(cfg, "session.timeout.ms", "7000"));
    CHECK_OK(lagless_config_get(cfg, "session.timeout.ms", &v));
    CHECK(strcmp(v, "7000") == 0);
    lagless_string_destroy(v);
    CHECK_OK(lagless_config_dump(cfg, &dump));
    CHECK(strstr(dump, "session.timeout.ms=7000\n") != NULL);
    lagless_string_destroy(dump);

    /* A consumer needs bootstrap.servers; the error names it. */
    e = lagless_consumer_new(cfg, &c);
    CHECK(lagless_error_code(e) == LAGLESS_ERR_CONFIG);
    CHECK(message_contains(e, "bootstrap.servers"));
    CHECK(c == NULL);
    lagless_error_destroy(e);
    /* A consumer setting in a producer config is refused, naming the key. */
    CHECK_OK(lagless_config_set(cfg, "bootstrap.servers", "127.0.0.1:1"));
    e = lagless_producer_new(cfg, &p);
    CHECK(lagless_error_code(e) == LAGLESS_ERR_CONFIG);
    CHECK(message_contains(e, "session.timeout.ms"));
    CHECK(p == NULL);
    lagless_error_destroy(e);
    lagless_config_destroy(cfg);

    /* enable.idempotence=true needs acks=all: the error names acks and its value; set to
     * false, the same acks is taken. */
    cfg = lagless_config_new();
    CHECK_OK(lagless_config_set(cfg, "bootstrap.servers", "127.0.0.1:1"));
    CHECK_OK(lagless_config_set(cfg, "enable.idempotence", "true"));
    CHECK_OK(lagless_config_set(cfg, "acks", "1"));
    e = lagless_producer_new(cfg, &p);
    CHECK(lagless_error_code(e) == LAGLESS_ERR_CONFIG);
    CHECK(message_contains(e, "acks") && message_contains(e, "enable.idempotence"));
    CHECK(p == NULL);
    lagless_error_destroy(e);
    CHECK_OK(lagless_config_set(cfg, "enable.idempotence", "false"));
    CHECK_OK(lagless_producer_new(cfg, &p));
    lagless_producer_destroy(p);
    p = NULL;
    lagless_config_destroy(cfg);
}

static void unknown_topic(const char *bootstrap) {
    const char *pc[] = {"bootstrap.servers", NULL, NULL};
    /* task.timeout.ms short: the core reports an assigned partition of an unknown topic as
     * UNKNOWN_TOPIC once it gets that far, but today its position lookup fails first and the
     * partition comes out as PARTITION_STUCK (naming it) after task.timeout.ms. */
    const char *cc[] = {"bootstrap.servers", NULL, "default.api.timeout.ms", "10000",
                        "task.timeout.ms", "1000", NULL};
    lagless_producer *p = NULL;
    lagless_consumer *c = NULL;
    lagless_tplist *l;
    lagless_error *e = NULL;
    double deadline;

    pc[1] = bootstrap;
    p = new_producer(pc);
    e = lagless_producer_send_sync(p, "lagless-no-such-topic", -1, NULL, 0,
                                   (const uint8_t *)"x", 1, NULL, NULL);
    CHECK(lagless_error_code(e) == LAGLESS_ERR_UNKNOWN_TOPIC);
    CHECK(message_contains(e, "lagless-no-such-topic"));
    lagless_error_destroy(e);
    lagless_producer_destroy(p);

    cc[1] = bootstrap;
    c = new_consumer(cc);
    l = lagless_tplist_new();
    CHECK_OK(lagless_tplist_add(l, "lagless-no-such-topic", 0));
    CHECK_OK(lagless_consumer_assign(c, l));
    lagless_tplist_destroy(l);
    /* The partition's error comes out of poll; the consumer keeps running. */
    deadline = now_s() + 20;
    e = NULL;
    while (e == NULL && now_s() < deadline) {
        lagless_message *m = NULL;
        e = lagless_consumer_poll(c, 200, &m);
        CHECK(m == NULL);
    }
    CHECK(lagless_error_code(e) == LAGLESS_ERR_UNKNOWN_TOPIC ||
          lagless_error_code(e) == LAGLESS_ERR_PARTITION_STUCK);
    CHECK(message_contains(e, "lagless-no-such-topic"));
    if (lagless_error_code(e) == LAGLESS_ERR_PARTITION_STUCK) {
        CHECK(strcmp(lagless_error_topic(e), "lagless-no-such-topic") == 0);
        CHECK(lagless_error_partition(e) == 0);
        CHECK(lagless_error_retriable(e));
    }
    lagless_error_destroy(e);
    CHECK_OK(lagless_consumer_close(c, 5000));
    lagless_consumer_destroy(c);
}

static void unreachable_broker(void) {
    const char *pc[] = {"bootstrap.servers", "127.0.0.1:1", "delivery.timeout.ms", "1500",
                        "request.timeout.ms", "1000", "linger.ms", "0", NULL};
    const char *cc[] = {"bootstrap.servers", "127.0.0.1:1", "group.id", "lagless-unreachable",
                        "default.api.timeout.ms", "1500", "request.timeout.ms", "1000", NULL};
    lagless_producer *p = NULL;
    lagless_consumer *c = NULL;
    lagless_tplist *l;
    lagless_error *e;
    double t0 = now_s();

    p = new_producer(pc);
    e = lagless_producer_send_sync(p, "t", -1, NULL, 0, (const uint8_t *)"x", 1, NULL, NULL);
    CHECK(e != NULL);
    CHECK(lagless_error_code(e) == LAGLESS_ERR_TIMEOUT || lagless_error_code(e) == LAGLESS_ERR_TRANSPORT);
    CHECK(lagless_error_retriable(e));
    lagless_error_destroy(e);
    lagless_producer_destroy(p);

    c = new_consumer(cc);
    l = lagless_tplist_new();
    CHECK_OK(lagless_tplist_add(l, "t", 0));
    e = lagless_consumer_committed(c, l, 1500);
    CHECK(e != NULL);
    CHECK(lagless_error_code(e) == LAGLESS_ERR_TIMEOUT || lagless_error_code(e) == LAGLESS_ERR_TRANSPORT);
    lagless_error_destroy(e);
    lagless_tplist_destroy(l);
    CHECK_OK(lagless_consumer_close(c, 1000));
    lagless_consumer_destroy(c);
    CHECK(now_s() - t0 < 30); /* bounded by the timeouts, never a hang */
}

struct heard {
    int calls;
    int code;
    int all_down;
};

static void on_error(void *opaque, const lagless_error *error) {
    struct heard *h = opaque;
    h->calls++;
    h->code = lagless_error_code(error);
    h->all_down = strstr(lagless_error_message(error), "all brokers are down") != NULL &&
                  strstr(lagless_error_message(error), "127.0.0.1:1") != NULL;
}

/* The error callback hears "all brokers are down" once, inside the polls, while the consumer
 * retries an address where nothing listens every 100 ms at most for 2 s. */
static void error_callback(void) {
    const char *cc[] = {"bootstrap.servers", "127.0.0.1:1", "reconnect.backoff.ms", "50",
                        "reconnect.backoff.max.ms", "100", NULL};
    struct heard h = {0, 0, 0};
    lagless_consumer *c = new_consumer(cc);
    lagless_tplist *l = lagless_tplist_new();
    lagless_message *m = NULL;
    int i;

    CHECK_OK(lagless_consumer_set_error_callback(c, on_error, &h));
    CHECK_OK(lagless_tplist_add(l, "t", 0));
    CHECK_OK(lagless_consumer_assign(c, l));
    lagless_tplist_destroy(l);
    for (i = 0; i < 10; i++) {
        CHECK_OK(lagless_consumer_poll(c, 200, &m));
        CHECK(m == NULL);
    }
    CHECK(h.calls == 1);
    CHECK(h.code == LAGLESS_ERR_TRANSPORT);
    CHECK(h.all_down);
    CHECK_OK(lagless_consumer_set_error_callback(c, NULL, NULL));
    CHECK_OK(lagless_consumer_close(c, 1000));
    lagless_consumer_destroy(c);
}

static void use_after_close(const char *bootstrap, const char *topic) {
    const char *cc[] = {"bootstrap.servers", NULL, "group.id", "lagless-closed", NULL};
    const char *pc[] = {"bootstrap.servers", NULL, NULL};
    const char *topics[1];
    lagless_consumer *c = NULL;
    lagless_producer *p = NULL;
    lagless_tplist *l = lagless_tplist_new();
    lagless_message *m = NULL;
    lagless_error *e;
    int64_t off = 0;
    size_t n = 0;
    bool active = false;

    topics[0] = topic;
    cc[1] = bootstrap;
    c = new_consumer(cc);
    /* wakeup makes a poll return WAKEUP at once. */
    CHECK_OK(lagless_consumer_wakeup(c));
    e = lagless_consumer_poll(c, 5000, &m);
    CHECK(lagless_error_code(e) == LAGLESS_ERR_WAKEUP && m == NULL);
    lagless_error_destroy(e);
    /* The learning callback may be set, replaced and cleared (NULL) before subscribing. */
    CHECK_OK(lagless_consumer_set_learning_callback(c, not_called, &n));
    CHECK_OK(lagless_consumer_set_learning_callback(c, not_called, NULL));
    CHECK_OK(lagless_consumer_set_learning_callback(c, NULL, NULL));
    /* learner_ready: only for a subscription; partitions not being learned are left out. */
    CHECK_OK(lagless_tplist_add(l, topic, 0));
    EXPECT_ERR(lagless_consumer_learner_ready(c, l, &n), LAGLESS_ERR_ILLEGAL_STATE);
    EXPECT_ERR(lagless_consumer_prepare_to_leave(c, NULL), LAGLESS_ERR_ILLEGAL_STATE);
    EXPECT_ERR(lagless_consumer_learner_ready(c, NULL, &n), LAGLESS_ERR_INVALID_ARGUMENT);
    CHECK_OK(lagless_consumer_subscribe(c, topics, 1, NULL));
    n = 99;
    CHECK_OK(lagless_consumer_learner_ready(c, l, &n));
    CHECK(n == 0);
    CHECK_OK(lagless_consumer_learner_ready(c, l, NULL)); /* the count is optional */
    /* prepare_to_leave before any generation: nothing to hand over ahead, and it says so. */
    active = true;
    CHECK_OK(lagless_consumer_prepare_to_leave(c, &active));
    CHECK(!active);
    /* commit without an assignment to commit is fine; after close nothing is. */
    CHECK_OK(lagless_consumer_close(c, 5000));
    CHECK_OK(lagless_consumer_close(c, 5000)); /* closing again is a no-op */
    EXPECT_ERR(lagless_consumer_poll(c, 0, &m), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_poll_batch(c, 0, &m, 1, &n), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_subscribe(c, topics, 1, NULL), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_set_learning_callback(c, not_called, NULL), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_set_learning_callback(c, NULL, NULL), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_assign(c, l), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_commit_sync(c, NULL, 1000), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_commit_async(c, NULL, NULL, NULL), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_committed(c, l, 1000), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_position(c, topic, 0, 1000, &off), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_recovery_active(c, topic, 0, &active), LAGLESS_ERR_CLOSED);
    CHECK(!lagless_consumer_child_consumer_is_alive(c));
    EXPECT_ERR(lagless_consumer_seek(c, topic, 0, 0), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_pause(c, l), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_resume(c, l), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_unsubscribe(c), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_wakeup(c), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_learner_ready(c, l, &n), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_consumer_prepare_to_leave(c, NULL), LAGLESS_ERR_CLOSED);
    e = lagless_consumer_poll(c, 0, &m);
    CHECK(lagless_error_fatal(e)); /* a closed handle is done */
    lagless_error_destroy(e);
    lagless_consumer_destroy(c);

    pc[1] = bootstrap;
    p = new_producer(pc);
    CHECK_OK(lagless_producer_close(p, 5000));
    EXPECT_ERR(lagless_producer_send_sync(p, topic, -1, NULL, 0, NULL, 0, NULL, NULL),
               LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_producer_send(p, topic, -1, NULL, 0, NULL, 0, NULL, NULL), LAGLESS_ERR_CLOSED);
    EXPECT_ERR(lagless_producer_flush(p, 1000), LAGLESS_ERR_CLOSED);
    CHECK_OK(lagless_producer_poll(p, 0, &n)); /* allowed: serves what is left */
    CHECK_OK(lagless_producer_close(p, 1000));
    lagless_producer_destroy(p);
    lagless_tplist_destroy(l);
}

int main(int argc, char **argv) {
    const char *bootstrap = test_bootstrap();
    CHECK(argc == 2);
    null_arguments();
    bad_config();
    unknown_topic(bootstrap);
    unreachable_broker();
    error_callback();
    use_after_close(bootstrap, argv[1]);
    printf("test_errors: ok\n");
    return 0;
}
