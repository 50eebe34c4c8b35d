// The Java KafkaProducer side of bench/eos's producer rows:
//   java -cp ... BenchProduce <bootstrap> <topic> <records> <value bytes>
// Sends unkeyed records of <value bytes> to an existing topic with the settings of
// core/examples/bench_produce.rs (batch.size 64 KiB, linger 20 ms, no compression), overridden by
// BENCH_CONFIG (one key=value a line: acks, enable.idempotence), flushes, and prints
// RESULT <records> <bytes> <seconds> (send of the first record to the last acknowledgement).
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
            long t0 = System.nanoTime();
            for (long i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, values[(int) (i & 255)]), (md, e) -> {
                    if (e != null) failed.incrementAndGet();
                });
            }
            producer.flush();
            double secs = (System.nanoTime() - t0) / 1e9;
            System.out.printf("RESULT %d %d %.6f%n", n, n * size, secs);
            System.out.flush();
        }
        if (failed.get() > 0) {
            System.err.println(failed.get() + " records failed");
            System.exit(1);
        }
    }
}
