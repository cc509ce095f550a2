import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.resource.*;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.serialization.*;

/**
 * Delegation tokens and WriteTxnMarkers with the Java client, against any broker (minikafka or
 * Apache Kafka) with a PLAINTEXT listener whose anonymous principal is a super user, a
 * SASL_PLAINTEXT listener with SCRAM, an authorizer and delegation.token.secret.key set.
 * Arguments: plaintext bootstrap, SASL bootstrap, topic prefix.  Prints "OK <step>" lines and
 * "TOKEN <id> <hmac base64>" and "TXN ..." facts; any failed check throws.
 */
public class DelegationTokens {
    static void check(boolean ok, String what) {
        if (!ok) throw new IllegalStateException("check failed: " + what);
    }

    static Throwable cause(KafkaFuture<?> f) throws InterruptedException {
        try { f.get(); return null; } catch (ExecutionException e) { return e.getCause(); }
    }

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        return p;
    }

    static Properties scram(String bootstrap, String user, String password, boolean token) {
        Properties p = common(bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "SCRAM-SHA-256");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
            + user + "\" password=\"" + password + "\"" + (token ? " tokenauth=\"true\"" : "") + ";");
        return p;
    }

    static AclBinding allow(ResourceType type, String name, String principal, AclOperation op) {
        return new AclBinding(new ResourcePattern(type, name, PatternType.LITERAL),
            new AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW));
    }

    static Set<String> ids(List<DelegationToken> tokens) {
        Set<String> out = new TreeSet<>();
        for (DelegationToken t : tokens) out.add(t.tokenInfo().tokenId());
        return out;
    }

    public static void main(String[] args) throws Exception {
        String plain = args[0], sasl = args[1], prefix = args[2];
        String topic = prefix + "-topic", group = prefix + "-group";
        KafkaPrincipal alice = new KafkaPrincipal("User", "alice"), bob = new KafkaPrincipal("User", "bob");
        try (Admin root = Admin.create(common(plain))) {
            root.alterUserScramCredentials(List.of(
                new UserScramCredentialUpsertion("alice", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "alice-pw"),
                new UserScramCredentialUpsertion("bob", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "bob-pw"),
                new UserScramCredentialUpsertion("carol", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "carol-pw")))
                .all().get();
            root.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            root.createAcls(List.of(
                allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE),
                allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ),
                allow(ResourceType.GROUP, group, "User:alice", AclOperation.READ))).all().get();
            // a token's requests are refused on a PLAINTEXT connection
            Throwable t = cause(root.createDelegationToken().delegationToken());
            check(t instanceof UnsupportedByAuthenticationException, "create over PLAINTEXT: " + t);
            System.out.println("OK plaintext-refused");
        }
        Thread.sleep(500);  // SCRAM users and ACLs reach Kafka's broker cache asynchronously

        DelegationToken token;
        try (Admin a = Admin.create(scram(sasl, "alice", "alice-pw", false))) {
            long before = System.currentTimeMillis();
            token = a.createDelegationToken(new CreateDelegationTokenOptions().renewers(List.of(bob))).delegationToken().get();
            check(token.tokenInfo().owner().equals(alice), "owner " + token.tokenInfo().owner());
            check(token.tokenInfo().tokenRequester().equals(alice), "requester " + token.tokenInfo().tokenRequester());
            check(token.tokenInfo().renewers().equals(List.of(bob)), "renewers " + token.tokenInfo().renewers());
            long expiry = token.tokenInfo().expiryTimestamp(), max = token.tokenInfo().maxTimestamp();
            check(expiry - before >= 86_400_000L - 5_000 && expiry - before <= 86_400_000L + 60_000, "expiry " + (expiry - before));
            check(max - token.tokenInfo().issueTimestamp() == 604_800_000L, "max lifetime " + (max - token.tokenInfo().issueTimestamp()));
            System.out.println("TOKEN " + token.tokenInfo().tokenId() + " " + token.hmacAsBase64String());
            Throwable t = cause(a.createDelegationToken(new CreateDelegationTokenOptions().owner(new KafkaPrincipal("User", "carol")))
                .delegationToken());
            check(t instanceof DelegationTokenAuthorizationException, "owner carol without CREATE_TOKENS: " + t);
            System.out.println("OK create");
            Thread.sleep(500);  // Kafka's broker caches tokens asynchronously
            check(ids(a.describeDelegationToken().delegationTokens().get()).contains(token.tokenInfo().tokenId()), "alice describes");
        }
        try (Admin b = Admin.create(scram(sasl, "bob", "bob-pw", false))) {
            check(ids(b.describeDelegationToken().delegationTokens().get()).contains(token.tokenInfo().tokenId()), "a renewer describes");
            long now = System.currentTimeMillis();
            long expiry = b.renewDelegationToken(token.hmac(), new RenewDelegationTokenOptions().renewTimePeriodMs(3_600_000L))
                .expiryTimestamp().get();
            check(expiry - now >= 3_590_000L && expiry - now <= 3_660_000L, "renewed expiry " + (expiry - now));
            System.out.println("OK renew");
        }
        try (Admin c = Admin.create(scram(sasl, "carol", "carol-pw", false))) {
            check(!ids(c.describeDelegationToken().delegationTokens().get()).contains(token.tokenInfo().tokenId()), "carol sees nothing");
            Throwable t = cause(c.renewDelegationToken(token.hmac()).expiryTimestamp());
            check(t instanceof DelegationTokenOwnerMismatchException, "carol renews: " + t);
            t = cause(c.expireDelegationToken(token.hmac()).expiryTimestamp());
            check(t instanceof DelegationTokenOwnerMismatchException, "carol expires: " + t);
            System.out.println("OK owner-mismatch");
        }
        Thread.sleep(500);

        // log in with the token: the connections are alice's (her ACLs apply)
        String tokenId = token.tokenInfo().tokenId(), hmac = token.hmacAsBase64String();
        Properties pp = scram(sasl, tokenId, hmac, true);
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            producer.send(new ProducerRecord<>(topic, "k", "sent with a delegation token")).get();
        }
        Properties cp = scram(sasl, tokenId, hmac, true);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            List<String> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 20_000;
            while (got.isEmpty() && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) got.add(r.value());
            check(got.equals(List.of("sent with a delegation token")), "consumed " + got);
            consumer.commitSync();
        }
        try (Admin tokenAdmin = Admin.create(scram(sasl, tokenId, hmac, true))) {
            Throwable t = cause(tokenAdmin.createDelegationToken().delegationToken());
            check(t instanceof UnsupportedByAuthenticationException, "create with a token login: " + t);
            t = cause(tokenAdmin.describeDelegationToken().delegationTokens());
            check(t instanceof UnsupportedByAuthenticationException, "describe with a token login: " + t);
            // DESCRIBE on another topic: not alice's, so not the token's either
            t = cause(tokenAdmin.describeTopics(List.of(topic)).allTopicNames());
            check(t == null, "alice may describe her topic: " + t);
        }
        System.out.println("OK token-login");

        try (Admin a = Admin.create(scram(sasl, "alice", "alice-pw", false))) {
            a.expireDelegationToken(token.hmac(), new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)).expiryTimestamp().get();
            Thread.sleep(500);
            check(!ids(a.describeDelegationToken().delegationTokens().get()).contains(tokenId), "expired token is gone");
        }
        Properties late = scram(sasl, tokenId, hmac, true);
        try (Admin gone = Admin.create(late)) {
            Throwable t = cause(gone.describeCluster().clusterId());
            check(t instanceof SaslAuthenticationException, "login with an expired token: " + t);
        }
        System.out.println("OK expire");

        // WriteTxnMarkers: Admin.abortTransaction ends a transaction its producer left open
        String txTopic = prefix + "-txn";
        TopicPartition tp = new TopicPartition(txTopic, 0);
        try (Admin root = Admin.create(common(plain))) {
            root.createTopics(List.of(new NewTopic(txTopic, 1, (short) 1))).all().get();
            Properties tpp = common(plain);
            tpp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-hanging");
            tpp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "600000");
            KafkaProducer<String, String> hanging = new KafkaProducer<>(tpp, new StringSerializer(), new StringSerializer());
            hanging.initTransactions();
            hanging.beginTransaction();
            hanging.send(new ProducerRecord<>(txTopic, "k", "never committed")).get();
            ProducerState state = null;
            for (ProducerState s : root.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers())
                if (s.currentTransactionStartOffset().isPresent()) state = s;
            check(state != null, "an open transaction");
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> end = root.listOffsets(Map.of(tp, OffsetSpec.latest()),
                new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get();
            check(end.get(tp).offset() == 0, "LSO held at the open transaction: " + end);
            root.abortTransaction(new AbortTransactionSpec(tp, state.producerId(), (short) state.producerEpoch(),
                state.coordinatorEpoch().orElse(0))).all().get();
            end = root.listOffsets(Map.of(tp, OffsetSpec.latest()), new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get();
            check(end.get(tp).offset() == 2, "LSO after the abort marker: " + end);
            System.out.println("TXN pid=" + state.producerId() + " epoch=" + state.producerEpoch()
                + " coordinatorEpoch=" + state.coordinatorEpoch());
            hanging.close(Duration.ofSeconds(5));
        }
        System.out.println("OK abort-transaction");
    }
}
