/* TLS and SASL through the C ABI, against the security listeners of the project's harness
 * (`python3 tests/kafka_broker.py run --security -- ...`): produce, group consume and commit over
 * SSL with a CA file, mutual TLS, SASL_SSL with SCRAM-SHA-512 and OAUTHBEARER with tokens from a
 * C callback, counting every offset; then the failures: a wrong password, a failing token
 * callback, an untrusted and an expired broker certificate, each with its error code, a message
 * that names the cause and no secret.
 * Usage: test_security NAME (a prefix for the topics and groups it makes) */
#include "common.h"

#include <pthread.h>

#define PARTITIONS 3
#define RECORDS 300
#define PER_PARTITION (RECORDS / PARTITIONS)

static const char *plaintext;
static char ca[1024], other_ca[1024], client_cert[1024], client_key[1024];
static char alice_password[256];

static const char *env(const char *name) {
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        fprintf(stderr, "%s is not set: run under `python3 tests/kafka_broker.py run --security "
                        "-- ...` (tests/run does)\n", name);
        exit(2);
    }
    return v;
}

static void security_file(char *out, size_t size, const char *name) {
    int n = snprintf(out, size, "%s/%s", env("LAGLESS_SECURITY_DIR"), name);
    CHECK(n > 0 && (size_t)n < size);
}

/* alice's password from security.json: `"name": "alice", ... "password": "<it>"`. */
static void read_alice_password(void) {
    char path[1024], text[16384];
    const char *at, *start, *end;
    size_t n;
    FILE *f;
    security_file(path, sizeof path, "security.json");
    f = fopen(path, "r");
    CHECK(f != NULL);
    n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    at = strstr(text, "\"name\": \"alice\"");
    CHECK(at != NULL);
    start = strstr(at, "\"password\": \"");
    CHECK(start != NULL);
    start += strlen("\"password\": \"");
    end = strchr(start, '"');
    CHECK(end != NULL && (size_t)(end - start) < sizeof alice_password);
    memcpy(alice_password, start, (size_t)(end - start));
    alice_password[end - start] = '\0';
}

/* --- OAUTHBEARER: unsigned tokens (alg none), as the broker's unsecured validator takes --- */

static pthread_mutex_t token_lock = PTHREAD_MUTEX_INITIALIZER;
static int token_calls;

static size_t base64url(const char *in, size_t len, char *out) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t i, o = 0;
    for (i = 0; i + 2 < len; i += 3) {
        unsigned v = ((unsigned char)in[i] << 16) | ((unsigned char)in[i + 1] << 8) |
                     (unsigned char)in[i + 2];
        out[o++] = abc[(v >> 18) & 63];
        out[o++] = abc[(v >> 12) & 63];
        out[o++] = abc[(v >> 6) & 63];
        out[o++] = abc[v & 63];
    }
    if (len - i == 1) {
        unsigned v = (unsigned char)in[i] << 16;
        out[o++] = abc[(v >> 18) & 63];
        out[o++] = abc[(v >> 12) & 63];
    } else if (len - i == 2) {
        unsigned v = ((unsigned char)in[i] << 16) | ((unsigned char)in[i + 1] << 8);
        out[o++] = abc[(v >> 18) & 63];
        out[o++] = abc[(v >> 12) & 63];
        out[o++] = abc[(v >> 6) & 63];
    }
    out[o] = '\0';
    return o;
}

/* opaque: the principal to name. */
static int32_t unsecured_token(void *opaque, char *token, size_t token_size,
                               int64_t *expires_at_ms, char *principal, size_t principal_size,
                               char *errstr, size_t errstr_size) {
    const char *sub = (const char *)opaque;
    const char *header = "{\"alg\":\"none\"}";
    char claims[256], h64[64], c64[512];
    long long now = (long long)time(NULL);
    int n = snprintf(claims, sizeof claims, "{\"sub\":\"%s\",\"iat\":%lld,\"exp\":%lld}", sub, now,
                     now + 3600);
    (void)errstr;
    (void)errstr_size;
    CHECK(n > 0 && (size_t)n < sizeof claims);
    base64url(header, strlen(header), h64);
    base64url(claims, (size_t)n, c64);
    n = snprintf(token, token_size, "%s.%s.", h64, c64);
    CHECK(n > 0 && (size_t)n < token_size);
    snprintf(principal, principal_size, "%s", sub);
    *expires_at_ms = (int64_t)(now + 3600) * 1000;
    pthread_mutex_lock(&token_lock);
    token_calls++;
    pthread_mutex_unlock(&token_lock);
    return 0;
}

static int32_t failing_token(void *opaque, char *token, size_t token_size, int64_t *expires_at_ms,
                             char *principal, size_t principal_size, char *errstr,
                             size_t errstr_size) {
    (void)opaque;
    (void)token;
    (void)token_size;
    (void)expires_at_ms;
    (void)principal;
    (void)principal_size;
    snprintf(errstr, errstr_size, "token service at idp.example is down");
    return 7;
}

/* --- configs --- */

typedef struct {
    const char *label;
    const char *pairs[24]; /* key, value, ..., NULL */
    lagless_oauthbearer_token_cb token_cb;
    void *token_opaque;
} security;

static lagless_config *config_of(const security *s, const char *const *extra) {
    lagless_config *c = make_config(s->pairs);
    size_t i;
    for (i = 0; extra != NULL && extra[i] != NULL; i += 2) {
        CHECK_OK(lagless_config_set(c, extra[i], extra[i + 1]));
    }
    if (s->token_cb != NULL) {
        CHECK_OK(lagless_config_set_oauthbearer_token_cb(c, s->token_cb, s->token_opaque));
    }
    return c;
}

/* --- the round trip --- */

static int delivered[PARTITIONS][PER_PARTITION];
static int delivery_errors;

static void on_delivery(void *opaque, const lagless_error *err, int32_t partition, int64_t offset) {
    (void)opaque;
    if (err != NULL) {
        fprintf(stderr, "delivery failed: %s\n", lagless_error_message(err));
        delivery_errors++;
    } else if (partition >= 0 && partition < PARTITIONS && offset >= 0 && offset < PER_PARTITION) {
        delivered[partition][offset]++;
    } else {
        fprintf(stderr, "delivery at an unexpected place: %d@%lld\n", (int)partition,
                (long long)offset);
        delivery_errors++;
    }
}

static void round_trip(const security *s, const char *name) {
    char topic[256], group[256], value[32];
    int seen[PARTITIONS][PER_PARTITION];
    int i, p, read = 0;
    const char *extra[8];
    const char *topics[1];
    lagless_config *c;
    lagless_producer *producer = NULL;
    lagless_consumer *consumer = NULL;
    lagless_tplist *parts;
    double deadline;

    snprintf(topic, sizeof topic, "%s-%s", name, s->label);
    snprintf(group, sizeof group, "%s-%s-group", name, s->label);
    CHECK_OK(lagless_admin_create_topic(plaintext, topic, PARTITIONS, 1));

    memset(delivered, 0, sizeof delivered);
    delivery_errors = 0;
    extra[0] = "linger.ms";
    extra[1] = "5";
    extra[2] = NULL;
    c = config_of(s, extra);
    CHECK_OK(lagless_producer_new(c, &producer));
    lagless_config_destroy(c);
    for (i = 0; i < RECORDS; i++) {
        int n = snprintf(value, sizeof value, "value-%d", i);
        CHECK_OK(lagless_producer_send(producer, topic, i % PARTITIONS, NULL, 0,
                                       (const uint8_t *)value, (size_t)n, on_delivery, NULL));
    }
    CHECK_OK(lagless_producer_flush(producer, 60000));
    CHECK_OK(lagless_producer_close(producer, 10000));
    lagless_producer_destroy(producer);
    CHECK(delivery_errors == 0);
    for (p = 0; p < PARTITIONS; p++) {
        for (i = 0; i < PER_PARTITION; i++) {
            if (delivered[p][i] != 1) {
                fprintf(stderr, "%s: offset %d of partition %d delivered %d times\n", s->label, i,
                        p, delivered[p][i]);
                exit(1);
            }
        }
    }

    memset(seen, 0, sizeof seen);
    extra[0] = "group.id";
    extra[1] = group;
    extra[2] = "auto.offset.reset";
    extra[3] = "earliest";
    extra[4] = "enable.auto.commit";
    extra[5] = "false";
    extra[6] = NULL;
    c = config_of(s, extra);
    CHECK_OK(lagless_consumer_new(c, &consumer));
    lagless_config_destroy(c);
    topics[0] = topic;
    CHECK_OK(lagless_consumer_subscribe(consumer, topics, 1, NULL));
    deadline = now_s() + 90;
    while (read < RECORDS) {
        lagless_message *m = NULL;
        if (now_s() > deadline) {
            fprintf(stderr, "%s: read %d of %d records\n", s->label, read, RECORDS);
            exit(1);
        }
        CHECK_OK(lagless_consumer_poll(consumer, 200, &m));
        if (m != NULL) {
            int32_t part = lagless_message_partition(m);
            int64_t off = lagless_message_offset(m);
            size_t len = 0;
            const uint8_t *v = lagless_message_value(m, &len);
            char want[32];
            int wn;
            CHECK(part >= 0 && part < PARTITIONS && off >= 0 && off < PER_PARTITION);
            wn = snprintf(want, sizeof want, "value-%d", (int)(off * PARTITIONS + part));
            CHECK(v != NULL && len == (size_t)wn && memcmp(v, want, len) == 0);
            if (++seen[part][off] != 1) {
                fprintf(stderr, "%s: %d@%lld read twice\n", s->label, (int)part, (long long)off);
                exit(1);
            }
            read++;
            lagless_message_destroy(m);
        }
    }
    CHECK_OK(lagless_consumer_commit_sync(consumer, NULL, 30000));
    parts = lagless_tplist_new();
    for (p = 0; p < PARTITIONS; p++) {
        CHECK_OK(lagless_tplist_add(parts, topic, p));
    }
    CHECK_OK(lagless_consumer_committed(consumer, parts, 30000));
    for (i = 0; i < PARTITIONS; i++) {
        const char *t = NULL;
        int32_t part = -1;
        int64_t off = -1;
        CHECK_OK(lagless_tplist_get(parts, (size_t)i, &t, &part, &off));
        if (off != PER_PARTITION) {
            fprintf(stderr, "%s: committed %lld on partition %d, want %d\n", s->label,
                    (long long)off, (int)part, PER_PARTITION);
            exit(1);
        }
    }
    lagless_tplist_destroy(parts);
    CHECK_OK(lagless_consumer_close(consumer, 10000));
    lagless_consumer_destroy(consumer);
    printf("%s: %d records produced, read once each, committed at the log end\n", s->label,
           RECORDS);
}

/* --- failures --- */

/* The first error a group consumer of `s` gets from poll (within 30 s), checked: its code, that
 * it is fatal, that its message holds every string of `says` and not `secret`. */
static void expect_failure(const security *s, const char *name, int32_t code, const char *says[],
                           const char *secret) {
    char group[256];
    const char *extra[3];
    const char *topics[1] = {"lagless-security-error"};
    lagless_config *c;
    lagless_consumer *consumer = NULL;
    lagless_error *err = NULL;
    double started = now_s();
    const char *m;
    size_t i;

    snprintf(group, sizeof group, "%s-%s-group", name, s->label);
    extra[0] = "group.id";
    extra[1] = group;
    extra[2] = NULL;
    c = config_of(s, extra);
    CHECK_OK(lagless_consumer_new(c, &consumer));
    lagless_config_destroy(c);
    CHECK_OK(lagless_consumer_subscribe(consumer, topics, 1, NULL));
    while (err == NULL) {
        lagless_message *msg = NULL;
        if (now_s() - started > 30) {
            fprintf(stderr, "%s: no error within 30 s\n", s->label);
            exit(1);
        }
        err = lagless_consumer_poll(consumer, 100, &msg);
        if (msg != NULL) {
            lagless_message_destroy(msg);
        }
    }
    m = lagless_error_message(err);
    if (lagless_error_code(err) != code || !lagless_error_fatal(err) ||
        lagless_error_retriable(err)) {
        fprintf(stderr, "%s: want code %d, fatal; got %d (%s), fatal %d: %s\n", s->label,
                (int)code, (int)lagless_error_code(err), lagless_error_name(err),
                (int)lagless_error_fatal(err), m);
        exit(1);
    }
    for (i = 0; says[i] != NULL; i++) {
        if (strstr(m, says[i]) == NULL) {
            fprintf(stderr, "%s: `%s` not in: %s\n", s->label, says[i], m);
            exit(1);
        }
    }
    if (secret != NULL && strstr(m, secret) != NULL) {
        fprintf(stderr, "%s: the secret is in: %s\n", s->label, m);
        exit(1);
    }
    printf("%s: %s after %.1f s: %s\n", s->label, lagless_error_name(err), now_s() - started, m);
    lagless_error_destroy(err);
    lagless_error_destroy(lagless_consumer_close(consumer, 5000));
    lagless_consumer_destroy(consumer);
}

int main(int argc, char **argv) {
    const char *name;
    char alice[] = "alice";
    if (argc != 2) {
        fprintf(stderr, "usage: test_security NAME\n");
        return 2;
    }
    name = argv[1];
    plaintext = test_bootstrap();
    security_file(ca, sizeof ca, "ca.pem");
    security_file(other_ca, sizeof other_ca, "other-ca.pem");
    security_file(client_cert, sizeof client_cert, "client.pem");
    security_file(client_key, sizeof client_key, "client.key");
    read_alice_password();

    {
        security ssl = {"ssl", {"security.protocol", "SSL", "ssl.ca.location", ca,
                                "bootstrap.servers", NULL, NULL}, NULL, NULL};
        security mtls = {"mtls", {"security.protocol", "SSL", "ssl.ca.location", ca,
                                  "ssl.certificate.location", client_cert, "ssl.key.location",
                                  client_key, "bootstrap.servers", NULL, NULL}, NULL, NULL};
        security scram = {"sasl-ssl-scram", {"security.protocol", "SASL_SSL", "ssl.ca.location", ca,
                                             "sasl.mechanism", "SCRAM-SHA-512", "sasl.username",
                                             "alice", "sasl.password", alice_password,
                                             "bootstrap.servers", NULL, NULL}, NULL, NULL};
        security oauth = {"sasl-ssl-oauthbearer", {"security.protocol", "SASL_SSL",
                                                   "ssl.ca.location", ca, "sasl.mechanism",
                                                   "OAUTHBEARER", "bootstrap.servers", NULL, NULL},
                          unsecured_token, alice};
        ssl.pairs[5] = env("LAGLESS_SSL_BOOTSTRAP");
        mtls.pairs[9] = env("LAGLESS_MTLS_BOOTSTRAP");
        scram.pairs[11] = env("LAGLESS_SASL_SSL_BOOTSTRAP");
        oauth.pairs[7] = env("LAGLESS_SASL_SSL_BOOTSTRAP");
        round_trip(&ssl, name);
        round_trip(&mtls, name);
        round_trip(&scram, name);
        round_trip(&oauth, name);
        pthread_mutex_lock(&token_lock);
        CHECK(token_calls >= 1);
        pthread_mutex_unlock(&token_lock);
    }
    {
        const char *wrong = "not-alice-s-password-42";
        const char *says[4] = {"SCRAM-SHA-512", NULL, "SASL_AUTHENTICATION_FAILED", NULL};
        security s = {"wrong-password", {"security.protocol", "SASL_SSL", "ssl.ca.location", ca,
                                         "sasl.mechanism", "SCRAM-SHA-512", "sasl.username",
                                         "alice", "sasl.password", NULL, "bootstrap.servers",
                                         NULL, NULL}, NULL, NULL};
        s.pairs[9] = wrong;
        s.pairs[11] = env("LAGLESS_SASL_SSL_BOOTSTRAP");
        says[1] = s.pairs[11];
        expect_failure(&s, name, LAGLESS_ERR_AUTHENTICATION, says, wrong);
    }
    {
        const char *says[] = {"OAUTHBEARER", "token service at idp.example is down", NULL};
        security s = {"failing-token-cb", {"security.protocol", "SASL_SSL", "ssl.ca.location", ca,
                                           "sasl.mechanism", "OAUTHBEARER", "bootstrap.servers",
                                           NULL, NULL}, failing_token, NULL};
        s.pairs[7] = env("LAGLESS_SASL_SSL_BOOTSTRAP");
        expect_failure(&s, name, LAGLESS_ERR_AUTHENTICATION, says, NULL);
    }
    {
        const char *says[] = {"TLS", "not trusted", NULL};
        security s = {"untrusted-ca", {"security.protocol", "SSL", "ssl.ca.location", other_ca,
                                       "bootstrap.servers", NULL, NULL}, NULL, NULL};
        s.pairs[5] = env("LAGLESS_SSL_BOOTSTRAP");
        expect_failure(&s, name, LAGLESS_ERR_SSL, says, NULL);
    }
    {
        const char *says[] = {"TLS", "expired on ", " UTC", NULL};
        security s = {"expired-certificate", {"security.protocol", "SSL", "ssl.ca.location", ca,
                                              "bootstrap.servers", NULL, NULL}, NULL, NULL};
        s.pairs[5] = env("LAGLESS_SSL_EXPIRED_BOOTSTRAP");
        expect_failure(&s, name, LAGLESS_ERR_SSL, says, NULL);
    }
    printf("all security tests passed\n");
    return 0;
}
