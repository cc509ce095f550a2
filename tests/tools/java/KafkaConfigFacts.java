// Prints Apache Kafka's broker and group config definitions as JSON lines: name, type, default,
// validator, dynamic update mode and whether the key is internal (not described by Kafka).
// Run by tests/tools/kafka_config_facts.py against the jars of tests/kafka/target/libs.
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;

public class KafkaConfigFacts {
    static String json(Object o) {
        if (o == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : o.toString().toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static void print(String kind, ConfigDef def, Map<String, String> modes) {
        for (ConfigDef.ConfigKey key : def.configKeys().values()) {
            String dflt = key.defaultValue == ConfigDef.NO_DEFAULT_VALUE ? null
                : ConfigDef.convertToString(key.defaultValue, key.type);
            boolean noDefault = key.defaultValue == ConfigDef.NO_DEFAULT_VALUE;
            System.out.println("{\"kind\":" + json(kind) + ",\"name\":" + json(key.name)
                + ",\"type\":" + json(key.type) + ",\"default\":" + json(dflt)
                + ",\"no_default\":" + noDefault
                + ",\"validator\":" + json(key.validator)
                + ",\"validator_class\":" + json(key.validator == null ? null : key.validator.getClass().getSimpleName())
                + ",\"mode\":" + json(modes == null ? null : modes.getOrDefault(key.name, "read-only"))
                + ",\"internal\":" + key.internalConfig + "}");
        }
    }

    public static void main(String[] args) {
        print("broker", kafka.server.KafkaConfig$.MODULE$.configDef(),
              kafka.server.DynamicBrokerConfig$.MODULE$.dynamicConfigUpdateModes());
        print("group", org.apache.kafka.coordinator.group.GroupConfig.configDef(), null);
    }
}
