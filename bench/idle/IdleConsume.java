// The Java KafkaConsumer side of bench/idle: java -cp ... IdleConsume <bootstrap> <topic> <partitions>
// Assigns every partition of <topic> (from the log end), prints READY, then polls (1 s) until the
// runner ends it; the runner reads the process' CPU from /proc (see bench/idle/run).
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class IdleConsume {
    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "idle-java");
        p.put("auto.offset.reset", "latest");
        p.put("enable.auto.commit", "false");
        p.put("fetch.max.wait.ms", "500");
        p.put("max.poll.records", "500");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(tps);
            System.out.println("READY");
            System.out.flush();
            while (true) c.poll(Duration.ofSeconds(1));
        }
    }
}
