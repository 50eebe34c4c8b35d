/* KIP-333 recovery streams processed on a thread of their own through the C ABI
 * (parallel.rebalance.recovery.poll), against a real broker. A member commits offset 70 of a
 * one-partition topic and leaves; the log grows to 2070; a member with recovery streams and a
 * recovery thread takes the partition over. The main thread polls (main-stream records only),
 * the recovery thread calls lagless_consumer_recovery_poll (backlog records only). Checks: every
 * offset from 70 to the end comes exactly once, each on its stream's thread and in order; while
 * the recovery thread holds its second batch unprocessed, a commit of the consumed positions made
 * on the main thread stops at the batch's first offset, and once the next recovery poll is made
 * it passes it; lagless_consumer_wakeup ends a waiting recovery poll; without the setting the
 * call is LAGLESS_ERR_ILLEGAL_STATE.
 * Usage: test_recovery_thread TOPIC GROUP (TOPIC must not exist yet) */
#include "recovery_common.h"

#include <pthread.h>

#define COMMITTED 70
#define LOG_END 2070
#define FRESH 100
#define TOTAL_END (LOG_END + FRESH)

static const char *bootstrap;
static lagless_consumer *c;

/* Shared between the two threads, under `mu`. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int recovered;             /* backlog records the recovery thread got */
static int64_t holding = -1;      /* first offset of the 2nd batch, held while the main thread looks */
static int64_t second_first = -1; /* first offset of the 3rd batch */
static int checked;               /* held batches the main thread has looked at */

/* Every member of the group, the departed one too, has max.poll.records 50. */
static const char *const max_poll_50[] = {"max.poll.records", "50", NULL};

/* A group member with manual commits; `mode` 0: plain, 1: recovery streams, 2: and a recovery
 * thread. */
static lagless_consumer *member(const char *group, int mode) {
    static const char *const with_thread[] = {"max.poll.records", "50",
                                              "parallel.rebalance.recovery.poll", "true", NULL};
    return recovery_member(bootstrap, group, mode >= 1, mode == 2 ? with_thread : max_poll_50);
}

static void *recovery_thread(void *arg) {
    static lagless_message *batch[64];
    int64_t last = COMMITTED - 1;
    int batches = 0;
    (void)arg;
    for (;;) {
        size_t n = 0, i;
        lagless_error *e = lagless_consumer_recovery_poll(c, -1, batch, 64, &n);
        if (e != NULL) {
            CHECK(lagless_error_code(e) == LAGLESS_ERR_WAKEUP);
            lagless_error_destroy(e);
            return NULL;
        }
        CHECK(n > 0 && n <= 50); /* a negative timeout waits for a record; max.poll.records */
        for (i = 0; i < n; i++) {
            int64_t o = lagless_message_offset(batch[i]);
            CHECK(lagless_message_from_recovery(batch[i]));
            CHECK(o == last + 1 && o < LOG_END); /* the backlog, in order, each once */
            last = o;
            lagless_message_destroy(batch[i]);
        }
        pthread_mutex_lock(&mu);
        recovered += (int)n;
        if (++batches == 2) {
            /* Hold the second batch (this call said the first is processed) unprocessed until
             * the main thread has committed. */
            holding = last - (int64_t)n + 1;
            pthread_cond_broadcast(&cv);
            while (!checked) pthread_cond_wait(&cv, &mu);
        } else if (batches == 3) {
            /* And the third, until the main thread has committed again. */
            second_first = last - (int64_t)n + 1;
            pthread_cond_broadcast(&cv);
            while (checked < 2) pthread_cond_wait(&cv, &mu);
        }
        pthread_mutex_unlock(&mu);
    }
}

int main(int argc, char **argv) {
    static unsigned char seen[TOTAL_END];
    const char *topic, *group;
    const char *topics[1];
    lagless_consumer *plain;
    lagless_message *batch[50];
    pthread_t thread;
    int main_records = 0, done = 0;
    int64_t last_main = LOG_END - 1, held, second;
    size_t n;
    double deadline;

    CHECK(argc == 3);
    bootstrap = test_bootstrap();
    topic = argv[1];
    group = argv[2];
    topics[0] = topic;

    /* Without the setting: the documented error. */
    plain = member(group, 1);
    EXPECT_ERR(lagless_consumer_recovery_poll(plain, 0, batch, 50, &n), LAGLESS_ERR_ILLEGAL_STATE);
    lagless_consumer_destroy(plain);

    recovery_backlog(bootstrap, topic, group, COMMITTED, LOG_END, max_poll_50);

    c = member(group, 2);
    CHECK_OK(lagless_consumer_subscribe(c, topics, 1, NULL));
    CHECK(pthread_create(&thread, NULL, recovery_thread, NULL) == 0);

    /* The main thread polls (group steps run here) until the recovery thread holds a batch. */
    deadline = now_s() + 60;
    for (;;) {
        CHECK_OK(lagless_consumer_poll_batch(c, 100, batch, 50, &n));
        CHECK(n == 0); /* nothing on the main stream before the fresh records */
        pthread_mutex_lock(&mu);
        held = holding;
        pthread_mutex_unlock(&mu);
        if (held >= 0) break;
        CHECK(now_s() < deadline);
    }
    CHECK(held > COMMITTED); /* the first batch is processed, so a commit may pass it */
    /* The takeover is done (the recovery stream runs): fresh records go to the main stream. */
    recovery_produce(bootstrap, topic, FRESH);
    CHECK_OK(lagless_consumer_commit_sync(c, NULL, 10000));
    CHECK(recovery_committed(c, topic) == held);
    pthread_mutex_lock(&mu);
    checked = 1;
    pthread_cond_broadcast(&cv);
    while (second_first < 0) pthread_cond_wait(&cv, &mu);
    second = second_first;
    pthread_mutex_unlock(&mu);
    /* The next recovery poll was made: the second batch is processed, the third is out. */
    CHECK_OK(lagless_consumer_commit_sync(c, NULL, 10000));
    CHECK(recovery_committed(c, topic) == second);
    CHECK(second > held);
    pthread_mutex_lock(&mu);
    checked = 2;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);

    deadline = now_s() + 120;
    while (!done) {
        size_t i;
        CHECK(now_s() < deadline);
        CHECK_OK(lagless_consumer_poll_batch(c, 100, batch, 50, &n));
        for (i = 0; i < n; i++) {
            int64_t o = lagless_message_offset(batch[i]);
            CHECK(!lagless_message_from_recovery(batch[i]));
            CHECK(o == last_main + 1 && o < TOTAL_END && !seen[o]);
            seen[o] = 1;
            last_main = o;
            main_records++;
            lagless_message_destroy(batch[i]);
        }
        pthread_mutex_lock(&mu);
        done = main_records == FRESH && recovered == LOG_END - COMMITTED;
        pthread_mutex_unlock(&mu);
    }
    /* The recovery thread waits for more: wakeup ends its call (and the main thread's next). */
    {
        struct timespec pause = {0, 200000000L};
        nanosleep(&pause, NULL);
    }
    CHECK_OK(lagless_consumer_wakeup(c));
    CHECK(pthread_join(thread, NULL) == 0);
    EXPECT_ERR(lagless_consumer_poll_batch(c, 0, batch, 50, &n), LAGLESS_ERR_WAKEUP);
    /* The wakeup's call said the last batch was processed: the commit reaches the end. */
    CHECK_OK(lagless_consumer_commit_sync(c, NULL, 10000));
    CHECK(recovery_committed(c, topic) == TOTAL_END);
    CHECK_OK(lagless_consumer_close(c, 10000));
    EXPECT_ERR(lagless_consumer_recovery_poll(c, 0, batch, 50, &n), LAGLESS_ERR_CLOSED);
    lagless_consumer_destroy(c);
    printf("test_recovery_thread: %d backlog records on the recovery thread, %d fresh on the "
           "main thread, commits held at the batch out\n",
           LOG_END - COMMITTED, FRESH);
    return 0;
}
