#!/usr/bin/env bash
# confluent-kafka-python's own tests/integration (admin, consumer, producer, serialization) against
# minikafka and Apache Kafka 4.2, with the settings of its trivup cluster (trivup KafkaBrokerApp:
# num.partitions=3, auto topic creation, ACL authorizer; tests/common broker_conf()), plus
# allow.everyone.if.no.acl.found=true so the ANONYMOUS principal of a plaintext listener may act.
# Schema registry: minikafka's (schema.registry.listeners), used by both runs.
# Usage: bench/suites/confluent_kafka_python.sh CKP_REPO VENV RUN_DIR [test dirs...]
set -u
CK=$1; CKV=$2; RUN=$3; shift 3
DIRS=${*:-tests/integration/admin tests/integration/consumer tests/integration/producer tests/integration/serialization}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$HERE/bench/suites/brokers.py" start "$RUN" --node-id 1 --schema-registry \
  --override num.partitions=3 --override auto.create.topics.enable=true \
  --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
  --override allow.everyone.if.no.acl.found=true \
  --override group.share.record.lock.duration.ms=1000 \
  --override group.share.min.record.lock.duration.ms=1000 || exit 1
. "$RUN/ports.env"
for side in mk:$MK_PORT kafka:$KAFKA_PORT; do
  name=${side%%:*}; port=${side#*:}
  (cd "$CK" && BROKERS=127.0.0.1:$port SR_URL=http://127.0.0.1:$SR_PORT timeout 1500 "$CKV/bin/python" -m pytest \
     $DIRS -k "not describe_operations" --timeout=180 -q -rA -p no:cacheprovider \
     > "$RUN/ckp-$name.txt" 2>&1) &
done
wait
for name in mk kafka; do echo "$name: $(tail -1 "$RUN/ckp-$name.txt")"; done
python3 "$HERE/bench/suites/brokers.py" stop "$RUN"
