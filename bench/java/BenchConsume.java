// The Java KafkaConsumer side of bench/run:
//   java -cp ... BenchConsume <bootstrap> <topic> <partitions> <records>
// With BENCH_GROUP=<group.id> in the environment it subscribes in that group instead of assigning.
// Same line protocol as core/examples/bench_consume.rs (START / PROGRESS / RESULT, CPU ticks from
// /proc/self/stat).
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class BenchConsume {
    static long cpuTicks() {
        try {
            String s = new String(Files.readAllBytes(Paths.get("/proc/self/stat")));
            String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
            return Long.parseLong(f[11]) + Long.parseLong(f[12]);
        } catch (Exception e) {
            return 0;
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        long want = Long.parseLong(args[3]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "bench-java");
        String benchGroup = System.getenv("BENCH_GROUP");
        if (benchGroup != null && !benchGroup.isEmpty()) p.put("group.id", benchGroup);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("fetch.max.bytes", "52428800");
        p.put("max.partition.fetch.bytes", "1048576");
        p.put("fetch.max.wait.ms", "500");
        p.put("check.crcs", "true");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        // bench/run --tls: the security settings, one key=value a line.
        String extra = System.getenv("BENCH_CONFIG");
        if (extra != null) {
            for (String line : extra.split("\n")) {
                int eq = line.indexOf('=');
                if (eq > 0) p.put(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            System.out.println("START " + cpuTicks());
            System.out.flush();
            long t0 = System.nanoTime();
            String group = System.getenv("BENCH_GROUP");
            if (group != null && !group.isEmpty()) c.subscribe(List.of(topic));
            else c.assign(tps);
            long n = 0, bytes = 0, lastData = System.nanoTime(), nextReport = lastData + 1_000_000_000L;
            while (n < want) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(1000));
                long now = System.nanoTime();
                if (recs.isEmpty()) {
                    if (now - lastData > 60_000_000_000L) {
                        System.err.println("no records for 60 s after " + n + " of " + want);
                        System.exit(1);
                    }
                    continue;
                }
                lastData = now;
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    if (r.key() != null) bytes += r.key().length;
                    if (r.value() != null) bytes += r.value().length;
                }
                n += recs.count();
                if (now >= nextReport) {
                    System.out.println("PROGRESS " + n);
                    System.out.flush();
                    nextReport = now + 1_000_000_000L;
                }
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            System.out.printf("RESULT %d %d %.6f %d%n", n, bytes, secs, cpuTicks());
            System.out.flush();
        }
    }
}
