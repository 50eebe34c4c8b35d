// A group member for the rebalance figure of bench/run (the Java twin of
// core/examples/bench_member.rs): BenchMember <bootstrap> <topic> <group> <strategy> <seconds>
// [<warm-up ms>] (strategy "consumer": group.protocol=consumer). After every poll that returned records prints "D <partition> <unix ms>" once per
// partition. With a warm-up it sleeps that long in onPartitionsAssigned for newly assigned
// partitions (preparing for them, as an application loading state would). Once BENCH_BUSY_FILE
// exists it spends BENCH_BUSY_MS processing (sleeping) after every poll.
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class BenchMember {
    public static void main(String[] args) throws Exception {
        String strategy = args[3].equals("range")
                ? "org.apache.kafka.clients.consumer.RangeAssignor"
                : "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("client.id", "bench-member");
        p.put("group.id", args[2]);
        // "consumer": KIP-848's protocol, the broker's assignor (no client-side strategy).
        if (args[3].equals("consumer")) p.put("group.protocol", "consumer");
        else p.put("partition.assignment.strategy", strategy);
        p.put("auto.offset.reset", "latest");
        p.put("enable.auto.commit", "true");
        p.put("fetch.max.wait.ms", "500");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long end = System.nanoTime() + (long) (Double.parseDouble(args[4]) * 1e9);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            long warmUpMs = args.length > 5 ? Long.parseLong(args[5]) : 0;
            c.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    if (warmUpMs > 0 && !partitions.isEmpty()) {
                        try {
                            Thread.sleep(warmUpMs);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                }
            });
            StringBuilder sb = new StringBuilder();
            // Scale-down: once BENCH_LEAVE_FILE exists, leave (close) at once.
            String leaveFile = System.getenv("BENCH_LEAVE_FILE");
            String busyFile = System.getenv("BENCH_BUSY_FILE");
            long busyMs = System.getenv("BENCH_BUSY_MS") != null ? Long.parseLong(System.getenv("BENCH_BUSY_MS")) : 0;
            while (System.nanoTime() < end) {
                if (leaveFile != null && java.nio.file.Files.exists(java.nio.file.Path.of(leaveFile))) {
                    System.out.println("L " + System.currentTimeMillis());
                    System.out.flush();
                    break;
                }
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                if (busyFile != null && java.nio.file.Files.exists(java.nio.file.Path.of(busyFile))) {
                    Thread.sleep(busyMs);
                }
                if (recs.isEmpty()) continue;
                long ms = System.currentTimeMillis();
                sb.setLength(0);
                for (TopicPartition tp : recs.partitions()) {
                    sb.append("D ").append(tp.partition()).append(' ').append(ms).append('\n');
                }
                System.out.print(sb);
                System.out.flush();
            }
        }
    }
}
