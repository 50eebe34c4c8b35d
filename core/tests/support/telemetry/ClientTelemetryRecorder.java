// A broker plugin of the client telemetry test (core/tests/client_telemetry.rs): a metrics
// reporter that is KIP-714's ClientTelemetry, whose receiver writes every push it gets to the
// directory the broker property `lagless.telemetry.dir` names: the payload's bytes as the broker
// hands them on (decompressed, OTLP MetricsData) in NNNNNN.bin, and what the broker's own OTLP
// classes decode of them in NNNNNN.txt, one line per resource attribute and per data point:
//
//   push <TAB> client_id <TAB> client_instance_id <TAB> terminating <TAB> content_type
//   resource <TAB> key <TAB> value
//   point <TAB> name <TAB> gauge|sum <TAB> temporality <TAB> monotonic <TAB> attrs <TAB> value
//
// attrs is key=value pairs joined by ','. Each file is written under a temporary name and then
// renamed, so a reader sees whole files only.
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

public class ClientTelemetryRecorder implements MetricsReporter, ClientTelemetry {
    private static final AtomicInteger SEQ = new AtomicInteger();
    private volatile Path dir;

    @Override
    public void configure(Map<String, ?> configs) {
        Object d = configs.get("lagless.telemetry.dir");
        if (d != null) {
            dir = Paths.get(d.toString());
        }
    }

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return this::record;
    }

    private static String attrs(List<KeyValue> kvs) {
        return kvs.stream()
            .map(kv -> kv.getKey() + "=" + kv.getValue().getStringValue())
            .collect(Collectors.joining(","));
    }

    private static String value(NumberDataPoint p) {
        return p.hasAsInt() ? Long.toString(p.getAsInt()) : Double.toString(p.getAsDouble());
    }

    private void record(AuthorizableRequestContext context, ClientTelemetryPayload payload) {
        Path d = dir;
        if (d == null) {
            return;
        }
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        StringBuilder text = new StringBuilder();
        text.append("push\t").append(context.clientId()).append('\t')
            .append(payload.clientInstanceId()).append('\t').append(payload.isTerminating())
            .append('\t').append(payload.contentType()).append('\n');
        try {
            MetricsData md = MetricsData.parseFrom(bytes);
            for (ResourceMetrics rm : md.getResourceMetricsList()) {
                for (KeyValue kv : rm.getResource().getAttributesList()) {
                    text.append("resource\t").append(kv.getKey()).append('\t')
                        .append(kv.getValue().getStringValue()).append('\n');
                }
                for (ScopeMetrics sm : rm.getScopeMetricsList()) {
                    for (Metric m : sm.getMetricsList()) {
                        if (m.hasGauge()) {
                            for (NumberDataPoint p : m.getGauge().getDataPointsList()) {
                                text.append("point\t").append(m.getName()).append("\tgauge\t-\t-\t")
                                    .append(attrs(p.getAttributesList())).append('\t')
                                    .append(value(p)).append('\n');
                            }
                        } else if (m.hasSum()) {
                            for (NumberDataPoint p : m.getSum().getDataPointsList()) {
                                text.append("point\t").append(m.getName()).append("\tsum\t")
                                    .append(m.getSum().getAggregationTemporality()).append('\t')
                                    .append(m.getSum().getIsMonotonic()).append('\t')
                                    .append(attrs(p.getAttributesList())).append('\t')
                                    .append(value(p)).append('\n');
                            }
                        } else {
                            text.append("other\t").append(m.getName()).append('\n');
                        }
                    }
                }
            }
        } catch (IOException e) {
            text.append("undecodable\t").append(e).append('\n');
        }
        String name = String.format("%06d", SEQ.incrementAndGet());
        try {
            write(d, name + ".bin", bytes);
            write(d, name + ".txt", text.toString().getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    private static void write(Path d, String name, byte[] bytes) throws IOException {
        Path tmp = d.resolve(name + ".tmp");
        Files.write(tmp, bytes);
        Files.move(tmp, d.resolve(name), StandardCopyOption.ATOMIC_MOVE);
    }
}
