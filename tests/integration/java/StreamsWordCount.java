import java.nio.file.Files;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.serialization.*;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.kstream.*;

/**
 * A Kafka Streams 4.2 word count with group.protocol=streams (KIP-1071): the words go through a
 * repartition topic (groupBy) into a state store (count) with a changelog topic.
 *
 * args: bootstrap, input topic, output topic, application id, state dir[, instances (default 1)
 * [, "exactly_once_v2" for transactions: offsets committed with TxnOffsetCommit]].  Produces
 * the input lines, runs the topology (in each of the instances, started one after the other: a second
 * instance takes tasks over from the first) until every word's final count has reached the output topic
 * (bounded) and every instance is RUNNING, then prints "STATE RUNNING" per instance, one "COUNT word n" line
 * per word (sorted), "GROUP state members subtopologies" from the Admin client's view of the group, and
 * the internal topics' partition counts ("TOPIC name partitions").
 */
public class StreamsWordCount {
    static final String[] LINES = {
        "the quick brown fox", "jumps over the lazy dog", "the dog barks", "a fox and a dog"
    };

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], input = args[1], output = args[2], appId = args[3], stateDir = args[4];
        int instances = args.length > 5 ? Integer.parseInt(args[5]) : 1;
        boolean exactlyOnce = args.length > 6 && args[6].equals("exactly_once_v2");
        Map<String, Long> expected = new TreeMap<>();
        for (String line : LINES) for (String w : line.split(" ")) expected.merge(w, 1L, Long::sum);

        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(input, 2, (short) 1), new NewTopic(output, 1, (short) 1)))
                .all().get(30, TimeUnit.SECONDS);
        }
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (Producer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < LINES.length; i++) p.send(new ProducerRecord<>(input, "line-" + i, LINES[i])).get();
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(input)
            .flatMapValues(v -> Arrays.asList(v.split(" ")))
            .groupBy((k, word) -> word)
            .count(Materialized.as("counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        Properties sp = new Properties();
        sp.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        sp.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        sp.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        sp.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        sp.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        sp.put(StreamsConfig.STATE_DIR_CONFIG, stateDir + "/0");
        sp.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        sp.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        sp.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "2");
        sp.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        if (exactlyOnce) sp.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);

        Map<String, Long> seen = new TreeMap<>();
        List<KafkaStreams> all = new ArrayList<>();
        Topology topology = builder.build();
        try {
            for (int i = 0; i < instances; i++) {
                Properties own = new Properties();
                own.putAll(sp);
                own.put(StreamsConfig.STATE_DIR_CONFIG, stateDir + "/" + i);
                KafkaStreams streams = new KafkaStreams(topology, own);
                all.add(streams);
                streams.start();
                if (i + 1 < instances) {  // let the first instance get its tasks before the next one joins
                    long until = System.currentTimeMillis() + 60_000;
                    while (streams.state() != KafkaStreams.State.RUNNING && System.currentTimeMillis() < until) Thread.sleep(100);
                }
            }
            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, appId + "-reader");
            cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
            if (exactlyOnce) cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            long deadline = System.currentTimeMillis() + 90_000;
            try (Consumer<String, Long> c = new KafkaConsumer<>(cp)) {
                c.subscribe(List.of(output));
                while (!seen.equals(expected) && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(300))) seen.put(r.key(), r.value());
                }
            }
            long until = System.currentTimeMillis() + 60_000;
            while (all.stream().anyMatch(k -> k.state() != KafkaStreams.State.RUNNING) && System.currentTimeMillis() < until)
                Thread.sleep(100);
            for (KafkaStreams streams : all) System.out.println("STATE " + streams.state());
            for (Map.Entry<String, Long> e : seen.entrySet()) System.out.println("COUNT " + e.getKey() + " " + e.getValue());
            try (Admin admin = Admin.create(ap)) {
                // The application's committed offsets of its input topic: every line consumed.
                long committed = 0;
                for (OffsetAndMetadata om : admin.listConsumerGroupOffsets(appId).partitionsToOffsetAndMetadata()
                        .get(30, TimeUnit.SECONDS).entrySet().stream().filter(e -> e.getKey().topic().equals(input))
                        .map(Map.Entry::getValue).toList()) committed += om.offset();
                System.out.println("COMMITTED " + committed);
                // Members reconcile at their heartbeats: wait (bounded) for the group to settle.
                StreamsGroupDescription d = admin.describeStreamsGroups(List.of(appId)).all().get(30, TimeUnit.SECONDS).get(appId);
                long settle = System.currentTimeMillis() + 60_000;
                while (d.groupState() != GroupState.STABLE && System.currentTimeMillis() < settle) {
                    Thread.sleep(200);
                    d = admin.describeStreamsGroups(List.of(appId)).all().get(30, TimeUnit.SECONDS).get(appId);
                }
                System.out.println("GROUP " + d.groupState() + " " + d.members().size() + " " + d.subtopologies().size());
                Map<String, TopicDescription> topics = admin.describeTopics(List.of(
                    appId + "-counts-repartition", appId + "-counts-changelog")).allTopicNames().get(30, TimeUnit.SECONDS);
                for (TopicDescription t : new TreeMap<>(topics).values())
                    System.out.println("TOPIC " + t.name().substring(appId.length() + 1) + " " + t.partitions().size());
            }
        } finally {
            for (KafkaStreams streams : all) streams.close(Duration.ofSeconds(30));
        }
    }
}
