//! TLS and SASL against the security listeners of the project's harness
//! (`python3 tests/kafka_broker.py run --security -- ...`; tests/run starts its shared broker so):
//! round trips (produce, group consume, commit) over SSL, mutual TLS, SASL_PLAINTEXT and SASL_SSL
//! with every mechanism, and every failure a user can meet, each asserting the error's kind, that
//! its message names the cause, and that it shows no secret. Every record is counted.
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless::{Config, Consumer, Error, Producer, ProducerRecord, TopicPartition};
use support::unique_name;

const RUN_UNDER: &str = "run these tests under `python3 tests/kafka_broker.py run --security -- \
                         cargo test -p lagless --test security` (tests/run does)";

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: {RUN_UNDER}"))
}

fn file(name: &str) -> String {
    let path = std::path::Path::new(&env("LAGLESS_SECURITY_DIR")).join(name);
    assert!(path.exists(), "{} is missing: {RUN_UNDER}", path.display());
    path.to_string_lossy().into_owned()
}

/// Users and passwords of the SASL listeners, from the harness's security.json.
fn password(user: &str) -> String {
    let text = std::fs::read_to_string(file("security.json")).unwrap();
    // `"users": [{"name": "alice", "password": "alice-secret"}, ...]`
    let at = text
        .find(&format!("\"name\": \"{user}\""))
        .unwrap_or_else(|| panic!("no user {user} in security.json"));
    let key = "\"password\": \"";
    let start = at + text[at..].find(key).unwrap() + key.len();
    text[start..start + text[start..].find('"').unwrap()].to_string()
}

fn config(bootstrap: &str, security: &[(&str, &str)]) -> Config {
    let mut c = Config::new();
    c.set("bootstrap.servers", bootstrap).unwrap();
    c.set("client.id", "lagless-security-test").unwrap();
    for (k, v) in security {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    c
}

fn with(mut c: Config, extra: &[(&str, &str)]) -> Config {
    for (k, v) in extra {
        c.set(k, v).unwrap();
    }
    c
}

fn ssl(bootstrap_env: &str, extra: &[(&str, &str)]) -> Config {
    let ca = file("ca.pem");
    let c = config(
        &env(bootstrap_env),
        &[("security.protocol", "SSL"), ("ssl.ca.location", &ca)],
    );
    with(c, extra)
}

fn sasl(protocol: &str, mechanism: &str, user: &str, pw: &str) -> Config {
    let (bootstrap, ca) = match protocol {
        "SASL_SSL" => (env("LAGLESS_SASL_SSL_BOOTSTRAP"), Some(file("ca.pem"))),
        _ => (env("LAGLESS_SASL_PLAINTEXT_BOOTSTRAP"), None),
    };
    let mut c = config(
        &bootstrap,
        &[
            ("security.protocol", protocol),
            ("sasl.mechanism", mechanism),
            ("sasl.username", user),
            ("sasl.password", pw),
        ],
    );
    if let Some(ca) = ca {
        c.set("ssl.ca.location", &ca).unwrap();
    }
    c
}

const PARTITIONS: i32 = 3;

/// Creates a topic through `security` (the admin helper over the same listener), produces
/// `records` records, consumes them in a group with `extra` settings and commits: every offset
/// exactly once, and the committed offsets at the log end.
fn round_trip(security: &Config, records: usize, extra: &[(&str, &str)]) {
    let topic = unique_name("security");
    lagless::admin::create_topic_with_config(security, &topic, PARTITIONS, 1)
        .unwrap_or_else(|e| panic!("creating {topic}: {e}"));
    let producer = Producer::from_config(security).unwrap();
    let deliveries: Vec<_> = (0..records)
        .map(|i| {
            producer
                .send(
                    ProducerRecord::new(&topic, format!("value-{i}"))
                        .with_partition(i as i32 % PARTITIONS),
                )
                .unwrap()
        })
        .collect();
    producer.flush(Duration::from_secs(60)).unwrap();
    for d in deliveries {
        d.wait().unwrap();
    }
    producer.close(Duration::from_secs(10)).unwrap();

    let group = unique_name("security-group");
    let c = with(
        security.clone(),
        &[
            ("group.id", &group),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
        ],
    );
    let consumer = Consumer::from_config(&with(c, extra)).unwrap();
    consumer.subscribe(&[&topic], None).unwrap();
    let seen = consume(&consumer, records, Duration::from_secs(60));
    check_exactly_once(&seen, records, 0);
    consumer.commit_sync(None, None).unwrap();
    let parts: Vec<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new(&topic, p))
        .collect();
    let committed = consumer.committed(&parts, None).unwrap();
    for (tp, o) in committed {
        let expected =
            (records as i64 + PARTITIONS as i64 - 1 - tp.partition as i64) / PARTITIONS as i64;
        assert_eq!(o.map(|o| o.offset), Some(expected), "{tp:?}");
    }
    consumer.close(None).unwrap();
}

/// Polls until `records` records came (or `within` passed); any poll error fails the test.
fn consume(consumer: &Consumer, records: usize, within: Duration) -> BTreeMap<(i32, i64), usize> {
    let deadline = Instant::now() + within;
    let mut seen: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    while seen.len() < records && Instant::now() < deadline {
        for r in consumer.poll(Duration::from_millis(200)).unwrap() {
            *seen.entry((r.partition, r.offset)).or_default() += 1;
        }
    }
    seen
}

/// Offsets `from..` of every partition, `records` in all, each exactly once.
fn check_exactly_once(seen: &BTreeMap<(i32, i64), usize>, records: usize, from: i64) {
    let duplicates: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicates.is_empty(), "duplicates: {duplicates:?}");
    assert_eq!(
        seen.len(),
        records,
        "lost {} records",
        records.saturating_sub(seen.len())
    );
    for &(p, o) in seen.keys() {
        assert!(
            (0..PARTITIONS).contains(&p) && o >= from,
            "unexpected {p}/{o}"
        );
    }
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn ssl_round_trip() {
    round_trip(&ssl("LAGLESS_SSL_BOOTSTRAP", &[]), 3000, &[]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn mutual_tls_with_a_pem_certificate_and_key() {
    let (cert, key) = (file("client.pem"), file("client.key"));
    let c = ssl(
        "LAGLESS_MTLS_BOOTSTRAP",
        &[
            ("ssl.certificate.location", &cert),
            ("ssl.key.location", &key),
        ],
    );
    round_trip(&c, 600, &[]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn mutual_tls_with_an_encrypted_key() {
    let (cert, key) = (file("client-chain.pem"), file("client-encrypted.key"));
    let c = ssl(
        "LAGLESS_MTLS_BOOTSTRAP",
        &[
            ("ssl.certificate.location", &cert),
            ("ssl.key.location", &key),
            ("ssl.key.password", "client-key-secret"),
        ],
    );
    round_trip(&c, 600, &[]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn mutual_tls_with_a_pkcs12_keystore_and_java_style_keys() {
    let (p12, ca) = (file("client.p12"), file("ca.pem"));
    let c = config(
        &env("LAGLESS_MTLS_BOOTSTRAP"),
        &[
            ("security.protocol", "SSL"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", &ca),
            ("ssl.keystore.type", "PKCS12"),
            ("ssl.keystore.location", &p12),
            ("ssl.keystore.password", "client-p12-secret"),
        ],
    );
    round_trip(&c, 600, &[]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn mutual_tls_with_an_inline_pem_keystore() {
    let cert = std::fs::read_to_string(file("client.pem")).unwrap();
    let key = std::fs::read_to_string(file("client.key")).unwrap();
    let ca = std::fs::read_to_string(file("ca.pem")).unwrap();
    let c = config(
        &env("LAGLESS_MTLS_BOOTSTRAP"),
        &[
            ("security.protocol", "SSL"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.certificates", &ca),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.certificate.chain", &cert),
            ("ssl.keystore.key", &key),
        ],
    );
    round_trip(&c, 600, &[]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn sasl_plaintext_with_plain() {
    round_trip(
        &sasl("SASL_PLAINTEXT", "PLAIN", "alice", &password("alice")),
        1200,
        &[],
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn sasl_plaintext_with_scram_sha_256() {
    round_trip(
        &sasl("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", &password("bob")),
        1200,
        &[],
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn sasl_ssl_with_scram_sha_512() {
    round_trip(
        &sasl("SASL_SSL", "SCRAM-SHA-512", "alice", &password("alice")),
        1200,
        &[],
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn sasl_ssl_with_plain_from_a_jaas_config() {
    let ca = file("ca.pem");
    let jaas = format!(
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"bob\" password=\"{}\";",
        password("bob")
    );
    let c = config(
        &env("LAGLESS_SASL_SSL_BOOTSTRAP"),
        &[
            ("security.protocol", "SASL_SSL"),
            ("ssl.ca.location", &ca),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.jaas.config", &jaas),
        ],
    );
    round_trip(&c, 1200, &[]);
}

/// An unsecured (unsigned) JWS for `sub`, as the broker's default OAUTHBEARER validator accepts.
fn unsecured_token(sub: &str) -> lagless::sasl::OAuthBearerToken {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let value = format!(
        "{}.{}.",
        b64(r#"{"alg":"none"}"#),
        b64(&format!(
            r#"{{"sub":"{sub}","iat":{now},"exp":{}}}"#,
            now + 3600
        ))
    );
    lagless::sasl::OAuthBearerToken {
        value: lagless::secret::Secret::new(value),
        expires_at: std::time::SystemTime::now() + Duration::from_secs(3600),
        principal: sub.to_string(),
        extensions: Default::default(),
    }
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn sasl_ssl_with_oauthbearer_from_an_application_token_provider() {
    let ca = file("ca.pem");
    let mut c = config(
        &env("LAGLESS_SASL_SSL_BOOTSTRAP"),
        &[
            ("security.protocol", "SASL_SSL"),
            ("ssl.ca.location", &ca),
            ("sasl.mechanism", "OAUTHBEARER"),
        ],
    );
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    c.set_oauthbearer_token_provider(Arc::new(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(unsecured_token("alice"))
    }));
    round_trip(&c, 1200, &[]);
    assert!(calls.load(std::sync::atomic::Ordering::Relaxed) >= 1);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn sasl_plaintext_with_oauthbearer() {
    let mut c = config(
        &env("LAGLESS_SASL_PLAINTEXT_BOOTSTRAP"),
        &[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "OAUTHBEARER"),
        ],
    );
    c.set_oauthbearer_token_provider(Arc::new(|| Ok(unsecured_token("bob"))));
    round_trip(&c, 600, &[]);
}

/// The built-in unsecured tokens, configured librdkafka's way and Java's way.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn sasl_plaintext_with_built_in_unsecured_oauthbearer_tokens() {
    for token_config in [
        ("sasl.oauthbearer.config", "principal=carol lifeSeconds=600"),
        (
            "sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredLoginStringClaim_sub=\"carol\";",
        ),
    ] {
        let c = config(
            &env("LAGLESS_SASL_PLAINTEXT_BOOTSTRAP"),
            &[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "OAUTHBEARER"),
                token_config,
            ],
        );
        round_trip(&c, 300, &[]);
    }
}

/// `sasl.oauthbearer.method=oidc`: tokens from a token endpoint (a local one that checks the
/// client credentials and hands out tokens the broker's unsecured validator accepts).
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn sasl_ssl_with_oauthbearer_tokens_from_an_oidc_token_endpoint() {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = requests.clone();
    std::thread::spawn(move || {
        let expected = {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode("svc:oidc-secret-1")
        };
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream);
            let (mut length, mut authorized) = (0, false);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                authorized |= line.trim_end() == format!("Authorization: Basic {expected}");
            }
            let mut form = vec![0; length];
            let _ = reader.read_exact(&mut form);
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let (status, body) = if authorized {
                let token = unsecured_token("svc").value.expose().to_string();
                (
                    "200 OK",
                    format!(
                        r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":600}}"#
                    ),
                )
            } else {
                (
                    "401 Unauthorized",
                    r#"{"error":"invalid_client"}"#.to_string(),
                )
            };
            let mut stream = reader.into_inner();
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let ca = file("ca.pem");
    let c = config(
        &env("LAGLESS_SASL_SSL_BOOTSTRAP"),
        &[
            ("security.protocol", "SASL_SSL"),
            ("ssl.ca.location", &ca),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.token.endpoint.url", &url),
            ("sasl.oauthbearer.client.id", "svc"),
            ("sasl.oauthbearer.client.secret", "oidc-secret-1"),
        ],
    );
    round_trip(&c, 600, &[]);
    assert!(requests.load(std::sync::atomic::Ordering::Relaxed) >= 1);

    // A wrong client secret: an authentication error naming the endpoint, without the secret.
    let bad = with(c, &[("sasl.oauthbearer.client.secret", "wrong-secret-2")]);
    assert_auth_error(
        &bad,
        &["OAUTHBEARER", "401", "invalid_client"],
        &["wrong-secret-2"],
    );
}

/// KIP-333 recovery streams over SASL_SSL: a member that takes over partitions with a backlog
/// drains it on recovery-stream connections (their own lane, authenticated like the others).
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn recovery_streams_over_sasl_ssl() {
    let security = sasl("SASL_SSL", "SCRAM-SHA-256", "alice", &password("alice"));
    let topic = unique_name("security-recovery");
    lagless::admin::create_topic_with_config(&security, &topic, PARTITIONS, 1).unwrap();
    let producer = Producer::from_config(&security).unwrap();
    let produce = |from: usize, to: usize| {
        for i in from..to {
            producer
                .send(
                    ProducerRecord::new(&topic, format!("value-{i}"))
                        .with_partition(i as i32 % PARTITIONS),
                )
                .unwrap();
        }
        producer.flush(Duration::from_secs(60)).unwrap();
    };
    // 300 records, committed; then 3000 more: a backlog of 1000 per partition.
    produce(0, 300);
    let group = unique_name("security-recovery-group");
    let member = |extra: &[(&str, &str)]| {
        let c = with(
            security.clone(),
            &[
                ("group.id", &group),
                ("auto.offset.reset", "earliest"),
                ("enable.auto.commit", "false"),
            ],
        );
        let c = Consumer::from_config(&with(c, extra)).unwrap();
        c.subscribe(&[&topic], None).unwrap();
        c
    };
    let first = member(&[]);
    let seen = consume(&first, 300, Duration::from_secs(60));
    check_exactly_once(&seen, 300, 0);
    first.commit_sync(None, None).unwrap();
    first.close(None).unwrap();
    produce(300, 3300);

    let second = member(&[
        ("enable.parallel.rebalance", "true"),
        ("parallel.rebalance.min.lag", "10"),
    ]);
    let seen = consume(&second, 3000, Duration::from_secs(90));
    check_exactly_once(&seen, 3000, 100);
    second.close(None).unwrap();
    producer.close(Duration::from_secs(10)).unwrap();
}

/// The first poll error of a group consumer made from `c`, within `within`.
fn consumer_error(c: &Config, within: Duration) -> (Error, Duration) {
    let c = with(c.clone(), &[("group.id", &unique_name("security-error"))]);
    let started = Instant::now();
    let consumer = match Consumer::from_config(&c) {
        Ok(consumer) => consumer,
        Err(e) => return (e, started.elapsed()),
    };
    consumer
        .subscribe(&["lagless-security-error"], None)
        .unwrap();
    while started.elapsed() < within {
        if let Err(e) = consumer.poll(Duration::from_millis(100)) {
            return (e, started.elapsed());
        }
    }
    panic!("no error within {within:?}");
}

/// The error is an authentication error (fatal, not retried) whose message names every part of
/// `names` and none of `secrets`, and it came fast.
fn assert_auth_error(c: &Config, names: &[&str], secrets: &[&str]) {
    assert_fatal_error(c, "AUTHENTICATION", names, secrets);
}

/// The same for a TLS error: a certificate check or a TLS/plaintext mismatch.
fn assert_tls_error(c: &Config, names: &[&str]) {
    assert_fatal_error(c, "SSL", names, &[]);
}

fn assert_fatal_error(c: &Config, kind: &str, names: &[&str], secrets: &[&str]) {
    let (e, took) = consumer_error(c, Duration::from_secs(30));
    let m = e.to_string();
    assert_eq!(e.name(), kind, "{m}");
    assert!(e.is_fatal() && !e.is_retriable(), "{m}");
    for n in names {
        assert!(m.contains(n), "`{n}` not in: {m}");
    }
    for s in secrets {
        assert!(!m.contains(s), "secret in: {m}");
        assert!(!format!("{e:?}").contains(s), "secret in: {e:?}");
    }
    // librdkafka reports these within about a second; allow for a loaded machine.
    assert!(took < Duration::from_secs(10), "took {took:?}: {m}");
    println!("{took:?}: {m}");
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_wrong_password_is_an_authentication_error_naming_mechanism_and_broker() {
    let broker = env("LAGLESS_SASL_SSL_BOOTSTRAP");
    let c = sasl(
        "SASL_SSL",
        "SCRAM-SHA-512",
        "alice",
        "not-alice-s-password-42",
    );
    assert_auth_error(
        &c,
        &["SCRAM-SHA-512", &broker, "SASL_AUTHENTICATION_FAILED"],
        &["not-alice-s-password-42"],
    );
    // A consumer without a group (assigned partitions) reports it from poll as well.
    let assigned = Consumer::from_config(&c).unwrap();
    // Its error callback hears of the refusal too, once (the whole cluster refuses).
    let heard: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>> = Default::default();
    let sink = heard.clone();
    assigned.set_error_callback(Some(Box::new(move |e: &lagless::Error| {
        sink.lock()
            .unwrap()
            .push((e.name().to_string(), e.to_string()));
        Ok(())
    })));
    assigned
        .assign(&[TopicPartition::new("lagless-security-error", 0)])
        .unwrap();
    let started = Instant::now();
    let e = loop {
        match assigned.poll(Duration::from_millis(100)) {
            Err(e) => break e,
            Ok(_) => assert!(
                started.elapsed() < Duration::from_secs(30),
                "no error from poll"
            ),
        }
    };
    assert_eq!(e.name(), "AUTHENTICATION", "{e}");
    println!("assigned consumer: {:?}: {e}", started.elapsed());
    // What was raised after the last call's callbacks ran reaches the next call's.
    let _ = assigned.poll(Duration::from_millis(10));
    let heard = heard.lock().unwrap().clone();
    let refused: Vec<_> = heard
        .iter()
        .filter(|(k, _)| k == "AUTHENTICATION")
        .collect();
    assert_eq!(refused.len(), 1, "{heard:?}");
    assert!(refused[0].1.contains("SCRAM-SHA-512"), "{heard:?}");
    assert!(
        !heard
            .iter()
            .any(|(_, m)| m.contains("not-alice-s-password-42")),
        "secret in: {heard:?}"
    );
    // The producer reports it too, from send's delivery.
    let producer = Producer::from_config(&c).unwrap();
    let started = Instant::now();
    let e = producer
        .send(ProducerRecord::new("lagless-security-error", "v"))
        .and_then(|d| d.wait())
        .unwrap_err();
    assert_eq!(e.name(), "AUTHENTICATION", "{e}");
    assert!(!e.to_string().contains("not-alice-s-password-42"), "{e}");
    println!("producer: {:?}: {e}", started.elapsed());
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn an_unknown_user_is_an_authentication_error() {
    let broker = env("LAGLESS_SASL_PLAINTEXT_BOOTSTRAP");
    let c = sasl("SASL_PLAINTEXT", "PLAIN", "mallory", "mallory-secret-7");
    assert_auth_error(&c, &["PLAIN", &broker], &["mallory-secret-7"]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn an_untrusted_broker_certificate_is_reported_as_such() {
    let other = file("other-ca.pem");
    let c = ssl("LAGLESS_SSL_BOOTSTRAP", &[("ssl.ca.location", &other)]);
    assert_tls_error(&c, &["TLS", "not trusted", &env("LAGLESS_SSL_BOOTSTRAP")]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_hostname_mismatch_is_reported_as_such_and_can_be_allowed() {
    let c = ssl("LAGLESS_SSL_WRONGHOST_BOOTSTRAP", &[]);
    assert_tls_error(&c, &["TLS", "hostname mismatch", "wrong.example"]);
    let c = ssl(
        "LAGLESS_SSL_WRONGHOST_BOOTSTRAP",
        &[("ssl.endpoint.identification.algorithm", "none")],
    );
    round_trip(&c, 300, &[]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn an_expired_broker_certificate_is_reported_as_such() {
    let c = ssl("LAGLESS_SSL_EXPIRED_BOOTSTRAP", &[]);
    // When, as a date: the harness's certificate ended a day ago.
    let (e, _) = consumer_error(&c, Duration::from_secs(30));
    // (Either of two dates, in case midnight passed since the harness made the certificate.)
    let m = e.to_string();
    let dates: Vec<String> = [1, 2]
        .map(|back| {
            let d = time::OffsetDateTime::now_utc()
                - time::Duration::days(1)
                - time::Duration::hours(back - 1);
            format!(
                "expired on {:04}-{:02}-{:02} ",
                d.year(),
                u8::from(d.month()),
                d.day()
            )
        })
        .into();
    assert!(
        dates.iter().any(|d| m.contains(d)) && m.contains(" UTC (it is now "),
        "{dates:?} not in: {m}"
    );
    assert_tls_error(&c, &["TLS", "expired"]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn mutual_tls_without_a_client_certificate_says_one_is_required() {
    let c = ssl("LAGLESS_MTLS_BOOTSTRAP", &[]);
    assert_tls_error(&c, &["TLS", "requires a client certificate"]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_jks_truststore_is_refused_with_how_to_convert_it() {
    let c = config(
        &env("LAGLESS_SSL_BOOTSTRAP"),
        &[
            ("security.protocol", "SSL"),
            ("ssl.truststore.location", &file("ca-truststore.jks")),
        ],
    );
    let e = Consumer::from_config(&c).err().expect("an error");
    assert!(
        matches!(&e, Error::Config { key, .. } if key == "ssl.truststore.location"),
        "{e}"
    );
    assert!(e.to_string().contains("keytool -importkeystore"), "{e}");
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_plaintext_client_on_a_tls_listener_says_the_protocol_mismatches() {
    let c = config(&env("LAGLESS_SSL_BOOTSTRAP"), &[]);
    assert_tls_error(&c, &["security.protocol", "mismatch"]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_tls_client_on_a_plaintext_listener_says_the_protocol_mismatches() {
    let ca = file("ca.pem");
    let text = std::fs::read_to_string(file("security.json")).unwrap();
    let key = "\"plaintext_bootstrap\": \"";
    let start = text
        .find(key)
        .expect("plaintext_bootstrap in security.json")
        + key.len();
    let plaintext = &text[start..start + text[start..].find('"').unwrap()];
    let c = config(
        plaintext,
        &[("security.protocol", "SSL"), ("ssl.ca.location", &ca)],
    );
    assert_tls_error(&c, &["security.protocol", "mismatch"]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_client_without_sasl_on_a_sasl_listener_says_the_protocol_mismatches() {
    let c = config(&env("LAGLESS_SASL_PLAINTEXT_BOOTSTRAP"), &[]);
    assert_auth_error(&c, &["security.protocol", "mismatch", "SASL"], &[]);
    let c = ssl("LAGLESS_SASL_SSL_BOOTSTRAP", &[]);
    assert_auth_error(&c, &["security.protocol", "mismatch", "SASL"], &[]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_sasl_client_on_a_tls_listener_says_the_protocol_mismatches() {
    let ca = file("ca.pem");
    let c = config(
        &env("LAGLESS_SSL_BOOTSTRAP"),
        &[
            ("security.protocol", "SASL_SSL"),
            ("ssl.ca.location", &ca),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "alice-secret-x"),
        ],
    );
    assert_auth_error(&c, &["security.protocol", "mismatch"], &["alice-secret-x"]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn files_that_do_not_open_fail_at_creation_naming_the_key() {
    let c = ssl(
        "LAGLESS_SSL_BOOTSTRAP",
        &[("ssl.ca.location", "/nonexistent/ca.pem")],
    );
    let e = Consumer::from_config(&c).err().expect("an error");
    assert!(
        matches!(&e, Error::Config { key, .. } if key == "ssl.ca.location"),
        "{e}"
    );
    let (cert, key) = (file("client.pem"), file("client-encrypted.key"));
    let c = ssl(
        "LAGLESS_MTLS_BOOTSTRAP",
        &[
            ("ssl.certificate.location", &cert),
            ("ssl.key.location", &key),
            ("ssl.key.password", "wrong-key-password-9"),
        ],
    );
    let e = Producer::from_config(&c).err().expect("an error");
    assert!(
        matches!(&e, Error::Config { key, .. } if key == "ssl.key.password"),
        "{e}"
    );
    assert!(!e.to_string().contains("wrong-key-password-9"), "{e}");
    let c = config(
        &env("LAGLESS_MTLS_BOOTSTRAP"),
        &[
            ("security.protocol", "SSL"),
            ("ssl.keystore.location", &file("client.p12")),
            ("ssl.keystore.password", "wrong-p12-password-9"),
        ],
    );
    let e = Producer::from_config(&c).err().expect("an error");
    assert!(
        matches!(&e, Error::Config { key, .. } if key == "ssl.keystore.location"),
        "{e}"
    );
    assert!(e.to_string().contains("password is wrong"), "{e}");
    assert!(!e.to_string().contains("wrong-p12-password-9"), "{e}");
}

/// Collects the messages of lagless's log events, to count re-authentications.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Events {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Visit(String);
        impl tracing::field::Visit for Visit {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={value:?}", field.name()));
            }
        }
        let mut v = Visit(String::new());
        event.record(&mut v);
        self.0.lock().unwrap().push(v.0);
    }
}

/// A `--security` broker of this test's own with `connections.max.reauth.ms` set; stopped on
/// drop. Returns its `LAGLESS_*` variables.
struct ReauthBroker {
    dir: std::path::PathBuf,
    vars: BTreeMap<String, String>,
}

impl ReauthBroker {
    fn start(reauth_ms: u64) -> ReauthBroker {
        let harness =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/kafka_broker.py");
        let dir = std::env::temp_dir().join(format!("lagless-reauth-{}", std::process::id()));
        let out = std::process::Command::new("python3")
            .arg(&harness)
            .args([
                "start",
                "--security",
                "--reauth-ms",
                &reauth_ms.to_string(),
                "--dir",
            ])
            .arg(&dir)
            .output()
            .expect("python3 runs the broker harness");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "broker did not start: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let vars = stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ReauthBroker { dir, vars }
    }
}

impl Drop for ReauthBroker {
    fn drop(&mut self) {
        let harness =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/kafka_broker.py");
        let _ = std::process::Command::new("python3")
            .arg(harness)
            .args(["stop", "--dir"])
            .arg(&self.dir)
            .output();
    }
}

/// KIP-368: with sessions of 3 s, a producer and a group consumer run 12 s over SASL_SSL through
/// several re-authentications on their live connections: no error, no connection the broker had
/// to close, every record once.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn sessions_are_renewed_on_live_connections_without_a_gap() {
    // Global: lagless logs from its I/O threads. Only this test reads the events.
    let events = Events::default();
    tracing::subscriber::set_global_default(tracing_subscriber::layer::SubscriberExt::with(
        tracing_subscriber::registry(),
        events.clone(),
    ))
    .expect("no other test sets a global subscriber");
    let broker = ReauthBroker::start(3000);
    let bootstrap = broker.vars["LAGLESS_SASL_SSL_BOOTSTRAP"].clone();
    let ca = format!("{}/ca.pem", broker.vars["LAGLESS_SECURITY_DIR"]);
    let security = config(
        &bootstrap,
        &[
            ("security.protocol", "SASL_SSL"),
            ("ssl.ca.location", &ca),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "alice-secret"),
        ],
    );
    let topic = unique_name("security-reauth");
    lagless::admin::create_topic_with_config(&security, &topic, PARTITIONS, 1).unwrap();
    let group = unique_name("security-reauth-group");
    let consumer = Consumer::from_config(&with(
        security.clone(),
        &[
            ("group.id", &group),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
            ("fetch.max.wait.ms", "100"),
        ],
    ))
    .unwrap();
    consumer.subscribe(&[&topic], None).unwrap();
    let producer = Producer::from_config(&security).unwrap();

    let run_for = Duration::from_secs(12);
    let started = Instant::now();
    let mut sent = 0usize;
    let mut seen: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    let mut last_record = Instant::now();
    let mut longest_gap = Duration::ZERO;
    while started.elapsed() < run_for {
        for _ in 0..20 {
            producer
                .send(
                    ProducerRecord::new(&topic, format!("v{sent}"))
                        .with_partition(sent as i32 % PARTITIONS),
                )
                .unwrap();
            sent += 1;
        }
        let records = consumer.poll(Duration::from_millis(50)).unwrap();
        if !records.is_empty() {
            if !seen.is_empty() {
                longest_gap = longest_gap.max(last_record.elapsed());
            }
            last_record = Instant::now();
        }
        for r in records {
            *seen.entry((r.partition, r.offset)).or_default() += 1;
        }
        if seen.len() % 200 < 20 {
            consumer.commit_sync(None, None).unwrap();
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < sent && Instant::now() < deadline {
        for r in consumer.poll(Duration::from_millis(100)).unwrap() {
            *seen.entry((r.partition, r.offset)).or_default() += 1;
        }
    }
    check_exactly_once(&seen, sent, 0);
    consumer.commit_sync(None, None).unwrap();
    consumer.close(None).unwrap();
    producer.close(Duration::from_secs(10)).unwrap();

    // No password or key at any level, in any event of any test that ran meanwhile.
    for event in events.0.lock().unwrap().iter() {
        for secret in [
            "alice-secret",
            "bob-secret",
            "client-key-secret",
            "client-p12-secret",
            "not-alice-s-password-42",
            "mallory-secret-7",
        ] {
            assert!(!event.contains(secret), "a secret in a log event: {event}");
        }
    }
    // Other tests of this binary run meanwhile (and log their own lost connections): only this
    // broker's and this topic's events count.
    let log: Vec<String> = events
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(&bootstrap) || l.contains(&topic))
        .cloned()
        .collect();
    let renewed = log
        .iter()
        .filter(|l| l.contains("re-authenticated"))
        .count();
    let failed: Vec<_> = log
        .iter()
        .filter(|l| l.contains("re-authentication failed") || l.contains("connection lost"))
        .collect();
    println!("{sent} records, {renewed} re-authentications, longest gap {longest_gap:?}");
    assert!(failed.is_empty(), "{failed:#?}");
    // Every connection renews about every 2.5-2.9 s; a producer and a consumer hold several.
    assert!(
        renewed >= 4,
        "only {renewed} re-authentications in {run_for:?}"
    );
    assert!(
        longest_gap < Duration::from_secs(2),
        "a gap of {longest_gap:?}"
    );
}
