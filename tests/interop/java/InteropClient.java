// The Java side of the interoperability tests: a producer and a consumer built on the official
// Kafka client, printing the same JSON lines as lagless' `lagless_tool` example.
//
// Compile and run against the jars `python3 tests/kafka_broker.py fetch` prints:
//
//   javac -cp 'LIB/*' -d OUT tests/interop/java/InteropClient.java
//   java -cp 'OUT:LIB/*' InteropClient produce --bootstrap B --topic T --count N
//        [--keyed] [--key-prefix P] [--binary] [--compression C] [--acks A] [--quiet]
//        [--transaction-size S [--abort-every K] [--transactional-id ID] [--hold-open H]]
//        [--partitions P] [--stay-ms M]
//   java -cp 'OUT:LIB/*' InteropClient consume --bootstrap B (--topic T | --regex R) [--group G]
//        [--assign-all] [--count N] [--timeout-ms MS] [--strategy range|cooperative-sticky|CLASS|LIST]
//        [--session-timeout-ms X] [--max-poll-interval-ms Y] [--commit [--commit-idle-ms MS]]
//        [--hex] [--trace] [--seek-on-truncation]
//   java -cp 'OUT:LIB/*' InteropClient transform --bootstrap B --topic IN --output OUT --group G
//        --transactional-id ID [--strategy S] [--session-timeout-ms X] [--poll-delay-ms D]
//
// Both take --config KEY=VALUE (repeatable): a client property set after the defaults above, so
// it can also override them (e.g. security.protocol, sasl.mechanism, sasl.jaas.config,
// ssl.truststore.type=PEM and ssl.truststore.location for a SASL_SSL listener).
//
// produce: record i (0 <= i < N) has key "<prefix><i>" (prefix "key-", only with --keyed), value
// "value-<i>" and header h = "<i>"; --binary appends the bytes of binaryTail(i) to the value and
// adds a header "bin" with those bytes, so a reader's byte-for-byte copy can be checked. Prints
// {"partition":p,"offset":o,"key":"...","aborted":false} per record, in send order (or only the
// summary with --quiet). With --transaction-size S the records go in transactions of S records,
// and with --abort-every K every K-th transaction is aborted ("aborted":true on its records).
// --partitions P sends record i to partition i % P (otherwise the partitioner chooses), so that
// every transaction spans the partitions. --hold-open H (with --transaction-size), after the N
// records: one more transaction of H records ("open":true on their lines) is left open, its
// records flushed, and {"event":"holding"} printed; on SIGTERM it is aborted, {"event":"aborted"}
// printed and the process exits (a reader meanwhile sees the last stable offset stop at the
// transaction's first records). --stay-ms M keeps the producer open M ms after the N records
// (its background work, the client telemetry pushes among it, goes on).
//
// consume: as lagless_tool consume (see core/examples/lagless_tool.rs): with --group it subscribes
// and its ConsumerRebalanceListener prints {"event":"assigned"|"revoked"|"lost","partitions":[...],
// "assignment":[...],"generation":g,"ts_us":t} (t: wall-clock microseconds); otherwise it
// assigns every partition from the beginning. --regex R (with --group, instead of --topic)
// subscribes with subscribe(SubscriptionPattern): the group coordinator matches R (RE2/J) against
// whole topic names (KIP-848; needs --config group.protocol=consumer); record lines then start
// with "topic":t and the done line's positions are keyed "t:p".
// One line per record; stops after --count records, after --timeout-ms without records, or on
// SIGTERM (then closes the consumer, leaving the group), and prints {"event":"done",...}.
// Without --count and --timeout-ms it runs until SIGTERM.
// --commit: commitSync of the batch's next offsets after each poll that returned records; with
// --commit-idle-ms MS also, after MS without records, of the positions reached in the partitions
// it owns (so that a member reading nothing still tries to commit).
// --trace, for the fault scenarios of core/tests (network_partitions.rs, log_truncation.rs),
// which take its lines as what the member did and when: every record line carries "ts_us" (when
// the poll that returned it ended), every commit is printed as {"event":"commit","offsets":
// [[p,o],...],"start_us":s,"end_us":e,"error":null|"Class: message","in":"loop"|"revoked"}, and a
// poll that throws prints {"event":"error","error":"Class","message":"...","ts_us":t}.
// --seek-on-truncation: a LogTruncationException from poll is printed as {"event":"truncation",
// "divergent":[[p,o],...],"positions":[[p,o],...],"ts_us":t} and the consumer seeks each
// partition to its divergent offset (to its fetch position where the broker knew none) and reads
// on, as an application that handles KIP-320's error does; without it the exception ends the run.
// Timeouts (request.timeout.ms, default.api.timeout.ms) and the other settings come with --config.
//
// transform: as lagless_tool transform (see core/examples/lagless_tool.rs): the exactly-once
// consume-transform-produce loop of the Java client's documentation, one transaction per poll
// carrying the polled offsets (sendOffsetsToTransaction with consumer.groupMetadata()), each input
// record written to OUT keyed "<partition>-<offset>"; an abortable failure aborts and seeks the
// transaction's partitions still owned back to their committed offsets. Prints
// {"event":"open","records":n} once a transaction's records are flushed (with --poll-delay-ms),
// {"event":"committed","records":n} / {"event":"aborted","why":"..."} and runs until SIGTERM.
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class InteropClient {
    private static final PrintStream OUT =
            new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            usage("a command is required");
        }
        Map<String, String> a = parseArgs(argv);
        int rc;
        switch (argv[0]) {
            case "produce": rc = produce(a); break;
            case "consume": rc = consume(a); break;
            case "transform": rc = transform(a); break;
            default: usage("unknown command " + argv[0]); rc = 2;
        }
        OUT.flush();
        System.exit(rc);
    }

    private static void usage(String why) {
        System.err.println("InteropClient: " + why);
        System.err.println("usage: InteropClient produce|consume --bootstrap B --topic T [options] "
                + "(see the header of InteropClient.java)");
        System.exit(2);
    }

    private static final Set<String> FLAGS = Set.of(
            "--keyed", "--binary", "--quiet", "--assign-all", "--commit", "--hex", "--trace",
            "--seek-on-truncation");

    /** The --config KEY=VALUE settings, in command-line order. */
    private static final List<String[]> CONFIG = new ArrayList<>();

    private static Map<String, String> parseArgs(String[] argv) {
        Map<String, String> a = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            String k = argv[i];
            if (FLAGS.contains(k)) {
                a.put(k, "true");
            } else if (k.equals("--config") && i + 1 < argv.length) {
                String kv = argv[++i];
                int eq = kv.indexOf('=');
                if (eq <= 0) {
                    usage("--config takes KEY=VALUE, got " + kv);
                }
                CONFIG.add(new String[] {kv.substring(0, eq), kv.substring(eq + 1)});
            } else if (k.startsWith("--") && i + 1 < argv.length) {
                a.put(k, argv[++i]);
            } else {
                usage("bad argument " + k);
            }
        }
        if (!a.containsKey("--bootstrap") || !(a.containsKey("--topic") || a.containsKey("--regex"))) {
            usage("--bootstrap and --topic (or, to consume, --regex) are required");
        }
        if (a.containsKey("--regex") && (!a.containsKey("--group") || a.containsKey("--assign-all"))) {
            usage("--regex needs --group (a subscription) and no --assign-all");
        }
        return a;
    }

    /** The user's --config settings on top of the client's own. */
    private static void applyConfig(Properties p) {
        for (String[] kv : CONFIG) {
            p.put(kv[0], kv[1]);
        }
    }

    /** The bytes --binary appends to record i's value: every byte value, some invalid UTF-8. */
    static byte[] binaryTail(long i) {
        byte[] b = new byte[8];
        b[0] = 0;
        b[1] = (byte) 0xff;
        b[2] = (byte) 0xfe;
        b[3] = (byte) 0x80;
        b[4] = (byte) (i >>> 24);
        b[5] = (byte) (i >>> 16);
        b[6] = (byte) (i >>> 8);
        b[7] = (byte) i;
        return b;
    }

    // ---------------------------------------------------------------------------------------------
    // JSON output

    static String jsonStr(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    static String jsonBytes(byte[] v, boolean hex) {
        if (v == null) {
            return "null";
        }
        if (!hex) {
            return jsonStr(new String(v, StandardCharsets.UTF_8));
        }
        StringBuilder b = new StringBuilder(2 * v.length + 2).append('"');
        for (byte x : v) {
            b.append(String.format("%02x", x & 0xff));
        }
        return b.append('"').toString();
    }

    static String jsonPartitions(Collection<TopicPartition> parts) {
        List<TopicPartition> sorted = new ArrayList<>(parts);
        sorted.sort((x, y) -> x.topic().equals(y.topic())
                ? Integer.compare(x.partition(), y.partition()) : x.topic().compareTo(y.topic()));
        StringBuilder b = new StringBuilder("[");
        for (TopicPartition tp : sorted) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append('[').append(jsonStr(tp.topic())).append(',').append(tp.partition()).append(']');
        }
        return b.append(']').toString();
    }

    static synchronized void emit(String line) {
        OUT.println(line);
        OUT.flush();
    }

    /** Wall-clock microseconds since the epoch: the "ts_us" of the lines. */
    static long nowUs() {
        return java.time.temporal.ChronoUnit.MICROS.between(java.time.Instant.EPOCH, java.time.Instant.now());
    }

    /** [[partition, offset], ...] in partition order (the consumers read one topic). */
    static String jsonOffsets(Map<TopicPartition, ? extends Object> offsets) {
        TreeMap<Integer, Long> sorted = new TreeMap<>();
        for (Map.Entry<TopicPartition, ? extends Object> e : offsets.entrySet()) {
            Object v = e.getValue();
            sorted.put(e.getKey().partition(),
                    v instanceof OffsetAndMetadata ? ((OffsetAndMetadata) v).offset() : (Long) v);
        }
        StringBuilder b = new StringBuilder("[");
        for (Map.Entry<Integer, Long> e : sorted.entrySet()) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append('[').append(e.getKey()).append(',').append(e.getValue()).append(']');
        }
        return b.append(']').toString();
    }

    static String errorText(Throwable e) {
        return e.getClass().getSimpleName() + ": " + e.getMessage();
    }

    /** commitSync(offsets); with --trace printed as a commit event, failed or not. */
    static void commitTraced(KafkaConsumer<byte[], byte[]> consumer,
                             Map<TopicPartition, OffsetAndMetadata> offsets, boolean trace, String in) {
        long start = nowUs();
        String error = null;
        try {
            consumer.commitSync(offsets);
        } catch (RuntimeException e) {
            error = errorText(e);
            System.err.println("InteropClient: commit (" + in + ") failed: " + e);
        }
        if (trace) {
            emit("{\"event\":\"commit\",\"offsets\":" + jsonOffsets(offsets) + ",\"start_us\":" + start
                    + ",\"end_us\":" + nowUs() + ",\"error\":" + (error == null ? "null" : jsonStr(error))
                    + ",\"in\":\"" + in + "\"}");
        }
    }

    // ---------------------------------------------------------------------------------------------
    // transform

    static int transform(Map<String, String> a) throws Exception {
        String input = a.get("--topic"), output = a.get("--output");
        if (output == null || !a.containsKey("--group") || !a.containsKey("--transactional-id")) {
            usage("transform needs --output, --group and --transactional-id");
        }
        long delayMs = Long.parseLong(a.getOrDefault("--poll-delay-ms", "0"));
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("--bootstrap"));
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, "interop-java-transform");
        c.put(ConsumerConfig.GROUP_ID_CONFIG, a.get("--group"));
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (a.containsKey("--strategy")) {
            c.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, strategyClasses(a.get("--strategy")));
        }
        if (a.containsKey("--session-timeout-ms")) {
            c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, a.get("--session-timeout-ms"));
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("--bootstrap"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "interop-java-transform");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.get("--transactional-id"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        for (String[] kv : CONFIG) {
            c.put(kv[0], kv[1]); // to the consumer, as lagless_tool transform does
        }
        AtomicBoolean stop = new AtomicBoolean();
        long committedRecords = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            Thread main = Thread.currentThread();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                stop.set(true);
                consumer.wakeup();
                try {
                    main.join(30_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }));
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    break;
                }
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                try {
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        byte[] key = (r.partition() + "-" + r.offset()).getBytes(StandardCharsets.UTF_8);
                        producer.send(new ProducerRecord<>(output, null, key, r.value(), r.headers()));
                        next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    if (delayMs > 0) {
                        producer.flush();
                        emit("{\"event\":\"open\",\"records\":" + records.count() + "}");
                        Thread.sleep(delayMs);
                    }
                    producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                    producer.commitTransaction();
                    committedRecords += records.count();
                    emit("{\"event\":\"committed\",\"records\":" + records.count() + "}");
                } catch (org.apache.kafka.common.errors.ProducerFencedException
                         | org.apache.kafka.common.errors.OutOfOrderSequenceException
                         | org.apache.kafka.common.errors.AuthorizationException e) {
                    throw e; // fatal: the documentation's loop closes the producer
                } catch (org.apache.kafka.common.KafkaException e) {
                    emit("{\"event\":\"aborted\",\"why\":" + jsonStr(errorText(e)) + "}");
                    producer.abortTransaction();
                    Set<TopicPartition> owned = consumer.assignment();
                    Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(next.keySet());
                    for (TopicPartition tp : next.keySet()) {
                        if (owned.contains(tp)) {
                            OffsetAndMetadata o = committed.get(tp);
                            consumer.seek(tp, o == null ? 0 : o.offset());
                        }
                    }
                }
            }
        }
        emit("{\"event\":\"done\",\"records\":" + committedRecords + ",\"reason\":\"signal\"}");
        return 0;
    }

    // ---------------------------------------------------------------------------------------------
    // produce

    static int produce(Map<String, String> a) throws Exception {
        String topic = a.get("--topic");
        long count = Long.parseLong(a.getOrDefault("--count", "0"));
        boolean keyed = a.containsKey("--keyed");
        boolean binary = a.containsKey("--binary");
        boolean quiet = a.containsKey("--quiet");
        String prefix = a.getOrDefault("--key-prefix", "key-");
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("--bootstrap"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "interop-java-producer");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a.getOrDefault("--compression", "none"));
        p.put(ProducerConfig.ACKS_CONFIG, a.getOrDefault("--acks", "all"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        // --transaction-size S: records go in transactions of S records (transactional.id from
        // --transactional-id); with --abort-every K, every K-th transaction is aborted.
        long txSize = Long.parseLong(a.getOrDefault("--transaction-size", "0"));
        long abortEvery = Long.parseLong(a.getOrDefault("--abort-every", "0"));
        int partitions = Integer.parseInt(a.getOrDefault("--partitions", "0"));
        long holdOpen = txSize > 0 ? Long.parseLong(a.getOrDefault("--hold-open", "0")) : 0;
        if (txSize > 0) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG,
                    a.getOrDefault("--transactional-id", "interop-" + topic));
        }
        applyConfig(p);
        Map<Integer, Long> perPartition = new TreeMap<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            Deque<Object[]> pending = new ArrayDeque<>();
            if (txSize > 0) {
                producer.initTransactions();
            }
            for (long i = 0; i < count; i++) {
                long tx = txSize > 0 ? i / txSize : 0;
                boolean abort = txSize > 0 && abortEvery > 0 && tx % abortEvery == abortEvery - 1;
                if (txSize > 0 && i % txSize == 0) {
                    producer.beginTransaction();
                }
                byte[] value = ("value-" + i).getBytes(StandardCharsets.UTF_8);
                String key = keyed ? prefix + i : null;
                ProducerRecord<byte[], byte[]> rec;
                if (binary) {
                    byte[] tail = binaryTail(i);
                    byte[] v = new byte[value.length + tail.length];
                    System.arraycopy(value, 0, v, 0, value.length);
                    System.arraycopy(tail, 0, v, value.length, tail.length);
                    value = v;
                }
                rec = new ProducerRecord<>(topic, partitions > 0 ? (int) (i % partitions) : null,
                        key == null ? null : key.getBytes(StandardCharsets.UTF_8), value);
                rec.headers().add("h", Long.toString(i).getBytes(StandardCharsets.UTF_8));
                if (binary) {
                    rec.headers().add("bin", binaryTail(i));
                }
                pending.addLast(new Object[] {key, producer.send(rec), abort});
                while (pending.size() > 10_000) {
                    settle(pending.removeFirst(), perPartition, quiet);
                }
                if (txSize > 0 && (i % txSize == txSize - 1 || i == count - 1)) {
                    producer.flush();
                    while (!pending.isEmpty()) {
                        settle(pending.removeFirst(), perPartition, quiet);
                    }
                    if (abort) {
                        producer.abortTransaction();
                    } else {
                        producer.commitTransaction();
                    }
                }
            }
            producer.flush();
            while (!pending.isEmpty()) {
                settle(pending.removeFirst(), perPartition, quiet);
            }
            // --stay-ms M: the producer stays open M ms more (its background work, the client
            // telemetry pushes among it, goes on).
            Thread.sleep(Long.parseLong(a.getOrDefault("--stay-ms", "0")));
            if (holdOpen > 0) {
                holdOpen(producer, topic, count, holdOpen, partitions, keyed ? prefix : null);
            }
        }
        StringBuilder parts = new StringBuilder();
        for (Map.Entry<Integer, Long> e : perPartition.entrySet()) {
            if (parts.length() > 0) {
                parts.append(',');
            }
            parts.append('"').append(e.getKey()).append("\":").append(e.getValue());
        }
        emit("{\"event\":\"produced\",\"count\":" + count + ",\"partitions\":{" + parts + "}}");
        return 0;
    }

    /**
     * --hold-open: records count..count+n-1 in a transaction left open until SIGTERM, then
     * aborted. Each record's line carries "open":true.
     */
    private static void holdOpen(KafkaProducer<byte[], byte[]> producer, String topic, long count,
            long n, int partitions, String prefix) throws Exception {
        AtomicBoolean stopping = new AtomicBoolean(false);
        CountDownLatch finished = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            try {
                finished.await();
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        try {
            producer.beginTransaction();
            List<Object[]> sent = new ArrayList<>();
            for (long i = count; i < count + n; i++) {
                String key = prefix == null ? null : prefix + i;
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic,
                        partitions > 0 ? (int) (i % partitions) : null,
                        key == null ? null : key.getBytes(StandardCharsets.UTF_8),
                        ("value-" + i).getBytes(StandardCharsets.UTF_8));
                sent.add(new Object[] {key, producer.send(rec)});
            }
            producer.flush();
            for (Object[] e : sent) {
                @SuppressWarnings("unchecked")
                RecordMetadata md = ((Future<RecordMetadata>) e[1]).get();
                String key = (String) e[0];
                emit("{\"partition\":" + md.partition() + ",\"offset\":" + md.offset()
                        + ",\"key\":" + (key == null ? "null" : jsonStr(key))
                        + ",\"aborted\":true,\"open\":true}");
            }
            emit("{\"event\":\"holding\"}");
            OUT.flush();
            while (!stopping.get()) {
                Thread.sleep(20);
            }
            producer.abortTransaction();
            emit("{\"event\":\"aborted\"}");
        } finally {
            finished.countDown();
        }
    }

    @SuppressWarnings("unchecked")
    private static void settle(Object[] entry, Map<Integer, Long> perPartition, boolean quiet)
            throws Exception {
        String key = (String) entry[0];
        RecordMetadata md = ((Future<RecordMetadata>) entry[1]).get();
        perPartition.merge(md.partition(), 1L, Long::sum);
        if (!quiet) {
            emit("{\"partition\":" + md.partition() + ",\"offset\":" + md.offset() + ",\"key\":"
                    + (key == null ? "null" : jsonStr(key)) + ",\"aborted\":" + entry[2] + "}");
        }
    }

    // ---------------------------------------------------------------------------------------------
    // consume

    /** The assignor class names of a strategy: a short name, a class name, or a list of them. */
    static String strategyClasses(String list) {
        List<String> out = new ArrayList<>();
        for (String s : list.split(",")) {
            out.add(strategyClass(s.trim()));
        }
        return String.join(",", out);
    }

    static String strategyClass(String s) {
        switch (s) {
            case "range": return "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin": return "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky": return "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky": return "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default: return s; // a class name
        }
    }

    static int consume(Map<String, String> a) throws Exception {
        String topic = a.get("--topic");
        String regex = a.get("--regex");
        String group = a.get("--group");
        boolean subscribe = group != null && !a.containsKey("--assign-all");
        long count = Long.parseLong(a.getOrDefault("--count", "-1"));
        long idleMs = Long.parseLong(a.getOrDefault("--timeout-ms", "-1"));
        boolean commit = a.containsKey("--commit");
        boolean hex = a.containsKey("--hex");
        boolean trace = a.containsKey("--trace");
        boolean seekOnTruncation = a.containsKey("--seek-on-truncation");
        long commitIdleMs = Long.parseLong(a.getOrDefault("--commit-idle-ms", "-1"));
        // The next offset of the last record printed, per partition: what --commit-idle-ms and,
        // with --trace, the commit on revocation commit.
        Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("--bootstrap"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "interop-java-consumer");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        if (a.containsKey("--strategy")) {
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, strategyClasses(a.get("--strategy")));
        }
        if (a.containsKey("--session-timeout-ms")) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, a.get("--session-timeout-ms"));
            int session = Integer.parseInt(a.get("--session-timeout-ms"));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Integer.toString(Math.max(100, session / 3)));
        }
        if (a.containsKey("--max-poll-interval-ms")) {
            p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, a.get("--max-poll-interval-ms"));
        }
        applyConfig(p);

        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        AtomicBoolean stopping = new AtomicBoolean(false);
        CountDownLatch finished = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            // SIGTERM: let the poll loop close the consumer (leaving the group), then exit.
            stopping.set(true);
            try {
                consumer.wakeup();
            } catch (RuntimeException ignored) {
                // already closed
            }
            try {
                finished.await();
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));

        if (subscribe) {
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                private void report(String event, Collection<TopicPartition> parts, boolean leaving) {
                    Set<TopicPartition> assignment = new HashSet<>(consumer.assignment());
                    if (leaving) {
                        assignment.removeAll(parts);
                    }
                    int generation = consumer.groupMetadata().generationId();
                    emit("{\"event\":\"" + event + "\",\"partitions\":" + jsonPartitions(parts)
                            + ",\"assignment\":" + jsonPartitions(assignment)
                            + ",\"generation\":" + generation
                            + ",\"ts_us\":" + nowUs() + "}");
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    if (commit && !parts.isEmpty() && trace) {
                        // Offsets named, so that the commit event says what was committed.
                        Map<TopicPartition, OffsetAndMetadata> owned = new HashMap<>();
                        for (TopicPartition tp : parts) {
                            if (processed.containsKey(tp)) {
                                owned.put(tp, processed.get(tp));
                            }
                        }
                        if (!owned.isEmpty()) {
                            commitTraced(consumer, owned, true, "revoked");
                        }
                    } else if (commit && !parts.isEmpty()) {
                        try {
                            consumer.commitSync();
                        } catch (RuntimeException e) {
                            System.err.println("InteropClient: commit in onPartitionsRevoked failed: " + e);
                        }
                    }
                    report("revoked", parts, true);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    report("assigned", parts, false);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    report("lost", parts, true);
                }
            };
            if (regex != null) {
                consumer.subscribe(new SubscriptionPattern(regex), listener);
            } else {
                consumer.subscribe(Collections.singletonList(topic), listener);
            }
        } else {
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic)) {
                parts.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(parts);
            if (group == null) {
                consumer.seekToBeginning(parts);
            }
            emit("{\"event\":\"assigned\",\"partitions\":" + jsonPartitions(parts)
                    + ",\"assignment\":" + jsonPartitions(parts) + ",\"generation\":-1}");
        }

        long records = 0;
        long lastRecord = System.nanoTime();
        long lastCommit = System.nanoTime();
        String reason;
        int rc = 0;
        try {
            while (true) {
                if (stopping.get()) {
                    reason = "signal";
                    break;
                }
                if (count >= 0 && records >= count) {
                    reason = "count";
                    break;
                }
                if (idleMs >= 0 && (System.nanoTime() - lastRecord) / 1_000_000 >= idleMs) {
                    reason = "idle";
                    break;
                }
                ConsumerRecords<byte[], byte[]> batch;
                try {
                    batch = consumer.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    continue; // stopping is set; the loop ends above
                } catch (LogTruncationException e) {
                    if (!seekOnTruncation) {
                        throw e;
                    }
                    Map<TopicPartition, Long> positions = e.offsetOutOfRangePartitions();
                    Map<TopicPartition, OffsetAndMetadata> divergent = e.divergentOffsets();
                    emit("{\"event\":\"truncation\",\"divergent\":" + jsonOffsets(divergent)
                            + ",\"positions\":" + jsonOffsets(positions) + ",\"ts_us\":" + nowUs() + "}");
                    for (Map.Entry<TopicPartition, Long> pos : positions.entrySet()) {
                        OffsetAndMetadata to = divergent.get(pos.getKey());
                        consumer.seek(pos.getKey(), to != null ? to.offset() : pos.getValue());
                    }
                    continue;
                }
                if (batch.isEmpty()) {
                    if (commit && commitIdleMs >= 0 && (System.nanoTime() - lastCommit) / 1_000_000 >= commitIdleMs) {
                        Map<TopicPartition, OffsetAndMetadata> owned = new HashMap<>();
                        for (TopicPartition tp : consumer.assignment()) {
                            if (processed.containsKey(tp)) {
                                owned.put(tp, processed.get(tp));
                            }
                        }
                        if (!owned.isEmpty()) {
                            lastCommit = System.nanoTime();
                            commitTraced(consumer, owned, trace, "loop");
                        }
                    }
                    continue;
                }
                long batchUs = nowUs();
                lastRecord = System.nanoTime();
                StringBuilder out = new StringBuilder();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                Map<TopicPartition, Long> rewind = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    if (count >= 0 && records >= count) {
                        // Print (and commit) exactly --count records; rewind to the first one
                        // not printed, so that committing the position does not skip it.
                        rewind.putIfAbsent(new TopicPartition(r.topic(), r.partition()), r.offset());
                        continue;
                    }
                    records++;
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    out.append('{');
                    if (regex != null) {
                        out.append("\"topic\":").append(jsonStr(r.topic())).append(',');
                    }
                    out.append("\"partition\":").append(r.partition())
                            .append(",\"offset\":").append(r.offset());
                    if (trace) {
                        out.append(",\"ts_us\":").append(batchUs);
                    }
                    out.append(",\"key\":").append(jsonBytes(r.key(), hex))
                            .append(",\"value\":").append(jsonBytes(r.value(), hex))
                            .append(",\"headers\":{");
                    boolean first = true;
                    for (Header h : r.headers()) {
                        if (!first) {
                            out.append(',');
                        }
                        first = false;
                        out.append(jsonStr(h.key())).append(':').append(jsonBytes(h.value(), hex));
                    }
                    out.append("}}\n");
                }
                for (Map.Entry<TopicPartition, Long> e : rewind.entrySet()) {
                    consumer.seek(e.getKey(), e.getValue());
                }
                synchronized (InteropClient.class) {
                    OUT.print(out);
                    OUT.flush();
                }
                processed.putAll(next);
                if (commit) {
                    lastCommit = System.nanoTime();
                    commitTraced(consumer, next, trace, "loop");
                }
            }
        } catch (RuntimeException e) {
            System.err.println("InteropClient: consume failed: " + e);
            if (trace) {
                emit("{\"event\":\"error\",\"error\":" + jsonStr(e.getClass().getSimpleName())
                        + ",\"message\":" + jsonStr(String.valueOf(e.getMessage())) + ",\"ts_us\":" + nowUs() + "}");
            }
            reason = "error";
            rc = 1;
        }
        StringBuilder positions = new StringBuilder();
        for (TopicPartition tp : consumer.assignment()) {
            long position;
            try {
                position = consumer.position(tp, Duration.ofSeconds(5));
            } catch (WakeupException e) {
                // The shutdown hook's wakeup, still pending when no poll was waiting: thrown once.
                try {
                    position = consumer.position(tp, Duration.ofSeconds(5));
                } catch (RuntimeException again) {
                    System.err.println("InteropClient: position failed: " + again);
                    continue;
                }
            } catch (RuntimeException e) {
                System.err.println("InteropClient: position failed: " + e);
                continue;
            }
            // Appended whole, so that the done line stays valid JSON whatever failed.
            if (positions.length() > 0) {
                positions.append(',');
            }
            positions.append(jsonStr(regex != null ? tp.topic() + ":" + tp.partition()
                    : Integer.toString(tp.partition()))).append(':').append(position);
        }
        try {
            consumer.close(Duration.ofSeconds(30));
        } catch (RuntimeException e) {
            System.err.println("InteropClient: close failed: " + e);
        }
        emit("{\"event\":\"done\",\"records\":" + records + ",\"reason\":\"" + reason
                + "\",\"positions\":{" + positions + "}}");
        finished.countDown();
        return rc;
    }
}
