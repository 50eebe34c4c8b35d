// The Java KafkaProducer side of bench/eos's producer rows:
//   java -cp ... BenchProduce <bootstrap> <topic> <records> <value bytes>
// Sends unkeyed records of <value bytes> to an existing topic with the settings of
// core/examples/bench_produce.rs (batch.size 64 KiB, linger 20 ms, no compression), overridden by
// BENCH_CONFIG (one key=value a line: acks, enable.idempotence), flushes, and prints
// RESULT <records> <bytes> <seconds> (send of the first record to the last acknowledgement).
// BENCH_TRANSACTIONS=<records a transaction>:<abort every n-th> writes them in transactions as
// bench_produce.rs does (transactional.id bench-java-produce-<topic>, acks=all, round-robin over
// <partitions>, the 5th argument; an aborted transaction is flushed first) and also prints
// ABORTED <records> COMMITTED <records>.
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class BenchProduce {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        long n = Long.parseLong(args[2]);
        int size = Integer.parseInt(args[3]);
        String txns = System.getenv("BENCH_TRANSACTIONS");
        long per = 0, every = 0;
        int partitions = args.length > 4 ? Integer.parseInt(args[4]) : 1;
        if (txns != null) {
            String[] pe = txns.split(":");
            per = Long.parseLong(pe[0]);
            every = Long.parseLong(pe[1]);
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "bench-java-produce");
        p.put("acks", "1");
        p.put("linger.ms", "20");
        p.put("batch.size", "65536");
        p.put("compression.type", "none");
        p.put("buffer.memory", "67108864");
        p.put("max.request.size", "1048576");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        String extra = System.getenv("BENCH_CONFIG");
        if (extra != null) {
            for (String line : extra.split("\n")) {
                int eq = line.indexOf('=');
                if (eq > 0) p.put(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        if (txns != null) {
            p.put("transactional.id", "bench-java-produce-" + topic);
            p.put("acks", "all");
        }
        // Text-like values, as the lagless producer's (the content matters only to codecs).
        byte[] pool = "order user id amount status shipped pending eu-west 421337 item price EUR "
                .repeat(1 + (1 << 16) / 70).getBytes(StandardCharsets.US_ASCII);
        // 256 values cut from it, reused: send() copies a value into its batch before returning.
        byte[][] values = new byte[256][];
        for (int i = 0, off = 0; i < values.length; i++) {
            off = (off + 7919) % (pool.length - size);
            values[i] = java.util.Arrays.copyOfRange(pool, off, off + size);
        }
        AtomicLong failed = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.partitionsFor(topic);
            if (txns != null) producer.initTransactions();
            long aborted = 0, inTxn = 0, txnNo = 0;
            long t0 = System.nanoTime();
            for (long i = 0; i < n; i++) {
                if (txns != null && inTxn++ == 0) producer.beginTransaction();
                Integer partition = txns != null ? (int) (i % partitions) : null;
                producer.send(new ProducerRecord<>(topic, partition, null, values[(int) (i & 255)]), (md, e) -> {
                    if (e != null) failed.incrementAndGet();
                });
                if (txns != null && (inTxn == per || i + 1 == n)) {
                    txnNo++;
                    if (every > 0 && txnNo % every == 0) {
                        // Written, then aborted: the log holds the records and the ABORT marker.
                        producer.flush();
                        producer.abortTransaction();
                        aborted += inTxn;
                    } else {
                        producer.commitTransaction();
                    }
                    inTxn = 0;
                }
            }
            producer.flush();
            double secs = (System.nanoTime() - t0) / 1e9;
            System.out.printf("RESULT %d %d %.6f%n", n, n * size, secs);
            if (txns != null) System.out.printf("ABORTED %d COMMITTED %d%n", aborted, n - aborted);
            System.out.flush();
        }
        if (failed.get() > 0) {
            System.err.println(failed.get() + " records failed");
            System.exit(1);
        }
    }
}
