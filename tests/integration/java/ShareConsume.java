import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.serialization.*;

/**
 * The Java KafkaShareConsumer (kafka-clients 4.1+) on one share group: explicit acknowledgement
 * (accept, release: redelivered with delivery count 2, reject: never again), the acquisition lock
 * timeout the broker reports, and implicit acknowledgement in a second group.  Arguments: bootstrap,
 * topic prefix.  Prints "OK <step>"; a failed check throws.
 */
public class ShareConsume {
    static void check(boolean ok, String what) {
        if (!ok) throw new IllegalStateException("check failed: " + what);
    }

    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String topic, String mode) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", mode);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(topic));
        return c;
    }

    /** Produce sentinels until the consumer gets one (assigned, share partition started). */
    static void ready(Producer<String, String> producer, KafkaShareConsumer<String, String> c, String topic,
                      boolean explicit) throws Exception {
        long deadline = System.currentTimeMillis() + 60000;
        while (true) {
            check(System.currentTimeMillis() < deadline, "never assigned");
            producer.send(new ProducerRecord<>(topic, "sentinel")).get();
            ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
            if (!rs.isEmpty()) {
                for (ConsumerRecord<String, String> r : rs) {
                    check(r.value().equals("sentinel"), "only sentinels before the test records: " + r.value());
                    if (explicit) c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                if (explicit) c.commitSync();
                return;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        String topic = prefix + "-t";
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (Producer<String, String> producer = new KafkaProducer<>(pp)) {
            try (KafkaShareConsumer<String, String> c = consumer(bootstrap, prefix + "-explicit", topic, "explicit")) {
                ready(producer, c, topic, true);
                for (String v : List.of("keep", "again", "bad")) producer.send(new ProducerRecord<>(topic, v)).get();
                Map<String, List<Short>> seen = new TreeMap<>();
                long deadline = System.currentTimeMillis() + 30000;
                while (!(seen.containsKey("again") && seen.get("again").size() == 2 && seen.containsKey("keep")
                         && seen.containsKey("bad"))) {
                    check(System.currentTimeMillis() < deadline, "records not delivered: " + seen);
                    ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                    for (ConsumerRecord<String, String> r : rs) {
                        short count = r.deliveryCount().orElse((short) -1);
                        seen.computeIfAbsent(r.value(), k -> new ArrayList<>()).add(count);
                        AcknowledgeType t = AcknowledgeType.ACCEPT;
                        if (r.value().equals("bad")) t = AcknowledgeType.REJECT;
                        if (r.value().equals("again") && count == 1) t = AcknowledgeType.RELEASE;
                        c.acknowledge(r, t);
                    }
                    if (!rs.isEmpty()) c.commitSync();
                }
                long quiet = System.currentTimeMillis() + 2000;
                while (System.currentTimeMillis() < quiet) {
                    ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(300));
                    check(rs.isEmpty(), "nothing more after accept/reject");
                }
                check(seen.get("keep").equals(List.of((short) 1)), "keep once: " + seen);
                check(seen.get("again").equals(List.of((short) 1, (short) 2)), "again twice: " + seen);
                check(seen.get("bad").equals(List.of((short) 1)), "bad once: " + seen);
                check(c.acquisitionLockTimeoutMs().orElse(-1) == 30000, "lock timeout " + c.acquisitionLockTimeoutMs());
                System.out.println("OK explicit");
            }
            try (KafkaShareConsumer<String, String> c = consumer(bootstrap, prefix + "-implicit", topic, "implicit")) {
                ready(producer, c, topic, false);
                for (int i = 0; i < 20; i++) producer.send(new ProducerRecord<>(topic, "v" + i)).get();
                Set<String> got = new TreeSet<>();
                long deadline = System.currentTimeMillis() + 30000;
                while (got.size() < 20) {
                    check(System.currentTimeMillis() < deadline, "implicit: got " + got);
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                        if (!r.value().equals("sentinel")) got.add(r.value());
                    }
                }
                c.commitSync();
                System.out.println("OK implicit");
            }
        }
    }
}
