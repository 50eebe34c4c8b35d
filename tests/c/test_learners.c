/* Learner assignments through the C ABI, against a real broker. Two members with
 * partition.assignment.strategy=learner-sticky,cooperative-sticky share a 4-partition topic under
 * steady production, in one process and on one thread: A alone owns everything, then B joins.
 * B's learning callback (set before subscribing; A's after) answers "not ready" the first time
 * and "ready" after a warm-up the second time (a later poll calls it again after a backoff).
 * Checks: only B learns; B learns while A owns the partitions and B does not; "not ready" makes
 * B's poll return LAGLESS_ERR_CALLBACK and leaves A the owner; "ready" moves exactly the learned
 * partitions, A revoking them and B getting them in on_assigned only after the callback returned
 * 0; A keeps consuming them during the warm-up; every callback runs on the polling thread; every
 * record is read exactly once and in order (A commits in on_revoked, auto-commit is off).
 * Usage: test_learners TOPIC GROUP (TOPIC must not exist yet) */
#include "common.h"

#include <pthread.h>

#define PARTITIONS 4
#define MAX_ROUNDS 20000
#define WARM_UP_S 1.5

struct member {
    const char *name;
    lagless_consumer *c;
    struct member *peer;
    int owned[PARTITIONS];
    int first_assigned_step; /* the first on_assigned with partitions after learning */
    int assigned_partitions[PARTITIONS];
    int revoked_step[PARTITIONS];
    int learning_calls;
    int learned[2][PARTITIONS]; /* the partitions of the first two learning calls */
    int learned_count[2];
    int not_ready_left; /* learning calls still to answer "not ready" */
    int ready_step;     /* when the learning callback returned 0 */
    long owner_records_in_warm_up;
    int64_t last_offset[PARTITIONS];
    long records[PARTITIONS];
};

static const char *bootstrap, *topic;
static pthread_t poller;
static int step, bad_thread, b_errors;
static lagless_producer *producer;
static int64_t produced; /* rounds: one record per partition each */
static double last_round;
static int producing = 1;
static unsigned char seen[PARTITIONS][MAX_ROUNDS]; /* times each record was delivered */
static long delivered;

/* Steady production: a record on every partition every 10 ms. */
static void produce_round(void) {
    int p;
    if (!producing || now_s() < last_round + 0.01) return;
    last_round = now_s();
    CHECK(produced < MAX_ROUNDS);
    for (p = 0; p < PARTITIONS; p++) {
        CHECK_OK(lagless_producer_send(producer, topic, p, NULL, 0, (const uint8_t *)"x", 1, NULL,
                                       NULL));
    }
    produced++;
}

static void record(struct member *m, const lagless_message *msg) {
    int p = (int)lagless_message_partition(msg);
    int64_t o = lagless_message_offset(msg);
    CHECK(p >= 0 && p < PARTITIONS && o >= 0 && o < MAX_ROUNDS);
    if (!m->owned[p]) {
        fprintf(stderr, "%s got %d:%lld without owning partition %d\n", m->name, p, (long long)o, p);
        exit(1);
    }
    if (o <= m->last_offset[p]) {
        fprintf(stderr, "%s: %d:%lld after %lld\n", m->name, p, (long long)o,
                (long long)m->last_offset[p]);
        exit(1);
    }
    m->last_offset[p] = o;
    m->records[p]++;
    seen[p][o]++;
    delivered++;
}

/* Polls `m` once; returns the poll's error (the caller owns it) or NULL. */
static lagless_error *poll_member(struct member *m) {
    lagless_message *batch[64];
    size_t n = 0, i;
    lagless_error *e = lagless_consumer_poll_batch(m->c, 20, batch, 64, &n);
    if (e != NULL) return e;
    for (i = 0; i < n; i++) {
        record(m, batch[i]);
        lagless_message_destroy(batch[i]);
    }
    return NULL;
}

static int partition_at(const lagless_tplist *parts, size_t i) {
    const char *t = NULL;
    int32_t p = -1;
    CHECK_OK(lagless_tplist_get(parts, i, &t, &p, NULL));
    CHECK(strcmp(t, topic) == 0 && p >= 0 && p < PARTITIONS);
    return (int)p;
}

/* Whether `c`'s current assignment holds partition `p`. */
static int assigned(lagless_consumer *c, int p) {
    lagless_tplist *a = NULL;
    size_t i, n;
    int found = 0;
    CHECK_OK(lagless_consumer_assignment(c, &a));
    n = lagless_tplist_count(a);
    for (i = 0; i < n; i++) found |= partition_at(a, i) == p;
    lagless_tplist_destroy(a);
    return found;
}

static void on_thread(struct member *m, lagless_consumer *c) {
    if (!pthread_equal(pthread_self(), poller)) bad_thread = 1;
    CHECK(c == m->c);
}

static void print_event(struct member *m, const char *what, const lagless_tplist *parts,
                        const char *outcome) {
    size_t i, n = lagless_tplist_count(parts);
    printf("[%d] %s %s", step, m->name, what);
    for (i = 0; i < n; i++) printf(" %d", partition_at(parts, i));
    printf("%s\n", outcome);
    fflush(stdout);
}

static int on_assigned(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    struct member *m = (struct member *)opaque;
    size_t i, n = lagless_tplist_count(parts);
    on_thread(m, c);
    step++;
    for (i = 0; i < n; i++) {
        int p = partition_at(parts, i);
        CHECK(!m->owned[p]);
        m->owned[p] = 1;
        if (m->learning_calls > 0) m->assigned_partitions[p] = 1;
    }
    if (n > 0 && m->learning_calls > 0 && m->first_assigned_step == 0) m->first_assigned_step = step;
    print_event(m, "assigned", parts, "");
    return 0;
}

/* Commits the consumed positions of the partitions given up, so their next owner neither skips
 * nor re-reads a record. */
static int on_revoked(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    struct member *m = (struct member *)opaque;
    lagless_tplist *offsets = lagless_tplist_new();
    size_t i, n = lagless_tplist_count(parts);
    on_thread(m, c);
    step++;
    for (i = 0; i < n; i++) {
        int p = partition_at(parts, i);
        int64_t pos = -1;
        CHECK(m->owned[p]);
        CHECK_OK(lagless_consumer_position(c, topic, p, 10000, &pos));
        CHECK_OK(lagless_tplist_add(offsets, topic, p));
        CHECK_OK(lagless_tplist_set_offset(offsets, i, pos));
        m->owned[p] = 0;
        m->revoked_step[p] = step;
    }
    if (n > 0) CHECK_OK(lagless_consumer_commit_sync(c, offsets, 10000));
    lagless_tplist_destroy(offsets);
    print_event(m, "revoked", parts, "");
    return 0;
}

static int on_learning(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    struct member *m = (struct member *)opaque;
    struct member *owner = m->peer;
    size_t i, n = lagless_tplist_count(parts);
    int call = m->learning_calls++;
    double until;
    on_thread(m, c);
    step++;
    CHECK(n > 0);
    CHECK(call < 2);
    m->learned_count[call] = (int)n;
    for (i = 0; i < n; i++) {
        int p = partition_at(parts, i);
        m->learned[call][p] = 1;
        /* Learned, not owned: the owner still has it. */
        CHECK(!m->owned[p] && !assigned(c, p));
        CHECK(owner->owned[p] && assigned(owner->c, p));
    }
    if (m->not_ready_left > 0) {
        m->not_ready_left--;
        print_event(m, "learning", parts, ": not ready");
        return 7;
    }
    print_event(m, "learning", parts, ": warming up");
    /* Warming up; the owner keeps consuming the learned partitions meanwhile (polled here, as
     * this test runs every member on one thread). */
    for (i = 0; i < PARTITIONS; i++) {
        if (m->learned[call][i]) m->owner_records_in_warm_up -= owner->records[i];
    }
    until = now_s() + WARM_UP_S;
    while (now_s() < until) {
        produce_round();
        CHECK_OK(poll_member(owner));
    }
    for (i = 0; i < PARTITIONS; i++) {
        if (m->learned[call][i]) m->owner_records_in_warm_up += owner->records[i];
    }
    m->ready_step = ++step;
    printf("[%d] %s ready\n", step, m->name);
    return 0;
}

static void member_init(struct member *m, const char *name, const char *group) {
    const char *cc[] = {"bootstrap.servers", NULL, "group.id", NULL,
                        "partition.assignment.strategy", "learner-sticky,cooperative-sticky",
                        "auto.offset.reset", "earliest", "enable.auto.commit", "false",
                        "session.timeout.ms", "6000", "heartbeat.interval.ms", "500", NULL};
    int p;
    memset(m, 0, sizeof *m);
    m->name = name;
    for (p = 0; p < PARTITIONS; p++) m->last_offset[p] = -1;
    cc[1] = bootstrap;
    cc[3] = group;
    m->c = new_consumer(cc);
}

static void subscribe(struct member *m) {
    const char *topics[1];
    lagless_rebalance_listener l;
    topics[0] = topic;
    l.opaque = m;
    l.on_assigned = on_assigned;
    l.on_revoked = on_revoked;
    l.on_lost = NULL;
    CHECK_OK(lagless_consumer_subscribe(m->c, topics, 1, &l));
}

static int owned_count(const struct member *m) {
    int p, n = 0;
    for (p = 0; p < PARTITIONS; p++) n += m->owned[p];
    return n;
}

/* Polls both members (B may be NULL) while producing, until `done` or the deadline. `b_errors`
 * counts B's LAGLESS_ERR_CALLBACK results; any other error fails the test. */
static void run(struct member *a, struct member *b, int (*done)(struct member *, struct member *),
                double seconds, const char *what) {
    double deadline = now_s() + seconds;
    while (!done(a, b)) {
        lagless_error *e;
        if (now_s() > deadline) {
            fprintf(stderr, "timed out waiting until %s (A owns %d partitions)\n", what,
                    owned_count(a));
            exit(1);
        }
        produce_round();
        CHECK_OK(poll_member(a));
        if (b == NULL) continue;
        e = poll_member(b);
        if (e != NULL) {
            if (lagless_error_code(e) != LAGLESS_ERR_CALLBACK) {
                fprintf(stderr, "B's poll failed: %s (%s)\n", lagless_error_message(e),
                        lagless_error_name(e));
                exit(1);
            }
            CHECK(strstr(lagless_error_message(e), "learning") != NULL);
            b_errors++;
            printf("[%d] B's poll: %s\n", step, lagless_error_message(e));
            lagless_error_destroy(e);
        }
    }
}

static int a_owns_all(struct member *a, struct member *b) {
    (void)b;
    return owned_count(a) == PARTITIONS;
}

static int b_said_not_ready(struct member *a, struct member *b) {
    (void)a;
    return b->learning_calls >= 1 && b_errors >= 1;
}

static int b_learned_twice(struct member *a, struct member *b) {
    (void)a;
    return b->learning_calls >= 2;
}

static int b_got_what_it_learned(struct member *a, struct member *b) {
    (void)a;
    return b->first_assigned_step > 0;
}

static double settle_until;
static int settled(struct member *a, struct member *b) {
    (void)a;
    (void)b;
    return now_s() >= settle_until;
}

static int all_read(struct member *a, struct member *b) {
    (void)a;
    (void)b;
    return delivered >= produced * PARTITIONS;
}

int main(int argc, char **argv) {
    const char *pc[] = {"bootstrap.servers", NULL, "linger.ms", "5", NULL};
    struct member a, b;
    int p, learned_n = 0;
    int64_t o;

    CHECK(argc == 3);
    bootstrap = test_bootstrap();
    topic = argv[1];
    poller = pthread_self();
    CHECK_OK(lagless_admin_create_topic(bootstrap, topic, PARTITIONS, 1));
    pc[1] = bootstrap;
    producer = new_producer(pc);

    member_init(&a, "A", argv[2]);
    member_init(&b, "B", argv[2]);
    a.peer = &b;
    b.peer = &a;
    b.not_ready_left = 1;
    /* B's learning callback before it subscribes, A's after: both are kept. */
    CHECK_OK(lagless_consumer_set_learning_callback(b.c, on_learning, &b));
    subscribe(&a);
    CHECK_OK(lagless_consumer_set_learning_callback(a.c, on_learning, &a));
    run(&a, NULL, a_owns_all, 60, "A owns every partition");

    subscribe(&b);
    /* B joins: it learns, is not ready, and A keeps everything. */
    run(&a, &b, b_said_not_ready, 60, "B learns and says it is not ready");
    CHECK(b.learning_calls == 1 && b_errors == 1);
    CHECK(owned_count(&a) == PARTITIONS && owned_count(&b) == 0);
    for (p = 0; p < PARTITIONS; p++) CHECK(b.revoked_step[p] == 0 && a.revoked_step[p] == 0);

    /* Not ready: a later poll calls B's learning callback again, after a backoff, for the same
     * partitions (still owned by A: on_learning checks it); B is ready after its warm-up. */
    run(&a, &b, b_learned_twice, 60, "B learns again after a backoff");
    run(&a, &b, b_got_what_it_learned, 60, "B is assigned what it learned");
    CHECK(b_errors == 1);
    CHECK(a.learning_calls == 0); /* A owned from the start: nothing to learn */
    CHECK(b.learning_calls == 2 && b.ready_step > 0);
    CHECK(memcmp(b.learned[0], b.learned[1], sizeof b.learned[0]) == 0);
    CHECK(b.learned_count[0] == PARTITIONS / 2);
    CHECK(b.owner_records_in_warm_up > 0);
    for (p = 0; p < PARTITIONS; p++) {
        if (b.learned[1][p]) {
            learned_n++;
            /* A gave it up, and B got it, only once B was ready. */
            CHECK(a.revoked_step[p] > b.ready_step);
            CHECK(b.first_assigned_step > a.revoked_step[p]);
            CHECK(b.owned[p] && !a.owned[p]);
        } else {
            CHECK(a.owned[p] && !b.owned[p] && a.revoked_step[p] == 0);
        }
        CHECK(b.assigned_partitions[p] == b.learned[1][p]); /* exactly what it learned */
    }
    CHECK(learned_n == PARTITIONS / 2);

    /* Both consume; then every record produced is read exactly once. */
    settle_until = now_s() + 2;
    run(&a, &b, settled, 10, "2 s passed");
    producing = 0;
    CHECK_OK(lagless_producer_flush(producer, 30000));
    run(&a, &b, all_read, 60, "every record is read");
    CHECK(b_errors == 1);
    for (p = 0; p < PARTITIONS; p++) {
        for (o = 0; o < produced; o++) {
            if (seen[p][o] != 1) {
                fprintf(stderr, "record %d:%lld read %d times\n", p, (long long)o, seen[p][o]);
                return 1;
            }
        }
    }
    CHECK(delivered == produced * PARTITIONS);

    CHECK_OK(lagless_consumer_close(b.c, 10000));
    CHECK_OK(lagless_consumer_close(a.c, 10000));
    CHECK(!bad_thread);
    lagless_consumer_destroy(a.c);
    lagless_consumer_destroy(b.c);
    CHECK_OK(lagless_producer_close(producer, 5000));
    lagless_producer_destroy(producer);
    printf("test_learners: ok: B learned %d partitions, was not ready once, then warmed up "
           "%.1f s while A read %ld of their records; %ld records read once each\n",
           learned_n, WARM_UP_S, b.owner_records_in_warm_up, delivered);
    return 0;
}
