import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Records with null and empty keys and values (and headers with null and empty values) through
 * the reference client: a default producer (idempotent, acks=all) with the given compression
 * writes them, an assign/seek consumer reads them back and compares null with null and empty
 * with empty. Prints "OK" last, or "FAIL ..." and exits 1.
 *
 * Usage: EmptyRecords BOOTSTRAP TOPIC COMPRESSION
 */
public class EmptyRecords {
    private static final byte[] EMPTY = new byte[0];
    private static final byte[] ONE = "x".getBytes(StandardCharsets.UTF_8);
    // (key, value) pairs: every combination of null, empty and one byte.
    private static final byte[][][] PAIRS = {
        {null, null}, {null, EMPTY}, {EMPTY, null}, {EMPTY, EMPTY},
        {null, ONE}, {ONE, null}, {EMPTY, ONE}, {ONE, EMPTY}, {ONE, ONE},
    };

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String compression = args[2];

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("compression.type", compression);
        p.put("linger.ms", "20");
        p.put("delivery.timeout.ms", "20000");
        p.put("request.timeout.ms", "10000");
        int expected = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int round = 0; round < 2; round++) {  // round 1 adds headers with null and empty values
                for (byte[][] kv : PAIRS) {
                    ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, 0, kv[0], kv[1]);
                    if (round == 1) {
                        r.headers().add("null", null);
                        r.headers().add("empty", EMPTY);
                    }
                    producer.send(r);
                    expected++;
                }
            }
            producer.flush();
            // A failed send shows up here: get() of the last one rethrows the batch's error.
            producer.send(new ProducerRecord<>(topic, 0, null, null)).get();
            expected++;
        }

        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        c.put("enable.auto.commit", "false");
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(Collections.singletonList(tp));
            consumer.seek(tp, 0);
            long deadline = System.currentTimeMillis() + 20_000;
            while (got.size() < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    got.add(r);
                }
            }
        }
        if (got.size() != expected) {
            fail("consumed " + got.size() + " of " + expected);
        }
        int i = 0;
        for (int round = 0; round < 2; round++) {
            for (byte[][] kv : PAIRS) {
                ConsumerRecord<byte[], byte[]> r = got.get(i);
                if (r.offset() != i || !same(r.key(), kv[0]) || !same(r.value(), kv[1])) {
                    fail("record " + i + " came back as key=" + show(r.key()) + " value=" + show(r.value())
                            + ", sent key=" + show(kv[0]) + " value=" + show(kv[1]));
                }
                Header[] headers = r.headers().toArray();
                if (round == 0 && headers.length != 0) {
                    fail("record " + i + " has " + headers.length + " headers, sent none");
                }
                if (round == 1 && (headers.length != 2 || !headers[0].key().equals("null") || headers[0].value() != null
                        || !headers[1].key().equals("empty") || !same(headers[1].value(), EMPTY))) {
                    fail("record " + i + " headers came back wrong");
                }
                i++;
            }
        }
        System.out.println("consumed " + got.size());
        System.out.println("OK");
    }

    private static boolean same(byte[] a, byte[] b) {
        return a == null ? b == null : b != null && Arrays.equals(a, b);
    }

    private static String show(byte[] b) {
        return b == null ? "null" : "\"" + new String(b, StandardCharsets.UTF_8) + "\"";
    }

    private static void fail(String why) {
        System.out.println("FAIL " + why);
        System.exit(1);
    }
}
