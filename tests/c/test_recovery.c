/* KIP-333 recovery streams through the C ABI, against a real broker. A member commits offset 70
 * of a one-partition topic and leaves; the log grows to 2070; a member with
 * enable.parallel.rebalance takes the partition over, so the main stream starts at 2070 and a
 * recovery stream drains [70, 2070). Fresh records are produced once the recovery stream runs.
 * Checks: every offset from 70 to the end comes exactly once; lagless_message_from_recovery is
 * true exactly for the backlog; lagless_consumer_recovery_active (and _child_consumer_is_alive)
 * is true while backlog records are outstanding and false once the last one came; the committed
 * offset after a commit of the consumed positions is the low-water mark (the lowest offset not
 * delivered yet); recovery_active on a partition not assigned is LAGLESS_ERR_ILLEGAL_STATE.
 * Usage: test_recovery TOPIC GROUP (TOPIC must not exist yet) */
#include "recovery_common.h"

#define COMMITTED 70
#define LOG_END 2070 /* the log end when the partition is taken over */
#define FRESH 100    /* records produced after the takeover */
#define TOTAL_END (LOG_END + FRESH)

static const char *bootstrap;

/* The lowest offset from COMMITTED on not delivered yet. */
static int64_t lowest_undelivered(const unsigned char *delivered) {
    int64_t o = COMMITTED;
    while (o < TOTAL_END && delivered[o]) o++;
    return o;
}

int main(int argc, char **argv) {
    static unsigned char delivered[TOTAL_END];
    const char *topic, *group;
    const char *topics[1];
    lagless_consumer *c;
    lagless_message *batch[50];
    int64_t last_main = -1, last_recovery = -1, pos = -1;
    int backlog_left = LOG_END - COMMITTED, total = 0, polls = 0, since_commit = 0;
    int seen_active = 0, fresh_produced = 0, fresh_during_recovery = 0, commits_checked = 0;
    bool active = false;
    double deadline;
    lagless_error *e;

    CHECK(argc == 3);
    bootstrap = test_bootstrap();
    topic = argv[1];
    group = argv[2];
    topics[0] = topic;
    recovery_backlog(bootstrap, topic, group, COMMITTED, LOG_END, NULL);

    c = recovery_member(bootstrap, group, 1, NULL);
    CHECK(!lagless_consumer_child_consumer_is_alive(c));
    /* Not assigned yet: the documented error, and the out-parameter left alone. */
    e = lagless_consumer_recovery_active(c, topic, 0, &active);
    CHECK(lagless_error_code(e) == LAGLESS_ERR_ILLEGAL_STATE);
    CHECK(strstr(lagless_error_message(e), "not assigned") != NULL);
    lagless_error_destroy(e);
    CHECK(!active);
    CHECK_OK(lagless_consumer_subscribe(c, topics, 1, NULL));

    deadline = now_s() + 120;
    while (total < TOTAL_END - COMMITTED) {
        size_t n = 0, i;
        if (now_s() > deadline) {
            fprintf(stderr, "timed out: %d of %d records, %d of the backlog left\n", total,
                    TOTAL_END - COMMITTED, backlog_left);
            return 1;
        }
        /* Single-message polls and batches in turn: both advance positions only past what they
         * return. */
        if (polls++ % 2 == 0) {
            CHECK_OK(lagless_consumer_poll(c, 200, &batch[0]));
            n = batch[0] != NULL;
        } else {
            CHECK_OK(lagless_consumer_poll_batch(c, 200, batch, 7, &n));
        }
        for (i = 0; i < n; i++) {
            lagless_message *m = batch[i];
            int64_t o = lagless_message_offset(m);
            bool rec = lagless_message_from_recovery(m);
            CHECK(lagless_message_partition(m) == 0);
            CHECK(o >= COMMITTED && o < TOTAL_END);
            if (delivered[o]) {
                fprintf(stderr, "offset %lld delivered twice\n", (long long)o);
                return 1;
            }
            delivered[o] = 1;
            total++;
            since_commit++;
            if (o < LOG_END) {
                /* The backlog comes from the recovery stream, in order. */
                CHECK(rec);
                CHECK(o > last_recovery);
                last_recovery = o;
                backlog_left--;
            } else {
                /* From the takeover's log end on: the main stream, in order. */
                CHECK(!rec);
                CHECK(o > last_main);
                last_main = o;
                if (backlog_left > 0) fresh_during_recovery++;
            }
            lagless_message_destroy(m);
        }
        e = lagless_consumer_recovery_active(c, topic, 0, &active);
        if (e != NULL) {
            /* Only before the group assigned the partition. */
            CHECK(lagless_error_code(e) == LAGLESS_ERR_ILLEGAL_STATE && total == 0);
            lagless_error_destroy(e);
            continue;
        }
        CHECK(active == lagless_consumer_child_consumer_is_alive(c));
        if (total > 0) {
            /* Running exactly while backlog records are outstanding. */
            CHECK(active == (backlog_left > 0));
        }
        if (active && !seen_active) {
            seen_active = 1;
            /* The takeover saw the log end at LOG_END: the records from here on are fresh. */
            recovery_produce(bootstrap, topic, FRESH);
            fresh_produced = 1;
        }
        if (seen_active) {
            /* The position is the main stream's, which started at the takeover's log end. */
            CHECK_OK(lagless_consumer_position(c, topic, 0, 10000, &pos));
            CHECK(pos == (last_main < 0 ? LOG_END : last_main + 1));
        }
        if (since_commit >= 150 || (total == TOTAL_END - COMMITTED && since_commit > 0)) {
            CHECK_OK(lagless_consumer_commit_sync(c, NULL, 10000));
            CHECK(recovery_committed(c, topic) == lowest_undelivered(delivered));
            since_commit = 0;
            commits_checked++;
        }
    }
    CHECK(seen_active && fresh_produced);
    CHECK(lowest_undelivered(delivered) == TOTAL_END); /* every offset from 70 on */
    CHECK_OK(lagless_consumer_recovery_active(c, topic, 0, &active));
    CHECK(!active);
    CHECK(!lagless_consumer_child_consumer_is_alive(c));
    CHECK(recovery_committed(c, topic) == TOTAL_END);
    CHECK(commits_checked >= 10);

    /* Partitions not assigned: another partition of the topic, another topic. */
    active = true;
    EXPECT_ERR(lagless_consumer_recovery_active(c, topic, 1, &active), LAGLESS_ERR_ILLEGAL_STATE);
    EXPECT_ERR(lagless_consumer_recovery_active(c, "lagless-not-assigned", 0, &active),
               LAGLESS_ERR_ILLEGAL_STATE);
    CHECK(active); /* outputs are written only on success */

    CHECK_OK(lagless_consumer_close(c, 10000));
    EXPECT_ERR(lagless_consumer_recovery_active(c, topic, 0, &active), LAGLESS_ERR_CLOSED);
    CHECK(!lagless_consumer_child_consumer_is_alive(c));
    lagless_consumer_destroy(c);
    printf("test_recovery: ok: %d records from offset %d, %d fresh ones came while the backlog "
           "drained, %d commits checked\n",
           total, COMMITTED, fresh_during_recovery, commits_checked);
    return 0;
}
