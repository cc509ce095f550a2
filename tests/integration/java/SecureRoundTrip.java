import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client over a secured listener: the client settings (security.protocol, ssl.*,
 * sasl.*) come from a properties file; a default producer writes COUNT records and an
 * assign/seek consumer reads them back.  Prints OK, or "AUTHORIZATION <exception class>" and
 * exits 3 when the broker denies an operation.
 *
 * Usage: SecureRoundTrip BOOTSTRAP TOPIC COUNT CLIENT_PROPERTIES
 */
public class SecureRoundTrip {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        Properties base = new Properties();
        try (FileInputStream in = new FileInputStream(args[3])) {
            base.load(in);
        }
        base.put("bootstrap.servers", bootstrap);
        try {
            Properties p = new Properties();
            p.putAll(base);
            p.put("key.serializer", ByteArraySerializer.class.getName());
            p.put("value.serializer", ByteArraySerializer.class.getName());
            p.put("max.block.ms", "20000");
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < count; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, null,
                            ("value-" + i).getBytes(StandardCharsets.UTF_8))).get();
                }
            }
            System.out.println("produced " + count);
            Properties c = new Properties();
            c.putAll(base);
            c.put("key.deserializer", ByteArrayDeserializer.class.getName());
            c.put("value.deserializer", ByteArrayDeserializer.class.getName());
            int seen = 0;
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
                TopicPartition tp = new TopicPartition(topic, 0);
                consumer.assign(Collections.singletonList(tp));
                consumer.seekToBeginning(Collections.singletonList(tp));
                long deadline = System.currentTimeMillis() + 20_000;
                while (seen < count && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        seen++;
                    }
                }
            }
            if (seen < count) {
                System.out.println("consumed only " + seen);
                System.exit(1);
            }
            System.out.println("OK");
        } catch (Exception e) {
            Throwable t = e;
            while (t != null) {
                if (t instanceof AuthorizationException) {
                    System.out.println("AUTHORIZATION " + t.getClass().getSimpleName());
                    System.exit(3);
                }
                t = t.getCause();
            }
            throw e;
        }
    }
}
