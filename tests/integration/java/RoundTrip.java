import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The reference client against minikafka: a producer with default settings (idempotent,
 * acks=all) writes N records, a consumer with assign/seek reads them back. Prints one line per
 * check and exits non-zero on the first mismatch, so the Python test only reads the exit code
 * and the output.
 *
 * Usage: RoundTrip BOOTSTRAP TOPIC COUNT COMPRESSION
 */
public class RoundTrip {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        String compression = args[3];

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("compression.type", compression);
        p.put("linger.ms", "5");
        // Recent CreateTime timestamps: old ones would be removed by time retention, as in Kafka.
        final long baseTs = System.currentTimeMillis() - 60_000;
        List<RecordMetadata> acks = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, 0, baseTs + i,
                        ("key-" + i).getBytes(StandardCharsets.UTF_8),
                        ("value-" + i).getBytes(StandardCharsets.UTF_8));
                r.headers().add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                acks.add(producer.send(r).get());
            }
        }
        for (int i = 0; i < count; i++) {
            if (acks.get(i).offset() != i) {
                fail("ack " + i + " has offset " + acks.get(i).offset());
            }
        }
        System.out.println("produced " + count);

        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(Collections.singletonList(tp));
            consumer.seek(tp, 0);
            long deadline = System.currentTimeMillis() + 20_000;
            while (got.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    got.add(r);
                }
            }
            long end = consumer.endOffsets(Collections.singletonList(tp)).get(tp);
            if (end != count) {
                fail("end offset " + end + " != " + count);
            }
            // Seek into the middle of the log: the broker returns the containing batch, the
            // client must skip to the requested offset.
            consumer.seek(tp, count / 2);
            List<ConsumerRecord<byte[], byte[]>> tail = new ArrayList<>();
            deadline = System.currentTimeMillis() + 20_000;
            while (tail.size() < count - count / 2 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    tail.add(r);
                }
            }
            if (tail.isEmpty() || tail.get(0).offset() != count / 2) {
                fail("seek to middle returned " + (tail.isEmpty() ? "nothing" : "offset " + tail.get(0).offset()));
            }
        }
        if (got.size() != count) {
            fail("consumed " + got.size() + " of " + count);
        }
        for (int i = 0; i < count; i++) {
            ConsumerRecord<byte[], byte[]> r = got.get(i);
            String key = new String(r.key(), StandardCharsets.UTF_8);
            String value = new String(r.value(), StandardCharsets.UTF_8);
            String header = new String(r.headers().lastHeader("i").value(), StandardCharsets.UTF_8);
            if (r.offset() != i || !key.equals("key-" + i) || !value.equals("value-" + i)
                    || !header.equals(Integer.toString(i)) || r.timestamp() != baseTs + i) {
                fail("record " + i + " came back as offset=" + r.offset() + " key=" + key + " value=" + value
                        + " header=" + header + " ts=" + r.timestamp());
            }
        }
        System.out.println("consumed " + count);
        System.out.println("OK");
    }

    private static void fail(String why) {
        System.out.println("FAIL " + why);
        System.exit(1);
    }
}
