import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** The Java Admin's share-group offsets calls (kafka-clients 4.2): listShareGroupOffsets,
 *  alterShareGroupOffsets, deleteShareGroupOffsets, on a group that exists only through them. */
public class ShareGroupOffsetsAdmin {
    static void check(boolean ok, String what) {
        if (!ok) throw new IllegalStateException("check failed: " + what);
    }

    static Throwable cause(KafkaFuture<?> f) throws InterruptedException {
        try { f.get(); return null; } catch (ExecutionException e) { return e.getCause(); }
    }

    static Map<TopicPartition, SharePartitionOffsetInfo> list(Admin admin, String group, Collection<TopicPartition> tps)
            throws Exception {
        ListShareGroupOffsetsSpec spec = new ListShareGroupOffsetsSpec();
        if (tps != null) spec.topicPartitions(tps);
        return admin.listShareGroupOffsets(Map.of(group, spec)).partitionsToOffsetInfo(group).get();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Producer<byte[], byte[]> producer = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
                for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(topic, 0, null, ("v" + i).getBytes())).get();
            }
            TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);

            check(list(admin, group, null).isEmpty(), "unknown group: no offsets " + list(admin, group, null));
            System.out.println("OK list-unknown");

            admin.alterShareGroupOffsets(group, Map.of(p0, 2L, p1, 0L)).all().get();
            AlterShareGroupOffsetsResult bad = admin.alterShareGroupOffsets(group,
                Map.of(new TopicPartition(topic + "-missing", 0), 0L));
            Throwable missing = cause(bad.all());
            check(missing instanceof UnknownTopicOrPartitionException, "alter a missing topic: " + missing);
            System.out.println("OK alter");

            Map<TopicPartition, SharePartitionOffsetInfo> some = list(admin, group, List.of(p0, p1));
            check(some.get(p0).startOffset() == 2 && some.get(p0).lag().equals(Optional.of(3L)), "p0 " + some);
            check(some.get(p1).startOffset() == 0 && some.get(p1).lag().equals(Optional.of(0L)), "p1 " + some);
            Map<TopicPartition, SharePartitionOffsetInfo> all = list(admin, group, null);
            check(all.keySet().equals(Set.of(p0, p1)) && all.get(p0).startOffset() == 2, "all " + all);
            System.out.println("OK list");

            admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get();
            check(list(admin, group, null).isEmpty(), "after delete " + list(admin, group, null));
            Throwable again = cause(admin.deleteShareGroupOffsets(group, Set.of(topic)).all());
            check(again instanceof UnknownTopicOrPartitionException, "delete again: " + again);
            Throwable unknown = cause(admin.deleteShareGroupOffsets(group + "-none", Set.of(topic)).all());
            check(unknown instanceof GroupIdNotFoundException, "delete, unknown group: " + unknown);
            System.out.println("OK delete");
        }
    }
}
