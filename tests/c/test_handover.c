/* Learner hand-overs through the C ABI, against a real broker: readiness reported later with
 * lagless_consumer_learner_ready, and scale-down with lagless_consumer_prepare_to_leave. Every
 * member uses partition.assignment.strategy=learner-sticky,cooperative-sticky and
 * learner.readiness=explicit, and is polled in one loop on the main thread while a producer
 * writes a record to each of the 4 partitions every 10 ms. Both parts count every offset.
 *
 * 1. Readiness from another thread (TOPIC-ready, GROUP-ready): A owns everything, B joins. B's
 *    learning callback only hands the partitions to a warm-up thread and returns 0; that thread
 *    calls lagless_consumer_learner_ready after WARM_UP_S. Checks: B learns 2 partitions, owned
 *    by A; B's polls keep returning without error through the warm-up; A keeps reading the
 *    learned partitions meanwhile; learner_ready takes all of them; A revokes them and B gets
 *    exactly them only after learner_ready.
 * 2. Prepare to leave (TOPIC-leave, GROUP-leave): C owns everything, A and B join (C keeps 2
 *    partitions); C calls lagless_consumer_prepare_to_leave and keeps polling. Checks: the group
 *    is learner-sticky; C's partitions are learned after that, one by A and one by B (the
 *    learning callback sees them owned by C); C keeps reading each through the
 *    learner's warm-up and revokes it only once the learner reported readiness (from the polling
 *    thread, after WARM_UP_S); C's assignment ends empty and C closes; every offset is read.
 * In both: no partition is ever assigned to a member while another owns it, judged from the
 * rebalance callbacks in the order they ran; a learner is assigned a learned partition only
 * after it was ready; no poll fails; every offset produced is read at least once.
 * Usage: test_handover TOPIC GROUP (topics TOPIC-ready and TOPIC-leave must not exist yet) */
#include "common.h"

#include <pthread.h>

#define PARTITIONS 4
#define MAX_ROUNDS 20000
#define WARM_UP_S 2.0

struct member {
    const char *name;
    lagless_consumer *c;
    int active; /* polled by the loop */
    int owned[PARTITIONS];
    int64_t last_offset[PARTITIONS];
    double revoked_at[PARTITIONS];
    double first_assigned_at; /* the first on_assigned with partitions after learning */
    int first_assigned[PARTITIONS];
    int learning_calls;
    long polls_in_warm_up;
    /* Explicit readiness reported from the polling thread: the learned partitions, and when. */
    lagless_tplist *pending;
    double ready_due;
    size_t taken;
};

/* Learning state per partition. Written by the polling thread and by the warm-up thread of
 * part 1, under `mu`. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct member *learner[PARTITIONS];
static double learn_started[PARTITIONS], learn_ready[PARTITIONS];
static long owner_records_in_warm_up[PARTITIONS];

static struct member *owner[PARTITIONS]; /* by the callbacks, in order */
static const char *bootstrap, *topic;
static lagless_producer *producer;
static int64_t produced;
static double last_round;
static int producing;
static unsigned char seen[PARTITIONS][MAX_ROUNDS];
static long delivered, duplicates;
static double warm_up_s; /* part 2: the warm-up of the learners, 0 before C prepares to leave */

/* Part 1's warm-up thread: the partitions handed over by B's learning callback. */
static struct member *warm_member;
static lagless_tplist *warm_parts;
static int warm_done;
static size_t warm_taken;

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
    pthread_mutex_lock(&mu);
    if (learner[p] != NULL && learner[p] != m && learn_started[p] > 0 && learn_ready[p] == 0) {
        owner_records_in_warm_up[p]++;
    }
    pthread_mutex_unlock(&mu);
    if (seen[p][o]++ == 0) {
        delivered++;
    } else {
        duplicates++;
    }
}

static int partition_at(const lagless_tplist *parts, size_t i) {
    const char *t = NULL;
    int32_t p = -1;
    CHECK_OK(lagless_tplist_get(parts, i, &t, &p, NULL));
    CHECK(strcmp(t, topic) == 0 && p >= 0 && p < PARTITIONS);
    return (int)p;
}

static size_t assignment_size(lagless_consumer *c) {
    lagless_tplist *a = NULL;
    size_t n;
    CHECK_OK(lagless_consumer_assignment(c, &a));
    n = lagless_tplist_count(a);
    lagless_tplist_destroy(a);
    return n;
}

static int owned_count(const struct member *m) {
    int p, n = 0;
    for (p = 0; p < PARTITIONS; p++) n += m->owned[p];
    return n;
}

static void print_event(struct member *m, const char *what, const lagless_tplist *parts) {
    size_t i, n = lagless_tplist_count(parts);
    printf("%7.3f %s %s", now_s(), m->name, what);
    for (i = 0; i < n; i++) printf(" %d", partition_at(parts, i));
    printf("\n");
    fflush(stdout);
}

static int on_assigned(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    struct member *m = (struct member *)opaque;
    size_t i, n = lagless_tplist_count(parts);
    CHECK(c == m->c);
    print_event(m, "assigned", parts);
    for (i = 0; i < n; i++) {
        int p = partition_at(parts, i);
        if (owner[p] != NULL) {
            fprintf(stderr, "partition %d assigned to %s while %s owns it\n", p, m->name,
                    owner[p]->name);
            exit(1);
        }
        pthread_mutex_lock(&mu);
        if (learner[p] == m && learn_ready[p] == 0) {
            fprintf(stderr, "%s was assigned partition %d it learned before it was ready\n",
                    m->name, p);
            exit(1);
        }
        pthread_mutex_unlock(&mu);
        owner[p] = m;
        CHECK(!m->owned[p]);
        m->owned[p] = 1;
        m->last_offset[p] = -1;
        if (m->learning_calls > 0 && m->first_assigned_at == 0) m->first_assigned[p] = 1;
    }
    if (n > 0 && m->learning_calls > 0 && m->first_assigned_at == 0) m->first_assigned_at = now_s();
    return 0;
}

/* Commits the consumed positions of the partitions given up, so their next owner neither skips
 * nor re-reads a record. */
static int on_revoked(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    struct member *m = (struct member *)opaque;
    lagless_tplist *offsets = lagless_tplist_new();
    size_t i, n = lagless_tplist_count(parts);
    CHECK(c == m->c);
    print_event(m, "revoked", parts);
    for (i = 0; i < n; i++) {
        int p = partition_at(parts, i);
        int64_t pos = -1;
        CHECK(m->owned[p] && owner[p] == m);
        CHECK_OK(lagless_consumer_position(c, topic, p, 10000, &pos));
        CHECK_OK(lagless_tplist_add(offsets, topic, p));
        CHECK_OK(lagless_tplist_set_offset(offsets, i, pos));
        m->owned[p] = 0;
        owner[p] = NULL;
        m->revoked_at[p] = now_s();
    }
    if (n > 0) CHECK_OK(lagless_consumer_commit_sync(c, offsets, 10000));
    lagless_tplist_destroy(offsets);
    return 0;
}

/* With learner.readiness=explicit: notes what is learned and starts the warm-up elsewhere (the
 * warm-up thread in part 1, a deadline of the polling loop in part 2); returns at once. */
static int on_learning(void *opaque, lagless_consumer *c, const lagless_tplist *parts) {
    struct member *m = (struct member *)opaque;
    lagless_tplist *copy = lagless_tplist_new();
    size_t i, n = lagless_tplist_count(parts);
    double t = now_s();
    CHECK(c == m->c);
    CHECK(n > 0);
    print_event(m, "learning", parts);
    m->learning_calls++;
    pthread_mutex_lock(&mu);
    for (i = 0; i < n; i++) {
        int p = partition_at(parts, i);
        /* Learned, not owned: another member has it. */
        if (m->owned[p] || owner[p] == NULL) {
            fprintf(stderr, "%s learns partition %d, owned by %s\n", m->name, p,
                    owner[p] == NULL ? "nobody" : owner[p]->name);
            exit(1);
        }
        learner[p] = m;
        learn_started[p] = t;
        learn_ready[p] = 0;
        owner_records_in_warm_up[p] = 0;
        CHECK_OK(lagless_tplist_add(copy, topic, p));
    }
    if (m == warm_member && warm_parts == NULL && !warm_done) {
        warm_parts = copy;
        pthread_cond_signal(&cv);
    } else if (m != warm_member) {
        if (m->pending != NULL) lagless_tplist_destroy(m->pending);
        m->pending = copy;
        m->ready_due = t + warm_up_s;
    } else {
        lagless_tplist_destroy(copy); /* part 1 warms up once */
    }
    pthread_mutex_unlock(&mu);
    return 0;
}

/* Marks the partitions of `parts` ready now (under `mu`). */
static void mark_ready(const lagless_tplist *parts) {
    size_t i, n = lagless_tplist_count(parts);
    double t = now_s();
    for (i = 0; i < n; i++) learn_ready[partition_at(parts, i)] = t;
}

/* Part 1: B's warm-up, on a thread of its own; reports readiness from here. */
static void *warm_up_thread(void *arg) {
    struct timespec ts;
    lagless_tplist *parts;
    (void)arg;
    pthread_mutex_lock(&mu);
    while (warm_parts == NULL && !warm_done) pthread_cond_wait(&cv, &mu);
    parts = warm_parts;
    pthread_mutex_unlock(&mu);
    if (parts == NULL) return NULL;
    ts.tv_sec = (time_t)WARM_UP_S;
    ts.tv_nsec = (long)((WARM_UP_S - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&mu);
    mark_ready(parts);
    pthread_mutex_unlock(&mu);
    printf("%7.3f %s ready (from the warm-up thread)\n", now_s(), warm_member->name);
    fflush(stdout);
    CHECK_OK(lagless_consumer_learner_ready(warm_member->c, parts, &warm_taken));
    pthread_mutex_lock(&mu);
    warm_done = 1;
    warm_parts = NULL;
    pthread_mutex_unlock(&mu);
    lagless_tplist_destroy(parts);
    return NULL;
}

/* Part 2: reports readiness from the polling thread once a member's warm-up is over. */
static void report_ready_when_due(struct member *m) {
    lagless_tplist *parts = NULL;
    pthread_mutex_lock(&mu);
    if (m->pending != NULL && now_s() >= m->ready_due) {
        parts = m->pending;
        m->pending = NULL;
        mark_ready(parts);
    }
    pthread_mutex_unlock(&mu);
    if (parts == NULL) return;
    printf("%7.3f %s ready\n", now_s(), m->name);
    fflush(stdout);
    CHECK_OK(lagless_consumer_learner_ready(m->c, parts, &m->taken));
    lagless_tplist_destroy(parts);
}

static int learning_in_progress(struct member *m) {
    int p, any = 0;
    pthread_mutex_lock(&mu);
    for (p = 0; p < PARTITIONS; p++) any |= learner[p] == m && learn_ready[p] == 0;
    pthread_mutex_unlock(&mu);
    return any;
}

/* Polls `m` once; any error fails the test. */
static void poll_member(struct member *m) {
    lagless_message *batch[64];
    size_t n = 0, i;
    lagless_error *e = lagless_consumer_poll_batch(m->c, 20, batch, 64, &n);
    if (e != NULL) {
        fprintf(stderr, "%s's poll failed: %s (%s)\n", m->name, lagless_error_message(e),
                lagless_error_name(e));
        exit(1);
    }
    for (i = 0; i < n; i++) {
        record(m, batch[i]);
        lagless_message_destroy(batch[i]);
    }
    if (learning_in_progress(m)) m->polls_in_warm_up++;
}

static struct member *members;
static int member_count;

/* Polls every active member while producing, until `done` or the deadline. */
static void run(int (*done)(void), double seconds, const char *what) {
    double deadline = now_s() + seconds;
    int i;
    while (!done()) {
        if (now_s() > deadline) {
            fprintf(stderr, "timed out after %.0f s waiting until %s; owned:", seconds, what);
            for (i = 0; i < member_count; i++) {
                fprintf(stderr, " %s %d", members[i].name, owned_count(&members[i]));
            }
            fprintf(stderr, "\n");
            exit(1);
        }
        produce_round();
        for (i = 0; i < member_count; i++) {
            if (!members[i].active) continue;
            poll_member(&members[i]);
            report_ready_when_due(&members[i]);
        }
    }
}

static void member_init(struct member *m, const char *name, const char *group) {
    const char *cc[] = {"bootstrap.servers", NULL, "group.id", NULL,
                        "partition.assignment.strategy", "learner-sticky,cooperative-sticky",
                        "learner.readiness", "explicit", "auto.offset.reset", "earliest",
                        "enable.auto.commit", "false", "session.timeout.ms", "6000",
                        "heartbeat.interval.ms", "500", NULL};
    int p;
    memset(m, 0, sizeof *m);
    m->name = name;
    for (p = 0; p < PARTITIONS; p++) m->last_offset[p] = -1;
    cc[1] = bootstrap;
    cc[3] = group;
    m->c = new_consumer(cc);
    CHECK_OK(lagless_consumer_set_learning_callback(m->c, on_learning, m));
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
    m->active = 1;
}

/* A fresh topic and a clean slate for a part. */
static void start_part(const char *t, struct member *ms, int n) {
    int p;
    topic = t;
    CHECK_OK(lagless_admin_create_topic(bootstrap, topic, PARTITIONS, 1));
    memset(seen, 0, sizeof seen);
    for (p = 0; p < PARTITIONS; p++) {
        learner[p] = NULL;
        owner[p] = NULL;
        learn_started[p] = learn_ready[p] = 0;
        owner_records_in_warm_up[p] = 0;
    }
    produced = 0;
    delivered = duplicates = 0;
    producing = 1;
    members = ms;
    member_count = n;
}

static int all_read(void) { return delivered >= produced * PARTITIONS; }

/* Stops producing, reads every record, and checks each offset was read. */
static void finish_part(const char *part) {
    int p;
    int64_t o;
    producing = 0;
    CHECK_OK(lagless_producer_flush(producer, 30000));
    run(all_read, 60, "every record is read");
    for (p = 0; p < PARTITIONS; p++) {
        for (o = 0; o < produced; o++) {
            if (seen[p][o] == 0) {
                fprintf(stderr, "%s: record %d:%lld was never read\n", part, p, (long long)o);
                exit(1);
            }
        }
    }
}

static struct member *a1, *b1;
static int a_owns_all(void) { return owned_count(a1) == PARTITIONS; }
static int b_got_what_it_learned(void) { return b1->first_assigned_at > 0; }

static double readiness_reported_later(const char *t, const char *group) {
    struct member ms[2];
    pthread_t warmer;
    double started = now_s(), learned_at = 0, ready_at = 0;
    int p, learned_n = 0;

    start_part(t, ms, 2);
    member_init(&ms[0], "A", group);
    member_init(&ms[1], "B", group);
    a1 = &ms[0];
    b1 = &ms[1];
    warm_member = b1;
    warm_parts = NULL;
    warm_done = 0;
    CHECK(pthread_create(&warmer, NULL, warm_up_thread, NULL) == 0);
    subscribe(a1);
    run(a_owns_all, 60, "A owns every partition");
    subscribe(b1);
    run(b_got_what_it_learned, 60, "B is assigned what it learned");
    CHECK(pthread_join(warmer, NULL) == 0);

    CHECK(b1->learning_calls >= 1 && a1->learning_calls == 0);
    for (p = 0; p < PARTITIONS; p++) {
        if (learner[p] != b1) {
            /* Not learned: A keeps it. */
            CHECK(a1->owned[p] && a1->revoked_at[p] == 0 && !b1->first_assigned[p]);
            continue;
        }
        learned_n++;
        learned_at = learn_started[p];
        ready_at = learn_ready[p];
        CHECK(ready_at - learned_at >= WARM_UP_S);
        if (owner_records_in_warm_up[p] == 0) {
            fprintf(stderr, "A read nothing of partition %d during B's warm-up\n", p);
            exit(1);
        }
        if (!(a1->revoked_at[p] > ready_at)) {
            fprintf(stderr, "A gave partition %d up before B reported readiness\n", p);
            exit(1);
        }
        CHECK(b1->first_assigned[p] && b1->first_assigned_at > a1->revoked_at[p]);
    }
    CHECK(learned_n == PARTITIONS / 2);
    CHECK(warm_taken == (size_t)learned_n); /* learner_ready took every learned partition */
    for (p = 0; p < PARTITIONS; p++) CHECK(b1->first_assigned[p] == (learner[p] == b1));
    /* The callback returned at once: B's poll went on, without errors, through the warm-up. */
    if (b1->polls_in_warm_up < 10) {
        fprintf(stderr, "B's poll returned only %ld times during a %.1f s warm-up\n",
                b1->polls_in_warm_up, WARM_UP_S);
        exit(1);
    }

    finish_part("readiness reported later");
    CHECK_OK(lagless_consumer_close(b1->c, 10000));
    CHECK_OK(lagless_consumer_close(a1->c, 10000));
    lagless_consumer_destroy(a1->c);
    lagless_consumer_destroy(b1->c);
    printf("readiness reported later: B learned %d partitions, polled %ld times during its "
           "%.1f s warm-up while A read %ld of their records; %ld records read (%ld twice) "
           "in %.1f s\n",
           learned_n, b1->polls_in_warm_up, WARM_UP_S,
           owner_records_in_warm_up[0] + owner_records_in_warm_up[1] +
               owner_records_in_warm_up[2] + owner_records_in_warm_up[3],
           delivered, duplicates, now_s() - started);
    fflush(stdout);
    return now_s() - started;
}

static struct member *leave_ms;
static int shared_by_three(void) {
    int i;
    for (i = 0; i < 3; i++) {
        if (owned_count(&leave_ms[i]) == 0) return 0;
    }
    return owned_count(&leave_ms[0]) + owned_count(&leave_ms[1]) + owned_count(&leave_ms[2]) ==
           PARTITIONS;
}
static int c_owns_all(void) { return owned_count(&leave_ms[2]) == PARTITIONS; }
static int c_handed_everything_over(void) {
    return owned_count(&leave_ms[2]) == 0 && assignment_size(leave_ms[2].c) == 0;
}

static int leaving_parts[PARTITIONS];

/* Whether `m` learned one of the partitions in `parts`. */
static int learner_of(int (*parts)[PARTITIONS], struct member *m) {
    int p, any = 0;
    for (p = 0; p < PARTITIONS; p++) any |= (*parts)[p] && learner[p] == m;
    return any;
}
static int learners_own_leaving(void) {
    int p;
    for (p = 0; p < PARTITIONS; p++) {
        if (leaving_parts[p] && !learner[p]->owned[p]) return 0;
    }
    return 1;
}

static double prepare_to_leave(const char *t, const char *group) {
    struct member ms[3];
    struct member *c = &ms[2];
    double started = now_s(), prepared;
    int p, i, leaving[PARTITIONS], leaving_n = 0;
    bool learner_sticky = false;

    start_part(t, ms, 3);
    warm_member = NULL;
    warm_up_s = 0; /* learners joining at the start are ready at once */
    member_init(&ms[0], "A", group);
    member_init(&ms[1], "B", group);
    member_init(&ms[2], "C", group);
    leave_ms = ms;
    /* C first, alone: it keeps two partitions when A and B join, one for each to learn. */
    subscribe(c);
    run(c_owns_all, 60, "C owns every partition");
    subscribe(&ms[0]);
    subscribe(&ms[1]);
    run(shared_by_three, 60, "every partition is owned and each member owns one");
    for (p = 0; p < PARTITIONS; p++) {
        leaving[p] = leaving_parts[p] = c->owned[p];
        leaving_n += leaving[p];
    }

    /* From now on a learner warms up for WARM_UP_S before it reports readiness. */
    warm_up_s = WARM_UP_S;
    prepared = now_s();
    printf("%7.3f C prepares to leave\n", prepared);
    CHECK_OK(lagless_consumer_prepare_to_leave(c->c, &learner_sticky));
    if (!learner_sticky) {
        fprintf(stderr, "prepare_to_leave: the group does not assign with learner-sticky\n");
        exit(1);
    }
    run(c_handed_everything_over, 60, "C's assignment is empty");
    CHECK_OK(lagless_consumer_close(c->c, 10000));
    c->active = 0;

    for (p = 0; p < PARTITIONS; p++) {
        struct member *l;
        if (!leaving[p]) continue;
        l = learner[p];
        if (l == NULL || learn_started[p] < prepared) {
            fprintf(stderr, "nobody learned C's partition %d after C prepared to leave\n", p);
            exit(1);
        }
        CHECK(l != c);
        CHECK(learn_ready[p] - learn_started[p] >= WARM_UP_S);
        if (!(c->revoked_at[p] >= learn_ready[p])) {
            fprintf(stderr, "C gave partition %d up before %s was ready\n", p, l->name);
            exit(1);
        }
        if (owner_records_in_warm_up[p] == 0) {
            fprintf(stderr, "C read nothing of partition %d during %s's warm-up\n", p, l->name);
            exit(1);
        }
        printf("partition %d: learned by %s %.1f s after C prepared to leave, ready after %.1f s,"
               " C read %ld of its records meanwhile\n",
               p, l->name, learn_started[p] - prepared, learn_ready[p] - learn_started[p],
               owner_records_in_warm_up[p]);
    }

    /* C's partitions move to the members that learned them; every record is read. */
    run(learners_own_leaving, 60, "the learners own C's partitions");
    finish_part("prepare to leave");
    if (leaving_n == 2 && learner_of(&leaving, &ms[0]) + learner_of(&leaving, &ms[1]) != 2) {
        fprintf(stderr, "C's 2 partitions were not learned one by A and one by B\n");
        exit(1);
    }
    CHECK(owned_count(&ms[0]) + owned_count(&ms[1]) == PARTITIONS);
    for (i = 0; i < 2; i++) CHECK_OK(lagless_consumer_close(ms[i].c, 10000));
    for (i = 0; i < 3; i++) {
        if (ms[i].pending != NULL) lagless_tplist_destroy(ms[i].pending);
        lagless_consumer_destroy(ms[i].c);
    }
    printf("prepare to leave: C handed %d partitions over to the learners and closed; %ld "
           "records read (%ld twice) in %.1f s\n",
           leaving_n, delivered, duplicates, now_s() - started);
    fflush(stdout);
    return now_s() - started;
}

int main(int argc, char **argv) {
    const char *pc[] = {"bootstrap.servers", NULL, "linger.ms", "5", NULL};
    char t1[256], g1[256], t2[256], g2[256];
    double d1, d2;

    CHECK(argc == 3);
    bootstrap = test_bootstrap();
    snprintf(t1, sizeof t1, "%s-ready", argv[1]);
    snprintf(g1, sizeof g1, "%s-ready", argv[2]);
    snprintf(t2, sizeof t2, "%s-leave", argv[1]);
    snprintf(g2, sizeof g2, "%s-leave", argv[2]);
    pc[1] = bootstrap;
    producer = new_producer(pc);

    d1 = readiness_reported_later(t1, g1);
    d2 = prepare_to_leave(t2, g2);

    CHECK_OK(lagless_producer_close(producer, 5000));
    lagless_producer_destroy(producer);
    printf("test_handover: ok (%.1f s + %.1f s)\n", d1, d2);
    return 0;
}
