import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.*;

/**
 * The Kafka 4.1+ Admin calls on cluster membership and config resources: listConfigResources
 * (ListConfigResources v1), unregisterBroker, addRaftVoter and removeRaftVoter, against a one-node
 * cluster with a static quorum.  Arguments: bootstrap, a topic that exists.  Prints "OK <step>";
 * a failed check throws.  Needs kafka-clients 4.1 or newer.
 */
public class Kafka42Membership {
    static void check(boolean ok, String what) {
        if (!ok) throw new IllegalStateException("check failed: " + what);
    }

    static Throwable cause(KafkaFuture<?> f) throws InterruptedException {
        try { f.get(); return null; } catch (ExecutionException e) { return e.getCause(); }
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        String topic = args[1];
        try (Admin admin = Admin.create(p)) {
            String node = String.valueOf(admin.describeCluster().nodes().get().iterator().next().id());
            Collection<ConfigResource> all = admin.listConfigResources().all().get();
            check(all.contains(new ConfigResource(ConfigResource.Type.BROKER, node)), "broker listed: " + all);
            check(all.contains(new ConfigResource(ConfigResource.Type.BROKER_LOGGER, node)), "broker logger listed: " + all);
            check(all.contains(new ConfigResource(ConfigResource.Type.TOPIC, topic)), "topic listed: " + all);
            Collection<ConfigResource> topics = admin.listConfigResources(Set.of(ConfigResource.Type.TOPIC),
                new ListConfigResourcesOptions()).all().get();
            for (ConfigResource r : topics) check(r.type() == ConfigResource.Type.TOPIC, "only topics: " + topics);
            System.out.println("OK list-config-resources");

            Throwable t = cause(admin.unregisterBroker(7).all());
            check(t instanceof BrokerIdNotRegisteredException, "unregister 7: " + t);
            System.out.println("OK unregister-unknown");

            Uuid dir = Uuid.randomUuid();
            t = cause(admin.addRaftVoter(2, dir, Set.of(new RaftVoterEndpoint("CONTROLLER", "localhost", 9999))).all());
            check(t instanceof UnsupportedVersionException
                && t.getMessage().contains("Cluster doesn't support adding voter because the kraft.version feature is 0"),
                "add voter: " + t);
            t = cause(admin.removeRaftVoter(Integer.parseInt(node), dir).all());
            check(t instanceof UnsupportedVersionException
                && t.getMessage().contains("Cluster doesn't support removing voter because the kraft.version feature is 0"),
                "remove voter: " + t);
            System.out.println("OK raft-voters");
        }
    }
}
