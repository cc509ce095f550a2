import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

/**
 * Transactions V2 (KIP-890 part 2) with kafka-clients 4.2: a transactional producer that commits,
 * aborts and commits again (offsets sent with the first commit), a read_committed consumer that
 * sees only the committed records, and Admin's view of the producer epoch (bumped by every end
 * under V2, unchanged under V1).  Prints OK/KEY VALUE lines; exits non-zero on any failure.
 * Usage: TxnV2 bootstrap topic transactional-id group
 */
public class TxnV2 {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], tid = args[2], group = args[3];
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            FeatureMetadata features = admin.describeFeatures().featureMetadata().get();
            FinalizedVersionRange tv = features.finalizedFeatures().get("transaction.version");
            System.out.println("TRANSACTION_VERSION " + (tv == null ? 0 : tv.maxVersionLevel()));
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
        }

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", tid);
        p.put("transaction.timeout.ms", "30000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, "k", "commit-1-" + i)).get();
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(7));
            producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(group));
            producer.commitTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k", "aborted")).get();
            producer.send(new ProducerRecord<>(topic, 1, "k", "aborted")).get();
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 1, "k", "commit-2")).get();
            producer.commitTransaction();
            System.out.println("OK produced");
        }

        try (Admin admin = Admin.create(a)) {
            TransactionDescription d = admin.describeTransactions(List.of(tid)).description(tid).get();
            System.out.println("STATE " + d.state());
            System.out.println("EPOCH " + d.producerEpoch());
            long committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                .get(new TopicPartition(topic, 0)).offset();
            System.out.println("GROUP_OFFSET " + committed);
        }

        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group + "-reader");
        c.put("isolation.level", "read_committed");
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        List<String> seen = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.assign(List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1)));
            long deadline = System.currentTimeMillis() + 20000;
            while (seen.size() < 4 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    seen.add(r.value());
                }
            }
            // Nothing more arrives (the aborted records stay hidden).
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                seen.add(r.value());
            }
        }
        Collections.sort(seen);
        System.out.println("READ " + String.join(",", seen));
    }
}
